//! Prometheus metrics of the members of a ring, labelled `ring` and
//! `member`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The labels of every shard metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MemberLabels {
    pub(crate) ring: String,
    pub(crate) member: String,
}

/// The labels of the handover counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct HandoverLabels {
    pub(crate) ring: String,
    pub(crate) member: String,
    /// `gained` or `released`.
    pub(crate) direction: &'static str,
}

/// The labels of the Lease anomaly counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AnomalyLabels {
    pub(crate) ring: String,
    pub(crate) member: String,
    /// `invalid_claims`, `holder_mismatch`, `clock_skew`,
    /// `own_lease_edited` or `own_lease_removed`.
    pub(crate) reason: &'static str,
}

/// The metric families shard members record into. Register once per
/// registry with [`register`](Self::register) and hand clones to
/// [`ShardConfig::metrics`](super::ShardConfig::metrics).
///
/// | metric | type | meaning |
/// |---|---|---|
/// | `ctrlkit_shard_owners_held` | gauge | owners in the member's caches whose slot it holds (counted when its slots change, and at least once per renew period) |
/// | `ctrlkit_shard_slots_held` | gauge | slots (of 1024) the member syncs |
/// | `ctrlkit_shard_members` | gauge | live members the member sees |
/// | `ctrlkit_shard_handovers_total{direction}` | counter | slots gained / released |
/// | `ctrlkit_shard_syncs_total` | counter | reconciles run for held owners |
/// | `ctrlkit_shard_syncs_skipped_total` | counter | reconciles refused: owner not held |
/// | `ctrlkit_shard_renew_failures_total` | counter | Lease writes that failed |
/// | `ctrlkit_shard_fenced_total` | counter | times the member stopped everything for want of renewals |
/// | `ctrlkit_shard_invalid_leases` | gauge | ring Leases with unreadable or hand-edited claims |
/// | `ctrlkit_shard_catch_up_timeouts_total` | counter | gained slots started before the caches caught up with the ring (failed open) |
/// | `ctrlkit_shard_children_relabelled_total` | counter | children whose slot label did not name their controller's slot (edited by hand, or kept after losing their controller) or was missing, corrected or written by this member |
/// | `ctrlkit_shard_lease_anomalies_total{reason}` | counter | ring Lease versions seen edited by hand or with a skewed clock (`invalid_claims`, `holder_mismatch`, `clock_skew`), the member's own Lease written or removed by someone else (`own_lease_edited`, `own_lease_removed`) |
#[derive(Clone, Debug, Default)]
pub struct ShardMetrics {
    pub(crate) owners_held: Family<MemberLabels, Gauge>,
    pub(crate) slots_held: Family<MemberLabels, Gauge>,
    pub(crate) members: Family<MemberLabels, Gauge>,
    pub(crate) handovers: Family<HandoverLabels, Counter>,
    pub(crate) syncs: Family<MemberLabels, Counter>,
    pub(crate) skipped: Family<MemberLabels, Counter>,
    pub(crate) renew_failures: Family<MemberLabels, Counter>,
    pub(crate) fenced: Family<MemberLabels, Counter>,
    pub(crate) invalid_leases: Family<MemberLabels, Gauge>,
    pub(crate) catch_up_timeouts: Family<MemberLabels, Counter>,
    pub(crate) lease_anomalies: Family<AnomalyLabels, Counter>,
    pub(crate) children_relabelled: Family<MemberLabels, Counter>,
}

impl ShardMetrics {
    /// Registers the `ctrlkit_shard_*` families in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("ctrlkit_shard");
        r.register(
            "owners_held",
            "Owners in the caches whose slot this member holds",
            m.owners_held.clone(),
        );
        r.register(
            "slots_held",
            "Slots of the hash space this member syncs",
            m.slots_held.clone(),
        );
        r.register("members", "Live members of the ring", m.members.clone());
        r.register(
            "handovers",
            "Slots gained or released by this member",
            m.handovers.clone(),
        );
        r.register("syncs", "Reconciles run for held owners", m.syncs.clone());
        r.register(
            "syncs_skipped",
            "Reconciles refused because the owner is not held",
            m.skipped.clone(),
        );
        r.register(
            "renew_failures",
            "Writes of the member's Lease that failed",
            m.renew_failures.clone(),
        );
        r.register(
            "fenced",
            "Times the member stopped syncing for want of Lease renewals",
            m.fenced.clone(),
        );
        r.register(
            "invalid_leases",
            "Ring Leases whose claims are unreadable or edited by hand",
            m.invalid_leases.clone(),
        );
        r.register(
            "catch_up_timeouts",
            "Gained slots started before the caches reached the ring's resourceVersion",
            m.catch_up_timeouts.clone(),
        );
        r.register(
            "lease_anomalies",
            "Ring Lease versions seen edited by hand, with a skewed clock, or written or removed by someone else",
            m.lease_anomalies.clone(),
        );
        r.register(
            "children_relabelled",
            "Children whose shard slot label this member corrected or wrote",
            m.children_relabelled.clone(),
        );
        m
    }
}
