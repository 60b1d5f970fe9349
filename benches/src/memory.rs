//! What a backlog costs in memory: the process's resident set before and
//! after a queue takes many distinct keys at once (the `memory` binary).
//!
//! Peak resident memory (`VmHWM`), not the steady state, is the figure: a
//! structure that doubles its buffer when it grows holds the old and the new
//! buffer at once for a moment, and the process must have room for that
//! moment. Each measurement runs in a fresh process (the binary starts
//! itself once per run), since a process's peak never goes down.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_workqueue::WorkQueue;
use ctrlkit_workqueue::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, SettableGaugeMetric,
};

use crate::sched::SchedTotals;

/// Resident memory of this process, from `/proc/self/status` (Linux).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resident {
    /// Peak resident set size so far (`VmHWM`), in bytes.
    pub peak: u64,
    /// Current resident set size (`VmRSS`), in bytes.
    pub current: u64,
}

impl Resident {
    /// Reads this process's figures; `None` where `/proc/self/status` is
    /// unavailable (not Linux).
    pub fn now() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/self/status").ok()?)
    }

    /// Parses the `VmHWM` and `VmRSS` lines of a `/proc/<pid>/status` text
    /// (values in kB).
    pub fn parse(status: &str) -> Option<Self> {
        let kib = |name: &str| -> Option<u64> {
            let value = status.lines().find_map(|l| l.strip_prefix(name))?;
            let kib: u64 = value.split_whitespace().next()?.parse().ok()?;
            Some(kib * 1024)
        };
        Some(Self {
            peak: kib("VmHWM:")?,
            current: kib("VmRSS:")?,
        })
    }
}

/// The type of the keys queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `u64` keys `0..items`, as in the workload driver.
    U64,
    /// `String` keys shaped like a controller's `namespace/name`
    /// (`ns-0042/pod-0001234`, 19 bytes): the string's own heap block is part
    /// of what the queue holds.
    String,
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::U64 => "u64",
            KeyKind::String => "string",
        })
    }
}

impl FromStr for KeyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "u64" => Ok(KeyKind::U64),
            "string" => Ok(KeyKind::String),
            _ => Err(format!("expected u64 or string, got {s:?}")),
        }
    }
}

/// How the keys enter the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddKind {
    /// `add`: every key is queued (the ready lane and the item store).
    Add,
    /// `add_after` with a one-hour delay: every key waits in the delay
    /// store.
    AddAfter,
}

impl fmt::Display for AddKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddKind::Add => "add",
            AddKind::AddAfter => "add_after",
        })
    }
}

impl FromStr for AddKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "add" => Ok(AddKind::Add),
            "add_after" => Ok(AddKind::AddAfter),
            _ => Err(format!("expected add or add_after, got {s:?}")),
        }
    }
}

/// One memory measurement: what to queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCase {
    /// Distinct keys queued at once.
    pub items: u64,
    /// Their type.
    pub key: KeyKind,
    /// `add` or `add_after`.
    pub op: AddKind,
    /// Whether the queue records metrics (a name and a provider of plain
    /// atomics), which makes it keep add and start times.
    pub metrics: bool,
}

/// What one measurement found.
#[derive(Debug, Clone, Copy)]
pub struct MemoryResult {
    /// Resident memory before the queue was built.
    pub before: Resident,
    /// Resident memory with every key queued.
    pub after: Resident,
    /// `queue.len()` after the adds (keys handed to `add`; 0 for
    /// `add_after`, whose keys wait).
    pub queued: usize,
    /// Wall time of the adds.
    pub wall: Duration,
    /// CPU time of the process during the adds, where readable.
    pub cpu: Option<Duration>,
}

impl MemoryResult {
    /// Peak resident bytes gained per item over the empty process.
    pub fn peak_bytes_per_item(&self, items: u64) -> f64 {
        self.after.peak.saturating_sub(self.before.peak) as f64 / items.max(1) as f64
    }

    /// Resident bytes per item once every key is queued (after the growth
    /// peaks are released).
    pub fn settled_bytes_per_item(&self, items: u64) -> f64 {
        self.after.current.saturating_sub(self.before.current) as f64 / items.max(1) as f64
    }
}

/// The `i`-th `String` key.
pub fn string_key(i: u64) -> String {
    format!("ns-{:04}/pod-{:07}", i % 10_000, i)
}

/// Builds a queue of `K` keys as `case` asks, queues `case.items` distinct
/// keys made by `key` and measures the process's resident memory before and
/// after. Run it in a fresh process: the peak of anything the process did
/// before counts too. Must be called inside a tokio runtime (the delay
/// store's timer task is spawned on it).
pub fn measure_queue<K>(case: MemoryCase, key: impl Fn(u64) -> K) -> Option<MemoryResult>
where
    K: Eq + std::hash::Hash + Clone + Send + Sync + 'static,
{
    let before = Resident::now()?;
    let queue = if case.metrics {
        WorkQueue::<K>::builder()
            .name("memory")
            .metrics_provider(Arc::new(AtomicMetrics))
            .build()
    } else {
        WorkQueue::<K>::new()
    };
    let sched_before = SchedTotals::now();
    let start = Instant::now();
    for i in 0..case.items {
        match case.op {
            AddKind::Add => queue.add(key(i)),
            AddKind::AddAfter => queue.add_after(key(i), Duration::from_secs(3600)),
        }
    }
    let wall = start.elapsed();
    let cpu = SchedTotals::now()
        .zip(sched_before)
        .map(|(after, before)| after.since(before).on_cpu);
    let after = Resident::now()?;
    let queued = queue.len();
    Some(MemoryResult {
        before,
        after,
        queued,
        wall,
        cpu,
    })
}

/// A metrics provider whose metrics are plain atomics: the cheapest a real
/// provider can be, so the figures show what the queue itself keeps.
#[derive(Debug)]
pub struct AtomicMetrics;

#[derive(Debug, Default)]
struct Atomic(AtomicU64);

impl CounterMetric for Atomic {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

impl GaugeMetric for Atomic {
    fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn dec(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SettableGaugeMetric for Atomic {
    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

impl HistogramMetric for Atomic {
    fn observe(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

impl MetricsProvider for AtomicMetrics {
    fn new_depth_metric(&self, _: &str) -> Box<dyn GaugeMetric> {
        Box::new(Atomic::default())
    }

    fn new_adds_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Atomic::default())
    }

    fn new_latency_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Atomic::default())
    }

    fn new_work_duration_metric(&self, _: &str) -> Box<dyn HistogramMetric> {
        Box::new(Atomic::default())
    }

    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Box<dyn SettableGaugeMetric> {
        Box::new(Atomic::default())
    }

    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Box<dyn SettableGaugeMetric> {
        Box::new(Atomic::default())
    }

    fn new_retries_metric(&self, _: &str) -> Box<dyn CounterMetric> {
        Box::new(Atomic::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_peak_and_current_from_proc_status() {
        let status =
            "Name:\tmemory\nVmPeak:\t  20000 kB\nVmHWM:\t    4096 kB\nVmRSS:\t    3072 kB\n";
        assert_eq!(
            Resident::parse(status),
            Some(Resident {
                peak: 4096 * 1024,
                current: 3072 * 1024
            })
        );
        assert_eq!(Resident::parse("VmRSS:\t 1 kB\n"), None);
    }

    #[test]
    fn string_keys_are_distinct_and_namespace_shaped() {
        assert_eq!(string_key(1_234_567), "ns-4567/pod-1234567");
        assert_ne!(string_key(1), string_key(10_001));
    }
}
