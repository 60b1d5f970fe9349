//! The `main` of a controller binary in one call: logging, connection,
//! controllers, signals, exit status.

use std::process::ExitCode;

use super::args::ManagerArgs;
use super::config::ManagerConfig;
use super::error::{ManagerError, error_chain};
use super::lifecycle::Manager;
use super::logging::init_logging;
use super::runnable::BoxError;
use super::signals::shutdown_on_signals;
use super::wakeup::WakeupBatching;

/// Runs a controller binary whose flags are already parsed: installs
/// logging (`--log-format`, `--log-level`), checks the configuration,
/// installs the signal handlers, connects, lets `build` add controllers to
/// the [`Manager`], runs it until SIGTERM/SIGINT, and turns the outcome
/// into the exit status:
///
/// - `0` after a graceful shutdown;
/// - `1` with the error (and its causes) on stderr: unreachable cluster,
///   port in use, lost lease, failed controller, drain past the grace
///   period;
/// - `2` for an invalid configuration (as clap does for a bad flag).
///
/// `name` prefixes the error line and names the lease unless
/// `--lease-name` is given.
///
/// ```no_run
/// use std::process::ExitCode;
///
/// use clap::Parser;
/// use ctrlkit_runtime::manager::{FnRunnable, ManagerArgs, run_main};
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     manager: ManagerArgs,
/// }
///
/// #[tokio::main]
/// async fn main() -> ExitCode {
///     let cli = Cli::parse();
///     run_main("widget-controller", &cli.manager, |manager| {
///         let client = manager.client().clone();
///         manager.add(FnRunnable::new("widgets", move |shutdown| async move {
///             let _ = client; // reconcile widgets until shutdown
///             shutdown.cancelled().await;
///             Ok::<_, std::io::Error>(())
///         }));
///         Ok::<_, std::io::Error>(())
///     })
///     .await
/// }
/// ```
pub async fn run_main<B, E>(name: &str, args: &ManagerArgs, build: B) -> ExitCode
where
    B: FnOnce(&mut Manager) -> Result<(), E>,
    E: Into<BoxError>,
{
    run(name, args, build, None).await
}

/// `run_main`; `our_batching` is the wakeup batching of the runtime
/// `block_on_main` built from `args` (so the runtime flags need no check),
/// handed to the shard member to widen.
async fn run<B, E>(
    name: &str,
    args: &ManagerArgs,
    build: B,
    our_batching: Option<WakeupBatching>,
) -> ExitCode
where
    B: FnOnce(&mut Manager) -> Result<(), E>,
    E: Into<BoxError>,
{
    init_logging(args.log_format, &args.log_level);
    if our_batching.is_none() {
        warn_runtime_flags_not_applied(args);
    }
    let result = async {
        let config = config_on(args, name, our_batching);
        config.validate()?;
        let shutdown = shutdown_on_signals()?;
        let mut manager = Manager::new(config).await?;
        build(&mut manager).map_err(|e| ManagerError::Build(e.into()))?;
        manager.run(shutdown).await
    }
    .await;
    exit_code(name, result)
}

/// The manager's configuration from `args`; a sharded member widens the
/// wakeup batching of the runtime it runs on, when that runtime is ours.
fn config_on(args: &ManagerArgs, name: &str, batching: Option<WakeupBatching>) -> ManagerConfig {
    let mut config = args.config(name);
    if let Some(sharding) = config.sharding.as_mut() {
        sharding.wakeup_batching = batching;
    }
    config
}

/// Says which of the runtime's flags were given but not applied, when
/// `run_main` runs on a runtime the binary built itself (e.g.
/// `#[tokio::main]`): `--wakeup-batching` whenever given, and
/// `--worker-threads` when the runtime has another shape. Neither can
/// change a runtime that already runs.
fn warn_runtime_flags_not_applied(args: &ManagerArgs) {
    if let Some(asked) = args.wakeup_batching {
        tracing::warn!(
            ?asked,
            "--wakeup-batching is not applied: this binary built its own Tokio runtime; start it with block_on_main to honour the flag"
        );
    }
    let Some(asked) = args.worker_threads else {
        return;
    };
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let current_thread = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread;
    let running = if current_thread {
        1
    } else {
        handle.metrics().num_workers()
    };
    let applied = match asked {
        0 => !current_thread,
        1 => current_thread,
        n => !current_thread && running == n,
    };
    if !applied {
        tracing::warn!(
            asked,
            running,
            "--worker-threads is not applied: this binary built its own Tokio runtime; start it with block_on_main to honour the flag"
        );
    }
}

/// [`run_main`] on the Tokio runtime `--worker-threads` and
/// `--wakeup-batching` ask for (see [`ManagerArgs::runtime`]), for a
/// binary whose `main` is not async:
///
/// ```no_run
/// use std::process::ExitCode;
///
/// use clap::Parser;
/// use ctrlkit_runtime::manager::{ManagerArgs, block_on_main};
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     manager: ManagerArgs,
/// }
///
/// fn main() -> ExitCode {
///     let cli = Cli::parse();
///     block_on_main("widget-controller", &cli.manager, |_manager| {
///         Ok::<_, std::io::Error>(())
///     })
/// }
/// ```
///
/// Exits `1` with the error on stderr if the runtime cannot be built.
pub fn block_on_main<B, E>(name: &str, args: &ManagerArgs, build: B) -> ExitCode
where
    B: FnOnce(&mut Manager) -> Result<(), E>,
    E: Into<BoxError>,
{
    let batching = WakeupBatching::new(args.wakeup_batching());
    match args.runtime_with_batching(&batching) {
        Ok(runtime) => runtime.block_on(run(name, args, build, Some(batching))),
        Err(error) => {
            eprintln!("{name}: error: cannot start the Tokio runtime: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The exit status for a manager's outcome, printing the error (with its
/// causes) to stderr as `"{name}: error: ..."`: `0` for `Ok`, `2` for an
/// invalid configuration, `1` otherwise.
pub fn exit_code(name: &str, result: Result<(), ManagerError>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: error: {}", error_chain(&error));
            match error.is_config() {
                true => ExitCode::from(2),
                false => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ManagerArgs,
    }

    fn args(flags: &[&str]) -> ManagerArgs {
        let cli = Cli::try_parse_from(std::iter::once("bin").chain(flags.iter().copied()));
        cli.unwrap().args
    }

    #[test]
    fn a_sharded_member_is_handed_the_runtimes_wakeup_batching() {
        let batching = WakeupBatching::new(Duration::from_millis(1));
        let config = config_on(
            &args(&["--shard-ring", "rs", "--shard-identity", "m0"]),
            "bin",
            Some(batching.clone()),
        );
        let sharding = config.sharding.unwrap();
        assert_eq!(sharding.wakeup_batching, Some(batching.clone()));
        // The member's share widens the very window the runtime reads.
        let member = sharding.shard_config();
        assert_eq!(member.batching(), Some(&batching));

        // Unsharded: nothing to widen; on a runtime of the binary's own
        // (`run_main`): nothing handed over.
        assert_eq!(config_on(&args(&[]), "bin", Some(batching)).sharding, None);
        let sharding = config_on(&args(&["--shard-ring", "rs"]), "bin", None).sharding;
        assert_eq!(sharding.unwrap().wakeup_batching, None);
    }
}
