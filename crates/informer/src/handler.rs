//! Event handlers: what an informer calls when its cache changes.

use std::fmt;
use std::sync::Arc;

use crate::decode::UndecodableObject;
use crate::key::ObjectKey;

/// What an informer hands to [`EventHandler::on_delete`]: the object's final
/// state, or a tombstone when the delete itself was not seen.
#[derive(Debug, Clone)]
pub enum DeletedObject<K> {
    /// The object as the API server reported it in the delete event.
    Final(Arc<K>),
    /// The object vanished without a delete event being seen (it was absent
    /// from a relist, or re-created under the same name with a new UID); the
    /// tombstone holds the last state the cache knew, which may be stale.
    Tombstone(DeletedFinalStateUnknown<K>),
}

impl<K> DeletedObject<K> {
    /// The deleted object: the final state, or the tombstone's last known
    /// state.
    pub fn object(&self) -> &Arc<K> {
        match self {
            Self::Final(obj) => obj,
            Self::Tombstone(t) => &t.last_known,
        }
    }

    /// Whether this is a tombstone (the delete event itself was missed).
    pub fn is_tombstone(&self) -> bool {
        matches!(self, Self::Tombstone(_))
    }
}

/// A tombstone: the last known state of an object whose delete the informer
/// did not see (client-go's `DeletedFinalStateUnknown`).
///
/// It is produced when a relist no longer contains an object, and when an
/// object is replaced by one with the same name but a different UID.
#[derive(Debug, Clone)]
pub struct DeletedFinalStateUnknown<K> {
    /// The store key of the deleted object.
    pub key: ObjectKey,
    /// The object as the cache last knew it.
    pub last_known: Arc<K>,
}

/// Receives an informer's notifications.
///
/// # Contract
/// - Calls for one informer are made one at a time, in the order the changes
///   were applied, and every handler sees every notification in registration
///   order. The store already reflects a change when its notification is made.
/// - Handlers run synchronously on the informer's task while it holds its
///   dispatch lock: they must be cheap and must not block (the usual body
///   computes a key and adds it to a workqueue). They may read any store,
///   including this informer's, but must not call this informer's mutating
///   methods ([`apply_event`](crate::Informer::apply_event),
///   [`add_event_handler`](crate::Informer::add_event_handler), ...), which
///   would deadlock.
/// - A panic in a handler is caught, logged at error level and otherwise
///   ignored: later handlers and later events are still delivered.
///
/// All methods default to doing nothing.
pub trait EventHandler<K>: Send + Sync {
    /// An object entered the cache.
    ///
    /// `is_in_initial_list` is true for objects from the informer's first
    /// complete list (and for the replay a handler registered late receives),
    /// false for objects created later or first seen on a relist.
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        let _ = (obj, is_in_initial_list);
    }

    /// An object in the cache changed, or a periodic resync re-announced it.
    ///
    /// `old` and `new` always have the same UID (a re-created object is a
    /// delete plus an add instead). On a resync `old` and `new` are the same
    /// `Arc` ([`Arc::ptr_eq`] holds), so they also have the same
    /// resourceVersion; otherwise `new` is a distinct allocation.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let _ = (old, new);
    }

    /// An object left the cache.
    fn on_delete(&self, obj: &DeletedObject<K>) {
        let _ = obj;
    }

    /// An object arrived (in a list or a watch event) that cannot be
    /// decoded into `K`. It was skipped: the cache keeps the last version
    /// it could decode, if any, and no other notification is made for it.
    ///
    /// This is the place to make the failure visible on the object, e.g. a
    /// Warning event naming the decoding error (the informer already logs
    /// it at warn level and counts it). Called again every time the object
    /// arrives undecodable, relists included.
    fn on_undecodable(&self, obj: &UndecodableObject) {
        let _ = obj;
    }
}

type AddFn<K> = Box<dyn Fn(&Arc<K>, bool) + Send + Sync>;
type UpdateFn<K> = Box<dyn Fn(&Arc<K>, &Arc<K>) + Send + Sync>;
type DeleteFn<K> = Box<dyn Fn(&DeletedObject<K>) + Send + Sync>;
type UndecodableFn = Box<dyn Fn(&UndecodableObject) + Send + Sync>;

/// An [`EventHandler`] made of closures; unset callbacks do nothing.
///
/// ```
/// use std::sync::Arc;
/// use ctrlkit_informer::HandlerFns;
/// use k8s_openapi::api::core::v1::Pod;
///
/// let handler = HandlerFns::<Pod>::new()
///     .on_add(|pod, _initial| println!("added {:?}", pod.metadata.name))
///     .on_delete(|deleted| println!("deleted {:?}", deleted.object().metadata.name));
/// # let _ = handler;
/// ```
pub struct HandlerFns<K> {
    add: Option<AddFn<K>>,
    update: Option<UpdateFn<K>>,
    delete: Option<DeleteFn<K>>,
    undecodable: Option<UndecodableFn>,
}

impl<K> HandlerFns<K> {
    /// A handler that ignores everything until callbacks are set.
    pub fn new() -> Self {
        Self {
            add: None,
            update: None,
            delete: None,
            undecodable: None,
        }
    }

    /// Sets the [`EventHandler::on_add`] callback.
    pub fn on_add(mut self, f: impl Fn(&Arc<K>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }

    /// Sets the [`EventHandler::on_update`] callback.
    pub fn on_update(mut self, f: impl Fn(&Arc<K>, &Arc<K>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }

    /// Sets the [`EventHandler::on_delete`] callback.
    pub fn on_delete(mut self, f: impl Fn(&DeletedObject<K>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }

    /// Sets the [`EventHandler::on_undecodable`] callback.
    pub fn on_undecodable(
        mut self,
        f: impl Fn(&UndecodableObject) + Send + Sync + 'static,
    ) -> Self {
        self.undecodable = Some(Box::new(f));
        self
    }
}

impl<K> Default for HandlerFns<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> fmt::Debug for HandlerFns<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlerFns")
            .field("on_add", &self.add.is_some())
            .field("on_update", &self.update.is_some())
            .field("on_delete", &self.delete.is_some())
            .field("on_undecodable", &self.undecodable.is_some())
            .finish()
    }
}

impl<K> EventHandler<K> for HandlerFns<K> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        if let Some(f) = &self.add {
            f(obj, is_in_initial_list);
        }
    }

    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        if let Some(f) = &self.update {
            f(old, new);
        }
    }

    fn on_delete(&self, obj: &DeletedObject<K>) {
        if let Some(f) = &self.delete {
            f(obj);
        }
    }

    fn on_undecodable(&self, obj: &UndecodableObject) {
        if let Some(f) = &self.undecodable {
            f(obj);
        }
    }
}

/// Identifies a registered handler, for
/// [`Informer::remove_event_handler`](crate::Informer::remove_event_handler).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HandlerId(pub(crate) u64);

/// One change to deliver to the handlers.
pub(crate) enum Notification<K> {
    Add(Arc<K>, bool),
    Update(Arc<K>, Arc<K>),
    Delete(DeletedObject<K>),
    Undecodable(UndecodableObject),
}

impl<K> Notification<K> {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Self::Add(..) => "add",
            Self::Update(..) => "update",
            Self::Delete(..) => "delete",
            Self::Undecodable(..) => "undecodable",
        }
    }

    pub(crate) fn deliver(&self, handler: &dyn EventHandler<K>) {
        match self {
            Self::Add(obj, initial) => handler.on_add(obj, *initial),
            Self::Update(old, new) => handler.on_update(old, new),
            Self::Delete(obj) => handler.on_delete(obj),
            Self::Undecodable(obj) => handler.on_undecodable(obj),
        }
    }
}
