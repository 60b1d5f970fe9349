//! `testcluster`: run the simulated Kubernetes API server as a process, for
//! stock `kubectl` and for clients in other processes.
//!
//! It writes a kubeconfig once it is serving, prints one line containing
//! `ready` and the URL, and serves until SIGINT or SIGTERM, then stops
//! accepting connections and exits with status 0. Logs go to stderr and
//! follow `RUST_LOG` (default `info`).

use std::{path::PathBuf, process::ExitCode, time::Duration};

use clap::Parser;
use ctrlkit_testcluster::{
    TestCluster, TestClusterConfig,
    faults::{ErrorKind, ErrorRule, FaultConfig, Latency},
    kubelet::KubeletConfig,
};

/// In-process simulated Kubernetes API server (a test fixture, not a
/// Kubernetes distribution), with a kubelet simulation and seeded fault
/// injection.
#[derive(Debug, Parser)]
#[command(name = "testcluster", version)]
struct Args {
    /// Write a kubeconfig for the cluster to this path once it is serving
    /// (cluster, user and context named `testcluster`, namespace `default`).
    #[arg(long, value_name = "PATH")]
    kubeconfig_out: PathBuf,

    /// Port to listen on, on 127.0.0.1. Default: any free port.
    #[arg(long, value_name = "N")]
    port: Option<u16>,

    /// Number of change events kept for watches to resume from; watches
    /// from older resourceVersions get 410 Gone.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    watch_history: usize,

    /// Do not run the kubelet simulation (pods stay Pending, unscheduled).
    #[arg(long)]
    no_kubelet: bool,

    /// Leave `metadata.managedFields` out of objects (kept by default, as
    /// kube-apiserver does).
    #[arg(long)]
    no_managed_fields: bool,

    /// Enforce RBAC over the Roles and bindings stored in the cluster:
    /// requests are authenticated by bearer token and the server serves
    /// HTTPS with its own certificate authority (kubectl sends tokens
    /// only over TLS). The kubeconfig written is the admin's
    /// (`system:masters`).
    #[arg(long)]
    rbac: bool,

    /// Number of simulated nodes, named node-1, node-2, ...
    #[arg(long, value_name = "N", default_value_t = 1)]
    nodes: usize,

    /// Pod slots per node; pods beyond them stay Pending (unscheduled) or,
    /// when pinned with spec.nodeName, are rejected with OutOfpods.
    #[arg(long, value_name = "N", default_value_t = 110)]
    pods_per_node: usize,

    /// Delay before a pending pod is bound to a node, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    schedule_delay_ms: u64,

    /// Delay from admission to Running, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    start_delay_ms: u64,

    /// Delay from Running to Ready, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    ready_delay_ms: u64,

    /// Delay before a pod marked for deletion is removed, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10)]
    deletion_delay_ms: u64,

    /// Reject every newly admitted pod with this reason (phase Failed), e.g.
    /// `OutOfpods`.
    #[arg(long, value_name = "REASON")]
    reject_pods_reason: Option<String>,

    /// Seed of the fault injector: the same seed and the same sequence of
    /// requests give the same faults.
    #[arg(long, value_name = "N", default_value_t = 0)]
    seed: u64,

    /// Fail requests at a rate: `VERB[@RESOURCE]:RATE[:CODE]`, e.g.
    /// `create:0.1`, `list@pods:0.5:429`, `*:0.01:504`. VERB is a
    /// kube-apiserver verb (get, list, watch, create, update, patch, delete,
    /// deletecollection) or `*`; RATE is in [0, 1]; CODE is 500 (default),
    /// 429 (with Retry-After: 1), 409 or 504. Repeatable; the first rule
    /// that matches and fires decides.
    #[arg(long, value_name = "RULE", value_parser = parse_error_rule)]
    error_rate: Vec<ErrorRule>,

    /// Latency added to every request: `MS` or a uniform range `MIN-MAX`.
    #[arg(long, value_name = "MS|MIN-MAX", value_parser = parse_latency)]
    latency_ms: Option<Latency>,

    /// End every watch stream after N events (bookmarks not counted).
    #[arg(long, value_name = "N")]
    watch_cut_after: Option<usize>,

    /// End every watch stream this many milliseconds after it started.
    #[arg(long, value_name = "MS")]
    watch_cut_after_ms: Option<u64>,

    /// Delay every watch event by `MS` or by a uniform `MIN-MAX`
    /// milliseconds; order is preserved.
    #[arg(long, value_name = "MS|MIN-MAX", value_parser = parse_latency)]
    watch_delay_ms: Option<Latency>,
}

fn parse_error_rule(s: &str) -> Result<ErrorRule, String> {
    let mut parts = s.split(':');
    let target = parts.next().unwrap_or_default();
    let rate = parts
        .next()
        .ok_or_else(|| format!("`{s}`: expected VERB[@RESOURCE]:RATE[:CODE]"))?;
    let code = parts.next();
    if parts.next().is_some() {
        return Err(format!("`{s}`: expected VERB[@RESOURCE]:RATE[:CODE]"));
    }
    let (verb, resource) = match target.split_once('@') {
        Some((v, r)) if !r.is_empty() => (v, Some(r.to_owned())),
        Some(_) => return Err(format!("`{s}`: empty resource after `@`")),
        None => (target, None),
    };
    if verb.is_empty() {
        return Err(format!("`{s}`: empty verb (use `*` for every verb)"));
    }
    let rate: f64 = rate
        .parse()
        .map_err(|_| format!("`{s}`: rate `{rate}` is not a number"))?;
    if !(0.0..=1.0).contains(&rate) {
        return Err(format!("`{s}`: rate {rate} is not in [0, 1]"));
    }
    let kind = match code {
        None => ErrorKind::InternalError,
        Some(c) => c
            .parse::<u16>()
            .ok()
            .and_then(ErrorKind::from_code)
            .ok_or_else(|| format!("`{s}`: code `{c}` is not one of 500, 429, 409, 504"))?,
    };
    Ok(ErrorRule {
        verb: (verb != "*").then(|| verb.to_owned()),
        resource,
        name: None,
        rate,
        kind,
    })
}

fn parse_latency(s: &str) -> Result<Latency, String> {
    let ms = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("`{s}`: `{x}` is not a whole number of milliseconds"))
    };
    match s.split_once('-') {
        None => Ok(Latency::Fixed(ms(s)?)),
        Some((lo, hi)) => {
            let (min, max) = (ms(lo)?, ms(hi)?);
            if min > max {
                return Err(format!("`{s}`: minimum above maximum"));
            }
            Ok(Latency::Uniform { min, max })
        }
    }
}

impl Args {
    fn cluster_config(&self) -> TestClusterConfig {
        let mut faults = FaultConfig {
            errors: self.error_rate.clone(),
            latency: self.latency_ms,
            watch_delay: self.watch_delay_ms,
            ..FaultConfig::default()
        };
        if let Some(n) = self.watch_cut_after {
            faults = faults.with_watch_cut_after_events(n);
        }
        if let Some(ms) = self.watch_cut_after_ms {
            faults = faults.with_watch_cut_after(Duration::from_millis(ms));
        }
        let mut config = TestClusterConfig::default()
            .with_watch_history(self.watch_history)
            .with_seed(self.seed)
            .with_faults(faults)
            .with_managed_fields(!self.no_managed_fields)
            .with_rbac(self.rbac);
        if let Some(port) = self.port {
            config = config.with_port(port);
        }
        if !self.no_kubelet {
            config = config.with_kubelet(
                KubeletConfig::with_nodes(self.nodes, self.pods_per_node)
                    .schedule_delay(Duration::from_millis(self.schedule_delay_ms))
                    .start_delay(Duration::from_millis(self.start_delay_ms))
                    .ready_delay(Duration::from_millis(self.ready_delay_ms))
                    .deletion_delay(Duration::from_millis(self.deletion_delay_ms))
                    .reject_reason(self.reject_pods_reason.as_deref())
                    // Its own thread, as nodes are not the API server: a
                    // burst of client requests does not hold it back.
                    .dedicated_thread(true),
            );
        }
        config
    }
}

/// Resolves on SIGINT or (on Unix) SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only SIGINT stops the server");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();

    let cluster = match TestCluster::start(args.cluster_config()).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("testcluster: failed to start: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = cluster.write_kubeconfig(&args.kubeconfig_out) {
        eprintln!(
            "testcluster: cannot write kubeconfig to {}: {e}",
            args.kubeconfig_out.display()
        );
        cluster.shutdown().await;
        return ExitCode::FAILURE;
    }
    // Exactly one line on stdout, for scripts and tests to wait for.
    println!(
        "testcluster ready at {} (kubeconfig: {})",
        cluster.base_url(),
        args.kubeconfig_out.display()
    );
    tracing::info!(
        url = cluster.base_url(),
        "serving; stop with SIGINT or SIGTERM"
    );

    shutdown_signal().await;
    tracing::info!("shutting down");
    cluster.shutdown().await;
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_rules_parse() {
        let r = parse_error_rule("create:0.25").unwrap();
        assert_eq!(r.verb.as_deref(), Some("create"));
        assert_eq!(r.resource, None);
        assert_eq!(r.rate, 0.25);
        assert_eq!(r.kind, ErrorKind::InternalError);

        let r = parse_error_rule("list@pods:1:429").unwrap();
        assert_eq!(r.resource.as_deref(), Some("pods"));
        assert_eq!(
            r.kind,
            ErrorKind::TooManyRequests {
                retry_after_secs: 1
            }
        );

        let r = parse_error_rule("*:0:504").unwrap();
        assert_eq!(r.verb, None);
        assert_eq!(r.kind, ErrorKind::Timeout);

        for bad in [
            "create",
            "create:x",
            "create:1.5",
            "create:0.1:418",
            ":0.1",
            "get@:0.1",
            "get:0.1:500:1",
        ] {
            assert!(parse_error_rule(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn latencies_parse() {
        assert_eq!(
            parse_latency("20").unwrap(),
            Latency::Fixed(Duration::from_millis(20))
        );
        assert_eq!(
            parse_latency("5-15").unwrap(),
            Latency::Uniform {
                min: Duration::from_millis(5),
                max: Duration::from_millis(15)
            }
        );
        assert!(parse_latency("15-5").is_err());
        assert!(parse_latency("fast").is_err());
    }

    #[test]
    fn options_map_to_the_cluster_config() {
        let args = Args::parse_from([
            "testcluster",
            "--kubeconfig-out",
            "/tmp/kc",
            "--nodes",
            "3",
            "--pods-per-node",
            "4",
            "--reject-pods-reason",
            "OutOfpods",
            "--seed",
            "9",
            "--error-rate",
            "get:0.5",
            "--error-rate",
            "create@pods:0.1:409",
            "--watch-cut-after",
            "5",
            "--watch-delay-ms",
            "1-2",
        ]);
        let c = args.cluster_config();
        assert_eq!(c.seed, 9);
        let k = c.kubelet.unwrap();
        assert_eq!(k.nodes.len(), 3);
        assert_eq!(k.nodes[2].capacity, 4);
        assert_eq!(k.reject_reason.as_deref(), Some("OutOfpods"));
        assert!(k.dedicated_thread);
        assert_eq!(c.faults.errors.len(), 2);
        assert_eq!(c.faults.watch_cut.unwrap().after_events, Some(5));
        assert!(c.faults.watch_delay.is_some());

        let args = Args::parse_from(["testcluster", "--kubeconfig-out", "k", "--no-kubelet"]);
        assert!(args.cluster_config().kubelet.is_none());
        assert!(!args.cluster_config().rbac);
        let args = Args::parse_from(["testcluster", "--kubeconfig-out", "k", "--rbac"]);
        assert!(args.cluster_config().rbac);
        assert!(args.cluster_config().faults.is_empty());
    }
}
