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

use crate::ControllerOptions;
use crate::ops::kubeconfig::KubeConfigSource;
use crate::ops::leader::{LeaderElectionConfig, default_identity};
use crate::ops::run::{BuildContext, RunSettings, run_controller};
use crate::ops::signals::shutdown_on_signals;

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
