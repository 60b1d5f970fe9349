//! Sharding in the manager (`--shard-ring`): the member the manager runs,
//! and how every controller built on the manager's informer factory finds
//! it, so that a binary on [`Manager`] is sharded with no code of its own.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use prometheus_client::registry::Registry;

use super::config::ConfigError;
use super::leader::renew_interval_for;
use super::lifecycle::Manager;
use super::runnable::FnRunnable;
use super::wakeup::WakeupBatching;
use crate::shard::{ShardConfig, ShardError, ShardMember, ShardMetrics};

/// How a manager takes part in a shard ring (`--shard-ring`): it holds the
/// Lease `<ring>-<identity>` in `namespace`, renewed every
/// `renew_deadline / 2` (1–2 s), and every controller built on the manager
/// syncs only the owners of the slots it holds. See `docs/sharding.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardingConfig {
    /// The ring's name (a label value: at most 63 characters); every
    /// replica of one controller passes the same.
    pub ring: String,
    /// The namespace of the ring's Leases (`--lease-namespace`).
    pub namespace: String,
    /// This member's name on the ring, unique among the live members
    /// (`--shard-identity`, by default [`default_shard_identity`]).
    pub identity: String,
    /// How long after its last observed renewal a member counts as gone
    /// and its slots move (`--lease-duration`). Whole seconds.
    pub lease_duration: Duration,
    /// How long a member keeps syncing without a successful renewal
    /// (`--renew-deadline`); less than `lease_duration`, so it stops
    /// before the others may take its slots. Whole seconds.
    pub renew_deadline: Duration,
    /// The window of the runtime's wakeup batching, widened to the
    /// member's share of the ring as it changes (see [`WakeupBatching`]);
    /// [`block_on_main`](super::block_on_main) sets it to its runtime's.
    /// `None` leaves the runtime's window alone.
    pub wakeup_batching: Option<WakeupBatching>,
}

impl ShardingConfig {
    /// Member [`default_shard_identity`] of `ring`, with Leases in
    /// `namespace`, 15 s leases and a 10 s renew deadline, no wakeup
    /// batching to widen.
    pub fn new(ring: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            ring: ring.into(),
            namespace: namespace.into(),
            identity: default_shard_identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            wakeup_batching: None,
        }
    }

    /// The member's configuration.
    pub fn shard_config(&self) -> ShardConfig {
        let config = ShardConfig::new(&self.namespace, &self.ring, &self.identity)
            .lease_duration(self.lease_duration)
            .renew_deadline(self.renew_deadline)
            .renew_period(renew_interval_for(self.renew_deadline));
        match &self.wakeup_batching {
            Some(batching) => config.wakeup_batching(batching),
            None => config,
        }
    }

    /// Checks names and timings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let whole = |d: Duration| d.subsec_nanos() == 0;
        if !whole(self.lease_duration) || !whole(self.renew_deadline) {
            return Err(ConfigError::FractionalLeaseDuration);
        }
        self.shard_config()
            .validate()
            .map_err(|error| ConfigError::Sharding {
                why: match error {
                    ShardError::Config { why } => why,
                    other => other.to_string(),
                },
            })
    }
}

/// This process's default name on a ring: the host name (the pod name in
/// a Deployment) lower-cased, with characters a Lease name cannot hold
/// replaced by `-`, and the process id — unique among live processes, and
/// the same for a container restarted in its pod (PID 1 again), whose
/// previous process is dead.
pub fn default_shard_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let host: String = host
        .to_ascii_lowercase()
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '.' => c,
            _ => '-',
        })
        .collect();
    let host = host.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let host = if host.is_empty() { "host" } else { host };
    format!("{host}-{}", std::process::id())
}

/// The shard member of the sharded manager whose factory is `factory`: the
/// manager attaches it to its factory, so controllers built on that factory
/// (with `builder_for` or `builder(manager.factory())`) find it there.
pub(crate) fn shard_member_of(factory: &SharedInformerFactory) -> Option<ShardMember> {
    factory.extension::<ShardMember>()
}

/// The manager's member, when `config` shards it: registered for the
/// factory's controllers, its metrics in `registry`, and the runnable that
/// runs it (joins the ring once the caches synced; on shutdown waits for
/// the syncs in flight, releases its slots and deletes its Lease).
pub(super) fn start(
    config: &ShardingConfig,
    client: &kube::Client,
    factory: &Arc<SharedInformerFactory>,
    registry: &mut Registry,
) -> Result<(ShardMember, FnRunnableBox), ConfigError> {
    config.validate()?;
    let metrics = ShardMetrics::register(registry);
    let member = ShardMember::new(config.shard_config().metrics(&metrics)).map_err(|error| {
        ConfigError::Sharding {
            why: error.to_string(),
        }
    })?;
    factory.insert_extension(member.clone());
    let (running, client) = (member.clone(), client.clone());
    let runnable = FnRunnable::new(SHARD_RUNNABLE, move |stop| {
        running.run(client, stop.cancelled_owned())
    });
    Ok((member, Box::new(runnable)))
}

/// The runnable of the member.
type FnRunnableBox = Box<dyn super::Runnable>;

/// The name of the member's runnable.
pub const SHARD_RUNNABLE: &str = "shard-member";

impl Manager {
    /// The shard member this manager runs (`--shard-ring`), `None` when it
    /// is not sharded. Every controller built on the manager's
    /// [factory](Self::factory) is sharded with it.
    pub fn shard_member(&self) -> Option<&ShardMember> {
        self.shard.as_ref()
    }
}
