//! The background writer behind a [`Recorder`](crate::Recorder): takes
//! events off the queue in order, correlates them, and writes up to
//! [`max_in_flight`](crate::RecorderConfig::max_in_flight) of them at once
//! while keeping the events about one object strictly one after another.
//!
//! client-go writes from one goroutine (`StartEventWatcher` calls
//! `recordToSink` for one event at a time), so a burst of creates outruns
//! it and its 1000-event queue drops the rest. Here writes about different
//! objects overlap. Every cache key of the correlator (the aggregation,
//! counting and spam-filter keys) contains the object, so two events about
//! different objects never touch the same correlation state, and an event
//! about an object whose write is under way waits (uncorrelated) until that
//! write is answered: per object, correlating, writing and recording the
//! answer (`update_state`) happen in the same order as client-go's single
//! writer, so a count's patch never overtakes the create it counts on.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ctrlkit_informer::ServerMetadata;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::{EventType, Reporter};
use kube::{Api, Client};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{Id, JoinError, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::correlator::{Correlated, Correlator};
use crate::error::{Verb, WriteError};
use crate::recorder::{Counters, bump};

/// One event waiting for the writer.
pub(crate) struct Pending {
    pub(crate) type_: EventType,
    pub(crate) reason: String,
    pub(crate) message: Option<String>,
    pub(crate) action: String,
    pub(crate) related: Option<ObjectReference>,
    pub(crate) regarding: ObjectReference,
    pub(crate) at: Timestamp,
}

/// What the queue carries to the writer.
pub(crate) enum Command {
    Record(Box<Pending>),
    /// Answer once everything queued before is written, filtered or given
    /// up.
    Flush(oneshot::Sender<()>),
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

/// Which writes must not overlap: a hash of the object an event is about
/// (the source is the recorder's own). A collision only makes two objects
/// wait for each other.
type ObjectKey = u64;

fn object_key(regarding: &ObjectReference) -> ObjectKey {
    foldhash::fast::FixedState::default().hash_one((
        &regarding.kind,
        &regarding.namespace,
        &regarding.name,
        &regarding.uid,
        &regarding.api_version,
    ))
}

/// What a write task needs, shared by all of them.
pub(crate) struct WriteContext {
    pub(crate) client: Client,
    pub(crate) counters: Arc<Counters>,
    pub(crate) retry_interval: Duration,
    pub(crate) max_tries: u32,
    /// Shutting down: one try per event, no pauses.
    pub(crate) stopping: CancellationToken,
}

/// The background task; see the module documentation.
pub(crate) struct Writer {
    rx: mpsc::UnboundedReceiver<Command>,
    correlator: Correlator,
    context: Arc<WriteContext>,
    max_in_flight: usize,
    reporter: Reporter,
    /// Cancelled when the writer ends, however it ends.
    finished: CancellationToken,
    state: InFlight,
}

/// The writes under way and the events waiting for one.
#[derive(Default)]
struct InFlight {
    running: JoinSet<Option<CoreEvent>>,
    /// The object and sequence number of each running write.
    tasks: HashMap<Id, (ObjectKey, u64)>,
    /// An entry per object with a write running: the events about it that
    /// wait for that write, in queue order (still counted as queued).
    waiting: HashMap<ObjectKey, VecDeque<(u64, Box<Pending>)>>,
    /// Sequence numbers of events taken off the queue and not yet done.
    outstanding: BTreeSet<u64>,
    next_seq: u64,
    /// Flushes and the sequence number every earlier event is below.
    flushes: Vec<(u64, oneshot::Sender<()>)>,
}

impl Writer {
    /// A writer taking events from `rx`, at most `max_in_flight` (at least
    /// 1) writes at once; `finished` is cancelled when it ends.
    pub(crate) fn new(
        rx: mpsc::UnboundedReceiver<Command>,
        correlator: Correlator,
        context: WriteContext,
        max_in_flight: usize,
        reporter: Reporter,
        finished: CancellationToken,
    ) -> Self {
        Self {
            rx,
            correlator,
            context: Arc::new(context),
            max_in_flight: max_in_flight.max(1),
            reporter,
            finished,
            state: InFlight::default(),
        }
    }

    pub(crate) async fn run(mut self) {
        let _finished = self.finished.clone().drop_guard();
        let stopping = self.context.stopping.clone();
        let mut open = true;
        let mut closing = false;
        loop {
            if !open && self.state.running.is_empty() {
                break;
            }
            // At the limit, events stay queued (and count against the
            // queue's capacity) until a write ends.
            let intake = open && self.state.running.len() < self.max_in_flight;
            tokio::select! {
                biased;
                () = stopping.cancelled(), if !closing => {
                    // What is queued is still received, then `None`.
                    self.rx.close();
                    closing = true;
                }
                Some(joined) = self.state.running.join_next_with_id(),
                    if !self.state.running.is_empty() => self.finish(joined),
                command = self.rx.recv(), if intake => match command {
                    Some(Command::Record(pending)) => self.accept(pending),
                    Some(Command::Flush(done)) => {
                        self.state.flushes.push((self.state.next_seq, done));
                        self.state.answer_flushes();
                    }
                    None => open = false,
                },
            }
        }
        // Everything taken off the queue is done: answer every flush.
        for (_, done) in self.state.flushes.drain(..) {
            let _ = done.send(());
        }
    }

    /// A new event off the queue: written now, or after the write about
    /// the same object that is under way.
    fn accept(&mut self, pending: Box<Pending>) {
        let seq = self.state.next_seq;
        self.state.next_seq += 1;
        self.state.outstanding.insert(seq);
        let key = object_key(&pending.regarding);
        if let Some(queue) = self.state.waiting.get_mut(&key) {
            queue.push_back((seq, pending));
        } else {
            self.start(key, seq, pending);
        }
    }

    /// Correlates `pending` and spawns its write; an event the spam filter
    /// refuses is done at once, and the next one waiting for the object
    /// goes on.
    fn start(&mut self, key: ObjectKey, mut seq: u64, mut pending: Box<Pending>) {
        loop {
            // Taken up: its place in the queue is free again.
            self.context.counters.queued.fetch_sub(1, Ordering::AcqRel);
            if let Some((event, patch)) = self.correlate(*pending) {
                let context = Arc::clone(&self.context);
                let handle = self
                    .state
                    .running
                    .spawn(async move { context.record(event, patch).await });
                self.state.tasks.insert(handle.id(), (key, seq));
                self.state.waiting.entry(key).or_default();
                return;
            }
            self.state.outstanding.remove(&seq);
            match self.state.next_waiting(key) {
                Some((next_seq, next)) => (seq, pending) = (next_seq, next),
                None => {
                    self.state.answer_flushes();
                    return;
                }
            }
        }
    }

    /// A write ended: record the API server's answer, then start the next
    /// event about the same object.
    fn finish(&mut self, joined: Result<(Id, Option<CoreEvent>), JoinError>) {
        let (id, written) = match joined {
            Ok((id, written)) => (id, written),
            Err(error) => {
                // Only a panic in the client can get here (the tasks are
                // aborted only when the writer itself is dropped).
                bump(&self.context.counters.failed);
                tracing::error!(
                    error = &error as &dyn std::error::Error,
                    "event write task failed"
                );
                (error.id(), None)
            }
        };
        let Some((key, seq)) = self.state.tasks.remove(&id) else {
            return;
        };
        if let Some(written) = written {
            self.correlator.update_state(&written);
            self.count_cache_work();
        }
        self.state.outstanding.remove(&seq);
        match self.state.next_waiting(key) {
            Some((next_seq, next)) => self.start(key, next_seq, next),
            None => self.state.answer_flushes(),
        }
    }

    /// What to write for `pending`, or `None` if the spam filter refused
    /// it.
    fn correlate(&mut self, pending: Pending) -> Option<(CoreEvent, Option<serde_json::Value>)> {
        let at = pending.at;
        let event = build(pending, &self.reporter);
        let correlated = self
            .correlator
            .correlate(event, at, |object| event_name(object, at));
        self.count_cache_work();
        match correlated {
            Correlated::Skip => {
                bump(&self.context.counters.filtered);
                None
            }
            Correlated::Create(event) => Some((*event, None)),
            Correlated::Patch { event, patch } => Some((*event, Some(patch))),
        }
    }
}

impl Writer {
    /// Publishes the correlator's cache figures to the stats.
    fn count_cache_work(&self) {
        let counters = &self.context.counters;
        counters
            .touched
            .store(self.correlator.entries_touched(), Ordering::Relaxed);
        counters
            .entries
            .store(self.correlator.entries() as u64, Ordering::Relaxed);
    }
}

impl InFlight {
    /// The next event waiting for a write about `key`; forgets the object
    /// if none is left.
    fn next_waiting(&mut self, key: ObjectKey) -> Option<(u64, Box<Pending>)> {
        let queue = self.waiting.get_mut(&key)?;
        let next = queue.pop_front();
        if next.is_none() {
            self.waiting.remove(&key);
        }
        next
    }

    /// Answers the flushes every earlier event of which is done.
    fn answer_flushes(&mut self) {
        let lowest = self.outstanding.first().copied().unwrap_or(u64::MAX);
        let (done, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flushes)
            .into_iter()
            .partition(|(below, _)| *below <= lowest);
        self.flushes = waiting;
        for (_, answer) in done {
            let _ = answer.send(());
        }
    }
}

fn build(p: Pending, reporter: &Reporter) -> CoreEvent {
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

impl WriteContext {
    /// Writes one correlated event, retrying transport failures; the
    /// event as the API server has it, or `None` if it was given up.
    async fn record(
        &self,
        mut event: CoreEvent,
        patch: Option<serde_json::Value>,
    ) -> Option<CoreEvent> {
        let mut tries = 0;
        loop {
            match self.write(&mut event, patch.as_ref()).await {
                Ok((written, verb)) => {
                    bump(match verb {
                        Verb::Create => &self.counters.created,
                        Verb::Patch => &self.counters.patched,
                    });
                    return Some(written.applied_to(event));
                }
                Err(error) => {
                    tries += 1;
                    let stopping = self.stopping.is_cancelled();
                    let retry = error.is_retriable() && !stopping && tries < self.max_tries;
                    if !retry {
                        bump(&self.counters.failed);
                        log_failure(&error, &event, tries);
                        return None;
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
    /// creates it otherwise (as client-go's `recordEvent`); what the
    /// server set on the event.
    async fn write(
        &self,
        event: &mut CoreEvent,
        patch: Option<&serde_json::Value>,
    ) -> Result<(Written, Verb), WriteError> {
        let namespace = event.metadata.namespace.clone().unwrap_or_default();
        let name = event.metadata.name.clone().unwrap_or_default();
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        let fail = |verb, source| WriteError {
            verb,
            namespace: namespace.clone(),
            name: name.clone(),
            source,
        };
        let url = api.resource_url();
        if let Some(patch) = patch {
            let request = kube::core::Request::new(url)
                .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
                .map_err(|e| fail(Verb::Patch, kube::Error::BuildRequest(e)));
            match Written::request(&self.client, request?, "patch").await {
                Ok(written) => return Ok((written, Verb::Patch)),
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(source) => return Err(fail(Verb::Patch, source)),
            }
        }
        event.metadata.resource_version = None;
        let created = async {
            let body = serde_json::to_vec(&*event).map_err(kube::Error::SerdeError)?;
            let request = kube::core::Request::new(url)
                .create(&PostParams::default(), body)
                .map_err(kube::Error::BuildRequest)?;
            Written::request(&self.client, request, "create").await
        };
        match created.await {
            Ok(written) => Ok((written, Verb::Create)),
            Err(source) => Err(fail(Verb::Create, source)),
        }
    }
}

/// What the writer reads from the API server's answer to an event write:
/// the fields [`Correlator::update_state`] keeps that the server may have
/// set. serde skips the rest of the answer unread (its `managedFields`,
/// the copy of what was sent): the server stores the event as sent, or as
/// patched with the count, message and last timestamp that were sent.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Written {
    #[serde(default)]
    metadata: ServerMetadata,
    count: Option<i32>,
    first_timestamp: Option<Time>,
}

impl Written {
    /// Sends `request` (`verb` names it in kube's traces) and reads the
    /// answer.
    async fn request(
        client: &Client,
        mut request: http::Request<Vec<u8>>,
        verb: &'static str,
    ) -> Result<Self, kube::Error> {
        request.extensions_mut().insert(verb);
        client.request(request).await
    }

    /// `sent` with what the server answered: the event as stored.
    fn applied_to(self, mut sent: CoreEvent) -> CoreEvent {
        // Never the stale resourceVersion sent with a patch.
        sent.metadata.resource_version = None;
        self.metadata.apply_to(&mut sent.metadata);
        sent.count = self.count.or(sent.count);
        sent.first_timestamp = self.first_timestamp.or(sent.first_timestamp);
        sent
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_answer_sets_what_the_server_assigned_on_the_event_sent() {
        let sent = CoreEvent {
            metadata: ObjectMeta {
                name: Some("web.1".into()),
                namespace: Some("ns".into()),
                resource_version: Some("3".into()),
                ..ObjectMeta::default()
            },
            reason: Some("SuccessfulCreate".into()),
            message: Some("Created pod: web-a".into()),
            count: Some(2),
            ..CoreEvent::default()
        };
        let answer: Written = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web.1", "resourceVersion": "9",
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:count": {}}}]},
            "count": 2,
            "firstTimestamp": "2026-11-26T03:00:00Z",
            "message": "ignored: the event sent is kept",
        }))
        .unwrap();
        let stored = answer.applied_to(sent.clone());
        assert_eq!(stored.metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(stored.metadata.name.as_deref(), Some("web.1"));
        assert_eq!(stored.count, Some(2));
        assert_eq!(
            stored.first_timestamp.map(|t| t.0.to_string()),
            Some("2026-11-26T03:00:00Z".to_owned())
        );
        assert_eq!(stored.message, sent.message);
        assert_eq!(stored.metadata.managed_fields, None);

        // An answer without the optional fields keeps what was sent, but
        // never a stale resourceVersion.
        let bare: Written = serde_json::from_str("{}").unwrap();
        let stored = bare.applied_to(sent.clone());
        assert_eq!(stored.metadata.name.as_deref(), Some("web.1"));
        assert_eq!(stored.count, Some(2));
        assert_eq!(stored.metadata.resource_version, None);
    }
}
