//! Which owners a pod concerns, and the pods one sync looks at: those the
//! owner controls, plus the orphans of its namespace it could adopt.

use std::sync::Arc;

use ctrlkit_informer::{ObjectKey, Store, controller_ref};
use ctrlkit_podcontrol::pod::{PHASE_FAILED, is_pod_ready, is_pod_terminal, pod_ready_time};
use ctrlkit_refmanager::Selector;
use k8s_openapi::api::core::v1::Pod;

use super::Shared;
use crate::Error;
use crate::owner::ReplicaOwner;

/// Every owner in the pod's namespace whose selector matches the pod's
/// labels (upstream's `GetPodReplicaSets`): the owners an orphan is offered
/// to. Owners with an invalid or empty selector never match; a pod without
/// labels matches nothing. More than one is a user error and logged as a
/// warning.
pub fn owners_selecting<O: ReplicaOwner>(owners: &Store<O>, pod: &Pod) -> Vec<Arc<O>> {
    let Some(labels) = pod.metadata.labels.as_ref().filter(|l| !l.is_empty()) else {
        return Vec::new();
    };
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let matching: Vec<Arc<O>> = owners
        .list_namespace(namespace)
        .into_iter()
        .filter(|owner| match owner.selector() {
            Ok(s) => !s.is_everything() && !s.is_nothing() && s.matches(labels),
            Err(_) => false,
        })
        .collect();
    if matching.len() > 1 {
        tracing::warn!(
            kind = O::kind(&()).as_ref(),
            namespace,
            ?labels,
            owners = matching.len(),
            "user error: more than one owner is selecting pods with these labels"
        );
    }
    matching
}

/// The keys of the owners an orphan is offered to for adoption.
pub(super) fn orphan_owner_keys<O: ReplicaOwner>(pod: &Pod, owners: &Store<O>) -> Vec<ObjectKey> {
    owners_selecting(owners, pod)
        .iter()
        .map(|owner| ObjectKey::from_object(owner.as_ref()))
        .collect()
}

/// Whether an update of a pod (whose controller did not change and which
/// is not being deleted: the runtime always passes those on) should wake
/// its owner. Only a change the next sync would act on does:
///
/// - its labels (claim, adoption, `fullyLabeledReplicas`) or owner
///   references (claim);
/// - whether it is terminal (`Succeeded`/`Failed`: no longer active, so
///   `replicas` and the churn guard), and, for a failed pod, the reason the
///   churn guard matches;
/// - whether it is ready, and when it became ready (`readyReplicas`,
///   `availableReplicas` after `minReadySeconds`).
///
/// Upstream's `updatePod` wakes the owner on every new resourceVersion.
/// Skipped here are the updates that only change what ranks pods for a
/// scale-down (node, restart counts, deletion-cost annotation, phase
/// `Pending` → `Running`), or nothing the controller reads (images,
/// conditions other than `Ready`, IPs): the ranking is computed from the
/// cache by the sync that deletes, which the spec change or the pod count
/// starts, so a change of rank alone never needs one. A resync that
/// re-announces an unchanged pod (same resourceVersion) is skipped too, as
/// upstream. For an orphan only its labels matter (who may adopt it).
pub(super) fn pod_update_matters(old: &Pod, new: &Pod) -> bool {
    if old.metadata.resource_version == new.metadata.resource_version {
        return false;
    }
    if old.metadata.labels != new.metadata.labels {
        return true;
    }
    if controller_ref(&new.metadata).is_none() {
        return false;
    }
    old.metadata.owner_references != new.metadata.owner_references
        || is_pod_terminal(old) != is_pod_terminal(new)
        || failure_reason(old) != failure_reason(new)
        || is_pod_ready(old) != is_pod_ready(new)
        || pod_ready_time(old) != pod_ready_time(new)
}

/// The reason of a failed pod (what the churn guard matches), `None` for
/// any other phase.
fn failure_reason(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    (status.phase.as_deref() == Some(PHASE_FAILED))
        .then_some(status.reason.as_deref())
        .flatten()
}

impl<O: ReplicaOwner> Shared<O> {
    /// The pods controlled by the owner with UID `uid` in `namespace`, then
    /// the namespace's orphans that carry every label `selector` requires by
    /// equality.
    ///
    /// Leaving out the other orphans changes nothing: the selector cannot
    /// match them, so the claim step would skip them. Reading them from the
    /// orphan label index means a sync visits only the orphans with the
    /// least common of those labels, so unrelated orphans in the namespace
    /// do not slow it down. A selector with only set-based requirements
    /// (`In` with several values, `NotIn`, `Exists`, `DoesNotExist`)
    /// narrows nothing: every orphan of the namespace is returned, and the
    /// claim step filters them as before.
    pub(super) fn candidate_pods(
        &self,
        namespace: &str,
        uid: &str,
        selector: &Selector,
    ) -> Result<Vec<Arc<Pod>>, Error> {
        let labels: Vec<(&str, &str)> = selector.equality_requirements().collect();
        Ok(self
            .pods
            .by_controller_with_labelled_orphans(namespace, uid, &labels)?)
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use ctrlkit_informer::Informer;
    use ctrlkit_podcontrol::FakePodControl;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::runtime::watcher::Event;
    use serde_json::json;

    use super::*;
    use crate::{ControllerOptions, OwnerClient, ReplicaSetController};

    /// Never called: `candidate_pods` reads only the caches.
    struct NoOwners;

    #[async_trait]
    impl OwnerClient<ReplicaSet> for NoOwners {
        async fn get(&self, _: &str, _: &str) -> Result<Option<ReplicaSet>, kube::Error> {
            Ok(None)
        }

        async fn update_status(&self, rs: &ReplicaSet) -> Result<ReplicaSet, kube::Error> {
            Ok(rs.clone())
        }
    }

    fn pod(ns: &str, name: &str, labels: serde_json::Value, owner_uid: Option<&str>) -> Pod {
        let mut metadata = json!({"name": name, "namespace": ns, "uid": name, "labels": labels});
        if let Some(uid) = owner_uid {
            metadata["ownerReferences"] = json!([{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": uid,
                "controller": true
            }]);
        }
        serde_json::from_value(json!({ "metadata": metadata })).unwrap()
    }

    fn controller(pods: &[Pod]) -> ReplicaSetController {
        let informer = Informer::<Pod>::manual().build();
        for p in pods {
            informer.apply_event(Event::Apply(p.clone()));
        }
        ReplicaSetController::from_parts(
            informer,
            Informer::<ReplicaSet>::manual().build(),
            Arc::new(FakePodControl::new()),
            Arc::new(NoOwners),
            ControllerOptions::default(),
        )
        .unwrap()
    }

    fn names(pods: Vec<Arc<Pod>>) -> Vec<String> {
        let mut names: Vec<_> = pods
            .iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    }

    fn selector(value: serde_json::Value) -> Selector {
        let selector: LabelSelector = serde_json::from_value(value).unwrap();
        Selector::from_label_selector(&selector).unwrap()
    }

    fn crowd() -> Vec<Pod> {
        vec![
            pod("ns", "mine", json!({"app": "web"}), Some("rs-uid")),
            pod("ns", "theirs", json!({"app": "web"}), Some("other-uid")),
            pod("ns", "match", json!({"app": "web", "tier": "fe"}), None),
            pod("ns", "half", json!({"app": "web"}), None),
            pod("ns", "other", json!({"app": "db", "tier": "fe"}), None),
            pod(
                "elsewhere",
                "far",
                json!({"app": "web", "tier": "fe"}),
                None,
            ),
        ]
    }

    #[test]
    fn equality_selectors_see_only_the_orphans_carrying_their_labels() {
        let c = controller(&crowd());
        let s = selector(json!({"matchLabels": {"app": "web", "tier": "fe"}}));
        let got = c.shared.candidate_pods("ns", "rs-uid", &s).unwrap();
        // Owned pods come first, as with `by_controller`.
        assert_eq!(got[0].metadata.name.as_deref(), Some("mine"));
        assert_eq!(names(got), ["match", "mine"]);

        let s = selector(json!({"matchLabels": {"app": "web"}}));
        let got = c.shared.candidate_pods("ns", "rs-uid", &s).unwrap();
        assert_eq!(names(got), ["half", "match", "mine"]);
    }

    #[test]
    fn set_based_selectors_see_every_orphan_of_the_namespace() {
        let c = controller(&crowd());
        let s = selector(json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "api"]}
        ]}));
        let got = c.shared.candidate_pods("ns", "rs-uid", &s).unwrap();
        assert_eq!(names(got), ["half", "match", "mine", "other"]);
        // Mixed: the equality part narrows, the set-based part is left to
        // the claim step.
        let s = selector(json!({
            "matchLabels": {"tier": "fe"},
            "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]
        }));
        let got = c.shared.candidate_pods("ns", "rs-uid", &s).unwrap();
        assert_eq!(names(got), ["match", "mine", "other"]);
    }

    #[test]
    fn the_index_follows_adoption_and_release() {
        let informer = Informer::<Pod>::manual().build();
        let c = ReplicaSetController::from_parts(
            informer.clone(),
            Informer::<ReplicaSet>::manual().build(),
            Arc::new(FakePodControl::new()),
            Arc::new(NoOwners),
            ControllerOptions::default(),
        )
        .unwrap();
        let s = selector(json!({"matchLabels": {"app": "web"}}));
        informer.apply_event(Event::Apply(pod("ns", "p", json!({"app": "web"}), None)));
        assert_eq!(
            names(c.shared.candidate_pods("ns", "rs-uid", &s).unwrap()),
            ["p"]
        );
        informer.apply_event(Event::Apply(pod(
            "ns",
            "p",
            json!({"app": "web"}),
            Some("other-uid"),
        )));
        assert!(
            c.shared
                .candidate_pods("ns", "rs-uid", &s)
                .unwrap()
                .is_empty()
        );
        informer.apply_event(Event::Apply(pod("ns", "p", json!({"app": "web"}), None)));
        assert_eq!(
            names(c.shared.candidate_pods("ns", "rs-uid", &s).unwrap()),
            ["p"]
        );
    }
}
