//! Conversion of one stored object between the served versions of its
//! resource, as a real server's conversion functions do: the apiVersion is
//! rewritten, and where upstream's types differ between versions the fields
//! are renamed or reshaped. Custom resources (`conversion.strategy: None`)
//! and most built-in kinds differ only in apiVersion.
//!
//! The one structural difference served here is `scheduling.k8s.io`
//! v1alpha2 (1.36) against v1beta1 and v1alpha3 (1.37, identical shapes):
//!
//! | v1alpha2                                   | v1beta1 / v1alpha3              |
//! |--------------------------------------------|---------------------------------|
//! | PodGroup `spec.podGroupTemplateRef.workload.{workloadName,podGroupTemplateName}` | `spec.workloadRef.{workloadName,templateName}` |
//! | `disruptionMode: Pod` / `PodGroup` (PodGroup spec, Workload templates) | `disruptionMode: {single: {}}` / `{all: {}}` |
//! | (absent) | `preemptionPolicy`, `parentCompositePodGroupName`, Workload `compositePodGroupTemplates` |
//!
//! Fields a version lacks are dropped when an object is read or written in
//! it, as a real server's conversion to an older version loses them.
//! Condition types and reasons are data and stay as written.

use serde_json::{Map, Value, json};

/// The version part of an apiVersion (`v1` for `v1`, `v1beta1` for
/// `scheduling.k8s.io/v1beta1`).
fn version_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or(api_version, |(_, v)| v)
}

/// Rewrites `obj` (of `group`'s `kind`) from the version its apiVersion
/// names into version `to`.
pub fn convert(group: &str, kind: &str, obj: &mut Value, to: &str) {
    let from = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(|av| version_of(av).to_string())
        .unwrap_or_default();
    if from != to && group == "scheduling.k8s.io" {
        if from == "v1alpha2" {
            alpha2_up(kind, obj);
        }
        if to == "v1alpha2" {
            alpha2_down(kind, obj);
        }
    }
    let api_version = if group.is_empty() {
        to.to_string()
    } else {
        format!("{group}/{to}")
    };
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
    }
}

fn spec_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    obj.get_mut("spec").and_then(Value::as_object_mut)
}

/// Each of a Workload's pod group templates.
fn templates_mut(spec: &mut Map<String, Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    spec.get_mut("podGroupTemplates")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

/// v1alpha2 → the v1beta1 shape.
fn alpha2_up(kind: &str, obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else {
        return;
    };
    match kind {
        "PodGroup" => {
            if let Some(Value::Object(mut r)) = spec.remove("podGroupTemplateRef")
                && let Some(Value::Object(w)) = r.remove("workload")
            {
                let mut out = Map::new();
                if let Some(name) = w.get("workloadName") {
                    out.insert("workloadName".into(), name.clone());
                }
                if let Some(t) = w.get("podGroupTemplateName") {
                    out.insert("templateName".into(), t.clone());
                }
                spec.insert("workloadRef".into(), Value::Object(out));
            }
            disruption_up(spec);
        }
        "Workload" => templates_mut(spec).for_each(disruption_up),
        _ => {}
    }
}

/// The v1beta1 shape → v1alpha2.
fn alpha2_down(kind: &str, obj: &mut Value) {
    let Some(spec) = spec_mut(obj) else {
        return;
    };
    match kind {
        "PodGroup" => {
            if let Some(Value::Object(r)) = spec.remove("workloadRef") {
                let mut w = Map::new();
                if let Some(name) = r.get("workloadName") {
                    w.insert("workloadName".into(), name.clone());
                }
                if let Some(t) = r.get("templateName") {
                    w.insert("podGroupTemplateName".into(), t.clone());
                }
                spec.insert("podGroupTemplateRef".into(), json!({ "workload": w }));
            }
            spec.remove("parentCompositePodGroupName");
            spec.remove("preemptionPolicy");
            disruption_down(spec);
        }
        "Workload" => {
            spec.remove("compositePodGroupTemplates");
            for t in templates_mut(spec) {
                t.remove("preemptionPolicy");
                disruption_down(t);
            }
        }
        _ => {}
    }
}

/// (v1alpha2 word, v1beta1 member): `Pod` disrupts members one at a time,
/// `PodGroup` only together.
const DISRUPTION: &[(&str, &str)] = &[("Pod", "single"), ("PodGroup", "all")];

fn disruption_up(holder: &mut Map<String, Value>) {
    let Some(word) = holder.get("disruptionMode").and_then(Value::as_str) else {
        return;
    };
    // A word v1alpha2 does not define is kept as written (validation, not
    // conversion, refuses it).
    if let Some((_, member)) = DISRUPTION.iter().find(|(w, _)| *w == word) {
        holder.insert("disruptionMode".into(), json!({ *member: {} }));
    }
}

fn disruption_down(holder: &mut Map<String, Value>) {
    let Some(mode) = holder.get("disruptionMode").and_then(Value::as_object) else {
        return;
    };
    let word = DISRUPTION
        .iter()
        .find(|(_, m)| mode.contains_key(*m))
        .map(|(w, _)| *w);
    match word {
        Some(w) => holder.insert("disruptionMode".into(), json!(w)),
        None => holder.remove("disruptionMode"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pg_alpha2() -> Value {
        json!({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup",
            "metadata": {"name": "g"},
            "spec": {"podGroupTemplateRef": {"workload": {"workloadName": "w", "podGroupTemplateName": "t"}},
                     "disruptionMode": "PodGroup",
                     "schedulingPolicy": {"gang": {"minCount": 2}}},
            "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True"}]}})
    }

    #[test]
    fn podgroup_alpha2_to_beta1_and_back() {
        let mut pg = pg_alpha2();
        convert("scheduling.k8s.io", "PodGroup", &mut pg, "v1beta1");
        assert_eq!(pg["apiVersion"], "scheduling.k8s.io/v1beta1");
        assert_eq!(
            pg["spec"]["workloadRef"],
            json!({"workloadName": "w", "templateName": "t"})
        );
        assert!(pg["spec"].get("podGroupTemplateRef").is_none());
        assert_eq!(pg["spec"]["disruptionMode"], json!({"all": {}}));
        // Conditions are data: the 1.36 type name stays.
        assert_eq!(pg["status"]["conditions"][0]["type"], "PodGroupScheduled");
        // Every field is one the upstream v1beta1 type has.
        type Beta = k8s_openapi::api::scheduling::v1beta1::PodGroup;
        assert!(
            super::super::probe::unknown_fields::<Beta>(&pg)
                .unwrap()
                .is_empty()
        );
        convert("scheduling.k8s.io", "PodGroup", &mut pg, "v1alpha2");
        assert_eq!(pg, pg_alpha2());
    }

    #[test]
    fn fields_alpha2_lacks_are_dropped_going_down() {
        let mut pg = json!({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "PodGroup",
            "spec": {"parentCompositePodGroupName": "c", "preemptionPolicy": "Never",
                     "disruptionMode": {"single": {}}, "schedulingPolicy": {"basic": {}}}});
        convert("scheduling.k8s.io", "PodGroup", &mut pg, "v1alpha2");
        assert_eq!(
            pg["spec"],
            json!({"disruptionMode": "Pod", "schedulingPolicy": {"basic": {}}})
        );
        let mut wl = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
            "spec": {"compositePodGroupTemplates": [], "podGroupTemplates": [
                {"name": "t", "preemptionPolicy": "Never", "disruptionMode": {"all": {}},
                 "schedulingPolicy": {"gang": {"minCount": 1}}}]}});
        convert("scheduling.k8s.io", "Workload", &mut wl, "v1alpha2");
        assert_eq!(
            wl["spec"],
            json!({"podGroupTemplates": [{"name": "t", "disruptionMode": "PodGroup",
                "schedulingPolicy": {"gang": {"minCount": 1}}}]})
        );
        convert("scheduling.k8s.io", "Workload", &mut wl, "v1beta1");
        assert_eq!(
            wl["spec"]["podGroupTemplates"][0]["disruptionMode"],
            json!({"all": {}})
        );
    }

    #[test]
    fn beta1_and_alpha3_differ_only_in_api_version() {
        let mut pg = json!({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "spec": {"workloadRef": {"workloadName": "w"}, "preemptionPolicy": "Never"}});
        let spec = pg["spec"].clone();
        convert("scheduling.k8s.io", "PodGroup", &mut pg, "v1alpha3");
        assert_eq!(pg["apiVersion"], "scheduling.k8s.io/v1alpha3");
        assert_eq!(pg["spec"], spec);
        let mut cr = json!({"apiVersion": "x.io/v1", "kind": "Foo", "spec": {"a": 1}});
        convert("x.io", "Foo", &mut cr, "v2");
        assert_eq!(
            cr,
            json!({"apiVersion": "x.io/v2", "kind": "Foo", "spec": {"a": 1}})
        );
    }
}
