//! Pods together with their co-location ranks, sortable for deletion.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::compare::{RankingOptions, deletes_before};
use super::sort::{apply_order, sort_by_less};

/// Pods paired with their co-location ranks, ordered for deletion by
/// [`deletes_before`] (upstream's `ActivePodsWithRanks`).
///
/// `ranks[i]` belongs to `pods[i]`; a missing rank counts as 0. Sorting keeps
/// the two vectors in step.
#[derive(Clone, Debug)]
pub struct ActivePodsWithRanks<P> {
    /// The pods to order: `Pod`, `&Pod`, `Arc<Pod>`, …
    pub pods: Vec<P>,
    /// The co-location rank of each pod.
    pub ranks: Vec<usize>,
    /// The instant ages are measured at for the logarithmic buckets; `None`
    /// compares raw times instead.
    pub now: Option<Timestamp>,
    /// Feature switches; the default matches current Kubernetes.
    pub options: RankingOptions,
}

impl<P: Borrow<Pod>> ActivePodsWithRanks<P> {
    /// Pods with their ranks, aged at `now`, with default options.
    pub fn new(pods: Vec<P>, ranks: Vec<usize>, now: Timestamp) -> Self {
        Self {
            pods,
            ranks,
            now: Some(now),
            options: RankingOptions::default(),
        }
    }

    /// Returns `self` with `options`.
    pub fn with_options(mut self, options: RankingOptions) -> Self {
        self.options = options;
        self
    }

    /// The rank of pod `i` (0 if missing).
    pub fn rank(&self, i: usize) -> usize {
        self.ranks.get(i).copied().unwrap_or(0)
    }

    /// Whether pod `i` is deleted before pod `j`. Out-of-range indices are
    /// never less.
    pub fn less(&self, i: usize, j: usize) -> bool {
        match (self.pods.get(i), self.pods.get(j)) {
            (Some(a), Some(b)) => deletes_before(
                a.borrow(),
                self.rank(i),
                b.borrow(),
                self.rank(j),
                self.now,
                self.options,
            ),
            _ => false,
        }
    }

    /// Sorts pods (and their ranks) so the first pod is the first to delete.
    /// Stable; never panics, whatever the pods contain.
    pub fn sort(&mut self) {
        self.ranks.resize(self.pods.len(), 0);
        let order = sort_by_less(self.pods.len(), |i, j| self.less(i, j));
        apply_order(&mut self.pods, &order);
        apply_order(&mut self.ranks, &order);
    }

    /// The pods, in their current order.
    pub fn into_pods(self) -> Vec<P> {
        self.pods
    }
}
