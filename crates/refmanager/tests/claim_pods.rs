//! The claim pass over pods, after upstream's TestClaimPods cases, plus
//! error handling and malformed input.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctrlkit_podcontrol::{FakePodControl, PodControl, PodControlError};
use ctrlkit_refmanager::{
    AlwaysAdopt, ClaimAction, ClaimError, OwnerMeta, PodControllerRefManager, Selector,
};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn manager(fake: &FakePodControl, owner: OwnerMeta) -> PodControllerRefManager<FakePodControl> {
    PodControllerRefManager::new(Arc::new(fake.clone()), owner, production(), AlwaysAdopt)
}

fn adoption_body(pod_uid: &str) -> serde_json::Value {
    json!({"metadata": {
        "ownerReferences": [{
            "apiVersion": "v1", "kind": "ReplicationController", "name": "ctrl",
            "uid": OWNER_UID, "controller": true, "blockOwnerDeletion": true,
        }],
        "uid": pod_uid,
    }})
}

fn release_body(pod_uid: &str) -> serde_json::Value {
    json!({"metadata": {
        "uid": pod_uid,
        "ownerReferences": [{"$patch": "delete", "uid": OWNER_UID}],
    }})
}

fn server_error() -> PodControlError {
    PodControlError::api_status(500, "InternalError", "etcd is sad")
}

#[tokio::test]
async fn adopts_matching_orphan_and_ignores_non_matching_one() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", None),
        pod("pod2", "testing", None),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert!(out.is_ok());
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(
        fake.patches(),
        vec![("pod1".to_string(), adoption_body("uid-pod1"))]
    );
    assert_eq!(fake.patch_calls()[0].namespace, "default");
}

#[tokio::test]
async fn owner_being_deleted_adopts_nothing() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", None),
        pod("pod2", "production", None),
    ];
    let out = manager(&fake, owner().with_deletion_timestamp(now()))
        .claim_pods(pods, &[])
        .await;
    assert!(out.is_ok());
    assert!(out.claimed.is_empty());
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn owner_being_deleted_keeps_what_it_owns_but_adopts_nothing_new() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", Some(OWNER_UID)),
        pod("pod2", "production", None),
    ];
    let out = manager(&fake, owner().with_deletion_timestamp(now()))
        .claim_pods(pods, &[])
        .await;
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn owner_being_deleted_does_not_release_non_matching_pods() {
    let fake = FakePodControl::new();
    let pods = vec![pod("pod1", "testing", Some(OWNER_UID))];
    let out = manager(&fake, owner().with_deletion_timestamp(now()))
        .claim_pods(pods, &[])
        .await;
    assert!(out.claimed.is_empty());
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn pods_of_another_controller_are_left_alone() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", Some(OWNER_UID)),
        pod("pod2", "production", Some("AAAAA")),
        // Not even released when it stops matching: it is not ours.
        pod("pod3", "testing", Some("AAAAA")),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn releases_owned_pod_that_stopped_matching() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", Some(OWNER_UID)),
        pod("pod2", "testing", Some(OWNER_UID)),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert!(out.is_ok());
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(
        fake.patches(),
        vec![("pod2".to_string(), release_body("uid-pod2"))]
    );
}

#[tokio::test]
async fn deleting_orphan_is_not_adopted_but_deleting_owned_pod_is_kept() {
    let fake = FakePodControl::new();
    let pods = vec![
        deleting(pod("pod1", "production", Some(OWNER_UID))),
        deleting(pod("pod2", "production", None)),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn finalizers_are_added_on_adoption_and_removed_on_release() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", Some(OWNER_UID)),
        pod("pod2", "testing", Some(OWNER_UID)),
        pod("pod3", "production", None),
    ];
    let out = manager(&fake, owner())
        .with_finalizers(["foo-finalizer", "bar-finalizer"])
        .claim_pods(pods, &[])
        .await;
    assert!(out.is_ok());
    assert_eq!(names(&out.claimed), ["pod1", "pod3"]);

    let mut release = release_body("uid-pod2");
    release["metadata"]["$deleteFromPrimitiveList/finalizers"] =
        json!(["foo-finalizer", "bar-finalizer"]);
    let mut adopt = adoption_body("uid-pod3");
    adopt["metadata"]["finalizers"] = json!(["foo-finalizer", "bar-finalizer"]);
    assert_eq!(
        fake.patches(),
        vec![("pod2".to_string(), release), ("pod3".to_string(), adopt)]
    );
}

#[tokio::test]
async fn namespaced_owner_does_not_adopt_in_other_namespaces() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", None),
        in_namespace(pod("pod2", "production", None), "fakens"),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(fake.patch_count(), 1);
}

#[tokio::test]
async fn cluster_scoped_owner_adopts_in_any_namespace() {
    let fake = FakePodControl::new();
    let cluster_owner = OwnerMeta::new("v1", "ReplicationController", "ctrl", OWNER_UID).unwrap();
    let pods = vec![
        pod("pod1", "production", None),
        in_namespace(pod("pod2", "production", None), "fakens"),
    ];
    let out = manager(&fake, cluster_owner).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod1", "pod2"]);
    let calls = fake.patch_calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].namespace, "fakens");
}

#[tokio::test]
async fn filters_run_after_the_selector_and_all_must_pass() {
    let fake = FakePodControl::new();
    let seen = std::sync::Mutex::new(Vec::new());
    let record = |p: &Pod| {
        seen.lock().unwrap().push(p.metadata.name.clone().unwrap());
        true
    };
    let not_pod3 = |p: &Pod| p.metadata.name.as_deref() != Some("pod3");
    let pods = vec![
        pod("pod1", "production", Some(OWNER_UID)),
        pod("pod2", "testing", None),
        pod("pod3", "production", Some(OWNER_UID)),
        pod("pod4", "production", None),
    ];
    let out = manager(&fake, owner())
        .claim_pods(pods, &[&record, &not_pod3])
        .await;
    // pod3 fails a filter, so it no longer "matches" and is released.
    assert_eq!(names(&out.claimed), ["pod1", "pod4"]);
    assert_eq!(*seen.lock().unwrap(), ["pod1", "pod3", "pod4"]);
    let patched: Vec<_> = fake.patches().into_iter().map(|(n, _)| n).collect();
    assert_eq!(patched, ["pod3", "pod4"]);
}

#[tokio::test]
async fn items_may_be_borrowed_or_shared() {
    let fake = FakePodControl::new();
    let pods = vec![
        pod("pod1", "production", None),
        pod("pod2", "testing", None),
    ];
    let out = manager(&fake, owner()).claim_pods(&pods, &[]).await;
    assert!(std::ptr::eq(out.claimed[0], &pods[0]));

    let shared: Vec<Arc<Pod>> = pods.into_iter().map(Arc::new).collect();
    let out = manager(&fake, owner())
        .claim_pods(shared.iter().cloned(), &[])
        .await;
    assert!(Arc::ptr_eq(&out.claimed[0], &shared[0]));
}

#[tokio::test]
async fn works_through_dyn_pod_control() {
    let fake = FakePodControl::new();
    let control: Arc<dyn PodControl> = Arc::new(fake.clone());
    let manager: PodControllerRefManager<dyn PodControl> =
        PodControllerRefManager::new(control, owner(), production(), AlwaysAdopt);
    let out = manager
        .claim_pods(vec![pod("pod1", "production", None)], &[])
        .await;
    assert_eq!(names(&out.claimed), ["pod1"]);
    assert_eq!(fake.patch_count(), 1);
}

// ----- errors ---------------------------------------------------------------

#[tokio::test]
async fn a_failed_patch_is_reported_and_the_pass_goes_on() {
    let fake = FakePodControl::new();
    fake.fail_next(1, server_error);
    let pods = vec![
        pod("pod1", "production", None),
        pod("pod2", "production", None),
        pod("pod3", "production", Some(OWNER_UID)),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod2", "pod3"]);
    assert_eq!(fake.patch_count(), 2);
    assert_eq!(out.errors.len(), 1);
    match &out.errors[0] {
        ClaimError::Adopt { name, source, .. } => {
            assert_eq!(name, "pod1");
            assert_eq!(source.status_code(), Some(500));
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = out.into_result().unwrap_err();
    assert_eq!(err.errors().len(), 1);
    assert!(
        err.to_string().starts_with("adopting default/pod1 failed"),
        "{err}"
    );
}

#[tokio::test]
async fn errors_are_aggregated_in_input_order() {
    let fake = FakePodControl::new();
    fake.fail_next(2, server_error);
    let pods = vec![
        pod("pod1", "production", None),
        pod("pod2", "testing", Some(OWNER_UID)),
        pod("pod3", "production", None),
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    assert_eq!(names(&out.claimed), ["pod3"]);
    let kinds: Vec<_> = out
        .errors
        .iter()
        .map(|e| match e {
            ClaimError::Adopt { name, .. } => format!("adopt {name}"),
            ClaimError::Release { name, .. } => format!("release {name}"),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(kinds, ["adopt pod1", "release pod2"]);
    let text = out.into_result().unwrap_err().to_string();
    assert!(text.starts_with("[adopting default/pod1 failed"), "{text}");
    assert!(text.contains(", releasing default/pod2 failed"), "{text}");
}

#[tokio::test]
async fn adopting_a_vanished_pod_is_not_an_error() {
    let fake = FakePodControl::new();
    fake.fail_next(1, || {
        PodControlError::api_status(404, "NotFound", "pods \"pod1\" not found")
    });
    let out = manager(&fake, owner())
        .claim_pods(vec![pod("pod1", "production", None)], &[])
        .await;
    assert!(out.is_ok());
    assert!(out.claimed.is_empty());
}

#[tokio::test]
async fn adoption_refused_as_invalid_is_an_error() {
    // E.g. the UID precondition failed (re-created pod) or another
    // controller reference exists: upstream returns it and the sync retries.
    let fake = FakePodControl::new();
    fake.fail_next(1, || {
        PodControlError::api_status(422, "Invalid", "uid is immutable")
    });
    let out = manager(&fake, owner())
        .claim_pods(vec![pod("pod1", "production", None)], &[])
        .await;
    assert!(out.claimed.is_empty());
    assert!(matches!(&out.errors[..], [ClaimError::Adopt { .. }]));
}

#[tokio::test]
async fn release_ignores_not_found_and_invalid_but_reports_other_errors() {
    for (status, reason, ok) in [
        (404, "NotFound", true),
        (422, "Invalid", true),
        (500, "InternalError", false),
        (409, "Conflict", false),
    ] {
        let fake = FakePodControl::new();
        fake.fail_next(1, move || PodControlError::api_status(status, reason, "x"));
        let out = manager(&fake, owner())
            .claim_pods(vec![pod("pod1", "testing", Some(OWNER_UID))], &[])
            .await;
        assert!(out.claimed.is_empty());
        assert_eq!(out.is_ok(), ok, "{reason}");
        assert_eq!(fake.patch_count(), 1);
        if !ok {
            assert!(matches!(&out.errors[..], [ClaimError::Release { .. }]));
        }
    }
}

#[tokio::test]
async fn aggregate_message_shows_repeated_messages_once() {
    let fake = FakePodControl::new();
    let manager = manager(&fake, owner());
    let mut pod1 = pod("same", "production", None);
    pod1.metadata.uid = None;
    let out = manager.claim_pods(vec![pod1.clone(), pod1], &[]).await;
    assert_eq!(out.errors.len(), 2);
    let text = out.into_result().unwrap_err().to_string();
    assert_eq!(text, "can't adopt default/same: it has no uid");
}

// ----- malformed input -------------------------------------------------------

#[tokio::test]
async fn objects_without_uid_are_never_patched() {
    let fake = FakePodControl::new();
    let strip = |mut p: Pod| {
        p.metadata.uid = None;
        p
    };
    let pods = vec![
        strip(pod("orphan", "production", None)),
        strip(pod("owned", "production", Some(OWNER_UID))),
        strip(pod("stale", "testing", Some(OWNER_UID))),
        {
            let mut p = pod("empty-uid", "production", None);
            p.metadata.uid = Some(String::new());
            p
        },
    ];
    let out = manager(&fake, owner()).claim_pods(pods, &[]).await;
    // Keeping needs no write, so an owned matching pod is still claimed.
    assert_eq!(names(&out.claimed), ["owned"]);
    assert_eq!(fake.patch_count(), 0);
    let errs: Vec<_> = out
        .errors
        .iter()
        .map(|e| match e {
            ClaimError::MissingUid { action, name, .. } => (*action, name.as_str()),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        errs,
        [
            (ClaimAction::Adopt, "orphan"),
            (ClaimAction::Release, "stale"),
            (ClaimAction::Adopt, "empty-uid"),
        ]
    );
}

#[tokio::test]
async fn owner_references_with_missing_fields() {
    let fake = FakePodControl::new();
    // `controller` unset: an ordinary owner, so the pod is an orphan to us.
    let mut plain = pod("plain-owner", "production", Some("other"));
    plain.metadata.owner_references.as_mut().unwrap()[0].controller = None;
    // A controller reference without a UID belongs to nobody we know.
    let mut blank = pod("blank-controller", "production", Some(""));
    blank.metadata.owner_references.as_mut().unwrap()[0].name = String::new();
    // A pod without labels or namespace does not match and is not adopted.
    let mut bare = pod("bare", "production", None);
    bare.metadata.labels = None;
    bare.metadata.namespace = None;

    let out = manager(&fake, owner())
        .claim_pods(vec![plain, blank, bare], &[])
        .await;
    assert!(out.is_ok());
    assert_eq!(names(&out.claimed), ["plain-owner"]);
    assert_eq!(
        fake.patches(),
        vec![("plain-owner".to_string(), adoption_body("uid-plain-owner"))]
    );
}

#[tokio::test]
async fn orphan_without_namespace_is_not_adopted_by_namespaced_owner() {
    let fake = FakePodControl::new();
    let mut p = pod("pod1", "production", None);
    p.metadata.namespace = None;
    let out = manager(&fake, owner()).claim_pods(vec![p], &[]).await;
    assert!(out.claimed.is_empty());
    assert_eq!(fake.patch_count(), 0);
}

#[tokio::test]
async fn match_nothing_selector_only_releases() {
    let fake = FakePodControl::new();
    let manager = PodControllerRefManager::new(
        Arc::new(fake.clone()),
        owner(),
        Selector::nothing(),
        AlwaysAdopt,
    );
    let pods = vec![
        pod("orphan", "production", None),
        pod("owned", "production", Some(OWNER_UID)),
    ];
    let out = manager.claim_pods(pods, &[]).await;
    assert!(out.claimed.is_empty());
    assert_eq!(
        fake.patches(),
        vec![("owned".to_string(), release_body("uid-owned"))]
    );
}
