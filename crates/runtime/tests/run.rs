//! `Controller::run`: what reconcile receives, how failures stay with their
//! key, read-own-writes, shutdown and metrics. Paused tokio time drives it.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctrlkit_consistency::GroupResource;
use ctrlkit_informer::{Informer, InformerError, ObjectKey};
use ctrlkit_runtime::{Action, Controller, ControllerMetrics, Owns, RunError, Stopped};
use ctrlkit_workqueue::rate_limiter::ItemExponentialFailureRateLimiter;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// What reconcile was called with, in order.
#[derive(Default)]
struct Seen(Mutex<Vec<(ObjectKey, Option<i32>)>>);

impl Seen {
    fn take(&self) -> Vec<(ObjectKey, Option<i32>)> {
        std::mem::take(&mut *self.0.lock())
    }
}

async fn record(key: ObjectKey, app: Option<Arc<App>>, seen: Arc<Seen>) -> Result<Action, String> {
    seen.0.lock().push((key, app.map(|a| a.spec.replicas)));
    Ok(Action::done())
}

fn app(name: &str, replicas: i32, rv: &str) -> App {
    let mut a: App = object("ns", name, &format!("uid-{name}"), rv);
    a.spec.replicas = replicas;
    a
}

async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

#[tokio::test(start_paused = true)]
async fn reconcile_gets_the_cached_owner_then_none_once_deleted() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone()).build().unwrap();
    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    let run = tokio::spawn(controller.run(record, seen.clone(), stop.clone().cancelled_owned()));

    list(&apps, vec![app("a", 1, "1")]);
    settle().await;
    assert_eq!(seen.take(), [(key("ns", "a"), Some(1))]);
    apps.apply_event(Event::Apply(app("a", 3, "2")));
    settle().await;
    assert_eq!(seen.take(), [(key("ns", "a"), Some(3))]);
    apps.apply_event(Event::Delete(app("a", 3, "3")));
    settle().await;
    assert_eq!(seen.take(), [(key("ns", "a"), None)], "cleanup gets a look");

    stop.cancel();
    assert_eq!(run.await.unwrap().unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn nothing_is_reconciled_before_every_cache_synced() {
    let apps = Informer::<App>::manual().build();
    let pods = Informer::<Pod>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .build()
        .unwrap();
    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    let run = tokio::spawn(controller.run(record, seen.clone(), stop.clone().cancelled_owned()));
    list(&apps, vec![app("a", 1, "1")]);
    settle().await;
    assert!(seen.take().is_empty(), "the pod cache is not synced yet");
    list(&pods, vec![]);
    settle().await;
    assert_eq!(seen.take().len(), 1);
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_before_the_caches_synced_returns_without_reconciling() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone()).build().unwrap();
    let queue = controller.queue().clone();
    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    stop.cancel();
    let stopped = controller
        .run(record, seen.clone(), stop.cancelled_owned())
        .await
        .unwrap();
    assert_eq!(stopped, Stopped::Drained);
    assert!(queue.is_shutting_down());
    assert!(seen.take().is_empty());
}

#[tokio::test(start_paused = true)]
async fn an_informer_that_stops_before_syncing_is_an_error() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone()).build().unwrap();
    // A source that ends before its first list.
    apps.run_stream(futures::stream::empty(), CancellationToken::new())
        .await
        .unwrap();
    let err = controller
        .run(
            record,
            Arc::new(Seen::default()),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
    assert_eq!(err, RunError::CacheSync(InformerError::StoppedBeforeSync));
}

#[tokio::test(start_paused = true)]
async fn panics_and_timeouts_are_errors_for_their_key_only() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .workers(2)
        .timeout(Duration::from_secs(1))
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(10),
            Duration::from_secs(10),
        ))
        .build()
        .unwrap();
    let calls = Arc::new(Mutex::new(Vec::<String>::new()));
    let reconcile = |key: ObjectKey, _app: Option<Arc<App>>, calls: Arc<Mutex<Vec<String>>>| async move {
        calls.lock().push(key.name.clone());
        match key.name.as_str() {
            "panics" => panic!("bug in reconcile"),
            "hangs" => std::future::pending::<()>().await,
            _ => {}
        }
        Ok::<_, String>(Action::done())
    };
    let stop = CancellationToken::new();
    let run =
        tokio::spawn(controller.run(reconcile, calls.clone(), stop.clone().cancelled_owned()));
    list(
        &apps,
        vec![
            app("panics", 1, "1"),
            app("hangs", 1, "2"),
            app("fine", 1, "3"),
        ],
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut first: Vec<String> = calls.lock().drain(..).collect();
    first.sort();
    assert_eq!(first, ["fine", "hangs", "panics"]);
    // Both failing keys come back after the 10 s backoff; "fine" does not.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let mut again: Vec<String> = calls.lock().drain(..).collect();
    again.sort();
    assert_eq!(again, ["hangs", "panics"]);
    stop.cancel();
    assert_eq!(run.await.unwrap().unwrap(), Stopped::Drained);
}

#[tokio::test(start_paused = true)]
async fn read_own_writes_holds_a_key_back_until_the_cache_shows_the_write() {
    let apps = Informer::<App>::manual().build();
    let pods = Informer::<Pod>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .read_own_writes(Duration::from_secs(30))
        .build()
        .unwrap();
    let consistency = controller.consistency().clone();
    assert!(consistency.is_enabled());
    list(&apps, vec![app("a", 1, "1")]);
    list(&pods, vec![]);
    // A previous reconcile of ns/a created a pod at resourceVersion 7.
    consistency.wrote_at("ns/a", &GroupResource::of::<Pod>(), "7");

    let seen = Arc::new(Seen::default());
    let stop = CancellationToken::new();
    let handle = controller.clone();
    let run = tokio::spawn(controller.run(record, seen.clone(), stop.clone().cancelled_owned()));
    settle().await;
    assert!(seen.take().is_empty(), "held back: the pod cache is behind");
    assert_eq!(handle.stale_reconcile_skips(), 1);

    // The watch delivers the pod: the key is reconciled.
    let owner = app("a", 1, "1");
    pods.apply_event(Event::Apply(owned_by(
        object("ns", "p", "up", "7"),
        controller_of(&owner),
    )));
    settle().await;
    assert_eq!(seen.take(), [(key("ns", "a"), Some(1))]);
    assert!(consistency.pending("ns/a").is_empty());
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn reconciles_are_counted_in_the_metrics_under_the_controller_name() {
    let mut registry = Registry::default();
    let metrics = ControllerMetrics::register(&mut registry);
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .name("app-controller")
        .metrics(&metrics)
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let run = tokio::spawn(controller.run(
        record,
        Arc::new(Seen::default()),
        stop.clone().cancelled_owned(),
    ));
    list(&apps, vec![app("a", 1, "1"), app("b", 1, "2")]);
    settle().await;
    stop.cancel();
    run.await.unwrap().unwrap();
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(
            r#"controller_runtime_reconcile_total{controller="app-controller",result="success"} 2"#
        ),
        "{text}"
    );
    assert!(
        text.contains(r#"workqueue_adds_total{name="app-controller"} 2"#),
        "{text}"
    );
}

#[tokio::test(start_paused = true)]
async fn max_retries_drops_a_key_that_keeps_failing() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .max_retries(2)
        .build()
        .unwrap();
    let calls = Arc::new(Mutex::new(0_usize));
    let reconcile = |_key: ObjectKey, _app: Option<Arc<App>>, calls: Arc<Mutex<usize>>| async move {
        *calls.lock() += 1;
        Err::<Action, _>("always failing".to_string())
    };
    let stop = CancellationToken::new();
    let run =
        tokio::spawn(controller.run(reconcile, calls.clone(), stop.clone().cancelled_owned()));
    list(&apps, vec![app("a", 1, "1")]);
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(*calls.lock(), 3, "the first attempt and two retries");
    stop.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn the_grace_period_bounds_the_drain_on_shutdown() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .grace_period(Duration::from_secs(5))
        .build()
        .unwrap();
    let started = Arc::new(tokio::sync::Notify::new());
    let reconcile = |_key: ObjectKey, _app: Option<Arc<App>>, started: Arc<tokio::sync::Notify>| async move {
        started.notify_one();
        std::future::pending::<()>().await;
        Ok::<_, String>(Action::done())
    };
    let stop = CancellationToken::new();
    let run =
        tokio::spawn(controller.run(reconcile, started.clone(), stop.clone().cancelled_owned()));
    list(&apps, vec![app("hangs", 1, "1")]);
    started.notified().await;
    stop.cancel();
    let begun = tokio::time::Instant::now();
    let stopped = run.await.unwrap().unwrap();
    assert_eq!(stopped, Stopped::GracePeriodElapsed { cancelled: 1 });
    let waited = begun.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "{waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn reconcile_once_checks_read_own_writes_then_reconciles_the_cached_owner() {
    let apps = Informer::<App>::manual().build();
    let pods = Informer::<Pod>::manual().build();
    let skipped = Arc::new(Mutex::new(Vec::new()));
    let sink = skipped.clone();
    let controller = Controller::builder_with(apps.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .read_own_writes(Duration::from_secs(30))
        .on_stale_skip(move |key, why| sink.lock().push((key.clone(), why.resource.clone())))
        .build()
        .unwrap();
    list(&apps, vec![app("a", 3, "1")]);
    list(&pods, vec![]);
    let seen = Arc::new(Seen::default());
    controller
        .consistency()
        .wrote_at("ns/a", &GroupResource::of::<Pod>(), "7");

    // Held back, and the hook learns which cache is behind.
    let action = controller
        .reconcile_once(key("ns", "a"), record, seen.clone())
        .await
        .unwrap();
    assert_eq!(
        action.requeue_delay(),
        Some(ctrlkit_runtime::STALE_RECONCILE_REQUEUE)
    );
    assert!(seen.take().is_empty());
    assert_eq!(
        *skipped.lock(),
        [(key("ns", "a"), GroupResource::of::<Pod>())]
    );
    assert_eq!(controller.stale_reconcile_skips(), 1);

    pods.apply_event(Event::Apply(owned_by(
        object("ns", "p", "up", "7"),
        controller_of(&app("a", 3, "1")),
    )));
    controller
        .reconcile_once(key("ns", "a"), record, seen.clone())
        .await
        .unwrap();
    controller
        .reconcile_once(key("ns", "gone"), record, seen.clone())
        .await
        .unwrap();
    assert_eq!(
        seen.take(),
        [(key("ns", "a"), Some(3)), (key("ns", "gone"), None)]
    );
    assert_eq!(skipped.lock().len(), 1);
}
