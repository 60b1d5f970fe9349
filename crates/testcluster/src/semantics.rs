//! Per-resource rules: defaulting, validation and what an update may change.

use crate::json::At;
use serde_json::{Map, Value, json};

use crate::kinds::{NAMESPACES, PODS};
use crate::resources::{ResourceDef, ScalePaths};
use crate::status::ApiError;

/// A random (version 4) UUID, from the thread-local generator rather than
/// a system call per object.
pub(crate) fn random_uid() -> String {
    use rand::Rng;
    let bytes: [u8; 16] = rand::rng().random();
    uuid::Builder::from_random_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// A 5-character random suffix from the alphabet kube-apiserver uses
/// (no vowels, no confusable characters).
pub(crate) fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Lower-case alphanumerics and '-', starting and ending alphanumeric.
fn is_label_shaped(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// DNS-1123 label: label-shaped, at most 63 characters.
pub(crate) fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && is_label_shaped(s)
}

/// DNS-1123 subdomain: dot-separated label-shaped parts, at most 253
/// characters in all. As in kube-apiserver, a part may be longer than 63.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label_shaped)
}

fn invalid(def: &ResourceDef, name: &str, field: &str, why: &str) -> ApiError {
    ApiError::invalid(def.kind, name, format!("{field}: {why}"))
}

/// The object's metadata map, created if missing. Callers only pass objects
/// (request bodies are checked to be objects first).
pub(crate) fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let slot = &mut obj["metadata"];
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    match slot {
        Value::Object(m) => m,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn string_map(v: &Value, field: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Object(m) => match m.iter().find(|(_, x)| !x.is_string()) {
            Some((k, _)) => Err(format!("{field}.{k}: expected a string")),
            None => Ok(()),
        },
        _ => Err(format!("{field}: expected a map of strings")),
    }
}

fn array_of(v: &Value, field: &str, item: fn(&Value) -> bool, what: &str) -> Result<(), String> {
    match v {
        Value::Null => Ok(()),
        Value::Array(items) if items.iter().all(item) => Ok(()),
        Value::Array(_) => Err(format!("{field}: expected a list of {what}")),
        _ => Err(format!("{field}: expected a list")),
    }
}

fn opt_str(v: Option<&Value>) -> bool {
    v.is_none_or(|x| x.is_string() || x.is_null())
}

/// Check that the body has the shape clients decode: the fields every
/// client reads (metadata, the object sections, pod containers) have the
/// right JSON types. Cheaper than decoding the typed k8s-openapi object on
/// every write, and catches what would make stored objects undecodable
/// for informers.
fn shape_check(def: &ResourceDef, obj: &Value) -> Result<(), String> {
    let null = Value::Null;
    let meta = obj.get("metadata").unwrap_or(&null);
    if !meta.is_object() && !meta.is_null() {
        return Err("metadata: expected an object".into());
    }
    for field in [
        "name",
        "generateName",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "deletionTimestamp",
    ] {
        if !opt_str(meta.get(field)) {
            return Err(format!("metadata.{field}: expected a string"));
        }
    }
    string_map(meta.get("labels").unwrap_or(&null), "metadata.labels")?;
    string_map(
        meta.get("annotations").unwrap_or(&null),
        "metadata.annotations",
    )?;
    array_of(
        meta.get("finalizers").unwrap_or(&null),
        "metadata.finalizers",
        Value::is_string,
        "strings",
    )?;
    array_of(
        meta.get("ownerReferences").unwrap_or(&null),
        "metadata.ownerReferences",
        |r| {
            r.is_object()
                && ["apiVersion", "kind", "name", "uid"]
                    .iter()
                    .all(|f| r.get(*f).is_some_and(Value::is_string))
                && r.get("controller")
                    .is_none_or(|c| c.is_boolean() || c.is_null())
        },
        "objects with string apiVersion, kind, name and uid",
    )?;
    for section in ["spec", "status"] {
        if let Some(v) = obj.get(section)
            && !v.is_object()
            && !v.is_null()
        {
            return Err(format!("{section}: expected an object"));
        }
    }
    if def.id == PODS {
        array_of(
            obj.at(&["spec", "containers"]).unwrap_or(&null),
            "spec.containers",
            |c| c.is_object() && opt_str(c.get("name")) && opt_str(c.get("image")),
            "containers",
        )?;
    }
    Ok(())
}

/// Check the request body names the right kind and decodes as that type.
pub(crate) fn check_body(def: &ResourceDef, obj: &mut Value) -> Result<(), ApiError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    match map.get("kind").and_then(Value::as_str) {
        Some(k) if k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the body kind {k:?} does not match the resource kind {:?}",
                def.kind
            )));
        }
        _ => {}
    }
    map.insert("kind".into(), Value::String(def.kind.into()));
    map.insert("apiVersion".into(), Value::String(def.api_version.into()));
    shape_check(def, obj).map_err(|e| {
        ApiError::bad_request(format!("the request body is not a valid {}: {e}", def.kind))
    })
}

/// Defaulting on create, plus the fields the server owns.
pub(crate) fn prepare_create(
    def: &ResourceDef,
    obj: &mut Value,
    namespace: &str,
    uid: String,
    now: &str,
) {
    let name = obj
        .at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let meta = meta_mut(obj);
    meta.remove("resourceVersion");
    meta.remove("deletionTimestamp");
    meta.remove("deletionGracePeriodSeconds");
    meta.remove("managedFields");
    meta.insert("uid".into(), Value::String(uid));
    meta.insert("creationTimestamp".into(), Value::String(now.to_string()));
    if def.namespaced {
        meta.insert("namespace".into(), Value::String(namespace.into()));
    } else {
        meta.remove("namespace");
    }
    if def.tracks_generation {
        meta.insert("generation".into(), json!(1));
    } else {
        meta.remove("generation");
    }
    if def.id == NAMESPACES {
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        if let Some(l) = labels.as_object_mut() {
            l.insert("kubernetes.io/metadata.name".into(), Value::String(name));
        }
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
        obj["status"] = json!({"phase": "Active"});
    }
    if let Some(hooks) = &def.hooks {
        hooks.default_create(def, obj);
    }
}

/// Validation shared by create and update; errors are 422 Invalid.
pub(crate) fn validate(def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return Err(invalid(
            def,
            name,
            "metadata.name",
            "Required value: name or generateName is required",
        ));
    }
    let valid_name = if def.id == NAMESPACES {
        is_dns_label(name)
    } else if def.path_segment_names {
        // RBAC objects (`system:discovery`): kube-apiserver's
        // `ValidatePathSegmentName`.
        let problems = crate::crd::names::path_segment_name(name);
        if let Some(problem) = problems.first() {
            return Err(invalid(
                def,
                name,
                "metadata.name",
                &format!("Invalid value: {name:?}: {problem}"),
            ));
        }
        true
    } else {
        is_dns_subdomain(name)
    };
    if !valid_name {
        return Err(invalid(
            def,
            name,
            "metadata.name",
            &format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 {} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                if def.id == NAMESPACES {
                    "label"
                } else {
                    "subdomain"
                }
            ),
        ));
    }
    if let Some(labels) = obj.at(&["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if k.is_empty() || v.as_str().is_none_or(|v| v.len() > 63) {
                return Err(invalid(
                    def,
                    name,
                    "metadata.labels",
                    &format!("Invalid value: {k:?}"),
                ));
            }
        }
    }
    match &def.hooks {
        Some(hooks) => hooks.validate(def, obj),
        None => Ok(()),
    }
}

/// Which part of an object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Main,
    Status,
    Scale,
}

/// Merge a written object with the stored one: server-owned metadata is
/// kept; a main-resource write keeps the stored status, a status write keeps
/// everything but the status; generation is bumped when the spec changes.
pub(crate) fn prepare_update(
    def: &ResourceDef,
    old: &Value,
    new: &mut Value,
    part: Part,
) -> Result<(), ApiError> {
    if part == Part::Status {
        let status = new.get("status").cloned();
        let rv = new.at(&["metadata", "resourceVersion"]).cloned();
        *new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        if let Some(rv) = rv {
            meta_mut(new).insert("resourceVersion".into(), rv);
        }
        return Ok(());
    }
    let name = old
        .at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("");
    if let Some(m) = new.as_object_mut() {
        m.insert("kind".into(), json!(def.kind));
        m.insert("apiVersion".into(), json!(def.api_version));
    }
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let new_meta = meta_mut(new);
    new_meta.remove("managedFields");
    for key in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "generation",
    ] {
        match old_meta.get(key) {
            Some(v) => {
                new_meta.insert(key.into(), v.clone());
            }
            None => {
                new_meta.remove(key);
            }
        }
    }
    if old_meta.get("deletionTimestamp").is_some() {
        let old_f = old_meta
            .get("finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let new_f = new_meta
            .get("finalizers")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if new_f.iter().any(|f| !old_f.contains(f)) {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!(
                    "{} \"{name}\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                    def.kind
                ),
            ));
        }
    }
    if def.status && part == Part::Main {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(m) = new.as_object_mut() {
                    m.remove("status");
                }
            }
        }
    }
    if def.id == NAMESPACES {
        new["spec"] = old.get("spec").cloned().unwrap_or_else(|| json!({}));
    }
    if def.tracks_generation && old.get("spec") != new.get("spec") {
        let generation = old
            .at(&["metadata", "generation"])
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        meta_mut(new).insert("generation".into(), json!(generation));
    }
    Ok(())
}

fn at_path<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(obj, |cur, key| cur.get(key))
}

/// The autoscaling/v1 `Scale` view of a replicated object, read through
/// the type's scale paths.
pub(crate) fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let paths = def.scale.clone().unwrap_or_else(ScalePaths::builtin);
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let selector = match &paths.label_selector {
        Some(path) => at_path(obj, path)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        None => match obj.at(&["spec", "selector"]) {
            Some(Value::Object(m))
                if m.contains_key("matchLabels") || m.contains_key("matchExpressions") =>
            {
                selector_string(obj.at(&["spec", "selector"]))
            }
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(","),
            _ => String::new(),
        },
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": at_path(obj, &paths.spec_replicas).cloned().unwrap_or(json!(0))},
        "status": {
            "replicas": at_path(obj, &paths.status_replicas).cloned().unwrap_or(json!(0)),
            "selector": selector,
        }
    })
}

fn selector_string(sel: Option<&Value>) -> String {
    let Some(sel) = sel else { return String::new() };
    let mut parts = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or("")));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e.get("key").and_then(Value::as_str).unwrap_or("");
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => parts.push(format!("{key} in ({})", values.join(","))),
                Some("NotIn") => parts.push(format!("{key} notin ({})", values.join(","))),
                Some("Exists") => parts.push(key.to_string()),
                Some("DoesNotExist") => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// Write a (possibly patched) `Scale` back into the object's spec.replicas.
pub(crate) fn apply_scale(
    def: &ResourceDef,
    obj: &mut Value,
    scale: &Value,
) -> Result<(), ApiError> {
    let replicas = scale
        .at(&["spec", "replicas"])
        .and_then(Value::as_i64)
        .filter(|r| *r >= 0)
        .ok_or_else(|| {
            ApiError::new(
                422,
                "Invalid",
                "Scale is invalid: spec.replicas: must be a non-negative integer",
            )
        })?;
    let paths = def.scale.clone().unwrap_or_else(ScalePaths::builtin);
    let mut slot = &mut *obj;
    for key in &paths.spec_replicas {
        if !slot.is_object() {
            *slot = json!({});
        }
        slot = &mut slot[key.as_str()];
    }
    *slot = json!(replicas);
    if let Some(rv) = scale
        .at(&["metadata", "resourceVersion"])
        .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    {
        meta_mut(obj).insert("resourceVersion".into(), rv.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_names_follow_kube_apiserver() {
        let long_part = "a".repeat(100);
        assert!(
            is_dns_subdomain(&long_part),
            "parts may exceed 63 characters"
        );
        assert!(is_dns_subdomain(&format!("{long_part}.b-c.d1")));
        assert!(is_dns_subdomain(&"a".repeat(253)));
        for bad in ["", "a..b", "-a", "a-", "A", "a.-b", "a_b", &"a".repeat(254)] {
            assert!(!is_dns_subdomain(bad), "{bad:?}");
        }
        assert!(!is_dns_label(&long_part), "namespace names stay labels");
    }

    fn pod(v: Value) -> Result<(), ApiError> {
        let reg = crate::resources::Registry::new();
        crate::kinds::register_builtins(&reg).unwrap();
        let def = reg.def(PODS).unwrap();
        assert_eq!(def.plural, "pods");
        let mut v = v;
        check_body(&def, &mut v)
    }

    #[test]
    fn bodies_that_clients_could_not_decode_are_rejected() {
        let ok = json!({"metadata": {"name": "a", "labels": {"x": "y"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "o", "uid": "u", "controller": true}]},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}});
        assert!(pod(ok).is_ok());
        for bad in [
            json!({"metadata": "x"}),
            json!({"metadata": {"name": 1}}),
            json!({"metadata": {"labels": {"x": 1}}}),
            json!({"metadata": {"annotations": ["x"]}}),
            json!({"metadata": {"finalizers": [1]}}),
            json!({"metadata": {"ownerReferences": [{"kind": "Pod"}]}}),
            json!({"spec": []}),
            json!({"spec": {"containers": [{"name": 3}]}}),
            json!({"spec": {"containers": {}}}),
            json!({"kind": "Service"}),
        ] {
            let err = pod(bad.clone()).unwrap_err();
            assert_eq!(err.code, 400, "{bad}");
        }
    }
}
