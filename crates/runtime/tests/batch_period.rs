//! `ControllerBuilder::batch_period`: the first event of a quiet owner is
//! reconciled at once, events close behind it share one reconcile at the
//! end of the period, and a change made while a reconcile runs is always
//! reconciled after it. Paused tokio time drives it.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctrlkit_informer::{Informer, ObjectKey};
use ctrlkit_runtime::{Action, Controller};
use kube::runtime::watcher::Event;
use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const PERIOD: Duration = Duration::from_secs(1);
/// Slack for the queue's timer; far below the period.
const SLACK: Duration = Duration::from_millis(20);

/// Each reconcile: the replicas it saw and when it started, after `start`.
struct Seen {
    start: Instant,
    calls: Mutex<Vec<(Option<i32>, Duration)>>,
    /// How long each reconcile takes.
    work: Duration,
}

impl Seen {
    fn new(work: Duration) -> Arc<Self> {
        Arc::new(Self {
            start: Instant::now(),
            calls: Mutex::new(Vec::new()),
            work,
        })
    }

    fn take(&self) -> Vec<(Option<i32>, Duration)> {
        std::mem::take(&mut *self.calls.lock())
    }
}

async fn record(_key: ObjectKey, app: Option<Arc<App>>, seen: Arc<Seen>) -> Result<Action, String> {
    seen.calls
        .lock()
        .push((app.map(|a| a.spec.replicas), seen.start.elapsed()));
    tokio::time::sleep(seen.work).await;
    Ok(Action::done())
}

fn app(replicas: i32, rv: u32) -> App {
    let mut a: App = object("ns", "a", "uid-a", &rv.to_string());
    a.spec.replicas = replicas;
    a
}

/// A running controller over one owner `ns/a` (listed with 1 replica at
/// time zero) with a one-second batch period.
fn start(work: Duration) -> (Informer<App>, Arc<Seen>, CancellationToken) {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .batch_period(PERIOD)
        .build()
        .unwrap();
    let seen = Seen::new(work);
    let stop = CancellationToken::new();
    tokio::spawn(controller.run(record, seen.clone(), stop.clone().cancelled_owned()));
    list(&apps, vec![app(1, 1)]);
    (apps, seen, stop)
}

fn assert_near(at: Duration, expected: Duration) {
    assert!(
        at >= expected && at <= expected + SLACK,
        "reconciled at {at:?}, expected {expected:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn events_close_together_share_one_reconcile_and_a_quiet_owner_reacts_at_once() {
    let (apps, seen, stop) = start(Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let first = seen.take();
    assert_eq!(first.len(), 1, "the listed owner: {first:?}");
    assert_eq!(first[0].0, Some(1));
    assert_near(first[0].1, Duration::ZERO);

    // Three changes within the period: none now, one at its end with the
    // last state.
    for (replicas, rv) in [(2, 2), (3, 3), (4, 4)] {
        apps.apply_event(Event::Apply(app(replicas, rv)));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(seen.take().is_empty(), "nothing before the period ends");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let batched = seen.take();
    assert_eq!(batched.len(), 1, "{batched:?}");
    assert_eq!(batched[0].0, Some(4));
    assert_near(batched[0].1, PERIOD);

    // A change soon after the batched reconcile waits for the next period.
    tokio::time::sleep(Duration::from_millis(100)).await;
    apps.apply_event(Event::Apply(app(5, 5)));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let next = seen.take();
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(next[0].0, Some(5));
    assert_near(next[0].1, 2 * PERIOD);

    // Quiet for longer than the period: the next change is not delayed.
    tokio::time::sleep(PERIOD).await;
    let t = seen.start.elapsed();
    apps.apply_event(Event::Apply(app(6, 6)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let quiet = seen.take();
    assert_eq!(quiet.len(), 1, "{quiet:?}");
    assert_eq!(quiet[0].0, Some(6));
    assert_near(quiet[0].1, t);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn a_change_during_a_reconcile_is_reconciled_after_it() {
    // Each reconcile takes 1.5 periods.
    let work = PERIOD + PERIOD / 2;
    let (apps, seen, stop) = start(work);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Within the first period, while the first reconcile runs: deferred to
    // the period's end, when the key is still being reconciled, so it is
    // reconciled once more when that reconcile ends.
    apps.apply_event(Event::Apply(app(2, 2)));
    tokio::time::sleep(work).await;
    let calls = seen.take();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].0, Some(1));
    assert_eq!(calls[1].0, Some(2), "the change is seen");
    assert_near(calls[1].1, work);

    // During the second reconcile, more than a period after the last slot
    // began: queued at once, so marked for a reconcile after this one.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    apps.apply_event(Event::Apply(app(3, 3)));
    tokio::time::sleep(work).await;
    let calls = seen.take();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].0, Some(3), "the change is seen");
    assert_near(calls[0].1, 2 * work);
    stop.cancel();
}

#[tokio::test(start_paused = true)]
async fn without_a_batch_period_every_event_is_queued_at_once() {
    let apps = Informer::<App>::manual().build();
    let controller = Controller::builder_with(apps.clone()).build().unwrap();
    let seen = Seen::new(Duration::ZERO);
    let stop = CancellationToken::new();
    tokio::spawn(controller.run(record, seen.clone(), stop.clone().cancelled_owned()));
    list(&apps, vec![app(1, 1)]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    apps.apply_event(Event::Apply(app(2, 2)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let calls = seen.take();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_near(calls[1].1, Duration::from_millis(100));
    stop.cancel();
}
