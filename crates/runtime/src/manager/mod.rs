//! The process around controllers: what controller-runtime's Manager does.
//!
//! A [`Manager`] runs several controllers — anything implementing
//! [`Runnable`] — in one process, on one
//! [`SharedInformerFactory`](ctrlkit_informer::SharedInformerFactory) and
//! one Prometheus [`Registry`](prometheus_client::registry::Registry), with
//! leader election, `/metrics` `/healthz` `/readyz`, a graceful drain, and
//! a write fence tied to the lease. [`ManagerArgs`] holds its flags for a
//! binary to flatten; [`run_main`] is the rest of a binary's `main`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//!
//! use ctrlkit_runtime::manager::{FnRunnable, Manager, ManagerConfig};
//! use tokio_util::sync::CancellationToken;
//!
//! // Any client will do for runnables that never call the API server.
//! let client = kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse()?))?;
//! let mut manager = Manager::with_client(client, ManagerConfig::new("ticker"))?;
//!
//! let ticks = Arc::new(AtomicUsize::new(0));
//! let counter = ticks.clone();
//! manager.add(FnRunnable::new("ticker", move |shutdown: CancellationToken| async move {
//!     let mut interval = tokio::time::interval(Duration::from_secs(1));
//!     loop {
//!         tokio::select! {
//!             _ = shutdown.cancelled() => return Ok::<_, std::io::Error>(()),
//!             _ = interval.tick() => { counter.fetch_add(1, Ordering::SeqCst); }
//!         }
//!     }
//! }));
//!
//! let status = manager.status();
//! let shutdown = CancellationToken::new();
//! let running = tokio::spawn(manager.run(shutdown.clone()));
//! tokio::time::sleep(Duration::from_millis(4500)).await; // paused time: instant
//! assert!(status.is_ready() && status.is_leader());
//! shutdown.cancel(); // what SIGTERM does
//! running.await??;
//! assert_eq!(ticks.load(Ordering::SeqCst), 5); // at 0, 1, 2, 3 and 4 s
//! # Ok(())
//! # }
//! ```
//!
//! # Lifecycle
//!
//! [`Manager::run`] goes through these steps, in the order a cluster
//! operator expects:
//!
//! 1. serve `/metrics`, `/healthz` and `/readyz` (one server when
//!    `--metrics-addr` equals `--health-addr`; `/metrics` over HTTPS with
//!    [secure metrics](#secure-metrics)); a port in use or an unreadable
//!    certificate fails here, before anything else starts;
//! 2. start the informer factory and wait for its caches, then for every
//!    runnable's [`has_synced`](Runnable::has_synced). Stand-bys do this
//!    too, so a replica that wins the lease acts at once on warm caches;
//! 3. start the runnables that do not
//!    [need leader election](Runnable::needs_leader_election);
//! 4. with leader election, campaign for the Lease; once it is won, start
//!    the leader-elected runnables (without leader election, start them all
//!    at once);
//! 5. run until shutdown (SIGTERM/SIGINT with [`run_until_signal`](Manager::run_until_signal)
//!    or [`run_main`]), a runnable's error or panic, or the end of
//!    leadership;
//! 6. on shutdown or a runnable's error: `/readyz` turns 503, every
//!    runnable's token is cancelled and in-flight work drains within
//!    `--shutdown-grace-period` (30 s by default, controller-runtime's
//!    `GracefulShutdownTimeout`) while the lease keeps being renewed;
//!    what is still running then is aborted and the manager fails with
//!    [`ManagerError::ShutdownTimeout`]. Then the fence closes, the lease is
//!    released (a stand-by finds it free), the informers and the endpoints
//!    stop;
//! 7. on the end of leadership — another replica holds the lease
//!    ([`ManagerError::LeaseLost`]) or no renewal succeeded within the
//!    renew deadline ([`ManagerError::RenewDeadlineExceeded`]) — everything
//!    stops at once, without draining or releasing: another replica may
//!    be acting already. The process should exit non-zero and come back as
//!    a stand-by, as controller-runtime's do.
//!
//! A runnable that returns `Ok(())` before shutdown just ends; the others
//! keep running.
//!
//! # Leader election timing
//!
//! Leader election uses kube-lease-manager on a `coordination.k8s.io/v1`
//! Lease. Upstream's three knobs map onto the flags like this:
//!
//! | upstream (kube-controller-manager, controller-runtime) | here | meaning |
//! |---|---|---|
//! | `--leader-elect-lease-duration` (15 s) | `--lease-duration` (15 s) | validity of the lease after each renewal; a stand-by takes over at most this long (plus up to 1 s of kube-lease-manager's jitter) after the leader's last renewal, by the stand-by's wall clock |
//! | `--leader-elect-renew-deadline` (10 s) | `--renew-deadline` (10 s) | the leader stops writing ([the fence](#fencing) closes) and stops its runnables when no renewal succeeded for this long, on its monotonic clock |
//! | `--leader-elect-retry-period` (2 s) | derived: `renew_deadline / 2`, between 1 and 2 s ([`LeaderElectionConfig::renew_interval`]) | how often the leader renews (kube-lease-manager's *grace* is `lease_duration - interval`); a failed renewal is retried every 0.5 s |
//!
//! Both durations are whole seconds (the Lease's `leaseDurationSeconds` is
//! an integer); the renew deadline must be at least 2 s (one renewal a
//! second, and room for a retry) and less than the lease duration. The
//! difference `lease_duration - renew_deadline` is the safety margin
//! between the old leader's fence closing and a new leader starting: it
//! absorbs clock skew between nodes and request latency. Stand-bys sleep
//! until the lease they saw expires, so a takeover takes up to
//! `lease_duration` even after a release; conflicts back off 0.1–5 s.
//!
//! A leader exposes `leader_election_master_status{name="<lease>"}` (1
//! leading, 0 stand-by) on `/metrics`, as client-go does.
//!
//! # Sharding
//!
//! `--shard-ring NAME` ([`ManagerConfig::sharding`]) runs every replica at
//! once, each syncing a share of the owners, instead of one leader: the
//! manager runs a [`ShardMember`](crate::shard::ShardMember) that holds
//! the Lease `NAME-<identity>` (`--shard-identity`, by default the host
//! name and the process id) in `--lease-namespace`, renewed every
//! `--renew-deadline / 2` (1–2 s), and gone `--lease-duration` after its
//! last renewal; and every controller built on the manager's
//! [factory](Manager::factory) — with
//! [`Controller::builder_for`](crate::Controller::builder_for) or
//! [`Controller::builder`](crate::Controller::builder)`(manager.factory())`
//! — is sharded with it: events of other replicas' owners are dropped
//! before the queue and a reconcile runs only while the member holds its
//! owner (`docs/sharding.md` has the protocol). The binary needs no code
//! of its own.
//!
//! - The member joins the ring once the caches synced (it is a runnable,
//!   [`SHARD_RUNNABLE`]); readiness is unchanged (caches synced), so a
//!   rolling update proceeds as replicas come up and take their share.
//! - On shutdown the controllers drain, the member waits for the syncs in
//!   flight, releases its slots and deletes its Lease: the other replicas
//!   take its owners over at once. A killed replica's owners move one
//!   lease duration after its last renewal.
//! - It replaces leader election (as in timebertt's
//!   kubernetes-controller-sharding): `--shard-ring` with `--leader-elect`
//!   is refused ([`ConfigError::ShardingWithLeaderElection`]). The write
//!   fence stays open; a replica whose renewals fail stops syncing after
//!   the renew deadline, before anyone may take its owners.
//! - Metrics: the `ctrlkit_shard_*` families
//!   ([`ShardMetrics`](crate::shard::ShardMetrics)) on `/metrics`.
//! - RBAC: `get`, `list`, `watch`, `create`, `patch`, `delete` on
//!   `leases` in `--lease-namespace`.
//!
//! # Fencing
//!
//! [`Manager::fence`] returns a [`LeaderFence`]: check it right before
//! every write (child creates, deletes and patches, status updates,
//! events). Without leader election it is always open. With leader
//! election it is open only while this process leads *and* less than the
//! renew deadline has passed since the last successful renewal was sent,
//! measured with [`tokio::time::Instant`]. kube-lease-manager does not
//! report renewals, so the manager observes them on the wire: its Lease
//! client records a PATCH of the Lease that sets `renewTime` and whose
//! answer names this process as holder (timed from when the request was
//! sent, or from the `renewTime` it carried if that is earlier).
//!
//! Guarantees:
//!
//! - the fence closes `lease_duration - renew_deadline` before any
//!   stand-by may take the lease (up to clock skew between nodes beyond
//!   that margin);
//! - a paused process (`SIGSTOP`, a frozen VM) finds the fence closed on
//!   its first check after resuming: the check reads the clock, it does not
//!   wait for a timer or for the API server;
//! - when the fence closes, the manager cancels and aborts every runnable
//!   at once and fails with [`ManagerError::RenewDeadlineExceeded`].
//!
//! Not guaranteed: a request already past the check when the process was
//! paused or cut off is still sent. Kubernetes has no fencing tokens, so no
//! client can close that window entirely; the fence narrows it to requests
//! in flight.
//!
//! # Readiness
//!
//! `/healthz` is liveness only: `200` for as long as the process serves
//! HTTP, so a slow initial list or a long stand-by never gets the pod
//! restarted. `/readyz` (see [`Readiness`]) answers `200` once every cache
//! has synced and this process leads — or is a stand-by and
//! `--ready-when-standby` is true (the default) — and `503` with the reason
//! otherwise, and during the drain.
//!
//! Stand-bys count as ready by default, as in controller-runtime (whose
//! readiness checks ignore leadership): a Deployment's rolling update
//! waits for new pods to be ready, and a new pod stays a stand-by until the
//! old leader leaves, so leader-only readiness would stall every rollout
//! and count every stand-by against PodDisruptionBudgets. Set it to false
//! when a Service should route only to the leader.
//!
//! # Secure metrics
//!
//! By default `/metrics` is plain HTTP on `127.0.0.1:8080`: nothing off the
//! pod can read it. To let Prometheus scrape it across the cluster without
//! opening it to everyone, `--metrics-secure` (controller-runtime's and
//! kubebuilder's flag; [`ManagerConfig::secure_metrics`]) serves it the way
//! controller-runtime's `filters.WithAuthenticationAndAuthorization` with
//! `SecureServing` does:
//!
//! - over HTTPS (HTTP/1.1 only), with the certificate and key in
//!   `--metrics-cert-path` (`tls.crt` and `tls.key` unless
//!   `--metrics-cert-name` / `--metrics-cert-key` say otherwise), read
//!   again on the first connection after either file changes, so a
//!   rotated Secret is picked up without a restart; without a directory,
//!   with a self-signed certificate for `localhost` and `127.0.0.1`
//!   generated at start (scrapers then skip verification);
//! - only to requests with `Authorization: Bearer <token>` where the API
//!   server accepts the token (a TokenReview) and allows its user the
//!   request (a SubjectAccessReview for the non-resource URL: verb `get`,
//!   path `/metrics`). No or a malformed header, or an invalid token:
//!   `401`; not allowed: `403 Authorization denied for user <name>`; a
//!   review that fails or takes over 10 s: `500`, with the cause logged.
//!   Token reviews are cached for 1 minute, allowed requests for 5
//!   minutes, denied ones for 30 s (controller-runtime's TTLs); failures
//!   are not cached;
//! - on its own address: `--metrics-addr` must differ from
//!   `--health-addr`, whose probes stay plain HTTP without a token.
//!
//! The process's ServiceAccount needs `create` on `tokenreviews`
//! (`authentication.k8s.io`) and `subjectaccessreviews`
//! (`authorization.k8s.io`); the scraper's needs `get` on the
//! non-resource URL `/metrics`. [`KubeMetricsAuth`] does the reviews on the
//! manager's client; [`Manager::set_metrics_auth`] puts any other
//! [`MetricsAuth`] in its place.
//!
//! # Logging
//!
//! [`init_logging`] (called by [`run_main`]) writes `tracing` events to
//! stderr as text or JSON (`--log-format`). The filter is `--log-level`
//! when given, else `RUST_LOG` when set, else `info`: a flag on the command
//! line wins over the environment, as for any clap flag with an
//! environment fallback, and kube-rs users' `RUST_LOG` keeps working. An
//! invalid filter, from either, is rejected at start with exit status 2.
//!
//! # Cancel safety
//!
//! - [`Manager::run`] is not cancel-safe by design: dropping it is a crash
//!   (runnables aborted without draining, lease not released — it
//!   expires), as after a SIGKILL. Cancel its `shutdown` token instead.
//! - [`ManagerStatus::endpoints`] and [`LeaderFence::closed`] are
//!   cancel-safe.
//! - [`Manager::new`] and [`KubeConfigSource::client`] only read files and
//!   build a client: dropping them loses nothing.

mod args;
mod binary;
mod config;
mod controllers;
mod endpoints;
mod error;
mod fence;
mod fenced;
mod kubeconfig;
mod leader;
mod lifecycle;
mod logging;
mod metrics_auth;
mod metrics_tls;
mod renewals;
mod runnable;
mod sharding;
mod signals;
mod status;
mod wakeup;

pub use args::{
    DEFAULT_WAKEUP_BATCHING, DEFAULT_WORKER_THREADS, ListenAddr, ManagerArgs, WatchHealthBound,
    parse_duration, parse_seconds,
};
pub use binary::{block_on_main, exit_code, run_main};
pub use config::{ConfigError, DEFAULT_SHUTDOWN_GRACE_PERIOD, ManagerConfig, SecureMetricsConfig};
pub use error::ManagerError;
pub use fence::{FenceClosed, FenceDriver, LeaderFence};
pub use kubeconfig::KubeConfigSource;
pub use leader::{LeaderElectionConfig, default_identity};
pub use lifecycle::{EVENT_FLUSH_TIMEOUT, Manager};
pub use logging::{LogFilter, LogFormat, init_logging};
pub use metrics_auth::{
    AccessDecision, KubeMetricsAuth, MetricsAuth, MetricsAuthError, NonResourceRequest, UserInfo,
};
pub use metrics_tls::{MetricsTlsError, TlsFiles};
pub use runnable::{BoxError, FnRunnable, Runnable};
pub(crate) use sharding::shard_member_of;
pub use sharding::{SHARD_RUNNABLE, ShardingConfig, default_shard_identity};
pub use signals::shutdown_on_signals;
pub use status::{Endpoints, ManagerStatus, Readiness};
pub use wakeup::{MAX_SHARE_SCALE, MAX_WAKEUP_BATCHING, WakeupBatching};
