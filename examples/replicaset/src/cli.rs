//! The controllers' own flags, which `replicaset-controller` and
//! `replication-controller` flatten next to the manager's
//! ([`ManagerArgs`](ctrlkit_runtime::ManagerArgs): kubeconfig, namespace,
//! leader election, endpoints, logging, grace period).

use std::time::Duration;

use ctrlkit_runtime::manager::{parse_duration, parse_seconds};

use crate::{ChurnGuardOptions, ControllerOptions};

/// The flags of the replica controllers themselves.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ControllerArgs {
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

    /// Cache pods stripped to what the controller reads (labels, owner
    /// references, node, phase, readiness, restart counts, deletion cost):
    /// a fraction of their memory. "false" caches whole pods.
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub slim_pod_cache: bool,

    /// Events for one owner within this period of its last sync share one
    /// sync at the period's end; the first event of a quiet owner is synced
    /// at once. "0" queues every event at once, as upstream does. A number
    /// with `ms` or `s`.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = parse_period)]
    pub batch_period: Duration,
}

impl ControllerArgs {
    /// The controller's own options.
    pub fn controller_options(&self) -> ControllerOptions {
        ControllerOptions {
            workers: self.workers,
            burst_replicas: self.burst_replicas,
            churn_guard: self.churn_guard_options(),
            read_own_writes: self.read_own_writes,
            slim_pod_cache: self.slim_pod_cache,
            // The controller never reads them (nor does anything else in
            // the binaries' processes that shares the owner informer).
            drop_owner_managed_fields: true,
            batch_period: self.batch_period,
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

/// `250ms`, `1s` or `0`: a period of at most an hour.
fn parse_period(s: &str) -> Result<Duration, String> {
    let period =
        parse_duration(s).ok_or_else(|| format!("'{s}' is not a period such as 250ms, 1s or 0"))?;
    if period > Duration::from_secs(3600) {
        return Err(format!("'{s}' is longer than an hour"));
    }
    Ok(period)
}

fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("'{s}' is not a positive whole number")),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    use ctrlkit_runtime::manager::{ListenAddr, ManagerArgs};

    /// What the binaries parse.
    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        manager: ManagerArgs,
        #[command(flatten)]
        args: ControllerArgs,
    }

    fn parse_all(args: &[&str]) -> Result<Cli, clap::Error> {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(argv)
    }

    fn parse(args: &[&str]) -> Result<ControllerArgs, clap::Error> {
        parse_all(args).map(|c| c.args)
    }

    #[test]
    fn defaults_match_upstream() {
        let cli = parse_all(&[]).unwrap();
        let args = &cli.args;
        assert_eq!(args.workers, 5);
        assert_eq!(args.burst_replicas, 500);
        assert_eq!(cli.manager.namespace, None);
        assert!(!cli.manager.leader_elect);
        assert_eq!(
            cli.manager.metrics_addr,
            ListenAddr(Some("127.0.0.1:8080".parse().unwrap()))
        );
        assert_eq!(
            cli.manager.health_addr,
            ListenAddr(Some("127.0.0.1:8081".parse().unwrap()))
        );
        let config = cli.manager.config("replicaset-controller");
        assert!(config.leader_election.is_none());
        assert_eq!(args.controller_options().workers, 5);
    }

    #[test]
    fn leader_election_flags() {
        let cli = parse_all(&[
            "--leader-elect",
            "--lease-namespace",
            "ops",
            "--lease-duration",
            "4",
            "--renew-deadline",
            "2s",
        ])
        .unwrap();
        let config = cli
            .manager
            .config("replicaset-controller")
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
    fn batch_period_flag() {
        let period = |flags: &[&str]| parse(flags).map(|a| a.controller_options().batch_period);
        assert_eq!(period(&[]).unwrap(), crate::DEFAULT_BATCH_PERIOD);
        assert_eq!(period(&["--batch-period=0"]).unwrap(), Duration::ZERO);
        assert_eq!(
            period(&["--batch-period=1s"]).unwrap(),
            Duration::from_secs(1)
        );
        assert_eq!(
            period(&["--batch-period", "40ms"]).unwrap(),
            Duration::from_millis(40)
        );
        for bad in ["250", "1.5s", "fast", "2h", "3601s", "99999999999ms"] {
            let err = period(&["--batch-period", bad]).unwrap_err().to_string();
            assert!(err.contains(bad), "{bad}: {err}");
        }
        assert_eq!(
            ControllerOptions::default().batch_period,
            Duration::ZERO,
            "library users get upstream's behaviour"
        );
    }

    #[test]
    fn slim_pod_cache_flag() {
        assert!(parse(&[]).unwrap().controller_options().slim_pod_cache);
        let off = parse(&["--slim-pod-cache=false"]).unwrap();
        assert!(!off.controller_options().slim_pod_cache);
        assert!(
            !ControllerOptions::default().slim_pod_cache,
            "opt-in for library users"
        );
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
