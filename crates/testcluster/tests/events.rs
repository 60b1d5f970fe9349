//! One event store behind core/v1 and events.k8s.io/v1, as kube-apiserver:
//! events a controller records through kube-rs's `Recorder`
//! (events.k8s.io) show in `kubectl get events`, `kubectl events` and
//! `kubectl describe`.
#![allow(clippy::unwrap_used)]

mod common;

use common::kubectl::Kubectl;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event as V1Event;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recorder_events_are_core_events_and_back() {
    let cluster = common::start().await;
    let client = cluster.client();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &common::replicaset("web", 1))
        .await
        .unwrap();
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "demo-controller".into(),
            instance: Some("demo-0".into()),
        },
    );
    let event = Event {
        type_: EventType::Normal,
        reason: "Scaled".into(),
        note: Some("scaled up to 1".into()),
        action: "Scale".into(),
        secondary: None,
    };
    recorder.publish(&event, &rs.object_ref(&())).await.unwrap();
    recorder.publish(&event, &rs.object_ref(&())).await.unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "default");
    let listed = core
        .list(
            &ListParams::default().fields("involvedObject.name=web,involvedObject.kind=ReplicaSet"),
        )
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1, "one event, patched into a series");
    let e = &listed.items[0];
    assert_eq!(e.reason.as_deref(), Some("Scaled"));
    assert_eq!(e.message.as_deref(), Some("scaled up to 1"));
    assert_eq!(e.involved_object.uid, rs.metadata.uid);
    assert_eq!(e.reporting_component.as_deref(), Some("demo-controller"));
    assert_eq!(e.reporting_instance.as_deref(), Some("demo-0"));
    assert_eq!(e.series.as_ref().unwrap().count, Some(2));
    assert!(e.event_time.is_some());

    // The same object through events.k8s.io.
    let v1: Api<V1Event> = Api::namespaced(client.clone(), "default");
    let same = v1.get(e.metadata.name.as_deref().unwrap()).await.unwrap();
    assert_eq!(same.note.as_deref(), Some("scaled up to 1"));
    assert_eq!(
        same.regarding.as_ref().unwrap().name.as_deref(),
        Some("web")
    );
    assert_eq!(
        same.reporting_controller.as_deref(),
        Some("demo-controller")
    );
    assert_eq!(same.metadata.resource_version, e.metadata.resource_version);
    let by_regarding = v1
        .list(&ListParams::default().fields("regarding.name=web,reason=Scaled"))
        .await
        .unwrap();
    assert_eq!(by_regarding.items.len(), 1);

    // A core event written the old way is an events.k8s.io event too,
    // on watches as well.
    let mut watch = v1
        .watch(
            &WatchParams::default().timeout(10),
            &e.metadata.resource_version.clone().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let old_style: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "web.legacy"},
        "involvedObject": {"kind": "ReplicaSet", "name": "web", "namespace": "default"},
        "reason": "Legacy", "message": "from core/v1", "type": "Warning", "count": 3,
        "source": {"component": "old-controller"},
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:01:00Z",
    }))
    .unwrap();
    core.create(&PostParams::default(), &old_style)
        .await
        .unwrap();
    let seen = match watch.try_next().await.unwrap().unwrap() {
        WatchEvent::Added(ev) => ev,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(seen.note.as_deref(), Some("from core/v1"));
    assert_eq!(seen.deprecated_count, Some(3));
    assert_eq!(
        seen.deprecated_source
            .as_ref()
            .unwrap()
            .component
            .as_deref(),
        Some("old-controller")
    );
    assert_eq!(
        seen.regarding.as_ref().unwrap().kind.as_deref(),
        Some("ReplicaSet")
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_events_recorded_through_events_k8s_io() {
    let cluster = common::start().await;
    let client = cluster.client();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &common::replicaset("web", 1))
        .await
        .unwrap();
    let recorder = Recorder::new(client.clone(), "demo-controller".into());
    recorder
        .publish(
            &Event {
                type_: EventType::Warning,
                reason: "FailedCreate".into(),
                note: Some("exceeded quota: demo".into()),
                action: "Create".into(),
                secondary: None,
            },
            &rs.object_ref(&()),
        )
        .await
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    let events = k.json_async(&["get", "events"]).await;
    let items = events["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{events}");
    assert_eq!(items[0]["message"], "exceeded quota: demo");
    let out = k.run_async(&["events"]).await;
    assert!(
        out.contains("FailedCreate") && out.contains("exceeded quota: demo"),
        "{out}"
    );
    assert!(out.contains("ReplicaSet/web"), "{out}");
    let described = k.run_async(&["describe", "rs", "web"]).await;
    let tail = described
        .split("Events:")
        .nth(1)
        .unwrap_or_else(|| panic!("{described}"));
    assert!(
        tail.contains("FailedCreate") && tail.contains("exceeded quota: demo"),
        "{described}"
    );
    cluster.shutdown().await;
}
