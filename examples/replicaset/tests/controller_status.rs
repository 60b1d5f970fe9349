//! `calculate_status` and the status-write short-circuit (upstream's
//! `TestCalculateStatus` and `TestCalculateStatusConditions`).
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::{PodSpec, edit, replica_set, replication_controller};
use ctrlkit_podcontrol::PodControlError;
use ctrlkit_replicaset::{
    Error, REPLICA_FAILURE, ReplicaCondition, ReplicaOwner, ReplicaStatus, calculate_status,
    status_unchanged,
};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

/// Selects `name=foo`; the template also carries `type=production`.
fn rs(replicas: i32, min_ready: i32) -> ReplicaSet {
    edit(&replica_set("foobar", replicas, "x"), |v| {
        v["spec"]["selector"] = json!({"matchLabels": {"name": "foo"}});
        v["spec"]["template"]["metadata"]["labels"] = json!({"name": "foo", "type": "production"});
        v["spec"]["minReadySeconds"] = json!(min_ready);
    })
}

fn pod(name: &str, labels: serde_json::Value, spec: PodSpec) -> Arc<Pod> {
    let mut spec = spec;
    spec.labels = labels;
    Arc::new(spec.build(name))
}

fn full() -> serde_json::Value {
    json!({"name": "foo", "type": "production"})
}

fn partial() -> serde_json::Value {
    json!({"name": "foo"})
}

fn counts(s: &ReplicaStatus) -> (i32, i32, i32, i32) {
    (
        s.replicas,
        s.fully_labeled_replicas,
        s.ready_replicas,
        s.available_replicas,
    )
}

#[test]
fn counts_replicas_fully_labelled_ready_and_available() {
    let running = || PodSpec::running("x");
    type Case = (
        &'static str,
        ReplicaSet,
        Vec<Arc<Pod>>,
        (i32, i32, i32, i32),
    );
    let cases: Vec<Case> = vec![
        (
            "1 fully labelled pod",
            rs(1, 0),
            vec![pod("a", full(), running())],
            (1, 1, 1, 1),
        ),
        (
            "1 not fully labelled pod",
            rs(1, 0),
            vec![pod("a", partial(), running())],
            (1, 0, 1, 1),
        ),
        (
            "2 fully labelled pods",
            rs(2, 0),
            vec![pod("a", full(), running()), pod("b", full(), running())],
            (2, 2, 2, 2),
        ),
        (
            "1 fully and 1 not fully labelled",
            rs(2, 0),
            vec![pod("a", partial(), running()), pod("b", full(), running())],
            (2, 1, 2, 2),
        ),
        (
            "1 non-ready pod",
            rs(1, 0),
            vec![pod("a", full(), running().pending())],
            (1, 1, 0, 0),
        ),
        (
            "1 ready but not yet available pod",
            rs(1, 3600),
            vec![pod("a", full(), running().ready_since(0))],
            (1, 1, 1, 0),
        ),
        (
            "ready exactly minReadySeconds ago counts as available",
            rs(1, 3600),
            vec![pod("a", full(), running().ready_since(3600))],
            (1, 1, 1, 1),
        ),
    ];
    // After the pods were built, so "exactly minReadySeconds ago" holds.
    let now = Timestamp::now();
    for (name, owner, pods, expected) in cases {
        let status = calculate_status(&owner, &pods, Some(0), None, now);
        assert_eq!(counts(&status), expected, "{name}");
        assert!(status.conditions.is_empty(), "{name}");
        assert_eq!(
            status.observed_generation, 0,
            "{name}: left to the status write"
        );
    }
}

#[test]
fn terminating_replicas_are_reported_only_for_replica_sets() {
    let now = Timestamp::now();
    let pods = vec![pod("a", full(), PodSpec::running("x"))];
    assert_eq!(
        calculate_status(&rs(1, 0), &pods, Some(2), None, now).terminating_replicas,
        Some(2)
    );
    assert_eq!(
        calculate_status(&rs(1, 0), &pods, Some(0), None, now).terminating_replicas,
        Some(0)
    );
    let rc = replication_controller("legacy", 1, "x");
    assert_eq!(
        calculate_status(&rc, &pods, Some(2), None, now).terminating_replicas,
        None
    );
}

fn manage_error() -> Error {
    Error::CreatePods(PodControlError::InvalidTemplate(
        "fake manageReplicasErr".into(),
    ))
}

fn failure_condition(reason: &str, message: &str) -> ReplicaCondition {
    ReplicaCondition {
        type_: REPLICA_FAILURE.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_transition_time: None,
    }
}

fn without_times(mut conditions: Vec<ReplicaCondition>) -> Vec<ReplicaCondition> {
    for c in &mut conditions {
        c.last_transition_time = None;
    }
    conditions
}

#[test]
fn the_replica_failure_condition_follows_the_manage_error() {
    let now = Timestamp::now();
    let err = manage_error();
    let msg = err.to_string();
    let one = vec![pod("a", full(), PodSpec::running("x"))];
    let three: Vec<_> = ["a", "b", "c"]
        .iter()
        .map(|n| pod(n, full(), PodSpec::running("x")))
        .collect();

    // Too few pods: FailedCreate with the error's message.
    let s = calculate_status(&rs(2, 0), &one, None, Some(&err), now);
    assert_eq!(
        without_times(s.conditions),
        [failure_condition("FailedCreate", &msg)]
    );
    // Too many: FailedDelete.
    let s = calculate_status(&rs(2, 0), &three, None, Some(&err), now);
    assert_eq!(
        without_times(s.conditions),
        [failure_condition("FailedDelete", &msg)]
    );
    // Neither (the count changed meanwhile): an empty reason.
    let s = calculate_status(&rs(1, 0), &one, None, Some(&err), now);
    assert_eq!(without_times(s.conditions), [failure_condition("", &msg)]);

    // An existing condition is removed once the error is gone ...
    let mut failing = rs(10, 0);
    let mut status = failing.replica_status();
    status.conditions = vec![ReplicaCondition {
        type_: REPLICA_FAILURE.into(),
        status: "True".into(),
        ..Default::default()
    }];
    failing.set_replica_status(status);
    let s = calculate_status(&failing, &one, None, None, now);
    assert!(s.conditions.is_empty());
    // ... and left exactly as it is while errors continue.
    let s = calculate_status(&failing, &one, None, Some(&err), now);
    assert_eq!(s.conditions, failing.replica_status().conditions);
    // No error and no condition: none.
    assert!(
        calculate_status(&rs(2, 0), &one, None, None, now)
            .conditions
            .is_empty()
    );
}

#[test]
fn the_status_write_is_skipped_only_when_everything_is_current() {
    let owner = edit(&rs(1, 0), |v| {
        v["metadata"]["generation"] = json!(3);
        v["status"] = json!({
            "replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1,
            "availableReplicas": 1, "observedGeneration": 3
        });
    });
    let current = owner.replica_status();
    assert!(status_unchanged(&owner, &current));

    let mut other = current.clone();
    other.ready_replicas = 0;
    assert!(!status_unchanged(&owner, &other));

    // nil and 0 terminating replicas differ.
    let mut other = current.clone();
    other.terminating_replicas = Some(0);
    assert!(!status_unchanged(&owner, &other));

    // A new generation must be observed even with equal counts.
    let newer = edit(&owner, |v| v["metadata"]["generation"] = json!(4));
    assert!(!status_unchanged(&newer, &current));
}

#[test]
fn status_round_trips_through_both_owner_types() {
    let status = ReplicaStatus {
        replicas: 3,
        fully_labeled_replicas: 2,
        ready_replicas: 1,
        available_replicas: 1,
        terminating_replicas: Some(4),
        observed_generation: 7,
        conditions: vec![failure_condition("FailedCreate", "quota")],
    };
    let mut owner = rs(3, 0);
    owner.set_replica_status(status.clone());
    assert_eq!(owner.replica_status(), status);

    let mut rc = replication_controller("legacy", 3, "x");
    rc.set_replica_status(status.clone());
    let back = rc.replica_status();
    assert_eq!(back.terminating_replicas, None);
    assert_eq!(back.conditions, status.conditions);
    assert_eq!(counts(&back), counts(&status));
}
