//! Failures the chaos soak (tests/chaos_soak.rs, docs/chaos-soak.md)
//! found, each reduced to the few steps that trigger it, on
//! ctrlkit-testcluster in paused tokio time.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_replicaset::{
    ControllerOptions, DEFAULT_CHURN_BACKOFF_MAX, FAILED_POD_CHURN_REASON, REPLICA_FAILURE,
    ReplicaSetController,
};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const NS: &str = "default";

/// Polls `check` every second of virtual time until it holds or `limit`
/// has passed; returns whether it held.
async fn within<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = tokio::time::Instant::now();
    while start.elapsed() < limit {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    check().await
}

async fn status(api: &Api<ReplicaSet>) -> Value {
    serde_json::to_value(api.get("web").await.unwrap()).unwrap()["status"].clone()
}

fn churn_condition(status: &Value) -> Option<Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == REPLICA_FAILURE && c["reason"] == FAILED_POD_CHURN_REASON)
        .cloned()
}

/// Soak seed 2 (read-own-writes off, before the churn guard reported
/// only owners missing replicas): a replacement pod rejected by the
/// kubelet gave the owner a strike and the `FailedPodChurn` condition;
/// then the owner was scaled down, so it needed no probe pod, and the
/// condition stayed for good on an owner with all its replicas running
/// (strikes are forgotten only by a running probe or in a sync 10 minutes
/// later, and nothing synced the owner any more).
#[tokio::test(start_paused = true)]
async fn a_churn_condition_does_not_outlive_its_strikes() {
    let cluster = TestCluster::start(
        TestClusterConfig::default().with_kubelet(KubeletConfig::with_nodes(1, 110)),
    )
    .await
    .unwrap();
    let client = cluster.client();
    let factory = SharedInformerFactory::new(client.clone());
    let options = ControllerOptions {
        namespace: Some(NS.into()),
        ..ControllerOptions::default()
    };
    let controller = ReplicaSetController::new(client.clone(), &factory, options, None).unwrap();
    factory.start();
    let token = CancellationToken::new();
    let task = tokio::spawn(controller.run(token.clone()));

    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx"}]}
            }
        }
    }))
    .unwrap();
    let owners = Api::<ReplicaSet>::namespaced(client.clone(), NS);
    let pods = Api::<Pod>::namespaced(client.clone(), NS);
    owners.create(&PostParams::default(), &rs).await.unwrap();
    let guard = Duration::from_secs(60);
    assert!(
        within(guard, || async {
            status(&owners).await["readyReplicas"] == 2
        })
        .await,
        "2 ready replicas"
    );

    // The kubelet starts rejecting pods; a deleted pod's replacement fails.
    let kubelet = cluster.kubelet().unwrap();
    kubelet.reject_new_pods(Some("OutOfpods"));
    let victim = pods.list(&ListParams::default()).await.unwrap().items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        within(guard, || async {
            churn_condition(&status(&owners).await).is_some()
        })
        .await,
        "the FailedPodChurn condition"
    );

    // Scaled down to the pod that still runs: no pod is missing, none is
    // created, nothing fails any more. The condition must go, at the
    // latest when the strikes are forgotten (twice the longest backoff
    // after the last strike).
    owners
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    let forgotten = DEFAULT_CHURN_BACKOFF_MAX * 2 + Duration::from_secs(60);
    let cleared = within(forgotten, || async {
        churn_condition(&status(&owners).await).is_none()
    })
    .await;
    let last = status(&owners).await;
    assert!(cleared, "the condition outlived the strikes: {last}");
    assert_eq!(last["replicas"], 1);
    assert_eq!(last["readyReplicas"], 1);

    token.cancel();
    task.await.unwrap().unwrap();
    factory.shutdown().await;
    cluster.shutdown().await;
}
