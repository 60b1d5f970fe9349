//! `webapp-operator`: runs the WebApp controller under ctrlkit's manager
//! (leader election, /metrics, /healthz, /readyz, graceful drain), or
//! prints the CRD with `--print-crd`.

use std::process::ExitCode;

use clap::Parser;
use ctrlkit::prelude::block_on_main;
use ctrlkit_example_webapp::controller::{Cli, NAME, add_to};
use ctrlkit_example_webapp::resource::print_crd;

fn main() -> ExitCode {
    match Cli::parse() {
        cli if cli.print_crd => print_crd(),
        // On the runtime --worker-threads and --wakeup-batching ask for.
        cli => block_on_main(NAME, &cli.manager, |manager| add_to(manager, &cli)),
    }
}
