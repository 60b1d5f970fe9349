//! The built-in kinds the cluster serves from the start: their types
//! (names, scope, subresources, generation, default propagation, Table
//! columns) and their defaulting and validation hooks.
//!
//! Like envtest, the cluster runs no controllers for these kinds (except
//! the kubelet simulation for pods, the garbage collector and quota
//! status): a Deployment is stored, defaulted and validated, never rolled out.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::json::At;
use crate::printers;
use crate::resources::{
    KindHooks, Propagation, RegisterError, Registry, ResourceDef, ResourceId, Review, ScalePaths,
};
use crate::selectors::LabelSelector;
use crate::status::ApiError;

/// The id of `namespaces` (registered first).
pub(crate) const NAMESPACES: ResourceId = 0;
/// The id of `pods` (registered second).
pub(crate) const PODS: ResourceId = 1;

fn invalid(def: &ResourceDef, obj: &Value, field: &str, why: &str) -> ApiError {
    let name = obj
        .at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("");
    ApiError::invalid(def.kind, name, format!("{field}: {why}"))
}

/// `obj[key]` as an object, created (replacing a non-object) if needed.
fn object_at<'a>(obj: &'a mut Value, key: &str) -> &'a mut Map<String, Value> {
    if !obj.get(key).is_some_and(Value::is_object) {
        obj[key] = json!({});
    }
    match &mut obj[key] {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

/// Whether kube-apiserver defaults a container of `image` to
/// `imagePullPolicy: Always`: no tag or the `latest` tag (a digest pins it).
fn pulls_always(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// Defaults kube-apiserver gives every pod spec (pods and templates).
fn default_pod_spec(spec: &mut Map<String, Value>) {
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    default(spec, "securityContext", json!({}));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(cs)) = spec.get_mut(list) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                default(c, "terminationMessagePath", json!("/dev/termination-log"));
                default(c, "terminationMessagePolicy", json!("File"));
                let policy = match c.get("image").and_then(Value::as_str) {
                    Some(image) if pulls_always(image) => "Always",
                    _ => "IfNotPresent",
                };
                default(c, "imagePullPolicy", json!(policy));
                default(c, "resources", json!({}));
            }
        }
    }
}

fn default_template(obj: &mut Value) {
    if let Some(spec) = obj
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    {
        default_pod_spec(spec);
    }
}

fn validate_containers(def: &ResourceDef, obj: &Value, spec: &[&str]) -> Result<(), ApiError> {
    let prefix = spec.join(".");
    let mut path: Vec<&str> = spec.to_vec();
    path.push("containers");
    let containers = obj.at(&path).and_then(Value::as_array);
    if containers.is_none_or(Vec::is_empty) {
        return Err(invalid(
            def,
            obj,
            &format!("{prefix}.containers"),
            "Required value",
        ));
    }
    for (i, c) in containers.into_iter().flatten().enumerate() {
        if c.get("name")
            .and_then(Value::as_str)
            .is_none_or(|n| !crate::semantics::is_dns_label(n))
        {
            return Err(invalid(
                def,
                obj,
                &format!("{prefix}.containers[{i}].name"),
                "Invalid value: must be a DNS label",
            ));
        }
        if c.get("image")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(invalid(
                def,
                obj,
                &format!("{prefix}.containers[{i}].image"),
                "Required value",
            ));
        }
    }
    Ok(())
}

/// Each of these `spec` fields, when set, is not negative
/// (`ValidateNonnegativeField`).
fn check_nonnegative(def: &ResourceDef, obj: &Value, fields: &[&str]) -> Result<(), ApiError> {
    for field in fields {
        match obj.at(&["spec", field]) {
            None | Some(Value::Null) => {}
            Some(v) if v.as_i64().is_some_and(|n| n >= 0) => {}
            Some(v) => {
                return Err(invalid(
                    def,
                    obj,
                    &format!("spec.{field}"),
                    &format!("Invalid value: {v}: must be greater than or equal to 0"),
                ));
            }
        }
    }
    Ok(())
}

/// The `int32` fields of a pod spec (`PodSpec`, containers, probes),
/// relative to the spec, with the Go struct that holds each.
const POD_SPEC_INT32: &[(&str, &str)] = &[
    ("priority", "PodSpec"),
    ("containers[].ports[].containerPort", "ContainerPort"),
    ("containers[].ports[].hostPort", "ContainerPort"),
    ("initContainers[].ports[].containerPort", "ContainerPort"),
    ("initContainers[].ports[].hostPort", "ContainerPort"),
    ("containers[].livenessProbe.initialDelaySeconds", "Probe"),
    ("containers[].livenessProbe.timeoutSeconds", "Probe"),
    ("containers[].livenessProbe.periodSeconds", "Probe"),
    ("containers[].livenessProbe.successThreshold", "Probe"),
    ("containers[].livenessProbe.failureThreshold", "Probe"),
    ("containers[].readinessProbe.initialDelaySeconds", "Probe"),
    ("containers[].readinessProbe.timeoutSeconds", "Probe"),
    ("containers[].readinessProbe.periodSeconds", "Probe"),
    ("containers[].readinessProbe.successThreshold", "Probe"),
    ("containers[].readinessProbe.failureThreshold", "Probe"),
    ("containers[].startupProbe.initialDelaySeconds", "Probe"),
    ("containers[].startupProbe.timeoutSeconds", "Probe"),
    ("containers[].startupProbe.periodSeconds", "Probe"),
    ("containers[].startupProbe.successThreshold", "Probe"),
    ("containers[].startupProbe.failureThreshold", "Probe"),
];

const POD_INT32: &[(&str, &str)] =
    &[("status.containerStatuses[].restartCount", "ContainerStatus")];

const REPLICA_SET_INT32: &[(&str, &str)] = &[
    ("spec.replicas", "ReplicaSetSpec"),
    ("spec.minReadySeconds", "ReplicaSetSpec"),
    ("status.replicas", "ReplicaSetStatus"),
    ("status.fullyLabeledReplicas", "ReplicaSetStatus"),
    ("status.readyReplicas", "ReplicaSetStatus"),
    ("status.availableReplicas", "ReplicaSetStatus"),
    ("status.terminatingReplicas", "ReplicaSetStatus"),
];

const REPLICATION_CONTROLLER_INT32: &[(&str, &str)] = &[
    ("spec.replicas", "ReplicationControllerSpec"),
    ("spec.minReadySeconds", "ReplicationControllerSpec"),
    ("status.replicas", "ReplicationControllerStatus"),
    ("status.fullyLabeledReplicas", "ReplicationControllerStatus"),
    ("status.readyReplicas", "ReplicationControllerStatus"),
    ("status.availableReplicas", "ReplicationControllerStatus"),
];

const DEPLOYMENT_INT32: &[(&str, &str)] = &[
    ("spec.replicas", "DeploymentSpec"),
    ("spec.minReadySeconds", "DeploymentSpec"),
    ("spec.revisionHistoryLimit", "DeploymentSpec"),
    ("spec.progressDeadlineSeconds", "DeploymentSpec"),
    ("status.replicas", "DeploymentStatus"),
    ("status.updatedReplicas", "DeploymentStatus"),
    ("status.readyReplicas", "DeploymentStatus"),
    ("status.availableReplicas", "DeploymentStatus"),
    ("status.unavailableReplicas", "DeploymentStatus"),
    ("status.terminatingReplicas", "DeploymentStatus"),
    ("status.collisionCount", "DeploymentStatus"),
];

const STATEFUL_SET_INT32: &[(&str, &str)] = &[
    ("spec.replicas", "StatefulSetSpec"),
    ("spec.minReadySeconds", "StatefulSetSpec"),
    ("spec.revisionHistoryLimit", "StatefulSetSpec"),
    (
        "spec.updateStrategy.rollingUpdate.partition",
        "RollingUpdateStatefulSetStrategy",
    ),
    ("spec.ordinals.start", "StatefulSetOrdinals"),
    ("status.replicas", "StatefulSetStatus"),
    ("status.readyReplicas", "StatefulSetStatus"),
    ("status.currentReplicas", "StatefulSetStatus"),
    ("status.updatedReplicas", "StatefulSetStatus"),
    ("status.availableReplicas", "StatefulSetStatus"),
    ("status.collisionCount", "StatefulSetStatus"),
];

const DAEMON_SET_INT32: &[(&str, &str)] = &[
    ("spec.minReadySeconds", "DaemonSetSpec"),
    ("spec.revisionHistoryLimit", "DaemonSetSpec"),
    ("status.currentNumberScheduled", "DaemonSetStatus"),
    ("status.numberMisscheduled", "DaemonSetStatus"),
    ("status.desiredNumberScheduled", "DaemonSetStatus"),
    ("status.numberReady", "DaemonSetStatus"),
    ("status.updatedNumberScheduled", "DaemonSetStatus"),
    ("status.numberAvailable", "DaemonSetStatus"),
    ("status.numberUnavailable", "DaemonSetStatus"),
    ("status.collisionCount", "DaemonSetStatus"),
];

const JOB_INT32: &[(&str, &str)] = &[
    ("spec.parallelism", "JobSpec"),
    ("spec.completions", "JobSpec"),
    ("spec.backoffLimit", "JobSpec"),
    ("spec.backoffLimitPerIndex", "JobSpec"),
    ("spec.maxFailedIndexes", "JobSpec"),
    ("spec.ttlSecondsAfterFinished", "JobSpec"),
    ("status.active", "JobStatus"),
    ("status.succeeded", "JobStatus"),
    ("status.failed", "JobStatus"),
    ("status.ready", "JobStatus"),
    ("status.terminating", "JobStatus"),
];

const CRON_JOB_INT32: &[(&str, &str)] = &[
    ("spec.successfulJobsHistoryLimit", "CronJobSpec"),
    ("spec.failedJobsHistoryLimit", "CronJobSpec"),
    ("spec.jobTemplate.spec.parallelism", "JobSpec"),
    ("spec.jobTemplate.spec.completions", "JobSpec"),
    ("spec.jobTemplate.spec.backoffLimit", "JobSpec"),
];

const SERVICE_INT32: &[(&str, &str)] = &[
    ("spec.ports[].port", "ServicePort"),
    ("spec.ports[].nodePort", "ServicePort"),
    ("spec.healthCheckNodePort", "ServiceSpec"),
];

const LEASE_INT32: &[(&str, &str)] = &[
    ("spec.leaseDurationSeconds", "LeaseSpec"),
    ("spec.leaseTransitions", "LeaseSpec"),
];

const EVENT_INT32: &[(&str, &str)] = &[("count", "Event"), ("series.count", "EventSeries")];

const ENDPOINTS_INT32: &[(&str, &str)] = &[("subsets[].ports[].port", "EndpointPort")];

const ENDPOINT_SLICE_INT32: &[(&str, &str)] = &[("ports[].port", "EndpointPort")];

/// The `int32` fields of a built-in kind, as (path prefix, fields relative
/// to it with the Go struct holding each): a value a typed client decodes
/// into an `i32`, which the cluster must not store out of range (one such
/// object would make every list of its kind undecodable). Paths are
/// dotted keys; `[]` after a key means each element of that array.
pub(crate) fn int32_fields(
    def: &ResourceDef,
) -> &'static [(&'static str, &'static [(&'static str, &'static str)])] {
    const TEMPLATE: &str = "spec.template.spec";
    match (def.group, def.plural) {
        ("", "pods") => &[("", POD_INT32), ("spec", POD_SPEC_INT32)],
        ("", "replicationcontrollers") => &[
            ("", REPLICATION_CONTROLLER_INT32),
            (TEMPLATE, POD_SPEC_INT32),
        ],
        ("apps", "replicasets") => &[("", REPLICA_SET_INT32), (TEMPLATE, POD_SPEC_INT32)],
        ("apps", "deployments") => &[("", DEPLOYMENT_INT32), (TEMPLATE, POD_SPEC_INT32)],
        ("apps", "statefulsets") => &[("", STATEFUL_SET_INT32), (TEMPLATE, POD_SPEC_INT32)],
        ("apps", "daemonsets") => &[("", DAEMON_SET_INT32), (TEMPLATE, POD_SPEC_INT32)],
        ("batch", "jobs") => &[("", JOB_INT32), (TEMPLATE, POD_SPEC_INT32)],
        ("batch", "cronjobs") => &[
            ("", CRON_JOB_INT32),
            ("spec.jobTemplate.spec.template.spec", POD_SPEC_INT32),
        ],
        ("", "services") => &[("", SERVICE_INT32)],
        ("coordination.k8s.io", "leases") => &[("", LEASE_INT32)],
        ("", "events") => &[("", EVENT_INT32)],
        ("", "endpoints") => &[("", ENDPOINTS_INT32)],
        ("discovery.k8s.io", "endpointslices") => &[("", ENDPOINT_SLICE_INT32)],
        _ => &[],
    }
}

/// A workload's `spec.selector` (a LabelSelector object) is present, not
/// empty and matches the template's labels.
fn check_selector(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let parsed = match obj.at(&["spec", "selector"]) {
        Some(s) => LabelSelector::from_object(s)
            .map_err(|e| invalid(def, obj, "spec.selector", &format!("Invalid value: {e}")))?,
        None => LabelSelector::default(),
    };
    if parsed.is_empty() {
        return Err(invalid(
            def,
            obj,
            "spec.selector",
            &format!(
                "Required value: empty selector is invalid for {}",
                def.singular
            ),
        ));
    }
    let labels = obj.at(&["spec", "template", "metadata", "labels"]);
    if !parsed.matches(labels) {
        return Err(invalid(
            def,
            obj,
            "spec.template.metadata.labels",
            "Invalid value: `selector` does not match template `labels`",
        ));
    }
    Ok(())
}

fn default_replicas(obj: &mut Value) {
    default(object_at(obj, "spec"), "replicas", json!(1));
}

struct Pods;
impl KindHooks for Pods {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            default_pod_spec(spec);
        }
        obj["status"] = json!({"phase": "Pending"});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        validate_containers(def, obj, &["spec"])
    }
}

struct ReplicationControllers;
impl KindHooks for ReplicationControllers {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default_replicas(obj);
        default_template(obj);
        let template_labels = obj.at(&["spec", "template", "metadata", "labels"]).cloned();
        let spec = object_at(obj, "spec");
        let empty = spec
            .get("selector")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
        if empty && let Some(labels) = template_labels {
            spec.insert("selector".into(), labels);
        }
        obj["status"] = json!({"replicas": 0});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_nonnegative(def, obj, &["replicas", "minReadySeconds"])?;
        let selector = obj.at(&["spec", "selector"]).and_then(Value::as_object);
        let Some(selector) = selector.filter(|s| !s.is_empty()) else {
            return Err(invalid(def, obj, "spec.selector", "Required value"));
        };
        if let Some(template) = obj.at(&["spec", "template"]) {
            let labels = template.at(&["metadata", "labels"]);
            let matches = selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !matches {
                return Err(invalid(
                    def,
                    obj,
                    "spec.template.metadata.labels",
                    "Invalid value: `selector` does not match template `labels`",
                ));
            }
        }
        Ok(())
    }
}

struct ReplicaSets;
impl KindHooks for ReplicaSets {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default_replicas(obj);
        default_template(obj);
        obj["status"] = json!({"replicas": 0});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_selector(def, obj)?;
        check_nonnegative(def, obj, &["replicas", "minReadySeconds"])
    }
}

struct Deployments;
impl KindHooks for Deployments {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default_replicas(obj);
        default_template(obj);
        let spec = object_at(obj, "spec");
        default(
            spec,
            "strategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
        );
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "progressDeadlineSeconds", json!(600));
        obj["status"] = json!({});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_selector(def, obj)?;
        check_nonnegative(
            def,
            obj,
            &[
                "replicas",
                "minReadySeconds",
                "revisionHistoryLimit",
                "progressDeadlineSeconds",
            ],
        )
    }
}

struct StatefulSets;
impl KindHooks for StatefulSets {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default_replicas(obj);
        default_template(obj);
        let spec = object_at(obj, "spec");
        default(spec, "podManagementPolicy", json!("OrderedReady"));
        default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}),
        );
        default(spec, "revisionHistoryLimit", json!(10));
        default(
            spec,
            "persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
        );
        obj["status"] = json!({"replicas": 0, "availableReplicas": 0});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_selector(def, obj)?;
        check_nonnegative(def, obj, &["replicas", "minReadySeconds"])
    }
}

struct DaemonSets;
impl KindHooks for DaemonSets {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default_template(obj);
        let spec = object_at(obj, "spec");
        default(
            spec,
            "updateStrategy",
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
        );
        default(spec, "revisionHistoryLimit", json!(10));
        obj["status"] = json!({"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0, "numberReady": 0});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_selector(def, obj)?;
        check_nonnegative(def, obj, &["minReadySeconds", "revisionHistoryLimit"])
    }
}

struct Jobs;
impl KindHooks for Jobs {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        let uid = obj
            .at(&["metadata", "uid"])
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let name = obj
            .at(&["metadata", "name"])
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        default_template(obj);
        let spec = object_at(obj, "spec");
        if spec.get("parallelism").is_none() && spec.get("completions").is_none() {
            spec.insert("completions".into(), json!(1));
        }
        default(spec, "parallelism", json!(1));
        default(spec, "backoffLimit", json!(6));
        default(spec, "completionMode", json!("NonIndexed"));
        default(spec, "suspend", json!(false));
        default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
        let manual = spec.get("manualSelector").and_then(Value::as_bool) == Some(true);
        if !manual {
            // The generated selector and template labels of
            // kube-apiserver's job strategy.
            let template = object_at(object_at_value(spec, "template"), "metadata");
            let labels = template.entry("labels").or_insert_with(|| json!({}));
            if let Some(labels) = labels.as_object_mut() {
                for (k, v) in [
                    ("batch.kubernetes.io/controller-uid", &uid),
                    ("batch.kubernetes.io/job-name", &name),
                    ("controller-uid", &uid),
                    ("job-name", &name),
                ] {
                    default(labels, k, json!(v));
                }
            }
            let selector = spec.entry("selector").or_insert_with(|| json!({}));
            if let Some(selector) = selector.as_object_mut() {
                let ml = selector.entry("matchLabels").or_insert_with(|| json!({}));
                if let Some(ml) = ml.as_object_mut() {
                    default(ml, "batch.kubernetes.io/controller-uid", json!(uid));
                }
            }
        }
        obj["status"] = json!({});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        check_selector(def, obj)?;
        check_nonnegative(def, obj, &["parallelism", "completions", "backoffLimit"])?;
        match obj
            .at(&["spec", "template", "spec", "restartPolicy"])
            .and_then(Value::as_str)
        {
            Some("Never" | "OnFailure") => Ok(()),
            other => Err(invalid(
                def,
                obj,
                "spec.template.spec.restartPolicy",
                &format!(
                    "Unsupported value: {:?}: supported values: \"OnFailure\", \"Never\"",
                    other.unwrap_or("")
                ),
            )),
        }
    }
}

/// `map[key]` as a `Value` object, created if needed.
fn object_at_value<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Value {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot
}

struct CronJobs;
impl KindHooks for CronJobs {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        let spec = object_at(obj, "spec");
        default(spec, "concurrencyPolicy", json!("Allow"));
        default(spec, "suspend", json!(false));
        default(spec, "successfulJobsHistoryLimit", json!(3));
        default(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(t) = obj
            .pointer_mut("/spec/jobTemplate/spec/template/spec")
            .and_then(Value::as_object_mut)
        {
            default_pod_spec(t);
        }
        obj["status"] = json!({});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        if obj
            .at(&["spec", "schedule"])
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            return Err(invalid(def, obj, "spec.schedule", "Required value"));
        }
        Ok(())
    }
}

struct Services;
impl KindHooks for Services {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        let spec = object_at(obj, "spec");
        default(spec, "type", json!("ClusterIP"));
        default(spec, "sessionAffinity", json!("None"));
        let external_name = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
        if !external_name {
            if spec.get("clusterIP").is_none() {
                spec.insert("clusterIP".into(), json!(next_cluster_ip()));
            }
            let ip = spec.get("clusterIP").cloned().unwrap_or(json!(""));
            default(spec, "clusterIPs", json!([ip]));
            default(spec, "ipFamilies", json!(["IPv4"]));
            default(spec, "ipFamilyPolicy", json!("SingleStack"));
            default(spec, "internalTrafficPolicy", json!("Cluster"));
        }
        if let Some(Value::Array(ports)) = spec.get_mut("ports") {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                default(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    default(p, "targetPort", port);
                }
            }
        }
        obj["status"] = json!({"loadBalancer": {}});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        let spec = obj.get("spec");
        let kind = spec
            .and_then(|s| s.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("ClusterIP");
        let headless = spec
            .and_then(|s| s.get("clusterIP"))
            .and_then(Value::as_str)
            == Some("None");
        let ports = spec.and_then(|s| s.get("ports")).and_then(Value::as_array);
        if kind != "ExternalName" && !headless && ports.is_none_or(Vec::is_empty) {
            return Err(invalid(def, obj, "spec.ports", "Required value"));
        }
        for (i, p) in ports.into_iter().flatten().enumerate() {
            if p.get("port")
                .and_then(Value::as_i64)
                .is_none_or(|n| !(1..=65535).contains(&n))
            {
                return Err(invalid(
                    def,
                    obj,
                    &format!("spec.ports[{i}].port"),
                    "Invalid value: must be between 1 and 65535, inclusive",
                ));
            }
        }
        Ok(())
    }
}

/// Cluster IPs from 10.96.0.0/12, in order (10.96.0.1 is the
/// `kubernetes` service's on a real cluster).
fn next_cluster_ip() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(10);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % (1 << 20);
    format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xff, n & 0xff)
}

struct Secrets;
impl KindHooks for Secrets {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        if let Some(m) = obj.as_object_mut() {
            default(m, "type", json!("Opaque"));
        }
    }
}

struct Claims;
impl KindHooks for Claims {
    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        default(object_at(obj, "spec"), "volumeMode", json!("Filesystem"));
        obj["status"] = json!({"phase": "Pending"});
    }
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        if obj
            .at(&["spec", "accessModes"])
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        {
            return Err(invalid(
                def,
                obj,
                "spec.accessModes",
                "Required value: at least 1 access mode is required",
            ));
        }
        if obj
            .at(&["spec", "resources", "requests", "storage"])
            .is_none()
        {
            return Err(invalid(
                def,
                obj,
                "spec.resources[storage]",
                "Required value",
            ));
        }
        Ok(())
    }
}

struct Bindings;
impl KindHooks for Bindings {
    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        for field in ["kind", "name"] {
            if obj
                .at(&["roleRef", field])
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                return Err(invalid(
                    def,
                    obj,
                    &format!("roleRef.{field}"),
                    "Required value",
                ));
            }
        }
        Ok(())
    }
}

/// The ids of the built-in types the server treats specially.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Builtins {
    /// `customresourcedefinitions`.
    pub(crate) definitions: ResourceId,
    /// `roles`, `clusterroles`, `rolebindings`, `clusterrolebindings`.
    pub(crate) rbac: [ResourceId; 4],
}

/// A review type: create only, answered from the request.
fn review(group: &str, plural: &str, kind: &str, which: Review) -> ResourceDef {
    let mut def = ResourceDef::new(group, "v1", plural, "", kind, false);
    def.verbs = &["create"];
    def.review = Some(which);
    def
}

/// Register every built-in kind; `namespaces` and `pods` get the ids
/// [`NAMESPACES`] and [`PODS`].
pub(crate) fn register_builtins(reg: &Registry) -> Result<Builtins, RegisterError> {
    use Propagation::Orphan;
    let all = &["all"];
    let scale = ScalePaths::builtin;
    let core = |plural, singular, kind, namespaced| {
        ResourceDef::new("", "v1", plural, singular, kind, namespaced)
    };
    let apps =
        |plural, singular, kind| ResourceDef::new("apps", "v1", plural, singular, kind, true);
    let batch =
        |plural, singular, kind| ResourceDef::new("batch", "v1", plural, singular, kind, true);
    let rbac = |plural, singular, kind, namespaced| {
        let mut def = ResourceDef::new(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            singular,
            kind,
            namespaced,
        );
        def.path_segment_names = true;
        def
    };
    let mut namespaces = core("namespaces", "namespace", "Namespace", false)
        .short_names(&["ns"])
        .with_status();
    namespaces.verbs = &[
        "create", "delete", "get", "list", "patch", "update", "watch",
    ];
    let mut pods = core("pods", "pod", "Pod", true)
        .short_names(&["po"])
        .categories(all)
        .with_status()
        .with_generation()
        .with_hooks(Arc::new(Pods));
    pods.binding = true;
    let mut events = core("events", "event", "Event", true).short_names(&["ev"]);
    events.create_on_update = true;
    let mut leases = ResourceDef::new(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
    );
    leases.create_on_update = true;
    let defs = vec![
        namespaces,
        pods,
        // core/v1 keeps OrphanDependents as its default for compatibility.
        core(
            "replicationcontrollers",
            "replicationcontroller",
            "ReplicationController",
            true,
        )
        .short_names(&["rc"])
        .categories(all)
        .with_status()
        .with_scale(scale())
        .with_generation()
        .with_propagation(Orphan)
        .with_hooks(Arc::new(ReplicationControllers)),
        events,
        core("configmaps", "configmap", "ConfigMap", true).short_names(&["cm"]),
        core("secrets", "secret", "Secret", true).with_hooks(Arc::new(Secrets)),
        core("services", "service", "Service", true)
            .short_names(&["svc"])
            .categories(all)
            .with_status()
            .with_hooks(Arc::new(Services)),
        core("serviceaccounts", "serviceaccount", "ServiceAccount", true).short_names(&["sa"]),
        core("endpoints", "endpoints", "Endpoints", true).short_names(&["ep"]),
        core(
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            true,
        )
        .short_names(&["pvc"])
        .with_status()
        .with_hooks(Arc::new(Claims)),
        core("nodes", "node", "Node", false)
            .short_names(&["no"])
            .with_status(),
        core("resourcequotas", "resourcequota", "ResourceQuota", true)
            .short_names(&["quota"])
            .with_status(),
        core("limitranges", "limitrange", "LimitRange", true).short_names(&["limits"]),
        apps("replicasets", "replicaset", "ReplicaSet")
            .short_names(&["rs"])
            .categories(all)
            .with_status()
            .with_scale(scale())
            .with_generation()
            .with_hooks(Arc::new(ReplicaSets)),
        apps("deployments", "deployment", "Deployment")
            .short_names(&["deploy"])
            .categories(all)
            .with_status()
            .with_scale(scale())
            .with_generation()
            .with_hooks(Arc::new(Deployments)),
        apps("statefulsets", "statefulset", "StatefulSet")
            .short_names(&["sts"])
            .categories(all)
            .with_status()
            .with_scale(scale())
            .with_generation()
            .with_hooks(Arc::new(StatefulSets)),
        apps("daemonsets", "daemonset", "DaemonSet")
            .short_names(&["ds"])
            .categories(all)
            .with_status()
            .with_generation()
            .with_hooks(Arc::new(DaemonSets)),
        // batch/v1 Jobs keep OrphanDependents as their default for
        // compatibility (kube-apiserver's job strategy).
        batch("jobs", "job", "Job")
            .categories(all)
            .with_status()
            .with_generation()
            .with_propagation(Orphan)
            .with_hooks(Arc::new(Jobs)),
        batch("cronjobs", "cronjob", "CronJob")
            .short_names(&["cj"])
            .categories(all)
            .with_status()
            .with_generation()
            .with_hooks(Arc::new(CronJobs)),
        ResourceDef::new(
            "discovery.k8s.io",
            "v1",
            "endpointslices",
            "endpointslice",
            "EndpointSlice",
            true,
        ),
        rbac("roles", "role", "Role", true),
        rbac("rolebindings", "rolebinding", "RoleBinding", true).with_hooks(Arc::new(Bindings)),
        rbac("clusterroles", "clusterrole", "ClusterRole", false),
        rbac(
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            false,
        )
        .with_hooks(Arc::new(Bindings)),
        leases,
        ResourceDef::new(
            crate::crd::CRD_GROUP,
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            crate::crd::CRD_KIND,
            false,
        )
        .short_names(&["crd", "crds"])
        .categories(&["api-extensions"])
        .with_status()
        .with_generation()
        .with_hooks(Arc::new(crate::customresources::DefinitionHooks)),
        review(
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
            Review::SelfSubjectAccess,
        ),
        review(
            "authorization.k8s.io",
            "subjectaccessreviews",
            "SubjectAccessReview",
            Review::SubjectAccess,
        ),
        review(
            "authentication.k8s.io",
            "tokenreviews",
            "TokenReview",
            Review::Token,
        ),
        review(
            "authentication.k8s.io",
            "selfsubjectreviews",
            "SelfSubjectReview",
            Review::SelfSubject,
        ),
    ];
    for def in defs {
        let columns = printers::columns_for(def.group, def.plural);
        reg.register(def.with_columns(columns), None)?;
    }
    let core_events = reg
        .snapshot()
        .lookup("", "v1", "events")
        .map(|d| d.id)
        .unwrap_or(0);
    let mut v1_events = ResourceDef::new("events.k8s.io", "v1", "events", "event", "Event", true)
        .short_names(&["ev"]);
    v1_events.create_on_update = true;
    v1_events.conversion = Some(Arc::new(crate::events::EventsV1));
    v1_events.columns = printers::columns_for("events.k8s.io", "events");
    reg.register(v1_events, Some(core_events))?;
    let snap = reg.snapshot();
    let id = |group: &'static str, plural: &'static str| {
        snap.lookup(group, "v1", plural)
            .map(|d| d.id)
            .ok_or(RegisterError::Duplicate {
                group,
                version: "v1",
                plural,
            })
    };
    let rbac = "rbac.authorization.k8s.io";
    Ok(Builtins {
        definitions: id(crate::crd::CRD_GROUP, "customresourcedefinitions")?,
        rbac: [
            id(rbac, "roles")?,
            id(rbac, "clusterroles")?,
            id(rbac, "rolebindings")?,
            id(rbac, "clusterrolebindings")?,
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_policy_defaults_follow_the_tag() {
        for (image, always) in [
            ("nginx", true),
            ("nginx:latest", true),
            ("nginx:1.27", false),
            ("registry:5000/team/app", true),
            ("registry:5000/team/app:v2", false),
            ("app@sha256:abc", false),
        ] {
            assert_eq!(pulls_always(image), always, "{image}");
        }
    }
}
