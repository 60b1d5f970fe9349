//! Comparing resourceVersions, and tracking the newest one a store reflects.

use std::cmp::Ordering;

/// Two resourceVersions could not be ordered.
///
/// Kubernetes documents resourceVersions as opaque strings. Every API server
/// backed by etcd (and ctrlkit's test cluster) uses decimal integers, which
/// this crate compares numerically; anything else is reported with this
/// error rather than guessed at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "resourceVersions {left:?} and {right:?} are not both unsigned integers and cannot be ordered"
)]
pub struct CompareError {
    /// The left-hand resourceVersion.
    pub left: String,
    /// The right-hand resourceVersion.
    pub right: String,
}

/// Orders two resourceVersions numerically.
///
/// Succeeds only when both parse as `u64` (decimal digits, no sign or
/// spaces), which is the case for etcd-backed API servers. Kubernetes itself
/// compares them the same way in its "compare resource versions" helper.
pub fn compare_resource_versions(left: &str, right: &str) -> Result<Ordering, CompareError> {
    match (parse(left), parse(right)) {
        (Some(l), Some(r)) => Ok(l.cmp(&r)),
        _ => Err(CompareError {
            left: left.to_owned(),
            right: right.to_owned(),
        }),
    }
}

fn parse(rv: &str) -> Option<u64> {
    if rv.is_empty() || !rv.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rv.parse().ok()
}

/// The newest resourceVersion a store reflects.
///
/// Numeric versions only move forward; a non-numeric version replaces
/// whatever was recorded (there is no order to respect), and a later numeric
/// one replaces it again.
#[derive(Debug, Default, Clone)]
pub(crate) struct ObservedVersion {
    latest: Option<String>,
    numeric: Option<u64>,
}

impl ObservedVersion {
    pub(crate) fn observe(&mut self, rv: &str) {
        if rv.is_empty() {
            return;
        }
        match parse(rv) {
            Some(n) => {
                if self.numeric.is_none_or(|cur| n > cur) || self.latest_is_opaque() {
                    self.numeric = Some(n);
                    self.latest = Some(rv.to_owned());
                }
            }
            None => {
                self.numeric = None;
                self.latest = Some(rv.to_owned());
            }
        }
    }

    fn latest_is_opaque(&self) -> bool {
        self.latest.is_some() && self.numeric.is_none()
    }

    pub(crate) fn latest(&self) -> Option<&str> {
        self.latest.as_deref()
    }

    /// `Ok(true)` once a version at least as new as `rv` was observed.
    pub(crate) fn has_observed(&self, rv: &str) -> Result<bool, CompareError> {
        match &self.latest {
            None => Ok(false),
            Some(latest) => compare_resource_versions(latest, rv).map(Ordering::is_ge),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_numerically_not_lexically() {
        assert_eq!(compare_resource_versions("9", "10"), Ok(Ordering::Less));
        assert_eq!(compare_resource_versions("10", "10"), Ok(Ordering::Equal));
        assert!(compare_resource_versions("abc", "10").is_err());
        assert!(compare_resource_versions("+1", "1").is_err());
        assert!(compare_resource_versions("", "1").is_err());
    }

    #[test]
    fn observed_only_moves_forward() {
        let mut o = ObservedVersion::default();
        assert_eq!(o.has_observed("1"), Ok(false));
        o.observe("10");
        o.observe("9");
        assert_eq!(o.latest(), Some("10"));
        assert_eq!(o.has_observed("10"), Ok(true));
        assert_eq!(o.has_observed("11"), Ok(false));
        o.observe("opaque");
        assert_eq!(o.latest(), Some("opaque"));
        assert!(o.has_observed("10").is_err());
        o.observe("3");
        assert_eq!(o.latest(), Some("3"));
    }
}
