//! The run loop: periodic resync on tokio time, cache sync, cancellation,
//! resourceVersion tracking.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_informer::{Informer, InformerError};
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

type Feed = mpsc::UnboundedSender<Result<Event<Pod>, watcher::Error>>;

/// An informer whose handler forwards what it sees to a channel, running on
/// a hand-fed event stream in a spawned task.
fn running(
    resync: Option<Duration>,
) -> (
    Informer<Pod>,
    Feed,
    UnboundedReceiver<Seen>,
    CancellationToken,
) {
    let (rec, seen_rx) = Recorder::forwarding();
    let inf = Informer::<Pod>::manual()
        .resync(resync)
        .handler(rec)
        .build();
    let (feed, events) = mpsc::unbounded();
    let cancel = CancellationToken::new();
    let (runner, token) = (inf.clone(), cancel.clone());
    tokio::spawn(async move { runner.run_stream(events, token).await.unwrap() });
    (inf, feed, seen_rx, cancel)
}

fn send_list(feed: &Feed, pods: Vec<Pod>) {
    feed.unbounded_send(Ok(Event::Init)).unwrap();
    for p in pods {
        feed.unbounded_send(Ok(Event::InitApply(p))).unwrap();
    }
    feed.unbounded_send(Ok(Event::InitDone)).unwrap();
}

async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn resync_delivers_same_object_updates_every_period() {
    let period = Duration::from_secs(30);
    let (_inf, feed, mut seen, _cancel) = running(Some(period));
    send_list(&feed, vec![pod("ns", "a", "ua", "1")]);
    assert_eq!(seen.recv().await.unwrap(), add("a", "1", true));

    tokio::time::advance(period - Duration::from_millis(1)).await;
    settle().await;
    assert!(seen.try_recv().is_err(), "resync before the period elapsed");

    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(seen.recv().await.unwrap(), resync("a", "1"));

    // Changes between resyncs are ordinary updates; the next resync
    // re-announces the current state.
    feed.unbounded_send(Ok(Event::Apply(pod("ns", "a", "ua", "2"))))
        .unwrap();
    assert_eq!(seen.recv().await.unwrap(), update("a", "1", "2"));
    tokio::time::advance(period).await;
    assert_eq!(seen.recv().await.unwrap(), resync("a", "2"));
}

#[tokio::test(start_paused = true)]
async fn no_resync_before_the_first_list_or_when_disabled() {
    let (_inf, feed, mut seen, _cancel) = running(Some(Duration::from_secs(10)));
    tokio::time::advance(Duration::from_secs(25)).await;
    settle().await;
    assert!(seen.try_recv().is_err());
    send_list(&feed, vec![pod("ns", "a", "ua", "1")]);
    assert_eq!(seen.recv().await.unwrap(), add("a", "1", true));

    let (_inf, feed, mut seen, _cancel) = running(None);
    send_list(&feed, vec![pod("ns", "a", "ua", "1")]);
    assert_eq!(seen.recv().await.unwrap(), add("a", "1", true));
    tokio::time::advance(Duration::from_secs(24 * 3600)).await;
    settle().await;
    assert!(seen.try_recv().is_err());
}

#[tokio::test(start_paused = true)]
async fn wait_for_cache_sync_resolves_after_the_first_list_and_is_cancel_safe() {
    let (inf, feed, mut seen, _cancel) = running(None);
    // A wait abandoned half-way leaves nothing behind.
    let abandoned = tokio::time::timeout(Duration::from_secs(1), inf.wait_for_cache_sync()).await;
    assert!(abandoned.is_err());
    assert!(!inf.has_synced());

    let waiter = tokio::spawn({
        let inf = inf.clone();
        async move { inf.wait_for_cache_sync().await }
    });
    feed.unbounded_send(Ok(Event::Init)).unwrap();
    feed.unbounded_send(Ok(Event::InitApply(pod("ns", "a", "ua", "1"))))
        .unwrap();
    settle().await;
    assert!(!waiter.is_finished());
    feed.unbounded_send(Ok(Event::InitDone)).unwrap();
    waiter.await.unwrap().unwrap();
    assert!(inf.has_synced());
    // The handlers ran before the informer reported itself synced.
    assert_eq!(seen.try_recv().unwrap(), add("a", "1", true));
    // Already synced: returns at once.
    inf.wait_for_cache_sync().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn stopping_before_the_first_list_fails_cache_sync_waiters() {
    let (inf, _feed, _seen, cancel) = running(None);
    let waiter = tokio::spawn({
        let inf = inf.clone();
        async move { inf.wait_for_cache_sync().await }
    });
    settle().await;
    cancel.cancel();
    assert_eq!(waiter.await.unwrap(), Err(InformerError::StoppedBeforeSync));
    assert!(!inf.has_synced());
}

#[tokio::test(start_paused = true)]
async fn watch_errors_are_skipped_and_cancellation_stops_the_loop() {
    let inf = Informer::<Pod>::manual().build();
    let (feed, events) = mpsc::unbounded();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let (inf, cancel) = (inf.clone(), cancel.clone());
        async move { inf.run_stream(events, cancel).await }
    });
    feed.unbounded_send(Err(watcher::Error::NoResourceVersion))
        .unwrap();
    send_list(&feed, vec![pod("ns", "a", "ua", "1")]);
    inf.wait_for_cache_sync().await.unwrap();
    cancel.cancel();
    task.await.unwrap().unwrap();
    // Events after cancellation are not applied.
    let _ = feed.unbounded_send(Ok(Event::Apply(pod("ns", "b", "ub", "2"))));
    settle().await;
    assert_eq!(inf.store().len(), 1);
    // One informer, one watch.
    let (_f, events) = mpsc::unbounded::<Result<Event<Pod>, watcher::Error>>();
    assert_eq!(
        inf.run_stream(events, CancellationToken::new()).await,
        Err(InformerError::AlreadyStarted)
    );
}

#[tokio::test]
async fn a_manual_informer_has_nothing_to_watch() {
    let inf = Informer::<Pod>::manual().build();
    assert_eq!(
        inf.start(CancellationToken::new()).unwrap_err(),
        InformerError::NoSource
    );
    assert_eq!(
        inf.run(CancellationToken::new()).await,
        Err(InformerError::NoSource)
    );
    assert!(!inf.is_started());
}

#[test]
fn resource_version_tracks_what_the_store_reflects() {
    let inf = Informer::<Pod>::manual().build();
    let store = inf.store();
    assert_eq!(inf.last_sync_resource_version(), None);
    assert_eq!(store.has_observed_resource_version("1"), Ok(false));

    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "a", "ua", "5")));
    inf.apply_event(Event::InitApply(pod("ns", "b", "ub", "3")));
    // A list in progress is not reflected yet.
    assert_eq!(inf.last_sync_resource_version(), None);
    inf.apply_event(Event::InitDone);
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("5"));

    inf.apply_event(Event::Apply(pod("ns", "b", "ub", "12")));
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("12"));
    // Numeric, not lexical: "9" < "12".
    inf.apply_event(Event::Apply(pod("ns", "c", "uc", "9")));
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("12"));
    inf.apply_event(Event::Delete(pod("ns", "a", "ua", "20")));
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("20"));

    // A relist of older objects does not move it backwards.
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "b", "ub", "12")));
    inf.apply_event(Event::InitDone);
    assert_eq!(inf.last_sync_resource_version().as_deref(), Some("20"));

    assert_eq!(store.has_observed_resource_version("20"), Ok(true));
    assert_eq!(store.has_observed_resource_version("19"), Ok(true));
    assert_eq!(store.has_observed_resource_version("21"), Ok(false));
    assert!(store.has_observed_resource_version("not-a-number").is_err());
}
