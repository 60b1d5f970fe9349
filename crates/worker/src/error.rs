//! How the worker tells a retryable sync error from a terminal one.

use std::convert::Infallible;
use std::fmt;

/// An error a sync can return.
///
/// The worker logs it (with [`Display`](fmt::Display)) and then asks
/// [`is_terminal`](Self::is_terminal) what to do:
///
/// - **retryable** (the default): the key is queued again after the rate
///   limiter's delay, which grows with every consecutive failure;
/// - **terminal**: retrying cannot help (an invalid spec, a permanent
///   refusal): the key's backoff is reset and it is *not* queued again. It is
///   synced again only when something adds it (for example the next change
///   of the object). Like controller-runtime's `reconcile.TerminalError`.
///
/// Implement it for your error type, usually in one line:
///
/// ```
/// # use ctrlkit_worker::SyncError;
/// #[derive(Debug)]
/// enum MyError {
///     Api(String),
///     InvalidSpec(String),
/// }
/// # impl std::fmt::Display for MyError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { write!(f, "{self:?}") }
/// # }
///
/// impl SyncError for MyError {
///     fn is_terminal(&self) -> bool {
///         matches!(self, MyError::InvalidSpec(_))
///     }
/// }
/// ```
///
/// For an error type you do not own (`kube::Error`, `anyhow::Error`, …) use
/// the [`Failure`] wrapper instead. `String`, `&'static str`,
/// `Box<dyn Error + Send + Sync>` and [`Infallible`] implement the trait as
/// always retryable.
pub trait SyncError: fmt::Display + Send + 'static {
    /// Whether retrying is pointless. Defaults to `false`.
    fn is_terminal(&self) -> bool {
        false
    }
}

impl SyncError for String {}
impl SyncError for &'static str {}
impl SyncError for Box<dyn std::error::Error + Send + Sync> {}
impl SyncError for Infallible {}

/// Wraps any displayable error and says whether it is retryable or terminal.
///
/// `Failure<E>` converts from `E` (as [`Failure::Retry`]), so `?` works in a
/// sync returning `Result<Action, Failure<E>>`; return
/// `Err(Failure::Terminal(e))` for an error that must not be retried.
///
/// ```
/// use ctrlkit_worker::{Action, Failure, SyncError};
///
/// // Stands in for an API call that can fail with a transient error.
/// fn fetch_replicas(raw: &str) -> Result<i32, String> {
///     raw.parse().map_err(|e| format!("cannot read replicas: {e}"))
/// }
///
/// fn check(raw: &str) -> Result<Action, Failure<String>> {
///     let replicas = fetch_replicas(raw)?; // retried with backoff
///     if replicas < 0 {
///         // The user's mistake: retrying cannot fix it.
///         return Err(Failure::Terminal(format!("negative replicas {replicas}")));
///     }
///     Ok(Action::done())
/// }
///
/// assert!(!check("x").unwrap_err().is_terminal());
/// assert!(check("-3").unwrap_err().is_terminal());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<E> {
    /// Retry the key with backoff.
    Retry(E),
    /// Do not retry the key.
    Terminal(E),
}

impl<E> Failure<E> {
    /// The wrapped error.
    pub fn into_inner(self) -> E {
        match self {
            Self::Retry(error) | Self::Terminal(error) => error,
        }
    }

    /// A reference to the wrapped error.
    pub fn inner(&self) -> &E {
        match self {
            Self::Retry(error) | Self::Terminal(error) => error,
        }
    }
}

impl<E> From<E> for Failure<E> {
    fn from(error: E) -> Self {
        Self::Retry(error)
    }
}

impl<E: fmt::Display> fmt::Display for Failure<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner().fmt(f)
    }
}

impl<E> SyncError for Failure<E>
where
    E: fmt::Display + Send + 'static,
{
    fn is_terminal(&self) -> bool {
        matches!(self, Self::Terminal(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_errors_are_retryable() {
        assert!(!"boom".is_terminal());
        assert!(!String::from("boom").is_terminal());
        let boxed: Box<dyn std::error::Error + Send + Sync> = "boom".into();
        assert!(!boxed.is_terminal());
    }

    #[test]
    fn failure_classifies_and_displays_its_error() {
        let retry: Failure<&str> = "conflict".into();
        assert!(!retry.is_terminal());
        let terminal = Failure::Terminal("invalid selector");
        assert!(terminal.is_terminal());
        assert_eq!(terminal.to_string(), "invalid selector");
        assert_eq!(terminal.into_inner(), "invalid selector");
    }
}
