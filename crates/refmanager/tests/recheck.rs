//! The "can adopt" recheck: a fresh read of the owner, at most once per
//! claim pass and only when something is to be adopted.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use ctrlkit_podcontrol::FakePodControl;
use ctrlkit_refmanager::{
    CanAdopt, CanAdoptError, ClaimError, OwnerMeta, PodControllerRefManager, RecheckOwner,
};

type Fresh = Result<Option<OwnerMeta>, std::io::Error>;

/// A fresh read that counts its calls and answers `answer()`.
fn counting(
    calls: &Arc<AtomicUsize>,
    answer: impl Fn() -> Fresh + Send + Sync + 'static,
) -> impl CanAdopt {
    let calls = calls.clone();
    RecheckOwner::new(move || {
        calls.fetch_add(1, Ordering::SeqCst);
        let result = answer();
        async move { result }
    })
}

fn manager<A: CanAdopt>(
    fake: &FakePodControl,
    check: A,
) -> PodControllerRefManager<FakePodControl, A> {
    PodControllerRefManager::new(Arc::new(fake.clone()), owner(), production(), check)
}

#[tokio::test]
async fn no_fresh_read_when_nothing_needs_adopting() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let pods = vec![
        pod("kept", "production", Some(OWNER_UID)),
        pod("released", "testing", Some(OWNER_UID)),
        pod("others", "production", Some("AAAAA")),
        pod("unmatched-orphan", "testing", None),
        deleting(pod("deleting-orphan", "production", None)),
    ];
    let out = manager(&fake, counting(&calls, || Ok(Some(owner()))))
        .claim_pods(pods, &[])
        .await;
    assert!(out.is_ok());
    assert_eq!(names(&out.claimed), ["kept"]);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_eq!(fake.patch_count(), 1, "only the release");
}

#[tokio::test]
async fn one_fresh_read_for_several_adoptions() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let pods = vec![
        pod("a", "production", None),
        pod("b", "production", None),
        pod("c", "production", None),
    ];
    let manager = manager(&fake, counting(&calls, || Ok(Some(owner()))));
    let out = manager.claim_pods(pods.clone(), &[]).await;
    assert_eq!(names(&out.claimed), ["a", "b", "c"]);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(fake.patch_count(), 3);

    // The verdict is cached for the manager's life, across passes too.
    let out = manager.claim_pods(pods, &[]).await;
    assert_eq!(out.claimed.len(), 3);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn adoption_refused_when_owner_was_recreated() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let recreated = || {
        Ok(Some(
            OwnerMeta::new("v1", "ReplicationController", "ctrl", "456")
                .unwrap()
                .with_namespace("default"),
        ))
    };
    let pods = vec![
        pod("owned", "production", Some(OWNER_UID)),
        pod("a", "production", None),
        pod("b", "production", None),
    ];
    let out = manager(&fake, counting(&calls, recreated))
        .claim_pods(pods, &[])
        .await;
    // What we already own is still ours; nothing new is adopted or patched.
    assert_eq!(names(&out.claimed), ["owned"]);
    assert_eq!(fake.patch_count(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(out.errors.len(), 2);
    for (err, name) in out.errors.iter().zip(["a", "b"]) {
        match err {
            ClaimError::CannotAdopt {
                name: n,
                uid,
                source,
                ..
            } => {
                assert_eq!(n, name);
                assert_eq!(uid, &format!("uid-{name}"));
                assert!(
                    matches!(&**source, CanAdoptError::UidChanged { got, wanted, .. }
                        if got == "456" && wanted == OWNER_UID),
                    "{source:?}"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    let text = out.into_result().unwrap_err().to_string();
    assert!(
        text.contains(
            "original ReplicationController default/ctrl is gone: got uid 456, wanted 123"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn adoption_refused_when_owner_is_being_deleted() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let out = manager(
        &fake,
        counting(&calls, || Ok(Some(owner().with_deletion_timestamp(now())))),
    )
    .claim_pods(vec![pod("a", "production", None)], &[])
    .await;
    assert!(out.claimed.is_empty());
    assert_eq!(fake.patch_count(), 0);
    assert!(matches!(
        &out.errors[..],
        [ClaimError::CannotAdopt { source, .. }]
            if matches!(**source, CanAdoptError::BeingDeleted { .. })
    ));
    assert!(
        out.errors[0]
            .to_string()
            .contains("has just been deleted at 2023-11-14T22:13:20Z")
    );
}

#[tokio::test]
async fn adoption_refused_when_owner_is_gone_or_unreadable() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let out = manager(&fake, counting(&calls, || Ok(None)))
        .claim_pods(vec![pod("a", "production", None)], &[])
        .await;
    assert!(matches!(
        &out.errors[..],
        [ClaimError::CannotAdopt { source, .. }] if matches!(**source, CanAdoptError::Gone { .. })
    ));

    let out = manager(
        &fake,
        counting(&calls, || Err(std::io::Error::other("connection reset"))),
    )
    .claim_pods(vec![pod("a", "production", None)], &[])
    .await;
    assert!(matches!(
        &out.errors[..],
        [ClaimError::CannotAdopt { source, .. }] if matches!(**source, CanAdoptError::ReadFailed { .. })
    ));
    assert!(out.errors[0].to_string().contains("connection reset"));
    assert_eq!(fake.patch_count(), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn releases_proceed_even_when_adoption_is_refused() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let pods = vec![
        pod("orphan", "production", None),
        pod("stale", "testing", Some(OWNER_UID)),
    ];
    let out = manager(&fake, counting(&calls, || Ok(None)))
        .claim_pods(pods, &[])
        .await;
    assert_eq!(out.errors.len(), 1);
    let patched: Vec<_> = fake.patches().into_iter().map(|(n, _)| n).collect();
    assert_eq!(patched, ["stale"]);
}

#[tokio::test]
async fn object_without_uid_does_not_trigger_the_fresh_read() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let mut p = pod("a", "production", None);
    p.metadata.uid = None;
    let out = manager(&fake, counting(&calls, || Ok(Some(owner()))))
        .claim_pods(vec![p], &[])
        .await;
    assert!(matches!(&out.errors[..], [ClaimError::MissingUid { .. }]));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn concurrent_adopters_share_one_fresh_read() {
    let calls = Arc::new(AtomicUsize::new(0));
    let fake = FakePodControl::new();
    let manager = manager(&fake, counting(&calls, || Ok(Some(owner()))));
    let pod_a = pod("a", "production", None);
    let pod_b = pod("b", "production", None);
    let (a, b) = tokio::join!(manager.adopt(&pod_a), manager.adopt(&pod_b));
    a.unwrap();
    b.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(fake.patch_count(), 2);
}
