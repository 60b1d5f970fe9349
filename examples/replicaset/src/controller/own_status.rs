//! The echo of the controller's own status writes: an owner update that
//! only brings back the status this controller last wrote does not queue
//! the owner (upstream's `updateRS` queues every update).
//!
//! Such an update cannot change what a sync decides: the sync reads the
//! owner's spec, labels, deletion and generation (all unchanged) and its
//! pods (whose changes queue the owner on their own), and the status it
//! would write is the one already written. Read-own-writes does not need
//! the echo either: a sync skipped while the cache lacks the write is
//! requeued by the runtime. Everything else still queues: a spec, label,
//! annotation, finalizer, owner-reference, generation or deletion change,
//! a status written by someone else (or any status other than the last
//! one this controller wrote for that UID), and a resync (same
//! resourceVersion).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::key_of;
use crate::owner::{ReplicaOwner, ReplicaStatus};

/// The status this controller last wrote per owner key, with the owner's
/// UID. One entry per owner written to, dropped when the owner is deleted
/// (and replaced by the next write, a namesake's included).
#[derive(Debug, Default)]
pub(crate) struct OwnStatusWrites {
    written: Mutex<HashMap<String, Written>>,
}

#[derive(Debug)]
struct Written {
    uid: Option<String>,
    status: ReplicaStatus,
}

impl OwnStatusWrites {
    /// Records `owner` as the status write returned it.
    pub(crate) fn wrote<O: ReplicaOwner>(&self, key: &str, owner: &O) {
        let written = Written {
            uid: owner.meta().uid.clone(),
            status: owner.replica_status(),
        };
        self.lock().insert(key.to_owned(), written);
    }

    /// Forgets the owner `key` (deleted).
    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// How many owners have a recorded write.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the update `old` → `new` is the echo of this controller's
    /// own last status write: a new resourceVersion, nothing but the
    /// status (and `managedFields`) changed, and the status is the one this
    /// controller last wrote for that UID.
    pub(crate) fn is_echo<O: ReplicaOwner>(&self, old: &O, new: &O) -> bool {
        let (old_meta, new_meta) = (old.meta(), new.meta());
        if old_meta.resource_version == new_meta.resource_version
            || !same_meta_but_version(old_meta, new_meta)
            || !old.same_spec(new)
        {
            return false;
        }
        let guard = self.lock();
        guard.get(&key_of(new)).is_some_and(|written| {
            written.uid == new_meta.uid && written.status == new.replica_status()
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Written>> {
        // The map holds no invariant a panicking holder could break.
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether `a` and `b` are equal but for `resourceVersion` and
/// `managedFields`. Destructured in full, so a field added to `ObjectMeta`
/// must be placed here.
fn same_meta_but_version(a: &ObjectMeta, b: &ObjectMeta) -> bool {
    let ObjectMeta {
        annotations,
        creation_timestamp,
        deletion_grace_period_seconds,
        deletion_timestamp,
        finalizers,
        generate_name,
        generation,
        labels,
        managed_fields: _,
        name,
        namespace,
        owner_references,
        resource_version: _,
        self_link,
        uid,
    } = a;
    *annotations == b.annotations
        && *creation_timestamp == b.creation_timestamp
        && *deletion_grace_period_seconds == b.deletion_grace_period_seconds
        && *deletion_timestamp == b.deletion_timestamp
        && *finalizers == b.finalizers
        && *generate_name == b.generate_name
        && *generation == b.generation
        && *labels == b.labels
        && *name == b.name
        && *namespace == b.namespace
        && *owner_references == b.owner_references
        && *self_link == b.self_link
        && *uid == b.uid
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn rs_with(rv: &str, ready: i32, replicas: i32) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "ns", "name": "a", "uid": "u1",
                         "resourceVersion": rv, "generation": 1},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "a"}}},
            "status": {"replicas": 3, "readyReplicas": ready, "observedGeneration": 1}
        }))
        .unwrap()
    }

    fn rs(rv: &str, ready: i32) -> ReplicaSet {
        rs_with(rv, ready, 3)
    }

    #[test]
    fn the_echo_of_the_last_write_is_recognised() {
        let writes = OwnStatusWrites::default();
        let (old, new) = (rs("1", 1), rs("2", 2));
        assert!(!writes.is_echo(&old, &new), "nothing written yet");
        writes.wrote("ns/a", &new);
        assert!(writes.is_echo(&old, &new));
        // managedFields alone do not matter.
        let mut managed = rs("2", 2);
        managed.metadata.managed_fields = Some(vec![Default::default()]);
        assert!(writes.is_echo(&old, &managed));
        // A resync (same resourceVersion) is not an echo.
        assert!(!writes.is_echo(&new, &new));
        // Deleted: forgotten.
        writes.forget("ns/a");
        assert!(!writes.is_echo(&old, &new));
        assert_eq!(writes.len(), 0);
    }

    #[test]
    fn anything_but_our_own_status_is_not_an_echo() {
        let writes = OwnStatusWrites::default();
        let old = rs("1", 1);
        writes.wrote("ns/a", &rs("2", 2));
        // A status someone else wrote.
        assert!(!writes.is_echo(&old, &rs("2", 3)));
        // A spec change along with our status.
        assert!(!writes.is_echo(&old, &rs_with("2", 2, 5)));
        // A label, a generation, a deletion.
        let mut labelled = rs("2", 2);
        labelled.metadata.labels = Some([("a".into(), "b".into())].into());
        assert!(!writes.is_echo(&old, &labelled));
        let mut generation = rs("2", 2);
        generation.metadata.generation = Some(2);
        assert!(!writes.is_echo(&old, &generation));
        let mut deleted = rs("2", 2);
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert!(!writes.is_echo(&old, &deleted));
        // A namesake (another UID) with the same status.
        let mut namesake = rs("2", 2);
        namesake.metadata.uid = Some("u2".into());
        let mut namesake_old = rs("1", 1);
        namesake_old.metadata.uid = Some("u2".into());
        assert!(!writes.is_echo(&namesake_old, &namesake));
    }
}
