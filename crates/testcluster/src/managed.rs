//! `metadata.managedFields`, maintained as kube-apiserver does for the
//! shapes clients see: one entry per (manager, operation, subresource)
//! with `apiVersion`, `time`, `fieldsType: FieldsV1` and a `fieldsV1` set
//! of the fields that manager last set.
//!
//! An `Update` (create, PUT, any patch but apply) gives its manager the
//! fields it added or changed and takes them from the other managers; an
//! `Apply` gives its manager exactly the fields of its configuration. A
//! field removed from the object is removed from every manager. Sets are
//! written as structured-merge-diff writes them: `f:<field>`, `k:{..}`
//! for list elements with a merge key, `v:<value>` for set-like scalar
//! lists, and `.` for a map or list element that is itself owned. This
//! is not a full structured-merge-diff (no schemas): lists and maps are
//! told apart by field name and shape.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::json::At;
use crate::resources::ResourceDef;

/// Metadata fields the server owns, never in a field set.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// A field set as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Node {
    /// The node itself is owned (`.`), not only its children.
    dot: bool,
    children: BTreeMap<String, Node>,
}

impl Node {
    fn is_empty(&self) -> bool {
        !self.dot && self.children.is_empty()
    }

    fn union(&mut self, other: &Node) {
        self.dot |= other.dot;
        for (k, v) in &other.children {
            self.children.entry(k.clone()).or_default().union(v);
        }
    }

    fn subtract(&mut self, other: &Node) {
        if other.dot {
            self.dot = false;
        }
        for (k, v) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract(v);
                // A leaf of `other` (no children, `.` or a leaf key) takes
                // the whole leaf.
                if (v.children.is_empty() && !v.dot) || mine.is_empty() {
                    self.children.remove(k);
                }
            }
        }
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.dot {
            m.insert(".".into(), json!({}));
        }
        for (k, v) in &self.children {
            m.insert(k.clone(), v.to_json());
        }
        Value::Object(m)
    }

    fn from_json(v: &Value) -> Node {
        let mut node = Node::default();
        for (k, child) in v.as_object().into_iter().flatten() {
            if k == "." {
                node.dot = true;
            } else {
                node.children.insert(k.clone(), Node::from_json(child));
            }
        }
        node
    }
}

/// The `k:{..}` key of a list element under `field`, or `v:<value>` for
/// set-like scalar lists; `None` for lists owned as a whole.
fn element_key(field: &str, elem: &Value) -> Option<String> {
    let keys: &[&str] = match field {
        "finalizers" => return Some(format!("v:{elem}")),
        "ports" if elem.get("containerPort").is_some() => &["containerPort", "protocol"],
        "ports" => &["port", "protocol"],
        "ownerReferences" => &["uid"],
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "readinessGates"
        | "resourceClaims"
        | "containerStatuses"
        | "initContainerStatuses" => &["name"],
        "volumeMounts" => &["mountPath"],
        "conditions" => &["type"],
        _ => return None,
    };
    // `k:` and the key fields as a compact JSON object; each list above
    // is in a JSON object's (sorted) key order.
    let mut key = String::from("k:{");
    for (i, k) in keys.iter().enumerate() {
        if i > 0 {
            key.push(',');
        }
        let _ = write!(key, "\"{k}\":");
        match (elem.get(*k), *k) {
            (Some(v), _) => {
                let _ = write!(key, "{v}");
            }
            (None, "protocol") => key.push_str("\"TCP\""),
            (None, _) => return None,
        }
    }
    key.push('}');
    Some(key)
}

/// Whether an object is a map of scalars (labels, data, ...) rather than a
/// struct with nested fields: such maps own themselves (`.`).
fn is_scalar_map(m: &Map<String, Value>) -> bool {
    !m.is_empty() && m.values().all(|v| !v.is_object() && !v.is_array())
}

/// The field set of the members of object `m`. A member equal to the same
/// member of `like` gets an empty node in place of its fields (see
/// [`fields_unlike`]).
fn object_fields(
    m: &Map<String, Value>,
    like: Option<&Map<String, Value>>,
    skip: impl Fn(&str) -> bool,
) -> Node {
    let mut node = Node::default();
    for (k, v) in m {
        if skip(k) {
            continue;
        }
        let other = like.and_then(|l| l.get(k));
        let set = if other == Some(v) {
            Node::default()
        } else {
            value_fields(k, v, other)
        };
        node.children.insert(format!("f:{k}"), set);
    }
    node
}

/// The field set of `v`, the value of `field`; `like` is the value to
/// leave out equal members of (list elements are never left out).
fn value_fields(field: &str, v: &Value, like: Option<&Value>) -> Node {
    match v {
        // A LabelSelector is owned as a whole (an atomic struct).
        Value::Object(m)
            if field == "selector"
                && (m.contains_key("matchLabels") || m.contains_key("matchExpressions")) =>
        {
            Node::default()
        }
        Value::Object(m) if !m.is_empty() => {
            let mut node = object_fields(m, like.and_then(Value::as_object), |_| false);
            node.dot = is_scalar_map(m);
            node
        }
        Value::Array(items)
            if items.iter().all(|e| element_key(field, e).is_some()) && !items.is_empty() =>
        {
            let mut node = Node::default();
            for e in items {
                let Some(key) = element_key(field, e) else {
                    continue;
                };
                let child = match e {
                    Value::Object(m) => {
                        let mut c = object_fields(m, None, |_| false);
                        c.dot = true;
                        c
                    }
                    _ => Node::default(),
                };
                node.children.insert(key, child);
            }
            node
        }
        _ => Node::default(),
    }
}

/// Which part of the object a write owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource: everything but `status` when the type has a
    /// status subresource.
    Main,
    /// The `status` subresource: only `status`.
    Status,
}

/// The field set of object `obj` within `scope`.
fn fields(def: &ResourceDef, obj: &Value, scope: Scope) -> Node {
    fields_unlike(def, obj, scope, None)
}

/// [`fields`], but a map member whose value equals the same member of
/// `like` gets an empty node in place of its fields. Equal values have
/// equal field sets, so the parts left out are the ones [`changed`] and
/// [`removed`] find nothing in when comparing `obj` with `like`; an
/// update leaves most of an object alone, and its sets need not be built.
fn fields_unlike(def: &ResourceDef, obj: &Value, scope: Scope, like: Option<&Value>) -> Node {
    let Some(top) = obj.as_object() else {
        return Node::default();
    };
    let mut node = object_fields(top, like.and_then(Value::as_object), |k| {
        matches!(k, "apiVersion" | "kind")
            || match scope {
                Scope::Main => k == "status" && def.status,
                Scope::Status => k != "status",
            }
    });
    // The spec and status sections are structs, never owned as a whole.
    for section in ["f:spec", "f:status"] {
        if let Some(n) = node.children.get_mut(section) {
            n.dot = false;
        }
    }
    if let Some(meta) = node.children.get_mut("f:metadata") {
        for f in SERVER_METADATA {
            meta.children.remove(&format!("f:{f}"));
        }
        meta.dot = false;
        if meta.is_empty() {
            node.children.remove("f:metadata");
        }
    }
    node
}

/// Clear `.` on every node but list elements (`k:`/`v:` keys).
fn drop_map_dots(node: &mut Node, element: bool) {
    if !element {
        node.dot = false;
    }
    for (k, child) in &mut node.children {
        drop_map_dots(child, !k.starts_with("f:"));
    }
}

/// [`value_fields`] written straight as `fieldsV1` JSON (no tree), for
/// creates, whose manager owns everything: the hot path of a create that
/// is not from a template.
fn value_fields_json(field: &str, v: &Value) -> Value {
    let mut out = Map::new();
    match v {
        Value::Object(m)
            if field == "selector"
                && (m.contains_key("matchLabels") || m.contains_key("matchExpressions")) => {}
        Value::Object(m) if !m.is_empty() => {
            if is_scalar_map(m) {
                out.insert(".".into(), json!({}));
            }
            for (k, child) in m {
                out.insert(format!("f:{k}"), value_fields_json(k, child));
            }
        }
        Value::Array(items)
            if !items.is_empty() && items.iter().all(|e| element_key(field, e).is_some()) =>
        {
            for e in items {
                let Some(key) = element_key(field, e) else {
                    continue;
                };
                let mut child = Map::new();
                if let Value::Object(m) = e {
                    child.insert(".".into(), json!({}));
                    for (k, c) in m {
                        child.insert(format!("f:{k}"), value_fields_json(k, c));
                    }
                }
                out.insert(key, Value::Object(child));
            }
        }
        _ => {}
    }
    Value::Object(out)
}

/// [`fields`] as `fieldsV1` JSON.
fn fields_json(def: &ResourceDef, obj: &Value, scope: Scope) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(top) = obj.as_object() else {
        return out;
    };
    for (k, v) in top {
        let skip = matches!(k.as_str(), "apiVersion" | "kind")
            || match scope {
                Scope::Main => k == "status" && def.status,
                Scope::Status => k != "status",
            };
        if skip {
            continue;
        }
        let mut set = value_fields_json(k, v);
        if let Some(m) = set.as_object_mut() {
            if matches!(k.as_str(), "metadata" | "spec" | "status") {
                m.remove(".");
            }
            if k == "metadata" {
                for f in SERVER_METADATA {
                    m.remove(&format!("f:{f}"));
                }
                if m.is_empty() {
                    continue;
                }
            }
        }
        out.insert(format!("f:{k}"), set);
    }
    out
}

/// The elements of list `v` (the value of `field`) with their keys, in
/// order; empty when `v` is not a list.
fn keyed<'a>(field: &str, v: Option<&'a Value>) -> Vec<(String, &'a Value)> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|e| Some((element_key(field, e)?, e)))
        .collect()
}

/// The value under a field-set path element of `v`; `elements` are `v`'s
/// from [`keyed`] (the first element with the key is the one).
fn child<'a>(
    v: Option<&'a Value>,
    elements: &[(String, &'a Value)],
    key: &str,
) -> Option<&'a Value> {
    if let Some(name) = key.strip_prefix("f:") {
        return v?.get(name);
    }
    elements.iter().find(|(k, _)| k == key).map(|(_, e)| *e)
}

/// The part of `set` (the field set of `new`, where [`fields_unlike`] may
/// have left out what equals `old`) whose values differ in `old`.
fn changed(set: &Node, field: &str, old: Option<&Value>, new: Option<&Value>) -> Node {
    let mut out = Node::default();
    if set.children.is_empty() {
        if old != new {
            out.dot = set.dot;
        }
        return out;
    }
    // Every key of `set` is found in `new`, so equal values differ nowhere.
    if old.is_some() && old == new {
        return out;
    }
    out.dot = set.dot && old.is_none();
    let by_key = set.children.keys().any(|k| !k.starts_with("f:"));
    let (old_elements, new_elements) = if by_key {
        (keyed(field, old), keyed(field, new))
    } else {
        (Vec::new(), Vec::new())
    };
    for (k, sub) in &set.children {
        let name = k.strip_prefix("f:").unwrap_or(field);
        let (o, n) = (child(old, &old_elements, k), child(new, &new_elements, k));
        let leaf = sub.children.is_empty() && !sub.dot;
        if leaf {
            if o != n {
                out.children.insert(k.clone(), Node::default());
            }
        } else {
            let c = changed(sub, name, o, n);
            if !c.is_empty() {
                out.children.insert(k.clone(), c);
            }
        }
    }
    out
}

/// The fields of `old`'s set that `new`'s set lacks.
fn removed(old: &Node, new: &Node) -> Node {
    let mut out = Node::default();
    for (k, o) in &old.children {
        match new.children.get(k) {
            None => {
                out.children.insert(k.clone(), Node::default());
            }
            Some(n) => {
                let r = removed(o, n);
                if !r.is_empty() {
                    out.children.insert(k.clone(), r);
                }
            }
        }
    }
    out
}

/// What a write does to field ownership.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operation<'a> {
    /// A create, PUT or non-apply patch.
    Update,
    /// A server-side apply of this configuration.
    Apply(&'a Value),
}

struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: Option<String>,
    fields: Fields,
}

/// An entry's field set: kept as the stored `fieldsV1` JSON until a write
/// changes it, since most writes leave most managers' sets alone.
struct Fields {
    /// The `fieldsV1` as stored (written by this module, so `tree` would
    /// write it back the same), or `Null` once `tree` replaced it.
    stored: Value,
    tree: Option<Node>,
}

impl Fields {
    fn stored(v: &Value) -> Fields {
        Fields {
            stored: v.clone(),
            tree: None,
        }
    }

    /// A set this write made.
    fn made(tree: Node) -> Fields {
        Fields {
            stored: Value::Null,
            tree: Some(tree),
        }
    }

    fn tree(&mut self) -> &mut Node {
        let stored = &mut self.stored;
        self.tree
            .get_or_insert_with(|| Node::from_json(&std::mem::take(stored)))
    }

    fn subtract(&mut self, other: &Node) {
        // Without a key (or `.`) in common, subtracting changes nothing.
        let touched = self.tree.is_some()
            || self.stored.as_object().is_some_and(|m| {
                (other.dot && m.contains_key("."))
                    || other.children.keys().any(|k| m.contains_key(k))
            });
        if touched {
            self.tree().subtract(other);
        }
    }

    fn is_empty(&self) -> bool {
        match &self.tree {
            Some(t) => t.is_empty(),
            None => self.stored.as_object().is_none_or(Map::is_empty),
        }
    }

    fn into_json(self) -> Value {
        match self.tree {
            Some(t) => t.to_json(),
            None => self.stored,
        }
    }
}

fn entries_of(obj: &Value) -> Vec<Entry> {
    obj.at(&["metadata", "managedFields"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            Entry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: e
                    .get("subresource")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                fields: Fields::stored(e.get("fieldsV1").unwrap_or(&Value::Null)),
            }
        })
        .collect()
}

/// Record a write by `manager` in `new`'s managedFields: `old` is the
/// object before (`None` for a create), whose entries carry over. The
/// managedFields `new` arrived with are not read: kube-apiserver takes a
/// status (subresource) write's from the live object, and an update's
/// too when the request has none (`decodeLiveOrNew` in its field
/// manager). Not modelled: a main-resource update that sets them, or
/// resets them with `[]`.
pub(crate) fn record(
    def: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    operation: Operation<'_>,
    scope: Scope,
    time: &str,
) {
    if old.is_none() && matches!(operation, Operation::Update) {
        // A create: its manager is the only one and owns every field.
        let set = fields_json(def, new, scope);
        let meta = crate::semantics::meta_mut(new);
        if set.is_empty() {
            meta.remove("managedFields");
            return;
        }
        let mut entry = json!({
            "manager": manager, "operation": "Update", "apiVersion": def.api_version,
            "time": time, "fieldsType": "FieldsV1", "fieldsV1": Value::Object(set),
        });
        if scope == Scope::Status {
            entry["subresource"] = json!("status");
        }
        meta.insert("managedFields".into(), json!([entry]));
        return;
    }
    let mut entries = old.map(entries_of).unwrap_or_default();
    // Within what `old` and `new` share, nothing is changed or removed.
    let new_set = fields_unlike(def, new, scope, old);
    let (owned, new_set) = match operation {
        // A create's manager owns everything it set.
        Operation::Update if old.is_none() => (new_set, Node::default()),
        Operation::Update => (changed(&new_set, "", old, Some(new)), new_set),
        Operation::Apply(config) => {
            // An applied configuration owns its leaves and list elements,
            // not the maps around them.
            let mut set = fields(def, config, scope);
            drop_map_dots(&mut set, false);
            (set, new_set)
        }
    };
    let gone = match old {
        Some(old) => removed(&fields_unlike(def, old, scope, Some(new)), &new_set),
        None => Node::default(),
    };
    let op = match operation {
        Operation::Update => "Update",
        Operation::Apply(_) => "Apply",
    };
    let subresource = match scope {
        Scope::Main => None,
        Scope::Status => Some("status".to_string()),
    };
    for e in &mut entries {
        e.fields.subtract(&owned);
        e.fields.subtract(&gone);
    }
    let mine = entries
        .iter()
        .position(|e| e.manager == manager && e.operation == op && e.subresource == subresource);
    match (mine, operation) {
        (Some(i), Operation::Update) => {
            entries[i].fields.tree().union(&owned);
            entries[i].time = time.to_string();
            entries[i].api_version = def.api_version.to_string();
        }
        (Some(i), Operation::Apply(_)) => {
            entries[i].fields = Fields::made(owned);
            entries[i].time = time.to_string();
            entries[i].api_version = def.api_version.to_string();
        }
        (None, _) if !owned.is_empty() => entries.push(Entry {
            manager: manager.to_string(),
            operation: op.to_string(),
            api_version: def.api_version.to_string(),
            time: time.to_string(),
            subresource,
            fields: Fields::made(owned),
        }),
        (None, _) => {}
    }
    entries.retain(|e| !e.fields.is_empty());
    // kube-apiserver's order: by operation (Apply first), time, manager.
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let list: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            let mut v = Map::new();
            v.insert("manager".into(), Value::String(e.manager));
            v.insert("operation".into(), Value::String(e.operation));
            v.insert("apiVersion".into(), Value::String(e.api_version));
            v.insert("time".into(), Value::String(e.time));
            v.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            v.insert("fieldsV1".into(), e.fields.into_json());
            if let Some(s) = e.subresource {
                v.insert("subresource".into(), Value::String(s));
            }
            Value::Object(v)
        })
        .collect();
    let meta = crate::semantics::meta_mut(new);
    if list.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ResourceDef {
        ResourceDef::new(
            "apps",
            "v1",
            "deployments",
            "deployment",
            "Deployment",
            true,
        )
        .with_status()
    }

    #[test]
    fn a_create_owns_every_field_it_set_in_fieldsv1_form() {
        let mut obj = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "uid": "u", "labels": {"app": "web"}, "finalizers": ["x"]},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
                     "template": {"spec": {"containers": [{"name": "app", "image": "nginx",
                         "ports": [{"containerPort": 80}], "resources": {}}]}}},
            "status": {"replicas": 0}
        });
        record(
            &def(),
            None,
            &mut obj,
            "kubectl-create",
            Operation::Update,
            Scope::Main,
            "2026-01-01T00:00:00Z",
        );
        let mf = &obj["metadata"]["managedFields"];
        assert_eq!(mf.as_array().unwrap().len(), 1);
        assert_eq!(mf[0]["manager"], "kubectl-create");
        assert_eq!(mf[0]["operation"], "Update");
        assert_eq!(mf[0]["apiVersion"], "apps/v1");
        assert_eq!(mf[0]["fieldsType"], "FieldsV1");
        assert!(mf[0].get("subresource").is_none());
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}, "f:finalizers": {"v:\"x\"": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},
                    "f:strategy": {"f:type": {}, "f:rollingUpdate": {".": {}, "f:maxSurge": {}}},
                    "f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"app\"}": {
                        ".": {}, "f:image": {}, "f:name": {}, "f:resources": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                    }}}}
                }
            })
        );
    }

    #[test]
    fn the_direct_create_set_is_the_tree_set() {
        let d = def();
        let objects = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "web", "uid": "u", "labels": {"app": "web"}, "finalizers": ["x"],
                                "ownerReferences": [{"uid": "o", "name": "n", "kind": "K", "apiVersion": "v1"}]},
                   "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "paused": false,
                            "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                                {"name": "app", "image": "nginx", "args": ["-x"], "env": [{"name": "A", "value": "1"}],
                                 "ports": [{"containerPort": 80, "protocol": "UDP"}], "resources": {}}]}}},
                   "status": {"replicas": 0, "conditions": [{"type": "Ready", "status": "True"}]}}),
            json!({"metadata": {"name": "only"}}),
            json!({"data": {"k": "v"}, "binaryData": {}, "metadata": {"name": "cm", "annotations": {}}}),
        ];
        for obj in objects {
            for scope in [Scope::Main, Scope::Status] {
                assert_eq!(
                    Value::Object(fields_json(&d, &obj, scope)),
                    fields(&d, &obj, scope).to_json(),
                    "{obj} {scope:?}"
                );
            }
        }
    }

    #[test]
    fn updates_take_changed_fields_and_status_writes_are_their_own_entry() {
        let d = def();
        let mut v1 = json!({"metadata": {"name": "web", "labels": {"a": "1"}}, "spec": {"replicas": 1, "paused": false}});
        record(
            &d,
            None,
            &mut v1,
            "creator",
            Operation::Update,
            Scope::Main,
            "2026-01-01T00:00:00Z",
        );
        let mut v2 = v1.clone();
        v2["spec"]["replicas"] = json!(3);
        record(
            &d,
            Some(&v1),
            &mut v2,
            "scaler",
            Operation::Update,
            Scope::Main,
            "2026-01-01T00:00:05Z",
        );
        let mf = v2["metadata"]["managedFields"].as_array().unwrap().clone();
        assert_eq!(mf.len(), 2);
        assert_eq!(mf[0]["manager"], "creator");
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"f:paused": {}}})
        );
        assert_eq!(mf[1]["manager"], "scaler");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));

        let mut v3 = v2.clone();
        v3["status"] = json!({"replicas": 3});
        record(
            &d,
            Some(&v2),
            &mut v3,
            "controller",
            Operation::Update,
            Scope::Status,
            "2026-01-01T00:00:06Z",
        );
        let mf = v3["metadata"]["managedFields"].as_array().unwrap().clone();
        assert_eq!(mf.len(), 3);
        assert_eq!(mf[2]["subresource"], "status");
        assert_eq!(mf[2]["fieldsV1"], json!({"f:status": {"f:replicas": {}}}));

        // Apply entries come first and own exactly their configuration.
        let mut v4 = v3.clone();
        v4["spec"]["paused"] = json!(true);
        let config = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"paused": true}});
        record(
            &d,
            Some(&v3),
            &mut v4,
            "applier",
            Operation::Apply(&config),
            Scope::Main,
            "2026-01-01T00:00:07Z",
        );
        let mf = v4["metadata"]["managedFields"].as_array().unwrap().clone();
        assert_eq!(mf[0]["manager"], "applier");
        assert_eq!(mf[0]["operation"], "Apply");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:spec": {"f:paused": {}}}));
        let creator = mf.iter().find(|e| e["manager"] == "creator").unwrap();
        assert_eq!(
            creator["fieldsV1"],
            json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );

        // Removing a field removes it from its manager; an empty entry goes.
        let mut v5 = v4.clone();
        v5["metadata"].as_object_mut().unwrap().remove("labels");
        record(
            &d,
            Some(&v4),
            &mut v5,
            "editor",
            Operation::Update,
            Scope::Main,
            "2026-01-01T00:00:08Z",
        );
        let managers: Vec<_> = v5["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(managers, ["applier", "scaler", "controller"]);
    }

    #[test]
    fn a_write_owns_only_what_it_changed_in_lists_and_maps_it_left_alone_in_part() {
        let d = ResourceDef::new("", "v1", "pods", "pod", "Pod", true).with_status();
        let mut v1 = json!({"metadata": {"name": "p", "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]}});
        record(
            &d,
            None,
            &mut v1,
            "creator",
            Operation::Update,
            Scope::Main,
            "t1",
        );
        let mut v2 = v1.clone();
        v2["status"] = json!({"phase": "Pending", "hostIP": "10.0.0.1",
            "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]});
        record(
            &d,
            Some(&v1),
            &mut v2,
            "kubelet",
            Operation::Update,
            Scope::Status,
            "t2",
        );
        // Another manager flips one condition and drops hostIP.
        let mut v3 = v2.clone();
        v3["status"]["conditions"][1]["status"] = json!("True");
        v3["status"].as_object_mut().unwrap().remove("hostIP");
        record(
            &d,
            Some(&v2),
            &mut v3,
            "prober",
            Operation::Update,
            Scope::Status,
            "t3",
        );
        let mf = v3["metadata"]["managedFields"].as_array().unwrap().clone();
        assert_eq!(mf.len(), 3, "{mf:?}");
        assert_eq!(
            mf[0], v2["metadata"]["managedFields"][0],
            "the creator's entry is as it was"
        );
        let ready = "k:{\"type\":\"Ready\"}";
        let scheduled = "k:{\"type\":\"PodScheduled\"}";
        assert_eq!(
            mf[1]["fieldsV1"],
            json!({"f:status": {"f:phase": {}, "f:conditions": {
                scheduled: {".": {}, "f:status": {}, "f:type": {}},
                ready: {".": {}, "f:type": {}}}}})
        );
        assert_eq!(
            mf[2]["fieldsV1"],
            json!({"f:status": {"f:conditions": {ready: {"f:status": {}}}}})
        );

        // A write that leaves a list alone takes nothing in it, even when
        // two of its elements share a key (an invalid list kept as is).
        let mut v4 = v3.clone();
        v4["spec"]["containers"] = json!([{"name": "a", "image": "x"}, {"name": "a", "image": "y", "resources": {"limits": {"cpu": "1"}}}]);
        record(
            &d,
            Some(&v3),
            &mut v4,
            "editor",
            Operation::Update,
            Scope::Main,
            "t4",
        );
        let mut v5 = v4.clone();
        v5["metadata"]["labels"]["app"] = json!("db");
        record(
            &d,
            Some(&v4),
            &mut v5,
            "labeller",
            Operation::Update,
            Scope::Main,
            "t5",
        );
        let labeller = v5["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == "labeller")
            .cloned()
            .unwrap();
        assert_eq!(
            labeller["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:app": {}}}})
        );
    }
}
