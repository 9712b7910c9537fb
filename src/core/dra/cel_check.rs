//! Type checking of CEL device selectors, as the API server and
//! kube-scheduler check them before they are evaluated: every name is
//! declared, every field of `device` exists, every function is called with
//! an overload the Kubernetes DRA environment declares, list and map
//! literals are homogeneous, and the result is a `bool` (or an attribute
//! value, which is checked when evaluated).
//!
//! The types are those the environment gives a selector: `device` with
//! `driver`, `attributes` (domain → name → any value), `capacity` (domain →
//! name → quantity) and `allowMultipleAllocations`; the standard library;
//! the Kubernetes libraries (quantity, semver, IP and CIDR, URL, regex,
//! lists, sets, strings up to version 2, lists up to version 3, `cel.bind`).
//! A value of unknown type (an attribute, a `dyn`) matches any overload, as
//! in cel-go; such a call is decided when evaluated.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

/// A selector's static type.
#[derive(Debug, Clone, PartialEq)]
pub enum Ty {
    /// An attribute value: any of its kinds.
    Any,
    /// Unknown until evaluated.
    Dyn,
    Bool,
    Int,
    Uint,
    Double,
    Str,
    Bytes,
    Null,
    List(Box<Ty>),
    Map(Box<Ty>, Box<Ty>),
    Quantity,
    Semver,
    Ip,
    Cidr,
    Url,
    Device,
    Type,
}

impl Ty {
    fn name(&self) -> String {
        match self {
            Ty::Any => "any".into(),
            Ty::Dyn => "dyn".into(),
            Ty::Bool => "bool".into(),
            Ty::Int => "int".into(),
            Ty::Uint => "uint".into(),
            Ty::Double => "double".into(),
            Ty::Str => "string".into(),
            Ty::Bytes => "bytes".into(),
            Ty::Null => "null_type".into(),
            Ty::List(e) => format!("list({})", e.name()),
            Ty::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            Ty::Quantity => "kubernetes.Quantity".into(),
            Ty::Semver => "kubernetes.Semver".into(),
            Ty::Ip => "net.IP".into(),
            Ty::Cidr => "net.CIDR".into(),
            Ty::Url => "kubernetes.URL".into(),
            Ty::Device => "kubernetes.DRADevice".into(),
            Ty::Type => "type".into(),
        }
    }

    fn unknown(&self) -> bool {
        matches!(self, Ty::Any | Ty::Dyn)
    }

    fn numeric(&self) -> bool {
        matches!(self, Ty::Int | Ty::Uint | Ty::Double)
    }

    fn list(e: Ty) -> Ty {
        Ty::List(Box::new(e))
    }
}

/// Whether a value of type `a` may be where `b` is wanted (or the other way
/// round): equal, or unknown on either side, element by element.
fn fits(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        _ if a.unknown() || b.unknown() => true,
        (Ty::List(x), Ty::List(y)) => fits(x, y),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => fits(k1, k2) && fits(v1, v2),
        _ => a == b,
    }
}

/// The more precise of two types that fit each other.
fn join(a: &Ty, b: &Ty) -> Ty {
    match (a, b) {
        (Ty::Dyn, _) | (Ty::Any, Ty::Any) => b.clone(),
        (Ty::Any, other) if !other.unknown() => other.clone(),
        (_, Ty::Dyn | Ty::Any) => a.clone(),
        (Ty::List(x), Ty::List(y)) => Ty::list(join(x, y)),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => {
            Ty::Map(Box::new(join(k1, k2)), Box::new(join(v1, v2)))
        }
        _ => a.clone(),
    }
}

/// Which environment: the one kube-scheduler evaluates stored objects in,
/// or the stricter one the API server admits new objects with (the
/// libraries of the previous release only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Env {
    Stored,
    New,
}

/// Checks `e` as a whole selector: its type must be `bool` or an attribute
/// value.
pub fn check(e: &IdedExpr, env: Env) -> Result<(), String> {
    let mut c = Checker {
        env,
        scopes: Vec::new(),
    };
    match c.ty(e)? {
        Ty::Bool | Ty::Any => Ok(()),
        other => Err(format!(
            "must evaluate to bool or the unknown type, not {}",
            other.name()
        )),
    }
}

struct Checker {
    env: Env,
    /// Names the expression declares (comprehension variables, `cel.bind`)
    /// with their types, innermost last.
    scopes: Vec<(String, Ty)>,
}

/// The attribute and capacity maps of `device`.
fn attributes() -> Ty {
    Ty::Map(
        Box::new(Ty::Str),
        Box::new(Ty::Map(Box::new(Ty::Str), Box::new(Ty::Any))),
    )
}

fn capacity() -> Ty {
    Ty::Map(
        Box::new(Ty::Str),
        Box::new(Ty::Map(Box::new(Ty::Str), Box::new(Ty::Quantity))),
    )
}

/// Namespaces of qualified functions (`sets.contains`, `cel.bind`, ...).
const NAMESPACES: &[&str] = &["sets", "lists", "strings", "cel", "ip"];

fn no_overload(name: &str, args: &[Ty]) -> String {
    let names: Vec<String> = args.iter().map(Ty::name).collect();
    format!(
        "found no matching overload for '{name}' applied to '({})'",
        names.join(", ")
    )
}

impl Checker {
    fn ty(&mut self, e: &IdedExpr) -> Result<Ty, String> {
        match &e.expr {
            Expr::Unspecified => Err("an empty expression".into()),
            Expr::Literal(l) => Ok(match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::Str,
                LiteralValue::UInt(_) => Ty::Uint,
            }),
            Expr::Ident(name) => self.ident(name),
            Expr::Select(s) => {
                let operand = self.ty(&s.operand)?;
                let field = self.field(&operand, &s.field)?;
                Ok(if s.test { Ty::Bool } else { field })
            }
            Expr::List(l) => self.list(&l.elements),
            Expr::Map(m) => {
                let (mut k, mut v) = (Ty::Dyn, Ty::Dyn);
                for entry in &m.entries {
                    let EntryExpr::MapEntry(me) = &entry.expr else {
                        return Err("a struct field in a map literal".into());
                    };
                    let (kt, vt) = (self.ty(&me.key)?, self.ty(&me.value)?);
                    if !fits(&kt, &k) || !fits(&vt, &v) {
                        return Err(format!(
                            "expected type 'map({}, {})' but found 'map({}, {})'",
                            k.name(),
                            v.name(),
                            kt.name(),
                            vt.name()
                        ));
                    }
                    (k, v) = (join(&k, &kt), join(&v, &vt));
                }
                Ok(Ty::Map(Box::new(k), Box::new(v)))
            }
            Expr::Struct(s) => Err(format!("undeclared reference to '{}'", s.type_name)),
            Expr::Comprehension(c) => {
                let range = self.ty(&c.iter_range)?;
                let (first, second) = match &range {
                    Ty::List(e) => match &c.iter_var2 {
                        None => ((**e).clone(), None),
                        Some(_) => (Ty::Int, Some((**e).clone())),
                    },
                    Ty::Map(k, v) => ((**k).clone(), Some((**v).clone())),
                    t if t.unknown() => (Ty::Dyn, Some(Ty::Dyn)),
                    other => {
                        return Err(format!(
                            "expression of type '{}' cannot be the range of a comprehension",
                            other.name()
                        ));
                    }
                };
                let init = self.ty(&c.accu_init)?;
                let depth = self.scopes.len();
                self.scopes.push((c.iter_var.clone(), first));
                if let (Some(v2), Some(t2)) = (&c.iter_var2, second) {
                    self.scopes.push((v2.clone(), t2));
                }
                self.scopes.push((c.accu_var.clone(), init.clone()));
                let cond = self.ty(&c.loop_cond)?;
                let step = self.ty(&c.loop_step)?;
                self.scopes.truncate(depth);
                if !fits(&cond, &Ty::Bool) {
                    return Err(no_overload("_&&_", &[cond]));
                }
                if !fits(&step, &init) {
                    return Err(format!(
                        "expected type '{}' but found '{}'",
                        init.name(),
                        step.name()
                    ));
                }
                self.scopes.push((c.accu_var.clone(), join(&init, &step)));
                let result = self.ty(&c.result);
                self.scopes.truncate(depth);
                result
            }
            Expr::Call(call) => {
                // A qualified function: `sets.contains(..)`.
                if let Some(t) = &call.target
                    && let Expr::Ident(ns) = &t.expr
                    && NAMESPACES.contains(&ns.as_str())
                    && !self.scopes.iter().any(|(n, _)| n == ns)
                {
                    let args = self.list_of(&call.args)?;
                    return self.global(&format!("{ns}.{}", call.func_name), &args);
                }
                if call.func_name == "format" && call.target.is_some() {
                    // Its list may mix types (exempt from homogeneity).
                    let target = self.ty(call.target.as_deref().ok_or("no target")?)?;
                    let arg = match call.args.first().map(|a| &a.expr) {
                        Some(Expr::List(l)) => {
                            for x in &l.elements {
                                self.ty(x)?;
                            }
                            Ty::list(Ty::Dyn)
                        }
                        Some(_) => self.ty(&call.args[0])?,
                        None => return Err(no_overload("format", &[target])),
                    };
                    return self.member("format", &target, &[arg]);
                }
                let args = self.list_of(&call.args)?;
                match &call.target {
                    None => self.global(&call.func_name, &args),
                    Some(t) => {
                        let target = self.ty(t)?;
                        self.member(&call.func_name, &target, &args)
                    }
                }
            }
        }
    }

    fn list_of(&mut self, es: &[IdedExpr]) -> Result<Vec<Ty>, String> {
        es.iter().map(|a| self.ty(a)).collect()
    }

    fn list(&mut self, elements: &[IdedExpr]) -> Result<Ty, String> {
        let mut elem = Ty::Dyn;
        for x in elements {
            let t = self.ty(x)?;
            if !fits(&t, &elem) {
                return Err(format!(
                    "expected type '{}' but found '{}'",
                    elem.name(),
                    t.name()
                ));
            }
            elem = join(&elem, &t);
        }
        Ok(Ty::list(elem))
    }

    fn ident(&self, name: &str) -> Result<Ty, String> {
        if let Some((_, t)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Ok(t.clone());
        }
        match name {
            "device" => Ok(Ty::Device),
            "int" | "uint" | "double" | "string" | "bool" | "bytes" | "list" | "map"
            | "null_type" | "type" | "dyn" => Ok(Ty::Type),
            _ => Err(format!("undeclared reference to '{name}'")),
        }
    }

    fn field(&self, operand: &Ty, field: &str) -> Result<Ty, String> {
        match operand {
            Ty::Device => match field {
                "driver" => Ok(Ty::Str),
                "attributes" => Ok(attributes()),
                "capacity" => Ok(capacity()),
                "allowMultipleAllocations" => Ok(Ty::Bool),
                _ => Err(format!("undefined field '{field}'")),
            },
            Ty::Map(k, v) if fits(k, &Ty::Str) => Ok((**v).clone()),
            t if t.unknown() => Ok(Ty::Dyn),
            other => Err(format!(
                "type '{}' does not support field selection",
                other.name()
            )),
        }
    }

    /// A global function or operator.
    fn global(&self, name: &str, args: &[Ty]) -> Result<Ty, String> {
        use Ty::*;
        let fail = || Err(no_overload(name, args));
        let all = |want: &[Ty]| {
            args.len() == want.len() && args.iter().zip(want).all(|(a, w)| fits(a, w))
        };
        let result = match (name, args) {
            ("_&&_" | "_||_", [a, b]) if fits(a, &Bool) && fits(b, &Bool) => Bool,
            ("!_" | "@not_strictly_false", [a]) if fits(a, &Bool) => Bool,
            ("-_", [a]) if a.unknown() || matches!(a, Int | Double) => a.clone(),
            ("_?_:_", [c, a, b]) if fits(c, &Bool) && fits(a, b) => join(a, b),
            ("_==_" | "_!=_", [a, b]) if fits(a, b) || (a == &Null || b == &Null) => Bool,
            ("_<_" | "_<=_" | "_>_" | "_>=_", [a, b])
                if (a.numeric() || a.unknown()) && (b.numeric() || b.unknown())
                    || (fits(a, b) && matches!(a, Str | Bytes | Bool | Dyn | Any)) =>
            {
                Bool
            }
            ("_+_", [a, b])
                if fits(a, b)
                    && (a.unknown()
                        || b.unknown()
                        || matches!(a, Int | Uint | Double | Str | Bytes | List(_))) =>
            {
                join(a, b)
            }
            ("_-_" | "_*_" | "_/_", [a, b])
                if fits(a, b) && (a.unknown() || b.unknown() || a.numeric()) =>
            {
                join(a, b)
            }
            ("_%_", [a, b])
                if fits(a, b) && (a.unknown() || b.unknown() || matches!(a, Int | Uint)) =>
            {
                join(a, b)
            }
            ("_[_]", [List(e), i]) if fits(i, &Int) => (**e).clone(),
            ("_[_]", [Map(k, v), key]) if fits(key, k) => (**v).clone(),
            ("_[_]", [c, _]) if c.unknown() => Dyn,
            ("@in", [a, List(e)]) if fits(a, e) => Bool,
            ("@in", [a, Map(k, _)]) if fits(a, k) => Bool,
            ("@in", [_, c]) if c.unknown() => Bool,
            ("size", [a]) if a.unknown() || matches!(a, Str | Bytes | List(_) | Map(..)) => Int,
            ("matches", _) if all(&[Str, Str]) => Bool,
            ("int", [a]) if a.unknown() || matches!(a, Int | Uint | Double | Str) => Int,
            ("uint", [a]) if a.unknown() || matches!(a, Int | Uint | Double | Str) => Uint,
            ("double", [a]) if a.unknown() || matches!(a, Int | Uint | Double | Str) => Double,
            ("string", [a])
                if a.unknown()
                    || matches!(a, Int | Uint | Double | Str | Bytes | Bool | Ip | Cidr) =>
            {
                Str
            }
            ("bool", [a]) if a.unknown() || matches!(a, Bool | Str) => Bool,
            ("bytes", [a]) if a.unknown() || matches!(a, Bytes | Str) => Bytes,
            ("dyn", [_]) => Dyn,
            ("type", [_]) => Type,
            ("quantity", _) if all(&[Str]) => Quantity,
            ("isQuantity", _) if all(&[Str]) => Bool,
            ("sign", _) if all(&[Quantity]) => Int,
            ("semver", _) if all(&[Str]) || all(&[Str, Bool]) => Semver,
            ("isSemver", _) if all(&[Str]) || all(&[Str, Bool]) => Bool,
            ("ip", _) if all(&[Str]) => Ip,
            ("isIP" | "ip.isCanonical", _) if all(&[Str]) => Bool,
            ("cidr", _) if all(&[Str]) => Cidr,
            ("isCIDR", _) if all(&[Str]) => Bool,
            ("url", _) if all(&[Str]) => Url,
            ("isURL", _) if all(&[Str]) => Bool,
            ("sets.contains" | "sets.intersects" | "sets.equivalent", [a, b])
                if fits(a, &List(Box::new(Dyn))) && fits(a, b) =>
            {
                Bool
            }
            ("lists.range", _) if all(&[Int]) => List(Box::new(Int)),
            ("strings.quote", _) if all(&[Str]) => Str,
            _ => return fail(),
        };
        Ok(result)
    }

    /// A member function `target.name(args)`.
    fn member(&self, name: &str, target: &Ty, args: &[Ty]) -> Result<Ty, String> {
        use Ty::*;
        let mut all_args = vec![target.clone()];
        all_args.extend(args.iter().cloned());
        let fail = || Err(no_overload(name, &all_args));
        let on = |want: &Ty, params: &[Ty]| {
            fits(target, want)
                && args.len() == params.len()
                && args.iter().zip(params).all(|(a, p)| fits(a, p))
        };
        let elem = match target {
            List(e) => (**e).clone(),
            _ => Dyn,
        };
        let any_list = List(Box::new(Dyn));
        let result = match name {
            // The standard library.
            "size" if on(&Str, &[]) || on(&Bytes, &[]) || on(&any_list, &[]) => Int,
            "size" if matches!(target, Map(..)) && args.is_empty() => Int,
            "contains" | "startsWith" | "endsWith" | "matches" if on(&Str, &[Str]) => Bool,
            // Strings, version 2.
            "charAt" if on(&Str, &[Int]) => Str,
            "indexOf" | "lastIndexOf" if on(&Str, &[Str]) || on(&Str, &[Str, Int]) => Int,
            "lowerAscii" | "upperAscii" | "trim" if on(&Str, &[]) => Str,
            "replace" if on(&Str, &[Str, Str]) || on(&Str, &[Str, Str, Int]) => Str,
            "split" if on(&Str, &[Str]) || on(&Str, &[Str, Int]) => List(Box::new(Str)),
            "substring" if on(&Str, &[Int]) || on(&Str, &[Int, Int]) => Str,
            "join" if on(&List(Box::new(Str)), &[]) || on(&List(Box::new(Str)), &[Str]) => Str,
            "format" if on(&Str, std::slice::from_ref(&any_list)) => Str,
            // Regex.
            "find" if on(&Str, &[Str]) => Str,
            "findAll" if on(&Str, &[Str]) || on(&Str, &[Str, Int]) => List(Box::new(Str)),
            // Kubernetes lists, and lists version 3.
            "isSorted" if on(&any_list, &[]) => Bool,
            "sum" | "max" | "min" if on(&any_list, &[]) => elem,
            "indexOf" | "lastIndexOf" if on(&any_list, std::slice::from_ref(&elem)) => Int,
            "includes" if self.env == Env::Stored && args.len() == 1 => Bool,
            "slice" if on(&any_list, &[Int, Int]) => join(&any_list, target),
            "flatten" if on(&any_list, &[]) || on(&any_list, &[Int]) => List(Box::new(Dyn)),
            "distinct" | "reverse" | "sort" if on(&any_list, &[]) => join(&any_list, target),
            "@sortByAssociatedKeys" if on(&any_list, std::slice::from_ref(&any_list)) => {
                join(&any_list, target)
            }
            // Quantities and versions.
            "isGreaterThan" | "isLessThan" if on(&Quantity, &[Quantity]) => Bool,
            "isGreaterThan" | "isLessThan" if on(&Semver, &[Semver]) => Bool,
            "compareTo" if on(&Quantity, &[Quantity]) || on(&Semver, &[Semver]) => Int,
            "asApproximateFloat" if on(&Quantity, &[]) => Double,
            "asInteger" if on(&Quantity, &[]) => Int,
            "isInteger" if on(&Quantity, &[]) => Bool,
            "add" | "sub" if on(&Quantity, &[Quantity]) || on(&Quantity, &[Int]) => Quantity,
            "major" | "minor" | "patch" if on(&Semver, &[]) => Int,
            // IP, CIDR, URL.
            "family" if on(&Ip, &[]) => Int,
            "isUnspecified"
            | "isLoopback"
            | "isLinkLocalMulticast"
            | "isLinkLocalUnicast"
            | "isGlobalUnicast"
                if on(&Ip, &[]) =>
            {
                Bool
            }
            "containsIP" if on(&Cidr, &[Ip]) || on(&Cidr, &[Str]) => Bool,
            "containsCIDR" if on(&Cidr, &[Cidr]) || on(&Cidr, &[Str]) => Bool,
            "ip" if on(&Cidr, &[]) => Ip,
            "prefixLength" if on(&Cidr, &[]) => Int,
            "masked" if on(&Cidr, &[]) => Cidr,
            "getScheme" | "getHost" | "getHostname" | "getPort" | "getEscapedPath"
                if on(&Url, &[]) =>
            {
                Str
            }
            "getQuery" if on(&Url, &[]) => Map(Box::new(Str), Box::new(List(Box::new(Str)))),
            _ => return fail(),
        };
        Ok(result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(src: &str) -> Result<(), String> {
        let program = cel::Env::stdlib().compile(src).map_err(|e| e.to_string())?;
        check(program.expression(), Env::Stored)
    }

    #[test]
    fn types_are_checked_when_compiled() {
        for ok in [
            "device.driver == 'x'",
            "device.attributes['a.example.com'].model",
            "device.capacity['a'].memory.isGreaterThan(quantity('1Gi'))",
            "sign(quantity('1'))  == 1",
            "['a', 'b'].exists(x, x == device.driver)",
            "'%s-%d'.format(['a', 1]) == 'a-1'",
            "[1, 2, 3].indexOf(2) == 1",
            "'abc'.indexOf('b') == 1",
        ] {
            assert_eq!(checked(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("device.nosuch == 'x'", "undefined field 'nosuch'"),
            ("quantity(1)", "no matching overload for 'quantity'"),
            ("[1, 2].map(x, x * 2)", "not list(int)"),
            (
                "quantity('1').sign() == 1",
                "no matching overload for 'sign'",
            ),
            (
                "'abc'.reverse() == 'cba'",
                "no matching overload for 'reverse'",
            ),
            ("[1, 'a'].size() == 2", "expected type"),
            ("foo == 1", "undeclared reference to 'foo'"),
            ("1 == 1.0", "no matching overload for '_==_'"),
        ] {
            let err = checked(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
