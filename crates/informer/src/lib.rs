//! A watch-driven cache of Kubernetes objects that tells your controller
//! what changed: `on_add`, `on_update(old, new)` and `on_delete` (with
//! tombstones), secondary indexes, periodic resync and one shared watch per
//! resource. Its list/watch loop follows kube-runtime's
//! [`watcher`](kube::runtime::watcher()), decoding each object on its own.
//!
//! # What an informer is
//!
//! A controller must not ask the API server for every object each time it
//! reconciles: it keeps a local copy instead. An *informer* lists a
//! resource once, then watches it, keeping a cache (the [`Store`]) in step
//! with the server. Each change is also passed to *event handlers*, whose
//! job is to decide which keys need work and put them on a workqueue;
//! workers then reconcile those keys, reading only from the cache.
//!
//! kube-runtime's reflector keeps a cache too, but tells you only *that*
//! an object changed. Controllers written the way the Kubernetes controller
//! manager writes them also need the *previous* state (did the labels
//! change? did the pod just become ready?), the last state of objects whose
//! delete was missed, an index to find "the pods this ReplicaSet controls"
//! quickly, and the resourceVersion the cache has reached. This crate adds
//! exactly that, with the same [`watcher::Config`](kube::runtime::watcher::Config).
//!
//! # Event semantics
//!
//! The watcher reports a complete list (`Init`, `InitApply`…, `InitDone`)
//! and then individual changes (`Apply`, `Delete`). The informer turns them
//! into handler calls as follows:
//!
//! | what happened | handler calls |
//! |---|---|
//! | first complete list | `on_add(obj, true)` per object; then the informer counts as synced |
//! | object created | `on_add(obj, false)` |
//! | object modified | `on_update(old, new)` |
//! | object deleted | `on_delete(DeletedObject::Final(obj))` |
//! | relist (the watch fell behind, e.g. HTTP 410) | new objects: `on_add(obj, false)`; changed resourceVersion: `on_update(old, new)`; unchanged: nothing; missing: `on_delete(DeletedObject::Tombstone(..))` |
//! | same name, new UID (re-created while unseen) | `on_delete(Tombstone(old))` then `on_add(new, false)` |
//! | periodic resync | `on_update(obj, obj)` per cached object, with both arguments the same `Arc` |
//! | an object that does not decode into `K` | `on_undecodable(obj)`; the cache keeps the last version it could decode |
//!
//! A *tombstone* ([`DeletedFinalStateUnknown`]) carries the last state the
//! cache knew of an object whose delete event never arrived; handlers
//! usually treat it like a normal delete.
//!
//! Guarantees: handlers are called one notification at a time, in the
//! order of the changes, each handler in registration order; the store
//! already shows a change when its handlers run; `on_update` never mixes
//! two UIDs. Handlers are synchronous and must be cheap (compute a key,
//! enqueue it); a panicking handler is logged and skipped, never fatal. See
//! [`EventHandler`] for the full contract.
//!
//! # Indexes
//!
//! An index is a named function from an object to string keys, kept up to
//! date on every add, update, delete and relist; [`Store::by_index`] returns
//! the objects under a key at a cost proportional to the answer.
//! [`index_by_namespace`] and [`index_by_controller_uid`] are ready-made;
//! with the latter, [`Store::by_controller`] fetches the pods an owner
//! controls plus its namespace's orphans, the lookup the ReplicaSet
//! controller makes on every sync. An index holds the objects themselves,
//! so a lookup does not go through the store's maps a second time.
//!
//! An owner can adopt only the orphans its selector matches, and those
//! carry every label the selector requires by equality. With
//! [`index_orphans_by_label`] registered as well,
//! [`Store::by_controller_with_labelled_orphans`] returns the owned objects
//! plus only the orphans carrying given labels, visiting the orphans of the
//! least common label rather than all of them: a sync then costs the same
//! in a namespace full of unrelated orphans as in an empty one.
//!
//! # Transforms
//!
//! A [`Transform`] runs on every object before it enters the cache
//! (client-go's `SetTransform`), e.g. [`Transform::drop_managed_fields`]
//! to keep `metadata.managedFields` out of memory. Set it on the builder,
//! or with [`Informer::set_transform`] on a shared informer before it
//! starts; a shared informer refuses a second, different transform.
//!
//! # Objects that do not decode
//!
//! One object the client cannot decode (a value beyond its Rust type's
//! range, a newer API version's shape) must not stop the reconciliation of
//! all others. Each object of a list or watch is decoded on its own; one
//! that does not fit `K` is an [`UndecodableObject`]: skipped, logged at
//! warn level (namespace, name, resourceVersion, error), counted in
//! [`Informer::stats`] and handed to [`EventHandler::on_undecodable`].
//! See [`Informer::apply_maybe_decoded`] for what the cache does with it:
//! in short, it keeps the last version it could decode, a relist never
//! takes the object for deleted, and a delete still deletes.
//!
//! # Watch health
//!
//! [`Informer::health`] and [`SharedInformerFactory::health`] fail when a
//! running informer has heard nothing from the API server (no list page,
//! event, bookmark or watch that ran to its timeout) for longer than a
//! bound — [`DEFAULT_WATCH_HEALTH_BOUND`] explains the default. A watch
//! answered with "Too large resource version" (the server's versions went
//! backwards, e.g. after it restarted on fresh storage) or 410 Gone starts
//! over with a fresh list, as client-go's reflector does. A resourceVersion
//! is one clock for the whole server, so the informers of one
//! [`SharedInformerFactory`] share a [`ServerVersions`]: the first to find
//! the versions gone backwards makes every other one relist at once too,
//! including one whose watch the new server accepted and that would
//! otherwise stay blind.
//!
//! # Controller references
//!
//! [`controller_ref`], [`is_controlled_by`] and [`is_orphan`] are the
//! workspace's one implementation of "who controls this object": the first
//! owner reference with `controller: true`, and an empty owner UID never
//! matches.
//!
//! # resourceVersions
//!
//! [`Store::last_sync_resource_version`] and
//! [`Store::has_observed_resource_version`] answer "has the cache caught up
//! with my own write?", the question behind Kubernetes 1.36's stale-cache
//! protection. They are numeric comparisons of opaque strings, valid for
//! etcd-backed servers, and the value only advances when a watched object
//! changes (and starts over when the server's versions went backwards);
//! see their docs for the limits. "Does the cache hold everything the
//! server holds now?" is answered in a quiet cluster too by
//! [`Store::consistent_read`] (a quorum list with the informer's
//! selectors) and [`Store::reflects`] (object by object).
//!
//! # Server-side sharding
//!
//! [`Informer::set_shard_selector`] lists and watches only the objects a
//! KEP-5866 `shardSelector` selects (Kubernetes 1.36 alpha), starting
//! over with a fresh list when it changes;
//! [`Informer::shard_selector_support`] tells whether the server applied
//! it (it echoes it in `metadata.shardInfo.selector`) or ignored it.
//!
//! # Sharing
//!
//! Several controllers that watch pods should share one watch and one
//! cache. [`SharedInformerFactory`] hands out the same [`Informer`] for the
//! same resource type, API path and selectors; each controller adds its own
//! handlers and indexes, then the factory starts every watch and can stop
//! them all. There is no global state: build a factory and pass it around.
//!
//! # Example
//!
//! Informers can be fed by hand, which is how controller unit tests give a
//! controller a cache without a cluster. With a cluster, use
//! [`Informer::builder`] with an [`Api`](kube::Api) (or the factory) and
//! call [`Informer::start`] instead of feeding events.
//!
//! ```
//! use std::sync::Arc;
//! use ctrlkit_informer::{
//!     BY_CONTROLLER_UID, DeletedObject, HandlerFns, Informer, index_by_controller_uid,
//! };
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::runtime::watcher::Event;
//! use parking_lot::Mutex;
//!
//! fn pod(name: &str, uid: &str, rv: &str) -> Pod {
//!     let mut p = Pod::default();
//!     p.metadata.namespace = Some("default".into());
//!     p.metadata.name = Some(name.into());
//!     p.metadata.uid = Some(uid.into());
//!     p.metadata.resource_version = Some(rv.into());
//!     p
//! }
//!
//! // A handler that records what it is told; a controller would enqueue keys.
//! let log = Arc::new(Mutex::new(Vec::new()));
//! let (a, u, d) = (log.clone(), log.clone(), log.clone());
//! let handler = HandlerFns::new()
//!     .on_add(move |p: &Arc<Pod>, initial| {
//!         a.lock().push(format!("add {} initial={initial}", p.metadata.name.as_deref().unwrap_or("")))
//!     })
//!     .on_update(move |old: &Arc<Pod>, new: &Arc<Pod>| {
//!         u.lock().push(format!(
//!             "update rv {} -> {}",
//!             old.metadata.resource_version.as_deref().unwrap_or(""),
//!             new.metadata.resource_version.as_deref().unwrap_or(""),
//!         ))
//!     })
//!     .on_delete(move |gone: &DeletedObject<Pod>| {
//!         d.lock().push(format!("delete tombstone={}", gone.is_tombstone()))
//!     });
//!
//! let informer = Informer::<Pod>::manual()
//!     .index(BY_CONTROLLER_UID, index_by_controller_uid)
//!     .handler(handler)
//!     .build();
//!
//! // The first list: two pods.
//! informer.apply_event(Event::Init);
//! informer.apply_event(Event::InitApply(pod("a", "uid-a", "10")));
//! informer.apply_event(Event::InitApply(pod("b", "uid-b", "11")));
//! informer.apply_event(Event::InitDone);
//! assert!(informer.has_synced());
//!
//! // A change, then a relist in which pod "b" is missing.
//! informer.apply_event(Event::Apply(pod("a", "uid-a", "12")));
//! informer.apply_event(Event::Init);
//! informer.apply_event(Event::InitApply(pod("a", "uid-a", "12")));
//! informer.apply_event(Event::InitDone);
//!
//! let mut seen = log.lock().clone();
//! seen[..2].sort(); // the order within one list is unspecified
//! assert_eq!(seen, [
//!     "add a initial=true",
//!     "add b initial=true",
//!     "update rv 10 -> 12",
//!     "delete tombstone=true",
//! ]);
//!
//! let store = informer.store();
//! assert_eq!(store.len(), 1);
//! assert!(store.get("default", "a").is_some());
//! // "a" has no controller, so it is one of the namespace's orphans.
//! assert_eq!(store.by_controller("default", "some-rs-uid", true).unwrap().len(), 1);
//! assert_eq!(store.last_sync_resource_version().as_deref(), Some("12"));
//! assert_eq!(store.has_observed_resource_version("11"), Ok(true));
//! ```

mod consistent;
mod controller_ref;
mod decode;
mod error;
mod factory;
mod handler;
mod health;
mod index;
mod informer;
mod key;
mod list_watch;
mod orphan_label;
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
mod prometheus;
mod resource_version;
mod scope;
mod server_metadata;
mod server_versions;
mod shard_selector;
mod skip_managed_fields;
mod store;
mod transform;

pub use consistent::ConsistentRead;
pub use controller_ref::{controller_ref, is_controlled_by, is_orphan};
pub use decode::{ListPage, MaybeDecoded, UndecodableObject, decode_list, decode_watch_line};
pub use error::InformerError;
pub use factory::SharedInformerFactory;
pub use handler::{DeletedFinalStateUnknown, DeletedObject, EventHandler, HandlerFns, HandlerId};
pub use health::{DEFAULT_WATCH_HEALTH_BOUND, DEFAULT_WATCH_TIMEOUT, InformerStats, Unhealthy};
pub use index::{
    BY_CONTROLLER_UID, BY_NAMESPACE, IndexFn, controller_index_key, index_by_controller_uid,
    index_by_namespace, orphan_index_key,
};
pub use informer::{Informer, InformerBuilder};
pub use key::{ObjectKey, ParseKeyError};
pub use orphan_label::{BY_ORPHAN_LABEL, index_orphans_by_label, orphan_label_index_key};
#[cfg(feature = "prometheus")]
pub use prometheus::{DECODE_ERRORS_METRIC, InformerCollector, SILENCE_METRIC};
pub use resource_version::{CompareError, compare_resource_versions};
pub use scope::ObjectScope;
pub use server_metadata::ServerMetadata;
pub use server_versions::ServerVersions;
pub use shard_selector::{ClientFilter, ShardSelectorSupport};
pub use store::Store;
pub use transform::{Transform, drop_managed_fields};

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
