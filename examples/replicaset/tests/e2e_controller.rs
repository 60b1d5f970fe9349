//! End-to-end tests of the ReplicaSet and ReplicationController controllers
//! against ctrlkit-testcluster, or against a real cluster when
//! `CTRLKIT_E2E_KUBECONFIG` names a kubeconfig (each test then works in a
//! fresh namespace, deleted at the end; the parts that need the simulated
//! kubelet or fault injection are skipped there).
//!
//! Deadlines are hang guards only: every check polls for convergence.
#![allow(clippy::unwrap_used)]

mod common;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ctrlkit_informer::{SharedInformerFactory, Store};
use ctrlkit_podcontrol::{KubePodControl, PodControl, PodControlError};
use ctrlkit_replicaset::{
    Controller, ControllerOptions, KubeOwnerClient, ReplicaOwner, ReplicaSetController,
};
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig, Latency};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{
    Namespace, ObjectReference, Pod, PodTemplateSpec, ReplicationController,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(90);

/// Where a test runs: a fresh namespace on testcluster or a real cluster.
struct Env {
    client: Client,
    ns: String,
    cluster: Option<TestCluster>,
}

impl Env {
    async fn start(kubelet: Option<KubeletConfig>) -> Env {
        let ns = format!("e2e-{}", &uuid_like()[..8]);
        let (client, cluster) = match std::env::var("CTRLKIT_E2E_KUBECONFIG") {
            Ok(path) => {
                println!("e2e: running against the cluster of kubeconfig {path}, namespace {ns}");
                let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .unwrap();
                (Client::try_from(config).unwrap(), None)
            }
            Err(_) => {
                println!(
                    "e2e: running against ctrlkit-testcluster (set CTRLKIT_E2E_KUBECONFIG for a real cluster), namespace {ns}"
                );
                let config = TestClusterConfig {
                    kubelet,
                    ..Default::default()
                };
                let tc = TestCluster::start(config).await.unwrap();
                (tc.client(), Some(tc))
            }
        };
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
        Env {
            client,
            ns,
            cluster,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    fn is_testcluster(&self) -> bool {
        self.cluster.is_some()
    }

    async fn finish(self) {
        match self.cluster {
            Some(tc) => tc.shutdown().await,
            None => {
                let _ = Api::<Namespace>::all(self.client.clone())
                    .delete(&self.ns, &DeleteParams::default())
                    .await;
            }
        }
    }

    /// Active (not terminating, not finished) pods of the namespace.
    async fn active_pods(&self) -> Vec<Pod> {
        self.api::<Pod>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(ctrlkit_podcontrol::pod::is_pod_active)
            .collect()
    }
}

fn uuid_like() -> String {
    format!("{:016x}", rand_u64())
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

/// Polls `check` until it holds; panics after [`DEADLINE`].
async fn eventually<F, Fut>(what: &str, check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    common::eventually(what, DEADLINE, check).await;
}

fn template(app: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9"}],
            "terminationGracePeriodSeconds": 0
        }
    })
}

fn replica_set(name: &str, replicas: i32, extra_spec: Value) -> ReplicaSet {
    let mut spec = json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": template(name),
    });
    if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        spec.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
}

fn controlled_by(pod: &Pod, uid: &str) -> bool {
    ctrlkit_podcontrol::pod::is_controlled_by(pod, uid)
}

/// A running controller, stopped with [`Running::stop`].
struct Running {
    registry: prometheus_client::registry::Registry,
    token: CancellationToken,
    task: JoinHandle<Result<(), ctrlkit_replicaset::Error>>,
    factory: SharedInformerFactory,
}

impl Running {
    async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        self.factory.shutdown().await;
    }
}

fn options(env: &Env, burst: usize) -> ControllerOptions {
    ControllerOptions {
        workers: 2,
        burst_replicas: burst,
        namespace: Some(env.ns.clone()),
        ..ControllerOptions::default()
    }
}

/// Starts a controller built with the public constructor, as the binaries
/// do.
fn start<O: ReplicaOwner>(env: &Env) -> Running {
    let factory = SharedInformerFactory::new(env.client.clone());
    let mut registry = prometheus_client::registry::Registry::default();
    let controller = Controller::<O>::new(
        env.client.clone(),
        &factory,
        options(env, 500),
        Some(&mut registry),
    )
    .unwrap();
    factory.start();
    let token = CancellationToken::new();
    let task = tokio::spawn(controller.run(token.clone()));
    Running {
        registry,
        token,
        task,
        factory,
    }
}

/// Wraps the real pod control to count creates and to check, at every
/// create, how many created pods the informer has not shown yet.
struct CountingPodControl {
    inner: KubePodControl,
    pods: Store<Pod>,
    namespace: String,
    started: AtomicUsize,
    created: Arc<AtomicUsize>,
    max_unobserved: AtomicUsize,
}

#[async_trait]
impl PodControl for CountingPodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        let started = self.started.fetch_add(1, Ordering::SeqCst) + 1;
        let seen = self.pods.list_namespace(&self.namespace).len();
        self.max_unobserved
            .fetch_max(started.saturating_sub(seen), Ordering::SeqCst);
        let pod = self
            .inner
            .create_pods(namespace, template, owner, controller_ref)
            .await?;
        self.created.fetch_add(1, Ordering::SeqCst);
        Ok(pod)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.inner
            .delete_pod(namespace, name, owner, preconditions)
            .await
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Pod, PodControlError> {
        self.inner.patch_pod(namespace, name, patch).await
    }
}

/// Starts a ReplicaSet controller whose pod control counts creates.
fn start_counting(
    env: &Env,
    burst: usize,
    created: Arc<AtomicUsize>,
) -> (Running, Arc<CountingPodControl>) {
    let factory = SharedInformerFactory::new(env.client.clone());
    let pods = factory.namespaced::<Pod>(&env.ns, watcher::Config::default());
    let owners = factory.namespaced::<ReplicaSet>(&env.ns, watcher::Config::default());
    let control = Arc::new(CountingPodControl {
        inner: KubePodControl::without_events(env.client.clone()),
        pods: pods.store(),
        namespace: env.ns.clone(),
        started: AtomicUsize::new(0),
        created,
        max_unobserved: AtomicUsize::new(0),
    });
    let controller = ReplicaSetController::from_parts(
        pods,
        owners,
        control.clone(),
        Arc::new(KubeOwnerClient::new(env.client.clone())),
        options(env, burst),
    )
    .unwrap();
    factory.start();
    let token = CancellationToken::new();
    let task = tokio::spawn(controller.run(token.clone()));
    (
        Running {
            registry: Default::default(),
            token,
            task,
            factory,
        },
        control,
    )
}

async fn rs_status(env: &Env, name: &str) -> Value {
    let rs = env.api::<ReplicaSet>().get(name).await.unwrap();
    serde_json::to_value(&rs).unwrap()["status"].clone()
}

async fn scale<K>(api: &Api<K>, name: &str, replicas: i32)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_set_creates_reports_status_and_scales_down_not_ready_pods_first() {
    let env = Env::start(Some(KubeletConfig::with_nodes(2, 50))).await;
    let controller = start::<ReplicaSet>(&env);
    let rs = env
        .api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set("web", 3, json!({})))
        .await
        .unwrap();
    let uid = rs.metadata.uid.clone().unwrap();

    eventually("3 ready replicas reported", || async {
        let s = rs_status(&env, "web").await;
        s["readyReplicas"] == 3 && s["availableReplicas"] == 3
    })
    .await;
    let s = rs_status(&env, "web").await;
    assert_eq!(s["replicas"], 3);
    assert_eq!(s["fullyLabeledReplicas"], 3);
    assert_eq!(
        s["observedGeneration"],
        json!(rs.metadata.generation.unwrap_or(1))
    );
    let pods = env.active_pods().await;
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        assert!(
            controlled_by(pod, &uid),
            "{:?}",
            pod.metadata.owner_references
        );
        assert!(pod.metadata.name.as_deref().unwrap().starts_with("web-"));
    }

    if let Some(kubelet) = env.cluster.as_ref().and_then(TestCluster::kubelet) {
        // One pod stops being ready: scaling down removes that one.
        let victim = pods[1].metadata.name.clone().unwrap();
        kubelet
            .set_pod_ready(&env.ns, &victim, false)
            .await
            .unwrap();
        eventually("the not-ready pod to be reported", || async {
            rs_status(&env, "web").await["readyReplicas"] == 2
        })
        .await;
        scale(&env.api::<ReplicaSet>(), "web", 2).await;
        eventually("2 pods", || async { env.active_pods().await.len() == 2 }).await;
        let left: Vec<_> = env
            .active_pods()
            .await
            .into_iter()
            .map(|p| p.metadata.name.unwrap())
            .collect();
        assert!(
            !left.contains(&victim),
            "{victim} should have gone first, left {left:?}"
        );
    } else {
        println!("e2e: skipping the not-ready ranking check (needs the simulated kubelet)");
        scale(&env.api::<ReplicaSet>(), "web", 2).await;
        eventually("2 pods", || async { env.active_pods().await.len() == 2 }).await;
    }
    eventually("status of 2 replicas at the new generation", || async {
        let rs = env.api::<ReplicaSet>().get("web").await.unwrap();
        let s = serde_json::to_value(&rs).unwrap()["status"].clone();
        s["replicas"] == 2 && s["observedGeneration"] == json!(rs.metadata.generation)
    })
    .await;

    // The workqueue and worker metrics were recorded under the queue name.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &controller.registry).unwrap();
    assert!(
        text.contains(r#"workqueue_adds_total{name="replicaset"}"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="replicaset",result="success"}"#
        ),
        "{text}"
    );

    // Deleting the owner lets the garbage collector remove its pods.
    env.api::<ReplicaSet>()
        .delete("web", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the pods to be garbage-collected", || async {
        env.api::<Pod>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_past_the_burst_never_leaves_more_than_a_burst_unobserved() {
    let env = Env::start(None).await;
    if let Some(tc) = &env.cluster {
        // A lagging watch makes unobserved creates pile up: only the burst
        // limit and the expectations keep them at one burst.
        tc.faults().set_config(
            FaultConfig::none().with_watch_delay(Latency::Fixed(Duration::from_millis(300))),
        );
    }
    let created = Arc::new(AtomicUsize::new(0));
    let (controller, control) = start_counting(&env, 500, created.clone());
    env.api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set("big", 1200, json!({})))
        .await
        .unwrap();
    eventually("1200 pods reported", || async {
        rs_status(&env, "big").await["replicas"] == 1200
    })
    .await;
    assert_eq!(env.active_pods().await.len(), 1200);
    assert_eq!(created.load(Ordering::SeqCst), 1200);
    let max = control.max_unobserved.load(Ordering::SeqCst);
    println!("e2e: at most {max} created pods were unobserved at once");
    assert!(
        max <= 500,
        "{max} creates were in flight or unobserved at once"
    );
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_scale_up_never_overshoots() {
    let env = Env::start(None).await;
    let created = Arc::new(AtomicUsize::new(0));
    let (first, _) = start_counting(&env, 50, created.clone());
    env.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &replica_set("restart", 300, json!({})),
        )
        .await
        .unwrap();
    eventually("some pods", || async {
        created.load(Ordering::SeqCst) >= 60
    })
    .await;
    first.stop().await;
    let at_restart = created.load(Ordering::SeqCst);
    println!("e2e: restarted after {at_restart} creates");
    assert!(at_restart < 300, "the restart should happen mid-scale");
    let (second, _) = start_counting(&env, 50, created.clone());
    eventually("300 replicas reported", || async {
        rs_status(&env, "restart").await["replicas"] == 300
    })
    .await;
    second.stop().await;
    assert_eq!(created.load(Ordering::SeqCst), 300, "pods created in total");
    assert_eq!(env.active_pods().await.len(), 300);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphans_are_adopted_and_relabelled_pods_released_and_replaced() {
    let env = Env::start(None).await;
    let orphan: Pod = serde_json::from_value(json!({
        "metadata": {"name": "handmade", "labels": {"app": "adopt"}},
        "spec": template("adopt")["spec"],
    }))
    .unwrap();
    env.api::<Pod>()
        .create(&PostParams::default(), &orphan)
        .await
        .unwrap();
    let controller = start::<ReplicaSet>(&env);
    let rs = env
        .api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set("adopt", 1, json!({})))
        .await
        .unwrap();
    let uid = rs.metadata.uid.clone().unwrap();
    eventually("the orphan to be adopted", || async {
        controlled_by(&env.api::<Pod>().get("handmade").await.unwrap(), &uid)
    })
    .await;
    eventually("status of 1 replica", || async {
        rs_status(&env, "adopt").await["replicas"] == 1
    })
    .await;
    assert_eq!(
        env.active_pods().await.len(),
        1,
        "adopted instead of creating"
    );

    // Relabelled: released (our reference removed) and replaced.
    env.api::<Pod>()
        .patch(
            "handmade",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"app": "debug"}}})),
        )
        .await
        .unwrap();
    eventually("the pod to be released", || async {
        let pod = env.api::<Pod>().get("handmade").await.unwrap();
        pod.metadata.owner_references.unwrap_or_default().is_empty()
    })
    .await;
    eventually("a replacement", || async {
        env.active_pods()
            .await
            .iter()
            .any(|p| p.metadata.name.as_deref() != Some("handmade") && controlled_by(p, &uid))
    })
    .await;
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controller_lifecycle() {
    let env = Env::start(Some(KubeletConfig::with_nodes(1, 20))).await;
    let controller = start::<ReplicationController>(&env);
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "legacy"},
        "spec": {"replicas": 2, "selector": {"app": "legacy"}, "template": template("legacy")},
    }))
    .unwrap();
    let api = env.api::<ReplicationController>();
    let rc = api.create(&PostParams::default(), &rc).await.unwrap();
    let uid = rc.metadata.uid.clone().unwrap();
    eventually("2 ready replicas reported", || async {
        let s = serde_json::to_value(api.get("legacy").await.unwrap()).unwrap()["status"].clone();
        s["replicas"] == 2 && s["readyReplicas"] == 2 && s["availableReplicas"] == 2
    })
    .await;
    let pods = env.active_pods().await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let r = ctrlkit_podcontrol::pod::controller_of(pod).unwrap();
        assert_eq!(
            (r.kind.as_str(), r.api_version.as_str(), r.uid.as_str()),
            ("ReplicationController", "v1", uid.as_str())
        );
    }
    let status = serde_json::to_value(api.get("legacy").await.unwrap()).unwrap()["status"].clone();
    assert!(status.get("terminatingReplicas").is_none());

    scale(&api, "legacy", 1).await;
    eventually("1 pod", || async { env.active_pods().await.len() == 1 }).await;
    api.delete("legacy", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the pods to be garbage-collected", || async {
        env.active_pods().await.is_empty()
    })
    .await;
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_creates_set_the_replica_failure_condition_until_they_succeed() {
    let env = Env::start(None).await;
    let Some(tc) = env.cluster.as_ref() else {
        println!("e2e: skipping the FailedCreate check (needs testcluster fault injection)");
        env.finish().await;
        return;
    };
    tc.faults().set_config(
        FaultConfig::none().with_error(
            ErrorRule::verb("create", 1.0, ErrorKind::InternalError).for_resource("pods"),
        ),
    );
    let controller = start::<ReplicaSet>(&env);
    env.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &replica_set("failing", 2, json!({})),
        )
        .await
        .unwrap();
    eventually("the FailedCreate condition", || async {
        let s = rs_status(&env, "failing").await;
        s["conditions"][0]["type"] == "ReplicaFailure"
            && s["conditions"][0]["reason"] == "FailedCreate"
    })
    .await;
    let s = rs_status(&env, "failing").await;
    assert_eq!(s["conditions"][0]["status"], "True");
    assert!(
        !s["conditions"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    );
    assert!(env.active_pods().await.is_empty());

    tc.faults().clear();
    eventually("2 replicas and no condition", || async {
        let s = rs_status(&env, "failing").await;
        s["replicas"] == 2 && s.get("conditions").is_none_or(Value::is_null)
    })
    .await;
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_become_available_after_min_ready_seconds_without_further_events() {
    let env = Env::start(Some(KubeletConfig::with_nodes(1, 20))).await;
    let controller = start::<ReplicaSet>(&env);
    env.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &replica_set("slow", 2, json!({"minReadySeconds": 2})),
        )
        .await
        .unwrap();
    eventually("2 ready replicas", || async {
        rs_status(&env, "slow").await["readyReplicas"] == 2
    })
    .await;
    eventually("2 available replicas", || async {
        rs_status(&env, "slow").await["availableReplicas"] == 2
    })
    .await;
    controller.stop().await;
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_the_server_rejects_reports_failed_create_until_fixed() {
    let env = Env::start(None).await;
    if !env.is_testcluster() {
        // A real API server refuses such a ReplicaSet outright.
        println!("e2e: skipping the rejected-template check (testcluster only)");
        env.finish().await;
        return;
    }
    let controller = start::<ReplicaSet>(&env);
    let broken = replica_set(
        "broken",
        1,
        json!({"template": {
            "metadata": {"labels": {"app": "broken"}},
            "spec": {"containers": []}
        }}),
    );
    env.api::<ReplicaSet>()
        .create(&PostParams::default(), &broken)
        .await
        .unwrap();
    eventually("the FailedCreate condition", || async {
        let s = rs_status(&env, "broken").await;
        s["conditions"][0]["reason"] == "FailedCreate"
            && s["conditions"][0]["message"]
                .as_str()
                .is_some_and(|m| m.contains("spec.containers"))
    })
    .await;
    env.api::<ReplicaSet>()
        .patch(
            "broken",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": template("broken")}})),
        )
        .await
        .unwrap();
    eventually("1 replica and no condition", || async {
        let s = rs_status(&env, "broken").await;
        s["replicas"] == 1 && s.get("conditions").is_none_or(Value::is_null)
    })
    .await;
    controller.stop().await;
    env.finish().await;
}
