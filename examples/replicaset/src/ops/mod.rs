//! The operational shell around a controller: what turns controller logic
//! into a process you can deploy.
//!
//! Each module is one concept, small enough to copy into your own operator:
//!
//! - [`kubeconfig`]: build a [`kube::Client`] from `--kubeconfig` /
//!   `--context`, `$KUBECONFIG`, `~/.kube/config` or the in-cluster
//!   service account, with clear errors instead of panics.
//! - [`signals`]: SIGTERM / Ctrl-C become a [`CancellationToken`](tokio_util::sync::CancellationToken).
//! - [`http`]: `/metrics` (Prometheus text from a `prometheus-client`
//!   registry), `/healthz` (liveness) and `/readyz` (informer caches synced).
//! - [`leader`]: leader election over a `coordination.k8s.io/v1` Lease with
//!   `kube-lease-manager`, so only one replica acts at a time.
//! - [`logging`]: `tracing` output filtered by `RUST_LOG`.
//! - [`run`]: the lifecycle that ties them together: warm the caches, win
//!   the lease, run the workers, drain on shutdown, release the lease.
//!
//! The binaries `replicaset-controller` and `replication-controller` are
//! thin wrappers over [`run::run_controller`].

mod error;
pub mod http;
pub mod kubeconfig;
pub mod leader;
pub mod logging;
pub mod run;
pub mod signals;

pub use error::OpsError;
