//! Admission's compile step for the CEL device selectors of
//! `resource.k8s.io` (`selectors[].cel.expression` in claims, claim
//! templates and device classes): the expression must parse, stay within
//! the length and nesting limits, and reference no variable but `device`
//! (and those its own macros declare). Evaluation against devices is the
//! scheduler's business, not the API server's.

use cel::Program;
use cel::common::ast::{Expr, IdedExpr};

/// The longest expression accepted, in bytes (upstream's 10 Ki limit).
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;

/// Brackets nested deeper than this are refused before parsing: the parser
/// recurses per level, and a request thread's stack is not the place to
/// find its limit.
const MAX_NESTING: usize = 64;

/// The one variable a device selector sees.
const DEVICE: &str = "device";

/// Why `expr` does not compile, if it does not.
pub fn compile_error(expr: &str) -> Option<String> {
    if expr.trim().is_empty() {
        return Some("expression must not be empty".into());
    }
    if nesting(expr) > MAX_NESTING {
        return Some(format!(
            "compilation failed: expression nested more than {MAX_NESTING} levels deep"
        ));
    }
    // The parser is third-party code fed hostile input: a panic in it is a
    // refusal of the expression, not of the server.
    let parsed = std::panic::catch_unwind(|| Program::compile(expr));
    let program = match parsed {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => return Some(format!("compilation failed: {e}")),
        Err(_) => return Some("compilation failed: the expression cannot be parsed".into()),
    };
    let mut declared = vec![DEVICE.to_string(), "cel".to_string()];
    declared_names(program.expression(), &mut declared);
    let references = program.references();
    let mut undeclared: Vec<&str> = references
        .variables()
        .into_iter()
        .filter(|v| !declared.iter().any(|d| d == v))
        .collect();
    undeclared.sort_unstable();
    undeclared
        .first()
        .map(|v| format!("compilation failed: undeclared reference to '{v}'"))
}

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
        Expr::Map(m) => m.entries.iter().for_each(|x| declared_entry(x, out)),
        Expr::Struct(s) => s.entries.iter().for_each(|x| declared_entry(x, out)),
        Expr::Select(s) => declared_names(&s.operand, out),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

fn declared_entry(entry: &cel::common::ast::IdedEntryExpr, out: &mut Vec<String>) {
    use cel::common::ast::EntryExpr;
    match &entry.expr {
        EntryExpr::StructField(f) => declared_names(&f.value, out),
        EntryExpr::MapEntry(m) => {
            declared_names(&m.key, out);
            declared_names(&m.value, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_selectors_compile() {
        for ok in [
            r#"device.driver == "gpu.kwok.muster.dev""#,
            r#"device.attributes["gpu.kwok.muster.dev"].model == "h100" && device.capacity["gpu.kwok.muster.dev"].memory.compareTo(quantity("40Gi")) >= 0"#,
            r#"device.attributes["x"].exists(k, k == "a")"#,
            r#"cel.bind(dra, device.attributes["dra.example.com"], dra.a && dra.b)"#,
        ] {
            assert_eq!(compile_error(ok), None, "{ok}");
        }
    }

    #[test]
    fn syntax_errors_and_unknown_variables_are_refused() {
        let e = compile_error("device.driver ==").unwrap();
        assert!(e.starts_with("compilation failed"), "{e}");
        assert_eq!(
            compile_error("foo.bar == 1").as_deref(),
            Some("compilation failed: undeclared reference to 'foo'")
        );
        assert!(compile_error("  ").is_some());
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(compile_error(&deep).unwrap().contains("nested"));
        assert_eq!(nesting(r#"device.driver == "((((""#), 0);
    }
}
