//! What a [`Manager`](super::Manager) is configured with, and the checks
//! on it.

use std::net::SocketAddr;
use std::time::Duration;

use ctrlkit_informer::DEFAULT_WATCH_HEALTH_BOUND;

use super::kubeconfig::KubeConfigSource;
use super::leader::{LeaderElectionConfig, MIN_RENEW_DEADLINE};
use super::metrics_tls::TlsFiles;
use super::sharding::ShardingConfig;

/// How long in-flight work may take to drain after a shutdown signal
/// (controller-runtime's `GracefulShutdownTimeout` default). Keep the
/// pod's `terminationGracePeriodSeconds` (30 s by default) above it.
pub const DEFAULT_SHUTDOWN_GRACE_PERIOD: Duration = Duration::from_secs(30);

/// Everything a [`Manager`](super::Manager) needs besides its runnables.
///
/// Binaries get one from [`ManagerArgs::config`](super::ManagerArgs::config);
/// tests and embedders build it with [`ManagerConfig::new`] and adjust the
/// fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConfig {
    /// The process's name, used in log lines (and as the default lease
    /// name by [`ManagerArgs`](super::ManagerArgs)).
    pub name: String,
    /// How to reach the cluster (unused by
    /// [`Manager::with_client`](super::Manager::with_client)).
    pub kube: KubeConfigSource,
    /// Watch and manage only this namespace; `None` for all namespaces.
    pub namespace: Option<String>,
    /// `Some` to run the leader-elected runnables only while holding this
    /// lease.
    pub leader_election: Option<LeaderElectionConfig>,
    /// Where to serve `/metrics`; `None` disables it.
    pub metrics_addr: Option<SocketAddr>,
    /// `Some` to serve `/metrics` over HTTPS to authenticated and
    /// authorized scrapers only (see the [module
    /// docs](super#secure-metrics)); `None` serves plain HTTP to anyone
    /// who can reach `metrics_addr`.
    pub secure_metrics: Option<SecureMetricsConfig>,
    /// Where to serve `/healthz` and `/readyz`; `None` disables them. May
    /// equal `metrics_addr` (one server then serves all three paths),
    /// except with `secure_metrics` (then port 0 for both means two
    /// servers on two ephemeral ports).
    pub health_addr: Option<SocketAddr>,
    /// How long runnables may take to drain after shutdown is requested
    /// before they are aborted and the manager fails.
    pub shutdown_grace_period: Duration,
    /// Whether a stand-by with warm caches answers `/readyz` with 200 (see
    /// the [module docs](super#readiness)).
    pub ready_when_standby: bool,
    /// `/readyz` fails while an informer has had no successful list or
    /// watch response (events and bookmarks count) for longer than this;
    /// `None` disables the check. Defaults to
    /// [`DEFAULT_WATCH_HEALTH_BOUND`] (590 s: twice the longest a healthy
    /// watch stays silent).
    pub watch_health_bound: Option<Duration>,
    /// `Some` to shard every controller of the manager over the replicas
    /// in a ring (`--shard-ring`): each syncs the owners of the slots its
    /// member holds. Replaces leader election (both set is an error).
    pub sharding: Option<ShardingConfig>,
}

impl ManagerConfig {
    /// A config named `name`: kubeconfig from the environment, all
    /// namespaces, no leader election, no HTTP endpoints, a 30 s grace
    /// period, stand-bys ready, the default watch health bound.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            kube: KubeConfigSource::default(),
            namespace: None,
            leader_election: None,
            metrics_addr: None,
            secure_metrics: None,
            health_addr: None,
            shutdown_grace_period: DEFAULT_SHUTDOWN_GRACE_PERIOD,
            ready_when_standby: true,
            watch_health_bound: Some(DEFAULT_WATCH_HEALTH_BOUND),
            sharding: None,
        }
    }

    /// Checks the values a user can get wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() {
            return Err(ConfigError::EmptyName);
        }
        if self.namespace.as_deref() == Some("") {
            return Err(ConfigError::EmptyNamespace);
        }
        // Port 0 twice is two ephemeral ports: two servers.
        if let (Some(_), Some(metrics)) = (&self.secure_metrics, self.metrics_addr)
            && Some(metrics) == self.health_addr
            && metrics.port() != 0
        {
            return Err(ConfigError::SecureMetricsShareHealthAddress);
        }
        if self.watch_health_bound.is_some_and(|b| b.is_zero()) {
            return Err(ConfigError::ZeroWatchHealthBound);
        }
        if let Some(sharding) = &self.sharding {
            if self.leader_election.is_some() {
                return Err(ConfigError::ShardingWithLeaderElection);
            }
            sharding.validate()?;
        }
        match &self.leader_election {
            Some(election) => election.validate(),
            None => Ok(()),
        }
    }
}

/// How the secure `/metrics` endpoint presents itself (`--metrics-secure`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SecureMetricsConfig {
    /// The certificate and key to serve, reloaded when the files change;
    /// `None` generates a self-signed certificate for `localhost` at
    /// start, as controller-runtime does (scrapers must then skip
    /// verification).
    pub tls_files: Option<TlsFiles>,
}

/// A configuration the manager refuses to start with. Binaries exit with
/// status 2 on it, as for a bad flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The manager's name is empty.
    #[error("the manager name must not be empty")]
    EmptyName,
    /// `--namespace ""`.
    #[error("the namespace to watch must not be empty (omit --namespace to watch all namespaces)")]
    EmptyNamespace,
    /// `--metrics-secure` with `/metrics` on the health address: the
    /// kubelet probes `/healthz` and `/readyz` over plain HTTP and without
    /// a token.
    #[error(
        "secure metrics need their own address: --metrics-addr must differ from --health-addr, whose probes use plain HTTP without a token"
    )]
    SecureMetricsShareHealthAddress,
    /// A lease duration with a fraction of a second.
    #[error("lease durations must be whole seconds")]
    FractionalLeaseDuration,
    /// The renew deadline leaves no room for a retry.
    #[error(
        "the renew deadline ({}s) must be at least {}s: the leader renews at most once a second and needs room for a retry before it stops writing",
        renew_deadline.as_secs(),
        MIN_RENEW_DEADLINE.as_secs()
    )]
    RenewDeadlineTooShort {
        /// The deadline asked for.
        renew_deadline: Duration,
    },
    /// The renew deadline is not below the lease duration, so a stand-by
    /// could take over while the old leader still writes.
    #[error(
        "the renew deadline ({}s) must be less than the lease duration ({}s)",
        renew_deadline.as_secs(),
        lease_duration.as_secs()
    )]
    RenewDeadlineNotBelowLeaseDuration {
        /// The deadline asked for.
        renew_deadline: Duration,
        /// The lease duration asked for.
        lease_duration: Duration,
    },
    /// An empty lease name or namespace.
    #[error("the lease name and namespace must not be empty")]
    EmptyLease,
    /// An empty leader identity.
    #[error("the leader election identity must not be empty")]
    EmptyIdentity,
    /// A zero watch health bound would keep `/readyz` failing.
    #[error("the watch health bound must be positive (or disabled)")]
    ZeroWatchHealthBound,
    /// Two runnables share a name, so logs and errors could not tell them
    /// apart.
    #[error("two runnables are named {0:?}; give each a distinct name")]
    DuplicateRunnable(String),
    /// `--shard-ring` with `--leader-elect`: sharding runs every replica
    /// at once, each on its share of the owners, which is what leader
    /// election forbids.
    #[error(
        "--shard-ring and --leader-elect exclude each other: sharded replicas all run, each syncing its share of the owners (drop --leader-elect)"
    )]
    ShardingWithLeaderElection,
    /// The shard ring's name, the member's identity or the timings are
    /// invalid.
    #[error("invalid sharding configuration: {why}")]
    Sharding {
        /// What is wrong.
        why: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe_for_tests() {
        let config = ManagerConfig::new("m");
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.metrics_addr, None);
        assert_eq!(config.secure_metrics, None);
        assert_eq!(config.health_addr, None);
        assert_eq!(config.shutdown_grace_period, Duration::from_secs(30));
        assert!(config.ready_when_standby);
        assert_eq!(config.watch_health_bound, Some(Duration::from_secs(590)));
    }

    #[test]
    fn secure_metrics_need_their_own_address() {
        let mut config = ManagerConfig::new("m");
        config.metrics_addr = Some("127.0.0.1:8080".parse().unwrap());
        config.health_addr = config.metrics_addr;
        assert_eq!(config.validate(), Ok(()), "plain metrics may share");
        config.secure_metrics = Some(SecureMetricsConfig::default());
        assert_eq!(
            config.validate(),
            Err(ConfigError::SecureMetricsShareHealthAddress)
        );
        config.health_addr = Some("127.0.0.1:8081".parse().unwrap());
        assert_eq!(config.validate(), Ok(()));
        // Ephemeral ports are two servers on two ports.
        config.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
        config.health_addr = config.metrics_addr;
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_empty_names() {
        assert_eq!(
            ManagerConfig::new("").validate(),
            Err(ConfigError::EmptyName)
        );
        let mut config = ManagerConfig::new("m");
        config.namespace = Some(String::new());
        assert_eq!(config.validate(), Err(ConfigError::EmptyNamespace));
        config.namespace = None;
        config.watch_health_bound = Some(Duration::ZERO);
        assert_eq!(config.validate(), Err(ConfigError::ZeroWatchHealthBound));
        config.watch_health_bound = None;
        let mut election = LeaderElectionConfig::new("l", "ns");
        election.lease_duration = Duration::from_secs(5);
        election.renew_deadline = Duration::from_secs(5);
        config.leader_election = Some(election);
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.contains("renew deadline (5s) must be less than the lease duration (5s)"),
            "{err}"
        );
    }
}
