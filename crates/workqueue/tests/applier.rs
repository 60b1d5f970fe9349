//! The queue as the input of kube-runtime's stable `applier`.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_workqueue::WorkQueue;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Config, applier, watcher};

#[derive(Debug, thiserror::Error)]
#[error("never")]
struct Never;

fn config_map(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn feeds_kube_runtime_applier_and_ends_with_the_queue() {
    let (reader, mut writer) = reflector::store::<ConfigMap>();
    // A complete initial list, so the store counts as ready (the applier
    // waits for that).
    writer.apply_watcher_event(&watcher::Event::Init);
    for name in ["a", "b"] {
        writer.apply_watcher_event(&watcher::Event::InitApply(config_map(name)));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);

    let queue = WorkQueue::<ObjectRef<ConfigMap>>::new();
    let reconciled = Arc::new(AtomicUsize::new(0));
    let reconciler = {
        let (queue, reconciled) = (queue.clone(), reconciled.clone());
        move |cm: Arc<ConfigMap>, _ctx: Arc<()>| {
            let (queue, reconciled) = (queue.clone(), reconciled.clone());
            async move {
                reconciled.fetch_add(1, Ordering::SeqCst);
                // The applier has its own scheduler; the queue's contract is
                // still that whoever took an item marks it done.
                queue.done(&ObjectRef::from_obj(cm.as_ref()));
                Ok::<_, Never>(Action::await_change())
            }
        }
    };

    queue.add(ObjectRef::new("a").within("default"));
    queue.add(ObjectRef::new("b").within("default"));
    queue.add(ObjectRef::new("a").within("default")); // deduplicated by the queue

    let results = applier(
        move |cm, ctx| Box::pin(reconciler(cm, ctx)),
        |_cm, _err: &Never, _ctx| Action::await_change(),
        Arc::new(()),
        reader,
        queue.stream().map(Ok::<_, Infallible>),
        Config::default(),
    );
    let collect = tokio::spawn(results.collect::<Vec<_>>());

    // Once both are reconciled, shutting the queue down ends its stream and
    // with it the applier.
    tokio::time::timeout(Duration::from_secs(30), async {
        while reconciled.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("both objects reconciled");
    queue.shut_down();
    let results = tokio::time::timeout(Duration::from_secs(30), collect)
        .await
        .expect("applier ended after the queue shut down")
        .unwrap();

    let mut names: Vec<String> = results
        .into_iter()
        .map(|r| r.expect("reconcile ok").0.name)
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(reconciled.load(Ordering::SeqCst), 2);
}
