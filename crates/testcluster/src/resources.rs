//! Resource types as data: what one served resource is, and the registry
//! of every resource the cluster serves, which can grow while the cluster
//! runs (custom resources are registered at runtime).
//!
//! Readers take a [`Snapshot`] (one `Arc` clone under a read lock) and
//! index it by [`ResourceId`]; a registration copies the snapshot, adds
//! the new type and swaps the copy in, so readers never wait on a writer
//! for longer than that swap. Ids are never reused: an id names the same
//! type (and the same store table) for the cluster's whole life.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use foldhash::HashMap;
use parking_lot::{Mutex, RwLock};
use serde_json::Value;

use crate::status::ApiError;
use crate::store::Stored;

/// A resource type's index in the registry and in the store's tables.
pub(crate) type ResourceId = usize;

/// What a delete without a propagation policy does to dependents, as the
/// resource's `DefaultGarbageCollectionPolicy` in kube-apiserver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Propagation {
    /// Delete the object now; the garbage collector deletes dependents.
    Background,
    /// Keep the dependents, removing their owner references.
    Orphan,
}

/// Where the `scale` subresource reads and writes replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScalePaths {
    /// The desired replicas, e.g. `spec.replicas`.
    pub(crate) spec_replicas: Vec<String>,
    /// The observed replicas, e.g. `status.replicas`.
    pub(crate) status_replicas: Vec<String>,
    /// A string field holding the label selector in its text form (custom
    /// resources); `None` renders `spec.selector` (built-in kinds).
    pub(crate) label_selector: Option<Vec<String>>,
}

impl ScalePaths {
    /// `spec.replicas` / `status.replicas`, selector from `spec.selector`.
    pub(crate) fn builtin() -> ScalePaths {
        ScalePaths {
            spec_replicas: vec!["spec".into(), "replicas".into()],
            status_replicas: vec!["status".into(), "replicas".into()],
            label_selector: None,
        }
    }
}

/// What a Table cell computes from the object: the object and the current
/// time (for ages).
pub(crate) type CellFn = Arc<dyn Fn(&Value, jiff::Timestamp) -> Value + Send + Sync>;

/// One column of the resource's server-side Table output.
#[derive(Clone)]
pub(crate) struct Column {
    /// The header, e.g. `Name`, `Ready`.
    pub(crate) name: String,
    /// The OpenAPI type of the cells: `string`, `integer`, `number`, `boolean`, `date`.
    pub(crate) kind: String,
    /// The format, e.g. `name` for the name column; often empty.
    pub(crate) format: String,
    /// What the column means.
    pub(crate) description: String,
    /// 0 for the default columns, 1 and more for `-o wide` ones.
    pub(crate) priority: u32,
    /// The cell's value for an object.
    pub(crate) cell: CellFn,
}

impl fmt::Debug for Column {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Column")
            .field("name", &self.name)
            .field("priority", &self.priority)
            .finish_non_exhaustive()
    }
}

/// Kind-specific behaviour on writes: defaulting and validation beyond
/// the generic metadata rules.
pub(crate) trait KindHooks: Send + Sync {
    /// Normalize a written object as it is decoded, before anything else
    /// looks at it (create, update, patch): a custom resource's schema
    /// defaults and pruning, which kube-apiserver applies while decoding.
    fn decode(&self, _def: &ResourceDef, _obj: &mut Value) {}
    /// Fill in defaults on create (after the server-owned metadata).
    fn default_create(&self, _def: &ResourceDef, _obj: &mut Value) {}
    /// Kind-specific update rules after the generic ones (the stored
    /// `old`, the written `new`): custom resources bump `generation` on
    /// any change outside `metadata`, definitions check immutable fields.
    fn prepare_update(
        &self,
        _def: &ResourceDef,
        _old: &Value,
        _new: &mut Value,
    ) -> Result<(), ApiError> {
        Ok(())
    }
    /// Check the object after defaulting, on create and on update; the
    /// error is usually a 422 Invalid naming the field.
    fn validate(&self, _def: &ResourceDef, _obj: &Value) -> Result<(), ApiError> {
        Ok(())
    }
    /// The first delete of an object (before its deletion timestamp is
    /// set): a definition gets its cleanup finalizer and `Terminating`
    /// condition.
    fn begin_delete(&self, _def: &ResourceDef, _obj: &mut Value, _now: &str) {}
    /// Complete a stored object as it is read (served), as kube-apiserver
    /// applies a custom resource's schema defaults when it reads from
    /// storage. Called only for types with [`ResourceDef::defaults_on_read`].
    fn read(&self, _def: &ResourceDef, _obj: &mut Value) {}
}

/// The `apiVersion` a type's objects are stored with, when it differs
/// from the served one or may change: one per custom resource with
/// several versions, shared by the types of all its versions and updated
/// when the definition's storage version changes.
#[derive(Debug)]
pub(crate) struct StorageVersion(parking_lot::RwLock<&'static str>);

impl StorageVersion {
    pub(crate) fn new(api_version: &str) -> StorageVersion {
        StorageVersion(parking_lot::RwLock::new(intern(api_version)))
    }

    /// The current storage `apiVersion`.
    pub(crate) fn get(&self) -> &'static str {
        *self.0.read()
    }

    pub(crate) fn set(&self, api_version: &str) {
        *self.0.write() = intern(api_version);
    }
}

/// A create-only resource that is not stored: the answer is computed
/// from the request (kube-apiserver's review APIs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Review {
    /// `authorization.k8s.io/v1` `SelfSubjectAccessReview`.
    SelfSubjectAccess,
    /// `authorization.k8s.io/v1` `SubjectAccessReview`.
    SubjectAccess,
    /// `authentication.k8s.io/v1` `TokenReview`.
    Token,
    /// `authentication.k8s.io/v1` `SelfSubjectReview` (`kubectl auth whoami`).
    SelfSubject,
}

/// A resource served from another resource's table in another form, as
/// `events.k8s.io/v1` events are core/v1 events (or another version of a
/// custom resource is its storage version).
pub(crate) trait Conversion: Send + Sync {
    /// The stored object (in the storage resource's form) as served.
    fn to_view(&self, stored: Value) -> Value;
    /// A served-form object (a request body) in the stored form.
    fn to_stored(&self, view: Value) -> Value;
    /// A field selector path of the served form in the stored form.
    fn stored_field(&self, path: &[String]) -> Vec<String> {
        path.to_vec()
    }
}

/// One served resource type.
pub(crate) struct ResourceDef {
    /// This type's id; set by [`Registry::register`].
    pub(crate) id: ResourceId,
    /// The id whose store table holds the objects: `id` itself unless the
    /// type is a [`Conversion`] view of another type.
    pub(crate) storage: ResourceId,
    /// API group; empty for the core (legacy) group.
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    /// `group/version`, or just `version` for the core group.
    pub(crate) api_version: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) short_names: Vec<&'static str>,
    /// Discovery categories, e.g. `all`.
    pub(crate) categories: Vec<&'static str>,
    /// The verbs on the main resource, as discovery lists them.
    pub(crate) verbs: &'static [&'static str],
    /// Whether the `status` subresource exists (and main-resource writes
    /// therefore ignore `status`).
    pub(crate) status: bool,
    /// The `scale` subresource, if any.
    pub(crate) scale: Option<ScalePaths>,
    /// Whether the `binding` subresource exists (pods).
    pub(crate) binding: bool,
    /// Whether `metadata.generation` is maintained (bumped on spec changes).
    pub(crate) tracks_generation: bool,
    /// Whether a PUT of a missing object creates it.
    pub(crate) create_on_update: bool,
    pub(crate) default_propagation: Propagation,
    /// Server-side Table columns; empty gives kube-apiserver's default
    /// `Name`, `Created At` table.
    pub(crate) columns: Vec<Column>,
    pub(crate) hooks: Option<Arc<dyn KindHooks>>,
    /// Set for a type served from another type's table.
    pub(crate) conversion: Option<Arc<dyn Conversion>>,
    /// Set when the objects are stored at an `apiVersion` other than
    /// this type's (a custom resource version that is not, or was not
    /// always, the storage version): reads rewrite `apiVersion`, writes
    /// store at this version. `None`: stored as served.
    pub(crate) storage_version: Option<Arc<StorageVersion>>,
    /// Whether reads complete objects with [`KindHooks::read`].
    pub(crate) defaults_on_read: bool,
    /// Whether strategic merge patches are accepted (built-in kinds);
    /// custom resources answer them 415 as kube-apiserver does.
    pub(crate) strategic_merge: bool,
    /// Set for a review resource (create only, nothing stored).
    pub(crate) review: Option<Review>,
    /// Whether names are path segments (RBAC kinds, `system:masters`)
    /// rather than DNS subdomains.
    pub(crate) path_segment_names: bool,
}

impl fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceDef")
            .field("id", &self.id)
            .field("api_version", &self.api_version)
            .field("plural", &self.plural)
            .finish_non_exhaustive()
    }
}

/// Every verb of a resource that supports all of them.
pub(crate) const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Intern a name for the life of the process. Type names are few and
/// repeat across clusters (each distinct string is kept once), and
/// `&'static str` keeps every hot-path read of a type's names a plain
/// pointer copy.
pub(crate) fn intern(s: &str) -> &'static str {
    static NAMES: LazyLock<std::sync::Mutex<HashSet<&'static str>>> =
        LazyLock::new(|| std::sync::Mutex::new(HashSet::new()));
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = names.get(s) {
        return s;
    }
    let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

impl ResourceDef {
    /// A type with every verb, no subresources, no generation, background
    /// propagation, no columns and no hooks; the builder methods below
    /// add the rest.
    pub(crate) fn new(
        group: &str,
        version: &str,
        plural: &str,
        singular: &str,
        kind: &str,
        namespaced: bool,
    ) -> ResourceDef {
        let api_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        ResourceDef {
            id: 0,
            storage: 0,
            group: intern(group),
            version: intern(version),
            api_version: intern(&api_version),
            plural: intern(plural),
            singular: intern(singular),
            kind: intern(kind),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: ALL_VERBS,
            status: false,
            scale: None,
            binding: false,
            tracks_generation: false,
            create_on_update: false,
            default_propagation: Propagation::Background,
            columns: Vec::new(),
            hooks: None,
            conversion: None,
            storage_version: None,
            defaults_on_read: false,
            strategic_merge: true,
            review: None,
            path_segment_names: false,
        }
    }

    pub(crate) fn short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| intern(n)).collect();
        self
    }

    pub(crate) fn categories(mut self, names: &[&str]) -> Self {
        self.categories = names.iter().map(|n| intern(n)).collect();
        self
    }

    pub(crate) fn with_status(mut self) -> Self {
        self.status = true;
        self
    }

    pub(crate) fn with_scale(mut self, paths: ScalePaths) -> Self {
        self.scale = Some(paths);
        self
    }

    pub(crate) fn with_generation(mut self) -> Self {
        self.tracks_generation = true;
        self
    }

    pub(crate) fn with_propagation(mut self, policy: Propagation) -> Self {
        self.default_propagation = policy;
        self
    }

    pub(crate) fn with_columns(mut self, columns: Vec<Column>) -> Self {
        self.columns = columns;
        self
    }

    pub(crate) fn with_hooks(mut self, hooks: Arc<dyn KindHooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// Whether the named subresource exists.
    pub(crate) fn has_subresource(&self, sub: &str) -> bool {
        match sub {
            "status" => self.status,
            "scale" => self.scale.is_some(),
            "binding" => self.binding,
            _ => false,
        }
    }

    /// The subresources, in discovery order.
    pub(crate) fn subresources(&self) -> impl Iterator<Item = &'static str> + '_ {
        [
            ("binding", self.binding),
            ("scale", self.scale.is_some()),
            ("status", self.status),
        ]
        .into_iter()
        .filter(|(_, on)| *on)
        .map(|(s, _)| s)
    }

    /// `plural` for the core group, `plural.group` otherwise, as error
    /// messages name resources.
    pub(crate) fn label(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// Whether objects are served in another form than stored (a
    /// conversion, another `apiVersion`, defaults added on read), so that
    /// stored bytes cannot always be sent as they are.
    pub(crate) fn has_view(&self) -> bool {
        self.conversion.is_some() || self.storage_version.is_some() || self.defaults_on_read
    }

    /// The stored object as this type serves it.
    pub(crate) fn to_view(&self, stored: Value) -> Value {
        let mut view = match &self.conversion {
            Some(c) => c.to_view(stored),
            None => stored,
        };
        if self.storage_version.is_some()
            && let Some(m) = view.as_object_mut()
            && m.get("apiVersion").and_then(Value::as_str) != Some(self.api_version)
        {
            m.insert("apiVersion".into(), Value::String(self.api_version.into()));
        }
        if self.defaults_on_read
            && let Some(hooks) = &self.hooks
        {
            hooks.read(self, &mut view);
        }
        view
    }

    /// The stored object's JSON as this type serves it: the stored bytes
    /// themselves unless the type has a view that changes them.
    pub(crate) fn served_json(&self, stored: &Stored) -> Bytes {
        if !self.has_view()
            || (self.conversion.is_none()
                && !self.defaults_on_read
                && self.stored_as_served(&stored.json))
        {
            return stored.json.clone();
        }
        Bytes::from(self.to_view(stored.value()).to_string())
    }

    /// Whether JSON stored for this type already carries this type's
    /// `apiVersion`. Stored objects are serialized from maps whose keys
    /// are sorted, so `apiVersion` comes first.
    fn stored_as_served(&self, json: &[u8]) -> bool {
        let prefix = b"{\"apiVersion\":\"";
        json.strip_prefix(prefix.as_slice())
            .and_then(|rest| rest.strip_prefix(self.api_version.as_bytes()))
            .is_some_and(|rest| rest.first() == Some(&b'"'))
    }

    /// The `apiVersion` objects of this type are stored with.
    pub(crate) fn stored_api_version(&self) -> &'static str {
        match &self.storage_version {
            Some(v) => v.get(),
            None => self.api_version,
        }
    }

    /// A request body in the stored form.
    pub(crate) fn to_stored(&self, view: Value) -> Value {
        match &self.conversion {
            Some(c) => c.to_stored(view),
            None => view,
        }
    }
}

/// Why a type could not be registered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum RegisterError {
    /// Another served type has the same group, version and plural.
    #[error("{plural}.{group}/{version} is already served")]
    Duplicate {
        group: &'static str,
        version: &'static str,
        plural: &'static str,
    },
    /// `shares_storage_with` names no registered type.
    #[error("resource id {0} is not registered")]
    NoSuchStorage(ResourceId),
}

/// One consistent view of the registry.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    defs: Vec<Arc<ResourceDef>>,
    /// `false` for ids whose type was unregistered (kept so their objects
    /// can still be cleaned up).
    served: Vec<bool>,
    by_plural: HashMap<&'static str, Vec<ResourceId>>,
}

impl Snapshot {
    /// The type with this id (served or not).
    pub(crate) fn def(&self, id: ResourceId) -> Option<&Arc<ResourceDef>> {
        self.defs.get(id)
    }

    /// Every type ever registered, served or not.
    pub(crate) fn all(&self) -> &[Arc<ResourceDef>] {
        &self.defs
    }

    /// The served types, in registration order.
    pub(crate) fn served(&self) -> impl Iterator<Item = &Arc<ResourceDef>> {
        self.defs
            .iter()
            .zip(&self.served)
            .filter(|(_, on)| **on)
            .map(|(d, _)| d)
    }

    /// The served type with this group, version and plural name.
    pub(crate) fn lookup(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<&Arc<ResourceDef>> {
        self.by_plural
            .get(plural)?
            .iter()
            .map(|id| &self.defs[*id])
            .find(|d| d.group == group && d.version == version)
    }

    /// The served type whose objects have this `apiVersion` and `kind`.
    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<&Arc<ResourceDef>> {
        self.served()
            .find(|d| d.api_version == api_version && d.kind == kind)
    }

    /// The served group/versions with at least one type, `("", "v1")`
    /// first, in registration order.
    pub(crate) fn group_versions(&self) -> Vec<(&'static str, &'static str)> {
        let mut out: Vec<(&'static str, &'static str)> = Vec::new();
        for d in self.served() {
            if !out.contains(&(d.group, d.version)) {
                out.push((d.group, d.version));
            }
        }
        out
    }
}

/// The registry of served types.
#[derive(Debug)]
pub(crate) struct Registry {
    current: RwLock<Arc<Snapshot>>,
    /// Serializes registrations (readers only take `current`).
    writer: Mutex<()>,
}

impl Registry {
    /// An empty registry.
    pub(crate) fn new() -> Registry {
        Registry {
            current: RwLock::new(Arc::new(Snapshot::default())),
            writer: Mutex::new(()),
        }
    }

    /// The current set of types.
    pub(crate) fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().clone()
    }

    /// The type with this id.
    pub(crate) fn def(&self, id: ResourceId) -> Option<Arc<ResourceDef>> {
        self.current.read().def(id).cloned()
    }

    /// Serve `def` from now on; with `shares_storage_with`, from that
    /// type's table (through `def.conversion`, or as another version of
    /// the same objects). Returns the registered type (its `id` and
    /// `storage` set).
    pub(crate) fn register(
        &self,
        def: ResourceDef,
        shares_storage_with: Option<ResourceId>,
    ) -> Result<Arc<ResourceDef>, RegisterError> {
        let mut added = self.replace(&[], vec![(def, shares_storage_with)])?;
        added.pop().ok_or(RegisterError::NoSuchStorage(0))
    }

    /// Stop serving the type `id` (its objects stay in the store until
    /// removed). Unknown ids are ignored.
    #[cfg(test)]
    pub(crate) fn unregister(&self, id: ResourceId) {
        let _ = self.replace(&[id], Vec::new());
    }

    /// In one step, stop serving the types `remove` and serve `add`
    /// (each as [`register`](Self::register) would): readers see either
    /// the old types or the new ones, never a moment without either (a
    /// custom resource definition's update swaps its types this way).
    /// Nothing changes on an error.
    pub(crate) fn replace(
        &self,
        remove: &[ResourceId],
        add: Vec<(ResourceDef, Option<ResourceId>)>,
    ) -> Result<Vec<Arc<ResourceDef>>, RegisterError> {
        let _writer = self.writer.lock();
        let cur = self.snapshot();
        let mut defs = cur.defs.clone();
        let mut served = cur.served.clone();
        let mut by_plural = cur.by_plural.clone();
        for &id in remove {
            let Some(def) = defs.get(id) else { continue };
            if let Some(ids) = by_plural.get_mut(def.plural) {
                ids.retain(|i| *i != id);
                if ids.is_empty() {
                    by_plural.remove(def.plural);
                }
            }
            served[id] = false;
        }
        let mut added = Vec::with_capacity(add.len());
        for (mut def, shares_storage_with) in add {
            let taken = by_plural.get(def.plural).is_some_and(|ids| {
                ids.iter()
                    .any(|i| defs[*i].group == def.group && defs[*i].version == def.version)
            });
            if taken {
                return Err(RegisterError::Duplicate {
                    group: def.group,
                    version: def.version,
                    plural: def.plural,
                });
            }
            let id = defs.len();
            def.id = id;
            def.storage = match shares_storage_with {
                Some(s) => defs.get(s).ok_or(RegisterError::NoSuchStorage(s))?.storage,
                None => id,
            };
            let def = Arc::new(def);
            by_plural.entry(def.plural).or_default().push(id);
            defs.push(def.clone());
            served.push(true);
            added.push(def);
        }
        *self.current.write() = Arc::new(Snapshot {
            defs,
            served,
            by_plural,
        });
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_register_at_runtime_and_ids_stay() {
        let reg = Registry::new();
        let a = reg
            .register(ResourceDef::new("", "v1", "pods", "pod", "Pod", true), None)
            .unwrap();
        let before = reg.snapshot();
        let b = reg
            .register(
                ResourceDef::new("example.com", "v1", "widgets", "widget", "Widget", true),
                None,
            )
            .unwrap();
        assert_eq!((a.id, b.id), (0, 1));
        assert!(
            before.lookup("example.com", "v1", "widgets").is_none(),
            "old snapshots do not change"
        );
        let now = reg.snapshot();
        assert_eq!(now.lookup("example.com", "v1", "widgets").unwrap().id, 1);
        assert_eq!(now.by_kind("example.com/v1", "Widget").unwrap().id, 1);
        assert!(now.lookup("", "v1", "widgets").is_none());
        let dup = reg.register(ResourceDef::new("", "v1", "pods", "pod", "Pod", true), None);
        assert!(matches!(dup, Err(RegisterError::Duplicate { .. })));
        reg.unregister(1);
        let after = reg.snapshot();
        assert!(after.lookup("example.com", "v1", "widgets").is_none());
        assert_eq!(
            after.def(1).unwrap().plural,
            "widgets",
            "ids are not reused"
        );
        let c = reg
            .register(
                ResourceDef::new("example.com", "v1", "widgets", "widget", "Widget", true),
                None,
            )
            .unwrap();
        assert_eq!(c.id, 2);
    }

    #[test]
    fn a_view_shares_its_storage_table() {
        let reg = Registry::new();
        let core = reg
            .register(
                ResourceDef::new("", "v1", "events", "event", "Event", true),
                None,
            )
            .unwrap();
        let view = reg
            .register(
                ResourceDef::new("events.k8s.io", "v1", "events", "event", "Event", true),
                Some(core.id),
            )
            .unwrap();
        assert_eq!(view.storage, core.id);
        assert_eq!(
            reg.register(ResourceDef::new("x", "v1", "ys", "y", "Y", true), Some(9))
                .unwrap_err(),
            RegisterError::NoSuchStorage(9)
        );
    }
}
