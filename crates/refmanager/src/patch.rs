//! The strategic merge patches that adopt and release a dependent.
//!
//! Both patches carry the dependent's UID in `metadata.uid`. The UID is
//! immutable, so if the object was deleted and re-created under the same
//! name, the patch would change the UID and the API server rejects it as
//! Invalid (422) instead of touching the newcomer: the UID acts as a
//! precondition.

use serde_json::{Value, json};

use crate::OwnerMeta;

/// The patch that makes `owner` the controller of the dependent with UID
/// `dependent_uid`:
///
/// ```json
/// {"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",
///   "name":"web","uid":"<owner uid>","controller":true,"blockOwnerDeletion":true}],
///   "uid":"<dependent uid>"}}
/// ```
///
/// Owner references merge by UID, so other owners' references are kept; the
/// API server refuses the patch (422) if another reference already has
/// `controller: true`. Non-empty `finalizers` are added under
/// `metadata.finalizers`.
pub fn adoption_patch(owner: &OwnerMeta, dependent_uid: &str, finalizers: &[String]) -> Value {
    let mut metadata = json!({
        "ownerReferences": [{
            "apiVersion": owner.api_version(),
            "kind": owner.kind(),
            "name": owner.name(),
            "uid": owner.uid(),
            "controller": true,
            "blockOwnerDeletion": true,
        }],
        "uid": dependent_uid,
    });
    if !finalizers.is_empty() {
        metadata["finalizers"] = json!(finalizers);
    }
    json!({ "metadata": metadata })
}

/// The patch that removes the owner references with the given UIDs (and
/// only those) from the dependent with UID `dependent_uid`:
///
/// ```json
/// {"metadata":{"uid":"<dependent uid>","ownerReferences":[{"$patch":"delete","uid":"<owner uid>"}]}}
/// ```
///
/// Non-empty `finalizers` are removed too, through
/// `$deleteFromPrimitiveList/finalizers`.
pub fn release_patch<S: AsRef<str>>(
    dependent_uid: &str,
    owner_uids: &[S],
    finalizers: &[String],
) -> Value {
    let refs: Vec<Value> = owner_uids
        .iter()
        .map(|uid| json!({ "$patch": "delete", "uid": uid.as_ref() }))
        .collect();
    let mut metadata = json!({ "uid": dependent_uid, "ownerReferences": refs });
    if !finalizers.is_empty() {
        metadata["$deleteFromPrimitiveList/finalizers"] = json!(finalizers);
    }
    json!({ "metadata": metadata })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerMeta {
        OwnerMeta::new("apps/v1", "ReplicaSet", "web", "123").unwrap()
    }

    #[test]
    fn adoption_patch_body() {
        assert_eq!(
            adoption_patch(&owner(), "pod-uid", &[]),
            json!({"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet",
                "name":"web","uid":"123","controller":true,"blockOwnerDeletion":true}],
                "uid":"pod-uid"}})
        );
    }

    #[test]
    fn adoption_patch_with_finalizers() {
        let patch = adoption_patch(
            &owner(),
            "p",
            &["foo-finalizer".into(), "bar-finalizer".into()],
        );
        assert_eq!(
            patch["metadata"]["finalizers"],
            json!(["foo-finalizer", "bar-finalizer"])
        );
    }

    // Upstream's TestGeneratePatchBytesForDelete cases, compared as JSON
    // values (key order is irrelevant to the API server).
    #[test]
    fn release_patch_bodies() {
        assert_eq!(
            release_patch("ss2", &["ss1"], &[]),
            json!({"metadata":{"uid":"ss2","ownerReferences":[{"$patch":"delete","uid":"ss1"}]}})
        );
        assert_eq!(
            release_patch("ss2", &["ss1", "ss2"], &[]),
            json!({"metadata":{"uid":"ss2","ownerReferences":[
                {"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}]}})
        );
        assert_eq!(
            release_patch("ss2", &["ss1", "ss2"], &["f1".into()]),
            json!({"metadata":{"uid":"ss2","ownerReferences":[
                {"$patch":"delete","uid":"ss1"},{"$patch":"delete","uid":"ss2"}],
                "$deleteFromPrimitiveList/finalizers":["f1"]}})
        );
    }

    #[test]
    fn release_patch_escapes_quotes() {
        let text = release_patch("ss2\"hello", &["ss1\"hello"], &[]).to_string();
        assert!(text.contains(r#""uid":"ss1\"hello""#), "{text}");
        assert!(text.contains(r#""uid":"ss2\"hello""#), "{text}");
        let parsed: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed["metadata"]["uid"], "ss2\"hello");
    }
}
