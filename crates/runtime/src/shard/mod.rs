//! Sharded scale-out: N active replicas of a controller share its owners,
//! each holding a Lease on a ring, with slots of the hash space handed
//! over without overlap (issue 16; the design, with pictures, is in
//! `docs/sharding.md`).
//!
//! - **Membership.** Each replica is a [`ShardMember`]: it holds the Lease
//!   `<ring>-<identity>` in the ring's namespace, labelled
//!   [`RING_LABEL`]`=<ring>`, renews it, and sees the other members through
//!   an informer over Leases with that label. A member is live until one
//!   lease duration after it was last *seen* renewing, on the observer's
//!   own clock; leaving gracefully releases and deletes the Lease.
//! - **Assignment.** An owner belongs to the slot of the 64-bit FNV-1a
//!   hash of its UID (KEP-5866's hash; [`SLOTS`] slots, the hash's top
//!   bits), and every member computes the same slots per member from the
//!   same member set ([`assign`]). Children follow their controller
//!   `ownerReference`'s UID. A member's slots as KEP-5866
//!   `shardSelector` ranges: [`SlotSet::shard_selector`].
//! - **Handover.** A member publishes the slots it *claims* on its Lease
//!   ([`CLAIMS_ANNOTATION`]); it starts a slot only once its informer shows
//!   its own latest claim and no other live Lease claims the slot, and it
//!   unclaims a slot it lost only after the syncs in flight for it
//!   finished. No owner is synced by two members at once. Before its
//!   first sync of a gained slot, it reads each of its controllers'
//!   resources consistently (after the newest Lease version it has seen,
//!   at or after the previous holder's acknowledgement) and waits until
//!   the caches hold what those reads show, so they show the children
//!   the previous holder created: at once in a quiet cluster; bounded by
//!   [`ShardConfig::catch_up_timeout`], after which it fails open.
//! - **Filtering.** [`ControllerBuilder::shard`](crate::ControllerBuilder::shard)
//!   drops other members' keys before the queue, and
//!   [`Controller::run`](crate::Controller::run) then reconciles only
//!   owners the member holds. The owner informers list and watch only the
//!   claimed slots with a KEP-5866 `shardSelector` when the API server
//!   honours it ([`ShardConfig::server_side_filtering`]); the child caches
//!   keep only the orphans and the children of owners in the claimed
//!   slots, filtered on the client ([`ShardConfig::child_cache_filtering`]),
//!   and the child informers ask the server only for the children
//!   labelled [`SLOT_LABEL`] with a claimed slot plus the unlabelled ones
//!   ([`ShardConfig::child_label_selector`]; a manager's child controls
//!   write the label, [`slot_labeller`]).
//!   Metrics: [`ShardMetrics`].
//! - **In a manager.** `--shard-ring NAME` on a
//!   [`Manager`](crate::Manager) runs a member and shards every controller
//!   built on its factory, with no code of the binary's own
//!   ([`ShardingConfig`](crate::manager::ShardingConfig)).
//!
//! ```no_run
//! # async fn demo(client: kube::Client, factory: ctrlkit_informer::SharedInformerFactory) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use ctrlkit_runtime::shard::{ShardConfig, ShardMember};
//! use ctrlkit_runtime::{Action, Controller, ObjectKey};
//! use k8s_openapi::api::apps::v1::ReplicaSet;
//! use tokio_util::sync::CancellationToken;
//!
//! async fn reconcile(_: ObjectKey, _: Option<Arc<ReplicaSet>>, _: Arc<()>) -> Result<Action, String> {
//!     Ok(Action::done())
//! }
//!
//! let member = ShardMember::new(ShardConfig::new("kube-system", "replicaset", "pod-0"))?;
//! let controller = Controller::<ReplicaSet>::builder(&factory).shard(&member).build()?;
//! let stop = CancellationToken::new();
//! factory.start();
//! let ring = tokio::spawn(member.clone().run(client, stop.clone().cancelled_owned()));
//! controller
//!     .clone()
//!     .run(reconcile, Arc::new(()), stop.cancelled_owned())
//!     .await?;
//! ring.await??;
//! # Ok(())
//! # }
//! ```

mod assign;
mod catch_up;
mod child_label;
mod error;
mod gate;
mod handover;
mod member;
mod metrics;
mod relabel;
mod ring;
mod slots;

pub use assign::assign;
pub use child_label::{SLOT_LABEL, slot_label_value, slot_labeller, slot_labeller_for};
pub use error::ShardError;
pub(crate) use gate::{ChildCache, ShardAdmission};
pub use member::{ShardConfig, ShardMember, ShardStats};
pub use metrics::ShardMetrics;
pub use ring::{CHECK_ANNOTATION, CLAIMS_ANNOTATION, RELEASED_ANNOTATION, RING_LABEL};
pub use slots::{SLOTS, SlotParseError, SlotSet, fnv1a_64, slot_of_uid};
