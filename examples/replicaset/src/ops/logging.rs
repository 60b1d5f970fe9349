//! Log output: `tracing` events formatted to stderr, filtered by `RUST_LOG`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs a global `tracing` subscriber that writes to stderr.
///
/// The filter comes from `RUST_LOG` (e.g. `RUST_LOG=debug` or
/// `RUST_LOG=info,ctrlkit_replicaset=debug`); when it is unset or invalid,
/// `default_directives` applies (`"info"` for the controllers, `"off"` for
/// the demo, which prints its own progress lines). Colours are used only
/// when stderr is a terminal, so log files and tests get plain text.
/// Calling it twice is harmless: the second call does nothing.
pub fn init_logging(default_directives: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_directives));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
