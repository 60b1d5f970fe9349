//! `ReplicaSet` (apps/v1) as a [`ReplicaOwner`].

use ctrlkit_refmanager::{Selector, SelectorError};
use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition, ReplicaSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::{ReplicaCondition, ReplicaOwner, ReplicaStatus};
use crate::compat;

impl ReplicaOwner for ReplicaSet {
    const CONTROLLER_NAME: &'static str = "replicaset-controller";
    const QUEUE_NAME: &'static str = "replicaset";
    const HAS_TERMINATING_REPLICAS: bool = true;
    const RANKS_BY_RELATED_OWNERS: bool = true;

    fn selector(&self) -> Result<Selector, SelectorError> {
        match compat::replica_set_spec(self) {
            Some(spec) => Selector::from_label_selector(&spec.selector),
            None => Ok(Selector::nothing()),
        }
    }

    fn spec_replicas(&self) -> Option<i32> {
        compat::replica_set_spec(self).and_then(|s| s.replicas)
    }

    fn min_ready_seconds(&self) -> i32 {
        compat::replica_set_spec(self)
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0)
    }

    fn template(&self) -> Option<&PodTemplateSpec> {
        compat::replica_set_spec(self).and_then(|s| s.template.as_ref())
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
            terminating_replicas: s.terminating_replicas,
            observed_generation: s.observed_generation.unwrap_or(0),
            conditions: s
                .conditions
                .iter()
                .flatten()
                .map(|c| {
                    let (type_, status) = compat::condition_type_status(c);
                    ReplicaCondition {
                        type_,
                        status,
                        reason: c.reason.clone(),
                        message: c.message.clone(),
                        last_transition_time: c.last_transition_time.clone(),
                    }
                })
                .collect(),
        }
    }

    fn same_spec(&self, other: &Self) -> bool {
        compat::replica_set_spec(self) == compat::replica_set_spec(other)
    }

    fn set_replica_status(&mut self, status: ReplicaStatus) {
        let conditions: Vec<ReplicaSetCondition> = status
            .conditions
            .into_iter()
            .map(|c| ReplicaSetCondition {
                reason: c.reason,
                message: c.message,
                last_transition_time: c.last_transition_time,
                ..compat::new_condition(c.type_, c.status)
            })
            .collect();
        self.status = Some(ReplicaSetStatus {
            replicas: status.replicas,
            fully_labeled_replicas: Some(status.fully_labeled_replicas),
            ready_replicas: Some(status.ready_replicas),
            available_replicas: Some(status.available_replicas),
            terminating_replicas: status.terminating_replicas,
            observed_generation: Some(status.observed_generation),
            conditions: (!conditions.is_empty()).then_some(conditions),
        });
    }
}
