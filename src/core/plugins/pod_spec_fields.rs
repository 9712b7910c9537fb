//! Every field of a pod's spec, and what Muster does with it: honoured (by
//! which part), refused (the pod is unschedulable with a reason naming it), or
//! not a placement concern (and why). The test walks the field list of
//! `k8s-openapi`'s `PodSpec`, so a field added upstream fails it until it is
//! classified here and in `docs/plugins.md` ("Pod spec fields") — never a
//! silent ignore.

/// What Muster does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Placement honours it; the text names the plugin or stage.
    Honoured(&'static str),
    /// A pod setting it is unschedulable, with a reason naming it.
    Refused(&'static str),
    /// It does not affect where a pod may run; the text says why.
    NotPlacement(&'static str),
}

use Handling::*;

/// `spec` fields of a Pod, in the API's order.
pub const POD_SPEC_FIELDS: &[(&str, Handling)] = &[
    (
        "activeDeadlineSeconds",
        Honoured(
            "the pod's declared end (enforced by the kubelet): reservations rank nodes by when their pods end, and a pod ending before a reservation's expected start may backfill its room",
        ),
    ),
    (
        "affinity",
        Honoured("nodeAffinity: NodeAffinity; podAffinity and podAntiAffinity: InterPodAffinity"),
    ),
    (
        "automountServiceAccountToken",
        NotPlacement("a kubelet volume"),
    ),
    (
        "containers",
        Honoured(
            "resources: NodeResourcesFit, BalancedAllocation (extended resources a DeviceClass serves: DynamicResources on nodes not advertising them); ports[].hostPort: NodePorts; image: ImageLocality; resources.claims: DynamicResources (refused)",
        ),
    ),
    (
        "dnsConfig",
        NotPlacement("the kubelet's resolver configuration"),
    ),
    (
        "dnsPolicy",
        NotPlacement("the kubelet's resolver configuration"),
    ),
    ("enableServiceLinks", NotPlacement("environment variables")),
    (
        "ephemeralContainers",
        NotPlacement("added to running pods only"),
    ),
    (
        "evictionResponders",
        NotPlacement("eviction of a running pod"),
    ),
    ("hostAliases", NotPlacement("the pod's /etc/hosts")),
    ("hostIPC", NotPlacement("a node namespace, no capacity")),
    (
        "hostNetwork",
        Honoured("NodePorts, through the hostPorts the API server defaults for host-network pods"),
    ),
    ("hostPID", NotPlacement("a node namespace, no capacity")),
    (
        "hostUsers",
        NotPlacement("user namespaces, checked by the kubelet"),
    ),
    ("hostname", NotPlacement("the pod's hostname")),
    ("hostnameOverride", NotPlacement("the pod's hostname")),
    (
        "imagePullSecrets",
        NotPlacement("credentials for the kubelet"),
    ),
    (
        "initContainers",
        Honoured(
            "resources (the largest init step, sidecars summed): NodeResourcesFit (extended resources a DeviceClass serves: DynamicResources on nodes not advertising them); ports: NodePorts; image: ImageLocality",
        ),
    ),
    (
        "nodeName",
        Honoured("NodeName; a pod with it set is bound and accounted, never scheduled"),
    ),
    ("nodeSelector", Honoured("NodeAffinity")),
    (
        "os",
        NotPlacement(
            "not a scheduling constraint in kube-scheduler either; the kubelet rejects a mismatch (use nodeSelector kubernetes.io/os)",
        ),
    ),
    (
        "overhead",
        Honoured("NodeResourcesFit (added to the requests)"),
    ),
    (
        "preemptionPolicy",
        NotPlacement("limits preemption, which Muster does not perform yet"),
    ),
    (
        "priority",
        Honoured("queue order (PrioritySort) and the gang's order"),
    ),
    (
        "priorityClassName",
        Honoured("resolved to priority when spec.priority is unset"),
    ),
    ("readinessGates", NotPlacement("readiness of a running pod")),
    (
        "resourceClaims",
        Refused("DynamicResources: dynamic resource allocation is not supported"),
    ),
    (
        "resources",
        Honoured("pod-level requests: NodeResourcesFit, BalancedAllocation"),
    ),
    ("restartPolicy", NotPlacement("the kubelet's restarts")),
    (
        "runtimeClassName",
        Honoured(
            "through what RuntimeClass admission writes into nodeSelector, tolerations and overhead",
        ),
    ),
    (
        "schedulerName",
        Honoured("which profile schedules the pod; others' pods are only accounted"),
    ),
    (
        "schedulingGates",
        Honoured("SchedulingGates: gated pods are held"),
    ),
    (
        "schedulingGroup",
        Honoured("gang membership (Workload API)"),
    ),
    ("securityContext", NotPlacement("enforced by the kubelet")),
    ("serviceAccount", NotPlacement("identity")),
    ("serviceAccountName", NotPlacement("identity")),
    ("setHostnameAsFQDN", NotPlacement("the pod's hostname")),
    (
        "shareProcessNamespace",
        NotPlacement("the pod's process namespace"),
    ),
    ("subdomain", NotPlacement("the pod's DNS name")),
    (
        "terminationGracePeriodSeconds",
        NotPlacement("termination of a running pod"),
    ),
    ("tolerations", Honoured("TaintToleration")),
    ("topologySpreadConstraints", Honoured("PodTopologySpread")),
    (
        "volumes",
        Honoured(
            "persistentVolumeClaim and ephemeral: VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits; other kinds need no placement",
        ),
    ),
];

/// How Muster handles `field` of a pod's spec, if it is known.
pub fn handling(field: &str) -> Option<Handling> {
    POD_SPEC_FIELDS
        .iter()
        .find(|(name, _)| *name == field)
        .map(|(_, h)| *h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::de::{self, Deserialize, Visitor};

    /// A deserializer that only records the field names a type asks for.
    struct FieldNames(Vec<&'static str>);

    #[derive(Debug)]
    struct Stop;

    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("field names recorded")
        }
    }

    impl std::error::Error for Stop {}

    impl de::Error for Stop {
        fn custom<T: std::fmt::Display>(_: T) -> Self {
            Stop
        }
    }

    impl<'de> de::Deserializer<'de> for &mut FieldNames {
        type Error = Stop;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Stop> {
            self.0.extend_from_slice(fields);
            Err(Stop)
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }

    /// The fields of the newest `PodSpec` k8s-openapi has.
    fn upstream_fields() -> Vec<&'static str> {
        let mut names = FieldNames(Vec::new());
        let _ = k8s_openapi::api::core::v1::PodSpec::deserialize(&mut names);
        names.0
    }

    #[test]
    fn every_pod_spec_field_is_classified() {
        let upstream = upstream_fields();
        assert!(upstream.len() > 40, "read {} fields", upstream.len());
        let missing: Vec<_> = upstream.iter().filter(|f| handling(f).is_none()).collect();
        assert!(
            missing.is_empty(),
            "PodSpec fields with no decision in POD_SPEC_FIELDS: {missing:?}"
        );
        let stale: Vec<_> = POD_SPEC_FIELDS
            .iter()
            .map(|(f, _)| f)
            .filter(|f| !upstream.contains(f))
            .collect();
        assert!(stale.is_empty(), "not PodSpec fields: {stale:?}");
    }

    #[test]
    fn docs_list_every_field() {
        let docs = include_str!("../../../docs/plugins.md");
        for (field, _) in POD_SPEC_FIELDS {
            assert!(
                docs.contains(&format!("| `{field}` |")),
                "docs/plugins.md has no row for `{field}`"
            );
        }
    }
}
