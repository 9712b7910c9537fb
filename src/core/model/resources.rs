//! Resource vectors: what a pod requests and what a node offers.
//!
//! Mirrors kube-scheduler's `framework.Resource`: CPU in millicores, memory and
//! ephemeral storage in bytes, a pod count, and named scalar (extended) resources
//! such as `nvidia.com/gpu` or `hugepages-2Mi`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::quantity::{Quantity, QuantityError};

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A resource vector. Scalar resources are kept in a small sorted map: pods and
/// nodes rarely carry more than a handful of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    pub scalar: BTreeMap<Arc<str>, i64>,
}

impl Resources {
    /// Builds a vector from `name -> quantity` strings as found in a pod or node spec.
    pub fn from_quantities<'a>(
        items: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, QuantityError> {
        let mut r = Resources::default();
        for (name, value) in items {
            let q = Quantity::parse(value)?;
            // A whole-unit value always fits 64 bits, millicores may not:
            // refuse rather than clamp, so the sums stay meaningful.
            if name == CPU && q.checked_milli_value().is_none() {
                return Err(QuantityError {
                    input: value.to_string(),
                    reason: "value too large in millicores",
                });
            }
            r.set(name, q);
        }
        Ok(r)
    }

    /// Sets one named resource from a parsed quantity.
    pub fn set(&mut self, name: &str, q: Quantity) {
        match name {
            CPU => self.milli_cpu = q.milli_value(),
            MEMORY => self.memory = q.value(),
            EPHEMERAL_STORAGE => self.ephemeral_storage = q.value(),
            PODS => self.pods = q.value(),
            other if is_scalar_resource(other) => {
                self.scalar.insert(Arc::from(other), q.value());
            }
            // Resources the scheduler does not account (e.g. `storage`) are ignored,
            // as kube-scheduler does.
            _ => {}
        }
    }

    /// Copies one named resource's amount from `other` (absent reads as 0).
    pub fn set_from(&mut self, name: &str, other: &Resources) {
        match name {
            CPU => self.milli_cpu = other.milli_cpu,
            MEMORY => self.memory = other.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage = other.ephemeral_storage,
            PODS => self.pods = other.pods,
            other_name if is_scalar_resource(other_name) => match other.scalar.get(other_name) {
                Some(v) => {
                    self.scalar.insert(Arc::from(other_name), *v);
                }
                None => {
                    self.scalar.remove(other_name);
                }
            },
            _ => {}
        }
    }

    /// The amount of one named resource (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            other => self.scalar.get(other).copied().unwrap_or(0),
        }
    }

    /// Adds `other`, saturating: the cache sums what bound pods request and a
    /// sum at `i64::MAX` still reads as "full" (pods are refused when their
    /// own sums overflow, see [`Resources::checked_add`]).
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_add(other.milli_cpu);
        self.memory = self.memory.saturating_add(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_add(other.ephemeral_storage);
        self.pods = self.pods.saturating_add(other.pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = e.saturating_add(*v);
        }
    }

    /// Adds `other`, or names the first resource whose sum overflows 64 bits
    /// (`self` is then partly updated and should be dropped).
    pub fn checked_add(&mut self, other: &Resources) -> Result<(), Arc<str>> {
        let fixed = [
            (&mut self.milli_cpu, other.milli_cpu, CPU),
            (&mut self.memory, other.memory, MEMORY),
            (
                &mut self.ephemeral_storage,
                other.ephemeral_storage,
                EPHEMERAL_STORAGE,
            ),
            (&mut self.pods, other.pods, PODS),
        ];
        for (mine, theirs, name) in fixed {
            *mine = mine.checked_add(theirs).ok_or_else(|| Arc::from(name))?;
        }
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = e.checked_add(*v).ok_or_else(|| k.clone())?;
        }
        Ok(())
    }

    /// Subtracts `other`, saturating (the inverse of [`Resources::add`]
    /// whenever that did not saturate).
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.saturating_sub(other.milli_cpu);
        self.memory = self.memory.saturating_sub(other.memory);
        self.ephemeral_storage = self
            .ephemeral_storage
            .saturating_sub(other.ephemeral_storage);
        self.pods = self.pods.saturating_sub(other.pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = e.saturating_sub(*v);
            if *e == 0 {
                self.scalar.remove(k);
            }
        }
    }

    /// Component-wise maximum (used for init containers).
    pub fn max_with(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_insert(0);
            *e = (*e).max(*v);
        }
    }

    /// True when every component is zero.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// Names of the resources (from `self`) that `self` exceeds in `available`.
    pub fn exceeding<'a>(&'a self, available: &'a Resources) -> impl Iterator<Item = &'a str> + 'a {
        let fixed = [
            (CPU, self.milli_cpu, available.milli_cpu),
            (MEMORY, self.memory, available.memory),
            (
                EPHEMERAL_STORAGE,
                self.ephemeral_storage,
                available.ephemeral_storage,
            ),
        ];
        fixed
            .into_iter()
            .filter(|(_, want, have)| *want > 0 && want > have)
            .map(|(n, _, _)| n)
            .chain(
                self.scalar
                    .iter()
                    .filter(|(k, v)| **v > 0 && **v > available.get(k))
                    .map(|(k, _)| &**k),
            )
    }
}

/// Extended, hugepages and attachable-volume resources are accounted as scalars,
/// like kube-scheduler (`IsScalarResourceName`): any name with a domain prefix that
/// is not `kubernetes.io/`, or `hugepages-*`, or `attachable-volumes-*`.
pub fn is_scalar_resource(name: &str) -> bool {
    if name.starts_with("hugepages-") || name.starts_with("attachable-volumes-") {
        return true;
    }
    match name.split_once('/') {
        Some((domain, _)) => {
            domain != "kubernetes.io" && !domain.ends_with(".kubernetes.io")
                || domain == "requests.kubernetes.io"
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_from_quantities() {
        let r = Resources::from_quantities([
            ("cpu", "1500m"),
            ("memory", "1Gi"),
            ("nvidia.com/gpu", "2"),
            ("hugepages-2Mi", "4Mi"),
            ("storage", "10Gi"),
        ])
        .unwrap();
        assert_eq!(r.milli_cpu, 1500);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.get("nvidia.com/gpu"), 2);
        assert_eq!(r.get("hugepages-2Mi"), 4 << 20);
        assert_eq!(r.get("storage"), 0);
    }

    #[test]
    fn add_sub_roundtrip() {
        let a = Resources::from_quantities([("cpu", "1"), ("example.com/foo", "3")]).unwrap();
        let mut b = Resources::default();
        b.add(&a);
        b.add(&a);
        b.sub(&a);
        assert_eq!(b, a);
        b.sub(&a);
        assert!(b.is_zero());
        assert!(b.scalar.is_empty());
    }

    #[test]
    fn sums_saturate_or_name_the_overflowing_resource() {
        let big = Resources::from_quantities([("memory", "7Ei"), ("example.com/x", "7E")]).unwrap();
        let mut sum = big.clone();
        sum.add(&big);
        assert_eq!(sum.memory, i64::MAX);
        assert_eq!(sum.get("example.com/x"), i64::MAX);
        let mut sum = big.clone();
        assert_eq!(sum.checked_add(&big).unwrap_err().as_ref(), MEMORY);
        let only_x = Resources::from_quantities([("example.com/x", "7E")]).unwrap();
        let mut sum = only_x.clone();
        assert_eq!(
            sum.checked_add(&only_x).unwrap_err().as_ref(),
            "example.com/x"
        );
        assert!(Resources::from_quantities([("cpu", "9223372036854775807")]).is_err());
        assert!(Resources::from_quantities([("memory", "9223372036854775807")]).is_ok());
    }

    #[test]
    fn exceeding_names_resources() {
        let want =
            Resources::from_quantities([("cpu", "2"), ("memory", "1Gi"), ("nvidia.com/gpu", "1")])
                .unwrap();
        let have = Resources::from_quantities([("cpu", "1"), ("memory", "2Gi")]).unwrap();
        let names: Vec<_> = want.exceeding(&have).collect();
        assert_eq!(names, vec!["cpu", "nvidia.com/gpu"]);
    }

    #[test]
    fn scalar_names() {
        assert!(is_scalar_resource("nvidia.com/gpu"));
        assert!(is_scalar_resource("hugepages-1Gi"));
        assert!(!is_scalar_resource("cpu"));
        assert!(!is_scalar_resource("kubernetes.io/foo"));
    }
}
