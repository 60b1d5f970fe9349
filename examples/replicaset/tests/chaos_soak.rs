//! Chaos soak: both controllers (ReplicaSet and ReplicationController, on
//! one shared informer factory) against ctrlkit-testcluster with the
//! kubelet simulation and faults on, driven through a seeded random
//! schedule of user operations on 50 owners; then the faults are switched
//! off, the cluster is left to settle, and invariants are checked.
//! docs/chaos-soak.md describes what is injected and checked.
//!
//! The seed fixes the schedule (operations, their parameters and the
//! pauses between them), the kinds of the owners and the fault injector's
//! random stream. Everything runs on one thread with tokio's paused clock,
//! so the pauses, watch delays and settle waits cost no wall-clock time;
//! only pods short of `minReadySeconds` when the cluster has settled are
//! waited for on the wall clock, which stamps readiness (docs/chaos-soak.md,
//! "Clocks").
//!
//! CI runs [`DEFAULT_SEEDS`] with [`DEFAULT_OPS`] operations each. A longer
//! run: `CTRLKIT_SOAK_SEEDS=1..=200 CTRLKIT_SOAK_OPS=400 cargo test -p
//! ctrlkit-replicaset --test chaos_soak -- --nocapture` (seeds as `7`,
//! `3,9,12`, `1..50` or `1..=50`). `CTRLKIT_SOAK_TRACE=1` prints every
//! operation as it is applied; `RUST_LOG` (e.g.
//! `ctrlkit_runtime::shard=debug`) prints the controllers' own logs.
//!
//! `sharded_soak` runs the same seeds against a shard ring whose members
//! join, leave, are killed and restarted (`chaos_soak/sharded.rs`), and
//! checks on top that no owner was synced by two members at once; CI runs
//! [`DEFAULT_SHARDED_SEEDS`].
#![allow(clippy::unwrap_used)]

#[path = "chaos_soak/clock_pump.rs"]
mod clock_pump;
#[path = "chaos_soak/creations.rs"]
mod creations;
#[path = "chaos_soak/idle_log.rs"]
mod idle_log;
#[path = "chaos_soak/sharded.rs"]
mod sharded;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use axum::http::{HeaderName, HeaderValue};
use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_podcontrol::availability::next_pod_availability_check;
use ctrlkit_podcontrol::pod::{is_pod_active, is_pod_available, is_pod_ready, is_pod_terminating};
use ctrlkit_replicaset::{
    ControllerOptions, DEFAULT_FAILED_PODS_KEPT, ReplicaSetController, ReplicationManager,
};
use ctrlkit_testcluster::faults::{
    ErrorKind, ErrorRule, FaultConfig, FaultKind, INTERNAL_HEADER, Latency,
};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use k8s_openapi::jiff::Timestamp;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Seeds run by plain `cargo test`.
const DEFAULT_SEEDS: &[u64] = &[1, 2];
/// Seeds of the sharded mode run by plain `cargo test`.
const DEFAULT_SHARDED_SEEDS: &[u64] = &[1];
/// Operations per seed by default.
const DEFAULT_OPS: usize = 100;
/// Owners (ReplicaSets and ReplicationControllers) the schedule works on.
const OWNERS: usize = 50;
const NS: &str = "default";
/// Largest `spec.replicas` the schedule usually asks for.
const MAX_REPLICAS: u64 = 6;
/// Largest `spec.replicas` the schedule sometimes asks for.
const MAX_BURSTY: u64 = 25;

/// Longest the cluster may take to settle once faults are off, on the
/// paused clock: beyond the expectations' 5-minute TTL and a few rounds of
/// per-key backoff.
const SETTLE_VIRTUAL: Duration = Duration::from_secs(30 * 60);
/// Hang guard on the wall clock for settling.
const SETTLE_WALL: Duration = Duration::from_secs(180);
/// Checks passed in a row, `SETTLE_POLL` apart, to call the cluster settled.
const SETTLED_AFTER: usize = 3;
const SETTLE_POLL: Duration = Duration::from_secs(2);
/// The idle window in which the request rate is measured.
const IDLE_WINDOW: Duration = Duration::from_secs(120);
/// Non-watch API requests the controllers may make in the idle window.
const IDLE_REQUEST_BOUND: u64 = 5;
/// Hang guard on the wall clock for one seed's operations.
const OPS_WALL: Duration = Duration::from_secs(600);
/// Hang guard on the wall clock for a whole seed, kept by a thread of its
/// own (`CTRLKIT_SOAK_SEED_WALL_SECS` overrides it): past the operations'
/// and settling guards with room for a slow machine.
const SEED_WALL: Duration = Duration::from_secs(20 * 60);

// ---------------------------------------------------------------------------
// The schedule

/// SplitMix64: tiny and fixed forever (unlike `rand`'s `StdRng`, which may
/// change between major versions), so a seed names the same schedule for
/// good.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x5eed_c0de_5eed_c0de)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    ReplicaSet,
    ReplicationController,
}

impl Kind {
    fn resource(self) -> ApiResource {
        match self {
            Kind::ReplicaSet => ApiResource::erase::<ReplicaSet>(&()),
            Kind::ReplicationController => ApiResource::erase::<ReplicationController>(&()),
        }
    }

    fn short(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "rs",
            Kind::ReplicationController => "rc",
        }
    }
}

/// One user operation. `pick` chooses among the pods found when the
/// operation runs (sorted by name), so the schedule stays fixed while the
/// pods it lands on depend on what the controllers did.
#[derive(Clone, Debug)]
enum Op {
    Create {
        slot: usize,
        replicas: i32,
        min_ready: i32,
    },
    Scale {
        slot: usize,
        replicas: i32,
    },
    /// Set (or remove) a `rev` label on the pod template: the selector
    /// still matches, existing pods stop being fully labelled.
    RelabelTemplate {
        slot: usize,
        rev: Option<u64>,
    },
    /// Move one of the owner's pods out of its selector: the controller
    /// releases it and creates a replacement.
    RelabelPod {
        slot: usize,
        pick: u64,
    },
    /// Move a pod moved out earlier back in: the controller adopts it and
    /// deletes a surplus pod.
    RelabelBack {
        slot: usize,
        pick: u64,
    },
    /// Delete one of the pods carrying the owner's label (in or out).
    DeletePod {
        slot: usize,
        pick: u64,
    },
    /// Force one of the owner's pods not ready, or let it be ready again
    /// (the kubelet simulation's readiness override).
    PodReadiness {
        slot: usize,
        pick: u64,
        ready: bool,
    },
    /// Crash the containers of one of the owner's pods: a restart, not
    /// ready for a moment.
    CrashPod {
        slot: usize,
        pick: u64,
    },
    /// Delete the owner: its pods are garbage-collected (background) or
    /// released by the garbage collector (orphan).
    DeleteOwner {
        slot: usize,
        orphan: bool,
    },
    /// The kubelet rejects every new pod (`OutOfpods`, phase `Failed`) for
    /// this long: the churn guard backs off, then recovers.
    KubeletRejects {
        for_: Duration,
    },
    /// Stop both controllers and start new ones on a fresh factory.
    Restart,
    /// Answer the next watch of this resource with 410 Gone.
    ForceGone(&'static str),
}

struct Step {
    op: Op,
    pause: Duration,
}

struct Schedule {
    kinds: Vec<Kind>,
    steps: Vec<Step>,
    watch_cut_after: usize,
}

fn schedule(seed: u64, ops: usize) -> Schedule {
    let mut rng = Rng::new(seed);
    let kinds: Vec<Kind> = (0..OWNERS)
        .map(|_| {
            if rng.percent(50) {
                Kind::ReplicaSet
            } else {
                Kind::ReplicationController
            }
        })
        .collect();
    let watch_cut_after = 150 + rng.below(101) as usize;
    let mut exists = [false; OWNERS];
    let mut steps = Vec::with_capacity(ops);
    for _ in 0..ops {
        let live: Vec<usize> = (0..OWNERS).filter(|i| exists[*i]).collect();
        let dead: Vec<usize> = (0..OWNERS).filter(|i| !exists[*i]).collect();
        let op = if !dead.is_empty() && (live.is_empty() || rng.percent(25)) {
            let slot = rng.pick(&dead);
            exists[slot] = true;
            Op::Create {
                slot,
                replicas: replicas(&mut rng),
                min_ready: if rng.percent(20) { 1 } else { 0 },
            }
        } else {
            let slot = rng.pick(&live);
            match rng.below(100) {
                0..30 => Op::Scale {
                    slot,
                    replicas: replicas(&mut rng),
                },
                30..40 => Op::RelabelPod {
                    slot,
                    pick: rng.next(),
                },
                40..45 => Op::RelabelBack {
                    slot,
                    pick: rng.next(),
                },
                45..53 => Op::RelabelTemplate {
                    slot,
                    rev: (!rng.percent(30)).then(|| rng.below(3)),
                },
                53..61 => Op::DeletePod {
                    slot,
                    pick: rng.next(),
                },
                61..66 => Op::PodReadiness {
                    slot,
                    pick: rng.next(),
                    ready: rng.percent(40),
                },
                66..70 => Op::CrashPod {
                    slot,
                    pick: rng.next(),
                },
                70..82 => {
                    exists[slot] = false;
                    Op::DeleteOwner {
                        slot,
                        orphan: rng.percent(40),
                    }
                }
                82..85 => Op::KubeletRejects {
                    for_: Duration::from_millis(500 + rng.below(5000)),
                },
                85..90 => Op::Restart,
                _ => Op::ForceGone(rng.pick(&["pods", "replicasets", "replicationcontrollers"])),
            }
        };
        // Some operations come in bursts, before the controllers react.
        let pause = if rng.percent(30) {
            Duration::ZERO
        } else {
            Duration::from_millis(rng.below(1500))
        };
        steps.push(Step { op, pause });
    }
    Schedule {
        kinds,
        steps,
        watch_cut_after,
    }
}

/// A replica count: mostly small, sometimes enough for several slow-start
/// batches.
fn replicas(rng: &mut Rng) -> i32 {
    if rng.percent(85) {
        rng.below(MAX_REPLICAS + 1) as i32
    } else {
        (MAX_REPLICAS + 1 + rng.below(MAX_BURSTY - MAX_REPLICAS)) as i32
    }
}

/// The faults while the schedule runs: 5% 500s, 2% 409s, 1% 504s on every
/// request, watches cut after about 200 events, every watch frame delayed
/// by up to 500 ms.
fn chaos_faults(watch_cut_after: usize) -> FaultConfig {
    FaultConfig::none()
        .with_error(ErrorRule::any(0.05, ErrorKind::InternalError))
        .with_error(ErrorRule::any(0.02, ErrorKind::Conflict))
        .with_error(ErrorRule::any(0.01, ErrorKind::Timeout))
        .with_watch_cut_after_events(watch_cut_after)
        .with_watch_delay(Latency::Uniform {
            min: Duration::ZERO,
            max: Duration::from_millis(500),
        })
}

// ---------------------------------------------------------------------------
// The controllers

struct Running {
    token: CancellationToken,
    factory: SharedInformerFactory,
    tasks: Vec<(
        &'static str,
        JoinHandle<Result<(), ctrlkit_replicaset::Error>>,
    )>,
}

/// What the soak runs: both controllers once, or the members of a shard
/// ring, each running both.
#[allow(clippy::large_enum_variant)] // one per seed, never moved in a loop
enum Controllers {
    Single(Option<Running>),
    Sharded(sharded::Ring),
}

/// The controllers' options in the soak.
fn soak_options() -> ControllerOptions {
    ControllerOptions {
        namespace: Some(NS.to_owned()),
        // `CTRLKIT_SOAK_READ_OWN_WRITES=0` soaks the controllers without
        // read-own-writes (as upstream with the gate off).
        read_own_writes: std::env::var("CTRLKIT_SOAK_READ_OWN_WRITES").as_deref() != Ok("0"),
        // As the binaries run.
        batch_period: ctrlkit_replicaset::DEFAULT_BATCH_PERIOD,
        drop_owner_managed_fields: true,
        ..ControllerOptions::default()
    }
}

/// Both controllers on one fresh factory, as the demo runs them.
fn start_controllers(client: &kube::Client) -> Running {
    let factory = SharedInformerFactory::new(client.clone());
    let options = soak_options();
    let rs = ReplicaSetController::new(client.clone(), &factory, options.clone(), None).unwrap();
    let rc = ReplicationManager::new(client.clone(), &factory, options, None).unwrap();
    factory.start();
    set_stall_probe(&factory);
    let token = CancellationToken::new();
    let tasks = vec![
        ("ReplicaSet", tokio::spawn(rs.run(token.clone()))),
        ("ReplicationController", tokio::spawn(rc.run(token.clone()))),
    ];
    Running {
        token,
        factory,
        tasks,
    }
}

/// Stops the controllers; returns what went wrong, if anything.
async fn stop_controllers(running: Running) -> Vec<String> {
    running.token.cancel();
    let mut problems = Vec::new();
    for (name, task) in running.tasks {
        match tokio::time::timeout(Duration::from_secs(300), task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => problems.push(format!("the {name} controller failed: {e}")),
            Ok(Err(e)) => problems.push(format!("the {name} controller task failed: {e}")),
            Err(_) => problems.push(format!("the {name} controller did not stop")),
        }
    }
    running.factory.shutdown().await;
    problems
}

// ---------------------------------------------------------------------------
// The driver

/// A client whose requests the cluster treats as internal: never faulted
/// (the user's operations are the scenario, not the system under test) and
/// counted apart from the controllers' requests.
fn driver_client(cluster: &TestCluster) -> kube::Client {
    let mut config = kube::Config::new(cluster.base_url().parse().unwrap());
    config.headers.push((
        HeaderName::from_static(INTERNAL_HEADER),
        HeaderValue::from_static("chaos-soak"),
    ));
    kube::Client::try_from(config).unwrap()
}

fn owner_name(kinds: &[Kind], slot: usize) -> String {
    format!("{}-{slot:02}", kinds[slot].short())
}

fn away_label(name: &str) -> String {
    format!("{name}-away")
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

struct Driver {
    seed: u64,
    client: kube::Client,
    kinds: Vec<Kind>,
    pods: Api<Pod>,
    trace: bool,
    /// Operations that could not run as scheduled (owner or pod gone).
    skipped: usize,
    /// Driver requests that failed unexpectedly: testcluster bugs.
    errors: Vec<String>,
}

impl Driver {
    fn owners(&self, slot: usize) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), NS, &self.kinds[slot].resource())
    }

    fn name(&self, slot: usize) -> String {
        owner_name(&self.kinds, slot)
    }

    /// Active pods labelled `app=<label>`, sorted by name.
    async fn pods_labelled(&self, label: &str) -> Result<Vec<Pod>, kube::Error> {
        let mut pods: Vec<Pod> = self
            .pods
            .list(&ListParams::default().labels(&format!("app={label}")))
            .await?
            .items
            .into_iter()
            .filter(is_pod_active)
            .collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(pods)
    }

    async fn set_app_label(&self, pod: &Pod, value: &str) -> Result<String, kube::Error> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        self.pods
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": value}}})),
            )
            .await?;
        Ok(format!("pod {name} labelled app={value}"))
    }

    /// Applies one operation; `Ok(None)` when it had nothing to work on.
    async fn apply(
        &self,
        op: &Op,
        cluster: &TestCluster,
        controllers: &mut Controllers,
        problems: &mut Vec<String>,
    ) -> Result<Option<String>, kube::Error> {
        match *op {
            Op::Create {
                slot,
                replicas,
                min_ready,
            } => self.create(slot, replicas, min_ready).await,
            Op::Scale { slot, replicas } => {
                self.owners(slot)
                    .patch(
                        &self.name(slot),
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"replicas": replicas}})),
                    )
                    .await?;
                Ok(Some(format!("scaled {} to {replicas}", self.name(slot))))
            }
            Op::RelabelTemplate { slot, rev } => {
                let rev = rev.map(|r| format!("r{r}"));
                self.owners(slot)
                    .patch(
                        &self.name(slot),
                        &PatchParams::default(),
                        &Patch::Merge(
                            json!({"spec": {"template": {"metadata": {"labels": {"rev": rev}}}}}),
                        ),
                    )
                    .await?;
                Ok(Some(format!("template of {} rev={rev:?}", self.name(slot))))
            }
            Op::RelabelPod { slot, pick } => {
                let name = self.name(slot);
                let pods = self.pods_labelled(&name).await?;
                let Some(pod) = pods.get(pick as usize % pods.len().max(1)) else {
                    return Ok(None);
                };
                self.set_app_label(pod, &away_label(&name)).await.map(Some)
            }
            Op::RelabelBack { slot, pick } => {
                let name = self.name(slot);
                let pods = self.pods_labelled(&away_label(&name)).await?;
                let Some(pod) = pods.get(pick as usize % pods.len().max(1)) else {
                    return Ok(None);
                };
                self.set_app_label(pod, &name).await.map(Some)
            }
            Op::DeletePod { slot, pick } => {
                let name = self.name(slot);
                let mut pods = self.pods_labelled(&name).await?;
                pods.extend(self.pods_labelled(&away_label(&name)).await?);
                let Some(pod) = pods.get(pick as usize % pods.len().max(1)) else {
                    return Ok(None);
                };
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                self.pods
                    .delete(&pod_name, &DeleteParams::default())
                    .await?;
                Ok(Some(format!("deleted pod {pod_name}")))
            }
            Op::PodReadiness { slot, pick, ready } => {
                let name = self.name(slot);
                let pods = self.pods_labelled(&name).await?;
                let (Some(pod), Some(kubelet)) = (
                    pods.get(pick as usize % pods.len().max(1)),
                    cluster.kubelet(),
                ) else {
                    return Ok(None);
                };
                // Fails for pods not running yet: nothing to do then.
                Ok(kubelet
                    .set_pod_ready(NS, pod_name(pod), ready)
                    .await
                    .ok()
                    .map(|()| format!("pod {} forced ready={ready}", pod_name(pod))))
            }
            Op::CrashPod { slot, pick } => {
                let name = self.name(slot);
                let pods = self.pods_labelled(&name).await?;
                let (Some(pod), Some(kubelet)) = (
                    pods.get(pick as usize % pods.len().max(1)),
                    cluster.kubelet(),
                ) else {
                    return Ok(None);
                };
                Ok(kubelet
                    .crash_pod(NS, pod_name(pod))
                    .await
                    .ok()
                    .map(|()| format!("pod {} crashed", pod_name(pod))))
            }
            Op::DeleteOwner { slot, orphan } => {
                let params = if orphan {
                    DeleteParams::orphan()
                } else {
                    DeleteParams::background()
                };
                self.owners(slot).delete(&self.name(slot), &params).await?;
                let how = if orphan { "orphan" } else { "background" };
                Ok(Some(format!("deleted {} ({how})", self.name(slot))))
            }
            Op::KubeletRejects { .. } => match cluster.kubelet() {
                Some(kubelet) => {
                    kubelet.reject_new_pods(Some("OutOfpods"));
                    Ok(Some("the kubelet rejects new pods".to_owned()))
                }
                None => Ok(None),
            },
            Op::Restart => match controllers {
                Controllers::Single(running) => {
                    if let Some(old) = running.take() {
                        problems.extend(
                            stop_controllers(old)
                                .await
                                .into_iter()
                                .map(|p| format!("seed {}: {p}", self.seed)),
                        );
                    }
                    *running = Some(start_controllers(&cluster.client()));
                    Ok(Some("restarted the controllers".to_owned()))
                }
                // Sharded: one member killed and restarted in place.
                Controllers::Sharded(ring) => {
                    let mut found = Vec::new();
                    let what = ring.restart_one(&mut found).await;
                    problems.extend(
                        found
                            .into_iter()
                            .map(|p| format!("seed {}: {p}", self.seed)),
                    );
                    Ok(what)
                }
            },
            Op::ForceGone(resource) => {
                cluster.faults().force_gone_next_watch(Some(resource));
                Ok(Some(format!(
                    "armed 410 Gone for the next {resource} watch"
                )))
            }
        }
    }

    async fn create(
        &self,
        slot: usize,
        replicas: i32,
        min_ready: i32,
    ) -> Result<Option<String>, kube::Error> {
        let kind = self.kinds[slot];
        let resource = kind.resource();
        let name = self.name(slot);
        let selector = match kind {
            Kind::ReplicaSet => json!({"matchLabels": {"app": name}}),
            Kind::ReplicationController => json!({"app": name}),
        };
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": {"name": name, "namespace": NS},
            "spec": {
                "replicas": replicas,
                "minReadySeconds": min_ready,
                "selector": selector,
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        }))
        .unwrap();
        // An owner deleted with orphan propagation lingers until the garbage
        // collector has released its pods.
        for _ in 0..30 {
            match self
                .owners(slot)
                .create(&PostParams::default(), &object)
                .await
            {
                Ok(_) => {
                    return Ok(Some(format!(
                        "created {name} with {replicas} replicas, minReadySeconds {min_ready}"
                    )));
                }
                Err(e) if api_code(&e) == Some(409) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------
// The invariants

/// An owner as read back for the checks.
struct OwnerView {
    what: String,
    uid: String,
    replicas: i64,
    generation: i64,
    deleting: bool,
    selector: BTreeMap<String, String>,
    template_labels: BTreeMap<String, String>,
    min_ready: i32,
    has_terminating: bool,
    status: Value,
}

fn string_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

fn owner_view(kind: Kind, obj: DynamicObject) -> OwnerView {
    let spec = &obj.data["spec"];
    let selector = match kind {
        Kind::ReplicaSet => string_map(spec.pointer("/selector/matchLabels")),
        Kind::ReplicationController => string_map(spec.get("selector")),
    };
    OwnerView {
        what: format!(
            "{}/{}",
            kind.short(),
            obj.metadata.name.clone().unwrap_or_default()
        ),
        uid: obj.metadata.uid.clone().unwrap_or_default(),
        replicas: spec["replicas"].as_i64().unwrap_or(1).max(0),
        generation: obj.metadata.generation.unwrap_or(0),
        deleting: obj.metadata.deletion_timestamp.is_some(),
        selector,
        template_labels: string_map(spec.pointer("/template/metadata/labels")),
        min_ready: spec["minReadySeconds"]
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .unwrap_or(0),
        has_terminating: kind == Kind::ReplicaSet,
        status: obj.data.get("status").cloned().unwrap_or(Value::Null),
    }
}

fn labels_include(pod: &Pod, wanted: &BTreeMap<String, String>) -> bool {
    let labels = pod.metadata.labels.as_ref();
    wanted
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

fn pod_name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

fn controller_refs(
    pod: &Pod,
) -> Vec<&k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference> {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| r.controller == Some(true))
        .collect()
}

/// Everything in the namespace, read through the driver's client.
async fn read_world(client: &kube::Client) -> Result<(Vec<OwnerView>, Vec<Pod>), kube::Error> {
    let mut owners = Vec::new();
    for kind in [Kind::ReplicaSet, Kind::ReplicationController] {
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &kind.resource());
        for obj in api.list(&ListParams::default()).await?.items {
            owners.push(owner_view(kind, obj));
        }
    }
    let pods = Api::<Pod>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items;
    Ok((owners, pods))
}

/// Every invariant violated by the cluster's current state; each message
/// names the seed and the owner (or pod).
fn violations(seed: u64, owners: &[OwnerView], pods: &[Pod], now: Timestamp) -> Vec<String> {
    let mut out = Vec::new();
    let live: BTreeMap<&str, &OwnerView> = owners.iter().map(|o| (o.uid.as_str(), o)).collect();

    for pod in pods {
        let refs = controller_refs(pod);
        if refs.len() > 1 {
            let names: Vec<String> = refs
                .iter()
                .map(|r| format!("{}/{}", r.kind, r.name))
                .collect();
            out.push(format!(
                "seed {seed}: pod {} has {} controller references: {}",
                pod_name(pod),
                refs.len(),
                names.join(", ")
            ));
        }
        for r in pod.metadata.owner_references.iter().flatten() {
            if !live.contains_key(r.uid.as_str()) {
                out.push(format!(
                    "seed {seed}: pod {} refers to the deleted owner {}/{} (uid {})",
                    pod_name(pod),
                    r.kind,
                    r.name,
                    r.uid
                ));
            }
        }
    }

    for owner in owners {
        let what = &owner.what;
        if owner.deleting {
            out.push(format!(
                "seed {seed}: {what}: still being deleted after settling"
            ));
            continue;
        }
        let controlled: Vec<&Pod> = pods
            .iter()
            .filter(|p| controller_refs(p).iter().any(|r| r.uid == owner.uid))
            .collect();
        let active: Vec<&Pod> = controlled
            .iter()
            .copied()
            .filter(|p| is_pod_active(p))
            .collect();
        if active.len() as i64 != owner.replicas {
            let names: Vec<&str> = active.iter().map(|p| pod_name(p)).collect();
            out.push(format!(
                "seed {seed}: {what}: {} active pods with its controller reference, spec.replicas is {} (pods: {names:?})",
                active.len(),
                owner.replicas
            ));
        }
        let failed = controlled
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
            .count();
        if failed > DEFAULT_FAILED_PODS_KEPT {
            out.push(format!(
                "seed {seed}: {what}: {failed} Failed pods kept, the churn guard keeps at most {DEFAULT_FAILED_PODS_KEPT}"
            ));
        }
        for pod in &active {
            if !labels_include(pod, &owner.selector) {
                out.push(format!(
                    "seed {seed}: {what}: controls pod {} which does not match its selector (not released)",
                    pod_name(pod)
                ));
            }
        }
        for pod in pods {
            if is_pod_active(pod)
                && controller_refs(pod).is_empty()
                && labels_include(pod, &owner.selector)
            {
                out.push(format!(
                    "seed {seed}: {what}: orphan pod {} matches its selector but was not adopted",
                    pod_name(pod)
                ));
            }
        }

        let s = &owner.status;
        let field = |name: &str| s.get(name).and_then(Value::as_i64).unwrap_or(0);
        let count = |f: &dyn Fn(&Pod) -> bool| active.iter().filter(|p| f(p)).count() as i64;
        let terminating = controlled
            .iter()
            .filter(|p| is_pod_terminating(p) && labels_include(p, &owner.selector))
            .count() as i64;
        let mut expected = vec![
            ("replicas", active.len() as i64),
            (
                "fullyLabeledReplicas",
                count(&|p| labels_include(p, &owner.template_labels)),
            ),
            ("readyReplicas", count(&|p| is_pod_ready(p))),
            (
                "availableReplicas",
                count(&|p| is_pod_available(p, owner.min_ready, now)),
            ),
            ("observedGeneration", owner.generation),
        ];
        if owner.has_terminating {
            expected.push(("terminatingReplicas", terminating));
        }
        for (name, want) in expected {
            let got = field(name);
            if got != want {
                out.push(format!(
                    "seed {seed}: {what}: status.{name} is {got}, the pods say {want}"
                ));
            }
        }
        let failure = s
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|c| c["type"] == "ReplicaFailure");
        if let Some(c) = failure {
            out.push(format!(
                "seed {seed}: {what}: ReplicaFailure condition left after settling: {c}"
            ));
        }
    }
    out
}

/// Ready pods that their owner's `minReadySeconds` does not count as
/// available yet at `now`, with how long until it does: `(pod, wait)`.
///
/// The kubelet simulation stamps readiness with the wall clock (as do the
/// controllers when they judge availability), while everything else in
/// the soak runs on tokio's paused clock, which gets through seconds of
/// scenario in milliseconds: a pod that turned ready just before the
/// checks passed still has its availability transition (and the owner's
/// status write for it) ahead of it on the wall clock.
fn pending_availability(
    owners: &[OwnerView],
    pods: &[Pod],
    now: Timestamp,
) -> Vec<(String, Duration)> {
    let mut out = Vec::new();
    for owner in owners.iter().filter(|o| o.min_ready > 0) {
        for pod in pods
            .iter()
            .filter(|p| is_pod_active(p) && controller_refs(p).iter().any(|r| r.uid == owner.uid))
        {
            if let Some(wait) = next_pod_availability_check(pod, owner.min_ready, now) {
                out.push((format!("{} pod {}", owner.what, pod_name(pod)), wait));
            }
        }
    }
    out
}

/// Lets `wait` of wall-clock time pass with tokio's clock running in real
/// time meanwhile, so timers and wall-clock timestamps move together (a
/// paused clock would race through minutes of timers in that time).
async fn real_time_wait(wait: Duration) {
    tokio::time::resume();
    tokio::time::sleep(wait).await;
    tokio::time::pause();
}

// ---------------------------------------------------------------------------
// One seed

/// What one seed did and found.
struct SeedReport {
    seed: u64,
    violations: Vec<String>,
    summary: String,
}

fn fault_counts(cluster: &TestCluster) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for fault in cluster.faults().log() {
        let key = match fault.kind {
            FaultKind::Error(kind) => format!("{}", kind.code()),
            FaultKind::ForcedGone => "410".to_owned(),
            FaultKind::WatchCutAfterEvents(_) | FaultKind::WatchCutAfter(_) => {
                "watch cuts".to_owned()
            }
            FaultKind::WatchDelayed(_) => "delayed watches".to_owned(),
            FaultKind::Latency(_) => "latency".to_owned(),
        };
        *counts.entry(key).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn run_seed(seed: u64, ops: usize, trace: bool, sharded: bool) -> SeedReport {
    let wall = WallInstant::now();
    let plan = schedule(seed, ops);
    let mut member_ops = if sharded {
        sharded::member_schedule(seed, ops)
    } else {
        Vec::new()
    }
    .into_iter()
    .peekable();
    let config = TestClusterConfig::default()
        .with_seed(seed)
        .with_kubelet(KubeletConfig::with_nodes(4, 250))
        .with_faults(chaos_faults(plan.watch_cut_after));
    let cluster = TestCluster::start(config).await.unwrap();
    let client = driver_client(&cluster);
    let mut driver = Driver {
        seed,
        client: client.clone(),
        kinds: plan.kinds.clone(),
        pods: Api::namespaced(client.clone(), NS),
        trace,
        skipped: 0,
        errors: Vec::new(),
    };
    let mut problems = Vec::new();
    let creations = creations::Creations::start(&client, NS);
    let mut controllers = if sharded {
        Controllers::Sharded(sharded::Ring::start(
            &cluster.client(),
            &client,
            NS,
            soak_options(),
        ))
    } else {
        Controllers::Single(Some(start_controllers(&cluster.client())))
    };
    let (mut restarts, mut gones) = (0, 0);
    let ops_started = tokio::time::Instant::now();

    let mut rejecting_until: Option<tokio::time::Instant> = None;
    for (i, step) in plan.steps.iter().enumerate() {
        if rejecting_until.is_some_and(|t| t <= tokio::time::Instant::now()) {
            rejecting_until = None;
            if let Some(kubelet) = cluster.kubelet() {
                kubelet.reject_new_pods(None);
            }
        }
        if let Op::KubeletRejects { for_ } = step.op {
            let until = tokio::time::Instant::now() + for_;
            rejecting_until = Some(rejecting_until.map_or(until, |t| t.max(until)));
        }
        if wall.elapsed() > OPS_WALL {
            problems.push(format!(
                "seed {seed}: hang guard: only {i} of {ops} operations ran in {OPS_WALL:?}"
            ));
            break;
        }
        match &step.op {
            Op::Restart => restarts += 1,
            Op::ForceGone(_) => gones += 1,
            _ => {}
        }
        while let Some((_, op)) = member_ops.next_if(|(at, _)| *at == i) {
            if let Controllers::Sharded(ring) = &mut controllers {
                let mut found = Vec::new();
                let what = ring.apply(op, &mut found).await;
                problems.extend(found.into_iter().map(|p| format!("seed {seed}: {p}")));
                if let (true, Some(what)) = (driver.trace, what) {
                    println!("seed {seed} before op {i}: {what}");
                }
            }
        }
        match driver
            .apply(&step.op, &cluster, &mut controllers, &mut problems)
            .await
        {
            Ok(Some(what)) => {
                if driver.trace {
                    println!("seed {seed} op {i}: {what}");
                }
            }
            Ok(None) => driver.skipped += 1,
            // The object went away or changed under the operation.
            Err(e) if matches!(api_code(&e), Some(404 | 409)) => driver.skipped += 1,
            Err(e) => driver
                .errors
                .push(format!("seed {seed}: op {i} {:?} failed: {e}", step.op)),
        }
        tokio::time::sleep(step.pause).await;
    }
    let ops_virtual = ops_started.elapsed();
    let during_ops = cluster.requests();
    let pod_creates = during_ops.count("create", "pods").total();
    let controller_requests =
        during_ops.total().total() - during_ops.by_verb().get("watch").map_or(0, |c| c.total());
    if trace {
        println!("seed {seed}: requests until the end of the schedule:\n{during_ops}");
    }

    // Quiesce: faults off, enough members to share the owners, then wait
    // for the checks to pass several times in a row.
    cluster.faults().clear();
    if let Controllers::Sharded(ring) = &mut controllers {
        ring.top_up();
    }
    if let Some(kubelet) = cluster.kubelet() {
        kubelet.reject_new_pods(None);
    }
    let settle_started = tokio::time::Instant::now();
    let settle_wall = WallInstant::now();
    let mut passed = 0;
    let mut last = Vec::new();
    // Availability transitions still ahead on the wall clock once the
    // checks pass: waited for before the idle window rather than counted
    // in it.
    let (mut availability_waits, mut availability_waited) = (0, Duration::ZERO);
    let settled = loop {
        match read_world(&client).await {
            Ok((owners, pods)) => {
                let now = Timestamp::now();
                last = violations(seed, &owners, &pods, now);
                passed = if last.is_empty() { passed + 1 } else { 0 };
                let pending = pending_availability(&owners, &pods, now);
                if passed >= SETTLED_AFTER && !pending.is_empty() {
                    // Past the latest transition (timestamps are whole
                    // seconds), then the checks must pass again.
                    let wait = (pending.iter().map(|(_, w)| *w).max().unwrap_or_default()
                        + Duration::from_millis(100))
                    .min(SETTLE_WALL.saturating_sub(settle_wall.elapsed()));
                    if trace {
                        println!(
                            "seed {seed}: waiting {wait:?} (wall) for availability: {pending:?}"
                        );
                    }
                    availability_waits += pending.len();
                    availability_waited += wait;
                    real_time_wait(wait).await;
                    passed = 0;
                }
            }
            Err(e) => driver
                .errors
                .push(format!("seed {seed}: reading the cluster failed: {e}")),
        }
        if passed >= SETTLED_AFTER {
            break true;
        }
        if settle_started.elapsed() > SETTLE_VIRTUAL || settle_wall.elapsed() > SETTLE_WALL {
            break false;
        }
        tokio::time::sleep(SETTLE_POLL).await;
    };
    let settle_virtual = settle_started.elapsed();
    let mut found = Vec::new();
    let mut idle_requests = None;
    let mut idle_virtual = None;
    if !settled {
        found.push(format!(
            "seed {seed}: did not settle within {:?} (virtual) / {:?} (wall); {} violation(s) left",
            SETTLE_VIRTUAL,
            settle_wall.elapsed(),
            last.len()
        ));
        found.extend(last);
    } else {
        // Idle: the controllers should make (almost) no requests.
        cluster.reset_requests();
        let idle_log = idle_log::IdleLog::start(&client, NS).await;
        let idle_started = tokio::time::Instant::now();
        tokio::time::sleep(IDLE_WINDOW).await;
        idle_virtual = Some(idle_started.elapsed());
        let idle = cluster.requests();
        // Shard members renew their Leases while idle: not controller work.
        let leases: u64 = idle
            .iter()
            .filter(|(k, _)| !k.internal && k.resource == "leases" && k.verb != "watch")
            .map(|(_, c)| c.total())
            .sum();
        let non_watch =
            idle.total().total() - idle.by_verb().get("watch").map_or(0, |c| c.total()) - leases;
        idle_requests = Some(non_watch);
        let changes = match idle_log {
            Ok(log) => log.finish().join("\n"),
            Err(e) => format!("(could not watch the idle window: {e})"),
        };
        if trace {
            println!("seed {seed}: changes while idle:\n{changes}");
        }
        if non_watch > IDLE_REQUEST_BOUND {
            found.push(format!(
                "seed {seed}: hot loop: {non_watch} non-watch requests in {IDLE_WINDOW:?} of idle time (bound {IDLE_REQUEST_BOUND}):\n{idle}\nchanges while idle:\n{changes}"
            ));
        }
        match read_world(&client).await {
            Ok((owners, pods)) => found.extend(violations(seed, &owners, &pods, Timestamp::now())),
            Err(e) => driver
                .errors
                .push(format!("seed {seed}: reading the cluster failed: {e}")),
        }
    }
    // Every pod the controllers created, judged against its owner's need
    // on the server when it was created.
    let (creates_seen, beyond_need) = creations.finish();
    let beyond = beyond_need.len();
    found.extend(
        beyond_need
            .into_iter()
            .map(|b| format!("seed {seed}: created beyond need: {b}")),
    );
    let mut shard_summary = String::new();
    match controllers {
        Controllers::Single(running) => {
            if let Some(r) = running {
                problems.extend(
                    stop_controllers(r)
                        .await
                        .into_iter()
                        .map(|p| format!("seed {seed}: {p}")),
                );
            }
        }
        Controllers::Sharded(ring) => {
            let log = Arc::clone(&ring.log);
            shard_summary = format!(
                "; sharded: {}, syncs per member {:?}",
                ring.membership,
                log.per_member()
            );
            problems.extend(ring.stop_all(seed).await);
            // Checked once every member stopped: their last syncs are in.
            found.extend(log.overlaps(seed));
        }
    }
    let (owners, pods) = read_world(&client).await.unwrap_or_default();
    let faults = fault_counts(&cluster);
    cluster.shutdown().await;

    found.extend(problems);
    found.extend(driver.errors.iter().cloned());
    let summary = format!(
        "seed {seed}: {ops} ops ({} skipped, {restarts} restarts, {gones} forced 410s, watch cut after {} events), \
         faults injected [{faults}], {controller_requests} non-watch controller requests, {pod_creates} pod creates; at the end {} owners, {} pods; \
         ops took {:?} virtual, settled in {settle_virtual:?} virtual \
         (waited {availability_waited:?} wall for {availability_waits} pods to become available), \
         {idle_requests:?} non-watch requests in {idle_virtual:?} virtual while idle; \
         {creates_seen} creates watched, {beyond} beyond need; {:?} wall; {} violation(s){shard_summary}",
        driver.skipped,
        plan.watch_cut_after,
        owners.len(),
        pods.len(),
        ops_virtual,
        wall.elapsed(),
        found.len(),
    );
    SeedReport {
        seed,
        violations: found,
        summary,
    }
}

// ---------------------------------------------------------------------------
// The test

/// Fails the run if one seed takes longer than [`SEED_WALL`] of wall-clock
/// time. The hang guards inside a seed are checked between paused sleeps,
/// and tokio's paused clock only moves while the runtime is idle: work
/// that never lets it idle (a controller creating pods for an owner the
/// garbage collector keeps deleting them for) would stall them, so this
/// guard lives on its own thread.
struct Watchdog(std::sync::mpsc::Sender<()>);

/// What the watchdog prints about the owner caches when a seed hangs (the
/// owners a hung controller still holds: seed 7092 showed the deleted
/// `rs-49` and `rc-18` there, with the clock stopped).
static STALL_PROBE: std::sync::Mutex<Option<Box<dyn Fn() -> String + Send>>> =
    std::sync::Mutex::new(None);

fn set_stall_probe(factory: &SharedInformerFactory) {
    let rs = factory.namespaced::<ReplicaSet>(NS, kube::runtime::watcher::Config::default());
    let rc =
        factory.namespaced::<ReplicationController>(NS, kube::runtime::watcher::Config::default());
    let probe = move || {
        let mut rs_names: Vec<String> = rs
            .store()
            .list()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        rs_names.sort();
        let mut rc_names: Vec<String> = rc
            .store()
            .list()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        rc_names.sort();
        format!(
            "the owner caches: replicasets (resourceVersion {:?}): {rs_names:?}; \
             replicationcontrollers (resourceVersion {:?}): {rc_names:?}",
            rs.last_sync_resource_version(),
            rc.last_sync_resource_version(),
        )
    };
    *STALL_PROBE.lock().unwrap() = Some(Box::new(probe));
}

impl Watchdog {
    fn arm(seed: u64) -> Watchdog {
        let limit = std::env::var("CTRLKIT_SOAK_SEED_WALL_SECS")
            .ok()
            .map(|v| {
                Duration::from_secs(
                    v.parse()
                        .expect("CTRLKIT_SOAK_SEED_WALL_SECS: not a number"),
                )
            })
            .unwrap_or(SEED_WALL);
        let (done, wait) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(limit) {
                // Straight to stderr: the test harness captures `eprintln!`
                // (in spawned threads too) and would drop it on exit.
                let _ = writeln!(
                    std::io::stderr(),
                    "chaos soak: seed {seed} still running after {limit:?} of wall-clock time: \
                     hung (its runtime may never have gone idle, which stops tokio's paused clock); \
                     rerun it with CTRLKIT_SOAK_SEEDS={seed} CTRLKIT_SOAK_TRACE=1"
                );
                if let Some(probe) = STALL_PROBE.lock().unwrap().as_ref() {
                    let _ = writeln!(std::io::stderr(), "{}", probe());
                }
                std::process::exit(101);
            }
        });
        Watchdog(done)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

/// Seeds from `CTRLKIT_SOAK_SEEDS`, `default` when unset.
fn seeds_from_env(default: &[u64]) -> Vec<u64> {
    std::env::var("CTRLKIT_SOAK_SEEDS").map_or_else(|_| default.to_vec(), |s| parse_seeds(&s))
}

/// `7`, `3,9,12`, `1..50` (50 excluded) or `1..=50`, mixed freely.
fn parse_seeds(spec: &str) -> Vec<u64> {
    let number = |s: &str| -> u64 {
        s.trim()
            .parse()
            .unwrap_or_else(|_| panic!("CTRLKIT_SOAK_SEEDS: {s:?} is not a seed"))
    };
    let mut seeds = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once("..") {
            Some((a, b)) => match b.strip_prefix('=') {
                Some(b) => seeds.extend(number(a)..=number(b)),
                None => seeds.extend(number(a)..number(b)),
            },
            None => seeds.push(number(part)),
        }
    }
    seeds
}

fn ops_from_env() -> usize {
    std::env::var("CTRLKIT_SOAK_OPS")
        .ok()
        .map(|v| v.parse().expect("CTRLKIT_SOAK_OPS: not a number"))
        .unwrap_or(DEFAULT_OPS)
}

#[tokio::test(start_paused = true)]
async fn chaos_soak() {
    soak(DEFAULT_SEEDS, false).await;
}

/// The sharded mode: members of one ring join, leave, are killed and
/// restarted on top of the faults; no owner may be synced by two at once.
#[tokio::test(start_paused = true)]
async fn sharded_soak() {
    soak(DEFAULT_SHARDED_SEEDS, true).await;
}

/// Log timestamps on the paused (virtual) clock, since the soak started.
struct VirtualTime(tokio::time::Instant);

impl tracing_subscriber::fmt::time::FormatTime for VirtualTime {
    fn format_time(&self, w: &mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result {
        write!(w, "{:.3}s", self.0.elapsed().as_secs_f64())
    }
}

async fn soak(default_seeds: &[u64], sharded: bool) {
    let seeds = seeds_from_env(default_seeds);
    let ops = ops_from_env();
    let mode = if sharded {
        "sharded soak"
    } else {
        "chaos soak"
    };
    let trace = std::env::var_os("CTRLKIT_SOAK_TRACE").is_some();
    // The controllers' and shard members' own logs, when asked for
    // (`RUST_LOG=ctrlkit_runtime::shard=debug`), with the virtual time.
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_timer(VirtualTime(tokio::time::Instant::now()))
            .with_test_writer()
            .try_init();
    }

    let mut failed: BTreeSet<u64> = BTreeSet::new();
    let mut all = Vec::new();
    // Time passes while the controllers keep the runtime busy (see
    // `clock_pump`): about as fast as the wall clock.
    let pump = clock_pump::ClockPump::start(Duration::from_millis(50), Duration::from_millis(50));
    for seed in &seeds {
        let watchdog = Watchdog::arm(*seed);
        let pumped = pump.advances();
        let report = run_seed(*seed, ops, trace, sharded).await;
        drop(watchdog);
        println!("{}", report.summary);
        let pumped = pump.advances() - pumped;
        if pumped > 0 {
            println!(
                "seed {seed}: the runtime kept the paused clock still; the clock pump advanced it {pumped} times"
            );
        }
        for v in &report.violations {
            println!("  {v}");
        }
        if !report.violations.is_empty() {
            failed.insert(report.seed);
        }
        all.extend(report.violations);
    }
    println!(
        "{mode}: {} seed(s), {ops} ops each, {} failed {failed:?}",
        seeds.len(),
        failed.len()
    );
    assert!(
        all.is_empty(),
        "{mode}: {} violation(s) in seeds {failed:?} (rerun one with CTRLKIT_SOAK_SEEDS=<seed> CTRLKIT_SOAK_TRACE=1):\n{}",
        all.len(),
        all.join("\n")
    );
}

#[test]
fn the_schedule_is_a_function_of_the_seed() {
    let render = |s: &Schedule| {
        s.steps
            .iter()
            .map(|st| format!("{:?} {:?}", st.op, st.pause))
            .collect::<Vec<_>>()
    };
    let a = schedule(7, 200);
    let b = schedule(7, 200);
    let c = schedule(8, 200);
    assert_eq!(render(&a), render(&b));
    assert_eq!(a.kinds, b.kinds);
    assert_ne!(render(&a), render(&c));
    // The mix covers every kind of operation and both owner kinds.
    let ops = render(&a).join("\n");
    for op in [
        "Create",
        "Scale",
        "RelabelTemplate",
        "RelabelPod",
        "RelabelBack",
        "DeletePod",
        "PodReadiness",
        "CrashPod",
        "DeleteOwner",
        "Restart",
        "KubeletRejects",
        "ForceGone",
    ] {
        assert!(ops.contains(op), "no {op} in the schedule");
    }
    assert!(ops.contains("orphan: true") && ops.contains("orphan: false"));
    assert!(a.kinds.contains(&Kind::ReplicaSet) && a.kinds.contains(&Kind::ReplicationController));
    assert!((150..=250).contains(&a.watch_cut_after));
}

#[test]
fn seed_lists_parse() {
    assert_eq!(parse_seeds("7"), vec![7]);
    assert_eq!(parse_seeds("3, 9,12"), vec![3, 9, 12]);
    assert_eq!(parse_seeds("1..4"), vec![1, 2, 3]);
    assert_eq!(parse_seeds("1..=4,9"), vec![1, 2, 3, 4, 9]);
}

#[test]
fn pending_availability_counts_ready_pods_short_of_min_ready_seconds() {
    let now: Timestamp = "2026-11-25T12:00:10Z".parse().unwrap();
    let owner = |name: &str, uid: &str, min_ready: i32| OwnerView {
        what: format!("rs/{name}"),
        uid: uid.to_owned(),
        replicas: 1,
        generation: 1,
        deleting: false,
        selector: BTreeMap::new(),
        template_labels: BTreeMap::new(),
        min_ready,
        has_terminating: true,
        status: Value::Null,
    };
    let pod = |name: &str, owner_uid: &str, ready_at: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x",
                "uid": owner_uid, "controller": true
            }]},
            "status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": ready_at}
            ]}
        }))
        .unwrap()
    };
    let owners = [owner("slow", "u1", 1), owner("plain", "u2", 0)];
    let pods = [
        // Ready this second: available in a second.
        pod("fresh", "u1", "2026-11-25T12:00:10Z"),
        // Ready long enough.
        pod("old", "u1", "2026-11-25T12:00:05Z"),
        // minReadySeconds 0: available as soon as ready.
        pod("other", "u2", "2026-11-25T12:00:10Z"),
        // Nobody's pod.
        pod("stray", "u3", "2026-11-25T12:00:10Z"),
    ];
    assert_eq!(
        pending_availability(&owners, &pods, now),
        vec![("rs/slow pod fresh".to_owned(), Duration::from_secs(1))]
    );
}
