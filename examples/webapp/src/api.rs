//! What the operator writes besides its children: the WebApp's finalizer
//! and status, the shared routes ConfigMap and its own events.
//!
//! Children go through ctrlkit's `ChildControl`; these writes have no
//! owner reference to attach, so they go through [`WebAppApi`], a trait
//! for the same reason `ChildControl` is one: the reconcile is unit-tested
//! with a recording fake (see `tests/common`) and runs against a cluster
//! with [`KubeWebAppApi`]. Both fail with ctrlkit's `ChildControlError`,
//! which displays the API server's own message and keeps the `kube::Error`
//! as its source.

use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit::childcontrol::{Operation, WriteAttempt, WriteGate, status_is};
use ctrlkit::prelude::{ChildControlError, Manager};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::response::reason;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{Value, json};

use crate::resource::{FINALIZER, WebApp, WebAppStatus};
use crate::routes::RoutesRef;

/// The writes of the reconcile that are not children.
#[async_trait]
pub trait WebAppApi: Send + Sync {
    /// Adds [`FINALIZER`] to `app` ([`add_finalizer_patch`]) and returns
    /// the WebApp as stored.
    async fn add_finalizer(&self, app: &WebApp) -> Result<WebApp, ChildControlError>;

    /// Removes [`FINALIZER`] from `app` ([`remove_finalizer_patch`]); a
    /// WebApp already gone is success.
    async fn remove_finalizer(&self, app: &WebApp) -> Result<(), ChildControlError>;

    /// Replaces `app`'s status with `status` (a merge patch of the status
    /// subresource) and returns the WebApp as stored.
    async fn patch_status(
        &self,
        app: &WebApp,
        status: &WebAppStatus,
    ) -> Result<WebApp, ChildControlError>;

    /// Sets `entry` to `url` in the routes ConfigMap, creating it if
    /// missing.
    async fn set_route(&self, entry: &str, url: &str) -> Result<(), ChildControlError>;

    /// Removes `entry` from the routes ConfigMap; a missing entry or
    /// ConfigMap is success.
    async fn remove_route(&self, entry: &str) -> Result<(), ChildControlError>;

    /// Records a Warning event on `app`. Never fails: an event that cannot
    /// be published is logged.
    async fn warn(&self, app: &WebApp, reason: &str, note: &str);
}

/// The JSON patch adding [`FINALIZER`] to `app`'s finalizers.
///
/// It first tests that the object did not change in the way that matters
/// since the reconcile read it: the API server does not deduplicate
/// finalizers, and a patch on a list that changed meanwhile must fail (409,
/// retried) rather than add ours twice or overwrite someone else's. With
/// finalizers present it tests the list; without, it tests the
/// resourceVersion (RFC 6902 fails a `test` of a missing path, which is
/// what an absent list is; kube-apiserver's JSON patch library lets a test
/// for `null` pass there, other servers do not).
pub fn add_finalizer_patch(app: &WebApp) -> Value {
    match app.meta().finalizers.as_deref() {
        None | Some([]) => json!([
            {"op": "test", "path": "/metadata/resourceVersion", "value": app.meta().resource_version},
            {"op": "add", "path": "/metadata/finalizers", "value": [FINALIZER]},
        ]),
        Some(list) => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": list},
            {"op": "add", "path": "/metadata/finalizers/-", "value": FINALIZER},
        ]),
    }
}

/// The JSON patch removing [`FINALIZER`] from `app`, testing that it is
/// still at the index the reconcile saw it; `None` if `app` does not carry
/// it.
pub fn remove_finalizer_patch(app: &WebApp) -> Option<Value> {
    let index = app.finalizers().iter().position(|f| f == FINALIZER)?;
    let path = format!("/metadata/finalizers/{index}");
    Some(json!([
        {"op": "test", "path": path, "value": FINALIZER},
        {"op": "remove", "path": path},
    ]))
}

/// [`WebAppApi`] against the API server, with every write checked by a
/// [`WriteGate`] first (the manager's leader fence), as the child controls
/// are.
///
/// Needs `patch` on `webapps` and `webapps/status`, `create` and `patch` on
/// `configmaps` in the routes namespace, and `create` and `patch` on
/// `events.k8s.io` `events`.
#[derive(Clone)]
pub struct KubeWebAppApi {
    client: Client,
    routes: RoutesRef,
    gate: Arc<dyn WriteGate>,
    recorder: Recorder,
}

impl std::fmt::Debug for KubeWebAppApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeWebAppApi")
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl KubeWebAppApi {
    /// Writes through the manager's fenced client, recording events as
    /// `reporter`, each write first checked against the manager's leader
    /// fence (as its child controls do).
    pub fn new(manager: &Manager, reporter: &str, routes: RoutesRef) -> Self {
        let (client, gate): (_, Arc<dyn WriteGate>) =
            (manager.client().clone(), Arc::new(manager.fence()));
        let recorder = Recorder::new(client.clone(), reporter.into());
        Self {
            client,
            routes,
            gate,
            recorder,
        }
    }

    fn check(&self, kind: &str, namespace: &str, name: &str) -> Result<(), ChildControlError> {
        let attempt = WriteAttempt {
            operation: Operation::Patch,
            kind,
            namespace,
            name: Some(name),
        };
        Ok(self.gate.check(&attempt)?)
    }

    /// The WebApp's API and name, after the gate let the write through.
    fn webapp(&self, app: &WebApp) -> Result<(Api<WebApp>, String), ChildControlError> {
        let (namespace, name) = (app.namespace().unwrap_or_default(), app.name_any());
        self.check("WebApp", &namespace, &name)?;
        Ok((Api::namespaced(self.client.clone(), &namespace), name))
    }

    fn routes_api(&self) -> Result<Api<ConfigMap>, ChildControlError> {
        self.check("ConfigMap", &self.routes.namespace, &self.routes.name)?;
        Ok(Api::namespaced(self.client.clone(), &self.routes.namespace))
    }
}

fn json_patch(ops: Value) -> Result<Patch<()>, ChildControlError> {
    serde_json::from_value(ops)
        .map(Patch::Json)
        .map_err(|e| ChildControlError::InvalidPatch(e.to_string()))
}

fn not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status_is(status, reason::NOT_FOUND, 404))
}

#[async_trait]
impl WebAppApi for KubeWebAppApi {
    async fn add_finalizer(&self, app: &WebApp) -> Result<WebApp, ChildControlError> {
        let (api, name) = self.webapp(app)?;
        let patch = json_patch(add_finalizer_patch(app))?;
        Ok(api.patch(&name, &PatchParams::default(), &patch).await?)
    }

    async fn remove_finalizer(&self, app: &WebApp) -> Result<(), ChildControlError> {
        let Some(ops) = remove_finalizer_patch(app) else {
            return Ok(());
        };
        let (api, name) = self.webapp(app)?;
        match api
            .patch(&name, &PatchParams::default(), &json_patch(ops)?)
            .await
        {
            Err(e) if not_found(&e) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }

    async fn patch_status(
        &self,
        app: &WebApp,
        status: &WebAppStatus,
    ) -> Result<WebApp, ChildControlError> {
        let (api, name) = self.webapp(app)?;
        let patch = Patch::Merge(json!({ "status": status }));
        Ok(api
            .patch_status(&name, &PatchParams::default(), &patch)
            .await?)
    }

    async fn set_route(&self, entry: &str, url: &str) -> Result<(), ChildControlError> {
        let api = self.routes_api()?;
        let patch = Patch::Merge(json!({ "data": { entry: url } }));
        match api
            .patch(&self.routes.name, &PatchParams::default(), &patch)
            .await
        {
            Err(e) if not_found(&e) => {
                let cm = self.routes.configmap(entry, url);
                api.create(&PostParams::default(), &cm).await?;
                Ok(())
            }
            other => other.map(drop).map_err(Into::into),
        }
    }

    async fn remove_route(&self, entry: &str) -> Result<(), ChildControlError> {
        let api = self.routes_api()?;
        let patch = Patch::Merge(json!({ "data": { entry: null } }));
        match api
            .patch(&self.routes.name, &PatchParams::default(), &patch)
            .await
        {
            Err(e) if not_found(&e) => Ok(()),
            other => other.map(drop).map_err(Into::into),
        }
    }

    async fn warn(&self, app: &WebApp, reason: &str, note: &str) {
        let namespace = app.namespace().unwrap_or_default();
        if let Err(refused) = self.check("Event", &namespace, &app.name_any()) {
            tracing::debug!(%refused, reason, "event not recorded");
            return;
        }
        let event = Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some(note.to_owned()),
            action: "Reconcile".to_owned(),
            secondary: None,
        };
        if let Err(error) = self.recorder.publish(&event, &app.object_ref(&())).await {
            tracing::warn!(%error, reason, "failed to record an event");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::WebAppSpec;

    fn app(finalizers: Option<Vec<&str>>) -> WebApp {
        let mut app = WebApp::new(
            "web",
            WebAppSpec {
                image: "nginx".into(),
                replicas: 1,
                port: 80,
                config: None,
            },
        );
        app.metadata.finalizers = finalizers.map(|f| f.into_iter().map(String::from).collect());
        app.metadata.resource_version = Some("7".into());
        app
    }

    fn apply(app: &WebApp, ops: Value) -> Result<Vec<String>, String> {
        let mut doc = serde_json::to_value(app).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(ops).unwrap();
        json_patch::patch(&mut doc, &patch).map_err(|e| e.to_string())?;
        let patched: WebApp = serde_json::from_value(doc).unwrap();
        Ok(patched.finalizers().to_vec())
    }

    #[test]
    fn adding_keeps_others_and_fails_on_a_changed_list() {
        let none = app(None);
        assert_eq!(
            apply(&none, add_finalizer_patch(&none)).unwrap(),
            [FINALIZER]
        );
        let other = app(Some(vec!["x/y"]));
        assert_eq!(
            apply(&other, add_finalizer_patch(&other)).unwrap(),
            ["x/y", FINALIZER]
        );
        // Someone added a finalizer after the reconcile read the WebApp.
        let changed = app(Some(vec!["x/y", "z/w"]));
        assert!(apply(&changed, add_finalizer_patch(&other)).is_err());
        let mut newer = other.clone();
        newer.metadata.resource_version = Some("8".into());
        assert!(apply(&newer, add_finalizer_patch(&none)).is_err());
    }

    #[test]
    fn removing_takes_only_ours_at_the_index_seen() {
        let ours = app(Some(vec!["x/y", FINALIZER, "z/w"]));
        let ops = remove_finalizer_patch(&ours).unwrap();
        assert_eq!(apply(&ours, ops.clone()).unwrap(), ["x/y", "z/w"]);
        let moved = app(Some(vec![FINALIZER, "x/y", "z/w"]));
        assert!(apply(&moved, ops).is_err(), "never removes someone else's");
        assert_eq!(remove_finalizer_patch(&app(Some(vec!["x/y"]))), None);
    }
}
