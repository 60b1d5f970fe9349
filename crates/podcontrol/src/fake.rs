//! A recording [`PodControl`] for tests.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Preconditions};
use serde_json::Value;

use crate::template::pod_from_template;
use crate::{PodControl, PodControlError};

/// Which [`PodControl`] method a call was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// [`PodControl::create_pods`].
    Create,
    /// [`PodControl::delete_pod`].
    Delete,
    /// [`PodControl::patch_pod`].
    Patch,
}

/// One recorded [`PodControl::create_pods`] call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCreate {
    /// The namespace passed in.
    pub namespace: String,
    /// The template passed in.
    pub template: PodTemplateSpec,
    /// The object events would be recorded against.
    pub owner: ObjectReference,
    /// The controller reference passed in.
    pub controller_ref: OwnerReference,
}

/// One recorded [`PodControl::delete_pod`] call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedDelete {
    /// The namespace passed in.
    pub namespace: String,
    /// The pod name passed in.
    pub name: String,
    /// The object events would be recorded against.
    pub owner: ObjectReference,
    /// The preconditions passed in, if any.
    pub preconditions: Option<Preconditions>,
}

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

type ErrorFn = Arc<dyn Fn() -> PodControlError + Send + Sync>;

/// A rule that makes some future calls fail.
struct FailureRule {
    /// `None` matches every operation.
    operation: Option<Operation>,
    /// Matching calls still allowed to succeed before the rule fires.
    skip: u64,
    /// Matching calls left to fail once firing; `None` means forever.
    remaining: Option<u64>,
    make_error: ErrorFn,
}

#[derive(Default)]
struct State {
    creates: Vec<RecordedCreate>,
    created: Vec<Pod>,
    deletes: Vec<RecordedDelete>,
    patches: Vec<RecordedPatch>,
    rules: Vec<FailureRule>,
    create_limit: Option<usize>,
    /// Monotonic across [`FakePodControl::clear`] so names and UIDs never repeat.
    next_id: u64,
}

impl State {
    /// Consumes the injected failure, if any, that applies to the current call
    /// of `operation`. Every rule matching the operation counts the call; the
    /// first one that fires supplies the error.
    fn injected_failure(&mut self, operation: Operation) -> Option<PodControlError> {
        let mut error = None;
        for rule in &mut self.rules {
            if rule.operation.is_some_and(|op| op != operation) {
                continue;
            }
            if rule.skip > 0 {
                rule.skip -= 1;
                continue;
            }
            if rule.remaining == Some(0) {
                continue;
            }
            if let Some(n) = rule.remaining.as_mut() {
                *n -= 1;
            }
            if error.is_none() {
                error = Some((rule.make_error)());
            }
        }
        self.rules.retain(|r| r.remaining != Some(0));
        error
    }
}

/// A [`PodControl`] that talks to no API server: it records every call and
/// can be told to fail.
///
/// Clones share their state, so a test can hand one clone to the code under
/// test (e.g. as `Arc<dyn PodControl>`) and inspect another.
///
/// # What it does on each call
///
/// Every call is recorded first, whether it then succeeds or fails (as
/// upstream's fake does), so a test can see what a controller *attempted*.
/// Then, in order:
///
/// 1. an injected failure (see [`fail_next`](Self::fail_next),
///    [`fail_after`](Self::fail_after) and their per-operation forms) is
///    returned if one is due;
/// 2. `create_pods` enforces [`set_create_limit`](Self::set_create_limit);
/// 3. the call is carried out:
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
#[derive(Clone, Default)]
pub struct FakePodControl {
    state: Arc<Mutex<State>>,
}

impl fmt::Debug for FakePodControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("FakePodControl")
            .field("creates", &s.creates.len())
            .field("deletes", &s.deletes.len())
            .field("patches", &s.patches.len())
            .field("failure_rules", &s.rules.len())
            .field("create_limit", &s.create_limit)
            .finish()
    }
}

impl FakePodControl {
    /// A fake with nothing recorded and no failures planned.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread must not hide the records from the others.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ----- failure injection -------------------------------------------------

    /// Makes the next `n` calls (of any operation) fail with `make_error()`.
    pub fn fail_next<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.push_rule(None, 0, Some(n), make_error);
    }

    /// Lets the next `n` calls (of any operation) through, then makes every
    /// later call fail with `make_error()` until
    /// [`clear_failures`](Self::clear_failures).
    pub fn fail_after<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.push_rule(None, n, None, make_error);
    }

    /// Like [`fail_next`](Self::fail_next), counting only calls of `operation`.
    pub fn fail_next_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.push_rule(Some(operation), 0, Some(n), make_error);
    }

    /// Like [`fail_after`](Self::fail_after), counting only calls of `operation`.
    pub fn fail_after_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        self.push_rule(Some(operation), n, None, make_error);
    }

    fn push_rule<F>(&self, operation: Option<Operation>, skip: u64, remaining: Option<u64>, f: F)
    where
        F: Fn() -> PodControlError + Send + Sync + 'static,
    {
        if remaining == Some(0) {
            return;
        }
        self.lock().rules.push(FailureRule {
            operation,
            skip,
            remaining,
            make_error: Arc::new(f),
        });
    }

    /// Forgets every planned failure.
    pub fn clear_failures(&self) {
        self.lock().rules.clear();
    }

    /// Makes every `create_pods` call beyond the first `limit` (counted since
    /// the last [`clear`](Self::clear)) fail with
    /// [`PodControlError::InvalidTemplate`] "not creating pod, limit reached".
    /// Like upstream's `CreateLimit`, for checking burst limits.
    pub fn set_create_limit(&self, limit: usize) {
        self.lock().create_limit = Some(limit);
    }

    /// Forgets every recorded call, the created pods and the create limit.
    /// Planned failures are kept (as upstream's fake keeps `Err`); use
    /// [`clear_failures`](Self::clear_failures) for those. Generated names and
    /// UIDs keep counting up, so they never repeat.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.creates.clear();
        s.created.clear();
        s.deletes.clear();
        s.patches.clear();
        s.create_limit = None;
    }

    // ----- inspection --------------------------------------------------------

    /// The templates of every `create_pods` call, in call order.
    pub fn templates(&self) -> Vec<PodTemplateSpec> {
        self.lock()
            .creates
            .iter()
            .map(|c| c.template.clone())
            .collect()
    }

    /// The controller references of every `create_pods` call, in call order.
    pub fn controller_refs(&self) -> Vec<OwnerReference> {
        self.lock()
            .creates
            .iter()
            .map(|c| c.controller_ref.clone())
            .collect()
    }

    /// Every `create_pods` call in full, in call order.
    pub fn creates(&self) -> Vec<RecordedCreate> {
        self.lock().creates.clone()
    }

    /// The pods successfully "created" and returned, in call order.
    pub fn created_pods(&self) -> Vec<Pod> {
        self.lock().created.clone()
    }

    /// The pod names (without namespace) of every `delete_pod` call, in call
    /// order.
    pub fn deleted_pod_names(&self) -> Vec<String> {
        self.lock().deletes.iter().map(|d| d.name.clone()).collect()
    }

    /// The `namespace/name` keys of every `delete_pod` call, in call order.
    pub fn deleted_pod_keys(&self) -> Vec<String> {
        self.lock()
            .deletes
            .iter()
            .map(|d| format!("{}/{}", d.namespace, d.name))
            .collect()
    }

    /// Every `delete_pod` call in full (including preconditions), in call
    /// order.
    pub fn deletes(&self) -> Vec<RecordedDelete> {
        self.lock().deletes.clone()
    }

    /// The pod name and patch of every `patch_pod` call, in call order.
    pub fn patches(&self) -> Vec<(String, Value)> {
        self.lock()
            .patches
            .iter()
            .map(|p| (p.name.clone(), p.patch.clone()))
            .collect()
    }

    /// Every `patch_pod` call in full, in call order.
    pub fn patch_calls(&self) -> Vec<RecordedPatch> {
        self.lock().patches.clone()
    }

    /// The number of `create_pods` calls, failed ones included.
    pub fn create_count(&self) -> usize {
        self.lock().creates.len()
    }

    /// The number of `delete_pod` calls, failed ones included.
    pub fn delete_count(&self) -> usize {
        self.lock().deletes.len()
    }

    /// The number of `patch_pod` calls, failed ones included.
    pub fn patch_count(&self) -> usize {
        self.lock().patches.len()
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
        let mut s = self.lock();
        s.creates.push(RecordedCreate {
            namespace: namespace.to_owned(),
            template: template.clone(),
            owner: owner.clone(),
            controller_ref: controller_ref.clone(),
        });
        if let Some(err) = s.injected_failure(Operation::Create) {
            return Err(err);
        }
        if let Some(limit) = s.create_limit
            && s.creates.len() > limit
        {
            return Err(PodControlError::InvalidTemplate(format!(
                "not creating pod, limit {limit} already reached (create call {})",
                s.creates.len()
            )));
        }
        let owner_name = owner.name.as_deref().unwrap_or(&controller_ref.name);
        let mut pod = pod_from_template(template, owner_name, controller_ref)?;
        let id = s.next_id;
        s.next_id += 1;
        let prefix = pod.metadata.generate_name.clone().unwrap_or_default();
        pod.metadata.name = Some(format!("{prefix}{id}"));
        pod.metadata.namespace = Some(namespace.to_owned());
        pod.metadata.uid = Some(fake_uid(id));
        pod.metadata.resource_version = Some((id + 1).to_string());
        s.created.push(pod.clone());
        Ok(pod)
    }

    async fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), PodControlError> {
        let mut s = self.lock();
        s.deletes.push(RecordedDelete {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            owner: owner.clone(),
            preconditions: preconditions.cloned(),
        });
        match s.injected_failure(Operation::Delete) {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    async fn patch_pod(
        &self,
        namespace: &str,
        name: &str,
        patch: &Value,
    ) -> Result<Pod, PodControlError> {
        let mut s = self.lock();
        s.patches.push(RecordedPatch {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        if let Some(err) = s.injected_failure(Operation::Patch) {
            return Err(err);
        }
        drop(s);
        let base = Pod {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let mut doc = serde_json::to_value(&base)
            .map_err(|e| PodControlError::InvalidPatch(e.to_string()))?;
        merge(&mut doc, patch);
        serde_json::from_value(doc).map_err(|e| PodControlError::InvalidPatch(e.to_string()))
    }
}

/// A UUID-shaped, deterministic UID for the `id`th created pod.
fn fake_uid(id: u64) -> String {
    format!("00000000-0000-4000-8000-{id:012x}")
}

/// Merges `patch` into `target`: a simplified strategic merge (see
/// [`FakePodControl`]'s docs for exactly what is supported).
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (key, value) in p {
                if key.starts_with('$') {
                    continue;
                }
                if value.is_null() {
                    t.remove(key);
                } else {
                    merge(t.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        (target, Value::Array(items)) => {
            let kept = items
                .iter()
                .filter(|item| item.get("$patch").and_then(Value::as_str) != Some("delete"))
                .map(|item| {
                    let mut clean = Value::Null;
                    merge(&mut clean, item);
                    clean
                })
                .collect();
            *target = Value::Array(kept);
        }
        (target, Value::Object(p)) => {
            *target = Value::Object(serde_json::Map::new());
            merge(target, &Value::Object(p.clone()));
        }
        (target, value) => *target = value.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
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
