//! The [`Recorder`] handle, its tuning and its statistics.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, Reporter};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::correlator::{Correlator, CorrelatorConfig};
use crate::error::{ConfigError, PublishError};
use crate::writer::{Command, Pending, WriteContext, Writer};

/// How a [`Recorder`] queues, correlates and writes events. The defaults
/// are client-go's (`tools/record`), except
/// [`max_in_flight`](Self::max_in_flight): client-go writes one event at a
/// time.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Events waiting for the background writer at most (queued, or taken
    /// by it but waiting for an earlier write about their object); more
    /// are dropped (client-go: 1000).
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
    /// Writes to the API server under way at once, at least 1 (default
    /// 16). Events about one object are still written one after another
    /// (a repeat's patch never overtakes the create it counts on); events
    /// about different objects overlap, so a burst of events (one per pod
    /// a controller creates) is written at the pace of the API server's
    /// latency divided by this, rather than one round trip each.
    /// client-go writes one at a time (1).
    pub max_in_flight: usize,
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
            max_in_flight: 16,
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
    /// Events waiting to be written now (at most
    /// [`RecorderConfig::queue_capacity`]), not counting the writes under
    /// way.
    pub queued: u64,
}

/// The recorder's counts, shared by the handles and the writer.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) published: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) filtered: AtomicU64,
    pub(crate) created: AtomicU64,
    pub(crate) patched: AtomicU64,
    pub(crate) failed: AtomicU64,
    pub(crate) touched: AtomicU64,
    pub(crate) entries: AtomicU64,
    /// Events published and not yet taken up by a write: the queue's
    /// length, checked against its capacity by `publish`.
    pub(crate) queued: AtomicU64,
}

pub(crate) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
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

struct Shared {
    /// Unbounded: the queue's bound is kept by `Counters::queued`, which
    /// also counts the events the writer holds back for an object.
    tx: mpsc::UnboundedSender<Command>,
    /// The writer until it is spawned, on the first use inside a runtime.
    pending_worker: Mutex<Option<Writer>>,
    started: AtomicBool,
    /// Cancelled by [`Recorder::shutdown`]: the writer closes the queue,
    /// and stops pausing between tries at once, even mid-retry.
    stopping: CancellationToken,
    /// Cancelled when the writer has ended.
    finished: CancellationToken,
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
/// and returns. The task writes up to
/// [`RecorderConfig::max_in_flight`] events at once, those about one
/// object in order. A full queue drops the event and counts it. Cloning gives
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
        Self::build(client, reporter.into(), RecorderConfig::default())
    }

    /// A recorder with the given tuning.
    ///
    /// # Errors
    ///
    /// [`ConfigError::ZeroMaxInFlight`] if
    /// [`max_in_flight`](RecorderConfig::max_in_flight) is 0.
    pub fn with_config(
        client: Client,
        reporter: impl Into<Reporter>,
        config: RecorderConfig,
    ) -> Result<Self, ConfigError> {
        if config.max_in_flight == 0 {
            return Err(ConfigError::ZeroMaxInFlight);
        }
        Ok(Self::build(client, reporter.into(), config))
    }

    fn build(client: Client, reporter: Reporter, config: RecorderConfig) -> Self {
        let capacity = config.queue_capacity.max(1);
        let (tx, rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let stopping = CancellationToken::new();
        let finished = CancellationToken::new();
        let correlator = Correlator::new(CorrelatorConfig {
            cache_size: config.cache_size,
            aggregate_max_events: config.aggregate_max_events,
            aggregate_window: config.aggregate_window,
            spam_burst: config.spam_burst,
            spam_refill: config.spam_refill,
        });
        let context = WriteContext {
            client,
            counters: Arc::clone(&counters),
            retry_interval: config.retry_interval,
            max_tries: config.max_tries.max(1),
            stopping: stopping.clone(),
        };
        let writer = Writer::new(
            rx,
            correlator,
            context,
            config.max_in_flight,
            reporter.clone(),
            finished.clone(),
        );
        Self {
            shared: Arc::new(Shared {
                tx,
                pending_worker: Mutex::new(Some(writer)),
                started: AtomicBool::new(false),
                stopping,
                finished,
                counters,
                reporter,
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
        let counters = &self.shared.counters;
        if self.shared.tx.is_closed() {
            bump(&counters.dropped);
            return Err(PublishError::ShutDown);
        }
        // Take a place in the queue; the writer gives it back when it
        // takes the event up.
        let capacity = self.shared.capacity;
        if counters.queued.fetch_add(1, Ordering::AcqRel) >= capacity as u64 {
            counters.queued.fetch_sub(1, Ordering::AcqRel);
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
            return Err(PublishError::QueueFull { capacity });
        }
        let pending = Box::new(Pending {
            type_: event.type_,
            reason: event.reason.clone(),
            message: event.note.clone(),
            action: event.action.clone(),
            related: event.secondary.clone(),
            regarding: regarding.clone(),
            at: self.shared.clock.now(),
        });
        if self.shared.tx.send(Command::Record(pending)).is_err() {
            counters.queued.fetch_sub(1, Ordering::AcqRel);
            bump(&counters.dropped);
            return Err(PublishError::ShutDown);
        }
        bump(&counters.published);
        Ok(())
    }

    /// Waits until every event published before this call was written
    /// (including the writes under way), filtered or given up. Events
    /// published meanwhile are written too but not waited for. After a
    /// [`shutdown`](Self::shutdown), waits for the writer to end.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future only ends the wait; the events are
    /// written all the same.
    pub async fn flush(&self) {
        self.start_worker();
        let (done, wait) = oneshot::channel();
        if self.shared.tx.send(Command::Flush(done)).is_ok() {
            // An error means the writer ended, with everything done.
            let _ = wait.await;
        } else {
            self.shared.finished.cancelled().await;
        }
    }

    /// Stops the recorder: publishes fail with [`PublishError::ShutDown`]
    /// from now on (at the latest once the writer has seen the stop), the
    /// events queued and the writes under way are finished (each event
    /// tried once more at most, without waiting between tries), then the
    /// background task ends. Waits for that.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: the stop takes effect on the first poll and cannot be
    /// undone; dropping the future only ends the wait, and calling
    /// `shutdown` again (or [`flush`](Self::flush)) waits for the same end.
    pub async fn shutdown(&self) {
        self.shared.stopping.cancel();
        self.start_worker();
        self.shared.finished.cancelled().await;
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
            queued: get(&c.queued),
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
        if let Some(writer) = slot.take() {
            runtime.spawn(writer.run());
            self.shared.started.store(true, Ordering::Release);
        }
    }
}
