//! Pods created beyond their owner's need: a pod created with a controller
//! reference to an owner that, on the server at that moment, already had
//! `spec.replicas` active pods of its own matching its selector. The test
//! cluster is watched through the driver's client (never faulted, never
//! delayed), so its view is the server's, in the server's order per kind.
//!
//! A controller creates pods only for replicas it sees missing; a create
//! beyond need means it acted on a cache that did not show pods already
//! created: what a sharded member gaining an owner must not do (the
//! previous holder's creations), and what expectations prevent within one
//! member. Creates within [`SPEC_SETTLE`] of a change of the owner's
//! `spec.replicas` are not judged: the owner and pod watches are separate
//! streams, and a scale-down may land while a create decided before it is
//! in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{StreamExt, stream};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::watcher;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use ctrlkit_podcontrol::pod::is_pod_active;

/// How long after a change of `spec.replicas` creates are not judged.
const SPEC_SETTLE: Duration = Duration::from_secs(5);

enum Seen {
    Owner(&'static str, Box<watcher::Event<DynamicObject>>),
    Pod(Box<watcher::Event<Pod>>),
}

struct OwnerState {
    what: String,
    app: String,
    replicas: i64,
    changed: Instant,
}

struct PodState {
    controller: Option<String>,
    app: Option<String>,
    active: bool,
}

#[derive(Default)]
struct State {
    owners: HashMap<String, OwnerState>,
    pods: HashMap<String, PodState>,
    creates: usize,
    beyond_need: Vec<String>,
}

impl State {
    fn owner(&mut self, short: &str, obj: &DynamicObject, deleted: bool) {
        let uid = obj.metadata.uid.clone().unwrap_or_default();
        if deleted {
            self.owners.remove(&uid);
            return;
        }
        let name = obj.metadata.name.clone().unwrap_or_default();
        let replicas = obj.data["spec"]["replicas"].as_i64().unwrap_or(1).max(0);
        let now = Instant::now();
        let changed = match self.owners.get(&uid) {
            Some(o) if o.replicas == replicas => o.changed,
            _ => now,
        };
        self.owners.insert(
            uid,
            OwnerState {
                what: format!("{short}/{name}"),
                app: name,
                replicas,
                changed,
            },
        );
    }

    fn pod(&mut self, pod: &Pod, listed: bool, deleted: bool) {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if deleted {
            self.pods.remove(&name);
            return;
        }
        let controller = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.clone());
        let state = PodState {
            controller,
            app: pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .cloned(),
            active: is_pod_active(pod),
        };
        if !listed
            && !self.pods.contains_key(&name)
            && let Some(uid) = state.controller.clone()
        {
            self.creates += 1;
            self.judge(&name, &uid);
        }
        self.pods.insert(name, state);
    }

    /// A pod `name` was just created for the owner `uid`.
    fn judge(&mut self, name: &str, uid: &str) {
        let Some(owner) = self.owners.get(uid) else {
            return;
        };
        if owner.changed.elapsed() < SPEC_SETTLE {
            return;
        }
        let have = self
            .pods
            .values()
            .filter(|p| {
                p.active
                    && p.controller.as_deref() == Some(uid)
                    && p.app.as_deref() == Some(&owner.app)
            })
            .count() as i64;
        if have >= owner.replicas {
            self.beyond_need.push(format!(
                "{}: pod {name} created while it had {have} active pods of {} replicas",
                owner.what, owner.replicas
            ));
        }
    }
}

/// Watches a namespace's owners and pods until [`finish`](Self::finish).
pub(crate) struct Creations {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl Creations {
    /// Starts watching `namespace` through `client` (the driver's).
    pub(crate) fn start(client: &kube::Client, namespace: &str) -> Creations {
        let owners = |short: &'static str, resource: ApiResource| {
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), namespace, &resource);
            watcher::watcher(api, watcher::Config::default())
                .filter_map(|e| async move { e.ok() })
                .map(move |e| Seen::Owner(short, Box::new(e)))
                .boxed()
        };
        let pods = watcher::watcher(
            Api::<Pod>::namespaced(client.clone(), namespace),
            watcher::Config::default(),
        )
        .filter_map(|e| async move { e.ok() })
        .map(|e| Seen::Pod(Box::new(e)))
        .boxed();
        let mut all = stream::select_all([
            owners("rs", ApiResource::erase::<ReplicaSet>(&())),
            owners("rc", ApiResource::erase::<ReplicationController>(&())),
            pods,
        ]);
        let state = Arc::new(Mutex::new(State::default()));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Some(seen) = all.next().await {
                let mut state = shared.lock().unwrap();
                match seen {
                    Seen::Owner(short, event) => match *event {
                        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => {
                            state.owner(short, &o, false);
                        }
                        watcher::Event::Delete(o) => state.owner(short, &o, true),
                        watcher::Event::Init | watcher::Event::InitDone => {}
                    },
                    Seen::Pod(event) => match *event {
                        watcher::Event::Apply(p) => state.pod(&p, false, false),
                        watcher::Event::InitApply(p) => state.pod(&p, true, false),
                        watcher::Event::Delete(p) => state.pod(&p, false, true),
                        watcher::Event::Init | watcher::Event::InitDone => {}
                    },
                }
            }
        });
        Creations { state, task }
    }

    /// Stops watching: the pod creates seen, and those beyond need.
    pub(crate) fn finish(self) -> (usize, Vec<String>) {
        self.task.abort();
        let mut state = self.state.lock().unwrap();
        (state.creates, std::mem::take(&mut state.beyond_need))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn owner(uid: &str, replicas: i64) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "rs-01", "uid": uid},
            "spec": {"replicas": replicas}
        }))
        .unwrap()
    }

    fn pod(name: &str, owner_uid: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "rs-01"}, "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs-01",
                "uid": owner_uid, "controller": true
            }]},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_create_for_an_owner_with_all_its_replicas_is_beyond_need() {
        let mut state = State::default();
        state.owner("rs", &owner("u1", 2), false);
        // Listed at the start: not creates.
        state.pod(&pod("p0", "u1"), true, false);
        // Within SPEC_SETTLE of the owner's (first) spec: not judged.
        state.pod(&pod("p1", "u1"), false, false);
        tokio::time::advance(SPEC_SETTLE).await;
        assert_eq!((state.creates, state.beyond_need.len()), (1, 0));
        // Two of two: a third is beyond need.
        state.pod(&pod("p2", "u1"), false, false);
        assert_eq!(state.beyond_need.len(), 1, "{:?}", state.beyond_need);
        assert!(state.beyond_need[0].contains("rs/rs-01: pod p2"));
        // One deleted: a replacement is needed.
        state.pod(&pod("p2", "u1"), false, true);
        state.pod(&pod("p1", "u1"), false, true);
        state.pod(&pod("p3", "u1"), false, false);
        assert_eq!((state.creates, state.beyond_need.len()), (3, 1));
        // Scaled up just now: not judged.
        state.owner("rs", &owner("u1", 5), false);
        state.pod(&pod("p4", "u1"), false, false);
        assert_eq!(state.beyond_need.len(), 1);
    }
}
