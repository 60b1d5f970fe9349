//! Per-owner churn bookkeeping: which failed pods were counted, how many
//! strikes the owner has, and until when its creations wait.
//!
//! Pure state over the pods a sync hands in and two clocks: tokio's
//! [`Instant`] for the backoff (so paused-time tests drive it) and the wall
//! clock for pod ages (pod timestamps are wall-clock times set by the API
//! server).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use ctrlkit_podcontrol::pod::{is_controlled_by, pod_phase};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::options::ChurnGuardOptions;

/// A pod seen `Failed` soon after its creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChurnedPod {
    pub(crate) name: String,
    pub(crate) reason: String,
    pub(crate) message: String,
    /// From its creation to the sync that saw it failed.
    pub(crate) age: Duration,
}

/// What the churn guard found in one sync of one owner.
#[derive(Debug, Default)]
pub(crate) struct Assessment {
    /// Pods that churned and were not counted before, oldest first.
    pub(crate) churned: Vec<ChurnedPod>,
    /// Strikes the owner has now.
    pub(crate) strikes: u32,
    /// How long creations must still wait; `None` if they may go ahead.
    pub(crate) backoff: Option<Duration>,
    /// The most recent churned pod while the owner has strikes: what the
    /// `ReplicaFailure` condition reports.
    pub(crate) latest: Option<ChurnedPod>,
    /// `Failed` pods beyond the kept number, oldest first: to delete.
    pub(crate) excess_failed: Vec<Arc<Pod>>,
    /// The owner had strikes and they were forgotten in this sync.
    pub(crate) cleared: bool,
}

struct OwnerChurn {
    uid: String,
    strikes: u32,
    last_strike: Instant,
    backoff_until: Instant,
    /// UIDs of failed pods already assessed as churned.
    counted: HashSet<String>,
    /// Creation time of the youngest churned pod: a pod created no earlier
    /// than it that runs shows the problem is gone.
    newest_churned_creation: Option<Timestamp>,
    latest: Option<ChurnedPod>,
}

impl OwnerChurn {
    fn new(uid: &str, now: Instant) -> Self {
        Self {
            uid: uid.to_owned(),
            strikes: 0,
            last_strike: now,
            backoff_until: now,
            counted: HashSet::new(),
            newest_churned_creation: None,
            latest: None,
        }
    }

    /// Forgets the strikes (the counted pods stay counted).
    fn clear(&mut self, now: Instant) {
        self.strikes = 0;
        self.backoff_until = now;
        self.newest_churned_creation = None;
        self.latest = None;
    }
}

/// The churn state of every owner of one controller, keyed by owner key.
pub(crate) struct ChurnTracker {
    options: ChurnGuardOptions,
    owners: Mutex<HashMap<String, OwnerChurn>>,
}

fn created(pod: &Pod) -> Option<Timestamp> {
    pod.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Whether `pod` (known to be `Failed`) churned: a listed reason, and seen
/// failed at `wall_now` less than the window after its creation.
fn churned_pod(pod: &Pod, options: &ChurnGuardOptions, wall_now: Timestamp) -> Option<ChurnedPod> {
    let status = pod.status.as_ref();
    let reason = status.and_then(|s| s.reason.clone()).unwrap_or_default();
    if !options.matches_reason(&reason) {
        return None;
    }
    // Without a creation time the age is unknown: not counted.
    let age = wall_now.duration_since(created(pod)?);
    // A creation time in the future (clock skew) reads as age zero.
    let age = Duration::try_from(age).unwrap_or(Duration::ZERO);
    if age > options.window {
        return None;
    }
    Some(ChurnedPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        reason,
        message: status.and_then(|s| s.message.clone()).unwrap_or_default(),
        age,
    })
}

impl ChurnTracker {
    pub(crate) fn new(options: ChurnGuardOptions) -> Self {
        Self {
            options,
            owners: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, OwnerChurn>> {
        // The map holds no invariant a panicking holder could break.
        self.owners.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Assesses the owner `key` (UID `owner_uid`) from `pods`, the cached
    /// pods of the sync (pods it does not control are ignored), and
    /// updates its strikes and backoff. A disabled guard finds nothing.
    pub(crate) fn assess(
        &self,
        key: &str,
        owner_uid: &str,
        pods: &[Arc<Pod>],
        now: Instant,
        wall_now: Timestamp,
    ) -> Assessment {
        if !self.options.enabled {
            return Assessment::default();
        }
        let mut failed: Vec<&Arc<Pod>> = pods
            .iter()
            .filter(|p| is_controlled_by(p, owner_uid) && pod_phase(p) == "Failed")
            .collect();
        failed.sort_by(|a, b| (created(a), &a.metadata.name).cmp(&(created(b), &b.metadata.name)));

        let mut owners = self.lock();
        let state = owners
            .entry(key.to_owned())
            .or_insert_with(|| OwnerChurn::new(owner_uid, now));
        if state.uid != owner_uid {
            // A new owner with the old name starts clean.
            *state = OwnerChurn::new(owner_uid, now);
        }
        let mut cleared = false;
        let forget_after = self.options.backoff_max.saturating_mul(2);
        if state.strikes > 0
            && now >= state.backoff_until
            && now.duration_since(state.last_strike) > forget_after
        {
            state.clear(now);
            cleared = true;
        }

        // Pods that are gone cannot be seen again.
        state.counted.retain(|uid| {
            failed
                .iter()
                .any(|p| p.metadata.uid.as_deref() == Some(uid.as_str()))
        });
        let mut churned = Vec::new();
        for pod in &failed {
            let Some(uid) = pod.metadata.uid.as_deref() else {
                continue;
            };
            if state.counted.contains(uid) {
                continue;
            }
            if let Some(found) = churned_pod(pod, &self.options, wall_now) {
                state.counted.insert(uid.to_owned());
                state.strikes = state.strikes.saturating_add(1);
                state.newest_churned_creation = state.newest_churned_creation.max(created(pod));
                churned.push(found);
            }
        }
        if let Some(last) = churned.last() {
            state.last_strike = now;
            let until = now + self.options.backoff(state.strikes);
            state.backoff_until = state.backoff_until.max(until);
            state.latest = Some(last.clone());
            cleared = false;
        }

        // A pod created no earlier than the last churned one got past
        // admission: whatever rejected pods has stopped.
        if state.strikes > 0
            && let Some(since) = state.newest_churned_creation
            && pods.iter().any(|p| {
                is_controlled_by(p, owner_uid)
                    && pod_phase(p) == "Running"
                    && p.metadata.deletion_timestamp.is_none()
                    && created(p).is_some_and(|c| c >= since)
            })
        {
            state.clear(now);
            cleared = true;
        }

        let backoff = (state.backoff_until > now).then(|| state.backoff_until - now);
        let assessment = Assessment {
            churned,
            strikes: state.strikes,
            backoff,
            latest: state.latest.clone(),
            excess_failed: Vec::new(),
            cleared,
        };
        if state.strikes == 0 && state.counted.is_empty() {
            owners.remove(key);
        }
        drop(owners);

        let deletable: Vec<&Arc<Pod>> = failed
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = deletable
            .len()
            .saturating_sub(self.options.failed_pods_kept);
        Assessment {
            excess_failed: deletable[..excess].iter().map(|p| Arc::clone(p)).collect(),
            ..assessment
        }
    }

    /// How long creations for `key` must still wait, if at all.
    pub(crate) fn creation_backoff(&self, key: &str, now: Instant) -> Option<Duration> {
        if !self.options.enabled {
            return None;
        }
        let owners = self.lock();
        let until = owners.get(key)?.backoff_until;
        (until > now).then(|| until - now)
    }

    /// How many pods `key` may create once its backoff is over: `None`
    /// without strikes (no limit); with strikes one *probe*, or none while
    /// an earlier probe (a pod among `active` created no earlier than the
    /// last churned pod and not yet `Running`) has not shown whether pods
    /// survive now. So a churning owner creates one pod per backoff, however
    /// many replicas it misses.
    pub(crate) fn probe_limit(&self, key: &str, active: &[Arc<Pod>]) -> Option<usize> {
        if !self.options.enabled {
            return None;
        }
        let owners = self.lock();
        let state = owners.get(key).filter(|s| s.strikes > 0)?;
        let since = state.newest_churned_creation?;
        let probing = active.iter().any(|p| {
            is_controlled_by(p, &state.uid)
                && pod_phase(p) != "Running"
                && created(p).is_none_or(|c| c >= since)
        });
        Some(usize::from(!probing))
    }

    /// Drops the state of `key` (the owner was deleted).
    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// How many owners have state (for tests).
    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::SignedDuration;
    use serde_json::json;

    use super::*;

    const KEY: &str = "default/web";
    const UID: &str = "uid-web";

    /// A pod controlled by `owner_uid`, created `age` seconds before `now`
    /// (no creation time with `None`).
    fn pod(
        name: &str,
        owner_uid: &str,
        phase: &str,
        reason: Option<&str>,
        age: Option<i64>,
        now: Timestamp,
    ) -> Arc<Pod> {
        let mut meta = json!({
            "name": name, "namespace": "default", "uid": format!("uid-{name}"),
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                "uid": owner_uid, "controller": true
            }]
        });
        if let Some(age) = age {
            meta["creationTimestamp"] = json!((now - SignedDuration::from_secs(age)).to_string());
        }
        let mut status = json!({"phase": phase});
        if let Some(reason) = reason {
            status["reason"] = json!(reason);
            status["message"] = json!("Pod Node didn't have enough resource: pods");
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": meta,
                "spec": {"containers": [{"name": "c", "image": "i"}]},
                "status": status,
            }))
            .unwrap(),
        )
    }

    fn rejected(name: &str, age: i64, now: Timestamp) -> Arc<Pod> {
        pod(name, UID, "Failed", Some("OutOfpods"), Some(age), now)
    }

    fn tracker() -> ChurnTracker {
        ChurnTracker::new(ChurnGuardOptions::default())
    }

    #[test]
    fn a_pod_failing_at_once_with_a_listed_reason_is_one_strike() {
        let (t, now) = (tracker(), Timestamp::now());
        let start = Instant::now();
        let pods = [rejected("a", 1, now)];
        let first = t.assess(KEY, UID, &pods, start, now);
        assert_eq!(first.churned.len(), 1);
        assert_eq!(first.churned[0].name, "a");
        assert_eq!(first.churned[0].reason, "OutOfpods");
        assert_eq!(first.churned[0].age, Duration::from_secs(1));
        assert_eq!(first.strikes, 1);
        assert_eq!(first.backoff, Some(Duration::from_secs(10)));
        assert_eq!(
            t.creation_backoff(KEY, start),
            Some(Duration::from_secs(10))
        );

        // Seen again by a later sync: not a new strike.
        let later = start + Duration::from_secs(4);
        let again = t.assess(KEY, UID, &pods, later, now);
        assert!(again.churned.is_empty());
        assert_eq!(again.strikes, 1);
        assert_eq!(again.backoff, Some(Duration::from_secs(6)));
        assert_eq!(again.latest.as_ref().map(|p| p.name.as_str()), Some("a"));
    }

    #[test]
    fn late_failures_other_reasons_and_other_pods_do_not_count() {
        let (t, now) = (tracker(), Timestamp::now());
        let pods = [
            // Failed two minutes after creation.
            rejected("late", 120, now),
            // A reason that is not about admission.
            pod("error", UID, "Failed", Some("Shutdown"), Some(1), now),
            pod("no-reason", UID, "Failed", None, Some(1), now),
            // Age unknown.
            pod("no-time", UID, "Failed", Some("OutOfpods"), None, now),
            // Someone else's pod, and pods that did not fail.
            pod(
                "other",
                "uid-other",
                "Failed",
                Some("OutOfpods"),
                Some(1),
                now,
            ),
            pod("running", UID, "Running", None, Some(1), now),
            pod("pending", UID, "Pending", None, Some(1), now),
        ];
        let found = t.assess(KEY, UID, &pods, Instant::now(), now);
        assert!(found.churned.is_empty(), "{:?}", found.churned);
        assert_eq!(found.strikes, 0);
        assert_eq!(found.backoff, None);
        assert_eq!(t.creation_backoff(KEY, Instant::now()), None);
    }

    #[test]
    fn any_reason_counts_with_a_star() {
        let t = ChurnTracker::new(ChurnGuardOptions {
            reasons: vec!["*".into()],
            ..ChurnGuardOptions::default()
        });
        let now = Timestamp::now();
        let pods = [pod("x", UID, "Failed", None, Some(1), now)];
        assert_eq!(t.assess(KEY, UID, &pods, Instant::now(), now).strikes, 1);
    }

    #[test]
    fn backoff_doubles_with_each_strike_up_to_the_cap() {
        let (t, now) = (tracker(), Timestamp::now());
        let mut at = Instant::now();
        let mut pods = Vec::new();
        let mut backoffs = Vec::new();
        for i in 0..8 {
            // Each pod is created when the previous backoff ended and fails
            // at once.
            pods.push(rejected(&format!("p{i}"), 0, now));
            let found = t.assess(KEY, UID, &pods, at, now);
            assert_eq!(found.churned.len(), 1);
            let backoff = found.backoff.unwrap();
            backoffs.push(backoff.as_secs());
            at += backoff;
            assert_eq!(t.creation_backoff(KEY, at), None);
        }
        assert_eq!(backoffs, [10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn several_failures_in_one_sync_are_several_strikes() {
        let (t, now) = (tracker(), Timestamp::now());
        let pods: Vec<_> = (0..3).map(|i| rejected(&format!("p{i}"), 0, now)).collect();
        let found = t.assess(KEY, UID, &pods, Instant::now(), now);
        assert_eq!(found.churned.len(), 3);
        assert_eq!(found.strikes, 3);
        assert_eq!(found.backoff, Some(Duration::from_secs(40)));
    }

    #[test]
    fn a_running_pod_created_after_the_failures_clears_the_strikes() {
        let (t, now) = (tracker(), Timestamp::now());
        let start = Instant::now();
        let failed = rejected("failed", 5, now);
        assert_eq!(
            t.assess(KEY, UID, std::slice::from_ref(&failed), start, now)
                .strikes,
            1
        );

        // An older pod running says nothing about new ones.
        let old = pod("old", UID, "Running", None, Some(3600), now);
        let found = t.assess(KEY, UID, &[failed.clone(), old.clone()], start, now);
        assert_eq!(found.strikes, 1);
        assert!(found.latest.is_some());
        assert!(!found.cleared);

        // A pod created after the failed one is running: back to normal.
        let after = start + Duration::from_secs(10);
        let new = pod("new", UID, "Running", None, Some(1), now);
        let found = t.assess(KEY, UID, &[failed.clone(), old, new], after, now);
        assert!(found.cleared);
        assert_eq!(found.strikes, 0);
        assert_eq!(found.latest, None);
        assert_eq!(found.backoff, None);
        // The failed pod stays counted: it is no new strike later.
        let found = t.assess(KEY, UID, &[failed], after, now);
        assert_eq!((found.strikes, found.churned.len()), (0, 0));
    }

    #[test]
    fn strikes_are_forgotten_after_twice_the_max_backoff_without_failures() {
        let (t, now) = (tracker(), Timestamp::now());
        let start = Instant::now();
        let pods = [rejected("a", 0, now)];
        t.assess(KEY, UID, &pods, start, now);
        let still = t.assess(KEY, UID, &pods, start + Duration::from_secs(600), now);
        assert_eq!(still.strikes, 1);
        let gone = t.assess(KEY, UID, &pods, start + Duration::from_secs(601), now);
        assert!(gone.cleared);
        assert_eq!(gone.strikes, 0);
        assert_eq!(gone.latest, None);
    }

    #[test]
    fn failed_pods_beyond_the_kept_number_are_returned_oldest_first() {
        let (t, now) = (tracker(), Timestamp::now());
        // Eight failed pods, the oldest (p0) 800 s old; old failures are no
        // churn but still count against the kept number.
        let mut pods: Vec<_> = (0..8)
            .map(|i| rejected(&format!("p{i}"), 800 - i * 100, now))
            .collect();
        // One more, already being deleted: not listed again.
        let mut deleting = (*rejected("z", 900, now)).clone();
        deleting.metadata.deletion_timestamp = deleting.metadata.creation_timestamp.clone();
        pods.push(Arc::new(deleting));
        let found = t.assess(KEY, UID, &pods, Instant::now(), now);
        let names: Vec<_> = found
            .excess_failed
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["p0", "p1", "p2"]);
        // All failed long after their creation.
        assert_eq!(found.strikes, 0);
    }

    #[test]
    fn a_disabled_guard_finds_nothing() {
        let t = ChurnTracker::new(ChurnGuardOptions::disabled());
        let now = Timestamp::now();
        let pods: Vec<_> = (0..9).map(|i| rejected(&format!("p{i}"), 0, now)).collect();
        let found = t.assess(KEY, UID, &pods, Instant::now(), now);
        assert_eq!(found.strikes, 0);
        assert!(found.churned.is_empty() && found.excess_failed.is_empty());
        assert_eq!(t.creation_backoff(KEY, Instant::now()), None);
        assert_eq!(t.tracked(), 0);
    }

    #[test]
    fn state_is_per_owner_and_cleared_on_forget_or_a_new_uid() {
        let (t, now) = (tracker(), Timestamp::now());
        let start = Instant::now();
        t.assess(KEY, UID, &[rejected("a", 0, now)], start, now);
        assert_eq!(t.creation_backoff("default/other", start), None);
        assert!(t.creation_backoff(KEY, start).is_some());

        // Re-created under the same name: starts clean.
        let found = t.assess(KEY, "uid-new", &[], start, now);
        assert_eq!(found.strikes, 0);
        assert_eq!(t.creation_backoff(KEY, start), None);

        t.assess(KEY, UID, &[rejected("b", 0, now)], start, now);
        assert_eq!(t.tracked(), 1);
        t.forget(KEY);
        assert_eq!(t.tracked(), 0);
        assert_eq!(t.creation_backoff(KEY, start), None);
    }

    #[test]
    fn with_strikes_one_probe_at_a_time() {
        let (t, now) = (tracker(), Timestamp::now());
        let start = Instant::now();
        assert_eq!(t.probe_limit(KEY, &[]), None, "no strikes, no limit");
        t.assess(KEY, UID, &[rejected("a", 5, now)], start, now);
        assert_eq!(t.probe_limit(KEY, &[]), Some(1));
        // Older pods, running or not, are no probes.
        let old_pending = pod("old", UID, "Pending", None, Some(3600), now);
        assert_eq!(
            t.probe_limit(KEY, std::slice::from_ref(&old_pending)),
            Some(1)
        );
        // A pod created after the failed one and not running yet is.
        let probe = pod("probe", UID, "Pending", None, Some(1), now);
        assert_eq!(t.probe_limit(KEY, &[old_pending, probe]), Some(0));
        // Someone else's pod is not.
        let other = pod("other", "uid-other", "Pending", None, Some(1), now);
        assert_eq!(t.probe_limit(KEY, &[other]), Some(1));
        let off = ChurnTracker::new(ChurnGuardOptions::disabled());
        assert_eq!(off.probe_limit(KEY, &[]), None);
    }

    #[test]
    fn an_owner_without_failed_pods_or_strikes_keeps_no_state() {
        let (t, now) = (tracker(), Timestamp::now());
        let pods = [pod("r", UID, "Running", None, Some(1), now)];
        t.assess(KEY, UID, &pods, Instant::now(), now);
        assert_eq!(t.tracked(), 0);
    }
}
