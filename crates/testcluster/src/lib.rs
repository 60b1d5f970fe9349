//! An in-process Kubernetes API server for tests.
//!
//! **This is a test fixture, not a Kubernetes distribution.** It speaks
//! enough of the Kubernetes REST API, with enough of kube-apiserver's
//! semantics, that controllers built on kube-rs (informers, watchers,
//! optimistic concurrency, owner references) and stock `kubectl` can run
//! against it — without Docker, etcd or a real control plane. Everything is
//! in memory and disappears when the [`TestCluster`] is dropped.
//!
//! # What you get
//!
//! [`TestCluster::start`] binds an HTTP/1.1 server on `127.0.0.1` (any free
//! port by default) and gives you a [`kube::Client`] for it
//! ([`TestCluster::client`]), its base URL and a kubeconfig
//! ([`TestCluster::kubeconfig`], [`TestCluster::write_kubeconfig`]) for
//! kubectl or other processes.
//!
//! Served resources (see the crate README for the full list):
//! `namespaces` (`default`, `kube-system`, `kube-public` and
//! `kube-node-lease` exist from the start), core/v1 pods, replication
//! controllers, events, configmaps, secrets, services, service accounts,
//! endpoints, PVCs, nodes, resource quotas and limit ranges; apps/v1
//! deployments, statefulsets, daemonsets and replicasets; batch/v1 jobs
//! and cronjobs; discovery.k8s.io/v1 endpoint slices; the
//! rbac.authorization.k8s.io/v1 kinds; coordination.k8s.io/v1 leases;
//! events.k8s.io/v1 events (the same objects as core/v1 events); legacy
//! and aggregated discovery and a minimal `/openapi/v3`. Like Go's
//! envtest it runs no controllers for them beyond the garbage collector,
//! ResourceQuota status and the optional kubelet simulation.
//! [`TestCluster::apply_yaml`] applies manifests in one call; the
//! [`Clock`] behind every timestamp is injectable ([`TokioClock`] follows
//! paused tokio time).
//!
//! Semantics follow kube-apiserver where clients can observe them:
//!
//! - one global, increasing `resourceVersion`; `uid`, `creationTimestamp`;
//!   `metadata.generation` bumped on spec changes of the kinds that track
//!   it; for kinds with a `status` subresource main-resource writes ignore
//!   `status` and status writes ignore everything else; `managedFields`
//!   per manager, operation and subresource;
//! - `generateName` (5-character suffix, base cut to 58 characters);
//!   `Status` error bodies with kube-apiserver's codes and reasons: 404
//!   NotFound (also for paths nothing serves), 405 for methods a path does
//!   not take, 409 AlreadyExists, 409 Conflict on a stale
//!   `resourceVersion`, 422 Invalid, 410 Expired, 415 for unknown patch
//!   types, 403 for exceeded ResourceQuotas;
//! - per-kind defaulting and validation (replicas, selectors, pod spec
//!   defaults, service cluster IPs, job selectors, ...);
//! - label selectors (`=`, `==`, `!=`, `in`, `notin`, exists, `!`), field
//!   selectors on any dotted field path, `limit`/`continue` paging;
//! - watches from a `resourceVersion`, bookmarks, `timeoutSeconds`,
//!   `sendInitialEvents` (streaming lists), and a `410 Gone` `ERROR` event
//!   when the version is older than the kept history
//!   ([`TestClusterConfig::watch_history`]);
//! - server-side `Table` output with kubectl's columns for get, list and
//!   watch;
//! - JSON merge, strategic merge (merge keys, directives and
//!   apimachinery's list order), JSON patch (with `test`) and a simplified
//!   server-side apply;
//! - deletion with preconditions, finalizers, graceful deletion of pods
//!   bound to a node, each resource's default propagation policy, and a
//!   garbage collector for owner references (background, foreground and
//!   orphan propagation) and namespaces.
//!
//! A kubelet simulation ([`kubelet`]) and seeded fault injection
//! ([`faults`]) are optional; see their modules.
//!
//! The crate README lists what is *not* implemented and how the fixture
//! differs from kube-apiserver.
//!
//! # Example
//!
//! ```
//! use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
//! use k8s_openapi::api::core::v1::Pod;
//! use kube::api::{Api, PostParams};
//!
//! # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let cluster = TestCluster::start(TestClusterConfig::default()).await?;
//! let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");
//!
//! let pod: Pod = serde_json::from_value(serde_json::json!({
//!     "metadata": {"name": "web", "labels": {"app": "web"}},
//!     "spec": {"containers": [{"name": "app", "image": "nginx"}]},
//! }))?;
//! let created = pods.create(&PostParams::default(), &pod).await?;
//! assert!(created.metadata.uid.is_some());
//! assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
//!
//! // A second create with the same name is a 409 AlreadyExists.
//! let err = pods.create(&PostParams::default(), &pod).await.unwrap_err();
//! assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
//! cluster.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod authz;
mod clock;
mod cluster;
mod config;
pub mod crd;
mod customresources;
mod decode;
mod discovery;
mod encoded;
mod error;
mod events;
pub mod faults;
mod gc;
mod json;
mod kinds;
pub mod kubelet;
mod managed;
mod ops;
mod patch;
mod printers;
pub mod protobuf;
mod query;
mod quota;
pub mod rbac;
mod resources;
mod selectors;
mod semantics;
mod server;
mod shard_selector;
mod stats;
mod status;
mod store;
mod summary;
mod table;
mod templates;
mod tls;
mod watch;

pub use clock::{Clock, SystemClock, TokioClock};
pub use cluster::{ADMIN_USER, TestCluster};
pub use config::TestClusterConfig;
pub use error::Error;
pub use stats::{RequestKey, RequestStats, StatusCounts};
pub use store::WatchHistory;
pub use tls::TlsError;
