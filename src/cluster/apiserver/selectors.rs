//! Label and field selectors: parsing the query-string syntax and matching
//! objects against it.
//!
//! Labels support every operator of the Kubernetes grammar (`=`, `==`, `!=`,
//! `in`, `notin`, `key`, `!key`, `>`, `<`). Fields support `=`, `==` and `!=`
//! on any dotted path of the object (a real server allows only a per-kind list).

/// A parsed label selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in split_top_level(s)? {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            reqs.push(parse_label_req(part)?);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `get` looks a label up by key.
    pub fn matches<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
            LabelReq::Gt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::Lt(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
        })
    }
}

/// Splits at commas that are not inside `( )`.
fn split_top_level(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced ')' in selector {s:?}"));
                }
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {s:?}"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_label_req(part: &str) -> Result<LabelReq, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(LabelReq::NotExists(valid_key(key.trim())?));
    }
    for (op, word) in [(" notin ", true), (" in ", false)] {
        if let Some((key, rest)) = part.split_once(op) {
            let values = parse_set(rest.trim())
                .ok_or_else(|| format!("expected a parenthesised value set in {part:?}"))?;
            let key = valid_key(key.trim())?;
            return Ok(if word {
                LabelReq::NotIn(key, values)
            } else {
                LabelReq::In(key, values)
            });
        }
    }
    // Longest operators first so "==" and "!=" are not read as "=".
    for op in ["==", "!=", "=", ">", "<"] {
        if let Some((key, value)) = part.split_once(op) {
            let key = valid_key(key.trim())?;
            let value = value.trim().to_string();
            let number = || {
                value
                    .parse::<i64>()
                    .map_err(|_| format!("{op} needs an integer value in {part:?}"))
            };
            return Ok(match op {
                "!=" => LabelReq::NotEq(key, value),
                ">" => LabelReq::Gt(key, number()?),
                "<" => LabelReq::Lt(key, number()?),
                _ => LabelReq::Eq(key, value),
            });
        }
    }
    Ok(LabelReq::Exists(valid_key(part)?))
}

fn parse_set(s: &str) -> Option<Vec<String>> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

fn valid_key(key: &str) -> Result<String, String> {
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(key.to_string())
    } else {
        Err(format!("invalid label key {key:?}"))
    }
}

/// A parsed field selector: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = part.split_once('=') {
                (p, true, v)
            } else {
                return Err(format!(
                    "invalid field selector {part:?}: expected field=value, field==value or field!=value"
                ));
            };
            let path = path.trim();
            if path.is_empty() {
                return Err(format!("invalid field selector {part:?}: empty field"));
            }
            reqs.push((path.to_string(), equal, value.trim().to_string()));
        }
        Ok(FieldSelector(reqs))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(p, _, _)| p.as_str())
    }

    /// `get` returns a field's value; a missing field compares as "".
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let actual = get(path).unwrap_or_default();
            (actual == *value) == *equal
        })
    }
}

/// Reads a dotted path such as `spec.nodeName` as a string (numbers and
/// booleans are rendered), the way field selectors compare values.
pub fn field_of(obj: &serde_json::Value, path: &str) -> Option<String> {
    let v = path.split('.').try_fold(obj, |v, k| v.get(k))?;
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        other => Some(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn check(sel: &str, l: &BTreeMap<String, String>) -> bool {
        LabelSelector::parse(sel)
            .unwrap()
            .matches(|k| l.get(k).map(String::as_str))
    }

    #[test]
    fn every_label_operator() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        assert!(check("app=web", &l));
        assert!(check("app==web,tier=front", &l));
        assert!(!check("app!=web", &l));
        assert!(check("app in (web, db),tier", &l));
        assert!(!check("app notin (web,db)", &l));
        assert!(check("missing notin (x)", &l));
        assert!(check("!missing", &l));
        assert!(!check("!app", &l));
        assert!(check("n>3,n<6", &l));
        assert!(check("", &l));
    }

    #[test]
    fn bad_label_selectors_are_errors() {
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("a b=c").is_err());
        assert!(LabelSelector::parse("n>x").is_err());
    }

    #[test]
    fn field_selectors() {
        let obj = serde_json::json!({"spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let sel = FieldSelector::parse("spec.nodeName=n1,status.phase!=Pending").unwrap();
        assert!(sel.matches(|p| field_of(&obj, p)));
        let unbound = FieldSelector::parse("spec.nodeName=").unwrap();
        assert!(!unbound.matches(|p| field_of(&obj, p)));
        assert!(FieldSelector::parse("nonsense").is_err());
        // kube-scheduler's pod watch: every requirement must hold.
        let live = FieldSelector::parse("status.phase!=Succeeded,status.phase!=Failed").unwrap();
        for (phase, matches) in [
            (json!("Running"), true),
            (json!(null), true),
            (json!("Succeeded"), false),
            (json!("Failed"), false),
        ] {
            let pod = serde_json::json!({"status": {"phase": phase}});
            assert_eq!(live.matches(|p| field_of(&pod, p)), matches, "{phase}");
        }
    }
}
