//! `replication-controller`: keeps the pods of every ReplicationController
//! at its `spec.replicas`, like kube-controller-manager's replication
//! manager.
//!
//! Run `replication-controller --help` for the flags. Logs go to stderr,
//! filtered by `RUST_LOG` (default `info`).

use std::process::ExitCode;

use clap::Parser;
use ctrlkit_replicaset::ReplicationManager;
use ctrlkit_replicaset::cli::{ControllerArgs, run_main};
use ctrlkit_replicaset::ops::logging::init_logging;

/// Keeps the pods of every ReplicationController at its spec.replicas:
/// creates missing pods, deletes surplus ones, adopts matching orphans and
/// reports status.
///
/// Disable kube-controller-manager's own replication manager first
/// (--controllers=*,-replicationcontroller), or the two will fight. Logs go
/// to stderr, filtered by RUST_LOG (default: info). SIGTERM or Ctrl-C drains
/// in-flight syncs, releases the lease and exits 0.
#[derive(Debug, Parser)]
#[command(name = "replication-controller", version)]
struct Cli {
    #[command(flatten)]
    args: ControllerArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging("info");
    run_main("replication-controller", &cli.args, |ctx| {
        let controller =
            ReplicationManager::new(ctx.client, ctx.factory, ctx.options, Some(ctx.registry))?;
        Ok::<_, ctrlkit_replicaset::Error>(move |shutdown| controller.run(shutdown))
    })
    .await
}
