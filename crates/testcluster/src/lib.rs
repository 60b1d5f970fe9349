//! An in-process Kubernetes API server for tests. **It is a test fixture,
//! not a Kubernetes distribution.**
//!
//! Work in progress: see the crate README.

mod cluster;
mod config;
mod discovery;
mod error;
pub mod faults;
mod gc;
pub mod kubelet;
mod ops;
mod patch;
mod resources;
mod selectors;
mod semantics;
mod server;
mod status;
mod store;
mod watch;

pub use cluster::TestCluster;
pub use config::TestClusterConfig;
pub use error::Error;
