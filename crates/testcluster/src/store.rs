//! The object store: one table per resource, one global resourceVersion
//! counter, and the ring buffer of watch events.
//!
//! A commit wakes the watches of its own resource only, as kube-apiserver's
//! watch cache is one per resource: a Lease watch is not woken by pod
//! churn, and falls behind the shared history only when an event of its
//! own resource was dropped from it.
//!
//! Writers compute a new object outside the lock from a snapshot and commit
//! it with a compare-and-swap on the snapshot's resourceVersion. The object
//! is serialized before the lock is taken, so the lock is held only for the
//! version check, splicing the new resourceVersion into those bytes, the
//! insert and the history push.
//!
//! Memory is bounded as on a real control plane: an object larger than
//! etcd's default request limit is refused, and the watch history keeps at
//! most a number of events and a number of bytes.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
// Keys are uids and object names the server assigned or validated; a
// fast hasher is enough.
use foldhash::{HashMap, HashMapExt, HashSet};
use parking_lot::Mutex;
use serde_json::Value;

use crate::encoded::Encoded;
use crate::resources::ResourceId;
use crate::status::ApiError;
use crate::summary::Summary;

/// Table key: (namespace, name); the namespace is empty for cluster-scoped objects.
pub(crate) type Key = (String, String);

/// Ownership of fields for server-side apply: field path -> manager.
pub(crate) type FieldOwners = BTreeMap<String, String>;

/// One stored object version. Immutable once committed.
///
/// The object is kept serialized (with `metadata.resourceVersion`), which
/// is what every read sends; the fields hot paths look at are in
/// `summary`, and writes parse the JSON with [`Stored::value`].
#[derive(Debug)]
pub(crate) struct Stored {
    /// The object serialized once, shared by every reader.
    pub(crate) json: Bytes,
    pub(crate) summary: Summary,
    pub(crate) rv: u64,
    /// Server-side-apply field ownership (kept out of the object itself).
    pub(crate) owners: Arc<FieldOwners>,
}

impl Stored {
    /// `value` (whose resourceVersion is `rv`) serialized, with its summary.
    pub(crate) fn new(value: &Value, rv: u64, owners: Arc<FieldOwners>) -> Stored {
        // Serializing a `Value` into a Vec cannot fail.
        let json = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        Stored {
            json,
            summary: Summary::of(value),
            rv,
            owners,
        }
    }

    /// The object, parsed from its JSON.
    pub(crate) fn value(&self) -> Value {
        // The JSON was serialized from a `Value` by this store, so it parses.
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// The type of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventType {
    Added,
    Modified,
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the watch history.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) rv: u64,
    pub(crate) resource: usize,
    /// Where the object lives (namespace, name).
    pub(crate) key: Key,
    pub(crate) kind: EventType,
    pub(crate) object: Arc<Stored>,
    /// The version this change replaced (for MODIFIED and DELETED).
    pub(crate) prev: Option<Arc<Stored>>,
    /// The serialized watch frame `{"type":..,"object":..}\n`.
    pub(crate) frame: Bytes,
}

/// A requested write.
#[derive(Debug)]
pub(crate) enum Write {
    /// Create or replace with this object and field ownership.
    Put(Value, Arc<FieldOwners>),
    /// [`Write::Put`] of an object already serialized (its summary, its
    /// JSON with the resourceVersion left out).
    PutEncoded(Summary, Encoded, Arc<FieldOwners>),
    /// Remove the object; the DELETED event carries this final state.
    Delete(Value),
}

/// etcd's default `--max-request-bytes` (1.5 MiB): the largest object
/// kube-apiserver can store with a default etcd.
pub(crate) const MAX_OBJECT_BYTES: usize = 3 * 512 * 1024;

/// Why a commit did not happen.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The object changed since the snapshot (or, for a create, exists).
    Stale,
    /// The serialized object is larger than the store takes.
    TooLarge {
        /// The object's size in bytes.
        size: usize,
        /// The most the store takes.
        limit: usize,
    },
}

impl Refused {
    /// Whether another attempt with a fresh snapshot may succeed.
    pub(crate) fn is_stale(&self) -> bool {
        matches!(self, Refused::Stale)
    }
}

impl From<Refused> for ApiError {
    /// etcd refuses a request over its limit with "etcdserver: request is
    /// too large", which kube-apiserver passes on as a 500 with no reason
    /// (kubernetes/kubernetes#112152); the message here also says the
    /// size and the limit.
    fn from(refused: Refused) -> ApiError {
        match refused {
            Refused::TooLarge { size, limit } => ApiError::new(
                500,
                "",
                format!(
                    "etcdserver: request is too large: the object is {size} bytes, more than the {limit} bytes etcd stores by default (--max-request-bytes)"
                ),
            ),
            Refused::Stale => ApiError::new(
                409,
                "Conflict",
                "the object has been modified; please apply your changes to the latest version and try again",
            ),
        }
    }
}

/// How much the store keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most events in the watch history (at least 1 is kept).
    pub(crate) history_events: usize,
    /// Most bytes of objects the watch history holds on to.
    pub(crate) history_bytes: usize,
    /// Largest serialized object stored.
    pub(crate) max_object_bytes: usize,
}

/// The watch history's size, as [`TestCluster::watch_history`](crate::TestCluster::watch_history)
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchHistory {
    /// Change events kept.
    pub events: usize,
    /// Bytes of objects the kept events hold on to: each event's object
    /// and the version it replaced (a version shared by two events counts
    /// twice, so this is an upper bound).
    pub bytes: usize,
    /// The oldest resourceVersion a watch can start from; older ones get
    /// `410 Gone`.
    pub oldest_resource_version: u64,
    /// The cluster's current resourceVersion.
    pub resource_version: u64,
}

/// The requested resourceVersion is older than the kept history.
#[derive(Debug)]
pub(crate) struct TooOld {
    /// The oldest version a watch can still start from.
    pub(crate) oldest: u64,
}

/// The events of one resource after a version, from [`Store::scan`].
pub(crate) struct Scan {
    /// The resource's events, oldest first.
    pub(crate) events: Vec<Arc<Event>>,
    /// The newest version looked at: the next scan starts after it.
    pub(crate) cursor: u64,
    /// Whether the history holds versions after `cursor` not looked at yet.
    pub(crate) more: bool,
}

/// History entries one [`Store::scan`] looks at under the lock at most.
const SCAN_LIMIT: usize = 16_384;

struct Inner {
    rv: u64,
    /// One table per storage resource id, grown as types are registered.
    tables: Vec<BTreeMap<Key, Arc<Stored>>>,
    history: VecDeque<Arc<Event>>,
    /// The bytes `history` holds on to (see [`Event::bytes`]).
    history_bytes: usize,
    /// The highest resourceVersion evicted from `history`.
    compacted: u64,
    /// Per storage resource id, the highest resourceVersion of its events
    /// evicted from `history`: a watch of the resource after it missed
    /// nothing.
    compacted_by_resource: Vec<u64>,
    /// Per storage resource id, what wakes its watches.
    changed: Vec<tokio::sync::watch::Sender<u64>>,
    /// uid -> where the object lives.
    uids: HashMap<String, (usize, Key)>,
    /// owner uid -> dependents naming it in an ownerReference.
    dependents: HashMap<String, HashSet<(usize, Key)>>,
}

/// The store shared by the server, the garbage collector and the watches.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    limits: Limits,
    latest: tokio::sync::watch::Sender<u64>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Event {
    /// The bytes this event holds on to: its frame (which the stored
    /// object's JSON is a slice of) and the version it replaced.
    fn bytes(&self) -> usize {
        self.frame.len() + self.prev.as_ref().map_or(0, |p| p.json.len())
    }
}

/// A watch frame `{"type":..,"object":..}\n` whose object (about
/// `object_len` bytes) `write_object` appends; returns the frame and the
/// slice of it holding the object.
pub(crate) fn build_frame(
    kind: EventType,
    object_len: usize,
    write_object: impl FnOnce(&mut Vec<u8>),
) -> (Bytes, Bytes) {
    let mut buf = Vec::with_capacity(object_len + 48);
    buf.extend_from_slice(b"{\"type\":\"");
    buf.extend_from_slice(kind.as_str().as_bytes());
    buf.extend_from_slice(b"\",\"object\":");
    let start = buf.len();
    write_object(&mut buf);
    let end = buf.len();
    buf.extend_from_slice(b"}\n");
    let frame = Bytes::from(buf);
    let object = frame.slice(start..end);
    (frame, object)
}

/// A watch frame for `object` with the given event type.
pub(crate) fn event_frame(kind: EventType, object: &Stored) -> Bytes {
    build_frame(kind, object.json.len(), |buf| {
        buf.extend_from_slice(&object.json)
    })
    .0
}

impl Store {
    /// An empty store within `limits`.
    pub(crate) fn new(limits: Limits) -> Self {
        let (latest, _) = tokio::sync::watch::channel(0);
        Store {
            inner: Mutex::new(Inner {
                rv: 0,
                tables: Vec::new(),
                history: VecDeque::new(),
                history_bytes: 0,
                compacted: 0,
                compacted_by_resource: Vec::new(),
                changed: Vec::new(),
                uids: HashMap::new(),
                dependents: HashMap::new(),
            }),
            limits: Limits {
                history_events: limits.history_events.max(1),
                ..limits
            },
            latest,
        }
    }

    /// The watch history's size.
    pub(crate) fn history(&self) -> WatchHistory {
        let inner = self.inner.lock();
        WatchHistory {
            events: inner.history.len(),
            bytes: inner.history_bytes,
            oldest_resource_version: inner.compacted,
            resource_version: inner.rv,
        }
    }

    /// The current global resourceVersion.
    pub(crate) fn current_rv(&self) -> u64 {
        self.inner.lock().rv
    }

    /// A receiver that changes whenever a write commits.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.latest.subscribe()
    }

    /// A receiver that changes whenever a write to `resource` commits.
    pub(crate) fn subscribe_to(&self, resource: ResourceId) -> tokio::sync::watch::Receiver<u64> {
        self.inner.lock().changed_mut(resource).subscribe()
    }

    pub(crate) fn get(&self, resource: ResourceId, key: &Key) -> Option<Arc<Stored>> {
        self.inner.lock().tables.get(resource)?.get(key).cloned()
    }

    /// Objects of `resource` (in `namespace` if given) after `start_after`,
    /// in key order, with the resourceVersion the list is consistent with.
    pub(crate) fn list(
        &self,
        resource: usize,
        namespace: Option<&str>,
        start_after: Option<&Key>,
    ) -> (Vec<Arc<Stored>>, u64) {
        use std::ops::Bound;
        let inner = self.inner.lock();
        let Some(table) = inner.tables.get(resource) else {
            return (Vec::new(), inner.rv);
        };
        let lower = match start_after {
            Some(k) => Bound::Excluded(k.clone()),
            None => match namespace {
                Some(ns) => Bound::Included((ns.to_string(), String::new())),
                None => Bound::Unbounded,
            },
        };
        let items = table
            .range((lower, Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, v)| v.clone())
            .collect();
        (items, inner.rv)
    }

    /// Where the object with this uid lives, if it exists.
    pub(crate) fn locate_uid(&self, uid: &str) -> Option<(usize, Key)> {
        self.inner.lock().uids.get(uid).cloned()
    }

    /// The objects naming `owner_uid` in an ownerReference.
    pub(crate) fn dependents_of(&self, owner_uid: &str) -> Vec<(usize, Key)> {
        self.inner
            .lock()
            .dependents
            .get(owner_uid)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Whether any namespaced object lives in `namespace`.
    pub(crate) fn namespace_contents(&self, namespace: &str) -> Vec<(usize, Key)> {
        let inner = self.inner.lock();
        let mut out = Vec::new();
        // Cluster-scoped objects have an empty namespace in their key, and
        // namespace names are never empty, so only namespaced ones match.
        for (id, table) in inner.tables.iter().enumerate() {
            let from = (namespace.to_string(), String::new());
            out.extend(
                table
                    .range(from..)
                    .take_while(|((ns, _), _)| ns == namespace)
                    .map(|(k, _)| (id, k.clone())),
            );
        }
        out
    }

    /// Commit `write` if the object's current resourceVersion is still
    /// `expected` (`None`: the object must not exist) and, unless it is a
    /// delete, the object is not too large.
    pub(crate) fn commit(
        &self,
        resource: usize,
        key: &Key,
        expected: Option<u64>,
        write: Write,
    ) -> Result<Arc<Stored>, Refused> {
        // Work that does not need the lock happens outside it: the summary
        // and the serialization here, freeing evicted history after.
        let (summary, encoded, put_owners) = match write {
            Write::Put(mut value, owners) => {
                (Summary::of(&value), Encoded::new(&mut value), Some(owners))
            }
            Write::PutEncoded(summary, encoded, owners) => (summary, encoded, Some(owners)),
            Write::Delete(mut last) => (Summary::of(&last), Encoded::new(&mut last), None),
        };
        // A delete sends etcd no object, so only puts can be too large.
        let limit = self.limits.max_object_bytes;
        if put_owners.is_some() && encoded.size() > limit {
            return Err(Refused::TooLarge {
                size: encoded.size(),
                limit,
            });
        }
        let mut evicted = Vec::new();
        let (stored, changed) = {
            let mut guard = self.inner.lock();
            let inner = &mut *guard;
            let current = inner.table_mut(resource).get(key).cloned();
            if current.as_ref().map(|c| c.rv) != expected {
                return Err(Refused::Stale);
            }
            let rv = inner.rv + 1;
            let (kind, owners) = match (put_owners, &current) {
                (Some(owners), Some(_)) => (EventType::Modified, owners),
                (Some(owners), None) => (EventType::Added, owners),
                (None, Some(c)) => (EventType::Deleted, c.owners.clone()),
                (None, None) => return Err(Refused::Stale),
            };
            // The stored JSON is a zero-copy slice of the watch frame.
            let (ev_frame, json) = encoded.frame(kind, rv);
            let stored = Arc::new(Stored {
                json,
                summary,
                rv,
                owners,
            });
            inner.rv = rv;
            inner.reindex(resource, key, current.as_deref(), kind, &stored);
            if kind == EventType::Deleted {
                inner.table_mut(resource).remove(key);
            } else {
                inner
                    .table_mut(resource)
                    .insert(key.clone(), stored.clone());
            }
            let event = Event {
                rv,
                resource,
                key: key.clone(),
                kind,
                object: stored.clone(),
                prev: current,
                frame: ev_frame,
            };
            inner.history_bytes += event.bytes();
            inner.history.push_back(Arc::new(event));
            let changed = inner.changed_mut(resource).clone();
            // The newest event stays even if it alone is over the byte
            // budget: a watch must be able to resume from the latest version.
            while inner.history.len() > self.limits.history_events
                || (inner.history_bytes > self.limits.history_bytes && inner.history.len() > 1)
            {
                let Some(old) = inner.history.pop_front() else {
                    break;
                };
                inner.compacted = old.rv;
                if let Some(c) = inner.compacted_by_resource.get_mut(old.resource) {
                    *c = old.rv;
                }
                inner.history_bytes -= old.bytes();
                evicted.push(old);
            }
            (stored, changed)
        };
        drop(evicted);
        // Woken outside the lock, so watches do not wait on it at once.
        changed.send_replace(stored.rv);
        self.latest.send_replace(stored.rv);
        Ok(stored)
    }

    /// Up to `max` events with a resourceVersion greater than `after`.
    pub(crate) fn events_after(&self, after: u64, max: usize) -> Result<Vec<Arc<Event>>, TooOld> {
        let inner = self.inner.lock();
        if after < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
            });
        }
        Ok(inner.history_after(after).take(max).cloned().collect())
    }

    /// Up to `max` events of `resource` with a resourceVersion greater than
    /// `after`, looking at no more than [`SCAN_LIMIT`] history entries.
    /// `Err` only when an event of `resource` after `after` was evicted:
    /// events of other resources leaving the history do not make a watch
    /// of this one too old.
    pub(crate) fn scan(
        &self,
        resource: ResourceId,
        after: u64,
        max: usize,
    ) -> Result<Scan, TooOld> {
        let inner = self.inner.lock();
        let compacted = inner
            .compacted_by_resource
            .get(resource)
            .copied()
            .unwrap_or(0);
        if after < compacted {
            return Err(TooOld { oldest: compacted });
        }
        let mut scan = Scan {
            events: Vec::new(),
            cursor: after,
            more: false,
        };
        for (looked, event) in inner.history_after(after).enumerate() {
            if looked == SCAN_LIMIT || scan.events.len() == max {
                scan.more = true;
                break;
            }
            scan.cursor = event.rv;
            if event.resource == resource {
                scan.events.push(event.clone());
            }
        }
        Ok(scan)
    }

    /// Whether a watch may start from `rv`.
    pub(crate) fn check_watch_start(&self, rv: u64) -> Result<(), TooOld> {
        let inner = self.inner.lock();
        if rv < inner.compacted {
            Err(TooOld {
                oldest: inner.compacted,
            })
        } else {
            Ok(())
        }
    }

    /// Whether `resource` did not change after `since` up to `until`, so
    /// that its state at `until` is its state at `since` (an exact list
    /// at `since`). `Err` when `since` is older than the history can tell.
    pub(crate) fn unchanged_since(
        &self,
        resource: ResourceId,
        since: u64,
        until: u64,
    ) -> Result<bool, TooOld> {
        let inner = self.inner.lock();
        if since < inner.compacted {
            return Err(TooOld {
                oldest: inner.compacted,
            });
        }
        Ok(inner
            .history
            .iter()
            .rev()
            .skip_while(|e| e.rv > until)
            .take_while(|e| e.rv > since)
            .all(|e| e.resource != resource))
    }
}

impl Inner {
    /// The kept events with a resourceVersion greater than `after`.
    fn history_after(&self, after: u64) -> std::collections::vec_deque::Iter<'_, Arc<Event>> {
        let first = self.history.front().map_or(0, |e| e.rv);
        // Every commit pushes exactly one event, so versions are contiguous.
        let len = self.history.len();
        let start = usize::try_from(after.saturating_add(1).saturating_sub(first))
            .map_or(len, |s| s.min(len));
        self.history.range(start..)
    }

    /// What wakes the watches of `resource`, created (with any before it)
    /// if new.
    fn changed_mut(&mut self, resource: ResourceId) -> &mut tokio::sync::watch::Sender<u64> {
        if self.changed.len() <= resource {
            let rv = self.rv;
            self.changed
                .resize_with(resource + 1, || tokio::sync::watch::channel(rv).0);
            self.compacted_by_resource.resize(resource + 1, 0);
        }
        &mut self.changed[resource]
    }

    /// The table of `resource`, created (with any before it) if new.
    fn table_mut(&mut self, resource: ResourceId) -> &mut BTreeMap<Key, Arc<Stored>> {
        if self.tables.len() <= resource {
            self.tables.resize_with(resource + 1, BTreeMap::new);
        }
        &mut self.tables[resource]
    }

    fn reindex(
        &mut self,
        resource: usize,
        key: &Key,
        old: Option<&Stored>,
        kind: EventType,
        new: &Stored,
    ) {
        let slot = (resource, key.clone());
        if let Some(old) = old {
            for owner in old.summary.owners.iter() {
                if let Some(set) = self.dependents.get_mut(&*owner.uid) {
                    set.remove(&slot);
                    if set.is_empty() {
                        self.dependents.remove(&*owner.uid);
                    }
                }
            }
            if !old.summary.uid.is_empty() {
                self.uids.remove(&*old.summary.uid);
            }
        }
        if kind != EventType::Deleted {
            for owner in new.summary.owners.iter() {
                self.dependents
                    .entry(owner.uid.to_string())
                    .or_default()
                    .insert(slot.clone());
            }
            if !new.summary.uid.is_empty() {
                self.uids.insert(new.summary.uid.to_string(), slot);
            }
        }
    }
}
