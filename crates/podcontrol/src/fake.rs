//! A recording [`PodControl`] for tests: the generic
//! [`FakeChildControl`] taking pod templates.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use ctrlkit_childcontrol::{FakeChildControl, WriteGate};
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::Patch;
use serde_json::Value;

use crate::template::pod_from_template;
use crate::{PodControl, PodControlError};

pub use ctrlkit_childcontrol::{Operation, RecordedDelete};

/// One recorded [`PodControl::create_pods`] call.
pub type RecordedCreate = ctrlkit_childcontrol::RecordedCreate<PodTemplateSpec>;

/// One recorded [`PodControl::patch_pod`] call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedPatch {
    /// The namespace passed in.
    pub namespace: String,
    /// The pod name passed in.
    pub name: String,
    /// The strategic merge patch passed in.
    pub patch: Value,
}

/// A [`PodControl`] that talks to no API server: it records every call and
/// can be told to fail.
///
/// Clones share their state, so a test can hand one clone to the code under
/// test (e.g. as `Arc<dyn PodControl>`) and inspect another. It is the
/// generic [`FakeChildControl`] of `ctrlkit-childcontrol` taking pod
/// templates.
///
/// # What it does on each call
///
/// Every call is recorded first, whether it then succeeds or fails (as
/// upstream's fake does), so a test can see what a controller *attempted*.
/// Then, in order:
///
/// 1. the [write gate](Self::set_write_gate), if set, may refuse it;
/// 2. an injected failure (see [`fail_next`](Self::fail_next),
///    [`fail_after`](Self::fail_after) and their per-operation forms) is
///    returned if one is due;
/// 3. `create_pods` enforces [`set_create_limit`](Self::set_create_limit);
/// 4. the call is carried out:
///    - `create_pods` validates and builds the pod exactly as the
///      real implementation does, with [`pod_from_template`](crate::pod_from_template)
///      (so the same templates are rejected), then fills in what the API server would: the
///      namespace, the name `<generateName><n>`, a UID and a
///      resourceVersion, where `n` counts up from 0 over the fake's lifetime.
///      The pod is returned and remembered in [`created_pods`](Self::created_pods);
///    - `delete_pod` succeeds (the fake keeps no pods, so nothing is ever
///      missing);
///    - `patch_pod` returns a minimal pod (only `name` and `namespace` set)
///      with the patch merged into it: objects are merged key by key, `null`
///      removes a key, lists are replaced, `$`-prefixed directive keys are
///      dropped and list items carrying `"$patch": "delete"` are removed. So
///      the returned pod shows the labels, annotations and owner references
///      the patch sets. A patch that does not produce a pod fails with
///      [`PodControlError::InvalidPatch`].
///
/// # Example
///
/// ```
/// use ctrlkit_podcontrol::{FakePodControl, PodControl, PodControlError};
/// # tokio_test_block_on(async {
/// let fake = FakePodControl::new();
/// fake.fail_next(1, || PodControlError::api_status(500, "InternalError", "boom"));
///
/// let owner = Default::default();
/// let patch = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
/// assert!(fake.patch_pod("ns", "p", &patch).await.is_err());
/// assert!(fake.delete_pod("ns", "p", &owner, None).await.is_ok());
///
/// assert_eq!(fake.patch_count(), 1);
/// assert_eq!(fake.deleted_pod_names(), vec!["p".to_string()]);
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone)]
pub struct FakePodControl {
    pods: FakeChildControl<Pod, PodTemplateSpec>,
}

impl Default for FakePodControl {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for FakePodControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FakePodControl")
            .field("creates", &self.pods.create_count())
            .field("deletes", &self.pods.delete_count())
            .field("patches", &self.pods.patch_count())
            .finish_non_exhaustive()
    }
}

impl FakePodControl {
    /// A fake with nothing recorded and no failures planned.
    pub fn new() -> Self {
        Self {
            pods: FakeChildControl::with_builder(
                |template: &PodTemplateSpec, _namespace, owner, controller_ref| {
                    let owner_name = owner.name.as_deref().unwrap_or(&controller_ref.name);
                    pod_from_template(template, owner_name, controller_ref)
                },
            ),
        }
    }

    /// The generic fake behind this one (same state).
    pub fn child_control(&self) -> &FakeChildControl<Pod, PodTemplateSpec> {
        &self.pods
    }

    // ----- failure injection -------------------------------------------------

    /// Makes the next `n` calls (of any operation) fail with `make_error()`.
    pub fn fail_next<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.pods.fail_next(n, make_error);
    }

    /// Lets the next `n` calls (of any operation) through, then makes every
    /// later call fail with `make_error()` until
    /// [`clear_failures`](Self::clear_failures).
    pub fn fail_after<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.pods.fail_after(n, make_error);
    }

    /// Like [`fail_next`](Self::fail_next), counting only calls of `operation`.
    pub fn fail_next_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.pods.fail_next_op(operation, n, make_error);
    }

    /// Like [`fail_after`](Self::fail_after), counting only calls of `operation`.
    pub fn fail_after_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.pods.fail_after_op(operation, n, make_error);
    }

    /// Forgets every planned failure.
    pub fn clear_failures(&self) {
        self.pods.clear_failures();
    }

    /// Makes every `create_pods` call beyond the first `limit` (counted since
    /// the last [`clear`](Self::clear)) fail with
    /// [`PodControlError::InvalidTemplate`] "not creating pod, limit reached".
    /// Like upstream's `CreateLimit`, for checking burst limits.
    pub fn set_create_limit(&self, limit: usize) {
        self.pods.set_create_limit(limit);
    }

    /// Checks every later call with `gate`, as
    /// [`KubePodControl::with_write_gate`](crate::KubePodControl::with_write_gate)
    /// does; `None` removes it. Refused calls are still recorded.
    pub fn set_write_gate(&self, gate: Option<Arc<dyn WriteGate>>) {
        self.pods.set_write_gate(gate);
    }

    /// Forgets every recorded call, the created pods and the create limit.
    /// Planned failures are kept (as upstream's fake keeps `Err`); use
    /// [`clear_failures`](Self::clear_failures) for those. Generated names and
    /// UIDs keep counting up, so they never repeat.
    pub fn clear(&self) {
        self.pods.clear();
    }

    // ----- inspection --------------------------------------------------------

    /// The templates of every `create_pods` call, in call order.
    pub fn templates(&self) -> Vec<PodTemplateSpec> {
        self.pods.templates()
    }

    /// The controller references of every `create_pods` call, in call order.
    pub fn controller_refs(&self) -> Vec<OwnerReference> {
        self.pods.controller_refs()
    }

    /// Every `create_pods` call in full, in call order.
    pub fn creates(&self) -> Vec<RecordedCreate> {
        self.pods.creates()
    }

    /// The pods successfully "created" and returned, in call order.
    pub fn created_pods(&self) -> Vec<Pod> {
        self.pods.created()
    }

    /// The pod names (without namespace) of every `delete_pod` call, in call
    /// order.
    pub fn deleted_pod_names(&self) -> Vec<String> {
        self.pods.deleted_names()
    }

    /// The `namespace/name` keys of every `delete_pod` call, in call order.
    pub fn deleted_pod_keys(&self) -> Vec<String> {
        self.pods.deleted_keys()
    }

    /// Every `delete_pod` call in full (including preconditions), in call
    /// order.
    pub fn deletes(&self) -> Vec<RecordedDelete> {
        self.pods.deletes()
    }

    /// The pod name and patch of every `patch_pod` call, in call order.
    pub fn patches(&self) -> Vec<(String, Value)> {
        self.patch_calls()
            .into_iter()
            .map(|p| (p.name, p.patch))
            .collect()
    }

    /// Every `patch_pod` call in full, in call order.
    pub fn patch_calls(&self) -> Vec<RecordedPatch> {
        self.pods
            .patches()
            .into_iter()
            .map(|p| RecordedPatch {
                namespace: p.namespace,
                name: p.name,
                patch: match p.patch {
                    Patch::Strategic(v) | Patch::Merge(v) | Patch::Apply(v) => v,
                    // `patch_pod` only ever sends strategic merge patches.
                    _ => Value::Null,
                },
            })
            .collect()
    }

    /// The number of `create_pods` calls, failed ones included.
    pub fn create_count(&self) -> usize {
        self.pods.create_count()
    }

    /// The number of `delete_pod` calls, failed ones included.
    pub fn delete_count(&self) -> usize {
        self.pods.delete_count()
    }

    /// The number of `patch_pod` calls, failed ones included.
    pub fn patch_count(&self) -> usize {
        self.pods.patch_count()
    }
}

#[async_trait]
impl PodControl for FakePodControl {
    async fn create_pods(
        &self,
        namespace: &str,
        template: &PodTemplateSpec,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<Pod, PodControlError> {
        self.pods
            .create_from(namespace, template, owner, controller_ref)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        self.pods
            .delete_named(namespace, name, owner, preconditions)
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Pod, PodControlError> {
        self.pods
            .patch_named(namespace, name, &Patch::Strategic(patch.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("app".into(), "web".into())])),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec::default()),
        }
    }

    fn owner() -> ObjectReference {
        ObjectReference {
            api_version: Some("apps/v1".into()),
            kind: Some("ReplicaSet".into()),
            name: Some("web".into()),
            namespace: Some("ns".into()),
            uid: Some("rs-uid".into()),
            ..ObjectReference::default()
        }
    }

    fn controller_ref() -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "rs-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    fn boom() -> PodControlError {
        PodControlError::api_status(500, "InternalError", "boom")
    }

    #[tokio::test]
    async fn create_records_and_returns_an_identified_pod() {
        let fake = FakePodControl::new();
        let a = fake
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap();
        let b = fake
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap();
        assert_eq!(a.metadata.name.as_deref(), Some("web-0"));
        assert_eq!(b.metadata.name.as_deref(), Some("web-1"));
        assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
        assert_ne!(a.metadata.uid, b.metadata.uid);
        assert!(a.metadata.resource_version.is_some());
        assert_eq!(a.metadata.owner_references, Some(vec![controller_ref()]));
        assert_eq!(fake.templates(), vec![template(), template()]);
        assert_eq!(
            fake.controller_refs(),
            vec![controller_ref(), controller_ref()]
        );
        assert_eq!(fake.create_count(), 2);
        assert_eq!(fake.created_pods(), vec![a, b]);
        assert_eq!(fake.creates()[0].namespace, "ns");
        assert_eq!(fake.creates()[0].owner, owner());
    }

    #[tokio::test]
    async fn create_rejects_what_the_real_one_rejects_but_records_it() {
        let fake = FakePodControl::new();
        let mut bad_ref = controller_ref();
        bad_ref.controller = Some(false);
        let err = fake
            .create_pods("ns", &template(), &owner(), &bad_ref)
            .await
            .unwrap_err();
        assert!(err.is_invalid());
        assert_eq!(fake.create_count(), 1);
        assert!(fake.created_pods().is_empty());
    }

    #[tokio::test]
    async fn delete_records_names_keys_and_preconditions() {
        let fake = FakePodControl::new();
        let pre = Preconditions {
            uid: Some("u".into()),
            resource_version: None,
        };
        fake.delete_pod("ns", "a", &owner(), Some(&pre))
            .await
            .unwrap();
        fake.delete_pod("other", "b", &owner(), None).await.unwrap();
        assert_eq!(fake.deleted_pod_names(), vec!["a", "b"]);
        assert_eq!(fake.deleted_pod_keys(), vec!["ns/a", "other/b"]);
        assert_eq!(fake.deletes()[0].preconditions, Some(pre));
        assert_eq!(fake.deletes()[1].preconditions, None);
        assert_eq!(fake.delete_count(), 2);
    }

    #[tokio::test]
    async fn patch_applies_metadata_to_a_minimal_pod() {
        let fake = FakePodControl::new();
        let patch = json!({
            "metadata": {
                "uid": "pod-uid",
                "labels": {"a": "b"},
                "ownerReferences": [
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web",
                     "uid": "rs-uid", "controller": true, "blockOwnerDeletion": true},
                    {"$patch": "delete", "uid": "old-owner"}
                ]
            }
        });
        let pod = fake.patch_pod("ns", "p", &patch).await.unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("p"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        assert_eq!(pod.metadata.uid.as_deref(), Some("pod-uid"));
        assert_eq!(pod.metadata.labels.unwrap()["a"], "b");
        assert_eq!(pod.metadata.owner_references, Some(vec![controller_ref()]));
        assert_eq!(fake.patches(), vec![("p".to_string(), patch)]);
        assert_eq!(fake.patch_calls()[0].namespace, "ns");
    }

    #[tokio::test]
    async fn patch_that_is_not_a_pod_is_invalid() {
        let fake = FakePodControl::new();
        let err = fake
            .patch_pod("ns", "p", &json!({"metadata": {"labels": "not-a-map"}}))
            .await
            .unwrap_err();
        assert!(matches!(err, PodControlError::InvalidPatch(_)), "{err:?}");
    }

    #[tokio::test]
    async fn fail_next_fails_exactly_n_calls_and_still_records_them() {
        let fake = FakePodControl::new();
        fake.fail_next(2, boom);
        let owner = owner();
        assert!(fake.delete_pod("ns", "a", &owner, None).await.is_err());
        assert!(fake.patch_pod("ns", "b", &json!({})).await.is_err());
        assert!(fake.delete_pod("ns", "c", &owner, None).await.is_ok());
        assert_eq!(fake.deleted_pod_names(), vec!["a", "c"]);
        assert_eq!(fake.patch_count(), 1);
    }

    #[tokio::test]
    async fn fail_after_lets_n_through_then_fails_until_cleared() {
        let fake = FakePodControl::new();
        fake.fail_after(2, boom);
        let results: Vec<bool> = futures_ok(&fake, 5).await;
        assert_eq!(results, vec![true, true, false, false, false]);
        fake.clear_failures();
        assert!(fake.delete_pod("ns", "x", &owner(), None).await.is_ok());
    }

    async fn futures_ok(fake: &FakePodControl, n: usize) -> Vec<bool> {
        let mut out = Vec::new();
        for i in 0..n {
            out.push(
                fake.delete_pod("ns", &format!("p{i}"), &owner(), None)
                    .await
                    .is_ok(),
            );
        }
        out
    }

    #[tokio::test]
    async fn per_operation_failures_only_count_that_operation() {
        let fake = FakePodControl::new();
        fake.fail_after_op(Operation::Create, 1, boom);
        fake.fail_next_op(Operation::Delete, 1, || {
            PodControlError::api_status(409, "Conflict", "precondition failed")
        });
        assert!(fake.patch_pod("ns", "p", &json!({})).await.is_ok());
        assert!(
            fake.create_pods("ns", &template(), &owner(), &controller_ref())
                .await
                .is_ok()
        );
        let err = fake
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap_err();
        assert_eq!(err.status_code(), Some(500));
        let err = fake
            .delete_pod("ns", "a", &owner(), None)
            .await
            .unwrap_err();
        assert!(err.is_conflict());
        assert!(fake.delete_pod("ns", "a", &owner(), None).await.is_ok());
        assert_eq!(fake.created_pods().len(), 1);
    }

    #[tokio::test]
    async fn create_limit_and_clear() {
        let fake = FakePodControl::new();
        fake.set_create_limit(1);
        fake.fail_next(0, boom); // a no-op rule
        assert!(
            fake.create_pods("ns", &template(), &owner(), &controller_ref())
                .await
                .is_ok()
        );
        let err = fake
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("limit 1 already reached"), "{err}");

        fake.fail_next(1, boom);
        fake.clear();
        assert_eq!(fake.create_count(), 0);
        assert!(fake.templates().is_empty());
        // The limit is gone, the planned failure is not.
        assert!(
            fake.create_pods("ns", &template(), &owner(), &controller_ref())
                .await
                .is_err()
        );
        let pod = fake
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap();
        // Names keep counting after clear().
        assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
    }

    #[tokio::test]
    async fn clones_share_state() {
        let fake = FakePodControl::new();
        let as_trait: Arc<dyn PodControl> = Arc::new(fake.clone());
        as_trait
            .delete_pod("ns", "a", &owner(), None)
            .await
            .unwrap();
        assert_eq!(fake.deleted_pod_names(), vec!["a"]);
        assert!(format!("{fake:?}").contains("deletes: 1"));
    }
}
