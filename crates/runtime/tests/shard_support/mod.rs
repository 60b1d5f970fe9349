//! What the sharding tests share: a test cluster with owner ConfigMaps,
//! a running member's tasks, and a bounded wait.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_runtime::shard::{ShardError, ShardMember, SlotSet};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A test cluster with the namespaces `apps` and `other`, and `owners`
/// ConfigMaps `owner-<i>` in `apps`.
pub(crate) async fn cluster_with_owners(owners: usize, other: &str) -> TestCluster {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client();
    for ns in ["apps", other] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(client, "apps");
    for i in 0..owners {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("owner-{i}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    cluster
}

/// Waits (real time, at most 30 s) until `cond` holds.
pub(crate) async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A ring member as a test runs it: its ring loop and its controller on an
/// informer factory of its own (each test file has its own `start`).
pub(crate) struct Member {
    pub(crate) member: ShardMember,
    pub(crate) stop: CancellationToken,
    pub(crate) factory: SharedInformerFactory,
    pub(crate) ring: JoinHandle<Result<(), ShardError>>,
    pub(crate) controller: JoinHandle<()>,
    /// Feeds a lagging pod cache, if the member has one.
    pub(crate) feeder: Option<JoinHandle<()>>,
}

impl Member {
    /// As `kill -9`: nothing is released, the Lease is left to expire.
    pub(crate) async fn kill(self) {
        self.ring.abort();
        self.controller.abort();
        self.factory.cancellation_token().cancel();
        let _ = self.ring.await;
        let _ = self.controller.await;
        if let Some(f) = self.feeder {
            f.abort();
        }
    }

    /// A graceful stop: drain, release, delete the Lease.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        self.controller.await.unwrap();
        self.ring.await.unwrap().unwrap();
        self.factory.cancellation_token().cancel();
        if let Some(f) = self.feeder {
            f.abort();
        }
    }
}

/// Who syncs which owner right now, across members: a sync that starts
/// while another member's sync of the same owner runs is a violation.
/// (The reconcile enters with [`SyncChecker::enter`] and holds the guard.)
#[derive(Default)]
pub(crate) struct SyncChecker {
    holders: parking_lot::Mutex<std::collections::HashMap<ctrlkit_runtime::ObjectKey, String>>,
    violations: std::sync::atomic::AtomicUsize,
    syncs: std::sync::atomic::AtomicUsize,
    /// The members that synced each owner, in order (consecutive repeats
    /// collapsed).
    history: parking_lot::Mutex<std::collections::HashMap<ctrlkit_runtime::ObjectKey, Vec<String>>>,
}

/// A sync in progress; ends when dropped (also when a killed member's
/// sync is cancelled mid-way).
pub(crate) struct Syncing<'a> {
    checker: &'a SyncChecker,
    key: ctrlkit_runtime::ObjectKey,
    member: String,
}

impl SyncChecker {
    pub(crate) fn enter(&self, key: &ctrlkit_runtime::ObjectKey, member: &str) -> Syncing<'_> {
        use std::sync::atomic::Ordering;
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if let Some(other) = self.holders.lock().insert(key.clone(), member.to_owned()) {
            eprintln!("VIOLATION: {key} synced by {member} while {other} syncs it");
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        let mut history = self.history.lock();
        let members = history.entry(key.clone()).or_default();
        if members.last().map(String::as_str) != Some(member) {
            members.push(member.to_owned());
        }
        Syncing {
            checker: self,
            key: key.clone(),
            member: member.to_owned(),
        }
    }

    /// Syncs that started while another member synced the same owner.
    pub(crate) fn violations(&self) -> usize {
        self.violations.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Syncs so far.
    pub(crate) fn syncs(&self) -> usize {
        self.syncs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// How many owners were synced at least once.
    pub(crate) fn owners_synced(&self) -> usize {
        self.history.lock().len()
    }

    /// The member that synced `key` last.
    pub(crate) fn last_syncer(&self, key: &ctrlkit_runtime::ObjectKey) -> Option<String> {
        self.history.lock().get(key)?.last().cloned()
    }
}

/// The members hold every slot between them, without overlap, and each
/// sees exactly these members.
pub(crate) fn covers(members: &[&Member]) -> bool {
    let mut all = SlotSet::empty();
    for m in members {
        let held = m.member.held_slots();
        if held.is_empty() || !all.intersection(&held).is_empty() {
            return false;
        }
        all = all.union(&held);
    }
    all == SlotSet::full()
        && members
            .iter()
            .all(|m| m.member.stats().members == members.len())
}

impl Drop for Syncing<'_> {
    fn drop(&mut self) {
        let mut holders = self.checker.holders.lock();
        if holders.get(&self.key) == Some(&self.member) {
            holders.remove(&self.key);
        }
    }
}

/// Samples the members' busy slots (held, or still syncing) every
/// millisecond until the token is cancelled; the task returns how many
/// samples found two members' busy slots overlapping.
pub(crate) fn sample_busy_overlaps(
    members: Vec<ShardMember>,
) -> (CancellationToken, JoinHandle<usize>) {
    let stop = CancellationToken::new();
    let done = stop.clone();
    let task = tokio::spawn(async move {
        let mut overlaps = 0;
        while !done.is_cancelled() {
            let busy: Vec<_> = members.iter().map(ShardMember::busy_slots).collect();
            for (i, a) in busy.iter().enumerate() {
                for b in &busy[i + 1..] {
                    if !a.intersection(b).is_empty() {
                        eprintln!("OVERLAP: {}", a.intersection(b));
                        overlaps += 1;
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        overlaps
    });
    (stop, task)
}
