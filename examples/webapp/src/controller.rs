//! The wiring: the operator's flags, the controller's declaration on the
//! manager, the context its reconcile gets. Everything else is the
//! operator's own logic.

use std::{sync::Arc, time::Duration};

use ctrlkit::prelude::*;
use k8s_openapi::api::{apps::v1::Deployment, core::v1::ConfigMap, core::v1::Service};

use crate::reconcile::{Caches, Context, reconcile};
use crate::routes::{self, RoutesRef};
use crate::{api::KubeWebAppApi, resource::WebApp};

/// The controller's name: its metrics label, lease, event reporter and
/// field manager.
pub const NAME: &str = "webapp-operator";

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
    #[arg(long = "routes-namespace", env = "POD_NAMESPACE", default_value_t)]
    pub routes: RoutesRef,
    /// Print the WebApp CustomResourceDefinition as YAML and exit.
    #[arg(long)]
    pub print_crd: bool,
}

/// The declaration: a WebApp controller on `manager` (its informers, its
/// `--namespace`, its metrics) owning ConfigMaps, Deployments and Services
/// and watching the routes ConfigMap; returned with the caches the
/// reconcile reads.
///
/// # Errors
/// A [`BuildError`] for a misuse, e.g. `--workers 0`.
pub fn controller(
    manager: &mut Manager,
    cli: &Cli,
) -> Result<(Controller<WebApp>, Caches), BuildError> {
    let routes = cli.routes.informer(manager.factory());
    let controller = Controller::<WebApp>::builder_for(manager)
        .name(NAME)
        .owns::<ConfigMap>()
        .owns::<Deployment>()
        .owns::<Service>()
        .watches_with(Watches::new(routes::owners_of).informer(routes.clone()))
        .workers(cli.workers)
        .drop_managed_fields()
        .read_own_writes(Duration::from_secs(10)) // at most per write
        .build()?;
    // `cache::<ConfigMap>()` is the owned ConfigMaps' cache: `owns`
    // registered it before `watches` did the routes'.
    let caches = Caches {
        configmaps: controller.cache()?,
        deployments: controller.cache()?,
        services: controller.cache()?,
        routes: routes.store(),
    };
    Ok((controller, caches))
}

/// Adds the WebApp controller to `manager`, writing through the API
/// server behind the manager's leader fence.
///
/// # Errors
/// A [`BuildError`], boxed for `run_main`.
pub fn add_to(manager: &mut Manager, cli: &Cli) -> Result<(), BoxError> {
    let (controller, caches) = controller(manager, cli)?;
    let ctx = Context {
        configmaps: manager.child_control(NAME),
        deployments: manager.child_control(NAME),
        services: manager.child_control(NAME),
        api: Arc::new(KubeWebAppApi::new(manager, NAME, cli.routes.clone())),
        caches,
        routes: cli.routes.clone(),
        consistency: controller.consistency().clone(),
    };
    manager.add_controller(controller, reconcile, Arc::new(ctx));
    Ok(())
}
