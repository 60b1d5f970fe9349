//! The API operations (create, read, update, patch, delete, bind) with
//! kube-apiserver's semantics, shared by the HTTP layer and the garbage
//! collector.

use crate::json::At;
use std::sync::Arc;

use serde_json::{Value, json};

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::{self, Clock};
use crate::customresources::CustomResources;
use crate::decode;
use crate::kinds::{self, NAMESPACES, PODS};
use crate::managed::{self, Scope};
use crate::patch::{self, PatchKind};
use crate::quota::Quotas;
use crate::resources::{Propagation, RegisterError, Registry, ResourceDef, ResourceId};
use crate::semantics::{self, Part};
use crate::status::ApiError;
use crate::store::{FieldOwners, Key, Limits, Refused, Store, Stored, Write};
use crate::templates::{Probe, Template, Templates};

/// Who writes and whether the write is only simulated (`dryRun=All`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WriteCtx<'a> {
    pub(crate) manager: &'a str,
    pub(crate) dry_run: bool,
    /// The configuration of a server-side apply (whose manager then owns
    /// exactly its fields); `None` for every other write.
    pub(crate) apply: Option<&'a Value>,
}

impl<'a> WriteCtx<'a> {
    /// A write by `manager` that is not an apply.
    pub(crate) fn new(manager: &'a str, dry_run: bool) -> Self {
        WriteCtx {
            manager,
            dry_run,
            apply: None,
        }
    }

    fn operation(&self) -> managed::Operation<'a> {
        match self.apply {
            Some(config) => managed::Operation::Apply(config),
            None => managed::Operation::Update,
        }
    }
}

/// The managedFields scope of a write to `part`.
fn scope_of(part: Part) -> Scope {
    match part {
        Part::Status => Scope::Status,
        Part::Main | Part::Scale => Scope::Main,
    }
}

/// `DeleteOptions` gathered from the query string and the body.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOpts {
    pub(crate) grace_period: Option<i64>,
    pub(crate) propagation: Option<String>,
    pub(crate) uid: Option<String>,
    pub(crate) resource_version: Option<String>,
    pub(crate) dry_run: bool,
}

/// The outcome of a delete: the object is gone, or it is still there
/// (terminating, waiting for finalizers or a grace period).
#[derive(Debug)]
pub(crate) enum Deleted {
    Gone(Arc<Stored>),
    Pending(Arc<Stored>),
}

/// The API state: the store plus the operations on it.
#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) store: Store,
    /// The served resource types.
    pub(crate) registry: Registry,
    /// The templates of recent create bodies.
    templates: Templates,
    /// ResourceQuota admission and status.
    pub(crate) quotas: Quotas,
    /// Where every timestamp comes from.
    clock: Arc<dyn Clock>,
    /// Whether `managedFields` are kept.
    managed_fields: bool,
    /// Flipped to `true` when the cluster stops; open watches end.
    closed: tokio::sync::watch::Sender<bool>,
    /// The custom resources served from stored definitions.
    pub(crate) crds: CustomResources,
    /// The tables of Roles, ClusterRoles, RoleBindings and
    /// ClusterRoleBindings.
    rbac_tables: [ResourceId; 4],
    /// Bumped by every write to an RBAC table, so that an authorizer's
    /// cached policy knows it is stale.
    rbac_epoch: AtomicU64,
}

fn name_of(v: &Value) -> &str {
    v.at(&["metadata", "name"])
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// A name from `generateName`: the base cut to 58 characters, as
/// kube-apiserver does, and a random 5-character suffix.
fn generated_name(base: &str) -> String {
    let mut name: String = base.chars().take(58).collect();
    name.push_str(&semantics::random_suffix());
    name
}

fn not_found(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::not_found(&def.label(), name)
}

fn modified_conflict(def: &ResourceDef, name: &str) -> ApiError {
    ApiError::conflict(
        &def.label(),
        name,
        "the object has been modified; please apply your changes to the latest version and try again",
    )
}

fn parse_rv(rv: &str, def: &ResourceDef, name: &str) -> Result<u64, ApiError> {
    rv.parse().map_err(|_| {
        ApiError::invalid(
            def.kind,
            name,
            format!("metadata.resourceVersion: Invalid value: {rv:?}: must be an integer"),
        )
    })
}

/// A stored-looking object for dry runs; nothing is committed.
fn uncommitted(value: Value, rv: u64) -> Arc<Stored> {
    Arc::new(Stored::new(&value, rv, Arc::new(FieldOwners::new())))
}

/// Terminating, without finalizers and with no grace period left.
fn ready_to_remove(obj: &Value) -> bool {
    let meta = &obj["metadata"];
    meta.get("deletionTimestamp").is_some()
        && meta
            .get("finalizers")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        && meta
            .get("deletionGracePeriodSeconds")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            == 0
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.at(&["metadata", "finalizers"])
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// The checks and normalization of a written object as it is decoded:
/// its kind and shape, then the type's decode hook (a custom resource's
/// schema defaults and pruning).
fn decode_body(def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    semantics::check_body(def, body)?;
    if let Some(hooks) = &def.hooks {
        hooks.decode(def, body);
    }
    Ok(())
}

/// The type's own update rules, after the generic ones.
fn prepare_update_hook(def: &ResourceDef, old: &Value, new: &mut Value) -> Result<(), ApiError> {
    match &def.hooks {
        Some(hooks) => hooks.prepare_update(def, old, new),
        None => Ok(()),
    }
}

/// Objects of a type with a storage version are stored at it.
fn store_at_storage_version(def: &ResourceDef, obj: &mut Value) {
    if def.storage_version.is_some()
        && let Some(m) = obj.as_object_mut()
    {
        m.insert(
            "apiVersion".into(),
            Value::String(def.stored_api_version().into()),
        );
    }
}

/// Remove `finalizer` from the object's finalizers.
pub(crate) fn without_finalizer(obj: &mut Value, finalizer: &str) {
    if let Some(list) = obj
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        list.retain(|f| f.as_str() != Some(finalizer));
        if list.is_empty()
            && let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("finalizers");
        }
    }
}

impl Api {
    /// An empty API serving the built-in kinds, its store within `limits`.
    pub(crate) fn new(
        limits: Limits,
        clock: Arc<dyn Clock>,
        managed_fields: bool,
    ) -> Result<Self, RegisterError> {
        let registry = Registry::new();
        let builtins = kinds::register_builtins(&registry)?;
        Ok(Api {
            store: Store::new(limits),
            registry,
            templates: Templates::new(),
            quotas: Quotas::default(),
            clock,
            managed_fields,
            closed: tokio::sync::watch::channel(false).0,
            crds: CustomResources::new(builtins.definitions),
            rbac_tables: builtins.rbac,
            rbac_epoch: AtomicU64::new(0),
        })
    }

    /// Changes with every write to a Role, ClusterRole, RoleBinding or
    /// ClusterRoleBinding.
    pub(crate) fn rbac_epoch(&self) -> u64 {
        self.rbac_epoch.load(Ordering::Acquire)
    }

    /// The tables of Roles, ClusterRoles, RoleBindings and
    /// ClusterRoleBindings, in that order.
    pub(crate) fn rbac_tables(&self) -> [ResourceId; 4] {
        self.rbac_tables
    }

    /// Commit a write, then let what depends on it follow within the same
    /// request: RBAC policy caches go stale, a written definition is
    /// served (or withdrawn), a definition being deleted learns that one
    /// of its objects is gone.
    fn commit(
        &self,
        resource: ResourceId,
        key: &Key,
        expected: Option<u64>,
        write: Write,
    ) -> Result<Arc<Stored>, Refused> {
        let removed = matches!(write, Write::Delete(_));
        let stored = self.store.commit(resource, key, expected, write)?;
        if self.rbac_tables.contains(&resource) {
            self.rbac_epoch.fetch_add(1, Ordering::Release);
        }
        if resource == self.crds.definitions() {
            self.crds.changed(self, &key.1);
        } else if removed {
            self.crds.instance_removed(self, resource);
        }
        Ok(stored)
    }

    /// kube-apiserver's 405 for creates of a custom resource whose
    /// definition is being deleted.
    fn check_creates_allowed(&self, def: &ResourceDef) -> Result<(), ApiError> {
        if self.crds.refuses_creates(def.storage) {
            let mut err = ApiError::new(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            );
            err.details = Some(Box::new(json!({"group": def.group, "kind": def.plural})));
            return Err(err);
        }
        Ok(())
    }

    /// The type with this id; every id the store holds was registered.
    pub(crate) fn def(&self, id: ResourceId) -> Result<Arc<ResourceDef>, ApiError> {
        self.registry.def(id).ok_or_else(|| {
            ApiError::new(
                500,
                "InternalError",
                format!("resource id {id} is not registered"),
            )
        })
    }

    /// The type whose table holds `def`'s objects (`def` itself unless
    /// it is a view of another type).
    fn storage_of(&self, def: &Arc<ResourceDef>) -> Result<Arc<ResourceDef>, ApiError> {
        // Versions of one custom resource share a table but keep their own
        // rules: only a conversion serves another type's objects.
        if def.storage == def.id || def.conversion.is_none() {
            Ok(def.clone())
        } else {
            self.def(def.storage)
        }
    }

    /// The cluster's current time.
    pub(crate) fn now(&self) -> jiff::Timestamp {
        self.clock.now()
    }

    /// The cluster's current time as a Kubernetes timestamp.
    pub(crate) fn now_text(&self) -> String {
        clock::format(self.clock.now())
    }

    /// End every open watch.
    pub(crate) fn close(&self) {
        self.closed.send_replace(true);
    }

    /// A receiver that turns `true` when the cluster stops.
    pub(crate) fn closed(&self) -> tokio::sync::watch::Receiver<bool> {
        self.closed.subscribe()
    }

    /// The table key for an object of `def`.
    pub(crate) fn key(def: &ResourceDef, namespace: &str, name: &str) -> Key {
        if def.namespaced {
            (namespace.to_string(), name.to_string())
        } else {
            (String::new(), name.to_string())
        }
    }

    pub(crate) fn get(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Stored>, ApiError> {
        self.store
            .get(def.storage, &Self::key(def, namespace, name))
            .ok_or_else(|| not_found(def, name))
    }

    fn ensure_namespace(&self, def: &ResourceDef, namespace: &str) -> Result<(), ApiError> {
        if !def.namespaced {
            return Ok(());
        }
        let ns = self
            .store
            .get(NAMESPACES, &(String::new(), namespace.to_string()))
            .ok_or_else(|| ApiError::not_found("namespaces", namespace))?;
        if ns.summary.terminating {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!(
                    "{} is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                    def.label()
                ),
            ));
        }
        Ok(())
    }

    /// Create an object from a request body (POST), decoded by `parse`.
    /// A body that repeats an earlier one but for its name is created from
    /// that one's template (see [`crate::templates`]) without decoding.
    pub(crate) fn create_body(
        &self,
        def: &Arc<ResourceDef>,
        namespace: &str,
        body: &[u8],
        parse: &dyn Fn(&[u8]) -> Result<Value, ApiError>,
        ctx: WriteCtx<'_>,
    ) -> Result<Arc<Stored>, ApiError> {
        let probe = if ctx.dry_run || def.id == NAMESPACES || def.conversion.is_some() {
            None
        } else {
            self.templates.probe(def.id, namespace, body)
        };
        if let Some(probe) = &probe
            && let Some(template) = self.templates.get(probe)
            && let Some(created) = self.create_from(def, &template, probe, namespace)
        {
            return created;
        }
        self.create_inner(def, namespace, parse(body)?, ctx, probe.as_ref())
    }

    /// Create an object (POST).
    pub(crate) fn create(
        &self,
        def: &Arc<ResourceDef>,
        namespace: &str,
        body: Value,
        ctx: WriteCtx<'_>,
    ) -> Result<Arc<Stored>, ApiError> {
        self.create_inner(def, namespace, body, ctx, None)
    }

    /// Create `template`'s object under the name `probe` gives or a
    /// generated one; `None` leaves the create to the general path, which
    /// reports what is wrong with the name.
    fn create_from(
        &self,
        def: &ResourceDef,
        template: &Template,
        probe: &Probe<'_>,
        namespace: &str,
    ) -> Option<Result<Arc<Stored>, ApiError>> {
        let explicit = probe.name.as_deref().filter(|n| !n.is_empty());
        let generate = template.generate.as_deref();
        if explicit.is_none() && generate.is_none() {
            return None;
        }
        if let Err(e) = self
            .ensure_namespace(def, namespace)
            .and_then(|()| self.check_creates_allowed(def))
        {
            return Some(Err(e));
        }
        let attempts = if explicit.is_some() { 1 } else { 8 };
        for _ in 0..attempts {
            let name = match (explicit, generate) {
                (Some(name), _) => name.to_string(),
                (None, base) => generated_name(base.unwrap_or("")),
            };
            if !semantics::is_dns_subdomain(&name) {
                return None;
            }
            let key = Self::key(def, namespace, &name);
            let _admitted = match self.quotas.admit(self, def, namespace, &name) {
                Ok(guard) => guard,
                Err(e) => return Some(Err(e)),
            };
            let uid = semantics::random_uid();
            let write = template.write(&name, &uid, &self.now_text());
            match self.commit(def.storage, &key, None, write) {
                Ok(stored) => return Some(Ok(stored)),
                Err(e) if !e.is_stale() => return Some(Err(e.into())),
                Err(_) if explicit.is_none() => continue,
                Err(_) => {
                    return Some(Err(ApiError::already_exists(&def.label(), &name)));
                }
            }
        }
        Some(Err(ApiError::already_exists(
            &def.label(),
            generate.unwrap_or(""),
        )))
    }

    /// The general create path; with a `probe`, it also keeps the
    /// template of what it creates.
    fn create_inner(
        &self,
        view: &Arc<ResourceDef>,
        namespace: &str,
        body: Value,
        ctx: WriteCtx<'_>,
        probe: Option<&Probe<'_>>,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = &self.storage_of(view)?;
        let mut body = view.to_stored(body);
        decode_body(def, &mut body)?;
        if def.namespaced
            && let Some(ns) = body.at(&["metadata", "namespace"]).and_then(Value::as_str)
            && !ns.is_empty()
            && ns != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        self.ensure_namespace(def, namespace)?;
        self.check_creates_allowed(def)?;
        let generate = body
            .at(&["metadata", "generateName"])
            .and_then(Value::as_str)
            .filter(|g| !g.is_empty())
            .map(str::to_string);
        let explicit = !name_of(&body).is_empty();
        let attempts = if explicit || generate.is_none() { 1 } else { 8 };
        let mut body = Some(body);
        for attempt in 0..attempts {
            // Clone only when another attempt may follow.
            let mut obj = if attempt + 1 < attempts {
                body.clone().unwrap_or_default()
            } else {
                body.take().unwrap_or_default()
            };
            if !explicit && let Some(base) = &generate {
                semantics::meta_mut(&mut obj)
                    .insert("name".into(), Value::String(generated_name(base)));
            }
            semantics::prepare_create(
                def,
                &mut obj,
                namespace,
                semantics::random_uid(),
                &self.now_text(),
            );
            semantics::validate(def, &obj)?;
            if self.managed_fields {
                let created_at = obj
                    .at(&["metadata", "creationTimestamp"])
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                managed::record(
                    def,
                    None,
                    &mut obj,
                    ctx.manager,
                    ctx.operation(),
                    Scope::Main,
                    &created_at,
                );
            }
            store_at_storage_version(def, &mut obj);
            let name = name_of(&obj).to_string();
            let key = Self::key(def, namespace, &name);
            let _admitted = self.quotas.admit(self, def, namespace, &name)?;
            if def.group.is_empty() && def.plural == "resourcequotas" {
                self.quotas.enable();
            }
            if ctx.dry_run {
                if self.store.get(def.storage, &key).is_some() {
                    return Err(ApiError::already_exists(&def.label(), &name));
                }
                return Ok(uncommitted(obj, self.store.current_rv()));
            }
            let write = match probe {
                Some(probe) => {
                    let (template, write) = Template::new(probe, generate.clone(), &mut obj);
                    self.templates.insert(probe, template);
                    write
                }
                None => Write::Put(obj, Arc::new(FieldOwners::new())),
            };
            match self.commit(def.storage, &key, None, write) {
                Ok(stored) => return Ok(stored),
                Err(e) if !e.is_stale() => return Err(e.into()),
                Err(_) if !explicit => continue,
                Err(_) => return Err(ApiError::already_exists(&def.label(), &name)),
            }
        }
        Err(ApiError::already_exists(
            &def.label(),
            generate.as_deref().unwrap_or(""),
        ))
    }

    /// Read-modify-write with optimistic concurrency: `f` computes the new
    /// object (and optionally new field ownership) from the current one;
    /// if another write lands in between, `f` runs again.
    fn guaranteed_update<F>(
        &self,
        def: &ResourceDef,
        key: &Key,
        ctx: WriteCtx<'_>,
        scope: Scope,
        mut f: F,
    ) -> Result<Arc<Stored>, ApiError>
    where
        F: FnMut(&Stored, &Value) -> Result<(Value, Option<FieldOwners>), ApiError>,
    {
        loop {
            let cur = self
                .store
                .get(def.storage, key)
                .ok_or_else(|| not_found(def, &key.1))?;
            let cur_value = cur.value();
            let (mut new, owners) = f(&cur, &cur_value)?;
            store_at_storage_version(def, &mut new);
            let cur_rv = cur.rv.to_string();
            match new
                .at(&["metadata", "resourceVersion"])
                .and_then(Value::as_str)
            {
                Some(rv) if !rv.is_empty() && rv != cur_rv => {
                    parse_rv(rv, def, &key.1)?;
                    return Err(modified_conflict(def, &key.1));
                }
                _ => {}
            }
            let meta = semantics::meta_mut(&mut new);
            meta.insert("resourceVersion".into(), Value::String(cur_rv));
            match cur_value.at(&["metadata", "managedFields"]) {
                Some(m) => meta.insert("managedFields".into(), m.clone()),
                None => meta.remove("managedFields"),
            };
            let owners = match owners {
                Some(o) => o,
                None if cur.owners.is_empty() => FieldOwners::new(),
                None => patch::record_update(&cur.owners, &cur_value, &new, ctx.manager),
            };
            if new == cur_value && owners == *cur.owners {
                return Ok(cur);
            }
            if self.managed_fields {
                let now = self.now_text();
                managed::record(
                    def,
                    Some(&cur_value),
                    &mut new,
                    ctx.manager,
                    ctx.operation(),
                    scope,
                    &now,
                );
            }
            if ctx.dry_run {
                return Ok(uncommitted(new, cur.rv));
            }
            let write = if ready_to_remove(&new) {
                Write::Delete(new)
            } else {
                Write::Put(new, Arc::new(owners))
            };
            match self.commit(def.storage, key, Some(cur.rv), write) {
                Ok(stored) => return Ok(stored),
                Err(e) if !e.is_stale() => return Err(e.into()),
                Err(_) => {}
            }
        }
    }

    /// Replace an object or one of its parts (PUT).
    pub(crate) fn update(
        &self,
        view: &Arc<ResourceDef>,
        namespace: &str,
        name: &str,
        part: Part,
        body: Value,
        ctx: WriteCtx<'_>,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = &self.storage_of(view)?;
        let mut body = if part == Part::Scale {
            if !body.is_object() {
                return Err(ApiError::bad_request(
                    "the request body must be a Scale object",
                ));
            }
            if let Some(problem) = semantics::scale_problem(&body) {
                return Err(ApiError::bad_request(problem));
            }
            body
        } else {
            let mut body = view.to_stored(body);
            decode_body(def, &mut body)?;
            body
        };
        let body_name = name_of(&body);
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let key = Self::key(def, namespace, name);
        if part == Part::Main
            && view.create_on_update
            && self.store.get(def.storage, &key).is_none()
        {
            semantics::meta_mut(&mut body).insert("name".into(), Value::String(name.into()));
            return self.create(def, namespace, body, ctx);
        }
        self.guaranteed_update(def, &key, ctx, scope_of(part), |_, cur| {
            let mut new = match part {
                Part::Scale => {
                    let mut obj = cur.clone();
                    semantics::apply_scale(def, &mut obj, &body)?;
                    obj
                }
                _ => body.clone(),
            };
            semantics::prepare_update(def, cur, &mut new, part)?;
            prepare_update_hook(def, cur, &mut new)?;
            semantics::validate(def, &new)?;
            Ok((new, None))
        })
    }

    /// Patch an object or one of its parts; the patch applies to the
    /// object as `view` serves it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn patch(
        &self,
        view: &Arc<ResourceDef>,
        namespace: &str,
        name: &str,
        part: Part,
        kind: PatchKind,
        body: &[u8],
        force: bool,
        ctx: WriteCtx<'_>,
    ) -> Result<Arc<Stored>, ApiError> {
        let def = &self.storage_of(view)?;
        let key = Self::key(def, namespace, name);
        let parsed: Value = match kind {
            PatchKind::Json => Value::Null,
            // Clients send apply configurations as JSON (which YAML
            // includes); JSON is read first, as it is cheaper and bounded.
            PatchKind::Apply => decode::parse_json_value(body)
                .or_else(|_| decode::parse_yaml_value(body))
                .map_err(|e| ApiError::bad_request(format!("invalid apply configuration: {e}")))?,
            _ => decode::parse_json_value(body)
                .map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))?,
        };
        let ctx = if kind == PatchKind::Apply {
            WriteCtx {
                apply: Some(&parsed),
                ..ctx
            }
        } else {
            ctx
        };
        if kind == PatchKind::Apply {
            if ctx.manager.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            if part == Part::Main && self.store.get(def.storage, &key).is_none() {
                let mut obj = json!({"metadata": {"name": name}});
                let owners =
                    patch::apply(&mut obj, &FieldOwners::new(), &parsed, ctx.manager, force)?;
                semantics::meta_mut(&mut obj).insert("name".into(), Value::String(name.into()));
                let created = self.create(view, namespace, obj, ctx)?;
                if owners.is_empty() || ctx.dry_run {
                    return Ok(created);
                }
                // Record the ownership on the created object.
                let key2 = key.clone();
                return self.guaranteed_update(def, &key2, ctx, Scope::Main, |_, cur| {
                    Ok((cur.clone(), Some(owners.clone())))
                });
            }
        }
        self.guaranteed_update(def, &key, ctx, scope_of(part), |stored, cur| {
            let mut doc = match part {
                Part::Scale => semantics::scale_of(def, cur),
                _ => view.to_view(cur.clone()),
            };
            let mut owners = None;
            match kind {
                PatchKind::Merge => patch::merge_patch(&mut doc, &parsed),
                PatchKind::Strategic => patch::strategic_merge(&mut doc, &parsed)?,
                PatchKind::Json => {
                    patch::json_patch(&mut doc, body)?;
                    // A JSON patch can put a deep value at a deep path.
                    if decode::nesting(&doc) > decode::MAX_NESTING {
                        return Err(ApiError::invalid(
                            def.kind,
                            name,
                            format!(
                                "the patched object is nested more than {} levels deep",
                                decode::MAX_NESTING
                            ),
                        ));
                    }
                }
                PatchKind::Apply => {
                    owners = Some(patch::apply(
                        &mut doc,
                        &stored.owners,
                        &parsed,
                        ctx.manager,
                        force,
                    )?);
                }
            }
            if !doc.is_object() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "the patched object is not a JSON object",
                ));
            }
            let mut new = match part {
                Part::Scale => {
                    if let Some(problem) = semantics::scale_problem(&doc) {
                        return Err(ApiError::invalid(
                            "Scale",
                            name,
                            format!("patch: Invalid value: {problem}"),
                        ));
                    }
                    let mut obj = cur.clone();
                    semantics::apply_scale(def, &mut obj, &doc)?;
                    obj
                }
                _ => {
                    let mut doc = view.to_stored(doc);
                    decode_body(def, &mut doc)
                        .map_err(|e| semantics::patched_invalid(def, &doc, e))?;
                    doc
                }
            };
            semantics::prepare_update(def, cur, &mut new, part)?;
            prepare_update_hook(def, cur, &mut new)?;
            semantics::validate(def, &new)?;
            Ok((new, owners))
        })
    }

    /// Bind a pod to a node (the `binding` subresource).
    pub(crate) fn bind(
        &self,
        namespace: &str,
        name: &str,
        body: &Value,
        ctx: WriteCtx<'_>,
    ) -> Result<(), ApiError> {
        let node = body
            .at(&["target", "name"])
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid("Binding", name, "target.name: Required value"))?
            .to_string();
        let pods = self.def(PODS)?;
        let key = Self::key(&pods, namespace, name);
        let now = self.now_text();
        self.guaranteed_update(&pods, &key, ctx, Scope::Main, |_, cur| {
            let assigned = cur.at(&["spec", "nodeName"]).and_then(Value::as_str).unwrap_or("");
            if !assigned.is_empty() {
                return Err(ApiError::conflict(
                    "pods/binding",
                    name,
                    &format!("pod {name} is already assigned to node \"{assigned}\""),
                ));
            }
            if cur.at(&["metadata", "deletionTimestamp"]).is_some() {
                return Err(ApiError::conflict("pods/binding", name, "pod is being deleted, cannot be assigned to a host"));
            }
            let mut new = cur.clone();
            new["spec"]["nodeName"] = Value::String(node.clone());
            if !new.get("status").is_some_and(Value::is_object) {
                new["status"] = json!({});
            }
            let conditions = new["status"]
                .as_object_mut()
                .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
            if let Some(Value::Array(list)) = conditions {
                list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
                list.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now}));
            }
            Ok((new, None))
        })
        .map(|_| ())
    }

    /// Delete an object, honouring preconditions, propagation policy,
    /// finalizers and (for pods bound to a node) the grace period.
    pub(crate) fn delete(
        &self,
        view: &Arc<ResourceDef>,
        namespace: &str,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<Deleted, ApiError> {
        let def = &self.storage_of(view)?;
        let resource = def.id;
        let key = Self::key(def, namespace, name);
        if resource == NAMESPACES && (name == "default" || name == "kube-system") {
            return Err(ApiError::new(
                403,
                "Forbidden",
                format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
            ));
        }
        loop {
            let cur = self
                .store
                .get(resource, &key)
                .ok_or_else(|| not_found(def, name))?;
            let uid = &*cur.summary.uid;
            if let Some(want) = &opts.uid
                && want != uid
            {
                return Err(ApiError::conflict(
                    &def.label(),
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"
                    ),
                ));
            }
            if let Some(want) = &opts.resource_version
                && *want != cur.rv.to_string()
            {
                return Err(ApiError::conflict(
                    &def.label(),
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {}",
                        cur.rv
                    ),
                ));
            }
            let mut obj = cur.value();
            let terminating = obj.at(&["metadata", "deletionTimestamp"]).is_some();
            let grace = if resource == PODS {
                let bound = obj
                    .at(&["spec", "nodeName"])
                    .and_then(Value::as_str)
                    .is_some_and(|n| !n.is_empty());
                let phase = obj
                    .at(&["status", "phase"])
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let terminal = phase == "Succeeded" || phase == "Failed";
                let requested = opts
                    .grace_period
                    .or_else(|| {
                        obj.at(&["spec", "terminationGracePeriodSeconds"])
                            .and_then(Value::as_i64)
                    })
                    .unwrap_or(30);
                if !bound || terminal {
                    0
                } else {
                    requested.max(0)
                }
            } else {
                0
            };
            if terminating {
                let current_grace = obj
                    .at(&["metadata", "deletionGracePeriodSeconds"])
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                if grace >= current_grace {
                    return Ok(Deleted::Pending(cur));
                }
            } else if resource == NAMESPACES {
                obj["status"] = json!({"phase": "Terminating"});
            } else {
                // The requested type's default: a view may differ from
                // its storage type, as API versions of one kind do.
                let policy =
                    opts.propagation
                        .as_deref()
                        .unwrap_or(match view.default_propagation {
                            Propagation::Background => "Background",
                            Propagation::Orphan => "Orphan",
                        });
                let finalizer = match policy {
                    "Foreground" => Some("foregroundDeletion"),
                    "Orphan" => Some("orphan"),
                    "Background" => None,
                    other => {
                        return Err(ApiError::invalid(
                            "DeleteOptions",
                            "",
                            format!("propagationPolicy: Unsupported value: {other:?}"),
                        ));
                    }
                };
                if let Some(f) = finalizer
                    && !self.store.dependents_of(uid).is_empty()
                    && !finalizers(&obj).iter().any(|x| x == f)
                {
                    let meta = semantics::meta_mut(&mut obj);
                    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
                    if let Some(list) = list.as_array_mut() {
                        list.push(Value::String(f.into()));
                    }
                }
                if let Some(hooks) = &def.hooks {
                    hooks.begin_delete(def, &mut obj, &self.now_text());
                }
            }
            let meta = semantics::meta_mut(&mut obj);
            meta.insert(
                "deletionTimestamp".into(),
                Value::String(clock::format(
                    self.now()
                        .checked_add(jiff::SignedDuration::from_secs(grace))
                        .unwrap_or_else(|_| self.now()),
                )),
            );
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            let gone = resource != NAMESPACES && ready_to_remove(&obj);
            if opts.dry_run {
                let stored = uncommitted(obj, cur.rv);
                return Ok(if gone {
                    Deleted::Gone(stored)
                } else {
                    Deleted::Pending(stored)
                });
            }
            let write = if gone {
                Write::Delete(obj)
            } else {
                Write::Put(obj, cur.owners.clone())
            };
            match self.commit(resource, &key, Some(cur.rv), write) {
                Ok(stored) => {
                    return Ok(if gone {
                        Deleted::Gone(stored)
                    } else {
                        Deleted::Pending(stored)
                    });
                }
                Err(e) if !e.is_stale() => return Err(e.into()),
                Err(_) => {}
            }
        }
    }

    /// Remove an object unconditionally (used to finish namespace deletion).
    pub(crate) fn remove(&self, resource: ResourceId, key: &Key) {
        while let Some(cur) = self.store.get(resource, key) {
            if self
                .commit(resource, key, Some(cur.rv), Write::Delete(cur.value()))
                .is_ok()
            {
                return;
            }
        }
    }

    /// Apply `f` to an object as an internal (controller) update.
    pub(crate) fn internal_update<F>(
        &self,
        resource: ResourceId,
        key: &Key,
        mut f: F,
    ) -> Result<Arc<Stored>, ApiError>
    where
        F: FnMut(&mut Value),
    {
        let ctx = WriteCtx::new("ctrlkit-testcluster", false);
        let def = self.def(resource)?;
        self.guaranteed_update(&def, key, ctx, Scope::Main, |_, cur| {
            let mut v = cur.clone();
            f(&mut v);
            Ok((v, None))
        })
    }

    /// Store kube-apiserver's bootstrap RBAC policy (see
    /// [`crate::rbac::bootstrap_policy`]), as a cluster that enforces RBAC
    /// has it from the start.
    pub(crate) fn bootstrap_rbac(&self) -> Result<(), ApiError> {
        let ctx = WriteCtx::new("kube-apiserver", false);
        let snap = self.registry.snapshot();
        for object in crate::rbac::bootstrap_policy() {
            let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
            let def = snap
                .by_kind("rbac.authorization.k8s.io/v1", kind)
                .cloned()
                .ok_or_else(ApiError::not_found_path)?;
            self.create(&def, "", object, ctx)?;
        }
        Ok(())
    }

    /// Create the namespaces every cluster has.
    pub(crate) fn bootstrap(&self) -> Result<(), ApiError> {
        let ctx = WriteCtx::new("ctrlkit-testcluster", false);
        let namespaces = self.def(NAMESPACES)?;
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            self.create(
                &namespaces,
                "",
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
                ctx,
            )?;
        }
        Ok(())
    }
}
