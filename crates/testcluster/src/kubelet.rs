//! Kubelet (and scheduler) simulation.
//!
//! In a real cluster, the scheduler binds each new pod to a node and the
//! kubelet on that node admits it, starts its containers and reports its
//! status. Controllers such as the ReplicaSet controller read that status
//! (phase, `Ready` condition, container restarts) to count ready and
//! available replicas. The test cluster has no containers, so this module
//! plays both parts with timers:
//!
//! 1. **Scheduling.** A pod without `spec.nodeName` is bound, after
//!    [`KubeletConfig::schedule_delay`], to the simulated node with the most
//!    free pod slots, through the `pods/binding` subresource. When every node
//!    is full the pod stays `Pending` until a slot frees up.
//! 2. **Admission.** When a pod lands on a simulated node (bound by the
//!    scheduler or created with `spec.nodeName` set), the kubelet admits it
//!    if the node has a free slot. Otherwise it rejects it like the real
//!    kubelet does: phase `Failed`, reason `OutOfpods`, message `Pod Node
//!    didn't have enough resource: pods, requested: 1, used: N, capacity: N`,
//!    plus a Warning event. A rejected pod never runs; a controller that
//!    ignores failed pods will create a replacement (the churn of the
//!    "OutOfpods" incident). [`Kubelet::reject_new_pods`] rejects every newly
//!    admitted pod on cue.
//! 3. **Start-up.** An admitted pod is reported `Pending` with `PodScheduled`
//!    and `Initialized` true, then after [`KubeletConfig::start_delay`]
//!    `Running` (containers started, not ready, `podIP`), then after
//!    [`KubeletConfig::ready_delay`] `Ready` (`ContainersReady` and `Ready`
//!    true, containers ready).
//! 4. **Deletion.** A pod with `metadata.deletionTimestamp` is removed with a
//!    `DELETE` with `gracePeriodSeconds=0` after
//!    [`KubeletConfig::deletion_delay`], as the kubelet does once the
//!    containers have stopped.
//!
//! Cues at runtime: [`Kubelet::crash_pod`] (container restart: the restart
//! count grows and the pod is not ready for `ready_delay`),
//! [`Kubelet::set_pod_ready`] (force a pod not ready, or back), and
//! [`Kubelet::reject_new_pods`]. [`Kubelet::stats`] counts what happened.
//!
//! The simulation talks to the API server only through the
//! [`kube::Client`] it is given (a `kube_runtime` watcher on pods, the binding
//! subresource, merge patches of `pods/status`, deletes), like a real node
//! would. Its requests go out concurrently, as from many nodes, and one
//! pod's status patches land in the order they were made. Its timers are
//! tokio timers. It runs as a task on the runtime that starts it, or, with
//! [`KubeletConfig::dedicated_thread`], on a thread of its own, so that
//! the API server's clients do not hold back its work (see
//! [`Kubelet::spawn_dedicated`]). See `docs/kubelet-and-faults.md` in the
//! crate for the full behaviour.
//!
//! ```
//! use std::time::Duration;
//! use ctrlkit_testcluster::{TestCluster, TestClusterConfig, kubelet::KubeletConfig};
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::{Api, api::PostParams, runtime::wait::await_condition};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // One node with room for one pod.
//! let config = TestClusterConfig::default().with_kubelet(KubeletConfig::with_nodes(1, 1));
//! let tc = TestCluster::start(config).await?;
//! let pods: Api<Pod> = Api::default_namespaced(tc.client());
//! let pod: Pod = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "web"},
//!     "spec": {"containers": [{"name": "app", "image": "nginx"}]},
//! }))?;
//! pods.create(&PostParams::default(), &pod).await?;
//!
//! // Bound to node-1, Running, then Ready.
//! let ready = |p: Option<&Pod>| {
//!     p.and_then(|p| p.status.as_ref()?.conditions.clone())
//!         .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
//! };
//! let guard = Duration::from_secs(60);
//! tokio::time::timeout(guard, await_condition(pods.clone(), "web", ready)).await??;
//!
//! // A container crash counts as a restart.
//! let kubelet = tc.kubelet().expect("configured");
//! kubelet.crash_pod("default", "web").await?;
//! let pod = pods.get("web").await?;
//! let restarts = pod.status.and_then(|s| s.container_statuses).map(|cs| cs[0].restart_count);
//! assert_eq!(restarts, Some(1));
//! assert_eq!(kubelet.stats().crashes, 1);
//! tc.shutdown().await;
//! # Ok(())
//! # }
//! ```

use crate::clock::{Clock, SystemClock};
use std::{
    borrow::Cow,
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::{
    Api, Resource,
    api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions},
    runtime::{WatchStreamExt, watcher},
};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// One simulated node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// Node name, used as the pods' `spec.nodeName`.
    pub name: String,
    /// How many active (not finished) pods fit on the node: the node's
    /// `pods` resource. Pods beyond it are rejected with `OutOfpods`.
    pub capacity: usize,
}

/// Configuration of the kubelet simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletConfig {
    /// The simulated nodes. Pods bound to other node names are left alone
    /// (no kubelet runs there), as in a real cluster.
    pub nodes: Vec<NodeConfig>,
    /// Delay before a pending pod is bound to a node.
    pub schedule_delay: Duration,
    /// Delay from admission (`Pending` on a node) to `Running`.
    pub start_delay: Duration,
    /// Delay from `Running` to `Ready` (also after a crash).
    pub ready_delay: Duration,
    /// Delay before a pod marked for deletion is removed.
    pub deletion_delay: Duration,
    /// Reject every newly admitted pod with this reason from the start (see
    /// [`Kubelet::reject_new_pods`]).
    pub reject_reason: Option<String>,
    /// Run the simulation on a thread and tokio runtime of its own (see
    /// [`Kubelet::spawn_dedicated`]) when a [`TestCluster`](crate::TestCluster)
    /// starts it. Off by default: its timers then follow the real clock,
    /// not the test's runtime, so a test on paused time must leave it off.
    pub dedicated_thread: bool,
}

impl Default for KubeletConfig {
    /// One node, `node-1`, with 110 pod slots (the kubelet's default
    /// `maxPods`) and the delays of [`KubeletConfig::with_nodes`].
    fn default() -> Self {
        KubeletConfig::with_nodes(1, 110)
    }
}

impl KubeletConfig {
    /// `count` nodes named `node-1`, `node-2`, ... with `pods_per_node`
    /// slots each; schedule and deletion delays of 10 ms, start and ready
    /// delays of 50 ms.
    pub fn with_nodes(count: usize, pods_per_node: usize) -> KubeletConfig {
        KubeletConfig {
            nodes: (1..=count)
                .map(|i| NodeConfig {
                    name: format!("node-{i}"),
                    capacity: pods_per_node,
                })
                .collect(),
            schedule_delay: Duration::from_millis(10),
            start_delay: Duration::from_millis(50),
            ready_delay: Duration::from_millis(50),
            deletion_delay: Duration::from_millis(10),
            reject_reason: None,
            dedicated_thread: false,
        }
    }

    /// Set [`schedule_delay`](Self::schedule_delay).
    pub fn schedule_delay(mut self, d: Duration) -> Self {
        self.schedule_delay = d;
        self
    }

    /// Set [`start_delay`](Self::start_delay).
    pub fn start_delay(mut self, d: Duration) -> Self {
        self.start_delay = d;
        self
    }

    /// Set [`ready_delay`](Self::ready_delay).
    pub fn ready_delay(mut self, d: Duration) -> Self {
        self.ready_delay = d;
        self
    }

    /// Set [`deletion_delay`](Self::deletion_delay).
    pub fn deletion_delay(mut self, d: Duration) -> Self {
        self.deletion_delay = d;
        self
    }

    /// Set [`reject_reason`](Self::reject_reason).
    pub fn reject_reason(mut self, reason: Option<&str>) -> Self {
        self.reject_reason = reason.map(str::to_owned);
        self
    }

    /// Set [`dedicated_thread`](Self::dedicated_thread).
    pub fn dedicated_thread(mut self, on: bool) -> Self {
        self.dedicated_thread = on;
        self
    }
}

/// Counters of what the kubelet did since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KubeletStats {
    /// Pods bound to a node through the binding subresource.
    pub bound: u64,
    /// Pods admitted on a node.
    pub admitted: u64,
    /// Pods rejected at admission (phase `Failed`).
    pub rejected: u64,
    /// Pods that reached `Running`.
    pub started: u64,
    /// Container crashes (from [`Kubelet::crash_pod`]).
    pub crashes: u64,
    /// Graceful deletions finished (pods removed with grace period 0).
    pub deletions_finished: u64,
    /// Pods waiting for a free node slot right now (they are `Pending`
    /// with condition `PodScheduled=False`, reason `Unschedulable`).
    pub unschedulable: u64,
}

/// Errors of the runtime cues.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    /// The pod is not known to the simulation, or not on a simulated node.
    #[error("pod {namespace}/{name} is not on a simulated node")]
    PodNotFound {
        /// Namespace of the pod.
        namespace: String,
        /// Name of the pod.
        name: String,
    },
    /// The pod has no running containers (not started yet, rejected,
    /// finished or being deleted).
    #[error("pod {namespace}/{name} is not running")]
    NotRunning {
        /// Namespace of the pod.
        namespace: String,
        /// Name of the pod.
        name: String,
    },
    /// Writing the pod status failed.
    #[error("updating the status of pod {namespace}/{name} failed: {source}")]
    Api {
        /// Namespace of the pod.
        namespace: String,
        /// Name of the pod.
        name: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The simulation task has stopped.
    #[error("the kubelet simulation has stopped")]
    Stopped,
    /// The thread or runtime of a [dedicated](Kubelet::spawn_dedicated)
    /// simulation could not be started.
    #[error("starting the kubelet simulation's thread failed: {0}")]
    Start(#[source] std::io::Error),
    /// The kube client of a [dedicated](Kubelet::spawn_dedicated)
    /// simulation could not be built.
    #[error("building the kubelet simulation's client failed: {0}")]
    Client(#[source] kube::Error),
}

#[derive(Default)]
struct Shared {
    bound: AtomicU64,
    admitted: AtomicU64,
    rejected: AtomicU64,
    started: AtomicU64,
    crashes: AtomicU64,
    deletions_finished: AtomicU64,
    unschedulable: AtomicU64,
    reject_reason: Mutex<Option<String>>,
}

impl Shared {
    /// The state a new simulation starts from: no counts, and `config`'s
    /// reject reason.
    fn starting(config: &KubeletConfig) -> Arc<Shared> {
        let shared = Shared {
            reject_reason: Mutex::new(config.reject_reason.clone()),
            ..Shared::default()
        };
        Arc::new(shared)
    }
}

enum Command {
    Crash {
        namespace: String,
        name: String,
        reply: oneshot::Sender<Result<(), KubeletError>>,
    },
    SetReady {
        namespace: String,
        name: String,
        ready: bool,
        reply: oneshot::Sender<Result<(), KubeletError>>,
    },
}

/// Handle of a running kubelet simulation. Dropping it (or
/// [`shutdown`](Self::shutdown)) stops the simulation.
pub struct Kubelet {
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
    running: Option<Running>,
}

/// Where the simulation runs, and how to stop it.
enum Running {
    /// A task on the caller's runtime.
    Task(tokio::task::JoinHandle<()>),
    /// A thread of its own: sending on (or dropping) `stop` ends it;
    /// `done` is answered (or dropped) once its runtime is gone.
    Thread {
        stop: oneshot::Sender<()>,
        done: oneshot::Receiver<()>,
    },
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Kubelet {
    /// Start the simulation on the current tokio runtime, talking to the
    /// API server through `client`. Must be called within a tokio runtime.
    pub fn spawn(client: kube::Client, config: KubeletConfig) -> Kubelet {
        Kubelet::spawn_with_clock(client, config, Arc::new(SystemClock))
    }

    /// [`Kubelet::spawn`] with the times it writes (start times, condition
    /// transitions) read from `clock`, as a [`TestCluster`](crate::TestCluster)
    /// does with its configured clock.
    pub fn spawn_with_clock(
        client: kube::Client,
        config: KubeletConfig,
        clock: Arc<dyn Clock>,
    ) -> Kubelet {
        let shared = Shared::starting(&config);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let sim = Sim::new(client, config, Arc::clone(&shared), clock);
        let task = tokio::spawn(sim.run(command_rx));
        Kubelet {
            shared,
            commands,
            running: Some(Running::Task(task)),
        }
    }

    /// Start the simulation on a thread of its own, with a single-threaded
    /// tokio runtime of its own, talking to the API server through a
    /// client built on that thread from `client_config`.
    ///
    /// Kubelets run on their nodes, not in the API server. Spawned on the
    /// runtime that serves the API ([`Kubelet::spawn`]), the simulation's
    /// work (decoding its pod watch, its timers, its requests and their
    /// connections) waits in the same task queue as every client's
    /// requests, and a burst of them holds back every pod's start-up. On
    /// its own thread it is scheduled by the operating system beside the
    /// server, as a node's kubelet would be.
    ///
    /// Its timers follow that runtime's clock, the real one: a test on
    /// paused time must use [`Kubelet::spawn`]. Dropping the handle or
    /// [`shutdown`](Self::shutdown) stops the thread.
    ///
    /// Returns once the runtime and the client are built. Cancel safety:
    /// dropping the future before it completes stops the thread.
    pub async fn spawn_dedicated(
        client_config: kube::Config,
        config: KubeletConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Kubelet, KubeletError> {
        let shared = Shared::starting(&config);
        let (commands, command_rx) = mpsc::unbounded_channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let (started_tx, started) = oneshot::channel::<Result<(), KubeletError>>();
        let (done_tx, done) = oneshot::channel::<()>();
        let sim_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("kubelet-sim".to_owned())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = started_tx.send(Err(KubeletError::Start(e)));
                        return;
                    }
                };
                runtime.block_on(async move {
                    // Built here, so that its request buffer and connections
                    // are tasks of this runtime, not of the caller's.
                    let client = match kube::Client::try_from(client_config) {
                        Ok(client) => client,
                        Err(e) => {
                            let _ = started_tx.send(Err(KubeletError::Client(e)));
                            return;
                        }
                    };
                    let _ = started_tx.send(Ok(()));
                    let sim = Sim::new(client, config, sim_shared, clock);
                    tokio::select! {
                        () = sim.run(command_rx) => {}
                        _ = stop_rx => {}
                    }
                });
                // Dropping the runtime ends the simulation's timers and
                // requests before `done` is answered.
                drop(runtime);
                let _ = done_tx.send(());
            })
            .map_err(KubeletError::Start)?;
        let running = Running::Thread { stop, done };
        match started.await {
            Ok(Ok(())) => Ok(Kubelet {
                shared,
                commands,
                running: Some(running),
            }),
            Ok(Err(e)) => Err(e),
            // The thread ended without a word: it panicked.
            Err(_) => Err(KubeletError::Stopped),
        }
    }

    /// Reject every newly admitted pod with `reason` until called with
    /// `None`. With `Some("OutOfpods")` the rejection looks exactly like a
    /// full node's (`Pod Node didn't have enough resource: pods, requested:
    /// 1, used: N, capacity: N`, with N the node's capacity); other reasons
    /// get a generic message. Pods already admitted are not affected.
    pub fn reject_new_pods(&self, reason: Option<&str>) {
        *self.shared.reject_reason.lock() = reason.map(str::to_owned);
    }

    /// Crash the containers of a running pod: each container's
    /// `restartCount` grows by one, `lastState` records the termination,
    /// the pod is not ready, and becomes ready again after
    /// [`KubeletConfig::ready_delay`] (unless forced not ready). Returns once
    /// the status is written.
    pub async fn crash_pod(&self, namespace: &str, name: &str) -> Result<(), KubeletError> {
        let (reply, rx) = oneshot::channel();
        self.send(
            Command::Crash {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                reply,
            },
            rx,
        )
        .await
    }

    /// Force a running pod not ready (`ready = false`) until called again
    /// with `ready = true`, which makes it ready at once if its containers
    /// are running. Returns once the status is written.
    pub async fn set_pod_ready(
        &self,
        namespace: &str,
        name: &str,
        ready: bool,
    ) -> Result<(), KubeletError> {
        let (reply, rx) = oneshot::channel();
        self.send(
            Command::SetReady {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                ready,
                reply,
            },
            rx,
        )
        .await
    }

    async fn send(
        &self,
        cmd: Command,
        rx: oneshot::Receiver<Result<(), KubeletError>>,
    ) -> Result<(), KubeletError> {
        self.commands.send(cmd).map_err(|_| KubeletError::Stopped)?;
        rx.await.map_err(|_| KubeletError::Stopped)?
    }

    /// Counters so far.
    pub fn stats(&self) -> KubeletStats {
        let s = &self.shared;
        KubeletStats {
            bound: s.bound.load(Ordering::Relaxed),
            admitted: s.admitted.load(Ordering::Relaxed),
            rejected: s.rejected.load(Ordering::Relaxed),
            started: s.started.load(Ordering::Relaxed),
            crashes: s.crashes.load(Ordering::Relaxed),
            deletions_finished: s.deletions_finished.load(Ordering::Relaxed),
            unschedulable: s.unschedulable.load(Ordering::Relaxed),
        }
    }

    /// Stop the simulation and wait for its task (or thread) to end.
    ///
    /// Cancel safety: if the future is dropped, the simulation still stops.
    pub async fn shutdown(mut self) {
        match self.running.take() {
            Some(Running::Task(task)) => {
                task.abort();
                let _ = task.await;
            }
            Some(Running::Thread { stop, done }) => {
                let _ = stop.send(());
                // Answered or dropped when the thread ends.
                let _ = done.await;
            }
            None => {}
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        // A dedicated thread stops when its `stop` sender is dropped.
        if let Some(Running::Task(task)) = &self.running {
            task.abort();
        }
    }
}

/// Where a pod is in its simulated life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// No node yet.
    Unbound,
    /// On a node that is not simulated.
    Foreign,
    /// Admitted, containers being created.
    Admitted,
    /// Containers running.
    Running,
    /// Rejected at admission, or finished: takes no slot.
    Done,
}

struct PodSim {
    namespace: String,
    name: String,
    node: Option<String>,
    stage: Stage,
    containers: Vec<(String, String)>,
    /// A schedule timer is pending, or the pod waits for a free slot.
    scheduling: bool,
    /// Node slot reserved by a binding not yet seen through the watch.
    reserved: Option<String>,
    deleting: bool,
    restart_count: u32,
    forced_not_ready: bool,
    ready: bool,
    /// Bumped on every crash so stale ready timers are ignored.
    epoch: u64,
    pod_ip: Option<String>,
    host_ip: Option<String>,
    start_time: Option<String>,
    scheduled_at: Option<String>,
    started_at: Option<String>,
    ready_changed_at: Option<String>,
    last_termination: Option<Value>,
    /// Answered when the pod's latest status patch has been: the next
    /// patch waits for it, so the pod's patches land in the order made.
    last_patch: Option<oneshot::Receiver<()>>,
}

/// What a command waiting for its status write is told.
type Reply = oneshot::Sender<Result<(), KubeletError>>;

/// A pod as the simulation reads it from its watch: the fields it acts on
/// and nothing else. Decoding whole `Pod`s (their managed fields,
/// conditions and container statuses) was about a quarter of the
/// simulation's own CPU; the fields left out are skipped unbuilt.
#[derive(Clone, Debug, serde::Deserialize)]
struct WatchedPod {
    #[serde(deserialize_with = "watched_meta")]
    metadata: ObjectMeta,
    spec: Option<WatchedSpec>,
    status: Option<WatchedStatus>,
}

#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedSpec {
    node_name: Option<String>,
    containers: Option<Vec<WatchedContainer>>,
}

#[derive(Clone, Debug, serde::Deserialize)]
struct WatchedContainer {
    name: String,
    image: Option<String>,
}

#[derive(Clone, Debug, serde::Deserialize)]
struct WatchedStatus {
    phase: Option<String>,
}

/// The metadata the simulation and its watcher read (the watcher resumes
/// from `resourceVersion`); `managedFields` and the rest are skipped.
fn watched_meta<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Fields {
        name: Option<String>,
        namespace: Option<String>,
        uid: Option<String>,
        resource_version: Option<String>,
        deletion_timestamp: Option<Time>,
    }
    let f = <Fields as serde::Deserialize>::deserialize(d)?;
    Ok(ObjectMeta {
        name: f.name,
        namespace: f.namespace,
        uid: f.uid,
        resource_version: f.resource_version,
        deletion_timestamp: f.deletion_timestamp,
        ..ObjectMeta::default()
    })
}

/// The same resource as [`Pod`]: only the decoded type differs.
impl Resource for WatchedPod {
    type DynamicType = ();
    type Scope = <Pod as Resource>::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        Pod::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        Pod::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        Pod::version(dt)
    }
    fn api_version(dt: &()) -> Cow<'_, str> {
        Pod::api_version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        Pod::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A binding request answered: its outcome for the simulation to act on.
struct Bound {
    uid: String,
    node: String,
    result: Result<(), kube::Error>,
}

enum Timer {
    Schedule(String),
    Start(String),
    Ready(String, u64),
    FinishDelete(String),
}

struct NodeSim {
    name: String,
    capacity: usize,
    index: usize,
    active: HashSet<String>,
    reserved: usize,
}

impl NodeSim {
    fn free(&self) -> usize {
        self.capacity
            .saturating_sub(self.active.len() + self.reserved)
    }
}

struct Sim {
    client: kube::Client,
    clock: Arc<dyn Clock>,
    config: KubeletConfig,
    shared: Arc<Shared>,
    nodes: BTreeMap<String, NodeSim>,
    pods: HashMap<String, PodSim>,
    by_key: HashMap<(String, String), String>,
    waiting: VecDeque<String>,
    relist_seen: Option<HashSet<String>>,
    timers_tx: mpsc::UnboundedSender<Timer>,
    timers_rx: mpsc::UnboundedReceiver<Timer>,
    /// Requests in flight (bindings, status patches, events). A real
    /// cluster's nodes and scheduler do not wait for each other's
    /// requests; one request at a time made a scale-up as slow as the
    /// sum of its round trips. Aborted with the simulation.
    requests: JoinSet<Option<Bound>>,
    next_ip: u32,
}

impl Sim {
    fn new(
        client: kube::Client,
        config: KubeletConfig,
        shared: Arc<Shared>,
        clock: Arc<dyn Clock>,
    ) -> Sim {
        let nodes = config
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    n.name.clone(),
                    NodeSim {
                        name: n.name.clone(),
                        capacity: n.capacity,
                        index: i + 1,
                        active: HashSet::new(),
                        reserved: 0,
                    },
                )
            })
            .collect();
        let (timers_tx, timers_rx) = mpsc::unbounded_channel();
        Sim {
            client,
            clock,
            config,
            shared,
            nodes,
            pods: HashMap::new(),
            by_key: HashMap::new(),
            waiting: VecDeque::new(),
            relist_seen: None,
            timers_tx,
            timers_rx,
            requests: JoinSet::new(),
            next_ip: 0,
        }
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let api: Api<WatchedPod> = Api::all(self.client.clone());
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        loop {
            tokio::select! {
                ev = events.next() => match ev {
                    Some(Ok(ev)) => self.on_watch_event(ev),
                    Some(Err(e)) => tracing::debug!(error = %e, "kubelet: pod watch error"),
                    None => break,
                },
                Some(t) = self.timers_rx.recv() => self.on_timer(t).await,
                Some(answered) = self.requests.join_next() => {
                    if let Ok(Some(bound)) = answered {
                        self.on_bound(bound);
                    }
                }
                Some(cmd) = commands.recv() => self.on_command(cmd),
            }
            self.shared
                .unschedulable
                .store(self.waiting.len() as u64, Ordering::Relaxed);
        }
    }

    fn after(&self, delay: Duration, timer: Timer) {
        let tx = self.timers_tx.clone();
        if delay.is_zero() {
            let _ = tx.send(timer);
            return;
        }
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = tx.send(timer);
        });
    }

    fn on_watch_event(&mut self, ev: watcher::Event<WatchedPod>) {
        match ev {
            watcher::Event::Init => self.relist_seen = Some(HashSet::new()),
            watcher::Event::InitApply(pod) => {
                if let (Some(seen), Some(uid)) = (&mut self.relist_seen, &pod.metadata.uid) {
                    seen.insert(uid.clone());
                }
                self.observe(pod);
            }
            watcher::Event::InitDone => {
                if let Some(seen) = self.relist_seen.take() {
                    let gone: Vec<String> = self
                        .pods
                        .keys()
                        .filter(|uid| !seen.contains(*uid))
                        .cloned()
                        .collect();
                    for uid in gone {
                        self.forget(&uid);
                    }
                }
            }
            watcher::Event::Apply(pod) => self.observe(pod),
            watcher::Event::Delete(pod) => {
                if let Some(uid) = pod.metadata.uid {
                    self.forget(&uid);
                }
            }
        }
    }

    /// Bring the simulation up to date with one observed pod.
    fn observe(&mut self, pod: WatchedPod) {
        let (Some(uid), Some(name)) = (pod.metadata.uid.clone(), pod.metadata.name.clone()) else {
            return;
        };
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let spec = pod.spec.unwrap_or_default();
        let phase = pod.status.and_then(|s| s.phase).unwrap_or_default();
        let terminal = phase == "Failed" || phase == "Succeeded";
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let is_new = !self.pods.contains_key(&uid);
        if is_new {
            self.by_key
                .insert((namespace.clone(), name.clone()), uid.clone());
            self.pods.insert(
                uid.clone(),
                PodSim {
                    namespace,
                    name,
                    node: None,
                    stage: Stage::Unbound,
                    containers: Vec::new(),
                    scheduling: false,
                    reserved: None,
                    deleting: false,
                    restart_count: 0,
                    forced_not_ready: false,
                    ready: false,
                    epoch: 0,
                    pod_ip: None,
                    host_ip: None,
                    start_time: None,
                    scheduled_at: None,
                    started_at: None,
                    ready_changed_at: None,
                    last_termination: None,
                    last_patch: None,
                },
            );
        }
        let Some(p) = self.pods.get_mut(&uid) else {
            return;
        };
        p.containers = spec
            .containers
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name, c.image.unwrap_or_default()))
            .collect();

        if terminal && p.stage != Stage::Done {
            // Finished or failed by someone else: frees its slot.
            p.stage = Stage::Done;
            self.release_slot(&uid);
        }
        let Some(p) = self.pods.get_mut(&uid) else {
            return;
        };

        if p.stage == Stage::Unbound
            && let Some(node) = spec.node_name.clone()
        {
            p.node = Some(node.clone());
            if let Some(reserved) = p.reserved.take()
                && let Some(n) = self.nodes.get_mut(&reserved)
            {
                n.reserved = n.reserved.saturating_sub(1);
            }
            self.waiting.retain(|w| w != &uid);
            if !self.nodes.contains_key(&node) {
                if let Some(p) = self.pods.get_mut(&uid) {
                    p.stage = Stage::Foreign;
                }
            } else if is_new && phase == "Running" {
                // Already running before we started watching: adopt it.
                if let Some(p) = self.pods.get_mut(&uid) {
                    p.stage = Stage::Running;
                    p.ready = true;
                }
                if let Some(n) = self.nodes.get_mut(&node) {
                    n.active.insert(uid.clone());
                }
            } else if !terminal && !deleting {
                self.admit(&uid);
            }
        }

        let Some(p) = self.pods.get_mut(&uid) else {
            return;
        };
        if deleting && !p.deleting {
            p.deleting = true;
            self.waiting.retain(|w| w != &uid);
            let ours = match &p.node {
                None => true,
                Some(n) => self.nodes.contains_key(n),
            };
            if ours {
                self.after(self.config.deletion_delay, Timer::FinishDelete(uid.clone()));
            }
        } else if p.stage == Stage::Unbound && !p.scheduling && !terminal && !deleting {
            p.scheduling = true;
            self.after(self.config.schedule_delay, Timer::Schedule(uid.clone()));
        }
    }

    /// The pod is gone from the API server.
    fn forget(&mut self, uid: &str) {
        self.release_slot(uid);
        if let Some(p) = self.pods.remove(uid) {
            if let Some(reserved) = &p.reserved
                && let Some(n) = self.nodes.get_mut(reserved)
            {
                n.reserved = n.reserved.saturating_sub(1);
            }
            let key = (p.namespace, p.name);
            if self.by_key.get(&key).is_some_and(|u| u == uid) {
                self.by_key.remove(&key);
            }
        }
        self.waiting.retain(|w| w != uid);
        self.retry_waiting();
    }

    /// Free the node slot of a pod, and give it to a waiting pod.
    fn release_slot(&mut self, uid: &str) {
        let mut freed = false;
        for n in self.nodes.values_mut() {
            freed |= n.active.remove(uid);
        }
        if freed {
            self.retry_waiting();
        }
    }

    fn retry_waiting(&mut self) {
        while !self.waiting.is_empty() && self.nodes.values().any(|n| n.free() > 0) {
            let Some(uid) = self.waiting.pop_front() else {
                break;
            };
            self.schedule(&uid);
        }
    }

    async fn on_timer(&mut self, t: Timer) {
        match t {
            Timer::Schedule(uid) => self.schedule(&uid),
            Timer::Start(uid) => self.start(&uid),
            Timer::Ready(uid, epoch) => self.become_ready(&uid, epoch),
            Timer::FinishDelete(uid) => self.finish_delete(&uid).await,
        }
    }

    /// Bind an unbound pod to the node with the most free slots.
    fn schedule(&mut self, uid: &str) {
        let Some(p) = self.pods.get(uid) else { return };
        if p.stage != Stage::Unbound || p.deleting || p.reserved.is_some() {
            return;
        }
        let (namespace, name) = (p.namespace.clone(), p.name.clone());
        // Most free slots first; ties go to the first node in name order.
        let best = self
            .nodes
            .values()
            .filter(|n| n.free() > 0)
            .max_by_key(|n| (n.free(), std::cmp::Reverse(n.name.clone())))
            .map(|n| n.name.clone());
        let Some(node) = best else {
            if !self.waiting.iter().any(|w| w == uid) {
                tracing::debug!(%namespace, %name, "kubelet: no free node, pod stays Pending");
                self.waiting.push_back(uid.to_owned());
                self.shared
                    .unschedulable
                    .store(self.waiting.len() as u64, Ordering::Relaxed);
                self.mark_unschedulable(uid);
            }
            return;
        };
        if let Some(n) = self.nodes.get_mut(&node) {
            n.reserved += 1;
        }
        if let Some(p) = self.pods.get_mut(uid) {
            p.reserved = Some(node.clone());
        }
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let uid = uid.to_owned();
        self.requests.spawn(async move {
            let result = api
                .create_subresource::<_, Value>("binding", &name, &PostParams::default(), &binding)
                .await
                .map(|_| ());
            if let Err(e) = &result {
                tracing::debug!(%namespace, %name, error = %e, "kubelet: binding failed");
            }
            Some(Bound { uid, node, result })
        });
    }

    /// A binding was answered. The pod's slot stays reserved until the
    /// watch shows it bound; a failed binding frees it and, unless the pod
    /// is gone or bound elsewhere, retries.
    fn on_bound(&mut self, bound: Bound) {
        let Bound { uid, node, result } = bound;
        let e = match result {
            Ok(()) => {
                self.shared.bound.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%uid, %node, "kubelet: bound pod");
                return;
            }
            Err(e) => e,
        };
        // The watch may have shown the pod bound (or gone) meanwhile, which
        // already gave the reservation back.
        let Some(p) = self.pods.get_mut(&uid) else {
            return;
        };
        if p.reserved.as_deref() != Some(node.as_str()) {
            return;
        }
        p.reserved = None;
        if let Some(n) = self.nodes.get_mut(&node) {
            n.reserved = n.reserved.saturating_sub(1);
        }
        // 404: the pod is gone; 409: bound by someone else. The watch
        // tells the rest.
        if !matches!(&e, kube::Error::Api(s) if s.code == 404 || s.code == 409) {
            self.after(self.config.schedule_delay, Timer::Schedule(uid));
        }
    }

    /// Report, as the scheduler does, that no node can take the pod now.
    fn mark_unschedulable(&mut self, uid: &str) {
        let nodes = self.nodes.len();
        let message = format!("0/{nodes} nodes are available: {nodes} Too many pods.");
        let patch = json!({"status": {"phase": "Pending", "conditions": [{
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastProbeTime": null,
            "lastTransitionTime": crate::clock::format(self.clock.now()),
        }]}});
        self.patch_status(uid, |_| patch, None);
    }

    /// A pod arrived on a simulated node: admit or reject it.
    fn admit(&mut self, uid: &str) {
        let Some(p) = self.pods.get(uid) else { return };
        let Some(node) = p.node.clone().and_then(|n| self.nodes.get(&n)) else {
            return;
        };
        let (used, capacity) = (node.active.len(), node.capacity);
        let cue = self.shared.reject_reason.lock().clone();
        let rejection = match cue {
            Some(reason) if reason == "OutOfpods" => Some((reason, capacity, capacity)),
            Some(reason) => Some((reason, used, capacity)),
            None if used >= capacity => Some(("OutOfpods".to_owned(), used, capacity)),
            None => None,
        };
        if let Some((reason, used, capacity)) = rejection {
            let message = if reason == "OutOfpods" {
                format!(
                    "Pod Node didn't have enough resource: pods, requested: 1, used: {used}, capacity: {capacity}"
                )
            } else {
                format!("Pod was rejected by the simulated kubelet: {reason}")
            };
            self.reject(uid, &reason, &message);
            return;
        }
        let node_name = node.name.clone();
        let node_index = node.index;
        if let Some(n) = self.nodes.get_mut(&node_name) {
            n.active.insert(uid.to_owned());
        }
        self.next_ip += 1;
        let ip_suffix = self.next_ip;
        let Some(p) = self.pods.get_mut(uid) else {
            return;
        };
        p.stage = Stage::Admitted;
        p.host_ip = Some(format!("10.0.0.{node_index}"));
        p.pod_ip = Some(format!(
            "10.244.{}.{}",
            node_index,
            ip_suffix % 250 + 2 // avoid .0/.1 and the broadcast-looking .255
        ));
        let t = crate::clock::format(self.clock.now());
        p.start_time = Some(t.clone());
        p.scheduled_at = Some(t);
        self.shared.admitted.fetch_add(1, Ordering::Relaxed);
        self.write_status(uid, None);
        self.after(self.config.start_delay, Timer::Start(uid.to_owned()));
    }

    fn reject(&mut self, uid: &str, reason: &str, message: &str) {
        let Some(p) = self.pods.get_mut(uid) else {
            return;
        };
        p.stage = Stage::Done;
        let (namespace, name, node) = (p.namespace.clone(), p.name.clone(), p.node.clone());
        self.shared.rejected.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%namespace, %name, %reason, "kubelet: rejected pod");
        let patch = json!({"status": {"phase": "Failed", "reason": reason, "message": message}});
        self.patch_status(uid, |_| patch, None);
        // The real kubelet also records a Warning event on the pod.
        let t = crate::clock::format(self.clock.now());
        let event = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": format!("{name}."), "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid},
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": t,
            "lastTimestamp": t,
            "count": 1,
        });
        if let Ok(event) = serde_json::from_value::<CoreEvent>(event) {
            let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
            self.requests.spawn(async move {
                if let Err(e) = events.create(&PostParams::default(), &event).await {
                    tracing::debug!(%namespace, %name, error = %e, "kubelet: event not recorded");
                }
                None
            });
        }
    }

    fn start(&mut self, uid: &str) {
        let Some(p) = self.pods.get_mut(uid) else {
            return;
        };
        if p.stage != Stage::Admitted || p.deleting {
            return;
        }
        p.stage = Stage::Running;
        p.started_at = Some(crate::clock::format(self.clock.now()));
        let epoch = p.epoch;
        self.shared.started.fetch_add(1, Ordering::Relaxed);
        self.write_status(uid, None);
        self.after(self.config.ready_delay, Timer::Ready(uid.to_owned(), epoch));
    }

    fn become_ready(&mut self, uid: &str, epoch: u64) {
        let Some(p) = self.pods.get_mut(uid) else {
            return;
        };
        if p.stage != Stage::Running
            || p.deleting
            || p.epoch != epoch
            || p.forced_not_ready
            || p.ready
        {
            return;
        }
        p.ready = true;
        p.ready_changed_at = Some(crate::clock::format(self.clock.now()));
        self.write_status(uid, None);
    }

    async fn finish_delete(&mut self, uid: &str) {
        let Some(p) = self.pods.get(uid) else {
            return;
        };
        let (namespace, name) = (p.namespace.clone(), p.name.clone());
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => {
                self.shared
                    .deletions_finished
                    .fetch_add(1, Ordering::Relaxed);
            }
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => {
                tracing::debug!(%namespace, %name, error = %e, "kubelet: finishing deletion failed, retrying");
                self.after(
                    self.config.deletion_delay.max(Duration::from_millis(100)),
                    Timer::FinishDelete(uid.to_owned()),
                );
            }
        }
    }

    /// Applies a command to the simulated pod, then answers it once the
    /// status saying so is written (or at once, with the error).
    fn on_command(&mut self, cmd: Command) {
        let (changed, reply) = match cmd {
            Command::Crash {
                namespace,
                name,
                reply,
            } => (self.crash(&namespace, &name), reply),
            Command::SetReady {
                namespace,
                name,
                ready,
                reply,
            } => (self.set_ready(&namespace, &name, ready), reply),
        };
        match changed {
            Ok(uid) => self.write_status(&uid, Some(reply)),
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    fn running_pod(&mut self, namespace: &str, name: &str) -> Result<String, KubeletError> {
        let uid = self
            .by_key
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
            .filter(|uid| {
                self.pods
                    .get(uid)
                    .is_some_and(|p| !matches!(p.stage, Stage::Foreign | Stage::Unbound))
            })
            .ok_or_else(|| KubeletError::PodNotFound {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })?;
        match self.pods.get(&uid) {
            Some(p) if p.stage == Stage::Running && !p.deleting => Ok(uid),
            _ => Err(KubeletError::NotRunning {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }),
        }
    }

    /// Crashes a running pod's containers; returns its UID for the status
    /// write.
    fn crash(&mut self, namespace: &str, name: &str) -> Result<String, KubeletError> {
        let uid = self.running_pod(namespace, name)?;
        let Some(p) = self.pods.get_mut(&uid) else {
            return Err(KubeletError::Stopped);
        };
        let t = crate::clock::format(self.clock.now());
        p.last_termination = Some(json!({"terminated": {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": p.started_at,
            "finishedAt": t,
        }}));
        p.restart_count += 1;
        p.epoch += 1;
        p.started_at = Some(t.clone());
        if p.ready {
            p.ready = false;
            p.ready_changed_at = Some(t);
        }
        let epoch = p.epoch;
        self.shared.crashes.fetch_add(1, Ordering::Relaxed);
        // Fires on a later turn of the loop, so its status is written after
        // the crash's, which the caller queues now.
        self.after(self.config.ready_delay, Timer::Ready(uid.clone(), epoch));
        Ok(uid)
    }

    /// Forces a running pod (not) ready; returns its UID for the status
    /// write.
    fn set_ready(
        &mut self,
        namespace: &str,
        name: &str,
        ready: bool,
    ) -> Result<String, KubeletError> {
        let uid = self.running_pod(namespace, name)?;
        let Some(p) = self.pods.get_mut(&uid) else {
            return Err(KubeletError::Stopped);
        };
        p.forced_not_ready = !ready;
        if p.ready != ready {
            p.ready = ready;
            p.ready_changed_at = Some(crate::clock::format(self.clock.now()));
        }
        Ok(uid)
    }

    /// Writes the pod's simulated status as it is now (see
    /// [`patch_status`](Self::patch_status)).
    fn write_status(&mut self, uid: &str, reply: Option<Reply>) {
        self.patch_status(uid, |p| json!({ "status": status_of(p) }), reply);
    }

    /// Sends a merge patch of the pod's status (`patch` makes it from the
    /// simulated pod) without waiting for the answer, but only once every
    /// earlier patch of the same pod has been answered, so a later state
    /// never lands before an earlier one. The outcome goes to `reply`, or
    /// to the debug log; a pod the simulation no longer has is not
    /// patched, and `reply` is told all is well.
    fn patch_status(
        &mut self,
        uid: &str,
        patch: impl FnOnce(&PodSim) -> Value,
        reply: Option<Reply>,
    ) {
        let Some(p) = self.pods.get_mut(uid) else {
            if let Some(reply) = reply {
                let _ = reply.send(Ok(()));
            }
            return;
        };
        let patch = patch(p);
        let earlier = p.last_patch.take();
        let (answered, next) = oneshot::channel();
        p.last_patch = Some(next);
        let (namespace, name) = (p.namespace.clone(), p.name.clone());
        let client = self.client.clone();
        self.requests.spawn(async move {
            if let Some(earlier) = earlier {
                // An error only means that patch's task is gone.
                let _ = earlier.await;
            }
            let result = send_status_patch(&client, &namespace, &name, &patch)
                .await
                .map_err(|source| KubeletError::Api {
                    namespace,
                    name,
                    source,
                });
            let _ = answered.send(());
            match (reply, result) {
                (Some(reply), result) => {
                    let _ = reply.send(result);
                }
                (None, Err(e)) => tracing::debug!(error = %e, "kubelet: status update failed"),
                (None, Ok(())) => {}
            }
            None
        });
    }
}

/// Sends a merge patch of a pod's status and reads the answer without
/// decoding it: the simulation acts only on the outcome, and decoding
/// every patched pod sent back was about a fifth of its own CPU.
async fn send_status_patch(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    patch: &Value,
) -> Result<(), kube::Error> {
    let request = kube::core::Request::new(Pod::url_path(&(), Some(namespace)))
        .patch_subresource(
            "status",
            name,
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .map_err(kube::Error::BuildRequest)?;
    client.request_text(request).await.map(drop)
}

fn condition(
    kind: &str,
    status: bool,
    at: &Option<String>,
    reason: Option<&str>,
    message: Option<String>,
) -> Value {
    let mut c = json!({
        "type": kind,
        "status": if status { "True" } else { "False" },
        "lastProbeTime": null,
        "lastTransitionTime": at,
    });
    if let Some(r) = reason {
        c["reason"] = r.into();
    }
    if let Some(m) = message {
        c["message"] = m.into();
    }
    c
}

/// The pod status the simulated kubelet reports for a pod.
fn status_of(p: &PodSim) -> Value {
    let running = p.stage == Stage::Running;
    let names: Vec<&str> = p.containers.iter().map(|(n, _)| n.as_str()).collect();
    let not_ready_msg = format!("containers with unready status: [{}]", names.join(" "));
    let (ready_reason, ready_msg) = if p.ready {
        (None, None)
    } else {
        (Some("ContainersNotReady"), Some(not_ready_msg))
    };
    let ready_at = p
        .ready_changed_at
        .as_ref()
        .or(p.scheduled_at.as_ref())
        .cloned();
    let conditions = vec![
        condition("PodScheduled", true, &p.scheduled_at, None, None),
        condition("Initialized", true, &p.scheduled_at, None, None),
        condition(
            "ContainersReady",
            p.ready,
            &ready_at,
            ready_reason,
            ready_msg.clone(),
        ),
        condition("Ready", p.ready, &ready_at, ready_reason, ready_msg),
    ];
    let containers: Vec<Value> = p
        .containers
        .iter()
        .enumerate()
        .map(|(i, (name, image))| {
            let state = if running {
                json!({"running": {"startedAt": p.started_at}})
            } else {
                json!({"waiting": {"reason": "ContainerCreating"}})
            };
            let mut c = json!({
                "name": name,
                "image": image,
                "imageID": format!("sim://{image}"),
                "ready": p.ready,
                "started": running,
                "restartCount": p.restart_count,
                "state": state,
                "lastState": p.last_termination.clone().unwrap_or_else(|| json!({})),
            });
            if running {
                c["containerID"] = format!("sim://{}-{}-{}", p.name, i, p.restart_count).into();
            }
            c
        })
        .collect();
    let mut status = json!({
        "phase": if running { "Running" } else { "Pending" },
        "conditions": conditions,
        "containerStatuses": containers,
        "hostIP": p.host_ip,
        "startTime": p.start_time,
        "qosClass": "BestEffort",
    });
    if let Some(h) = &p.host_ip {
        status["hostIPs"] = json!([{ "ip": h }]);
    }
    if running && let Some(ip) = &p.pod_ip {
        status["podIP"] = ip.clone().into();
        status["podIPs"] = json!([{ "ip": ip }]);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_pod_keeps_what_the_simulation_reads_and_skips_the_rest() {
        let pod: WatchedPod = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "web-1",
                "namespace": "shop",
                "uid": "u-1",
                "resourceVersion": "42",
                "deletionTimestamp": "2026-11-27T08:00:00Z",
                "labels": {"app": "web"},
                "managedFields": [{"manager": "kubelet", "operation": "Update",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}],
            },
            "spec": {
                "nodeName": "node-1",
                "containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}],
            },
            "status": {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }))
        .unwrap();
        let m = &pod.metadata;
        assert_eq!(
            (m.name.as_deref(), m.namespace.as_deref(), m.uid.as_deref()),
            (Some("web-1"), Some("shop"), Some("u-1"))
        );
        // The watcher resumes from it.
        assert_eq!(
            kube::ResourceExt::resource_version(&pod).as_deref(),
            Some("42")
        );
        assert!(m.deletion_timestamp.is_some());
        assert!(m.managed_fields.is_none() && m.labels.is_none());
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        let containers = spec.containers.unwrap();
        assert_eq!(
            (containers[0].name.as_str(), containers[0].image.as_deref()),
            ("app", Some("nginx:1.27"))
        );
        assert_eq!(pod.status.unwrap().phase.as_deref(), Some("Running"));

        // A pod with nothing set (or null) beyond its metadata decodes too.
        let bare: WatchedPod = serde_json::from_value(
            json!({"metadata": {"name": "x"}, "spec": null, "status": null}),
        )
        .unwrap();
        assert!(bare.spec.is_none() && bare.status.is_none());
        assert_eq!(
            WatchedPod::url_path(&(), Some("shop")),
            Pod::url_path(&(), Some("shop"))
        );
    }
}
