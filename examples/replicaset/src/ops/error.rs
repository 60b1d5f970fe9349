//! The errors of the operational shell.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the process could not start, or why it stopped abnormally.
///
/// Every variant's message says what went wrong and where, so `main` can
/// print it as is and exit non-zero.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    /// The kubeconfig file named by `--kubeconfig` could not be read or used.
    #[error("cannot load kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file given on the command line.
        path: PathBuf,
        /// What kube reported.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// `--context` was given but `$KUBECONFIG` / `~/.kube/config` could
    /// not be loaded with it.
    #[error("cannot load the default kubeconfig: {0}")]
    DefaultKubeconfig(#[source] kube::config::KubeconfigError),
    /// No kubeconfig was found and the process is not running in a pod.
    #[error(
        "no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, \
         create ~/.kube/config or run inside a pod ({0})"
    )]
    Infer(#[source] kube::config::InferConfigError),
    /// A configuration was loaded but no client could be built from it.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(#[source] kube::Error),
    /// An HTTP endpoint could not listen on its address.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// The Lease used for leader election could not be read or created.
    #[error("leader election failed: {0}")]
    LeaderElection(#[source] kube_lease_manager::LeaseManagerError),
    /// This process was the leader and lost the Lease; it stops acting so
    /// that the new leader is the only one.
    #[error("leader election lost: lease {namespace}/{name} is no longer held by {identity}")]
    LeaseLost {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// This process's identity.
        identity: String,
    },
    /// The informer caches never synced (the factory stopped first).
    #[error("informer caches did not sync: {0}")]
    CacheSync(#[source] ctrlkit_informer::InformerError),
    /// The controller could not be built.
    #[error("cannot build the controller: {0}")]
    Build(String),
    /// The controller stopped with an error.
    #[error("controller failed: {0}")]
    Controller(String),
}
