//! The few fields of a stored object that the hot paths read: watch and
//! list selectors, the garbage collector and the store's indexes.
//!
//! A stored object is kept only as its serialized JSON plus this summary.
//! A parsed `serde_json::Value` of a pod is several kilobytes of small
//! allocations; holding one per object made the store's growth (page
//! faults, the allocator growing its heap) a large part of each create.
//! Writes, which need the whole object, parse the JSON again.

use std::sync::Arc;

use serde_json::Value;

use crate::json::At;

/// An ownerReference, as the garbage collector and the dependents index
/// need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerRef {
    pub(crate) uid: Box<str>,
    /// The owner's `apiVersion` and `kind`: the collector only deletes
    /// dependents of owners of a kind the cluster serves.
    pub(crate) api_version: Box<str>,
    pub(crate) kind: Box<str>,
}

/// What the hot paths read of one stored object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) namespace: Box<str>,
    pub(crate) name: Box<str>,
    pub(crate) uid: Box<str>,
    // The lists are shared: objects created from one template (see
    // `templates`) have the same ones.
    /// Sorted by key.
    labels: Arc<[(Box<str>, Box<str>)]>,
    pub(crate) owners: Arc<[OwnerRef]>,
    finalizers: Arc<[Box<str>]>,
    /// `metadata.deletionTimestamp` is set.
    pub(crate) terminating: bool,
    node_name: Option<Box<str>>,
    phase: Option<Box<str>>,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    v.at(path).and_then(Value::as_str)
}

fn boxed(s: Option<&str>) -> Box<str> {
    s.unwrap_or("").into()
}

impl Summary {
    /// The summary of `object`.
    pub(crate) fn of(object: &Value) -> Summary {
        let mut labels: Vec<(Box<str>, Box<str>)> = object
            .at(&["metadata", "labels"])
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_str()?.into())))
            .collect();
        labels.sort_unstable();
        let owners = object
            .at(&["metadata", "ownerReferences"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some(OwnerRef {
                    uid: r.get("uid")?.as_str()?.into(),
                    api_version: boxed(r.get("apiVersion").and_then(Value::as_str)),
                    kind: boxed(r.get("kind").and_then(Value::as_str)),
                })
            })
            .collect();
        let finalizers = object
            .at(&["metadata", "finalizers"])
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(Box::from))
            .collect();
        Summary {
            namespace: boxed(str_at(object, &["metadata", "namespace"])),
            name: boxed(str_at(object, &["metadata", "name"])),
            uid: boxed(str_at(object, &["metadata", "uid"])),
            labels: labels.into(),
            owners,
            finalizers,
            terminating: object.at(&["metadata", "deletionTimestamp"]).is_some(),
            node_name: str_at(object, &["spec", "nodeName"]).map(Box::from),
            phase: str_at(object, &["status", "phase"]).map(Box::from),
        }
    }

    /// The summary of a copy of this summary's object with another name
    /// and uid.
    pub(crate) fn renamed(&self, name: &str, uid: &str) -> Summary {
        Summary {
            name: name.into(),
            uid: uid.into(),
            ..self.clone()
        }
    }

    /// The value of label `key`, if the object has it.
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.labels[i].1)
    }

    /// Whether `metadata.finalizers` lists `name`.
    pub(crate) fn has_finalizer(&self, name: &str) -> bool {
        self.finalizers.iter().any(|f| &**f == name)
    }

    /// The value of a field-selector path, if the summary keeps that field:
    /// `Some("")` for a kept field the object lacks, `None` for a path the
    /// summary does not know (the caller reads the whole object).
    pub(crate) fn field<S: AsRef<str>>(&self, path: &[S]) -> Option<&str> {
        let parts: [&str; 2] = match path {
            [a, b] => [a.as_ref(), b.as_ref()],
            _ => return None,
        };
        match parts {
            ["metadata", "name"] => Some(&self.name),
            ["metadata", "namespace"] => Some(&self.namespace),
            ["spec", "nodeName"] => Some(self.node_name.as_deref().unwrap_or("")),
            ["status", "phase"] => Some(self.phase.as_deref().unwrap_or("")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summary_reads_the_fields_hot_paths_need() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1",
                         "labels": {"b": "2", "a": "1"},
                         "finalizers": ["orphan"],
                         "deletionTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [
                             {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "o1"},
                             {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": "o2"}]},
            "spec": {"nodeName": "node-1"},
            "status": {"phase": "Running"}
        });
        let s = Summary::of(&pod);
        assert_eq!((&*s.namespace, &*s.name, &*s.uid), ("ns", "p", "u1"));
        assert_eq!(s.label("a"), Some("1"));
        assert_eq!(s.label("b"), Some("2"));
        assert_eq!(s.label("c"), None);
        assert!(s.has_finalizer("orphan"));
        assert!(!s.has_finalizer("foregroundDeletion"));
        assert!(s.terminating);
        let owners: Vec<(&str, &str, &str)> = s
            .owners
            .iter()
            .map(|o| (&*o.uid, &*o.api_version, &*o.kind))
            .collect();
        assert_eq!(
            owners,
            [
                ("o1", "apps/v1", "ReplicaSet"),
                ("o2", "example.com/v1", "Thing")
            ]
        );
        assert_eq!(s.field(&["spec", "nodeName"]), Some("node-1"));
        assert_eq!(s.field(&["status", "phase"]), Some("Running"));
        assert_eq!(s.field(&["spec", "restartPolicy"]), None);
    }

    #[test]
    fn missing_kept_fields_read_as_empty() {
        let s = Summary::of(&json!({"metadata": {"name": "x"}}));
        assert_eq!(s.field(&["spec", "nodeName"]), Some(""));
        assert_eq!(s.field(&["metadata", "namespace"]), Some(""));
        assert!(!s.terminating);
        assert!(s.owners.is_empty());
    }
}
