//! The status fields shared by ReplicaSets and ReplicationControllers, in
//! one normalised form.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The only condition type the controller manages: creating or deleting
/// pods failed.
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

/// A status condition (`ReplicaSetCondition` / `ReplicationControllerCondition`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicaCondition {
    /// The condition type, e.g. [`REPLICA_FAILURE`].
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason, e.g. `FailedCreate`.
    pub reason: Option<String>,
    /// Human-readable message.
    pub message: Option<String>,
    /// When the condition last changed status.
    pub last_transition_time: Option<Time>,
}

/// The status of a replica owner. Absent counters read as 0, an absent
/// condition list as empty.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReplicaStatus {
    /// Active pods (not finished, not being deleted) the owner controls.
    pub replicas: i32,
    /// Of those, pods whose labels include all of the template's labels.
    pub fully_labeled_replicas: i32,
    /// Of those, pods that are ready.
    pub ready_replicas: i32,
    /// Of those, pods ready for at least `minReadySeconds`.
    pub available_replicas: i32,
    /// Pods being deleted that the owner still controls; `None` when not
    /// reported (ReplicationControllers never report it).
    pub terminating_replicas: Option<i32>,
    /// The owner generation this status was computed for.
    pub observed_generation: i64,
    /// The conditions, in order.
    pub conditions: Vec<ReplicaCondition>,
}

impl ReplicaStatus {
    /// The first condition of `type_`, if any.
    pub fn condition(&self, type_: &str) -> Option<&ReplicaCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Sets `condition`: a no-op if a condition of its type with the same
    /// status and reason exists; otherwise any condition of that type is
    /// removed and `condition` appended.
    pub fn set_condition(&mut self, condition: ReplicaCondition) {
        if let Some(existing) = self.condition(&condition.type_)
            && existing.status == condition.status
            && existing.reason == condition.reason
        {
            return;
        }
        self.remove_condition(&condition.type_.clone());
        self.conditions.push(condition);
    }

    /// Removes every condition of `type_`.
    pub fn remove_condition(&mut self, type_: &str) {
        self.conditions.retain(|c| c.type_ != type_);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, reason: &str) -> ReplicaCondition {
        ReplicaCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            ..Default::default()
        }
    }

    #[test]
    fn set_condition_appends_replaces_or_keeps() {
        let mut status = ReplicaStatus::default();
        status.set_condition(cond(REPLICA_FAILURE, "OtherFailure"));
        assert_eq!(status.conditions, [cond(REPLICA_FAILURE, "OtherFailure")]);

        // A different type is appended after the existing one.
        let mut status = ReplicaStatus {
            conditions: vec![cond("ImagePullBackOff", "NonExistentImage")],
            ..Default::default()
        };
        status.set_condition(cond(REPLICA_FAILURE, "OtherFailure"));
        assert_eq!(status.conditions.len(), 2);
        assert_eq!(status.conditions[1].type_, REPLICA_FAILURE);

        // Same type, another reason: replaced.
        let mut status = ReplicaStatus {
            conditions: vec![cond(REPLICA_FAILURE, "OtherFailure")],
            ..Default::default()
        };
        status.set_condition(cond(REPLICA_FAILURE, "AnotherFailure"));
        assert_eq!(status.conditions, [cond(REPLICA_FAILURE, "AnotherFailure")]);

        // Same type, status and reason: kept as it was (message untouched).
        let mut with_message = cond(REPLICA_FAILURE, "AnotherFailure");
        with_message.message = Some("new".into());
        status.set_condition(with_message);
        assert_eq!(status.conditions[0].message, None);
    }

    #[test]
    fn remove_condition_removes_only_that_type() {
        let mut status = ReplicaStatus {
            conditions: vec![cond(REPLICA_FAILURE, "OtherFailure")],
            ..Default::default()
        };
        status.remove_condition("ImagePullBackOff");
        assert_eq!(status.conditions.len(), 1);
        status.remove_condition(REPLICA_FAILURE);
        assert!(status.conditions.is_empty());
        assert!(status.condition(REPLICA_FAILURE).is_none());
    }
}
