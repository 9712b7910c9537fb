//! A pod's effective requests, computed as kube-scheduler does, from quantities
//! a tenant wrote: every quantity must parse and be non-negative, and every
//! sum must fit 64 bits, else the pod is refused with an error naming the
//! field (`spec.containers[1].resources.requests.memory: sum overflows`).
//! A real API server refuses negative requests at admission; the scheduler
//! does not trust that it did.

use std::collections::BTreeMap;

use super::pod::{DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST};
use super::wire::{ContainerWire, PodWire, QuantityWire};
use super::{ModelError, Quantity, Resources};

/// One part of a pod that requests resources, and how to name its fields.
struct Part<'a> {
    resources: Resources,
    /// `spec.containers[1].resources` or `spec.overhead`.
    path: String,
    /// The names found in `requests` (else they came from `limits`); `None`
    /// for a plain map such as the overhead.
    requests: Option<&'a BTreeMap<String, QuantityWire>>,
}

impl Part<'_> {
    fn field(&self, name: &str) -> String {
        match self.requests {
            Some(r) if r.contains_key(name) => format!("{}.requests.{name}", self.path),
            Some(_) => format!("{}.limits.{name}", self.path),
            None => format!("{}.{name}", self.path),
        }
    }

    fn overflow(&self, name: &str) -> ModelError {
        ModelError::invalid(format!("{}: sum overflows", self.field(name)))
    }
}

/// Parses one quantity map at `path`: every value a quantity, none negative.
fn parse_map(map: &BTreeMap<String, QuantityWire>, path: &str) -> Result<Resources, ModelError> {
    let mut items = Vec::with_capacity(map.len());
    for (name, raw) in map {
        let raw = raw.as_string();
        let at = || format!("{path}.{name}");
        let q = Quantity::parse(&raw).map_err(|e| ModelError::invalid(format!("{}: {e}", at())))?;
        if q.is_negative() {
            return Err(ModelError::invalid(format!(
                "{}: must not be negative, got {raw:?}",
                at()
            )));
        }
        if name == super::CPU && q.checked_milli_value().is_none() {
            return Err(ModelError::invalid(format!(
                "{}: too large in millicores, got {raw:?}",
                at()
            )));
        }
        items.push((name.as_str(), raw));
    }
    Resources::from_quantities(items.iter().map(|(n, v)| (*n, v.as_str())))
        .map_err(|e| ModelError::invalid(format!("{path}: {e}")))
}

fn container<'a>(c: &'a ContainerWire, path: String) -> Result<Part<'a>, ModelError> {
    let path = format!("{path}.resources");
    let Some(r) = &c.resources else {
        return Ok(Part {
            resources: Resources::default(),
            path,
            requests: None,
        });
    };
    // A real API server defaults requests to limits when only limits are set;
    // do the same so pods read before defaulting are not under-counted.
    let limits = parse_map(&r.limits, &format!("{path}.limits"))?;
    let requests = parse_map(&r.requests, &format!("{path}.requests"))?;
    let mut merged = limits;
    for name in r.requests.keys() {
        merged.set_from(name, &requests);
    }
    Ok(Part {
        resources: merged,
        path,
        requests: Some(&r.requests),
    })
}

/// Checked `a + b` for the scoring variants, naming `name` of `part`.
fn plus(a: i64, b: i64, part: &Part<'_>, name: &str) -> Result<i64, ModelError> {
    a.checked_add(b).ok_or_else(|| part.overflow(name))
}

fn non_zero(v: i64, default: i64) -> i64 {
    if v == 0 { default } else { v }
}

/// kube-scheduler's `PodRequests`: the larger of (sum of app containers plus
/// sidecars) and (the largest init container plus the sidecars started before it),
/// then pod-level resources where set, then overhead; plus the non-zero variant
/// for scoring. Returns `(requests, non-zero milli CPU, non-zero memory)`.
pub(super) fn effective_requests(w: &PodWire) -> Result<(Resources, i64, i64), ModelError> {
    let mut reqs = Resources::default();
    let (mut nz_cpu, mut nz_mem) = (0i64, 0i64);
    for (i, c) in w.spec.containers.iter().enumerate() {
        let part = container(c, format!("spec.containers[{i}]"))?;
        let r = &part.resources;
        nz_cpu = plus(
            nz_cpu,
            non_zero(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST),
            &part,
            "cpu",
        )?;
        nz_mem = plus(
            nz_mem,
            non_zero(r.memory, DEFAULT_MEMORY_REQUEST),
            &part,
            "memory",
        )?;
        reqs.checked_add(r).map_err(|n| part.overflow(&n))?;
    }
    let mut sidecars = Resources::default();
    let (mut sidecar_cpu, mut sidecar_mem) = (0i64, 0i64);
    let mut init_max = Resources::default();
    let (mut init_cpu_max, mut init_mem_max) = (0i64, 0i64);
    for (i, c) in w.spec.init_containers.iter().enumerate() {
        let part = container(c, format!("spec.initContainers[{i}]"))?;
        let r = &part.resources;
        let (c_cpu, c_mem) = (
            non_zero(r.milli_cpu, DEFAULT_MILLI_CPU_REQUEST),
            non_zero(r.memory, DEFAULT_MEMORY_REQUEST),
        );
        let (mut peak, peak_cpu, peak_mem);
        if c.restart_policy.as_deref() == Some("Always") {
            reqs.checked_add(r).map_err(|n| part.overflow(&n))?;
            nz_cpu = plus(nz_cpu, c_cpu, &part, "cpu")?;
            nz_mem = plus(nz_mem, c_mem, &part, "memory")?;
            sidecars.checked_add(r).map_err(|n| part.overflow(&n))?;
            sidecar_cpu = plus(sidecar_cpu, c_cpu, &part, "cpu")?;
            sidecar_mem = plus(sidecar_mem, c_mem, &part, "memory")?;
            peak = sidecars.clone();
            peak_cpu = sidecar_cpu;
            peak_mem = sidecar_mem;
        } else {
            peak = r.clone();
            peak.checked_add(&sidecars).map_err(|n| part.overflow(&n))?;
            peak_cpu = plus(c_cpu, sidecar_cpu, &part, "cpu")?;
            peak_mem = plus(c_mem, sidecar_mem, &part, "memory")?;
        }
        init_max.max_with(&peak);
        init_cpu_max = init_cpu_max.max(peak_cpu);
        init_mem_max = init_mem_max.max(peak_mem);
    }
    reqs.max_with(&init_max);
    nz_cpu = nz_cpu.max(init_cpu_max);
    nz_mem = nz_mem.max(init_mem_max);

    if let Some(pod_level) = &w.spec.resources {
        let r = parse_map(&pod_level.requests, "spec.resources.requests")?;
        // Pod-level limits are validated too, though only requests count.
        parse_map(&pod_level.limits, "spec.resources.limits")?;
        if pod_level.requests.contains_key("cpu") {
            reqs.milli_cpu = r.milli_cpu;
            nz_cpu = r.milli_cpu;
        }
        if pod_level.requests.contains_key("memory") {
            reqs.memory = r.memory;
            nz_mem = r.memory;
        }
    }
    let overhead = Part {
        resources: parse_map(&w.spec.overhead, "spec.overhead")?,
        path: "spec.overhead".into(),
        requests: None,
    };
    reqs.checked_add(&overhead.resources)
        .map_err(|n| overhead.overflow(&n))?;
    nz_cpu = plus(nz_cpu, overhead.resources.milli_cpu, &overhead, "cpu")?;
    nz_mem = plus(nz_mem, overhead.resources.memory, &overhead, "memory")?;
    reqs.pods = 1;
    Ok((reqs, nz_cpu, nz_mem))
}
