//! The PATCH content types: JSON merge, strategic merge, JSON patch and
//! (simplified) server-side apply.

use serde_json::{Map, Value};

use crate::status::ApiError;
use crate::store::FieldOwners;

/// A patch body, classified by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    Strategic,
    Json,
    Apply,
}

impl PatchKind {
    /// Classify a `Content-Type` header value; `None` means 415.
    pub(crate) fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// Apply a JSON patch (RFC 6902). A failing `test` or a bad path is 422.
pub(crate) fn json_patch(doc: &mut Value, body: &[u8]) -> Result<(), ApiError> {
    let patch: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    json_patch::patch(doc, &patch.0).map_err(|e| {
        ApiError::new(
            422,
            "Invalid",
            format!("the JSON patch could not be applied: {e}"),
        )
    })
}

/// Apply a JSON merge patch (RFC 7386).
pub(crate) fn merge_patch(doc: &mut Value, patch: &Value) {
    json_patch::merge(doc, patch);
}

/// The merge key of a list field under strategic merge, by field name.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "ownerReferences" => Some("uid"),
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "readinessGates"
        | "resourceClaims" => Some("name"),
        "volumeMounts" => Some("mountPath"),
        "ports" => Some("containerPort"),
        "conditions" => Some("type"),
        _ => None,
    }
}

/// Lists of scalars merged as sets under strategic merge.
fn is_primitive_set(field: &str) -> bool {
    field == "finalizers"
}

/// Remove strategic-merge directives from a value that is inserted as is.
fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Apply a strategic merge patch: a merge patch where known lists are
/// merged by key (`ownerReferences` by uid, containers by name, ...),
/// `finalizers` merge as a set, and the `$patch`, `$retainKeys`,
/// `$deleteFromPrimitiveList/..` and `$setElementOrder/..` directives apply.
pub(crate) fn strategic_merge(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Value::Object(p) = patch else {
        return Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        ));
    };
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    merge_object(doc, p)
}

fn merge_object(doc: &mut Value, patch: &Map<String, Value>) -> Result<(), ApiError> {
    match patch.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            *doc = strip_directives(&Value::Object(patch.clone()));
            return Ok(());
        }
        Some("delete") => {
            *doc = Value::Null;
            return Ok(());
        }
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "unknown patch directive {other:?}"
            )));
        }
        None => {}
    }
    if !doc.is_object() {
        *doc = Value::Object(Map::new());
    }
    let Some(target) = doc.as_object_mut() else {
        return Ok(());
    };
    for (key, value) in patch {
        if key.starts_with("$setElementOrder/") || key == "$retainKeys" {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            let remove: Vec<&Value> = value
                .as_array()
                .map(|a| a.iter().collect())
                .unwrap_or_default();
            if let Some(Value::Array(list)) = target.get_mut(field) {
                list.retain(|v| !remove.contains(&v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(pm) => {
                let slot = target.entry(key.clone()).or_insert(Value::Null);
                merge_object(slot, pm)?;
                if slot.is_null() {
                    target.remove(key);
                }
            }
            Value::Array(pa) => {
                let set_order = patch
                    .get(&format!("$setElementOrder/{key}"))
                    .and_then(Value::as_array)
                    .map(Vec::as_slice);
                let existing = target.get_mut(key).and_then(Value::as_array_mut);
                match (existing, merge_key(key)) {
                    (Some(list), Some(mk)) => merge_list(list, pa, mk, set_order)?,
                    (Some(list), None) if is_primitive_set(key) => {
                        merge_list(list, pa, "", set_order)?;
                    }
                    (None, Some(mk)) => {
                        let mut list = Vec::new();
                        merge_list(&mut list, pa, mk, set_order)?;
                        target.insert(key.clone(), Value::Array(list));
                    }
                    _ => {
                        target.insert(key.clone(), strip_directives(value));
                    }
                }
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    if let Some(Value::Array(keep)) = patch.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        target.retain(|k, _| keep.contains(&k.as_str()));
    }
    Ok(())
}

/// Whether two list elements are the same element: by merge key for
/// lists of maps, by value for lists of scalars (`key` empty).
fn same_element(a: &Value, b: &Value, key: &str) -> bool {
    if key.is_empty() {
        a == b
    } else {
        a.get(key).is_some() && a.get(key) == b.get(key)
    }
}

fn index_in(list: &[&Value], item: &Value, key: &str) -> Option<usize> {
    list.iter().position(|e| same_element(e, item, key))
}

/// Put a merged list in apimachinery's order (strategicpatch
/// `normalizeElementOrder`): the elements the patch names, in the patch's
/// order (or its `$setElementOrder`), interleaved with the elements only
/// the server had, in their old order. A server-only element goes before
/// a patch element only when both were in the old list and it came
/// first there, so elements the patch adds come before the old ones.
fn normalize_order(
    merged: Vec<Value>,
    patch_order: &[&Value],
    server_order: &[&Value],
    key: &str,
) -> Vec<Value> {
    let (mut patch_items, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|e| index_in(patch_order, e, key).is_some());
    patch_items.sort_by_key(|e| index_in(patch_order, e, key));
    server_only.sort_by_key(|e| index_in(server_order, e, key));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (Some(l), Some(r)) => matches!(
                (index_in(server_order, l, key), index_in(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// Merge a patch list into `list`: lists of maps by their merge `key`
/// (with the `$patch: delete` and `$patch: replace` directives), lists of
/// scalars (`key` empty) as sets; then order as apimachinery does.
fn merge_list(
    list: &mut Vec<Value>,
    patch: &[Value],
    key: &str,
    set_order: Option<&[Value]>,
) -> Result<(), ApiError> {
    if patch.iter().any(|e| {
        e.get("$patch").and_then(Value::as_str) == Some("replace")
            && e.as_object().is_some_and(|m| m.len() == 1)
    }) {
        *list = patch
            .iter()
            .filter(|e| e.get("$patch").is_none())
            .map(strip_directives)
            .collect();
        return Ok(());
    }
    let is_delete = |e: &Value| e.get("$patch").and_then(Value::as_str) == Some("delete");
    for elem in patch.iter().filter(|e| is_delete(e)) {
        list.retain(|e| !same_element(e, elem, key));
    }
    let server = list.clone();
    let plain: Vec<&Value> = patch.iter().filter(|e| !is_delete(e)).collect();
    for elem in &plain {
        match (elem, list.iter().position(|e| same_element(e, elem, key))) {
            (Value::Object(pm), Some(i)) => merge_object(&mut list[i], pm)?,
            (_, Some(_)) => {}
            (_, None) => list.push(strip_directives(elem)),
        }
    }
    let order: Vec<&Value> = match set_order {
        Some(order) => order.iter().collect(),
        None => plain,
    };
    let server: Vec<&Value> = server.iter().collect();
    *list = normalize_order(std::mem::take(list), &order, &server, key);
    Ok(())
}

/// JSON pointers of the leaves (scalars and lists) of `value`.
fn leaves(value: &Value, prefix: &mut String, out: &mut Vec<String>) {
    match value {
        Value::Object(m) if !m.is_empty() => {
            for (k, v) in m {
                let len = prefix.len();
                prefix.push('/');
                prefix.push_str(&k.replace('~', "~0").replace('/', "~1"));
                leaves(v, prefix, out);
                prefix.truncate(len);
            }
        }
        _ => out.push(prefix.clone()),
    }
}

/// The fields an applied configuration sets, as JSON pointers; identity
/// fields (`apiVersion`, `kind`, name, namespace) are not owned.
fn applied_fields(config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    leaves(config, &mut String::new(), &mut out);
    out.retain(|p| {
        !matches!(
            p.as_str(),
            "/apiVersion"
                | "/kind"
                | "/metadata/name"
                | "/metadata/namespace"
                | "/metadata/resourceVersion"
        ) && !p.starts_with("/metadata/managedFields")
    });
    out
}

fn remove_pointer(doc: &mut Value, pointer: &str) {
    let Some((parent, last)) = pointer.rsplit_once('/') else {
        return;
    };
    let last = last.replace("~1", "/").replace("~0", "~");
    if let Some(Value::Object(m)) = doc.pointer_mut(parent) {
        m.remove(&last);
    }
}

/// Server-side apply, simplified: `config` is strategically merged into
/// `doc`; fields last applied by another manager with a different value
/// are conflicts (409) unless `force`; fields this manager applied before
/// and no longer sets are removed. Returns the new field ownership.
pub(crate) fn apply(
    doc: &mut Value,
    owners: &FieldOwners,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<FieldOwners, ApiError> {
    let fields = applied_fields(config);
    let mut conflicts = Vec::new();
    for f in &fields {
        if let Some(owner) = owners.get(f)
            && owner != manager
            && doc.pointer(f) != config.pointer(f)
        {
            conflicts.push(format!(
                "conflict with \"{owner}\": {}",
                f.replace('/', ".")
            ));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Apply failed with {} conflict{}: {}",
                conflicts.len(),
                if conflicts.len() == 1 { "" } else { "s" },
                conflicts.join("; ")
            ),
        ));
    }
    let mut next = FieldOwners::new();
    for (path, owner) in owners {
        if owner == manager && !fields.contains(path) {
            remove_pointer(doc, path);
        } else {
            next.insert(path.clone(), owner.clone());
        }
    }
    strategic_merge(doc, config)?;
    for f in fields {
        next.insert(f, manager.to_string());
    }
    Ok(next)
}

/// After a non-apply write by `manager`, hand over ownership of the
/// tracked fields it changed (and forget fields it removed).
pub(crate) fn record_update(
    owners: &FieldOwners,
    old: &Value,
    new: &Value,
    manager: &str,
) -> FieldOwners {
    let mut next = FieldOwners::new();
    for (path, owner) in owners {
        match (old.pointer(path), new.pointer(path)) {
            (_, None) => {}
            (a, Some(b)) if a == Some(b) => {
                next.insert(path.clone(), owner.clone());
            }
            _ => {
                next.insert(path.clone(), manager.to_string());
            }
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_owner_references_delete_by_uid() {
        let mut doc = json!({"metadata": {"ownerReferences": [
            {"uid": "a", "name": "x"}, {"uid": "b", "name": "y"}
        ], "finalizers": ["f1"]}});
        strategic_merge(
            &mut doc,
            &json!({"metadata": {
                "ownerReferences": [{"uid": "a", "$patch": "delete"}, {"uid": "c", "name": "z"}],
                "finalizers": ["f2"],
                "labels": {"k": "v"}
            }}),
        )
        .unwrap();
        assert_eq!(
            doc,
            json!({"metadata": {
                "ownerReferences": [{"uid": "c", "name": "z"}, {"uid": "b", "name": "y"}],
                "finalizers": ["f2", "f1"],
                "labels": {"k": "v"}
            }})
        );
    }

    fn containers(names: &[&str]) -> Value {
        Value::Array(
            names
                .iter()
                .map(|n| json!({"name": n, "image": "i"}))
                .collect(),
        )
    }

    fn merged_names(original: &[&str], patch: Value) -> Vec<String> {
        let mut doc = json!({"spec": {"containers": containers(original)}});
        strategic_merge(&mut doc, &json!({"spec": patch})).unwrap();
        doc["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn merged_lists_are_ordered_as_apimachinery_orders_them() {
        // The conformance "Replace and Patch tests": an added container comes first.
        assert_eq!(
            merged_names(&["a"], json!({"containers": containers(&["b"])})),
            ["b", "a"]
        );
        // Elements both had keep the old order; changed ones stay in place.
        assert_eq!(
            merged_names(&["a", "b"], json!({"containers": containers(&["b"])})),
            ["a", "b"]
        );
        assert_eq!(
            merged_names(
                &["a", "b", "c"],
                json!({"containers": containers(&["c", "a"])})
            ),
            ["b", "c", "a"],
            "among the elements it names, the patch's order wins"
        );
        // New elements in the patch's order, before the server-only ones they precede.
        assert_eq!(
            merged_names(&["a", "b"], json!({"containers": containers(&["x", "a"])})),
            ["x", "a", "b"]
        );
        assert_eq!(
            merged_names(
                &["a", "b"],
                json!({"containers": containers(&["b", "x", "y"])})
            ),
            ["a", "b", "x", "y"]
        );
        // $setElementOrder decides the order of the named elements.
        let patch = json!({
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
            "containers": [{"name": "a", "image": "j"}]
        });
        assert_eq!(merged_names(&["a", "b"], patch), ["b", "a"]);
    }

    #[test]
    fn apply_conflicts_with_other_manager() {
        let mut doc = json!({"spec": {}});
        let owners = apply(
            &mut doc,
            &FieldOwners::new(),
            &json!({"spec": {"holder": "a"}}),
            "a",
            false,
        )
        .unwrap();
        let err = apply(
            &mut doc.clone(),
            &owners,
            &json!({"spec": {"holder": "b"}}),
            "b",
            false,
        )
        .unwrap_err();
        assert_eq!(err.code, 409);
        // Same value: no conflict.
        apply(
            &mut doc.clone(),
            &owners,
            &json!({"spec": {"holder": "a"}}),
            "b",
            false,
        )
        .unwrap();
        // Dropping a field removes it.
        let owners2 = apply(&mut doc, &owners, &json!({"spec": {}}), "a", false).unwrap();
        assert_eq!(doc, json!({"spec": {}}));
        assert!(owners2.is_empty() || !owners2.contains_key("/spec/holder"));
    }
}
