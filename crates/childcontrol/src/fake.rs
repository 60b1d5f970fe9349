//! A recording [`ChildControl`] for tests.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::Resource;
use kube::api::Patch;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::template::child_from_template;
use crate::{ChildControl, ChildControlError, Operation, WriteAttempt, WriteGate};

/// One recorded create call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedCreate<T> {
    /// The namespace passed in.
    pub namespace: String,
    /// The template passed in.
    pub template: T,
    /// The object events would be recorded against.
    pub owner: ObjectReference,
    /// The controller reference passed in.
    pub controller_ref: OwnerReference,
}

/// One recorded delete call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedDelete {
    /// The namespace passed in.
    pub namespace: String,
    /// The child's name passed in.
    pub name: String,
    /// The object events would be recorded against.
    pub owner: ObjectReference,
    /// The preconditions passed in, if any.
    pub preconditions: Option<Preconditions>,
}

/// One recorded patch call.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedPatch {
    /// The namespace passed in.
    pub namespace: String,
    /// The child's name passed in.
    pub name: String,
    /// The patch passed in.
    pub patch: Patch<Value>,
}

type ErrorFn = Arc<dyn Fn() -> ChildControlError + Send + Sync>;
type BuildFn<C, T> = Arc<
    dyn Fn(&T, &str, &ObjectReference, &OwnerReference) -> Result<C, ChildControlError>
        + Send
        + Sync,
>;

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

struct State<C, T> {
    creates: Vec<RecordedCreate<T>>,
    created: Vec<C>,
    deletes: Vec<RecordedDelete>,
    patches: Vec<RecordedPatch>,
    rules: Vec<FailureRule>,
    create_limit: Option<usize>,
    gate: Option<Arc<dyn WriteGate>>,
    /// Monotonic across [`FakeChildControl::clear`] so names and UIDs never
    /// repeat.
    next_id: u64,
}

impl<C, T> Default for State<C, T> {
    fn default() -> Self {
        Self {
            creates: Vec::new(),
            created: Vec::new(),
            deletes: Vec::new(),
            patches: Vec::new(),
            rules: Vec::new(),
            create_limit: None,
            gate: None,
            next_id: 0,
        }
    }
}

impl<C, T> State<C, T> {
    /// Consumes the injected failure, if any, that applies to the current call
    /// of `operation`. Every rule matching the operation counts the call; the
    /// first one that fires supplies the error.
    fn injected_failure(&mut self, operation: Operation) -> Option<ChildControlError> {
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

    fn check_gate(&self, attempt: &WriteAttempt<'_>) -> Result<(), ChildControlError> {
        match &self.gate {
            Some(gate) => Ok(gate.check(attempt)?),
            None => Ok(()),
        }
    }
}

/// A [`ChildControl`] that talks to no API server: it records every call and
/// can be told to fail.
///
/// `C` is the child kind; `T` the template type its creates take, `C`
/// itself unless built with [`with_builder`](Self::with_builder) (the pod
/// fake of `ctrlkit-podcontrol` takes `PodTemplateSpec`s this way). Clones
/// share their state, so a test can hand one clone to the code under test
/// (e.g. as `Arc<dyn ChildControl<C>>`) and inspect another.
///
/// # What it does on each call
///
/// Every call is recorded first, whether it then succeeds or fails, so a
/// test can see what a controller *attempted*. Then, in order:
///
/// 1. the [write gate](Self::set_write_gate), if set, may refuse it
///    ([`ChildControlError::WriteRefused`]);
/// 2. an injected failure (see [`fail_next`](Self::fail_next),
///    [`fail_after`](Self::fail_after) and their per-operation forms) is
///    returned if one is due;
/// 3. creates enforce [`set_create_limit`](Self::set_create_limit);
/// 4. the call is carried out:
///    - a create validates and builds the child exactly as the real
///      implementation does, with [`child_from_template`] (so the same
///      templates are rejected), then fills in what the API server would:
///      the namespace, the name (`<generateName><n>` unless the template
///      names it), a UID and a resourceVersion, where `n` counts up from 0
///      over the fake's lifetime. The child is returned and remembered in
///      [`created`](Self::created);
///    - a delete succeeds (the fake keeps no objects, so nothing is ever
///      missing);
///    - a patch returns a minimal object (only `apiVersion`, `kind`,
///      `name` and `namespace` set) with the patch applied: merge,
///      strategic merge and apply patches are merged key by key (`null`
///      removes a key, lists are replaced, `$`-prefixed directive keys are
///      dropped and list items carrying `"$patch": "delete"` are removed);
///      JSON patches are applied as RFC 6902 says. A patch that does not
///      produce a valid object (for a kind with required fields, such as a
///      custom resource's `spec`, the patch must set them) fails with
///      [`ChildControlError::InvalidPatch`].
///
/// # Example
///
/// ```
/// use ctrlkit_childcontrol::{ChildControl, ChildControlError, FakeChildControl, Operation};
/// use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let fake = FakeChildControl::<ConfigMap>::new();
/// fake.fail_next_op(Operation::Create, 1, || {
///     ChildControlError::api_status(403, "Forbidden", "exceeded quota")
/// });
///
/// let mut template = ConfigMap::default();
/// template.metadata.generate_name = Some("web-".into());
/// let owner = ObjectReference { name: Some("web".into()), ..Default::default() };
/// let cref = OwnerReference {
///     api_version: "example.com/v1".into(), kind: "App".into(), name: "web".into(),
///     uid: "app-uid".into(), controller: Some(true), block_owner_deletion: Some(true),
/// };
/// assert!(fake.create("ns", &template, &owner, &cref).await.unwrap_err().is_forbidden());
/// let cm = fake.create("ns", &template, &owner, &cref).await.unwrap();
/// assert_eq!(cm.metadata.name.as_deref(), Some("web-0"));
/// assert_eq!(fake.create_count(), 2);
/// assert_eq!(fake.created(), vec![cm]);
/// # });
/// ```
pub struct FakeChildControl<C, T = C> {
    state: Arc<Mutex<State<C, T>>>,
    build: BuildFn<C, T>,
}

impl<C, T> Clone for FakeChildControl<C, T> {
    fn clone(&self) -> Self {
        Self {
            state: Arc::clone(&self.state),
            build: Arc::clone(&self.build),
        }
    }
}

impl<C, T> fmt::Debug for FakeChildControl<C, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("FakeChildControl")
            .field("creates", &s.creates.len())
            .field("deletes", &s.deletes.len())
            .field("patches", &s.patches.len())
            .field("failure_rules", &s.rules.len())
            .field("create_limit", &s.create_limit)
            .field("write_gate", &s.gate.is_some())
            .finish()
    }
}

impl<C> Default for FakeChildControl<C>
where
    C: Resource + Clone + 'static,
{
    fn default() -> Self {
        Self::new()
    }
}

impl<C> FakeChildControl<C>
where
    C: Resource + Clone + 'static,
{
    /// A fake with nothing recorded and no failures planned, whose creates
    /// take a `C` as template.
    pub fn new() -> Self {
        Self::with_builder(|template: &C, namespace, _owner, controller_ref| {
            child_from_template(template.clone(), namespace, controller_ref)
        })
    }
}

impl<C, T> FakeChildControl<C, T> {
    /// A fake whose creates take templates of type `T` and turn them into
    /// the child with `build(template, namespace, owner, controller_ref)`,
    /// which should validate as the real control does. The fake then fills
    /// in the name, namespace, UID and resourceVersion.
    pub fn with_builder<F>(build: F) -> Self
    where
        F: Fn(&T, &str, &ObjectReference, &OwnerReference) -> Result<C, ChildControlError>
            + Send
            + Sync
            + 'static,
    {
        Self {
            state: Arc::new(Mutex::new(State::default())),
            build: Arc::new(build),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<C, T>> {
        // A panicking test thread must not hide the records from the others.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ----- failure injection -------------------------------------------------

    /// Makes the next `n` calls (of any operation) fail with `make_error()`.
    pub fn fail_next<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> ChildControlError + Send + Sync + 'static,
    {
        self.push_rule(None, 0, Some(n), make_error);
    }

    /// Lets the next `n` calls (of any operation) through, then makes every
    /// later call fail with `make_error()` until
    /// [`clear_failures`](Self::clear_failures).
    pub fn fail_after<F>(&self, n: u64, make_error: F)
    where
        F: Fn() -> ChildControlError + Send + Sync + 'static,
    {
        self.push_rule(None, n, None, make_error);
    }

    /// Like [`fail_next`](Self::fail_next), counting only calls of `operation`.
    pub fn fail_next_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> ChildControlError + Send + Sync + 'static,
    {
        self.push_rule(Some(operation), 0, Some(n), make_error);
    }

    /// Like [`fail_after`](Self::fail_after), counting only calls of `operation`.
    pub fn fail_after_op<F>(&self, operation: Operation, n: u64, make_error: F)
    where
        F: Fn() -> ChildControlError + Send + Sync + 'static,
    {
        self.push_rule(Some(operation), n, None, make_error);
    }

    fn push_rule<F>(&self, operation: Option<Operation>, skip: u64, remaining: Option<u64>, f: F)
    where
        F: Fn() -> ChildControlError + Send + Sync + 'static,
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

    /// Makes every create beyond the first `limit` (counted since the last
    /// [`clear`](Self::clear)) fail with
    /// [`ChildControlError::InvalidTemplate`] "not creating …, limit
    /// reached". Like upstream's `CreateLimit`, for checking burst limits.
    pub fn set_create_limit(&self, limit: usize) {
        self.lock().create_limit = Some(limit);
    }

    /// Checks every later call with `gate` (see [`WriteGate`]), as
    /// [`KubeChildControl::with_write_gate`](crate::KubeChildControl::with_write_gate)
    /// does; `None` removes the gate. Refused calls are still recorded.
    pub fn set_write_gate(&self, gate: Option<Arc<dyn WriteGate>>) {
        self.lock().gate = gate;
    }

    /// Forgets every recorded call, the created children and the create
    /// limit. Planned failures and the write gate are kept (as upstream's
    /// fake keeps `Err`); use [`clear_failures`](Self::clear_failures) for
    /// those. Generated names and UIDs keep counting up, so they never
    /// repeat.
    pub fn clear(&self) {
        let mut s = self.lock();
        s.creates.clear();
        s.created.clear();
        s.deletes.clear();
        s.patches.clear();
        s.create_limit = None;
    }

    // ----- inspection --------------------------------------------------------

    /// Every create call in full, in call order.
    pub fn creates(&self) -> Vec<RecordedCreate<T>>
    where
        T: Clone,
    {
        self.lock().creates.clone()
    }

    /// The templates of every create call, in call order.
    pub fn templates(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.lock()
            .creates
            .iter()
            .map(|c| c.template.clone())
            .collect()
    }

    /// The controller references of every create call, in call order.
    pub fn controller_refs(&self) -> Vec<OwnerReference> {
        self.lock()
            .creates
            .iter()
            .map(|c| c.controller_ref.clone())
            .collect()
    }

    /// The children successfully "created" and returned, in call order.
    pub fn created(&self) -> Vec<C>
    where
        C: Clone,
    {
        self.lock().created.clone()
    }

    /// The names (without namespace) of every delete call, in call order.
    pub fn deleted_names(&self) -> Vec<String> {
        self.lock().deletes.iter().map(|d| d.name.clone()).collect()
    }

    /// The `namespace/name` keys of every delete call, in call order.
    pub fn deleted_keys(&self) -> Vec<String> {
        self.lock()
            .deletes
            .iter()
            .map(|d| format!("{}/{}", d.namespace, d.name))
            .collect()
    }

    /// Every delete call in full (including preconditions), in call order.
    pub fn deletes(&self) -> Vec<RecordedDelete> {
        self.lock().deletes.clone()
    }

    /// Every patch call in full, in call order.
    pub fn patches(&self) -> Vec<RecordedPatch> {
        self.lock().patches.clone()
    }

    /// The number of create calls, failed ones included.
    pub fn create_count(&self) -> usize {
        self.lock().creates.len()
    }

    /// The number of delete calls, failed ones included.
    pub fn delete_count(&self) -> usize {
        self.lock().deletes.len()
    }

    /// The number of patch calls, failed ones included.
    pub fn patch_count(&self) -> usize {
        self.lock().patches.len()
    }
}

impl<C, T> FakeChildControl<C, T>
where
    C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned,
    T: Clone,
{
    /// A create with a `T` template, as described on the
    /// [type](Self#what-it-does-on-each-call); what the [`ChildControl`]
    /// implementation calls.
    ///
    /// # Errors
    /// The gate's refusal, an injected failure, the create limit, or the
    /// builder's error.
    pub fn create_from(
        &self,
        namespace: &str,
        template: &T,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        let mut s = self.lock();
        s.creates.push(RecordedCreate {
            namespace: namespace.to_owned(),
            template: template.clone(),
            owner: owner.clone(),
            controller_ref: controller_ref.clone(),
        });
        s.check_gate(&WriteAttempt {
            operation: Operation::Create,
            kind: &C::kind(&()),
            namespace,
            name: None,
        })?;
        if let Some(err) = s.injected_failure(Operation::Create) {
            return Err(err);
        }
        if let Some(limit) = s.create_limit
            && s.creates.len() > limit
        {
            return Err(ChildControlError::InvalidTemplate(format!(
                "not creating {}, limit {limit} already reached (create call {})",
                C::kind(&()).to_lowercase(),
                s.creates.len()
            )));
        }
        let mut child = (self.build)(template, namespace, owner, controller_ref)?;
        let id = s.next_id;
        s.next_id += 1;
        let meta = child.meta_mut();
        if meta.name.as_deref().is_none_or(str::is_empty) {
            let prefix = meta.generate_name.as_deref().unwrap_or_default();
            meta.name = Some(format!("{prefix}{id}"));
        }
        meta.namespace = (!namespace.is_empty()).then(|| namespace.to_owned());
        meta.uid = Some(fake_uid(id));
        meta.resource_version = Some((id + 1).to_string());
        s.created.push(child.clone());
        Ok(child)
    }

    /// A delete, as described on the [type](Self#what-it-does-on-each-call).
    ///
    /// # Errors
    /// The gate's refusal or an injected failure.
    pub fn delete_named(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError> {
        let mut s = self.lock();
        s.deletes.push(RecordedDelete {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            owner: owner.clone(),
            preconditions: preconditions.cloned(),
        });
        s.check_gate(&WriteAttempt {
            operation: Operation::Delete,
            kind: &C::kind(&()),
            namespace,
            name: Some(name),
        })?;
        match s.injected_failure(Operation::Delete) {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    /// A patch, as described on the [type](Self#what-it-does-on-each-call).
    ///
    /// # Errors
    /// The gate's refusal, an injected failure, or
    /// [`ChildControlError::InvalidPatch`].
    pub fn patch_named(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<C, ChildControlError> {
        let mut s = self.lock();
        s.patches.push(RecordedPatch {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            patch: patch.clone(),
        });
        s.check_gate(&WriteAttempt {
            operation: Operation::Patch,
            kind: &C::kind(&()),
            namespace,
            name: Some(name),
        })?;
        if let Some(err) = s.injected_failure(Operation::Patch) {
            return Err(err);
        }
        drop(s);
        let mut doc = serde_json::json!({
            "apiVersion": C::api_version(&()),
            "kind": C::kind(&()),
            "metadata": {"name": name},
        });
        if !namespace.is_empty() {
            doc["metadata"]["namespace"] = Value::from(namespace);
        }
        match patch {
            Patch::Json(ops) => json_patch::patch(&mut doc, ops)
                .map_err(|e| ChildControlError::InvalidPatch(e.to_string()))?,
            Patch::Apply(p) | Patch::Merge(p) | Patch::Strategic(p) => merge(&mut doc, p),
            _ => {
                return Err(ChildControlError::InvalidPatch(
                    "unsupported patch type".to_owned(),
                ));
            }
        }
        serde_json::from_value(doc).map_err(|e| ChildControlError::InvalidPatch(e.to_string()))
    }
}

#[async_trait]
impl<C> ChildControl<C> for FakeChildControl<C>
where
    C: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    async fn create(
        &self,
        namespace: &str,
        template: &C,
        owner: &ObjectReference,
        controller_ref: &OwnerReference,
    ) -> Result<C, ChildControlError> {
        self.create_from(namespace, template, owner, controller_ref)
    }

    async fn delete(
        &self,
        namespace: &str,
        name: &str,
        owner: &ObjectReference,
        preconditions: Option<&Preconditions>,
    ) -> Result<(), ChildControlError> {
        self.delete_named(namespace, name, owner, preconditions)
    }

    async fn patch(
        &self,
        namespace: &str,
        name: &str,
        patch: &Patch<Value>,
    ) -> Result<C, ChildControlError> {
        self.patch_named(namespace, name, patch)
    }
}

/// A UUID-shaped, deterministic UID for the `id`th created object.
fn fake_uid(id: u64) -> String {
    format!("00000000-0000-4000-8000-{id:012x}")
}

/// Merges `patch` into `target`: a simplified strategic merge (see
/// [`FakeChildControl`]'s docs for exactly what is supported), which is
/// also a JSON merge patch when the patch has no directives.
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
