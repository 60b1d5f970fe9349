//! The ring as one member sees it: the Leases labelled with the ring's
//! name, what each claims, and when this member last saw each change.
//!
//! Expiry is judged on this member's own monotonic clock from the moment
//! it observed a Lease change, never from the `renewTime` written in it
//! (client-go's leader election does the same), so clock skew between
//! members cannot make a live member look expired. A Lease that vanishes
//! (deleted, or its label removed by hand) is kept with its last claims
//! until it would have expired, unless its holder released it first.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use super::slots::{SlotSet, fnv1a_64};

/// The label every member Lease of a ring carries, with the ring's name.
pub const RING_LABEL: &str = "ctrlkit.io/shard-ring";
/// The annotation with the slots a member claims (may be syncing or is
/// about to sync), e.g. `0-340,512`.
pub const CLAIMS_ANNOTATION: &str = "ctrlkit.io/shard-claims";
/// The annotation that checks the claims were written by the member: the
/// FNV-1a hash of `<lease name>\n<claims>` in hex. A hand edit that does
/// not recompute it makes the Lease claim every slot until it expires.
pub const CHECK_ANNOTATION: &str = "ctrlkit.io/shard-claims-check";
/// Set (to `"true"`) by a member leaving gracefully, with empty claims:
/// it no longer takes part and its slots may move at once.
pub const RELEASED_ANNOTATION: &str = "ctrlkit.io/shard-released";

/// The check value of `claims` written on the Lease `lease_name`.
pub(crate) fn claims_check(lease_name: &str, claims: &str) -> String {
    format!("{:016x}", fnv1a_64(&format!("{lease_name}\n{claims}")))
}

/// The annotations a member writes on its Lease.
pub(crate) fn claim_annotations(
    lease_name: &str,
    claims: &SlotSet,
    released: bool,
) -> BTreeMap<String, Option<String>> {
    let text = claims.to_string();
    BTreeMap::from([
        (
            CHECK_ANNOTATION.to_owned(),
            Some(claims_check(lease_name, &text)),
        ),
        (CLAIMS_ANNOTATION.to_owned(), Some(text)),
        (
            RELEASED_ANNOTATION.to_owned(),
            released.then(|| "true".to_owned()),
        ),
    ])
}

/// What a Lease claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claims {
    /// Claims written (and checked) by the member.
    Valid(SlotSet),
    /// Missing, unreadable or failing the check: counted as every slot.
    Invalid(String),
}

impl Claims {
    /// The slots no one else may start while this Lease is live.
    pub(crate) fn effective(&self) -> SlotSet {
        match self {
            Claims::Valid(s) => *s,
            Claims::Invalid(_) => SlotSet::full(),
        }
    }

    /// The claims on `lease`.
    pub(crate) fn of(lease: &Lease) -> Claims {
        let name = lease.metadata.name.as_deref().unwrap_or_default();
        let annotations = lease.metadata.annotations.as_ref();
        let get = |k: &str| annotations.and_then(|a| a.get(k));
        let Some(text) = get(CLAIMS_ANNOTATION) else {
            return Claims::Invalid(format!("no {CLAIMS_ANNOTATION} annotation"));
        };
        if get(CHECK_ANNOTATION).map(String::as_str) != Some(&claims_check(name, text)) {
            return Claims::Invalid(format!(
                "{CHECK_ANNOTATION} does not match the claims (edited by hand?)"
            ));
        }
        match text.parse() {
            Ok(set) => Claims::Valid(set),
            Err(e) => Claims::Invalid(e.to_string()),
        }
    }
}

/// Something wrong with a ring Lease, as a member observed it: logged as a
/// warning and counted in `ctrlkit_shard_lease_anomalies_total{reason}`.
/// None of them can make two members sync one owner at once (see
/// `docs/sharding.md`, "Bad input"); they say that someone or something
/// other than the ring's members is writing its Leases, or that clocks
/// disagree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Anomaly {
    /// The claims are missing, unreadable or fail their check (a hand
    /// edit): the Lease counts as claiming every slot while it is live.
    InvalidClaims,
    /// `holderIdentity` is not the identity the Lease's name says
    /// (`<ring>-<identity>`): edited by hand, or written by something else.
    HolderMismatch,
    /// `renewTime` is further from this member's wall clock than one lease
    /// duration: clock skew between nodes, or a hand edit. Harmless, as
    /// expiry is judged on the observer's own clock, never from it.
    ClockSkew,
    /// The member's own Lease was written by someone else (a version newer
    /// than the member's last write): the member stops the slots it no
    /// longer shows claimed and rewrites it.
    OwnLeaseEdited,
    /// The member's own Lease was deleted or lost its ring label while the
    /// member was live: the member re-creates it at its next renewal.
    OwnLeaseRemoved,
}

impl Anomaly {
    /// The `reason` label.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Anomaly::InvalidClaims => "invalid_claims",
            Anomaly::HolderMismatch => "holder_mismatch",
            Anomaly::ClockSkew => "clock_skew",
            Anomaly::OwnLeaseEdited => "own_lease_edited",
            Anomaly::OwnLeaseRemoved => "own_lease_removed",
        }
    }
}

/// What looks wrong on `lease` of ring `ring`, seen at wall-clock time
/// `now`: invalid claims, a holder that does not match the name, a
/// `renewTime` more than `skew_limit` away from `now`. Each with a
/// sentence for the log.
pub(crate) fn inspect(
    lease: &Lease,
    ring: &str,
    skew_limit: Duration,
    now: Timestamp,
) -> Vec<(Anomaly, String)> {
    let mut found = Vec::new();
    if let Claims::Invalid(why) = Claims::of(lease) {
        found.push((
            Anomaly::InvalidClaims,
            format!("{why}: counting it as claiming every slot until it expires"),
        ));
    }
    let name = lease.metadata.name.as_deref().unwrap_or_default();
    let spec = lease.spec.as_ref();
    let holder = spec.and_then(|s| s.holder_identity.as_deref());
    if holder.is_none_or(|h| format!("{ring}-{h}") != name) {
        found.push((
            Anomaly::HolderMismatch,
            format!("holderIdentity {holder:?} does not match the Lease name {name:?}"),
        ));
    }
    if let Some(renewed) = spec.and_then(|s| s.renew_time.as_ref()) {
        let off = now.duration_since(renewed.0);
        let off = Duration::try_from(off.abs()).unwrap_or(Duration::MAX);
        if off > skew_limit {
            let side = if renewed.0 > now {
                "ahead of"
            } else {
                "behind"
            };
            found.push((
                Anomaly::ClockSkew,
                format!(
                    "renewTime {} is {off:?} {side} this member's clock (clock skew, or a hand edit); \
                     ignored: expiry is measured on this member's own clock",
                    renewed.0
                ),
            ));
        }
    }
    found
}

/// One member Lease, as last observed.
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    pub(crate) claims: Claims,
    pub(crate) released: bool,
    /// `spec.leaseDurationSeconds`; never counted shorter than this
    /// member's own lease duration.
    pub(crate) duration: Duration,
    pub(crate) resource_version: Option<String>,
    /// When this member last observed the Lease change.
    pub(crate) seen: Instant,
    /// The Lease is gone from the informer.
    pub(crate) gone: bool,
}

impl Peer {
    fn expires(&self, min_duration: Duration) -> Instant {
        self.seen + self.duration.max(min_duration)
    }
}

/// A Lease that expired in a member's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expired {
    pub(crate) name: String,
    /// Its version as last seen; `None` if it had already left the
    /// informer (deleted, or unlabelled by hand).
    pub(crate) resource_version: Option<String>,
}

/// What one member knows of its ring.
#[derive(Debug, Default)]
pub(crate) struct RingView {
    peers: HashMap<String, Peer>,
    /// Leases that expired here, with their version then: seen again in
    /// that version (a relist, after a failed delete), a Lease stays
    /// expired instead of counting as live for another lease duration,
    /// and is handed back by [`prune`](Self::prune) to delete again.
    expired: HashMap<String, Option<String>>,
    /// Expired Leases seen again, to delete again.
    again: Vec<Expired>,
    /// The slots no Lease of the ring claimed when this member joined, and
    /// until when they count as claimed (see
    /// [`observe_unclaimed`](Self::observe_unclaimed)).
    unclaimed_at_join: Option<(SlotSet, Instant)>,
}

/// The view boiled down for one step of the handover protocol.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Snapshot {
    /// Live members that take part (not released), sorted; includes this
    /// member once its own Lease was observed.
    pub(crate) members: Vec<String>,
    /// Every slot claimed by another live Lease.
    pub(crate) others_claims: SlotSet,
    /// This member's Lease as observed: its resourceVersion and claims.
    pub(crate) own: Option<(Option<String>, Claims)>,
    /// Leases whose claims are invalid, with the reason.
    pub(crate) invalid: Vec<(String, String)>,
}

impl RingView {
    /// A Lease was added or changed.
    pub(crate) fn observe(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.clone() else {
            return;
        };
        let rv = lease.metadata.resource_version.clone();
        if rv.is_some() && self.expired.get(&name) == Some(&rv) {
            // Its holder has not written it since it expired (and fenced
            // itself before that, if it is alive at all).
            self.again.push(Expired {
                name,
                resource_version: rv,
            });
            return;
        }
        self.expired.remove(&name);
        let duration = lease
            .spec
            .as_ref()
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(Duration::ZERO, Duration::from_secs);
        let released = lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RELEASED_ANNOTATION))
            .is_some_and(|v| v == "true");
        let changed = self
            .peers
            .get(&name)
            .is_none_or(|p| p.resource_version != rv || p.gone);
        let seen = match self.peers.get(&name) {
            Some(p) if !changed => p.seen,
            _ => now,
        };
        self.peers.insert(
            name,
            Peer {
                claims: Claims::of(lease),
                released,
                duration,
                resource_version: rv,
                seen,
                gone: false,
            },
        );
    }

    /// A Lease in the ring's namespace that carries claims but no ring
    /// label, found when this member joined: a member whose label was
    /// removed by hand is invisible to the ring's informer yet syncs what
    /// it claims until it notices. The members that saw it before keep
    /// its claims as a vanished Lease's; this one, which never saw it,
    /// does the same. A Lease the informer already shows is left alone.
    pub(crate) fn observe_hidden(&mut self, lease: &Lease, now: Instant) {
        let Some(name) = lease.metadata.name.as_deref() else {
            return;
        };
        let labelled = lease
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(RING_LABEL));
        let claims = lease
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(CLAIMS_ANNOTATION));
        if labelled || !claims || self.peers.get(name).is_some_and(|p| !p.gone) {
            return;
        }
        self.observe(lease, now);
        self.observe_gone(name);
    }

    /// From the Leases `listed` when this member joined, the slots no
    /// Lease of ring `ring` claims: they count as claimed by someone unseen
    /// until `duration` after `now`. A member whose Lease was deleted by
    /// hand shows in no list, yet syncs its slots until its watch shows it
    /// the delete or, if its renewals fail, until its renew deadline; the
    /// members that saw the Lease vanish keep its claims as a vanished
    /// Lease's, and this one cannot tell such slots from free ones. Slots a
    /// listed member claims are not included: they move by the handover
    /// protocol, without this wait. Returns how many slots wait.
    pub(crate) fn observe_unclaimed(
        &mut self,
        ring: &str,
        listed: &[Lease],
        now: Instant,
        duration: Duration,
    ) -> usize {
        let claimed = listed
            .iter()
            .filter(|l| {
                l.metadata
                    .labels
                    .as_ref()
                    .and_then(|m| m.get(RING_LABEL))
                    .map(String::as_str)
                    == Some(ring)
            })
            .fold(SlotSet::empty(), |all, l| {
                all.union(&Claims::of(l).effective())
            });
        let free = SlotSet::full().minus(&claimed);
        self.unclaimed_at_join = (!free.is_empty()).then(|| (free, now + duration));
        free.len()
    }

    /// A Lease left the informer (deleted, or no longer labelled).
    pub(crate) fn observe_gone(&mut self, name: &str) {
        self.expired.remove(name);
        if let Some(peer) = self.peers.get_mut(name) {
            peer.gone = true;
            if peer.released && peer.claims.effective().is_empty() {
                self.peers.remove(name);
            }
        }
    }

    /// Drops Leases that expired; returns their names, with the
    /// resourceVersion of those still in the informer (to garbage-collect),
    /// and the expired Leases seen again since (a delete that failed).
    pub(crate) fn prune(&mut self, now: Instant, min_duration: Duration) -> Vec<Expired> {
        if self
            .unclaimed_at_join
            .is_some_and(|(_, until)| until <= now)
        {
            self.unclaimed_at_join = None;
        }
        let mut expired: Vec<Expired> = self
            .peers
            .iter()
            .filter(|(_, p)| p.expires(min_duration) <= now)
            .map(|(n, p)| Expired {
                name: n.clone(),
                resource_version: p.resource_version.clone().filter(|_| !p.gone),
            })
            .collect();
        for e in &expired {
            // A Lease already gone from the informer cannot be listed
            // again in the same version; one still there is deleted next,
            // which forgets it (`observe_gone`) unless the delete fails.
            if let Some(peer) = self.peers.remove(&e.name).filter(|p| !p.gone) {
                self.expired.insert(e.name.clone(), peer.resource_version);
            }
        }
        expired.append(&mut self.again);
        expired
    }

    /// The ring now, for the member owning Lease `own`.
    pub(crate) fn snapshot(&self, own: &str, now: Instant, min_duration: Duration) -> Snapshot {
        let mut snap = Snapshot {
            members: Vec::new(),
            others_claims: SlotSet::empty(),
            own: None,
            invalid: Vec::new(),
        };
        for (name, peer) in &self.peers {
            if name == own {
                if !peer.gone {
                    snap.own = Some((peer.resource_version.clone(), peer.claims.clone()));
                    if !peer.released {
                        snap.members.push(name.clone());
                    }
                }
                continue;
            }
            if peer.expires(min_duration) <= now {
                continue;
            }
            if let Claims::Invalid(why) = &peer.claims {
                snap.invalid.push((name.clone(), why.clone()));
            }
            snap.others_claims = snap.others_claims.union(&peer.claims.effective());
            if !peer.released {
                snap.members.push(name.clone());
            }
        }
        if let Some((slots, until)) = self.unclaimed_at_join
            && now < until
        {
            snap.others_claims = snap.others_claims.union(&slots);
        }
        snap.members.sort_unstable();
        snap.invalid.sort_unstable();
        snap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;

    fn lease(name: &str, rv: &str, claims: &SlotSet, released: bool) -> Lease {
        let mut l = Lease::default();
        l.metadata.name = Some(name.into());
        l.metadata.resource_version = Some(rv.into());
        l.metadata.annotations = Some(
            claim_annotations(name, claims, released)
                .into_iter()
                .filter_map(|(k, v)| Some((k, v?)))
                .collect(),
        );
        l.spec = Some(LeaseSpec {
            lease_duration_seconds: Some(10),
            ..LeaseSpec::default()
        });
        l
    }

    #[test]
    fn claims_are_checked_and_bad_ones_claim_everything() {
        let set: SlotSet = "0-9".parse().unwrap();
        let good = lease("r-a", "1", &set, false);
        assert_eq!(Claims::of(&good), Claims::Valid(set));

        let mut edited = good.clone();
        edited
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(CLAIMS_ANNOTATION.into(), "0-1".into());
        let claims = Claims::of(&edited);
        assert!(matches!(&claims, Claims::Invalid(why) if why.contains("edited by hand")));
        assert_eq!(claims.effective(), SlotSet::full());

        let mut bare = good;
        bare.metadata.annotations = None;
        assert_eq!(Claims::of(&bare).effective(), SlotSet::full());
    }

    #[test]
    fn hand_edits_and_skewed_clocks_are_named() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
        let now: Timestamp = "2026-11-26T01:00:00Z".parse().unwrap();
        let limit = Duration::from_secs(10);
        let mut good = lease("r-a", "1", &"0-9".parse().unwrap(), false);
        let spec = good.spec.as_mut().unwrap();
        spec.holder_identity = Some("a".into());
        spec.renew_time = Some(MicroTime("2026-11-26T00:59:58Z".parse().unwrap()));
        assert_eq!(inspect(&good, "r", limit, now), vec![]);

        let reasons = |l: &Lease| -> Vec<&str> {
            inspect(l, "r", limit, now)
                .iter()
                .map(|(a, _)| a.reason())
                .collect()
        };
        let mut edited = good.clone();
        edited
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(CHECK_ANNOTATION.into(), "garbage".into());
        edited.spec.as_mut().unwrap().holder_identity = Some("b".into());
        assert_eq!(reasons(&edited), ["invalid_claims", "holder_mismatch"]);

        for (renewed, side) in [
            ("2026-11-26T02:00:00Z", "ahead of"),
            ("2000-01-01T00:00:00Z", "behind"),
        ] {
            let mut skewed = good.clone();
            skewed.spec.as_mut().unwrap().renew_time = Some(MicroTime(renewed.parse().unwrap()));
            let found = inspect(&skewed, "r", limit, now);
            assert_eq!(found.len(), 1, "{found:?}");
            assert_eq!(found[0].0, Anomaly::ClockSkew);
            assert!(found[0].1.contains(side), "{}", found[0].1);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn expiry_counts_from_the_last_observed_change_on_the_local_clock() {
        let mut view = RingView::default();
        let min = Duration::from_secs(10);
        let t0 = Instant::now();
        view.observe(&lease("r-a", "1", &SlotSet::empty(), false), t0);
        view.observe(&lease("r-b", "1", &"5".parse().unwrap(), false), t0);
        // r-a renews at t0+8s; r-b never does.
        view.observe(
            &lease("r-a", "2", &SlotSet::empty(), false),
            t0 + Duration::from_secs(8),
        );
        // The same version seen again (a resync) is no renewal.
        view.observe(
            &lease("r-b", "1", &"5".parse().unwrap(), false),
            t0 + Duration::from_secs(8),
        );
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(9), min);
        assert_eq!(snap.members, ["r-a", "r-b"]);
        assert!(snap.others_claims.contains(5));
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(11), min);
        assert_eq!(snap.members, ["r-a"]);
        assert!(snap.others_claims.is_empty());
        let expired = view.prune(t0 + Duration::from_secs(11), min);
        assert_eq!(
            expired.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["r-b"]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_expired_lease_seen_again_in_the_same_version_stays_expired() {
        let mut view = RingView::default();
        let min = Duration::from_secs(10);
        let t0 = Instant::now();
        let dead = lease("r-b", "1", &"7".parse().unwrap(), false);
        view.observe(&dead, t0);
        let later = t0 + Duration::from_secs(11);
        assert_eq!(view.prune(later, min).len(), 1);
        // Its delete failed; a relist shows it again, unchanged: not live,
        // its claims block nothing, and it is handed back to delete again.
        view.observe(&dead, later);
        let snap = view.snapshot("r-a", later, min);
        assert!(
            snap.members.is_empty() && snap.others_claims.is_empty(),
            "{snap:?}"
        );
        assert_eq!(
            view.prune(later, min),
            vec![Expired {
                name: "r-b".into(),
                resource_version: Some("1".into())
            }]
        );
        // Written again (its holder was only cut off): live again.
        view.observe(&lease("r-b", "2", &"7".parse().unwrap(), false), later);
        let snap = view.snapshot("r-a", later, min);
        assert_eq!(snap.members, ["r-b"]);
        assert!(snap.others_claims.contains(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_lease_keeps_blocking_until_expiry_unless_released() {
        let mut view = RingView::default();
        let min = Duration::from_secs(10);
        let t0 = Instant::now();
        view.observe(&lease("r-b", "1", &"7".parse().unwrap(), false), t0);
        view.observe_gone("r-b");
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(1), min);
        assert!(
            snap.others_claims.contains(7),
            "unlabelled by hand: still blocks"
        );

        view.observe(&lease("r-c", "1", &SlotSet::empty(), true), t0);
        let snap = view.snapshot("r-a", t0, min);
        assert!(
            !snap.members.contains(&"r-c".to_owned()),
            "released: not a member"
        );
        view.observe_gone("r-c");
        assert_eq!(view.prune(t0, min), Vec::<Expired>::new());
        assert_eq!(view.peers.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn slots_unclaimed_at_join_block_for_a_lease_duration_without_a_member() {
        let in_ring = |mut l: Lease, ring: &str| {
            l.metadata.labels = Some([(RING_LABEL.to_owned(), ring.to_owned())].into());
            l
        };
        let mut view = RingView::default();
        let min = Duration::from_secs(10);
        let t0 = Instant::now();
        let member = in_ring(lease("r-b", "1", &"10-1023".parse().unwrap(), false), "r");
        let other_ring = in_ring(lease("q-c", "1", &"0-4".parse().unwrap(), false), "q");
        let waiting = view.observe_unclaimed("r", &[member, other_ring], t0, min);
        assert_eq!(waiting, 10);
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(9), min);
        assert!(
            snap.others_claims.contains(3),
            "the slots free at join block (another ring's claims count for nothing)"
        );
        assert!(!snap.others_claims.contains(10), "and only those");
        assert!(snap.members.is_empty(), "not a member");
        assert_eq!(
            view.prune(t0 + Duration::from_secs(10), min),
            Vec::<Expired>::new(),
            "no Lease to report or delete"
        );
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(10), min);
        assert!(snap.others_claims.is_empty(), "free after a lease duration");
        assert!(view.unclaimed_at_join.is_none());

        let everything = in_ring(lease("r-b", "2", &SlotSet::full(), false), "r");
        assert_eq!(view.observe_unclaimed("r", &[everything], t0, min), 0);
        assert!(
            view.unclaimed_at_join.is_none(),
            "nothing free at join: no wait"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_unlabelled_before_we_joined_blocks_until_expiry() {
        let mut view = RingView::default();
        let min = Duration::from_secs(10);
        let t0 = Instant::now();
        // Claims without the ring label: a member we never saw.
        view.observe_hidden(&lease("r-b", "1", &"7".parse().unwrap(), false), t0);
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(9), min);
        assert!(snap.others_claims.contains(7), "hidden: blocks its claims");
        assert_eq!(snap.members, ["r-b"], "and keeps its place in the ring");
        let snap = view.snapshot("r-a", t0 + Duration::from_secs(10), min);
        assert!(
            !snap.others_claims.contains(7),
            "until it would have expired"
        );

        // Labelled (the ring's informer shows it), or no claims at all
        // (some other Lease of the namespace): not a hidden member.
        let mut labelled = lease("r-c", "1", &"8".parse().unwrap(), false);
        labelled.metadata.labels = Some([(RING_LABEL.to_owned(), "r".to_owned())].into());
        view.observe_hidden(&labelled, t0);
        let mut unrelated = lease("leader", "1", &SlotSet::empty(), false);
        unrelated.metadata.annotations = None;
        view.observe_hidden(&unrelated, t0);
        assert_eq!(view.peers.len(), 1);

        // One the informer already shows live is left as it is.
        let live = lease("r-d", "1", &"9".parse().unwrap(), false);
        view.observe(&live, t0);
        view.observe_hidden(&live, t0);
        assert!(view.peers.get("r-d").is_some_and(|p| !p.gone));
    }
}
