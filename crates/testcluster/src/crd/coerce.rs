//! Defaulting and pruning of custom objects (apiextensions'
//! `structuraldefaulting.Default`, `structuralpruning.Prune`,
//! `PruneNonNullableNullsWithoutDefaults` and ObjectMeta coercion).

use serde_json::{Map, Value};

use super::schema::{Node, Schema};

/// The fields kube-apiserver keeps at the root of every object and of
/// embedded resources whatever the schema says.
const META_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// The fields of `ObjectMeta`; unknown fields inside `metadata` are
/// dropped when kube-apiserver decodes it into `ObjectMeta`.
const OBJECT_META_FIELDS: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

impl Schema {
    /// Applies the schema's `default`s to `obj`: a property with a default
    /// is set when absent (or `null` and not nullable) in an object that is
    /// present; list items and map values that are `null` and not nullable
    /// get their schema's default. Parents are not created to hold a
    /// default.
    pub fn apply_defaults(&self, obj: &mut Value) {
        default(obj, &self.root);
    }

    /// Drops the fields the schema does not specify (keeping everything
    /// under `x-kubernetes-preserve-unknown-fields`, and `apiVersion`,
    /// `kind` and `metadata` at the root and in embedded resources), drops
    /// `null`s the schema neither allows nor defaults, and drops unknown
    /// fields inside `metadata`. Returns the paths of the pruned unknown
    /// fields, as kube-apiserver's `unknown field "spec.extra"` warnings
    /// name them.
    pub fn prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        let mut root = self.root.clone();
        root.embedded_resource = true;
        prune(obj, Some(&root), "", &mut pruned);
        prune_nulls(obj, Some(&self.root));
        coerce_meta(obj, Some(&self.root), true, "", &mut pruned);
        pruned
    }

    /// Prunes `value` against this schema alone, as a value rather than a
    /// whole object (no implicit `apiVersion`/`kind`/`metadata` at the
    /// root); used to check that defaults are pruned.
    pub(crate) fn prune_value(&self, value: &mut Value) {
        prune(value, Some(&self.root), "", &mut Vec::new());
    }
}

fn is_non_nullable_null(v: &Value, s: &Node) -> bool {
    v.is_null() && !s.nullable
}

fn default(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let missing = map.get(k).is_none_or(|v| is_non_nullable_null(v, prop));
                if missing {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    default(v, prop);
                } else if let Some(add) = s.additional_schema() {
                    if is_non_nullable_null(v, add) {
                        *v = add.default.clone().unwrap_or(Value::Null);
                    }
                    default(v, add);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for v in items.iter_mut() {
                    if is_non_nullable_null(v, item_schema) {
                        *v = item_schema.default.clone().unwrap_or(Value::Null);
                    }
                    default(v, item_schema);
                }
            }
        }
        _ => {}
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn prune(x: &mut Value, s: Option<&Node>, path: &str, pruned: &mut Vec<String>) {
    if let Some(s) = s
        && s.preserve_unknown
    {
        skip_prune(x, s, path, pruned);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                pruned.extend(map.keys().map(|k| join(path, k)));
                map.clear();
                return;
            };
            map.retain(|k, v| {
                if s.embedded_resource && META_FIELDS.contains(&k.as_str()) {
                    return true;
                }
                if let Some(prop) = s.properties.get(k) {
                    prune(v, Some(prop), &join(path, k), pruned);
                    true
                } else if let Some(add) = &s.additional {
                    let sub = match add {
                        super::schema::Additional::Schema(n) => Some(&**n),
                        super::schema::Additional::Allows(_) => None,
                    };
                    prune(v, sub, &join(path, k), pruned);
                    true
                } else {
                    pruned.push(join(path, k));
                    false
                }
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                prune(v, item_schema, &format!("{path}[{i}]"), pruned);
            }
        }
        _ => {}
    }
}

fn skip_prune(x: &mut Value, s: &Node, path: &str, pruned: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if s.embedded_resource && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    prune(v, Some(prop), &join(path, k), pruned);
                } else if let Some(add) = s.additional_schema() {
                    prune(v, Some(add), &join(path, k), pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = &s.items {
                for (i, v) in items.iter_mut().enumerate() {
                    skip_prune(v, item_schema, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

fn schema_for_field<'a>(k: &str, s: Option<&'a Node>) -> Option<&'a Node> {
    let s = s?;
    s.properties.get(k).or_else(|| s.additional_schema())
}

fn prune_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| {
                let schema = schema_for_field(k, s);
                let drop =
                    v.is_null() && schema.is_some_and(|s| !s.nullable && s.default.is_none());
                if !drop {
                    prune_nulls(v, schema);
                }
                !drop
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items.iter_mut() {
                prune_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}

/// Drops unknown fields inside `metadata` at the root and in embedded
/// resources, as decoding into `ObjectMeta` does.
fn coerce_meta(x: &mut Value, s: Option<&Node>, root: bool, path: &str, pruned: &mut Vec<String>) {
    let Some(s) = s else { return };
    match x {
        Value::Object(map) => {
            if (root || s.embedded_resource)
                && let Some(Value::Object(meta)) = map.get_mut("metadata")
            {
                strip_unknown_meta(meta, &join(path, "metadata"), pruned);
            }
            for (k, v) in map.iter_mut() {
                if (root || s.embedded_resource) && k == "metadata" {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    coerce_meta(v, Some(prop), false, &join(path, k), pruned);
                } else if let Some(add) = s.additional_schema() {
                    coerce_meta(v, Some(add), false, &join(path, k), pruned);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                coerce_meta(
                    v,
                    s.items.as_deref(),
                    false,
                    &format!("{path}[{i}]"),
                    pruned,
                );
            }
        }
        _ => {}
    }
}

fn strip_unknown_meta(meta: &mut Map<String, Value>, path: &str, pruned: &mut Vec<String>) {
    meta.retain(|k, _| {
        let known = OBJECT_META_FIELDS.contains(&k.as_str());
        if !known {
            pruned.push(join(path, k));
        }
        known
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crontab_schema() -> Schema {
        Schema::compile(&json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "cronSpec": {"type": "string"},
                        "replicas": {"type": "integer", "default": 1},
                        "paused": {"type": "boolean", "default": false},
                        "image": {"type": "string", "nullable": true, "default": "nginx"},
                        "strategy": {"type": "object", "properties": {
                            "type": {"type": "string", "default": "Rolling"},
                        }},
                        "ports": {"type": "array", "items": {"type": "object", "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"},
                        }}},
                        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                  "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                     "properties": {"spec": {"type": "object"}}},
                    }
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
            }
        }))
        .unwrap()
    }

    #[test]
    fn defaults_fill_missing_fields_of_present_objects() {
        let s = crontab_schema();
        let mut obj =
            json!({"spec": {"cronSpec": "* * * * */5", "ports": [{"port": 80}], "strategy": {}}});
        s.apply_defaults(&mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        assert_eq!(obj["spec"]["paused"], false);
        assert_eq!(obj["spec"]["image"], "nginx");
        assert_eq!(obj["spec"]["strategy"]["type"], "Rolling");
        assert_eq!(obj["spec"]["ports"][0]["protocol"], "TCP");
        // A missing object is not created to hold its fields' defaults.
        let mut bare = json!({"apiVersion": "x/v1"});
        s.apply_defaults(&mut bare);
        assert!(bare.get("spec").is_none());
    }

    #[test]
    fn null_defaults_only_when_not_nullable() {
        let s = crontab_schema();
        let mut obj = json!({"spec": {"replicas": null, "image": null}});
        s.apply_defaults(&mut obj);
        assert_eq!(
            obj["spec"]["replicas"], 1,
            "non-nullable null gets the default"
        );
        assert_eq!(obj["spec"]["image"], Value::Null, "nullable null is kept");
    }

    #[test]
    fn prune_drops_unknown_fields_and_keeps_preserved_ones() {
        let s = crontab_schema();
        let mut obj = json!({
            "apiVersion": "stable.example.com/v1",
            "kind": "CronTab",
            "metadata": {"name": "x", "labels": {"a": "b"}, "bogus": 1},
            "spec": {
                "cronSpec": "x",
                "unknown": true,
                "extra": {"anything": {"goes": 1}, "known": {"a": "x", "b": "dropped"}},
                "labels": {"k": "v"},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
                             "spec": {}, "other": 1},
                "cronSpecNull": null,
                "ports": [{"port": 1, "what": 2}],
            },
            "status": {"ready": true, "extra": 1},
            "topLevel": 5,
        });
        let mut pruned = s.prune(&mut obj);
        pruned.sort();
        assert_eq!(
            obj,
            json!({
                "apiVersion": "stable.example.com/v1",
                "kind": "CronTab",
                "metadata": {"name": "x", "labels": {"a": "b"}},
                "spec": {
                    "cronSpec": "x",
                    "extra": {"anything": {"goes": 1}, "known": {"a": "x"}},
                    "labels": {"k": "v"},
                    "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}},
                    "ports": [{"port": 1}],
                },
                "status": {"ready": true},
            })
        );
        assert_eq!(
            pruned,
            vec![
                "metadata.bogus",
                "spec.cronSpecNull",
                "spec.extra.known.b",
                "spec.ports[0].what",
                "spec.template.metadata.junk",
                "spec.template.other",
                "spec.unknown",
                "status.extra",
                "topLevel",
            ]
        );
    }

    #[test]
    fn non_nullable_nulls_without_defaults_are_pruned() {
        let s = crontab_schema();
        let mut obj = json!({"spec": {"cronSpec": null, "image": null}});
        s.prune(&mut obj);
        assert_eq!(obj, json!({"spec": {"image": null}}));
    }

    #[test]
    fn admit_defaults_prunes_then_validates() {
        let s = crontab_schema();
        let mut obj = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                             "metadata": {"name": "x"}, "spec": {"replicas": "two", "junk": 1}});
        let errs = s.admit(&mut obj).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "spec.replicas");
        assert!(obj["spec"].get("junk").is_none());
        let mut ok = json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                            "metadata": {"name": "x"}, "spec": {}});
        s.admit(&mut ok).unwrap();
        assert_eq!(ok["spec"]["replicas"], 1);
    }
}
