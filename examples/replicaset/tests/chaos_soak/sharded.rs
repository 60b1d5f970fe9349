//! The soak's sharded mode: the controllers run as members of one shard
//! ring (each member a ReplicaSet and a ReplicationController controller on
//! an informer factory of its own, sharded through the factory as a
//! `--shard-ring` manager shards them), members join, leave and are killed
//! on a seeded schedule, and every sync is recorded so the test can check
//! that no owner was ever synced by two members at once.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::{ObjectKey, SharedInformerFactory};
use ctrlkit_replicaset::{Controller, ControllerOptions, Error, ReplicaOwner};
use ctrlkit_runtime::Action;
use ctrlkit_runtime::shard::{CHECK_ANNOTATION, RING_LABEL, ShardConfig, ShardError, ShardMember};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ReplicationController;
use kube::api::{Api, ListParams, Patch, PatchParams};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The ring's name; its Leases live in the soak's namespace.
pub(crate) const RING: &str = "soak";
/// Members at the start, and at least this many when the schedule ends.
pub(crate) const INITIAL_MEMBERS: usize = 3;
/// Joins are skipped at this many live members.
const MAX_MEMBERS: usize = 5;

/// Short leases so that slots move many times in a minute of schedule (on
/// the paused clock they cost nothing); the ordering the protocol needs
/// (renew period < renew deadline < lease duration) is kept.
fn member_config(namespace: &str, id: &str) -> ShardConfig {
    ShardConfig::new(namespace, RING, id)
        .lease_duration(Duration::from_secs(3))
        .renew_deadline(Duration::from_secs(2))
        .renew_period(Duration::from_secs(1))
        .catch_up_timeout(Duration::from_secs(1))
}

// ---------------------------------------------------------------------------
// The membership schedule

/// A change of membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemberOp {
    /// A new member joins.
    Join,
    /// A member (picked among the live ones) leaves gracefully: it drains,
    /// releases its slots and deletes its Lease.
    Stop(u64),
    /// A member is killed: its tasks are aborted, its Lease is left to
    /// expire.
    Kill(u64),
    /// A member is killed and starts again at once under the same
    /// identity (a container restarted in its pod), finding its old Lease.
    Restart(u64),
    /// A member's Lease is edited by hand (through the driver's client).
    EditLease(u64, LeaseEdit),
}

/// A hand edit of a member's Lease (docs/sharding.md, "Bad input").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeaseEdit {
    /// The claims check garbled: the Lease claims every slot until its
    /// holder rewrites it.
    GarbleCheck,
    /// `holderIdentity` changed.
    Holder,
    /// The ring label removed: the Lease leaves every member's informer.
    Unlabel,
    /// `renewTime` 25 years in the past (a skewed clock).
    SkewRenewTime,
}

/// Membership changes and Lease edits, each to be applied before the
/// schedule's step of the same index. Drawn from streams of their own so
/// the user operations of a seed are the same in both modes.
pub(crate) fn member_schedule(seed: u64, steps: usize) -> Vec<(usize, MemberOp)> {
    let mut rng = crate::Rng::new(seed ^ 0x0005_4a2d_0005_4a2d);
    let mut out = Vec::new();
    for i in 0..steps {
        if !rng.percent(10) {
            continue;
        }
        let pick = rng.next();
        let op = match rng.below(100) {
            0..35 => MemberOp::Join,
            35..60 => MemberOp::Stop(pick),
            60..85 => MemberOp::Kill(pick),
            _ => MemberOp::Restart(pick),
        };
        out.push((i, op));
    }
    // Hand edits of Leases, from a stream of their own (the membership
    // changes above stay those of the seed).
    let mut edits = crate::Rng::new(seed ^ 0x00ed_17ed_00ed_17ed);
    for i in 0..steps {
        if !edits.percent(5) {
            continue;
        }
        let pick = edits.next();
        let edit = edits.pick(&[
            LeaseEdit::GarbleCheck,
            LeaseEdit::Holder,
            LeaseEdit::Unlabel,
            LeaseEdit::SkewRenewTime,
        ]);
        out.push((i, MemberOp::EditLease(pick, edit)));
    }
    out.sort_by_key(|(i, _)| *i);
    out
}

// ---------------------------------------------------------------------------
// The sync log

/// One sync of an owner by a member, in the order of the log's events.
#[derive(Clone, Debug)]
pub(crate) struct Interval {
    member: String,
    /// `rs/<namespace>/<name>` or `rc/...`.
    owner: String,
    /// The owner's UID when it was in the member's cache.
    uid: Option<String>,
    /// Positions in the log's event sequence (exact order, unlike times).
    start: u64,
    end: u64,
    /// Virtual times, for the messages.
    started: Instant,
    ended: Instant,
}

impl Interval {
    /// The same owner: same key, and the same UID when both are known (a
    /// deleted owner's clean-up sync has no object, hence no UID).
    fn same_owner(&self, other: &Interval) -> bool {
        self.owner == other.owner
            && match (&self.uid, &other.uid) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

#[derive(Default)]
struct LogState {
    seq: u64,
    done: Vec<Interval>,
}

/// Every sync of every member, recorded by a wrapper around the
/// controllers' reconcile inside the shard gate (so it records exactly the
/// syncs the gate let through).
#[derive(Default)]
pub(crate) struct SyncLog {
    state: Mutex<LogState>,
    origin: Mutex<Option<Instant>>,
}

/// Ends a sync's interval when dropped: when the sync returns, or when a
/// killed member's task is aborted mid-sync.
struct Open<'a> {
    log: &'a SyncLog,
    interval: Option<Interval>,
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if let Some(mut interval) = self.interval.take() {
            let mut state = self.log.state.lock();
            state.seq += 1;
            interval.end = state.seq;
            interval.ended = Instant::now();
            state.done.push(interval);
        }
    }
}

impl SyncLog {
    fn begin(&self, member: &str, owner: String, uid: Option<String>) -> Open<'_> {
        let mut state = self.state.lock();
        state.seq += 1;
        let now = Instant::now();
        self.origin.lock().get_or_insert(now);
        Open {
            log: self,
            interval: Some(Interval {
                member: member.to_owned(),
                owner,
                uid,
                start: state.seq,
                end: u64::MAX,
                started: now,
                ended: now,
            }),
        }
    }

    /// Syncs recorded so far, per member.
    pub(crate) fn per_member(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for i in &self.state.lock().done {
            *out.entry(i.member.clone()).or_default() += 1;
        }
        out
    }

    /// Every pair of syncs of one owner by two members that overlapped.
    pub(crate) fn overlaps(&self, seed: u64) -> Vec<String> {
        let origin = self.origin.lock().unwrap_or_else(Instant::now);
        let at = |t: Instant| t.saturating_duration_since(origin);
        let state = self.state.lock();
        let mut by_owner: BTreeMap<&str, Vec<&Interval>> = BTreeMap::new();
        for i in &state.done {
            by_owner.entry(&i.owner).or_default().push(i);
        }
        let mut out = Vec::new();
        for (owner, mut syncs) in by_owner {
            syncs.sort_by_key(|i| i.start);
            for (n, a) in syncs.iter().enumerate() {
                // Sorted by start: only later syncs that start before `a`
                // ends can overlap it.
                for b in syncs[n + 1..].iter().take_while(|b| b.start < a.end) {
                    if a.member != b.member && a.same_owner(b) {
                        out.push(format!(
                            "seed {seed}: {owner} synced by {} ({:?}..{:?}, uid {:?}) and by {} ({:?}..{:?}, uid {:?}) at once",
                            a.member,
                            at(a.started),
                            at(a.ended),
                            a.uid,
                            b.member,
                            at(b.started),
                            at(b.ended),
                            b.uid,
                        ));
                    }
                }
            }
        }
        out
    }
}

/// What a member's recording reconcile needs.
struct Recorded<O: ReplicaOwner> {
    controller: Controller<O>,
    member: String,
    kind: &'static str,
    log: Arc<SyncLog>,
}

/// The controller's own sync, recorded; called by the runtime inside the
/// shard gate, so only for owners the member holds.
async fn recorded_sync<O: ReplicaOwner>(
    key: ObjectKey,
    owner: Option<Arc<O>>,
    ctx: Arc<Recorded<O>>,
) -> Result<Action, Error> {
    let uid = owner.and_then(|o| o.meta().uid.clone());
    let _open = ctx
        .log
        .begin(&ctx.member, format!("{}/{key}", ctx.kind), uid);
    ctx.controller.sync(&key).await
}

// ---------------------------------------------------------------------------
// The members

struct RunningMember {
    id: String,
    token: CancellationToken,
    factory: SharedInformerFactory,
    ring: JoinHandle<Result<(), ShardError>>,
    controllers: Vec<(&'static str, JoinHandle<Result<(), Error>>)>,
}

/// What happened to the membership during a seed.
#[derive(Default, Debug)]
pub(crate) struct Membership {
    pub(crate) joins: usize,
    pub(crate) stops: usize,
    pub(crate) kills: usize,
    pub(crate) restarts: usize,
    /// Hand edits of members' Leases.
    pub(crate) edits: usize,
    /// Graceful leaves whose release failed under the injected faults
    /// (the Lease then expires instead).
    pub(crate) failed_releases: usize,
}

impl fmt::Display for Membership {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} joins, {} leaves, {} kills, {} restarts in place ({} releases failed under faults), {} Lease edits",
            self.joins, self.stops, self.kills, self.restarts, self.failed_releases, self.edits
        )
    }
}

/// The members of the ring in one seed.
pub(crate) struct Ring {
    client: kube::Client,
    /// The driver's client (never faulted), for hand edits.
    driver: kube::Client,
    namespace: String,
    options: ControllerOptions,
    members: Vec<RunningMember>,
    next_id: usize,
    pub(crate) log: Arc<SyncLog>,
    pub(crate) membership: Membership,
}

impl Ring {
    /// [`INITIAL_MEMBERS`] members on `client` (the faulted one); hand
    /// edits through `driver`.
    pub(crate) fn start(
        client: &kube::Client,
        driver: &kube::Client,
        namespace: &str,
        options: ControllerOptions,
    ) -> Ring {
        let mut ring = Ring {
            client: client.clone(),
            driver: driver.clone(),
            namespace: namespace.to_owned(),
            options,
            members: Vec::new(),
            next_id: 0,
            log: Arc::new(SyncLog::default()),
            membership: Membership::default(),
        };
        for _ in 0..INITIAL_MEMBERS {
            ring.join();
        }
        ring
    }

    fn join(&mut self) {
        let id = format!("m{}", self.next_id);
        self.next_id += 1;
        let member = self.start_member(id);
        self.members.push(member);
    }

    fn start_member(&self, id: String) -> RunningMember {
        let member = ShardMember::new(member_config(&self.namespace, &id)).unwrap();
        let factory = SharedInformerFactory::new(self.client.clone());
        // As a `--shard-ring` manager does: every controller built on the
        // factory is sharded with the member.
        factory.insert_extension(member.clone());
        let rs = Controller::<ReplicaSet>::new(
            self.client.clone(),
            &factory,
            self.options.clone(),
            None,
        )
        .unwrap();
        let rc = Controller::<ReplicationController>::new(
            self.client.clone(),
            &factory,
            self.options.clone(),
            None,
        )
        .unwrap();
        factory.start();
        let token = CancellationToken::new();
        let ring = tokio::spawn(
            member
                .clone()
                .run(self.client.clone(), token.clone().cancelled_owned()),
        );
        let controllers = vec![
            ("ReplicaSet", self.run_recorded(&id, "rs", rs, &token)),
            (
                "ReplicationController",
                self.run_recorded(&id, "rc", rc, &token),
            ),
        ];
        RunningMember {
            id,
            token,
            factory,
            ring,
            controllers,
        }
    }

    fn run_recorded<O: ReplicaOwner>(
        &self,
        id: &str,
        kind: &'static str,
        controller: Controller<O>,
        token: &CancellationToken,
    ) -> JoinHandle<Result<(), Error>> {
        let runtime = controller.runtime().clone();
        let ctx = Arc::new(Recorded {
            controller,
            member: id.to_owned(),
            kind,
            log: Arc::clone(&self.log),
        });
        let stop = token.clone().cancelled_owned();
        tokio::spawn(async move {
            runtime.run(recorded_sync::<O>, ctx, stop).await?;
            Ok(())
        })
    }

    /// Applies a membership change; what it did, for the trace.
    pub(crate) async fn apply(
        &mut self,
        op: MemberOp,
        problems: &mut Vec<String>,
    ) -> Option<String> {
        let pick = |n: u64, live: usize| (n % live as u64) as usize;
        match op {
            MemberOp::EditLease(n, edit) => {
                let id = &self.members[pick(n, self.members.len())].id;
                let lease = format!("{RING}-{id}");
                let patch = match edit {
                    LeaseEdit::GarbleCheck => {
                        json!({"metadata": {"annotations": {CHECK_ANNOTATION: "0000"}}})
                    }
                    LeaseEdit::Holder => json!({"spec": {"holderIdentity": "mallory"}}),
                    LeaseEdit::Unlabel => json!({"metadata": {"labels": {RING_LABEL: null}}}),
                    LeaseEdit::SkewRenewTime => {
                        json!({"spec": {"renewTime": "2001-01-01T00:00:00.000000Z"}})
                    }
                };
                let leases: Api<Lease> = Api::namespaced(self.driver.clone(), &self.namespace);
                // Not there yet (a member that just joined): nothing to edit.
                leases
                    .patch(&lease, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .ok()?;
                self.membership.edits += 1;
                Some(format!("Lease {lease} edited by hand: {edit:?}"))
            }
            MemberOp::Join if self.members.len() < MAX_MEMBERS => {
                self.join();
                self.membership.joins += 1;
                Some(format!("member {} joined", self.members.last().unwrap().id))
            }
            MemberOp::Restart(n) => {
                let i = pick(n, self.members.len());
                let id = self.members[i].id.clone();
                kill(self.members.remove(i)).await;
                let fresh = self.start_member(id.clone());
                self.members.insert(i, fresh);
                self.membership.restarts += 1;
                Some(format!("member {id} killed and restarted in place"))
            }
            // Keep at least one member, or nothing would sync.
            _ if self.members.len() <= 1 => None,
            MemberOp::Stop(n) => {
                let m = self.members.remove(pick(n, self.members.len()));
                let id = m.id.clone();
                self.membership.stops += 1;
                let stopped = stop(m).await;
                if stopped.release_failed {
                    self.membership.failed_releases += 1;
                }
                problems.extend(stopped.problems);
                Some(format!("member {id} left"))
            }
            MemberOp::Kill(n) => {
                let m = self.members.remove(pick(n, self.members.len()));
                let id = m.id.clone();
                self.membership.kills += 1;
                kill(m).await;
                Some(format!("member {id} killed"))
            }
            MemberOp::Join => None,
        }
    }

    /// The schedule's controller restart, sharded: one member (in turn)
    /// killed and restarted in place.
    pub(crate) async fn restart_one(&mut self, problems: &mut Vec<String>) -> Option<String> {
        let pick = (self.membership.restarts + self.membership.kills) as u64;
        self.apply(MemberOp::Restart(pick), problems).await
    }

    /// Tops the ring up to [`INITIAL_MEMBERS`] for settling.
    pub(crate) fn top_up(&mut self) {
        while self.members.len() < INITIAL_MEMBERS {
            self.join();
            self.membership.joins += 1;
        }
    }

    /// Stops every member gracefully (faults are off by then, so each must
    /// release cleanly); returns what went wrong, and checks that no ring
    /// Lease is left: killed members' expired Leases were collected by the
    /// others, the rest deleted on leaving.
    pub(crate) async fn stop_all(mut self, seed: u64) -> Vec<String> {
        let mut problems = Vec::new();
        for m in self.members.drain(..) {
            let stopped = stop(m).await;
            problems.extend(stopped.problems.iter().map(|p| format!("seed {seed}: {p}")));
            if stopped.release_failed {
                problems.push(format!(
                    "seed {seed}: a member could not release its Lease with the faults off"
                ));
            }
        }
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        match leases
            .list(&ListParams::default().labels(&format!("{RING_LABEL}={RING}")))
            .await
        {
            Ok(list) if list.items.is_empty() => {}
            Ok(list) => problems.push(format!(
                "seed {seed}: ring Leases left after every member left: {:?}",
                list.items
                    .iter()
                    .filter_map(|l| l.metadata.name.clone())
                    .collect::<Vec<_>>()
            )),
            Err(e) => problems.push(format!("seed {seed}: cannot list the ring's Leases: {e}")),
        }
        problems
    }
}

/// How a graceful leave went.
struct Stopped {
    /// What went wrong (a controller or the member failed or hung).
    problems: Vec<String>,
    /// The member could not release its Lease (under the injected faults
    /// a possible outcome: the Lease then expires).
    release_failed: bool,
}

/// A graceful leave: the controllers drain, the member releases its slots
/// and deletes its Lease.
async fn stop(m: RunningMember) -> Stopped {
    m.token.cancel();
    let mut problems = Vec::new();
    for (name, task) in m.controllers {
        match tokio::time::timeout(Duration::from_secs(300), task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => problems.push(format!(
                "member {}: the {name} controller failed: {e}",
                m.id
            )),
            Ok(Err(e)) => problems.push(format!(
                "member {}: the {name} controller task failed: {e}",
                m.id
            )),
            Err(_) => problems.push(format!(
                "member {}: the {name} controller did not stop",
                m.id
            )),
        }
    }
    let mut release_failed = false;
    match tokio::time::timeout(Duration::from_secs(300), m.ring).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(ShardError::Release { .. }))) => release_failed = true,
        Ok(Ok(Err(e))) => problems.push(format!("member {}: the shard member failed: {e}", m.id)),
        Ok(Err(e)) => problems.push(format!(
            "member {}: the shard member task failed: {e}",
            m.id
        )),
        Err(_) => problems.push(format!("member {}: the shard member did not stop", m.id)),
    }
    m.factory.shutdown().await;
    Stopped {
        problems,
        release_failed,
    }
}

/// As `kill -9`: every task of the member is aborted where it stands
/// (syncs in flight included); nothing is released.
async fn kill(m: RunningMember) {
    m.ring.abort();
    for (_, task) in &m.controllers {
        task.abort();
    }
    let _ = m.ring.await;
    for (_, task) in m.controllers {
        let _ = task.await;
    }
    m.factory.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(member: &str, uid: Option<&str>, start: u64, end: u64) -> Interval {
        let now = Instant::now();
        Interval {
            member: member.into(),
            owner: "rs/default/rs-01".into(),
            uid: uid.map(Into::into),
            start,
            end,
            started: now,
            ended: now,
        }
    }

    #[test]
    fn the_membership_schedule_is_a_function_of_the_seed_and_has_every_change() {
        let a = member_schedule(7, 200);
        assert_eq!(a, member_schedule(7, 200));
        assert_ne!(a, member_schedule(8, 200));
        let has = |f: fn(&MemberOp) -> bool| a.iter().any(|(_, op)| f(op));
        assert!(has(|op| *op == MemberOp::Join));
        assert!(has(|op| matches!(op, MemberOp::Stop(_))));
        assert!(has(|op| matches!(op, MemberOp::Kill(_))));
        assert!(has(|op| matches!(op, MemberOp::Restart(_))));
        assert!(has(|op| matches!(op, MemberOp::EditLease(..))));
        assert!(a.windows(2).all(|w| w[0].0 <= w[1].0), "in step order");
    }

    #[tokio::test(start_paused = true)]
    async fn overlapping_syncs_of_one_owner_by_two_members_are_found() {
        let log = SyncLog::default();
        log.state.lock().done = vec![
            // m0 then m1, one after the other: fine.
            interval("m0", Some("u1"), 1, 2),
            interval("m1", Some("u1"), 3, 6),
            // m2 starts while m1 syncs the same owner: a violation.
            interval("m2", Some("u1"), 4, 5),
            // Another UID of the same name (deleted and created again):
            // another owner.
            interval("m0", Some("u2"), 4, 5),
            // A clean-up sync (no UID) by m0 inside m1's: counted.
            interval("m0", None, 5, 7),
        ];
        let found = log.overlaps(1);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(
            found[0].contains("m1") && found[0].contains("m2"),
            "{}",
            found[0]
        );
        assert!(
            found[1].contains("m1") && found[1].contains("m0"),
            "{}",
            found[1]
        );
    }
}
