//! Watch streams: events after a resourceVersion, filtered per watcher,
//! with bookmarks, timeouts and 410 Gone for versions no longer kept.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::stream::{self, BoxStream, StreamExt};
use serde_json::json;
use tokio::time::Instant;

use crate::ops::Api;
use crate::resources::ResourceId;
use crate::selectors::{FieldSelector, LabelSelector};
use crate::shard_selector::ShardSelector;
use crate::status::ApiError;
use crate::store::{Event, EventType, Stored, event_frame};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// Events after this resourceVersion.
    After(u64),
    /// Synthetic ADDED events for the current state first; with
    /// `end_marker`, then a bookmark annotated `k8s.io/initial-events-end`.
    /// The state must be at least at version `at_least`.
    Initial { end_marker: bool, at_least: u64 },
}

/// Re-encodes a stored object's watch frame for watchers that see objects
/// in another form (a converted view, a Table row).
pub(crate) type FrameFn = Arc<dyn Fn(EventType, &Stored) -> Bytes + Send + Sync>;

/// Everything that shapes one watch.
#[derive(Clone)]
pub(crate) struct WatchSpec {
    /// The storage table watched.
    pub(crate) resource: ResourceId,
    /// `kind` and `apiVersion` of bookmark objects.
    pub(crate) kind: &'static str,
    pub(crate) api_version: &'static str,
    /// How frames are encoded; `None` sends the stored frames as they are.
    pub(crate) encode: Option<FrameFn>,
    pub(crate) namespace: Option<String>,
    pub(crate) labels: LabelSelector,
    pub(crate) fields: FieldSelector,
    /// KEP-5866's `shardSelector`.
    pub(crate) shard: ShardSelector,
    pub(crate) start: Start,
    pub(crate) bookmarks: bool,
    pub(crate) timeout: Duration,
    pub(crate) bookmark_interval: Duration,
}

impl std::fmt::Debug for WatchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSpec")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("start", &self.start)
            .finish_non_exhaustive()
    }
}

impl WatchSpec {
    /// The frame of `object` as an event of type `kind`.
    fn encode(&self, kind: EventType, object: &Stored) -> Bytes {
        match &self.encode {
            Some(f) => f(kind, object),
            None => event_frame(kind, object),
        }
    }

    /// The stored frame of `event`, or its re-encoding.
    fn event_frame(&self, event: &Event) -> Bytes {
        match &self.encode {
            Some(f) => f(event.kind, &event.object),
            None => event.frame.clone(),
        }
    }

    fn selects(&self, obj: &Stored) -> bool {
        if let Some(ns) = &self.namespace
            && *obj.summary.namespace != **ns
        {
            return false;
        }
        self.labels.matches_stored(obj)
            && self.fields.matches_stored(obj)
            && self.shard.matches_stored(obj)
    }

    fn unfiltered(&self) -> bool {
        self.labels.is_empty() && self.fields == FieldSelector::default() && self.shard.is_empty()
    }

    /// The frame this watcher sees for `event`, if any. An object that
    /// stops matching the selectors is reported DELETED, one that starts
    /// matching ADDED, as kube-apiserver's watch cache does.
    fn frame_for(&self, event: &Event) -> Option<Bytes> {
        if event.resource != self.resource {
            return None;
        }
        if let Some(ns) = &self.namespace
            && event.key.0 != *ns
        {
            return None;
        }
        let obj = &event.object;
        if self.unfiltered() {
            return Some(self.event_frame(event));
        }
        let now = self.selects(obj);
        match event.kind {
            EventType::Added | EventType::Deleted => now.then(|| self.event_frame(event)),
            EventType::Modified => {
                let before = event.prev.as_ref().is_some_and(|p| self.selects(p));
                match (before, now) {
                    (true, true) => Some(self.event_frame(event)),
                    (false, true) => Some(self.encode(EventType::Added, &event.object)),
                    (true, false) => Some(self.encode(EventType::Deleted, &event.object)),
                    (false, false) => None,
                }
            }
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        let obj = json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta});
        let mut line = json!({"type": "BOOKMARK", "object": obj}).to_string();
        line.push('\n');
        Bytes::from(line)
    }
}

/// The ERROR frame kube-apiserver sends when a watch starts from a version
/// older than its history: kube's watcher relists on it.
pub(crate) fn gone_frame(message: &str) -> Bytes {
    error_frame(&ApiError::gone(message))
}

/// A watch ERROR frame carrying `error`'s `Status`, as kube-apiserver
/// reports a watch that cannot be served once the request was accepted.
fn error_frame(error: &ApiError) -> Bytes {
    let mut line = json!({"type": "ERROR", "object": error.to_status()}).to_string();
    line.push('\n');
    Bytes::from(line)
}

/// A year: the deadline of a watch whose timeout cannot be added to now.
const FAR: Duration = Duration::from_secs(365 * 24 * 3600);

struct State {
    api: Arc<Api>,
    spec: WatchSpec,
    cursor: u64,
    pending: VecDeque<Bytes>,
    changes: tokio::sync::watch::Receiver<u64>,
    closed: tokio::sync::watch::Receiver<bool>,
    deadline: Instant,
    next_bookmark: Instant,
    bookmark_due: bool,
    done: bool,
}

/// The stream of watch frames for `spec`.
pub(crate) fn watch(api: Arc<Api>, spec: WatchSpec) -> BoxStream<'static, Bytes> {
    let mut changes = api.store.subscribe_to(spec.resource);
    changes.borrow_and_update();
    let mut pending = VecDeque::new();
    let mut done = false;
    let current = api.store.current_rv();
    let cursor = match spec.start {
        // A version the store has not reached (the cluster restarted with
        // a fresh store, the client saw a newer one elsewhere): the watch
        // would stay silent until it is reached, so it gets kube-apiserver's
        // "Too large resource version", which tells the client to relist.
        Start::After(rv) | Start::Initial { at_least: rv, .. } if rv > current => {
            pending.push_back(error_frame(&ApiError::too_large_resource_version(
                rv, current,
            )));
            done = true;
            rv
        }
        Start::After(rv) => {
            if let Err(too_old) = api.store.check_watch_start(rv) {
                pending.push_back(gone_frame(&format!(
                    "too old resource version: {rv} ({})",
                    too_old.oldest + 1
                )));
                done = true;
            }
            rv
        }
        Start::Initial { end_marker, .. } => {
            let (items, rv) = api
                .store
                .list(spec.resource, spec.namespace.as_deref(), None);
            pending.extend(
                items
                    .iter()
                    .filter(|s| spec.selects(s))
                    .map(|s: &Arc<Stored>| spec.encode(EventType::Added, s)),
            );
            if end_marker {
                pending.push_back(spec.bookmark(rv, true));
            }
            rv
        }
    };
    let now = Instant::now();
    let deadline = now
        .checked_add(spec.timeout)
        .or_else(|| now.checked_add(FAR))
        .unwrap_or(now);
    let state = State {
        closed: api.closed(),
        deadline,
        next_bookmark: now + spec.bookmark_interval,
        bookmark_due: false,
        api,
        spec,
        cursor,
        pending,
        changes,
        done,
    };
    stream::unfold(state, next_frame).boxed()
}

async fn next_frame(mut st: State) -> Option<(Bytes, State)> {
    loop {
        if let Some(frame) = st.pending.pop_front() {
            return Some((frame, st));
        }
        if st.done || *st.closed.borrow() || Instant::now() >= st.deadline {
            return None;
        }
        st.changes.borrow_and_update();
        if catch_up(&mut st) {
            continue;
        }
        // Sent once the cursor is at the newest version: other resources'
        // commits do not wake this watch, so it looks at them first.
        if st.bookmark_due {
            st.bookmark_due = false;
            let frame = st.spec.bookmark(st.cursor, false);
            st.pending.push_back(frame);
            continue;
        }
        let bookmarks = st.spec.bookmarks;
        tokio::select! {
            changed = st.changes.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            _ = tokio::time::sleep_until(st.deadline) => return None,
            _ = st.closed.changed() => return None,
            _ = tokio::time::sleep_until(st.next_bookmark), if bookmarks => {
                st.next_bookmark = Instant::now() + st.spec.bookmark_interval;
                st.bookmark_due = true;
            }
        }
    }
}

/// Moves the watch's cursor over one batch of the history, queueing the
/// frames it sees and, when its resource's history is gone, the 410 Gone
/// that ends it. Returns whether the caller should look again before
/// waiting (something was queued, or history is left to look at).
fn catch_up(st: &mut State) -> bool {
    match st.api.store.scan(st.spec.resource, st.cursor, 512) {
        Err(too_old) => {
            st.pending.push_back(gone_frame(&format!(
                "too old resource version: {} ({})",
                st.cursor,
                too_old.oldest + 1
            )));
            st.done = true;
            true
        }
        Ok(scan) => {
            st.cursor = scan.cursor;
            let queued = st.pending.len();
            for event in scan.events {
                if let Some(frame) = st.spec.frame_for(&event) {
                    st.pending.push_back(frame);
                }
            }
            scan.more || st.pending.len() > queued
        }
    }
}
