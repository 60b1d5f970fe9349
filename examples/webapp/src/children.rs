//! The children a WebApp is realised by — a ConfigMap, a Deployment and a
//! Service — built from its spec, and the merge patch that brings an
//! existing child back to what the spec asks for.
//!
//! # Creating and updating
//!
//! A missing child is created through `ChildControl::create` (which adds
//! the controller reference and records `SuccessfulCreate` /
//! `FailedCreate` on the WebApp). An existing child is updated with a JSON
//! merge patch through `ChildControl::patch`, and only when it differs from
//! the spec in a field the operator sets ([`merge_patch`]), so a resync
//! sends nothing.
//!
//! Why a merge patch and not server-side apply: `KubeChildControl` creates
//! children with a `POST` under the client's default field manager and
//! sends apply patches without `force`, so an apply that changes a value
//! set at creation (the image, the replicas) conflicts with that manager
//! and fails with 409. A merge patch has no field ownership: it sets the
//! fields it names, replaces the lists it names (the pod template's
//! containers, the Service's ports; the API server defaults them again),
//! and removes keys set to `null` (config entries dropped from the spec).
//! Fields other actors set and the operator does not name are kept.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, ConfigMapVolumeSource, Container, ContainerPort, EnvVar, PodSpec, PodTemplateSpec,
    Service, ServicePort, ServiceSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::compat::deployment_spec_field;
use crate::resource::WebApp;

/// Where the config files are mounted in the container.
pub const CONFIG_MOUNT_PATH: &str = "/etc/webapp";

/// The name of the app's container and of its Service port.
const CONTAINER: &str = "web";
const PORT_NAME: &str = "http";
const CONFIG_VOLUME: &str = "config";

/// The name of the WebApp's ConfigMap.
pub fn configmap_name(app: &WebApp) -> String {
    format!("{}-config", app.name_any())
}

/// The name of the WebApp's Deployment and of its Service.
pub fn workload_name(app: &WebApp) -> String {
    app.name_any()
}

/// The labels on every child and on the pods; the first two select the
/// pods (the Deployment's immutable selector and the Service's).
pub fn labels(app: &WebApp) -> BTreeMap<String, String> {
    let mut labels = selector(app);
    labels.insert(
        "app.kubernetes.io/managed-by".into(),
        "webapp-operator".into(),
    );
    labels
}

fn selector(app: &WebApp) -> BTreeMap<String, String> {
    [
        ("app.kubernetes.io/name".to_string(), "webapp".to_string()),
        ("app.kubernetes.io/instance".to_string(), app.name_any()),
    ]
    .into()
}

fn meta(app: &WebApp, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        labels: Some(labels(app)),
        ..ObjectMeta::default()
    }
}

/// The ConfigMap holding `spec.config` (empty without one).
pub fn desired_configmap(app: &WebApp) -> ConfigMap {
    ConfigMap {
        metadata: meta(app, configmap_name(app)),
        data: Some(app.spec.config.clone().unwrap_or_default()),
        ..ConfigMap::default()
    }
}

/// The Deployment running `spec.image` with `spec.replicas` pods, the
/// ConfigMap mounted at [`CONFIG_MOUNT_PATH`] and `PORT` in the
/// environment.
pub fn desired_deployment(app: &WebApp) -> Deployment {
    let container = Container {
        name: CONTAINER.into(),
        image: Some(app.spec.image.clone()),
        ports: Some(vec![ContainerPort {
            name: Some(PORT_NAME.into()),
            container_port: app.spec.port,
            protocol: Some("TCP".into()),
            ..ContainerPort::default()
        }]),
        env: Some(vec![EnvVar {
            name: "PORT".into(),
            value: Some(app.spec.port.to_string()),
            ..EnvVar::default()
        }]),
        volume_mounts: Some(vec![VolumeMount {
            name: CONFIG_VOLUME.into(),
            mount_path: CONFIG_MOUNT_PATH.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }]),
        ..Container::default()
    };
    let pod = PodSpec {
        containers: vec![container],
        volumes: Some(vec![Volume {
            name: CONFIG_VOLUME.into(),
            config_map: Some(ConfigMapVolumeSource {
                name: configmap_name(app),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    Deployment {
        metadata: meta(app, workload_name(app)),
        spec: deployment_spec_field(DeploymentSpec {
            replicas: Some(app.spec.replicas),
            selector: LabelSelector {
                match_labels: Some(selector(app)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(app)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The ClusterIP Service in front of the pods on `spec.port`.
pub fn desired_service(app: &WebApp) -> Service {
    Service {
        metadata: meta(app, workload_name(app)),
        spec: Some(ServiceSpec {
            selector: Some(selector(app)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: app.spec.port,
                target_port: Some(IntOrString::Int(app.spec.port)),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The parts of a child the operator decides, as JSON pointers; the rest
/// (status, server defaults, the Deployment's immutable selector, other
/// actors' labels and annotations) is left alone.
pub trait Managed: Serialize {
    /// The pointers into the serialized object.
    const MANAGED: &'static [&'static str];
    /// Maps whose keys the operator owns entirely, so keys it no longer
    /// sets are removed.
    const EXACT: &'static [&'static str] = &[];
}

impl Managed for ConfigMap {
    const MANAGED: &'static [&'static str] = &["/metadata/labels", "/data"];
    const EXACT: &'static [&'static str] = &["/data"];
}

impl Managed for Deployment {
    const MANAGED: &'static [&'static str] =
        &["/metadata/labels", "/spec/replicas", "/spec/template"];
}

impl Managed for Service {
    const MANAGED: &'static [&'static str] = &["/metadata/labels", "/spec/selector", "/spec/ports"];
}

/// The JSON merge patch that makes `actual` agree with `desired` in every
/// [managed](Managed) field, or `None` when it already does.
///
/// A field agrees when `actual` has every value `desired` sets, allowing
/// for what the API server adds (defaults in objects, even inside list
/// items); a list agrees item by item and in length. The patch carries the
/// child's UID, which the API server checks, so a child deleted and
/// re-created by someone else meanwhile is not patched.
///
/// # Errors
/// If either object cannot be serialized (never for k8s-openapi types).
pub fn merge_patch<C: Managed + kube::Resource>(
    desired: &C,
    actual: &C,
) -> Result<Option<Value>, serde_json::Error> {
    let (want, have) = (
        serde_json::to_value(desired)?,
        serde_json::to_value(actual)?,
    );
    let mut intent = Value::Object(Map::new());
    for pointer in C::MANAGED {
        let mut value = want.pointer(pointer).cloned().unwrap_or(Value::Null);
        if C::EXACT.contains(pointer)
            && let (Value::Object(wanted), Some(Value::Object(present))) =
                (&mut value, have.pointer(pointer))
        {
            for key in present.keys() {
                wanted.entry(key.clone()).or_insert(Value::Null);
            }
        }
        insert_at(&mut intent, pointer, value);
    }
    let Some(mut patch) = diff(&intent, &have) else {
        return Ok(None);
    };
    if let (Value::Object(fields), Some(uid)) = (&mut patch, actual.meta().uid.as_ref()) {
        let metadata = fields
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        metadata["uid"] = Value::from(uid.clone());
    }
    Ok(Some(patch))
}

/// Sets `value` at `pointer` in `target`, creating the objects on the way.
fn insert_at(target: &mut Value, pointer: &str, value: Value) {
    let mut here = target;
    let mut parts = pointer.trim_start_matches('/').split('/').peekable();
    while let Some(part) = parts.next() {
        let Value::Object(map) = here else { return };
        if parts.peek().is_none() {
            map.insert(part.to_owned(), value);
            return;
        }
        here = map
            .entry(part.to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
}

/// The merge patch turning `have` into something that [`agrees`] with
/// `want`: objects are compared key by key (a `null` wants the key gone),
/// anything else is replaced whole when it does not agree.
fn diff(want: &Value, have: &Value) -> Option<Value> {
    match (want, have) {
        (Value::Object(want), Value::Object(have)) => {
            let patch: Map<String, Value> = want
                .iter()
                .filter_map(|(key, w)| match (w, have.get(key)) {
                    (w, None | Some(Value::Null)) if is_empty(w) => None,
                    (Value::Null, Some(_)) => Some((key.clone(), Value::Null)),
                    (w, None) => Some((key.clone(), w.clone())),
                    (w, Some(h)) => diff(w, h).map(|d| (key.clone(), d)),
                })
                .collect();
            (!patch.is_empty()).then_some(Value::Object(patch))
        }
        (want, have) => (!agrees(want, have)).then(|| want.clone()),
    }
}

/// Whether `have` has everything `want` sets: objects may have more keys,
/// lists must have the same length and agree item by item.
fn agrees(want: &Value, have: &Value) -> bool {
    match (want, have) {
        (Value::Object(w), Value::Object(h)) => w.iter().all(|(k, wv)| match h.get(k) {
            Some(hv) => agrees(wv, hv),
            None => is_empty(wv),
        }),
        (Value::Array(w), Value::Array(h)) => {
            w.len() == h.len() && w.iter().zip(h).all(|(wv, hv)| agrees(wv, hv))
        }
        (w, h) => w == h,
    }
}

/// Whether `value` asks for nothing: `null`, or an object (e.g. an empty
/// `data` map, which the API server omits) with nothing but such values.
fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.values().all(is_empty),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resource::WebAppSpec;

    fn app(image: &str, replicas: i32, config: &[(&str, &str)]) -> WebApp {
        let config = config
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        WebApp::new(
            "web",
            WebAppSpec {
                image: image.into(),
                replicas,
                port: 8080,
                config: Some(config),
            },
        )
    }

    /// What the API server returns: the object with a UID, defaults filled
    /// in and someone else's label.
    fn stored<C: Serialize + serde::de::DeserializeOwned>(child: &C) -> C {
        let mut value = serde_json::to_value(child).unwrap();
        value["metadata"]["uid"] = json!("uid-1");
        value["metadata"]["labels"]["team"] = json!("blue");
        if let Some(containers) = value.pointer_mut("/spec/template/spec/containers") {
            containers[0]["imagePullPolicy"] = json!("IfNotPresent");
            containers[0]["terminationMessagePath"] = json!("/dev/termination-log");
        }
        if let Some(spec) = value.pointer_mut("/spec/template/spec") {
            spec["volumes"][0]["configMap"]["defaultMode"] = json!(420);
            spec["restartPolicy"] = json!("Always");
        }
        if value.pointer("/spec/ports").is_some() {
            value["spec"]["clusterIP"] = json!("10.0.0.7");
            value["spec"]["type"] = json!("ClusterIP");
        }
        if value.get("data") == Some(&json!({})) {
            value.as_object_mut().unwrap().remove("data"); // omitted when empty
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn nothing_to_patch_when_only_the_server_added_fields() {
        let app = app("nginx:1", 2, &[("a", "1")]);
        let cm = desired_configmap(&app);
        assert_eq!(merge_patch(&cm, &stored(&cm)).unwrap(), None);
        let deploy = desired_deployment(&app);
        assert_eq!(merge_patch(&deploy, &stored(&deploy)).unwrap(), None);
        let svc = desired_service(&app);
        assert_eq!(merge_patch(&svc, &stored(&svc)).unwrap(), None);
    }

    #[test]
    fn a_spec_change_patches_only_what_changed_with_the_uid() {
        let before = stored(&desired_deployment(&app("nginx:1", 2, &[])));
        let after = desired_deployment(&app("nginx:2", 3, &[]));
        let patch = merge_patch(&after, &before).unwrap().unwrap();
        assert_eq!(patch["metadata"], json!({"uid": "uid-1"}), "labels agree");
        assert_eq!(patch["spec"]["replicas"], 3);
        let containers = &patch["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["image"], "nginx:2");
        assert!(
            patch["spec"].get("selector").is_none(),
            "immutable, never patched"
        );
        assert!(
            patch["spec"]["template"].get("metadata").is_none(),
            "pod labels agree"
        );
    }

    #[test]
    fn an_empty_config_agrees_with_a_configmap_without_data() {
        let cm = desired_configmap(&app("i", 1, &[]));
        let stored = stored(&cm);
        assert_eq!(stored.data, None);
        assert_eq!(merge_patch(&cm, &stored).unwrap(), None);
    }

    #[test]
    fn config_keys_dropped_from_the_spec_are_removed() {
        let before = stored(&desired_configmap(&app("i", 1, &[("a", "1"), ("b", "2")])));
        let after = desired_configmap(&app("i", 1, &[("a", "1"), ("c", "3")]));
        let patch = merge_patch(&after, &before).unwrap().unwrap();
        assert_eq!(patch["data"], json!({"b": null, "c": "3"}));
    }

    #[test]
    fn a_removed_label_or_a_changed_port_is_restored() {
        let app = app("i", 1, &[]);
        let mut actual = stored(&desired_service(&app));
        actual
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .remove("app.kubernetes.io/managed-by");
        actual.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 9999;
        let patch = merge_patch(&desired_service(&app), &actual)
            .unwrap()
            .unwrap();
        assert_eq!(
            patch["metadata"]["labels"],
            json!({"app.kubernetes.io/managed-by": "webapp-operator"})
        );
        assert_eq!(
            patch["spec"]["ports"][0]["port"], 8080,
            "lists are replaced whole"
        );
        assert_eq!(patch["spec"]["ports"][0]["targetPort"], 8080);
    }

    #[test]
    fn the_pod_template_mounts_the_config_and_matches_the_selector() {
        let d = desired_deployment(&app("nginx:1", 2, &[]));
        let spec = crate::compat::deployment_spec(&d).unwrap().clone();
        let template_labels = spec.template.metadata.unwrap().labels.unwrap();
        for (k, v) in spec.selector.match_labels.unwrap() {
            assert_eq!(template_labels.get(&k), Some(&v));
        }
        let pod = spec.template.spec.unwrap();
        assert_eq!(
            pod.volumes.unwrap()[0].config_map.as_ref().unwrap().name,
            "web-config"
        );
        let mount = &pod.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(mount.mount_path, CONFIG_MOUNT_PATH);
    }
}
