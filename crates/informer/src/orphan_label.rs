//! An index of orphans by label: the objects an owner could adopt, narrowed
//! to those carrying a label its selector requires.
//!
//! An owner may adopt any orphan (an object with no controller) of its
//! namespace that its selector matches, so a sync must look at the
//! namespace's orphans. With [`BY_CONTROLLER_UID`](crate::BY_CONTROLLER_UID)
//! alone that is every orphan, on every sync. An orphan the selector matches
//! carries every label the selector requires by equality (`app=web`), so
//! it suffices to look at the orphans carrying one of those labels, and the
//! least common one gives the fewest. This index provides those lists; see
//! [`Store::by_controller_with_labelled_orphans`](crate::Store::by_controller_with_labelled_orphans).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use crate::controller_ref::is_orphan;
use crate::index::concat_key;

/// Name of the index built by [`index_orphans_by_label`].
pub const BY_ORPHAN_LABEL: &str = "by-orphan-label";

/// Index function: each label of an orphan (an object without a controller
/// reference), for "which orphans carry `key=value`?" lookups.
///
/// An orphan in `namespace` with labels `a=1, b=2` is indexed under
/// [`orphan_label_index_key`]`(namespace, "a", "1")` and
/// `(namespace, "b", "2")`; an orphan without labels, and any object with a
/// controller, is not indexed at all. The index therefore costs one entry
/// per label of each orphan and nothing for controlled objects, and it
/// follows adoptions and releases as objects gain or lose their controller.
pub fn index_orphans_by_label<K: Resource>(obj: &K) -> Vec<String> {
    let meta = obj.meta();
    if !is_orphan(meta) {
        return Vec::new();
    }
    let ns = meta.namespace.as_deref().unwrap_or_default();
    meta.labels
        .iter()
        .flatten()
        .map(|(key, value)| orphan_label_index_key(ns, key, value))
        .collect()
}

/// The [`BY_ORPHAN_LABEL`] key of orphans in `namespace` carrying the label
/// `key=value`: `namespace/key=value`.
///
/// Distinct labels of valid objects give distinct keys, because namespaces
/// contain no `/` and label keys no `=`.
pub fn orphan_label_index_key(namespace: &str, key: &str, value: &str) -> String {
    concat_key(&[namespace, "/", key, "=", value])
}

/// Whether `meta` is an orphan in `namespace` carrying every `(key, value)`
/// label in `labels`: the exact condition that
/// [`Store::by_controller_with_labelled_orphans`](crate::Store::by_controller_with_labelled_orphans)
/// guarantees, checked again on the candidates an index returns.
pub(crate) fn is_orphan_with_labels(
    meta: &ObjectMeta,
    namespace: &str,
    labels: &[(&str, &str)],
) -> bool {
    meta.namespace.as_deref().unwrap_or_default() == namespace
        && is_orphan(meta)
        && labels.iter().all(|(key, value)| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(*key))
                .is_some_and(|v| v == value)
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn pod(labels: &[(&str, &str)], controller: Option<bool>) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        );
        if let Some(controller) = controller {
            p.metadata.owner_references = Some(vec![OwnerReference {
                uid: "rs".into(),
                controller: Some(controller),
                ..Default::default()
            }]);
        }
        p
    }

    #[test]
    fn orphans_are_indexed_under_each_label_and_controlled_objects_not_at_all() {
        let mut keys = index_orphans_by_label(&pod(&[("app", "web"), ("tier", "fe")], None));
        keys.sort();
        assert_eq!(keys, ["ns/app=web", "ns/tier=fe"]);
        // A non-controller owner reference does not make an object owned.
        assert_eq!(
            index_orphans_by_label(&pod(&[("app", "web")], Some(false))),
            ["ns/app=web"]
        );
        assert!(index_orphans_by_label(&pod(&[("app", "web")], Some(true))).is_empty());
        assert!(index_orphans_by_label(&Pod::default()).is_empty());
    }

    #[test]
    fn the_exact_check_needs_namespace_no_controller_and_every_label() {
        let p = pod(&[("app", "web"), ("tier", "fe")], None);
        assert!(is_orphan_with_labels(&p.metadata, "ns", &[]));
        assert!(is_orphan_with_labels(
            &p.metadata,
            "ns",
            &[("app", "web"), ("tier", "fe")]
        ));
        assert!(!is_orphan_with_labels(&p.metadata, "other", &[]));
        assert!(!is_orphan_with_labels(
            &p.metadata,
            "ns",
            &[("app", "web"), ("tier", "be")]
        ));
        assert!(!is_orphan_with_labels(&p.metadata, "ns", &[("env", "x")]));
        let owned = pod(&[("app", "web")], Some(true));
        assert!(!is_orphan_with_labels(&owned.metadata, "ns", &[]));
    }
}
