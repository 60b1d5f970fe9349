#![allow(clippy::unwrap_used)]
//! The upstream scenarios (controller_utils_test.go) and counter semantics,
//! restated for ctrlkit, plus the quirks worth pinning.

use std::sync::Arc;
use std::time::Duration;

use ctrlkit_expectations::{ControllerExpectations, DEFAULT_EXPECTATIONS_TTL};
use tokio::time::advance;

const RC: &str = "default/foobar";

fn counts(exp: &ControllerExpectations, key: &str) -> (i64, i64) {
    let e = exp.get_expectations(key).unwrap();
    (e.add, e.del)
}

/// Runs `f` `n` times on separate threads at once.
fn concurrently(n: usize, f: impl Fn() + Sync) {
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(&f);
        }
    });
}

/// Upstream TestControllerExpectations: counters, overshoot, reset, expiry.
#[tokio::test(start_paused = true)]
async fn counts_go_negative_reset_and_expire() {
    let ttl = Duration::from_secs(30);
    let exp = Arc::new(ControllerExpectations::with_ttl(ttl));
    exp.set_expectations(RC, 10, 30);

    // One creation more than expected; deletions still pending.
    concurrently(11, || exp.creation_observed(RC));
    assert!(!exp.satisfied(RC), "deletions are still expected");
    assert_eq!(counts(&exp, RC), (-1, 30));

    // Plain (count-only) deletions are observed by lowering.
    concurrently(31, || exp.lower(RC, 0, 1));
    assert_eq!(counts(&exp, RC), (-1, -1));
    assert!(exp.get_expectations(RC).unwrap().fulfilled());
    assert!(exp.satisfied(RC));

    // Setting again replaces the counters.
    exp.set_expectations(RC, 1, 2);
    assert_eq!(counts(&exp, RC), (1, 2));
    assert!(!exp.satisfied(RC));

    // Expiry is strictly after the TTL.
    advance(ttl).await;
    assert!(!exp.satisfied(RC), "exactly the TTL is not expired yet");
    advance(Duration::from_millis(1)).await;
    assert!(exp.satisfied(RC), "older than the TTL is satisfied");
    // The record itself stays, with its counters, until deleted.
    assert_eq!(counts(&exp, RC), (1, 2));
    assert_eq!(exp.stats().expired, 1);
}

/// Upstream TestUIDExpectations: several controllers, each waiting for the
/// deletion of its own pods, observed in shuffled order.
#[test]
fn deletions_tracked_by_pod_key_per_controller() {
    let exp = ControllerExpectations::new();
    let controllers: Vec<String> = (0..4).map(|i| format!("default/rc-{i}")).collect();
    let pods: Vec<Vec<String>> = (0..4)
        .map(|i| (0..5).map(|p| format!("default/pod{p}-rc-{i}")).collect())
        .collect();
    for (rc, keys) in controllers.iter().zip(&pods) {
        exp.expect_deletions(rc, keys.clone());
    }
    // Walk the controllers in a scrambled order, pods in reverse.
    for &i in &[2usize, 0, 3, 1] {
        let rc = &controllers[i];
        assert!(!exp.satisfied(rc));
        assert_eq!(exp.pending_deletions(rc).len(), 5);
        for pod in pods[i].iter().rev() {
            exp.deletion_observed(rc, pod);
        }
        assert!(exp.satisfied(rc));
        assert_eq!(counts(&exp, rc), (0, 0));
        exp.delete_expectations(rc);
        assert!(exp.pending_deletions(rc).is_empty());
        assert!(exp.get_expectations(rc).is_none());
    }
    assert!(exp.is_empty());
}

#[test]
fn absent_keys_are_satisfied_and_every_update_is_a_no_op() {
    let exp = ControllerExpectations::new();
    assert!(exp.satisfied("ns/never-set"));
    exp.lower("ns/never-set", 1, 1);
    exp.raise("ns/never-set", 1, 1);
    exp.creation_observed("ns/never-set");
    exp.creation_observed_id("ns/never-set", "uid");
    exp.record_creation("ns/never-set", "uid");
    exp.deletion_observed("ns/never-set", "ns/pod");
    exp.delete_expectations("ns/never-set");
    assert!(exp.get_expectations("ns/never-set").is_none());
    assert!(exp.is_empty());
    assert!(exp.satisfied("ns/never-set"));

    // Deleted keys are absent again.
    exp.expect_creations(RC, 2);
    assert!(!exp.satisfied(RC));
    exp.delete_expectations(RC);
    assert!(exp.satisfied(RC));
    exp.creation_observed(RC);
    assert!(
        exp.get_expectations(RC).is_none(),
        "observing does not recreate"
    );
}

#[test]
fn any_string_is_a_key() {
    let exp = ControllerExpectations::new();
    for key in ["", "no-namespace", "a/b/c", "ünïcødé/名前", "/"] {
        let pod = format!("{key}/pod");
        exp.expect_deletions(key, [pod.as_str(), ""]);
        assert_eq!(counts(&exp, key), (0, 2));
        exp.deletion_observed(key, "");
        exp.deletion_observed(key, &pod);
        assert!(exp.satisfied(key));
    }
    assert_eq!(exp.len(), 5);
}

#[test]
fn fulfilled_means_both_counters_at_or_below_zero() {
    let exp = ControllerExpectations::new();
    exp.set_expectations(RC, 0, 0);
    assert!(exp.satisfied(RC), "zero expectations are fulfilled");
    exp.set_expectations(RC, 1, 0);
    assert!(!exp.satisfied(RC));
    exp.set_expectations(RC, 0, 1);
    assert!(!exp.satisfied(RC));
    exp.set_expectations(RC, -3, 0);
    assert!(exp.satisfied(RC));
}

/// Quirk: expect_creations and expect_deletions each reset the other
/// counter and restart the TTL.
#[tokio::test(start_paused = true)]
async fn expect_calls_clobber_the_other_counter_and_restart_the_clock() {
    let exp = ControllerExpectations::new();
    exp.set_expectations(RC, 4, 4);
    exp.expect_creations(RC, 2);
    assert_eq!(counts(&exp, RC), (2, 0));
    exp.expect_deletions(RC, ["default/a", "default/b", "default/c"]);
    assert_eq!(counts(&exp, RC), (0, 3));

    advance(Duration::from_secs(4 * 60)).await;
    exp.expect_creations(RC, 1);
    advance(Duration::from_secs(2 * 60)).await;
    // 6 minutes since the first set, 2 since the last: not expired.
    assert!(!exp.satisfied(RC));
    advance(Duration::from_secs(3 * 60) + Duration::from_millis(1)).await;
    assert!(exp.satisfied(RC));
}

/// raise and lower edit the counters but keep the TTL running.
#[tokio::test(start_paused = true)]
async fn raise_and_lower_do_not_restart_the_clock() {
    let exp = ControllerExpectations::new();
    exp.expect_creations(RC, 1);
    let set_at = exp.get_expectations(RC).unwrap().set_at;
    advance(Duration::from_secs(200)).await;
    exp.raise(RC, 2, 1);
    exp.lower(RC, 1, 0);
    assert_eq!(counts(&exp, RC), (2, 1));
    assert_eq!(exp.get_expectations(RC).unwrap().set_at, set_at);
    advance(DEFAULT_EXPECTATIONS_TTL - Duration::from_secs(200)).await;
    assert!(!exp.satisfied(RC));
    advance(Duration::from_millis(1)).await;
    assert!(exp.satisfied(RC));
}

#[tokio::test(start_paused = true)]
async fn default_ttl_is_five_minutes() {
    let exp = ControllerExpectations::default();
    assert_eq!(exp.ttl(), Duration::from_secs(300));
    exp.expect_creations(RC, 1);
    advance(Duration::from_secs(300)).await;
    assert!(!exp.satisfied(RC));
    advance(Duration::from_nanos(1)).await;
    assert!(exp.satisfied(RC));
}

/// Quirk: counters may go below zero and stay there; raising from below zero
/// can leave an expectation already fulfilled.
#[test]
fn counters_go_negative_and_stay_fulfilled() {
    let exp = ControllerExpectations::new();
    exp.expect_creations(RC, 1);
    exp.lower(RC, 3, 2);
    assert_eq!(counts(&exp, RC), (-2, -2));
    exp.raise(RC, 1, 2);
    assert_eq!(counts(&exp, RC), (-1, 0));
    assert!(exp.satisfied(RC));
    exp.raise(RC, 2, 0);
    assert!(!exp.satisfied(RC));
}

#[test]
fn extreme_counts_saturate_instead_of_panicking() {
    let exp = ControllerExpectations::new();
    exp.expect_creations(RC, usize::MAX);
    assert_eq!(counts(&exp, RC), (i64::MAX, 0));
    exp.raise(RC, i64::MAX, i64::MAX);
    assert_eq!(counts(&exp, RC), (i64::MAX, i64::MAX));
    exp.lower(RC, i64::MIN, 0);
    assert_eq!(counts(&exp, RC), (i64::MAX, i64::MAX));
    exp.set_expectations(RC, i64::MIN, 0);
    exp.lower(RC, i64::MAX, i64::MAX);
    assert_eq!(counts(&exp, RC), (i64::MIN, -i64::MAX));
    assert!(exp.satisfied(RC));
}
