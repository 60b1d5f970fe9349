//! Handler semantics: adds, updates with old and new objects, deletes,
//! tombstones on relist, the initial-list flag, ordering and panics.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctrlkit_informer::{HandlerFns, Informer};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use parking_lot::Mutex;

fn informer_with(rec: &Recorder) -> Informer<Pod> {
    Informer::<Pod>::manual().handler(rec.clone()).build()
}

fn initial_list(inf: &Informer<Pod>, pods: Vec<Pod>) {
    inf.apply_event(Event::Init);
    for p in pods {
        inf.apply_event(Event::InitApply(p));
    }
    inf.apply_event(Event::InitDone);
}

#[test]
fn initial_list_is_delivered_as_initial_adds_only_at_init_done() {
    let rec = Recorder::new();
    let inf = informer_with(&rec);
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "a", "ua", "1")));
    inf.apply_event(Event::InitApply(pod("ns", "b", "ub", "2")));
    // Nothing is visible until the list is complete.
    assert!(rec.take().is_empty());
    assert!(inf.store().is_empty());
    assert!(!inf.has_synced());
    inf.apply_event(Event::InitDone);
    assert!(inf.has_synced());
    assert_eq!(
        rec.take_sorted(),
        vec![add("a", "1", true), add("b", "2", true)]
    );
    assert_eq!(inf.store().len(), 2);

    // Later creations are not part of the initial list.
    inf.apply_event(Event::Apply(pod("ns", "c", "uc", "3")));
    assert_eq!(rec.take(), vec![add("c", "3", false)]);
}

#[test]
fn update_carries_old_and_new_and_delete_the_final_state() {
    let rec = Recorder::new();
    let inf = informer_with(&rec);
    initial_list(&inf, vec![pod("ns", "a", "ua", "1")]);
    rec.take();

    inf.apply_event(Event::Apply(pod("ns", "a", "ua", "5")));
    assert_eq!(rec.take(), vec![update("a", "1", "5")]);
    assert_eq!(
        inf.store()
            .get("ns", "a")
            .unwrap()
            .metadata
            .resource_version
            .as_deref(),
        Some("5")
    );

    inf.apply_event(Event::Delete(pod("ns", "a", "ua", "6")));
    assert_eq!(rec.take(), vec![delete("a", "6", false)]);
    assert!(inf.store().get("ns", "a").is_none());

    // A delete for an object never cached is not reported.
    inf.apply_event(Event::Delete(pod("ns", "ghost", "ug", "7")));
    assert!(rec.take().is_empty());
}

#[test]
fn recreation_with_a_new_uid_is_a_tombstoned_delete_then_an_add() {
    let rec = Recorder::new();
    let inf = informer_with(&rec);
    initial_list(&inf, vec![pod("ns", "a", "old-uid", "1")]);
    rec.take();

    inf.apply_event(Event::Apply(pod("ns", "a", "new-uid", "9")));
    assert_eq!(
        rec.take(),
        vec![delete("a", "1", true), add("a", "9", false)]
    );
}

#[test]
fn relist_turns_differences_into_updates_adds_and_tombstones() {
    let rec = Recorder::new();
    let inf = informer_with(&rec);
    initial_list(
        &inf,
        vec![
            pod("ns", "same", "u1", "1"),
            pod("ns", "changed", "u2", "2"),
            pod("ns", "gone", "u3", "3"),
            pod("ns", "recreated", "u4", "4"),
        ],
    );
    rec.take();

    // A relist, e.g. after the watch fell out of the server's window (410).
    initial_list(
        &inf,
        vec![
            pod("ns", "same", "u1", "1"),
            pod("ns", "changed", "u2", "7"),
            pod("ns", "recreated", "u4-new", "8"),
            pod("ns", "new", "u5", "9"),
        ],
    );
    assert_eq!(
        rec.take_sorted(),
        vec![
            add("new", "9", false),
            add("recreated", "8", false),
            delete("gone", "3", true),
            delete("recreated", "4", true),
            update("changed", "2", "7"),
        ]
    );
    let mut names: Vec<_> = inf
        .store()
        .list()
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["changed", "new", "recreated", "same"]);
}

#[test]
fn an_interrupted_list_is_discarded_by_the_next_init() {
    let rec = Recorder::new();
    let inf = informer_with(&rec);
    inf.apply_event(Event::Init);
    inf.apply_event(Event::InitApply(pod("ns", "partial", "u1", "1")));
    initial_list(&inf, vec![pod("ns", "a", "u2", "2")]);
    assert_eq!(rec.take(), vec![add("a", "2", true)]);
    assert!(inf.store().get("ns", "partial").is_none());
}

#[test]
fn handlers_run_in_registration_order_and_late_handlers_get_a_replay() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let first = Recorder::tagged("first", log.clone());
    let second = Recorder::tagged("second", log.clone());
    let inf = Informer::<Pod>::manual()
        .handler(first)
        .handler(second)
        .build();
    initial_list(&inf, vec![pod("ns", "a", "ua", "1")]);
    inf.apply_event(Event::Apply(pod("ns", "a", "ua", "2")));
    let tags: Vec<_> = log.lock().drain(..).map(|(t, _)| t).collect();
    assert_eq!(tags, ["first", "second", "first", "second"]);

    // A handler added to a running informer first sees every cached object.
    let late = Recorder::new();
    let id = inf.add_event_handler(late.clone());
    assert_eq!(late.take(), vec![add("a", "2", true)]);
    inf.apply_event(Event::Apply(pod("ns", "b", "ub", "3")));
    assert_eq!(late.take(), vec![add("b", "3", false)]);

    assert!(inf.remove_event_handler(id));
    assert!(!inf.remove_event_handler(id));
    inf.apply_event(Event::Apply(pod("ns", "c", "uc", "4")));
    assert!(late.take().is_empty());
}

#[test]
fn a_panicking_handler_does_not_stop_other_handlers_or_later_events() {
    let rec = Recorder::new();
    let inf = Informer::<Pod>::manual()
        .handler(HandlerFns::new().on_add(|p: &Arc<Pod>, _| {
            if p.metadata.name.as_deref() == Some("boom") {
                panic!("handler bug");
            }
        }))
        .handler(rec.clone())
        .build();
    initial_list(&inf, vec![]);
    inf.apply_event(Event::Apply(pod("ns", "boom", "u1", "1")));
    inf.apply_event(Event::Apply(pod("ns", "fine", "u2", "2")));
    assert_eq!(
        rec.take(),
        vec![add("boom", "1", false), add("fine", "2", false)]
    );
}

#[test]
fn handler_fns_route_each_callback() {
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let inf = Informer::<Pod>::manual()
        .handler(
            HandlerFns::new()
                .on_add(move |p: &Arc<Pod>, initial| {
                    a.lock()
                        .push(format!("add {:?} {initial}", p.metadata.name))
                })
                .on_update(move |_, n: &Arc<Pod>| {
                    u.lock().push(format!("update {:?}", n.metadata.name))
                })
                .on_delete(move |o| {
                    d.lock()
                        .push(format!("delete {:?}", o.object().metadata.name))
                }),
        )
        .build();
    initial_list(&inf, vec![pod("ns", "a", "u", "1")]);
    inf.apply_event(Event::Apply(pod("ns", "a", "u", "2")));
    inf.apply_event(Event::Delete(pod("ns", "a", "u", "3")));
    assert_eq!(
        *seen.lock(),
        [
            "add Some(\"a\") true",
            "update Some(\"a\")",
            "delete Some(\"a\")"
        ]
    );
}

#[test]
fn handlers_can_read_the_store_which_already_reflects_the_change() {
    let inf = Informer::<Pod>::manual().build();
    let store = inf.store();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    inf.add_event_handler(HandlerFns::new().on_add(move |p: &Arc<Pod>, _| {
        s.lock().push(
            store
                .get("ns", p.metadata.name.as_deref().unwrap())
                .is_some(),
        )
    }));
    initial_list(&inf, vec![pod("ns", "a", "u", "1")]);
    assert_eq!(*seen.lock(), [true]);
}
