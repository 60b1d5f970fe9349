//! The informers a controller watches, behind one erased interface: how
//! each is obtained, checked and wired to its handler.

use std::any::{Any, TypeId};
use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;

use ctrlkit_consistency::{ConsistencyStoreBuilder, GroupResource};
use ctrlkit_informer::{
    BY_CONTROLLER_UID, CompareError, ConsistentRead, EventHandler, IndexFn, Informer,
    InformerError, ObjectScope, SharedInformerFactory, Store, Transform, index_by_controller_uid,
};
use futures::future::BoxFuture;
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use super::error::BuildError;
use super::handlers::{
    Context, MapFn, OrphanFn, OwnedHandler, RequeueFn, UpdateFilter, WatchHandler,
};

/// A kind a controller can watch: any object kind of k8s-openapi and any
/// `#[derive(CustomResource)]` type, namespaced or cluster-scoped.
pub trait Watchable:
    Resource<DynamicType = (), Scope: ObjectScope>
    + Clone
    + DeserializeOwned
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<T> Watchable for T where
    T: Resource<DynamicType = (), Scope: ObjectScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static
{
}

pub(crate) fn kind_of<T: Resource<DynamicType = ()>>() -> String {
    T::kind(&()).into_owned()
}

/// How one informer of the controller is obtained and prepared: the plan
/// the owner, each owned kind and each watched kind follow alike.
pub(crate) struct InformerPlan<T> {
    pub(crate) config: watcher::Config,
    pub(crate) informer: Option<Informer<T>>,
    pub(crate) transform: Option<Transform<T>>,
    pub(crate) indexes: Vec<(String, IndexFn<T>)>,
}

impl<T> Default for InformerPlan<T> {
    fn default() -> Self {
        Self {
            config: watcher::Config::default(),
            informer: None,
            transform: None,
            indexes: Vec::new(),
        }
    }
}

impl<T: Watchable> InformerPlan<T> {
    /// Index names: none empty, none twice (counting `reserved`, the names
    /// the controller adds itself).
    pub(crate) fn validate(&self, reserved: &[&str]) -> Result<(), BuildError> {
        let mut seen: HashSet<&str> = reserved.iter().copied().collect();
        for (name, _) in &self.indexes {
            if name.is_empty() {
                return Err(BuildError::EmptyIndexName {
                    kind: kind_of::<T>(),
                });
            }
            if !seen.insert(name) {
                return Err(BuildError::DuplicateIndex {
                    kind: kind_of::<T>(),
                    name: name.clone(),
                });
            }
        }
        Ok(())
    }

    /// Takes the informer (the one given, else the factory's) and checks
    /// that it accepts the transform; changes nothing yet.
    pub(crate) fn acquire(
        &mut self,
        factory: Option<&SharedInformerFactory>,
        namespace: Option<&str>,
        drop_managed_fields: bool,
    ) -> Result<(), BuildError> {
        if self.transform.is_none() && drop_managed_fields {
            self.transform = Some(Transform::drop_managed_fields());
        }
        let informer = match (self.informer.take(), factory) {
            (Some(informer), _) => informer,
            (None, Some(factory)) => factory.scoped::<T>(namespace, self.config.clone()),
            (None, None) => {
                return Err(BuildError::NoInformer {
                    kind: kind_of::<T>(),
                });
            }
        };
        if let Some(transform) = &self.transform {
            informer
                .check_transform(transform)
                .map_err(informer_error::<T>)?;
        }
        self.informer = Some(informer);
        Ok(())
    }

    /// Sets the transform and adds the indexes (an index already on a
    /// shared informer under that name is kept: names identify functions).
    /// Returns the informer.
    pub(crate) fn install(self) -> Result<Informer<T>, BuildError> {
        let informer = self.informer.ok_or_else(|| BuildError::NoInformer {
            kind: kind_of::<T>(),
        })?;
        if let Some(transform) = self.transform {
            informer
                .set_transform(transform)
                .map_err(informer_error::<T>)?;
        }
        for (name, func) in self.indexes {
            informer.add_index_if_absent(name, move |obj: &T| func(obj));
        }
        Ok(informer)
    }
}

fn informer_error<T: Resource<DynamicType = ()>>(source: InformerError) -> BuildError {
    BuildError::Informer {
        kind: kind_of::<T>(),
        source,
    }
}

/// An informer cache whose first list a controller waits for.
pub(crate) trait Synced: Send + Sync {
    fn has_synced(&self) -> bool;
    fn wait(&self) -> BoxFuture<'static, Result<(), InformerError>>;
    fn has_observed_resource_version(&self, rv: &str) -> Result<bool, CompareError>;
    /// A consistent list of the cache's resource (`None`: no API behind it).
    fn consistent_read(&self) -> BoxFuture<'static, Result<Option<ConsistentRead>, kube::Error>>;
    /// Whether the cache reflects a consistent read.
    fn reflects(&self, read: &ConsistentRead) -> Result<bool, CompareError>;
    /// Whether the informer is relisting for a new shard selector or
    /// client filter (the cache may lack the new shard entirely).
    fn is_relisting(&self) -> bool;
}

impl<T: Resource + Send + Sync + 'static> Synced for Store<T> {
    fn has_synced(&self) -> bool {
        Store::has_synced(self)
    }

    fn wait(&self) -> BoxFuture<'static, Result<(), InformerError>> {
        let store = self.clone();
        Box::pin(async move { store.wait_for_cache_sync().await })
    }

    fn has_observed_resource_version(&self, rv: &str) -> Result<bool, CompareError> {
        Store::has_observed_resource_version(self, rv)
    }

    fn consistent_read(&self) -> BoxFuture<'static, Result<Option<ConsistentRead>, kube::Error>> {
        let store = self.clone();
        Box::pin(async move { store.consistent_read().await })
    }

    fn reflects(&self, read: &ConsistentRead) -> Result<bool, CompareError> {
        Store::reflects(self, read)
    }

    fn is_relisting(&self) -> bool {
        Store::is_relisting(self)
    }
}

/// What installing the sources produced for the controller.
#[derive(Default)]
pub(crate) struct Installed {
    pub(crate) synced: Vec<Arc<dyn Synced>>,
    /// `Store<T>` by `TypeId::of::<T>()`, first registration wins.
    pub(crate) stores: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// The `Arc<dyn EventHandler<C>>` of each owned kind `C`, by
    /// `TypeId::of::<C>()`.
    pub(crate) owned_handlers: HashMap<TypeId, Box<dyn Any + Send + Sync>>,
    /// How to set each owned kind's client filter (a sharded member
    /// narrows the child caches to its slots).
    pub(crate) child_filters: Vec<crate::shard::ChildCache>,
}

impl Installed {
    pub(crate) fn add<T: Resource + Send + Sync + 'static>(&mut self, store: Store<T>) {
        self.synced.push(Arc::new(store.clone()));
        self.stores
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Box::new(store));
    }
}

/// One owned or watched kind, erased to what the builder needs.
pub(crate) trait Source<K>: Send {
    /// The kind, for messages.
    fn kind(&self) -> String;
    /// `Some` for an owned kind: its type, so it is owned once.
    fn owned(&self) -> Option<TypeId>;
    /// Checks that need no informer.
    fn validate(&self) -> Result<(), BuildError>;
    /// Takes the informer and checks it; changes nothing yet.
    fn acquire(
        &mut self,
        factory: Option<&SharedInformerFactory>,
        namespace: Option<&str>,
        drop_managed_fields: bool,
    ) -> Result<(), BuildError>;
    /// Registers the cache of a kind the controller writes.
    fn consistency(&self, builder: ConsistencyStoreBuilder) -> ConsistencyStoreBuilder {
        builder
    }
    /// Sets the transform, adds the indexes and the handler.
    fn install(
        self: Box<Self>,
        context: &Arc<Context<K>>,
        installed: &mut Installed,
    ) -> Result<(), BuildError>;
}

/// An owned kind and what to do with its events.
pub(crate) struct OwnedSource<K, C> {
    pub(crate) plan: InformerPlan<C>,
    pub(crate) orphans: Option<OrphanFn<K, C>>,
    pub(crate) update_filter: Option<UpdateFilter<C>>,
    pub(crate) requeue: Option<RequeueFn<K, C>>,
}

impl<K: Watchable, C: Watchable> Source<K> for OwnedSource<K, C> {
    fn kind(&self) -> String {
        kind_of::<C>()
    }

    fn owned(&self) -> Option<TypeId> {
        Some(TypeId::of::<C>())
    }

    fn validate(&self) -> Result<(), BuildError> {
        if <K::Scope as ObjectScope>::NAMESPACED && !<C::Scope as ObjectScope>::NAMESPACED {
            return Err(BuildError::ClusterScopedChild {
                child: kind_of::<C>(),
                owner: kind_of::<K>(),
            });
        }
        self.plan.validate(&[BY_CONTROLLER_UID])
    }

    fn acquire(
        &mut self,
        factory: Option<&SharedInformerFactory>,
        namespace: Option<&str>,
        drop_managed_fields: bool,
    ) -> Result<(), BuildError> {
        self.plan.acquire(factory, namespace, drop_managed_fields)
    }

    fn consistency(&self, builder: ConsistencyStoreBuilder) -> ConsistencyStoreBuilder {
        match &self.plan.informer {
            Some(informer) => builder.cache(GroupResource::of::<C>(), informer.store()),
            None => builder,
        }
    }

    fn install(
        self: Box<Self>,
        context: &Arc<Context<K>>,
        installed: &mut Installed,
    ) -> Result<(), BuildError> {
        let this = *self;
        let informer = this.plan.install()?;
        informer.add_index_if_absent(BY_CONTROLLER_UID, index_by_controller_uid::<C>);
        installed.add(informer.store());
        let children = informer.clone();
        installed.child_filters.push(crate::shard::ChildCache {
            resource: kube::api::ApiResource::erase::<C>(&()),
            set_filter: Box::new(move |filter| children.set_client_filter(filter)),
        });
        let handler: Arc<dyn EventHandler<C>> = Arc::new(OwnedHandler {
            context: Arc::clone(context),
            orphans: this.orphans,
            update_filter: this.update_filter,
            requeue: this.requeue,
        });
        informer.add_event_handler_arc(Arc::clone(&handler));
        installed
            .owned_handlers
            .insert(TypeId::of::<C>(), Box::new(handler));
        Ok(())
    }
}

/// How a watched object maps to owner keys.
pub(crate) enum Mapping<W> {
    /// From the object alone.
    Plain(MapFn<W>),
    /// From the object and the owner cache: an
    /// `OwnersMapFn<K, W>` for the owner kind named, checked against the
    /// controller's at build.
    WithOwners {
        map: Box<dyn std::any::Any + Send + Sync>,
        owner: TypeId,
        owner_kind: String,
    },
}

/// A mapper given the owner cache too.
pub(crate) type OwnersMapFn<K, W> =
    Arc<dyn Fn(&W, &Store<K>) -> Vec<ctrlkit_informer::ObjectKey> + Send + Sync>;

/// A watched kind and its mapping to keys.
pub(crate) struct WatchedSource<W> {
    pub(crate) plan: InformerPlan<W>,
    pub(crate) map: Mapping<W>,
}

impl<K: Watchable, W: Watchable> Source<K> for WatchedSource<W> {
    fn kind(&self) -> String {
        kind_of::<W>()
    }

    fn owned(&self) -> Option<TypeId> {
        None
    }

    fn validate(&self) -> Result<(), BuildError> {
        if let Mapping::WithOwners {
            owner, owner_kind, ..
        } = &self.map
            && *owner != TypeId::of::<K>()
        {
            return Err(BuildError::WatchOwnerMismatch {
                watched: kind_of::<W>(),
                mapper_owner: owner_kind.clone(),
                owner: kind_of::<K>(),
            });
        }
        self.plan.validate(&[])
    }

    fn acquire(
        &mut self,
        factory: Option<&SharedInformerFactory>,
        namespace: Option<&str>,
        drop_managed_fields: bool,
    ) -> Result<(), BuildError> {
        self.plan.acquire(factory, namespace, drop_managed_fields)
    }

    fn install(
        self: Box<Self>,
        context: &Arc<Context<K>>,
        installed: &mut Installed,
    ) -> Result<(), BuildError> {
        let this = *self;
        let map: MapFn<W> = match this.map {
            Mapping::Plain(map) => map,
            Mapping::WithOwners { map, .. } => {
                let Ok(map) = map.downcast::<OwnersMapFn<K, W>>() else {
                    return Err(BuildError::WatchOwnerMismatch {
                        watched: kind_of::<W>(),
                        mapper_owner: "another kind".into(),
                        owner: kind_of::<K>(),
                    });
                };
                let owners = context.owners.clone();
                Arc::new(move |object: &W| map(object, &owners))
            }
        };
        let informer = this.plan.install()?;
        installed.add(informer.store());
        informer.add_event_handler(WatchHandler {
            context: Arc::clone(context),
            map,
        });
        Ok(())
    }
}
