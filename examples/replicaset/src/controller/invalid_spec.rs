//! Owners whose spec can never converge (an invalid or empty selector, a
//! selector that does not select the template's pods): reported on the
//! owner itself, so `kubectl describe` shows why nothing happens.
//!
//! Upstream only logs an invalid selector. Here the sync also records a
//! Warning event and sets the `ReplicaFailure` condition with the problem as
//! its reason (`InvalidSelector`, `EmptySelector`, `SelectorMismatch`) and
//! the error as its message. The condition is replaced or removed by the
//! first sync after the spec is fixed (see
//! [`calculate_status`](super::calculate_status)).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::Shared;
use crate::Error;
use crate::owner::{REPLICA_FAILURE, ReplicaCondition, ReplicaOwner};

/// Reason of the `ReplicaFailure` condition (and of the Warning event) when
/// the owner's selector cannot be compiled, e.g. an unknown operator.
pub const INVALID_SELECTOR_REASON: &str = "InvalidSelector";
/// Reason of the `ReplicaFailure` condition (and of the Warning event) when
/// the owner's selector is empty and would select every pod.
pub const EMPTY_SELECTOR_REASON: &str = "EmptySelector";
/// Reason of the `ReplicaFailure` condition (and of the Warning event) when
/// the owner's selector does not match its template's labels.
pub const SELECTOR_MISMATCH_REASON: &str = "SelectorMismatch";

/// Whether a `ReplicaFailure` reason says the spec is invalid (rather than
/// that creating or deleting pods failed).
pub(crate) fn is_invalid_spec_reason(reason: Option<&str>) -> bool {
    matches!(
        reason,
        Some(INVALID_SELECTOR_REASON | EMPTY_SELECTOR_REASON | SELECTOR_MISMATCH_REASON)
    )
}

impl<O: ReplicaOwner> Shared<O> {
    /// Sets the `ReplicaFailure` condition with `reason` and `error`'s
    /// message on the owner's status, keeping its counters, and records the
    /// observed generation.
    ///
    /// Writes nothing when the same condition is already there, so an owner
    /// that stays invalid is written once, not on every sync. A failed write
    /// is only logged: the sync fails with `error` anyway.
    pub(crate) async fn report_invalid_spec(&self, owner: &Arc<O>, reason: &str, error: &Error) {
        let mut status = owner.replica_status();
        status.set_condition(ReplicaCondition {
            type_: REPLICA_FAILURE.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(error.to_string()),
            last_transition_time: Some(Time(Timestamp::now())),
        });
        if let Err(write_error) = self.update_status(Arc::clone(owner), status).await {
            tracing::debug!(
                key = super::key_of(owner.as_ref()),
                error = %write_error,
                "could not set the ReplicaFailure condition of an invalid owner"
            );
        }
    }
}
