//! Where a sharded controller meets its member: the builder method that
//! drops other members' keys before the queue, and the gate around the
//! reconcile that lets only held owners through and counts them in
//! flight for the handover.

use std::future::Future;
use std::sync::Arc;

use ctrlkit_informer::ObjectKey;
use ctrlkit_worker::Action;
use futures::future::BoxFuture;

use super::member::{Attached, ShardMember};
use crate::controller::Admission;
use crate::{Controller, ControllerBuilder, LOW_PRIORITY, Watchable};

/// A gated reconcile's future.
type Gated<E> = BoxFuture<'static, Result<Action, E>>;

/// The builder's admission seam, answered by the member.
struct ShardAdmission(ShardMember);

impl Admission for ShardAdmission {
    fn admit(&self, key: &ObjectKey, owner_uid: Option<&str>) -> bool {
        self.0.admit(key, owner_uid)
    }
}

impl<K: Watchable> ControllerBuilder<'_, K> {
    /// Shards the controller with `member` (client-side filtering): events
    /// of owners, and of children through their controller
    /// `ownerReference`, whose owner UID hashes into a slot the member does
    /// not hold are dropped before the queue. Keys without a known owner
    /// (mapped from watched kinds, orphans) are queued and decided by the
    /// member's [gate](ShardMember::gate), which the reconcile must be
    /// wrapped in.
    pub fn shard(self, member: &ShardMember) -> Self {
        self.admission(Arc::new(ShardAdmission(member.clone())))
    }
}

impl ShardMember {
    /// Wraps `reconcile` for [`Controller::run`] of a controller built with
    /// [`shard`](ControllerBuilder::shard): a key whose owner this member
    /// does not hold right now is not reconciled (`Action::done()`; the
    /// member that holds it has its own events), and a reconcile that runs
    /// is counted in flight for its slot, so the member acknowledges giving
    /// a slot up only after its syncs finished. A deleted owner is placed
    /// by the UID its delete event carried.
    ///
    /// Also attaches the controller: when the member gains slots, the
    /// cached owners in them are queued (their events were dropped while
    /// another member held them), and its `owners held` figure counts this
    /// controller's cache.
    pub fn gate<K, R, Fut, E, Ctx>(
        &self,
        controller: &Controller<K>,
        reconcile: R,
    ) -> impl Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Gated<E> + Send + Sync + 'static
    where
        K: Watchable,
        R: Fn(ObjectKey, Option<Arc<K>>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        Ctx: Send + Sync + 'static,
    {
        let (store, queue) = (controller.store(), controller.queue().clone());
        let counted = controller.store();
        self.attach(Attached {
            requeue: Box::new(move |slots| {
                for owner in store.list() {
                    if owner
                        .meta()
                        .uid
                        .as_deref()
                        .is_some_and(|u| slots.contains_uid(u))
                    {
                        queue.add_with_priority(
                            ObjectKey::from_object(owner.as_ref()),
                            LOW_PRIORITY,
                        );
                    }
                }
            }),
            count: Box::new(move |slots| {
                counted
                    .list()
                    .iter()
                    .filter(|o| {
                        o.meta()
                            .uid
                            .as_deref()
                            .is_some_and(|u| slots.contains_uid(u))
                    })
                    .count()
            }),
        });
        let member = self.clone();
        move |key: ObjectKey, owner: Option<Arc<K>>, ctx: Arc<Ctx>| {
            let uid = owner.as_ref().and_then(|o| o.meta().uid.clone());
            let Some(guard) = member.enter(&key, uid.as_deref()) else {
                member.count_sync(false);
                tracing::trace!(%key, "not reconciled: another member holds the owner");
                return Box::pin(async { Ok(Action::done()) }) as BoxFuture<'static, _>;
            };
            member.count_sync(true);
            let gone = owner.is_none();
            let sync = reconcile(key.clone(), owner, ctx);
            let member = member.clone();
            Box::pin(async move {
                let result = sync.await;
                drop(guard);
                if gone {
                    member.forget(&key);
                }
                result
            })
        }
    }
}
