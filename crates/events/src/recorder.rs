//! The [`Recorder`] handle and the background writer behind it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{Event, EventType, Reporter};
use kube::{Api, Client};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::correlator::{Correlated, Correlator, CorrelatorConfig};
use crate::error::{PublishError, Verb, WriteError};

/// How a [`Recorder`] queues, correlates and writes events. The defaults
/// are client-go's (`tools/record`).
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Events waiting for the background writer at most; more are dropped
    /// (client-go: 1000).
    pub queue_capacity: usize,
    /// Entries in each of the correlator's three LRU caches (client-go:
    /// 4096).
    pub cache_size: usize,
    /// Distinct messages of similar events after which they are combined
    /// into one aggregate event (client-go: 10).
    pub aggregate_max_events: usize,
    /// Similar events further apart than this start a new group
    /// (client-go: 10 minutes).
    pub aggregate_window: Duration,
    /// Events one source may write about one object in a burst
    /// (client-go: 25).
    pub spam_burst: u32,
    /// Time to earn back one event of the burst (client-go: 5 minutes).
    pub spam_refill: Duration,
    /// Pause between tries of a write that failed in transport; the first
    /// pause is a random part of it (client-go: 10 s).
    pub retry_interval: Duration,
    /// Tries of one write before the event is given up (client-go: 12).
    pub max_tries: u32,
}

impl Default for RecorderConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            cache_size: 4096,
            aggregate_max_events: 10,
            aggregate_window: Duration::from_secs(600),
            spam_burst: 25,
            spam_refill: Duration::from_secs(300),
            retry_interval: Duration::from_secs(10),
            max_tries: 12,
        }
    }
}

/// Counts of what a [`Recorder`] did, from [`Recorder::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecorderStats {
    /// Events accepted by [`Recorder::publish`].
    pub published: u64,
    /// Events dropped because the queue was full or the recorder shut down.
    pub dropped: u64,
    /// Events the spam filter kept from the API server.
    pub filtered: u64,
    /// Events created on the API server.
    pub created: u64,
    /// Existing events patched with a new count.
    pub patched: u64,
    /// Events given up after a failed write.
    pub failed: u64,
    /// Cache entries looked up, inserted or evicted by the correlator so
    /// far: the work behind the events, which grows by a constant per
    /// event however many were recorded before.
    pub cache_entries_touched: u64,
    /// Entries held by the correlator's caches now (at most three times
    /// [`RecorderConfig::cache_size`]).
    pub cache_entries: u64,
}

#[derive(Default)]
struct Counters {
    published: AtomicU64,
    dropped: AtomicU64,
    filtered: AtomicU64,
    created: AtomicU64,
    patched: AtomicU64,
    failed: AtomicU64,
    touched: AtomicU64,
    entries: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// One event waiting for the writer.
struct Pending {
    type_: EventType,
    reason: String,
    message: Option<String>,
    action: String,
    related: Option<ObjectReference>,
    regarding: ObjectReference,
    at: Timestamp,
}

enum Command {
    Record(Box<Pending>),
    /// Answer once everything queued before is handled.
    Flush(oneshot::Sender<()>),
    /// Handle what is queued (one try each), then stop.
    Stop(oneshot::Sender<()>),
}

/// Wall-clock timestamps that advance with tokio's clock, so a test on
/// paused time (`tokio::time::advance`) moves the events' timestamps and
/// the correlator's windows with it.
#[derive(Debug, Clone, Copy)]
struct Clock {
    start: Timestamp,
    since: tokio::time::Instant,
}

impl Clock {
    fn new() -> Self {
        Self {
            start: Timestamp::now(),
            since: tokio::time::Instant::now(),
        }
    }

    fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.since);
        jiff::SignedDuration::try_from(elapsed)
            .ok()
            .and_then(|d| self.start.checked_add(d).ok())
            .unwrap_or(Timestamp::MAX)
    }
}

/// The nanoseconds of `at`, made unique in this process, for event names
/// (`<object>.<hex nanoseconds>` as client-go): events published at the
/// same instant (paused time, a coarse clock) must not collide.
fn unique_nanos(at: Timestamp) -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let wanted = u64::try_from(at.as_nanosecond()).unwrap_or(0);
    let mut last = LAST.load(Ordering::Relaxed);
    loop {
        let next = wanted.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

fn event_name(object: &str, at: Timestamp) -> String {
    format!("{object}.{:x}", unique_nanos(at))
}

struct Shared {
    tx: mpsc::Sender<Command>,
    /// The writer until it is spawned, on the first use inside a runtime.
    pending_worker: Mutex<Option<Worker>>,
    started: AtomicBool,
    /// Cancelled by [`Recorder::shutdown`]: the writer stops pausing
    /// between tries at once, even mid-retry.
    stopping: CancellationToken,
    counters: Arc<Counters>,
    reporter: Reporter,
    clock: Clock,
    capacity: usize,
}

/// Records Kubernetes events (core/v1 `Event`s, as client-go's
/// `tools/record` and the kube-controller-manager's controllers write
/// them) with client-go's correlation: similar events aggregated, repeats
/// counted on one event, a spam filter per source and object. See the
/// [crate documentation](crate).
///
/// [`publish`](Self::publish) never waits: it queues the event for a
/// background task (spawned on the first publish inside a Tokio runtime)
/// and returns. A full queue drops the event and counts it. Cloning gives
/// another handle to the same queue and caches. When the last handle is
/// dropped the task writes what is queued and ends; [`shutdown`] does the
/// same and waits for it, [`flush`] waits for what is queued without
/// stopping.
///
/// [`shutdown`]: Self::shutdown
/// [`flush`]: Self::flush
#[derive(Clone)]
pub struct Recorder {
    shared: Arc<Shared>,
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.shared.reporter)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing through `client` as `reporter` (the controller's
    /// name, e.g. `"replicaset-controller"`, becomes the events' source
    /// component and reporting controller), with client-go's defaults.
    pub fn new(client: Client, reporter: impl Into<Reporter>) -> Self {
        Self::with_config(client, reporter, RecorderConfig::default())
    }

    /// A recorder with the given tuning.
    pub fn with_config(
        client: Client,
        reporter: impl Into<Reporter>,
        config: RecorderConfig,
    ) -> Self {
        let capacity = config.queue_capacity.max(1);
        let (tx, rx) = mpsc::channel(capacity);
        let counters = Arc::new(Counters::default());
        let stopping = CancellationToken::new();
        let worker = Worker {
            client,
            rx,
            correlator: Correlator::new(CorrelatorConfig {
                cache_size: config.cache_size,
                aggregate_max_events: config.aggregate_max_events,
                aggregate_window: config.aggregate_window,
                spam_burst: config.spam_burst,
                spam_refill: config.spam_refill,
            }),
            counters: Arc::clone(&counters),
            retry_interval: config.retry_interval,
            max_tries: config.max_tries.max(1),
            stopping: stopping.clone(),
        };
        Self {
            shared: Arc::new(Shared {
                tx,
                pending_worker: Mutex::new(Some(worker)),
                started: AtomicBool::new(false),
                stopping,
                counters,
                reporter: reporter.into(),
                clock: Clock::new(),
                capacity,
            }),
        }
    }

    /// The reporter events are recorded as.
    pub fn reporter(&self) -> &Reporter {
        &self.shared.reporter
    }

    /// Queues `event` about `regarding` (usually `obj.object_ref(&())`)
    /// and returns at once. `event.note` is the message, `event.secondary`
    /// the related object, `event.action` the action.
    ///
    /// The event is lost if this fails (see [`PublishError`]); a failure to
    /// write it later is logged by the background task.
    pub fn publish(&self, event: &Event, regarding: &ObjectReference) -> Result<(), PublishError> {
        if regarding.name.as_deref().is_none_or(str::is_empty) {
            return Err(PublishError::UnnamedObject {
                kind: regarding.kind.clone(),
            });
        }
        self.start_worker();
        let pending = Box::new(Pending {
            type_: event.type_,
            reason: event.reason.clone(),
            message: event.note.clone(),
            action: event.action.clone(),
            related: event.secondary.clone(),
            regarding: regarding.clone(),
            at: self.shared.clock.now(),
        });
        let counters = &self.shared.counters;
        match self.shared.tx.try_send(Command::Record(pending)) {
            Ok(()) => {
                bump(&counters.published);
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(_)) => {
                let dropped = counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // A burst can drop thousands: warn on the first and every
                // 1,000th (with the total), the rest at debug.
                if dropped == 1 || dropped.is_multiple_of(1000) {
                    tracing::warn!(
                        reason = %event.reason,
                        object = regarding.name.as_deref().unwrap_or(""),
                        dropped_total = dropped,
                        "too many queued events: event dropped"
                    );
                } else {
                    tracing::debug!(
                        reason = %event.reason,
                        object = regarding.name.as_deref().unwrap_or(""),
                        "too many queued events: event dropped"
                    );
                }
                Err(PublishError::QueueFull {
                    capacity: self.shared.capacity,
                })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                bump(&counters.dropped);
                Err(PublishError::ShutDown)
            }
        }
    }

    /// Waits until every event published before this call was written,
    /// filtered or given up. Returns at once after a shutdown.
    pub async fn flush(&self) {
        self.start_worker();
        let (done, wait) = oneshot::channel();
        if self.shared.tx.send(Command::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    /// Writes what is queued (each event tried once, without waiting
    /// between tries), then stops the background task; later publishes
    /// fail with [`PublishError::ShutDown`]. Waits for it to finish.
    pub async fn shutdown(&self) {
        self.shared.stopping.cancel();
        self.start_worker();
        let (done, wait) = oneshot::channel();
        if self.shared.tx.send(Command::Stop(done)).await.is_ok() {
            let _ = wait.await;
        }
    }

    /// What the recorder has done so far.
    pub fn stats(&self) -> RecorderStats {
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RecorderStats {
            published: get(&c.published),
            dropped: get(&c.dropped),
            filtered: get(&c.filtered),
            created: get(&c.created),
            patched: get(&c.patched),
            failed: get(&c.failed),
            cache_entries_touched: get(&c.touched),
            cache_entries: get(&c.entries),
        }
    }

    /// Spawns the background writer if it is not running and a Tokio
    /// runtime is at hand; events queue up until then.
    fn start_worker(&self) {
        if self.shared.started.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut slot = self.shared.pending_worker.lock();
        if let Some(worker) = slot.take() {
            let reporter = self.shared.reporter.clone();
            runtime.spawn(worker.run(reporter));
            self.shared.started.store(true, Ordering::Release);
        }
    }
}

/// The background task: correlates each event and writes it.
struct Worker {
    client: Client,
    rx: mpsc::Receiver<Command>,
    correlator: Correlator,
    counters: Arc<Counters>,
    retry_interval: Duration,
    max_tries: u32,
    /// Shutting down: one try per event, no pauses.
    stopping: CancellationToken,
}

impl Worker {
    async fn run(mut self, reporter: Reporter) {
        let mut stopped = None;
        while let Some(command) = self.rx.recv().await {
            match command {
                Command::Record(pending) => self.record(*pending, &reporter).await,
                Command::Flush(done) => {
                    let _ = done.send(());
                }
                Command::Stop(done) => {
                    self.rx.close();
                    stopped = Some(done);
                }
            }
        }
        if let Some(done) = stopped {
            let _ = done.send(());
        }
    }

    fn build(&self, p: Pending, reporter: &Reporter) -> CoreEvent {
        let object = p.regarding.name.as_deref().unwrap_or_default();
        let namespace = p
            .regarding
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let stamp = Some(Time(p.at));
        CoreEvent {
            metadata: ObjectMeta {
                name: Some(event_name(object, p.at)),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            type_: Some(
                match p.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            reason: Some(p.reason),
            message: p.message,
            action: Some(p.action).filter(|a| !a.is_empty()),
            related: p.related,
            involved_object: p.regarding,
            count: Some(1),
            first_timestamp: stamp.clone(),
            last_timestamp: stamp,
            source: Some(EventSource {
                component: Some(reporter.controller.clone()),
                host: reporter.instance.clone(),
            }),
            reporting_component: Some(reporter.controller.clone()),
            reporting_instance: reporter.instance.clone(),
            ..CoreEvent::default()
        }
    }

    async fn record(&mut self, pending: Pending, reporter: &Reporter) {
        let at = pending.at;
        let event = self.build(pending, reporter);
        let correlated = self
            .correlator
            .correlate(event, at, |object| event_name(object, at));
        self.counters
            .touched
            .store(self.correlator.entries_touched(), Ordering::Relaxed);
        self.counters
            .entries
            .store(self.correlator.entries() as u64, Ordering::Relaxed);
        let (mut event, patch) = match correlated {
            Correlated::Skip => {
                bump(&self.counters.filtered);
                return;
            }
            Correlated::Create(event) => (event, None),
            Correlated::Patch { event, patch } => (event, Some(patch)),
        };
        let mut tries = 0;
        loop {
            match self.write(&mut event, patch.as_ref()).await {
                Ok((written, verb)) => {
                    bump(match verb {
                        Verb::Create => &self.counters.created,
                        Verb::Patch => &self.counters.patched,
                    });
                    self.correlator.update_state(&written);
                    return;
                }
                Err(error) => {
                    tries += 1;
                    let stopping = self.stopping.is_cancelled();
                    let retry = error.is_retriable() && !stopping && tries < self.max_tries;
                    if !retry {
                        bump(&self.counters.failed);
                        log_failure(&error, &event, tries);
                        return;
                    }
                    tracing::debug!(
                        error = &error as &dyn std::error::Error,
                        tries,
                        "event write failed; will retry"
                    );
                    // Randomise the first pause so that clients do not
                    // retry in step after an API server outage.
                    let pause = if tries == 1 {
                        self.retry_interval.mul_f64(rand::random::<f64>())
                    } else {
                        self.retry_interval
                    };
                    // A shutdown cuts the pause short: one last try.
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.stopping.cancelled() => {}
                    }
                }
            }
        }
    }

    /// Patches the event if there is a patch and the event still exists,
    /// creates it otherwise (as client-go's `recordEvent`).
    async fn write(
        &self,
        event: &mut CoreEvent,
        patch: Option<&serde_json::Value>,
    ) -> Result<(CoreEvent, Verb), WriteError> {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        let fail = |verb, source| WriteError {
            verb,
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        };
        if let Some(patch) = patch {
            match api
                .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .await
            {
                Ok(written) => return Ok((written, Verb::Patch)),
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(fail(Verb::Patch, source)),
            }
        }
        event.metadata.resource_version = None;
        match api.create(&PostParams::default(), event).await {
            Ok(written) => Ok((written, Verb::Create)),
            Err(source) => Err(fail(Verb::Create, source)),
        }
    }
}

fn log_failure(error: &WriteError, event: &CoreEvent, tries: u32) {
    let reason = event.reason.as_deref().unwrap_or("");
    let object = event.involved_object.name.as_deref().unwrap_or("");
    let expected = error.is_expected_refusal();
    let error = error as &dyn std::error::Error;
    if expected {
        tracing::debug!(
            error,
            reason,
            object,
            "event refused by the API server (not retried)"
        );
    } else {
        tracing::warn!(error, reason, object, tries, "event not recorded");
    }
}
