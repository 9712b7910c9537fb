//! The Kubernetes CEL libraries a device selector may call beyond the
//! standard library, as the DRA environment of kube-scheduler 1.37
//! registers them: the strings extension (the `cel` crate's), the lists
//! extension (the crate's) with Kubernetes' list functions (`isSorted`,
//! `sum`, `min`, `max`, `indexOf`, `lastIndexOf`, `includes`), the sets
//! extension (`sets.contains`, `sets.intersects`, `sets.equivalent`),
//! `cel.bind`, `isQuantity`, `isSemver`, and IP, CIDR and URL values.
//!
//! Which calls are allowed is decided when the selector is compiled
//! (`cel_check`); this module only makes them evaluate. Every function here
//! is linear in its arguments, so the selector's cost bound holds.

use std::net::IpAddr;
use std::sync::Arc;

use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::common::types::{CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::CowVal;
use cel::extractors::This;
use cel::objects::Opaque;
use cel::parser::Macro;
use cel::{Context, Env, ExecutionError, Value};

fn fail(function: &str, msg: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, msg)
}

/// The environment selectors are compiled and evaluated in.
pub fn env() -> Env {
    let mut env = Env::stdlib();
    let results = [
        env.add_extension(cel::extensions::strings),
        env.add_extension(cel::extensions::lists),
        env.add_macro(Macro::receiver("bind", 3, bind)),
        env.add_member_overload(
            "indexOf",
            "list_a_index_of_int",
            LIST_TYPE,
            vec![DYN_TYPE],
            index_of,
        ),
        env.add_member_overload(
            "lastIndexOf",
            "list_a_last_index_of_int",
            LIST_TYPE,
            vec![DYN_TYPE],
            last_index_of,
        ),
    ];
    for r in results {
        // A clash with the standard library would be a programming error;
        // the call then fails to evaluate, never silently.
        debug_assert!(r.is_ok(), "{r:?}");
    }
    env
}

/// `cel.bind(name, init, body)`: `body` with `name` bound to `init`, as a
/// comprehension over nothing whose accumulator is the name. Other calls
/// of a `bind` member are left alone.
fn bind(
    helper: &mut cel::parser::MacroExprHelper<'_>,
    target: &mut Option<cel::common::ast::IdedExpr>,
    args: &mut Vec<cel::common::ast::IdedExpr>,
) -> Result<Option<cel::common::ast::IdedExpr>, cel::parser::ParseError> {
    if !matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(ns)) if ns == "cel") {
        return Ok(None);
    }
    let name = match args.first().map(|a| &a.expr) {
        Some(Expr::Ident(n)) => n.clone(),
        _ => {
            let id = args.first().map_or(0, |a| a.id);
            return Err(
                helper.new_error(id, "cel.bind() variable name must be a simple identifier")
            );
        }
    };
    let body = args
        .pop()
        .ok_or_else(|| helper.new_error(0, "cel.bind() needs a body"))?;
    let init = args
        .pop()
        .ok_or_else(|| helper.new_error(0, "cel.bind() needs a value"))?;
    let bound = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(name)),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(bound)))))
}

/// The position of the first (or last) element equal to the argument, -1
/// when none is.
fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, item]: [CowVal<'b, 'v>; 2] = args
        .try_into()
        .map_err(|a: Vec<_>| ExecutionError::invalid_argument_count(2, a.len()))?;
    let iterable = list
        .as_ref()
        .as_iterable()
        .ok_or_else(|| fail("indexOf", "not a list"))?;
    let mut items = iterable.iter();
    let (mut at, mut found) = (0i64, -1i64);
    while let Some(x) = items.next() {
        if x.equals(item.as_ref()) {
            found = at;
            if !last {
                break;
            }
        }
        at += 1;
    }
    Ok(CowVal::owned(CelInt::from(found)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}

/// An IP address in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelIp(IpAddr);

impl Opaque for CelIp {
    fn runtime_type_name(&self) -> &str {
        "net.IP"
    }
}

/// A CIDR in CEL: the address as written and the prefix length.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelCidr(IpAddr, u8);

impl Opaque for CelCidr {
    fn runtime_type_name(&self) -> &str {
        "net.CIDR"
    }
}

/// An address as Kubernetes' `ip()` accepts it: no zone, no IPv4-mapped
/// IPv6 form.
fn parse_ip(s: &str) -> Option<IpAddr> {
    if s.contains('%') {
        return None;
    }
    let ip: IpAddr = s.parse().ok()?;
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => None,
        _ => Some(ip),
    }
}

fn parse_cidr(s: &str) -> Option<CelCidr> {
    let (addr, len) = s.split_once('/')?;
    let ip = parse_ip(addr)?;
    let len: u8 = len.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (len <= max && !len.to_string().is_empty()).then_some(CelCidr(ip, len))
}

fn masked(ip: IpAddr, len: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4((bits & mask).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6((bits & mask).into())
        }
    }
}

fn contains(c: &CelCidr, ip: IpAddr) -> bool {
    ip.is_ipv4() == c.0.is_ipv4() && masked(ip, c.1) == masked(c.0, c.1)
}

fn ip_of(function: &str, v: &Arc<dyn Opaque>) -> Result<IpAddr, ExecutionError> {
    v.downcast_ref::<CelIp>()
        .map(|i| i.0)
        .ok_or_else(|| fail(function, "not an IP"))
}

fn cidr_of(function: &str, v: &Arc<dyn Opaque>) -> Result<CelCidr, ExecutionError> {
    v.downcast_ref::<CelCidr>()
        .cloned()
        .ok_or_else(|| fail(function, "not a CIDR"))
}

/// A URL in CEL, as `url()` parses it: an absolute URI or an absolute
/// path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CelUrl {
    scheme: String,
    host: String,
    path: String,
    query: String,
}

impl Opaque for CelUrl {
    fn runtime_type_name(&self) -> &str {
        "kubernetes.URL"
    }
}

/// A request URI: `scheme:[//host[:port]]path[?query]`, or `/path[?query]`
/// (a fragment is dropped); `None` when it is neither.
fn parse_url(s: &str) -> Option<CelUrl> {
    if s.chars().any(|c| c.is_control()) {
        return None;
    }
    let s = s.split_once('#').map_or(s, |(a, _)| a);
    let (scheme, rest) = match s.starts_with('/') {
        true => ("", s),
        false => {
            let (scheme, rest) = s.split_once(':')?;
            let mut chars = scheme.chars();
            let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
                && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if !valid {
                return None;
            }
            (scheme, rest)
        }
    };
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (host, path) = match rest.strip_prefix("//") {
        Some(authority) => {
            let end = authority.find('/').unwrap_or(authority.len());
            let (host, path) = authority.split_at(end);
            let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
            if host.contains(' ') {
                return None;
            }
            (host, path)
        }
        None if scheme.is_empty() || rest.starts_with('/') => ("", rest),
        None => return None,
    };
    Some(CelUrl {
        scheme: scheme.to_string(),
        host: host.to_string(),
        path: path.to_string(),
        query: query.to_string(),
    })
}

/// The host without its port, and the port.
fn host_port(host: &str) -> (&str, &str) {
    if let Some(rest) = host.strip_prefix('[') {
        let (h, after) = rest.split_once(']').unwrap_or((rest, ""));
        return (h, after.strip_prefix(':').unwrap_or(""));
    }
    host.rsplit_once(':').unwrap_or((host, ""))
}

fn url_of(function: &str, v: &Arc<dyn Opaque>) -> Result<CelUrl, ExecutionError> {
    v.downcast_ref::<CelUrl>()
        .cloned()
        .ok_or_else(|| fail(function, "not a URL"))
}

/// Whether two lists share an element (`any`) or the first holds every
/// element of the second.
fn sets(a: &[Value], b: &[Value], any: bool) -> bool {
    match any {
        true => b.iter().any(|x| a.contains(x)),
        false => b.iter().all(|x| a.contains(x)),
    }
}

/// The elements in order, compared as CEL compares them; an error when two
/// cannot be.
fn ordered(function: &str, list: &[Value]) -> Result<Vec<std::cmp::Ordering>, ExecutionError> {
    list.windows(2)
        .map(|w| {
            w[0].partial_cmp(&w[1])
                .ok_or_else(|| fail(function, "list elements must be comparable"))
        })
        .collect()
}

/// Registers the libraries' functions that are not overloads of `env()`
/// on a root context.
pub fn register(root: &mut Context<'static, 'static>) {
    let mut results = Vec::new();
    results.push(root.add_function("isQuantity", |s: Arc<String>| {
        crate::model::Quantity::parse(&s).is_ok()
    }));
    results.push(root.add_function("isSemver", |s: Arc<String>| {
        semver::Version::parse(&s).is_ok()
    }));
    results.push(
        root.add_function("sets.contains", |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| {
            sets(&a, &b, false)
        }),
    );
    results.push(root.add_function(
        "sets.intersects",
        |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| sets(&a, &b, true),
    ));
    results.push(root.add_function(
        "sets.equivalent",
        |a: Arc<Vec<Value>>, b: Arc<Vec<Value>>| sets(&a, &b, false) && sets(&b, &a, false),
    ));
    results.push(
        root.add_function("isSorted", |This(l): This<Arc<Vec<Value>>>| {
            ordered("isSorted", &l).map(|o| o.iter().all(|o| o.is_le()))
        }),
    );
    for (name, keep) in [
        ("max", std::cmp::Ordering::Greater),
        ("min", std::cmp::Ordering::Less),
    ] {
        results.push(
            root.add_function(name, move |This(l): This<Arc<Vec<Value>>>| {
                let mut best: Option<&Value> = None;
                for x in l.iter() {
                    best = match best {
                        None => Some(x),
                        Some(b) => match x.partial_cmp(b) {
                            Some(o) if o == keep => Some(x),
                            Some(_) => Some(b),
                            None => return Err(fail(name, "list elements must be comparable")),
                        },
                    };
                }
                best.cloned().ok_or_else(|| fail(name, "the list is empty"))
            }),
        );
    }
    results.push(root.add_function("sum", |This(l): This<Arc<Vec<Value>>>| {
        let mut total = Value::Int(0);
        for (i, x) in l.iter().enumerate() {
            total = match (i, &total, x) {
                (0, _, v) => v.clone(),
                (_, Value::Int(a), Value::Int(b)) => {
                    Value::Int(a.checked_add(*b).ok_or_else(|| fail("sum", "overflow"))?)
                }
                (_, Value::UInt(a), Value::UInt(b)) => {
                    Value::UInt(a.checked_add(*b).ok_or_else(|| fail("sum", "overflow"))?)
                }
                (_, Value::Float(a), Value::Float(b)) => Value::Float(a + b),
                _ => return Err(fail("sum", "elements of different types")),
            };
        }
        Ok(total)
    }));
    results.push(
        root.add_function("includes", |This(l): This<Arc<Vec<Value>>>, x: Value| {
            l.contains(&x)
        }),
    );
    results.push(
        root.add_function("ip", |s: Arc<String>| -> Result<Value, ExecutionError> {
            parse_ip(&s)
                .map(|ip| Value::Opaque(Arc::new(CelIp(ip))))
                .ok_or_else(|| fail("ip", format!("IP Address {s:?} parse error")))
        }),
    );
    results.push(root.add_function("isIP", |s: Arc<String>| parse_ip(&s).is_some()));
    results.push(
        root.add_function("family", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("family", &a).map(|ip| if ip.is_ipv4() { 4i64 } else { 6 })
        }),
    );
    results.push(
        root.add_function("isUnspecified", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("isUnspecified", &a).map(|ip| ip.is_unspecified())
        }),
    );
    results.push(
        root.add_function("isLoopback", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("isLoopback", &a).map(|ip| ip.is_loopback())
        }),
    );
    results.push(
        root.add_function("isLinkLocalMulticast", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("isLinkLocalMulticast", &a).map(|ip| match ip {
                IpAddr::V4(v4) => v4.octets()[..3] == [224, 0, 0],
                IpAddr::V6(v6) => v6.segments()[0] & 0xff0f == 0xff02,
            })
        }),
    );
    results.push(
        root.add_function("isLinkLocalUnicast", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("isLinkLocalUnicast", &a).map(|ip| match ip {
                IpAddr::V4(v4) => v4.is_link_local(),
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
            })
        }),
    );
    results.push(
        root.add_function("isGlobalUnicast", |This(a): This<Arc<dyn Opaque>>| {
            ip_of("isGlobalUnicast", &a).map(|ip| match ip {
                IpAddr::V4(v4) => {
                    !(v4.is_unspecified()
                        || v4.is_loopback()
                        || v4.is_link_local()
                        || v4.is_multicast()
                        || v4.is_broadcast())
                }
                IpAddr::V6(v6) => {
                    !(v6.is_unspecified()
                        || v6.is_loopback()
                        || v6.is_multicast()
                        || v6.segments()[0] & 0xffc0 == 0xfe80)
                }
            })
        }),
    );
    results.push(
        root.add_function("cidr", |s: Arc<String>| -> Result<Value, ExecutionError> {
            parse_cidr(&s)
                .map(|c| Value::Opaque(Arc::new(c)))
                .ok_or_else(|| {
                    fail(
                        "cidr",
                        format!("network address parse error during conversion from string: {s:?}"),
                    )
                })
        }),
    );
    results.push(root.add_function("isCIDR", |s: Arc<String>| parse_cidr(&s).is_some()));
    results.push(root.add_function(
        "containsIP",
        |This(c): This<Arc<dyn Opaque>>, ip: Value| -> Result<bool, ExecutionError> {
            let c = cidr_of("containsIP", &c)?;
            let ip = match ip {
                Value::Opaque(o) => ip_of("containsIP", &o)?,
                Value::String(s) => parse_ip(&s).ok_or_else(|| fail("containsIP", "not an IP"))?,
                _ => return Err(fail("containsIP", "not an IP")),
            };
            Ok(contains(&c, ip))
        },
    ));
    results.push(root.add_function(
        "containsCIDR",
        |This(c): This<Arc<dyn Opaque>>, other: Value| -> Result<bool, ExecutionError> {
            let c = cidr_of("containsCIDR", &c)?;
            let other = match other {
                Value::Opaque(o) => cidr_of("containsCIDR", &o)?,
                Value::String(s) => {
                    parse_cidr(&s).ok_or_else(|| fail("containsCIDR", "not a CIDR"))?
                }
                _ => return Err(fail("containsCIDR", "not a CIDR")),
            };
            Ok(other.1 >= c.1 && contains(&c, other.0))
        },
    ));
    results.push(
        root.add_function("prefixLength", |This(c): This<Arc<dyn Opaque>>| {
            cidr_of("prefixLength", &c).map(|c| i64::from(c.1))
        }),
    );
    results.push(
        root.add_function("masked", |This(c): This<Arc<dyn Opaque>>| {
            cidr_of("masked", &c).map(|c| Value::Opaque(Arc::new(CelCidr(masked(c.0, c.1), c.1))))
        }),
    );
    results.push(
        root.add_function("url", |s: Arc<String>| -> Result<Value, ExecutionError> {
            parse_url(&s)
                .map(|u| Value::Opaque(Arc::new(u)))
                .ok_or_else(|| {
                    fail(
                        "url",
                        format!("URL parse error during conversion from string: {s:?}"),
                    )
                })
        }),
    );
    results.push(root.add_function("isURL", |s: Arc<String>| parse_url(&s).is_some()));
    type Part = fn(&CelUrl) -> String;
    for (name, part) in [
        ("getScheme", (|u: &CelUrl| u.scheme.clone()) as Part),
        ("getHost", |u: &CelUrl| u.host.clone()),
        ("getHostname", |u: &CelUrl| host_port(&u.host).0.to_string()),
        ("getPort", |u: &CelUrl| host_port(&u.host).1.to_string()),
        ("getEscapedPath", |u: &CelUrl| u.path.clone()),
    ] {
        results.push(root.add_function(
            name,
            move |This(u): This<Arc<dyn Opaque>>| -> Result<Value, ExecutionError> {
                url_of(name, &u).map(|u| Value::from(part(&u)))
            },
        ));
    }
    results.push(
        root.add_function("getQuery", |This(u): This<Arc<dyn Opaque>>| {
            let u = url_of("getQuery", &u)?;
            let mut query: std::collections::HashMap<String, Vec<Value>> = Default::default();
            for pair in u.query.split('&').filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                query
                    .entry(k.to_string())
                    .or_default()
                    .push(Value::from(v.to_string()));
            }
            let map: std::collections::HashMap<String, Value> = query
                .into_iter()
                .map(|(k, v)| (k, Value::List(Arc::new(v))))
                .collect();
            Ok::<Value, ExecutionError>(Value::from(map))
        }),
    );
    for r in results {
        debug_assert!(r.is_ok(), "{r:?}");
    }
}
