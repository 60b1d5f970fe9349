//! The cost of one steady-state sync of a 10-pod ReplicaSet, in an empty
//! namespace and in a namespace crowded with unrelated pods.
//!
//! The controller is built with hand-fed informers, a fake pod control and
//! an in-memory owner client, so only the sync itself is timed: the cache
//! reads, claiming, status calculation and the "nothing changed" check. The
//! ReplicaSet has its 10 ready pods and an up-to-date status, so a sync
//! creates, deletes and writes nothing.
//!
//! Cases (each prints one JSON line):
//! - `empty`: the namespace holds only the ReplicaSet's 10 pods;
//! - `crowded_owned`: plus `CTRLKIT_BENCH_UNRELATED` (default 100,000) pods
//!   controlled by other ReplicaSets;
//! - `crowded_orphans`: the same number of unrelated pods, of which
//!   `CTRLKIT_BENCH_ORPHANS` (default 1,000) are orphans (no controller,
//!   labels the ReplicaSet does not select). A ReplicaSet may adopt any
//!   orphan its selector matches; the orphan label index lets the sync look
//!   only at orphans carrying `app=web`, of which there are none;
//! - `orphans_only`: only the orphans (no other pods);
//! - `orphans_set_based`: the same orphans, but the ReplicaSet selects with
//!   `app In (web, web-canary)`, a set-based requirement the index cannot
//!   narrow, so every sync visits every orphan (the fallback's cost).
//!
//! The cases run interleaved, sample by sample, so load changes on a shared
//! machine affect them alike. The last line compares the medians against
//! the target (crowded ≤ 1.5 × empty).
//!
//! `cargo bench -p ctrlkit-replicaset --bench sync_cost`
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use async_trait::async_trait;
use ctrlkit_informer::{Informer, ObjectKey};
use ctrlkit_podcontrol::FakePodControl;
use ctrlkit_replicaset::{ControllerOptions, OwnerClient, ReplicaSetController};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use parking_lot::Mutex;
use serde_json::{Value, json};

const NS: &str = "default";
const REPLICAS: usize = 10;
/// Syncs timed together in one sample (one sync is a few microseconds).
const BATCH: usize = 50;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Accepts status writes, remembers the last one and counts them.
#[derive(Default)]
struct Owners {
    writes: AtomicUsize,
    last: Mutex<Option<ReplicaSet>>,
}

#[async_trait]
impl OwnerClient<ReplicaSet> for Owners {
    async fn get(&self, _: &str, _: &str) -> Result<Option<ReplicaSet>, kube::Error> {
        Ok(self.last.lock().clone())
    }

    async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut stored = rs.clone();
        stored.metadata.resource_version = Some("2".into());
        *self.last.lock() = Some(stored.clone());
        Ok(stored)
    }
}

/// The ReplicaSet `web`, selecting `app=web` (or, if `set_based`,
/// `app In (web, web-canary)`).
fn replica_set(set_based: bool) -> ReplicaSet {
    let selector = if set_based {
        json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "web-canary"]}
        ]})
    } else {
        json!({"matchLabels": {"app": "web"}})
    };
    serde_json::from_value(json!({
        "metadata": {
            "name": "web", "namespace": NS, "uid": "uid-web",
            "resourceVersion": "1", "generation": 1
        },
        "spec": {
            "replicas": REPLICAS,
            "selector": selector,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap()
}

/// A running, ready pod with `labels`, controlled by `owner` (name, uid).
fn pod(name: &str, labels: Value, owner: Option<(&str, &str)>) -> Pod {
    let mut metadata = json!({
        "name": name, "namespace": NS, "uid": format!("uid-{name}"),
        "resourceVersion": "1", "labels": labels,
        "creationTimestamp": "2026-01-01T00:00:00Z",
    });
    if let Some((owner, uid)) = owner {
        metadata["ownerReferences"] = json!([{
            "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": uid,
            "controller": true, "blockOwnerDeletion": true
        }]);
    }
    serde_json::from_value(json!({
        "metadata": metadata,
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]
        },
        "status": {
            "phase": "Running",
            "conditions": [{
                "type": "Ready", "status": "True",
                "lastTransitionTime": "2026-01-01T00:00:10Z"
            }]
        }
    }))
    .unwrap()
}

/// A controller over hand-fed caches holding the ReplicaSet `web`, its 10
/// pods and `unrelated` other pods (`orphans` of them without controller),
/// brought to the steady state.
struct Case {
    name: &'static str,
    unrelated: usize,
    orphans: usize,
    controller: ReplicaSetController,
    fake: FakePodControl,
    owners: Arc<Owners>,
    key: ObjectKey,
    samples: Vec<f64>,
}

/// The key of the ReplicaSet every case syncs.
fn web_key() -> ObjectKey {
    ObjectKey::new("default", "web")
}

impl Case {
    async fn new(name: &'static str, unrelated: usize, orphans: usize, set_based: bool) -> Self {
        let pods = Informer::<Pod>::manual().build();
        let rs_informer = Informer::<ReplicaSet>::manual().build();
        let fake = FakePodControl::new();
        let owners = Arc::new(Owners::default());
        let controller = ReplicaSetController::from_parts(
            pods.clone(),
            rs_informer.clone(),
            Arc::new(fake.clone()),
            owners.clone(),
            ControllerOptions::default(),
        )
        .unwrap();
        let rs = replica_set(set_based);
        *owners.last.lock() = Some(rs.clone());
        rs_informer.apply_event(Event::Apply(rs));
        for i in 0..REPLICAS {
            let name = format!("web-{i}");
            pods.apply_event(Event::Apply(pod(
                &name,
                json!({"app": "web"}),
                Some(("web", "uid-web")),
            )));
        }
        for i in 0..unrelated {
            let name = format!("other-{i}");
            let pod = if i < orphans {
                pod(&name, json!({"app": format!("orphan-{i}")}), None)
            } else {
                // Ten pods per other ReplicaSet, like `web`.
                let owner = format!("other-rs-{}", i / REPLICAS);
                let uid = format!("uid-{owner}");
                pod(&name, json!({"app": owner}), Some((&owner, &uid)))
            };
            pods.apply_event(Event::Apply(pod));
        }
        // The first sync writes the status; feed it back as the informer
        // would, so that later syncs find nothing to do.
        controller.sync(&web_key()).await.unwrap();
        let written = owners.last.lock().clone().unwrap();
        rs_informer.apply_event(Event::Apply(written));
        owners.writes.store(0, Ordering::Relaxed);
        controller.sync(&web_key()).await.unwrap();
        assert_eq!(
            owners.writes.load(Ordering::Relaxed),
            0,
            "{name}: not steady"
        );
        assert_eq!((fake.create_count(), fake.delete_count()), (0, 0));
        Self {
            name,
            unrelated,
            orphans,
            controller,
            fake,
            owners,
            key: web_key(),
            samples: Vec::new(),
        }
    }

    /// Times `BATCH` syncs; records ns per sync.
    async fn sample(&mut self) {
        let start = Instant::now();
        for _ in 0..BATCH {
            black_box(self.controller.sync(&self.key).await.unwrap());
        }
        let ns = start.elapsed().as_nanos() as f64 / BATCH as f64;
        self.samples.push(ns);
    }

    fn check_steady(&self) {
        assert_eq!(
            self.owners.writes.load(Ordering::Relaxed),
            0,
            "{}",
            self.name
        );
        assert_eq!(
            (
                self.fake.create_count(),
                self.fake.delete_count(),
                self.fake.patch_count()
            ),
            (0, 0, 0),
            "{}",
            self.name
        );
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        let index = ((sorted.len() - 1) as f64 * p).round() as usize;
        sorted[index]
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not and
    // expects a quick smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let unrelated = env_usize(
        "CTRLKIT_BENCH_UNRELATED",
        if smoke { 1_000 } else { 100_000 },
    );
    let orphans = env_usize("CTRLKIT_BENCH_ORPHANS", 1_000.min(unrelated / 10));
    let samples = env_usize("CTRLKIT_BENCH_SAMPLES", if smoke { 5 } else { 400 });

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let setup = Instant::now();
        let mut cases = vec![
            Case::new("empty", 0, 0, false).await,
            Case::new("crowded_owned", unrelated, 0, false).await,
            Case::new("crowded_orphans", unrelated, orphans, false).await,
            Case::new("orphans_only", orphans, orphans, false).await,
            Case::new("orphans_set_based", orphans, orphans, true).await,
        ];
        eprintln!("setup took {:?}", setup.elapsed());
        // Warm-up, then interleaved samples.
        for case in &mut cases {
            for _ in 0..10 {
                case.sample().await;
            }
            case.samples.clear();
        }
        for _ in 0..samples {
            for case in &mut cases {
                case.sample().await;
            }
        }
        for case in &cases {
            case.check_steady();
            println!(
                "{}",
                json!({
                    "bench": "sync_cost",
                    "case": case.name,
                    "replicas": REPLICAS,
                    "unrelated_pods": case.unrelated,
                    "orphans": case.orphans,
                    "samples": case.samples.len(),
                    "syncs_per_sample": BATCH,
                    "median_ns_per_sync": case.percentile(0.5).round(),
                    "p10_ns_per_sync": case.percentile(0.1).round(),
                    "p90_ns_per_sync": case.percentile(0.9).round(),
                })
            );
        }
        let empty = cases[0].percentile(0.5);
        for case in &cases[1..3] {
            let ratio = case.percentile(0.5) / empty;
            println!(
                "{}",
                json!({
                    "bench": "sync_cost",
                    "ratio": format!("{} / empty", case.name),
                    "value": (ratio * 100.0).round() / 100.0,
                    "target": 1.5,
                    "met": ratio <= 1.5,
                })
            );
        }
    });
}
