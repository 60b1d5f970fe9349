//! Shared helpers for the informer's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;

use ctrlkit_informer::{DeletedObject, EventHandler};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use parking_lot::Mutex;

/// A pod with the given identity and resourceVersion.
pub fn pod(ns: &str, name: &str, uid: &str, rv: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(ns.into()),
            uid: Some(uid.into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `pod` controlled by the owner with `owner_uid`.
pub fn owned_pod(ns: &str, name: &str, uid: &str, rv: &str, owner_uid: &str) -> Pod {
    let mut p = pod(ns, name, uid, rv);
    p.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: format!("rs-{owner_uid}"),
        uid: owner_uid.into(),
        controller: Some(true),
        ..Default::default()
    }]);
    p
}

/// One notification as a handler saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    Add {
        name: String,
        rv: String,
        initial: bool,
    },
    Update {
        name: String,
        old_rv: String,
        new_rv: String,
        same_arc: bool,
    },
    Delete {
        name: String,
        rv: String,
        tombstone: bool,
    },
}

fn name(p: &Pod) -> String {
    p.metadata.name.clone().unwrap_or_default()
}

fn rv(p: &Pod) -> String {
    p.metadata.resource_version.clone().unwrap_or_default()
}

pub fn add(name: &str, rv: &str, initial: bool) -> Seen {
    Seen::Add {
        name: name.into(),
        rv: rv.into(),
        initial,
    }
}

pub fn update(name: &str, old_rv: &str, new_rv: &str) -> Seen {
    Seen::Update {
        name: name.into(),
        old_rv: old_rv.into(),
        new_rv: new_rv.into(),
        same_arc: false,
    }
}

pub fn resync(name: &str, rv: &str) -> Seen {
    Seen::Update {
        name: name.into(),
        old_rv: rv.into(),
        new_rv: rv.into(),
        same_arc: true,
    }
}

pub fn delete(name: &str, rv: &str, tombstone: bool) -> Seen {
    Seen::Delete {
        name: name.into(),
        rv: rv.into(),
        tombstone,
    }
}

/// A handler recording what it sees, optionally tagged so several recorders
/// can share one log.
#[derive(Clone, Default)]
pub struct Recorder {
    pub tag: &'static str,
    pub log: Arc<Mutex<Vec<(&'static str, Seen)>>>,
    /// Also forwards every notification here, if set.
    pub forward: Option<tokio::sync::mpsc::UnboundedSender<Seen>>,
}

impl Recorder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn tagged(tag: &'static str, log: Arc<Mutex<Vec<(&'static str, Seen)>>>) -> Self {
        Self {
            tag,
            log,
            forward: None,
        }
    }

    /// A recorder that also forwards what it sees to the returned channel.
    pub fn forwarding() -> (Self, tokio::sync::mpsc::UnboundedReceiver<Seen>) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (
            Self {
                forward: Some(tx),
                ..Self::default()
            },
            rx,
        )
    }

    /// Everything seen so far, cleared.
    pub fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.log.lock())
            .into_iter()
            .map(|(_, s)| s)
            .collect()
    }

    /// Everything seen so far, sorted (for events whose order is unspecified).
    pub fn take_sorted(&self) -> Vec<Seen> {
        let mut v = self.take();
        v.sort_by_key(|s| format!("{s:?}"));
        v
    }

    fn push(&self, s: Seen) {
        if let Some(tx) = &self.forward {
            let _ = tx.send(s.clone());
        }
        self.log.lock().push((self.tag, s));
    }
}

impl EventHandler<Pod> for Recorder {
    fn on_add(&self, obj: &Arc<Pod>, is_in_initial_list: bool) {
        self.push(Seen::Add {
            name: name(obj),
            rv: rv(obj),
            initial: is_in_initial_list,
        });
    }

    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        self.push(Seen::Update {
            name: name(new),
            old_rv: rv(old),
            new_rv: rv(new),
            same_arc: Arc::ptr_eq(old, new),
        });
    }

    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        self.push(Seen::Delete {
            name: name(obj.object()),
            rv: rv(obj.object()),
            tombstone: obj.is_tombstone(),
        });
    }
}
