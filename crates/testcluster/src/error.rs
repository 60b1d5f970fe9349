//! Errors from starting a test cluster.

/// Why [`TestCluster::start`](crate::TestCluster::start) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The TCP listener could not be bound (port in use, no loopback).
    #[error("binding the API server listener failed: {0}")]
    Bind(#[source] std::io::Error),
    /// The kube client for the cluster could not be built.
    #[error("building the kube client failed: {0}")]
    Client(#[source] kube::Error),
    /// The built-in namespaces could not be created.
    #[error("bootstrapping the cluster state failed: {0}")]
    Bootstrap(String),
}
