//! Fault injection: parsing `--fault` specs and applying them to requests
//! (an error rate and added latency per verb/resource, forced watch closes).
//!
//! Grammar: comma-separated `key=value` pairs.
//!
//! | key                 | meaning                                                   |
//! |---------------------|-----------------------------------------------------------|
//! | `verb`              | get, list, watch, create, update, patch, delete, deletecollection, or `*` (default) |
//! | `resource`          | plural with optional subresource: `pods`, `pods/binding`, or `*` (default) |
//! | `group`             | API group (`""` core); any when absent                    |
//! | `rate`              | probability in [0, 1] that a matching request fails (default 1 when `code` is set) |
//! | `code`              | HTTP status of injected failures, 400-599 (default 500 when `rate` is set) |
//! | `latency-ms`        | delay added before matching requests are served           |
//! | `watch-close-every` | close every watch stream after this duration (`500ms`, `30s`, `2m`) |
//! | `watch-stall`       | `true`: matching watch streams hold their events while the rule is in force, then deliver them (a stalled connection) |
//! | `resume-gone`       | probability in [0, 1] that a watch resuming from a `resourceVersion` is told `410 Gone` (as after an etcd compaction) |
//! | `user-agent`        | only requests whose `User-Agent` starts with this (e.g. `muster/`) |

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::Notify;

use super::status::ApiError;

/// One parsed `--fault` rule.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRule {
    pub verb: Option<String>,
    pub resource: Option<String>,
    pub group: Option<String>,
    pub rate: f64,
    pub code: Option<u16>,
    pub latency: Option<Duration>,
    pub watch_close_every: Option<Duration>,
    pub watch_stall: bool,
    pub resume_gone: f64,
    pub user_agent: Option<String>,
}

/// What a request is, as fault rules match it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub verb: &'a str,
    pub group: &'a str,
    /// The plural, with `/subresource` when there is one.
    pub resource: &'a str,
    /// The `User-Agent` header, empty when none was sent.
    pub user_agent: &'a str,
}

impl<'a> Target<'a> {
    pub fn new(verb: &'a str, group: &'a str, resource: &'a str, user_agent: &'a str) -> Self {
        Target {
            verb,
            group,
            resource,
            user_agent,
        }
    }
}

const VERBS: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

impl std::str::FromStr for FaultRule {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        let mut rule = FaultRule {
            verb: None,
            resource: None,
            group: None,
            rate: 0.0,
            code: None,
            latency: None,
            watch_close_every: None,
            watch_stall: false,
            resume_gone: 0.0,
            user_agent: None,
        };
        let mut rate = None;
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| format!("fault {spec:?}: expected key=value, got {pair:?}"))?;
            let value = value.trim();
            let bad = |what: &str| format!("fault {spec:?}: {key} must be {what}, got {value:?}");
            match key.trim() {
                "verb" if value == "*" => {}
                "verb" if VERBS.contains(&value) => rule.verb = Some(value.to_string()),
                "verb" => return Err(bad(&format!("one of {}", VERBS.join(", ")))),
                "resource" if value == "*" => {}
                "resource" => rule.resource = Some(value.to_string()),
                "group" => rule.group = Some(value.to_string()),
                "rate" => {
                    let r: f64 = value.parse().map_err(|_| bad("a number"))?;
                    if !(0.0..=1.0).contains(&r) {
                        return Err(bad("between 0 and 1"));
                    }
                    rate = Some(r);
                }
                "code" => {
                    let c: u16 = value.parse().map_err(|_| bad("an HTTP status"))?;
                    if !(400..=599).contains(&c) {
                        return Err(bad("an error status between 400 and 599"));
                    }
                    rule.code = Some(c);
                }
                "latency-ms" => {
                    let ms: u64 = value.parse().map_err(|_| bad("whole milliseconds"))?;
                    rule.latency = Some(Duration::from_millis(ms));
                }
                "watch-close-every" => {
                    let d = parse_duration(value).map_err(|e| format!("fault {spec:?}: {e}"))?;
                    if d.is_zero() {
                        return Err(bad("a positive duration"));
                    }
                    rule.watch_close_every = Some(d);
                }
                "watch-stall" => {
                    rule.watch_stall = value.parse().map_err(|_| bad("true or false"))?;
                }
                "resume-gone" => {
                    let r: f64 = value.parse().map_err(|_| bad("a number"))?;
                    if !(0.0..=1.0).contains(&r) {
                        return Err(bad("between 0 and 1"));
                    }
                    rule.resume_gone = r;
                }
                "user-agent" => rule.user_agent = Some(value.to_string()),
                other => {
                    return Err(format!(
                        "fault {spec:?}: unknown key {other:?} (expected verb, resource, group, rate, code, latency-ms, watch-close-every, watch-stall, resume-gone, user-agent)"
                    ));
                }
            }
        }
        match (rate, rule.code) {
            (Some(r), None) => {
                rule.rate = r;
                rule.code = Some(500);
            }
            (None, Some(_)) => rule.rate = 1.0,
            (Some(r), Some(_)) => rule.rate = r,
            (None, None) => {}
        }
        if rule.code.is_none()
            && rule.latency.is_none()
            && rule.watch_close_every.is_none()
            && !rule.watch_stall
            && rule.resume_gone == 0.0
        {
            return Err(format!(
                "fault {spec:?} has no effect: give rate/code, latency-ms, watch-close-every, watch-stall or resume-gone"
            ));
        }
        Ok(rule)
    }
}

impl FaultRule {
    fn applies(&self, t: &Target<'_>) -> bool {
        self.verb.as_deref().is_none_or(|v| v == t.verb)
            && self.group.as_deref().is_none_or(|g| g == t.group)
            && self.resource.as_deref().is_none_or(|r| r == t.resource)
            && self
                .user_agent
                .as_deref()
                .is_none_or(|ua| t.user_agent.starts_with(ua))
    }
}

/// All fault rules of a cluster. They can be replaced while it serves
/// ([`super::SimCluster::set_faults`]), so a chaos run changes the weather
/// step by step; a request sees the rules in force when it arrives.
#[derive(Debug, Default)]
pub struct Faults {
    rules: RwLock<Arc<Vec<FaultRule>>>,
    /// Woken whenever the rules change (stalled watches re-check).
    changed: Notify,
}

impl Faults {
    pub fn new(rules: Vec<FaultRule>) -> Self {
        Faults {
            rules: RwLock::new(Arc::new(rules)),
            changed: Notify::new(),
        }
    }

    /// Replaces every rule.
    pub fn set(&self, rules: Vec<FaultRule>) {
        *self.rules.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rules);
        self.changed.notify_waiters();
    }

    fn rules(&self) -> Arc<Vec<FaultRule>> {
        self.rules.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Delays, then fails or lets through one request.
    pub async fn before(&self, target: Target<'_>) -> Result<(), ApiError> {
        let rules = self.rules();
        for rule in rules.iter().filter(|r| r.applies(&target)) {
            if let Some(latency) = rule.latency {
                tokio::time::sleep(latency).await;
            }
            if let Some(code) = rule.code
                && fastrand::f64() < rule.rate
            {
                return Err(ApiError::injected(code));
            }
        }
        Ok(())
    }

    /// Whether a watch resuming from a resourceVersion is told `410 Gone`.
    pub fn resume_gone(&self, target: Target<'_>) -> bool {
        let rules = self.rules();
        rules
            .iter()
            .filter(|r| r.resume_gone > 0.0 && r.applies(&target))
            .any(|r| fastrand::f64() < r.resume_gone)
    }

    /// Waits while a `watch-stall` rule matches `target`; returns at once
    /// when none does. Rules are re-checked whenever they change.
    pub async fn wait_unstalled(&self, target: Target<'_>) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so a change in between is not missed.
            changed.as_mut().enable();
            let stalled = self
                .rules()
                .iter()
                .any(|r| r.watch_stall && r.applies(&target));
            if !stalled {
                return;
            }
            changed.await;
        }
    }

    /// The shortest forced watch lifetime, if any rule sets one.
    pub fn watch_close_every(&self) -> Option<Duration> {
        self.rules()
            .iter()
            .filter_map(|r| r.watch_close_every)
            .min()
    }
}

/// Parses `250ms`, `30s`, `2m`, `1h` or a bare number of seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (s, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("invalid duration {s:?} (expected e.g. 500ms, 30s, 2m)"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!(
            "invalid duration {s:?}: must be a non-negative number"
        ));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_examples() {
        let r: FaultRule = "verb=create,resource=pods/binding,rate=0.05,code=500"
            .parse()
            .unwrap();
        assert_eq!(r.rate, 0.05);
        assert_eq!(r.code, Some(500));
        assert!(r.applies(&Target::new("create", "", "pods/binding", "")));
        assert!(!r.applies(&Target::new("create", "", "pods", "")));
        let r: FaultRule = "resource=pods,latency-ms=20".parse().unwrap();
        assert_eq!(r.latency, Some(Duration::from_millis(20)));
        assert_eq!(r.code, None);
        let r: FaultRule = "watch-close-every=30s".parse().unwrap();
        assert_eq!(r.watch_close_every, Some(Duration::from_secs(30)));
        let r: FaultRule = "code=503".parse().unwrap();
        assert_eq!(r.rate, 1.0);
    }

    #[test]
    fn bad_specs_are_clear_errors() {
        for (spec, needle) in [
            ("verb=fly,code=500", "verb must be one of"),
            ("rate=2", "between 0 and 1"),
            ("code=200", "between 400 and 599"),
            ("resource=pods", "has no effect"),
            ("colour=red,code=500", "unknown key"),
            ("watch-close-every=soon", "invalid duration"),
            ("latency", "expected key=value"),
            ("watch-stall=maybe", "true or false"),
            ("resume-gone=3", "between 0 and 1"),
            ("user-agent=muster/", "has no effect"),
        ] {
            let err = spec.parse::<FaultRule>().unwrap_err();
            assert!(err.contains(needle), "{spec}: {err}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
    }

    #[tokio::test]
    async fn rules_change_while_serving() {
        let faults = Faults::new(vec!["resource=pods,code=503".parse().unwrap()]);
        let get = Target::new("get", "", "pods", "");
        assert!(faults.before(get).await.is_err());
        faults.set(vec!["watch-close-every=2s".parse().unwrap()]);
        assert!(faults.before(get).await.is_ok());
        assert_eq!(faults.watch_close_every(), Some(Duration::from_secs(2)));
        faults.set(Vec::new());
        assert_eq!(faults.watch_close_every(), None);
    }

    #[test]
    fn user_agent_narrows_a_rule() {
        let r: FaultRule = "resource=pods,watch-stall=true,user-agent=muster/"
            .parse()
            .unwrap();
        assert!(r.watch_stall);
        assert!(r.applies(&Target::new("watch", "", "pods", "muster/0.4.0")));
        assert!(!r.applies(&Target::new("watch", "", "pods", "kubectl/v1.37")));
        assert!(!r.applies(&Target::new("watch", "", "pods", "")));
    }

    #[tokio::test]
    async fn a_stalled_watch_resumes_when_the_rule_is_lifted() {
        let faults = Arc::new(Faults::new(vec![
            "resource=pods,watch-stall=true".parse().unwrap(),
        ]));
        let pods = Target::new("watch", "", "pods", "");
        let nodes = Target::new("watch", "", "nodes", "");
        faults.wait_unstalled(nodes).await;
        let waiter = {
            let faults = faults.clone();
            tokio::spawn(async move { faults.wait_unstalled(pods).await })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        faults.set(Vec::new());
        waiter.await.unwrap();
        let gone = Faults::new(vec!["resume-gone=1".parse().unwrap()]);
        assert!(gone.resume_gone(pods));
        assert!(!Faults::default().resume_gone(pods));
    }
}
