//! Consumable capacity: what one request takes of a device's capacities.
//!
//! A device that allows multiple allocations (`allowMultipleAllocations`)
//! is shared: each allocation consumes part of each of its capacities, and
//! the allocations together never consume more than the capacity. What one
//! allocation consumes of a capacity is the request's `capacity.requests`
//! entry for it, rounded up by the capacity's `requestPolicy` (to `min`, to
//! the next `step` above `min`, or to the next of `validValues`), or, when
//! the request does not name it, the policy's `default` (the whole capacity
//! without one). A request the policy cannot meet (above `max`, above every
//! valid value, off its steps) cannot use the device.
//!
//! On a device that is not shared, `capacity.requests` is a filter only:
//! each capacity named must exist and be at least the amount asked.
//!
//! Request names resolve as the allocator resolves them: a name without a
//! domain is the device driver's, so `bandwidth` and
//! `<driver>/bandwidth` are one capacity, and a name with another domain
//! matches only a capacity published with that domain.

use std::sync::Arc;

use super::model::{Capacity, Device, QualifiedName, RequestPolicy};
use crate::model::Quantity;

/// What a request consumes of each of a device's capacities, in the
/// device's capacity order; `Ok(None)` when it cannot use the device (a
/// capacity it names is missing, or its policy refuses the amount), an
/// error when the request cannot be decided on any device (two spellings
/// of one capacity, an amount past 64-bit arithmetic).
pub fn demand(
    requests: &[(Arc<str>, Quantity)],
    driver: &str,
    device: &Device,
) -> Result<Option<Vec<Quantity>>, String> {
    let mut resolved: Vec<(QualifiedName, Quantity)> = Vec::with_capacity(requests.len());
    for (name, q) in requests {
        let key = QualifiedName::of(driver, name);
        if !device.capacity.contains_key(&key) {
            return Ok(None);
        }
        if resolved.iter().any(|(k, _)| *k == key) {
            return Err(format!("capacity {} is requested under two names", key.0));
        }
        resolved.push((key, *q));
    }
    let mut out = Vec::with_capacity(device.capacity.len());
    for (name, cap) in &device.capacity {
        let requested = resolved.iter().find(|(k, _)| k == name).map(|(_, q)| *q);
        let consumed = consumed(requested, cap).map_err(|e| format!("capacity {}: {e}", name.0))?;
        if violates(consumed, cap.policy()) || consumed > cap.value {
            return Ok(None);
        }
        out.push(consumed);
    }
    Ok(Some(out))
}

/// Whether `demand` fits beside what is consumed already (`used`, in the
/// device's capacity order; missing entries are none).
pub fn fits(demand: &[Quantity], used: &[Quantity], device: &Device) -> bool {
    device
        .capacity
        .values()
        .zip(demand)
        .enumerate()
        .all(|(i, (cap, want))| {
            used.get(i)
                .copied()
                .unwrap_or(Quantity::ZERO)
                .checked_add(*want)
                .is_some_and(|total| total <= cap.value)
        })
}

/// What one allocation consumes of `cap`, asked `requested` (or nothing).
fn consumed(requested: Option<Quantity>, cap: &Capacity) -> Result<Quantity, String> {
    let Some(requested) = requested else {
        return Ok(cap.policy().and_then(|p| p.default).unwrap_or(cap.value));
    };
    let Some(policy) = cap.policy() else {
        return Ok(requested);
    };
    if let Some(range) = &policy.range {
        if requested < range.min {
            return Ok(range.min);
        }
        let Some(step) = range.step else {
            return Ok(requested);
        };
        // In whole units, rounded up, as the API's 64-bit arithmetic does.
        let (r, min, step) = (
            i128::from(requested.value()),
            i128::from(range.min.value()),
            i128::from(step.value()),
        );
        if r >= i128::from(i64::MAX) || step <= 0 {
            return Err(format!("{requested} cannot be rounded to a step"));
        }
        let steps = (r - min + step - 1).div_euclid(step);
        let rounded = min + steps * step;
        return i64::try_from(rounded)
            .map(Quantity::from_value)
            .map_err(|_| format!("{requested} rounds up past 64 bits"));
    }
    Ok(policy
        .values
        .iter()
        .find(|v| requested <= **v)
        .copied()
        .unwrap_or(requested))
}

/// Whether the policy refuses to let an allocation consume `q`.
fn violates(q: Quantity, policy: Option<&RequestPolicy>) -> bool {
    let Some(p) = policy else {
        return false;
    };
    if p.default == Some(q) {
        return false;
    }
    if let Some(range) = &p.range {
        if range.max.is_some_and(|max| q > max) {
            return true;
        }
        if let Some(step) = range.step {
            let step = i128::from(step.value());
            let off = i128::from(q.value()) - i128::from(range.min.value());
            return step <= 0 || off.rem_euclid(step) != 0;
        }
        return false;
    }
    !p.values.is_empty() && !p.values.contains(&q)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::dra::model::CapacityRange;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    fn device(caps: &[(&str, &str, Option<RequestPolicy>)]) -> Device {
        Device {
            name: Arc::from("nic-0"),
            attributes: BTreeMap::new(),
            capacity: caps
                .iter()
                .map(|(k, v, p)| {
                    (
                        QualifiedName::of("nic.example.com", k),
                        Capacity {
                            value: q(v),
                            consumable: Some(Box::new(crate::dra::model::Consumable {
                                published: Arc::from(*k),
                                policy: p.clone(),
                            })),
                        },
                    )
                })
                .collect(),
            shared: true,
            taints: Vec::new(),
            consumes: Vec::new(),
            reach: None,
        }
    }

    fn ask(d: &Device, requests: &[(&str, &str)]) -> Result<Option<Vec<Quantity>>, String> {
        let r: Vec<(Arc<str>, Quantity)> = requests
            .iter()
            .map(|(k, v)| (Arc::from(*k), q(v)))
            .collect();
        demand(&r, "nic.example.com", d)
    }

    fn stepped(default: &str, min: &str, max: Option<&str>, step: Option<&str>) -> RequestPolicy {
        RequestPolicy {
            default: Some(q(default)),
            range: Some(CapacityRange {
                min: q(min),
                max: max.map(q),
                step: step.map(q),
            }),
            values: Vec::new(),
        }
    }

    #[test]
    fn without_a_policy_a_request_takes_what_it_asks_and_silence_takes_everything() {
        let d = device(&[("bandwidth", "100G", None), ("queues", "8", None)]);
        assert_eq!(
            ask(&d, &[("bandwidth", "10G")]).unwrap(),
            Some(vec![q("10G"), q("8")])
        );
        assert_eq!(ask(&d, &[("bandwidth", "101G")]).unwrap(), None);
    }

    #[test]
    fn a_range_rounds_up_to_min_and_to_the_next_step() {
        let p = stepped("10G", "5G", Some("50G"), Some("5G"));
        let d = device(&[("bandwidth", "100G", Some(p))]);
        assert_eq!(ask(&d, &[]).unwrap(), Some(vec![q("10G")]));
        assert_eq!(ask(&d, &[("bandwidth", "1")]).unwrap(), Some(vec![q("5G")]));
        assert_eq!(
            ask(&d, &[("bandwidth", "11G")]).unwrap(),
            Some(vec![q("15G")])
        );
        assert_eq!(
            ask(&d, &[("bandwidth", "50G")]).unwrap(),
            Some(vec![q("50G")])
        );
        assert_eq!(ask(&d, &[("bandwidth", "51G")]).unwrap(), None, "above max");
    }

    #[test]
    fn a_range_without_a_step_keeps_the_amount() {
        let d = device(&[("bandwidth", "100G", Some(stepped("1G", "1G", None, None)))]);
        assert_eq!(
            ask(&d, &[("bandwidth", "7.5G")]).unwrap(),
            Some(vec![q("7.5G")])
        );
    }

    #[test]
    fn valid_values_round_up_to_the_next_and_refuse_above_the_last() {
        let p = RequestPolicy {
            default: Some(q("1")),
            range: None,
            values: vec![q("1"), q("2"), q("4")],
        };
        let d = device(&[("slots", "8", Some(p))]);
        assert_eq!(ask(&d, &[("slots", "3")]).unwrap(), Some(vec![q("4")]));
        assert_eq!(ask(&d, &[("slots", "5")]).unwrap(), None);
        assert_eq!(ask(&d, &[]).unwrap(), Some(vec![q("1")]));
    }

    #[test]
    fn names_resolve_with_the_driver_domain_and_other_domains_match_exactly() {
        let d = device(&[("bandwidth", "100G", None)]);
        assert!(
            ask(&d, &[("nic.example.com/bandwidth", "1G")])
                .unwrap()
                .is_some()
        );
        assert_eq!(
            ask(&d, &[("other.example.com/bandwidth", "1G")]).unwrap(),
            None
        );
        assert_eq!(
            ask(&d, &[("memory", "1")]).unwrap(),
            None,
            "a capacity it lacks"
        );
        assert!(
            ask(
                &d,
                &[("bandwidth", "1G"), ("nic.example.com/bandwidth", "2G")]
            )
            .is_err(),
            "two spellings of one capacity"
        );
    }

    #[test]
    fn shares_fit_until_the_capacity_is_consumed() {
        let d = device(&[(
            "bandwidth",
            "100G",
            Some(stepped("10G", "10G", None, Some("10G"))),
        )]);
        let want = ask(&d, &[("bandwidth", "30G")]).unwrap().unwrap();
        assert!(fits(&want, &[q("70G")], &d));
        assert!(!fits(&want, &[q("71G")], &d));
        assert!(fits(&want, &[], &d));
    }

    #[test]
    fn an_amount_past_64_bits_is_an_error_not_a_wrap() {
        let d = device(&[(
            "bandwidth",
            "100G",
            Some(stepped("1", "1", None, Some("3"))),
        )]);
        assert!(ask(&d, &[("bandwidth", "9223372036854775807")]).is_err());
    }
}
