//! Per-resource rules: defaulting, validation and what an update may change.

use crate::json::At;
use serde_json::{Map, Value, json};

use crate::crd::field::{BadValue, FieldError, aggregate_message};
use crate::crd::names;
use crate::kinds::{self, NAMESPACES, PODS};
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

/// DNS-1123 label: lower-case alphanumerics and '-', starting and ending
/// alphanumeric, at most 63 characters.
pub(crate) fn is_dns_label(s: &str) -> bool {
    names::dns1123_label(s).is_empty()
}

/// DNS-1123 subdomain: dot-separated labels, at most 253 characters in
/// all. As in kube-apiserver, a part may be longer than 63.
pub(crate) fn is_dns_subdomain(s: &str) -> bool {
    names::dns1123_subdomain(s).is_empty()
}

/// What is wrong with `name` as the name of an object of `def`, by the
/// rule kube-apiserver applies to that kind: namespaces are DNS-1123
/// labels, services DNS-1035 labels, everything else DNS-1123 subdomains.
fn name_problems(def: &ResourceDef, name: &str) -> Vec<String> {
    if def.id == NAMESPACES {
        names::dns1123_label(name)
    } else if def.group.is_empty() && def.plural == "services" {
        names::dns1035_label(name)
    } else if def.path_segment_names {
        // RBAC objects (`system:discovery`): `ValidatePathSegmentName`.
        names::path_segment_name(name)
    } else {
        names::dns1123_subdomain(name)
    }
}

/// `TotalAnnotationSizeLimitB`: the most bytes all of an object's
/// annotations (keys and values) may take.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

/// `ValidateLabels` and `ValidateAnnotations`: keys are qualified names,
/// label values valid label values, and the annotations together at most
/// 256 KiB.
fn metadata_problems(meta: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            for m in names::qualified_name(k) {
                errs.push(FieldError::invalid("metadata.labels", BadValue::str(k), m));
            }
            let v = v.as_str().unwrap_or("");
            for m in names::label_value(v) {
                errs.push(FieldError::invalid("metadata.labels", BadValue::str(v), m));
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0usize;
        for (k, v) in annotations {
            for m in names::qualified_name(&k.to_ascii_lowercase()) {
                errs.push(FieldError::invalid(
                    "metadata.annotations",
                    BadValue::str(k),
                    m,
                ));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > ANNOTATIONS_MAX_BYTES {
            errs.push(FieldError::too_long(
                "metadata.annotations",
                BadValue::Omitted,
                ANNOTATIONS_MAX_BYTES as i64,
            ));
        }
    }
    errs
}

/// Go's name for the JSON type of `v`, as `UnmarshalTypeError` words it.
fn json_type(v: &Value) -> String {
    match v {
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".into(),
        Value::Bool(_) => "bool".into(),
        Value::Array(_) => "array".into(),
        Value::Object(_) => "object".into(),
        Value::Null => "null".into(),
    }
}

/// Every value at `path` (dotted keys; `key[]` walks each element of the
/// array at `key`) under `v`.
fn values_at<'a>(v: &'a Value, path: &[&str], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = path.split_first() else {
        out.push(v);
        return;
    };
    match first.strip_suffix("[]") {
        Some(key) => {
            for item in v.get(key).and_then(Value::as_array).into_iter().flatten() {
                values_at(item, rest, out);
            }
        }
        None => {
            if let Some(next) = v.get(*first) {
                values_at(next, rest, out);
            }
        }
    }
}

/// The `int32` fields of the object that a typed client could not decode
/// (out of range, fractional, or not a number), worded as Go's JSON
/// decoder words it.
fn int32_problem(def: &ResourceDef, obj: &Value) -> Option<String> {
    let mut found = Vec::new();
    let mut segments = Vec::new();
    for (prefix, fields) in kinds::int32_fields(def) {
        for (path, go_struct) in *fields {
            segments.clear();
            segments.extend(prefix.split('.').filter(|p| !p.is_empty()));
            segments.extend(path.split('.'));
            found.clear();
            values_at(obj, &segments, &mut found);
            let bad = found
                .iter()
                .find(|v| !v.is_null() && v.as_i64().is_none_or(|n| i32::try_from(n).is_err()));
            if let Some(v) = bad {
                let field = segments.join(".").replace("[]", "");
                return Some(format!(
                    "json: cannot unmarshal {} into Go struct field {go_struct}.{field} of type int32",
                    json_type(v),
                ));
            }
        }
    }
    None
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

/// Check the request body names the right kind and decodes as that type:
/// a `400` as kube-apiserver answers a body it cannot decode
/// ("<Kind> in version "<v>" cannot be handled as a <Kind>: ...").
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
    })?;
    if let Some(problem) = int32_problem(def, obj) {
        let version = def
            .api_version
            .rsplit('/')
            .next()
            .unwrap_or(def.api_version);
        return Err(ApiError::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {problem}",
            kind = def.kind
        )));
    }
    Ok(())
}

/// The error for a patched object that does not decode: kube-apiserver
/// answers it with `422 Invalid` on the field `patch`.
pub(crate) fn patched_invalid(def: &ResourceDef, obj: &Value, e: ApiError) -> ApiError {
    let name = obj
        .at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("");
    ApiError::invalid(
        def.kind,
        name,
        format!("patch: Invalid value: {}", e.message),
    )
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
    let mut errs: Vec<FieldError> = name_problems(def, name)
        .into_iter()
        .map(|m| FieldError::invalid("metadata.name", BadValue::str(name), m))
        .collect();
    if let Some(meta) = obj.get("metadata") {
        errs.extend(metadata_problems(meta));
    }
    if let Some(message) = aggregate_message(&errs) {
        return Err(ApiError::invalid(def.kind, name, message));
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

/// Whether two objects are equal in everything but their `status`.
fn equal_but_status(a: &Value, b: &Value) -> bool {
    match (a.as_object(), b.as_object()) {
        (Some(a), Some(b)) => {
            let not_status = |(k, _): &(&String, &Value)| k.as_str() != "status";
            a.iter().filter(not_status).eq(b.iter().filter(not_status))
        }
        _ => false,
    }
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
        // The result is the live object with the status (and the
        // resourceVersion precondition) of what was sent. What was sent
        // is usually the live object already but for its status (a
        // status patch), and then it is the result as it is.
        if equal_but_status(old, new) {
            return Ok(());
        }
        let status = new.as_object_mut().and_then(|m| m.remove("status"));
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

/// What a typed client could not decode in a `Scale` body: its
/// `spec.replicas` is an `int32`.
pub(crate) fn scale_problem(scale: &Value) -> Option<String> {
    match scale.at(&["spec", "replicas"]) {
        Some(v) if !v.is_null() && v.as_i64().is_none_or(|n| i32::try_from(n).is_err()) => {
            Some(format!(
                "Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {} into Go struct field ScaleSpec.spec.replicas of type int32",
                json_type(v)
            ))
        }
        _ => None,
    }
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
