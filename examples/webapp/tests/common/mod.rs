//! A WebApp controller under test: the production declaration
//! (`controller::controller`) on informers fed by hand, recording fakes for
//! every write, and a stand-in for the API server's watch that feeds the
//! writes back into the informers. Paused tokio time drives it.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use clap::Parser;
use ctrlkit::childcontrol::{
    ChildControlError, FakeChildControl, Operation, WriteAttempt, WriteGate,
};
use ctrlkit::prelude::*;
use ctrlkit::runtime::manager::Manager;
use ctrlkit::runtime::{RunError, Stopped};
use ctrlkit_example_webapp::api::WebAppApi;
use ctrlkit_example_webapp::controller::{Cli, NAME, controller};
use ctrlkit_example_webapp::reconcile::{Context, reconcile};
use ctrlkit_example_webapp::resource::{FINALIZER, WebApp, WebAppSpec, WebAppStatus};
use ctrlkit_example_webapp::routes::RoutesRef;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Patch;
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const NS: &str = "shop";
pub const OPS: &str = "ops";

/// A call the reconcile made through [`WebAppApi`].
#[derive(Debug, Clone, PartialEq)]
pub enum Call {
    AddFinalizer(String),
    RemoveFinalizer(String),
    Status(String, WebAppStatus),
    SetRoute(String, String),
    RemoveRoute(String),
    Warn(String, String, String),
}

#[derive(Default)]
struct ApiState {
    calls: Vec<Call>,
    /// The WebApps as the fake server stores them after each write.
    latest: HashMap<String, WebApp>,
    /// Keys written since the last delivery.
    dirty: Vec<String>,
    routes: Option<BTreeMap<String, String>>,
    routes_dirty: bool,
    gate: Option<Arc<dyn WriteGate>>,
}

/// A [`WebAppApi`] that keeps the WebApps and the routes as a server
/// would and records every call.
#[derive(Clone)]
pub struct FakeApi {
    state: Arc<Mutex<ApiState>>,
    rv: Arc<AtomicU64>,
}

impl FakeApi {
    fn lock(&self) -> std::sync::MutexGuard<'_, ApiState> {
        self.state.lock().unwrap()
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The calls that are not status writes or events.
    pub fn writes(&self) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| !matches!(c, Call::Status(..) | Call::Warn(..)))
            .collect()
    }

    pub fn statuses(&self) -> Vec<WebAppStatus> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Status(_, s) => Some(s),
                _ => None,
            })
            .collect()
    }

    pub fn warnings(&self) -> Vec<(String, String)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Warn(_, reason, note) => Some((reason, note)),
                _ => None,
            })
            .collect()
    }

    pub fn routes(&self) -> Option<BTreeMap<String, String>> {
        self.lock().routes.clone()
    }

    pub fn set_write_gate(&self, gate: Option<Arc<dyn WriteGate>>) {
        self.lock().gate = gate;
    }

    fn check(&self, s: &ApiState, kind: &str, name: &str) -> Result<(), ChildControlError> {
        match &s.gate {
            Some(gate) => Ok(gate.check(&WriteAttempt {
                operation: Operation::Patch,
                kind,
                namespace: NS,
                name: Some(name),
            })?),
            None => Ok(()),
        }
    }

    fn write(
        &self,
        app: &WebApp,
        call: Call,
        change: impl FnOnce(&mut WebApp),
    ) -> Result<WebApp, ChildControlError> {
        let mut s = self.lock();
        s.calls.push(call);
        self.check(&s, "WebApp", &app.name_any())?;
        let key = format!("{}/{}", app.namespace().unwrap(), app.name_any());
        let mut stored = s.latest.get(&key).cloned().unwrap_or_else(|| app.clone());
        change(&mut stored);
        stored.metadata.resource_version = Some(next_rv(&self.rv));
        s.latest.insert(key.clone(), stored.clone());
        s.dirty.push(key);
        Ok(stored)
    }

    fn route(
        &self,
        call: Call,
        change: impl FnOnce(&mut BTreeMap<String, String>),
    ) -> Result<(), ChildControlError> {
        let mut s = self.lock();
        s.calls.push(call);
        self.check(&s, "ConfigMap", "webapp-routes")?;
        change(s.routes.get_or_insert_with(BTreeMap::new));
        s.routes_dirty = true;
        Ok(())
    }
}

#[async_trait]
impl WebAppApi for FakeApi {
    async fn add_finalizer(&self, app: &WebApp) -> Result<WebApp, ChildControlError> {
        self.write(app, Call::AddFinalizer(app.name_any()), |a| {
            a.metadata
                .finalizers
                .get_or_insert_with(Vec::new)
                .push(FINALIZER.into());
        })
    }

    async fn remove_finalizer(&self, app: &WebApp) -> Result<(), ChildControlError> {
        self.write(app, Call::RemoveFinalizer(app.name_any()), |a| {
            if let Some(f) = a.metadata.finalizers.as_mut() {
                f.retain(|f| f != FINALIZER);
            }
        })
        .map(drop)
    }

    async fn patch_status(
        &self,
        app: &WebApp,
        status: &WebAppStatus,
    ) -> Result<WebApp, ChildControlError> {
        let status = status.clone();
        self.write(app, Call::Status(app.name_any(), status.clone()), |a| {
            a.status = Some(status);
        })
    }

    async fn set_route(&self, entry: &str, url: &str) -> Result<(), ChildControlError> {
        self.route(Call::SetRoute(entry.into(), url.into()), |r| {
            r.insert(entry.into(), url.into());
        })
    }

    async fn remove_route(&self, entry: &str) -> Result<(), ChildControlError> {
        self.route(Call::RemoveRoute(entry.into()), |r| {
            r.remove(entry);
        })
    }

    async fn warn(&self, app: &WebApp, reason: &str, note: &str) {
        self.lock()
            .calls
            .push(Call::Warn(app.name_any(), reason.into(), note.into()));
    }
}

fn next_rv(counter: &AtomicU64) -> String {
    (counter.fetch_add(1, Ordering::SeqCst) + 1).to_string()
}

/// A valid spec: `nginx:1.27`, 3 replicas, port 8080, one config file.
pub fn spec() -> WebAppSpec {
    WebAppSpec {
        image: "nginx:1.27".into(),
        replicas: 3,
        port: 8080,
        config: Some([("index.html".to_string(), "hello".to_string())].into()),
    }
}

/// The controller running on hand-fed informers, with fakes for writes.
pub struct Harness {
    pub webapps: Informer<WebApp>,
    pub configmaps: Informer<ConfigMap>,
    pub deployments: Informer<Deployment>,
    pub services: Informer<Service>,
    pub routes: Informer<ConfigMap>,
    pub cm_control: FakeChildControl<ConfigMap>,
    pub deploy_control: FakeChildControl<Deployment>,
    pub svc_control: FakeChildControl<Service>,
    pub api: FakeApi,
    rv: Arc<AtomicU64>,
    delivered: Mutex<[usize; 6]>,
    stop: CancellationToken,
    run: JoinHandle<Result<Stopped, RunError>>,
}

impl Harness {
    /// Starts the controller with empty caches (the first lists done).
    pub async fn start() -> Self {
        Self::start_with(Vec::new(), Vec::new()).await
    }

    /// Starts the controller; the first lists hold `apps` and `services`.
    pub async fn start_with(apps: Vec<WebApp>, listed_services: Vec<Service>) -> Self {
        // A client that is never used: the informers are fed by hand and
        // every write goes to a fake.
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let cli = Cli::try_parse_from([
            "webapp-operator",
            "--routes-namespace",
            OPS,
            "--workers",
            "2",
        ])
        .unwrap();
        let mut manager = Manager::with_client(client, cli.manager.config(NAME)).unwrap();
        let (controller, caches) = controller(&mut manager, &cli).unwrap();
        // The factory hands out the routes informer the controller watches.
        let routes = cli.routes.informer(manager.factory());
        let factory = manager.factory().clone();
        // The factory hands out the informers the controller took.
        let webapps = controller.informer().clone();
        let configmaps = factory.all::<ConfigMap>(Default::default());
        let deployments = factory.all::<Deployment>(Default::default());
        let services = factory.all::<Service>(Default::default());

        let rv = Arc::new(AtomicU64::new(100));
        let api = FakeApi {
            state: Arc::default(),
            rv: rv.clone(),
        };
        let (cm_control, deploy_control, svc_control) = (
            FakeChildControl::new(),
            FakeChildControl::new(),
            FakeChildControl::new(),
        );
        let ctx = Arc::new(Context {
            configmaps: Arc::new(cm_control.clone()),
            deployments: Arc::new(deploy_control.clone()),
            services: Arc::new(svc_control.clone()),
            api: Arc::new(api.clone()),
            caches,
            routes: RoutesRef::new(OPS, "webapp-routes"),
            consistency: controller.consistency().clone(),
        });
        let stop = CancellationToken::new();
        let run = tokio::spawn(controller.run(reconcile, ctx, stop.clone().cancelled_owned()));

        let harness = Self {
            webapps,
            configmaps,
            deployments,
            services,
            routes,
            cm_control,
            deploy_control,
            svc_control,
            api,
            rv,
            delivered: Mutex::new([0; 6]),
            stop,
            run,
        };
        let apps: Vec<_> = apps.into_iter().map(|a| harness.stamp(a)).collect();
        for app in &apps {
            let key = format!("{}/{}", app.namespace().unwrap(), app.name_any());
            harness.api.lock().latest.insert(key, app.clone());
        }
        let listed_services = listed_services
            .into_iter()
            .map(|s| harness.stamp(s))
            .collect();
        list(&harness.webapps, apps);
        list(&harness.configmaps, vec![]);
        list(&harness.deployments, vec![]);
        list(&harness.services, listed_services);
        list(&harness.routes, vec![]);
        harness
    }

    /// `obj` with the next resourceVersion.
    pub fn stamp<K: Resource>(&self, mut obj: K) -> K {
        obj.meta_mut().resource_version = Some(next_rv(&self.rv));
        obj
    }

    /// A stored WebApp `name` in [`NS`] with `spec`, generation 1.
    pub fn new_app(&self, name: &str, spec: WebAppSpec) -> WebApp {
        let mut app = WebApp::new(name, spec);
        app.metadata.namespace = Some(NS.into());
        app.metadata.uid = Some(format!("uid-{name}"));
        app.metadata.generation = Some(1);
        self.stamp(app)
    }

    /// The API server stores `app` (created or changed by a user) and its
    /// watch delivers it.
    pub fn apply(&self, app: WebApp) {
        let app = self.stamp(app);
        let key = format!("{}/{}", app.namespace().unwrap(), app.name_any());
        self.api.lock().latest.insert(key, app.clone());
        self.webapps.apply_event(Event::Apply(app));
    }

    /// Edits the cached WebApp `name` as a user would: a spec change bumps
    /// the generation.
    pub fn edit(&self, name: &str, change: impl FnOnce(&mut WebApp)) {
        let mut app = (*self.webapp(name)).clone();
        let before = app.spec.clone();
        change(&mut app);
        if app.spec != before {
            app.metadata.generation = Some(app.metadata.generation.unwrap_or(0) + 1);
        }
        self.apply(app);
    }

    pub fn webapp(&self, name: &str) -> Arc<WebApp> {
        self.webapps.store().get(NS, name).unwrap()
    }

    pub fn deployment(&self, name: &str) -> Arc<Deployment> {
        self.deployments.store().get(NS, name).unwrap()
    }

    /// Lets the workers run (paused time: instant).
    pub async fn settle(&self) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    /// Feeds every write made since the last call back into the informers,
    /// as the API server's watch would.
    pub fn deliver(&self) {
        let mut delivered = self.delivered.lock().unwrap();
        self.deliver_children(&self.cm_control, &self.configmaps, &mut delivered[0..2]);
        self.deliver_children(
            &self.deploy_control,
            &self.deployments,
            &mut delivered[2..4],
        );
        self.deliver_children(&self.svc_control, &self.services, &mut delivered[4..6]);
        drop(delivered);
        let (apps, routes) = {
            let mut s = self.api.lock();
            let keys = std::mem::take(&mut s.dirty);
            let apps: Vec<_> = keys
                .iter()
                .filter_map(|k| s.latest.get(k).cloned())
                .collect();
            let routes = std::mem::take(&mut s.routes_dirty).then(|| s.routes.clone());
            (apps, routes)
        };
        for app in apps {
            let gone = app.meta().deletion_timestamp.is_some() && app.finalizers().is_empty();
            self.webapps.apply_event(if gone {
                Event::Delete(app)
            } else {
                Event::Apply(app)
            });
        }
        if let Some(Some(data)) = routes {
            let mut cm = RoutesRef::new(OPS, "webapp-routes").configmap("x", "y");
            cm.data = Some(data);
            self.routes.apply_event(Event::Apply(self.stamp(cm)));
        }
    }

    fn deliver_children<C>(
        &self,
        fake: &FakeChildControl<C>,
        informer: &Informer<C>,
        seen: &mut [usize],
    ) where
        C: Resource<DynamicType = ()>
            + Clone
            + Serialize
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let created = fake.created();
        for child in &created[seen[0]..] {
            informer.apply_event(Event::Apply(self.stamp(child.clone())));
        }
        seen[0] = created.len();
        let patches = fake.patches();
        for patch in &patches[seen[1]..] {
            let cached = informer.store().get(&patch.namespace, &patch.name).unwrap();
            let mut doc = serde_json::to_value(&*cached).unwrap();
            let Patch::Merge(body) = &patch.patch else {
                panic!("expected a merge patch: {:?}", patch.patch)
            };
            let mut body = body.clone();
            let uid = body["metadata"]
                .as_object_mut()
                .and_then(|m| m.remove("uid"));
            assert_eq!(
                uid.as_ref().and_then(|u| u.as_str()),
                cached.meta().uid.as_deref(),
                "UID precondition"
            );
            let spec_before = doc.get("spec").cloned();
            json_patch::merge(&mut doc, &body);
            if doc.get("spec").is_some() && doc.get("spec").cloned() != spec_before {
                let generation = doc["metadata"]["generation"].as_i64().unwrap_or(1);
                doc["metadata"]["generation"] = (generation + 1).into();
            }
            let patched: C = serde_json::from_value(doc).unwrap();
            informer.apply_event(Event::Apply(self.stamp(patched)));
        }
        seen[1] = patches.len();
    }

    /// Settles and delivers until nothing more is written.
    pub async fn converge(&self) {
        for _ in 0..10 {
            self.settle().await;
            let before = self.write_count();
            self.deliver();
            self.settle().await;
            if self.write_count() == before {
                return;
            }
        }
        panic!("the controller keeps writing: {:?}", self.api.calls());
    }

    /// Every write so far (children and API).
    pub fn write_count(&self) -> usize {
        self.cm_control.create_count()
            + self.cm_control.patch_count()
            + self.deploy_control.create_count()
            + self.deploy_control.patch_count()
            + self.svc_control.create_count()
            + self.svc_control.patch_count()
            + self.api.calls().len()
    }

    /// The Deployment controller reports `ready` of the Deployment's
    /// replicas ready and available, all updated.
    pub fn deployment_ready(&self, name: &str, ready: i32) {
        let mut d = (*self.deployment(name)).clone();
        let replicas = ctrlkit_example_webapp_replicas(&d);
        d.status = Some(DeploymentStatus {
            observed_generation: d.metadata.generation,
            replicas: Some(replicas),
            updated_replicas: Some(replicas),
            ready_replicas: Some(ready),
            available_replicas: Some(ready),
            ..DeploymentStatus::default()
        });
        self.deployments.apply_event(Event::Apply(self.stamp(d)));
    }

    /// Marks the WebApp `name` deleted (the API server sets
    /// deletionTimestamp while finalizers remain).
    pub fn delete(&self, name: &str) {
        let mut app = (*self.webapp(name)).clone();
        if app.finalizers().is_empty() {
            self.webapps.apply_event(Event::Delete(app));
            return;
        }
        app.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        self.apply(app);
    }

    pub async fn stop(self) {
        self.stop.cancel();
        self.run.await.unwrap().unwrap();
    }
}

/// `spec.replicas` of a Deployment, whichever Kubernetes version.
fn ctrlkit_example_webapp_replicas(d: &Deployment) -> i32 {
    serde_json::to_value(d).unwrap()["spec"]["replicas"]
        .as_i64()
        .unwrap() as i32
}

/// The informer's first list: `objects`.
pub fn list<K>(informer: &Informer<K>, objects: Vec<K>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
{
    informer.apply_event(Event::Init);
    for obj in objects {
        informer.apply_event(Event::InitApply(obj));
    }
    informer.apply_event(Event::InitDone);
}

/// The condition `type_` of `status` as (status, reason).
pub fn condition(status: &WebAppStatus, type_: &str) -> (String, String) {
    let c = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
    (c.status.clone(), c.reason.clone())
}
