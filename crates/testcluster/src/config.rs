//! Configuration of a [`TestCluster`](crate::TestCluster).

use std::sync::Arc;
use std::time::Duration;

use crate::clock::{Clock, SystemClock};

use crate::faults::FaultConfig;
use crate::kubelet::KubeletConfig;

/// How to start a [`TestCluster`](crate::TestCluster).
///
/// `Default` gives: any free port on 127.0.0.1, a watch history of at most
/// 10,000 events and 128 MiB, seed 0, no kubelet simulation, no faults, a
/// bookmark every second on watches that allow bookmarks, the system
/// clock, managedFields kept, RBAC not enforced, `shardSelector` honoured.
#[derive(Clone, Debug)]
pub struct TestClusterConfig {
    /// TCP port on 127.0.0.1; `None` picks any free port.
    pub port: Option<u16>,
    /// Number of change events kept for watches to resume from. A watch
    /// from an older resourceVersion gets `410 Gone` (as an `ERROR` watch
    /// event, like kube-apiserver), which makes reflectors relist.
    pub watch_history: usize,
    /// Most bytes of objects the watch history holds on to (each event's
    /// object and the version it replaced); older events are dropped
    /// first, as when `watch_history` events are exceeded. Bounds the
    /// memory that large objects, even deleted ones, keep alive.
    pub watch_history_bytes: usize,
    /// Seed for the fault injector's random decisions.
    pub seed: u64,
    /// The kubelet simulation to run; `None` runs none (pods stay Pending
    /// and unscheduled unless a test binds them).
    pub kubelet: Option<KubeletConfig>,
    /// Faults to inject into requests from [`client`](crate::TestCluster::client)
    /// and other external clients.
    pub faults: FaultConfig,
    /// How often an idle watch that allows bookmarks gets a BOOKMARK event.
    pub bookmark_interval: Duration,
    /// Where the cluster's timestamps come from; [`SystemClock`] by
    /// default. A [`TokioClock`](crate::TokioClock) follows tokio's
    /// (possibly paused) time.
    pub clock: Arc<dyn Clock>,
    /// Whether objects carry `metadata.managedFields`, as on
    /// kube-apiserver (the default). They make every object several
    /// hundred bytes larger, which costs clients decoding time and cache
    /// memory as on a real cluster; `false` leaves them out.
    pub managed_fields: bool,
    /// Whether requests are authenticated by bearer token and authorized
    /// by RBAC over the Roles and bindings stored in the cluster, as
    /// kube-apiserver with `--authorization-mode=RBAC` does. Off by
    /// default: every request is allowed. The cluster's own client and
    /// kubeconfig are `system:masters` either way; see
    /// [`TestCluster::client_for_service_account`](crate::TestCluster::client_for_service_account).
    pub rbac: bool,
    /// Whether the `ShardedListAndWatch` feature gate (KEP-5866) is on:
    /// lists and watches honour `shardSelector` and lists echo it in
    /// `metadata.shardInfo.selector` (the default). Off, the parameter is
    /// ignored as by a server that does not know it: every object is sent
    /// and lists carry no `shardInfo`.
    pub sharded_list_and_watch: bool,
}

impl Default for TestClusterConfig {
    fn default() -> Self {
        TestClusterConfig {
            port: None,
            watch_history: 10_000,
            watch_history_bytes: 128 * 1024 * 1024,
            seed: 0,
            kubelet: None,
            faults: FaultConfig::default(),
            bookmark_interval: Duration::from_secs(1),
            clock: Arc::new(SystemClock),
            managed_fields: true,
            rbac: false,
            sharded_list_and_watch: true,
        }
    }
}

impl TestClusterConfig {
    /// Listen on this port instead of any free one.
    pub fn with_port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Keep `events` change events for watch resumption (at least 1).
    pub fn with_watch_history(mut self, events: usize) -> Self {
        self.watch_history = events;
        self
    }

    /// Keep at most `bytes` of objects in the watch history.
    pub fn with_watch_history_bytes(mut self, bytes: usize) -> Self {
        self.watch_history_bytes = bytes;
        self
    }

    /// Seed the fault injector.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Run the kubelet simulation with this configuration.
    pub fn with_kubelet(mut self, kubelet: KubeletConfig) -> Self {
        self.kubelet = Some(kubelet);
        self
    }

    /// Inject these faults.
    pub fn with_faults(mut self, faults: FaultConfig) -> Self {
        self.faults = faults;
        self
    }

    /// Read every timestamp the cluster writes from `clock`.
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Keep (`true`, the default) or leave out `metadata.managedFields`.
    pub fn with_managed_fields(mut self, on: bool) -> Self {
        self.managed_fields = on;
        self
    }

    /// Enforce RBAC (`true`) or allow every request (`false`, the default).
    pub fn with_rbac(mut self, on: bool) -> Self {
        self.rbac = on;
        self
    }

    /// Turns the `ShardedListAndWatch` feature gate on or off (see
    /// [`sharded_list_and_watch`](Self::sharded_list_and_watch)).
    pub fn with_sharded_list_and_watch(mut self, on: bool) -> Self {
        self.sharded_list_and_watch = on;
        self
    }

    /// Send bookmarks on idle watches at this interval.
    pub fn with_bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }
}
