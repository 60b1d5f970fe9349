//! Kubelet simulation (work in progress: types and handle first).

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use parking_lot::Mutex;

/// One simulated node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// Node name, used as the pods' `spec.nodeName`.
    pub name: String,
    /// How many active pods fit on the node (the `pods` resource).
    pub capacity: usize,
}

/// Configuration of the kubelet simulation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletConfig {
    /// The simulated nodes.
    pub nodes: Vec<NodeConfig>,
    /// Delay before a pending pod is bound to a node.
    pub schedule_delay: Duration,
    /// Delay from admission (Pending on a node) to Running.
    pub start_delay: Duration,
    /// Delay from Running to Ready.
    pub ready_delay: Duration,
    /// Delay before a pod marked for deletion is removed.
    pub deletion_delay: Duration,
    /// Reject every newly admitted pod with this reason (see
    /// [`Kubelet::reject_new_pods`]).
    pub reject_reason: Option<String>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        KubeletConfig::with_nodes(1, 110)
    }
}

impl KubeletConfig {
    /// `count` nodes named `node-1`.. with `pods_per_node` capacity each, and
    /// short default delays.
    pub fn with_nodes(count: usize, pods_per_node: usize) -> KubeletConfig {
        KubeletConfig {
            nodes: (1..=count)
                .map(|i| NodeConfig {
                    name: format!("node-{i}"),
                    capacity: pods_per_node,
                })
                .collect(),
            schedule_delay: Duration::from_millis(10),
            start_delay: Duration::from_millis(50),
            ready_delay: Duration::from_millis(50),
            deletion_delay: Duration::from_millis(10),
            reject_reason: None,
        }
    }
}

/// Counters of what the kubelet did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KubeletStats {
    /// Pods bound to a node through the binding subresource.
    pub bound: u64,
    /// Pods rejected (phase Failed).
    pub rejected: u64,
}

#[derive(Default)]
struct Shared {
    bound: AtomicU64,
    rejected: AtomicU64,
    reject_reason: Mutex<Option<String>>,
}

/// Handle of a running kubelet simulation. Dropping it stops the simulation.
pub struct Kubelet {
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("stats", &self.stats())
            .finish()
    }
}

impl Kubelet {
    /// Start the simulation on the current tokio runtime, talking to the
    /// API server through `client`.
    pub fn spawn(client: kube::Client, config: KubeletConfig) -> Kubelet {
        let shared = Arc::new(Shared::default());
        *shared.reject_reason.lock() = config.reject_reason.clone();
        let task = tokio::spawn(async move {
            let _ = (client, config);
        });
        Kubelet { shared, task }
    }

    /// Reject every newly admitted pod with `reason` (e.g. `OutOfpods`)
    /// until called with `None`.
    pub fn reject_new_pods(&self, reason: Option<&str>) {
        *self.shared.reject_reason.lock() = reason.map(str::to_owned);
    }

    /// Counters so far.
    pub fn stats(&self) -> KubeletStats {
        KubeletStats {
            bound: self.shared.bound.load(Ordering::Relaxed),
            rejected: self.shared.rejected.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}
