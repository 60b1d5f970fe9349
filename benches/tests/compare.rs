//! The naive-controller comparison at a small scale: with watch events
//! arriving late, the naive kube-runtime controller creates pods it did not
//! need, ctrlkit's controller creates exactly the pods the scenario needs.
//!
//! Runs under tokio's paused time (the cluster, the kubelet simulation and
//! both controllers share the current-thread runtime), so the watch delays
//! and settle windows cost no wall-clock time and a loaded machine only
//! makes the test slower, not different. The step deadline is a hang
//! guard in simulated time.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_benches::naive::{RunReport, Scenario, Subject, run};
use ctrlkit_testcluster::faults::Latency;

/// 4 ReplicaSets: 2 replicas, up to 5, down to 1, up to 4. Watch events
/// arrive 100 ms to 1 s late.
fn scenario(seed: u64) -> Scenario {
    Scenario {
        replica_sets: 4,
        steps: vec![2, 5, 1, 4],
        watch_delay: Latency::Uniform {
            min: Duration::from_millis(100),
            max: Duration::from_millis(1000),
        },
        nodes: 2,
        pods_per_node: 100,
        seed,
        poll: Duration::from_millis(100),
        settle: Duration::from_millis(2500),
        step_deadline: Duration::from_secs(300),
    }
}

/// The first two steps only, with a short deadline: the naive controllers
/// over-create from the first step on, and may keep creating and deleting
/// for a long time (their figures are reported, not asserted).
fn short_scenario(seed: u64) -> Scenario {
    Scenario {
        steps: vec![2, 5],
        step_deadline: Duration::from_secs(60),
        ..scenario(seed)
    }
}

fn assert_converged(report: &RunReport) {
    assert!(
        report.converged(),
        "{} did not converge: {:?}",
        report.subject,
        report.steps
    );
}

#[tokio::test(start_paused = true)]
async fn ctrlkit_creates_exactly_the_needed_pods_under_late_watch_events() {
    let scenario = scenario(1);
    let report = run(&scenario, Subject::Ctrlkit).await.unwrap();
    println!("{}", report.to_json());
    assert_converged(&report);
    assert_eq!(report.needed_creates, 4 * (2 + 3 + 3));
    assert_eq!(report.over_created(), 0, "{}", report.to_json());
    assert_eq!(report.creates, report.needed_creates);
    assert_eq!(report.deletes, report.needed_deletes);
    assert_eq!(report.peak_excess, 0);
    // Its requests are counted without the driver's.
    assert!(report.requests.get("create pods").copied() >= Some(report.creates));
    assert_eq!(report.requests.get("create replicasets"), None);
}

#[tokio::test(start_paused = true)]
async fn naive_cache_controller_over_creates_under_late_watch_events() {
    let report = run(&short_scenario(1), Subject::NaiveCache).await.unwrap();
    println!("{}", report.to_json());
    assert!(report.over_created() > 0, "{}", report.to_json());
}

#[tokio::test(start_paused = true)]
async fn naive_controller_with_one_pod_watch_still_over_creates() {
    // Its store is never behind its triggers: the surplus comes from the
    // store lagging its own creations, not from two watches disagreeing.
    let report = run(&short_scenario(1), Subject::NaiveShared).await.unwrap();
    println!("{}", report.to_json());
    assert!(report.over_created() > 0, "{}", report.to_json());
}

#[tokio::test(start_paused = true)]
async fn naive_list_controller_is_exact_but_pays_a_list_per_reconcile() {
    let report = run(&scenario(1), Subject::NaiveList).await.unwrap();
    println!("{}", report.to_json());
    assert_converged(&report);
    // A live list always shows its earlier creations (kube-runtime never
    // runs two reconciles of one ReplicaSet at once).
    assert_eq!(report.over_created(), 0, "{}", report.to_json());
    // One initial list of the `owns` watcher, then one per reconcile: at
    // least one per ReplicaSet.
    let lists = report.requests.get("list pods").copied().unwrap_or(0);
    assert!(lists > 4, "{lists} pod lists");
}
