//! Watch ordering, resumption, bookmarks and 410 Gone recovery.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;

const GUARD: Duration = Duration::from_secs(30);

async fn next_raw<K, S>(stream: &mut S) -> WatchEvent<K>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<K>>> + Unpin,
{
    tokio::time::timeout(GUARD, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
}

/// The next event that is not a bookmark.
async fn next<S>(stream: &mut S) -> WatchEvent<Pod>
where
    S: futures::Stream<Item = kube::Result<WatchEvent<Pod>>> + Unpin,
{
    loop {
        match next_raw(stream).await {
            WatchEvent::Bookmark(_) => continue,
            other => return other,
        }
    }
}

/// The resourceVersion a list of `api` is consistent with.
async fn list_version<K>(api: &Api<K>) -> String
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(&ListParams::default()).await.unwrap();
    list.metadata.resource_version.unwrap()
}

fn describe(e: &WatchEvent<Pod>) -> String {
    match e {
        WatchEvent::Added(p) => format!("ADDED {}", p.name_any()),
        WatchEvent::Modified(p) => format!("MODIFIED {}", p.name_any()),
        WatchEvent::Deleted(p) => format!("DELETED {}", p.name_any()),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_delivers_changes_in_order_and_resumes() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let start_rv = list_version(&pods).await;

    let mut stream = pods
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();
    create_pod(&client, "a", json!({})).await;
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
    )
    .await
    .unwrap();
    create_pod(&client, "b", json!({})).await;
    pods.delete("a", &DeleteParams::default()).await.unwrap();

    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    let mut after_first = String::new();
    for i in 0..4 {
        let e = next(&mut stream).await;
        if let WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) = &e {
            let rv: u64 = p.resource_version().unwrap().parse().unwrap();
            assert!(rv > last_rv, "versions increase");
            last_rv = rv;
            if i == 0 {
                after_first = rv.to_string();
            }
        }
        seen.push(describe(&e));
    }
    assert_eq!(seen, ["ADDED a", "MODIFIED a", "ADDED b", "DELETED a"]);

    // Resuming from the first event's version replays what followed.
    let mut resumed = pods
        .watch(&WatchParams::default(), &after_first)
        .await
        .unwrap()
        .boxed();
    let mut replay = Vec::new();
    for _ in 0..3 {
        replay.push(describe(&next(&mut resumed).await));
    }
    assert_eq!(replay, ["MODIFIED a", "ADDED b", "DELETED a"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_of_one_name_and_selector_transitions() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let rv = list_version(&pods).await;
    let mut by_name = pods
        .watch(&WatchParams::default().fields("metadata.name=b"), &rv)
        .await
        .unwrap()
        .boxed();
    let mut by_label = pods
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    create_pod(&client, "a", json!({"app": "web"})).await;
    create_pod(&client, "b", json!({})).await;
    assert_eq!(describe(&next(&mut by_name).await), "ADDED b");
    assert_eq!(describe(&next(&mut by_label).await), "ADDED a");
    // Leaving the selector is a DELETED for that watcher, entering it an ADDED.
    pods.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "db"}}})),
    )
    .await
    .unwrap();
    pods.patch(
        "b",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": "web"}}})),
    )
    .await
    .unwrap();
    assert_eq!(describe(&next(&mut by_label).await), "DELETED a");
    assert_eq!(describe(&next(&mut by_label).await), "ADDED b");
    assert_eq!(describe(&next(&mut by_name).await), "MODIFIED b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_watch_gets_bookmarks() {
    let config = TestClusterConfig::default().with_bookmark_interval(Duration::from_millis(50));
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client();
    create_pod(&client, "a", json!({})).await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let rv = list_version(&pods).await;
    let mut stream = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next_raw(&mut stream).await {
        WatchEvent::Bookmark(b) => assert_eq!(b.metadata.resource_version, rv),
        other => panic!("expected a bookmark, got {}", describe(&other)),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_with_timeout_ends() {
    let cluster = start().await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let rv = list_version(&pods).await;
    let stream = pods
        .watch(&WatchParams::default().timeout(1).disable_bookmarks(), &rv)
        .await
        .unwrap();
    let rest: Vec<_> = tokio::time::timeout(GUARD, stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert!(rest.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_old_version_is_gone_and_watcher_relists() {
    let config = TestClusterConfig::default().with_watch_history(5);
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let old_rv = list_version(&pods).await;
    for i in 0..10 {
        create_pod(&client, &format!("p{i}"), json!({})).await;
    }
    // The raw watch gets an ERROR event with code 410, as from kube-apiserver.
    let mut raw = pods
        .watch(&WatchParams::default(), &old_rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut raw).await {
        WatchEvent::Error(e) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected 410, got {}", describe(&other)),
    }

    drop(cluster);

    // kube's watcher: it lists, then watches with a label selector, so its
    // version only advances with matching events. Churn on other pods pushes
    // that version out of the history; when its watch times out (1 s) and
    // it re-watches, it gets 410, relists and converges.
    let config = TestClusterConfig::default()
        .with_watch_history(5)
        .with_bookmark_interval(Duration::from_secs(3600));
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    create_pod(&client, "x1", json!({"app": "x"})).await;
    let wc = watcher::Config::default().labels("app=x").timeout(1);
    let mut stream = watcher(pods.clone(), wc).boxed();
    let mut inits = 0;
    loop {
        if let watcher::Event::InitDone = tokio::time::timeout(GUARD, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            inits += 1;
            break;
        }
    }
    for i in 0..20 {
        create_pod(&client, &format!("other{i}"), json!({"app": "other"})).await;
    }
    let mut gone_seen = false;
    let mut created_x2 = false;
    loop {
        match tokio::time::timeout(GUARD, stream.next())
            .await
            .unwrap()
            .unwrap()
        {
            Err(watcher::Error::WatchError(e)) if e.code == 410 => gone_seen = true,
            Err(_) => {}
            Ok(watcher::Event::InitDone) => {
                inits += 1;
                if gone_seen && !created_x2 {
                    create_pod(&client, "x2", json!({"app": "x"})).await;
                    created_x2 = true;
                }
            }
            Ok(watcher::Event::Apply(p)) if p.name_any() == "x2" => break,
            Ok(_) => {}
        }
    }
    assert!(gone_seen, "the watcher saw the 410");
    assert!(inits >= 2, "the watcher relisted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_sends_initial_events_then_marker() {
    let cluster = start().await;
    let client = cluster.client();
    create_pod(&client, "a", json!({})).await;
    create_pod(&client, "b", json!({})).await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let config = watcher::Config::default().streaming_lists();
    let mut stream = watcher(pods, config).boxed();
    let mut names = Vec::new();
    loop {
        match tokio::time::timeout(GUARD, stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            watcher::Event::InitApply(p) => names.push(p.name_any()),
            watcher::Event::InitDone => break,
            _ => {}
        }
    }
    assert_eq!(names, ["a", "b"]);
    create_pod(&client, "c", json!({})).await;
    match tokio::time::timeout(GUARD, stream.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap()
    {
        watcher::Event::Apply(p) => assert_eq!(p.name_any(), "c"),
        other => panic!("unexpected {other:?}"),
    }
}

/// kube-apiserver keeps a watch cache per resource: churn on pods neither
/// wakes nor expires a quiet ConfigMap watch, whose bookmarks still carry
/// the newest resourceVersion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_resources_churn_neither_expires_a_watch_nor_holds_back_its_bookmarks() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;

    let config = TestClusterConfig::default()
        .with_watch_history(5)
        .with_bookmark_interval(Duration::from_millis(50));
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client();
    let maps = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let rv = list_version(&maps).await;
    let mut stream = maps
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    for i in 0..20 {
        create_pod(&client, &format!("churn{i}"), json!({})).await;
    }
    let newest = list_version(&Api::<Pod>::namespaced(client.clone(), "default")).await;
    loop {
        match next_raw(&mut stream).await {
            WatchEvent::Bookmark(b) if b.metadata.resource_version == newest => break,
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("the watch ended with {}: {}", e.code, e.message),
            other => panic!("expected only bookmarks, got {other:?}"),
        }
    }
    let created = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "after-churn"}})).unwrap(),
        )
        .await
        .unwrap();
    loop {
        match next_raw(&mut stream).await {
            WatchEvent::Added(m) => {
                assert_eq!(m.name_any(), "after-churn");
                assert_eq!(m.resource_version(), created.resource_version());
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("expected the ConfigMap's ADDED, got {other:?}"),
        }
    }
}
