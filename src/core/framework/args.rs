//! Plugin arguments and the configuration error.
//!
//! A plugin with settings (kube-scheduler's typed `*Args`, e.g.
//! `NodeResourcesFitArgs`) decodes and validates them from its `pluginConfig`
//! entry in its own module; the registry keeps the decoded value in `Args`,
//! keyed by plugin name, and hands it to the plugin's factory. Every problem in
//! a configuration, wherever it is found, is one `ConfigError` naming the path
//! of the field (`profiles[0].pluginConfig[1].args.scoringStrategy.type`).

use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use serde::de::DeserializeOwned;

/// A configuration problem; `path` names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid scheduler configuration{}: {path}: {message}", source_name.as_ref().map(|s| format!(" {s}")).unwrap_or_default())]
pub struct ConfigError {
    /// The file the configuration came from, when it came from one.
    pub source_name: Option<String>,
    pub path: String,
    pub message: String,
}

impl ConfigError {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError {
            source_name: None,
            path: path.into(),
            message: message.into(),
        }
    }
}

/// Decoded, validated arguments of one plugin. Implemented for every type that
/// can be compared and debugged, so a plugin's args type needs no boilerplate.
pub trait PluginArgs: Debug + Send + Sync + 'static {
    fn as_any(&self) -> &dyn Any;
    fn eq_args(&self, other: &dyn PluginArgs) -> bool;
}

impl<T: Debug + PartialEq + Send + Sync + 'static> PluginArgs for T {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn eq_args(&self, other: &dyn PluginArgs) -> bool {
        other.as_any().downcast_ref::<T>() == Some(self)
    }
}

/// The arguments of every plugin of a profile that takes any: the configured
/// ones, else each plugin's defaults.
#[derive(Debug, Clone, Default)]
pub struct Args(BTreeMap<&'static str, Arc<dyn PluginArgs>>);

impl Args {
    pub fn insert(&mut self, plugin: &'static str, args: Arc<dyn PluginArgs>) {
        self.0.insert(plugin, args);
    }

    /// The arguments of `plugin` as `T`; `None` when it has none of that type.
    pub fn get<T: 'static>(&self, plugin: &str) -> Option<&T> {
        self.0.get(plugin)?.as_ref().as_any().downcast_ref::<T>()
    }

    /// [`Args::get`], or `T`'s default (a factory's arguments are always
    /// present once a profile validated; the default keeps factories total).
    pub fn get_or_default<T: Clone + Default + 'static>(&self, plugin: &str) -> T {
        self.get::<T>(plugin).cloned().unwrap_or_default()
    }
}

impl PartialEq for Args {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|((a, x), (b, y))| a == b && x.eq_args(y.as_ref()))
    }
}

/// Decodes `value` (a `pluginConfig[].args` object; `null` gives `T`'s
/// default) into the wire type `T`, naming the path of the first bad field.
/// The args' type meta (`apiVersion`, `kind` as strings, which
/// kube-scheduler's typed args carry) is accepted and dropped here, so wire
/// types list only their own fields.
pub fn decode<T: DeserializeOwned + Default>(
    path: &str,
    mut value: serde_json::Value,
) -> Result<T, ConfigError> {
    if value.is_null() {
        return Ok(T::default());
    }
    if let Some(map) = value.as_object_mut() {
        for key in ["apiVersion", "kind"] {
            if map.get(key).is_some_and(serde_json::Value::is_string) {
                map.remove(key);
            }
        }
    }
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let at = if inner == "." {
            path.to_string()
        } else {
            format!("{path}.{inner}")
        };
        ConfigError::at(at, e.into_inner().to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, Default)]
    struct A(u32);

    #[test]
    fn args_are_typed_and_compared_by_value() {
        let mut one = Args::default();
        one.insert("P", Arc::new(A(1)));
        assert_eq!(one.get::<A>("P"), Some(&A(1)));
        assert_eq!(one.get::<u32>("P"), None, "wrong type");
        assert_eq!(one.get_or_default::<A>("Q"), A(0));
        let mut same = Args::default();
        same.insert("P", Arc::new(A(1)));
        assert_eq!(one, same);
        same.insert("P", Arc::new(A(2)));
        assert_ne!(one, same);
    }

    #[test]
    fn decode_names_the_field() {
        #[derive(Debug, Default, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct W {
            #[allow(dead_code)]
            n: Option<u32>,
        }
        let e = decode::<W>("p.args", serde_json::json!({"n": "x"})).unwrap_err();
        assert_eq!(e.path, "p.args.n");
        let e = decode::<W>("p.args", serde_json::json!({"m": 1})).unwrap_err();
        assert!(e.message.contains("unknown field `m`"), "{e}");
        assert!(decode::<W>("p.args", serde_json::Value::Null).is_ok());
        // Type meta is accepted without the wire type naming it.
        let typed = serde_json::json!({"apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs", "n": 3});
        assert_eq!(decode::<W>("p.args", typed).unwrap().n, Some(3));
    }
}
