//! The manager's lifecycle without a cluster, on paused time: warm-up and
//! readiness, graceful drain, the grace period, failing runnables.
#![allow(clippy::unwrap_used)]

mod manager_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ctrlkit_runtime::manager::{
    ConfigError, FnRunnable, Manager, ManagerError, Readiness, exit_code,
};
use manager_support::{config, offline_client, probe};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

fn manager(grace: Duration) -> Manager {
    let mut config = config("test-manager");
    config.shutdown_grace_period = grace;
    Manager::with_client(offline_client(), config).unwrap()
}

#[tokio::test(start_paused = true)]
async fn waits_for_runnables_caches_before_starting_them_and_reports_readiness() {
    let mut manager = manager(Duration::from_secs(30));
    let synced = Arc::new(AtomicBool::new(false));
    let (runnable, trace) = probe("controller", Duration::ZERO);
    let flag = synced.clone();
    let gated = FnRunnable::new("gated", |stop: CancellationToken| async move {
        stop.cancelled().await;
        Ok::<_, std::io::Error>(())
    })
    .with_synced(move || flag.load(Ordering::SeqCst));
    manager.add(runnable).add(gated);
    let status = manager.status();
    assert_eq!(status.readiness(), Readiness::NotSynced);

    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(status.readiness(), Readiness::NotSynced);
    assert!(!trace.started(), "nothing runs before every cache synced");
    assert!(!status.is_leader());

    synced.store(true, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(status.readiness(), Readiness::Ready);
    assert!(trace.started());
    assert!(
        status.is_leader(),
        "without leader election every runnable runs"
    );

    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert_eq!(status.readiness(), Readiness::ShuttingDown);
}

#[tokio::test(start_paused = true)]
async fn shutdown_drains_in_flight_work_then_returns_ok() {
    let mut manager = manager(Duration::from_secs(30));
    let (slow, slow_trace) = probe("slow", Duration::from_secs(20));
    let (quick, quick_trace) = probe("quick", Duration::ZERO);
    manager.add(slow).add(quick);
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(slow_trace.started() && quick_trace.started());

    let asked = Instant::now();
    shutdown.cancel();
    tokio::time::sleep(Duration::from_secs(10)).await;
    // Mid-drain: not ready, the slow one still finishing its work.
    assert_eq!(status.readiness(), Readiness::ShuttingDown);
    assert!(quick_trace.finished());
    assert!(slow_trace.cancelled() && !slow_trace.finished());

    running.await.unwrap().unwrap();
    assert!(slow_trace.finished(), "in-flight work completed");
    assert!(asked.elapsed() >= Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn work_still_running_after_the_grace_period_is_aborted_and_the_manager_fails() {
    let mut manager = manager(Duration::from_secs(10));
    let (stuck, stuck_trace) = probe("stuck", Duration::from_secs(3600));
    let (quick, _) = probe("quick", Duration::ZERO);
    manager.add(stuck).add(quick);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;

    let asked = Instant::now();
    shutdown.cancel();
    let err = running.await.unwrap().unwrap_err();
    assert_eq!(asked.elapsed(), Duration::from_secs(10));
    match &err {
        ManagerError::ShutdownTimeout {
            grace_period,
            pending,
        } => {
            assert_eq!(*grace_period, Duration::from_secs(10));
            assert_eq!(pending, &["stuck".to_string()]);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("failed waiting for all runnables to end within the grace period of 10s"),
        "{err}"
    );
    assert!(stuck_trace.dropped() && !stuck_trace.finished(), "aborted");
    assert_eq!(exit_code("test", Err(err)), std::process::ExitCode::FAILURE);
}

#[tokio::test(start_paused = true)]
async fn a_failing_runnable_stops_the_others_gracefully_and_keeps_its_error() {
    let mut manager = manager(Duration::from_secs(30));
    let (other, other_trace) = probe("other", Duration::from_secs(2));
    manager.add(other).add(FnRunnable::new(
        "broken",
        |_stop: CancellationToken| async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            Err::<(), _>(std::io::Error::other("disk on fire"))
        },
    ));
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    let ManagerError::Runnable { name, source } = &err else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(name, "broken");
    let io = source.downcast_ref::<std::io::Error>().unwrap();
    assert_eq!(io.to_string(), "disk on fire");
    assert!(other_trace.finished(), "the others drained");
}

#[tokio::test(start_paused = true)]
async fn a_panicking_runnable_is_an_error_naming_it() {
    let mut manager = manager(Duration::from_secs(30));
    manager.add(FnRunnable::new(
        "crashy",
        |_stop: CancellationToken| async move {
            if true {
                panic!("boom");
            }
            Ok::<_, std::io::Error>(())
        },
    ));
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    let ManagerError::RunnablePanicked { name, source } = &err else {
        panic!("unexpected {err:?}");
    };
    assert_eq!(name, "crashy");
    assert!(source.is_panic());
}

#[tokio::test(start_paused = true)]
async fn a_runnable_that_finishes_early_leaves_the_others_running() {
    let mut manager = manager(Duration::from_secs(30));
    let (long, long_trace) = probe("long", Duration::ZERO);
    manager.add(long).add(FnRunnable::new(
        "one-shot",
        |_stop: CancellationToken| async move { Ok::<_, std::io::Error>(()) },
    ));
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!running.is_finished());
    assert!(!long_trace.cancelled());
    assert!(status.is_ready());
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_before_the_caches_sync_starts_nothing() {
    let mut manager = manager(Duration::from_secs(30));
    let (never, never_trace) = probe("never", Duration::ZERO);
    manager.add(
        FnRunnable::new("cold", |_stop: CancellationToken| async move {
            Ok::<_, std::io::Error>(())
        })
        .with_synced(|| false),
    );
    manager.add(never);
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(!never_trace.started());
}

#[tokio::test(start_paused = true)]
async fn duplicate_runnable_names_are_a_configuration_error() {
    let mut manager = manager(Duration::from_secs(30));
    let (a, _) = probe("twin", Duration::ZERO);
    let (b, _) = probe("twin", Duration::ZERO);
    manager.add(a).add(b);
    let status = manager.status();
    let err = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(
        &err,
        ManagerError::Config(ConfigError::DuplicateRunnable(name)) if name == "twin"
    ));
    assert_eq!(status.endpoints().await, None);
    assert_eq!(exit_code("test", Err(err)), std::process::ExitCode::from(2));
    assert_eq!(exit_code("test", Ok(())), std::process::ExitCode::SUCCESS);
}

#[tokio::test]
async fn an_invalid_config_is_refused_before_connecting() {
    let mut config = config("test");
    config.namespace = Some(String::new());
    let err = Manager::with_client(offline_client(), config).unwrap_err();
    assert!(err.is_config(), "{err:?}");
}
