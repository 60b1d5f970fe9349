//! `run_main` as a binary's `main` uses it: exit statuses for a bad
//! configuration, an unreachable cluster, a failing controller, and a
//! graceful stop on SIGTERM.
//!
//! One test function only: it sends SIGTERM to this test process, whose
//! handlers `run_main` installed, so nothing else may run beside it.
#![allow(clippy::unwrap_used)]
#![cfg(unix)]

mod manager_support;

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use ctrlkit_runtime::manager::{FnRunnable, ManagerArgs, run_main};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use manager_support::eventually;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    manager: ManagerArgs,
}

fn args(flags: &[&str]) -> ManagerArgs {
    let argv = [
        "test",
        "--metrics-addr",
        "0",
        "--health-addr",
        "0",
        "--log-level",
        "off",
    ];
    Cli::try_parse_from(argv.iter().chain(flags))
        .unwrap()
        .manager
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_statuses_of_run_main() {
    // 2: invalid configuration, before connecting or building anything.
    let bad = args(&[
        "--leader-elect",
        "--lease-duration",
        "5",
        "--renew-deadline",
        "5",
    ]);
    let code = run_main("test", &bad, |_| -> Result<(), std::io::Error> {
        panic!("must not build with an invalid configuration")
    })
    .await;
    assert_eq!(code, ExitCode::from(2));

    // 1: no cluster.
    let missing = args(&["--kubeconfig", "/nonexistent/kubeconfig"]);
    let code = run_main("test", &missing, |_| Ok::<_, std::io::Error>(())).await;
    assert_eq!(code, ExitCode::FAILURE);

    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).unwrap();
    let connected = args(&["--kubeconfig", kubeconfig.to_str().unwrap()]);

    // 1: the build step fails.
    let code = run_main("test", &connected, |_| {
        Err(std::io::Error::other("no such controller"))
    })
    .await;
    assert_eq!(code, ExitCode::FAILURE);

    // 1: a controller fails.
    let code = run_main("test", &connected, |manager| {
        manager.add(FnRunnable::new(
            "broken",
            |_stop: CancellationToken| async {
                Err::<(), _>(std::io::Error::other("disk on fire"))
            },
        ));
        Ok::<_, std::io::Error>(())
    })
    .await;
    assert_eq!(code, ExitCode::FAILURE);

    // 0: SIGTERM drains the controller, which finishes its work.
    let running = Arc::new(AtomicBool::new(false));
    let drained = Arc::new(AtomicBool::new(false));
    let (r, d) = (running.clone(), drained.clone());
    let main = tokio::spawn(async move {
        run_main("test", &connected, move |manager| {
            manager.add(FnRunnable::new(
                "worker",
                move |stop: CancellationToken| async move {
                    r.store(true, Ordering::SeqCst);
                    stop.cancelled().await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    d.store(true, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(())
                },
            ));
            Ok::<_, std::io::Error>(())
        })
        .await
    });
    eventually("the worker to run", Duration::from_secs(10), || {
        running.load(Ordering::SeqCst)
    })
    .await;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &std::process::id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert_eq!(main.await.unwrap(), ExitCode::SUCCESS);
    assert!(drained.load(Ordering::SeqCst));
    cluster.shutdown().await;
}
