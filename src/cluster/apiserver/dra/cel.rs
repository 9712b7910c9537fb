//! Admission's compile step for the CEL device selectors of
//! `resource.k8s.io` (`selectors[].cel.expression` in claims, claim
//! templates and device classes), with the scheduler's own compiler
//! (`muster_core::dra::cel::Selector::compile_new`, the stricter
//! environment the API server admits new objects with): the expression must
//! parse, stay within the length, nesting and cost limits, reference no
//! variable but `device` (and those its own macros declare), and type-check
//! as upstream's does (`bool` result, fields of `device` that exist,
//! functions called with their overloads). Evaluation against devices is
//! the scheduler's business, not the API server's.

/// The longest expression accepted, in bytes (upstream's 10 Ki limit).
pub const MAX_EXPRESSION_BYTES: usize = muster_core::dra::limits::MAX_CEL_LENGTH;

/// Why `expr` does not compile, if it does not.
pub fn compile_error(expr: &str) -> Option<String> {
    muster_core::dra::cel::Selector::compile_new(expr).err()
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
        assert_eq!(compile_error(r#"device.driver == "((((""#), None);
        let costly = "device.attributes.all(a, device.attributes.all(b, \
                      device.attributes.all(c, device.attributes.all(d, a == b || c == d))))";
        assert!(compile_error(costly).unwrap().contains("estimated cost"));
    }
}
