#![allow(clippy::unwrap_used)]
//! Identity tracking: deletions by pod key (upstream's UID tracking) and
//! creations by object identity (beyond upstream), with lost-object reports.

use std::time::Duration;

use ctrlkit_expectations::{ControllerExpectations, ExpectationStats, MAX_UNMATCHED_OBSERVATIONS};
use tokio::time::advance;

const RS: &str = "default/web";

fn counts(exp: &ControllerExpectations, key: &str) -> (i64, i64) {
    let e = exp.get_expectations(key).unwrap();
    (e.add, e.del)
}

// ---------- deletions ----------

#[test]
fn terminating_then_deleted_pod_counts_once() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(RS, ["default/a", "default/b"]);
    exp.deletion_observed(RS, "default/a"); // update with a deletion timestamp
    exp.deletion_observed(RS, "default/a"); // the delete event
    assert_eq!(counts(&exp, RS), (0, 1));
    assert_eq!(exp.pending_deletions(RS), ["default/b"]);
    assert!(!exp.satisfied(RS));
}

#[test]
fn deletions_of_unexpected_pods_are_ignored() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(RS, ["default/a"]);
    exp.deletion_observed(RS, "default/not-ours");
    exp.deletion_observed(RS, "other/a");
    exp.deletion_observed("default/other-rs", "default/a");
    assert_eq!(counts(&exp, RS), (0, 1));
    exp.deletion_observed(RS, "default/a");
    assert!(exp.satisfied(RS));
}

#[test]
fn duplicate_pod_keys_collapse() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(
        RS,
        vec![
            "default/a".to_string(),
            "default/a".into(),
            "default/b".into(),
        ],
    );
    assert_eq!(counts(&exp, RS), (0, 2));
    exp.expect_deletions(RS, Vec::<String>::new());
    assert_eq!(counts(&exp, RS), (0, 0));
    assert!(exp.satisfied(RS));
}

#[test]
fn count_only_deletions_are_not_lowered_by_deletion_observed() {
    // As upstream's UID-tracking expectations: without pod keys there is
    // nothing to match, so count-only deletions are lowered with `lower`.
    let exp = ControllerExpectations::new();
    exp.set_expectations(RS, 0, 1);
    exp.deletion_observed(RS, "default/a");
    assert_eq!(counts(&exp, RS), (0, 1));
    exp.lower(RS, 0, 1);
    assert!(exp.satisfied(RS));
}

#[test]
fn a_new_scale_down_replaces_the_pending_keys() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(RS, ["default/a", "default/b"]);
    exp.expect_deletions(RS, ["default/c"]);
    assert_eq!(exp.pending_deletions(RS), ["default/c"]);
    exp.deletion_observed(RS, "default/a");
    assert_eq!(counts(&exp, RS), (0, 1));
}

/// Deliberate difference from upstream: upstream's ExpectCreations keeps the
/// old deletion keys, so a late delete event for one of them drives `del` to
/// -1. Here any new expectation replaces the keys and the event is ignored.
#[test]
fn expect_creations_drops_old_deletion_keys() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(RS, ["default/a", "default/b"]);
    exp.deletion_observed(RS, "default/a");
    exp.expect_creations(RS, 1);
    assert!(exp.pending_deletions(RS).is_empty());
    exp.deletion_observed(RS, "default/b");
    assert_eq!(counts(&exp, RS), (1, 0), "upstream would give (1, -1)");

    exp.expect_deletions(RS, ["default/c"]);
    exp.set_expectations(RS, 0, 1);
    exp.deletion_observed(RS, "default/c");
    assert_eq!(counts(&exp, RS), (0, 1));
}

#[test]
fn a_failed_delete_is_lowered_with_its_pod_key() {
    let exp = ControllerExpectations::new();
    exp.expect_deletions(RS, ["default/a", "default/b"]);
    // The delete call for b failed: the informer will never report it.
    exp.deletion_observed(RS, "default/b");
    exp.deletion_observed(RS, "default/a");
    assert!(exp.satisfied(RS));
}

// ---------- creations ----------

#[test]
fn counted_creations_accept_any_observation() {
    let exp = ControllerExpectations::new();
    exp.expect_creations(RS, 2);
    assert!(!exp.get_expectations(RS).unwrap().tracks_creations);
    exp.creation_observed_id(RS, "uid-anyone");
    exp.creation_observed_id(RS, "uid-anyone"); // counted twice, as upstream
    assert_eq!(counts(&exp, RS), (0, 0));
    exp.record_creation(RS, "uid-1"); // ignored in counted mode
    exp.creation_observed_id(RS, "uid-1");
    assert_eq!(counts(&exp, RS), (-1, 0));
    assert!(exp.pending_creations(RS).is_empty());
}

#[test]
fn tracked_creations_only_count_what_we_recorded() {
    let exp = ControllerExpectations::new();
    exp.expect_tracked_creations(RS, 2);
    assert!(exp.get_expectations(RS).unwrap().tracks_creations);
    exp.record_creation(RS, "uid-1");
    exp.record_creation(RS, "uid-2");
    assert_eq!(exp.pending_creations(RS), ["uid-1", "uid-2"]);

    exp.creation_observed_id(RS, "uid-someone-else");
    assert_eq!(
        counts(&exp, RS),
        (2, 0),
        "a foreign creation does not count"
    );
    exp.creation_observed_id(RS, "uid-1");
    exp.creation_observed_id(RS, "uid-1"); // duplicate event
    assert_eq!(counts(&exp, RS), (1, 0));
    assert!(!exp.satisfied(RS));
    exp.creation_observed_id(RS, "uid-2");
    assert!(exp.satisfied(RS));
    assert!(exp.pending_creations(RS).is_empty());
}

#[test]
fn observation_before_the_create_returns_counts_when_recorded() {
    let exp = ControllerExpectations::new();
    exp.expect_tracked_creations(RS, 1);
    exp.creation_observed_id(RS, "uid-1");
    assert_eq!(counts(&exp, RS), (1, 0));
    exp.record_creation(RS, "uid-1");
    assert_eq!(counts(&exp, RS), (0, 0));
    exp.record_creation(RS, "uid-1"); // recorded twice: still once
    exp.creation_observed_id(RS, "uid-1");
    assert_eq!(counts(&exp, RS), (0, 0));
    assert!(exp.satisfied(RS));
}

#[test]
fn failed_creates_are_lowered_by_hand_in_both_modes() {
    let exp = ControllerExpectations::new();
    exp.expect_tracked_creations(RS, 3);
    exp.record_creation(RS, "uid-1");
    // Creates 2 and 3 failed or were skipped by slow start.
    exp.creation_observed(RS);
    exp.lower(RS, 1, 0);
    assert!(!exp.satisfied(RS));
    exp.creation_observed_id(RS, "uid-1");
    assert!(exp.satisfied(RS));

    exp.expect_creations(RS, 2);
    exp.creation_observed(RS); // failed create
    exp.creation_observed_id(RS, "uid-9");
    assert!(exp.satisfied(RS));
}

#[test]
fn unmatched_observations_are_bounded() {
    let exp = ControllerExpectations::new();
    exp.expect_tracked_creations(RS, 1);
    for i in 0..MAX_UNMATCHED_OBSERVATIONS + 10 {
        exp.creation_observed_id(RS, &format!("foreign-{i}"));
    }
    // Past the bound an observation is forgotten, so its later record does
    // not count: that creation will be reported as lost on expiry.
    exp.record_creation(RS, &format!("foreign-{}", MAX_UNMATCHED_OBSERVATIONS + 5));
    assert_eq!(counts(&exp, RS), (1, 0));
    // Within the bound it does count.
    exp.record_creation(RS, "foreign-0");
    assert_eq!(counts(&exp, RS), (0, 0));
}

// ---------- expiry reports ----------

#[tokio::test(start_paused = true)]
async fn a_recorded_creation_never_observed_is_reported_lost_once() {
    let exp = ControllerExpectations::with_ttl(Duration::from_secs(60));
    exp.expect_tracked_creations(RS, 3);
    exp.record_creation(RS, "uid-1");
    exp.record_creation(RS, "uid-2");
    exp.record_creation(RS, "uid-3");
    exp.creation_observed_id(RS, "uid-2");
    assert_eq!(exp.stats(), ExpectationStats::default());

    advance(Duration::from_secs(61)).await;
    assert!(exp.satisfied(RS));
    assert_eq!(exp.lost_creations(), 2);
    assert!(exp.satisfied(RS));
    let stats = exp.stats();
    assert_eq!(
        (stats.expired, stats.lost_creations, stats.lost_deletions),
        (1, 2, 0)
    );

    // A late event still lowers the (expired) record but changes no stats.
    exp.creation_observed_id(RS, "uid-1");
    assert_eq!(counts(&exp, RS), (1, 0));
    assert_eq!(exp.lost_creations(), 2);
}

#[tokio::test(start_paused = true)]
async fn expiry_is_reported_when_new_expectations_replace_an_expired_record() {
    let exp = ControllerExpectations::with_ttl(Duration::from_secs(60));
    exp.expect_tracked_creations(RS, 1);
    exp.record_creation(RS, "uid-1");
    advance(Duration::from_secs(61)).await;
    // No satisfied() call in between: the replacement notices the expiry.
    exp.expect_deletions(RS, ["default/a", "default/b"]);
    assert_eq!(exp.lost_creations(), 1);
    advance(Duration::from_secs(61)).await;
    exp.deletion_observed(RS, "default/a");
    exp.expect_creations(RS, 1);
    let stats = exp.stats();
    assert_eq!(
        (stats.expired, stats.lost_creations, stats.lost_deletions),
        (2, 1, 1)
    );
}

#[tokio::test(start_paused = true)]
async fn fulfilled_or_unexpired_or_deleted_records_are_not_reported() {
    let exp = ControllerExpectations::with_ttl(Duration::from_secs(60));
    // Fulfilled, then expired.
    exp.expect_tracked_creations("ns/fulfilled", 1);
    exp.record_creation("ns/fulfilled", "u");
    exp.creation_observed_id("ns/fulfilled", "u");
    // Replaced before expiry.
    exp.expect_tracked_creations("ns/replaced", 1);
    exp.record_creation("ns/replaced", "u");
    exp.expect_creations("ns/replaced", 0);
    // Deleted with a creation outstanding.
    exp.expect_tracked_creations("ns/deleted", 1);
    exp.record_creation("ns/deleted", "u");
    exp.delete_expectations("ns/deleted");

    advance(Duration::from_secs(61)).await;
    for key in ["ns/fulfilled", "ns/replaced", "ns/deleted"] {
        assert!(exp.satisfied(key));
    }
    assert_eq!(exp.stats(), ExpectationStats::default());
}

#[tokio::test(start_paused = true)]
async fn count_only_expiry_is_counted_without_lost_objects() {
    let exp = ControllerExpectations::with_ttl(Duration::from_secs(60));
    exp.expect_creations(RS, 2);
    advance(Duration::from_secs(61)).await;
    assert!(exp.satisfied(RS));
    let stats = exp.stats();
    assert_eq!(
        (stats.expired, stats.lost_creations, stats.lost_deletions),
        (1, 0, 0)
    );
}
