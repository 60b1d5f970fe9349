//! The sync function the workers drive.

use std::future::Future;

use crate::{Action, SyncError};

/// A controller's sync function: brings the object behind one key to its
/// desired state (client-go's `syncHandler`, controller-runtime's
/// `Reconciler`).
///
/// Any `Fn(T) -> impl Future<Output = Result<Action, E>>` closure is a
/// handler; implement the trait on your controller type when a named type
/// reads better:
///
/// ```
/// use ctrlkit_worker::{Action, SyncHandler};
///
/// struct Controller;
///
/// impl SyncHandler<String> for Controller {
///     type Error = String;
///
///     async fn sync(&self, key: String) -> Result<Action, String> {
///         // Read the object behind `key` from a cache, act, update status.
///         let _ = key;
///         Ok(Action::done())
///     }
/// }
/// ```
///
/// # What the worker guarantees to a handler
///
/// - `sync` is never running twice at the same time for equal keys (the
///   queue hands a key to one worker at a time), while different keys are
///   synced concurrently, up to the configured concurrency.
/// - A key added while its sync runs is synced again afterwards, so the
///   handler always gets to see the latest change.
/// - A panic in `sync` is contained: it is logged and the key is retried
///   with backoff, like an error.
///
/// # What the worker expects
///
/// - The sync is **level-triggered** and idempotent: it reads the current
///   state and acts on the difference, because a key may be synced again at
///   any time, and a sync may be cancelled at an `.await` (on
///   [timeout](crate::Workers::timeout), or when a
///   [grace period](crate::Workers::grace_period) ends) and retried later.
/// - It does not block the thread for long: it runs on the tokio runtime.
pub trait SyncHandler<T>: Send + Sync + 'static {
    /// The error a failed sync returns; [`SyncError::is_terminal`] decides
    /// whether it is retried.
    type Error: SyncError;

    /// Syncs the object behind `key`.
    ///
    /// `Ok(action)` tells the worker whether to look at the key again (see
    /// [`Action`]); `Err(e)` makes it retry the key with backoff, unless `e`
    /// is terminal.
    fn sync(&self, key: T) -> impl Future<Output = Result<Action, Self::Error>> + Send;
}

impl<T, F, Fut, E> SyncHandler<T> for F
where
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send,
    E: SyncError,
{
    type Error = E;

    fn sync(&self, key: T) -> impl Future<Output = Result<Action, E>> + Send {
        self(key)
    }
}
