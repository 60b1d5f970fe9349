//! A controller built with the runtime against ctrlkit's simulated API
//! server: ReplicaSet-kind owners whose pods are created from their
//! template through `KubeChildControl`, with events on the owner, tracked
//! expectations, garbage collection and cleanup on delete.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_expectations::ControllerExpectations;
use ctrlkit_informer::{SharedInformerFactory, Store};
use ctrlkit_runtime::child::{ChildControl, KubeChildControl, controller_ref_for};
use ctrlkit_runtime::{Action, Controller, ObjectKey, creation_id};
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// Deadlock guard only; nothing here is expected to take long.
const GUARD: Duration = Duration::from_secs(60);

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + GUARD;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Ctx {
    pods: Arc<dyn ChildControl<Pod>>,
    cache: Store<Pod>,
    expectations: Arc<ControllerExpectations>,
    gone: Mutex<Vec<ObjectKey>>,
}

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Keeps `spec.replicas` pods per owner: the smallest replica controller.
async fn reconcile(
    key: ObjectKey,
    rs: Option<Arc<ReplicaSet>>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let exp_key = key.to_string();
    let Some(rs) = rs else {
        ctx.gone.lock().push(key);
        return Ok(Action::done());
    };
    if !ctx.expectations.satisfied(&exp_key) {
        return Ok(Action::done());
    }
    let uid = rs.meta().uid.as_deref().unwrap_or_default();
    let have = ctx.cache.by_controller(&key.namespace, uid, false)?.len();
    let want = usize::try_from(rs.spec.replicas.unwrap_or(1))?;
    let missing = want.saturating_sub(have);
    if missing == 0 {
        return Ok(Action::done());
    }
    let template = rs.spec.template.clone().unwrap_or_default();
    let mut pod = Pod {
        spec: template.spec,
        ..Pod::default()
    };
    pod.metadata.generate_name = Some(format!("{}-", key.name));
    pod.metadata.labels = template.metadata.and_then(|m| m.labels);
    let cref = controller_ref_for(rs.as_ref()).ok_or("owner without UID")?;
    ctx.expectations.expect_tracked_creations(&exp_key, missing);
    for _ in 0..missing {
        match ctx
            .pods
            .create(&key.namespace, &pod, &rs.object_ref(&()), &cref)
            .await
        {
            Ok(created) => ctx
                .expectations
                .record_creation(&exp_key, &creation_id(&created)),
            Err(e) => {
                // No watch event will come for it.
                ctx.expectations.lower(&exp_key, 1, 0);
                return Err(e.into());
            }
        }
    }
    Ok(Action::done())
}

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}
            }
        }
    }))
    .unwrap()
}

async fn owned_pods(pods: &Api<Pod>, uid: &str) -> Vec<Pod> {
    pods.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| ctrlkit_informer::is_controlled_by(&p.metadata, uid))
        .collect()
}

async fn events_of(events: &Api<Event>, owner: &str) -> Vec<Event> {
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(owner))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_are_created_from_the_template_with_events_and_cleaned_up() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client();
    let factory = SharedInformerFactory::new(client.clone());
    let controller = Controller::<ReplicaSet>::builder(&factory)
        .name("rs-children")
        .namespace("default")
        .owns::<Pod>()
        .drop_managed_fields()
        .workers(2)
        .build()
        .unwrap();
    let ctx = Arc::new(Ctx {
        pods: Arc::new(KubeChildControl::<Pod>::new(client.clone(), "rs-children")),
        cache: controller.store_of::<Pod>().unwrap(),
        expectations: Arc::clone(controller.expectations()),
        gone: Mutex::new(Vec::new()),
    });
    factory.start();
    let stop = CancellationToken::new();
    let run = tokio::spawn(controller.run(reconcile, ctx.clone(), stop.clone().cancelled_owned()));

    let replicasets: Api<ReplicaSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let web = replicasets
        .create(&PostParams::default(), &replica_set("web", 2))
        .await
        .unwrap();
    let uid = web.metadata.uid.clone().unwrap();

    eventually("two pods of web", || async {
        owned_pods(&pods, &uid).await.len() == 2
    })
    .await;
    let created = owned_pods(&pods, &uid).await;
    for pod in &created {
        assert!(pod.metadata.name.as_deref().unwrap().starts_with("web-"));
        assert_eq!(
            pod.metadata.labels.as_ref().unwrap(),
            &BTreeMap::from([("app".to_string(), "web".to_string())])
        );
        let cref = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (cref.kind.as_str(), cref.controller),
            ("ReplicaSet", Some(true))
        );
        assert_eq!(cref.block_owner_deletion, Some(true));
    }
    eventually("SuccessfulCreate events", || async {
        events_of(&events, "web")
            .await
            .iter()
            .filter(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
            .count()
            == 2
    })
    .await;
    for event in events_of(&events, "web").await {
        let note = event.note.unwrap_or_default();
        assert!(note.starts_with("Created pod: web-"), "{note}");
        assert_eq!(event.reporting_controller.as_deref(), Some("rs-children"));
        assert_eq!(event.type_.as_deref(), Some("Normal"));
    }
    // The informer showed the pods: the expectations are met and nothing
    // more is created.
    eventually("expectations met", || async {
        ctx.expectations.satisfied("default/web")
    })
    .await;
    assert_eq!(owned_pods(&pods, &uid).await.len(), 2);

    // Pod creates fail: a FailedCreate event with the server's message.
    cluster.faults().set_config(
        FaultConfig::none().with_error(
            ErrorRule::verb("create", 1.0, ErrorKind::InternalError).for_resource("pods"),
        ),
    );
    replicasets
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    eventually("a FailedCreate event", || async {
        events_of(&events, "web")
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some("FailedCreate"))
    })
    .await;
    let failed = events_of(&events, "web")
        .await
        .into_iter()
        .find(|e| e.reason.as_deref() == Some("FailedCreate"))
        .unwrap();
    let note = failed.note.unwrap();
    assert!(
        note.starts_with("Error creating: injected fault: internal error while handling pods"),
        "{note}"
    );
    assert!(!note.contains("Status {"), "no debug dump: {note}");
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    cluster.faults().clear();
    eventually("the third pod once creates work again", || async {
        owned_pods(&pods, &uid).await.len() == 3
    })
    .await;

    // Deleted: reconcile is told, and the garbage collector takes the pods.
    replicasets
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("reconcile of the deleted owner", || async {
        ctx.gone.lock().contains(&ObjectKey::new("default", "web"))
    })
    .await;
    eventually("pods collected", || async {
        owned_pods(&pods, &uid).await.is_empty()
    })
    .await;

    stop.cancel();
    tokio::time::timeout(GUARD, run)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    factory.shutdown().await;
    cluster.shutdown().await;
}
