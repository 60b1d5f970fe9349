//! `replicaset-controller`: keeps the pods of every ReplicaSet at its
//! `spec.replicas`, like kube-controller-manager's ReplicaSet controller.
//!
//! Run `replicaset-controller --help` for the flags. Logs go to stderr,
//! filtered by `--log-level` / `RUST_LOG` (default `info`).

use clap::Parser;
use ctrlkit_replicaset::{ReplicaSetController, cli::ControllerArgs};
use ctrlkit_runtime::manager::{ManagerArgs, block_on_main};

/// Keeps the pods of every ReplicaSet at its spec.replicas: creates missing
/// pods, deletes surplus ones, adopts matching orphans and reports status.
///
/// Disable kube-controller-manager's own ReplicaSet controller first
/// (--controllers=*,-replicaset), or the two will fight. Logs go to
/// stderr, filtered by --log-level or RUST_LOG (default: info). SIGTERM or Ctrl-C drains
/// in-flight syncs, releases the lease and exits 0.
#[derive(Debug, Parser)]
#[command(name = "replicaset-controller", version)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
    #[command(flatten)]
    controller: ControllerArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    block_on_main("replicaset-controller", &cli.manager, |manager| {
        ReplicaSetController::add_to(manager, cli.controller.controller_options())
    })
}
