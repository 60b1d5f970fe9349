//! Behaviour of `ConsistencyStore`, driven by a hand-moved fake cache and
//! paused tokio time.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ctrlkit_consistency::{ConsistencyStore, DEFAULT_MAX_WAIT, GroupResource, ObservedVersions};
use ctrlkit_informer::{CompareError, Informer, compare_resource_versions};
use k8s_openapi::api::core::v1::Pod;
use parking_lot::RwLock;

/// A cache whose observed version the test sets.
#[derive(Clone, Default)]
struct FakeCache(Arc<RwLock<Option<String>>>);

impl FakeCache {
    fn at(&self, rv: &str) {
        *self.0.write() = Some(rv.to_owned());
    }
}

impl ObservedVersions for FakeCache {
    fn has_observed(&self, rv: &str) -> Result<bool, CompareError> {
        match self.0.read().as_deref() {
            None => Ok(false),
            Some(latest) => compare_resource_versions(latest, rv).map(|o| o.is_ge()),
        }
    }

    fn latest_observed(&self) -> Option<String> {
        self.0.read().clone()
    }
}

fn pods() -> GroupResource {
    GroupResource::new("", "pods")
}

fn replicasets() -> GroupResource {
    GroupResource::new("apps", "replicasets")
}

fn store() -> (ConsistencyStore, FakeCache, FakeCache) {
    let (p, r) = (FakeCache::default(), FakeCache::default());
    let store = ConsistencyStore::builder()
        .cache(pods(), p.clone())
        .cache(replicasets(), r.clone())
        .build();
    (store, p, r)
}

const OWNER: &str = "default/web";

#[tokio::test(start_paused = true)]
async fn an_owner_without_writes_is_ready() {
    let (store, _, _) = store();
    assert!(store.ensure_ready(OWNER).is_ok());
    assert!(store.is_empty());
}

#[tokio::test(start_paused = true)]
async fn waits_until_the_cache_reaches_the_written_version_then_forgets_it() {
    let (store, pod_cache, _) = store();
    store.wrote_at(OWNER, &pods(), "10");
    let why = store.ensure_ready(OWNER).unwrap_err();
    assert_eq!(why.resource, pods());
    assert_eq!(why.written, "10");
    assert_eq!(why.observed, None);
    assert!(why.to_string().contains("pods"), "{why}");

    pod_cache.at("9");
    let why = store.ensure_ready(OWNER).unwrap_err();
    assert_eq!(why.observed.as_deref(), Some("9"));

    pod_cache.at("10");
    assert!(store.ensure_ready(OWNER).is_ok());
    assert!(store.pending(OWNER).is_empty());
    assert_eq!(store.len(), 0);
    // Once forgotten, an older cache does not matter any more.
    pod_cache.at("1");
    assert!(store.ensure_ready(OWNER).is_ok());
}

#[tokio::test(start_paused = true)]
async fn keeps_the_highest_written_version_per_resource() {
    let (store, pod_cache, _) = store();
    store.wrote_at(OWNER, &pods(), "10");
    store.wrote_at(OWNER, &pods(), "8");
    store.wrote_at(OWNER, &pods(), "9");
    assert_eq!(store.pending(OWNER), vec![(pods(), "10".to_owned())]);
    pod_cache.at("9");
    assert!(store.ensure_ready(OWNER).is_err());
    pod_cache.at("11");
    assert!(store.ensure_ready(OWNER).is_ok());
}

#[tokio::test(start_paused = true)]
async fn every_resource_must_catch_up() {
    let (store, pod_cache, rs_cache) = store();
    store.wrote_at(OWNER, &pods(), "10");
    store.wrote_at(OWNER, &replicasets(), "12");
    pod_cache.at("20");
    let why = store.ensure_ready(OWNER).unwrap_err();
    assert_eq!(why.resource, replicasets());
    // The pod write was observed and dropped; the owner write remains.
    assert_eq!(store.pending(OWNER), vec![(replicasets(), "12".to_owned())]);
    rs_cache.at("12");
    assert!(store.ensure_ready(OWNER).is_ok());
}

#[tokio::test(start_paused = true)]
async fn owners_are_independent_and_clear_forgets_one() {
    let (store, _, _) = store();
    store.wrote_at(OWNER, &pods(), "10");
    store.wrote_at("default/other", &pods(), "11");
    assert!(store.ensure_ready("default/third").is_ok());
    store.clear(OWNER);
    assert!(store.ensure_ready(OWNER).is_ok());
    assert!(store.ensure_ready("default/other").is_err());
    assert_eq!(store.len(), 1);
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_the_maximum_wait_from_the_oldest_write() {
    let (store, _, _) = store();
    store.wrote_at(OWNER, &pods(), "10");
    tokio::time::advance(Duration::from_secs(20)).await;
    // A newer write does not restart the clock.
    store.wrote_at(OWNER, &pods(), "11");
    tokio::time::advance(DEFAULT_MAX_WAIT - Duration::from_secs(20) - Duration::from_millis(1))
        .await;
    let why = store.ensure_ready(OWNER).unwrap_err();
    assert_eq!(why.written, "11");
    assert!(why.waited < DEFAULT_MAX_WAIT);
    assert_eq!(store.stats().gave_up, 0);

    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(store.ensure_ready(OWNER).is_ok());
    assert_eq!(store.stats().gave_up, 1);
    assert!(store.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_maximum_wait_is_configurable() {
    let cache = FakeCache::default();
    let store = ConsistencyStore::builder()
        .cache(pods(), cache)
        .max_wait(Duration::from_secs(2))
        .build();
    assert_eq!(store.max_wait(), Some(Duration::from_secs(2)));
    store.wrote_at(OWNER, &pods(), "10");
    assert!(store.ensure_ready(OWNER).is_err());
    tokio::time::advance(Duration::from_secs(2)).await;
    assert!(store.ensure_ready(OWNER).is_ok());
}

#[tokio::test(start_paused = true)]
async fn incomparable_versions_fail_open() {
    let (store, pod_cache, _) = store();
    pod_cache.at("opaque-token");
    store.wrote_at(OWNER, &pods(), "10");
    assert!(store.ensure_ready(OWNER).is_ok());
    assert_eq!(store.stats().incomparable, 1);
    assert!(store.is_empty());
}

#[tokio::test(start_paused = true)]
async fn writes_of_unregistered_resources_and_empty_versions_are_ignored() {
    let (store, _, _) = store();
    store.wrote_at(OWNER, &GroupResource::new("batch", "jobs"), "10");
    store.wrote_at(OWNER, &pods(), "");
    assert!(store.ensure_ready(OWNER).is_ok());
    assert!(store.is_empty());
    assert_eq!(store.stats().unknown_resource, 1);
}

#[tokio::test(start_paused = true)]
async fn a_disabled_store_is_always_ready() {
    let store = ConsistencyStore::disabled();
    assert!(!store.is_enabled());
    store.wrote_at(OWNER, &pods(), "10");
    assert!(store.ensure_ready(OWNER).is_ok());
    assert!(store.pending(OWNER).is_empty());
    assert_eq!(store.max_wait(), None);
}

#[tokio::test(start_paused = true)]
async fn works_over_an_informer_store() {
    use kube::runtime::watcher::Event;
    let informer = Informer::<Pod>::manual().build();
    let store = ConsistencyStore::builder()
        .cache(GroupResource::of::<Pod>(), informer.store())
        .build();
    store.wrote_at(OWNER, &GroupResource::of::<Pod>(), "5");
    // Before its first list the informer is not consulted (fail open).
    assert!(store.ensure_ready(OWNER).is_ok());
    assert_eq!(store.stats().unsynced, 1);

    informer.apply_event(Event::Init);
    informer.apply_event(Event::InitDone);
    store.wrote_at(OWNER, &GroupResource::of::<Pod>(), "5");
    assert!(store.ensure_ready(OWNER).is_err());
    let mut pod = Pod::default();
    pod.metadata.namespace = Some("default".into());
    pod.metadata.name = Some("other".into());
    pod.metadata.resource_version = Some("6".into());
    // Any later object shows the cache is past our write.
    informer.apply_event(Event::Apply(pod));
    assert!(store.ensure_ready(OWNER).is_ok());
}

#[test]
fn concurrent_writers_and_checkers_leave_nothing_behind_once_caught_up() {
    let (store, pod_cache, _) = store();
    let highest = Arc::new(AtomicU64::new(0));
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (store, highest) = (store.clone(), highest.clone());
            s.spawn(move || {
                for i in 0..500u64 {
                    let owner = format!("default/o{}", i % 7);
                    let rv = t * 1000 + i + 1;
                    highest.fetch_max(rv, Ordering::SeqCst);
                    store.wrote_at(&owner, &pods(), &rv.to_string());
                    let _ = store.ensure_ready(&owner);
                }
            });
        }
    });
    // Nothing observed yet: every owner that was written to still waits.
    assert_eq!(store.len(), 7);
    pod_cache.at(&highest.load(Ordering::SeqCst).to_string());
    for i in 0..7 {
        assert!(store.ensure_ready(&format!("default/o{i}")).is_ok());
    }
    assert!(store.is_empty());
}
