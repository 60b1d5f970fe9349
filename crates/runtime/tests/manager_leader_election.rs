//! Leader election between managers against the test cluster's Leases:
//! only the leader runs its leader-elected runnables, a stand-by keeps
//! warm caches and takes over after a graceful stop or a crash, and the
//! write fence stops a leader that cannot renew or lost its lease.
//!
//! Lease expiry needs real time: leases are 3 s with a 2 s renew deadline
//! (the shortest the manager accepts), so each test takes a few seconds.
#![allow(clippy::unwrap_used)]

mod manager_support;

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_runtime::manager::{
    FenceClosed, LeaderElectionConfig, LeaderFence, Manager, ManagerConfig, ManagerError,
    ManagerStatus, Readiness, exit_code,
};
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig, Latency};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{Patch, PatchParams};
use manager_support::{Trace, config, eventually, http_get, probe_with};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const LEASE: &str = "manager-test";
const LEASE_DURATION: Duration = Duration::from_secs(3);
const RENEW_DEADLINE: Duration = Duration::from_secs(2);
/// Generous bound for what takes a renewal or a few requests.
const SOON: Duration = Duration::from_secs(10);

fn elected(identity: &str) -> ManagerConfig {
    let mut config = config(identity);
    let mut election = LeaderElectionConfig::new(LEASE, "default");
    election.identity = identity.to_owned();
    election.lease_duration = LEASE_DURATION;
    election.renew_deadline = RENEW_DEADLINE;
    config.leader_election = Some(election);
    config.shutdown_grace_period = Duration::from_secs(5);
    config
}

/// A running manager with a leader-elected `work` probe (which takes
/// `drain` to finish after cancellation) and an `exporter` probe that runs
/// on stand-bys too.
struct Candidate {
    status: ManagerStatus,
    fence: LeaderFence,
    work: Arc<Trace>,
    exporter: Arc<Trace>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

impl Candidate {
    fn start(cluster: &TestCluster, config: ManagerConfig, drain: Duration) -> Self {
        let mut manager = Manager::with_client(cluster.client(), config).unwrap();
        let (work, work_trace) = probe_with("work", drain, true);
        let (exporter, exporter_trace) = probe_with("exporter", Duration::ZERO, false);
        manager.add(work).add(exporter);
        let status = manager.status();
        let fence = manager.fence();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(manager.run(shutdown.clone()));
        Self {
            status,
            fence,
            work: work_trace,
            exporter: exporter_trace,
            shutdown,
            task,
        }
    }

    async fn wait_leading(&self) {
        eventually("leadership", SOON, || {
            self.status.is_leader() && self.work.started()
        })
        .await;
        assert!(self.fence.is_open());
    }

    async fn wait_standing_by(&self) {
        eventually("a warm stand-by", SOON, || self.exporter.started()).await;
        assert!(!self.status.is_leader());
        assert!(!self.work.started());
        assert_eq!(self.fence.check(), Err(FenceClosed::NotLeader));
    }

    async fn stop(self) -> Result<(), ManagerError> {
        self.shutdown.cancel();
        self.task.await.unwrap()
    }
}

async fn holder(cluster: &TestCluster) -> Option<String> {
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    leases.get(LEASE).await.ok()?.spec?.holder_identity
}

async fn cluster() -> TestCluster {
    TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_acts_stand_bys_wait_warm_and_one_takes_over_after_a_graceful_stop() {
    let cluster = cluster().await;
    let mut leader_config = elected("a");
    leader_config.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    let a = Candidate::start(&cluster, leader_config, Duration::from_millis(300));
    a.wait_leading().await;
    assert_eq!(holder(&cluster).await.as_deref(), Some("a"));
    let metrics = a.status.endpoints().await.unwrap().metrics.unwrap();
    let (_, body) = http_get(metrics, "/metrics").await;
    assert!(
        body.contains(r#"leader_election_master_status{name="manager-test"} 1"#),
        "{body}"
    );

    let mut standby_config = elected("b");
    standby_config.ready_when_standby = false;
    let b = Candidate::start(&cluster, standby_config, Duration::ZERO);
    b.wait_standing_by().await;
    assert_eq!(b.status.readiness(), Readiness::StandBy);
    let c = Candidate::start(&cluster, elected("c"), Duration::ZERO);
    c.wait_standing_by().await;
    assert_eq!(
        c.status.readiness(),
        Readiness::Ready,
        "stand-bys ready by default"
    );

    // Renewals keep the fence open well past the renew deadline.
    tokio::time::sleep(RENEW_DEADLINE + Duration::from_secs(1)).await;
    assert!(a.fence.is_open());
    assert!(a.status.is_leader() && !a.task.is_finished());

    // A stand-by stopping touches nothing.
    c.stop().await.unwrap();
    assert_eq!(holder(&cluster).await.as_deref(), Some("a"));

    // The leader drains, closes its fence and releases the lease.
    let (a_fence, a_work) = (a.fence.clone(), a.work.clone());
    a.stop().await.unwrap();
    assert!(a_work.finished(), "in-flight work drained");
    assert_eq!(a_fence.check(), Err(FenceClosed::Stopped));
    let released = Instant::now();

    b.wait_leading().await;
    assert!(released.elapsed() <= LEASE_DURATION + Duration::from_secs(2));
    assert_eq!(holder(&cluster).await.as_deref(), Some("b"));
    assert_eq!(b.status.readiness(), Readiness::Ready);
    b.stop().await.unwrap();
    assert_eq!(holder(&cluster).await, None, "released on the way out");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_leader_is_replaced_within_the_lease_duration_and_its_fence_is_closed_by_then() {
    let cluster = cluster().await;
    let a = Candidate::start(&cluster, elected("a"), Duration::ZERO);
    a.wait_leading().await;
    let b = Candidate::start(&cluster, elected("b"), Duration::ZERO);
    b.wait_standing_by().await;

    // Like SIGKILL: the manager's future is dropped, nothing is released.
    a.task.abort();
    let crashed = Instant::now();
    assert!(a.task.await.unwrap_err().is_cancelled());
    // Its runnables are aborted with it (on their next poll).
    eventually("the runnables to be aborted", SOON, || a.work.dropped()).await;
    assert_eq!(holder(&cluster).await.as_deref(), Some("a"));

    eventually("the stand-by to lead", SOON, || b.work.started()).await;
    let took_over = crashed.elapsed();
    assert!(
        took_over <= LEASE_DURATION + Duration::from_secs(2),
        "took over after {took_over:?}"
    );
    // Had the old leader been paused rather than killed, it could not have
    // written any more: its fence closed a full second before the lease
    // expired.
    assert!(!a.fence.is_open());
    assert_eq!(holder(&cluster).await.as_deref(), Some("b"));
    b.stop().await.unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_is_fenced_and_stops_at_once() {
    let cluster = cluster().await;
    let a = Candidate::start(&cluster, elected("a"), Duration::from_secs(60));
    a.wait_leading().await;

    cluster.faults().set_config(FaultConfig::none().with_error(
        ErrorRule::verb("patch", 1.0, ErrorKind::InternalError).for_resource("leases"),
    ));
    let err = tokio::time::timeout(SOON, a.task)
        .await
        .expect("the fence must stop a leader that cannot renew")
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, ManagerError::RenewDeadlineExceeded { renew_deadline, .. } if *renew_deadline == RENEW_DEADLINE),
        "{err:?}"
    );
    assert!(!a.fence.is_open());
    assert!(
        a.work.dropped() && !a.work.finished(),
        "stopped at once, no drain"
    );
    assert!(err.to_string().starts_with("leader election lost"), "{err}");
    assert_eq!(exit_code("test", Err(err)), std::process::ExitCode::FAILURE);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_was_taken_stops_with_lease_lost() {
    let cluster = cluster().await;
    let a = Candidate::start(&cluster, elected("a"), Duration::from_secs(60));
    a.wait_leading().await;

    // Someone else holds the lease now (as after a long pause of the leader).
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    let takeover = json!({"spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 60}});
    leases
        .patch(LEASE, &PatchParams::default(), &Patch::Merge(takeover))
        .await
        .unwrap();

    let err = tokio::time::timeout(SOON, a.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&err, ManagerError::LeaseLost { identity, .. } if identity == "a"),
        "{err:?}"
    );
    assert!(!a.fence.is_open());
    assert!(
        a.work.dropped() && !a.work.finished(),
        "stopped at once, no drain"
    );
    assert_eq!(
        holder(&cluster).await.as_deref(),
        Some("someone-else"),
        "not released"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopping_mid_renewal_still_releases_its_lease() {
    let cluster = cluster().await;
    let a = Candidate::start(&cluster, elected("a"), Duration::ZERO);
    a.wait_leading().await;

    // Slow requests: a renewal (a PATCH then a GET, under
    // kube-lease-manager's state lock) is now in flight 90% of the time,
    // and each still lands well within the renew deadline.
    let slow = FaultConfig::none().with_latency(Latency::Fixed(Duration::from_millis(450)));
    cluster.faults().set_config(slow);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(a.fence.is_open(), "slow renewals still count");

    tokio::time::timeout(SOON, a.stop())
        .await
        .expect("stopping mid-renewal must not hang the release")
        .unwrap();
    assert_eq!(holder(&cluster).await, None, "released");
    cluster.shutdown().await;
}
