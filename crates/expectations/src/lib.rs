//! Controller expectations: remember the creations and deletions a
//! controller has asked for until its informer cache shows them, so it does
//! not act twice on a stale cache.
//!
//! # The problem
//!
//! A controller reads the world from an informer cache, which lags behind
//! the API server. Say a ReplicaSet wants 3 pods and has 0. Its sync creates
//! 3 pods. If a second sync runs before the watch events for those pods
//! reach the cache, it still sees 0 pods and creates 3 more. Deletions have
//! the same problem in reverse.
//!
//! # The idea
//!
//! Before writing, the controller records what it expects to see: "3
//! creations" or "the deletion of pods a and b". The informer's event
//! handlers report what they see ("observed"), which lowers the counters.
//! The sync asks [`satisfied`](ControllerExpectations::satisfied) first and
//! only creates or deletes when nothing is outstanding. A time-to-live
//! (5 minutes by default) is the safety valve: if a watch event is lost,
//! the expectation expires and the controller acts again.
//!
//! This is the kube-controller-manager's `ControllerExpectations` and
//! `UIDTrackingControllerExpectations` (folded into one type), keyed by the
//! controller's `namespace/name`, with the same counter semantics, plus
//! creation tracking by identity.
//!
//! # Counting creations: two modes, chosen per sync
//!
//! - **Counted** ([`expect_creations`](ControllerExpectations::expect_creations),
//!   as upstream): any new object the informer attributes to the controller
//!   lowers the count. Simple, but a pod created by someone else counts as
//!   one of ours, and a lost watch event only shows up as a 5-minute stall.
//! - **Tracked** ([`expect_tracked_creations`](ControllerExpectations::expect_tracked_creations),
//!   beyond upstream): after each successful create the controller calls
//!   [`record_creation`](ControllerExpectations::record_creation) with the
//!   created object's identity (its UID, or its name: the same choice
//!   everywhere), and the informer handler calls
//!   [`creation_observed_id`](ControllerExpectations::creation_observed_id)
//!   with the identity it sees. Only objects we created count, each once,
//!   whichever of the two calls comes first. Recorded objects never observed
//!   by the time the expectation expires are logged and counted in
//!   [`stats`](ControllerExpectations::stats) as lost.
//!
//! Informer handlers can always call `creation_observed_id`: under counted
//! expectations it behaves like [`creation_observed`](ControllerExpectations::creation_observed).
//!
//! In both modes, **a create that failed (or was skipped) must be lowered by
//! the controller**, as upstream does, because the informer will never see
//! it: call `creation_observed(key)` once per failed or skipped create (or
//! `lower(key, n, 0)`).
//!
//! # Deletions
//!
//! [`expect_deletions`](ControllerExpectations::expect_deletions) takes the
//! keys (`namespace/name`) of the pods about to be deleted, and
//! [`deletion_observed`](ControllerExpectations::deletion_observed) only
//! counts those keys, once each: a pod first seen terminating and then
//! deleted counts once, and someone else's deletion is ignored. A delete
//! that failed is lowered with `deletion_observed(key, pod_key)` as well.
//! Controllers that count deletions without keys use
//! `set_expectations(key, 0, n)` and `lower(key, 0, 1)`.
//!
//! # Example
//!
//! ```
//! use ctrlkit_expectations::ControllerExpectations;
//!
//! let exp = ControllerExpectations::new();
//! let key = "default/web";
//!
//! // Nothing recorded: the controller may act.
//! assert!(exp.satisfied(key));
//!
//! // Scale up by 3, tracking what we create.
//! exp.expect_tracked_creations(key, 3);
//! exp.record_creation(key, "uid-1");          // create #1 returned
//! exp.creation_observed_id(key, "uid-2");     // watch event beat create #2's response
//! exp.record_creation(key, "uid-2");          // ... counted now
//! exp.creation_observed(key);                 // create #3 failed: lower by hand
//! exp.creation_observed_id(key, "uid-other"); // not ours: ignored
//! assert!(!exp.satisfied(key));               // still waiting for uid-1
//! exp.creation_observed_id(key, "uid-1");
//! assert!(exp.satisfied(key));
//!
//! // Scale down by 2.
//! exp.expect_deletions(key, ["default/web-a", "default/web-b"]);
//! exp.deletion_observed(key, "default/web-a"); // terminating
//! exp.deletion_observed(key, "default/web-a"); // gone: not counted twice
//! assert!(!exp.satisfied(key));
//! exp.deletion_observed(key, "default/web-b");
//! assert!(exp.satisfied(key));
//!
//! // The controller object was deleted.
//! exp.delete_expectations(key);
//! assert!(exp.get_expectations(key).is_none());
//! ```
//!
//! # Differences from upstream
//!
//! - Every `set_expectations` / `expect_*` call replaces everything recorded
//!   for the key, pending deletion keys included. Upstream keeps the old
//!   deletion keys when `ExpectCreations` or `SetExpectations` is called, so
//!   a late delete event for an old key drives `del` to -1; here it is
//!   ignored. Satisfaction is the same either way.
//! - The TTL clock is tokio's (so paused test time drives it) and the TTL is
//!   configurable ([`ControllerExpectations::with_ttl`]).
//! - Setters return nothing: upstream's only error comes from a key
//!   function that cannot fail here.
//! - Creation tracking by identity, lost-object reporting and
//!   [`ExpectationStats`] are additions (upstream TODO #22599).
//! - An unfulfilled expectation reaching its TTL is logged at `warn` level
//!   (upstream: verbose debug), since it means a lost watch event or a
//!   failed create that was never lowered.

mod controller;
mod creations;
mod record;
mod snapshot;
mod stats;

pub use controller::{ControllerExpectations, DEFAULT_EXPECTATIONS_TTL};
pub use creations::MAX_UNMATCHED_OBSERVATIONS;
pub use snapshot::Expectation;
pub use stats::ExpectationStats;

/// Compiles and runs the README's example as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
