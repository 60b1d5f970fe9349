//! Indexes stay in step with the store across every kind of change.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctrlkit_informer::{
    BY_CONTROLLER_UID, BY_NAMESPACE, Informer, InformerError, Store, controller_index_key,
    index_by_controller_uid, index_by_namespace, orphan_index_key,
};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;

fn names(mut pods: Vec<Arc<Pod>>) -> Vec<String> {
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods.iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect()
}

fn by(store: &Store<Pod>, index: &str, key: &str) -> Vec<String> {
    names(store.by_index(index, key).unwrap())
}

fn indexed_informer() -> Informer<Pod> {
    Informer::<Pod>::manual()
        .index(BY_NAMESPACE, index_by_namespace)
        .index(BY_CONTROLLER_UID, index_by_controller_uid)
        .build()
}

#[test]
fn indexes_follow_adds_updates_deletes_and_moves_between_keys() {
    let inf = indexed_informer();
    let store = inf.store();
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(owned_pod("ns", "a", "ua", "1", "rs1")));
    inf.apply_event(Event::InitApply(pod("ns", "b", "ub", "2")));
    inf.apply_event(Event::InitApply(owned_pod("other", "c", "uc", "3", "rs1")));
    inf.apply_event(Event::InitDone);

    assert_eq!(by(&store, BY_NAMESPACE, "ns"), ["a", "b"]);
    assert_eq!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns", "rs1")
        ),
        ["a"]
    );
    assert_eq!(
        by(&store, BY_CONTROLLER_UID, &orphan_index_key("ns")),
        ["b"]
    );
    // The namespace is part of the controller key.
    assert_eq!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("other", "rs1")
        ),
        ["c"]
    );

    // b is adopted by rs1: it moves from the orphan key to rs1's key.
    inf.apply_event(Event::Apply(owned_pod("ns", "b", "ub", "4", "rs1")));
    assert_eq!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns", "rs1")
        ),
        ["a", "b"]
    );
    assert!(by(&store, BY_CONTROLLER_UID, &orphan_index_key("ns")).is_empty());

    // a is released: back to the orphans.
    inf.apply_event(Event::Apply(pod("ns", "a", "ua", "5")));
    assert_eq!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns", "rs1")
        ),
        ["b"]
    );
    assert_eq!(
        by(&store, BY_CONTROLLER_UID, &orphan_index_key("ns")),
        ["a"]
    );

    inf.apply_event(Event::Delete(owned_pod("ns", "b", "ub", "6", "rs1")));
    assert!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns", "rs1")
        )
        .is_empty()
    );
    assert_eq!(by(&store, BY_NAMESPACE, "ns"), ["a"]);
    // Empty keys are dropped, not left behind.
    let mut keys = store.index_keys(BY_CONTROLLER_UID).unwrap();
    keys.sort();
    let mut expected = vec![controller_index_key("other", "rs1"), orphan_index_key("ns")];
    expected.sort();
    assert_eq!(keys, expected);
}

#[test]
fn a_relist_keeps_indexes_in_step() {
    let inf = indexed_informer();
    let store = inf.store();
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(owned_pod("ns", "a", "ua", "1", "rs1")));
    inf.apply_event(Event::InitApply(pod("ns", "b", "ub", "2")));
    inf.apply_event(Event::InitDone);

    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "a", "ua", "7")));
    inf.apply_event(Event::InitApply(owned_pod("ns2", "c", "uc", "8", "rs2")));
    inf.apply_event(Event::InitDone);

    assert!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns", "rs1")
        )
        .is_empty()
    );
    assert_eq!(
        by(&store, BY_CONTROLLER_UID, &orphan_index_key("ns")),
        ["a"]
    );
    assert_eq!(
        by(
            &store,
            BY_CONTROLLER_UID,
            &controller_index_key("ns2", "rs2")
        ),
        ["c"]
    );
    assert_eq!(by(&store, BY_NAMESPACE, "ns"), ["a"]);
    assert_eq!(by(&store, BY_NAMESPACE, "ns2"), ["c"]);
}

#[test]
fn by_controller_returns_owned_objects_first_then_orphans() {
    let inf = indexed_informer();
    let store = inf.store();
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "orphan", "u0", "1")));
    inf.apply_event(Event::InitApply(owned_pod("ns", "mine", "u1", "2", "rs1")));
    inf.apply_event(Event::InitApply(owned_pod(
        "ns", "theirs", "u2", "3", "rs2",
    )));
    inf.apply_event(Event::InitApply(pod("elsewhere", "orphan2", "u3", "4")));
    inf.apply_event(Event::InitDone);

    let with_orphans = store.by_controller("ns", "rs1", true).unwrap();
    let got: Vec<_> = with_orphans
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(got, ["mine", "orphan"]);
    assert_eq!(
        names(store.by_controller("ns", "rs1", false).unwrap()),
        ["mine"]
    );
}

#[test]
fn unknown_indexes_are_errors_and_late_indexes_are_filled() {
    let inf = Informer::<Pod>::manual().build();
    inf.apply_event(Event::Apply(pod("ns", "a", "ua", "1")));
    let store = inf.store();
    assert_eq!(
        store.by_index("nope", "x").unwrap_err(),
        InformerError::UnknownIndex {
            name: "nope".into()
        }
    );
    assert!(store.by_controller("ns", "rs", true).is_err());

    inf.add_index(BY_NAMESPACE, index_by_namespace).unwrap();
    assert!(store.has_index(BY_NAMESPACE));
    assert_eq!(by(&store, BY_NAMESPACE, "ns"), ["a"]);
    assert_eq!(
        inf.add_index(BY_NAMESPACE, index_by_namespace).unwrap_err(),
        InformerError::IndexExists {
            name: BY_NAMESPACE.into()
        }
    );
    assert!(!inf.add_index_if_absent(BY_NAMESPACE, index_by_namespace));
    assert!(inf.add_index_if_absent(BY_CONTROLLER_UID, index_by_controller_uid));
    assert_eq!(
        by(&store, BY_CONTROLLER_UID, &orphan_index_key("ns")),
        ["a"]
    );
}

#[test]
fn a_panicking_index_function_leaves_the_object_out_of_that_index_only() {
    let inf = Informer::<Pod>::manual()
        .index("fragile", |p: &Pod| {
            if p.metadata.name.as_deref() == Some("bad") {
                panic!("index bug");
            }
            vec!["all".to_string()]
        })
        .build();
    inf.apply_event(Event::Apply(pod("ns", "bad", "u1", "1")));
    inf.apply_event(Event::Apply(pod("ns", "good", "u2", "2")));
    let store = inf.store();
    assert_eq!(store.len(), 2);
    assert_eq!(by(&store, "fragile", "all"), ["good"]);
}

#[test]
fn store_reads() {
    let inf = Informer::<Pod>::manual().build();
    inf.apply_event(Event::Apply(pod("ns", "a", "ua", "1")));
    inf.apply_event(Event::Apply(pod("ns", "b", "ub", "2")));
    inf.apply_event(Event::Apply(pod("other", "a", "uc", "3")));
    let store = inf.store();
    assert_eq!(store.len(), 3);
    assert_eq!(names(store.list_namespace("ns")), ["a", "b"]);
    assert!(store.list_namespace("missing").is_empty());
    assert_eq!(
        store.get("other", "a").unwrap().metadata.uid.as_deref(),
        Some("uc")
    );
    assert_eq!(
        store
            .get_by_key(&"ns/b".parse().unwrap())
            .unwrap()
            .metadata
            .uid
            .as_deref(),
        Some("ub")
    );
    inf.apply_event(Event::Delete(pod("other", "a", "uc", "4")));
    assert_eq!(store.len(), 2);
    assert_eq!(store.list().len(), 2);
}
