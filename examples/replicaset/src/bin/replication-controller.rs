//! `replication-controller`: keeps the pods of every ReplicationController
//! at its `spec.replicas`, like kube-controller-manager's replication
//! manager.
//!
//! Run `replication-controller --help` for the flags. Logs go to stderr,
//! filtered by `--log-level` / `RUST_LOG` (default `info`).

use clap::Parser;
use ctrlkit_replicaset::{ReplicationManager, cli::ControllerArgs};
use ctrlkit_runtime::manager::{ManagerArgs, block_on_main};

/// Keeps the pods of every ReplicationController at its spec.replicas:
/// creates missing pods, deletes surplus ones, adopts matching orphans and
/// reports status.
///
/// Disable kube-controller-manager's own replication manager first
/// (--controllers=*,-replicationcontroller), or the two will fight. Logs go
/// to stderr, filtered by --log-level or RUST_LOG (default: info). SIGTERM or Ctrl-C drains
/// in-flight syncs, releases the lease and exits 0.
#[derive(Debug, Parser)]
#[command(name = "replication-controller", version)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    #[command(flatten)]
    controller: ControllerArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    block_on_main("replication-controller", &cli.manager, |manager| {
        ReplicationManager::add_to(manager, cli.controller.controller_options())
    })
}
