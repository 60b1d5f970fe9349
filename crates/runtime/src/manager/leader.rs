//! Leader election on a `coordination.k8s.io/v1` Lease with
//! kube-lease-manager, and the write fence it drives.

use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio_util::sync::CancellationToken;

use super::config::ConfigError;
use super::error::{ManagerError, error_chain};
use super::fence::FenceDriver;
use super::renewals::renewal_tracking_client;

/// Pause before retrying after an API error while campaigning.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);
/// Pause before retrying a failed renewal; the fence bounds the retries.
const RETRY_RENEWAL: Duration = Duration::from_millis(500);
/// The shortest renew deadline: the leader renews once a second at most
/// (kube-lease-manager counts in whole seconds) and needs room for a retry
/// before its fence closes.
pub(crate) const MIN_RENEW_DEADLINE: Duration = Duration::from_secs(2);
/// Upstream's `--leader-elect-retry-period`: how often the leader renews.
const UPSTREAM_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Where the Lease lives and how long it lasts (see the [module
/// docs](super#leader-election-timing) for the timing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease object (by convention the controller's name).
    pub lease_name: String,
    /// Namespace of the Lease object.
    pub lease_namespace: String,
    /// This process's identity, written to `spec.holderIdentity`; must be
    /// unique among the candidates (see [`default_identity`]).
    pub identity: String,
    /// How long the lease is valid after each renewal: a stand-by takes
    /// over at most this long after the leader's last renewal. Whole
    /// seconds.
    pub lease_duration: Duration,
    /// How long the leader may go without a successful renewal before it
    /// stops writing and stops its runnables. Whole seconds, at least 2 s
    /// and less than `lease_duration`.
    pub renew_deadline: Duration,
}

impl LeaderElectionConfig {
    /// A config with upstream's timing (15 s lease, 10 s renew deadline)
    /// and [`default_identity`].
    pub fn new(lease_name: impl Into<String>, lease_namespace: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
        }
    }

    /// Checks the names and durations (kube-lease-manager would panic on
    /// some of the values rejected here).
    pub fn validate(&self) -> Result<(), ConfigError> {
        let whole = |d: Duration| d.subsec_nanos() == 0;
        if !whole(self.lease_duration) || !whole(self.renew_deadline) {
            return Err(ConfigError::FractionalLeaseDuration);
        }
        if self.renew_deadline < MIN_RENEW_DEADLINE {
            return Err(ConfigError::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(ConfigError::RenewDeadlineNotBelowLeaseDuration {
                renew_deadline: self.renew_deadline,
                lease_duration: self.lease_duration,
            });
        }
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return Err(ConfigError::EmptyLease);
        }
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        Ok(())
    }

    /// How often the leader renews: half the renew deadline, at least
    /// 1 s and at most upstream's 2 s retry period, so several renewals
    /// can fail before the fence closes.
    pub fn renew_interval(&self) -> Duration {
        renew_interval_for(self.renew_deadline)
    }

    /// kube-lease-manager's *grace*: the leader renews this long before the
    /// lease would expire.
    fn grace(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_interval())
    }
}

/// How often a Lease with `renew_deadline` is renewed: half the deadline,
/// between 1 s and upstream's 2 s retry period.
pub(crate) fn renew_interval_for(renew_deadline: Duration) -> Duration {
    (renew_deadline / 2).clamp(Duration::from_secs(1), UPSTREAM_RETRY_PERIOD)
}

/// A unique identity for this process: the host name (the pod name in a
/// Deployment), the process id and the start time, like upstream's
/// `hostname_uuid`.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{host}_{}_{:x}", std::process::id(), nanos & 0xffff_ffff)
}

/// One candidate in the election for one Lease, driving the write fence.
#[derive(Debug)]
pub(crate) struct LeaderElector {
    manager: LeaseManager,
    config: LeaderElectionConfig,
    driver: FenceDriver,
}

impl LeaderElector {
    /// Validates `config` and creates the Lease if it does not exist yet
    /// (needs `get` and `create` on `leases`). Renewals made through
    /// `client` are recorded in `driver`.
    pub(crate) async fn new(
        client: kube::Client,
        config: LeaderElectionConfig,
        driver: FenceDriver,
    ) -> Result<Self, ManagerError> {
        config.validate()?;
        let client = renewal_tracking_client(
            client,
            &config.lease_namespace,
            &config.lease_name,
            &config.identity,
            driver.clone(),
        );
        let manager = LeaseManagerBuilder::new(client, &config.lease_name)
            .with_namespace(&config.lease_namespace)
            .with_identity(&config.identity)
            .with_duration(config.lease_duration.as_secs())
            .with_grace(config.grace().as_secs())
            .build()
            .await
            .map_err(ManagerError::LeaderElection)?;
        Ok(Self {
            manager,
            config,
            driver,
        })
    }

    pub(crate) fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Campaigns until this process holds the lease (`true`, the fence is
    /// then open) or `shutdown` is cancelled first (`false`). API errors
    /// are logged and retried: a stand-by never gives up.
    ///
    /// Cancel-safe in effect: dropping it mid-request leaves the Lease as
    /// the server has it, and a later campaign starts from a fresh read.
    pub(crate) async fn acquire(&self, shutdown: &CancellationToken) -> bool {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                changed = self.manager.changed() => match changed {
                    Ok(true) => {
                        self.driver.start_leading();
                        return true;
                    }
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(error = %error_chain(&error), lease = %self.config.lease_name, "leader election: cannot reach the lease, retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return false,
                            _ = tokio::time::sleep(RETRY_AFTER_ERROR) => {}
                        }
                    }
                },
            }
        }
    }

    /// Keeps renewing the lease while leading; returns only when
    /// leadership ended: another candidate holds the lease
    /// ([`ManagerError::LeaseLost`]) or no renewal succeeded within the
    /// renew deadline ([`ManagerError::RenewDeadlineExceeded`]). The fence
    /// is closed for good when it returns. Drop it to stop renewing.
    pub(crate) async fn hold(&self) -> ManagerError {
        let fence = self.driver.fence();
        let lost = loop {
            tokio::select! {
                _ = fence.closed() => break self.renew_deadline_exceeded(),
                changed = self.manager.changed() => match changed {
                    Ok(true) => {}
                    Ok(false) => break self.lost(),
                    Err(error) => {
                        tracing::warn!(error = %error_chain(&error), "leader election: renewal failed, retrying");
                        tokio::select! {
                            _ = fence.closed() => break self.renew_deadline_exceeded(),
                            _ = tokio::time::sleep(RETRY_RENEWAL) => {}
                        }
                    }
                },
            }
        };
        self.driver.stop();
        lost
    }

    /// Closes the fence, then gives the lease up so a stand-by finds it
    /// free the next time it looks. Harmless when not leading.
    pub(crate) async fn release(&self) -> Result<(), ManagerError> {
        self.driver.stop();
        self.manager
            .release()
            .await
            .map_err(ManagerError::LeaderElection)
    }

    fn lost(&self) -> ManagerError {
        ManagerError::LeaseLost {
            namespace: self.config.lease_namespace.clone(),
            name: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
        }
    }

    fn renew_deadline_exceeded(&self) -> ManagerError {
        ManagerError::RenewDeadlineExceeded {
            namespace: self.config.lease_namespace.clone(),
            name: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
            renew_deadline: self.config.renew_deadline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_upstream_and_validate() {
        let config = LeaderElectionConfig::new("replicaset-controller", "kube-system");
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        // Upstream's retry period: renew every 2 s.
        assert_eq!(config.renew_interval(), Duration::from_secs(2));
        assert_eq!(config.grace(), Duration::from_secs(13));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn short_leases_renew_every_second() {
        let mut config = LeaderElectionConfig::new("l", "ns");
        config.lease_duration = Duration::from_secs(3);
        config.renew_deadline = Duration::from_secs(2);
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.renew_interval(), Duration::from_secs(1));
        assert_eq!(config.grace(), Duration::from_secs(2));
    }

    #[test]
    fn rejects_durations_kube_lease_manager_would_panic_on() {
        let mut config = LeaderElectionConfig::new("l", "ns");
        config.renew_deadline = config.lease_duration;
        assert!(matches!(
            config.validate(),
            Err(ConfigError::RenewDeadlineNotBelowLeaseDuration { .. })
        ));
        config.renew_deadline = Duration::ZERO;
        assert!(matches!(
            config.validate(),
            Err(ConfigError::RenewDeadlineTooShort { .. })
        ));
        config.renew_deadline = Duration::from_secs(1);
        let err = config.validate().unwrap_err().to_string();
        assert!(
            err.contains("renew deadline (1s) must be at least 2s"),
            "{err}"
        );
        config.renew_deadline = Duration::from_millis(2500);
        assert_eq!(config.validate(), Err(ConfigError::FractionalLeaseDuration));
        config.renew_deadline = Duration::from_secs(2);
        config.lease_name.clear();
        assert_eq!(config.validate(), Err(ConfigError::EmptyLease));
    }

    #[test]
    fn identities_differ_between_candidates() {
        assert_ne!(default_identity(), default_identity());
    }
}
