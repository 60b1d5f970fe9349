//! Errors from starting a test cluster and from applying manifests to it.

/// Why [`TestCluster::start`](crate::TestCluster::start) or
/// [`TestCluster::apply_yaml`](crate::TestCluster::apply_yaml) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The TCP listener could not be bound (port in use, no loopback).
    #[error("binding the API server listener failed: {0}")]
    Bind(#[source] std::io::Error),
    /// The kube client for the cluster could not be built.
    #[error("building the kube client failed: {0}")]
    Client(#[source] kube::Error),
    /// The kubelet simulation could not be started on its own thread
    /// ([`KubeletConfig::dedicated_thread`](crate::kubelet::KubeletConfig::dedicated_thread)).
    #[error("starting the kubelet simulation failed: {0}")]
    Kubelet(#[source] crate::kubelet::KubeletError),
    /// The certificates of a cluster serving HTTPS (with RBAC) could not
    /// be made.
    #[error("setting up TLS failed: {0}")]
    Tls(#[from] crate::tls::TlsError),
    /// The built-in namespaces could not be created.
    #[error("bootstrapping the cluster state failed: {0}")]
    Bootstrap(String),
    /// A manifest file could not be read.
    #[error("reading {path} failed: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A YAML document does not parse.
    #[error("document {document}: invalid YAML: {source}")]
    Yaml {
        /// The document's index in the stream, from 0.
        document: usize,
        /// Why.
        #[source]
        source: serde_yaml::Error,
    },
    /// A document is not an object the cluster serves (no apiVersion,
    /// kind or name, or a kind it does not serve).
    #[error("document {document}: {reason}")]
    Manifest {
        /// The document's index in the stream, from 0.
        document: usize,
        /// What is wrong.
        reason: String,
    },
    /// A CustomResourceDefinition was stored but is not established: its
    /// names conflict with another definition's (`NamesAccepted` False).
    #[error("CustomResourceDefinition {name} is not established: {reason}: {message}")]
    NotEstablished {
        /// The definition's name.
        name: String,
        /// The reason of the condition that keeps it from being served,
        /// e.g. `KindConflict`.
        reason: String,
        /// Its message, e.g. `"CronTab" is already in use`.
        message: String,
    },
    /// The cluster refused a document, as the API would have answered.
    #[error("document {document}: {code} {reason}: {message}")]
    Rejected {
        /// The document's index in the stream, from 0.
        document: usize,
        /// The HTTP status code, e.g. 422.
        code: u16,
        /// The `Status` reason, e.g. `Invalid`.
        reason: String,
        /// The `Status` message.
        message: String,
    },
}
