//! CEL device selectors (`DeviceClass` and request `selectors`), compiled
//! once and evaluated against one device at a time, in the environment
//! Kubernetes gives them: a `device` with `driver`, `attributes` and
//! `capacity` (maps by domain, then name), and `allowMultipleAllocations`;
//! `quantity(...)` and `semver(...)` values with `compareTo`,
//! `isGreaterThan`, `isLessThan` (and, for quantities, `isInteger`,
//! `asInteger`, `asApproximateFloat`, `sign`, `add`, `sub`; for versions
//! `major`, `minor`, `patch`).
//!
//! Tenant expressions are bounded before they are accepted: their length
//! (`limits::MAX_CEL_LENGTH`), the parser's nesting depth, and an estimated
//! cost (`estimated_cost`): every node of the expression counted once, and
//! the body of every comprehension once per element it may visit (the
//! longest list or map a device can hold, or a literal list's length),
//! nested comprehensions multiplying. An expression over
//! `limits::MAX_CEL_COST` is refused at admission, as the API server refuses
//! one over its cost limit, so evaluation on the scheduling path is bounded.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

use cel::common::ast::{EntryExpr, Expr, IdedExpr};
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, Env, ExecutionError, Program, Value};

use super::cel_check::{Env as CheckEnv, check};
use super::limits;
use super::model::{Attr, Device};
use crate::model::Quantity;

/// A compiled selector.
#[derive(Clone)]
pub struct Selector {
    /// Also the key of its verdicts in `Inventory`'s memo: claims made from
    /// one template compile the same source, and share them.
    source: Arc<str>,
    program: Arc<Program>,
}

impl std::fmt::Debug for Selector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Selector").field(&self.source).finish()
    }
}

impl PartialEq for Selector {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

fn env() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(super::cel_libs::env())).clone()
}

impl Selector {
    /// Compiles `source`, refusing what is empty, too long, nested too deep,
    /// references a variable other than `device` (and those the expression
    /// declares itself: comprehension variables, `cel.bind` names), or costs
    /// too much. The simulated API server's admission uses the same check.
    pub fn compile(source: &str) -> Result<Self, String> {
        compiled(source, Self::compile_uncached)
    }

    /// `compile`, in the stricter environment the API server admits new
    /// objects with (`cel_check::Env::New`).
    pub fn compile_new(source: &str) -> Result<Self, String> {
        let selector = Self::compile(source)?;
        check(selector.program.expression(), CheckEnv::New)
            .map_err(|e| format!("compilation failed: {e}"))?;
        Ok(selector)
    }

    fn compile_uncached(source: &str) -> Result<Self, String> {
        if source.trim().is_empty() {
            return Err("expression must not be empty".into());
        }
        if source.len() > limits::MAX_CEL_LENGTH {
            return Err(format!(
                "the expression is {} bytes long; at most {} are allowed",
                source.len(),
                limits::MAX_CEL_LENGTH
            ));
        }
        if nesting(source) > MAX_NESTING {
            return Err(format!(
                "compilation failed: expression nested more than {MAX_NESTING} levels deep"
            ));
        }
        // The parser is third-party code fed tenant input: a panic in it is
        // a refusal of the expression, not the end of the process.
        let env = env();
        let program =
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| env.compile(source))) {
                Ok(Ok(p)) => p,
                Ok(Err(e)) => return Err(format!("compilation failed: {e}")),
                Err(_) => return Err("compilation failed: the expression cannot be parsed".into()),
            };
        let mut declared = vec![DEVICE.to_string()];
        declared.extend(["cel", "sets", "lists", "strings", "ip"].map(String::from));
        declared_names(program.expression(), &mut declared);
        let references = program.references();
        let mut undeclared: Vec<&str> = references
            .variables()
            .into_iter()
            .filter(|v| !declared.iter().any(|d| d == v))
            .collect();
        undeclared.sort_unstable();
        if let Some(v) = undeclared.first() {
            return Err(format!("compilation failed: undeclared reference to '{v}'"));
        }
        // Types, as upstream checks them when it compiles the expression.
        check(program.expression(), CheckEnv::Stored)
            .map_err(|e| format!("compilation failed: {e}"))?;
        let cost = estimated_cost(program.expression());
        if cost > limits::MAX_CEL_COST {
            return Err(format!(
                "the expression's estimated cost {cost} exceeds the limit of {}",
                limits::MAX_CEL_COST
            ));
        }
        Ok(Selector {
            source: Arc::from(source),
            program: Arc::new(program),
        })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// The source, shared (the key of the selector's verdicts).
    pub fn key(&self) -> &Arc<str> {
        &self.source
    }
}

/// How many compiled expressions `compiled` keeps.
const MAX_COMPILED: usize = 1024;

/// A memo of `compile`, a pure function of the source: every claim made
/// from one template carries the same selectors, and parsing each again
/// (the informer decoding it, the API server admitting it) costs more than
/// the allocation. Bounded; emptied when full.
fn compiled(
    source: &str,
    compile: impl FnOnce(&str) -> Result<Selector, String>,
) -> Result<Selector, String> {
    type Memo = std::sync::Mutex<HashMap<Arc<str>, Result<Selector, String>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(Default::default);
    let lock = || {
        memo.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    if let Some(known) = lock().get(source) {
        return known.clone();
    }
    let result = compile(source);
    let mut memo = lock();
    if memo.len() >= MAX_COMPILED {
        memo.clear();
    }
    memo.insert(Arc::from(source), result.clone());
    result
}

/// Brackets nested deeper than this are refused before parsing: the parser
/// recurses per level, and the stack is not the place to find its limit.
const MAX_NESTING: usize = 64;

/// The one variable a device selector sees.
const DEVICE: &str = "device";

/// How deep round, square and curly brackets nest outside string literals.
fn nesting(expr: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in expr.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Names the expression itself declares: comprehension variables (the
/// `all`, `exists`, `map`, `filter` macros) and `cel.bind` names.
fn declared_names(e: &IdedExpr, out: &mut Vec<String>) {
    match &e.expr {
        Expr::Call(call) => {
            if call.func_name == "bind"
                && let Some(Expr::Ident(name)) = call.args.first().map(|a| &a.expr)
            {
                out.push(name.clone());
            }
            if let Some(t) = &call.target {
                declared_names(t, out);
            }
            call.args.iter().for_each(|a| declared_names(a, out));
        }
        Expr::Comprehension(c) => {
            out.push(c.iter_var.clone());
            out.extend(c.iter_var2.clone());
            out.push(c.accu_var.clone());
            for part in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                declared_names(part, out);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| declared_names(x, out)),
        Expr::Map(m) => m
            .entries
            .iter()
            .flat_map(entry)
            .for_each(|x| declared_names(x, out)),
        Expr::Struct(s) => s
            .entries
            .iter()
            .flat_map(entry)
            .for_each(|x| declared_names(x, out)),
        Expr::Select(s) => declared_names(&s.operand, out),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

/// The estimated evaluation cost of an expression (see the module doc).
pub fn estimated_cost(e: &IdedExpr) -> u64 {
    let children = |es: &mut dyn Iterator<Item = &IdedExpr>| {
        es.map(estimated_cost).fold(0u64, u64::saturating_add)
    };
    let own = match &e.expr {
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => 0,
        Expr::Call(c) => children(&mut c.target.iter().map(|t| &**t).chain(c.args.iter())),
        Expr::List(l) => children(&mut l.elements.iter()),
        Expr::Select(s) => estimated_cost(&s.operand),
        Expr::Map(m) => children(&mut m.entries.iter().flat_map(entry)),
        Expr::Struct(s) => children(&mut s.entries.iter().flat_map(entry)),
        Expr::Comprehension(c) => {
            let range = match &c.iter_range.expr {
                Expr::List(l) => (l.elements.len() as u64).max(1),
                _ => limits::MAX_COLLECTION as u64,
            };
            let body = children(&mut [&c.loop_cond, &c.loop_step].into_iter());
            children(&mut [&c.iter_range, &c.accu_init, &c.result].into_iter())
                .saturating_add(range.saturating_mul(body.max(1)))
        }
    };
    own.saturating_add(1)
}

fn entry(e: &cel::common::ast::IdedEntryExpr) -> Vec<&IdedExpr> {
    match &e.expr {
        EntryExpr::StructField(f) => vec![&f.value],
        EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
    }
}

/// A device as a selector sees it.
pub fn device_value(driver: &str, device: &Device) -> Value {
    let mut attributes: BTreeMap<String, HashMap<String, Value>> = BTreeMap::new();
    for (name, attr) in &device.attributes {
        let (domain, id) = name.split();
        attributes
            .entry(domain.to_string())
            .or_default()
            .insert(id.to_string(), attr_value(attr));
    }
    let mut capacity: BTreeMap<String, HashMap<String, Value>> = BTreeMap::new();
    for (name, c) in &device.capacity {
        let (domain, id) = name.split();
        capacity.entry(domain.to_string()).or_default().insert(
            id.to_string(),
            Value::Opaque(Arc::new(CelQuantity(c.value))),
        );
    }
    let nested = |m: BTreeMap<String, HashMap<String, Value>>| -> Value {
        let outer: HashMap<String, Value> =
            m.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
        Value::from(outer)
    };
    let mut d: HashMap<String, Value> = HashMap::new();
    d.insert("driver".into(), Value::from(driver.to_string()));
    d.insert("attributes".into(), nested(attributes));
    d.insert("capacity".into(), nested(capacity));
    d.insert(
        "allowMultipleAllocations".into(),
        Value::Bool(device.shared),
    );
    Value::from(d)
}

fn attr_value(a: &Attr) -> Value {
    let version = |v: &semver::Version| Value::Opaque(Arc::new(CelVersion(v.clone())));
    match a {
        Attr::Bool(b) => Value::Bool(*b),
        Attr::Int(i) => Value::Int(*i),
        Attr::Str(s) => Value::from(s.to_string()),
        Attr::Version(v) => version(v),
        Attr::Bools(b) => Value::List(Arc::new(b.iter().map(|b| Value::Bool(*b)).collect())),
        Attr::Ints(i) => Value::List(Arc::new(i.iter().map(|i| Value::Int(*i)).collect())),
        Attr::Strs(s) => Value::List(Arc::new(
            s.iter().map(|s| Value::from(s.to_string())).collect(),
        )),
        Attr::Versions(v) => Value::List(Arc::new(v.iter().map(version).collect())),
    }
}

/// A quantity in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelQuantity(Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Quantity"
    }
}

/// A semantic version in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelVersion(semver::Version);

impl Opaque for CelVersion {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.Semver"
    }
}

fn fail(function: &str, msg: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, msg)
}

fn as_quantity(function: &str, v: &Arc<dyn Opaque>) -> Result<Quantity, ExecutionError> {
    v.downcast_ref::<CelQuantity>().map(|q| q.0).ok_or_else(|| {
        fail(
            function,
            format!("{} is not a quantity", v.runtime_type_name()),
        )
    })
}

/// -1, 0 or 1 for two quantities or two versions.
fn compare(
    function: &str,
    a: &Arc<dyn Opaque>,
    b: &Arc<dyn Opaque>,
) -> Result<i64, ExecutionError> {
    let ord = match (
        a.downcast_ref::<CelQuantity>(),
        b.downcast_ref::<CelQuantity>(),
    ) {
        (Some(x), Some(y)) => x.0.cmp(&y.0),
        _ => match (
            a.downcast_ref::<CelVersion>(),
            b.downcast_ref::<CelVersion>(),
        ) {
            (Some(x), Some(y)) => x.0.cmp(&y.0),
            _ => {
                return Err(fail(
                    function,
                    format!(
                        "cannot compare {} with {}",
                        a.runtime_type_name(),
                        b.runtime_type_name()
                    ),
                ));
            }
        },
    };
    Ok(ord as i64)
}

/// A root context with the Kubernetes functions, evaluated against one
/// device at a time in an inner scope.
pub struct Evaluator {
    root: Context<'static, 'static>,
}

impl Default for Evaluator {
    fn default() -> Self {
        Self::new()
    }
}

impl Evaluator {
    pub fn new() -> Self {
        let mut root = Context::with_env(env());
        let add = |r: Result<(), cel::DeclarationError>| {
            // A name the standard library already declares would be a
            // programming error here; the selector then fails to evaluate
            // with "undeclared", never silently.
            debug_assert!(r.is_ok(), "{r:?}");
        };
        add(root.add_function(
            "quantity",
            |s: Arc<String>| -> Result<Value, ExecutionError> {
                Quantity::parse(&s)
                    .map(|q| Value::Opaque(Arc::new(CelQuantity(q))))
                    .map_err(|e| fail("quantity", e))
            },
        ));
        add(root.add_function(
            "semver",
            |s: Arc<String>| -> Result<Value, ExecutionError> {
                semver::Version::parse(&s)
                    .map(|v| Value::Opaque(Arc::new(CelVersion(v))))
                    .map_err(|e| fail("semver", e))
            },
        ));
        add(root.add_function(
            "compareTo",
            |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| compare("compareTo", &a, &b),
        ));
        add(root.add_function(
            "isGreaterThan",
            |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
                compare("isGreaterThan", &a, &b).map(|o| o > 0)
            },
        ));
        add(root.add_function(
            "isLessThan",
            |This(a): This<Arc<dyn Opaque>>, b: Arc<dyn Opaque>| {
                compare("isLessThan", &a, &b).map(|o| o < 0)
            },
        ));
        add(
            root.add_function("isInteger", |This(a): This<Arc<dyn Opaque>>| {
                as_quantity("isInteger", &a).map(|q| q.is_integer())
            }),
        );
        add(
            root.add_function("asInteger", |This(a): This<Arc<dyn Opaque>>| {
                let q = as_quantity("asInteger", &a)?;
                match q.is_integer() {
                    true => Ok(q.value()),
                    false => Err(fail("asInteger", "the quantity is not an integer")),
                }
            }),
        );
        add(
            root.add_function("asApproximateFloat", |This(a): This<Arc<dyn Opaque>>| {
                as_quantity("asApproximateFloat", &a).map(Quantity::approximate_float)
            }),
        );
        add(root.add_function("sign", |This(a): This<Arc<dyn Opaque>>| {
            as_quantity("sign", &a).map(Quantity::sign)
        }));
        type Arith = fn(Quantity, Quantity) -> Option<Quantity>;
        for (name, op) in [
            ("add", Quantity::checked_add as Arith),
            ("sub", Quantity::checked_sub),
        ] {
            add(root.add_function(
                name,
                move |This(a): This<Arc<dyn Opaque>>,
                      b: Arc<dyn Opaque>|
                      -> Result<Value, ExecutionError> {
                    let (x, y) = (as_quantity(name, &a)?, as_quantity(name, &b)?);
                    op(x, y)
                        .map(|q| Value::Opaque(Arc::new(CelQuantity(q))))
                        .ok_or_else(|| fail(name, "overflow"))
                },
            ));
        }
        for (name, part) in [("major", 0usize), ("minor", 1), ("patch", 2)] {
            add(
                root.add_function(name, move |This(a): This<Arc<dyn Opaque>>| {
                    let v = a
                        .downcast_ref::<CelVersion>()
                        .ok_or_else(|| fail("version", "not a semver"))?;
                    let n = [v.0.major, v.0.minor, v.0.patch][part];
                    i64::try_from(n).map_err(|_| fail("version", "too large"))
                }),
            );
        }
        super::cel_libs::register(&mut root);
        Evaluator { root }
    }

    /// Whether the device passes the selector; an evaluation error (a
    /// missing attribute, a type mismatch) is returned, not taken as a
    /// "no", as the allocator reports it.
    pub fn matches(&self, selector: &Selector, device: &Value) -> Result<bool, String> {
        let mut scope = self.root.new_inner_scope();
        scope.add_variable_from_value("device", device.clone());
        match selector.program.execute(&scope) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!(
                "selector {:?} evaluated to {other:?}, not a bool",
                selector.source
            )),
            Err(e) => Err(format!("selector {:?}: {e}", selector.source)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_compiled_once_and_its_refusal_kept() {
        let source = "device.attributes['memo.example.com'].model == 'a'";
        let (a, b) = (Selector::compile(source), Selector::compile(source));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(Arc::ptr_eq(&a.program, &b.program));
        let bad = "device.attributes[";
        assert_eq!(Selector::compile(bad).err(), Selector::compile(bad).err());
        assert!(Selector::compile(bad).is_err());
    }
}
