//! Settings of the churn guard.

use std::time::Duration;

/// Pod failure reasons that count as churn by default: the reasons the
/// kubelet gives when it refuses to admit a pod (`OutOf<resource>` such as
/// `OutOfpods` or `OutOfmemory`, failed node predicates, admission-handler
/// errors) and `Evicted`. A trailing `*` matches any reason with that
/// prefix.
pub const DEFAULT_CHURN_REASONS: &[&str] = &[
    "OutOf*",
    "NodeAffinity",
    "NodeName",
    "NodePorts",
    "MatchNodeSelector",
    "TaintToleration",
    "UnexpectedAdmissionError",
    "UnexpectedPredicateFailureType",
    "InvalidNodeInfo",
    "SysctlForbidden",
    "PodOSNotSupported",
    "PodOSSelectorNodeLabelDoesNotMatch",
    "Evicted",
];

/// Default [`ChurnGuardOptions::window`]: 60 s.
pub const DEFAULT_CHURN_WINDOW: Duration = Duration::from_secs(60);
/// Default [`ChurnGuardOptions::backoff_base`]: 10 s.
pub const DEFAULT_CHURN_BACKOFF_BASE: Duration = Duration::from_secs(10);
/// Default [`ChurnGuardOptions::backoff_max`]: 5 min.
pub const DEFAULT_CHURN_BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Default [`ChurnGuardOptions::failed_pods_kept`]: 5.
pub const DEFAULT_FAILED_PODS_KEPT: usize = 5;

/// Settings of the churn guard, the controller's defence against the hot
/// loop in which every pod it creates is rejected by the kubelet (phase
/// `Failed`, e.g. reason `OutOfpods`) and replaced at once, thousands of
/// times.
///
/// A pod the owner controls *churns* when the controller sees it `Failed`,
/// for the first time, less than [`window`](Self::window) after its
/// `creationTimestamp`, with a `status.reason` matched by
/// [`reasons`](Self::reasons). Each churning pod is a strike against its
/// owner; after `n` strikes the owner creates no pods for
/// `min(backoff_base × 2^(n-1), backoff_max)`, measured on tokio's clock
/// from the last strike; after that it creates a single *probe* pod, and
/// nothing more while the probe is neither `Running` nor `Failed`, however
/// many replicas are missing. The strikes are forgotten once a pod created
/// no earlier than the last churning pod is `Running`, or when no pod has
/// churned for twice `backoff_max` (so a probe that stays `Pending`, e.g.
/// unschedulable, holds the owner back for at most that long).
///
/// `Default` turns the guard on with 60 s, 10 s, 5 min, 5 kept failed pods
/// and [`DEFAULT_CHURN_REASONS`]; [`ChurnGuardOptions::disabled`] gives
/// upstream's behaviour (no detection, no backoff, no condition, Failed pods
/// left to the pod garbage collector).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChurnGuardOptions {
    /// Whether the guard runs at all.
    pub enabled: bool,
    /// How soon after its creation a pod must fail to churn.
    pub window: Duration,
    /// The `status.reason` values that count. An entry ending in `*`
    /// matches by prefix, so `"*"` makes every pod failing within the
    /// window count (including pods failing for reasons that have nothing
    /// to do with admission, e.g. a node shutting down).
    pub reasons: Vec<String>,
    /// Backoff after the first strike; doubles with every further strike.
    pub backoff_base: Duration,
    /// Longest backoff. A `backoff_base` above it is capped too.
    pub backoff_max: Duration,
    /// How many `Failed` pods of an owner are kept (the newest); older ones
    /// are deleted so they do not pile up. Applies to every `Failed` pod of
    /// the owner, churning or not, while the guard is enabled.
    pub failed_pods_kept: usize,
}

impl Default for ChurnGuardOptions {
    fn default() -> Self {
        Self {
            enabled: true,
            window: DEFAULT_CHURN_WINDOW,
            reasons: DEFAULT_CHURN_REASONS
                .iter()
                .map(|r| (*r).to_owned())
                .collect(),
            backoff_base: DEFAULT_CHURN_BACKOFF_BASE,
            backoff_max: DEFAULT_CHURN_BACKOFF_MAX,
            failed_pods_kept: DEFAULT_FAILED_PODS_KEPT,
        }
    }
}

impl ChurnGuardOptions {
    /// The default settings with the guard turned off: the controller then
    /// behaves exactly as upstream's.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Whether a pod that failed with `reason` can churn.
    pub fn matches_reason(&self, reason: &str) -> bool {
        self.reasons.iter().any(|r| match r.strip_suffix('*') {
            Some(prefix) => reason.starts_with(prefix),
            None => r == reason,
        })
    }

    /// The backoff after `strikes` strikes: zero for none, otherwise
    /// `min(backoff_base × 2^(strikes-1), backoff_max)`; never overflows.
    pub fn backoff(&self, strikes: u32) -> Duration {
        if strikes == 0 {
            return Duration::ZERO;
        }
        let factor = 1u32.checked_shl(strikes - 1).unwrap_or(u32::MAX);
        self.backoff_base
            .checked_mul(factor)
            .unwrap_or(Duration::MAX)
            .min(self.backoff_max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_match_exactly_or_by_prefix() {
        let options = ChurnGuardOptions::default();
        for reason in [
            "OutOfpods",
            "OutOfmemory",
            "OutOfnvidia.com/gpu",
            "NodeAffinity",
        ] {
            assert!(options.matches_reason(reason), "{reason}");
        }
        for reason in ["", "Error", "outofpods", "NodeAffinityX", "Shutdown"] {
            assert!(!options.matches_reason(reason), "{reason}");
        }
        let any = ChurnGuardOptions {
            reasons: vec!["*".into()],
            ..ChurnGuardOptions::default()
        };
        assert!(any.matches_reason("Shutdown"));
        assert!(any.matches_reason(""));
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let options = ChurnGuardOptions::default();
        let secs: Vec<u64> = (0..8).map(|n| options.backoff(n).as_secs()).collect();
        assert_eq!(secs, [0, 10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(options.backoff(40), Duration::from_secs(300));
        assert_eq!(options.backoff(u32::MAX), Duration::from_secs(300));
        let base_above_max = ChurnGuardOptions {
            backoff_base: Duration::from_secs(600),
            ..ChurnGuardOptions::default()
        };
        assert_eq!(base_above_max.backoff(1), Duration::from_secs(300));
    }
}
