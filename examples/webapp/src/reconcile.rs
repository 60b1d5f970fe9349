//! The reconcile: from a WebApp (or its absence) to its children, its
//! route, its finalizer and its status.
//!
//! It reads only from the informer caches in [`Context`], writes children
//! through `ChildControl`s and everything else through [`WebAppApi`], and
//! records the resourceVersion of each write in the controller's
//! read-own-writes store, so the next reconcile of the same WebApp waits
//! until the caches show them (no second create off a stale cache).

use std::sync::Arc;

use ctrlkit::childcontrol::{FAILED_CREATE_REASON, controller_ref_for};
use ctrlkit::consistency::ConsistencyStore;
use ctrlkit::informer::is_controlled_by;
use ctrlkit::prelude::*;
use ctrlkit::worker::SyncError;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Patch;
use kube::{Resource, ResourceExt};

use crate::api::WebAppApi;
use crate::children::{self, Managed};
use crate::resource::{FINALIZER, WebApp};
use crate::routes::{self, RoutesRef};
use crate::status::{self, DEGRADED, Outcome};
use crate::validate::validate;

/// Status reason: a child exists under the WebApp's name but another
/// object controls it (or none does).
pub const CHILD_CONFLICT: &str = "ChildConflict";
/// Status and event reason: an existing child could not be updated.
pub const FAILED_UPDATE: &str = "FailedUpdate";

/// What the reconcile works with: the caches it reads and the controls it
/// writes through.
pub struct Context {
    /// Creates and patches the WebApps' ConfigMaps.
    pub configmaps: Arc<dyn ChildControl<ConfigMap>>,
    /// Creates and patches the WebApps' Deployments.
    pub deployments: Arc<dyn ChildControl<Deployment>>,
    /// Creates and patches the WebApps' Services.
    pub services: Arc<dyn ChildControl<Service>>,
    /// Finalizer, status, routes and events.
    pub api: Arc<dyn WebAppApi>,
    /// The informer caches.
    pub caches: Caches,
    /// Where the routes ConfigMap lives.
    pub routes: RoutesRef,
    /// The controller's read-own-writes store.
    pub consistency: ConsistencyStore,
}

/// The informer caches the reconcile reads.
#[derive(Debug, Clone)]
pub struct Caches {
    /// Owned ConfigMaps.
    pub configmaps: Store<ConfigMap>,
    /// Owned Deployments.
    pub deployments: Store<Deployment>,
    /// Owned Services.
    pub services: Store<Service>,
    /// The routes ConfigMap.
    pub routes: Store<ConfigMap>,
}

/// Why a reconcile failed; every variant is retried with backoff. Each
/// displays the API server's message where there is one and keeps the
/// error as its source.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Creating or patching a child failed.
    #[error("{action} {kind} {name}: {source}")]
    Child {
        /// `creating` or `updating`.
        action: &'static str,
        /// The child's kind.
        kind: &'static str,
        /// The child's name.
        name: String,
        /// What the child control said.
        #[source]
        source: ChildControlError,
    },
    /// A child's name is taken by an object this WebApp does not control.
    #[error("{kind} {name} exists and is not controlled by this WebApp")]
    NotOurs {
        /// The child's kind.
        kind: &'static str,
        /// The child's name.
        name: String,
    },
    /// Adding or removing the finalizer failed.
    #[error("updating the finalizer: {0}")]
    Finalizer(#[source] ChildControlError),
    /// Registering or removing the route failed.
    #[error("updating the routes ConfigMap: {0}")]
    Route(#[source] ChildControlError),
    /// Writing the status failed.
    #[error("writing the status: {0}")]
    Status(#[source] ChildControlError),
    /// The WebApp in the cache has no UID (never for objects from the API).
    #[error("the WebApp has no UID")]
    NotStored,
    /// A child could not be serialized to compute its patch.
    #[error("comparing a child with its spec: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl SyncError for Error {}

impl Error {
    /// The status reason this error is reported under.
    fn reason(&self) -> &'static str {
        match self {
            Self::Child {
                action: "creating", ..
            } => FAILED_CREATE_REASON,
            Self::NotOurs { .. } => CHILD_CONFLICT,
            _ => FAILED_UPDATE,
        }
    }

    /// Whether the failure says nothing about the WebApp itself: writes
    /// refused by the leader fence, or a namespace being deleted.
    fn is_circumstantial(&self) -> bool {
        match self {
            Self::Child { source, .. }
            | Self::Finalizer(source)
            | Self::Route(source)
            | Self::Status(source) => {
                source.is_write_refused() || source.is_namespace_terminating()
            }
            _ => false,
        }
    }
}

/// Reconciles the WebApp `key`: `app` is the cached WebApp, `None` once it
/// is gone.
///
/// 1. Gone: the garbage collector deletes the children (they carry a
///    controller reference); a route entry still cached (the finalizer
///    was removed by hand) is removed.
/// 2. Being deleted: remove the route entry, then the finalizer.
/// 3. Invalid spec: report it in the status (and a Warning event), build
///    nothing, do not retry (a spec change brings it back).
/// 4. Add the finalizer, create or update the ConfigMap, the Deployment and
///    the Service, register the route, and write the status if it
///    changed. A failed write is reported in the status too, then retried.
///
/// # Errors
/// [`Error`]; the controller retries the key with backoff.
pub async fn reconcile(
    key: ObjectKey,
    app: Option<Arc<WebApp>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let Some(app) = app else {
        let entry = routes::entry(&key);
        let cached = ctx
            .caches
            .routes
            .get(&ctx.routes.namespace, &ctx.routes.name);
        if ctx.routes.registered(cached.as_deref(), &entry).is_some() {
            ctx.api.remove_route(&entry).await.map_err(Error::Route)?;
        }
        return Ok(Action::done());
    };
    if app.meta().deletion_timestamp.is_some() {
        if app.finalizers().iter().any(|f| f == FINALIZER) {
            let entry = routes::entry(&key);
            ctx.api.remove_route(&entry).await.map_err(Error::Route)?;
            ctx.api
                .remove_finalizer(&app)
                .await
                .map_err(Error::Finalizer)?;
            tracing::info!(%key, "route removed, finalizer released");
        }
        return Ok(Action::done());
    }
    if let Err(invalid) = validate(&app) {
        tracing::info!(%key, %invalid, "invalid spec");
        report(&key, &app, Outcome::Invalid(&invalid), &ctx).await?;
        return Ok(Action::done());
    }
    let deployment = match apply(&key, &app, &ctx).await {
        Ok(deployment) => deployment,
        Err(error) if error.is_circumstantial() => {
            tracing::debug!(%key, %error, "not acting now");
            return match error {
                Error::Child { source, .. } if source.is_namespace_terminating() => {
                    Ok(Action::done())
                }
                error => Err(error),
            };
        }
        Err(error) => {
            let message = error.to_string();
            let outcome = Outcome::Failed {
                reason: error.reason(),
                message: &message,
            };
            if let Err(status_error) = report(&key, &app, outcome, &ctx).await {
                tracing::warn!(%key, %status_error, "could not report the failure in the status");
            }
            return Err(error);
        }
    };
    report(&key, &app, Outcome::Applied(&deployment), &ctx).await?;
    Ok(Action::done())
}

/// Finalizer, children and route; returns the Deployment as last seen.
async fn apply(key: &ObjectKey, app: &WebApp, ctx: &Context) -> Result<Arc<Deployment>, Error> {
    if !app.finalizers().iter().any(|f| f == FINALIZER) {
        let stored = ctx.api.add_finalizer(app).await.map_err(Error::Finalizer)?;
        ctx.wrote(key, &stored);
    }
    let cm = children::desired_configmap(app);
    ensure(key, app, ctx, &*ctx.configmaps, &ctx.caches.configmaps, cm).await?;
    let deploy = children::desired_deployment(app);
    let deployment = ensure(
        key,
        app,
        ctx,
        &*ctx.deployments,
        &ctx.caches.deployments,
        deploy,
    )
    .await?;
    let svc = children::desired_service(app);
    ensure(key, app, ctx, &*ctx.services, &ctx.caches.services, svc).await?;

    let (entry, url) = (routes::entry(key), status::url(app));
    let cached = ctx
        .caches
        .routes
        .get(&ctx.routes.namespace, &ctx.routes.name);
    if ctx.routes.registered(cached.as_deref(), &entry) != Some(url.as_str()) {
        ctx.api
            .set_route(&entry, &url)
            .await
            .map_err(Error::Route)?;
    }
    Ok(deployment)
}

/// Creates the child `desired` if the cache has no object of its name, or
/// patches the cached one where it differs from `desired`; returns the
/// child as last seen.
async fn ensure<C>(
    key: &ObjectKey,
    app: &WebApp,
    ctx: &Context,
    control: &dyn ChildControl<C>,
    cache: &Store<C>,
    desired: C,
) -> Result<Arc<C>, Error>
where
    C: Managed + k8s_openapi::Resource + Resource<DynamicType = ()> + Clone,
{
    let kind = <C as k8s_openapi::Resource>::KIND;
    let name = desired.meta().name.clone().unwrap_or_default();
    let uid = app.meta().uid.as_deref().unwrap_or_default();
    let Some(actual) = cache.get(&key.namespace, &name) else {
        let cref = controller_ref_for(app).ok_or(Error::NotStored)?;
        let created = control
            .create(&key.namespace, &desired, &app.object_ref(&()), &cref)
            .await
            .map_err(|source| Error::Child {
                action: "creating",
                kind,
                name,
                source,
            })?;
        ctx.wrote(key, &created);
        return Ok(Arc::new(created));
    };
    if !is_controlled_by(actual.meta(), uid) {
        return Err(Error::NotOurs { kind, name });
    }
    let Some(patch) = children::merge_patch(&desired, &actual)? else {
        return Ok(actual);
    };
    let patched = control
        .patch(&key.namespace, &name, &Patch::Merge(patch))
        .await
        .map_err(|source| Error::Child {
            action: "updating",
            kind,
            name: name.clone(),
            source,
        })?;
    tracing::info!(%key, kind, child = %name, "updated child to match the spec");
    ctx.wrote(key, &patched);
    Ok(Arc::new(patched))
}

/// Writes the status for `outcome` if it differs from the cached one, and
/// records a Warning event when the WebApp becomes degraded (except for a
/// failed create, which the child control records itself).
async fn report(
    key: &ObjectKey,
    app: &WebApp,
    outcome: Outcome<'_>,
    ctx: &Context,
) -> Result<(), Error> {
    let now =
        Time(Timestamp::from_second(Timestamp::now().as_second()).unwrap_or(Timestamp::UNIX_EPOCH));
    let status = status::desired_status(app, outcome, &now);
    if app.status.as_ref() == Some(&status) {
        return Ok(());
    }
    let degraded = |s| status::find(s, DEGRADED).filter(|c| c.status == "True");
    if let Some(now_degraded) = degraded(Some(&status))
        && degraded(app.status.as_ref()).is_none_or(|before| before.reason != now_degraded.reason)
        && now_degraded.reason != FAILED_CREATE_REASON
    {
        ctx.api
            .warn(app, &now_degraded.reason, &now_degraded.message)
            .await;
    }
    let stored = ctx
        .api
        .patch_status(app, &status)
        .await
        .map_err(Error::Status)?;
    ctx.wrote(key, &stored);
    Ok(())
}

impl Context {
    /// Records that a write on behalf of `key` returned `object`: the next
    /// reconcile of `key` waits until the cache of its kind shows it.
    fn wrote<K: Resource<DynamicType = ()>>(&self, key: &ObjectKey, object: &K) {
        if let Some(rv) = object.meta().resource_version.as_deref() {
            self.consistency
                .wrote_at(&key.to_string(), &GroupResource::of::<K>(), rv);
        }
    }
}
