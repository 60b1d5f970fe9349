//! The pod cache's transform (opt-in, [`ControllerOptions::slim_pod_cache`]):
//! pods keep only what the replica controllers read, so each cached pod
//! costs a fraction of its full size.
//!
//! [`ControllerOptions::slim_pod_cache`]: crate::ControllerOptions::slim_pod_cache

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use ctrlkit_informer::Transform;
use k8s_openapi::api::core::v1::{
    Container, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use serde::de::value::StrDeserializer;
use serde::de::{IgnoredAny, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use ctrlkit_podcontrol::ranking::POD_DELETION_COST_ANNOTATION;

/// The pod informer's transform when pods are cached slim: [`slim_pod`],
/// with each pod decoded straight into its slim form ([`SlimPodJson`]), so
/// the fields it drops are skipped in the JSON instead of decoded and
/// then dropped.
pub(crate) fn slim_pod_transform() -> Transform<Pod> {
    Transform::new(slim_pod).decode_as::<SlimPodJson>()
}

/// Strips `pod` down to what the ReplicaSet and ReplicationController
/// syncs read, before it enters the cache:
///
/// - metadata: everything but `managedFields` and annotations other than
///   the deletion cost (names, UID, resourceVersion, labels, owner
///   references, timestamps stay);
/// - spec: `nodeName` (ranking by co-location) and the name and restart
///   policy of sidecar init containers (`restartPolicy: Always`, whose
///   restarts rank pods); the containers themselves are dropped;
/// - status: phase, reason and message (the churn guard), the `Ready`
///   condition (ready and available counts), and each container's name and
///   restart count (ranking).
///
/// Whoever shares the pod informer sees the same slim pods, so only turn it
/// on when every user of that informer reads no more than this.
pub fn slim_pod(pod: &mut Pod) {
    let meta = &mut pod.metadata;
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k == POD_DELETION_COST_ANNOTATION);
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
    // Rebuilt in place: the spec and status are large structs, and this
    // runs on every pod the informer applies (already slim when decoded
    // as `SlimPodJson`).
    if let Some(spec) = pod.spec.as_mut() {
        let node_name = spec.node_name.take();
        let init_containers = spec.init_containers.take().map(|init| {
            init.into_iter()
                .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                .map(|c| Container {
                    name: c.name,
                    restart_policy: c.restart_policy,
                    ..Container::default()
                })
                .collect()
        });
        *spec = PodSpec {
            node_name,
            init_containers,
            ..PodSpec::default()
        };
    }
    if let Some(status) = pod.status.as_mut() {
        let conditions = status.conditions.take().map(|conditions| {
            conditions
                .into_iter()
                .filter(|c| c.type_ == "Ready")
                .map(|c| PodCondition {
                    type_: c.type_,
                    status: c.status,
                    last_transition_time: c.last_transition_time,
                    ..PodCondition::default()
                })
                .collect()
        });
        *status = PodStatus {
            phase: status.phase.take(),
            reason: status.reason.take(),
            message: status.message.take(),
            conditions,
            container_statuses: status.container_statuses.take().map(restarts_only),
            init_container_statuses: status.init_container_statuses.take().map(restarts_only),
            ..PodStatus::default()
        };
    }
}

fn restarts_only(statuses: Vec<ContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|s| ContainerStatus {
            name: s.name,
            restart_count: s.restart_count,
            ..ContainerStatus::default()
        })
        .collect()
}

/// The JSON of a pod read as [`slim_pod`] leaves it: every other field is
/// skipped unread. Converting it gives the pod that decoding the whole pod
/// and slimming it gives (the tests check this on the pods the test cluster
/// serves).
#[derive(Deserialize)]
pub(crate) struct SlimPodJson {
    #[serde(default)]
    metadata: Option<SlimMeta>,
    #[serde(default)]
    spec: Option<SlimSpec>,
    #[serde(default)]
    status: Option<SlimStatus>,
}

/// `ObjectMeta` without `managedFields`, and of the annotations only the
/// deletion cost.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimMeta {
    #[serde(default, deserialize_with = "deletion_cost_only")]
    annotations: Option<BTreeMap<String, String>>,
    creation_timestamp: Option<Time>,
    deletion_grace_period_seconds: Option<i64>,
    deletion_timestamp: Option<Time>,
    finalizers: Option<Vec<String>>,
    generate_name: Option<String>,
    generation: Option<i64>,
    labels: Option<BTreeMap<String, String>>,
    name: Option<String>,
    namespace: Option<String>,
    owner_references: Option<Vec<OwnerReference>>,
    resource_version: Option<String>,
    self_link: Option<String>,
    uid: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimSpec {
    node_name: Option<String>,
    init_containers: Option<Vec<SlimContainer>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimContainer {
    name: Option<String>,
    restart_policy: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimStatus {
    phase: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    #[serde(default, deserialize_with = "ready_condition_only")]
    conditions: Option<Vec<PodCondition>>,
    container_statuses: Option<Vec<SlimContainerStatus>>,
    init_container_statuses: Option<Vec<SlimContainerStatus>>,
}

/// One pod condition as the JSON has it, its strings borrowed: only the
/// `Ready` condition is kept, and only its strings are copied and its
/// time parsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AnyCondition<'a> {
    #[serde(rename = "type", borrow)]
    type_: Option<JsonStr<'a>>,
    #[serde(borrow)]
    status: Option<JsonStr<'a>>,
    #[serde(borrow)]
    last_transition_time: Option<JsonStr<'a>>,
}

/// A JSON string, borrowed from the text unless it has escapes.
struct JsonStr<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;

        impl<'de> Visitor<'de> for Text {
            type Value = Cow<'de, str>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }

            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }

            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }

            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }

        deserializer.deserialize_str(Text).map(JsonStr)
    }
}

/// The pod's conditions as [`slim_pod`] keeps them: the `Ready` condition
/// with its type, status and `lastTransitionTime`. The others (a pod
/// has four or five, each with a time) are read without allocating or
/// parsing their times.
fn ready_condition_only<'de, D>(deserializer: D) -> Result<Option<Vec<PodCondition>>, D::Error>
where
    D: Deserializer<'de>,
{
    struct ReadyOnly;

    impl<'de> Visitor<'de> for ReadyOnly {
        type Value = Option<Vec<PodCondition>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of pod conditions")
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut kept = Vec::new();
            while let Some(c) = seq.next_element::<AnyCondition<'de>>()? {
                if c.type_.as_ref().is_none_or(|t| t.0 != "Ready") {
                    continue;
                }
                let last_transition_time = match c.last_transition_time {
                    // The parser `Time`'s own decoding uses.
                    Some(t) => {
                        let text: StrDeserializer<'_, A::Error> = t.0.as_ref().into_deserializer();
                        Some(Time(Timestamp::deserialize(text)?))
                    }
                    None => None,
                };
                kept.push(PodCondition {
                    type_: c.type_.map(|t| t.0.into_owned()).unwrap_or_default(),
                    status: c.status.map(|s| s.0.into_owned()).unwrap_or_default(),
                    last_transition_time,
                    ..PodCondition::default()
                });
            }
            Ok(Some(kept))
        }
    }

    deserializer.deserialize_option(ReadyOnly)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SlimContainerStatus {
    name: Option<String>,
    restart_count: Option<i32>,
}

/// The annotations as [`slim_pod`] keeps them: the deletion cost alone,
/// `None` without it. The other values are skipped unread.
fn deletion_cost_only<'de, D>(deserializer: D) -> Result<Option<BTreeMap<String, String>>, D::Error>
where
    D: Deserializer<'de>,
{
    struct DeletionCost;

    impl<'de> Visitor<'de> for DeletionCost {
        type Value = Option<BTreeMap<String, String>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map of annotations")
        }

        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_map(self)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut kept = None;
            while let Some(key) = map.next_key::<String>()? {
                if key == POD_DELETION_COST_ANNOTATION {
                    let value: String = map.next_value()?;
                    kept = Some(BTreeMap::from([(key, value)]));
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(kept)
        }
    }

    deserializer.deserialize_option(DeletionCost)
}

impl From<SlimPodJson> for Pod {
    fn from(json: SlimPodJson) -> Self {
        Pod {
            metadata: json.metadata.map(ObjectMeta::from).unwrap_or_default(),
            spec: json.spec.map(|spec| PodSpec {
                node_name: spec.node_name,
                init_containers: spec.init_containers.map(|init| {
                    init.into_iter()
                        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
                        .map(|c| Container {
                            name: c.name.unwrap_or_default(),
                            restart_policy: c.restart_policy,
                            ..Container::default()
                        })
                        .collect()
                }),
                ..PodSpec::default()
            }),
            status: json.status.map(|status| PodStatus {
                phase: status.phase,
                reason: status.reason,
                message: status.message,
                conditions: status.conditions,
                container_statuses: status.container_statuses.map(slim_statuses),
                init_container_statuses: status.init_container_statuses.map(slim_statuses),
                ..PodStatus::default()
            }),
        }
    }
}

impl From<SlimMeta> for ObjectMeta {
    fn from(m: SlimMeta) -> Self {
        ObjectMeta {
            annotations: m.annotations,
            creation_timestamp: m.creation_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            deletion_timestamp: m.deletion_timestamp,
            finalizers: m.finalizers,
            generate_name: m.generate_name,
            generation: m.generation,
            labels: m.labels,
            managed_fields: None,
            name: m.name,
            namespace: m.namespace,
            owner_references: m.owner_references,
            resource_version: m.resource_version,
            self_link: m.self_link,
            uid: m.uid,
        }
    }
}

fn slim_statuses(statuses: Vec<SlimContainerStatus>) -> Vec<ContainerStatus> {
    statuses
        .into_iter()
        .map(|s| ContainerStatus {
            name: s.name.unwrap_or_default(),
            restart_count: s.restart_count.unwrap_or_default(),
            ..ContainerStatus::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ctrlkit_podcontrol::pod::{
        is_pod_active, is_pod_available, is_pod_ready, max_container_restarts, pod_ready_time,
    };
    use ctrlkit_podcontrol::ranking::deletion_cost_from_annotations;
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;

    /// A pod as a real API server returns it, with a sidecar.
    fn full_pod() -> Pod {
        serde_json::from_value(full_pod_json()).unwrap()
    }

    fn full_pod_json() -> serde_json::Value {
        json!({
            "metadata": {
                "name": "web-x", "namespace": "ns", "uid": "u", "resourceVersion": "9",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"app": "web"},
                "annotations": {
                    "controller.kubernetes.io/pod-deletion-cost": "7",
                    "kubectl.kubernetes.io/last-applied-configuration": "{...}"
                },
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "name": "web", "uid": "rs", "controller": true}],
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]
            },
            "spec": {
                "nodeName": "n1",
                "initContainers": [
                    {"name": "proxy", "image": "envoy", "restartPolicy": "Always"},
                    {"name": "setup", "image": "busybox"}
                ],
                "containers": [{"name": "app", "image": "nginx", "env": [{"name": "A", "value": "b"}]}]
            },
            "status": {
                "phase": "Running", "podIP": "10.0.0.1", "qosClass": "BestEffort",
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
                ],
                "containerStatuses": [{"name": "app", "image": "nginx", "imageID": "sha",
                    "ready": true, "restartCount": 2, "state": {"running": {}}}],
                "initContainerStatuses": [{"name": "proxy", "image": "envoy", "imageID": "sha",
                    "ready": true, "restartCount": 4}]
            }
        })
    }

    /// Decoding `json` as the slim shape gives what decoding the whole pod
    /// and slimming it gives.
    fn assert_shape_decodes_as_slimmed(json: &serde_json::Value) {
        let text = json.to_string();
        let mut expected: Pod = serde_json::from_str(&text).unwrap();
        slim_pod(&mut expected);
        let shaped: Pod = serde_json::from_str::<SlimPodJson>(&text).unwrap().into();
        assert_eq!(shaped, expected, "{text}");
        // And through the informer's transform (shape, then slim_pod again).
        match slim_pod_transform().decode(&text) {
            ctrlkit_informer::MaybeDecoded::Decoded(pod) => assert_eq!(pod, expected),
            other => panic!("undecodable: {other:?}"),
        }
    }

    #[test]
    fn the_slim_shape_decodes_to_what_slimming_the_full_pod_gives() {
        let full = full_pod_json();
        assert_shape_decodes_as_slimmed(&full);
        let variants: [fn(&mut serde_json::Value); 9] = [
            |p| {
                p.as_object_mut().unwrap().remove("spec");
                p.as_object_mut().unwrap().remove("status");
            },
            |p| p["metadata"]["annotations"] = json!({"other": "x"}),
            |p| p["metadata"]["annotations"] = json!(null),
            |p| p["metadata"]["annotations"] = json!({}),
            |p| {
                p["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:02:00Z");
                p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
                p["metadata"]["finalizers"] = json!(["f"]);
                p["metadata"]["generateName"] = json!("web-");
            },
            |p| p["spec"]["initContainers"] = json!([{"name": "setup", "image": "busybox"}]),
            |p| p["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "True"}]),
            |p| {
                p["status"] =
                    json!({"phase": "Failed", "reason": "Evicted", "message": "low on memory"})
            },
            |p| p["status"] = json!({"containerStatuses": null, "conditions": null}),
        ];
        for change in variants {
            let mut pod = full.clone();
            change(&mut pod);
            assert_shape_decodes_as_slimmed(&pod);
        }
        // The metadata alone (a pod the server has not filled in yet).
        assert_shape_decodes_as_slimmed(&json!({"metadata": {"name": "p"}}));
    }

    #[test]
    fn only_the_ready_condition_is_kept_however_its_strings_are_written() {
        // Several conditions, the Ready one among them with every field.
        let mut pod = full_pod_json();
        pod["status"]["conditions"] = json!([
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"},
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-01-01T00:00:02Z",
             "lastProbeTime": null, "reason": "ContainersNotReady", "message": "m"},
            {"type": "ContainersReady", "status": "True"}
        ]);
        assert_shape_decodes_as_slimmed(&pod);

        // Escaped strings are read like plain ones; a condition the slim
        // pod drops is not parsed, so its bad time does not matter.
        let text = r#"{"metadata": {"name": "p"}, "status": {"conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "not a time"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:05Z"}
        ]}}"#;
        let ctrlkit_informer::MaybeDecoded::Decoded(slim) = slim_pod_transform().decode(text)
        else {
            panic!("undecodable")
        };
        assert!(is_pod_ready(&slim));
        assert_eq!(
            pod_ready_time(&slim),
            Some("2026-01-01T00:00:05Z".parse::<Timestamp>().unwrap())
        );
        assert_eq!(slim.status.unwrap().conditions.map(|c| c.len()), Some(1));
        // A bad time on the Ready condition still makes the pod undecodable.
        let bad = text.replace("2026-01-01T00:00:05Z", "soon");
        assert!(matches!(
            slim_pod_transform().decode(&bad),
            ctrlkit_informer::MaybeDecoded::Undecodable(_)
        ));
    }

    #[test]
    fn the_slim_shape_skips_what_it_drops_even_when_a_full_pod_would_not_decode() {
        // A value the full pod refuses, in a field the slim pod drops.
        let mut pod = full_pod_json();
        pod["spec"]["containers"][0]["ports"] = json!([{"containerPort": "eighty"}]);
        let text = pod.to_string();
        assert!(serde_json::from_str::<Pod>(&text).is_err());
        assert!(matches!(
            slim_pod_transform().decode(&text),
            ctrlkit_informer::MaybeDecoded::Decoded(_)
        ));
        // In a field it keeps, the pod is undecodable, as before.
        pod["status"]["containerStatuses"][0]["restartCount"] = json!("two");
        assert!(matches!(
            slim_pod_transform().decode(&pod.to_string()),
            ctrlkit_informer::MaybeDecoded::Undecodable(_)
        ));
    }

    #[test]
    fn slim_pods_answer_every_question_the_controller_asks_as_full_ones_do() {
        let full = full_pod();
        let mut slim = full.clone();
        slim_pod(&mut slim);
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().unwrap();
        assert_eq!(slim.metadata.labels, full.metadata.labels);
        assert_eq!(
            slim.metadata.owner_references,
            full.metadata.owner_references
        );
        assert_eq!(
            slim.metadata.resource_version,
            full.metadata.resource_version
        );
        assert_eq!(
            slim.metadata.creation_timestamp,
            full.metadata.creation_timestamp
        );
        assert_eq!(
            deletion_cost_from_annotations(slim.metadata.annotations.as_ref()),
            Ok(7)
        );
        assert_eq!(is_pod_active(&slim), is_pod_active(&full));
        assert_eq!(is_pod_ready(&slim), is_pod_ready(&full));
        assert_eq!(pod_ready_time(&slim), pod_ready_time(&full));
        assert_eq!(
            is_pod_available(&slim, 30, now),
            is_pod_available(&full, 30, now)
        );
        assert_eq!(max_container_restarts(&slim), max_container_restarts(&full));
        assert_eq!(max_container_restarts(&slim).sidecar, 4);
        let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
        assert_eq!(node(&slim), node(&full));
    }

    #[test]
    fn slim_pods_drop_what_the_controller_never_reads() {
        let mut slim = full_pod();
        slim_pod(&mut slim);
        assert!(slim.metadata.managed_fields.is_none());
        assert_eq!(slim.metadata.annotations.as_ref().map(|a| a.len()), Some(1));
        let spec = slim.spec.as_ref().unwrap();
        assert!(spec.containers.is_empty());
        assert_eq!(spec.init_containers.as_ref().map(Vec::len), Some(1));
        let status = slim.status.as_ref().unwrap();
        assert!(status.pod_ip.is_none() && status.qos_class.is_none());
        assert_eq!(status.conditions.as_ref().map(Vec::len), Some(1));
        assert_eq!(status.container_statuses.as_ref().unwrap()[0].image, "");
        // Slimming twice changes nothing (a relist re-applies it).
        let once = Arc::new(slim.clone());
        slim_pod(&mut slim);
        assert_eq!(&slim, once.as_ref());
    }
}
