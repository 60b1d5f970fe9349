//! The controller process's lifecycle, in the order a cluster operator
//! expects:
//!
//! 1. connect to the cluster ([`KubeConfigSource`]);
//! 2. build the controller on a shared informer factory, registering its
//!    metrics into one registry;
//! 3. serve `/metrics`, `/healthz` and `/readyz`;
//! 4. start the informers and wait for their caches (a stand-by replica
//!    keeps warm caches, so it can act as soon as it wins the lease);
//! 5. with leader election, campaign for the lease;
//! 6. run the workers; on SIGTERM/SIGINT drain the in-flight syncs,
//!    release the lease, stop the informers and the endpoints, return
//!    `Ok`; if the lease is lost, stop at once and return
//!    [`OpsError::LeaseLost`] (the process should exit non-zero and be
//!    restarted as a stand-by, as controller-runtime does).

use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use ctrlkit_informer::SharedInformerFactory;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::ControllerOptions;
use crate::ops::OpsError;
use crate::ops::http::{HttpServer, Readiness, serve_http};
use crate::ops::kubeconfig::KubeConfigSource;
use crate::ops::leader::{LeaderElectionConfig, LeaderElector};

/// Everything [`run_controller`] needs besides the controller itself.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The controller's name, used in log lines.
    pub name: String,
    /// How to reach the cluster.
    pub kube: KubeConfigSource,
    /// Passed to the controller's constructor.
    pub options: ControllerOptions,
    /// Where to serve `/metrics`; `None` disables it.
    pub metrics_addr: Option<SocketAddr>,
    /// Where to serve `/healthz` and `/readyz`; `None` disables them. May
    /// equal `metrics_addr`: one server then serves all three paths.
    pub health_addr: Option<SocketAddr>,
    /// `Some` to run only while holding this lease.
    pub leader_election: Option<LeaderElectionConfig>,
}

/// What the build step of [`run_controller`] gets to construct the
/// controller with.
pub struct BuildContext<'a> {
    /// A client for the configured cluster.
    pub client: kube::Client,
    /// The factory to take informers from; [`run_controller`] starts it.
    pub factory: &'a SharedInformerFactory,
    /// The controller's options from the command line.
    pub options: ControllerOptions,
    /// The registry served on `/metrics`.
    pub registry: &'a mut Registry,
}

/// Runs a controller until `shutdown` is cancelled or the lease is lost.
///
/// `build` constructs the controller and returns the function that runs
/// it: given a token, the returned future must run the workers until the
/// token is cancelled, then drain and return. For example:
///
/// ```no_run
/// # use ctrlkit_replicaset::ops::run::{RunSettings, run_controller};
/// # use ctrlkit_replicaset::ReplicaSetController;
/// # async fn demo(settings: RunSettings, shutdown: tokio_util::sync::CancellationToken)
/// #     -> Result<(), ctrlkit_replicaset::ops::OpsError> {
/// run_controller(settings, shutdown, |ctx| {
///     let controller =
///         ReplicaSetController::new(ctx.client, ctx.factory, ctx.options, Some(ctx.registry))?;
///     Ok::<_, ctrlkit_replicaset::Error>(move |token| controller.run(token))
/// })
/// .await
/// # }
/// ```
///
/// Returns `Ok(())` after a graceful shutdown, an error for a failed start
/// (bad kubeconfig, port in use), a lost lease or a failed controller.
pub async fn run_controller<B, R, F, E1, E2>(
    settings: RunSettings,
    shutdown: CancellationToken,
    build: B,
) -> Result<(), OpsError>
where
    B: FnOnce(BuildContext<'_>) -> Result<R, E1>,
    R: FnOnce(CancellationToken) -> F,
    F: Future<Output = Result<(), E2>> + Send + 'static,
    E1: Display,
    E2: Display + Send + 'static,
{
    let name = settings.name.clone();
    let client = settings.kube.client().await?;
    let factory = Arc::new(SharedInformerFactory::new(client.clone()));
    let mut registry = Registry::default();
    let runner = build(BuildContext {
        client: client.clone(),
        factory: &factory,
        options: settings.options.clone(),
        registry: &mut registry,
    })
    .map_err(|e| OpsError::Build(e.to_string()))?;

    // The endpoints outlive the drain: /healthz must keep answering while
    // in-flight syncs finish.
    let endpoints_stop = CancellationToken::new();
    let readiness = {
        let factory = factory.clone();
        Readiness::new(move || factory.has_synced())
    };
    let servers = start_endpoints(&settings, registry, readiness, &endpoints_stop).await?;

    let result = lead_and_run(&settings, client, &factory, shutdown, runner).await;

    factory.shutdown().await;
    endpoints_stop.cancel();
    for server in servers {
        server.stopped().await;
    }
    match &result {
        Ok(()) => tracing::info!(controller = %name, "stopped"),
        Err(error) => tracing::error!(controller = %name, %error, "stopped with an error"),
    }
    result
}

/// Binds the metrics and health servers (one server when the addresses
/// are equal) and logs the bound addresses.
async fn start_endpoints(
    settings: &RunSettings,
    registry: Registry,
    readiness: Readiness,
    stop: &CancellationToken,
) -> Result<Vec<HttpServer>, OpsError> {
    let registry = Arc::new(registry);
    let mut servers = Vec::new();
    match (settings.metrics_addr, settings.health_addr) {
        (Some(m), Some(h)) if m == h => {
            let server = serve_http(m, Some(registry), Some(readiness), stop.clone()).await?;
            tracing::info!(addr = %server.local_addr(), "serving /metrics, /healthz and /readyz");
            servers.push(server);
        }
        (metrics, health) => {
            if let Some(addr) = metrics {
                let server = serve_http(addr, Some(registry), None, stop.clone()).await?;
                tracing::info!(addr = %server.local_addr(), "serving /metrics");
                servers.push(server);
            }
            if let Some(addr) = health {
                let server = serve_http(addr, None, Some(readiness), stop.clone()).await?;
                tracing::info!(addr = %server.local_addr(), "serving /healthz and /readyz");
                servers.push(server);
            }
        }
    }
    Ok(servers)
}

/// Steps 4–6 of the lifecycle: warm caches, win the lease, run, drain.
async fn lead_and_run<R, F, E2>(
    settings: &RunSettings,
    client: kube::Client,
    factory: &SharedInformerFactory,
    shutdown: CancellationToken,
    runner: R,
) -> Result<(), OpsError>
where
    R: FnOnce(CancellationToken) -> F,
    F: Future<Output = Result<(), E2>> + Send + 'static,
    E2: Display + Send + 'static,
{
    factory.start();
    tracing::info!(controller = %settings.name, "waiting for informer caches to sync");
    tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        synced = factory.wait_for_cache_sync() => synced.map_err(OpsError::CacheSync)?,
    }
    tracing::info!(controller = %settings.name, "informer caches synced");

    let elector = match settings.leader_election.clone() {
        Some(config) => {
            let elector = LeaderElector::new(client, config).await?;
            let config = elector.config();
            tracing::info!(
                lease = %format!("{}/{}", config.lease_namespace, config.lease_name),
                identity = %config.identity,
                "waiting to become the leader"
            );
            if !elector.acquire(&shutdown).await? {
                return Ok(());
            }
            tracing::info!(identity = %config.identity, "became the leader");
            Some(elector)
        }
        None => None,
    };

    tracing::info!(controller = %settings.name, workers = settings.options.workers, "starting workers");
    let workers_stop = CancellationToken::new();
    let mut workers = tokio::spawn(runner(workers_stop.clone()));
    let keep_lease = async {
        match &elector {
            Some(elector) => elector.hold(&shutdown).await,
            None => {
                shutdown.cancelled().await;
                Ok(())
            }
        }
    };
    let outcome = tokio::select! {
        held = keep_lease => held,
        finished = &mut workers => {
            // The controller stopped on its own: hand over, report why.
            release(elector.as_ref()).await;
            return controller_result(finished);
        }
    };
    workers_stop.cancel();
    if let Err(lost) = outcome {
        // Another replica may already be acting: stop now, do not drain.
        workers.abort();
        return Err(lost);
    }
    tracing::info!(controller = %settings.name, "draining in-flight syncs");
    let drained = controller_result(workers.await);
    release(elector.as_ref()).await;
    drained
}

/// Releases the lease (if leading), handing over to a stand-by.
async fn release(elector: Option<&LeaderElector>) {
    if let Some(elector) = elector {
        match elector.release().await {
            Ok(()) => tracing::info!("released the lease"),
            Err(error) => tracing::warn!(%error, "could not release the lease; it will expire"),
        }
    }
}

fn controller_result<E: Display>(
    joined: Result<Result<(), E>, tokio::task::JoinError>,
) -> Result<(), OpsError> {
    match joined {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(OpsError::Controller(error.to_string())),
        Err(join) => Err(OpsError::Controller(join.to_string())),
    }
}
