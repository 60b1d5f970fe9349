//! Where a sharded controller meets its member: the builder method that
//! drops other members' keys before the queue, the attachment that lets
//! the member requeue, count and catch up the controller's owners, and
//! the gate around each reconcile that lets only held owners through and
//! counts them in flight for the handover.

use std::future::Future;
use std::sync::Arc;

use ctrlkit_informer::{ClientFilter, ObjectKey, controller_ref};
use ctrlkit_worker::Action;
use kube::Resource;
use kube::api::ApiResource;

use super::member::{Attached, ShardMember};
use super::relabel::Relabel;
use super::slots::SlotSet;
use crate::controller::Admission;
use crate::{Controller, ControllerBuilder, LOW_PRIORITY, Watchable};

/// One child informer of a controller, as its member narrows it.
pub(crate) struct ChildCache {
    /// The owned kind, to correct a child's slot label.
    pub(crate) resource: ApiResource,
    /// Sets the informer's client filter; returns whether it changed.
    pub(crate) set_filter: Box<dyn Fn(Option<ClientFilter>) -> bool + Send + Sync>,
}

/// The child caches' filter for `claims`: the orphans (any owner may adopt
/// them) and the children whose controller UID hashes into a claimed slot.
/// With `relabel`, the server is asked only for the children labelled with
/// a claimed slot and the unlabelled ones (the filter stays the safety net
/// for the rest), and a child whose label is wrong is reported for
/// correction (no other member would see it), as is an unlabelled child of
/// a claimed owner (so the server can select it from then on).
fn children_of(claims: SlotSet, relabel: Option<(ApiResource, Arc<Relabel>)>) -> ClientFilter {
    let selector = relabel.is_some().then(|| claims.child_label_selector());
    let filter = ClientFilter::new(format!("controller in slots {claims}"), move |meta| {
        if let Some((resource, relabel)) = &relabel {
            relabel.check(resource, meta, &claims);
        }
        controller_ref(meta).is_none_or(|r| claims.contains_uid(&r.uid))
    });
    match selector {
        Some(selector) => filter.with_label_selector(selector),
        None => filter,
    }
}

/// The builder's admission seam, answered by the member.
pub(crate) struct ShardAdmission(pub(crate) ShardMember);

impl Admission for ShardAdmission {
    fn admit(&self, key: &ObjectKey, owner_uid: Option<&str>) -> bool {
        self.0.admit(key, owner_uid)
    }
}

impl<K: Watchable> ControllerBuilder<'_, K> {
    /// Shards the controller with `member`:
    ///
    /// - events of owners, and of children through their controller
    ///   `ownerReference`, whose owner UID hashes into a slot the member
    ///   does not hold are dropped before the queue (client-side
    ///   filtering);
    /// - [`Controller::run`] reconciles a key only while the member holds
    ///   its owner (keys mapped from watched kinds and orphans are placed
    ///   by their owner's UID when they are reconciled), and counts the
    ///   reconcile in flight for its slot, so the member acknowledges
    ///   giving a slot up only after its syncs finished;
    /// - a slot the member gains starts only once this controller's caches
    ///   hold what a consistent read made after the ring's newest Lease
    ///   version shows (at most
    ///   [`ShardConfig::catch_up_timeout`](super::ShardConfig::catch_up_timeout)),
    ///   so they show every child the previous holder created; then the
    ///   cached owners in it are queued (their events were dropped while
    ///   another member held them);
    /// - with [server-side filtering](super::ShardConfig::server_side_filtering),
    ///   the owner informer lists and watches only the claimed slots;
    /// - with [child cache filtering](super::ShardConfig::child_cache_filtering),
    ///   the owned kinds' caches keep only the orphans and the children of
    ///   owners in the claimed slots.
    ///
    /// A controller built on a [`Manager`](crate::Manager) started with
    /// `--shard-ring` is sharded with the manager's member without this
    /// call.
    pub fn shard(self, member: &ShardMember) -> Self {
        self.shard_member(member.clone())
    }
}

impl ShardMember {
    /// Attaches `controller`: how the member queues its owners of gained
    /// slots, counts the owners it holds, tells whether its caches caught
    /// up with the ring, and narrows its owner cache and its `children`
    /// (the client filter setters of its owned kinds) to the claims.
    pub(crate) fn attach_controller<K: Watchable>(
        &self,
        controller: &Controller<K>,
        children: Vec<ChildCache>,
    ) {
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
            caches: controller.caches().to_vec(),
            select: self.selector_for(controller.informer().clone(), children),
        });
    }

    /// Narrows the controller's caches to the claimed slots, once per
    /// change of claims: the owner informer's KEP-5866 selector (when the
    /// member filters server side; an empty set is not sent, it would
    /// select nothing) and each child informer's client filter (when it
    /// filters child caches: the orphans and the children whose controller
    /// UID hashes into a claimed slot).
    fn selector_for<K: Watchable>(
        &self,
        informer: ctrlkit_informer::Informer<K>,
        children: Vec<ChildCache>,
    ) -> Box<dyn Fn(&SlotSet) + Send + Sync> {
        let owners = self.config().filters_server_side();
        let labels = self.config().sends_child_label_selector();
        let children = match self.config().filters_child_caches() {
            true => children,
            false => Vec::new(),
        };
        let applied = parking_lot::Mutex::new(None::<SlotSet>);
        let lease = self.lease_name().to_owned();
        let relabel = Arc::clone(&self.inner.relabel);
        Box::new(move |claims| {
            let mut last = applied.lock();
            if *last == Some(*claims) {
                return;
            }
            *last = Some(*claims);
            if owners
                && !claims.is_empty()
                && informer.set_shard_selector(Some(claims.shard_selector()))
            {
                tracing::debug!(member = %lease, resource = %informer.resource(), slots = %claims, "owner informer relists for the claimed slots (server-side filtering)");
            }
            for child in &children {
                let relabel = labels.then(|| (child.resource.clone(), Arc::clone(&relabel)));
                if (child.set_filter)(Some(children_of(*claims, relabel))) {
                    tracing::debug!(member = %lease, slots = %claims, "child informer relists for the claimed slots (client filter)");
                }
            }
        })
    }

    /// Runs `reconcile(key, owner)` if this member holds the owner (by its
    /// UID, or for a deleted owner the UID its events carried), counted in
    /// flight for its slot; otherwise returns `Action::done()` (the member
    /// that holds it has its own events).
    pub(crate) async fn gated<K, Fut, E>(
        &self,
        key: ObjectKey,
        owner: Option<Arc<K>>,
        reconcile: impl FnOnce(ObjectKey, Option<Arc<K>>) -> Fut,
    ) -> Result<Action, E>
    where
        K: Resource,
        Fut: Future<Output = Result<Action, E>>,
    {
        let uid = owner.as_ref().and_then(|o| o.meta().uid.clone());
        let Some(guard) = self.enter(&key, uid.as_deref()) else {
            self.count_sync(false);
            tracing::trace!(%key, "not reconciled: another member holds the owner");
            return Ok(Action::done());
        };
        self.count_sync(true);
        let gone = owner.is_none();
        let result = reconcile(key.clone(), owner).await;
        drop(guard);
        if gone {
            self.forget(&key);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use ctrlkit_informer::Informer;
    use k8s_openapi::api::apps::v1::ReplicaSet;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::runtime::watcher::Event;

    use super::*;
    use crate::Owns;
    use crate::shard::{ShardConfig, SlotSet, slot_of_uid};

    fn rs(name: &str, uid: &str) -> ReplicaSet {
        let mut r = ReplicaSet::default();
        r.metadata.namespace = Some("ns".into());
        r.metadata.name = Some(name.into());
        r.metadata.uid = Some(uid.into());
        r.metadata.resource_version = Some("1".into());
        r
    }

    fn pod_of(name: &str, owner: &ReplicaSet) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("ns".into());
        p.metadata.name = Some(name.into());
        p.metadata.uid = Some(format!("pod-{name}"));
        p.metadata.resource_version = Some("1".into());
        p.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: owner.metadata.name.clone().unwrap(),
            uid: owner.metadata.uid.clone().unwrap(),
            controller: Some(true),
            ..OwnerReference::default()
        }]);
        p
    }

    /// Two UIDs in different slots.
    fn two_uids() -> (String, String) {
        let held = "8a5d7c1e-0f3b-4c2a-9e6d-1b2c3d4e5f60".to_owned();
        let other = (0..)
            .map(|i| format!("{i:08x}-0f3b-4c2a-9e6d-1b2c3d4e5f60"))
            .find(|u| slot_of_uid(u) != slot_of_uid(&held))
            .unwrap();
        (held, other)
    }

    #[tokio::test]
    async fn events_of_owners_and_children_of_other_members_never_reach_the_queue() {
        let member = ShardMember::new(ShardConfig::new("ns", "ring", "a")).unwrap();
        let (held_uid, other_uid) = two_uids();
        member.hold_for_test(slot_of_uid(&held_uid));
        let owners = Informer::<ReplicaSet>::manual().build();
        let pods = Informer::<Pod>::manual().build();
        let controller = Controller::builder_with(owners.clone())
            .owns_with(Owns::new().informer(pods.clone()))
            .shard(&member)
            .build()
            .unwrap();
        let (held, other) = (rs("held", &held_uid), rs("other", &other_uid));
        owners.apply_event(Event::Init);
        owners.apply_event(Event::InitApply(held.clone()));
        owners.apply_event(Event::InitApply(other.clone()));
        owners.apply_event(Event::InitDone);
        assert_eq!(controller.queue().len(), 1);
        assert_eq!(controller.queue().get().await.unwrap().name, "held");
        controller.queue().done(&ObjectKey::new("ns", "held"));

        // Children follow their controller's UID.
        pods.apply_event(Event::Init);
        pods.apply_event(Event::InitDone);
        pods.apply_event(Event::Apply(pod_of("p-other", &other)));
        assert_eq!(controller.queue().len(), 0);
        pods.apply_event(Event::Apply(pod_of("p-held", &held)));
        assert_eq!(controller.queue().len(), 1);
        assert_eq!(controller.queue().get().await.unwrap().name, "held");
    }

    #[tokio::test]
    async fn the_gate_reconciles_held_owners_only_and_queues_gained_ones() {
        let member = ShardMember::new(ShardConfig::new("ns", "ring", "a")).unwrap();
        let (held_uid, other_uid) = two_uids();
        member.hold_for_test(slot_of_uid(&held_uid));
        let owners = Informer::<ReplicaSet>::manual().build();
        let controller = Controller::builder_with(owners.clone())
            .shard(&member)
            .build()
            .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&calls);
        let gated = |key: ObjectKey, owner: Option<Arc<ReplicaSet>>| {
            let counted = Arc::clone(&counted);
            let member = member.clone();
            async move {
                member
                    .gated(key, owner, move |_key, _rs| {
                        counted.fetch_add(1, Ordering::SeqCst);
                        async {
                            Ok::<_, String>(Action::requeue_after(std::time::Duration::from_secs(
                                1,
                            )))
                        }
                    })
                    .await
            }
        };
        let held = Arc::new(rs("held", &held_uid));
        let other = Arc::new(rs("other", &other_uid));
        let ran = gated(ObjectKey::new("ns", "held"), Some(held)).await;
        assert_eq!(
            ran,
            Ok(Action::requeue_after(std::time::Duration::from_secs(1)))
        );
        let skipped = gated(ObjectKey::new("ns", "other"), Some(Arc::clone(&other))).await;
        assert_eq!(skipped, Ok(Action::done()));
        // A key nobody can place (no object, no event seen) is not reconciled.
        let unknown = gated(ObjectKey::new("ns", "gone"), None).await;
        assert_eq!(unknown, Ok(Action::done()));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let stats = member.stats();
        assert_eq!((stats.syncs, stats.syncs_skipped), (1, 2));

        // Gaining the other slot queues its cached owners.
        owners.apply_event(Event::Init);
        owners.apply_event(Event::InitApply(other.as_ref().clone()));
        owners.apply_event(Event::InitDone);
        assert_eq!(controller.queue().len(), 0, "not held: dropped");
        let mut gained = SlotSet::empty();
        gained.insert(slot_of_uid(&other_uid));
        assert_eq!(member.gained_for_test(&gained), 1);
        assert_eq!(controller.queue().get().await.unwrap().name, "other");
    }
}
