//! Server-side sharded list and watch (KEP-5866), its client-side
//! counterpart (a client filter), and the consistent read behind the
//! handover's catch-up, against ctrlkit's simulated API server.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_informer::{ClientFilter, DeletedObject, EventHandler, Informer, ShardSelectorSupport};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const HIGH: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

fn low(uid: &str) -> bool {
    let h = uid.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    h < 1 << 63
}

async fn until(what: &str, done: impl Fn() -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

async fn with_config_maps(sharded: bool) -> (TestCluster, Api<ConfigMap>, Vec<ConfigMap>) {
    let cluster =
        TestCluster::start(TestClusterConfig::default().with_sharded_list_and_watch(sharded))
            .await
            .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let mut made = Vec::new();
    for i in 0..20 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        made.push(api.create(&PostParams::default(), &cm).await.unwrap());
    }
    (cluster, api, made)
}

fn uids(informer: &Informer<ConfigMap>) -> Vec<String> {
    let mut uids: Vec<String> = informer
        .store()
        .list()
        .iter()
        .map(|c| c.uid().unwrap())
        .collect();
    uids.sort();
    uids
}

fn expected(made: &[ConfigMap], keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut uids: Vec<String> = made
        .iter()
        .map(|c| c.uid().unwrap())
        .filter(|u| keep(u))
        .collect();
    uids.sort();
    uids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_informer_caches_only_its_shard_and_relists_for_a_new_one() {
    let (cluster, api, made) = with_config_maps(true).await;
    let informer = Informer::builder(api.clone()).build();
    assert!(informer.set_shard_selector(Some(LOW.into())));
    assert!(!informer.set_shard_selector(Some(LOW.into())), "unchanged");
    let stop = CancellationToken::new();
    informer.start(stop.clone()).unwrap();
    informer.wait_for_cache_sync().await.unwrap();
    assert_eq!(uids(&informer), expected(&made, low));
    assert_eq!(
        informer.shard_selector_support(),
        ShardSelectorSupport::Honoured
    );

    // The watch is filtered too: a new object of the other half never
    // arrives, one of this half does.
    let mut more = Vec::new();
    for i in 20..30 {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        more.push(api.create(&PostParams::default(), &cm).await.unwrap());
    }
    let all: Vec<ConfigMap> = made.iter().chain(&more).cloned().collect();
    until("the new low objects", || {
        uids(&informer) == expected(&all, low)
    })
    .await;

    // A new selector: a fresh list of the other half.
    let store = informer.store();
    assert!(informer.set_shard_selector(Some(HIGH.into())));
    let rv = more.last().unwrap().resource_version().unwrap();
    until("the high half", || {
        uids(&informer) == expected(&all, |u| !low(u))
    })
    .await;
    until("the relist to count as current", || {
        store.has_observed_resource_version(&rv).unwrap()
    })
    .await;

    // The consistent read of the new shard is reflected by the cache at
    // once (a quiet cluster: the cache's version stays where it is).
    let read = store.consistent_read().await.unwrap().unwrap();
    assert_eq!(read.len(), expected(&all, |u| !low(u)).len());
    assert!(store.reflects(&read).unwrap());
    stop.cancel();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_the_selector_is_detected_and_the_cache_holds_everything() {
    let (cluster, api, made) = with_config_maps(false).await;
    let informer = Informer::builder(api).build();
    informer.set_shard_selector(Some(LOW.into()));
    let stop = CancellationToken::new();
    informer.start(stop.clone()).unwrap();
    informer.wait_for_cache_sync().await.unwrap();
    assert_eq!(uids(&informer), expected(&made, |_| true));
    assert_eq!(
        informer.shard_selector_support(),
        ShardSelectorSupport::Ignored
    );
    assert!(
        !informer.set_shard_selector(Some(HIGH.into())),
        "no relist for a server that ignores selectors"
    );
    stop.cancel();
    cluster.shutdown().await;
}

/// The catch-up check: a cache that has seen everything reflects a
/// consistent read at once, though its own resourceVersion is older than
/// the read's; a change it has not seen yet (here: a delete while the
/// informer is stopped) makes it wait.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_reflects_a_consistent_read_only_when_it_holds_what_the_read_shows() {
    let (cluster, api, made) = with_config_maps(true).await;
    let informer = Informer::builder(api.clone()).build();
    let stop = CancellationToken::new();
    let running = informer.start(stop.clone()).unwrap();
    informer.wait_for_cache_sync().await.unwrap();
    let store = informer.store();
    // Something else moves the cluster's version on.
    let other: Api<ConfigMap> = Api::namespaced(cluster.client(), "kube-system");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap();
    let newer = other.create(&PostParams::default(), &cm).await.unwrap();
    let read = store.consistent_read().await.unwrap().unwrap();
    assert_eq!(read.len(), made.len());
    assert!(
        !store
            .has_observed_resource_version(&newer.resource_version().unwrap())
            .unwrap()
    );
    assert!(store.reflects(&read).unwrap(), "a quiet cache holds it all");

    stop.cancel();
    running.await.unwrap();
    api.delete("cm-0", &DeleteParams::default()).await.unwrap();
    let read = store.consistent_read().await.unwrap().unwrap();
    assert!(!store.reflects(&read).unwrap(), "cm-0 still cached");
    cluster.shutdown().await;
}

/// The half a ConfigMap is labelled with, if any.
fn half(meta: &ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get("half").map(String::as_str)
}

/// Keeps the unlabelled ConfigMaps and those of half `which`.
fn keep_half(which: &'static str) -> ClientFilter {
    ClientFilter::new(format!("half {which}"), move |meta| {
        half(meta).is_none_or(|h| h == which)
    })
}

fn names(informer: &Informer<ConfigMap>) -> Vec<String> {
    let mut names: Vec<String> = informer
        .store()
        .list()
        .iter()
        .map(|c| c.name_any())
        .collect();
    names.sort();
    names
}

/// Records the names of deleted objects with the half they carried.
#[derive(Clone, Default)]
struct Deletes(Arc<Mutex<Vec<String>>>);

impl EventHandler<ConfigMap> for Deletes {
    fn on_add(&self, _: &Arc<ConfigMap>, _: bool) {}
    fn on_update(&self, _: &Arc<ConfigMap>, _: &Arc<ConfigMap>) {}
    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        let o = obj.object();
        let h = half(&o.metadata).unwrap_or("-").to_owned();
        self.0.lock().unwrap().push(format!("{}:{h}", o.name_any()));
    }
}

/// A client filter: the cache keeps only what it keeps, from the list and
/// the watch; an object that stops passing leaves as a delete of its new
/// state; a new filter relists (the store reflects nothing until then) and
/// the consistent read lists what the filter keeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_filter_keeps_only_what_it_keeps_and_relists_for_a_new_one() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let make = |name: &str, half: Option<&str>| -> ConfigMap {
        let labels = half.map(|h| json!({"half": h}));
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    for (name, h) in [
        ("a1", Some("a")),
        ("a2", Some("a")),
        ("b1", Some("b")),
        ("none", None),
    ] {
        api.create(&PostParams::default(), &make(name, h))
            .await
            .unwrap();
    }
    let deletes = Deletes::default();
    let informer = Informer::builder(api.clone())
        .handler(deletes.clone())
        .build();
    assert!(informer.set_client_filter(Some(keep_half("a"))));
    assert!(
        !informer.set_client_filter(Some(keep_half("a"))),
        "unchanged"
    );
    let stop = CancellationToken::new();
    informer.start(stop.clone()).unwrap();
    informer.wait_for_cache_sync().await.unwrap();
    assert_eq!(names(&informer), ["a1", "a2", "none"]);

    // Watched objects too; a1 moving to the other half leaves the cache.
    api.create(&PostParams::default(), &make("a3", Some("a")))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make("b2", Some("b")))
        .await
        .unwrap();
    let moved = Patch::Merge(json!({"metadata": {"labels": {"half": "b"}}}));
    let a1 = api
        .patch("a1", &PatchParams::default(), &moved)
        .await
        .unwrap();
    until("a1 out, a3 in", || names(&informer) == ["a2", "a3", "none"]).await;
    assert_eq!(*deletes.0.lock().unwrap(), ["a1:b"], "its new state");
    let store = informer.store();
    assert!(
        store
            .has_observed_resource_version(&a1.resource_version().unwrap())
            .unwrap()
    );

    // A new filter: a fresh list; nothing reflected until it is complete.
    assert!(informer.set_client_filter(Some(keep_half("b"))));
    until("half b", || names(&informer) == ["a1", "b1", "b2", "none"]).await;
    until("the relist to count as current", || {
        store
            .has_observed_resource_version(&a1.resource_version().unwrap())
            .unwrap()
    })
    .await;
    let read = store.consistent_read().await.unwrap().unwrap();
    assert_eq!(read.len(), 4, "the read lists what the filter keeps");
    assert!(store.reflects(&read).unwrap());
    stop.cancel();
    cluster.shutdown().await;
}

/// A client filter with a label selector: the server sends only what the
/// selector selects (joined with the informer's own label selector), from
/// the list, the watch and the consistent read; an object whose labels
/// stop matching leaves the cache as the server's delete; a new filter
/// relists with its own selector. The filter here keeps everything it is
/// sent, so what the cache lacks was never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_filters_label_selector_is_applied_by_the_server() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let make = |name: &str, half: Option<&str>, mine: bool| -> ConfigMap {
        let mut labels = serde_json::Map::new();
        if let Some(h) = half {
            labels.insert("half".into(), json!(h));
        }
        if mine {
            labels.insert("mine".into(), json!("yes"));
        }
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    for (name, h, mine) in [
        ("a1", Some("a"), true),
        ("a2", Some("a"), true),
        ("b1", Some("b"), true),
        ("none", None, true),
        ("other", Some("a"), false),
    ] {
        api.create(&PostParams::default(), &make(name, h, mine))
            .await
            .unwrap();
    }
    let everything = |selector: &str| {
        ClientFilter::new(format!("sent by the server: {selector}"), |_| true)
            .with_label_selector(selector)
    };
    let filter = everything("half notin (b)");
    assert_eq!(filter.label_selector(), Some("half notin (b)"));
    assert_eq!(
        ClientFilter::new("x", |_| true)
            .with_label_selector("")
            .label_selector(),
        None
    );
    let deletes = Deletes::default();
    let informer = Informer::builder(api.clone())
        .watcher_config(kube::runtime::watcher::Config::default().labels("mine=yes"))
        .handler(deletes.clone())
        .build();
    assert!(informer.set_client_filter(Some(filter)));
    let stop = CancellationToken::new();
    informer.start(stop.clone()).unwrap();
    informer.wait_for_cache_sync().await.unwrap();
    assert_eq!(names(&informer), ["a1", "a2", "none"]);

    // The watch: b2 is never sent; a1 relabelled to half b leaves as the
    // server's delete.
    api.create(&PostParams::default(), &make("b2", Some("b"), true))
        .await
        .unwrap();
    api.create(&PostParams::default(), &make("a3", Some("a"), true))
        .await
        .unwrap();
    let moved = Patch::Merge(json!({"metadata": {"labels": {"half": "b"}}}));
    api.patch("a1", &PatchParams::default(), &moved)
        .await
        .unwrap();
    until("a1 out, a3 in", || names(&informer) == ["a2", "a3", "none"]).await;
    assert_eq!(*deletes.0.lock().unwrap(), ["a1:b"]);
    let store = informer.store();
    let read = store.consistent_read().await.unwrap().unwrap();
    assert_eq!(read.len(), 3, "the read lists what the selectors select");

    // A new filter relists with its selector.
    assert!(informer.set_client_filter(Some(everything("half notin (a)"))));
    until("half b and the unlabelled", || {
        names(&informer) == ["a1", "b1", "b2", "none"]
    })
    .await;
    let read = store.consistent_read().await.unwrap().unwrap();
    assert_eq!(read.len(), 4);
    assert!(store.reflects(&read).unwrap());
    stop.cancel();
    cluster.shutdown().await;
}
