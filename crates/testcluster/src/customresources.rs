//! CustomResourceDefinitions served: the `customresourcedefinitions`
//! type's rules, and what kube-apiserver's apiextensions controllers do
//! when a definition changes (naming, establishing, finalizing), done
//! synchronously within the write that changed it, so that a custom
//! object can be created right after its definition.
//!
//! - **Naming** (`NamingConditionController`): the requested names are
//!   checked against the accepted names of the other definitions of the
//!   group (and, beyond kube-apiserver, against the built-in types of the
//!   group, which the test cluster cannot serve twice); conflicts make
//!   `NamesAccepted` False with its reason (`PluralConflict`,
//!   `SingularConflict`, `ShortNamesConflict`, `KindConflict`,
//!   `ListKindConflict`) and message (`"x" is already in use`).
//! - **Establishing**: once the names are accepted, every served version
//!   is registered as a type (a [`ResourceDef`] per version, all sharing
//!   one store table) and `Established` is True.
//! - **Finalizing** (`CRDFinalizer`): deleting a definition adds the
//!   `customresourcecleanup.apiextensions.k8s.io` finalizer and the
//!   `Terminating` condition; every custom object is deleted (their own
//!   finalizers are honoured); when none is left the finalizer goes, the
//!   definition is removed and its types are no longer served.
//!
//! Custom objects go through the generic machinery with [`CustomHooks`]:
//! the request version's schema defaults, prunes and validates them
//! (422 with kube-apiserver's causes); `generation` is bumped on any change
//! outside `metadata`; they are stored at the storage version and served
//! at any served version with `apiVersion` rewritten (conversion `None`).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::{Mutex, RwLock};
use serde_json::{Map, Value, json};

use crate::crd::field::invalid_status;
use crate::crd::{
    CustomResourceDefinition, GroupVersionDocument, PrinterColumns, Version, apply_crd_defaults,
    invalid_crd_status, validate_crd_update,
};
use crate::json::At;
use crate::ops::{Api, DeleteOpts};
use crate::resources::{
    Column, KindHooks, Propagation, ResourceDef, ResourceId, ScalePaths, StorageVersion,
};
use crate::semantics;
use crate::status::ApiError;

/// The finalizer kube-apiserver puts on a definition being deleted until
/// its custom objects are gone.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn text<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    v.at(path).and_then(Value::as_str).unwrap_or("")
}

fn name_of(v: &Value) -> &str {
    text(v, &["metadata", "name"])
}

/// The rules of the `customresourcedefinitions` type itself.
pub(crate) struct DefinitionHooks;

impl DefinitionHooks {
    /// `status.storedVersions` gains the storage version, as the CRD
    /// strategy does on create and update.
    fn record_storage_version(obj: &mut Value) {
        let storage = obj
            .at(&["spec", "versions"])
            .and_then(Value::as_array)
            .and_then(|vs| {
                vs.iter()
                    .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            })
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let Some(storage) = storage else { return };
        if !obj.get("status").is_some_and(Value::is_object) {
            obj["status"] = json!({});
        }
        let stored = obj["status"]
            .as_object_mut()
            .map(|s| s.entry("storedVersions").or_insert_with(|| json!([])));
        if let Some(Value::Array(list)) = stored
            && !list.iter().any(|v| v.as_str() == Some(storage.as_str()))
        {
            list.push(Value::String(storage));
        }
    }
}

impl KindHooks for DefinitionHooks {
    fn decode(&self, _def: &ResourceDef, obj: &mut Value) {
        apply_crd_defaults(obj);
    }

    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        obj["status"] = json!({
            "acceptedNames": {"plural": "", "kind": ""},
            "conditions": [],
            "storedVersions": [],
        });
        Self::record_storage_version(obj);
    }

    fn prepare_update(
        &self,
        _def: &ResourceDef,
        old: &Value,
        new: &mut Value,
    ) -> Result<(), ApiError> {
        let errors = validate_crd_update(new, old);
        if !errors.is_empty() {
            return Err(ApiError::from_status(&invalid_crd_status(
                name_of(old),
                &errors,
            )));
        }
        Self::record_storage_version(new);
        Ok(())
    }

    fn validate(&self, _def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        CustomResourceDefinition::from_value(obj)
            .map(drop)
            .map_err(|errors| ApiError::from_status(&invalid_crd_status(name_of(obj), &errors)))
    }

    fn begin_delete(&self, _def: &ResourceDef, obj: &mut Value, now: &str) {
        let meta = semantics::meta_mut(obj);
        let finalizers = meta.entry("finalizers").or_insert_with(|| json!([]));
        if let Value::Array(list) = finalizers
            && !list.iter().any(|f| f == CLEANUP_FINALIZER)
        {
            list.push(json!(CLEANUP_FINALIZER));
        }
        set_condition(
            obj,
            "Terminating",
            "True",
            "InstanceDeletionPending",
            "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
            now,
        );
    }
}

/// Set (or replace) a status condition; `lastTransitionTime` moves only
/// when the status changes, as `SetCRDCondition` does.
fn set_condition(
    obj: &mut Value,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
) {
    if !obj.get("status").is_some_and(Value::is_object) {
        obj["status"] = json!({});
    }
    let slot = obj["status"]
        .as_object_mut()
        .map(|s| s.entry("conditions").or_insert_with(|| json!([])));
    let Some(slot) = slot else { return };
    if !slot.is_array() {
        *slot = json!([]);
    }
    let Value::Array(conditions) = slot else {
        return;
    };
    let fresh = json!({
        "type": kind, "status": status, "lastTransitionTime": now,
        "reason": reason, "message": message,
    });
    match conditions
        .iter_mut()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
    {
        Some(existing) => {
            let since = if existing.get("status").and_then(Value::as_str) == Some(status) {
                existing
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or_else(|| json!(now))
            } else {
                json!(now)
            };
            *existing = fresh;
            existing["lastTransitionTime"] = since;
        }
        None => conditions.push(fresh),
    }
}

fn condition_is(obj: &Value, kind: &str, status: &str) -> bool {
    obj.at(&["status", "conditions"])
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(kind)
                    && c.get("status").and_then(Value::as_str) == Some(status)
            })
        })
}

/// The rules of one served version of a custom resource.
pub(crate) struct CustomHooks {
    version: Version,
}

impl CustomHooks {
    fn invalid(
        &self,
        def: &ResourceDef,
        obj: &Value,
        errors: &[crate::crd::field::FieldError],
    ) -> ApiError {
        ApiError::from_status(&invalid_status(def.group, def.kind, name_of(obj), errors))
    }
}

/// Whether two objects differ outside `metadata` (and the `apiVersion`
/// they are written at, and `status` when it is a subresource, which only
/// status writes change): what bumps a custom object's `generation`.
fn differs_outside_metadata(old: &Value, new: &Value, status_subresource: bool) -> bool {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return old != new;
    };
    let relevant = |m: &Map<String, Value>| {
        m.iter()
            .filter(|(k, _)| {
                let ignored = matches!(k.as_str(), "metadata" | "apiVersion" | "kind")
                    || (status_subresource && k.as_str() == "status");
                !ignored
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    relevant(old) != relevant(new)
}

impl KindHooks for CustomHooks {
    fn decode(&self, _def: &ResourceDef, obj: &mut Value) {
        self.version.schema.apply_defaults(obj);
        self.version.schema.prune(obj);
    }

    fn default_create(&self, _def: &ResourceDef, obj: &mut Value) {
        if self.version.subresources.status
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        semantics::meta_mut(obj).insert("generation".into(), json!(1));
    }

    fn prepare_update(
        &self,
        _def: &ResourceDef,
        old: &Value,
        new: &mut Value,
    ) -> Result<(), ApiError> {
        if differs_outside_metadata(old, new, self.version.subresources.status) {
            let generation = old
                .at(&["metadata", "generation"])
                .and_then(Value::as_i64)
                .unwrap_or(0)
                + 1;
            semantics::meta_mut(new).insert("generation".into(), json!(generation));
        }
        Ok(())
    }

    fn validate(&self, def: &ResourceDef, obj: &Value) -> Result<(), ApiError> {
        let errors = self.version.schema.validate(obj);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(self.invalid(def, obj, &errors))
        }
    }

    fn read(&self, _def: &ResourceDef, obj: &mut Value) {
        self.version.schema.apply_defaults(obj);
    }
}

/// Whether a schema declares a `default` anywhere.
fn has_defaults(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.iter().any(|(k, v)| match k.as_str() {
            "default" => true,
            // Property names are field names, not keywords.
            "properties" | "patternProperties" | "definitions" => v
                .as_object()
                .is_some_and(|props| props.values().any(has_defaults)),
            _ => has_defaults(v),
        }),
        Value::Array(items) => items.iter().any(has_defaults),
        _ => false,
    }
}

/// A simple JSON path (`.spec.replicas`) as field names.
fn path_segments(path: &str) -> Vec<String> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The server-side Table columns of a version.
fn columns(version: &Version) -> Vec<Column> {
    PrinterColumns::for_version(version)
        .columns()
        .iter()
        .map(|c| {
            let cell = c.clone();
            Column {
                name: c.name().to_string(),
                kind: c.type_().to_string(),
                format: c.format().to_string(),
                description: c.description().to_string(),
                priority: u32::try_from(c.priority().max(0)).unwrap_or(u32::MAX),
                cell: Arc::new(move |obj, now| cell.cell(obj, now)),
            }
        })
        .collect()
}

/// The names a definition is served under (its `status.acceptedNames`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct AcceptedNames {
    plural: String,
    singular: String,
    kind: String,
    list_kind: String,
    short_names: Vec<String>,
    categories: Vec<String>,
}

impl AcceptedNames {
    fn from_value(v: Option<&Value>) -> AcceptedNames {
        let v = v.unwrap_or(&Value::Null);
        let strings = |k: &str| -> Vec<String> {
            v.get(k)
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        AcceptedNames {
            plural: text(v, &["plural"]).to_string(),
            singular: text(v, &["singular"]).to_string(),
            kind: text(v, &["kind"]).to_string(),
            list_kind: text(v, &["listKind"]).to_string(),
            short_names: strings("shortNames"),
            categories: strings("categories"),
        }
    }

    fn to_value(&self) -> Value {
        let mut v = json!({"plural": self.plural, "kind": self.kind});
        if !self.singular.is_empty() {
            v["singular"] = json!(self.singular);
        }
        if !self.list_kind.is_empty() {
            v["listKind"] = json!(self.list_kind);
        }
        if !self.short_names.is_empty() {
            v["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            v["categories"] = json!(self.categories);
        }
        v
    }
}

/// What is served for one definition.
struct Served {
    /// The definition's uid: a definition recreated under the same name
    /// gets new types and a new table.
    uid: String,
    /// What the types were built from; a reconcile that computes the
    /// same serves nothing new.
    fingerprint: Value,
    /// The store table of the objects, once a version was served.
    table: Option<ResourceId>,
    /// The types of the served versions.
    ids: Vec<ResourceId>,
    /// The storage `apiVersion`, shared by the types of every version.
    storage_version: Arc<StorageVersion>,
    /// The parsed definition (for OpenAPI).
    crd: Arc<CustomResourceDefinition>,
}

thread_local! {
    /// Definitions to reconcile again, while a reconcile runs on this
    /// thread (its own writes come back to it through the commit hook).
    static PENDING: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Ends the reconcile loop of this thread even if a reconcile panics.
struct LoopGuard;

impl Drop for LoopGuard {
    fn drop(&mut self) {
        PENDING.with(|p| *p.borrow_mut() = None);
    }
}

/// The served custom resources and the controllers behind them.
pub(crate) struct CustomResources {
    /// The id of the `customresourcedefinitions` type (its table).
    definitions: ResourceId,
    /// One reconcile at a time across threads.
    serial: Mutex<()>,
    served: Mutex<HashMap<String, Served>>,
    /// Whether any definition is being deleted (a cheap check on every
    /// delete).
    any_terminating: AtomicBool,
    /// The tables of definitions being deleted, by definition name.
    terminating: RwLock<HashMap<ResourceId, String>>,
    /// The OpenAPI v3 documents of the served group-versions.
    /// Built on the first request after a change (an install does not pay
    /// for every served group's document); `None` once a definition changed.
    openapi: RwLock<Option<OpenApiDocs>>,
}

impl std::fmt::Debug for CustomResources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomResources")
            .field("definitions", &self.definitions)
            .finish_non_exhaustive()
    }
}

impl CustomResources {
    /// Served from the definitions stored in table `definitions`.
    pub(crate) fn new(definitions: ResourceId) -> CustomResources {
        CustomResources {
            definitions,
            serial: Mutex::new(()),
            served: Mutex::new(HashMap::new()),
            any_terminating: AtomicBool::new(false),
            terminating: RwLock::new(HashMap::new()),
            openapi: RwLock::new(None),
        }
    }

    /// The table of definitions.
    pub(crate) fn definitions(&self) -> ResourceId {
        self.definitions
    }

    /// The OpenAPI v3 documents of the group-versions custom resources
    /// are served in.
    pub(crate) fn openapi(&self) -> OpenApiDocs {
        if let Some(docs) = self.openapi.read().clone() {
            return docs;
        }
        // Under the `served` lock, as every invalidation is: a change
        // cannot slip between the build and the store.
        let served = self.served.lock();
        if let Some(docs) = self.openapi.read().clone() {
            return docs;
        }
        let docs = Arc::new(build_openapi(&served));
        *self.openapi.write() = Some(docs.clone());
        docs
    }

    /// Whether creates into `table` are refused because its definition
    /// is being deleted (kube-apiserver answers 405).
    pub(crate) fn refuses_creates(&self, table: ResourceId) -> bool {
        self.any_terminating.load(Ordering::Relaxed) && self.terminating.read().contains_key(&table)
    }

    /// An object of `table` was removed: a definition waiting for its
    /// objects to go may be done.
    pub(crate) fn instance_removed(&self, api: &Api, table: ResourceId) {
        if !self.any_terminating.load(Ordering::Relaxed) {
            return;
        }
        let name = self.terminating.read().get(&table).cloned();
        if let Some(name) = name {
            self.changed(api, &name);
        }
    }

    /// The definition `name` was written (or removed): bring what is
    /// served and its status in line, before the write's request ends.
    pub(crate) fn changed(&self, api: &Api, name: &str) {
        let nested = PENDING.with(|p| {
            let mut p = p.borrow_mut();
            match p.as_mut() {
                Some(pending) => {
                    if !pending.iter().any(|n| n == name) {
                        pending.push(name.to_string());
                    }
                    true
                }
                None => {
                    *p = Some(vec![name.to_string()]);
                    false
                }
            }
        });
        if nested {
            return;
        }
        let _guard = LoopGuard;
        let _serial = self.serial.lock();
        while let Some(next) =
            PENDING.with(|p| p.borrow_mut().as_mut().and_then(|pending| pending.pop()))
        {
            self.reconcile(api, &next);
        }
    }

    /// Queue another reconcile of `name` on this thread's loop.
    fn requeue(name: &str) {
        PENDING.with(|p| {
            if let Some(pending) = p.borrow_mut().as_mut()
                && !pending.iter().any(|n| n == name)
            {
                pending.push(name.to_string());
            }
        });
    }

    fn reconcile(&self, api: &Api, name: &str) {
        let key = (String::new(), name.to_string());
        let Some(stored) = api.store.get(self.definitions, &key) else {
            self.withdraw(api, name);
            return;
        };
        let obj = stored.value();
        let Ok(crd) = CustomResourceDefinition::from_value(&obj) else {
            // Only valid definitions are stored; nothing to serve otherwise.
            return;
        };
        let crd = Arc::new(crd);
        let uid = text(&obj, &["metadata", "uid"]).to_string();
        let now = api.now_text();
        let mut next = obj.clone();

        // Naming.
        let (accepted, conflict) = self.accepted_names(api, &crd, &obj, name);
        next["status"]["acceptedNames"] = accepted.to_value();
        match &conflict {
            None => set_condition(
                &mut next,
                "NamesAccepted",
                "True",
                "NoConflicts",
                "no conflicts found",
                &now,
            ),
            Some((reason, message)) => {
                set_condition(&mut next, "NamesAccepted", "False", reason, message, &now)
            }
        }
        // Establishing: serve once names are accepted; an established
        // definition stays served under its accepted names.
        let established = condition_is(&obj, "Established", "True") || conflict.is_none();
        if established {
            match self.serve(api, name, &uid, &crd, &accepted, &obj) {
                Ok(()) => set_condition(
                    &mut next,
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                    &now,
                ),
                Err(why) => {
                    set_condition(&mut next, "Established", "False", "NotAccepted", &why, &now)
                }
            }
        } else {
            set_condition(
                &mut next,
                "Established",
                "False",
                "NotAccepted",
                "not all names are accepted",
                &now,
            );
        }

        // Finalizing.
        let deleting = obj.at(&["metadata", "deletionTimestamp"]).is_some()
            && obj
                .at(&["metadata", "finalizers"])
                .and_then(Value::as_array)
                .is_some_and(|f| f.iter().any(|x| x == CLEANUP_FINALIZER));
        let mut release = false;
        if deleting {
            let served = condition_is(&next, "Established", "True");
            let table = self.served.lock().get(name).and_then(|s| s.table);
            match table.filter(|_| served) {
                Some(table) => {
                    self.mark_terminating(table, name);
                    let remaining = self.delete_instances(api, name, table);
                    if remaining == 0 {
                        set_condition(
                            &mut next,
                            "Terminating",
                            "False",
                            "InstanceDeletionCompleted",
                            "removed all instances",
                            &now,
                        );
                        release = true;
                    } else {
                        set_condition(
                            &mut next,
                            "Terminating",
                            "True",
                            "InstanceDeletionInProgress",
                            "CustomResource deletion is in progress",
                            &now,
                        );
                    }
                }
                None => {
                    set_condition(
                        &mut next,
                        "Terminating",
                        "False",
                        "NeverEstablished",
                        "resource was never established",
                        &now,
                    );
                    release = true;
                }
            }
        }
        if release {
            crate::ops::without_finalizer(&mut next, CLEANUP_FINALIZER);
        }
        if next != obj {
            let status = next.get("status").cloned();
            let finalizers = next.at(&["metadata", "finalizers"]).cloned();
            let _ = api.internal_update(self.definitions, &key, |v| {
                if let Some(s) = &status {
                    v["status"] = s.clone();
                }
                let meta = semantics::meta_mut(v);
                match &finalizers {
                    Some(f) => meta.insert("finalizers".into(), f.clone()),
                    None => meta.remove("finalizers"),
                };
            });
        }
        // A change of names may free names other definitions wait for.
        if accepted != AcceptedNames::from_value(obj.at(&["status", "acceptedNames"])) {
            self.requeue_group(api, &crd.group, name);
        }
    }

    /// Requeue the other definitions of `group` whose names are not all
    /// accepted.
    fn requeue_group(&self, api: &Api, group: &str, except: &str) {
        let (items, _) = api.store.list(self.definitions, None, None);
        for item in items {
            let v = item.value();
            if text(&v, &["spec", "group"]) == group
                && item.summary.name.as_ref() != except
                && !condition_is(&v, "NamesAccepted", "True")
            {
                Self::requeue(&item.summary.name);
            }
        }
    }

    /// kube-apiserver's naming: the requested names each stay as
    /// accepted, or are taken when no other definition of the group (nor
    /// a built-in type of the group) uses them; the last conflict found
    /// is the condition's reason and message.
    fn accepted_names(
        &self,
        api: &Api,
        crd: &CustomResourceDefinition,
        obj: &Value,
        name: &str,
    ) -> (AcceptedNames, Option<(String, String)>) {
        let mut resources: HashSet<String> = HashSet::new();
        let mut kinds: HashSet<String> = HashSet::new();
        let (items, _) = api.store.list(self.definitions, None, None);
        for item in items {
            if item.summary.name.as_ref() == name {
                continue;
            }
            let other = item.value();
            if text(&other, &["spec", "group"]) != crd.group {
                continue;
            }
            let names = AcceptedNames::from_value(other.at(&["status", "acceptedNames"]));
            resources.extend([names.plural, names.singular]);
            resources.extend(names.short_names);
            kinds.extend([names.kind, names.list_kind]);
        }
        let custom: HashSet<ResourceId> = self
            .served
            .lock()
            .values()
            .flat_map(|s| s.ids.iter().copied())
            .collect();
        for def in api.registry.snapshot().served() {
            if def.group == crd.group && !custom.contains(&def.id) {
                resources.insert(def.plural.to_string());
                resources.insert(def.singular.to_string());
                resources.extend(def.short_names.iter().map(|s| s.to_string()));
                kinds.insert(def.kind.to_string());
                kinds.insert(format!("{}List", def.kind));
            }
        }
        resources.remove("");
        kinds.remove("");

        let requested = &crd.names;
        let current = AcceptedNames::from_value(obj.at(&["status", "acceptedNames"]));
        let mut next = current.clone();
        let mut conflict = None;
        let fresh = |requested: &str, accepted: &str, used: &HashSet<String>| {
            requested == accepted || !used.contains(requested)
        };
        let in_use = |n: &str| format!("{n:?} is already in use");
        if fresh(&requested.plural, &current.plural, &resources) {
            next.plural = requested.plural.clone();
        } else {
            conflict = Some(("PluralConflict".to_string(), in_use(&requested.plural)));
        }
        if fresh(&requested.singular, &current.singular, &resources) {
            next.singular = requested.singular.clone();
        } else {
            conflict = Some(("SingularConflict".to_string(), in_use(&requested.singular)));
        }
        if requested.short_names != current.short_names {
            let taken: Vec<String> = requested
                .short_names
                .iter()
                .filter(|s| {
                    !current.short_names.contains(s)
                        && **s != current.plural
                        && **s != current.singular
                        && resources.contains(*s)
                })
                .map(|s| in_use(s))
                .collect();
            match taken.len() {
                0 => next.short_names = requested.short_names.clone(),
                1 => conflict = Some(("ShortNamesConflict".to_string(), taken[0].clone())),
                _ => {
                    conflict = Some((
                        "ShortNamesConflict".to_string(),
                        format!("[{}]", taken.join(", ")),
                    ))
                }
            }
        }
        if fresh(&requested.kind, &current.kind, &kinds) {
            next.kind = requested.kind.clone();
        } else {
            conflict = Some(("KindConflict".to_string(), in_use(&requested.kind)));
        }
        if fresh(&requested.list_kind, &current.list_kind, &kinds) {
            next.list_kind = requested.list_kind.clone();
        } else {
            conflict = Some(("ListKindConflict".to_string(), in_use(&requested.list_kind)));
        }
        next.categories = requested.categories.clone();
        (next, conflict)
    }

    /// Register (or re-register) the types of the definition's served
    /// versions. The error says why it could not be served.
    fn serve(
        &self,
        api: &Api,
        name: &str,
        uid: &str,
        crd: &Arc<CustomResourceDefinition>,
        accepted: &AcceptedNames,
        obj: &Value,
    ) -> Result<(), String> {
        let stored_versions: Vec<String> = obj
            .at(&["status", "storedVersions"])
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let generation = obj
            .at(&["metadata", "generation"])
            .and_then(Value::as_i64)
            .unwrap_or(1);
        let fingerprint = json!({
            "spec": obj.get("spec"),
            "accepted": accepted.to_value(),
            "storedVersions": stored_versions,
            "updated": generation > 1,
        });
        let Some(storage) = crd.storage_version() else {
            return Err("no storage version".to_string());
        };
        let storage_api_version = format!("{}/{}", crd.group, storage.name);
        let mut served = self.served.lock();
        let previous = served.get(name).filter(|s| s.uid == uid);
        if previous.is_some_and(|s| s.fingerprint == fingerprint) {
            return Ok(());
        }
        let (table, remove, storage_version) = match previous {
            Some(p) => {
                p.storage_version.set(&storage_api_version);
                (p.table, p.ids.clone(), p.storage_version.clone())
            }
            None => {
                // A definition recreated under the same name: the old one's
                // types go.
                let remove = served.get(name).map(|s| s.ids.clone()).unwrap_or_default();
                (
                    None,
                    remove,
                    Arc::new(StorageVersion::new(&storage_api_version)),
                )
            }
        };
        // Objects may be stored at another version than a served one.
        let single =
            crd.versions.len() == 1 && stored_versions.iter().all(|v| *v == crd.versions[0].name);
        let defs: Vec<ResourceDef> = crd
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| {
                version_def(
                    crd,
                    v,
                    accepted,
                    (!single).then(|| storage_version.clone()),
                    generation > 1,
                )
            })
            .collect();
        let mut added = Vec::new();
        let mut table = table;
        let mut defs = defs.into_iter();
        let result = match table {
            Some(t) => api
                .registry
                .replace(&remove, defs.map(|d| (d, Some(t))).collect()),
            None => match defs.next() {
                None => api.registry.replace(&remove, Vec::new()),
                Some(first) => {
                    api.registry
                        .replace(&remove, vec![(first, None)])
                        .and_then(|mut first| {
                            let t = first.first().map(|d| d.storage);
                            table = t;
                            let rest = api.registry.replace(&[], defs.map(|d| (d, t)).collect())?;
                            first.extend(rest);
                            Ok(first)
                        })
                }
            },
        };
        match result {
            Ok(defs) => added.extend(defs.iter().map(|d| d.id)),
            Err(e) => return Err(e.to_string()),
        }
        served.insert(
            name.to_string(),
            Served {
                uid: uid.to_string(),
                fingerprint,
                table,
                ids: added,
                storage_version,
                crd: crd.clone(),
            },
        );
        self.invalidate_openapi(&served);
        Ok(())
    }

    /// Stop serving a definition that is gone.
    fn withdraw(&self, api: &Api, name: &str) {
        let Some(gone) = self.served.lock().remove(name) else {
            return;
        };
        let _ = api.registry.replace(&gone.ids, Vec::new());
        if let Some(table) = gone.table {
            let mut terminating = self.terminating.write();
            terminating.remove(&table);
            self.any_terminating
                .store(!terminating.is_empty(), Ordering::Relaxed);
        }
        self.invalidate_openapi(&self.served.lock());
        self.requeue_group(api, &gone.crd.group, name);
    }

    fn mark_terminating(&self, table: ResourceId, name: &str) {
        let mut terminating = self.terminating.write();
        terminating.insert(table, name.to_string());
        self.any_terminating.store(true, Ordering::Relaxed);
    }

    /// Delete every object of the definition's table (each as a delete
    /// request without options would); returns how many remain (held by
    /// finalizers).
    fn delete_instances(&self, api: &Api, name: &str, table: ResourceId) -> usize {
        let view = {
            let served = self.served.lock();
            served
                .get(name)
                .and_then(|s| s.ids.first().copied())
                .and_then(|id| api.registry.def(id))
        };
        let (items, _) = api.store.list(table, None, None);
        if let Some(view) = &view {
            for item in items.iter().filter(|i| !i.summary.terminating) {
                let _ = api.delete(
                    view,
                    &item.summary.namespace,
                    &item.summary.name,
                    &DeleteOpts::default(),
                );
            }
        }
        api.store.list(table, None, None).0.len()
    }

    /// Drops the OpenAPI documents; the caller holds the `served` lock
    /// (the guard is taken to make that so).
    fn invalidate_openapi(&self, _served: &HashMap<String, Served>) {
        *self.openapi.write() = None;
    }
}

/// The OpenAPI v3 documents of the served custom resources, per group and
/// version.
type OpenApiDocs = Arc<BTreeMap<(String, String), GroupVersionDocument>>;

/// Every served group-version's document.
fn build_openapi(
    served: &HashMap<String, Served>,
) -> BTreeMap<(String, String), GroupVersionDocument> {
    let crds: Vec<&CustomResourceDefinition> = served.values().map(|s| &*s.crd).collect();
    let mut gvs: Vec<(String, String)> = crds
        .iter()
        .flat_map(|c| {
            c.versions
                .iter()
                .filter(|v| v.served)
                .map(|v| (c.group.clone(), v.name.clone()))
        })
        .collect();
    gvs.sort();
    gvs.dedup();
    gvs.into_iter()
        .filter_map(|(g, v)| {
            GroupVersionDocument::build(crds.iter().copied(), &g, &v).map(|d| ((g, v), d))
        })
        .collect()
}

/// The type serving version `v` of `crd` under its accepted names.
fn version_def(
    crd: &CustomResourceDefinition,
    v: &Version,
    names: &AcceptedNames,
    storage_version: Option<Arc<StorageVersion>>,
    updated: bool,
) -> ResourceDef {
    let short: Vec<&str> = names.short_names.iter().map(String::as_str).collect();
    let categories: Vec<&str> = names.categories.iter().map(String::as_str).collect();
    let mut def = ResourceDef::new(
        &crd.group,
        &v.name,
        &names.plural,
        &names.singular,
        &names.kind,
        crd.namespaced(),
    )
    .short_names(&short)
    .categories(&categories)
    .with_propagation(Propagation::Background)
    .with_columns(columns(v));
    if v.subresources.status {
        def = def.with_status();
    }
    if let Some(scale) = &v.subresources.scale {
        def = def.with_scale(ScalePaths {
            spec_replicas: path_segments(&scale.spec_replicas_path),
            status_replicas: path_segments(&scale.status_replicas_path),
            label_selector: Some(
                scale
                    .label_selector_path
                    .as_deref()
                    .map(path_segments)
                    .unwrap_or_default(),
            ),
        });
    }
    def.strategic_merge = false;
    def.storage_version = storage_version;
    // Objects written before a schema change may lack its defaults, which
    // kube-apiserver adds on read.
    def.defaults_on_read = updated && has_defaults(&v.schema_json);
    def.with_hooks(Arc::new(CustomHooks { version: v.clone() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_found_in_schemas_not_in_field_names() {
        assert!(has_defaults(
            &json!({"properties": {"a": {"type": "integer", "default": 1}}})
        ));
        assert!(!has_defaults(
            &json!({"properties": {"default": {"type": "string"}}})
        ));
        assert!(has_defaults(
            &json!({"items": {"properties": {"x": {"default": "y"}}}})
        ));
    }

    #[test]
    fn generation_counts_everything_but_metadata() {
        let old =
            json!({"apiVersion": "x/v1", "metadata": {"labels": {"a": "b"}}, "spec": {"n": 1}});
        let mut new = old.clone();
        new["metadata"]["labels"]["a"] = json!("c");
        new["apiVersion"] = json!("x/v2");
        assert!(!differs_outside_metadata(&old, &new, false));
        new["status"] = json!({"ready": true});
        assert!(!differs_outside_metadata(&old, &new, true));
        assert!(differs_outside_metadata(&old, &new, false));
        new["extra"] = json!(true);
        assert!(differs_outside_metadata(&old, &new, true));
    }

    #[test]
    fn conditions_keep_their_transition_time() {
        let mut crd = json!({});
        set_condition(&mut crd, "Established", "True", "A", "a", "t1");
        set_condition(&mut crd, "Established", "True", "B", "b", "t2");
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "t1");
        assert_eq!(crd["status"]["conditions"][0]["reason"], "B");
        set_condition(&mut crd, "Established", "False", "C", "c", "t3");
        assert_eq!(crd["status"]["conditions"][0]["lastTransitionTime"], "t3");
        assert_eq!(crd["status"]["conditions"].as_array().unwrap().len(), 1);
    }
}
