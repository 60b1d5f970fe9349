//! Controllers for any Kubernetes resource, built from ctrlkit's parts.
//!
//! - [`child`]: create, delete and patch children of any kind on behalf of an
//!   owner, with events, expectations and a recording fake.
//! - [`manager`]: the process around controllers: one informer factory and
//!   metrics registry for several controllers, leader election with a write
//!   fence, `/metrics` `/healthz` `/readyz`, graceful drain, logging and
//!   the flags binaries share.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod child;
pub mod manager;

pub use manager::{LeaderFence, Manager, ManagerArgs, Runnable};
