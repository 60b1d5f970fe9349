//! The churn guard: pods the kubelet rejects right after creation (phase
//! `Failed`, reason `OutOfpods`) must not make the controller create
//! replacements in a hot loop (seed 003; kubernetes #72593, #113907,
//! #120160, #131116).
//!
//! First with hand-fed caches and a fake pod control, then end to end on
//! ctrlkit-testcluster with a kubelet that rejects every pod, in paused
//! tokio time so that ten minutes pass in moments.
#![allow(clippy::unwrap_used)]

mod common;

use std::cell::Cell;
use std::time::Duration;

use common::{Harness, NS, edit, live_replica_set, replica_set, replication_controller};
use ctrlkit_informer::{ObjectKey, SharedInformerFactory};
use ctrlkit_replicaset::{
    ChurnGuardOptions, ControllerOptions, FAILED_POD_CHURN_REASON, REPLICA_FAILURE,
    ReplicaSetController,
};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::api::events::v1::Event as ClusterEvent;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, PostParams};
use kube::runtime::watcher::Event;
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A controller over hand-fed caches and fakes, with one ReplicaSet.
struct Fixture {
    h: Harness<ReplicaSet>,
    rs: ReplicaSet,
    /// Created pods and deletes already fed into the pod cache.
    seen_created: Cell<usize>,
    seen_deletes: Cell<usize>,
}

impl Fixture {
    fn new(replicas: i32, churn_guard: ChurnGuardOptions) -> Self {
        let h = Harness::with_options(ControllerOptions {
            churn_guard,
            ..ControllerOptions::default()
        });
        let rs = replica_set("web", replicas, "web");
        let f = Self {
            h,
            rs: rs.clone(),
            seen_created: Cell::new(0),
            seen_deletes: Cell::new(0),
        };
        f.put_owner(&rs);
        f
    }

    fn put_owner(&self, rs: &ReplicaSet) {
        *self.h.client.live.lock() = Some(rs.clone());
        self.h.owners.apply_event(Event::Apply(rs.clone()));
    }

    /// Syncs the ReplicaSet, then shows the status it wrote and the pods
    /// it deleted in the caches, as the informers would.
    async fn sync(&self) -> ctrlkit_worker::Action {
        let writes = self.h.client.updates().len();
        let action = self
            .h
            .controller
            .sync(&ObjectKey::from_object(&self.rs))
            .await
            .unwrap();
        let updates = self.h.client.updates();
        if updates.len() > writes {
            let mut written: ReplicaSet =
                serde_json::from_value(updates[updates.len() - 1].clone()).unwrap();
            written.metadata.resource_version = Some(format!("{}", 100 + updates.len()));
            self.h.owners.apply_event(Event::Apply(written));
        }
        let deletes = self.h.fake.deletes();
        for delete in &deletes[self.seen_deletes.get()..] {
            if let Some(pod) = self.h.pods.store().get(&delete.namespace, &delete.name) {
                self.h.pods.apply_event(Event::Delete((*pod).clone()));
            }
        }
        self.seen_deletes.set(deletes.len());
        action
    }

    /// Pods created and not yet observed.
    fn new_creates(&self) -> usize {
        self.h.fake.created_pods().len() - self.seen_created.get()
    }

    /// The pods created since the last call, as the cache shows them once
    /// the kubelet has had its say: created now, then `phase`.
    fn observe_created(&self, phase: &str) -> Vec<Pod> {
        let all = self.h.fake.created_pods();
        let created: Vec<Pod> = all[self.seen_created.get()..]
            .iter()
            .map(|pod| {
                edit(pod, |v| {
                    v["metadata"]["creationTimestamp"] = json!(Timestamp::now().to_string());
                    v["status"] = match phase {
                        "Failed" => json!({
                            "phase": "Failed", "reason": "OutOfpods",
                            "message": "Pod Node didn't have enough resource: pods"
                        }),
                        _ => json!({"phase": phase}),
                    };
                })
            })
            .collect();
        self.seen_created.set(all.len());
        for pod in &created {
            self.h.pods.apply_event(Event::Apply(pod.clone()));
        }
        created
    }

    /// Shows `pod` in the cache with another phase (`Failed`: rejected
    /// with `OutOfpods`).
    fn set_phase(&self, pod: &Pod, phase: &str) {
        let pod = edit(pod, |v| {
            v["metadata"]["resourceVersion"] = json!("999");
            v["status"] = match phase {
                "Failed" => json!({"phase": "Failed", "reason": "OutOfpods"}),
                _ => json!({"phase": phase}),
            };
        });
        self.h.pods.apply_event(Event::Apply(pod));
    }

    /// The `ReplicaFailure` condition of the last status written.
    fn failure_condition(&self) -> Option<Value> {
        let status = self.h.client.last_status();
        status["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == REPLICA_FAILURE)
            .cloned()
    }
}

#[tokio::test(start_paused = true)]
async fn churned_pods_hold_back_creation_until_the_backoff_ends() {
    let f = Fixture::new(2, ChurnGuardOptions::default());
    f.sync().await;
    assert_eq!(f.new_creates(), 2);
    f.observe_created("Failed");

    // Two strikes: 20 s without creating; the sync comes back then.
    let action = f.sync().await;
    assert_eq!(f.new_creates(), 0, "no replacement during the backoff");
    assert_eq!(action.requeue_delay(), Some(Duration::from_secs(20)));
    let condition = f.failure_condition().expect("ReplicaFailure is set");
    assert_eq!(condition["reason"], FAILED_POD_CHURN_REASON);
    assert_eq!(condition["status"], "True");
    let message = condition["message"].as_str().unwrap();
    assert!(message.contains("OutOfpods"), "{message}");

    // Syncs during the backoff create nothing and keep the condition
    // without rewriting the status.
    let writes = f.h.client.updates().len();
    tokio::time::advance(Duration::from_secs(19)).await;
    let action = f.sync().await;
    assert_eq!(f.new_creates(), 0);
    assert_eq!(action.requeue_delay(), Some(Duration::from_secs(1)));
    assert_eq!(f.h.client.updates().len(), writes, "status unchanged");

    // Backoff over: one probe pod only, however many are missing, and no
    // more while it is pending.
    tokio::time::advance(Duration::from_secs(1)).await;
    f.sync().await;
    assert_eq!(f.new_creates(), 1, "a single probe");
    let probe = f.observe_created("Pending").remove(0);
    f.sync().await;
    assert_eq!(f.new_creates(), 0, "the probe is pending");

    // It fails too: the backoff doubles (three strikes: 40 s).
    f.set_phase(&probe, "Failed");
    let action = f.sync().await;
    assert_eq!(f.new_creates(), 0);
    assert_eq!(action.requeue_delay(), Some(Duration::from_secs(40)));
    assert!(f.failure_condition().is_some());

    // The kubelet admits pods again: after the backoff the probe runs, the
    // condition goes and the missing pod is created at once.
    tokio::time::advance(Duration::from_secs(40)).await;
    f.sync().await;
    assert_eq!(f.new_creates(), 1);
    f.observe_created("Running");
    f.sync().await;
    assert_eq!(f.new_creates(), 1, "back to normal");
    assert_eq!(f.failure_condition(), None, "condition cleared");
    f.observe_created("Running");
    f.sync().await;
    assert_eq!(f.h.client.last_status()["replicas"], 2);
    assert_eq!(
        f.h.fake.delete_count(),
        0,
        "three Failed pods are within the cap"
    );
}

#[tokio::test(start_paused = true)]
async fn the_condition_goes_when_no_replica_is_missing() {
    let f = Fixture::new(1, ChurnGuardOptions::default());
    f.sync().await;
    f.observe_created("Failed");
    f.sync().await;
    assert!(f.failure_condition().is_some());
    // Scaled to zero while backing off: nothing is missing, nothing failed.
    let scaled = edit(&f.rs, |v| v["spec"]["replicas"] = json!(0));
    f.put_owner(&scaled);
    f.sync().await;
    assert_eq!(f.failure_condition(), None);
    assert_eq!(f.new_creates(), 0);
}

#[tokio::test(start_paused = true)]
async fn failed_pods_beyond_the_kept_number_are_deleted_oldest_first() {
    let f = Fixture::new(
        1,
        ChurnGuardOptions {
            failed_pods_kept: 2,
            backoff_base: Duration::from_secs(1),
            ..ChurnGuardOptions::default()
        },
    );
    let mut failed = Vec::new();
    for round in 0..4 {
        f.sync().await;
        assert_eq!(f.new_creates(), 1, "round {round}");
        failed.extend(f.observe_created("Failed"));
        f.sync().await;
        tokio::time::advance(Duration::from_secs(300)).await;
    }
    // Kept: the two newest; the two oldest were deleted, each guarded by
    // its UID.
    let deletes = f.h.fake.deletes();
    let deleted: Vec<&str> = deletes.iter().map(|d| d.name.as_str()).collect();
    let oldest: Vec<&str> = failed[..2]
        .iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(deleted, oldest);
    for (delete, pod) in deletes.iter().zip(&failed) {
        let uid = delete.preconditions.as_ref().and_then(|p| p.uid.clone());
        assert_eq!(uid, pod.metadata.uid);
    }
    assert_eq!(f.h.pods.store().list().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn with_the_guard_off_failed_pods_are_replaced_at_once_as_upstream() {
    let f = Fixture::new(2, ChurnGuardOptions::disabled());
    for round in 0..5 {
        f.sync().await;
        assert_eq!(f.new_creates(), 2, "round {round}");
        assert_eq!(f.failure_condition(), None);
        f.observe_created("Failed");
    }
    assert_eq!(f.h.fake.delete_count(), 0, "Failed pods are left alone");
}

#[tokio::test(start_paused = true)]
async fn a_deleted_and_recreated_owner_starts_without_backoff() {
    let f = Fixture::new(1, ChurnGuardOptions::default());
    f.sync().await;
    f.observe_created("Failed");
    f.sync().await;
    assert_eq!(f.new_creates(), 0, "backing off");

    // Deleted, and re-created under the same name.
    f.h.owners.apply_event(Event::Delete(f.rs.clone()));
    f.sync().await;
    let fresh = edit(&f.rs, |v| v["metadata"]["uid"] = json!("uid-web-2"));
    f.put_owner(&fresh);
    f.sync().await;
    assert_eq!(f.new_creates(), 1);
}

#[tokio::test(start_paused = true)]
async fn the_replication_manager_is_guarded_too() {
    let h = Harness::<ReplicationController>::new();
    let rc = replication_controller("web", 2, "web");
    h.owner(&rc);
    let key = Harness::key(&rc);
    h.controller.sync(&key).await.unwrap();
    assert_eq!(h.fake.create_count(), 2);
    for pod in h.fake.created_pods() {
        h.pod(&edit(&pod, |v| {
            v["metadata"]["creationTimestamp"] = json!(Timestamp::now().to_string());
            v["status"] = json!({"phase": "Failed", "reason": "NodeAffinity"});
        }));
    }
    h.fake.clear();
    h.controller.sync(&key).await.unwrap();
    assert_eq!(h.fake.create_count(), 0, "backing off");
    let status = h.client.last_status();
    let condition = &status["conditions"][0];
    assert_eq!(condition["type"], REPLICA_FAILURE);
    assert_eq!(condition["reason"], FAILED_POD_CHURN_REASON);
    assert!(
        condition["message"]
            .as_str()
            .unwrap()
            .contains("NodeAffinity")
    );
}

// ---------------------------------------------------------------------------
// End to end on testcluster.

/// Replicas of the ReplicaSet in the end-to-end tests.
const REPLICAS: i32 = 3;

struct Cluster {
    cluster: TestCluster,
    token: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), ctrlkit_replicaset::Error>>,
    factory: SharedInformerFactory,
    registry: prometheus_client::registry::Registry,
}

impl Cluster {
    /// A cluster whose kubelet rejects every pod with `OutOfpods`, and a
    /// ReplicaSet controller watching `default` with `churn_guard`.
    async fn start(churn_guard: ChurnGuardOptions) -> Self {
        let kubelet = KubeletConfig::with_nodes(1, 110).reject_reason(Some("OutOfpods"));
        let cluster = TestCluster::start(TestClusterConfig::default().with_kubelet(kubelet))
            .await
            .unwrap();
        let client = cluster.client();
        let factory = SharedInformerFactory::new(client.clone());
        let mut registry = prometheus_client::registry::Registry::default();
        let options = ControllerOptions {
            namespace: Some(NS.into()),
            churn_guard,
            ..ControllerOptions::default()
        };
        let controller =
            ReplicaSetController::new(client, &factory, options, Some(&mut registry)).unwrap();
        factory.start();
        let token = CancellationToken::new();
        let task = tokio::spawn(controller.run(token.clone()));
        let rs = live_replica_set(
            "web",
            REPLICAS,
            json!({"containers": [{"name": "app", "image": "nginx"}]}),
        );
        Api::<ReplicaSet>::namespaced(cluster.client(), NS)
            .create(&PostParams::default(), &rs)
            .await
            .unwrap();
        Self {
            cluster,
            token,
            task,
            factory,
            registry,
        }
    }

    fn client(&self) -> Client {
        self.cluster.client()
    }

    /// Pod creates the controller sent so far.
    fn creates(&self) -> u64 {
        self.cluster.requests().count("create", "pods").total()
    }

    async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        self.factory.shutdown().await;
        self.cluster.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn with_the_guard_at_most_20_pods_are_created_in_ten_minutes() {
    let env = Cluster::start(ChurnGuardOptions::default()).await;
    // Ten simulated minutes; tokio jumps over the idle stretches.
    tokio::time::sleep(Duration::from_secs(600)).await;
    let creates = env.creates();
    println!("churn guard on: {creates} pod creates in 10 simulated minutes");
    assert!(creates >= u64::try_from(REPLICAS).unwrap(), "{creates}");
    assert!(creates <= 20, "{creates} pods created in 10 minutes");

    // The owner says why.
    let rs = Api::<ReplicaSet>::namespaced(env.client(), NS)
        .get("web")
        .await
        .unwrap();
    // Read as JSON: the field types differ between API versions.
    let rs = serde_json::to_value(&rs).unwrap();
    let failure = rs["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == REPLICA_FAILURE))
        .expect("ReplicaFailure condition");
    assert_eq!(failure["reason"], FAILED_POD_CHURN_REASON);
    let message = failure["message"].as_str().unwrap_or_default();
    assert!(message.contains("OutOfpods"), "{message}");

    // A Warning event on the ReplicaSet.
    let events = Api::<ClusterEvent>::namespaced(env.client(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let churn_event = events.items.iter().find(|e| {
        e.reason.as_deref() == Some(FAILED_POD_CHURN_REASON)
            && e.type_.as_deref() == Some("Warning")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
    });
    let note = churn_event
        .and_then(|e| e.note.clone())
        .expect("FailedPodChurn event");
    assert!(note.contains("OutOfpods"), "{note}");

    // Failed pods do not pile up.
    let pods = Api::<Pod>::namespaced(env.client(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let kept = ChurnGuardOptions::default().failed_pods_kept;
    assert!(pods.items.len() <= kept + usize::try_from(REPLICAS).unwrap());

    // The backoffs are counted.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &env.registry).unwrap();
    let backoffs = text
        .lines()
        .find_map(|l| l.strip_prefix("replicaset_controller_churn_backoffs_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(backoffs >= 1.0, "{text}");
    env.stop().await;
}

#[tokio::test(start_paused = true)]
async fn without_the_guard_the_controller_creates_pods_in_a_hot_loop() {
    const HOT: u64 = 300;
    let env = Cluster::start(ChurnGuardOptions::disabled()).await;
    // Counting stops at HOT creates; the simulated hour and the wall-clock
    // limit are hang guards only.
    let started = tokio::time::Instant::now();
    let wall = std::time::Instant::now();
    while env.creates() < HOT
        && started.elapsed() < Duration::from_secs(3600)
        && wall.elapsed() < Duration::from_secs(300)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let creates = env.creates();
    println!(
        "churn guard off: {creates} pod creates in {:?} simulated",
        started.elapsed()
    );
    assert!(creates >= HOT, "only {creates} creates: no hot loop?");
    // Upstream keeps every Failed pod.
    let failed = Api::<Pod>::namespaced(env.client(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .count();
    assert!(failed > 100, "{failed} Failed pods");
    env.stop().await;
}
