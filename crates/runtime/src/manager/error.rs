//! Why a manager could not start, or why it stopped abnormally.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::config::ConfigError;
use super::metrics_tls::MetricsTlsError;
use super::runnable::BoxError;

/// Why a [`Manager`](super::Manager) could not start, or why it stopped
/// abnormally.
///
/// Each message says what went wrong and where; the underlying error is
/// the [`source`](std::error::Error::source), never flattened into the
/// message. [`run_main`](super::run_main) prints the whole chain.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The configuration is invalid (exit status 2).
    #[error("invalid configuration")]
    Config(#[from] ConfigError),
    /// The kubeconfig file named by `--kubeconfig` could not be read or
    /// used.
    #[error("cannot load kubeconfig {}", path.display())]
    Kubeconfig {
        /// The file given on the command line.
        path: PathBuf,
        /// What kube reported.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// `--context` was given but `$KUBECONFIG` / `~/.kube/config` could not
    /// be loaded with it.
    #[error("cannot load the default kubeconfig")]
    DefaultKubeconfig(#[source] kube::config::KubeconfigError),
    /// No kubeconfig was found and the process is not running in a pod.
    #[error(
        "no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, \
         create ~/.kube/config or run inside a pod"
    )]
    Infer(#[source] kube::config::InferConfigError),
    /// A configuration was loaded but no client could be built from it.
    #[error("cannot build a Kubernetes client")]
    Client(#[source] kube::Error),
    /// An HTTP endpoint could not listen on its address.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The secure metrics endpoint's certificate could not be loaded or
    /// generated.
    #[error("cannot serve /metrics over HTTPS")]
    MetricsTls(#[source] MetricsTlsError),
    /// Signal handlers could not be installed.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// The Lease used for leader election could not be read or created.
    #[error("leader election failed")]
    LeaderElection(#[source] kube_lease_manager::LeaseManagerError),
    /// This process led and another candidate now holds the lease; it
    /// stopped acting at once so that the new leader is the only one.
    #[error("leader election lost: lease {namespace}/{name} is no longer held by {identity}")]
    LeaseLost {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// This process's identity.
        identity: String,
    },
    /// This process led but could not renew the lease within the renew
    /// deadline (API server unreachable, or the process was paused); its
    /// writes were fenced and it stopped acting at once.
    #[error(
        "leader election lost: lease {namespace}/{name} was not renewed by {identity} within the renew deadline ({}s)",
        renew_deadline.as_secs()
    )]
    RenewDeadlineExceeded {
        /// Namespace of the Lease.
        namespace: String,
        /// Name of the Lease.
        name: String,
        /// This process's identity.
        identity: String,
        /// The configured renew deadline.
        renew_deadline: Duration,
    },
    /// The informer caches never synced (the factory stopped first).
    #[error("informer caches did not sync")]
    CacheSync(#[source] ctrlkit_informer::InformerError),
    /// The build step of [`run_main`](super::run_main) failed.
    #[error("cannot build the controllers")]
    Build(#[source] BoxError),
    /// A runnable stopped with an error.
    #[error("{name} failed")]
    Runnable {
        /// The runnable's name.
        name: String,
        /// Its error.
        #[source]
        source: BoxError,
    },
    /// A runnable panicked.
    #[error("{name} panicked")]
    RunnablePanicked {
        /// The runnable's name.
        name: String,
        /// The panic, as tokio reported it.
        #[source]
        source: tokio::task::JoinError,
    },
    /// Runnables were still running when the shutdown grace period ended;
    /// they were aborted.
    #[error(
        "failed waiting for all runnables to end within the grace period of {}s; aborted: {}",
        grace_period.as_secs(),
        pending.join(", ")
    )]
    ShutdownTimeout {
        /// The configured grace period.
        grace_period: Duration,
        /// The runnables that had not finished.
        pending: Vec<String>,
    },
}

impl ManagerError {
    /// Whether the error is a bad configuration (exit status 2) rather than
    /// a failure at run time (exit status 1).
    pub fn is_config(&self) -> bool {
        matches!(self, Self::Config(_))
    }
}

/// The error and its sources, joined by `": "`, as printed by
/// [`run_main`](super::run_main).
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        // Some errors repeat their source in their own message.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_keeps_every_cause_once() {
        let error = ManagerError::Runnable {
            name: "replicaset".into(),
            source: Box::new(std::io::Error::other("disk on fire")),
        };
        assert_eq!(error_chain(&error), "replicaset failed: disk on fire");
        let config: ManagerError = ConfigError::EmptyName.into();
        assert!(config.is_config());
        assert_eq!(
            error_chain(&config),
            "invalid configuration: the manager name must not be empty"
        );
    }
}
