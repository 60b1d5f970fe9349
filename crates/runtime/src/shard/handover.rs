//! The handover protocol as a pure step function, so it can be checked
//! without a cluster (see `docs/sharding.md` for the picture).
//!
//! A member keeps two sets: the slots it *claims* (published on its Lease)
//! and the slots it has *active* (syncs may start). Active ⊆ claims, and
//! a slot leaves the claims only once it is neither active nor has a sync
//! in flight. A slot becomes active only when
//!
//! 1. the member's own Lease, as its informer shows it, is exactly the
//!    last version the member wrote and claims the slot — so the informer
//!    has shown every Lease write that came before that claim — and
//! 2. no other live Lease claims the slot.
//!
//! Two members racing for one slot both publish before they look; the
//! Lease watch delivers writes in resourceVersion order, so whichever
//! claim was written second sees the first and backs off. A member whose
//! renewals fail stops everything before its Lease can look expired to
//! anyone (the renew deadline is shorter than the lease duration).

use super::slots::SlotSet;

/// What one step knows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Inputs {
    /// The slots the assignment gives this member (empty when it is not
    /// in its own view of the ring).
    pub(crate) desired: SlotSet,
    /// The claims on this member's own Lease, if the informer shows the
    /// last version it wrote; `None` while a write is pending or unseen.
    pub(crate) own_observed: Option<SlotSet>,
    /// Every slot another live Lease claims.
    pub(crate) others_claims: SlotSet,
    /// Slots with syncs in flight here.
    pub(crate) in_flight: SlotSet,
    /// The own Lease was not renewed within the renew deadline.
    pub(crate) fenced: bool,
}

/// What changed in one step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Slots that became active.
    pub(crate) started: SlotSet,
    /// Slots that stopped being active (their in-flight syncs drain).
    pub(crate) stopped: SlotSet,
    /// Slots no longer claimed (acknowledged once written).
    pub(crate) released: SlotSet,
}

/// One member's side of the protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Handover {
    /// Slots syncs may start for.
    pub(crate) active: SlotSet,
    /// Slots to publish as claimed.
    pub(crate) claims: SlotSet,
}

impl Handover {
    /// Advances the protocol by one step.
    pub(crate) fn step(&mut self, input: &Inputs) -> Changes {
        let mut changes = Changes::default();
        if input.fenced {
            // Renewals failed: stop syncing everything now. The claims stay
            // (they cannot be written anyway) until the Lease expires.
            changes.stopped = self.active;
            self.active = SlotSet::empty();
            return changes;
        }
        // Stop what is no longer ours, and anything our own Lease no
        // longer claims (a hand edit): others may act on what it shows.
        let mut stop = self.active.minus(&input.desired);
        if let Some(own) = input.own_observed {
            stop = stop.union(&self.active.minus(&own));
        }
        self.active = self.active.minus(&stop);
        changes.stopped = stop;

        // Acknowledge: unclaim what is neither wanted, active nor in flight.
        let keep = input.desired.union(&self.active).union(&input.in_flight);
        changes.released = self.claims.minus(&keep);
        self.claims = self.claims.intersection(&keep).union(&input.desired);

        // Start what we own, our Lease visibly claims and no one else does.
        if let Some(own) = input.own_observed {
            let start = input
                .desired
                .intersection(&own)
                .intersection(&self.claims)
                .minus(&input.others_claims)
                .minus(&self.active);
            self.active = self.active.union(&start);
            changes.started = start;
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::super::assign::assign;
    use super::*;

    fn set(text: &str) -> SlotSet {
        text.parse().unwrap()
    }

    #[test]
    fn a_gaining_member_waits_for_its_own_claim_to_be_seen_and_for_the_loser() {
        let mut h = Handover::default();
        let input = Inputs {
            desired: set("0-9"),
            own_observed: None,
            others_claims: set("5-9"),
            in_flight: SlotSet::empty(),
            fenced: false,
        };
        let c = h.step(&input);
        assert!(c.started.is_empty(), "claim not observed yet");
        assert_eq!(h.claims, set("0-9"));
        let c = h.step(&Inputs {
            own_observed: Some(set("0-9")),
            ..input
        });
        assert_eq!(c.started, set("0-4"), "5-9 still claimed by the loser");
        let c = h.step(&Inputs {
            own_observed: Some(set("0-9")),
            others_claims: SlotSet::empty(),
            ..input
        });
        assert_eq!(c.started, set("5-9"));
    }

    #[test]
    fn a_losing_member_stops_at_once_and_unclaims_after_its_syncs_drain() {
        let mut h = Handover {
            active: set("0-9"),
            claims: set("0-9"),
        };
        let input = Inputs {
            desired: set("0-4"),
            own_observed: Some(set("0-9")),
            others_claims: SlotSet::empty(),
            in_flight: set("7"),
            fenced: false,
        };
        let c = h.step(&input);
        assert_eq!(c.stopped, set("5-9"));
        assert_eq!(h.active, set("0-4"));
        assert_eq!(h.claims, set("0-4,7"), "7 has a sync in flight");
        let c = h.step(&Inputs {
            in_flight: SlotSet::empty(),
            ..input
        });
        assert_eq!(c.released, set("7"));
        assert_eq!(h.claims, set("0-4"));
    }

    #[test]
    fn a_fenced_member_stops_everything() {
        let mut h = Handover {
            active: set("0-9"),
            claims: set("0-9"),
        };
        let c = h.step(&Inputs {
            desired: set("0-9"),
            own_observed: Some(set("0-9")),
            others_claims: SlotSet::empty(),
            in_flight: SlotSet::empty(),
            fenced: true,
        });
        assert_eq!(c.stopped, set("0-9"));
        assert!(h.active.is_empty());
        assert_eq!(h.claims, set("0-9"), "claims stay until the lease expires");
    }

    /// Members with views of each other that lag by different amounts,
    /// joining and leaving; a checker asserts no slot is ever active on
    /// two members at once, and that the ring converges.
    #[test]
    fn simulated_rings_never_hold_a_slot_twice() {
        // A tiny deterministic generator (xorshift), so runs repeat.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut rand = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        const NAMES: [&str; 4] = ["m0", "m1", "m2", "m3"];
        // Assignments by view, computed once each (debug builds are slow).
        let mut memo: std::collections::HashMap<Vec<&str>, Vec<SlotSet>> = Default::default();
        let mut assign = move |view: &[&'static str]| {
            memo.entry(view.to_vec())
                .or_insert_with(|| assign(view))
                .clone()
        };
        for round in 0..16 {
            // The "API server": each member's published claims, by version.
            let mut log: Vec<(usize, SlotSet)> = Vec::new();
            let mut members: Vec<Handover> = vec![Handover::default(); NAMES.len()];
            let mut cursor = vec![0usize; NAMES.len()]; // log entries each has seen
            let mut written = vec![None::<usize>; NAMES.len()]; // own last log index
            let mut joined = [true, true, true, round % 2 == 0];
            for tick in 0..400 {
                if tick == 150 {
                    joined[3] = !joined[3];
                }
                let who = rand(NAMES.len() as u64) as usize;
                // Advance this member's informer by a random amount.
                cursor[who] = (cursor[who] + rand(4) as usize).min(log.len());
                let mut latest: Vec<Option<SlotSet>> = vec![None; NAMES.len()];
                let mut latest_idx = vec![None; NAMES.len()];
                for (i, (m, claims)) in log[..cursor[who]].iter().enumerate() {
                    latest[*m] = Some(*claims);
                    latest_idx[*m] = Some(i);
                }
                let view: Vec<&'static str> = (0..NAMES.len())
                    .filter(|m| latest[*m].is_some() && (joined[*m] || *m != 3))
                    .map(|m| NAMES[m])
                    .collect();
                let sets = assign(&view);
                let desired = view
                    .iter()
                    .position(|n| *n == NAMES[who])
                    .filter(|_| joined[who])
                    .map_or(SlotSet::empty(), |i| sets[i]);
                let others = (0..NAMES.len())
                    .filter(|m| *m != who)
                    .filter_map(|m| latest[m])
                    .fold(SlotSet::empty(), |a, s| a.union(&s));
                let own = (written[who].is_some() && latest_idx[who] == written[who])
                    .then(|| latest[who])
                    .flatten();
                let before = members[who].claims;
                members[who].step(&Inputs {
                    desired,
                    own_observed: own,
                    others_claims: others,
                    in_flight: SlotSet::empty(),
                    fenced: false,
                });
                if members[who].claims != before || written[who].is_none() {
                    log.push((who, members[who].claims));
                    written[who] = Some(log.len() - 1);
                }
                // The checker: no slot active on two members.
                for a in 0..NAMES.len() {
                    for b in a + 1..NAMES.len() {
                        let both = members[a].active.intersection(&members[b].active);
                        assert!(both.is_empty(), "round {round} tick {tick}: {both}");
                    }
                }
            }
            // Let everyone catch up, repeatedly, then all slots are held.
            for _ in 0..20 {
                for who in 0..NAMES.len() {
                    cursor[who] = log.len();
                    let mut latest: Vec<Option<SlotSet>> = vec![None; NAMES.len()];
                    let mut latest_idx = vec![None; NAMES.len()];
                    for (i, (m, claims)) in log.iter().enumerate() {
                        latest[*m] = Some(*claims);
                        latest_idx[*m] = Some(i);
                    }
                    let view: Vec<&'static str> = (0..NAMES.len())
                        .filter(|m| joined[*m])
                        .map(|m| NAMES[m])
                        .collect();
                    let sets = assign(&view);
                    let desired = view
                        .iter()
                        .position(|n| *n == NAMES[who])
                        .map_or(SlotSet::empty(), |i| sets[i]);
                    let others = (0..NAMES.len())
                        .filter(|m| *m != who)
                        .filter_map(|m| latest[m])
                        .fold(SlotSet::empty(), |a, s| a.union(&s));
                    let own = (latest_idx[who] == written[who])
                        .then(|| latest[who])
                        .flatten();
                    let before = members[who].claims;
                    members[who].step(&Inputs {
                        desired,
                        own_observed: own,
                        others_claims: others,
                        in_flight: SlotSet::empty(),
                        fenced: false,
                    });
                    if members[who].claims != before {
                        log.push((who, members[who].claims));
                        written[who] = Some(log.len() - 1);
                    }
                }
            }
            let all = members
                .iter()
                .fold(SlotSet::empty(), |a, m| a.union(&m.active));
            assert_eq!(all, SlotSet::full(), "round {round}: the ring converged");
        }
    }
}
