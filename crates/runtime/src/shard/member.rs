//! One member of a ring: its Lease (created, renewed, released), the
//! Lease informer that shows it the ring, and the loop that runs the
//! handover protocol and decides which slots it syncs.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use ctrlkit_informer::{
    DeletedObject, EventHandler, Informer, ObjectKey, compare_resource_versions,
};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::watcher;
use kube::{Api, Client};
use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::assign::assign;
use super::catch_up::{Caches, CatchUp};
use super::error::ShardError;
use super::handover::{Handover, Inputs};
use super::metrics::{AnomalyLabels, HandoverLabels, MemberLabels, ShardMetrics};
use super::relabel::{Outcome, Relabel};
use super::ring::{Anomaly, Claims, Expired, RING_LABEL, RingView, claim_annotations, inspect};
use super::slots::{SLOTS, SlotSet, slot_of_uid};
use crate::manager::WakeupBatching;

/// How a member takes part in a ring.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    namespace: String,
    ring: String,
    identity: String,
    lease_duration: Duration,
    renew_deadline: Duration,
    renew_period: Duration,
    catch_up_timeout: Duration,
    server_side_filtering: bool,
    child_cache_filtering: bool,
    child_label_selector: bool,
    metrics: Option<ShardMetrics>,
    wakeup_batching: Option<WakeupBatching>,
}

impl ShardConfig {
    /// Member `identity` (e.g. the pod name) of the ring `ring`, whose
    /// Leases live in `namespace`. Its Lease is named `<ring>-<identity>`.
    /// Lease duration 15 s, renew deadline 10 s, renewals every 2 s, as
    /// client-go's leader election.
    pub fn new(
        namespace: impl Into<String>,
        ring: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            ring: ring.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            renew_period: Duration::from_secs(2),
            catch_up_timeout: Duration::from_secs(3),
            server_side_filtering: true,
            child_cache_filtering: true,
            child_label_selector: true,
            metrics: None,
            wakeup_batching: None,
        }
    }

    /// How long after its last observed renewal a member counts as gone
    /// (written as `leaseDurationSeconds`, whole seconds, at least 1).
    pub fn lease_duration(mut self, d: Duration) -> Self {
        self.lease_duration = d;
        self
    }

    /// How long a member keeps syncing without a successful renewal; must
    /// be shorter than the lease duration.
    pub fn renew_deadline(mut self, d: Duration) -> Self {
        self.renew_deadline = d;
        self
    }

    /// How often the Lease is renewed; must be shorter than the renew
    /// deadline.
    pub fn renew_period(mut self, d: Duration) -> Self {
        self.renew_period = d;
        self
    }

    /// How long a gained slot waits, at most, for the attached
    /// controllers' caches to catch up with the ring (3 s by default).
    ///
    /// Before it syncs a slot it gained, a member reads the resource of
    /// every cache of every [sharded](crate::ControllerBuilder::shard)
    /// controller consistently, after the newest Lease version it has
    /// seen (at or after the previous holder's acknowledgement; the
    /// previous holder finished its syncs before that write), and waits
    /// until each cache holds what its read shows, so it shows every child
    /// the previous holder created and the member does not create them
    /// again. In a quiet cluster that holds at once. Past this timeout the
    /// slot starts anyway (*fails open*), with a warning and
    /// `ctrlkit_shard_catch_up_timeouts_total` — but never while a cache
    /// is still relisting for the member's new claims (server-side
    /// selector or child cache filter): such a cache may lack the slot's
    /// objects entirely, so the slot waits for the relist, with a warning
    /// once past the timeout. It also
    /// starts at once, with a warning, when a resourceVersion is not an
    /// integer (they cannot be ordered). Zero starts gained slots at once.
    pub fn catch_up_timeout(mut self, d: Duration) -> Self {
        self.catch_up_timeout = d;
        self
    }

    /// Whether the owner informers of the sharded controllers list and
    /// watch only the slots the member claims, with a KEP-5866
    /// `shardSelector` (on by default). A server that ignores the
    /// parameter is detected from its first list (no matching
    /// `metadata.shardInfo`); the caches then hold every owner and the
    /// client-side filter does the work, as it always does besides. A
    /// change of claims restarts the owner informers with a fresh list.
    ///
    /// Turn it off when a sharded controller's owner informer is shared
    /// with a controller that uses that kind as a child or watched kind
    /// (a shared informer has one selector).
    pub fn server_side_filtering(mut self, on: bool) -> Self {
        self.server_side_filtering = on;
        self
    }

    pub(crate) fn filters_server_side(&self) -> bool {
        self.server_side_filtering
    }

    /// Whether the child caches (the owned kinds) of the sharded
    /// controllers keep only the children of owners in the slots the
    /// member claims, plus the orphans (which any owner may adopt); on by
    /// default. The API server cannot select children by their owner
    /// (KEP-5866 hashes only `metadata.uid` and `metadata.namespace`), so
    /// the informer lists and watches every child (or, with
    /// [`child_label_selector`](Self::child_label_selector), every child
    /// labelled with a claimed slot or not labelled) and keeps only those
    /// whose controller `ownerReference` UID hashes into a claimed slot
    /// ([`Informer::set_client_filter`](ctrlkit_informer::Informer::set_client_filter)).
    /// A change of claims restarts the child informers with a fresh list,
    /// like the owner informers with server-side filtering, and a gained
    /// slot starts only once that list is complete (the catch-up waits for
    /// every cache); a child adopted by an owner of another member's slot
    /// leaves the cache as a delete.
    ///
    /// Turn it off when an owned kind's informer is shared with a
    /// controller that is not sharded with this member, or uses that kind
    /// as its owner or a watched kind (a shared informer has one filter).
    pub fn child_cache_filtering(mut self, on: bool) -> Self {
        self.child_cache_filtering = on;
        self
    }

    pub(crate) fn filters_child_caches(&self) -> bool {
        self.child_cache_filtering
    }

    /// Whether the child informers, when they filter the child caches,
    /// also send the server a label selector (on by default):
    /// `ctrlkit.io/shard-slot notin (<slots not claimed>)`
    /// ([`SLOT_LABEL`](super::SLOT_LABEL),
    /// [`SlotSet::child_label_selector`]), which selects the children
    /// labelled with a claimed slot and every child without the label
    /// (orphans, children created before sharding or by an unlabelled
    /// child control), so a member receives and decodes only its own
    /// slots' labelled children instead of every child. The children are
    /// labelled by the child controls that create them
    /// ([`slot_labeller`](super::slot_labeller); a sharded
    /// [`Manager`](crate::Manager)'s child controls do it).
    ///
    /// A child whose label does not name its controller's slot (edited by
    /// hand) or that has no controller but a label (released, or orphaned
    /// by the garbage collector) is sent only to the member claiming the
    /// slot its label names; that member corrects the label (set to the
    /// controller's slot, or removed from an orphan), logs it and counts
    /// it in [`ShardStats::children_relabelled`], so the child reaches the
    /// member that syncs its owner. Turn it off if children are written
    /// by something that does not label them with a labelled child control.
    pub fn child_label_selector(mut self, on: bool) -> Self {
        self.child_label_selector = on;
        self
    }

    pub(crate) fn sends_child_label_selector(&self) -> bool {
        self.child_label_selector
    }

    /// Records the member's metrics into `metrics`.
    pub fn metrics(mut self, metrics: &ShardMetrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Widens `batching`'s window to the member's share of the ring: the
    /// base window times the ring's slots over the slots it holds, at
    /// every change of its slots (see [`WakeupBatching::follow_share`]).
    /// Give it the handle of the runtime the member runs on; a
    /// [`Manager`](crate::Manager) started with
    /// [`block_on_main`](crate::manager::block_on_main) does.
    pub fn wakeup_batching(mut self, batching: &WakeupBatching) -> Self {
        self.wakeup_batching = Some(batching.clone());
        self
    }

    pub(crate) fn batching(&self) -> Option<&WakeupBatching> {
        self.wakeup_batching.as_ref()
    }

    /// The member's Lease name, `<ring>-<identity>`.
    pub fn lease_name(&self) -> String {
        format!("{}-{}", self.ring, self.identity)
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    pub(crate) fn validate(&self) -> Result<(), ShardError> {
        let bad = |why: String| Err(ShardError::Config { why });
        if self.namespace.is_empty() {
            return bad("the namespace is empty".into());
        }
        if self.ring.is_empty() || self.identity.is_empty() {
            return bad("the ring name and the member identity must not be empty".into());
        }
        let name = self.lease_name();
        let valid = name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name.ends_with(|c: char| c.is_ascii_alphanumeric());
        if !valid || self.ring.len() > 63 {
            return bad(format!(
                "the Lease name {name:?} (ring {:?}, identity {:?}) is not a valid object name \
                 (lower-case letters, digits, '-' and '.'; the ring name is a label value of at most 63)",
                self.ring, self.identity
            ));
        }
        if self.lease_duration < Duration::from_secs(1) {
            return bad("the lease duration must be at least 1s".into());
        }
        if self.renew_period.is_zero()
            || self.renew_period >= self.renew_deadline
            || self.renew_deadline >= self.lease_duration
        {
            return bad(format!(
                "need 0 < renew period ({:?}) < renew deadline ({:?}) < lease duration ({:?})",
                self.renew_period, self.renew_deadline, self.lease_duration
            ));
        }
        Ok(())
    }
}

/// A member's counters, for tests and status pages (the same figures as
/// its [metrics](ShardMetrics)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// Slots the member syncs now.
    pub slots_held: usize,
    /// Owners in the attached controllers' caches whose slot it holds,
    /// counted again whenever its slots change and at least once per renew
    /// period.
    pub owners_held: usize,
    /// Live members it sees, itself included.
    pub members: usize,
    /// Slots it started syncing, over its life.
    pub slots_gained: u64,
    /// Slots it acknowledged giving up, over its life.
    pub slots_released: u64,
    /// Reconciles run through its gate.
    pub syncs: u64,
    /// Reconciles its gate refused (owner not held).
    pub syncs_skipped: u64,
    /// Failed Lease writes.
    pub renew_failures: u64,
    /// Gained slots started before the caches caught up with the ring
    /// (see [`ShardConfig::catch_up_timeout`]).
    pub catch_up_timeouts: u64,
    /// Ring Lease versions it saw edited by hand or with a skewed clock,
    /// and writes or removals of its own Lease by someone else
    /// (`ctrlkit_shard_lease_anomalies_total`).
    pub lease_anomalies: u64,
    /// Children whose slot label it corrected (edited by hand, or kept
    /// after they lost their controller) or wrote (missing on a child of
    /// an owner it holds;
    /// `ctrlkit_shard_children_relabelled_total`).
    pub children_relabelled: u64,
}

#[derive(Default)]
struct Counters {
    gained: AtomicU64,
    released: AtomicU64,
    syncs: AtomicU64,
    skipped: AtomicU64,
    renew_failures: AtomicU64,
    catch_up_timeouts: AtomicU64,
    lease_anomalies: AtomicU64,
    children_relabelled: AtomicU64,
    owners_held: AtomicU64,
    members: AtomicU64,
}

/// What syncs may run, and which are running.
struct State {
    active: SlotSet,
    in_flight: Vec<u32>,
    /// The UIDs of owners whose events were admitted, so a reconcile of a
    /// deleted owner (no object any more) is still placed by its UID.
    uids: HashMap<ObjectKey, Arc<str>>,
}

impl State {
    fn in_flight(&self) -> SlotSet {
        let mut set = SlotSet::empty();
        for (slot, n) in self.in_flight.iter().enumerate() {
            if *n > 0 {
                set.insert(slot);
            }
        }
        set
    }
}

/// A controller attached to a member: how to queue its owners of newly
/// gained slots, count the owners held, and the caches a gained slot
/// waits for (see [`catch_up`](super::catch_up)).
pub(crate) struct Attached {
    pub(crate) requeue: Box<dyn Fn(&SlotSet) + Send + Sync>,
    pub(crate) count: Box<dyn Fn(&SlotSet) -> usize + Send + Sync>,
    pub(crate) caches: Caches,
    /// Narrows the owner informer (server-side filtering) and the child
    /// caches (client filter) to the claimed slots, before any of them
    /// starts.
    pub(crate) select: Box<dyn Fn(&SlotSet) + Send + Sync>,
}

pub(crate) struct Inner {
    config: ShardConfig,
    lease_name: String,
    labels: MemberLabels,
    state: Mutex<State>,
    view: Mutex<RingView>,
    wake: Notify,
    attached: Mutex<Vec<Attached>>,
    counters: Counters,
    /// Set while the member deletes its own Lease on leaving.
    leaving: AtomicBool,
    /// The version of the member's own Lease last reported as written by
    /// someone else (reported once per version).
    reported_edit: Mutex<Option<String>>,
    /// The last [`assign`]ment and the members it is for: it only changes
    /// with the members, and the step runs every quarter renew period.
    assignment: Mutex<Option<(Vec<String>, Vec<SlotSet>)>>,
    /// The active slots the owners were last counted in, and when: the
    /// count lists every cached owner, so it runs again only when the
    /// slots change or once per renew period, not at every step.
    owners_counted: Mutex<Option<(SlotSet, Instant)>>,
    /// Children seen with a wrong slot label, to correct.
    pub(crate) relabel: Arc<Relabel>,
}

impl Inner {
    /// Wakes the member's loop: a catch-up's reads call it when done, so
    /// the member checks its caches again at once.
    fn waker(inner: &Arc<Self>) -> impl FnOnce() + Send + 'static {
        let inner = Arc::clone(inner);
        move || inner.wake.notify_one()
    }

    /// `assign(members)`, computed again only when the members change.
    fn assignment(&self, members: &[String]) -> Vec<SlotSet> {
        let mut memo = self.assignment.lock();
        if let Some((of, slots)) = memo.as_ref()
            && of.as_slice() == members
        {
            return slots.clone();
        }
        let names: Vec<&str> = members.iter().map(String::as_str).collect();
        let slots = assign(&names);
        *memo = Some((members.to_vec(), slots.clone()));
        slots
    }

    /// Whether the owners held in `active` should be counted again at
    /// `now`: the slots changed, or a renew period passed since the last
    /// count (owners come and go without a step noticing).
    fn owners_count_due(&self, active: SlotSet, now: Instant) -> bool {
        let mut last = self.owners_counted.lock();
        let due = last.is_none_or(|(slots, at)| {
            slots != active || now.duration_since(at) >= self.config.renew_period
        });
        if due {
            *last = Some((active, now));
        }
        due
    }

    /// Logs and counts something wrong with the ring Lease `lease`.
    fn anomaly(&self, lease: &str, anomaly: Anomaly, detail: &str) {
        let config = &self.config;
        tracing::warn!(ring = %config.ring, member = %self.lease_name, namespace = %config.namespace, %lease, reason = anomaly.reason(), "suspect ring Lease: {detail}");
        self.counters
            .lease_anomalies
            .fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &config.metrics {
            m.lease_anomalies
                .get_or_create(&AnomalyLabels {
                    ring: self.labels.ring.clone(),
                    member: self.labels.member.clone(),
                    reason: anomaly.reason(),
                })
                .inc();
        }
    }

    /// Logs and counts the correction of a child's slot label.
    fn relabelled(&self, child: &str, found: Option<&str>, want: Option<&str>, outcome: Outcome) {
        let config = &self.config;
        let (ring, member) = (&config.ring, &self.lease_name);
        match (outcome, want) {
            (Outcome::Corrected, want) if found.is_none() => {
                tracing::debug!(%ring, %member, %child, want, "child created without the shard slot label: labelled");
            }
            // An orphan keeping its old owner's label is the normal end of
            // a release; any other wrong label was written by someone.
            (Outcome::Corrected, None) => {
                tracing::info!(%ring, %member, %child, found, "orphan kept its former owner's shard slot label: removed");
            }
            (Outcome::Corrected, Some(want)) => {
                tracing::warn!(%ring, %member, %child, found, want, "child's shard slot label did not name its controller's slot (edited by hand?): corrected");
            }
            (Outcome::Gone, _) => {
                tracing::debug!(%ring, %member, %child, "child with a wrong shard slot label is gone or was replaced");
                return;
            }
            (Outcome::GaveUp(error), want) => {
                tracing::warn!(%ring, %member, %child, found, want, error = &error as &dyn std::error::Error, "cannot correct the child's shard slot label; its next event retries");
                return;
            }
        }
        self.counters
            .children_relabelled
            .fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &config.metrics {
            m.children_relabelled.get_or_create(&self.labels).inc();
        }
    }

    /// Checks a Lease version seen for the first time.
    fn inspect(&self, lease: &Lease) {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let found = inspect(
            lease,
            &self.config.ring,
            self.config.lease_duration,
            k8s_openapi::jiff::Timestamp::now(),
        );
        for (anomaly, detail) in found {
            self.anomaly(name, anomaly, &detail);
        }
    }
}

/// One member of a shard ring: it holds a Lease in the ring's namespace,
/// sees the other members through a Lease informer, and syncs only the
/// owners whose UID hashes into the slots it holds. See the
/// [module documentation](super) and `docs/sharding.md`.
///
/// Clones are handles on the same member. Give it to the controller with
/// [`ControllerBuilder::shard`](crate::ControllerBuilder::shard) and
/// [`run`](Self::run) it beside the controller (a
/// [`Manager`](crate::Manager) with `--shard-ring` does both).
#[derive(Clone)]
pub struct ShardMember {
    pub(crate) inner: Arc<Inner>,
}

impl fmt::Debug for ShardMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardMember")
            .field("lease", &self.inner.lease_name)
            .field("namespace", &self.inner.config.namespace)
            .field("held", &self.held_slots())
            .finish_non_exhaustive()
    }
}

/// Keeps a slot's in-flight count while a sync runs.
pub(crate) struct SyncGuard {
    inner: Arc<Inner>,
    slot: usize,
}

impl Drop for SyncGuard {
    fn drop(&mut self) {
        let draining = {
            let mut state = self.inner.state.lock();
            let n = &mut state.in_flight[self.slot];
            *n = n.saturating_sub(1);
            *n == 0 && !state.active.contains(self.slot)
        };
        if draining {
            // The loop is waiting for this slot to drain to acknowledge it.
            self.inner.wake.notify_one();
        }
    }
}

impl ShardMember {
    /// A member with `config`; nothing happens until [`run`](Self::run).
    ///
    /// # Errors
    /// [`ShardError::Config`] for an empty or invalid name, or timings out
    /// of order.
    pub fn new(config: ShardConfig) -> Result<Self, ShardError> {
        config.validate()?;
        let lease_name = config.lease_name();
        let labels = MemberLabels {
            ring: config.ring.clone(),
            member: lease_name.clone(),
        };
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                lease_name,
                labels,
                state: Mutex::new(State {
                    active: SlotSet::empty(),
                    in_flight: vec![0; SLOTS],
                    uids: HashMap::new(),
                }),
                view: Mutex::new(RingView::default()),
                wake: Notify::new(),
                attached: Mutex::new(Vec::new()),
                counters: Counters::default(),
                leaving: AtomicBool::new(false),
                reported_edit: Mutex::new(None),
                assignment: Mutex::new(None),
                owners_counted: Mutex::new(None),
                relabel: Arc::default(),
            }),
        })
    }

    pub(crate) fn config(&self) -> &ShardConfig {
        &self.inner.config
    }

    /// The member's Lease name (its name on the ring).
    pub fn lease_name(&self) -> &str {
        &self.inner.lease_name
    }

    /// The slots the member syncs now.
    pub fn held_slots(&self) -> SlotSet {
        self.inner.state.lock().active
    }

    /// The slots the member may be syncing now: those it holds, and those
    /// it gave up whose syncs are still running. Members' busy slots never
    /// overlap; that is the protocol's invariant.
    pub fn busy_slots(&self) -> SlotSet {
        let state = self.inner.state.lock();
        state.active.union(&state.in_flight())
    }

    /// Whether the owner with this UID is synced by this member now.
    pub fn holds_uid(&self, uid: &str) -> bool {
        self.inner.state.lock().active.contains_uid(uid)
    }

    /// The member's counters.
    pub fn stats(&self) -> ShardStats {
        let c = &self.inner.counters;
        ShardStats {
            slots_held: self.held_slots().len(),
            owners_held: c.owners_held.load(Ordering::Relaxed) as usize,
            members: c.members.load(Ordering::Relaxed) as usize,
            slots_gained: c.gained.load(Ordering::Relaxed),
            slots_released: c.released.load(Ordering::Relaxed),
            syncs: c.syncs.load(Ordering::Relaxed),
            syncs_skipped: c.skipped.load(Ordering::Relaxed),
            renew_failures: c.renew_failures.load(Ordering::Relaxed),
            catch_up_timeouts: c.catch_up_timeouts.load(Ordering::Relaxed),
            lease_anomalies: c.lease_anomalies.load(Ordering::Relaxed),
            children_relabelled: c.children_relabelled.load(Ordering::Relaxed),
        }
    }

    /// Admits an event's key: owners of held slots (remembering their UID),
    /// and keys whose owner is unknown (the gate decides those).
    pub(crate) fn admit(&self, key: &ObjectKey, owner_uid: Option<&str>) -> bool {
        let Some(uid) = owner_uid else {
            return true;
        };
        let mut state = self.inner.state.lock();
        if !state.active.contains_uid(uid) {
            return false;
        }
        if state.uids.get(key).is_none_or(|u| **u != *uid) {
            state.uids.insert(key.clone(), Arc::from(uid));
        }
        true
    }

    /// Lets a sync of `key` start if its owner (by `uid`, else by the UID
    /// remembered from its events) is held, counting it in flight.
    pub(crate) fn enter(&self, key: &ObjectKey, uid: Option<&str>) -> Option<SyncGuard> {
        let mut state = self.inner.state.lock();
        let slot = match uid {
            Some(uid) => slot_of_uid(uid),
            None => slot_of_uid(state.uids.get(key)?),
        };
        if !state.active.contains(slot) {
            return None;
        }
        state.in_flight[slot] += 1;
        Some(SyncGuard {
            inner: Arc::clone(&self.inner),
            slot,
        })
    }

    /// Forgets the remembered UID of a deleted owner once it was synced.
    pub(crate) fn forget(&self, key: &ObjectKey) {
        self.inner.state.lock().uids.remove(key);
    }

    pub(crate) fn count_sync(&self, ran: bool) {
        let (counter, family) = match (ran, &self.inner.config.metrics) {
            (true, m) => (&self.inner.counters.syncs, m.as_ref().map(|m| &m.syncs)),
            (false, m) => (&self.inner.counters.skipped, m.as_ref().map(|m| &m.skipped)),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(f) = family {
            f.get_or_create(&self.inner.labels).inc();
        }
    }

    /// Attaches a controller; its caches are narrowed to the slots the
    /// member holds so far (none before it runs: the child caches then
    /// keep the orphans only, until the first claims).
    pub(crate) fn attach(&self, attached: Attached) {
        let active = self.inner.state.lock().active;
        (attached.select)(&active);
        self.inner.attached.lock().push(attached);
    }

    /// Makes `slot` active without the protocol (unit tests).
    #[cfg(test)]
    pub(crate) fn hold_for_test(&self, slot: usize) {
        self.inner.state.lock().active.insert(slot);
    }

    /// Tells the attached controllers `slots` were gained (unit tests);
    /// returns the owners they hold in them.
    #[cfg(test)]
    pub(crate) fn gained_for_test(&self, slots: &SlotSet) -> usize {
        let attached = self.inner.attached.lock();
        attached.iter().for_each(|a| (a.requeue)(slots));
        attached.iter().map(|a| (a.count)(slots)).sum()
    }

    /// Takes part in the ring until `shutdown` completes: creates and
    /// renews the member's Lease, watches the ring's Leases, and hands
    /// slots over as members come and go. Slots no Lease of the ring
    /// claims when the member joins start one lease duration after it
    /// joined (a member whose Lease was deleted by hand may still sync
    /// them); slots other members hold move by the handover protocol.
    ///
    /// On shutdown it stops syncing, waits (at most one lease duration)
    /// for the syncs in flight, releases its claims and deletes its Lease,
    /// so its slots move at once.
    ///
    /// Dropping the future instead leaves the Lease to expire, as a crash
    /// does: the other members take the slots over one lease duration
    /// after they last saw it renewed.
    ///
    /// # Errors
    /// [`ShardError::Informer`] if the Lease informer cannot start;
    /// [`ShardError::Release`] if the Lease could not be released on
    /// shutdown (it then expires). Failed renewals are not errors: they
    /// are logged, counted, and stop the member's syncs once the renew
    /// deadline passes.
    pub async fn run(self, client: Client, shutdown: impl Future) -> Result<(), ShardError> {
        let inner = &self.inner;
        let config = &inner.config;
        let api: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
        let informer = Informer::builder(api.clone())
            .watcher_config(
                watcher::Config::default().labels(&format!("{RING_LABEL}={}", config.ring)),
            )
            .handler(ViewHandler(Arc::clone(inner)))
            .build();
        let cancel = CancellationToken::new();
        let _stop_informer = cancel.clone().drop_guard();
        informer
            .start(cancel.clone())
            .map_err(ShardError::Informer)?;
        tracing::info!(ring = %config.ring, member = %inner.lease_name, namespace = %config.namespace, "joining the shard ring");

        let mut shutdown = std::pin::pin!(shutdown);
        // Before the first Lease write (no slot starts before it): the
        // Leases this member could not see through the ring's label.
        let tick = (config.renew_period / 4).max(Duration::from_millis(5));
        // Whether this member's Lease exists decides which request comes
        // first, so a fresh member's first write is not a 404.
        let Some(mut lease_exists) = self
            .observe_hidden_leases(&api, tick, shutdown.as_mut())
            .await
        else {
            return self.release(&api, tick, true).await;
        };
        // Polled beside the protocol's waits (not cancelled by them).
        let mut relabel = std::pin::pin!(inner.relabel.run(
            client,
            tick,
            |child, found, want, outcome| {
                inner.relabelled(child, found, want, outcome);
            }
        ));
        let mut handover = Handover::default();
        let mut catching_up: Vec<CatchUp> = Vec::new();
        let mut published: Option<(SlotSet, String)> = None;
        let mut last_ok: Option<Instant> = None;
        let mut next_renew = Instant::now();
        let mut retry_at = Instant::now();
        let mut was_fenced = false;
        loop {
            let now = Instant::now();
            let fenced = last_ok.is_none_or(|t| now.duration_since(t) >= config.renew_deadline);
            if fenced && !was_fenced && !handover.active.is_empty() {
                tracing::warn!(ring = %config.ring, member = %inner.lease_name, "Lease not renewed within the renew deadline: stopping every sync");
                if let Some(m) = &config.metrics {
                    m.fenced.get_or_create(&inner.labels).inc();
                }
            }
            was_fenced = fenced;
            let lease_rv = informer.last_sync_resource_version();
            let expired = self.step(
                &mut handover,
                &mut catching_up,
                lease_rv,
                &published,
                fenced,
                now,
            );
            for lease in expired {
                collect_expired(&api, config, &inner.lease_name, lease);
            }

            let due = now >= next_renew || published.as_ref().map(|p| p.0) != Some(handover.claims);
            if due && now >= retry_at {
                let sent = Instant::now();
                let write = LeaseWrite {
                    claims: &handover.claims,
                    released: false,
                    exists: lease_exists,
                };
                match write_lease(&api, config, &inner.lease_name, write).await {
                    Ok(rv) => {
                        lease_exists = true;
                        published = Some((handover.claims, rv));
                        last_ok = Some(sent);
                        next_renew = sent + config.renew_period;
                    }
                    Err(error) => {
                        inner
                            .counters
                            .renew_failures
                            .fetch_add(1, Ordering::Relaxed);
                        if let Some(m) = &config.metrics {
                            m.renew_failures.get_or_create(&inner.labels).inc();
                        }
                        tracing::warn!(ring = %config.ring, member = %inner.lease_name, error = &error as &dyn std::error::Error, "cannot renew the shard Lease");
                        retry_at = Instant::now() + tick;
                    }
                }
                continue;
            }
            tokio::select! {
                _ = shutdown.as_mut() => break,
                _ = inner.wake.notified() => {}
                _ = tokio::time::sleep(tick) => {}
                () = &mut relabel => {}
            }
        }
        self.release(&api, tick, lease_exists).await
    }

    /// One step of the protocol, with the state locked so no sync starts
    /// between reading what is in flight and changing what is active.
    /// Slots the protocol starts wait in `catching_up` until the attached
    /// caches reflect `lease_rv` (the newest Lease version seen) or the
    /// catch-up timeout passes. Returns the Leases that expired.
    fn step(
        &self,
        handover: &mut Handover,
        catching_up: &mut Vec<CatchUp>,
        lease_rv: Option<String>,
        published: &Option<(SlotSet, String)>,
        fenced: bool,
        now: Instant,
    ) -> Vec<Expired> {
        let inner = &self.inner;
        let config = &inner.config;
        let (snapshot, expired) = {
            let mut view = inner.view.lock();
            let expired = view.prune(now, config.lease_duration);
            for gone in &expired {
                tracing::info!(ring = %config.ring, member = %inner.lease_name, expired = %gone.name, "a ring member's Lease expired");
            }
            (
                view.snapshot(&inner.lease_name, now, config.lease_duration),
                expired,
            )
        };
        let mut desired = match snapshot.members.iter().position(|m| *m == inner.lease_name) {
            Some(i) if !fenced => inner.assignment(&snapshot.members)[i],
            _ => SlotSet::empty(),
        };
        // Our own Lease in a version newer than our last write: someone
        // else wrote it (a hand edit). The others act on what it claims
        // now, so stop at once what it no longer shows (rule 1), and claim
        // it again through the protocol; our next write restores it.
        if let (Some((Some(rv), claims)), Some((_, written))) = (&snapshot.own, published)
            && compare_resource_versions(rv, written).is_ok_and(std::cmp::Ordering::is_gt)
        {
            if inner.reported_edit.lock().replace(rv.clone()).as_ref() != Some(rv) {
                inner.anomaly(
                    &inner.lease_name,
                    Anomaly::OwnLeaseEdited,
                    &format!(
                        "version {rv} is newer than our last write ({written}): written by someone else \
                         (or a write of ours whose answer was lost); stopping the slots it no longer claims and rewriting it"
                    ),
                );
            }
            if let Claims::Valid(seen) = claims {
                desired = desired.intersection(seen);
            }
        }
        let own_observed = match (&snapshot.own, published) {
            (Some((Some(rv), Claims::Valid(seen))), Some((claims, written)))
                if rv == written && seen == claims =>
            {
                Some(*seen)
            }
            _ => None,
        };
        let changes = {
            let mut state = inner.state.lock();
            let changes = handover.step(&Inputs {
                desired,
                own_observed,
                others_claims: snapshot.others_claims,
                in_flight: state.in_flight(),
                fenced,
            });
            if !handover.claims.is_empty() {
                // Before the catch-up reads: they must list the new shard.
                for a in inner.attached.lock().iter() {
                    (a.select)(&handover.claims);
                }
            }
            if !changes.started.is_empty() {
                let caches = inner
                    .attached
                    .lock()
                    .iter()
                    .flat_map(|a| a.caches.iter().cloned())
                    .collect();
                catching_up.push(CatchUp::start(
                    changes.started,
                    lease_rv,
                    now + config.catch_up_timeout,
                    handover.claims,
                    caches,
                    Inner::waker(inner),
                ));
            }
            for c in catching_up.iter_mut() {
                c.slots = c.slots.intersection(&handover.active);
            }
            catching_up.retain(|c| !c.slots.is_empty());
            // Reads made for other claims list another shard than the
            // narrowed caches now hold: read again (only for slots still
            // waiting).
            for c in catching_up.iter_mut() {
                c.reread_for(handover.claims, Inner::waker(inner));
            }
            let active = handover.active.minus(&waiting(catching_up));
            // Only a slot leaving can leave a UID outside the active
            // slots: skip hashing every UID at the steps that change none.
            if !state.active.minus(&active).is_empty() {
                state.uids.retain(|_, uid| active.contains_uid(uid));
            }
            state.active = active;
            changes
        };
        let started = self.caught_up(catching_up, now);
        if !started.is_empty() {
            inner.state.lock().active = handover.active.minus(&waiting(catching_up));
            tracing::info!(ring = %config.ring, member = %inner.lease_name, slots = %started, "started syncing slots");
            for a in inner.attached.lock().iter() {
                (a.requeue)(&started);
            }
        }
        if !changes.stopped.is_empty() {
            tracing::info!(ring = %config.ring, member = %inner.lease_name, slots = %changes.stopped, "stopped syncing slots; releasing once their syncs finish");
        }
        if !changes.released.is_empty() {
            tracing::info!(ring = %config.ring, member = %inner.lease_name, slots = %changes.released, "released slots");
        }
        for (name, why) in &snapshot.invalid {
            // Warned and counted once per version by the Lease handler.
            tracing::debug!(ring = %config.ring, member = %inner.lease_name, lease = %name, reason = %why, "a ring Lease has invalid claims: counting it as claiming every slot until it expires");
        }
        let c = &inner.counters;
        if inner.owners_count_due(handover.active, now) {
            let owners: usize = inner
                .attached
                .lock()
                .iter()
                .map(|a| (a.count)(&handover.active))
                .sum();
            c.owners_held.store(owners as u64, Ordering::Relaxed);
        }
        c.gained.fetch_add(started.len() as u64, Ordering::Relaxed);
        c.released
            .fetch_add(changes.released.len() as u64, Ordering::Relaxed);
        c.members
            .store(snapshot.members.len() as u64, Ordering::Relaxed);
        let held = handover.active.len();
        if let Some(window) = config.batching().and_then(|b| b.follow_share(held, SLOTS)) {
            tracing::debug!(ring = %config.ring, member = %inner.lease_name, ?window, slots = held, "wakeup batching window follows the member's share");
        }
        if let Some(m) = &config.metrics {
            let l = &inner.labels;
            m.slots_held.get_or_create(l).set(held as i64);
            m.owners_held
                .get_or_create(l)
                .set(c.owners_held.load(Ordering::Relaxed) as i64);
            m.members
                .get_or_create(l)
                .set(snapshot.members.len() as i64);
            m.invalid_leases
                .get_or_create(l)
                .set(snapshot.invalid.len() as i64);
            for (direction, n) in [
                ("gained", started.len()),
                ("released", changes.released.len()),
            ] {
                if n > 0 {
                    m.handovers
                        .get_or_create(&HandoverLabels {
                            ring: l.ring.clone(),
                            member: l.member.clone(),
                            direction,
                        })
                        .inc_by(n as u64);
                }
            }
        }
        expired
    }

    /// Takes out of `catching_up` the slots whose caches caught up, or
    /// whose wait timed out (failing open, with a warning); returns them.
    fn caught_up(&self, catching_up: &mut Vec<CatchUp>, now: Instant) -> SlotSet {
        let inner = &self.inner;
        let config = &inner.config;
        let mut started = SlotSet::empty();
        catching_up.retain_mut(|c| {
            // Never start, not even failing open, while a cache may not
            // hold the slots at all yet (its relist for the new claims is
            // not complete): wait for it, however long it takes.
            if c.relisting() {
                if now >= c.deadline && !c.warned {
                    c.warned = true;
                    tracing::warn!(ring = %config.ring, member = %inner.lease_name, slots = %c.slots, timeout = ?config.catch_up_timeout, "a cache is still relisting for the claimed slots past the catch-up timeout: the gained slots wait for it");
                }
                return true;
            }
            let Some(target) = c.target.clone() else {
                return start_now(&mut started, &c.slots);
            };
            let ready = c.ready();
            match ready {
                Ok(true) => start_now(&mut started, &c.slots),
                Ok(false) if now < c.deadline => true,
                Ok(false) => {
                    tracing::warn!(ring = %config.ring, member = %inner.lease_name, slots = %c.slots, resource_version = %target, timeout = ?config.catch_up_timeout, "the caches did not reach the ring's resourceVersion in time (a quiet cache, or a lagging watch): starting the gained slots anyway");
                    inner
                        .counters
                        .catch_up_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                    if let Some(m) = &config.metrics {
                        m.catch_up_timeouts.get_or_create(&inner.labels).inc();
                    }
                    start_now(&mut started, &c.slots)
                }
                Err(error) => {
                    tracing::warn!(ring = %config.ring, member = %inner.lease_name, slots = %c.slots, error = &error as &dyn std::error::Error, "cannot order resourceVersions: starting the gained slots without waiting for the caches");
                    start_now(&mut started, &c.slots)
                }
            }
        });
        started
    }

    /// Lists the namespace's Leases once and keeps the claims of those
    /// that claim slots without the ring label (a member unlabelled by
    /// hand, invisible to the ring's informer, may still be syncing them)
    /// until they would have expired, as the other members do for a
    /// Lease that vanished while they watched (see
    /// [`RingView::observe_hidden`]). The slots no Lease of the ring
    /// claims are kept the same way, for one lease duration: a member
    /// whose Lease was deleted by hand shows in no list at all (see
    /// [`RingView::observe_unclaimed`]). A failed list is retried every
    /// `tick`: no slot starts before it succeeds. Returns whether this
    /// member's own Lease is in the list, or `None` if `shutdown`
    /// completed first.
    async fn observe_hidden_leases(
        &self,
        api: &Api<Lease>,
        tick: Duration,
        mut shutdown: std::pin::Pin<&mut impl Future>,
    ) -> Option<bool> {
        let inner = &self.inner;
        loop {
            match api.list(&ListParams::default()).await {
                Ok(list) => {
                    let now = Instant::now();
                    let mut view = inner.view.lock();
                    let mut own = false;
                    for lease in &list.items {
                        if lease.metadata.name.as_deref() == Some(inner.lease_name.as_str()) {
                            own = true;
                        } else {
                            view.observe_hidden(lease, now);
                        }
                    }
                    let config = &inner.config;
                    let waiting = view.observe_unclaimed(
                        &config.ring,
                        &list.items,
                        now,
                        config.lease_duration,
                    );
                    if waiting > 0 {
                        tracing::info!(ring = %config.ring, member = %inner.lease_name, slots = waiting, wait = ?config.lease_duration, "slots no Lease of the ring claims start one lease duration after joining (a member whose Lease was deleted by hand may still sync them)");
                    }
                    return Some(own);
                }
                Err(error) => {
                    tracing::warn!(ring = %inner.config.ring, member = %inner.lease_name, error = &error as &dyn std::error::Error, "cannot list the namespace's Leases for members hidden from the ring (a ring label removed by hand); retrying before joining");
                    tokio::select! {
                        _ = shutdown.as_mut() => return None,
                        _ = tokio::time::sleep(tick) => {}
                    }
                }
            }
        }
    }

    /// Leaves the ring: stop, drain, unclaim, delete the Lease
    /// (`lease_exists`: whether it is known to exist).
    async fn release(
        &self,
        api: &Api<Lease>,
        tick: Duration,
        lease_exists: bool,
    ) -> Result<(), ShardError> {
        let inner = &self.inner;
        let config = &inner.config;
        inner.state.lock().active = SlotSet::empty();
        let deadline = Instant::now() + config.lease_duration;
        loop {
            let in_flight = inner.state.lock().in_flight();
            if in_flight.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                tracing::warn!(ring = %config.ring, member = %inner.lease_name, slots = %in_flight, "syncs still running after one lease duration: leaving the Lease to expire");
                return Ok(());
            }
            tokio::select! {
                _ = inner.wake.notified() => {}
                _ = tokio::time::sleep(tick) => {}
            }
        }
        inner.leaving.store(true, Ordering::SeqCst);
        let write = LeaseWrite {
            claims: &SlotSet::empty(),
            released: true,
            exists: lease_exists,
        };
        write_lease(api, config, &inner.lease_name, write)
            .await
            .map_err(|source| ShardError::Release {
                lease: inner.lease_name.clone(),
                source,
            })?;
        match api
            .delete(&inner.lease_name, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(source) => {
                return Err(ShardError::Release {
                    lease: inner.lease_name.clone(),
                    source,
                });
            }
        }
        tracing::info!(ring = %config.ring, member = %inner.lease_name, "left the shard ring");
        Ok(())
    }
}

/// The slots still waiting for their caches.
fn waiting(catching_up: &[CatchUp]) -> SlotSet {
    catching_up
        .iter()
        .fold(SlotSet::empty(), |all, c| all.union(&c.slots))
}

/// Adds `slots` to `started`; returns `false`, so `retain` drops the
/// entry that held them.
fn start_now(started: &mut SlotSet, slots: &SlotSet) -> bool {
    *started = started.union(slots);
    false
}

/// One write of a member's Lease.
struct LeaseWrite<'a> {
    /// The slots the member claims.
    claims: &'a SlotSet,
    /// Whether the member is leaving (its claims released).
    released: bool,
    /// Whether the Lease is known to exist. If so it is patched first
    /// (and created on a 404: deleted by hand); if not it is created first
    /// (and patched on a 409: left by an earlier run under this name).
    exists: bool,
}

/// Writes the member's Lease (creating it if missing); returns the new
/// resourceVersion.
async fn write_lease(
    api: &Api<Lease>,
    config: &ShardConfig,
    name: &str,
    write: LeaseWrite<'_>,
) -> Result<String, kube::Error> {
    let annotations = claim_annotations(name, write.claims, write.released);
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let lease = || {
        let mut lease = Lease::default();
        lease.metadata.name = Some(name.to_owned());
        lease.metadata.labels = Some([(RING_LABEL.to_owned(), config.ring.clone())].into());
        lease.metadata.annotations = Some(
            annotations
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
                .collect(),
        );
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(config.identity.clone()),
            lease_duration_seconds: Some(config.lease_seconds()),
            acquire_time: Some(now.clone()),
            renew_time: Some(now.clone()),
            ..LeaseSpec::default()
        });
        lease
    };
    if !write.exists {
        match api.create(&PostParams::default(), &lease()).await {
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            created => return Ok(created?.metadata.resource_version.unwrap_or_default()),
        }
    }
    let patch = json!({
        "metadata": {
            "labels": { RING_LABEL: config.ring },
            "annotations": annotations,
        },
        "spec": {
            "holderIdentity": config.identity,
            "leaseDurationSeconds": config.lease_seconds(),
            "renewTime": now,
        },
    });
    let written = match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Err(kube::Error::Api(s)) if s.code == 404 => {
            api.create(&PostParams::default(), &lease()).await?
        }
        other => other?,
    };
    Ok(written.metadata.resource_version.unwrap_or_default())
}

/// Deletes another member's Lease that expired in this member's view, if
/// it is still the version seen expiring (a precondition): a dead member's
/// Lease would otherwise stay forever (identities are per process or per
/// pod), and every relist or new member would count it live again for a
/// lease duration. Every member races to do it; losing is harmless. A
/// holder that was only cut off re-creates its Lease when it renews again
/// (it stopped syncing at its renew deadline, before expiry).
fn collect_expired(api: &Api<Lease>, config: &ShardConfig, own: &str, lease: Expired) {
    let Some(rv) = lease.resource_version.filter(|_| lease.name != own) else {
        return;
    };
    let (api, ring, name) = (api.clone(), config.ring.clone(), lease.name);
    tokio::spawn(async move {
        let params = DeleteParams::default().preconditions(Preconditions {
            resource_version: Some(rv),
            uid: None,
        });
        match api.delete(&name, &params).await {
            Ok(_) => tracing::info!(%ring, lease = %name, "deleted an expired ring Lease"),
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(error) => {
                tracing::debug!(%ring, lease = %name, error = &error as &dyn std::error::Error, "cannot delete an expired ring Lease")
            }
        }
    });
}

/// Feeds the ring view from the Lease informer and wakes the loop.
struct ViewHandler(Arc<Inner>);

impl ViewHandler {
    fn observe(&self, lease: &Lease) {
        self.0.view.lock().observe(lease, Instant::now());
        self.0.wake.notify_one();
    }
}

impl EventHandler<Lease> for ViewHandler {
    fn on_add(&self, lease: &Arc<Lease>, _initial: bool) {
        self.0.inspect(lease);
        self.observe(lease);
    }

    fn on_update(&self, old: &Arc<Lease>, new: &Arc<Lease>) {
        if old.metadata.resource_version != new.metadata.resource_version {
            self.0.inspect(new);
        }
        self.observe(new);
    }

    fn on_delete(&self, lease: &DeletedObject<Lease>) {
        if let Some(name) = lease.object().metadata.name.as_deref() {
            if name == self.0.lease_name && !self.0.leaving.load(Ordering::SeqCst) {
                self.0.anomaly(
                    name,
                    Anomaly::OwnLeaseRemoved,
                    "our own Lease was deleted or lost its ring label while we are live \
                     (by hand, or by a member that saw it expire); the others keep its last claims \
                     until it would have expired; re-creating it at the next renewal",
                );
            }
            self.0.view.lock().observe_gone(name);
        }
        self.0.wake.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_counted_again_when_the_slots_change_or_a_renew_period_passed() {
        let config = ShardConfig::new("ns", "ring", "a").renew_period(Duration::from_secs(2));
        let member = ShardMember::new(config).unwrap();
        let (inner, t0) = (&member.inner, Instant::now());
        let mut slots = SlotSet::empty();
        slots.insert(7);
        assert!(inner.owners_count_due(slots, t0), "never counted");
        assert!(!inner.owners_count_due(slots, t0 + Duration::from_secs(1)));
        let mut more = slots;
        more.insert(8);
        assert!(inner.owners_count_due(more, t0 + Duration::from_secs(1)));
        assert!(!inner.owners_count_due(more, t0 + Duration::from_millis(2900)));
        assert!(inner.owners_count_due(more, t0 + Duration::from_secs(3)));
    }

    #[test]
    fn bad_configurations_are_refused_with_the_reason() {
        let ok = ShardConfig::new("ns", "ring", "pod-0");
        assert!(ShardMember::new(ok.clone()).is_ok());
        for (config, says) in [
            (ShardConfig::new("", "ring", "a"), "namespace"),
            (ShardConfig::new("ns", "", "a"), "empty"),
            (
                ShardConfig::new("ns", "Ring", "a"),
                "not a valid object name",
            ),
            (
                ShardConfig::new("ns", "ring", "a_b"),
                "not a valid object name",
            ),
            (
                ok.clone().renew_deadline(Duration::from_secs(20)),
                "renew deadline",
            ),
            (ok.clone().renew_period(Duration::ZERO), "renew period"),
        ] {
            let err = ShardMember::new(config).unwrap_err().to_string();
            assert!(err.contains(says), "{err}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn gained_slots_wait_for_the_caches_and_fail_open_after_the_timeout() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::runtime::watcher::Event;
        let member = ShardMember::new(ShardConfig::new("ns", "ring", "a")).unwrap();
        let pods = Informer::<Pod>::manual().build();
        let pod = |rv: &str| {
            let mut p = Pod::default();
            p.metadata.namespace = Some("ns".into());
            p.metadata.name = Some("p".into());
            p.metadata.resource_version = Some(rv.into());
            p
        };
        pods.apply_event(Event::Init);
        pods.apply_event(Event::InitApply(pod("5")));
        pods.apply_event(Event::InitDone);
        let caches: Caches = vec![Arc::new(pods.store())];
        let set = |t: &str| -> SlotSet { t.parse().unwrap() };
        let now = Instant::now();
        let deadline = now + Duration::from_secs(3);
        let wait = |slots: &str, target: Option<&str>| {
            CatchUp::start(
                set(slots),
                target.map(str::to_owned),
                deadline,
                SlotSet::empty(),
                caches.clone(),
                || {},
            )
        };
        let mut waiting = vec![
            wait("0-9", Some("10")),
            wait("20", None),
            wait("30", Some("not-a-number")),
        ];
        // No Lease version to wait for, or versions that cannot be
        // ordered: start at once; the cache behind the ring (and no API to
        // read it from): wait.
        tokio::task::yield_now().await;
        assert_eq!(member.caught_up(&mut waiting, now), set("20,30"));
        assert_eq!(waiting.len(), 1);
        pods.apply_event(Event::Apply(pod("10")));
        assert_eq!(member.caught_up(&mut waiting, now), set("0-9"));
        assert!(waiting.is_empty());
        assert_eq!(member.stats().catch_up_timeouts, 0);

        // A cache that never catches up: started at the deadline, counted.
        waiting.push(wait("40", Some("99")));
        let later = now + Duration::from_secs(2);
        assert!(member.caught_up(&mut waiting, later).is_empty());
        assert_eq!(member.caught_up(&mut waiting, deadline), set("40"));
        assert_eq!(member.stats().catch_up_timeouts, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hand_edit_of_the_own_lease_stops_the_slots_it_no_longer_claims() {
        let member = ShardMember::new(ShardConfig::new("ns", "ring", "a")).unwrap();
        let set = |t: &str| -> SlotSet { t.parse().unwrap() };
        let lease = |rv: &str, claims: &SlotSet| -> Lease {
            let mut l = Lease::default();
            l.metadata.name = Some("ring-a".into());
            l.metadata.resource_version = Some(rv.into());
            l.metadata.annotations = Some(
                claim_annotations("ring-a", claims, false)
                    .into_iter()
                    .filter_map(|(k, v)| Some((k, v?)))
                    .collect(),
            );
            l.spec = Some(LeaseSpec {
                holder_identity: Some("a".into()),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            });
            l
        };
        let now = Instant::now();
        // Alone on the ring, holding everything, as last written (rv 5).
        let mut handover = Handover {
            active: SlotSet::full(),
            claims: SlotSet::full(),
        };
        let published = Some((SlotSet::full(), "5".to_owned()));
        member
            .inner
            .view
            .lock()
            .observe(&lease("5", &SlotSet::full()), now);
        member.step(&mut handover, &mut Vec::new(), None, &published, false, now);
        assert_eq!(handover.active, SlotSet::full());
        assert_eq!(member.stats().lease_anomalies, 0);

        // Someone rewrites its claims by hand, with a valid check (rv 7):
        // another member could act on them, so the slots the Lease no
        // longer claims stop at once, and the claims shrink to be written.
        member
            .inner
            .view
            .lock()
            .observe(&lease("7", &set("0-9")), now);
        member.step(&mut handover, &mut Vec::new(), None, &published, false, now);
        assert_eq!(handover.active, set("0-9"));
        assert_eq!(handover.claims, set("0-9"));
        assert_eq!(member.stats().lease_anomalies, 1);
        // Reported once per version.
        member.step(&mut handover, &mut Vec::new(), None, &published, false, now);
        assert_eq!(member.stats().lease_anomalies, 1);

        // Our rewrite (rv 8) is seen: everything is claimed and, once that
        // claim is seen too, started again through the protocol.
        let published = Some((handover.claims, "8".to_owned()));
        member
            .inner
            .view
            .lock()
            .observe(&lease("8", &handover.claims), now);
        member.step(&mut handover, &mut Vec::new(), None, &published, false, now);
        assert_eq!(handover.claims, SlotSet::full());
        let published = Some((SlotSet::full(), "9".to_owned()));
        member
            .inner
            .view
            .lock()
            .observe(&lease("9", &SlotSet::full()), now);
        member.step(&mut handover, &mut Vec::new(), None, &published, false, now);
        assert_eq!(handover.active, SlotSet::full());
    }

    #[test]
    fn the_gate_counts_syncs_in_flight_only_for_held_slots() {
        let member = ShardMember::new(ShardConfig::new("ns", "ring", "a")).unwrap();
        let key = ObjectKey::new("ns", "web");
        let uid = "uid-1";
        assert!(!member.admit(&key, Some(uid)));
        assert!(member.enter(&key, Some(uid)).is_none());
        let slot = slot_of_uid(uid);
        member.inner.state.lock().active.insert(slot);
        assert!(member.admit(&key, Some(uid)));
        assert!(member.admit(&ObjectKey::new("ns", "mapped"), None));
        // Deleted owner: placed by the UID its events carried.
        let guard = member.enter(&key, None).expect("remembered UID");
        assert!(member.inner.state.lock().in_flight().contains(slot));
        drop(guard);
        assert!(member.inner.state.lock().in_flight().is_empty());
        assert!(
            member
                .enter(&ObjectKey::new("ns", "unknown"), None)
                .is_none()
        );
    }
}
