//! The wiring: the operator's flags, the controller's declaration on the
//! manager's informers, the context its reconcile gets, and the runnable
//! the manager runs. Everything else is the operator's own logic.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit::childcontrol::{WriteAttempt, WriteGate, WriteRefused};
use ctrlkit::prelude::*;
use ctrlkit::runtime::BuildError;
use ctrlkit::runtime::manager::{BoxError, FnRunnable, LeaderFence, Manager, ManagerArgs};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};

use crate::api::KubeWebAppApi;
use crate::reconcile::{Caches, Context, reconcile};
use crate::resource::WebApp;
use crate::routes::{self, RoutesRef};

/// The controller's name: its metrics label, lease, event reporter and
/// field manager.
pub const NAME: &str = "webapp-operator";

/// How long a reconcile waits at most for the caches to show the
/// operator's own writes (read-own-writes).
pub const READ_OWN_WRITES_WAIT: Duration = Duration::from_secs(10);

/// `webapp-operator`'s command line: the manager's flags and its own.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = NAME, version, about = "Runs WebApps (example.ctrlkit.dev/v1): a Deployment, a Service and a ConfigMap each, and a shared routes ConfigMap")]
pub struct Cli {
    /// The flags every ctrlkit controller binary shares.
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// How many WebApps are reconciled at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub workers: usize,
    /// Namespace of the shared routes ConfigMap; in a Deployment, the
    /// operator's own.
    #[arg(
        long,
        value_name = "NS",
        env = "POD_NAMESPACE",
        default_value = "default"
    )]
    pub routes_namespace: String,
    /// Name of the shared routes ConfigMap.
    #[arg(long, value_name = "NAME", default_value = routes::DEFAULT_NAME)]
    pub routes_name: String,
    /// Print the WebApp CustomResourceDefinition as YAML and exit.
    #[arg(long)]
    pub print_crd: bool,
}

impl Cli {
    /// Where the routes ConfigMap lives.
    pub fn routes(&self) -> RoutesRef {
        RoutesRef::new(&self.routes_namespace, &self.routes_name)
    }
}

/// The declaration: a WebApp controller owning ConfigMaps, Deployments and
/// Services, watching the routes ConfigMap, on `factory`'s informers.
/// Returns it with the routes informer.
///
/// # Errors
/// A [`BuildError`] for a misuse, e.g. `--workers 0`.
pub fn controller(
    factory: &SharedInformerFactory,
    cli: &Cli,
    metrics: Option<&ControllerMetrics>,
) -> Result<(Controller<WebApp>, Informer<ConfigMap>), BuildError> {
    let routes = cli.routes();
    let routes_informer = factory.namespaced(&routes.namespace, routes.watcher_config());
    let mut builder = Controller::<WebApp>::builder(factory)
        .name(NAME)
        .owns::<ConfigMap>()
        .owns::<Deployment>()
        .owns::<Service>()
        .watches_with(Watches::new(routes::owners_of).informer(routes_informer.clone()))
        .workers(cli.workers)
        .drop_managed_fields()
        .read_own_writes(READ_OWN_WRITES_WAIT);
    if let Some(namespace) = &cli.manager.namespace {
        builder = builder.namespace(namespace);
    }
    if let Some(metrics) = metrics {
        builder = builder.metrics(metrics);
    }
    Ok((builder.build()?, routes_informer))
}

/// A cache the controller should have and does not.
#[derive(Debug, thiserror::Error)]
#[error("the controller has no cache of {0}s")]
pub struct MissingCache(&'static str);

/// The caches the reconcile reads. `store_of::<ConfigMap>()` is the owned
/// ConfigMaps' cache: `owns` registered it before `watches` did the routes'.
///
/// # Errors
/// [`MissingCache`] if the controller was declared without one of them.
pub fn caches(
    controller: &Controller<WebApp>,
    routes: &Informer<ConfigMap>,
) -> Result<Caches, MissingCache> {
    Ok(Caches {
        configmaps: controller.store_of().ok_or(MissingCache("ConfigMap"))?,
        deployments: controller.store_of().ok_or(MissingCache("Deployment"))?,
        services: controller.store_of().ok_or(MissingCache("Service"))?,
        routes: routes.store(),
    })
}

/// Refuses every write while `fence` is closed (a stand-by, or a leader
/// whose lease may have expired).
pub fn fence_gate(fence: LeaderFence) -> Arc<dyn WriteGate> {
    Arc::new(move |_: &WriteAttempt<'_>| {
        fence
            .check()
            .map_err(|closed| WriteRefused::with_source("not leading", closed))
    })
}

/// Adds the WebApp controller to `manager`, writing through the API
/// server behind the manager's leader fence.
///
/// # Errors
/// A [`BuildError`] or [`MissingCache`], boxed for `run_main`.
pub fn add_to(manager: &mut Manager, cli: &Cli) -> Result<(), BoxError> {
    let metrics = ControllerMetrics::register(manager.registry_mut());
    let (controller, routes_informer) = controller(manager.factory(), cli, Some(&metrics))?;
    let (client, gate) = (manager.client().clone(), fence_gate(manager.fence()));
    let ctx = Arc::new(Context {
        configmaps: Arc::new(
            KubeChildControl::new(client.clone(), NAME).with_write_gate(gate.clone()),
        ),
        deployments: Arc::new(
            KubeChildControl::new(client.clone(), NAME).with_write_gate(gate.clone()),
        ),
        services: Arc::new(
            KubeChildControl::new(client.clone(), NAME).with_write_gate(gate.clone()),
        ),
        api: Arc::new(KubeWebAppApi::new(client, NAME, cli.routes(), gate)),
        caches: caches(&controller, &routes_informer)?,
        routes: cli.routes(),
        consistency: controller.consistency().clone(),
    });
    manager.add(FnRunnable::new(NAME, move |stop| async move {
        controller
            .run(reconcile, ctx, stop.cancelled_owned())
            .await
            .map(drop)
    }));
    Ok(())
}
