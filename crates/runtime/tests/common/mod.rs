//! Shared helpers for the runtime's tests: object builders, a custom
//! resource type, queue inspection.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;

use ctrlkit_informer::{Informer, ObjectKey};
use ctrlkit_workqueue::WorkQueue;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use kube::runtime::watcher::Event;
use serde::{Deserialize, Serialize};

/// A namespaced custom resource, written out the way
/// `#[derive(CustomResource)]` generates it: `example.com/v1` `App`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct App {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: AppSpec,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    #[serde(default)]
    pub replicas: i32,
}

impl k8s_openapi::Resource for App {
    const API_VERSION: &'static str = "example.com/v1";
    const GROUP: &'static str = "example.com";
    const KIND: &'static str = "App";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "apps";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for App {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// An object of kind `K` with the given identity and resourceVersion.
pub fn object<K: Resource + Default>(ns: &str, name: &str, uid: &str, rv: &str) -> K {
    let mut obj = K::default();
    let meta = obj.meta_mut();
    meta.namespace = (!ns.is_empty()).then(|| ns.to_owned());
    meta.name = Some(name.into());
    meta.uid = Some(uid.into());
    meta.resource_version = Some(rv.into());
    obj
}

/// `obj` with `labels`.
pub fn labelled<K: Resource>(mut obj: K, labels: &[(&str, &str)]) -> K {
    obj.meta_mut().labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    );
    obj
}

/// The controller reference of a child of `owner`.
pub fn controller_of<K: Resource<DynamicType = ()>>(owner: &K) -> OwnerReference {
    ctrlkit_childcontrol::controller_ref_for(owner).unwrap()
}

/// `child` controlled by `cref`.
pub fn owned_by<C: Resource>(mut child: C, cref: OwnerReference) -> C {
    child.meta_mut().owner_references = Some(vec![cref]);
    child
}

/// Feeds a complete first list to a manual informer.
pub fn list<K>(informer: &Informer<K>, objects: Vec<K>)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    informer.apply_event(Event::Init);
    for obj in objects {
        informer.apply_event(Event::InitApply(obj));
    }
    informer.apply_event(Event::InitDone);
}

/// Every key ready in the queue, in the order the queue hands them out.
pub fn drain(queue: &WorkQueue<ObjectKey>) -> Vec<ObjectKey> {
    let mut keys = Vec::new();
    while let Some(key) = queue.try_get() {
        queue.done(&key);
        keys.push(key);
    }
    keys
}

pub fn key(ns: &str, name: &str) -> ObjectKey {
    ObjectKey::new(ns, name)
}

pub fn arc<T>(t: T) -> Arc<T> {
    Arc::new(t)
}
