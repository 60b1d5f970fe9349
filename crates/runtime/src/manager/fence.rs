//! The write fence: may this process write to the cluster right now?
//!
//! With leader election the answer is yes only while this process leads
//! and its last *successful* lease renewal was sent less than the renew
//! deadline ago, measured on the monotonic clock
//! ([`tokio::time::Instant`]). A stand-by may take the lease
//! `lease_duration` after that renewal (by its own wall clock), so the
//! fence closes `lease_duration - renew_deadline` before any other
//! replica can lead. Because the check reads the clock rather than waiting
//! for a timer or a reply, a process that was paused (`SIGSTOP`, a frozen
//! VM, a long GC-like stall) sees the fence closed on its very first check
//! after it resumes, before it has heard anything from the API server.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const STANDBY: u8 = 0;
const LEADING: u8 = 1;
const STOPPED: u8 = 2;

/// Why a write was refused by a [`LeaderFence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FenceClosed {
    /// This process is a stand-by: it has not won the lease.
    #[error("write refused: this process does not hold the leader lease (stand-by)")]
    NotLeader,
    /// The lease was not renewed within the renew deadline: it may have
    /// expired, and another replica may be leading already.
    #[error(
        "write refused: the leader lease was not renewed within the renew deadline ({}s); another replica may be leading",
        renew_deadline.as_secs()
    )]
    RenewDeadlineExceeded {
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// This process has stopped leading (shutdown, or the lease was lost).
    #[error("write refused: this process has stopped leading")]
    Stopped,
}

/// A cheap, cloneable answer to "may this process write now?", checked
/// before every write to the cluster (child creates, deletes and patches,
/// status updates, events).
///
/// - Without leader election ([`LeaderFence::unfenced`]) it is always
///   open.
/// - With leader election it is open only while this process leads *and*
///   less than the renew deadline has passed, on the monotonic clock, since
///   the last successful renewal of the lease was sent. The
///   [`Manager`](super::Manager) stops every runnable at once when it
///   closes, and the process exits non-zero.
///
/// [`check`](Self::check) is a few atomic loads and a clock read: call it
/// right before each request, not once per sync. It narrows the window in
/// which a deposed leader writes to the requests already past the check
/// when the process was paused or cut off; Kubernetes has no fencing
/// tokens, so no client-side check can close that last window.
///
/// ```
/// use ctrlkit_runtime::manager::LeaderFence;
///
/// let fence = LeaderFence::unfenced();
/// assert!(fence.is_open());
/// fence.check().expect("without leader election every write may go");
/// ```
#[derive(Debug, Clone)]
pub struct LeaderFence {
    inner: Option<Arc<Elected>>,
}

/// The writing side of a [`LeaderFence`] with leader election: records
/// renewals and leadership changes. The [`Manager`](super::Manager) drives
/// one itself; use it directly only for a leader election of your own, or
/// in tests.
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// use std::time::Duration;
/// use ctrlkit_runtime::manager::{FenceClosed, FenceDriver};
/// use tokio::time::Instant;
///
/// let driver = FenceDriver::new(Duration::from_secs(10));
/// let fence = driver.fence();
/// assert_eq!(fence.check(), Err(FenceClosed::NotLeader));
///
/// driver.renewed(Instant::now());
/// driver.start_leading();
/// assert!(fence.is_open());
///
/// // Ten seconds without a successful renewal: writes stop.
/// tokio::time::advance(Duration::from_secs(10)).await;
/// assert!(matches!(fence.check(), Err(FenceClosed::RenewDeadlineExceeded { .. })));
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct FenceDriver {
    inner: Arc<Elected>,
}

#[derive(Debug)]
struct Elected {
    /// Renewal instants are stored as nanoseconds since this instant.
    origin: Instant,
    renew_deadline: Duration,
    /// `1 +` nanoseconds from `origin` to the latest successful renewal;
    /// `0` before the first.
    renewed: AtomicU64,
    state: AtomicU8,
    /// Cancelled when the state becomes [`STOPPED`], to wake
    /// [`LeaderFence::closed`].
    stopped: CancellationToken,
}

impl LeaderFence {
    /// A fence that is always open: the process runs without leader
    /// election.
    pub fn unfenced() -> Self {
        Self { inner: None }
    }

    /// Whether writes may go out now.
    pub fn is_open(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok(())` when writes may go out now; otherwise why not. Write gates
    /// return this error instead of sending the request.
    pub fn check(&self) -> Result<(), FenceClosed> {
        match &self.inner {
            None => Ok(()),
            Some(elected) => elected.check(Instant::now()),
        }
    }

    /// Whether this fence follows a leader election (`false` for
    /// [`unfenced`](Self::unfenced)).
    pub fn is_elected(&self) -> bool {
        self.inner.is_some()
    }

    /// Completes once the fence is closed: at once on a stand-by, when the
    /// renew deadline passes without a successful renewal, or when the
    /// process stops leading. Never completes for an
    /// [`unfenced`](Self::unfenced) fence.
    ///
    /// Cancel-safe: dropping the future loses nothing.
    pub async fn closed(&self) {
        let Some(elected) = &self.inner else {
            return std::future::pending().await;
        };
        loop {
            let Some(deadline) = elected.open_until(Instant::now()) else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = elected.stopped.cancelled() => {}
            }
        }
    }
}

impl Default for LeaderFence {
    /// [`LeaderFence::unfenced`]: write gates built without a manager let
    /// every write through.
    fn default() -> Self {
        Self::unfenced()
    }
}

impl FenceDriver {
    /// A closed fence (stand-by) whose leader must renew at least every
    /// `renew_deadline`.
    pub fn new(renew_deadline: Duration) -> Self {
        Self {
            inner: Arc::new(Elected {
                origin: Instant::now(),
                renew_deadline,
                renewed: AtomicU64::new(0),
                state: AtomicU8::new(STANDBY),
                stopped: CancellationToken::new(),
            }),
        }
    }

    /// The reading side, for write gates.
    pub fn fence(&self) -> LeaderFence {
        LeaderFence {
            inner: Some(self.inner.clone()),
        }
    }

    /// Records a successful renewal (or acquisition) of the lease whose
    /// request was sent at `sent_at`. Time the renewal from when the
    /// request left, not from when the answer came: the lease's validity
    /// runs from the `renewTime` the request carried. Older renewals than
    /// the latest recorded one are ignored.
    pub fn renewed(&self, sent_at: Instant) {
        let Some(since) = sent_at.checked_duration_since(self.inner.origin) else {
            // Sent before this fence existed: it proves nothing about now.
            return;
        };
        let nanos = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX - 1);
        self.inner
            .renewed
            .fetch_max(nanos.saturating_add(1), Ordering::AcqRel);
    }

    /// This process won the lease: the fence opens (for as long as
    /// renewals keep coming). No effect once [`stop`](Self::stop)ped.
    pub fn start_leading(&self) {
        let _ = self.inner.state.compare_exchange(
            STANDBY,
            LEADING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
    }

    /// This process stops leading (shutdown or lost lease): the fence
    /// closes for good.
    pub fn stop(&self) {
        self.inner.state.store(STOPPED, Ordering::Release);
        self.inner.stopped.cancel();
    }

    /// Whether [`start_leading`](Self::start_leading) was called and
    /// [`stop`](Self::stop) was not (regardless of the deadline).
    pub fn is_leading(&self) -> bool {
        self.inner.state.load(Ordering::Acquire) == LEADING
    }
}

impl Elected {
    fn check(&self, now: Instant) -> Result<(), FenceClosed> {
        match self.state.load(Ordering::Acquire) {
            STANDBY => Err(FenceClosed::NotLeader),
            LEADING if self.open_until(now).is_some() => Ok(()),
            LEADING => Err(FenceClosed::RenewDeadlineExceeded {
                renew_deadline: self.renew_deadline,
            }),
            _ => Err(FenceClosed::Stopped),
        }
    }

    /// The instant the fence closes if no renewal comes, when it is open
    /// at `now`.
    fn open_until(&self, now: Instant) -> Option<Instant> {
        if self.state.load(Ordering::Acquire) != LEADING {
            return None;
        }
        let renewed = self.renewed.load(Ordering::Acquire).checked_sub(1)?;
        let deadline = self
            .origin
            .checked_add(Duration::from_nanos(renewed))?
            .checked_add(self.renew_deadline)?;
        (now < deadline).then_some(deadline)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const DEADLINE: Duration = Duration::from_secs(10);

    fn leading() -> (FenceDriver, LeaderFence) {
        let driver = FenceDriver::new(DEADLINE);
        driver.renewed(Instant::now());
        driver.start_leading();
        let fence = driver.fence();
        (driver, fence)
    }

    #[test]
    fn unfenced_is_always_open_and_never_closes() {
        let fence = LeaderFence::unfenced();
        assert!(fence.is_open());
        assert!(!fence.is_elected());
        assert!(LeaderFence::default().is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn stand_by_is_closed_until_it_leads() {
        let driver = FenceDriver::new(DEADLINE);
        let fence = driver.fence();
        assert_eq!(fence.check(), Err(FenceClosed::NotLeader));
        // A renewal alone does not make a leader.
        driver.renewed(Instant::now());
        assert_eq!(fence.check(), Err(FenceClosed::NotLeader));
        driver.start_leading();
        assert_eq!(fence.check(), Ok(()));
        assert!(driver.is_leading());
    }

    #[tokio::test(start_paused = true)]
    async fn closes_when_the_renew_deadline_passes_and_reopens_on_renewal() {
        let (driver, fence) = leading();
        tokio::time::advance(DEADLINE - Duration::from_millis(1)).await;
        assert!(fence.is_open());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(
            fence.check(),
            Err(FenceClosed::RenewDeadlineExceeded {
                renew_deadline: DEADLINE
            })
        );
        // A late renewal (its request sent now) opens it again: the lease
        // was ours when the server applied it.
        driver.renewed(Instant::now());
        assert!(fence.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn a_paused_process_is_fenced_on_its_first_check_after_resuming() {
        let (_driver, fence) = leading();
        let frozen = fence.clone();
        // Nothing runs while the process is stopped; the monotonic clock
        // moves on. No timer has to fire for the check to fail.
        tokio::time::advance(Duration::from_secs(40)).await;
        assert!(!frozen.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn timing_renewals_from_their_send_time_is_conservative() {
        let (driver, fence) = leading();
        let sent = Instant::now();
        // The answer to a renewal sent at `sent` arrives 9 s later.
        tokio::time::advance(Duration::from_secs(9)).await;
        driver.renewed(sent);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(
            !fence.is_open(),
            "the lease runs from the request, not the reply"
        );
        // An out-of-order older renewal never moves the deadline back.
        let (driver, fence) = leading();
        tokio::time::advance(Duration::from_secs(6)).await;
        driver.renewed(Instant::now());
        driver.renewed(Instant::now() - Duration::from_secs(5));
        tokio::time::advance(Duration::from_secs(9)).await;
        assert!(fence.is_open());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!fence.is_open());
    }

    #[tokio::test(start_paused = true)]
    async fn closed_completes_at_the_deadline_unless_renewed() {
        let (driver, fence) = leading();
        let start = Instant::now();
        let renewer = {
            let driver = driver.clone();
            tokio::spawn(async move {
                for _ in 0..3 {
                    tokio::time::sleep(Duration::from_secs(4)).await;
                    driver.renewed(Instant::now());
                }
            })
        };
        fence.closed().await;
        // Renewed at 4, 8 and 12 s; closed 10 s after the last one.
        assert_eq!(start.elapsed(), Duration::from_secs(22));
        renewer.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn stop_closes_for_good_and_wakes_waiters() {
        let (driver, fence) = leading();
        let waiter = tokio::spawn({
            let fence = fence.clone();
            async move { fence.closed().await }
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        driver.stop();
        waiter.await.unwrap();
        assert_eq!(start.elapsed(), Duration::ZERO);
        assert_eq!(fence.check(), Err(FenceClosed::Stopped));
        driver.renewed(Instant::now());
        driver.start_leading();
        assert_eq!(fence.check(), Err(FenceClosed::Stopped));
    }

    #[tokio::test(start_paused = true)]
    async fn closed_on_a_stand_by_completes_at_once() {
        let driver = FenceDriver::new(DEADLINE);
        driver.fence().closed().await;
    }
}
