//! A naive ReplicaSet controller on kube-runtime's `Controller`, and a
//! driver that runs the same scenario against it and against ctrlkit's
//! `ReplicaSetController` on ctrlkit-testcluster.
//!
//! Why compare: a controller that decides how many pods to create from a
//! watch-fed cache creates too many whenever the cache has not yet shown
//! the pods it created a moment ago. ctrlkit's controller remembers the
//! creations and deletions it is waiting to see (expectations) and does not
//! act on an owner until the cache caught up; the naive one has nothing
//! but the cache. The testcluster delays every watch event
//! ([`Scenario::watch_delay`]) so the difference shows in every run.
//!
//! - [`controller`]: the naive controller ([`PodSource::Cache`] reads pods
//!   from a reflector store, [`PodSource::List`] lists them live).
//! - [`scenario`]: what the driver does: create ReplicaSets, scale them
//!   through the steps, waiting for convergence after each step.
//! - [`driver`]: one run against one controller on a fresh cluster.
//! - [`observe`]: the driver's own requests, counted so the report can
//!   leave them out.
//! - [`report`]: over-created pods, deletions, API requests by verb, time
//!   to converge; JSON and a table.
//!
//! The `compare` binary runs it; `docs/comparison.md` has the figures.

pub mod controller;
pub mod driver;
pub mod observe;
pub mod report;
pub mod scenario;

pub use controller::{NaiveController, PodSource};
pub use driver::{CompareError, run};
pub use report::{RunReport, StepReport, table};
pub use scenario::{Scenario, Subject};
