//! How old the pods chosen for deletion are compared with the youngest.

use std::borrow::Borrow;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;

use crate::pod::is_pod_ready;

fn age_ms(pod: &Pod, now: Timestamp) -> Option<i64> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    i64::try_from(now.duration_since(created).as_millis()).ok()
}

/// The observations of upstream's
/// `replicaset_controller_sorting_deletion_age_ratio` histogram for one
/// scale-down: for each **ready** pod among the first `count` of `sorted`
/// (the pods chosen for deletion), its age divided by the age of the
/// youngest ready pod in all of `sorted`.
///
/// A ratio near 1 means the scale-down removed young pods, as intended; a
/// large one means old pods went. Like upstream, ages are whole milliseconds
/// and the division is an integer division. Unlike upstream, pods without a
/// creation time are skipped, and nothing is reported when the youngest
/// ready pod is less than a millisecond old (upstream would divide by zero).
pub fn deletion_age_ratios<P: Borrow<Pod>>(sorted: &[P], count: usize, now: Timestamp) -> Vec<f64> {
    let youngest_age = sorted
        .iter()
        .map(Borrow::borrow)
        .filter(|p| is_pod_ready(p))
        .filter_map(|p| age_ms(p, now))
        .min();
    let Some(youngest_age) = youngest_age.filter(|age| *age > 0) else {
        return Vec::new();
    };
    sorted
        .iter()
        .take(count)
        .map(Borrow::borrow)
        .filter(|p| is_pod_ready(p))
        .filter_map(|p| age_ms(p, now))
        .map(|age| {
            // Integer division first, as upstream; the quotient fits f64
            // exactly for any realistic age.
            #[allow(clippy::cast_precision_loss)]
            let ratio = (age / youngest_age) as f64;
            ratio
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::test_pods::*;
    use k8s_openapi::jiff::SignedDuration;

    #[test]
    fn ratios_of_ready_victims_to_the_youngest_ready_pod() {
        let now = ts("2026-01-01T00:00:00Z");
        let mins = |m: i64| now - SignedDuration::from_mins(m);
        let sorted = vec![
            created(ready(pod("a"), None), mins(10)),
            created(pod("not-ready"), mins(1)),
            created(ready(pod("b"), None), mins(25)),
            created(ready(pod("youngest"), None), mins(5)),
            created(ready(pod("kept-old"), None), mins(100)),
        ];
        // Victims a (10/5 = 2), not-ready (skipped), b (25/5 = 5).
        assert_eq!(deletion_age_ratios(&sorted, 3, now), [2.0, 5.0]);
        // Integer division truncates: 7 min / 5 min = 1.
        let sorted = vec![created(ready(pod("a"), None), mins(7)), sorted[3].clone()];
        assert_eq!(deletion_age_ratios(&sorted, 1, now), [1.0]);
    }

    #[test]
    fn degenerate_inputs_report_nothing() {
        let now = ts("2026-01-01T00:00:00Z");
        let fresh = created(ready(pod("fresh"), None), now);
        let old = created(ready(pod("old"), None), now - SignedDuration::from_hours(1));
        assert!(deletion_age_ratios(&[old.clone(), fresh], 1, now).is_empty());
        assert!(deletion_age_ratios(&[ready(pod("no-ts"), None)], 1, now).is_empty());
        assert!(deletion_age_ratios::<Pod>(&[], 3, now).is_empty());
        assert_eq!(deletion_age_ratios(&[old], 5, now), [1.0]);
    }
}
