//! Errors of a claim pass and their aggregation.

use std::fmt;
use std::sync::Arc;

use crate::{ApiErrorClass, CanAdoptError};

/// What went wrong while claiming one object. `E` is the patch error type
/// of the [`DependentControl`](crate::DependentControl) in use.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClaimError<E> {
    /// Adoption was refused by the [`CanAdopt`](crate::CanAdopt) check (the
    /// owner is gone, was re-created or is being deleted). No patch was
    /// sent. The cause is shared: the check runs once per pass and every
    /// object that needed adopting reports the same verdict.
    #[error("can't adopt {namespace}/{name} ({uid}): {source}")]
    CannotAdopt {
        /// The dependent's namespace.
        namespace: String,
        /// The dependent's name.
        name: String,
        /// The dependent's UID.
        uid: String,
        /// Why adoption was refused.
        #[source]
        source: Arc<CanAdoptError>,
    },
    /// The dependent has no UID, so no patch can carry the UID precondition
    /// that protects a re-created namesake. Only objects read from the API
    /// server can be adopted or released.
    #[error("can't {action} {namespace}/{name}: it has no uid")]
    MissingUid {
        /// What was to be done.
        action: ClaimAction,
        /// The dependent's namespace.
        namespace: String,
        /// The dependent's name.
        name: String,
    },
    /// The adoption patch failed.
    #[error("adopting {namespace}/{name} failed: {source}")]
    Adopt {
        /// The dependent's namespace.
        namespace: String,
        /// The dependent's name.
        name: String,
        /// The patch error.
        #[source]
        source: E,
    },
    /// The release patch failed.
    #[error("releasing {namespace}/{name} failed: {source}")]
    Release {
        /// The dependent's namespace.
        namespace: String,
        /// The dependent's name.
        name: String,
        /// The patch error.
        #[source]
        source: E,
    },
}

impl<E: ApiErrorClass> ClaimError<E> {
    /// Whether the patch failed because the dependent no longer exists.
    pub fn is_not_found(&self) -> bool {
        match self {
            ClaimError::Adopt { source, .. } | ClaimError::Release { source, .. } => {
                source.is_not_found()
            }
            _ => false,
        }
    }
}

/// The write a claim decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimAction {
    /// Add our controller reference to an orphan.
    Adopt,
    /// Remove our controller reference from an object that no longer matches.
    Release,
}

impl fmt::Display for ClaimAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClaimAction::Adopt => "adopt",
            ClaimAction::Release => "release",
        })
    }
}

/// Every error of one claim pass, in input order.
///
/// Displays like upstream's aggregate error: a single error as itself,
/// several as `[first, second, …]` with repeated messages shown once.
#[derive(Debug)]
pub struct ClaimErrors<E>(pub Vec<ClaimError<E>>);

impl<E> ClaimErrors<E> {
    /// The individual errors, in input order.
    pub fn errors(&self) -> &[ClaimError<E>] {
        &self.0
    }
}

impl<E: fmt::Display> fmt::Display for ClaimErrors<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen = Vec::new();
        for e in &self.0 {
            let msg = e.to_string();
            if !seen.contains(&msg) {
                seen.push(msg);
            }
        }
        match seen.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for ClaimErrors<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .first()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// The result of a claim pass: the objects now controlled by the owner and
/// the errors met on the way.
///
/// Like upstream, a failure on one object does not stop the pass: that
/// object is left out of `claimed` and the others are still processed.
/// Controllers usually treat any error as "retry the sync later" (use
/// [`ClaimOutcome::into_result`]).
#[derive(Debug)]
#[must_use = "a claim pass may have failed; check `errors` or call `into_result`"]
pub struct ClaimOutcome<P, E> {
    /// The objects the owner controls after this pass, in input order:
    /// those it already controlled and that still match, plus those adopted.
    pub claimed: Vec<P>,
    /// One entry per object whose adoption or release failed, in input order.
    pub errors: Vec<ClaimError<E>>,
}

impl<P, E> ClaimOutcome<P, E> {
    /// Whether every decided adoption and release succeeded (or needed no
    /// action).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok(claimed)` if there were no errors, else all errors together (the
    /// claimed list is dropped, as upstream's callers do).
    ///
    /// # Errors
    /// [`ClaimErrors`] with every error of the pass.
    pub fn into_result(self) -> Result<Vec<P>, ClaimErrors<E>> {
        if self.errors.is_empty() {
            Ok(self.claimed)
        } else {
            Err(ClaimErrors(self.errors))
        }
    }
}
