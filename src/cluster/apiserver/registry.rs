//! The resource table: which kinds the simulator serves, under which group,
//! version and plural, whether they are namespaced, their short names and
//! subresources. Adding a built-in resource is one entry in [`builtin_table`];
//! CustomResourceDefinitions add and remove entries at run time.
//!
//! Every version of one group+resource shares one storage, as on a real
//! server: objects are kept in the resource's storage version and converted
//! (`convert`, through `views`) for the version a client speaks.

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use serde_json::{Value, json};

/// One servable resource (one group/version/plural).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceDef {
    pub group: String,
    pub version: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Has a `/status` subresource: the main resource ignores status changes.
    pub status: bool,
    /// Has a `/binding` subresource (pods only).
    pub binding: bool,
    /// Registered by a CustomResourceDefinition (removed when it is deleted).
    pub from_crd: bool,
    /// Served from another resource's storage (see `views`).
    pub view: Option<View>,
    /// The version objects of this group+resource are stored in; every
    /// served version reads and writes the same objects through conversion.
    pub storage_version: String,
    /// A CRD version's `schema.openAPIV3Schema`: custom resources are pruned
    /// to it (`prune`). None for built-in kinds.
    pub schema: Option<Arc<Value>>,
}

/// Storage shared with another resource, converted by `views`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `events.k8s.io/v1` events stored as core `v1` events.
    CoreEvents,
}

impl ResourceDef {
    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage key: one table per group+resource, named by its storage
    /// version (so every served version of it shares the table), except
    /// views of another resource.
    pub fn key(&self) -> Arc<str> {
        match self.view {
            Some(View::CoreEvents) => Arc::from("/v1/events"),
            None => Arc::from(format!(
                "{}/{}/{}",
                self.group, self.storage_version, self.plural
            )),
        }
    }

    /// The apiVersion objects have in storage.
    pub fn stored_api_version(&self) -> String {
        match self.view {
            Some(View::CoreEvents) => "v1".into(),
            None if self.group.is_empty() => self.storage_version.clone(),
            None => format!("{}/{}", self.group, self.storage_version),
        }
    }

    /// Is this the version objects are stored in (no conversion needed)?
    pub fn is_storage_version(&self) -> bool {
        self.view.is_none() && self.version == self.storage_version
    }

    /// Is this the resource a CRD named `<plural>.<group>` would define?
    fn is_crd_resource(&self, group: &str, plural: &str) -> bool {
        self.group == group && self.plural == plural
    }
}

/// Compact constructor for the built-in table.
struct Entry<'a> {
    gv: &'a str,
    plural: &'a str,
    kind: &'a str,
    namespaced: bool,
    short: &'a [&'a str],
    status: bool,
}

impl Entry<'_> {
    fn build(&self) -> ResourceDef {
        let (group, version) = match self.gv.split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), self.gv.to_string()),
        };
        ResourceDef {
            group,
            version,
            plural: self.plural.to_string(),
            singular: self.kind.to_ascii_lowercase(),
            kind: self.kind.to_string(),
            namespaced: self.namespaced,
            short_names: self.short.iter().map(|s| s.to_string()).collect(),
            categories: if matches!(self.plural, "pods" | "services" | "deployments") {
                vec!["all".to_string()]
            } else {
                vec![]
            },
            status: self.status,
            binding: self.plural == "pods" && self.gv == "v1",
            from_crd: false,
            view: (self.gv == "events.k8s.io/v1").then_some(View::CoreEvents),
            // Chosen once the table is known (`assign_storage_versions`).
            storage_version: String::new(),
            schema: None,
        }
    }
}

const NS: bool = true;
const CLUSTER: bool = false;

/// Every built-in resource. One line per group/version/plural.
#[rustfmt::skip]
fn builtin_table() -> Vec<ResourceDef> {
    let e = |gv, plural, kind, namespaced, short: &'static [&'static str], status| {
        Entry { gv, plural, kind, namespaced, short, status }.build()
    };
    vec![
        e("v1", "namespaces", "Namespace", CLUSTER, &["ns"], true),
        e("v1", "nodes", "Node", CLUSTER, &["no"], true),
        e("v1", "pods", "Pod", NS, &["po"], true),
        e("v1", "events", "Event", NS, &["ev"], false),
        e("v1", "configmaps", "ConfigMap", NS, &["cm"], false),
        e("v1", "services", "Service", NS, &["svc"], true),
        e("v1", "replicationcontrollers", "ReplicationController", NS, &["rc"], true),
        e("v1", "serviceaccounts", "ServiceAccount", NS, &["sa"], false),
        e("v1", "persistentvolumeclaims", "PersistentVolumeClaim", NS, &["pvc"], true),
        e("v1", "persistentvolumes", "PersistentVolume", CLUSTER, &["pv"], true),
        e("v1", "podtemplates", "PodTemplate", NS, &[], false),
        e("events.k8s.io/v1", "events", "Event", NS, &["ev"], false),
        e("coordination.k8s.io/v1", "leases", "Lease", NS, &[], false),
        e("apps/v1", "deployments", "Deployment", NS, &["deploy"], true),
        e("apps/v1", "replicasets", "ReplicaSet", NS, &["rs"], true),
        e("apps/v1", "statefulsets", "StatefulSet", NS, &["sts"], true),
        e("batch/v1", "jobs", "Job", NS, &[], true),
        e("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", NS, &["pdb"], true),
        e("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", CLUSTER, &[], false),
        e("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", CLUSTER, &[], false),
        e("rbac.authorization.k8s.io/v1", "roles", "Role", NS, &[], false),
        e("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", NS, &[], false),
        e("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition", CLUSTER, &["crd", "crds"], true),
        e("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", CLUSTER, &["pc"], false),
        e("storage.k8s.io/v1", "storageclasses", "StorageClass", CLUSTER, &["sc"], false),
        e("storage.k8s.io/v1", "csinodes", "CSINode", CLUSTER, &[], false),
        e("storage.k8s.io/v1", "csidrivers", "CSIDriver", CLUSTER, &[], false),
        e("scheduling.k8s.io/v1alpha1", "workloads", "Workload", NS, &[], true),
        e("scheduling.k8s.io/v1alpha2", "workloads", "Workload", NS, &[], true),
        e("scheduling.k8s.io/v1alpha2", "podgroups", "PodGroup", NS, &[], true),
        e("scheduling.k8s.io/v1beta1", "workloads", "Workload", NS, &[], true),
        e("scheduling.k8s.io/v1beta1", "podgroups", "PodGroup", NS, &[], true),
        e("scheduling.k8s.io/v1alpha3", "workloads", "Workload", NS, &[], true),
        e("scheduling.k8s.io/v1alpha3", "podgroups", "PodGroup", NS, &[], true),
        e("scheduling.k8s.io/v1alpha3", "compositepodgroups", "CompositePodGroup", NS, &[], true),
        e("scheduling.x-k8s.io/v1alpha1", "podgroups", "PodGroup", NS, &["pg", "pgs"], true),
        e("scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup", NS, &["podgroup-v1beta1"], false),
        // Topology sources: Kueue serves Topology in v1beta1
        // (deprecated) and v1beta2 (storage); Volcano's HyperNode has a
        // status subresource.
        e("kueue.x-k8s.io/v1beta1", "topologies", "Topology", CLUSTER, &["topo"], false),
        e("kueue.x-k8s.io/v1beta2", "topologies", "Topology", CLUSTER, &["topo"], false),
        e("topology.volcano.sh/v1alpha1", "hypernodes", "HyperNode", CLUSTER, &["hn"], true),
        // Dynamic Resource Allocation: v1 is the storage version; v1beta2
        // has the same shape (`convert` rewrites the apiVersion only).
        e("resource.k8s.io/v1beta2", "deviceclasses", "DeviceClass", CLUSTER, &[], false),
        e("resource.k8s.io/v1beta2", "resourceclaims", "ResourceClaim", NS, &[], true),
        e("resource.k8s.io/v1beta2", "resourceclaimtemplates", "ResourceClaimTemplate", NS, &[], false),
        e("resource.k8s.io/v1beta2", "resourceslices", "ResourceSlice", CLUSTER, &[], false),
        e("resource.k8s.io/v1beta2", "devicetaintrules", "DeviceTaintRule", CLUSTER, &[], true),
        e("resource.k8s.io/v1", "deviceclasses", "DeviceClass", CLUSTER, &[], false),
        e("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", NS, &[], true),
        e("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", NS, &[], false),
        e("resource.k8s.io/v1", "resourceslices", "ResourceSlice", CLUSTER, &[], false),
        e("resource.k8s.io/v1", "devicetaintrules", "DeviceTaintRule", CLUSTER, &[], true),
        // Served when the cluster has node pools (the simulated
        // cluster-autoscaler's API, `autoscaler.rs`).
        e("autoscaling.x-k8s.io/v1", "provisioningrequests", "ProvisioningRequest", NS, &["provreq", "provreqs"], true),
    ]
}

impl ResourceDef {
    /// Whether `name` (a group, or `group/version`) covers this resource.
    fn is_named_by(&self, name: &str) -> bool {
        match name.split_once('/') {
            Some((group, version)) => group == self.group && version == self.version,
            None => name == self.group,
        }
    }
}

/// The live resource table, shared by handlers and the CRD controller.
#[derive(Debug)]
pub struct Registry {
    defs: RwLock<Vec<Arc<ResourceDef>>>,
}

impl Registry {
    /// The built-in table minus every resource `without` names: an entry is
    /// an API group (`scheduling.k8s.io`, every version) or one group/version
    /// (`scheduling.k8s.io/v1beta1`).
    pub fn new(without: &BTreeSet<String>) -> Self {
        let mut defs: Vec<ResourceDef> = builtin_table()
            .into_iter()
            .filter(|d| !without.iter().any(|w| d.is_named_by(w)))
            .collect();
        assign_storage_versions(&mut defs);
        let defs = defs.into_iter().map(Arc::new).collect();
        Registry {
            defs: RwLock::new(defs),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<ResourceDef>>> {
        // A panic while holding the lock cannot leave the Vec inconsistent.
        self.defs.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Vec<Arc<ResourceDef>>> {
        self.defs.write().unwrap_or_else(|e| e.into_inner())
    }

    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.read().clone()
    }

    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.read()
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .cloned()
    }

    /// Is `plural` a namespaced resource in group/version? Decides how
    /// `/api/v1/namespaces/{x}/{y}` is read.
    pub fn is_namespaced_plural(&self, group: &str, version: &str, plural: &str) -> bool {
        self.lookup(group, version, plural)
            .is_some_and(|d| d.namespaced)
    }

    /// Groups with their versions in table order (preferred version first:
    /// the last-listed, most mature one).
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.read().iter() {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, versions)) if !versions.contains(&d.version) => {
                    versions.push(d.version.clone())
                }
                Some(_) => {}
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        for (_, versions) in &mut out {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }

    pub fn in_group_version(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.read()
            .iter()
            .filter(|d| d.group == group && d.version == version)
            .cloned()
            .collect()
    }

    /// Registers the resources a CRD defines; returns the entries added
    /// (versions already served, e.g. built in, are left alone).
    pub fn register_crd(&self, defs: Vec<ResourceDef>) -> Vec<Arc<ResourceDef>> {
        let mut table = self.write();
        let mut added = Vec::new();
        for def in defs {
            let exists = table.iter().any(|d| {
                d.group == def.group && d.version == def.version && d.plural == def.plural
            });
            if !exists {
                let def = Arc::new(def);
                table.push(def.clone());
                added.push(def);
            }
        }
        added
    }

    /// Removes the CRD-registered resources of `plural.group`; returns them.
    pub fn unregister_crd(&self, group: &str, plural: &str) -> Vec<Arc<ResourceDef>> {
        let mut table = self.write();
        let (gone, kept) = table
            .drain(..)
            .partition(|d| d.from_crd && d.is_crd_resource(group, plural));
        *table = kept;
        gone
    }
}

/// Versions that share no conversion with the others of their resource:
/// `scheduling.k8s.io/v1alpha1` Workloads (1.35) embed their pod groups,
/// a shape no later version can hold, and no real server serves v1alpha1
/// beside v1alpha2 (1.36 removed it). Served here from a storage of their
/// own, as if from an older cluster.
const OWN_STORAGE: &[(&str, &str, &str)] = &[("scheduling.k8s.io", "v1alpha1", "workloads")];

/// Picks each built-in resource's storage version among its served ones:
/// the most mature (GA, else beta, else the newest alpha), which is the
/// version a real server stores a resource in once it is served in that
/// version (1.37 stores PodGroups and Workloads as v1beta1, and
/// CompositePodGroups, alpha only, as v1alpha3).
fn assign_storage_versions(defs: &mut [ResourceDef]) {
    let own = |d: &ResourceDef| {
        OWN_STORAGE
            .iter()
            .any(|(g, v, p)| d.group == *g && d.version == *v && d.plural == *p)
    };
    let mut chosen: Vec<((String, String), String)> = Vec::new();
    for d in defs.iter().filter(|d| !own(d)) {
        let key = (d.group.clone(), d.plural.clone());
        match chosen.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) if version_priority(&d.version) > version_priority(v) => {
                *v = d.version.clone()
            }
            Some(_) => {}
            None => chosen.push((key, d.version.clone())),
        }
    }
    for d in defs.iter_mut() {
        d.storage_version = if own(d) {
            d.version.clone()
        } else {
            chosen
                .iter()
                .find(|((g, p), _)| *g == d.group && *p == d.plural)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| d.version.clone())
        };
    }
}

/// Kubernetes version ordering: GA > beta > alpha, then by numbers.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = v.strip_prefix('v').unwrap_or(v);
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    let (stage, minor) = if let Some(n) = tail.strip_prefix("beta") {
        (1, n.parse().unwrap_or(0))
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (0, n.parse().unwrap_or(0))
    } else if tail.is_empty() {
        (2, 0)
    } else {
        (0, 0)
    };
    (stage, major, minor)
}

/// The verbs advertised in discovery for a resource.
pub fn verbs() -> Value {
    json!([
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch"
    ])
}

/// The resource definitions a CRD object describes (one per served version).
pub fn defs_from_crd(crd: &Value) -> Result<Vec<ResourceDef>, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = str_at(spec, &["group"]).ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = str_at(names, &["plural"]).ok_or("spec.names.plural is required")?;
    let kind = str_at(names, &["kind"]).ok_or("spec.names.kind is required")?;
    let singular = str_at(names, &["singular"])
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_ascii_lowercase());
    let strings = |key: &str| -> Vec<String> {
        names
            .get(key)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = str_at(spec, &["scope"]) != Some("Cluster");
    let versions = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    // The version flagged `storage: true` (exactly one, on a real server);
    // without one, the most mature served version.
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| str_at(v, &["name"]))
        .map(str::to_string);
    let mut defs = Vec::new();
    for v in versions {
        if v.get("served").and_then(Value::as_bool) == Some(false) {
            continue;
        }
        let version = str_at(v, &["name"]).ok_or("spec.versions[].name is required")?;
        defs.push(ResourceDef {
            group: group.to_string(),
            version: version.to_string(),
            plural: plural.to_string(),
            singular: singular.clone(),
            kind: kind.to_string(),
            namespaced,
            short_names: strings("shortNames"),
            categories: strings("categories"),
            status: v.pointer("/subresources/status").is_some(),
            binding: false,
            from_crd: true,
            view: None,
            storage_version: storage_version.clone().unwrap_or_default(),
            schema: v
                .pointer("/schema/openAPIV3Schema")
                .filter(|s| s.is_object())
                .cloned()
                .map(Arc::new),
        });
    }
    if defs.is_empty() {
        return Err("spec.versions must contain a served version".into());
    }
    if storage_version.is_none() {
        let newest = defs
            .iter()
            .map(|d| d.version.clone())
            .max_by_key(|v| version_priority(v))
            .unwrap_or_default();
        for d in &mut defs {
            d.storage_version = newest.clone();
        }
    }
    Ok(defs)
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter()
        .try_fold(v, |v, k| v.get(*k))
        .and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_ga_beta_alpha() {
        let mut v = vec!["v1alpha1", "v1beta1", "v1", "v1alpha2", "v2beta1"];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(v, ["v1", "v2beta1", "v1beta1", "v1alpha2", "v1alpha1"]);
    }

    #[test]
    fn without_groups_drops_every_version() {
        let reg = Registry::new(&["scheduling.k8s.io".to_string()].into());
        assert!(
            reg.lookup("scheduling.k8s.io", "v1beta1", "podgroups")
                .is_none()
        );
        assert!(
            reg.lookup("scheduling.k8s.io", "v1", "priorityclasses")
                .is_none()
        );
        assert!(reg.lookup("", "v1", "pods").is_some());
    }

    #[test]
    fn without_a_group_version_drops_only_that_version() {
        let reg = Registry::new(&["scheduling.k8s.io/v1beta1".to_string()].into());
        for plural in ["podgroups", "workloads"] {
            assert!(reg.lookup("scheduling.k8s.io", "v1beta1", plural).is_none());
            assert!(
                reg.lookup("scheduling.k8s.io", "v1alpha2", plural)
                    .is_some()
            );
        }
        assert!(
            reg.lookup("scheduling.k8s.io", "v1", "priorityclasses")
                .is_some()
        );
    }

    #[test]
    fn every_version_of_a_resource_shares_one_storage() {
        let reg = Registry::new(&BTreeSet::new());
        let def = |v: &str, plural: &str| reg.lookup("scheduling.k8s.io", v, plural).unwrap();
        for plural in ["podgroups", "workloads"] {
            let keys: Vec<_> = ["v1alpha2", "v1beta1", "v1alpha3"]
                .iter()
                .map(|v| def(v, plural).key())
                .collect();
            assert!(keys.iter().all(|k| *k == keys[0]), "{keys:?}");
            assert_eq!(def("v1alpha2", plural).storage_version, "v1beta1");
        }
        assert_eq!(
            def("v1alpha3", "compositepodgroups").stored_api_version(),
            "scheduling.k8s.io/v1alpha3"
        );
        // v1alpha1 Workloads cannot convert: a storage of their own.
        assert_ne!(
            def("v1alpha1", "workloads").key(),
            def("v1beta1", "workloads").key()
        );
        assert_eq!(
            reg.lookup("", "v1", "pods").unwrap().key().as_ref(),
            "/v1/pods"
        );
    }

    #[test]
    fn topology_sources_are_served_cluster_scoped() {
        let reg = Registry::new(&BTreeSet::new());
        let v1beta1 = reg
            .lookup("kueue.x-k8s.io", "v1beta1", "topologies")
            .unwrap();
        let v1beta2 = reg
            .lookup("kueue.x-k8s.io", "v1beta2", "topologies")
            .unwrap();
        assert!(!v1beta1.namespaced && !v1beta1.status);
        assert_eq!(v1beta1.key(), v1beta2.key());
        assert_eq!(v1beta1.storage_version, "v1beta2");
        assert_eq!(v1beta2.short_names, ["topo"]);
        let hn = reg
            .lookup("topology.volcano.sh", "v1alpha1", "hypernodes")
            .unwrap();
        assert!(!hn.namespaced && hn.status);
        assert_eq!(
            (hn.kind.as_str(), hn.short_names.as_slice()),
            ("HyperNode", &["hn".to_string()][..])
        );
        let reg = Registry::new(&["kueue.x-k8s.io".to_string()].into());
        assert!(
            reg.lookup("kueue.x-k8s.io", "v1beta2", "topologies")
                .is_none()
        );
    }

    #[test]
    fn a_disabled_version_moves_the_storage_version() {
        let reg = Registry::new(&["scheduling.k8s.io/v1beta1".to_string()].into());
        let pg = reg
            .lookup("scheduling.k8s.io", "v1alpha2", "podgroups")
            .unwrap();
        assert_eq!(pg.storage_version, "v1alpha3");
        let reg = Registry::new(
            &["scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha3"]
                .map(String::from)
                .into(),
        );
        let pg = reg
            .lookup("scheduling.k8s.io", "v1alpha2", "podgroups")
            .unwrap();
        assert!(pg.is_storage_version());
    }

    #[test]
    fn a_crd_names_its_storage_version_and_schemas() {
        let crd = json!({"spec": {"group": "x.io", "names": {"plural": "foos", "kind": "Foo"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v2", "served": true, "storage": false}]}});
        let defs = defs_from_crd(&crd).unwrap();
        assert!(defs.iter().all(|d| d.storage_version == "v1"));
        assert!(defs[0].schema.is_some() && defs[1].schema.is_none());
        assert_eq!(defs[0].key(), defs[1].key());
    }

    #[test]
    fn crd_defines_one_resource_per_served_version() {
        let crd = json!({"spec": {"group": "x.io", "scope": "Namespaced",
            "names": {"plural": "foos", "kind": "Foo", "shortNames": ["fo"]},
            "versions": [{"name": "v1", "served": true, "subresources": {"status": {}}},
                         {"name": "v2", "served": false}]}});
        let defs = defs_from_crd(&crd).unwrap();
        assert_eq!(defs.len(), 1);
        assert!(defs[0].status && defs[0].namespaced && defs[0].from_crd);
        assert_eq!(defs[0].short_names, ["fo"]);
    }
}
