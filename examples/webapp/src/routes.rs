//! The shared routes ConfigMap: one entry per WebApp, `<namespace>.<name>`
//! → URL, in the operator's own namespace (for, say, an ingress proxy to
//! read).
//!
//! It is the part of a WebApp the garbage collector cannot clean up: an
//! ownerReference cannot point across namespaces (and the ConfigMap is
//! shared), so a WebApp carries the [`FINALIZER`](crate::resource::FINALIZER)
//! while its entry exists, and the reconcile removes the entry before it
//! removes the finalizer.

use std::collections::BTreeMap;

use ctrlkit::prelude::{Informer, ObjectKey, SharedInformerFactory};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;

/// The routes ConfigMap's name.
pub const DEFAULT_NAME: &str = "webapp-routes";

/// Where the routes ConfigMap lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutesRef {
    /// Its namespace (the operator's own, in a Deployment).
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// `--routes-namespace`: the routes ConfigMap [`DEFAULT_NAME`] in the
/// namespace given.
impl std::str::FromStr for RoutesRef {
    type Err = EmptyNamespace;

    fn from_str(namespace: &str) -> Result<Self, EmptyNamespace> {
        if namespace.is_empty() {
            return Err(EmptyNamespace);
        }
        Ok(Self::new(namespace, DEFAULT_NAME))
    }
}

/// `webapp-routes` in `default`: `--routes-namespace`'s default.
impl Default for RoutesRef {
    fn default() -> Self {
        Self::new("default", DEFAULT_NAME)
    }
}

/// Displays the namespace: what `--routes-namespace` parses (its
/// default in `--help`).
impl std::fmt::Display for RoutesRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.namespace)
    }
}

/// An empty `--routes-namespace`.
#[derive(Debug, thiserror::Error)]
#[error("the routes namespace must not be empty")]
pub struct EmptyNamespace;

impl RoutesRef {
    /// The routes ConfigMap `namespace/name`.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The informer of just this ConfigMap, from `factory`.
    pub fn informer(&self, factory: &SharedInformerFactory) -> Informer<ConfigMap> {
        factory.namespaced(&self.namespace, self.watcher_config())
    }

    /// A watch of just this ConfigMap (its informer is scoped to the
    /// namespace as well).
    pub fn watcher_config(&self) -> watcher::Config {
        watcher::Config::default().fields(&format!("metadata.name={}", self.name))
    }

    /// The URL registered for `entry` in `routes` (the cached ConfigMap),
    /// if any.
    pub fn registered<'a>(&self, routes: Option<&'a ConfigMap>, entry: &str) -> Option<&'a str> {
        routes?.data.as_ref()?.get(entry).map(String::as_str)
    }

    /// The routes ConfigMap holding just `entry`, to create it.
    pub fn configmap(&self, entry: &str, url: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(self.name.clone());
        cm.metadata.namespace = Some(self.namespace.clone());
        cm.metadata.labels = Some(BTreeMap::from([(
            "app.kubernetes.io/managed-by".to_string(),
            "webapp-operator".to_string(),
        )]));
        cm.data = Some(BTreeMap::from([(entry.to_owned(), url.to_owned())]));
        cm
    }
}

/// The entry key of the WebApp `key`: `<namespace>.<name>` (ConfigMap keys
/// allow no `/`; namespaces have no dots, so the first dot splits it).
pub fn entry(key: &ObjectKey) -> String {
    format!("{}.{}", key.namespace, key.name)
}

/// The WebApps named by the entries of a routes ConfigMap: whenever it
/// changes or is deleted, each of them is reconciled and puts its entry
/// back if it went missing. Keys that are not entries are ignored.
pub fn owners_of(routes: &ConfigMap) -> Vec<ObjectKey> {
    routes
        .data
        .iter()
        .flat_map(|data| data.keys())
        .filter_map(|k| k.split_once('.'))
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
        .map(|(ns, name)| ObjectKey::new(ns, name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_to_keys() {
        let key = ObjectKey::new("shop", "web.v2");
        let routes = RoutesRef::new("ops", DEFAULT_NAME);
        let mut cm = routes.configmap(&entry(&key), "http://x");
        cm.data.as_mut().unwrap().extend([
            ("README".to_string(), "x".to_string()),
            (".x".to_string(), "y".to_string()),
        ]);
        assert_eq!(owners_of(&cm), vec![key.clone()]);
        assert_eq!(routes.registered(Some(&cm), &entry(&key)), Some("http://x"));
        assert_eq!(routes.registered(None, &entry(&key)), None);
        assert_eq!(
            routes.watcher_config().field_selector.as_deref(),
            Some("metadata.name=webapp-routes")
        );
    }
}
