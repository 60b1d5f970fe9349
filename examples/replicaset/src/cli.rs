//! The command line shared by `replicaset-controller` and
//! `replication-controller`: flags, their validation, and the `main` body
//! both binaries run.

use std::fmt;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::ops::kubeconfig::KubeConfigSource;
use crate::ops::leader::{LeaderElectionConfig, default_identity};
use crate::ops::run::{BuildContext, RunSettings, run_controller};
use crate::ops::signals::shutdown_on_signals;
use crate::{ChurnGuardOptions, ControllerOptions};

/// Flags common to both controller binaries.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ControllerArgs {
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

    /// Number of owners synced concurrently (upstream's --concurrent-replicaset-syncs).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = parse_positive)]
    pub workers: usize,

    /// Most pods created or deleted for one owner in one sync; the rest
    /// waits for the next sync.
    #[arg(long, value_name = "N", default_value_t = 500, value_parser = parse_positive)]
    pub burst_replicas: usize,

    /// Churn guard (not in upstream): when pods fail right after creation
    /// (e.g. the kubelet rejects them with OutOfpods), back off creating
    /// replacements for that owner exponentially, report it in a
    /// ReplicaFailure condition (reason FailedPodChurn) and a Warning
    /// event, and delete the owner's Failed pods beyond the newest few.
    /// "false" behaves exactly as upstream (which re-creates at once, for ever).
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub churn_guard: bool,

    /// A pod churns if it is seen Failed less than this long after its
    /// creation. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_seconds)]
    pub churn_window: Duration,

    /// Backoff after the first churned pod; it doubles with each further
    /// one. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_seconds)]
    pub churn_backoff_base: Duration,

    /// Longest churn backoff. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "300s", value_parser = parse_seconds)]
    pub churn_backoff_max: Duration,

    /// Failed pods kept per owner by the churn guard (the newest); older
    /// ones are deleted.
    #[arg(long, value_name = "N", default_value_t = crate::DEFAULT_FAILED_PODS_KEPT)]
    pub churn_failed_pods_kept: usize,

    /// Pod failure reasons (status.reason) that count as churn,
    /// comma-separated; a trailing * matches a prefix, "*" alone any reason.
    /// Default: the kubelet's admission rejections (OutOf*, NodeAffinity,
    /// NodePorts, UnexpectedAdmissionError, ...) and Evicted.
    #[arg(long, value_name = "REASONS", value_delimiter = ',')]
    pub churn_reasons: Option<Vec<String>>,

    /// Read-own-writes (Kubernetes 1.36): skip an owner's sync until the
    /// informers have observed the pods this controller created, adopted or
    /// released for it and its last status write (at most 30 s per write).
    /// "false" syncs on whatever the caches hold, like a controller without
    /// it.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub read_own_writes: bool,

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

    /// Time after a renewal at which the leader renews again; must be less
    /// than --lease-duration. Whole seconds.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_seconds)]
    pub renew_deadline: Duration,

    /// Where to serve Prometheus metrics on /metrics, as IP:PORT (or :PORT
    /// for all interfaces; port 0 picks a free port and logs it).
    /// "0" or "" disables the endpoint.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub metrics_addr: ListenAddr,

    /// Where to serve /healthz (liveness) and /readyz (informer caches
    /// synced), same syntax as --metrics-addr; may equal it.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub health_addr: ListenAddr,
}

impl ControllerArgs {
    /// The settings [`run_controller`] takes; `binary` names the lease when
    /// `--lease-name` is not given.
    pub fn run_settings(&self, binary: &str) -> RunSettings {
        RunSettings {
            name: binary.to_owned(),
            kube: KubeConfigSource {
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
            },
            options: self.controller_options(),
            metrics_addr: self.metrics_addr.0,
            health_addr: self.health_addr.0,
            leader_election: self.leader_elect.then(|| LeaderElectionConfig {
                lease_name: self.lease_name.clone().unwrap_or_else(|| binary.to_owned()),
                lease_namespace: self.lease_namespace.clone(),
                identity: default_identity(),
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            }),
        }
    }

    /// The controller's own options.
    pub fn controller_options(&self) -> ControllerOptions {
        ControllerOptions {
            workers: self.workers,
            burst_replicas: self.burst_replicas,
            namespace: self.namespace.clone(),
            churn_guard: self.churn_guard_options(),
            read_own_writes: self.read_own_writes,
            ..ControllerOptions::default()
        }
    }

    /// The churn guard's settings from the `--churn-*` flags.
    pub fn churn_guard_options(&self) -> ChurnGuardOptions {
        let defaults = ChurnGuardOptions::default();
        ChurnGuardOptions {
            enabled: self.churn_guard,
            window: self.churn_window,
            reasons: self.churn_reasons.clone().unwrap_or(defaults.reasons),
            backoff_base: self.churn_backoff_base,
            backoff_max: self.churn_backoff_max,
            failed_pods_kept: self.churn_failed_pods_kept,
        }
    }
}

/// A listen address: `Some` to serve there, `None` when disabled.
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

fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a positive whole number")),
    }
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let digits = s.strip_suffix('s').unwrap_or(s);
    match digits.parse::<u64>() {
        Ok(0) => Err("must be at least 1s".into()),
        Ok(n) => Ok(Duration::from_secs(n)),
        Err(_) => Err(format!(
            "'{s}' is not a whole number of seconds (e.g. 15 or 15s)"
        )),
    }
}

/// The body of both binaries' `main`: install the signal handlers, run
/// the controller built by `build`, and turn the outcome into an exit
/// code (0 after a graceful shutdown; 1 with the error on stderr
/// otherwise, including a lost lease).
pub async fn run_main<B, R, F, E1, E2>(binary: &str, args: &ControllerArgs, build: B) -> ExitCode
where
    B: FnOnce(BuildContext<'_>) -> Result<R, E1>,
    R: FnOnce(CancellationToken) -> F,
    F: Future<Output = Result<(), E2>> + Send + 'static,
    E1: fmt::Display,
    E2: fmt::Display + Send + 'static,
{
    let settings = args.run_settings(binary);
    if let Some(config) = &settings.leader_election
        && let Err(message) = config.validate()
    {
        eprintln!("{binary}: error: {message}");
        return ExitCode::from(2);
    }
    let result = match shutdown_on_signals() {
        Ok(shutdown) => run_controller(settings, shutdown, build).await,
        Err(error) => Err(error),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{binary}: error: {error}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parse(args: &[&str]) -> Result<ControllerArgs, clap::Error> {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(argv).map(|c| c.args)
    }

    #[test]
    fn defaults_match_upstream() {
        let args = parse(&[]).unwrap();
        assert_eq!(args.workers, 5);
        assert_eq!(args.burst_replicas, 500);
        assert_eq!(args.namespace, None);
        assert!(!args.leader_elect);
        assert_eq!(
            args.metrics_addr,
            ListenAddr(Some("127.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!(
            args.health_addr,
            ListenAddr(Some("127.0.0.1:8081".parse().unwrap()))
        );
        let settings = args.run_settings("replicaset-controller");
        assert!(settings.leader_election.is_none());
        assert_eq!(settings.options.workers, 5);
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
        ])
        .unwrap();
        let config = args
            .run_settings("replicaset-controller")
            .leader_election
            .unwrap();
        assert_eq!(config.lease_name, "replicaset-controller");
        assert_eq!(config.lease_namespace, "ops");
        assert_eq!(config.lease_duration, Duration::from_secs(4));
        assert_eq!(config.renew_deadline, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn rejects_bad_values_with_clear_errors() {
        for (flags, needle) in [
            (&["--workers", "0"][..], "at least 1"),
            (&["--burst-replicas", "0"][..], "at least 1"),
            (&["--workers", "many"][..], "not a positive whole number"),
            (&["--metrics-addr", "localhost:x"][..], "invalid address"),
            (&["--health-addr", ":99999"][..], "invalid port"),
            (&["--lease-duration", "1.5s"][..], "whole number of seconds"),
        ] {
            let err = parse(flags).unwrap_err().to_string();
            assert!(err.contains(needle), "{flags:?}: {err}");
        }
    }

    #[test]
    fn read_own_writes_flag() {
        assert!(parse(&[]).unwrap().controller_options().read_own_writes);
        assert!(parse(&["--read-own-writes"]).unwrap().read_own_writes);
        let off: [&[&str]; 2] = [
            &["--read-own-writes=false"],
            &["--read-own-writes", "false"],
        ];
        for flags in off {
            let options = parse(flags).unwrap().controller_options();
            assert!(!options.read_own_writes, "{flags:?}");
        }
        assert!(parse(&["--read-own-writes=maybe"]).is_err());
    }

    #[test]
    fn churn_guard_flags() {
        let options = parse(&[]).unwrap().controller_options();
        assert_eq!(options.churn_guard, ChurnGuardOptions::default());
        for off in [
            &["--churn-guard=false"][..],
            &["--churn-guard", "false"][..],
        ] {
            let args = parse(off).unwrap();
            assert!(!args.controller_options().churn_guard.enabled, "{off:?}");
        }
        assert!(parse(&["--churn-guard"]).unwrap().churn_guard);
        let guard = parse(&[
            "--churn-window",
            "30s",
            "--churn-backoff-base",
            "2",
            "--churn-backoff-max",
            "60s",
            "--churn-failed-pods-kept",
            "0",
            "--churn-reasons",
            "OutOfpods,Custom*",
        ])
        .unwrap()
        .churn_guard_options();
        assert!(guard.enabled);
        assert_eq!(guard.window, Duration::from_secs(30));
        assert_eq!(guard.backoff_base, Duration::from_secs(2));
        assert_eq!(guard.backoff_max, Duration::from_secs(60));
        assert_eq!(guard.failed_pods_kept, 0);
        assert_eq!(guard.reasons, ["OutOfpods", "Custom*"]);
        for (flags, needle) in [
            (&["--churn-guard=maybe"][..], "invalid value"),
            (&["--churn-window", "0"][..], "at least 1s"),
            (
                &["--churn-backoff-max", "5m"][..],
                "whole number of seconds",
            ),
        ] {
            let err = parse(flags).unwrap_err().to_string();
            assert!(err.contains(needle), "{flags:?}: {err}");
        }
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
    }
}
