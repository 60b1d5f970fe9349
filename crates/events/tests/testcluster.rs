//! The recorder against the in-process test cluster: what lands in the
//! event store (core/v1, also served as events.k8s.io/v1), as
//! `kubectl describe` would show it.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{normal, replicaset};
use ctrlkit_events::{
    DECODE_FAILED_REASON, EventType, Recorder, RecorderConfig, undecodable_warning,
};
use ctrlkit_informer::Informer;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event as V1Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Api;
use kube::api::{ListParams, PostParams};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

async fn cluster() -> TestCluster {
    TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap()
}

/// The core/v1 events about the ReplicaSet `name`, oldest first.
async fn events_about(cluster: &TestCluster, name: &str) -> Vec<CoreEvent> {
    let mut events = Api::<CoreEvent>::namespaced(cluster.client(), "default")
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap()
        .items;
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeats_are_counted_on_one_event() {
    let cluster = cluster().await;
    let recorder = Recorder::new(cluster.client(), "replicaset-controller");
    for _ in 0..3 {
        recorder
            .publish(
                &normal("SuccessfulCreate", "Created pod: web-1"),
                &replicaset("web"),
            )
            .unwrap();
    }
    recorder.flush().await;

    let events = events_about(&cluster, "web").await;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e.count, Some(3));
    assert_eq!(e.reason.as_deref(), Some("SuccessfulCreate"));
    assert_eq!(e.message.as_deref(), Some("Created pod: web-1"));
    assert_eq!(e.type_.as_deref(), Some("Normal"));
    assert_eq!(e.involved_object.kind.as_deref(), Some("ReplicaSet"));
    assert_eq!(e.involved_object.uid.as_deref(), Some("uid-web"));
    assert_eq!(
        e.source.as_ref().unwrap().component.as_deref(),
        Some("replicaset-controller")
    );
    assert_eq!(
        e.reporting_component.as_deref(),
        Some("replicaset-controller")
    );
    assert!(e.first_timestamp.is_some() && e.last_timestamp.is_some());
    assert!(e.metadata.name.as_deref().unwrap().starts_with("web."));
    let stats = recorder.stats();
    assert_eq!((stats.created, stats.patched), (1, 2), "{stats:?}");

    // The same event through events.k8s.io/v1, as `kubectl events` reads it.
    let v1 = Api::<V1Event>::namespaced(cluster.client(), "default")
        .get(e.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(v1.deprecated_count, Some(3));
    assert_eq!(v1.note.as_deref(), Some("Created pod: web-1"));
    assert_eq!(
        v1.reporting_controller.as_deref(),
        Some("replicaset-controller")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn similar_events_become_one_aggregate_after_ten() {
    let cluster = cluster().await;
    let recorder = Recorder::new(cluster.client(), "replicaset-controller");
    for i in 0..12 {
        recorder
            .publish(
                &normal("SuccessfulCreate", &format!("Created pod: web-{i}")),
                &replicaset("web"),
            )
            .unwrap();
    }
    recorder.flush().await;

    let events = events_about(&cluster, "web").await;
    let messages: Vec<_> = events
        .iter()
        .map(|e| (e.message.clone().unwrap(), e.count.unwrap()))
        .collect();
    let mut expected: Vec<_> = (0..9)
        .map(|i| (format!("Created pod: web-{i}"), 1))
        .collect();
    // The tenth, eleventh and twelfth count on one aggregate, which shows
    // the latest message.
    expected.push((
        "(combined from similar events): Created pod: web-11".to_owned(),
        3,
    ));
    let mut messages_sorted = messages.clone();
    messages_sorted.sort();
    expected.sort();
    assert_eq!(messages_sorted, expected, "{messages:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spam_filter_lets_25_events_about_one_object_through() {
    let cluster = cluster().await;
    let recorder = Recorder::new(cluster.client(), "c");
    for i in 0..30 {
        recorder
            .publish(&normal(&format!("Reason{i}"), "m"), &replicaset("noisy"))
            .unwrap();
    }
    recorder
        .publish(&normal("Other", "m"), &replicaset("quiet"))
        .unwrap();
    recorder.flush().await;
    assert_eq!(events_about(&cluster, "noisy").await.len(), 25);
    assert_eq!(events_about(&cluster, "quiet").await.len(), 1);
    assert_eq!(recorder.stats().filtered, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caches_are_bounded_and_forget_the_oldest_events() {
    let cluster = cluster().await;
    let recorder = Recorder::with_config(
        cluster.client(),
        "c",
        RecorderConfig {
            cache_size: 8,
            ..RecorderConfig::default()
        },
    )
    .unwrap();
    let first = normal("Scaled", "to 1");
    recorder.publish(&first, &replicaset("rs-0")).unwrap();
    // Within the bound, the repeat is counted.
    recorder.publish(&first, &replicaset("rs-0")).unwrap();
    recorder.flush().await;
    assert_eq!(events_about(&cluster, "rs-0").await[0].count, Some(2));

    for i in 1..40 {
        recorder
            .publish(&normal("Scaled", "to 1"), &replicaset(&format!("rs-{i}")))
            .unwrap();
    }
    recorder.flush().await;
    assert!(
        recorder.stats().cache_entries <= 3 * 8,
        "{:?}",
        recorder.stats()
    );
    // Forgotten: the next repeat is a new event, as client-go after its
    // LRU evicted the old one.
    recorder.publish(&first, &replicaset("rs-0")).unwrap();
    recorder.flush().await;
    let counts: Vec<_> = events_about(&cluster, "rs-0")
        .await
        .iter()
        .map(|e| e.count)
        .collect();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert!(counts.contains(&Some(2)) && counts.contains(&Some(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_on_cluster_scoped_objects_go_to_the_default_namespace() {
    let cluster = cluster().await;
    let recorder = Recorder::new(cluster.client(), "c");
    let node = k8s_openapi::api::core::v1::ObjectReference {
        kind: Some("Node".into()),
        api_version: Some("v1".into()),
        name: Some("node-1".into()),
        ..Default::default()
    };
    let mut warning = normal("NodeNotReady", "kubelet stopped posting");
    warning.type_ = EventType::Warning;
    recorder.publish(&warning, &node).unwrap();
    recorder.flush().await;
    let events = Api::<CoreEvent>::namespaced(cluster.client(), "default")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(events[0].involved_object.name.as_deref(), Some("node-1"));
}

/// ConfigMaps read as a type whose values must be `on` or `off`: a
/// ConfigMap with another value cannot be decoded into it, whatever the
/// server validates.
#[derive(Clone, Debug, Deserialize, Serialize)]
struct Switches {
    metadata: ObjectMeta,
    #[serde(default)]
    data: BTreeMap<String, Switch>,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Switch {
    On,
    Off,
}

impl k8s_openapi::Resource for Switches {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "ConfigMap";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "configmaps";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Switches {
    type Ty = ObjectMeta;
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_object_gets_a_decode_failed_warning() {
    let cluster = cluster().await;
    let configmaps = Api::<ConfigMap>::namespaced(cluster.client(), "default");
    for (name, value) in [("good", "on"), ("bad", "seven")] {
        let cm = ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("n".to_owned(), value.to_owned())])),
            ..ConfigMap::default()
        };
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let bad = configmaps.get("bad").await.unwrap();

    let recorder = Recorder::new(cluster.client(), "switches-controller");
    let informer = Informer::builder(Api::<Switches>::namespaced(cluster.client(), "default"))
        .handler(undecodable_warning::<Switches>(recorder.clone()))
        .build();
    let cancel = CancellationToken::new();
    let task = informer.start(cancel.clone()).unwrap();
    tokio::time::timeout(Duration::from_secs(30), informer.wait_for_cache_sync())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        informer.store().len(),
        1,
        "only the decodable one is cached"
    );
    recorder.flush().await;

    let events = Api::<CoreEvent>::namespaced(cluster.client(), "default")
        .list(&ListParams::default().fields("involvedObject.name=bad"))
        .await
        .unwrap()
        .items;
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e.type_.as_deref(), Some("Warning"));
    assert_eq!(e.reason.as_deref(), Some(DECODE_FAILED_REASON));
    assert_eq!(e.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(e.involved_object.api_version.as_deref(), Some("v1"));
    assert_eq!(e.involved_object.uid, bad.metadata.uid);
    let message = e.message.as_deref().unwrap();
    assert!(
        message.starts_with("cannot decode this ConfigMap")
            && message.contains("unknown variant `seven`"),
        "{message}"
    );
    assert_eq!(
        e.reporting_component.as_deref(),
        Some("switches-controller")
    );
    // Nothing about the decodable one.
    let about_good = Api::<CoreEvent>::namespaced(cluster.client(), "default")
        .list(&ListParams::default().fields("involvedObject.name=good"))
        .await
        .unwrap()
        .items;
    assert!(about_good.is_empty());

    cancel.cancel();
    task.await.unwrap();
}
