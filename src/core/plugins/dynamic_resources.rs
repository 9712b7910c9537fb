//! `DynamicResources` (PreFilter), refusing: Muster does not implement
//! dynamic resource allocation (DRA) yet, and a pod whose `resourceClaims`
//! were ignored would start on a node without its devices. So a pod with
//! claims is unschedulable, with a reason that says so, rather than placed as
//! if it had none. The plugin cannot be disabled for the same reason.

use crate::framework::{CycleState, Plugin, PreFilterPlugin, PreFilterResult, Rejection, Snapshot};
use crate::model::PodInfo;

pub const NAME: &str = "DynamicResources";

#[derive(Debug, Default, Clone, Copy)]
pub struct DynamicResources;

impl Plugin for DynamicResources {
    fn name(&self) -> &'static str {
        NAME
    }
}

impl PreFilterPlugin for DynamicResources {
    fn pre_filter(&self, _: &mut CycleState, pod: &PodInfo, _: &Snapshot<'_>) -> PreFilterResult {
        if pod.constraints.resource_claims.is_empty() {
            return PreFilterResult::AllNodes;
        }
        let names: Vec<&str> = pod
            .constraints
            .resource_claims
            .iter()
            .map(|c| &**c)
            .collect();
        PreFilterResult::Reject(Rejection::unresolvable(format!(
            "pod uses resourceClaims [{}]: dynamic resource allocation (DRA) is not supported by this scheduler",
            names.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::test_util::pod;
    use serde_json::json;

    #[test]
    fn a_pod_with_claims_is_refused_naming_them() {
        let mut s = CycleState::new();
        let none = Snapshot::of_nodes(&[]);
        let plain = pod(json!({"containers": [{"name": "a"}]}));
        assert_eq!(
            DynamicResources.pre_filter(&mut s, &plain, &none),
            PreFilterResult::AllNodes
        );
        let claims = pod(json!({
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-claim"}],
            "containers": [{"name": "a", "resources": {"claims": [{"name": "gpu"}]}}]
        }));
        match DynamicResources.pre_filter(&mut s, &claims, &none) {
            PreFilterResult::Reject(r) => {
                assert!(r.unresolvable);
                assert!(r.reason.contains("[gpu]"), "{}", r.reason);
                assert!(r.reason.contains("(DRA) is not supported"), "{}", r.reason);
            }
            other => panic!("expected a rejection, got {other:?}"),
        }
    }
}
