//! Fixtures shared by the controller unit tests: owners and pods built from
//! JSON (so they compile against every k8s-openapi version), a fake owner
//! client, and a harness wiring a controller to hand-fed informers.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit_informer::{DeletedObject, EventHandler, Informer, ObjectKey};
use ctrlkit_podcontrol::FakePodControl;
use ctrlkit_replicaset::{Controller, ControllerOptions, OwnerClient, ReplicaOwner};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::core::Status;
use kube::runtime::watcher::Event;
use parking_lot::Mutex;
use serde_json::{Value, json};

pub const NS: &str = "default";

/// A ReplicaSet `name` with `replicas`, selecting and templating `app=<app>`.
pub fn replica_set(name: &str, replicas: i32, app: &str) -> ReplicaSet {
    replica_set_from(json!({
        "metadata": {
            "name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "18", "generation": 1
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "foo/bar"}]}
            }
        }
    }))
}

/// A ReplicaSet `name` to create on a cluster (no uid or version), with
/// `replicas` pods of `template_spec`, selecting `app=<name>` (cut to 40
/// characters: label values are at most 63, names may be longer).
pub fn live_replica_set(name: &str, replicas: i32, template_spec: Value) -> ReplicaSet {
    let app = &name[..name.len().min(40)];
    replica_set_from(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": template_spec}
        }
    }))
}

pub fn replica_set_from(value: Value) -> ReplicaSet {
    serde_json::from_value(value).unwrap()
}

/// A ReplicationController `name` with `replicas`, selecting `app=<app>`.
pub fn replication_controller(name: &str, replicas: i32, app: &str) -> ReplicationController {
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "18", "generation": 1
        },
        "spec": {
            "replicas": replicas,
            "selector": {"app": app},
            "template": {
                "metadata": {"labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "image": "foo/bar"}]}
            }
        }
    }))
    .unwrap()
}

/// Edits an object through its JSON form.
pub fn edit<K: serde::Serialize + serde::de::DeserializeOwned>(
    obj: &K,
    f: impl FnOnce(&mut Value),
) -> K {
    let mut v = serde_json::to_value(obj).unwrap();
    f(&mut v);
    serde_json::from_value(v).unwrap()
}

/// How a test pod looks.
#[derive(Clone, Debug)]
pub struct PodSpec {
    pub phase: &'static str,
    pub ready: bool,
    /// Seconds ago the pod became ready (its Ready lastTransitionTime).
    pub ready_since_secs: i64,
    pub node: Option<String>,
    pub labels: Value,
    /// `(kind, name, uid)` of the controller.
    pub controller: Option<(String, String, String)>,
    pub deleting: bool,
}

impl PodSpec {
    pub fn running(app: &str) -> Self {
        Self {
            phase: "Running",
            ready: true,
            ready_since_secs: 3600,
            node: Some("node-1".into()),
            labels: json!({"app": app}),
            controller: None,
            deleting: false,
        }
    }

    pub fn owned_by<O: ReplicaOwner>(mut self, owner: &O) -> Self {
        let meta = owner.meta();
        self.controller = Some((
            <O as k8s_openapi::Resource>::KIND.to_owned(),
            meta.name.clone().unwrap(),
            meta.uid.clone().unwrap(),
        ));
        self
    }

    pub fn not_ready(mut self) -> Self {
        self.ready = false;
        self
    }

    pub fn pending(mut self) -> Self {
        self.phase = "Pending";
        self.ready = false;
        self
    }

    pub fn on_node(mut self, node: &str) -> Self {
        self.node = Some(node.into());
        self
    }

    pub fn unscheduled(mut self) -> Self {
        self.node = None;
        self
    }

    pub fn ready_since(mut self, secs: i64) -> Self {
        self.ready_since_secs = secs;
        self
    }

    pub fn deleting(mut self) -> Self {
        self.deleting = true;
        self
    }

    pub fn build(&self, name: &str) -> Pod {
        let now = Timestamp::now();
        let ready_at = now - SignedDuration::from_secs(self.ready_since_secs);
        let mut meta = json!({
            "name": name, "namespace": NS, "uid": format!("uid-{name}"),
            "resourceVersion": "1", "labels": self.labels,
            "creationTimestamp": (now - SignedDuration::from_secs(7200)).to_string(),
        });
        if let Some((kind, owner, uid)) = &self.controller {
            let api_version = if kind == "ReplicaSet" {
                "apps/v1"
            } else {
                "v1"
            };
            meta["ownerReferences"] = json!([{
                "apiVersion": api_version, "kind": kind, "name": owner, "uid": uid,
                "controller": true, "blockOwnerDeletion": true
            }]);
        }
        if self.deleting {
            meta["deletionTimestamp"] = json!(now.to_string());
        }
        let mut spec = json!({"containers": [{"name": "c", "image": "foo/bar"}]});
        if let Some(node) = &self.node {
            spec["nodeName"] = json!(node);
        }
        serde_json::from_value(json!({
            "metadata": meta,
            "spec": spec,
            "status": {
                "phase": self.phase,
                "conditions": [{
                    "type": "Ready",
                    "status": if self.ready { "True" } else { "False" },
                    "lastTransitionTime": ready_at.to_string(),
                }]
            }
        }))
        .unwrap()
    }
}

/// One recorded call to the fake owner client.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientCall {
    Get(String),
    UpdateStatus(Value),
}

/// An [`OwnerClient`] that answers gets with a stored object, accepts status
/// writes (echoing them back with a bumped resourceVersion) and fails on cue.
#[derive(Default)]
pub struct FakeOwnerClient<O> {
    pub live: Mutex<Option<O>>,
    pub calls: Mutex<Vec<ClientCall>>,
    /// Errors (HTTP codes) for the next status writes, in order.
    pub update_failures: Mutex<VecDeque<u16>>,
}

pub fn api_error(code: u16) -> kube::Error {
    let reason = match code {
        409 => "Conflict",
        404 => "NotFound",
        _ => "InternalError",
    };
    kube::Error::Api(
        Status::failure("fake error", reason)
            .with_code(code)
            .boxed(),
    )
}

impl<O: Clone> FakeOwnerClient<O> {
    pub fn new() -> Self {
        Self {
            live: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            update_failures: Mutex::new(VecDeque::new()),
        }
    }

    pub fn gets(&self) -> usize {
        self.calls
            .lock()
            .iter()
            .filter(|c| matches!(c, ClientCall::Get(_)))
            .count()
    }

    pub fn updates(&self) -> Vec<Value> {
        self.calls
            .lock()
            .iter()
            .filter_map(|c| match c {
                ClientCall::UpdateStatus(v) => Some(v.clone()),
                ClientCall::Get(_) => None,
            })
            .collect()
    }

    /// The status of the last write.
    pub fn last_status(&self) -> Value {
        self.updates()
            .last()
            .map(|v| v["status"].clone())
            .unwrap_or(Value::Null)
    }
}

#[async_trait]
impl<O: ReplicaOwner> OwnerClient<O> for FakeOwnerClient<O> {
    async fn get(&self, _namespace: &str, name: &str) -> Result<Option<O>, kube::Error> {
        self.calls.lock().push(ClientCall::Get(name.to_owned()));
        Ok(self.live.lock().clone())
    }

    async fn update_status(&self, owner: &O) -> Result<O, kube::Error> {
        self.calls.lock().push(ClientCall::UpdateStatus(
            serde_json::to_value(owner).unwrap(),
        ));
        if let Some(code) = self.update_failures.lock().pop_front() {
            return Err(api_error(code));
        }
        let mut updated = owner.clone();
        let rv = updated.meta().resource_version.clone().unwrap_or_default();
        updated.meta_mut().resource_version = Some(format!("{rv}1"));
        Ok(updated)
    }
}

/// A controller wired to hand-fed informers, a fake pod control and a fake
/// owner client.
pub struct Harness<O: ReplicaOwner> {
    pub pods: Informer<Pod>,
    pub owners: Informer<O>,
    pub fake: FakePodControl,
    pub client: Arc<FakeOwnerClient<O>>,
    pub controller: Controller<O>,
}

impl<O: ReplicaOwner> Harness<O> {
    pub fn new() -> Self {
        Self::with_burst(500)
    }

    pub fn with_burst(burst: usize) -> Self {
        Self::with_options(ControllerOptions {
            burst_replicas: burst,
            ..ControllerOptions::default()
        })
    }

    pub fn with_options(options: ControllerOptions) -> Self {
        let pods = Informer::<Pod>::manual().build();
        let owners = Informer::<O>::manual().build();
        let fake = FakePodControl::new();
        let client = Arc::new(FakeOwnerClient::new());
        let controller = Controller::from_parts(
            pods.clone(),
            owners.clone(),
            Arc::new(fake.clone()),
            client.clone(),
            options,
        )
        .unwrap();
        Self {
            pods,
            owners,
            fake,
            client,
            controller,
        }
    }

    /// Completes both informers' first (empty) list, as a running informer
    /// does before the workers start. Read-own-writes only consults synced
    /// caches, so tests of it call this first.
    pub fn synced(self) -> Self {
        self.pods.apply_event(Event::Init);
        self.pods.apply_event(Event::InitDone);
        self.owners.apply_event(Event::Init);
        self.owners.apply_event(Event::InitDone);
        self
    }

    /// Makes the cache show the owner as the last status write returned
    /// it (handlers run): what the watch delivers after a status write.
    pub fn observe_status_write(&self) {
        let mut written: O =
            serde_json::from_value(self.client.updates().last().unwrap().clone()).unwrap();
        let rv = written.meta().resource_version.clone().unwrap_or_default();
        written.meta_mut().resource_version = Some(format!("{rv}1"));
        self.owners.apply_event(Event::Apply(written));
    }

    /// Puts the owner in the cache (handlers run) and makes it what the
    /// live read returns.
    pub fn owner(&self, owner: &O) {
        *self.client.live.lock() = Some(owner.clone());
        self.owners.apply_event(Event::Apply(owner.clone()));
    }

    /// Adds or updates a pod in the cache (handlers run).
    pub fn pod(&self, pod: &Pod) {
        self.pods.apply_event(Event::Apply(pod.clone()));
    }

    /// Removes a pod from the cache (handlers run).
    pub fn remove_pod(&self, pod: &Pod) {
        self.pods.apply_event(Event::Delete(pod.clone()));
    }

    /// Feeds every pod the fake created since the last call into the cache,
    /// as the informer would show them.
    pub fn observe_created(&self) -> usize {
        let created = self.fake.created_pods();
        let n = created.len();
        for pod in created {
            self.pod(&pod);
        }
        self.fake.clear();
        n
    }

    /// Calls the controller's pod update handler, as the pod informer
    /// would, with any two states.
    pub fn update_pod(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.pod_handler().on_update(old, new);
    }

    /// Calls the controller's pod delete handler (tombstones too).
    pub fn delete_pod(&self, pod: &DeletedObject<Pod>) {
        self.pod_handler().on_delete(pod);
    }

    /// Calls the controller's owner update handler with any two states.
    pub fn update_owner(&self, old: &Arc<O>, new: &Arc<O>) {
        self.controller
            .runtime()
            .owner_handler()
            .on_update(old, new);
    }

    /// Calls the controller's owner delete handler (tombstones too).
    pub fn delete_owner(&self, owner: &DeletedObject<O>) {
        self.controller.runtime().owner_handler().on_delete(owner);
    }

    fn pod_handler(&self) -> Arc<dyn EventHandler<Pod>> {
        self.controller.runtime().owned_handler::<Pod>().unwrap()
    }

    /// Takes every key in the queue now (marking each done), sorted.
    pub fn drain_queue(&self) -> Vec<String> {
        let queue = self.controller.runtime().queue();
        let mut keys = Vec::new();
        while let Some(key) = queue.try_get() {
            queue.done(&key);
            keys.push(key.to_string());
        }
        keys.sort();
        keys
    }

    pub fn key(owner: &O) -> ObjectKey {
        ObjectKey::from_object(owner)
    }
}

/// The typed key of `namespace/name` (or a cluster-scoped `name`).
pub fn key(key: &str) -> ObjectKey {
    key.parse().unwrap()
}

/// Polls `check` every 50 ms (tokio time) until it holds; panics after
/// `deadline`.
pub async fn eventually<F, Fut>(what: &str, deadline: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    loop {
        if check().await {
            return;
        }
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
