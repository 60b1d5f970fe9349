//! Read-own-writes end to end on ctrlkit-testcluster with delayed watch
//! delivery: the informers run seconds behind the API server, longer than
//! the expectations wait (shortened here so the test is quick; in a real
//! cluster it is 5 minutes, and a watch that far behind is upstream issue
//! #129795). With read-own-writes the controller waits for its own writes
//! and never overshoots; without it, it acts on a cache missing its own
//! pods and creates extra ones.
//!
//! Real time (the API server is reached over TCP); deadlines are hang
//! guards only.
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_replicaset::{ControllerOptions, ReplicaSetController};
use ctrlkit_testcluster::faults::{FaultConfig, Latency};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "row";
const DEADLINE: Duration = Duration::from_secs(120);
/// How far behind the informers run.
const WATCH_DELAY: Duration = Duration::from_secs(4);
/// Expectations give up long before the watch catches up.
const EXPECTATIONS_TTL: Duration = Duration::from_millis(1500);

/// An object as JSON, so the test compiles against every k8s-openapi
/// version.
fn json_of(rs: &ReplicaSet) -> serde_json::Value {
    serde_json::to_value(rs).unwrap()
}

/// Polls `check` until it holds; panics after [`DEADLINE`].
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    common::eventually(what, DEADLINE, check).await;
}

struct Scenario {
    cluster: TestCluster,
    client: Client,
    token: CancellationToken,
    factory: SharedInformerFactory,
    task: tokio::task::JoinHandle<Result<(), ctrlkit_replicaset::Error>>,
    registry: prometheus_client::registry::Registry,
    /// The most active pods seen at once by a poller.
    max_active: Arc<AtomicUsize>,
    /// The most active pods seen beyond what the ReplicaSet asked for at
    /// that moment (its spec is read before the pods, and only grows).
    max_excess: Arc<AtomicUsize>,
    poller: tokio::task::JoinHandle<()>,
}

impl Scenario {
    async fn start(read_own_writes: bool, kubelet: Option<KubeletConfig>) -> Scenario {
        let cluster = TestCluster::start(TestClusterConfig {
            kubelet,
            ..Default::default()
        })
        .await
        .unwrap();
        let client = cluster.client();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        cluster
            .faults()
            .set_config(FaultConfig::none().with_watch_delay(Latency::Fixed(WATCH_DELAY)));
        let factory = SharedInformerFactory::new(client.clone());
        let mut registry = prometheus_client::registry::Registry::default();
        let options = ControllerOptions {
            namespace: Some(NS.into()),
            read_own_writes,
            expectations_ttl: EXPECTATIONS_TTL,
            ..ControllerOptions::default()
        };
        let controller =
            ReplicaSetController::new(client.clone(), &factory, options, Some(&mut registry))
                .unwrap();
        factory.start();
        let token = CancellationToken::new();
        let task = tokio::spawn(controller.run(token.clone()));

        let max_active = Arc::new(AtomicUsize::new(0));
        let max_excess = Arc::new(AtomicUsize::new(0));
        let poller = {
            let pods = Api::<Pod>::namespaced(client.clone(), NS);
            let owners = Api::<ReplicaSet>::namespaced(client.clone(), NS);
            let (max_active, max_excess) = (max_active.clone(), max_excess.clone());
            tokio::spawn(async move {
                loop {
                    let spec = match owners.get_opt("web").await {
                        Ok(Some(rs)) => json_of(&rs)["spec"]["replicas"].as_i64(),
                        _ => None,
                    };
                    if let Ok(list) = pods.list(&ListParams::default()).await {
                        let active = list
                            .items
                            .iter()
                            .filter(|p| ctrlkit_podcontrol::pod::is_pod_active(p))
                            .count();
                        max_active.fetch_max(active, Ordering::SeqCst);
                        if let Some(spec) = spec.and_then(|n| usize::try_from(n).ok()) {
                            max_excess.fetch_max(active.saturating_sub(spec), Ordering::SeqCst);
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        Scenario {
            cluster,
            client,
            token,
            factory,
            task,
            registry,
            max_active,
            max_excess,
            poller,
        }
    }

    fn replica_sets(&self) -> Api<ReplicaSet> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn pod_creates(&self) -> u64 {
        self.cluster.requests().count("create", "pods").success
    }

    async fn active_pods(&self) -> usize {
        Api::<Pod>::namespaced(self.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .filter(|p| ctrlkit_podcontrol::pod::is_pod_active(p))
            .count()
    }

    async fn scale(&self, replicas: i32) {
        self.replica_sets()
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
    }

    /// Creates the ReplicaSet with 2 replicas, then scales it to 5 and to 8,
    /// each time as soon as the controller has acted on the previous
    /// step: while its informers are still seconds behind.
    async fn create_and_scale_twice(&self) {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}
                }
            }
        }))
        .unwrap();
        self.replica_sets()
            .create(&PostParams::default(), &rs)
            .await
            .unwrap();
        eventually("the first creates", || async { self.pod_creates() >= 2 }).await;
        self.scale(5).await;
        eventually("creates after the first scale", || async {
            self.pod_creates() >= 5
        })
        .await;
        self.scale(8).await;
    }

    fn metrics_text(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).unwrap();
        text
    }

    async fn stop(self) {
        self.poller.abort();
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        self.factory.shutdown().await;
        self.cluster.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_twice_behind_a_lagging_watch_never_overshoots_with_read_own_writes() {
    let s = Scenario::start(true, None).await;
    s.create_and_scale_twice().await;
    eventually("8 active pods and a status of 8", || async {
        let rs = s.replica_sets().get("web").await.unwrap();
        s.active_pods().await == 8 && json_of(&rs)["status"]["replicas"] == 8
    })
    .await;
    // Let the lagging watch deliver everything; nothing more may happen.
    tokio::time::sleep(WATCH_DELAY * 2).await;

    let creates = s.pod_creates();
    let deletes = s.cluster.requests().count("delete", "pods").total();
    let max_active = s.max_active.load(Ordering::SeqCst);
    let max_excess = s.max_excess.load(Ordering::SeqCst);
    let text = s.metrics_text();
    println!(
        "read-own-writes on: {creates} creates, {deletes} deletes, at most {max_active} active, \
         at most {max_excess} beyond the spec"
    );
    assert_eq!(creates, 8, "pods created in total");
    assert_eq!(deletes, 0, "no excess pods to delete");
    assert!(max_active <= 8, "{max_active} active pods at once");
    assert_eq!(max_excess, 0, "active pods beyond the spec of the moment");
    assert_eq!(s.active_pods().await, 8);
    // The protection was exercised, and counted.
    assert!(
        text.contains(r#"replicaset_controller_stale_sync_skips_total{controller="replicaset",group="",resource="pods"}"#),
        "{text}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_read_own_writes_the_same_scenario_overshoots() {
    let s = Scenario::start(false, None).await;
    s.create_and_scale_twice().await;
    // The expectations expire while the watch is behind: the controller
    // sees none of its pods and creates them again.
    eventually("more active pods than the ReplicaSet asked for", || async {
        s.max_excess.load(Ordering::SeqCst) > 0
    })
    .await;
    let (creates, max_excess) = (s.pod_creates(), s.max_excess.load(Ordering::SeqCst));
    println!("read-own-writes off: {creates} creates so far, up to {max_excess} beyond the spec");
    assert!(!s.metrics_text().contains("stale_sync_skips_total{"));
    s.stop().await;
}

/// Status writes made from the informer's copy of the owner: without
/// read-own-writes that copy often lacks the controller's previous status
/// write and the API server answers 409 Conflict (issue 5's scale-out
/// bench); with it, the copy always includes it.
async fn status_conflicts(read_own_writes: bool) -> (u64, u64) {
    let kubelet = KubeletConfig::with_nodes(2, 50)
        .schedule_delay(Duration::from_millis(100))
        .start_delay(Duration::from_millis(300))
        .ready_delay(Duration::from_millis(300));
    let s = Scenario::start(read_own_writes, Some(kubelet)).await;
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 6,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}]}
            }
        }
    }))
    .unwrap();
    s.replica_sets()
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    eventually("6 ready replicas reported", || async {
        let rs = s.replica_sets().get("web").await.unwrap();
        json_of(&rs)["status"]["readyReplicas"] == 6
    })
    .await;
    let writes = s.cluster.requests().count("update", "replicasets/status");
    s.stop().await;
    (writes.total(), writes.client_error)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_writes_never_conflict_with_the_controllers_own_previous_write() {
    let (writes, conflicts) = status_conflicts(true).await;
    println!("read-own-writes on: {writes} status writes, {conflicts} conflicts");
    assert_eq!(conflicts, 0, "status writes answered with a 4xx");
    // The same run without read-own-writes: the 409s are back.
    let (writes, conflicts) = status_conflicts(false).await;
    println!("read-own-writes off: {writes} status writes, {conflicts} conflicts");
    assert!(conflicts > 0, "no conflicts without read-own-writes either");
}
