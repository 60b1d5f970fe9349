//! Indexes stay in step with the store across every kind of change.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctrlkit_informer::{
    BY_CONTROLLER_UID, BY_NAMESPACE, BY_ORPHAN_LABEL, Informer, InformerError, Store,
    controller_index_key, index_by_controller_uid, index_by_namespace, index_orphans_by_label,
    orphan_index_key, orphan_label_index_key,
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

/// The resourceVersions of the objects under `key`, sorted.
fn versions(store: &Store<Pod>, index: &str, key: &str) -> Vec<String> {
    let mut rvs: Vec<String> = store
        .by_index(index, key)
        .unwrap()
        .iter()
        .map(|p| p.metadata.resource_version.clone().unwrap())
        .collect();
    rvs.sort();
    rvs
}

/// Index function: each label as `key=value` (several keys per object).
fn by_label(p: &Pod) -> Vec<String> {
    p.metadata
        .labels
        .iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}

#[test]
fn updates_that_keep_some_index_keys_serve_the_new_version_under_every_key() {
    let inf = Informer::<Pod>::manual()
        .index(BY_CONTROLLER_UID, index_by_controller_uid)
        .index("by-label", by_label)
        .build();
    let store = inf.store();
    let rs1 = controller_index_key("ns", "rs1");
    inf.apply_event(Event::Apply(labelled(
        owned_pod("ns", "a", "ua", "1", "rs1"),
        &[("x", "1"), ("y", "2")],
    )));
    inf.apply_event(Event::Apply(owned_pod("ns", "b", "ub", "2", "rs1")));

    // The controller stays (the common update): the entry now holds the
    // new version. One label stays, one goes, one comes.
    inf.apply_event(Event::Apply(labelled(
        owned_pod("ns", "a", "ua", "3", "rs1"),
        &[("y", "2"), ("z", "3")],
    )));
    assert_eq!(versions(&store, BY_CONTROLLER_UID, &rs1), ["2", "3"]);
    assert!(versions(&store, "by-label", "x=1").is_empty());
    assert_eq!(versions(&store, "by-label", "y=2"), ["3"]);
    assert_eq!(versions(&store, "by-label", "z=3"), ["3"]);
    let mut keys = store.index_keys("by-label").unwrap();
    keys.sort();
    assert_eq!(keys, ["y=2", "z=3"]);

    // A relist that changes the version but no index value.
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(labelled(
        owned_pod("ns", "a", "ua", "4", "rs1"),
        &[("y", "2"), ("z", "3")],
    )));
    inf.apply_event(Event::InitApply(owned_pod("ns", "b", "ub", "2", "rs1")));
    inf.apply_event(Event::InitDone);
    assert_eq!(versions(&store, BY_CONTROLLER_UID, &rs1), ["2", "4"]);
    assert_eq!(versions(&store, "by-label", "y=2"), ["4"]);

    // Deleted: gone from every key, and the keys with it.
    inf.apply_event(Event::Delete(owned_pod("ns", "a", "ua", "5", "rs1")));
    inf.apply_event(Event::Delete(owned_pod("ns", "b", "ub", "6", "rs1")));
    assert!(store.index_keys(BY_CONTROLLER_UID).unwrap().is_empty());
    assert!(store.index_keys("by-label").unwrap().is_empty());
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

fn labelled(mut p: Pod, labels: &[(&str, &str)]) -> Pod {
    p.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    p
}

fn orphan_indexed_informer() -> Informer<Pod> {
    Informer::<Pod>::manual()
        .index(BY_CONTROLLER_UID, index_by_controller_uid)
        .index(BY_ORPHAN_LABEL, index_orphans_by_label)
        .build()
}

fn candidates(store: &Store<Pod>, owner: &str, labels: &[(&str, &str)]) -> Vec<String> {
    names(
        store
            .by_controller_with_labelled_orphans("ns", owner, labels)
            .unwrap(),
    )
}

#[test]
fn labelled_orphan_lookups_return_owned_objects_and_only_orphans_with_every_label() {
    let inf = orphan_indexed_informer();
    let store = inf.store();
    inf.apply_event(Event::Apply(labelled(
        owned_pod("ns", "mine", "u1", "1", "rs1"),
        &[("app", "db")],
    )));
    inf.apply_event(Event::Apply(labelled(
        owned_pod("ns", "theirs", "u2", "2", "rs2"),
        &[("app", "web")],
    )));
    inf.apply_event(Event::Apply(labelled(
        pod("ns", "web", "u3", "3"),
        &[("app", "web"), ("tier", "fe")],
    )));
    inf.apply_event(Event::Apply(labelled(
        pod("ns", "db", "u4", "4"),
        &[("app", "db"), ("tier", "fe")],
    )));
    inf.apply_event(Event::Apply(labelled(
        pod("elsewhere", "web2", "u5", "5"),
        &[("app", "web")],
    )));

    // Owned first, then the orphans carrying every label.
    let got = store
        .by_controller_with_labelled_orphans("ns", "rs1", &[("app", "web")])
        .unwrap();
    let got: Vec<_> = got
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(got, ["mine", "web"]);
    assert_eq!(
        candidates(&store, "rs1", &[("tier", "fe"), ("app", "web")]),
        ["mine", "web"]
    );
    assert_eq!(
        candidates(&store, "rs1", &[("tier", "fe")]),
        ["db", "mine", "web"]
    );
    // A label no orphan carries, or two values for one key: no orphans.
    assert_eq!(candidates(&store, "rs1", &[("app", "api")]), ["mine"]);
    assert_eq!(
        candidates(&store, "rs1", &[("app", "web"), ("app", "db")]),
        ["mine"]
    );
    // No labels: every orphan of the namespace, as `by_controller`.
    assert_eq!(candidates(&store, "rs1", &[]), ["db", "mine", "web"]);
    assert_eq!(
        names(store.by_controller("ns", "rs1", true).unwrap()),
        ["db", "mine", "web"]
    );

    // Only orphans are in the label index.
    let mut keys = store.index_keys(BY_ORPHAN_LABEL).unwrap();
    keys.sort();
    let mut want = vec![
        orphan_label_index_key("ns", "app", "web"),
        orphan_label_index_key("ns", "app", "db"),
        orphan_label_index_key("ns", "tier", "fe"),
        orphan_label_index_key("elsewhere", "app", "web"),
    ];
    want.sort();
    assert_eq!(keys, want);
}

#[test]
fn labelled_orphan_lookups_follow_adoption_release_relabelling_and_relists() {
    let inf = orphan_indexed_informer();
    let store = inf.store();
    let web = [("app", "web")];
    inf.apply_event(Event::Apply(labelled(pod("ns", "a", "ua", "1"), &web)));
    assert_eq!(candidates(&store, "rs1", &web), ["a"]);

    // Adopted by rs2: no longer an orphan, so rs1 does not see it.
    inf.apply_event(Event::Apply(labelled(
        owned_pod("ns", "a", "ua", "2", "rs2"),
        &web,
    )));
    assert!(candidates(&store, "rs1", &web).is_empty());
    assert!(store.index_keys(BY_ORPHAN_LABEL).unwrap().is_empty());
    assert_eq!(candidates(&store, "rs2", &web), ["a"]);

    // Released, then relabelled.
    inf.apply_event(Event::Apply(labelled(pod("ns", "a", "ua", "3"), &web)));
    assert_eq!(candidates(&store, "rs1", &web), ["a"]);
    inf.apply_event(Event::Apply(labelled(
        pod("ns", "a", "ua", "4"),
        &[("app", "db")],
    )));
    assert!(candidates(&store, "rs1", &web).is_empty());

    // A relist that drops it and brings another.
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(labelled(pod("ns", "b", "ub", "5"), &web)));
    inf.apply_event(Event::InitDone);
    assert_eq!(candidates(&store, "rs1", &web), ["b"]);
    assert_eq!(
        candidates(&store, "rs1", &[("app", "db")]),
        Vec::<String>::new()
    );
    inf.apply_event(Event::Delete(labelled(pod("ns", "b", "ub", "6"), &web)));
    assert!(candidates(&store, "rs1", &[]).is_empty());
    assert!(store.index_keys(BY_ORPHAN_LABEL).unwrap().is_empty());
}

#[test]
fn labelled_orphan_lookups_work_without_the_label_index_and_need_the_controller_index() {
    let inf = Informer::<Pod>::manual().build();
    inf.apply_event(Event::Apply(labelled(
        pod("ns", "web", "u1", "1"),
        &[("app", "web")],
    )));
    inf.apply_event(Event::Apply(labelled(
        pod("ns", "db", "u2", "2"),
        &[("app", "db")],
    )));
    let store = inf.store();
    assert_eq!(
        store
            .by_controller_with_labelled_orphans("ns", "rs", &[("app", "web")])
            .unwrap_err(),
        InformerError::UnknownIndex {
            name: BY_CONTROLLER_UID.into()
        }
    );
    // Without the label index the orphans are scanned: same answers.
    inf.add_index(BY_CONTROLLER_UID, index_by_controller_uid)
        .unwrap();
    assert_eq!(candidates(&store, "rs", &[("app", "web")]), ["web"]);
    assert_eq!(candidates(&store, "rs", &[]), ["db", "web"]);
    // Registered late, the label index is filled from the cache.
    inf.add_index(BY_ORPHAN_LABEL, index_orphans_by_label)
        .unwrap();
    assert_eq!(candidates(&store, "rs", &[("app", "web")]), ["web"]);
    assert_eq!(
        by(
            &store,
            BY_ORPHAN_LABEL,
            &orphan_label_index_key("ns", "app", "db")
        ),
        ["db"]
    );
}
