//! Correcting children whose slot label does not name their controller's
//! slot.
//!
//! A member's child informers ask the server only for the children
//! labelled with a claimed slot (and the unlabelled ones), so a child
//! whose [`SLOT_LABEL`] is wrong is seen by the member claiming the slot
//! its label names and by no one else. Two ways it happens: the label was
//! edited by hand, or the child lost its controller (released by its
//! owner, or orphaned by the garbage collector when its owner was deleted
//! with `propagationPolicy: Orphan`) and kept the label of an owner it no
//! longer has. Left alone, an orphan with a stale label could be adopted
//! only by owners of that one slot, and a child labelled with another
//! slot would be invisible to the member syncing its owner, which would
//! then create a replacement.
//!
//! The member that sees such a child therefore patches the label: to its
//! controller's slot, or away for an orphan (an unlabelled child reaches
//! every member, so any owner may adopt it). The patch carries the
//! child's UID, so it never touches a newer object of the same name; a
//! child that changed again meanwhile is reported again by its next
//! event.
//!
//! The member holding a child's owner also writes the label on a child
//! that has none (created before sharding, or by a control without the
//! labeller), so the server can select it from then on.

use std::collections::HashMap;
use std::time::Duration;

use ctrlkit_informer::controller_ref;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;

use super::child_label::{SLOT_LABEL, names_slot, slot_label};
use super::slots::{SlotSet, slot_of_uid};

/// At most this many children wait for a correction at once; more are
/// reported again by their next event or list. Bounds the memory a
/// cluster full of hand-edited labels can take.
const MAX_PENDING: usize = 10_000;

/// Attempts per child before a failing patch is given up (logged); its
/// next event reports it again.
const MAX_ATTEMPTS: u32 = 5;

/// A child to correct.
#[derive(Debug)]
struct Mislabelled {
    resource: ApiResource,
    namespace: Option<String>,
    name: String,
    uid: String,
    /// The label it carries, if any.
    found: Option<String>,
    /// The label it should carry; `None` for an orphan.
    want: Option<String>,
    attempts: u32,
}

/// What a correction came to, for the member's log and counters.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The label was written.
    Corrected,
    /// The child is gone or was replaced (404, or 409 on its UID).
    Gone,
    /// The patch failed `MAX_ATTEMPTS` times.
    GaveUp(kube::Error),
}

/// The children waiting for a correction, fed by the child caches'
/// filters and drained by [`Relabel::run`].
#[derive(Default)]
pub(crate) struct Relabel {
    /// By UID: a child reported again while it waits is one correction.
    pending: Mutex<HashMap<String, Mislabelled>>,
    wake: Notify,
}

impl Relabel {
    /// Reports the child with `meta` of kind `resource` if its slot label
    /// does not name its controller's slot (or it has no controller), or
    /// if it has a controller in one of `claims` but no label (created
    /// before sharding, or by an unlabelled control: every member is sent
    /// it, and only the one holding its owner writes the label). Cheap
    /// when the label is right: called on every child event a member
    /// receives.
    pub(crate) fn check(&self, resource: &ApiResource, meta: &ObjectMeta, claims: &SlotSet) {
        let found = meta.labels.as_ref().and_then(|l| l.get(SLOT_LABEL));
        // Compared as numbers: no allocation for the usual right label.
        let slot = controller_ref(meta).map(|r| slot_of_uid(&r.uid));
        match (found, slot) {
            (Some(found), Some(slot)) if names_slot(found, slot) => return,
            (None, None) => return,
            (None, Some(slot)) if !claims.contains(slot) => return,
            _ => {}
        }
        let want = slot.map(slot_label);
        let (Some(name), Some(uid)) = (&meta.name, &meta.uid) else {
            return;
        };
        {
            let mut pending = self.pending.lock();
            if pending.len() >= MAX_PENDING && !pending.contains_key(uid) {
                return;
            }
            pending.insert(
                uid.clone(),
                Mislabelled {
                    resource: resource.clone(),
                    namespace: meta.namespace.clone(),
                    name: name.clone(),
                    uid: uid.clone(),
                    found: found.cloned(),
                    want,
                    attempts: 0,
                },
            );
        }
        self.wake.notify_one();
    }

    /// Corrects the reported children, one patch each, until dropped;
    /// `done` is told each outcome. A failed patch is retried after
    /// `retry`, up to `MAX_ATTEMPTS` times.
    ///
    /// Cancel-safe: dropping it loses at most the patch in flight, whose
    /// child is reported again by its next event.
    pub(crate) async fn run(
        &self,
        client: Client,
        retry: Duration,
        done: impl Fn(&str, Option<&str>, Option<&str>, Outcome),
    ) {
        loop {
            self.wake.notified().await;
            let batch: Vec<Mislabelled> = self.pending.lock().drain().map(|(_, m)| m).collect();
            let mut failed = false;
            for mut child in batch {
                let api: Api<DynamicObject> = match &child.namespace {
                    Some(ns) => Api::namespaced_with(client.clone(), ns, &child.resource),
                    None => Api::all_with(client.clone(), &child.resource),
                };
                // A merge patch; `null` removes the label. The UID makes
                // the server refuse the patch for a newer object of the
                // same name (409).
                let patch = json!({
                    "metadata": { "uid": child.uid, "labels": { SLOT_LABEL: child.want } }
                });
                let key = format!("{}/{}", child.resource.plural, child.name);
                let outcome = match api
                    .patch(&child.name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => Outcome::Corrected,
                    Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Outcome::Gone,
                    Err(error) => {
                        child.attempts += 1;
                        if child.attempts < MAX_ATTEMPTS {
                            tracing::debug!(child = %key, error = &error as &dyn std::error::Error, "cannot correct the child's shard slot label yet; retrying");
                            self.pending
                                .lock()
                                .entry(child.uid.clone())
                                .or_insert(child);
                            failed = true;
                            continue;
                        }
                        Outcome::GaveUp(error)
                    }
                };
                done(&key, child.found.as_deref(), child.want.as_deref(), outcome);
            }
            if failed {
                tokio::time::sleep(retry).await;
                self.wake.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::super::slot_label_value;
    use super::*;

    fn meta(label: Option<&str>, owner_uid: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            name: Some("web-1".into()),
            namespace: Some("apps".into()),
            uid: Some("pod-uid".into()),
            labels: label.map(|l| BTreeMap::from([(SLOT_LABEL.to_owned(), l.to_owned())])),
            owner_references: owner_uid.map(|uid| {
                vec![OwnerReference {
                    uid: uid.into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]
            }),
            ..ObjectMeta::default()
        }
    }

    fn pending(r: &Relabel) -> Vec<(Option<String>, Option<String>)> {
        r.pending
            .lock()
            .values()
            .map(|m| (m.want.clone(), m.found.clone()))
            .collect()
    }

    #[test]
    fn only_wrong_labels_are_reported() {
        let r = Relabel::default();
        let pods = ApiResource::erase::<Pod>(&());
        let right = slot_label_value("owner-uid");
        let none = SlotSet::empty();
        r.check(&pods, &meta(Some(&right), Some("owner-uid")), &none);
        r.check(&pods, &meta(None, Some("owner-uid")), &none);
        r.check(&pods, &meta(None, None), &SlotSet::full());
        assert!(
            pending(&r).is_empty(),
            "right labels, and missing ones of others' owners"
        );

        let wrong = ((right.parse::<usize>().unwrap() + 1) % 1024).to_string();
        r.check(&pods, &meta(Some(&wrong), Some("owner-uid")), &none);
        assert_eq!(
            pending(&r),
            vec![(Some(right.clone()), Some(wrong.clone()))]
        );
        // Reported again (another event): still one correction.
        r.check(&pods, &meta(Some(&wrong), Some("owner-uid")), &none);
        assert_eq!(pending(&r).len(), 1);
    }

    #[test]
    fn an_orphan_loses_its_label() {
        let r = Relabel::default();
        let pods = ApiResource::erase::<Pod>(&());
        r.check(&pods, &meta(Some("7"), None), &SlotSet::empty());
        assert_eq!(pending(&r), vec![(None, Some("7".to_owned()))]);
    }

    #[test]
    fn the_holder_of_its_owner_labels_an_unlabelled_child() {
        let r = Relabel::default();
        let pods = ApiResource::erase::<Pod>(&());
        let mut claims = SlotSet::empty();
        claims.insert(slot_label_value("owner-uid").parse().unwrap());
        r.check(&pods, &meta(None, Some("owner-uid")), &claims);
        assert_eq!(
            pending(&r),
            vec![(Some(slot_label_value("owner-uid")), None)]
        );
    }
}
