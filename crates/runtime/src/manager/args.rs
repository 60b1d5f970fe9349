//! The manager's command-line flags, as a clap `Args` struct binaries
//! flatten into their own.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use super::config::{ManagerConfig, SecureMetricsConfig};
use super::kubeconfig::KubeConfigSource;
use super::leader::{LeaderElectionConfig, default_identity};
use super::logging::{LogFilter, LogFormat};
use super::metrics_tls::TlsFiles;
use super::sharding::{ShardingConfig, default_shard_identity};
use super::wakeup::{MAX_WAKEUP_BATCHING, WakeupBatching};

/// The flags every controller binary shares. Flatten it into the binary's
/// own parser:
///
/// ```
/// use clap::Parser;
/// use ctrlkit_runtime::manager::ManagerArgs;
///
/// /// Keeps widgets in shape.
/// #[derive(Debug, Parser)]
/// struct Cli {
///     #[command(flatten)]
///     manager: ManagerArgs,
///     /// Syncs run concurrently.
///     #[arg(long, default_value_t = 5)]
///     workers: usize,
/// }
///
/// let cli = Cli::try_parse_from(["widget-controller", "--leader-elect", "--workers", "2"]).unwrap();
/// let config = cli.manager.config("widget-controller");
/// assert_eq!(config.leader_election.unwrap().lease_name, "widget-controller");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ManagerArgs {
    /// Kubeconfig file to use. Without it: the files in $KUBECONFIG, then
    /// ~/.kube/config, then the in-cluster service account.
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,

    /// Kubeconfig context to use instead of the current context.
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,

    /// Watch and manage only this namespace (default: all namespaces).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,

    /// Run only while holding a coordination.k8s.io Lease, so that several
    /// replicas can run with one active. Caches are warmed before the
    /// lease is won.
    #[arg(long)]
    pub leader_elect: bool,

    /// Name of the Lease (default: the binary's name).
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,

    /// Namespace of the Lease. kube-system exists on every cluster; in a
    /// Deployment pass the pod's own namespace.
    #[arg(long, value_name = "NS", default_value = "kube-system")]
    pub lease_namespace: String,

    /// How long a lease stays valid after a renewal; a stand-by takes over
    /// at most this long after the leader's last renewal. Whole seconds:
    /// "15" or "15s".
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_seconds)]
    pub lease_duration: Duration,

    /// How long the leader may go without a successful renewal before it
    /// stops writing and exits; at least 2s and less than
    /// --lease-duration. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_seconds)]
    pub renew_deadline: Duration,

    /// Where to serve Prometheus metrics on /metrics, as IP:PORT (or :PORT
    /// for all interfaces; port 0 picks a free port and logs it).
    /// "0" or "" disables the endpoint.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_addr: ListenAddr,

    /// Serve /metrics over HTTPS, and only to clients whose bearer token
    /// the API server accepts (TokenReview) and who may get the
    /// non-resource URL /metrics (SubjectAccessReview), as
    /// controller-runtime's secure metrics. Needs create on tokenreviews and
    /// subjectaccessreviews, and an address other than --health-addr.
    /// "false": plain HTTP to anyone who can connect, so keep
    /// --metrics-addr on loopback.
    #[arg(long, value_name = "BOOL", default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub metrics_secure: bool,

    /// With --metrics-secure: the directory holding the certificate and
    /// key to serve (reloaded when they change), e.g. a mounted
    /// kubernetes.io/tls Secret. Without it a self-signed certificate is
    /// generated at start.
    #[arg(long, value_name = "DIR", requires = "metrics_secure")]
    pub metrics_cert_path: Option<PathBuf>,

    /// The certificate file (PEM, leaf first) in --metrics-cert-path.
    #[arg(long, value_name = "FILE", default_value = "tls.crt")]
    pub metrics_cert_name: String,

    /// The private key file (PEM) in --metrics-cert-path.
    #[arg(long, value_name = "FILE", default_value = "tls.key")]
    pub metrics_cert_key: String,

    /// Where to serve /healthz (liveness) and /readyz (caches synced, and
    /// leading or a ready stand-by), same syntax as --metrics-addr; may
    /// equal it.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub health_addr: ListenAddr,

    /// Log line format on stderr.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter: a level (error, warn, info, debug, trace) or tracing
    /// directives such as "info,kube=debug". Overrides RUST_LOG.
    #[arg(long, value_name = "FILTER", env = "RUST_LOG", default_value = "info")]
    pub log_level: LogFilter,

    /// How long in-flight work may take to finish after SIGTERM or Ctrl-C;
    /// after it the process aborts the rest and exits non-zero. Keep it
    /// below the pod's terminationGracePeriodSeconds. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_seconds)]
    pub shutdown_grace_period: Duration,

    /// With --leader-elect: whether a stand-by with synced caches reports
    /// ready on /readyz. "true" keeps rolling updates and
    /// PodDisruptionBudgets working (a new replica is a stand-by until the
    /// old leader leaves); "false" when only the leader should receive
    /// traffic.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub ready_when_standby: bool,

    /// Fail /readyz when an informer has had no successful list or watch
    /// response (events and bookmarks count) for this long: a controller
    /// that cannot hear the API server must not report ready. Whole
    /// seconds; 0 disables the check.
    #[arg(long, value_name = "DURATION", default_value = "590s", value_parser = parse_bound)]
    pub watch_health_bound: WatchHealthBound,

    /// Shard the controllers over every replica started with this ring
    /// name: each holds a Lease named RING-ID in --lease-namespace
    /// (renewed within --renew-deadline, gone after --lease-duration) and
    /// syncs only the owners whose UID hashes into its share; owners move
    /// between replicas without being synced by two at once. All replicas
    /// run at once, so it excludes --leader-elect. Off by default.
    #[arg(long, value_name = "NAME", conflicts_with = "leader_elect")]
    pub shard_ring: Option<String>,

    /// With --shard-ring: this replica's name on the ring, unique among
    /// the live replicas (lower-case letters, digits, '-' and '.').
    /// Default: the host name (the pod name) and the process id.
    #[arg(long, value_name = "ID", requires = "shard_ring")]
    pub shard_identity: Option<String>,

    /// Threads that run the controller's tasks (informers, syncs, HTTP
    /// connections). 1 runs them all on the main thread, which saves the
    /// CPU that waking tasks across threads costs; more threads help only
    /// when syncs are CPU-heavy. 0: one per CPU core. Default: 1. Applies
    /// to binaries started with `block_on_main`; one that builds its own
    /// runtime logs a warning when the flag asks for another.
    #[arg(long, value_name = "N", value_parser = parse_worker_threads)]
    pub worker_threads: Option<usize>,

    /// Before the runtime's threads go to sleep for want of work, they
    /// first wait this long, so that the responses and watch events that
    /// arrive meanwhile are handled in one wakeup instead of one each
    /// (`500us`, `1ms`, at most `100ms`; `0` turns it off). Every wakeup
    /// of a sleeping thread costs a context switch and a pass over the
    /// runtime's I/O driver; waiting 1ms cut the controller's CPU per pod
    /// by 16-26% on the scale-out benchmark. What arrives while the
    /// thread waits is handled up to that much later. A member of a shard
    /// ring (--shard-ring) is sent only its share of the events, and waits
    /// this long times the ring over its share (at most 8 times: 3ms for a
    /// third of the ring). Default: 1ms. Applies to binaries started with
    /// `block_on_main`; one that builds its own runtime logs a warning when
    /// the flag is given.
    #[arg(long, value_name = "DURATION", value_parser = parse_wakeup_batching)]
    pub wakeup_batching: Option<Duration>,
}

/// The default of `--worker-threads`: one thread. A controller's work is
/// mostly waiting on the API server, and handing each response from the
/// thread that read it to the one that runs the waiting task costs more
/// than a second core gains (docs/performance.md, 3e).
pub const DEFAULT_WORKER_THREADS: usize = 1;

/// The most `--worker-threads` accepts.
const MAX_WORKER_THREADS: usize = 1024;

fn parse_worker_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n <= MAX_WORKER_THREADS => Ok(n),
        _ => Err(format!(
            "'{s}' is not a thread count: expected 0 (one per CPU core) or 1 to {MAX_WORKER_THREADS}"
        )),
    }
}

/// The default of `--wakeup-batching`: long enough to gather the watch
/// events and responses of a busy moment into one wakeup (a pod event
/// every ~100µs under load), short next to anything a controller waits for
/// (docs/performance.md, 3i).
pub const DEFAULT_WAKEUP_BATCHING: Duration = Duration::from_millis(1);

fn parse_wakeup_batching(s: &str) -> Result<Duration, String> {
    match parse_duration(s) {
        Some(d) if d <= MAX_WAKEUP_BATCHING => Ok(d),
        Some(_) => Err(format!("'{s}' is longer than the most allowed, 100ms")),
        None => Err(format!(
            "'{s}' is not a duration: expected 0, microseconds (500us) or milliseconds (1ms)"
        )),
    }
}

/// The `--watch-health-bound` value: `None` when the check is disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchHealthBound(pub Option<Duration>);

fn parse_bound(s: &str) -> Result<WatchHealthBound, String> {
    if s.strip_suffix('s').unwrap_or(s) == "0" {
        return Ok(WatchHealthBound(None));
    }
    parse_seconds(s).map(|d| WatchHealthBound(Some(d)))
}

impl ManagerArgs {
    /// The `--worker-threads` value, [`DEFAULT_WORKER_THREADS`] when the
    /// flag is not given.
    pub fn worker_threads(&self) -> usize {
        self.worker_threads.unwrap_or(DEFAULT_WORKER_THREADS)
    }

    /// The `--wakeup-batching` value, [`DEFAULT_WAKEUP_BATCHING`] when the
    /// flag is not given.
    pub fn wakeup_batching(&self) -> Duration {
        self.wakeup_batching.unwrap_or(DEFAULT_WAKEUP_BATCHING)
    }

    /// The Tokio runtime `--worker-threads` asks for: a current-thread
    /// runtime for 1, a multi-threaded one otherwise (0: one worker per
    /// CPU core), with I/O and timers enabled; its threads wait
    /// `--wakeup-batching` before they sleep.
    pub fn runtime(&self) -> std::io::Result<tokio::runtime::Runtime> {
        self.runtime_with_batching(&WakeupBatching::new(self.wakeup_batching()))
    }

    /// [`runtime`](Self::runtime), its threads waiting `batching`'s window
    /// before they sleep: [`block_on_main`](super::block_on_main) passes
    /// the same handle to a sharded manager, which widens the window to
    /// the member's share of the ring (see [`WakeupBatching`]).
    pub fn runtime_with_batching(
        &self,
        batching: &WakeupBatching,
    ) -> std::io::Result<tokio::runtime::Runtime> {
        let mut builder = match self.worker_threads() {
            1 => tokio::runtime::Builder::new_current_thread(),
            n => {
                let mut builder = tokio::runtime::Builder::new_multi_thread();
                if n > 1 {
                    builder.worker_threads(n);
                }
                builder
            }
        };
        batching.install(&mut builder);
        builder.enable_all().build()
    }

    /// The manager's configuration; `name` names the process in logs and
    /// the lease when `--lease-name` is not given.
    pub fn config(&self, name: &str) -> ManagerConfig {
        ManagerConfig {
            name: name.to_owned(),
            kube: KubeConfigSource {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
            },
            namespace: self.namespace.clone(),
            leader_election: self.leader_elect.then(|| LeaderElectionConfig {
                lease_name: self.lease_name.clone().unwrap_or_else(|| name.to_owned()),
                lease_namespace: self.lease_namespace.clone(),
                identity: default_identity(),
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            }),
            metrics_addr: self.metrics_addr.0,
            secure_metrics: self.metrics_secure.then(|| SecureMetricsConfig {
                tls_files: self.metrics_cert_path.as_deref().map(|dir| {
                    TlsFiles::in_dir(dir, &self.metrics_cert_name, &self.metrics_cert_key)
                }),
            }),
            health_addr: self.health_addr.0,
            watch_health_bound: self.watch_health_bound.0,
            shutdown_grace_period: self.shutdown_grace_period,
            ready_when_standby: self.ready_when_standby,
            sharding: self.shard_ring.as_ref().map(|ring| ShardingConfig {
                ring: ring.clone(),
                namespace: self.lease_namespace.clone(),
                identity: self
                    .shard_identity
                    .clone()
                    .unwrap_or_else(default_shard_identity),
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
                wakeup_batching: None,
            }),
        }
    }
}

/// A listen address: `Some` to serve there, `None` when disabled.
///
/// Parses `IP:PORT`, `:PORT` (all IPv4 interfaces) and `0` or the empty
/// string (disabled).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenAddr(pub Option<SocketAddr>);

impl FromStr for ListenAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "0" {
            return Ok(Self(None));
        }
        if let Some(port) = s.strip_prefix(':') {
            let port: u16 = port.parse().map_err(|_| {
                format!("invalid port in '{s}': expected :PORT with PORT in 0..=65535")
            })?;
            return Ok(Self(Some(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))));
        }
        s.parse().map(|a| Self(Some(a))).map_err(|_| {
            format!("invalid address '{s}': expected IP:PORT (e.g. 127.0.0.1:8080 or [::1]:8080), :PORT, or 0 to disable")
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(addr) => write!(f, "{addr}"),
            None => f.write_str("0"),
        }
    }
}

/// A positive whole number of seconds, `"15"` or `"15s"`; the value
/// parser of the manager's duration flags, for binaries' own duration
/// flags too.
pub fn parse_seconds(s: &str) -> Result<Duration, String> {
    let digits = s.strip_suffix('s').unwrap_or(s);
    match digits.parse::<u64>() {
        Ok(0) => Err("must be at least 1s".into()),
        Ok(n) => Ok(Duration::from_secs(n)),
        Err(_) => Err(format!(
            "'{s}' is not a whole number of seconds (e.g. 15 or 15s)"
        )),
    }
}

/// A duration flag's value: `0`, or a whole number of microseconds,
/// milliseconds or seconds (`500us`, `250ms`, `1s`); `None` for anything
/// else, a bare number other than `0` included. The parser under
/// `--wakeup-batching`, for binaries' own duration flags too, which check
/// their own bounds.
pub fn parse_duration(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let (digits, unit): (&str, fn(u64) -> Duration) = if let Some(d) = s.strip_suffix("us") {
        (d, Duration::from_micros)
    } else if let Some(d) = s.strip_suffix("ms") {
        (d, Duration::from_millis)
    } else if let Some(d) = s.strip_suffix('s') {
        (d, Duration::from_secs)
    } else {
        return None;
    };
    digits.parse::<u64>().ok().map(unit)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::manager::config::ConfigError;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ManagerArgs,
    }

    fn parse(args: &[&str]) -> Result<ManagerArgs, clap::Error> {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn defaults_match_upstream() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.namespace, None);
        assert!(!args.leader_elect);
        assert_eq!(args.lease_namespace, "kube-system");
        assert_eq!(args.lease_duration, Duration::from_secs(15));
        assert_eq!(args.renew_deadline, Duration::from_secs(10));
        assert_eq!(args.shutdown_grace_period, Duration::from_secs(30));
        assert!(args.ready_when_standby);
        assert_eq!(args.log_format, LogFormat::Text);
        assert_eq!(
            args.metrics_addr,
            ListenAddr(Some("127.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!(
            args.health_addr,
            ListenAddr(Some("127.0.0.1:8081".parse().unwrap()))
        );
        assert!(!args.metrics_secure);
        let config = args.config("replicaset-controller");
        assert_eq!(config.secure_metrics, None, "plain metrics by default");
        assert_eq!(config.name, "replicaset-controller");
        assert!(config.leader_election.is_none());
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn worker_threads_flag() {
        assert_eq!(parse(&[]).unwrap().worker_threads, None);
        assert_eq!(parse(&[]).unwrap().worker_threads(), DEFAULT_WORKER_THREADS);
        assert_eq!(
            parse(&["--worker-threads", "4"]).unwrap().worker_threads(),
            4
        );
        assert_eq!(
            parse(&["--worker-threads", "0"]).unwrap().worker_threads(),
            0
        );
        for bad in ["-1", "two", "", "1025"] {
            let flag = format!("--worker-threads={bad}");
            let error = parse(&[&flag]).unwrap_err().to_string();
            assert!(
                error.contains("--worker-threads")
                    && error.contains("expected 0 (one per CPU core) or 1 to 1024"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn worker_threads_choose_the_runtime() {
        use tokio::runtime::RuntimeFlavor;
        let flavor = |n: &str| {
            let runtime = parse(&["--worker-threads", n]).unwrap().runtime().unwrap();
            let flavor = runtime.handle().runtime_flavor();
            // Timers and I/O are enabled whatever the flavor.
            runtime.block_on(async { tokio::time::sleep(Duration::ZERO).await });
            runtime.block_on(async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() });
            flavor
        };
        assert_eq!(flavor("1"), RuntimeFlavor::CurrentThread);
        assert_eq!(flavor("2"), RuntimeFlavor::MultiThread);
        assert_eq!(flavor("0"), RuntimeFlavor::MultiThread);
    }

    #[test]
    fn durations_need_a_unit_unless_zero() {
        for (text, expected) in [
            ("0", Duration::ZERO),
            ("0ms", Duration::ZERO),
            ("500us", Duration::from_micros(500)),
            ("250ms", Duration::from_millis(250)),
            ("3s", Duration::from_secs(3)),
        ] {
            assert_eq!(parse_duration(text), Some(expected), "{text}");
        }
        for bad in [
            "",
            "5",
            "us",
            "1.5s",
            "-1ms",
            "1h",
            "1 s",
            "99999999999999999999s",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn wakeup_batching_flag() {
        let batching = |flag: &[&str]| parse(flag).map(|args| args.wakeup_batching());
        assert_eq!(parse(&[]).unwrap().wakeup_batching, None);
        assert_eq!(batching(&[]).unwrap(), DEFAULT_WAKEUP_BATCHING);
        for (value, expected) in [
            ("0", Duration::ZERO),
            ("500us", Duration::from_micros(500)),
            ("1ms", Duration::from_millis(1)),
            ("100ms", Duration::from_millis(100)),
        ] {
            assert_eq!(batching(&["--wakeup-batching", value]).unwrap(), expected);
        }
        for bad in [
            "",
            "1",
            "1s",
            "-1ms",
            "1.5ms",
            "ms",
            "101ms",
            "99999999999999999999us",
        ] {
            let flag = format!("--wakeup-batching={bad}");
            let error = parse(&[&flag]).unwrap_err().to_string();
            assert!(error.contains("--wakeup-batching"), "{bad}: {error}");
        }
        let error = parse(&["--wakeup-batching=101ms"]).unwrap_err().to_string();
        assert!(
            error.contains("longer than the most allowed, 100ms"),
            "{error}"
        );
    }

    #[test]
    fn a_runtime_with_wakeup_batching_runs_io_and_timers() {
        for threads in ["1", "2"] {
            let args = parse(&["--worker-threads", threads, "--wakeup-batching", "1ms"]).unwrap();
            let runtime = args.runtime().unwrap();
            let echoed = runtime.block_on(async {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                let server = tokio::spawn(async move {
                    let (mut socket, _) = listener.accept().await.unwrap();
                    let mut byte = [0u8; 1];
                    socket.read_exact(&mut byte).await.unwrap();
                    // Idle in between: the thread parks (and waits first).
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    socket.write_all(&byte).await.unwrap();
                });
                let mut client = tokio::net::TcpStream::connect(addr).await.unwrap();
                client.write_all(b"x").await.unwrap();
                let mut byte = [0u8; 1];
                client.read_exact(&mut byte).await.unwrap();
                server.await.unwrap();
                byte
            });
            assert_eq!(&echoed, b"x", "{threads} threads");
        }
    }

    #[test]
    fn leader_election_flags() {
        let args = parse(&[
            "--leader-elect",
            "--lease-namespace",
            "ops",
            "--lease-duration",
            "4",
            "--renew-deadline",
            "2s",
            "--ready-when-standby=false",
        ])
        .unwrap();
        let config = args.config("replicaset-controller");
        assert!(!config.ready_when_standby);
        let election = config.leader_election.clone().unwrap();
        assert_eq!(election.lease_name, "replicaset-controller");
        assert_eq!(election.lease_namespace, "ops");
        assert_eq!(election.lease_duration, Duration::from_secs(4));
        assert_eq!(election.renew_deadline, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));

        let named = parse(&["--leader-elect", "--lease-name", "mine"]).unwrap();
        let election = named.config("bin").leader_election.unwrap();
        assert_eq!(election.lease_name, "mine");
    }

    #[test]
    fn cross_flag_checks_happen_in_validate() {
        let args = parse(&[
            "--leader-elect",
            "--lease-duration",
            "5",
            "--renew-deadline",
            "5",
        ])
        .unwrap();
        let err = args.config("bin").validate().unwrap_err();
        assert!(matches!(
            err,
            ConfigError::RenewDeadlineNotBelowLeaseDuration { .. }
        ));
        assert!(err.to_string().contains("renew deadline"), "{err}");
        // Without --leader-elect the lease flags are not checked.
        let args = parse(&["--lease-duration", "5", "--renew-deadline", "5"]).unwrap();
        assert_eq!(args.config("bin").validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_values_with_clear_errors() {
        for (flags, needle) in [
            (&["--metrics-addr", "localhost:x"][..], "invalid address"),
            (&["--health-addr", ":99999"][..], "invalid port"),
            (&["--lease-duration", "1.5s"][..], "whole number of seconds"),
            (&["--renew-deadline", "0"][..], "at least 1s"),
            (
                &["--shutdown-grace-period", "5m"][..],
                "whole number of seconds",
            ),
            (&["--log-format", "xml"][..], "possible values: text, json"),
            (&["--log-level", "info,a=loud"][..], "invalid log filter"),
            (&["--ready-when-standby=maybe"][..], "invalid value"),
        ] {
            let err = parse(flags).unwrap_err().to_string();
            assert!(err.contains(needle), "{flags:?}: {err}");
        }
    }

    #[test]
    fn shard_ring_flags() {
        assert_eq!(parse(&[]).unwrap().config("bin").sharding, None);
        let args = parse(&[
            "--shard-ring",
            "rs",
            "--shard-identity",
            "pod-0",
            "--lease-namespace",
            "ops",
            "--lease-duration",
            "6",
            "--renew-deadline",
            "4",
        ])
        .unwrap();
        let config = args.config("replicaset-controller");
        let sharding = config.sharding.clone().unwrap();
        assert_eq!(
            (sharding.ring.as_str(), sharding.identity.as_str()),
            ("rs", "pod-0")
        );
        assert_eq!(sharding.namespace, "ops");
        assert_eq!(sharding.lease_duration, Duration::from_secs(6));
        assert_eq!(sharding.renew_deadline, Duration::from_secs(4));
        assert!(config.leader_election.is_none());
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(
            sharding.shard_config().lease_name(),
            "rs-pod-0",
            "the member's Lease"
        );
        // Without --shard-identity: the host name and the process id, a
        // valid Lease name.
        let default = parse(&["--shard-ring", "rs"]).unwrap().config("bin");
        assert_eq!(default.validate(), Ok(()));

        let err = parse(&["--shard-ring", "rs", "--leader-elect"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("cannot be used with"), "{err}");
        let err = parse(&["--shard-identity", "a"]).unwrap_err().to_string();
        assert!(err.contains("--shard-ring"), "{err}");
        let bad = parse(&["--shard-ring", "Rs_1"]).unwrap().config("bin");
        assert!(matches!(bad.validate(), Err(ConfigError::Sharding { .. })));
    }

    #[test]
    fn logging_and_shutdown_flags() {
        let args = parse(&[
            "--log-format",
            "json",
            "--log-level",
            "warn,ctrlkit_runtime=debug",
            "--shutdown-grace-period",
            "5s",
            "--ready-when-standby",
        ])
        .unwrap();
        assert_eq!(args.log_format, LogFormat::Json);
        assert_eq!(args.log_level.as_str(), "warn,ctrlkit_runtime=debug");
        assert_eq!(args.shutdown_grace_period, Duration::from_secs(5));
        assert!(args.ready_when_standby);
        let config = args.config("bin");
        assert_eq!(config.shutdown_grace_period, Duration::from_secs(5));
    }

    #[test]
    fn connection_flags() {
        let args = parse(&[
            "--kubeconfig",
            "/etc/kube/config",
            "--context",
            "prod",
            "--namespace",
            "team-a",
        ])
        .unwrap();
        let config = args.config("bin");
        assert_eq!(
            config.kube.kubeconfig.as_deref(),
            Some(std::path::Path::new("/etc/kube/config"))
        );
        assert_eq!(config.kube.context.as_deref(), Some("prod"));
        assert_eq!(config.namespace.as_deref(), Some("team-a"));
    }

    #[test]
    fn watch_health_bound_flag() {
        let default = parse(&[]).unwrap().config("m").watch_health_bound;
        assert_eq!(default, Some(ctrlkit_informer::DEFAULT_WATCH_HEALTH_BOUND));
        let set = parse(&["--watch-health-bound", "60s"]).unwrap();
        assert_eq!(
            set.config("m").watch_health_bound,
            Some(Duration::from_secs(60))
        );
        for off in ["0", "0s"] {
            let args = parse(&["--watch-health-bound", off]).unwrap();
            assert_eq!(args.config("m").watch_health_bound, None, "{off}");
        }
        let err = parse(&["--watch-health-bound", "soon"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("whole number of seconds"), "{err}");
    }

    #[test]
    fn secure_metrics_flags() {
        let config = parse(&["--metrics-secure", "--metrics-addr", ":8443"])
            .unwrap()
            .config("bin");
        assert_eq!(
            config.secure_metrics,
            Some(SecureMetricsConfig { tls_files: None }),
            "self-signed without a certificate directory"
        );
        assert_eq!(config.validate(), Ok(()));

        let config = parse(&[
            "--metrics-secure=true",
            "--metrics-cert-path",
            "/certs",
            "--metrics-cert-key",
            "key.pem",
        ])
        .unwrap()
        .config("bin");
        let files = config.secure_metrics.unwrap().tls_files.unwrap();
        assert_eq!(files.cert, std::path::Path::new("/certs/tls.crt"));
        assert_eq!(files.key, std::path::Path::new("/certs/key.pem"));

        let off = parse(&["--metrics-secure=false"]).unwrap().config("bin");
        assert_eq!(off.secure_metrics, None);
        // A certificate without secure serving is a mistake, not a no-op.
        let err = parse(&["--metrics-cert-path", "/certs"]).unwrap_err();
        assert!(err.to_string().contains("--metrics-secure"), "{err}");
        // Secure metrics on the probes' address would demand tokens from
        // the kubelet.
        let shared = parse(&[
            "--metrics-secure",
            "--metrics-addr",
            ":8081",
            "--health-addr",
            ":8081",
        ])
        .unwrap()
        .config("bin");
        assert_eq!(
            shared.validate(),
            Err(ConfigError::SecureMetricsShareHealthAddress)
        );
    }

    #[test]
    fn listen_addresses() {
        assert_eq!("0".parse::<ListenAddr>(), Ok(ListenAddr(None)));
        assert_eq!("".parse::<ListenAddr>(), Ok(ListenAddr(None)));
        assert_eq!(
            ":9090".parse::<ListenAddr>(),
            Ok(ListenAddr(Some("0.0.0.0:9090".parse().unwrap())))
        );
        assert_eq!(
            "[::1]:0".parse::<ListenAddr>(),
            Ok(ListenAddr(Some("[::1]:0".parse().unwrap())))
        );
        assert_eq!(ListenAddr(None).to_string(), "0");
        let disabled = parse(&["--metrics-addr", "0", "--health-addr", ""]).unwrap();
        let config = disabled.config("bin");
        assert_eq!((config.metrics_addr, config.health_addr), (None, None));
    }
}
