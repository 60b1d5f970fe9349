//! Bad input: owners whose spec is wrong or absurd, pods with malformed
//! annotations, owners that vanish mid-sync, and API errors of every kind.
//!
//! The standard each test holds the controller to: a clear, user-visible
//! outcome (a `ReplicaFailure` condition, a Warning event, a log line or a
//! typed error), never a panic, nothing lost (the work is done once the
//! cause is gone), and retries rate-limited, never a hot loop. Rate limits
//! are checked by running the controller for simulated minutes under
//! tokio's paused clock and bounding the syncs or API requests.
//!
//! Most tests feed informers by hand and use a fake pod control; those that
//! need a real API server's answers (validation, generateName, events,
//! kube's client retries) run against ctrlkit-testcluster in-process on the
//! same paused, single-threaded runtime.
#![allow(clippy::unwrap_used)]

mod common;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use common::{NS, PodSpec, edit, live_replica_set, replica_set, replication_controller};
use ctrlkit_informer::{Informer, ObjectKey, SharedInformerFactory};
use ctrlkit_podcontrol::ranking::POD_DELETION_COST_ANNOTATION;
use ctrlkit_podcontrol::{FakePodControl, KubePodControl, Operation, PodControlError};
use ctrlkit_replicaset::{
    Controller, ControllerOptions, Error, OwnerClient, ReplicaOwner, ReplicaSetController,
};
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig, Latency};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{ListParams, PostParams};
use kube::core::Status;
use kube::core::response::StatusDetails;
use kube::runtime::watcher::Event;
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const KEY: &str = "default/web";
const TEN_MINUTES: Duration = Duration::from_secs(600);

// ----- log capture ------------------------------------------------------

/// Everything the controller logs on this thread while the guard lives
/// (tests must run on the current-thread runtime, which `tokio::test`
/// does).
///
/// One process-wide subscriber writes each event into the capture of the
/// thread that logged it. A subscriber per test (`set_default`) would
/// lose events: tracing caches each callsite's interest once, computed on
/// the first thread to reach it, so a test without a subscriber reaching
/// "owner is gone" first turned it off for every test in the binary.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

thread_local! {
    static CAPTURE: std::cell::RefCell<Option<Logs>> = const { std::cell::RefCell::new(None) };
}

/// Writes into the capture of the current thread, if any.
struct ThreadCapture;

impl io::Write for ThreadCapture {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        CAPTURE.with(|c| {
            if let Some(logs) = &*c.borrow() {
                logs.0.lock().extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Ends the current thread's capture when dropped.
struct CaptureGuard;

impl Drop for CaptureGuard {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}

impl Logs {
    fn capture() -> (Logs, CaptureGuard) {
        static SUBSCRIBER: std::sync::Once = std::sync::Once::new();
        SUBSCRIBER.call_once(|| {
            let subscriber = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(
                    "ctrlkit_replicaset=debug,ctrlkit_worker=debug,warn",
                ))
                .with_writer(|| ThreadCapture)
                .with_ansi(false)
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this test binary");
        });
        let logs = Logs::default();
        CAPTURE.with(|c| *c.borrow_mut() = Some(logs.clone()));
        (logs, CaptureGuard)
    }

    fn lines(&self, needle: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock())
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

// ----- a controller on hand-fed informers ------------------------------

type ErrorFn = Arc<dyn Fn() -> kube::Error + Send + Sync>;

/// An owner client whose live read returns `live` and whose status writes
/// succeed or fail with `fail_writes()` while it is set. A successful write
/// bumps the resourceVersion and, like the watch would, shows the stored
/// object in the `watch` informer.
struct ScriptedClient<O> {
    live: Mutex<Option<O>>,
    gets: AtomicUsize,
    writes: Mutex<Vec<O>>,
    fail_writes: Mutex<Option<ErrorFn>>,
    watch: Mutex<Option<Informer<O>>>,
}

impl<O> ScriptedClient<O> {
    fn new(live: Option<O>) -> Self {
        Self {
            live: Mutex::new(live),
            gets: AtomicUsize::new(0),
            writes: Mutex::new(Vec::new()),
            fail_writes: Mutex::new(None),
            watch: Mutex::new(None),
        }
    }

    fn gets(&self) -> usize {
        self.gets.load(Ordering::SeqCst)
    }

    fn write_count(&self) -> usize {
        self.writes.lock().len()
    }
}

impl<O: ReplicaOwner> ScriptedClient<O> {
    /// The status of the last write attempt, as JSON.
    fn last_status(&self) -> Value {
        self.writes
            .lock()
            .last()
            .map(|o| serde_json::to_value(o).unwrap()["status"].clone())
            .unwrap_or(Value::Null)
    }
}

#[async_trait]
impl<O: ReplicaOwner> OwnerClient<O> for ScriptedClient<O> {
    async fn get(&self, _namespace: &str, _name: &str) -> Result<Option<O>, kube::Error> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        Ok(self.live.lock().clone())
    }

    async fn update_status(&self, owner: &O) -> Result<O, kube::Error> {
        self.writes.lock().push(owner.clone());
        if let Some(fail) = self.fail_writes.lock().as_ref() {
            return Err(fail());
        }
        let mut updated = owner.clone();
        let rv = updated.meta().resource_version.clone().unwrap_or_default();
        updated.meta_mut().resource_version = Some(format!("{rv}1"));
        *self.live.lock() = Some(updated.clone());
        let watch = self.watch.lock().clone();
        if let Some(watch) = watch {
            watch.apply_event(Event::Apply(updated.clone()));
        }
        Ok(updated)
    }
}

/// A controller over hand-fed informers, a fake pod control and a scripted
/// owner client.
struct Rig<O: ReplicaOwner> {
    pods: Informer<Pod>,
    owners: Informer<O>,
    fake: FakePodControl,
    client: Arc<ScriptedClient<O>>,
    controller: Controller<O>,
}

impl<O: ReplicaOwner> Rig<O> {
    fn new(burst: usize) -> Self {
        let pods = Informer::<Pod>::manual().build();
        let owners = Informer::<O>::manual().build();
        let fake = FakePodControl::new();
        let client = Arc::new(ScriptedClient::new(None));
        *client.watch.lock() = Some(owners.clone());
        let controller = Controller::from_parts(
            pods.clone(),
            owners.clone(),
            Arc::new(fake.clone()),
            client.clone(),
            ControllerOptions {
                burst_replicas: burst,
                ..ControllerOptions::default()
            },
        )
        .unwrap();
        Self {
            pods,
            owners,
            fake,
            client,
            controller,
        }
    }

    /// Lists `owner` and `pods` as the informers' first list (so the caches
    /// count as synced) and makes `owner` what the live read returns.
    fn seed(&self, owner: &O, pods: &[Pod]) {
        *self.client.live.lock() = Some(owner.clone());
        self.owners.apply_event(Event::Init);
        self.owners.apply_event(Event::InitApply(owner.clone()));
        self.owners.apply_event(Event::InitDone);
        self.pods.apply_event(Event::Init);
        for pod in pods {
            self.pods.apply_event(Event::InitApply(pod.clone()));
        }
        self.pods.apply_event(Event::InitDone);
    }

    /// The user edits the owner (through its JSON form): a new
    /// resourceVersion, seen by the live read and the informer.
    fn user_edit(&self, f: impl FnOnce(&mut Value)) {
        let cached = self.owners.store().get(NS, "web").unwrap();
        let mut edited = edit(cached.as_ref(), f);
        let rv = edited.meta().resource_version.clone().unwrap_or_default();
        edited.meta_mut().resource_version = Some(format!("{rv}2"));
        *self.client.live.lock() = Some(edited.clone());
        self.owners.apply_event(Event::Apply(edited));
    }

    /// Shows the pods the fake created since the last call in the pod
    /// cache, as the watch would; returns how many.
    fn observe_created(&self) -> usize {
        observe_created(&self.fake, &self.pods)
    }

    fn expectations(&self) -> Option<(i64, i64)> {
        self.controller
            .runtime()
            .expectations()
            .get_expectations(KEY)
            .map(|e| (e.add, e.del))
    }

    /// Runs the controller's workers for `duration` of (paused) time, with
    /// the pods it creates showing up in the pod cache 100 ms later.
    async fn run_for(self, duration: Duration) -> Ran<O> {
        let Rig {
            pods,
            owners,
            fake,
            client,
            controller,
        } = self;
        let queue = controller.runtime().queue().clone();
        let token = CancellationToken::new();
        let task = tokio::spawn(controller.run(token.clone()));
        let watch = tokio::spawn({
            let (fake, pods, token) = (fake.clone(), pods.clone(), token.clone());
            async move {
                while !token.is_cancelled() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    observe_created(&fake, &pods);
                }
            }
        });
        tokio::time::sleep(duration).await;
        token.cancel();
        task.await.unwrap().unwrap();
        watch.await.unwrap();
        Ran {
            _pods: pods,
            _owners: owners,
            fake,
            client,
            queue,
        }
    }
}

/// Shows the pods `fake` created that the `pods` cache does not have yet
/// (handlers run); returns how many.
fn observe_created(fake: &FakePodControl, pods: &Informer<Pod>) -> usize {
    let store = pods.store();
    let new: Vec<Pod> = fake
        .created_pods()
        .into_iter()
        .filter(|p| store.get(NS, p.metadata.name.as_deref().unwrap()).is_none())
        .collect();
    let n = new.len();
    for pod in new {
        pods.apply_event(Event::Apply(pod));
    }
    n
}

/// What is left to inspect after [`Rig::run_for`].
struct Ran<O> {
    _pods: Informer<Pod>,
    _owners: Informer<O>,
    fake: FakePodControl,
    client: Arc<ScriptedClient<O>>,
    queue: ctrlkit_workqueue::WorkQueue<ObjectKey>,
}

/// `(type, reason, message)` of the first condition of `status`.
fn condition(status: &Value) -> (String, String, String) {
    let c = &status["conditions"][0];
    let field = |name: &str| c[name].as_str().unwrap_or_default().to_owned();
    (field("type"), field("reason"), field("message"))
}

fn has_no_conditions(status: &Value) -> bool {
    status
        .get("conditions")
        .is_none_or(|c| c.is_null() || c.as_array().is_some_and(Vec::is_empty))
}

// ----- API errors ---------------------------------------------------------

/// Every API answer a call can fail with, as `(label, code, reason)`.
const API_ERRORS: [(u16, &str); 10] = [
    (400, "BadRequest"),
    (403, "Forbidden"),
    (404, "NotFound"),
    (409, "Conflict"),
    (410, "Gone"),
    (422, "Invalid"),
    (429, "TooManyRequests"),
    (500, "InternalError"),
    (503, "ServiceUnavailable"),
    (504, "Timeout"),
];

fn api_error(code: u16, reason: &str) -> kube::Error {
    let mut status = Status::failure(&format!("injected {code} {reason}"), reason).with_code(code);
    if code == 429 {
        status = status.with_details(StatusDetails {
            retry_after_seconds: 1,
            name: String::new(),
            group: String::new(),
            kind: String::new(),
            uid: String::new(),
            causes: Vec::new(),
        });
    }
    kube::Error::Api(status.boxed())
}

/// Every failure kind: the API statuses plus the transport failures a
/// client sees (connection refused, a timeout), with the text each error
/// message must show.
fn every_failure() -> Vec<(String, ErrorFn)> {
    let mut all: Vec<(String, ErrorFn)> = API_ERRORS
        .iter()
        .map(|&(code, reason)| {
            let f: ErrorFn = Arc::new(move || api_error(code, reason));
            (format!("injected {code} {reason}"), f)
        })
        .collect();
    for (kind, text) in [
        (io::ErrorKind::ConnectionRefused, "connection refused"),
        (io::ErrorKind::TimedOut, "operation timed out"),
    ] {
        let f: ErrorFn =
            Arc::new(move || kube::Error::Service(Box::new(io::Error::new(kind, text))));
        all.push((text.to_owned(), f));
    }
    all
}

fn pod_error(f: &ErrorFn) -> impl Fn() -> PodControlError + Send + Sync + 'static {
    let f = Arc::clone(f);
    move || PodControlError::Api(f())
}

#[tokio::test]
async fn every_api_error_on_create_is_a_retryable_failed_create() {
    for (text, failure) in every_failure() {
        let rig = Rig::<ReplicaSet>::new(500);
        rig.seed(&replica_set("web", 20, "web"), &[]);
        rig.fake
            .fail_after_op(Operation::Create, 0, pod_error(&failure));
        let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
        assert!(matches!(err, Error::CreatePods(_)), "{text}: {err}");
        assert!(!err.is_terminal(), "{text}");
        assert!(err.to_string().contains(&text), "{text}: {err}");
        // Slow start stopped after the first batch of one.
        assert_eq!(rig.fake.create_count(), 1, "{text}");
        // The failed and the never-attempted creates were taken back.
        assert_eq!(rig.expectations(), Some((0, 0)), "{text}");
        let (type_, reason, message) = condition(&rig.client.last_status());
        assert_eq!(
            (type_.as_str(), reason.as_str()),
            ("ReplicaFailure", "FailedCreate"),
            "{text}"
        );
        assert!(message.contains(&text), "{text}: {message}");
    }
}

#[tokio::test]
async fn every_api_error_on_delete_is_a_retryable_failed_delete() {
    for (text, failure) in every_failure() {
        let rig = Rig::<ReplicaSet>::new(500);
        let rs = replica_set("web", 0, "web");
        let pods: Vec<Pod> = (0..3)
            .map(|i| {
                PodSpec::running("web")
                    .owned_by(&rs)
                    .build(&format!("p{i}"))
            })
            .collect();
        rig.seed(&rs, &pods);
        rig.fake
            .fail_after_op(Operation::Delete, 0, pod_error(&failure));
        let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
        assert!(matches!(err, Error::DeletePods(_)), "{text}: {err}");
        assert!(!err.is_terminal(), "{text}");
        assert!(err.to_string().contains(&text), "{text}: {err}");
        assert_eq!(rig.fake.delete_count(), 3, "{text}");
        // No deletion is awaited that the informer will never show.
        assert_eq!(rig.expectations(), Some((0, 0)), "{text}");
        let (type_, reason, _) = condition(&rig.client.last_status());
        assert_eq!(
            (type_.as_str(), reason.as_str()),
            ("ReplicaFailure", "FailedDelete"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn every_api_error_on_an_adoption_patch_fails_the_sync_before_creating() {
    for (text, failure) in every_failure() {
        let rig = Rig::<ReplicaSet>::new(500);
        rig.seed(
            &replica_set("web", 1, "web"),
            &[PodSpec::running("web").build("orphan")],
        );
        rig.fake
            .fail_after_op(Operation::Patch, 0, pod_error(&failure));
        let result = rig.controller.sync(&common::key(KEY)).await;
        if text.starts_with("injected 404") {
            // The orphan is gone: nothing to adopt, so a replacement is made.
            result.unwrap();
            assert_eq!(rig.fake.create_count(), 1);
            continue;
        }
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Claim(_)), "{text}: {err}");
        assert!(!err.is_terminal(), "{text}");
        assert!(err.to_string().contains(&text), "{text}: {err}");
        assert_eq!(rig.fake.create_count(), 0, "{text}");
    }
}

#[tokio::test]
async fn every_api_error_on_the_status_write_is_retried_once_then_reported() {
    for (text, failure) in every_failure() {
        let rig = Rig::<ReplicaSet>::new(500);
        rig.seed(&replica_set("web", 0, "web"), &[]);
        *rig.client.fail_writes.lock() = Some(Arc::clone(&failure));
        let result = rig.controller.sync(&common::key(KEY)).await;
        if text.starts_with("injected 404") {
            // The owner is gone: see `an_owner_deleted_mid_sync_*`.
            assert_eq!(result.unwrap(), ctrlkit_worker::Action::done());
            assert_eq!((rig.client.write_count(), rig.client.gets()), (1, 0));
            continue;
        }
        let err = result.unwrap_err();
        assert!(matches!(err, Error::UpdateStatus { .. }), "{text}: {err}");
        assert!(!err.is_terminal(), "{text}");
        assert!(err.to_string().contains(&text), "{text}: {err}");
        // One write, one fresh read, one more write: never more.
        assert_eq!(
            (rig.client.write_count(), rig.client.gets()),
            (2, 1),
            "{text}"
        );
    }
}

/// Under a failure that never ends, the key is retried with the queue's
/// exponential backoff (5 ms doubling, capped at 1000 s): about 17 syncs in
/// ten minutes, whatever the error. When the failure ends, the work is done.
#[tokio::test(start_paused = true)]
async fn retries_under_every_api_error_back_off_and_recover() {
    for (text, failure) in every_failure() {
        let rig = Rig::<ReplicaSet>::new(500);
        rig.seed(&replica_set("web", 5, "web"), &[]);
        rig.fake
            .fail_after_op(Operation::Create, 0, pod_error(&failure));
        let client = Arc::clone(&rig.client);
        // After ten failing minutes the failure ends.
        let checkpoint = tokio::spawn({
            let fake = rig.fake.clone();
            async move {
                tokio::time::sleep(TEN_MINUTES).await;
                let attempts = fake.create_count();
                fake.clear_failures();
                attempts
            }
        });
        // Then at most one full backoff (1000 s) passes before the retry.
        let ran = rig.run_for(TEN_MINUTES + Duration::from_secs(1100)).await;
        let failing_syncs = checkpoint.await.unwrap();
        println!("{text}: {failing_syncs} failing syncs in ten minutes");
        assert!(
            (8..=25).contains(&failing_syncs),
            "{text}: {failing_syncs} syncs in ten minutes"
        );
        assert_eq!(ran.fake.created_pods().len(), 5, "{text}: nothing lost");
        assert!(
            has_no_conditions(&client.last_status()),
            "{text}: {}",
            client.last_status()
        );
        assert_eq!(ran.queue.num_requeues(&common::key(KEY)), 0, "{text}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_a_retryable_error() {
    // A port nobody listens on.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let pods = Informer::<Pod>::manual().build();
    let owners = Informer::<ReplicaSet>::manual().build();
    let owner_client = Arc::new(ScriptedClient::new(None));
    let controller = ReplicaSetController::from_parts(
        pods,
        owners.clone(),
        Arc::new(KubePodControl::without_events(client)),
        owner_client.clone(),
        ControllerOptions::default(),
    )
    .unwrap();
    let rs = replica_set("web", 3, "web");
    *owner_client.live.lock() = Some(rs.clone());
    owners.apply_event(Event::Apply(rs));
    let err = controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(matches!(err, Error::CreatePods(_)), "{err}");
    assert!(!err.is_terminal());
    assert!(!err.to_string().is_empty());
    assert_eq!(
        controller
            .runtime()
            .expectations()
            .get_expectations(KEY)
            .map(|e| e.add),
        Some(0)
    );
    let (type_, reason, message) = condition(&owner_client.last_status());
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("ReplicaFailure", "FailedCreate")
    );
    assert!(!message.is_empty());
}

// ----- invalid specs ------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn an_invalid_selector_operator_is_reported_once_and_not_retried() {
    let (logs, _guard) = Logs::capture();
    let rig = Rig::<ReplicaSet>::new(500);
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["spec"]["selector"] =
            json!({"matchExpressions": [{"key": "app", "operator": "Foo", "values": ["web"]}]});
    });
    rig.seed(&rs, &[PodSpec::running("web").build("orphan")]);

    let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidSelector { .. }), "{err}");
    assert!(err.is_terminal());
    assert!(err.to_string().contains("\"Foo\""), "{err}");
    let status = rig.client.last_status();
    let (type_, reason, message) = condition(&status);
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("ReplicaFailure", "InvalidSelector")
    );
    assert!(
        message.contains("not a valid label selector operator"),
        "{message}"
    );
    assert_eq!(status["observedGeneration"], 1);
    // Nothing adopted, nothing created.
    assert_eq!((rig.fake.create_count(), rig.fake.patch_count()), (0, 0));

    // Once the watch shows the condition on the owner, a sync writes
    // nothing more.
    rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    assert_eq!(rig.client.write_count(), 1);

    // Run for ten minutes: the key is dropped after its one sync.
    rig.controller.runtime().queue().add(common::key(KEY));
    let ran = rig.run_for(TEN_MINUTES).await;
    assert_eq!(ran.client.write_count(), 1);
    assert_eq!(ran.fake.create_count(), 0);
    let failures = logs.lines("terminal error");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("invalid pod selector"), "{failures:?}");
    assert_eq!(ran.queue.num_requeues(&common::key(KEY)), 0);
}

#[tokio::test]
async fn a_selector_not_matching_the_template_is_reported_until_fixed() {
    let rig = Rig::<ReplicaSet>::new(500);
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    });
    rig.seed(&rs, &[]);
    let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(matches!(err, Error::SelectorMismatch { .. }), "{err}");
    assert!(err.is_terminal());
    assert_eq!(rig.fake.create_count(), 0);
    let (type_, reason, message) = condition(&rig.client.last_status());
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("ReplicaFailure", "SelectorMismatch")
    );
    assert!(
        message.contains("does not match template labels"),
        "{message}"
    );

    // The user fixes the template: pods are made and the condition goes.
    rig.user_edit(|v| {
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "web"});
        v["metadata"]["generation"] = json!(2);
    });
    rig.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(rig.fake.created_pods().len(), 2);
    let status = rig.client.last_status();
    assert!(has_no_conditions(&status), "{status}");
    assert_eq!(status["observedGeneration"], 2);
}

#[tokio::test]
async fn a_failed_create_after_a_fixed_selector_replaces_the_invalid_spec_reason() {
    let rig = Rig::<ReplicaSet>::new(500);
    let rs = edit(&replica_set("web", 2, "web"), |v| {
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "other"});
    });
    rig.seed(&rs, &[]);
    rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    rig.user_edit(|v| {
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "web"});
    });
    rig.fake.fail_after_op(Operation::Create, 0, || {
        PodControlError::api_status(403, "Forbidden", "exceeded quota")
    });
    rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    let (_, reason, message) = condition(&rig.client.last_status());
    assert_eq!(reason, "FailedCreate");
    assert!(message.contains("exceeded quota"), "{message}");
}

#[tokio::test]
async fn an_invalid_replication_controller_selector_is_reported() {
    let rig = Rig::<ReplicationController>::new(500);
    let rc = edit(&replication_controller("web", 2, "web"), |v| {
        v["spec"]["selector"] = json!({"app": "not a label value!"});
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "not a label value!"});
    });
    rig.seed(&rc, &[]);
    let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(matches!(err, Error::InvalidSelector { .. }), "{err}");
    assert!(err.to_string().contains("invalid label value"), "{err}");
    let (_, reason, _) = condition(&rig.client.last_status());
    assert_eq!(reason, "InvalidSelector");
    assert_eq!(rig.fake.create_count(), 0);
}

#[tokio::test]
async fn negative_replicas_scale_to_zero_with_a_warning() {
    for replicas in [-1, -5, i32::MIN] {
        let (logs, _guard) = Logs::capture();
        let rig = Rig::<ReplicaSet>::new(500);
        let rs = replica_set("web", replicas, "web");
        let pods: Vec<Pod> = (0..2)
            .map(|i| {
                PodSpec::running("web")
                    .owned_by(&rs)
                    .build(&format!("p{i}"))
            })
            .collect();
        rig.seed(&rs, &pods);
        rig.controller.sync(&common::key(KEY)).await.unwrap();
        assert_eq!(rig.fake.delete_count(), 2, "{replicas}");
        assert_eq!(rig.expectations(), Some((0, 2)), "{replicas}");
        let warnings = logs.lines("negative spec.replicas");
        assert!(warnings[0].contains("WARN"), "{warnings:?}");
        assert!(warnings[0].contains(&replicas.to_string()), "{warnings:?}");
        // The status counts what there is; nothing negative.
        let status = rig.client.last_status();
        assert_eq!(status["replicas"], 2, "{replicas}");

        // Once the pods are gone, the owner stays at zero.
        for pod in &pods {
            rig.pods.apply_event(Event::Delete(pod.clone()));
        }
        rig.controller.sync(&common::key(KEY)).await.unwrap();
        assert_eq!(
            (rig.fake.create_count(), rig.fake.delete_count()),
            (0, 2),
            "{replicas}"
        );
        assert_eq!(rig.client.last_status()["replicas"], 0);
    }
}

#[tokio::test]
async fn absurd_replica_counts_create_at_most_a_burst_per_sync() {
    for (replicas, burst) in [(1_000_000, 500), (i32::MAX, 500), (i32::MAX, 7)] {
        let rig = Rig::<ReplicaSet>::new(burst);
        rig.seed(&replica_set("web", replicas, "web"), &[]);
        let mut observed = 0usize;
        for round in 0..3 {
            rig.controller.sync(&common::key(KEY)).await.unwrap();
            let created = rig.fake.created_pods();
            assert_eq!(created.len(), burst, "{replicas}/{burst} round {round}");
            let burst_i64 = i64::try_from(burst).unwrap();
            assert_eq!(rig.expectations(), Some((burst_i64, 0)));
            // Until the informer shows them, nothing more is created.
            rig.controller.sync(&common::key(KEY)).await.unwrap();
            assert_eq!(rig.fake.create_count(), burst);
            // The status reports what the informer showed, never overflows.
            let status = rig.client.last_status();
            assert_eq!(status["replicas"], observed, "{status}");
            assert!(has_no_conditions(&status), "{status}");
            assert_eq!(rig.observe_created(), burst);
            rig.fake.clear();
            observed += burst;
            assert_eq!(rig.expectations(), Some((0, 0)));
        }
    }
}

#[tokio::test(start_paused = true)]
async fn absurd_min_ready_seconds_neither_overflow_nor_spin() {
    for min_ready in [i32::MAX, -1, i32::MIN] {
        let rig = Rig::<ReplicaSet>::new(500);
        let rs = edit(&replica_set("web", 1, "web"), |v| {
            v["spec"]["minReadySeconds"] = json!(min_ready);
        });
        let pod = PodSpec::running("web")
            .owned_by(&rs)
            .ready_since(5)
            .build("p0");
        rig.seed(&rs, &[pod]);
        let action = rig.controller.sync(&common::key(KEY)).await.unwrap();
        let status = rig.client.last_status();
        if min_ready > 0 {
            // Ready, not yet available: one far requeue (when the pod
            // becomes available), no overflow.
            let delay = action.requeue_delay().unwrap();
            let max = Duration::from_secs(u64::from(min_ready.unsigned_abs()));
            assert!(
                delay <= max && delay > max - Duration::from_secs(60),
                "{delay:?}"
            );
            assert_eq!(status["availableReplicas"], 0);
        } else {
            assert_eq!(action, ctrlkit_worker::Action::done());
            assert_eq!(status["availableReplicas"], 1, "{min_ready}");
        }
        let ran = rig.run_for(TEN_MINUTES).await;
        // The initial list's sync plus the one above: no spinning.
        assert!(ran.client.write_count() <= 2, "{min_ready}");
    }
}

// ----- failures mid-sync --------------------------------------------------

#[tokio::test]
async fn a_template_the_server_rejects_stops_slow_start_at_the_first_batch() {
    let rig = Rig::<ReplicaSet>::new(500);
    rig.seed(&replica_set("web", 50, "web"), &[]);
    rig.fake.fail_after_op(Operation::Create, 0, || {
        PodControlError::api_status(
            422,
            "Invalid",
            "Pod \"web-x\" is invalid: spec.containers: Required value",
        )
    });
    let err = rig.controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(matches!(err, Error::CreatePods(_)), "{err}");
    assert!(!err.is_terminal());
    assert_eq!(rig.fake.create_count(), 1);
    assert_eq!(rig.expectations(), Some((0, 0)));
    let (_, reason, message) = condition(&rig.client.last_status());
    assert_eq!(reason, "FailedCreate");
    assert!(
        message.contains("spec.containers: Required value"),
        "{message}"
    );
}

#[tokio::test]
async fn an_owner_deleted_mid_sync_ends_the_sync_quietly() {
    // The status write finds it gone (404): expectations set by this very
    // sync are dropped, no error, no retry.
    let rig = Rig::<ReplicaSet>::new(500);
    rig.seed(&replica_set("web", 3, "web"), &[]);
    *rig.client.fail_writes.lock() = Some(Arc::new(|| api_error(404, "NotFound")));
    let action = rig.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(action, ctrlkit_worker::Action::done());
    assert_eq!(rig.fake.create_count(), 3);
    assert_eq!(rig.expectations(), None);
    assert_eq!((rig.client.write_count(), rig.client.gets()), (1, 0));

    // The live read before adopting finds it gone: nothing adopted, nothing
    // created, expectations dropped.
    let rig = Rig::<ReplicaSet>::new(500);
    rig.seed(
        &replica_set("web", 3, "web"),
        &[PodSpec::running("web").build("orphan")],
    );
    rig.controller
        .runtime()
        .expectations()
        .expect_creations(KEY, 0);
    *rig.client.live.lock() = None;
    let action = rig.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(action, ctrlkit_worker::Action::done());
    assert_eq!((rig.fake.patch_count(), rig.fake.create_count()), (0, 0));
    assert_eq!(rig.expectations(), None);
    assert_eq!(rig.client.write_count(), 0);

    // Deleted and re-created under the same name: the status computed for
    // the old one is not written to the new one.
    let rig = Rig::<ReplicaSet>::new(500);
    let old = replica_set("web", 0, "web");
    rig.seed(&old, &[]);
    *rig.client.fail_writes.lock() = Some(Arc::new(|| api_error(409, "Conflict")));
    *rig.client.live.lock() = Some(edit(&old, |v| v["metadata"]["uid"] = json!("uid-new")));
    let action = rig.controller.sync(&common::key(KEY)).await.unwrap();
    assert_eq!(action, ctrlkit_worker::Action::done());
    assert_eq!((rig.client.write_count(), rig.client.gets()), (1, 1));
}

#[tokio::test(start_paused = true)]
async fn an_owner_deleted_behind_the_cache_is_synced_once_not_retried() {
    let (logs, _guard) = Logs::capture();
    let rig = Rig::<ReplicaSet>::new(500);
    rig.seed(
        &replica_set("web", 3, "web"),
        &[PodSpec::running("web").build("orphan")],
    );
    *rig.client.live.lock() = None;
    let ran = rig.run_for(TEN_MINUTES).await;
    assert_eq!(ran.client.gets(), 1);
    assert_eq!((ran.fake.patch_count(), ran.fake.create_count()), (0, 0));
    assert!(
        logs.lines("sync failed").is_empty(),
        "{:?}",
        logs.lines("sync failed")
    );
    assert_eq!(logs.lines("owner is gone").len(), 1);
}

#[tokio::test]
async fn a_malformed_deletion_cost_counts_as_zero_and_is_logged() {
    let (logs, _guard) = Logs::capture();
    let rig = Rig::<ReplicaSet>::new(500);
    let rs = replica_set("web", 2, "web");
    let costs = [
        ("keep-100", "100"),
        ("keep-50", "50"),
        ("plus", "+5"),
        ("word", "high"),
        ("huge", "99999999999"),
        ("empty", ""),
    ];
    let pods: Vec<Pod> = costs
        .iter()
        .map(|(name, cost)| {
            let pod = PodSpec::running("web").owned_by(&rs).build(name);
            edit(&pod, |v| {
                v["metadata"]["annotations"] = json!({POD_DELETION_COST_ANNOTATION: cost});
            })
        })
        .collect();
    rig.seed(&rs, &pods);
    rig.controller.sync(&common::key(KEY)).await.unwrap();
    let mut deleted = rig.fake.deleted_pod_names();
    deleted.sort();
    assert_eq!(deleted, ["empty", "huge", "plus", "word"]);
    let warnings = logs.lines("malformed deletion cost");
    assert_eq!(warnings.len(), 4, "{warnings:?}");
    for (name, cost) in &costs[2..] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&format!("pod=\"{name}\""))
                    || w.contains(&format!("pod={name}"))),
            "{name}: {warnings:?}"
        );
        assert!(
            warnings.iter().any(|w| w.contains(&format!("{cost:?}"))),
            "{cost}: {warnings:?}"
        );
    }
}

// ----- against a real API server (testcluster) ---------------------------

/// A controller built as the binaries build it, against testcluster.
struct Live {
    tc: TestCluster,
    factory: SharedInformerFactory,
    token: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl Live {
    async fn start<O: ReplicaOwner>(faults: FaultConfig) -> Live {
        let tc = TestCluster::start(TestClusterConfig::default().with_faults(faults))
            .await
            .unwrap();
        let factory = SharedInformerFactory::new(tc.client());
        let controller = Controller::<O>::new(
            tc.client(),
            &factory,
            ControllerOptions {
                namespace: Some(NS.into()),
                ..ControllerOptions::default()
            },
            None,
        )
        .unwrap();
        factory.start();
        let token = CancellationToken::new();
        let task = tokio::spawn(controller.run(token.clone()));
        Live {
            tc,
            factory,
            token,
            task,
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.tc.client(), NS)
    }

    async fn events(&self, reason: &str) -> Vec<k8s_openapi::api::events::v1::Event> {
        self.api::<k8s_openapi::api::events::v1::Event>()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect()
    }

    async fn status<K>(&self, name: &str) -> Value
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let obj = self.api::<K>().get(name).await.unwrap();
        serde_json::to_value(obj).unwrap()["status"].clone()
    }

    async fn stop(self) {
        self.token.cancel();
        self.task.await.unwrap().unwrap();
        self.factory.shutdown().await;
        self.tc.shutdown().await;
    }
}

fn good_pod_spec() -> Value {
    json!({"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]})
}

/// The server accepts this RC (it checks only that selector and template
/// labels agree), but its selector value is no valid label value, so the
/// controller refuses it: a Warning event and the condition, once.
#[tokio::test(start_paused = true)]
async fn testcluster_an_unusable_selector_gets_an_event_and_a_condition_once() {
    let live = Live::start::<ReplicationController>(FaultConfig::none()).await;
    let rc = edit(&replication_controller("bad", 2, "web"), |v| {
        v["metadata"] = json!({"name": "bad"});
        v["spec"]["selector"] = json!({"app": "not a label value!"});
        v["spec"]["template"]["metadata"]["labels"] = json!({"app": "not a label value!"});
    });
    live.api::<ReplicationController>()
        .create(&PostParams::default(), &rc)
        .await
        .unwrap();
    let before = live.tc.requests();
    tokio::time::sleep(TEN_MINUTES).await;
    let status = live.status::<ReplicationController>("bad").await;
    let (type_, reason, message) = condition(&status);
    assert_eq!(
        (type_.as_str(), reason.as_str()),
        ("ReplicaFailure", "InvalidSelector"),
        "{status}"
    );
    assert!(message.contains("invalid label value"), "{message}");
    let events = live.events("InvalidSelector").await;
    assert!(!events.is_empty());
    assert_eq!(
        events[0].type_.as_deref(),
        Some("Warning"),
        "{:?}",
        events[0]
    );
    let requests = live.tc.requests().since(&before);
    // One status write (and the sync its watch event triggers writes
    // nothing); no pods; a bounded number of event writes.
    assert_eq!(
        requests
            .count("update", "replicationcontrollers/status")
            .total(),
        1
    );
    assert_eq!(requests.count("create", "pods").total(), 0);
    let event_writes =
        requests.count("create", "events").total() + requests.count("patch", "events").total();
    assert!(event_writes <= 4, "{event_writes} event writes");
    live.stop().await;
}

/// The server rejects every pod (422): one create per sync, a FailedCreate
/// condition and Warning event, exponential backoff; once the template is
/// fixed, the pods are made.
#[tokio::test(start_paused = true)]
async fn testcluster_a_rejected_template_backs_off_and_recovers() {
    let live = Live::start::<ReplicaSet>(FaultConfig::none()).await;
    live.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &live_replica_set("web", 20, json!({"containers": []})),
        )
        .await
        .unwrap();
    tokio::time::sleep(TEN_MINUTES).await;
    let creates = live.tc.requests().count("create", "pods");
    println!(
        "422 template: {} rejected creates in ten minutes",
        creates.client_error
    );
    assert_eq!(creates.success, 0);
    assert!(
        (2..=25).contains(&creates.client_error),
        "{} rejected creates in ten minutes",
        creates.client_error
    );
    let status = live.status::<ReplicaSet>("web").await;
    let (_, reason, message) = condition(&status);
    assert_eq!(reason, "FailedCreate");
    assert!(message.contains("spec.containers"), "{message}");
    let events = live.events("FailedCreate").await;
    assert!(!events.is_empty());
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert!(
        events[0]
            .note
            .as_deref()
            .is_some_and(|n| n.contains("spec.containers")),
        "{:?}",
        events[0]
    );

    live.api::<ReplicaSet>()
        .patch(
            "web",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"template": {"spec": good_pod_spec()}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(60)).await;
    let status = live.status::<ReplicaSet>("web").await;
    assert_eq!(status["replicas"], 20, "{status}");
    assert!(has_no_conditions(&status), "{status}");
    live.stop().await;
}

/// A 253-character owner name (the longest there is) cannot prefix a pod
/// name as `<name>-`: the bare name is used, cut to 58 characters like the
/// API server does, so every pod name is valid (at most 63 characters).
/// A cut that ends on a dot still leaves a valid name.
#[tokio::test(start_paused = true)]
async fn testcluster_a_very_long_owner_name_still_gives_valid_pod_names() {
    let live = Live::start::<ReplicaSet>(FaultConfig::none()).await;
    // As with kube-apiserver, a DNS-1123 subdomain's parts are not limited
    // to 63 characters, only the whole name to 253.
    let long = "a".repeat(253);
    let dotted = format!("{}.{}", "e".repeat(57), "f".repeat(60));
    for name in [&long, &dotted] {
        live.api::<ReplicaSet>()
            .create(
                &PostParams::default(),
                &live_replica_set(name, 2, good_pod_spec()),
            )
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_secs(30)).await;
    let pods = live
        .api::<Pod>()
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(pods.items.len(), 4);
    for pod in &pods.items {
        let name = pod.metadata.name.as_deref().unwrap();
        assert!(name.len() <= 63, "{name}");
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0].name;
        assert!(name.starts_with(&owner[..58]), "{name} / {owner}");
    }
    for name in [&long, &dotted] {
        assert_eq!(live.status::<ReplicaSet>(name).await["replicas"], 2);
    }
    live.stop().await;
}

/// kube's client retries a 429 itself, waiting the server's Retry-After
/// (1 s here), and the queue backs off between syncs: over ten minutes the
/// controller never sends more than one create per Retry-After second.
#[tokio::test(start_paused = true)]
async fn testcluster_too_many_requests_are_retried_no_faster_than_retry_after() {
    let faults = FaultConfig::none().with_error(
        ErrorRule::verb(
            "create",
            1.0,
            ErrorKind::TooManyRequests {
                retry_after_secs: 1,
            },
        )
        .for_resource("pods"),
    );
    let live = Live::start::<ReplicaSet>(faults).await;
    live.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &live_replica_set("web", 5, good_pod_spec()),
        )
        .await
        .unwrap();
    tokio::time::sleep(TEN_MINUTES).await;
    let throttled = live.tc.requests().count("create", "pods").client_error;
    println!("429 Retry-After 1 s: {throttled} throttled creates in ten minutes");
    assert!(
        (2..=600).contains(&throttled),
        "{throttled} throttled creates"
    );
    live.tc.faults().clear();
    tokio::time::sleep(Duration::from_secs(1100)).await;
    assert_eq!(live.status::<ReplicaSet>("web").await["replicas"], 5);
    live.stop().await;
}

/// A 500 on pod creates: the `ReplicaFailure` condition and the
/// `FailedCreate` events carry the server's own message (what `kubectl
/// describe` shows), never a Rust dump of the client error.
#[tokio::test(start_paused = true)]
async fn testcluster_a_failed_create_reports_the_servers_message() {
    let faults = FaultConfig::none()
        .with_error(ErrorRule::verb("create", 1.0, ErrorKind::InternalError).for_resource("pods"));
    let live = Live::start::<ReplicaSet>(faults).await;
    live.api::<ReplicaSet>()
        .create(
            &PostParams::default(),
            &live_replica_set("web", 2, good_pod_spec()),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let server_message = "injected fault: internal error while handling";
    let dump = |text: &str| {
        [
            "ApiError",
            "Status {",
            "API request failed",
            "Some(",
            "code: 500",
        ]
        .iter()
        .any(|debris| text.contains(debris))
    };
    let status = live.status::<ReplicaSet>("web").await;
    let (kind, reason, message) = condition(&status);
    assert_eq!(
        (kind.as_str(), reason.as_str()),
        ("ReplicaFailure", "FailedCreate")
    );
    assert!(message.starts_with(server_message), "{message}");
    assert!(!dump(&message), "{message}");
    let events = live.events("FailedCreate").await;
    assert!(!events.is_empty());
    for event in events {
        let note = event.note.unwrap_or_default();
        assert!(
            note.starts_with(&format!("Error creating: {server_message}")),
            "{note}"
        );
        assert!(!dump(&note), "{note}");
    }
    live.tc.faults().clear();
    live.stop().await;
}

/// Server errors on the writes the controller makes (pod creates and the
/// status write), and a server too slow to answer: bounded requests over
/// ten minutes, then recovery.
#[tokio::test(start_paused = true)]
async fn testcluster_server_errors_and_timeouts_back_off_and_recover() {
    let cases: Vec<(&str, FaultConfig)> = vec![
        (
            "500 on create",
            FaultConfig::none().with_error(
                ErrorRule::verb("create", 1.0, ErrorKind::InternalError).for_resource("pods"),
            ),
        ),
        (
            "504 on create",
            FaultConfig::none().with_error(
                ErrorRule::verb("create", 1.0, ErrorKind::Timeout).for_resource("pods"),
            ),
        ),
        (
            "409 on status",
            FaultConfig::none().with_error(
                ErrorRule::verb("update", 1.0, ErrorKind::Conflict)
                    .for_resource("replicasets/status"),
            ),
        ),
        (
            "500 on status",
            FaultConfig::none().with_error(
                ErrorRule::verb("update", 1.0, ErrorKind::InternalError)
                    .for_resource("replicasets/status"),
            ),
        ),
    ];
    for (what, faults) in cases {
        let live = Live::start::<ReplicaSet>(FaultConfig::none()).await;
        live.api::<ReplicaSet>()
            .create(
                &PostParams::default(),
                &live_replica_set("web", 3, good_pod_spec()),
            )
            .await
            .unwrap();
        live.tc.faults().set_config(faults);
        // Scale up so there is work to fail at.
        live.api::<ReplicaSet>()
            .patch(
                "web",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(json!({"spec": {"replicas": 6}})),
            )
            .await
            .unwrap();
        let before = live.tc.requests();
        tokio::time::sleep(TEN_MINUTES).await;
        let failed = live.tc.requests().since(&before).total().failed();
        println!("{what}: {failed} failed requests in ten minutes");
        // kube retries 504 up to 15 times per call; everything else once per
        // sync, with the queue's backoff in between.
        assert!(
            (2..=16 * 25).contains(&failed),
            "{what}: {failed} failed requests"
        );
        live.tc.faults().clear();
        tokio::time::sleep(Duration::from_secs(1100)).await;
        let status = live.status::<ReplicaSet>("web").await;
        assert_eq!(status["replicas"], 6, "{what}: {status}");
        assert!(has_no_conditions(&status), "{what}: {status}");
        live.stop().await;
    }

    // A server that answers after 10 minutes: the client's read timeout
    // ends each call; nothing hangs, nothing spins.
    let tc = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let mut config = kube::Config::new(tc.base_url().parse().unwrap());
    config.read_timeout = Some(Duration::from_secs(5));
    let slow_client = kube::Client::try_from(config).unwrap();
    let pods = Informer::<Pod>::manual().build();
    let owners = Informer::<ReplicaSet>::manual().build();
    let owner_client = Arc::new(ScriptedClient::new(None));
    let controller = ReplicaSetController::from_parts(
        pods,
        owners.clone(),
        Arc::new(KubePodControl::without_events(slow_client)),
        owner_client.clone(),
        ControllerOptions::default(),
    )
    .unwrap();
    let rs = replica_set("web", 3, "web");
    *owner_client.live.lock() = Some(rs.clone());
    owners.apply_event(Event::Apply(rs));
    tc.faults()
        .set_config(FaultConfig::none().with_latency(Latency::Fixed(TEN_MINUTES)));
    let started = tokio::time::Instant::now();
    let err = controller.sync(&common::key(KEY)).await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    assert!(matches!(err, Error::CreatePods(_)), "{err}");
    assert!(!err.is_terminal());
    let (_, reason, _) = condition(&owner_client.last_status());
    assert_eq!(reason, "FailedCreate");
    tc.faults().clear();
    tc.shutdown().await;
}
