//! `ReplicationController` (v1) as a [`ReplicaOwner`].

use ctrlkit_refmanager::{Selector, SelectorError};
use k8s_openapi::api::core::v1::{
    PodTemplateSpec, ReplicationController, ReplicationControllerCondition,
    ReplicationControllerStatus,
};

use super::{ReplicaCondition, ReplicaOwner, ReplicaStatus};

impl ReplicaOwner for ReplicationController {
    const CONTROLLER_NAME: &'static str = "replication-controller";
    const QUEUE_NAME: &'static str = "replicationmanager";
    const HAS_TERMINATING_REPLICAS: bool = false;
    const RANKS_BY_RELATED_OWNERS: bool = false;

    /// The plain equality selector. An empty selector is what the API server
    /// replaces with the template's labels on create, so it is read that way
    /// here too; with no template labels either it matches nothing.
    fn selector(&self) -> Result<Selector, SelectorError> {
        let spec = self.spec.as_ref();
        match spec.and_then(|s| s.selector.as_ref()) {
            Some(map) if !map.is_empty() => Selector::from_map(map),
            _ => match self
                .template()
                .and_then(|t| t.metadata.as_ref()?.labels.as_ref())
            {
                Some(labels) => Selector::from_map(labels),
                None => Ok(Selector::nothing()),
            },
        }
    }

    fn spec_replicas(&self) -> Option<i32> {
        self.spec.as_ref().and_then(|s| s.replicas)
    }

    fn min_ready_seconds(&self) -> i32 {
        self.spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        self.spec.as_ref().and_then(|s| s.template.as_ref())
    }

    fn replica_status(&self) -> ReplicaStatus {
        let Some(s) = &self.status else {
            return ReplicaStatus::default();
        };
        ReplicaStatus {
            replicas: s.replicas,
            fully_labeled_replicas: s.fully_labeled_replicas.unwrap_or(0),
            ready_replicas: s.ready_replicas.unwrap_or(0),
            available_replicas: s.available_replicas.unwrap_or(0),
            terminating_replicas: None,
            observed_generation: s.observed_generation.unwrap_or(0),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| ReplicaCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                    last_transition_time: c.last_transition_time.clone(),
                })
                .collect(),
        }
    }

    fn same_spec(&self, other: &Self) -> bool {
        self.spec == other.spec
    }

    fn set_replica_status(&mut self, status: ReplicaStatus) {
        let conditions: Vec<ReplicationControllerCondition> = status
            .conditions
            .into_iter()
            .map(|c| ReplicationControllerCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
                last_transition_time: c.last_transition_time,
            })
            .collect();
        self.status = Some(ReplicationControllerStatus {
            replicas: status.replicas,
            fully_labeled_replicas: Some(status.fully_labeled_replicas),
            ready_replicas: Some(status.ready_replicas),
            available_replicas: Some(status.available_replicas),
            observed_generation: Some(status.observed_generation),
            conditions: (!conditions.is_empty()).then_some(conditions),
        });
    }
}
