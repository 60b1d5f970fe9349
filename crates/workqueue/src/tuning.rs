//! The tuned numbers: how long a contended lock is spun on, how much of
//! tokio's cooperative budget a `get` charges, how many parked `get`s are
//! woken, and how `get`s look for due delayed items. Each number is here
//! with the logic that uses it and the benchmark that chose it.
//!
//! The benchmarks are the workloads of the `ctrlkit-benches` crate's
//! `workload` binary (see `benches/README.md` in the repository):
//!
//! ```text
//! cargo run --release -p ctrlkit-benches --bin workload -- --only W1 --runs 5
//! ```
//!
//! W1 is a producer adding distinct keys while 1 and 4 workers drain them,
//! W2 a storm of repeated adds over 1,000 keys, W3 200,000 `add_after`
//! delays and their lateness, W4 the add-to-get latency with idle workers.
//! CPU-time figures (`cpu_ns_per_item`, `cpu_ns_per_add`) hold up on a busy
//! machine where wall-clock ones do not.
//!
//! The "Measured" figures below compare the default with the value in
//! parentheses on a 2-core machine shared with other builds (load average
//! 10 to 15), each the median of three interleaved invocations of five
//! runs, under real-time scheduling (`chrt -f 10`, so producer and workers
//! really run in parallel) unless said otherwise (November 2026).
//!
//! Every number can be changed at compile time, without editing the code,
//! through an environment variable named after it (for example
//! `CTRLKIT_WORKQUEUE_LOCK_SPIN_ROUNDS=0 cargo run --release -p
//! ctrlkit-benches --bin workload -- --only W1`), so a benchmark can be run
//! again with another value. cargo rebuilds the crate when such a variable
//! changes. They are for benchmarking: normal builds leave them unset.

use std::cell::Cell;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};
use tokio::task::coop::{RestoreOnPending, poll_proceed};

/// `value` (an environment variable read at compile time) as a number, or
/// `default` when it is unset. A value that is not a decimal number stops
/// the build with this message.
const fn knob(value: Option<&str>, default: u64) -> u64 {
    let Some(value) = value else {
        return default;
    };
    let digits = value.as_bytes();
    assert!(
        !digits.is_empty(),
        "a CTRLKIT_WORKQUEUE_* tuning variable is empty"
    );
    let mut n: u64 = 0;
    let mut i = 0;
    while i < digits.len() {
        let d = digits[i];
        assert!(
            d.is_ascii_digit(),
            "a CTRLKIT_WORKQUEUE_* tuning variable is not a decimal number"
        );
        n = n * 10 + (d - b'0') as u64;
        i += 1;
    }
    n
}

/// `n`, or 1 if `n` is 0 (for numbers that divide or bound a loop).
const fn at_least_one(n: u64) -> u64 {
    if n == 0 { 1 } else { n }
}

// ---------------------------------------------------------------------------
// Contended locks
// ---------------------------------------------------------------------------

/// Rounds of spinning for a contended lock before blocking on it. Round
/// `r` pauses `2^min(r, 6)` times and then looks at the lock once: in all
/// about 1,700 pause instructions, tens of microseconds, before falling
/// back to `parking_lot`'s blocking lock.
///
/// The lock is held for tens of nanoseconds at a time, but when a producer
/// and workers on different cores hammer it, the other side takes it again
/// right after releasing it. Blocking then costs system calls and context
/// switches on both sides (`parking_lot` first yields the thread, then
/// parks it on a futex, and the holder must wake it), and looking at the
/// lock often keeps stealing its cache line from the holder. Looking at it
/// rarely lets the holder run a burst of operations undisturbed. The spin
/// only happens under contention, never on an idle queue.
///
/// Benchmark: W1 with 4 workers and W2 (producer and workers contend for
/// the lock), `cpu_ns_per_item` / `cpu_ns_per_add` and wall time; the
/// effect is largest when producer and workers really run in parallel
/// (real-time scheduling, see the benches README).
///
/// Measured (0: block at once): W1 with 4 workers 11.6 M items/s at 167 ns
/// of CPU per item (8.7 M/s at 221 ns); W2 0.026 s (0.039 s). On the busy
/// machine without real-time scheduling, W1 used 60 ns of CPU per item (70
/// ns).
pub(crate) const LOCK_SPIN_ROUNDS: u32 =
    knob(option_env!("CTRLKIT_WORKQUEUE_LOCK_SPIN_ROUNDS"), 30) as u32;

/// Checks of a contended lock by an `add` before it falls back to the
/// backing-off spin of [`lock`]: one every two pause instructions, a couple
/// of hundred microseconds at most.
///
/// Producers (event handlers fed by watch streams) are favoured over
/// workers under contention: in an add storm, every moment the producer
/// waits is lost, while a worker that waits longer finds more repeated adds
/// already collapsed into one item.
///
/// Benchmark: W2 (`wall_s`, `items_processed`: fewer items processed means
/// more adds collapsed) against W1 with 4 workers, which must not lose.
///
/// Measured (0: adds back off like gets): W2 0.025 s, 5,500 items
/// processed, 25 ns of CPU per add (0.044 s, 320,000 items, 43 ns); W1
/// unchanged.
pub(crate) const EAGER_CHECKS: u32 =
    knob(option_env!("CTRLKIT_WORKQUEUE_EAGER_CHECKS"), 2000) as u32;

/// Locks `mutex`, spinning with backoff for a while if it is contended
/// (see [`LOCK_SPIN_ROUNDS`]). Used by `get`, `done` and everything else
/// but `add`.
#[inline]
pub(crate) fn lock<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    match mutex.try_lock() {
        Some(guard) => guard,
        None => lock_contended(mutex),
    }
}

#[cold]
fn lock_contended<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    for round in 0..LOCK_SPIN_ROUNDS {
        for _ in 0..(1u32 << round.min(6)) {
            std::hint::spin_loop();
        }
        if !mutex.is_locked()
            && let Some(guard) = mutex.try_lock()
        {
            return guard;
        }
    }
    mutex.lock()
}

/// Locks `mutex` for an `add`: a contended lock is checked often (see
/// [`EAGER_CHECKS`]), so an `add` gets it as soon as it is free while
/// `get` and `done`, which back off longer, wait.
#[inline]
pub(crate) fn lock_eager<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    match mutex.try_lock() {
        Some(guard) => guard,
        None => lock_eager_contended(mutex),
    }
}

#[cold]
fn lock_eager_contended<S>(mutex: &Mutex<S>) -> MutexGuard<'_, S> {
    for _ in 0..EAGER_CHECKS {
        std::hint::spin_loop();
        std::hint::spin_loop();
        if !mutex.is_locked()
            && let Some(guard) = mutex.try_lock()
        {
            return guard;
        }
    }
    lock_contended(mutex)
}

// ---------------------------------------------------------------------------
// Waking parked gets
// ---------------------------------------------------------------------------

/// Queued items per woken `get`: one woken `get` is on its way while fewer
/// than this many items are queued, one more per this many beyond.
///
/// Waking one `get` per queued item, as client-go does, makes a fast
/// producer wake every idle worker, each a thread wake-up (a system call)
/// and then lock contention between cores; workers that come one after the
/// other instead mostly run on the thread that woke them. The number grows
/// with the backlog so that a woken `get` stuck behind a busy task of its
/// thread (tokio runs a task woken from a worker thread on that thread, and
/// no other thread may take it) does not hold up a growing backlog: the
/// next wake-up moves it where an idle thread can take it.
///
/// Benchmark: W1 with 4 workers (`cpu_ns_per_item`, and `max_backlog` with
/// `--pacing yield:1024`, where the backlog outgrows a few hundred items);
/// W4 (one item at a time) must stay at one wake-up per item.
///
/// Measured (1: a woken `get` per queued item, as client-go): on the busy
/// machine without real-time scheduling, where woken workers wait for a
/// CPU, W1 with 4 workers used 58 ns of CPU per item (77 ns, with both
/// pacings); under real-time scheduling, and in W4, no difference beyond
/// the spread.
pub(crate) const ITEMS_PER_WAKE: usize =
    at_least_one(knob(option_env!("CTRLKIT_WORKQUEUE_ITEMS_PER_WAKE"), 256)) as usize;

/// How many woken `get`s `queued` items need (never more than the items).
#[inline]
pub(crate) fn gets_needed(queued: usize) -> usize {
    queued.min(1 + queued / ITEMS_PER_WAKE)
}

// ---------------------------------------------------------------------------
// tokio's cooperative budget
// ---------------------------------------------------------------------------

/// Items a thread hands out per unit of tokio's cooperative budget (128
/// units per task poll): a worker loop on a queue that never empties yields
/// to the other tasks of its thread every couple of thousand items instead
/// of starving them, as tokio's own channels do. Charging every item would
/// make workers yield every 128 items, which lets a fast producer outrun
/// them and grow the queue.
///
/// Benchmark: W1 with `--pacing yield:1024` (free-running producer):
/// `max_backlog` and `m_items_per_sec`; set to 1 to charge every item.
///
/// Measured (1): W1 with one worker 17 M items/s with a backlog of at most
/// 1,024 (2.5 M/s, the backlog reaching 892,000 of the million items, at
/// 700 instead of 75 ns of CPU per item).
pub(crate) const GETS_PER_BUDGET_UNIT: u32 = at_least_one(knob(
    option_env!("CTRLKIT_WORKQUEUE_GETS_PER_BUDGET_UNIT"),
    16,
)) as u32;

thread_local! {
    static GETS: Cell<u32> = const { Cell::new(0) };
    static FIRE_CHECKS: Cell<u32> = const { Cell::new(0) };
}

/// Charges tokio's cooperative budget one unit per
/// [`GETS_PER_BUDGET_UNIT`] items handed out on this thread. `queued` is
/// the number of items waiting; nothing is charged when there is nothing
/// to take. `Ready(None)` means nothing was charged; `Pending` means the
/// task's budget is spent and it must yield.
#[inline]
pub(crate) fn coop_budget(cx: &mut Context<'_>, queued: usize) -> Poll<Option<RestoreOnPending>> {
    if queued == 0 {
        return Poll::Ready(None);
    }
    let n = GETS.with(|gets| {
        let n = gets.get().wrapping_add(1);
        gets.set(n);
        n
    });
    if !n.is_multiple_of(GETS_PER_BUDGET_UNIT) {
        return Poll::Ready(None);
    }
    poll_proceed(cx).map(Some)
}

// ---------------------------------------------------------------------------
// Delayed items and gets
// ---------------------------------------------------------------------------

/// How often (in `get` calls on one thread) a `get` on a non-empty queue
/// looks at the clock for due delayed items (an empty queue always looks).
///
/// The timer task alone would hand delayed items out late while the
/// workers are busy: tokio checks its timers only between task polls
/// (every few dozen of them) or when a thread idles, and a busy worker task
/// hands out thousands of items per poll. Reading the clock on every `get`
/// would cost more than the rest of the `get`.
///
/// Benchmark: W3 (`lateness_p99_ms`, `lateness_max_ms`, `cpu_ns_per_item`).
///
/// Measured (1024): W3 lateness p99 0.036 ms, max 1.6 ms (0.052 ms, 2.0
/// ms); a small effect, within the run-to-run spread of the maximum.
pub(crate) const FIRE_CHECK_EVERY: u32 =
    at_least_one(knob(option_env!("CTRLKIT_WORKQUEUE_FIRE_CHECK_EVERY"), 32)) as u32;

/// Whether this `get` should look at the clock for due delayed items:
/// always when the queue is empty, every [`FIRE_CHECK_EVERY`] calls on this
/// thread otherwise.
#[inline]
pub(crate) fn fire_check_now(queue_empty: bool) -> bool {
    let n = FIRE_CHECKS.with(|checks| {
        let n = checks.get().wrapping_add(1);
        checks.set(n);
        n
    });
    queue_empty || n.is_multiple_of(FIRE_CHECK_EVERY)
}

/// A `get` on an empty queue whose next delayed item is due within this
/// many nanoseconds polls again (letting the other tasks of its thread run
/// between polls) instead of parking until the timer task fires the item.
///
/// tokio's timer has a resolution of one millisecond, so a parked worker
/// gets a delayed item up to about a millisecond after its due time; this
/// bounds the busy polling to the last 50 µs before a due time.
///
/// Benchmark: W3 (`lateness_p50_ms`, `lateness_p99_ms`, `cpu_ns_per_item`);
/// 0 turns the polling off.
///
/// Measured (0): W3 lateness p50 1.2 µs, p99 0.04 ms (0.61 ms, 1.3 ms), at
/// 2,500 ns of CPU per item (750 ns): the polling costs CPU while workers
/// wait for items due soon.
pub(crate) const DUE_SOON_NS: u64 = knob(option_env!("CTRLKIT_WORKQUEUE_DUE_SOON_NS"), 50_000);

/// How long (in real time) one `get` polls again for an item due soon
/// before it parks anyway. Bounds the busy polling even where tokio's clock
/// does not move while tasks run (paused time only advances when the
/// runtime idles).
///
/// Benchmark: W3 (`cpu_ns_per_item`, `lateness_max_ms`). Not measured on
/// its own: [`DUE_SOON_NS`] at 0 turns both off.
pub(crate) const SPIN_LIMIT: Duration =
    Duration::from_micros(knob(option_env!("CTRLKIT_WORKQUEUE_SPIN_LIMIT_US"), 100));

/// Whether a `get` that started polling for an item due soon at
/// `spin_since` (now, if it did not) may poll once more.
pub(crate) fn spin_allowed(spin_since: &mut Option<Instant>) -> bool {
    let now = Instant::now();
    let since = *spin_since.get_or_insert(now);
    now.duration_since(since) < SPIN_LIMIT
}

/// Due delayed items added to the queue per acquisition of its lock, so
/// workers get the lock between chunks of a large batch.
///
/// Benchmark: W3, and W3 with `--due burst` (200,000 items due at the same
/// instant): `lateness_p50_ms`, `lateness_max_ms`.
///
/// Measured (1,000,000: a batch in one go): no difference in either, since
/// lateness there is bound by how fast the workers drain the batch. The
/// number is kept as a bound rather than a tuned figure: moving 200,000 due
/// items takes tens of milliseconds under the lock, which adds, gets and
/// dones of other items would otherwise wait for in full.
pub(crate) const FIRE_CHUNK: usize =
    at_least_one(knob(option_env!("CTRLKIT_WORKQUEUE_FIRE_CHUNK"), 256)) as usize;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_parse_decimal_values_and_default_when_unset() {
        assert_eq!(knob(None, 30), 30);
        assert_eq!(knob(Some("0"), 30), 0);
        assert_eq!(knob(Some("2048"), 30), 2048);
    }

    #[test]
    fn one_woken_get_per_started_block_of_queued_items() {
        assert_eq!(gets_needed(0), 0);
        assert_eq!(gets_needed(1), 1);
        assert_eq!(gets_needed(ITEMS_PER_WAKE - 1), 1);
        assert_eq!(gets_needed(ITEMS_PER_WAKE), 2);
        assert_eq!(gets_needed(10 * ITEMS_PER_WAKE), 11);
    }
}
