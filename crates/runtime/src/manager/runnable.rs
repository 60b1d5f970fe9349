//! What the manager runs: controllers, and anything else that should live
//! and stop with the process.

use std::fmt;
use std::future::Future;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

/// The error a [`Runnable`] stops with: any error, kept whole so
/// [`ManagerError::Runnable`](super::ManagerError::Runnable) can expose it
/// as its source (and callers can downcast it).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A long-running task the [`Manager`](super::Manager) starts and stops:
/// a controller, a metrics exporter, a cache warmer.
///
/// The manager polls [`has_synced`](Self::has_synced) while it warms up
/// (before calling `run`, and before campaigning for the lease), starts
/// every runnable with [`run`](Self::run) once it may (at once for
/// runnables that do not [need leader
/// election](Self::needs_leader_election), after winning the lease for the
/// others), and cancels the token it gave `run` on shutdown. `run` must
/// then finish its in-flight work and return within the manager's grace
/// period; a runnable that returns an error stops the whole manager.
///
/// The trait is object safe; the manager stores `Box<dyn Runnable>`. For a
/// closure, use [`FnRunnable`]:
///
/// ```
/// use ctrlkit_runtime::manager::{FnRunnable, Runnable};
///
/// let exporter = FnRunnable::new("exporter", |shutdown| async move {
///     shutdown.cancelled().await; // do the work until asked to stop
///     Ok::<_, std::io::Error>(())
/// })
/// .without_leader_election();
/// assert_eq!(exporter.name(), "exporter");
/// assert!(!exporter.needs_leader_election());
/// ```
pub trait Runnable: Send + 'static {
    /// A short name for log lines and errors (e.g. the controller's name).
    fn name(&self) -> &str;

    /// Whether the runnable's own caches are warm. The manager waits for
    /// every runnable to say so (and for the shared informer factory to
    /// sync) before it campaigns for the lease or runs anything, and
    /// `/readyz` fails until then. Called repeatedly before
    /// [`run`](Self::run), never after. Runnables whose informers come
    /// from the manager's factory need not override it (default: `true`).
    fn has_synced(&self) -> bool {
        true
    }

    /// Whether the runnable may only run while this process holds the
    /// leader lease (default: `true`, as for any controller that writes).
    /// A runnable that only reads or exports (metrics, a cache for a
    /// webhook) returns `false` and runs on stand-bys too.
    fn needs_leader_election(&self) -> bool {
        true
    }

    /// Runs until `shutdown` is cancelled, then drains in-flight work and
    /// returns `Ok(())`. An `Err` (or a panic) stops the manager, which
    /// then reports it as
    /// [`ManagerError::Runnable`](super::ManagerError::Runnable) (or
    /// [`RunnablePanicked`](super::ManagerError::RunnablePanicked)).
    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>>;
}

/// A [`Runnable`] made of a closure: `run(shutdown)` returns the future
/// that does the work.
///
/// Wrapping a controller is one line:
/// `FnRunnable::new("replicaset", move |stop| controller.run(reconcile, ctx, stop))`.
pub struct FnRunnable<F> {
    name: String,
    run: F,
    synced: Option<Box<dyn Fn() -> bool + Send>>,
    leader_election: bool,
}

impl<F, Fut, E> FnRunnable<F>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    /// A runnable called `name` that runs `run` (leader elected, synced
    /// from the start).
    pub fn new(name: impl Into<String>, run: F) -> Self {
        Self {
            name: name.into(),
            run,
            synced: None,
            leader_election: true,
        }
    }
}

impl<F> FnRunnable<F> {
    /// Reports `check` as [`Runnable::has_synced`].
    pub fn with_synced(mut self, check: impl Fn() -> bool + Send + 'static) -> Self {
        self.synced = Some(Box::new(check));
        self
    }

    /// Runs on stand-bys too ([`Runnable::needs_leader_election`] is
    /// `false`).
    pub fn without_leader_election(mut self) -> Self {
        self.leader_election = false;
        self
    }
}

impl<F> fmt::Debug for FnRunnable<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnRunnable")
            .field("name", &self.name)
            .field("leader_election", &self.leader_election)
            .finish_non_exhaustive()
    }
}

impl<F, Fut, E> Runnable for FnRunnable<F>
where
    F: FnOnce(CancellationToken) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: Into<BoxError>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn has_synced(&self) -> bool {
        self.synced.as_ref().is_none_or(|check| check())
    }

    fn needs_leader_election(&self) -> bool {
        self.leader_election
    }

    fn run(
        self: Box<Self>,
        shutdown: CancellationToken,
    ) -> BoxFuture<'static, Result<(), BoxError>> {
        (self.run)(shutdown).map(|r| r.map_err(Into::into)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn fn_runnable_runs_its_closure_and_keeps_the_error() {
        let runnable: Box<dyn Runnable> = Box::new(FnRunnable::new("failing", |_stop| async {
            Err::<(), _>(std::io::Error::other("disk on fire"))
        }));
        assert!(runnable.needs_leader_election());
        let err = runnable.run(CancellationToken::new()).await.unwrap_err();
        let io = err.downcast_ref::<std::io::Error>().unwrap();
        assert_eq!(io.to_string(), "disk on fire");
    }

    #[test]
    fn synced_check_is_consulted() {
        let flag = Arc::new(AtomicBool::new(false));
        let check = flag.clone();
        let runnable = FnRunnable::new("r", |_stop| async { Ok::<_, BoxError>(()) })
            .with_synced(move || check.load(Ordering::SeqCst));
        assert!(!runnable.has_synced());
        flag.store(true, Ordering::SeqCst);
        assert!(runnable.has_synced());
    }
}
