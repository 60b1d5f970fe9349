//! Leader election: of all the replicas of a controller, only the one
//! holding a `coordination.k8s.io/v1` Lease runs its workers.
//!
//! Built on `kube-lease-manager`. The holder renews the Lease before it
//! expires; the others wait for it to expire (or to be released) and then
//! take it. Upstream's three knobs map onto the crate's two like this:
//!
//! | upstream flag | here | meaning |
//! |---|---|---|
//! | `--leader-elect-lease-duration` (15 s) | `lease_duration` | how long a lease is valid after its last renewal; a stand-by takes over at most this long after the leader vanished |
//! | `--leader-elect-renew-deadline` (10 s) | `renew_deadline` | the leader renews this long after its last renewal, i.e. `lease_duration - renew_deadline` before expiry (kube-lease-manager's *grace*) |
//! | `--leader-elect-retry-period` (2 s) | — | kube-lease-manager paces its own retries: 0.1–5 s backoff on conflicts, and stand-bys sleep until the current lease expires |
//!
//! Both durations are whole seconds (the Lease's `leaseDurationSeconds` is
//! an integer).

use std::time::Duration;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::ops::OpsError;

/// How long to wait before retrying after an API error while campaigning.
const RETRY_AFTER_ERROR: Duration = Duration::from_secs(2);

/// Where the Lease lives and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Name of the Lease object (by convention the controller's name).
    pub lease_name: String,
    /// Namespace of the Lease object.
    pub lease_namespace: String,
    /// This process's identity, written to `spec.holderIdentity`; must be
    /// unique among the candidates (see [`default_identity`]).
    pub identity: String,
    /// Validity of the lease after each renewal (whole seconds, > 0).
    pub lease_duration: Duration,
    /// Time after a renewal at which the leader renews again (whole
    /// seconds, `0 < renew_deadline < lease_duration`).
    pub renew_deadline: Duration,
}

impl LeaderElectionConfig {
    /// A config with upstream's timing (15 s lease, renew after 10 s) and
    /// [`default_identity`].
    pub fn new(lease_name: impl Into<String>, lease_namespace: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            lease_namespace: lease_namespace.into(),
            identity: default_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
        }
    }

    /// Checks the durations; `Err` carries a message fit for the user.
    pub fn validate(&self) -> Result<(), String> {
        let whole = |d: Duration| d.subsec_nanos() == 0;
        if !whole(self.lease_duration) || !whole(self.renew_deadline) {
            return Err("lease durations must be whole seconds".into());
        }
        if self.renew_deadline.is_zero() || self.renew_deadline >= self.lease_duration {
            return Err(format!(
                "the renew deadline ({}s) must be greater than 0 and less than the lease duration ({}s)",
                self.renew_deadline.as_secs(),
                self.lease_duration.as_secs()
            ));
        }
        if self.lease_name.is_empty() || self.lease_namespace.is_empty() {
            return Err("the lease name and namespace must not be empty".into());
        }
        Ok(())
    }

    fn grace(&self) -> Duration {
        self.lease_duration.saturating_sub(self.renew_deadline)
    }
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

/// One candidate in the election for one Lease.
///
/// Typical use: [`acquire`](Self::acquire) after the informer caches are
/// warm; run the workers while [`hold`](Self::hold) keeps the lease; on
/// shutdown stop the workers, then [`release`](Self::release) so the
/// lease is free when a stand-by next looks. (kube-lease-manager's
/// stand-bys sleep until the lease they saw expires, so a takeover takes up
/// to `lease_duration` even after a release.)
#[derive(Debug)]
pub struct LeaderElector {
    manager: LeaseManager,
    config: LeaderElectionConfig,
}

impl LeaderElector {
    /// Validates `config` and creates the Lease if it does not exist yet
    /// (needs `get` and `create` on `leases`).
    pub async fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, OpsError> {
        config.validate().map_err(OpsError::Build)?;
        let manager = LeaseManagerBuilder::new(client, &config.lease_name)
            .with_namespace(&config.lease_namespace)
            .with_identity(&config.identity)
            .with_duration(config.lease_duration.as_secs())
            .with_grace(config.grace().as_secs())
            .build()
            .await
            .map_err(OpsError::LeaderElection)?;
        Ok(Self { manager, config })
    }

    /// The config this elector campaigns with.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Campaigns until this process holds the lease (`Ok(true)`) or
    /// `shutdown` is cancelled first (`Ok(false)`). API errors are logged
    /// and retried: a stand-by never gives up.
    pub async fn acquire(&self, shutdown: &CancellationToken) -> Result<bool, OpsError> {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(false),
                changed = self.manager.changed() => match changed {
                    Ok(true) => return Ok(true),
                    Ok(false) => {}
                    Err(error) => {
                        tracing::warn!(%error, lease = %self.config.lease_name, "leader election: cannot reach the lease, retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return Ok(false),
                            _ = tokio::time::sleep(RETRY_AFTER_ERROR) => {}
                        }
                    }
                },
            }
        }
    }

    /// Keeps renewing the lease while leading. Returns `Ok(())` when
    /// `shutdown` is cancelled and [`OpsError::LeaseLost`] when another
    /// candidate took the lease or renewals kept failing until the lease
    /// was about to expire (then the caller must stop acting at once).
    pub async fn hold(&self, shutdown: &CancellationToken) -> Result<(), OpsError> {
        // The first failed renewal happens `renew_deadline` after the last
        // good one, so the lease expires `grace` later: give up well before.
        let give_up_after = self.config.grace() * 3 / 4;
        let mut failing_since: Option<Instant> = None;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                changed = self.manager.changed() => match changed {
                    Ok(true) => failing_since = None,
                    Ok(false) => return Err(self.lost()),
                    Err(error) => {
                        let since = *failing_since.get_or_insert_with(Instant::now);
                        if since.elapsed() >= give_up_after {
                            tracing::error!(%error, "leader election: renewals kept failing");
                            return Err(self.lost());
                        }
                        tracing::warn!(%error, "leader election: renewal failed, retrying");
                        tokio::select! {
                            _ = shutdown.cancelled() => return Ok(()),
                            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                        }
                    }
                },
            }
        }
    }

    /// Gives the lease up if this process holds it, so a stand-by finds it
    /// free the next time it looks. Harmless when not leading.
    pub async fn release(&self) -> Result<(), OpsError> {
        self.manager
            .release()
            .await
            .map_err(OpsError::LeaderElection)
    }

    fn lost(&self) -> OpsError {
        OpsError::LeaseLost {
            namespace: self.config.lease_namespace.clone(),
            name: self.config.lease_name.clone(),
            identity: self.config.identity.clone(),
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
        assert_eq!(config.grace(), Duration::from_secs(5));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_durations_kube_lease_manager_would_panic_on() {
        let mut config = LeaderElectionConfig::new("l", "ns");
        config.renew_deadline = config.lease_duration;
        assert!(config.validate().is_err());
        config.renew_deadline = Duration::ZERO;
        assert!(config.validate().is_err());
        config.renew_deadline = Duration::from_millis(1500);
        assert!(config.validate().is_err());
    }

    #[test]
    fn identities_differ_between_candidates() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b);
    }
}
