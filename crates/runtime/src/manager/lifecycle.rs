//! The [`Manager`] and the lifecycle it runs: endpoints, warm caches,
//! leader election, runnables, drain.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::{Informer, InformerCollector, SharedInformerFactory};
use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::watcher;
use kube::{Api, Resource};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::task::{Id, JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::args::ManagerArgs;
use super::config::{ConfigError, ManagerConfig};
use super::endpoints::{self, SecureMetrics};
use super::error::{ManagerError, error_chain};
use super::fence::{FenceDriver, LeaderFence};
use super::fenced::fenced_client;
use super::leader::LeaderElector;
use super::metrics_auth::{KubeMetricsAuth, MetricsAuth, MetricsAuthFilter};
use super::metrics_tls;
use super::runnable::{BoxError, Runnable};
use super::signals::shutdown_on_signals;
use super::status::ManagerStatus;

/// How often warm-up asks runnables whether their own caches synced.
const SYNC_POLL: Duration = Duration::from_millis(100);
/// How long aborted runnables get to be dropped before the manager
/// returns without them.
const ABORT_WAIT: Duration = Duration::from_secs(1);

/// upstream's `leader_election_master_status{name}` gauge.
type LeaderGauge = Family<Vec<(String, String)>, Gauge>;

/// Runs several controllers (and other [`Runnable`]s) in one process, on
/// one [`SharedInformerFactory`] and one Prometheus [`Registry`], with
/// leader election, health and metrics endpoints and a graceful drain.
/// See the [module docs](super) for the lifecycle.
///
/// Build it ([`new`](Self::new), [`from_args`](Self::from_args) or
/// [`with_client`](Self::with_client)), declare controllers on it with
/// [`Controller::builder_for`](crate::Controller::builder_for), give them
/// [`child_control`](Self::child_control)s behind its fence,
/// [`add_controller`](Self::add_controller) them (or [`add`](Self::add)
/// any other [`Runnable`]), then [`run`](Self::run) it.
pub struct Manager {
    config: ManagerConfig,
    /// Behind the write fence: what controllers get.
    client: kube::Client,
    /// Unfenced: for the informers and the leader election.
    base_client: kube::Client,
    factory: Arc<SharedInformerFactory>,
    registry: Registry,
    runnables: Vec<Box<dyn Runnable>>,
    driver: Option<FenceDriver>,
    fence: LeaderFence,
    status: ManagerStatus,
    leader_gauge: Option<LeaderGauge>,
    metrics_auth: Option<Arc<dyn MetricsAuth>>,
    /// Registered on first use ([`Manager::controller_metrics`]).
    pub(super) controller_metrics: Option<crate::ControllerMetrics>,
    /// One per reporter, created on first use ([`Manager::event_recorder`]);
    /// behind a lock so that `child_control(&self)` can create one.
    pub(super) recorders: std::sync::Mutex<HashMap<String, ctrlkit_events::Recorder>>,
    /// The shard member with `--shard-ring` ([`Manager::shard_member`]).
    pub(super) shard: Option<crate::shard::ShardMember>,
}

impl fmt::Debug for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.runnables.iter().map(|r| r.name()).collect();
        f.debug_struct("Manager")
            .field("config", &self.config)
            .field("runnables", &names)
            .finish_non_exhaustive()
    }
}

impl Manager {
    /// Validates `config` and connects to the cluster it names.
    pub async fn new(config: ManagerConfig) -> Result<Self, ManagerError> {
        config.validate()?;
        let client = config.kube.client().await?;
        Self::with_client(client, config)
    }

    /// [`new`](Self::new) with the configuration from the command line;
    /// `name` names the process (and the lease unless `--lease-name`).
    pub async fn from_args(name: &str, args: &ManagerArgs) -> Result<Self, ManagerError> {
        Self::new(args.config(name)).await
    }

    /// A manager on an existing client (`config.kube` is ignored), e.g. a
    /// test cluster's.
    pub fn with_client(client: kube::Client, config: ManagerConfig) -> Result<Self, ManagerError> {
        config.validate()?;
        let factory = Arc::new(SharedInformerFactory::new(client.clone()));
        let mut registry = Registry::default();
        InformerCollector::register(factory.clone(), &mut registry);
        let (driver, fence, leader_gauge) = match &config.leader_election {
            Some(election) => {
                let driver = FenceDriver::new(election.renew_deadline);
                let fence = driver.fence();
                let gauge = LeaderGauge::default();
                registry.register(
                    "leader_election_master_status",
                    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
                    gauge.clone(),
                );
                gauge
                    .get_or_create(&name_label(&election.lease_name))
                    .set(0);
                (Some(driver), fence, Some(gauge))
            }
            None => (None, LeaderFence::unfenced(), None),
        };
        let status = ManagerStatus::new(
            factory.clone(),
            config.leader_election.is_some(),
            config.ready_when_standby,
            config.watch_health_bound,
        );
        let mut runnables = Vec::new();
        let shard = match &config.sharding {
            Some(sharding) => {
                let (member, runnable) =
                    super::sharding::start(sharding, &client, &factory, &mut registry)?;
                runnables.push(runnable);
                Some(member)
            }
            None => None,
        };
        Ok(Self {
            config,
            client: fenced_client(client.clone(), fence.clone()),
            base_client: client,
            factory,
            registry,
            runnables,
            driver,
            fence,
            status,
            leader_gauge,
            metrics_auth: None,
            controller_metrics: None,
            recorders: std::sync::Mutex::default(),
            shard,
        })
    }

    /// The client for the configured cluster, behind the write fence:
    /// with leader election, every write request through it (`POST`,
    /// `PUT`, `PATCH`, `DELETE`: creates, deletes, patches, status writes,
    /// events) is refused without being sent while the
    /// [fence](Self::fence) is closed — on a stand-by, once the renew
    /// deadline passed without a successful renewal (a paused process
    /// included), and after leadership ended — and fails with
    /// `kube::Error::Service` whose source is the [`FenceClosed`](super::FenceClosed)
    /// reason. Reads always go through. Build every controller's writers
    /// on this client (and give child controls the fence as their
    /// [write gate](ctrlkit_childcontrol::WriteGate)) and no write of a
    /// deposed leader leaves the process. A runnable that runs
    /// [without leader election](super::FnRunnable::without_leader_election)
    /// therefore cannot write through it on a stand-by. Without leader
    /// election it is the plain client.
    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The informer factory every controller on this manager shares; the
    /// manager starts it and waits for its caches.
    pub fn factory(&self) -> &Arc<SharedInformerFactory> {
        &self.factory
    }

    /// The registry served on `/metrics`.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The registry served on `/metrics`, to register metrics into before
    /// [`run`](Self::run).
    pub fn registry_mut(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// The namespace to watch (`--namespace`); `None` for all namespaces.
    /// Controllers built on the manager watch only this namespace when it
    /// is set ([`api`](Self::api) and [`informer`](Self::informer) do so).
    pub fn namespace(&self) -> Option<&str> {
        self.config.namespace.as_deref()
    }

    /// The configuration the manager runs with.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// The write fence: open while this process may write (always without
    /// leader election). Hand a clone to every write gate.
    pub fn fence(&self) -> LeaderFence {
        self.fence.clone()
    }

    /// A view of readiness, leadership and endpoint addresses that keeps
    /// working while [`run`](Self::run) runs.
    pub fn status(&self) -> ManagerStatus {
        self.status.clone()
    }

    /// An `Api` for the namespaced `K` in the watched namespace, or in all
    /// namespaces, on the fenced [`client`](Self::client).
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match self.namespace() {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        }
    }

    /// The shared informer for the namespaced `K` in the watched namespace
    /// (or all namespaces). For cluster-scoped kinds use
    /// [`factory`](Self::factory)`().all()`.
    pub fn informer<K>(&self, config: watcher::Config) -> Informer<K>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + fmt::Debug
            + Send
            + Sync
            + 'static,
        K::DynamicType: Default,
    {
        match self.namespace() {
            Some(namespace) => self.factory.namespaced(namespace, config),
            None => self.factory.all(config),
        }
    }

    /// Who authenticates and authorizes scrapers of the secure `/metrics`
    /// endpoint (with [`ManagerConfig::secure_metrics`]); by default a
    /// [`KubeMetricsAuth`] on the manager's client.
    pub fn set_metrics_auth(&mut self, auth: Arc<dyn MetricsAuth>) -> &mut Self {
        self.metrics_auth = Some(auth);
        self
    }

    /// Adds a runnable; it starts when [`run`](Self::run) gets to it.
    pub fn add(&mut self, runnable: impl Runnable) -> &mut Self {
        self.add_boxed(Box::new(runnable))
    }

    /// Adds a boxed runnable.
    pub fn add_boxed(&mut self, runnable: Box<dyn Runnable>) -> &mut Self {
        self.runnables.push(runnable);
        self
    }

    /// [`run`](Self::run) until SIGTERM or SIGINT.
    pub async fn run_until_signal(self) -> Result<(), ManagerError> {
        let shutdown = shutdown_on_signals()?;
        self.run(shutdown).await
    }

    /// Runs the lifecycle (see the [module docs](super)) until `shutdown`
    /// is cancelled, then drains and returns `Ok(())`; or returns the
    /// error that stopped it (a failed start, a lost lease, a failed
    /// runnable, a drain that outlasted the grace period).
    ///
    /// Not cancel-safe by design: dropping the future is a crash, not a
    /// shutdown. Runnables are aborted without draining and the lease is
    /// not released (a stand-by takes over when it expires), as after a
    /// SIGKILL.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ManagerError> {
        let Self {
            config,
            client: _,
            base_client: client,
            factory,
            registry,
            runnables,
            driver,
            fence: _,
            status,
            leader_gauge,
            metrics_auth,
            controller_metrics: _,
            recorders,
            shard: _,
        } = self;
        let recorders: Vec<_> = recorders
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .into_values()
            .collect();
        let mut names = HashSet::new();
        if let Some(duplicate) = runnables
            .iter()
            .find(|r| !names.insert(r.name().to_owned()))
        {
            status.endpoints_never();
            return Err(ConfigError::DuplicateRunnable(duplicate.name().to_owned()).into());
        }

        // The endpoints outlive the drain: /healthz keeps answering while
        // in-flight work finishes. Dropping `run` stops them too.
        let endpoints_stop = CancellationToken::new();
        let _endpoints_guard = endpoints_stop.clone().drop_guard();
        let secure = match secure_metrics(&config, &client, metrics_auth) {
            Ok(secure) => secure,
            Err(error) => {
                status.endpoints_never();
                return Err(error);
            }
        };
        let servers = match endpoints::start(
            config.metrics_addr,
            config.health_addr,
            Arc::new(registry),
            secure,
            &status,
            &endpoints_stop,
        )
        .await
        {
            Ok(servers) => servers,
            Err(error) => {
                status.endpoints_never();
                return Err(error);
            }
        };

        let lifecycle = Lifecycle {
            config: &config,
            client,
            factory: &factory,
            status: &status,
            driver,
            leader_gauge,
            tasks: JoinSet::new(),
            names: HashMap::new(),
            runnables_stop: CancellationToken::new(),
            recorders,
        };
        let result = lifecycle.run(runnables, shutdown).await;

        status.set_shutting_down();
        factory.shutdown().await;
        endpoints_stop.cancel();
        for server in servers {
            server.stopped().await;
        }
        match &result {
            Ok(()) => tracing::info!(manager = %config.name, "stopped"),
            Err(error) => {
                tracing::error!(manager = %config.name, error = %error_chain(error), "stopped with an error")
            }
        }
        result
    }
}

/// The TLS configuration and the filter of the secure `/metrics`
/// endpoint, when it is configured and served.
fn secure_metrics(
    config: &ManagerConfig,
    client: &kube::Client,
    auth: Option<Arc<dyn MetricsAuth>>,
) -> Result<Option<SecureMetrics>, ManagerError> {
    let (Some(secure), Some(_)) = (&config.secure_metrics, config.metrics_addr) else {
        return Ok(None);
    };
    let tls =
        metrics_tls::server_config(secure.tls_files.as_ref()).map_err(ManagerError::MetricsTls)?;
    let auth = auth.unwrap_or_else(|| Arc::new(KubeMetricsAuth::new(client.clone())));
    Ok(Some(SecureMetrics {
        tls,
        filter: Arc::new(MetricsAuthFilter::new(auth)),
    }))
}

fn name_label(lease: &str) -> Vec<(String, String)> {
    vec![("name".to_owned(), lease.to_owned())]
}

/// The state of one [`Manager::run`] between starting the endpoints and
/// stopping the informers.
struct Lifecycle<'a> {
    config: &'a ManagerConfig,
    client: kube::Client,
    factory: &'a SharedInformerFactory,
    status: &'a ManagerStatus,
    driver: Option<FenceDriver>,
    leader_gauge: Option<LeaderGauge>,
    tasks: JoinSet<Result<(), BoxError>>,
    names: HashMap<Id, String>,
    runnables_stop: CancellationToken,
    /// Flushed after the drain, while the lease (and so the fence) is
    /// still held.
    recorders: Vec<ctrlkit_events::Recorder>,
}

/// How long the manager waits, after its runnables drained, for the event
/// recorders to write what they still hold.
pub const EVENT_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How the running phase ended.
enum Stop {
    /// Shutdown was requested: drain.
    Requested,
    /// A runnable failed: drain the others, then report it.
    Failed(ManagerError),
}

impl Lifecycle<'_> {
    async fn run(
        mut self,
        runnables: Vec<Box<dyn Runnable>>,
        shutdown: CancellationToken,
    ) -> Result<(), ManagerError> {
        let Some(runnables) = self.warm_up(runnables, &shutdown).await? else {
            return Ok(());
        };
        // The Lease exists (or the start fails) before anything runs.
        let elector = match (self.config.leader_election.clone(), self.driver.clone()) {
            (Some(election), Some(driver)) => {
                Some(LeaderElector::new(self.client.clone(), election, driver).await?)
            }
            _ => None,
        };
        let (elected, others): (Vec<_>, Vec<_>) = runnables
            .into_iter()
            .partition(|r| elector.is_some() && r.needs_leader_election());
        for runnable in others {
            self.spawn(runnable);
        }
        // One renewal loop for the whole leadership, running phase and
        // drain alike; polled only once the lease is won.
        let mut hold: BoxFuture<'_, ManagerError> = match &elector {
            Some(elector) => Box::pin(elector.hold()),
            None => Box::pin(std::future::pending()),
        };
        let stop = match &elector {
            Some(elector) => {
                self.campaign_and_run(elector, elected, &mut hold, &shutdown)
                    .await
            }
            None => {
                self.status.set_leading(true);
                self.watch(&mut hold, &shutdown).await
            }
        };
        let stop = match stop {
            Ok(stop) => stop,
            Err(lost) => {
                // Another replica may already be acting: no drain.
                self.lost().await;
                return Err(lost);
            }
        };
        self.drain(elector.as_ref(), hold, stop).await
    }

    /// Starts the informers and waits for every cache (the factory's and
    /// the runnables' own). `Ok(None)` if shutdown came first.
    ///
    /// Takes the runnables by value: a `&dyn Runnable` held across an
    /// await would require runnables to be `Sync`.
    async fn warm_up(
        &self,
        runnables: Vec<Box<dyn Runnable>>,
        shutdown: &CancellationToken,
    ) -> Result<Option<Vec<Box<dyn Runnable>>>, ManagerError> {
        self.factory.start();
        tracing::info!(manager = %self.config.name, "waiting for informer caches to sync");
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(None),
            synced = self.factory.wait_for_cache_sync() => synced.map_err(ManagerError::CacheSync)?,
        }
        loop {
            let waiting = runnables
                .iter()
                .find(|r| !r.has_synced())
                .map(|r| r.name().to_owned());
            let Some(waiting) = waiting else { break };
            tracing::debug!(runnable = %waiting, "waiting for the runnable's caches");
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(None),
                _ = tokio::time::sleep(SYNC_POLL) => {}
            }
        }
        tracing::info!(manager = %self.config.name, "informer caches synced");
        self.status.set_warm();
        Ok(Some(runnables))
    }

    /// Stand-by until the lease is won, then runs the leader-elected
    /// runnables until shutdown, a failure or the loss of the lease (`Err`).
    async fn campaign_and_run(
        &mut self,
        elector: &LeaderElector,
        elected: Vec<Box<dyn Runnable>>,
        hold: &mut BoxFuture<'_, ManagerError>,
        shutdown: &CancellationToken,
    ) -> Result<Stop, ManagerError> {
        let config = elector.config();
        tracing::info!(
            lease = %format!("{}/{}", config.lease_namespace, config.lease_name),
            identity = %config.identity,
            "waiting to become the leader"
        );
        let acquire = elector.acquire(shutdown);
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                won = &mut acquire => match won {
                    true => break,
                    false => return Ok(Stop::Requested),
                },
                Some(joined) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    if let Some(failed) = self.finished(joined) {
                        return Ok(Stop::Failed(failed));
                    }
                }
            }
        }
        tracing::info!(identity = %config.identity, "became the leader");
        self.status.set_leading(true);
        self.set_leader_gauge(1);
        for runnable in elected {
            self.spawn(runnable);
        }
        self.watch(hold, shutdown).await
    }

    /// Waits for shutdown, a failed runnable, or the end of leadership
    /// (`lost` completing, which is an `Err`).
    async fn watch(
        &mut self,
        lost: &mut (impl Future<Output = ManagerError> + Unpin),
        shutdown: &CancellationToken,
    ) -> Result<Stop, ManagerError> {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(Stop::Requested),
                error = &mut *lost => return Err(error),
                Some(joined) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    if let Some(failed) = self.finished(joined) {
                        return Ok(Stop::Failed(failed));
                    }
                }
            }
        }
    }

    /// Stops the runnables and waits for them within the grace period,
    /// still renewing the lease, then releases it.
    async fn drain(
        mut self,
        elector: Option<&LeaderElector>,
        mut hold: BoxFuture<'_, ManagerError>,
        stop: Stop,
    ) -> Result<(), ManagerError> {
        self.status.set_shutting_down();
        self.runnables_stop.cancel();
        let grace_period = self.config.shutdown_grace_period;
        let mut first_error = match stop {
            Stop::Requested => None,
            Stop::Failed(error) => Some(error),
        };
        let leading = self.status.is_leader();
        if !self.tasks.is_empty() {
            tracing::info!(
                runnables = self.tasks.len(),
                grace_period_secs = grace_period.as_secs(),
                "draining in-flight work"
            );
        }
        let deadline = Instant::now() + grace_period;
        loop {
            tokio::select! {
                // Leadership must outlive the drain: in-flight work may write.
                lost = &mut hold, if leading && elector.is_some() => {
                    self.lost().await;
                    return Err(lost);
                }
                _ = tokio::time::sleep_until(deadline) => {
                    let mut pending: Vec<_> = self.names.values().cloned().collect();
                    pending.sort();
                    tracing::error!(?pending, grace_period_secs = grace_period.as_secs(), "runnables did not stop within the grace period; aborting them");
                    self.abort().await;
                    first_error = Some(ManagerError::ShutdownTimeout { grace_period, pending });
                    break;
                }
                joined = self.tasks.join_next_with_id() => match joined {
                    None => break,
                    Some(joined) => {
                        if let Some(failed) = self.finished(joined) {
                            first_error.get_or_insert(failed);
                        }
                    }
                },
            }
        }
        // Events queued by the last reconciles are written while the fence
        // is still open: after the release every write would be refused.
        self.flush_events().await;
        // The renewal loop may hold kube-lease-manager's state lock while
        // suspended mid-request: drop it before releasing, or release waits
        // for ever.
        drop(hold);
        self.status.set_leading(false);
        if let Some(elector) = elector.filter(|_| leading) {
            self.set_leader_gauge(0);
            match elector.release().await {
                Ok(()) => tracing::info!("released the lease"),
                Err(error) => {
                    tracing::warn!(error = %error_chain(&error), "could not release the lease; it will expire")
                }
            }
        } else if let Some(driver) = &self.driver {
            driver.stop();
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn spawn(&mut self, runnable: Box<dyn Runnable>) {
        let name = runnable.name().to_owned();
        tracing::info!(runnable = %name, "starting");
        let handle = self
            .tasks
            .spawn(runnable.run(self.runnables_stop.child_token()));
        self.names.insert(handle.id(), name);
    }

    /// Books a finished runnable; returns the error it stopped the manager
    /// with, if any.
    fn finished(
        &mut self,
        joined: Result<(Id, Result<(), BoxError>), JoinError>,
    ) -> Option<ManagerError> {
        match joined {
            Ok((id, Ok(()))) => {
                let name = self.names.remove(&id).unwrap_or_default();
                tracing::info!(runnable = %name, "finished");
                None
            }
            Ok((id, Err(source))) => {
                let name = self.names.remove(&id).unwrap_or_default();
                tracing::error!(runnable = %name, error = %error_chain(&*source), "failed");
                Some(ManagerError::Runnable { name, source })
            }
            Err(source) => {
                let name = self.names.remove(&source.id()).unwrap_or_default();
                tracing::error!(runnable = %name, error = %source, "panicked");
                Some(ManagerError::RunnablePanicked { name, source })
            }
        }
    }

    /// Stops every runnable now, without a drain: closes the fence, aborts
    /// the tasks and waits (briefly) until they are gone, so nothing of
    /// theirs runs once the manager returns. An aborted task stops at its
    /// next await; one stuck in blocking code cannot be stopped and is
    /// left behind after [`ABORT_WAIT`].
    async fn abort(&mut self) {
        if let Some(driver) = &self.driver {
            driver.stop();
        }
        self.runnables_stop.cancel();
        self.tasks.abort_all();
        let gone = async {
            while let Some(joined) = self.tasks.join_next_with_id().await {
                let id = match &joined {
                    Ok((id, _)) => *id,
                    Err(error) => error.id(),
                };
                self.names.remove(&id);
            }
        };
        if tokio::time::timeout(ABORT_WAIT, gone).await.is_err() {
            let mut stuck: Vec<_> = self.names.values().cloned().collect();
            stuck.sort();
            tracing::error!(
                ?stuck,
                "runnables did not stop when aborted (blocking code?)"
            );
        }
    }

    /// Leadership ended under our feet: stop everything at once.
    /// Writes what the event recorders still hold, one try per event,
    /// within [`EVENT_FLUSH_TIMEOUT`].
    async fn flush_events(&self) {
        if self.recorders.is_empty() {
            return;
        }
        let flush = futures::future::join_all(self.recorders.iter().map(|r| r.shutdown()));
        if tokio::time::timeout(EVENT_FLUSH_TIMEOUT, flush)
            .await
            .is_err()
        {
            tracing::warn!(
                timeout_secs = EVENT_FLUSH_TIMEOUT.as_secs(),
                "events still queued at shutdown were not all written in time"
            );
        }
    }

    async fn lost(&mut self) {
        self.abort().await;
        self.status.set_leading(false);
        self.set_leader_gauge(0);
    }

    fn set_leader_gauge(&self, value: i64) {
        if let (Some(gauge), Some(election)) = (&self.leader_gauge, &self.config.leader_election) {
            gauge
                .get_or_create(&name_label(&election.lease_name))
                .set(value);
        }
    }
}
