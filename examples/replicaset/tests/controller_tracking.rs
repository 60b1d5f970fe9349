//! Read-own-writes, creation tracking by identity and the availability
//! requeue, on hand-fed informers with a fake pod control and paused time.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{FakeOwnerClient, Harness, PodSpec, edit, replica_set};
use ctrlkit_consistency::GroupResource;
use ctrlkit_expectations::DEFAULT_EXPECTATIONS_TTL;
use ctrlkit_informer::Informer;
use ctrlkit_podcontrol::{FakePodControl, PodControl, PodControlError};
use ctrlkit_replicaset::{ControllerOptions, ReplicaSetController};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::runtime::watcher::Event;
use serde_json::json;

type RsHarness = Harness<ReplicaSet>;

const KEY: &str = "default/web";

#[tokio::test(start_paused = true)]
async fn an_adopted_orphan_does_not_satisfy_a_creation_expectation() {
    let h = RsHarness::new();
    let rs = replica_set("web", 3, "web");
    h.owner(&rs);
    h.pod(&PodSpec::running("web").build("orphan"));
    h.controller.sync(&common::key(KEY)).await.unwrap();
    // The orphan is adopted and two pods are created for the rest.
    assert_eq!((h.fake.patch_count(), h.fake.create_count()), (1, 2));
    let created = h.fake.created_pods();
    assert_eq!(
        h.controller
            .runtime()
            .expectations()
            .get_expectations(KEY)
            .unwrap()
            .add,
        2
    );

    // The informer shows the adopted orphan, now with our controller
    // reference, as an update, and (after a relist, say) as an add: neither
    // is one of the pods we created.
    let adopted = PodSpec::running("web").owned_by(&rs).build("orphan");
    h.pod(&adopted);
    h.remove_pod(&adopted);
    h.pod(&adopted);
    // Nor is a pod someone else created with a reference to us.
    h.pod(&PodSpec::running("web").owned_by(&rs).build("impostor"));
    let exp = h
        .controller
        .runtime()
        .expectations()
        .get_expectations(KEY)
        .unwrap();
    assert_eq!(exp.add, 2, "foreign pods lowered the creation count");
    assert!(exp.tracks_creations);
    assert!(!h.controller.runtime().expectations().satisfied(KEY));

    for pod in &created {
        h.pod(pod);
    }
    assert!(h.controller.runtime().expectations().satisfied(KEY));
}

#[tokio::test(start_paused = true)]
async fn a_lost_create_event_is_detected_and_reported_at_the_ttl() {
    let h = RsHarness::new();
    h.owner(&replica_set("web", 2, "web"));
    h.controller.sync(&common::key(KEY)).await.unwrap();
    let created = h.fake.created_pods();
    h.fake.clear();
    // Only the second pod's watch event arrives.
    h.pod(&created[1]);

    // Waiting for the first: the sync asks to look again when the
    // expectations expire, not later.
    let action = h.controller.sync(&common::key(KEY)).await.unwrap();
    let delay = action.requeue_delay().unwrap();
    assert!(
        delay > DEFAULT_EXPECTATIONS_TTL - Duration::from_secs(1)
            && delay <= DEFAULT_EXPECTATIONS_TTL + Duration::from_secs(1),
        "{delay:?}"
    );
    assert_eq!(h.fake.create_count(), 0);
    assert_eq!(h.controller.lost_creations(), 0);

    tokio::time::advance(delay).await;
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.lost_creations(), 1);
    assert_eq!(
        h.controller.runtime().expectations().stats().lost_creations,
        1
    );
    // The missing pod is created again, and the loss is reported once.
    assert_eq!(h.fake.create_count(), 1);
    h.observe_created();
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.lost_creations(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_sync_waits_until_the_informers_show_the_controllers_own_writes() {
    let h = RsHarness::new().synced();
    h.owner(&replica_set("web", 2, "web"));
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.fake.create_count(), 2);
    assert_eq!(h.client.updates().len(), 1);
    let created = h.fake.created_pods();
    h.fake.clear();

    // Neither the pods nor the status write are in the caches: skipped.
    let action = h.controller.sync(&common::key(KEY)).await.unwrap();
    assert!(
        action
            .requeue_delay()
            .is_some_and(|d| d <= Duration::from_secs(1))
    );
    assert_eq!(h.controller.stale_sync_skips(), 1);
    assert_eq!((h.fake.create_count(), h.client.updates().len()), (0, 1));

    // The pods arrive; the owner's status write has not.
    for pod in &created {
        h.pod(pod);
    }
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.stale_sync_skips(), 2);
    let pending = h.controller.runtime().consistency().pending(KEY);
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].0, GroupResource::of::<ReplicaSet>());

    // Now the cache holds our own status write: the next status write
    // starts from it (no 409) and reports the two pods.
    h.observe_status_write();
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.stale_sync_skips(), 2);
    assert_eq!(h.client.updates().len(), 2);
    let sent = h.client.updates().last().unwrap().clone();
    assert_eq!(sent["metadata"]["resourceVersion"], "181");
    assert_eq!(sent["status"]["replicas"], 2);
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test(start_paused = true)]
async fn with_read_own_writes_off_a_sync_runs_on_a_stale_cache() {
    let h = RsHarness::with_options(ControllerOptions {
        read_own_writes: false,
        ..ControllerOptions::default()
    })
    .synced();
    h.owner(&replica_set("web", 2, "web"));
    h.controller.sync(&common::key(KEY)).await.unwrap();
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert!(!h.controller.runtime().consistency().is_enabled());
    assert_eq!(h.controller.stale_sync_skips(), 0);
    // The second sync wrote the status again, from the outdated owner.
    let updates = h.client.updates();
    assert_eq!(updates.len(), 2);
    assert_eq!(updates[1]["metadata"]["resourceVersion"], "18");
}

#[tokio::test(start_paused = true)]
async fn a_cache_that_never_catches_up_holds_the_owner_back_only_for_the_maximum_wait() {
    let h = RsHarness::with_options(ControllerOptions {
        read_own_writes_max_wait: Duration::from_secs(10),
        ..ControllerOptions::default()
    })
    .synced();
    h.owner(&replica_set("web", 2, "web"));
    h.controller.sync(&common::key(KEY)).await.unwrap();
    tokio::time::advance(Duration::from_secs(9)).await;
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.stale_sync_skips(), 1);
    tokio::time::advance(Duration::from_secs(1)).await;
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(h.controller.stale_sync_skips(), 1);
    assert!(h.controller.runtime().consistency().stats().gave_up >= 1);
    // The pod writes were given up on (the status write just made is new).
    let pending = h.controller.runtime().consistency().pending(KEY);
    assert!(
        pending
            .iter()
            .all(|(gr, _)| *gr != GroupResource::of::<Pod>()),
        "{pending:?}"
    );
    assert_eq!(h.client.updates().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn deleting_the_owner_forgets_its_writes() {
    let h = RsHarness::new().synced();
    let rs = replica_set("web", 2, "web");
    h.owner(&rs);
    h.controller.sync(&common::key(KEY)).await.unwrap();
    assert!(!h.controller.runtime().consistency().is_empty());
    h.owners.apply_event(Event::Delete(rs));
    assert!(h.controller.runtime().consistency().is_empty());
}

/// The fake pod control, with the resourceVersion an API server would put
/// on patched pods.
struct VersionedPatches(FakePodControl);

#[async_trait]
impl PodControl for VersionedPatches {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        self.0
            .create_pods(namespace, template, owner, controller_ref)
            .await
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.0
            .delete_pod(namespace, name, owner, preconditions)
            .await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<Pod, PodControlError> {
        let mut pod = self.0.patch_pod(namespace, name, patch).await?;
        pod.metadata.resource_version = Some("500".into());
        Ok(pod)
    }
}

#[tokio::test(start_paused = true)]
async fn adopting_a_pod_is_an_own_write() {
    let pods = Informer::<Pod>::manual().build();
    let owners = Informer::<ReplicaSet>::manual().build();
    for_each_synced(&pods, &owners);
    let client = Arc::new(FakeOwnerClient::new());
    let rs = replica_set("web", 1, "web");
    *client.live.lock() = Some(rs.clone());
    let controller = ReplicaSetController::from_parts(
        pods.clone(),
        owners.clone(),
        Arc::new(VersionedPatches(FakePodControl::new())),
        client,
        ControllerOptions::default(),
    )
    .unwrap();
    owners.apply_event(Event::Apply(rs.clone()));
    pods.apply_event(Event::Apply(PodSpec::running("web").build("orphan")));
    controller.sync(&common::key(KEY)).await.unwrap();
    let pending = controller.runtime().consistency().pending(KEY);
    assert!(
        pending.contains(&(GroupResource::of::<Pod>(), "500".to_owned())),
        "{pending:?}"
    );
    assert!(
        controller
            .sync(&common::key(KEY))
            .await
            .unwrap()
            .requeue_delay()
            .is_some()
    );
    assert_eq!(controller.stale_sync_skips(), 1);

    // The adoption (and our status write) show up in the caches.
    let mut adopted = PodSpec::running("web").owned_by(&rs).build("orphan");
    adopted.metadata.resource_version = Some("500".into());
    pods.apply_event(Event::Apply(adopted));
    owners.apply_event(Event::Apply(edit(&rs, |v| {
        v["metadata"]["resourceVersion"] = json!("181")
    })));
    controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(controller.stale_sync_skips(), 1);
    // Only the status write this sync made (one replica now) is pending.
    let pending = controller.runtime().consistency().pending(KEY);
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].0, GroupResource::of::<ReplicaSet>());
}

fn for_each_synced(pods: &Informer<Pod>, owners: &Informer<ReplicaSet>) {
    pods.apply_event(Event::Init);
    pods.apply_event(Event::InitDone);
    owners.apply_event(Event::Init);
    owners.apply_event(Event::InitDone);
}

#[tokio::test]
async fn the_requeue_is_timed_to_the_next_pod_becoming_available() {
    let h = RsHarness::new();
    let rs = edit(&replica_set("web", 4, "web"), |v| {
        v["spec"]["minReadySeconds"] = json!(10)
    });
    h.owner(&rs);
    let owned = PodSpec::running("web").owned_by(&rs);
    h.pod(&owned.clone().pending().build("a"));
    h.pod(&owned.clone().ready_since(2).build("b"));
    h.pod(&owned.clone().ready_since(6).build("c"));
    h.pod(&owned.clone().ready_since(3600).build("d"));
    let action = h.controller.sync(&common::key(KEY)).await.unwrap();
    let status = h.client.last_status();
    assert_eq!(
        (
            status["readyReplicas"].as_i64(),
            status["availableReplicas"].as_i64()
        ),
        (Some(3), Some(1))
    );
    // "c" is available first, 4 s from now (the margin only absorbs a slow
    // machine); not after a blind minReadySeconds (10 s).
    let delay = action.requeue_delay().unwrap();
    assert!(
        delay <= Duration::from_secs(4) && delay > Duration::from_secs(1),
        "{delay:?}"
    );
}
