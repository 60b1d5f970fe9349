//! Model-based property test: after any sequence of watch events, the store
//! matches a plain map, every index matches a brute-force scan, owner lookups
//! (with and without the orphan label index) match a scan, and replaying the
//! handler notifications onto an empty map reproduces the store.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use ctrlkit_informer::{
    BY_CONTROLLER_UID, BY_NAMESPACE, BY_ORPHAN_LABEL, DeletedObject, EventHandler, Informer,
    index_by_controller_uid, index_by_namespace, index_orphans_by_label,
};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use parking_lot::Mutex;
use proptest::prelude::*;

type Key = (String, String);

#[derive(Debug, Clone)]
enum Op {
    /// Create or modify (namespace, name) with an owner (or none), labels
    /// (see [`labels`]) and possibly a new UID (a re-creation).
    Apply {
        ns: u8,
        name: u8,
        owner: Option<u8>,
        labels: u8,
        recreate: bool,
    },
    Delete {
        ns: u8,
        name: u8,
    },
    /// A relist that keeps the flagged objects (modifying some) and adds new ones.
    Relist {
        keep: Vec<bool>,
        modify: Vec<bool>,
        new: Vec<(u8, u8)>,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..2u8, 0..5u8, proptest::option::of(0..3u8), 0..16u8, proptest::bool::weighted(0.1))
            .prop_map(|(ns, name, owner, labels, recreate)| Op::Apply { ns, name, owner, labels, recreate }),
        2 => (0..2u8, 0..5u8).prop_map(|(ns, name)| Op::Delete { ns, name }),
        1 => (
            proptest::collection::vec(any::<bool>(), 10),
            proptest::collection::vec(any::<bool>(), 10),
            proptest::collection::vec((0..2u8, 0..5u8), 0..3),
        )
            .prop_map(|(keep, modify, new)| Op::Relist { keep, modify, new }),
    ]
}

/// The label set numbered `bits`: bits 0-1 pick `app` (absent, a, b, c),
/// bit 2 adds `tier=x`, bit 3 adds `env=p`.
fn labels(bits: u8) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    if let Some(app) = ["", "a", "b", "c"]
        .get(usize::from(bits & 3))
        .filter(|v| !v.is_empty())
    {
        labels.insert("app".to_string(), app.to_string());
    }
    if bits & 4 != 0 {
        labels.insert("tier".to_string(), "x".to_string());
    }
    if bits & 8 != 0 {
        labels.insert("env".to_string(), "p".to_string());
    }
    labels
}

/// The label requirements owner lookups are checked with.
const QUERIES: &[&[(&str, &str)]] = &[
    &[],
    &[("app", "a")],
    &[("app", "b"), ("tier", "x")],
    &[("tier", "x"), ("env", "p")],
    &[("app", "a"), ("app", "b")],
    &[("app", "zz")],
];

/// Replays notifications onto a map, checking each is consistent with it.
#[derive(Default)]
struct Shadow(Mutex<BTreeMap<Key, Arc<Pod>>>);

fn key_of(p: &Pod) -> Key {
    (
        p.metadata.namespace.clone().unwrap(),
        p.metadata.name.clone().unwrap(),
    )
}

impl EventHandler<Pod> for Shadow {
    fn on_add(&self, obj: &Arc<Pod>, _: bool) {
        let prev = self.0.lock().insert(key_of(obj), obj.clone());
        assert!(prev.is_none(), "add of an object already present");
    }
    fn on_update(&self, old: &Arc<Pod>, new: &Arc<Pod>) {
        assert_eq!(old.metadata.uid, new.metadata.uid, "update across UIDs");
        let prev = self.0.lock().insert(key_of(new), new.clone());
        assert!(
            Arc::ptr_eq(&prev.unwrap(), old),
            "update's old is not the previous state"
        );
    }
    fn on_delete(&self, obj: &DeletedObject<Pod>) {
        let prev = self.0.lock().remove(&key_of(obj.object()));
        let prev = prev.expect("delete of an unknown object");
        if obj.is_tombstone() {
            assert!(
                Arc::ptr_eq(&prev, obj.object()),
                "tombstone is not the last known state"
            );
        }
    }
}

struct Model {
    objects: BTreeMap<Key, Pod>,
    rv: u64,
    uid: u64,
    /// The highest resourceVersion that reached the store.
    observed: u64,
}

impl Model {
    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }

    fn build(&mut self, ns: u8, name: u8, owner: Option<u8>, label_bits: u8, uid: String) -> Pod {
        let (ns, name) = (format!("ns{ns}"), format!("p{name}"));
        let rv = self.next_rv();
        let mut p = match owner {
            Some(o) => owned_pod(&ns, &name, &uid, &rv, &format!("owner{o}")),
            None => pod(&ns, &name, &uid, &rv),
        };
        p.metadata.labels = Some(labels(label_bits));
        p
    }

    fn observe(&mut self, p: &Pod) {
        let rv: u64 = p
            .metadata
            .resource_version
            .as_deref()
            .unwrap()
            .parse()
            .unwrap();
        self.observed = self.observed.max(rv);
    }

    fn fresh_uid(&mut self) -> String {
        self.uid += 1;
        format!("uid{}", self.uid)
    }
}

/// Owner lookups against a scan of the model: owned objects first, then
/// exactly the namespace's orphans carrying every queried label.
fn check_owner_lookups(informer: &Informer<Pod>, model: &Model) {
    let store = informer.store();
    for ns in ["ns0", "ns1"] {
        for owner in ["owner0", "owner1", "owner2", "nobody"] {
            let in_ns = |p: &&Pod| p.metadata.namespace.as_deref() == Some(ns);
            let owned: Vec<Key> = model
                .objects
                .values()
                .filter(in_ns)
                .filter(|p| index_by_controller_uid(*p) == [format!("{ns}/{owner}")])
                .map(key_of)
                .collect();
            for query in QUERIES {
                let orphans: Vec<Key> = model
                    .objects
                    .values()
                    .filter(in_ns)
                    .filter(|p| p.metadata.owner_references.is_none())
                    .filter(|p| {
                        let l = p.metadata.labels.as_ref().unwrap();
                        query
                            .iter()
                            .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
                    })
                    .map(key_of)
                    .collect();
                let got: Vec<Key> = store
                    .by_controller_with_labelled_orphans(ns, owner, query)
                    .unwrap()
                    .iter()
                    .map(|p| key_of(p))
                    .collect();
                assert_eq!(
                    got.len(),
                    owned.len() + orphans.len(),
                    "{ns} {owner} {query:?}"
                );
                let (mut got_owned, mut got_orphans) =
                    (got[..owned.len()].to_vec(), got[owned.len()..].to_vec());
                got_owned.sort();
                got_orphans.sort();
                assert_eq!(got_owned, owned, "{ns} {owner} {query:?}: owned part");
                assert_eq!(got_orphans, orphans, "{ns} {owner} {query:?}: orphans");
                if query.is_empty() {
                    let mut all: Vec<Key> = store
                        .by_controller(ns, owner, true)
                        .unwrap()
                        .iter()
                        .map(|p| key_of(p))
                        .collect();
                    all.sort();
                    let mut want = got.clone();
                    want.sort();
                    assert_eq!(all, want, "by_controller(.., true) differs");
                }
            }
        }
    }
}

fn check(informer: &Informer<Pod>, model: &Model, shadow: &Shadow) {
    let store = informer.store();
    let mut cached: Vec<_> = store
        .list()
        .iter()
        .map(|p| (key_of(p), p.metadata.resource_version.clone()))
        .collect();
    cached.sort();
    let expected: Vec<_> = model
        .objects
        .iter()
        .map(|(k, p)| (k.clone(), p.metadata.resource_version.clone()))
        .collect();
    assert_eq!(cached, expected, "store differs from the model");
    assert_eq!(store.len(), model.objects.len());

    for (index, func) in [
        (
            BY_NAMESPACE,
            index_by_namespace::<Pod> as fn(&Pod) -> Vec<String>,
        ),
        (BY_CONTROLLER_UID, index_by_controller_uid::<Pod>),
        (BY_ORPHAN_LABEL, index_orphans_by_label::<Pod>),
    ] {
        let mut all_keys: Vec<String> = model.objects.values().flat_map(func).collect();
        all_keys.sort();
        all_keys.dedup();
        let mut index_keys = store.index_keys(index).unwrap();
        index_keys.sort();
        assert_eq!(index_keys, all_keys, "{index}: stale keys");
        for key in all_keys {
            let mut got: Vec<_> = store
                .by_index(index, &key)
                .unwrap()
                .iter()
                .map(|p| key_of(p))
                .collect();
            got.sort();
            let want: Vec<_> = model
                .objects
                .iter()
                .filter(|(_, p)| func(p).contains(&key))
                .map(|(k, _)| k.clone())
                .collect();
            assert_eq!(got, want, "{index}[{key}]");
        }
    }

    let replayed: Vec<_> = shadow
        .0
        .lock()
        .iter()
        .map(|(k, p)| (k.clone(), p.metadata.resource_version.clone()))
        .collect();
    assert_eq!(
        replayed, expected,
        "notifications do not reproduce the store"
    );
}

proptest! {
    #[test]
    fn store_indexes_and_notifications_agree_with_a_model(ops in proptest::collection::vec(op(), 1..40)) {
        let shadow = Arc::new(Shadow::default());
        let informer = Informer::<Pod>::manual()
            .index(BY_NAMESPACE, index_by_namespace)
            .index(BY_CONTROLLER_UID, index_by_controller_uid)
            .index(BY_ORPHAN_LABEL, index_orphans_by_label)
            .build();
        informer.add_event_handler_arc(shadow.clone());
        // Fed the same events without the orphan label index: owner lookups
        // fall back to scanning the orphans and must give the same answers.
        let plain = Informer::<Pod>::manual()
            .index(BY_CONTROLLER_UID, index_by_controller_uid)
            .build();
        let apply = |event: Event<Pod>| {
            plain.apply_event(event.clone());
            informer.apply_event(event);
        };
        apply(Event::Init);
        apply(Event::InitDone);
        let mut model = Model { objects: BTreeMap::new(), rv: 0, uid: 0, observed: 0 };

        for op in ops {
            match op {
                Op::Apply { ns, name, owner, labels, recreate } => {
                    let key = (format!("ns{ns}"), format!("p{name}"));
                    let uid = match model.objects.get(&key) {
                        Some(p) if !recreate => p.metadata.uid.clone().unwrap(),
                        _ => model.fresh_uid(),
                    };
                    let p = model.build(ns, name, owner, labels, uid);
                    model.observe(&p);
                    model.objects.insert(key, p.clone());
                    apply(Event::Apply(p));
                }
                Op::Delete { ns, name } => {
                    let key = (format!("ns{ns}"), format!("p{name}"));
                    let rv = model.next_rv();
                    if let Some(mut p) = model.objects.remove(&key) {
                        p.metadata.resource_version = Some(rv);
                        model.observe(&p);
                        apply(Event::Delete(p));
                    }
                }
                Op::Relist { keep, modify, new } => {
                    let current: Vec<_> = model.objects.keys().cloned().collect();
                    let mut listed = BTreeMap::new();
                    for (i, key) in current.into_iter().enumerate() {
                        if !keep.get(i).copied().unwrap_or(true) {
                            continue;
                        }
                        let mut p = model.objects[&key].clone();
                        if modify.get(i).copied().unwrap_or(false) {
                            p.metadata.resource_version = Some(model.next_rv());
                        }
                        listed.insert(key, p);
                    }
                    for (ns, name) in new {
                        let key = (format!("ns{ns}"), format!("p{name}"));
                        if let std::collections::btree_map::Entry::Vacant(slot) = listed.entry(key) {
                            let uid = model.fresh_uid();
                            slot.insert(model.build(ns, name, None, name, uid));
                        }
                    }
                    for p in listed.values() {
                        model.observe(p);
                    }
                    apply(Event::Init);
                    for p in listed.values() {
                        apply(Event::InitApply(p.clone()));
                    }
                    apply(Event::InitDone);
                    model.objects = listed;
                }
            }
            check(&informer, &model, &shadow);
            check_owner_lookups(&informer, &model);
            check_owner_lookups(&plain, &model);
            let expected_rv = (model.observed > 0).then(|| model.observed.to_string());
            prop_assert_eq!(informer.last_sync_resource_version(), expected_rv);
        }
    }
}
