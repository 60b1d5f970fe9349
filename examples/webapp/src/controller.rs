//! The wiring: the operator's flags, the controller's declaration on the
//! manager's informers, the context its reconcile gets, and the runnable
//! the manager runs. Everything else is the operator's own logic.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit::childcontrol::{ChildResource, WriteAttempt, WriteGate, WriteRefused};
use ctrlkit::prelude::*;
use ctrlkit::runtime::BuildError;
use ctrlkit::runtime::manager::{
    BoxError, FenceClosed, FnRunnable, LeaderFence, Manager, ManagerArgs,
};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap, core::v1::Service};

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

/// Runs WebApps (example.ctrlkit.dev/v1): a Deployment, a Service and a
/// ConfigMap each, and an entry in a shared routes ConfigMap.
#[derive(Debug, Clone, clap::Parser)]
#[command(name = NAME, version)]
pub struct Cli {
    /// The flags every ctrlkit controller binary shares.
    #[command(flatten)]
    pub manager: ManagerArgs,
    /// How many WebApps are reconciled at once.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Namespace of the shared routes ConfigMap (`webapp-routes`); in a
    /// Deployment, the operator's own.
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    pub routes_namespace: String,
    /// Print the WebApp CustomResourceDefinition as YAML and exit.
    #[arg(long)]
    pub print_crd: bool,
}

impl Cli {
    /// Where the routes ConfigMap lives.
    pub fn routes(&self) -> RoutesRef {
        RoutesRef::new(&self.routes_namespace, routes::DEFAULT_NAME)
    }
}

/// The declaration: a WebApp controller owning ConfigMaps, Deployments and
/// Services and watching the routes ConfigMap, on the manager's informers
/// (in `--namespace` if given), with its metrics in the manager's registry.
/// Returns it with the routes informer.
///
/// # Errors
/// A [`BuildError`] for a misuse, e.g. `--workers 0`.
pub fn controller(
    manager: &mut Manager,
    cli: &Cli,
) -> Result<(Controller<WebApp>, Informer<ConfigMap>), BuildError> {
    let (routes, factory) = (cli.routes(), manager.factory().clone());
    let routes_informer = factory.namespaced(&routes.namespace, routes.watcher_config());
    let mut builder = Controller::<WebApp>::builder(&factory)
        .name(NAME)
        .owns::<ConfigMap>()
        .owns::<Deployment>()
        .owns::<Service>()
        .watches_with(Watches::new(routes::owners_of).informer(routes_informer.clone()))
        .workers(cli.workers)
        .drop_managed_fields()
        .read_own_writes(READ_OWN_WRITES_WAIT)
        .metrics(&ControllerMetrics::register(manager.registry_mut()));
    if let Some(namespace) = manager.namespace() {
        builder = builder.namespace(namespace);
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
    c: &Controller<WebApp>,
    routes: &Informer<ConfigMap>,
) -> Result<Caches, MissingCache> {
    Ok(Caches {
        configmaps: c.store_of().ok_or(MissingCache("ConfigMap"))?,
        deployments: c.store_of().ok_or(MissingCache("Deployment"))?,
        services: c.store_of().ok_or(MissingCache("Service"))?,
        routes: routes.store(),
    })
}

/// Refuses every write while `fence` is closed (a stand-by, or a leader
/// whose lease may have expired).
pub fn fence_gate(fence: LeaderFence) -> Arc<dyn WriteGate> {
    let refuse = |closed: FenceClosed| WriteRefused::with_source("not leading", closed);
    Arc::new(move |_: &WriteAttempt<'_>| fence.check().map_err(refuse))
}

/// A child control on the manager's client, behind its leader fence.
fn kube_control<C: ChildResource>(manager: &Manager) -> Arc<dyn ChildControl<C>> {
    let control = KubeChildControl::new(manager.client().clone(), NAME);
    Arc::new(control.with_write_gate(fence_gate(manager.fence())))
}

/// Adds the WebApp controller to `manager`, writing through the API
/// server behind the manager's leader fence.
///
/// # Errors
/// A [`BuildError`] or [`MissingCache`], boxed for `run_main`.
pub fn add_to(manager: &mut Manager, cli: &Cli) -> Result<(), BoxError> {
    let (controller, routes_informer) = controller(manager, cli)?;
    let gate = fence_gate(manager.fence());
    let api = KubeWebAppApi::new(manager.client().clone(), NAME, cli.routes(), gate);
    let ctx = Arc::new(Context {
        configmaps: kube_control(manager),
        deployments: kube_control(manager),
        services: kube_control(manager),
        api: Arc::new(api),
        caches: caches(&controller, &routes_informer)?,
        routes: cli.routes(),
        consistency: controller.consistency().clone(),
    });
    manager.add(FnRunnable::new(NAME, move |stop| async move {
        let stopped = controller.run(reconcile, ctx, stop.cancelled_owned()).await;
        stopped.map(drop)
    }));
    Ok(())
}
