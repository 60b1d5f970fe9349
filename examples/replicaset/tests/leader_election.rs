//! Two `replicaset-controller` processes with `--leader-elect` against one
//! cluster: only the lease holder acts; when it stops, the other takes over.
#![allow(clippy::unwrap_used)]

mod process;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::time::{Duration, Instant};

use process::{
    Cluster, Process, create_replicaset, eventually, field, http_get, metric_sum, scale_replicaset,
    wait_converged,
};

const BIN: &str = env!("CARGO_BIN_EXE_replicaset-controller");
const LEASE: &str = "rs-controller-test";
const LEASE_DURATION: &str = "6";

fn candidate(name: &str, kubeconfig: &str) -> Process {
    Process::spawn(
        name,
        BIN,
        &[
            "--kubeconfig",
            kubeconfig,
            "--leader-elect",
            "--lease-name",
            LEASE,
            "--lease-namespace",
            "default",
            // Short leases keep the test quick; 4 s between the renewal and
            // the expiry leave room for a loaded machine.
            "--lease-duration",
            LEASE_DURATION,
            "--renew-deadline",
            "2",
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ],
    )
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get(LEASE).await.ok()?.spec?.holder_identity
}

async fn identity(p: &Process) -> String {
    field(
        &p.wait_for_log("waiting to become the leader").await,
        "identity",
    )
}

async fn reconciles(process: &Process) -> f64 {
    let (_, metrics) = http_get(process.endpoint().await, "/metrics").await;
    metric_sum(&metrics, "controller_runtime_reconcile_total")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_leader_acts_and_a_stand_by_takes_over() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let a = candidate("a", &kubeconfig);
    let b = candidate("b", &kubeconfig);
    let (id_a, id_b) = (identity(&a).await, identity(&b).await);
    assert_ne!(id_a, id_b);

    // One of them wins; the Lease names it.
    let first = eventually("a leader", || async {
        let held = holder(&leases).await?;
        let logged =
            a.logged("became the leader").is_some() || b.logged("became the leader").is_some();
        logged.then_some(held)
    })
    .await;
    let (mut leader, stand_by, stand_by_id) = if first == id_a {
        (a, b, id_b)
    } else {
        assert_eq!(first, id_b);
        (b, a, id_a)
    };
    assert!(leader.logged("became the leader").is_some());

    let uid = create_replicaset(&client, "default", "first", 2).await;
    wait_converged(&client, "default", "first", &uid, 2).await;
    assert!(reconciles(&leader).await > 0.0);
    // Both keep warm caches, but the stand-by runs no workers.
    assert_eq!(http_get(stand_by.endpoint().await, "/readyz").await.0, 200);
    assert_eq!(reconciles(&stand_by).await, 0.0);
    assert!(stand_by.logged("became the leader").is_none());
    assert_eq!(holder(&leases).await.as_deref(), Some(first.as_str()));

    // A graceful stop releases the lease; the stand-by takes over.
    leader.sigterm();
    let status = leader.wait_exit().await;
    assert!(status.success(), "leader exit status {status}");
    assert!(leader.logged("released the lease").is_some());
    stand_by.wait_for_log("became the leader").await;
    eventually("the lease to change hands", || async {
        (holder(&leases).await? == stand_by_id).then_some(())
    })
    .await;

    let uid = create_replicaset(&client, "default", "second", 2).await;
    wait_converged(&client, "default", "second", &uid, 2).await;
    assert!(reconciles(&stand_by).await > 0.0);

    let mut stand_by = stand_by;
    stand_by.sigterm();
    let status = stand_by.wait_exit().await;
    assert!(status.success(), "new leader exit status {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_loses_its_lease_stops_with_an_error() {
    let cluster = Cluster::start().await;
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let mut leader = candidate("leader", &kubeconfig);
    leader.wait_for_log("became the leader").await;

    // Someone else takes the lease (as after a long pause of the leader).
    leases
        .patch(
            LEASE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({
                "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 60}
            })),
        )
        .await
        .unwrap();

    // At its next renewal the leader sees it and stops acting at once.
    let status = leader.wait_exit().await;
    assert_eq!(status.code(), Some(1), "exit status {status}");
    assert!(leader.logged("leader election lost").is_some());
    assert!(leader.logged("released the lease").is_none());
}

/// Two candidates; waits until one leads. Returns (leader, stand-by,
/// stand-by's identity).
async fn elect(kubeconfig: &str, leases: &Api<Lease>) -> (Process, Process, String) {
    let a = candidate("a", kubeconfig);
    let b = candidate("b", kubeconfig);
    let (id_a, id_b) = (identity(&a).await, identity(&b).await);
    let first = eventually("a leader", || async {
        let held = holder(leases).await?;
        let logged =
            a.logged("became the leader").is_some() || b.logged("became the leader").is_some();
        logged.then_some(held)
    })
    .await;
    if first == id_a {
        (a, b, id_b)
    } else {
        (b, a, id_a)
    }
}

/// Issue 13's failover target: the leader is killed (no release); the
/// stand-by syncs within the lease duration + 2 s of the kill, and no pod
/// is created twice (exactly the missing pods are created, none deleted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_is_replaced_within_the_lease_duration_without_duplicate_pods() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let (leader, stand_by, stand_by_id) = elect(&kubeconfig, &leases).await;
    let web = create_replicaset(&client, "default", "web", 2).await;
    wait_converged(&client, "default", "web", &web, 2).await;
    let before = cluster.cluster.requests();

    leader.signal("KILL");
    let killed = Instant::now();
    // Work for the successor: a scale-up and a new ReplicaSet.
    scale_replicaset(&client, "default", "web", 4).await;
    let api = create_replicaset(&client, "default", "api", 3).await;
    eventually("the stand-by's first sync", || async {
        (reconciles(&stand_by).await > 0.0).then_some(())
    })
    .await;
    let took = killed.elapsed();
    let bound = Duration::from_secs(LEASE_DURATION.parse::<u64>().unwrap() + 2);
    assert!(
        took <= bound,
        "the stand-by synced {took:?} after the kill (bound {bound:?})"
    );
    assert!(stand_by.logged("became the leader").is_some());
    assert_eq!(holder(&leases).await, Some(stand_by_id));

    wait_converged(&client, "default", "web", &web, 4).await;
    wait_converged(&client, "default", "api", &api, 3).await;
    // Settle: anything a duplicate sync would create has been sent by now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        cluster.pod_writes(&before),
        (2 + 3, 0),
        "(creates, deletes)"
    );
    drop(leader);
}

/// Issue 15's paused leader: `SIGSTOP` the leader longer than the lease,
/// let the stand-by take over and converge a scale-up, then `SIGCONT`:
/// the old leader sends no pod write (its fence closed while it was
/// paused) and exits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_writes_nothing_after_it_resumes() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let (mut leader, stand_by, stand_by_id) = elect(&kubeconfig, &leases).await;
    let web = create_replicaset(&client, "default", "web", 2).await;
    wait_converged(&client, "default", "web", &web, 2).await;

    leader.signal("STOP");
    stand_by.wait_for_log("became the leader").await;
    assert_eq!(holder(&leases).await, Some(stand_by_id));
    // Changes the paused leader has not seen: on resume its caches are
    // stale and, unfenced, it would create pods for them.
    scale_replicaset(&client, "default", "web", 5).await;
    let api = create_replicaset(&client, "default", "api", 3).await;
    wait_converged(&client, "default", "web", &web, 5).await;
    wait_converged(&client, "default", "api", &api, 3).await;
    let before = cluster.cluster.requests();

    leader.signal("CONT");
    let status = leader.wait_exit().await;
    assert_eq!(status.code(), Some(1), "old leader exit status {status}");
    assert!(leader.logged("leader election lost").is_some());
    // The new leader had nothing left to do: every pod write since the
    // resume would have been the old leader's.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(cluster.pod_writes(&before), (0, 0), "(creates, deletes)");
    wait_converged(&client, "default", "web", &web, 5).await;
}
