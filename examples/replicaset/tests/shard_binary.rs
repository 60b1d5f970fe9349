//! `replicaset-controller --shard-ring` processes against one test
//! cluster (issue 16's targets): three members split the ReplicaSets; a
//! member killed with SIGKILL has its ReplicaSets synced again by the
//! others within the lease duration + 5 s, and its expired Lease is
//! deleted by them; a member added gets its share;
//! and no pod is ever created twice (counted by the cluster).
#![allow(clippy::unwrap_used)]

mod process;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ctrlkit_runtime::shard::{CLAIMS_ANNOTATION, RING_LABEL, SLOT_LABEL, SlotSet, slot_of_uid};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::ListParams;

use process::{
    Cluster, Process, create_replicaset, eventually, http_get, metric_sum, scale_replicaset,
    wait_converged,
};

const BIN: &str = env!("CARGO_BIN_EXE_replicaset-controller");
const RING: &str = "rs";
/// Short leases keep the test quick: a member renews every second and is
/// gone 3 s after its last renewal.
const LEASE_DURATION: u64 = 3;
/// Owners with random UIDs, so that each member of three holds some: with
/// 12, one of them held none in about 2% of runs (3 × (2/3)^12), and its
/// sync count stayed 0; with 36, about once in 700,000.
const OWNERS: usize = 36;

fn member(name: &str, kubeconfig: &str) -> Process {
    Process::spawn(
        name,
        BIN,
        &[
            "--kubeconfig",
            kubeconfig,
            "--shard-ring",
            RING,
            "--shard-identity",
            name,
            "--lease-namespace",
            "default",
            "--lease-duration",
            &LEASE_DURATION.to_string(),
            "--renew-deadline",
            "2",
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ],
    )
}

async fn metric(process: &Process, name: &str) -> f64 {
    let (_, metrics) = http_get(process.endpoint().await, "/metrics").await;
    metric_sum(&metrics, name)
}

/// The slots each member's Lease claims, by member name.
async fn claims(leases: &Api<Lease>) -> HashMap<String, SlotSet> {
    leases
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={RING}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| {
            let name = l
                .metadata
                .name?
                .strip_prefix(&format!("{RING}-"))?
                .to_owned();
            let claims = l
                .metadata
                .annotations?
                .get(CLAIMS_ANNOTATION)?
                .parse()
                .ok()?;
            Some((name, claims))
        })
        .collect()
}

/// Waits until `members` each hold slots, together every slot.
async fn ring_settled(members: &[&Process]) {
    eventually("the members to split the ring", || async {
        let mut total = 0.0;
        for m in members {
            let held = metric(m, "ctrlkit_shard_slots_held").await;
            let seen = metric(m, "ctrlkit_shard_members").await;
            if held == 0.0 || seen != members.len() as f64 {
                return None;
            }
            total += held;
        }
        (total == ctrlkit_runtime::shard::SLOTS as f64).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_replicas_split_the_work_take_over_a_killed_ones_and_share_with_a_new_one() {
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let a = member("a", &kubeconfig);
    let b = member("b", &kubeconfig);
    let c = member("c", &kubeconfig);
    ring_settled(&[&a, &b, &c]).await;

    let start = cluster.cluster.requests();
    let mut uids = Vec::new();
    for i in 0..OWNERS {
        let name = format!("web-{i}");
        let uid = create_replicaset(&client, "default", &name, 1).await;
        uids.push((name, uid));
    }
    for (name, uid) in &uids {
        wait_converged(&client, "default", name, uid, 1).await;
    }
    // Every member synced its share, and only its share: the owners each
    // reports holding (counted again at least once per renew period) add
    // up to all of them.
    for m in [&a, &b, &c] {
        assert!(
            metric(m, "ctrlkit_shard_syncs_total").await > 0.0,
            "{}",
            m.name
        );
    }
    eventually("the owners held to add up to every owner", || async {
        let mut held = 0.0;
        for m in [&a, &b, &c] {
            held += metric(m, "ctrlkit_shard_owners_held").await;
        }
        (held == OWNERS as f64).then_some(())
    })
    .await;
    assert_eq!(cluster.pod_writes(&start).0, OWNERS as u64);

    // kill -9 a member, then give its ReplicaSets work: the others sync
    // them once its Lease expired.
    let a_slots = claims(&leases).await["a"];
    let a_owners: Vec<&(String, String)> = uids
        .iter()
        .filter(|(_, uid)| a_slots.contains(slot_of_uid(uid)))
        .collect();
    assert!(!a_owners.is_empty(), "a holds none of {OWNERS} owners");
    let before = cluster.cluster.requests();
    a.signal("KILL");
    let killed = Instant::now();
    for (name, _) in &a_owners {
        scale_replicaset(&client, "default", name, 2).await;
    }
    for (name, uid) in &a_owners {
        wait_converged(&client, "default", name, uid, 2).await;
    }
    let took = killed.elapsed();
    let bound = Duration::from_secs(LEASE_DURATION + 5);
    assert!(
        took <= bound,
        "a's ReplicaSets synced {took:?} after the kill (bound {bound:?})"
    );
    eprintln!("killed member's owners converged {took:?} after the kill");
    // The survivors delete the dead member's expired Lease, so it is not
    // counted again by a new member or after a relist.
    eventually("the killed member's Lease to be collected", || async {
        (!claims(&leases).await.contains_key("a")).then_some(())
    })
    .await;

    // A member joins: it claims and then holds a share.
    let d = member("d", &kubeconfig);
    let joined = Instant::now();
    ring_settled(&[&b, &c, &d]).await;
    eprintln!(
        "new member holds its share {:?} after it started",
        joined.elapsed()
    );
    // Its caches already held what a consistent read showed: the gained
    // slots started without waiting out the catch-up timeout (3 s, three
    // renew periods), as they did when only the caches' resourceVersions
    // were compared with the Leases'.
    for m in [&b, &c, &d] {
        assert_eq!(
            metric(m, "ctrlkit_shard_catch_up_timeouts_total").await,
            0.0,
            "a gained slot waited out the catch-up timeout"
        );
    }
    let d_slots = claims(&leases).await["d"];
    // Its owners get their work done by it.
    let d_owners: Vec<&(String, String)> = uids
        .iter()
        .filter(|(_, uid)| d_slots.contains(slot_of_uid(uid)))
        .collect();
    for (name, _) in &d_owners {
        scale_replicaset(&client, "default", name, 3).await;
    }
    for (name, uid) in &d_owners {
        wait_converged(&client, "default", name, uid, 3).await;
    }
    if !d_owners.is_empty() {
        assert!(metric(&d, "ctrlkit_shard_syncs_total").await > 0.0);
    }
    // Settle: a duplicate sync would have created its pods by now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let scaled_twice = a_owners.iter().filter(|o| d_owners.contains(o)).count();
    let expected = a_owners.len() + d_owners.len() * 2 - scaled_twice;
    assert_eq!(
        cluster.pod_writes(&before),
        (expected as u64, 0),
        "(creates, deletes): no pod created twice"
    );

    // Every pod carries its ReplicaSet's slot (the members' pod watches
    // select on it).
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), "default");
    let pods = pods.list(&ListParams::default()).await.unwrap().items;
    assert!(!pods.is_empty());
    for pod in pods {
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        let label = pod.metadata.labels.as_ref().and_then(|l| l.get(SLOT_LABEL));
        assert_eq!(label, Some(&slot_of_uid(&owner.uid).to_string()));
    }

    // A graceful stop releases the member's Lease.
    for mut m in [b, c, d] {
        m.sigterm();
        let status = m.wait_exit().await;
        assert!(status.success(), "{}: exit status {status}", m.name);
        assert!(m.logged("left the shard ring").is_some(), "{}", m.name);
    }
    drop(a);
    assert!(claims(&leases).await.is_empty(), "every Lease gone");
}

#[tokio::test]
async fn shard_ring_with_leader_election_exits_with_status_2() {
    let mut p = Process::spawn(
        "both",
        BIN,
        &[
            "--shard-ring",
            RING,
            "--leader-elect",
            "--kubeconfig",
            "/nonexistent",
        ],
    );
    let status = p.wait_exit().await;
    assert_eq!(status.code(), Some(2), "exit status {status}");
    assert!(p.logged("cannot be used with").is_some(), "{:?}", p.logs());
}
