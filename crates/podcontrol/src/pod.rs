//! Questions controllers ask about a single pod: is it active, ready,
//! available, terminating; when did it become ready; how often did it restart.

use std::borrow::Borrow;
use std::collections::HashSet;

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::core::{Selector, SelectorExt};

/// Pod phase: accepted, but not all containers are running yet.
pub const PHASE_PENDING: &str = "Pending";
/// Pod phase: bound to a node and at least one container is running.
pub const PHASE_RUNNING: &str = "Running";
/// Pod phase: every container terminated successfully and will not restart.
pub const PHASE_SUCCEEDED: &str = "Succeeded";
/// Pod phase: every container terminated and at least one failed.
pub const PHASE_FAILED: &str = "Failed";
/// Pod phase: the pod's state could not be obtained.
pub const PHASE_UNKNOWN: &str = "Unknown";

/// The pod's phase, `""` when it has none.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

/// Whether the pod has finished for good: phase `Succeeded` or `Failed`.
pub fn is_pod_terminal(pod: &Pod) -> bool {
    matches!(pod_phase(pod), PHASE_SUCCEEDED | PHASE_FAILED)
}

/// Whether the pod counts towards a controller's replicas: it is not
/// terminal and is not being deleted (no `deletionTimestamp`).
pub fn is_pod_active(pod: &Pod) -> bool {
    !is_pod_terminal(pod) && pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod is shutting down: it is being deleted but has not reached
/// a terminal phase yet.
pub fn is_pod_terminating(pod: &Pod) -> bool {
    !is_pod_terminal(pod) && pod.metadata.deletion_timestamp.is_some()
}

/// The pod's `Ready` condition, if it reports one.
pub fn pod_ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// Whether the pod's `Ready` condition is `True`.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod_ready_condition(pod).is_some_and(|c| c.status == "True")
}

/// When a ready pod last became ready (its `Ready` condition's
/// `lastTransitionTime`).
///
/// `None` when the pod is not ready or does not say when it became ready;
/// upstream uses the zero time for both.
pub fn pod_ready_time(pod: &Pod) -> Option<Timestamp> {
    pod_ready_condition(pod)
        .filter(|c| c.status == "True")
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0)
}

/// Whether the pod is available: ready, and ready for at least
/// `min_ready_seconds` at `now`.
///
/// With `min_ready_seconds <= 0` readiness alone is enough. Otherwise a pod
/// that does not say when it became ready is not available, and one that
/// became ready exactly `min_ready_seconds` ago is.
pub fn is_pod_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_pod_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    pod_ready_time(pod).is_some_and(|ready| add_secs(ready, min_ready_seconds) <= now)
}

/// `t + seconds`, saturating at the ends of the representable range.
pub(crate) fn add_secs(t: Timestamp, seconds: i32) -> Timestamp {
    let d = SignedDuration::from_secs(i64::from(seconds));
    t.checked_add(d).unwrap_or(if seconds < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// The highest restart counts of a pod's containers, as used to pick pods to
/// delete (a pod whose containers keep crashing goes first).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ContainerRestarts {
    /// The highest `restartCount` among the regular containers.
    pub regular: i32,
    /// The highest `restartCount` among the sidecars: init containers whose
    /// spec says `restartPolicy: Always`.
    pub sidecar: i32,
}

/// The highest restart counts of the pod's regular containers and sidecars
/// (0 when there are none).
pub fn max_container_restarts(pod: &Pod) -> ContainerRestarts {
    let Some(status) = pod.status.as_ref() else {
        return ContainerRestarts::default();
    };
    let regular = status
        .container_statuses
        .iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    let sidecars: HashSet<&str> = pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .map(|c| c.name.as_str())
        .collect();
    let sidecar = status
        .init_container_statuses
        .iter()
        .flatten()
        .filter(|c| sidecars.contains(c.name.as_str()))
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
        .max(0);
    ContainerRestarts { regular, sidecar }
}

/// The pods that are [active](is_pod_active), in their input order.
///
/// Works on anything that borrows as a pod: `&Pod`, `Pod`, `Arc<Pod>`.
pub fn filter_active_pods<P: Borrow<Pod>>(pods: impl IntoIterator<Item = P>) -> Vec<P> {
    pods.into_iter()
        .filter(|p| is_pod_active(p.borrow()))
        .collect()
}

/// The pods that are [terminating](is_pod_terminating), in their input order.
pub fn filter_terminating_pods<P: Borrow<Pod>>(pods: impl IntoIterator<Item = P>) -> Vec<P> {
    pods.into_iter()
        .filter(|p| is_pod_terminating(p.borrow()))
        .collect()
}

/// How many of the pods are [terminating](is_pod_terminating).
pub fn count_terminating_pods<P: Borrow<Pod>>(pods: impl IntoIterator<Item = P>) -> usize {
    pods.into_iter()
        .filter(|p| is_pod_terminating(p.borrow()))
        .count()
}

/// The owner reference marked `controller: true`, if the pod has one
/// ([`ctrlkit_informer::controller_ref`] of its metadata).
pub fn controller_of(pod: &Pod) -> Option<&OwnerReference> {
    ctrlkit_informer::controller_ref(&pod.metadata)
}

/// Whether the pod's controller reference points at the object with UID
/// `owner_uid` ([`ctrlkit_informer::is_controlled_by`] of its metadata: an
/// empty `owner_uid` never matches).
pub fn is_controlled_by(pod: &Pod, owner_uid: &str) -> bool {
    ctrlkit_informer::is_controlled_by(&pod.metadata, owner_uid)
}

/// The pods controlled by the owner with UID `owner_uid` whose labels also
/// match `selector`, in their input order. Used to count an owner's
/// terminating replicas.
pub fn filter_claimed_pods<P: Borrow<Pod>>(
    owner_uid: &str,
    selector: &Selector,
    pods: impl IntoIterator<Item = P>,
) -> Vec<P> {
    let empty = Default::default();
    pods.into_iter()
        .filter(|p| {
            let pod = p.borrow();
            is_controlled_by(pod, owner_uid)
                && selector.matches(pod.metadata.labels.as_ref().unwrap_or(&empty))
        })
        .collect()
}

/// The pod's `namespace/name` key, as used by workqueues and expectations.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// The name of the pod index keyed by [`pod_controller_index_key`], as
/// upstream's controllers call it.
pub const POD_CONTROLLER_INDEX: &str = "podController";

/// The key under which a pod is indexed by its controller:
/// `<namespace>/<kind>/<name>/<uid>` of the controlling owner reference, or
/// just `<namespace>` for a pod without a controller (an orphan).
///
/// Looking up an owner's key plus its namespace's key yields the owner's
/// pods plus the orphans it might adopt, without scanning every pod in the
/// namespace.
pub fn pod_controller_index_key(namespace: &str, controller: Option<&OwnerReference>) -> String {
    match controller {
        None => namespace.to_owned(),
        Some(r) => format!("{namespace}/{}/{}/{}", r.kind, r.name, r.uid),
    }
}

#[cfg(test)]
pub(crate) mod test_pods {
    //! Builders shared by the unit tests of this crate.
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    pub(crate) fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus::default()),
        }
    }

    pub(crate) fn with_phase(mut p: Pod, phase: &str) -> Pod {
        p.status.get_or_insert_with(Default::default).phase = Some(phase.into());
        p
    }

    pub(crate) fn with_node(mut p: Pod, node: &str) -> Pod {
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p
    }

    /// Running and Ready; `since` is the Ready transition time.
    pub(crate) fn ready(p: Pod, since: Option<Timestamp>) -> Pod {
        let mut p = with_phase(p, PHASE_RUNNING);
        p.status.get_or_insert_with(Default::default).conditions = Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            last_transition_time: since.map(Time),
            ..PodCondition::default()
        }]);
        p
    }

    pub(crate) fn created(mut p: Pod, at: Timestamp) -> Pod {
        p.metadata.creation_timestamp = Some(Time(at));
        p
    }

    pub(crate) fn restarts(mut p: Pod, n: i32) -> Pod {
        p.status
            .get_or_insert_with(Default::default)
            .container_statuses = Some(vec![ContainerStatus {
            name: "c".into(),
            restart_count: n,
            ..ContainerStatus::default()
        }]);
        p
    }

    pub(crate) fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::test_pods::*;
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use std::collections::BTreeMap;

    const NOW: &str = "2026-01-01T00:00:00Z";

    #[test]
    fn active_pod_filtering_matches_upstream() {
        // TestActivePodFiltering: 5 Running pods, pod0 Succeeded, pod1 Failed.
        let mut pods: Vec<Pod> = (0..5)
            .map(|i| with_phase(pod(&format!("pod{i}")), PHASE_RUNNING))
            .collect();
        pods[0] = with_phase(pods[0].clone(), PHASE_SUCCEEDED);
        pods[1] = with_phase(pods[1].clone(), PHASE_FAILED);
        let names: Vec<_> = filter_active_pods(&pods)
            .into_iter()
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["pod2", "pod3", "pod4"]);
        assert!(filter_active_pods(&pods[..2]).is_empty());
    }

    #[test]
    fn active_and_terminating() {
        let running = with_phase(pod("a"), PHASE_RUNNING);
        assert!(is_pod_active(&running));
        assert!(!is_pod_terminating(&running));
        assert!(is_pod_active(&pod("no-phase")));

        let mut deleting = running.clone();
        deleting.metadata.deletion_timestamp = Some(Time(ts(NOW)));
        assert!(!is_pod_active(&deleting));
        assert!(is_pod_terminating(&deleting));

        let mut done = with_phase(deleting.clone(), PHASE_SUCCEEDED);
        assert!(!is_pod_terminating(&done));
        done.metadata.deletion_timestamp = None;
        assert!(!is_pod_active(&done));

        let pods = vec![running, deleting.clone(), deleting, done];
        assert_eq!(count_terminating_pods(&pods), 2);
        assert_eq!(filter_terminating_pods(pods.iter()).len(), 2);
    }

    #[test]
    fn readiness_and_ready_time() {
        let t = ts("2025-12-31T23:59:00Z");
        assert!(!is_pod_ready(&pod("a")));
        assert_eq!(pod_ready_time(&pod("a")), None);
        let r = ready(pod("a"), Some(t));
        assert!(is_pod_ready(&r));
        assert_eq!(pod_ready_time(&r), Some(t));
        assert_eq!(pod_ready_time(&ready(pod("a"), None)), None);

        let mut not_ready = r.clone();
        not_ready
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()[0]
            .status = "False".into();
        assert!(!is_pod_ready(&not_ready));
        assert_eq!(pod_ready_time(&not_ready), None);
    }

    #[test]
    fn availability() {
        let now = ts(NOW);
        let ready_20s = ready(pod("a"), Some(now - SignedDuration::from_secs(20)));
        assert!(is_pod_available(&ready_20s, 0, now));
        assert!(
            is_pod_available(&ready_20s, 20, now),
            "exactly min ready counts"
        );
        assert!(!is_pod_available(&ready_20s, 21, now));
        assert!(!is_pod_available(&pod("a"), 0, now));
        let no_ltt = ready(pod("a"), None);
        assert!(is_pod_available(&no_ltt, 0, now));
        assert!(!is_pod_available(&no_ltt, 1, now));
        // Extreme inputs do not panic.
        let ancient = ready(pod("a"), Some(Timestamp::MIN));
        assert!(is_pod_available(&ancient, i32::MAX, Timestamp::MAX));
        let future = ready(pod("a"), Some(Timestamp::MAX));
        assert!(!is_pod_available(&future, i32::MAX, now));
    }

    #[test]
    fn container_restarts_count_regular_and_sidecars_separately() {
        let mut p = restarts(pod("a"), 3);
        let spec = p.spec.as_mut().unwrap();
        spec.init_containers = Some(vec![
            Container {
                name: "sidecar".into(),
                restart_policy: Some("Always".into()),
                ..Container::default()
            },
            Container {
                name: "init".into(),
                ..Container::default()
            },
        ]);
        p.status.as_mut().unwrap().init_container_statuses = Some(vec![
            ContainerStatus {
                name: "sidecar".into(),
                restart_count: 2,
                ..ContainerStatus::default()
            },
            ContainerStatus {
                name: "init".into(),
                restart_count: 7,
                ..ContainerStatus::default()
            },
        ]);
        assert_eq!(
            max_container_restarts(&p),
            ContainerRestarts {
                regular: 3,
                sidecar: 2
            }
        );
        assert_eq!(
            max_container_restarts(&pod("b")),
            ContainerRestarts::default()
        );
    }

    #[test]
    fn claimed_pods_need_controller_and_selector() {
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let labelled = |name: &str, app: &str, owner: Option<OwnerReference>| {
            let mut p = pod(name);
            p.metadata.labels = Some(BTreeMap::from([("app".into(), app.into())]));
            p.metadata.owner_references = owner.map(|o| vec![o]);
            p
        };
        let mut not_controller = owner.clone();
        not_controller.controller = None;
        let pods = vec![
            labelled("mine", "web", Some(owner.clone())),
            labelled("wrong-labels", "db", Some(owner.clone())),
            labelled("orphan", "web", None),
            labelled("not-controller", "web", Some(not_controller)),
        ];
        let selector = Selector::from_iter([("app", "web")]);
        let claimed = filter_claimed_pods("rs-uid", &selector, &pods);
        assert_eq!(claimed.len(), 1);
        assert_eq!(claimed[0].metadata.name.as_deref(), Some("mine"));
        assert_eq!(controller_of(&pods[0]), Some(&owner));
        assert!(controller_of(&pods[3]).is_none());
    }

    #[test]
    fn keys() {
        let owner = OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "rs".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: None,
        };
        assert_eq!(
            pod_controller_index_key("ns", Some(&owner)),
            "ns/ReplicaSet/rs/u1"
        );
        assert_eq!(pod_controller_index_key("ns", None), "ns");
        assert_eq!(pod_key(&pod("a")), "ns/a");
        assert_eq!(pod_phase(&pod("a")), "");
    }
}
