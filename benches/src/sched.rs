//! How much CPU the process got, and how long its threads waited for one.
//!
//! On a busy machine a latency figure measures the competition as much as
//! the queue. Linux's per-thread scheduler statistics tell the two apart:
//! time spent running, and time spent runnable but waiting for a CPU.

use std::time::Duration;

/// Scheduler totals over all threads of this process.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedTotals {
    /// Time the threads spent running on a CPU.
    pub on_cpu: Duration,
    /// Time the threads were ready to run but waited for a CPU.
    pub runqueue_wait: Duration,
}

impl SchedTotals {
    /// Reads `/proc/self/task/*/schedstat`; `None` where it is unavailable
    /// (not Linux, or scheduler statistics disabled).
    pub fn now() -> Option<Self> {
        let mut totals = SchedTotals::default();
        for task in std::fs::read_dir("/proc/self/task").ok()? {
            let Ok(task) = task else { continue };
            // A thread may exit between listing and reading: skip it.
            let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
                continue;
            };
            let mut fields = stat.split_whitespace().map(str::parse::<u64>);
            if let (Some(Ok(run)), Some(Ok(wait))) = (fields.next(), fields.next()) {
                totals.on_cpu += Duration::from_nanos(run);
                totals.runqueue_wait += Duration::from_nanos(wait);
            }
        }
        Some(totals)
    }

    /// What happened between `earlier` and `self` (saturating: threads that
    /// exited meanwhile take their totals with them).
    pub fn since(self, earlier: SchedTotals) -> SchedTotals {
        SchedTotals {
            on_cpu: self.on_cpu.saturating_sub(earlier.on_cpu),
            runqueue_wait: self.runqueue_wait.saturating_sub(earlier.runqueue_wait),
        }
    }
}

/// Runs `f` and returns its result with the scheduler totals it used
/// (`None` where they cannot be read).
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, Option<SchedTotals>) {
    let before = SchedTotals::now();
    let result = f();
    let used = SchedTotals::now()
        .zip(before)
        .map(|(after, before)| after.since(before));
    (result, used)
}

/// The 1-minute load average (Linux), so a result taken on a busy machine
/// says so; `None` where `/proc/loadavg` is unavailable.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Adds the machine's load (`load_avg_1m`) and core count (`cores`) to a
/// JSON result line.
pub fn stamp_machine_load(line: &mut serde_json::Value) {
    if let Some(fields) = line.as_object_mut() {
        fields.insert("load_avg_1m".into(), serde_json::json!(load_average()));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        fields.insert("cores".into(), serde_json::json!(cores));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_up_as_cpu_time_on_linux() {
        let (_, used) = measure(|| {
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(30) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        if cfg!(target_os = "linux") {
            let used = used.expect("schedstat is readable on Linux");
            assert!(used.on_cpu > Duration::ZERO, "{used:?}");
        }
    }
}
