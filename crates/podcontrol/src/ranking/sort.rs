//! Sorting with upstream's comparators, which need not be total orders.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use super::compare::{RankingOptions, active_pods_less, deletes_before};

/// The stable sort order of `0..len` under `less(i, j)`.
///
/// A merge sort that only ever asks `less` and never assumes its answers are
/// consistent: with a comparator that is not a strict weak order it still
/// terminates, returns a permutation and never panics (unlike
/// `slice::sort_by`, which may panic on such comparators). For a consistent
/// comparator the result is sorted, equal elements keeping their input order.
pub fn sort_by_less(len: usize, mut less: impl FnMut(usize, usize) -> bool) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    let mut buffer = Vec::with_capacity(len);
    let mut width = 1;
    while width < len {
        let mut start = 0;
        while start < len {
            let mid = (start + width).min(len);
            let end = (start + 2 * width).min(len);
            buffer.clear();
            let (mut l, mut r) = (start, mid);
            while l < mid && r < end {
                // Take from the right only when strictly less: keeps stability.
                if less(order[r], order[l]) {
                    buffer.push(order[r]);
                    r += 1;
                } else {
                    buffer.push(order[l]);
                    l += 1;
                }
            }
            buffer.extend_from_slice(&order[l..mid]);
            buffer.extend_from_slice(&order[r..end]);
            order[start..end].copy_from_slice(&buffer);
            start = end;
        }
        width *= 2;
    }
    order
}

/// Reorders `items` so that `items[k]` becomes the element that was at
/// `order[k]`. `order` must be a permutation of `0..items.len()`; anything
/// else leaves `items` untouched.
pub(crate) fn apply_order<T>(items: &mut [T], order: &[usize]) {
    let n = items.len();
    let mut seen = vec![false; n];
    if order.len() != n
        || !order
            .iter()
            .all(|&i| i < n && !std::mem::replace(&mut seen[i], true))
    {
        return;
    }
    // Follow each cycle of the permutation, swapping elements into place.
    let mut done = vec![false; n];
    for start in 0..n {
        if done[start] {
            continue;
        }
        let mut k = start;
        loop {
            done[k] = true;
            let next = order[k];
            if next == start {
                break;
            }
            items.swap(k, next);
            k = next;
        }
    }
}

/// Sorts `pods` in place so the pods to delete first come first, using
/// [`deletes_before`] with the default [`RankingOptions`]. `ranks[i]` is the
/// co-location rank of `pods[i]` (a missing entry counts as 0); `now` anchors
/// the logarithmic age buckets.
///
/// The sort is stable: pods the order cannot tell apart keep their input
/// order (upstream's sort is unstable, so any order of such pods matches it).
pub fn sort_for_deletion<P: Borrow<Pod>>(pods: &mut [P], ranks: &[usize], now: Timestamp) {
    let rank = |i: usize| ranks.get(i).copied().unwrap_or(0);
    let order = sort_by_less(pods.len(), |i, j| {
        deletes_before(
            pods[i].borrow(),
            rank(i),
            pods[j].borrow(),
            rank(j),
            Some(now),
            RankingOptions::default(),
        )
    });
    apply_order(pods, &order);
}

/// Sorts `pods` in place by [`active_pods_less`] (least valuable first),
/// stably.
pub fn sort_active_pods<P: Borrow<Pod>>(pods: &mut [P]) {
    let order = sort_by_less(pods.len(), |i, j| {
        active_pods_less(pods[i].borrow(), pods[j].borrow())
    });
    apply_order(pods, &order);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_consistent_comparators_stably() {
        let items = [
            (3, 'a'),
            (1, 'b'),
            (3, 'c'),
            (0, 'd'),
            (1, 'e'),
            (2, 'f'),
            (0, 'g'),
        ];
        let order = sort_by_less(items.len(), |i, j| items[i].0 < items[j].0);
        let sorted: Vec<_> = order.iter().map(|&i| items[i]).collect();
        assert_eq!(
            sorted,
            [
                (0, 'd'),
                (0, 'g'),
                (1, 'b'),
                (1, 'e'),
                (2, 'f'),
                (3, 'a'),
                (3, 'c')
            ]
        );
        assert!(sort_by_less(0, |_, _| true).is_empty());
        assert_eq!(sort_by_less(1, |_, _| true), [0]);
    }

    #[test]
    fn inconsistent_comparators_still_yield_a_permutation() {
        for n in 0..40 {
            // "Always less" and a cyclic rock-paper-scissors comparator.
            for cmp in [
                |_: usize, _: usize| true,
                |i: usize, j: usize| (i + 1) % 3 == j % 3,
            ] {
                let mut order = sort_by_less(n, cmp);
                order.sort_unstable();
                assert_eq!(order, (0..n).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn apply_order_permutes_and_ignores_non_permutations() {
        let mut v = vec!['a', 'b', 'c', 'd'];
        apply_order(&mut v, &[2, 0, 3, 1]);
        assert_eq!(v, ['c', 'a', 'd', 'b']);
        apply_order(&mut v, &[0, 0, 1, 2]);
        assert_eq!(v, ['c', 'a', 'd', 'b']);
        apply_order(&mut v, &[0, 1]);
        assert_eq!(v, ['c', 'a', 'd', 'b']);
        apply_order(&mut v, &[0, 1, 2, 9]);
        assert_eq!(v, ['c', 'a', 'd', 'b']);
    }
}
