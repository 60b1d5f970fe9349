//! Shared helpers for the ctrlkit benches and the workload driver.
//!
//! - [`floor`]: the simplest queue and hand-off we can build from standard
//!   parts; every workload figure is quoted as a ratio to a floor measured in
//!   the same process, so results from different machines can be compared.
//! - [`workloads`]: the W1-W4 workloads run by the `workload` binary.
//! - [`memory`]: resident memory of a queue holding many keys at once (the
//!   `memory` binary).
//! - [`stats`]: medians and percentiles.
//! - [`sched`]: CPU time and run-queue wait of the process, to tell a slow
//!   queue from a busy machine.
//! - [`naive`]: a naive kube-runtime ReplicaSet controller and the driver
//!   comparing it with ctrlkit's (the `compare` binary).

pub mod floor;
pub mod memory;
pub mod naive;
pub mod sched;
pub mod stats;
pub mod workloads;
