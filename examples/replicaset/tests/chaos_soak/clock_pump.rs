//! Keeps tokio's paused clock moving while the runtime never goes idle.
//!
//! tokio's paused clock only advances when the runtime has nothing to run.
//! A controller that keeps the runtime busy without waiting on a timer
//! (seed 7092: it creates a pod for a deleted owner, the garbage collector
//! deletes it at once, the pod watch reports the delete at once, the
//! controller creates again) stops the clock for good, and with it every
//! timer: the informer backoff and the delayed watch frames that would
//! deliver the owner's deletion and end the loop. On a real cluster time
//! passes whatever the load, so the soak makes it pass: when the clock has
//! not moved over a wall-clock tick, the pump advances it by a step.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Advances the paused clock by `step` after every `tick` of wall-clock
/// time in which it stood still; stops when dropped.
pub(crate) struct ClockPump {
    stop: Arc<AtomicBool>,
    advances: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl ClockPump {
    /// Starts the pump on the current (paused) runtime.
    pub(crate) fn start(tick: Duration, step: Duration) -> ClockPump {
        let notify = Arc::new(Notify::new());
        let stop = Arc::new(AtomicBool::new(false));
        let advances = Arc::new(AtomicU64::new(0));
        {
            let (notify, stop) = (Arc::clone(&notify), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(tick);
                    notify.notify_one();
                }
            });
        }
        let counted = Arc::clone(&advances);
        let task = tokio::spawn(async move {
            let mut last = tokio::time::Instant::now();
            loop {
                notify.notified().await;
                if tokio::time::Instant::now() == last {
                    counted.fetch_add(1, Ordering::Relaxed);
                    tokio::time::advance(step).await;
                }
                last = tokio::time::Instant::now();
            }
        });
        ClockPump {
            stop,
            advances,
            task,
        }
    }

    /// How many times the pump has advanced the clock so far.
    pub(crate) fn advances(&self) -> u64 {
        self.advances.load(Ordering::Relaxed)
    }
}

impl Drop for ClockPump {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.task.abort();
    }
}

/// A oneshot that fires after `wait` of wall-clock time.
#[cfg(test)]
fn after_wall(wait: Duration) -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        std::thread::sleep(wait);
        let _ = tx.send(());
    });
    rx
}

/// A task that is always ready to run, as the seed-7092 create loop was,
/// freezes the paused clock, so a timer (an informer's backoff, a delayed
/// watch frame) never fires; with the pump it does.
#[tokio::test(start_paused = true)]
async fn a_timer_fires_while_the_runtime_never_idles() {
    let busy = tokio::spawn(async {
        loop {
            tokio::task::yield_now().await;
        }
    });
    let frozen = tokio::time::Instant::now();
    tokio::select! {
        _ = after_wall(Duration::from_millis(300)) => {}
        () = tokio::time::sleep(Duration::from_secs(1)) => panic!("the clock moved while busy"),
    }
    assert_eq!(tokio::time::Instant::now(), frozen);

    let pump = ClockPump::start(Duration::from_millis(10), Duration::from_millis(100));
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(1)) => {}
        _ = after_wall(Duration::from_secs(30)) => panic!("the timer never fired"),
    }
    assert!(tokio::time::Instant::now() >= frozen + Duration::from_secs(1));
    assert!(pump.advances() >= 10);
    busy.abort();
}
