//! Medians and percentiles for the workload driver.

use std::time::Duration;

/// The median of `values` (the mean of the two middle values for an even
/// count); NaN when `values` is empty. NaNs sort last.
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The nearest-rank `q`-quantile (`q` in `0.0..=1.0`) of an ascending slice;
/// `None` when it is empty.
pub fn percentile<V: Copy>(sorted: &[V], q: f64) -> Option<V> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// p50 / p99 / max of a set of signed nanosecond samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Distribution {
    /// Number of samples.
    pub count: usize,
    /// Median, in nanoseconds.
    pub p50_ns: i64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: i64,
    /// Largest sample, in nanoseconds.
    pub max_ns: i64,
}

impl Distribution {
    /// Summarises `samples` (in nanoseconds, in any order); all zero when empty.
    pub fn of(mut samples: Vec<i64>) -> Self {
        samples.sort_unstable();
        Self {
            count: samples.len(),
            p50_ns: percentile(&samples, 0.50).unwrap_or(0),
            p99_ns: percentile(&samples, 0.99).unwrap_or(0),
            max_ns: samples.last().copied().unwrap_or(0),
        }
    }
}

/// `d` in nanoseconds as an `i64`, saturating.
pub fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(50));
        assert_eq!(percentile(&v, 0.99), Some(99));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile::<i64>(&[], 0.5), None);
        let d = Distribution::of(vec![5, -1, 3]);
        assert_eq!((d.count, d.p50_ns, d.max_ns), (3, 3, 5));
    }
}
