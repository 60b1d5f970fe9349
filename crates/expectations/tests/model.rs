#![allow(clippy::unwrap_used)]
//! Property test: random sequences of operations on a few keys agree with a
//! small reference model of the documented semantics.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use ctrlkit_expectations::ControllerExpectations;
use proptest::prelude::*;

const TTL_SECS: u64 = 10;
const KEYS: [&str; 2] = ["ns/a", "ns/b"];

#[derive(Debug, Clone)]
enum Op {
    Set(usize, i64, i64),
    ExpectCreations(usize, usize),
    ExpectTracked(usize, usize),
    ExpectDeletions(usize, Vec<u8>),
    Raise(usize, i64, i64),
    Lower(usize, i64, i64),
    CreationObserved(usize),
    CreationObservedId(usize, u8),
    RecordCreation(usize, u8),
    DeletionObserved(usize, u8),
    Delete(usize),
    Advance(u64),
    Satisfied(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS.len();
    prop_oneof![
        1 => (k.clone(), -2i64..5, -2i64..5).prop_map(|(k, a, d)| Op::Set(k, a, d)),
        1 => (k.clone(), 0usize..5).prop_map(|(k, n)| Op::ExpectCreations(k, n)),
        3 => (k.clone(), 0usize..5).prop_map(|(k, n)| Op::ExpectTracked(k, n)),
        1 => (k.clone(), proptest::collection::vec(0u8..4, 0..6))
            .prop_map(|(k, p)| Op::ExpectDeletions(k, p)),
        1 => (k.clone(), 0i64..3, 0i64..3).prop_map(|(k, a, d)| Op::Raise(k, a, d)),
        1 => (k.clone(), 0i64..3, 0i64..3).prop_map(|(k, a, d)| Op::Lower(k, a, d)),
        1 => k.clone().prop_map(Op::CreationObserved),
        4 => (k.clone(), 0u8..4).prop_map(|(k, i)| Op::CreationObservedId(k, i)),
        4 => (k.clone(), 0u8..4).prop_map(|(k, i)| Op::RecordCreation(k, i)),
        3 => (k.clone(), 0u8..4).prop_map(|(k, p)| Op::DeletionObserved(k, p)),
        1 => k.clone().prop_map(Op::Delete),
        1 => (0u64..8).prop_map(Op::Advance),
        2 => k.prop_map(Op::Satisfied),
    ]
}

#[derive(Debug, Clone, Default)]
struct Model {
    add: i64,
    del: i64,
    set_at: u64,
    pending: HashSet<u8>,
    tracked: Option<(HashSet<u8>, HashSet<u8>, HashSet<u8>)>, // recorded, seen, counted
}

impl Model {
    fn new(add: i64, del: i64, now: u64) -> Self {
        Self {
            add,
            del,
            set_at: now,
            ..Self::default()
        }
    }
    fn satisfied(&self, now: u64) -> bool {
        (self.add <= 0 && self.del <= 0) || now - self.set_at > TTL_SECS
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn expectations_agree_with_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let exp = ControllerExpectations::with_ttl(Duration::from_secs(TTL_SECS));
            let mut model: HashMap<usize, Model> = HashMap::new();
            let mut now = 0u64;
            let pod = |p: u8| format!("ns/pod-{p}");
            let uid = |i: u8| format!("uid-{i}");
            for op in ops {
                match op.clone() {
                    Op::Set(k, a, d) => {
                        exp.set_expectations(KEYS[k], a, d);
                        model.insert(k, Model::new(a, d, now));
                    }
                    Op::ExpectCreations(k, n) => {
                        exp.expect_creations(KEYS[k], n);
                        model.insert(k, Model::new(n as i64, 0, now));
                    }
                    Op::ExpectTracked(k, n) => {
                        exp.expect_tracked_creations(KEYS[k], n);
                        let mut m = Model::new(n as i64, 0, now);
                        m.tracked = Some(Default::default());
                        model.insert(k, m);
                    }
                    Op::ExpectDeletions(k, pods) => {
                        exp.expect_deletions(KEYS[k], pods.iter().map(|&p| pod(p)));
                        let pending: HashSet<u8> = pods.into_iter().collect();
                        let mut m = Model::new(0, pending.len() as i64, now);
                        m.pending = pending;
                        model.insert(k, m);
                    }
                    Op::Raise(k, a, d) => {
                        exp.raise(KEYS[k], a, d);
                        if let Some(m) = model.get_mut(&k) { m.add += a; m.del += d; }
                    }
                    Op::Lower(k, a, d) => {
                        exp.lower(KEYS[k], a, d);
                        if let Some(m) = model.get_mut(&k) { m.add -= a; m.del -= d; }
                    }
                    Op::CreationObserved(k) => {
                        exp.creation_observed(KEYS[k]);
                        if let Some(m) = model.get_mut(&k) { m.add -= 1; }
                    }
                    Op::CreationObservedId(k, i) => {
                        exp.creation_observed_id(KEYS[k], &uid(i));
                        if let Some(m) = model.get_mut(&k) {
                            match &mut m.tracked {
                                None => m.add -= 1,
                                Some((recorded, seen, counted)) => {
                                    seen.insert(i);
                                    if recorded.contains(&i) && counted.insert(i) { m.add -= 1; }
                                }
                            }
                        }
                    }
                    Op::RecordCreation(k, i) => {
                        exp.record_creation(KEYS[k], &uid(i));
                        if let Some(m) = model.get_mut(&k)
                            && let Some((recorded, seen, counted)) = &mut m.tracked
                        {
                            recorded.insert(i);
                            if seen.contains(&i) && counted.insert(i) { m.add -= 1; }
                        }
                    }
                    Op::DeletionObserved(k, p) => {
                        exp.deletion_observed(KEYS[k], &pod(p));
                        if let Some(m) = model.get_mut(&k)
                            && m.pending.remove(&p)
                        {
                            m.del -= 1;
                        }
                    }
                    Op::Delete(k) => {
                        exp.delete_expectations(KEYS[k]);
                        model.remove(&k);
                    }
                    Op::Advance(s) => {
                        tokio::time::advance(Duration::from_secs(s)).await;
                        now += s;
                    }
                    Op::Satisfied(k) => {
                        let want = model.get(&k).is_none_or(|m| m.satisfied(now));
                        prop_assert_eq!(exp.satisfied(KEYS[k]), want, "after {:?}", op);
                    }
                }
                for (k, key) in KEYS.iter().enumerate() {
                    let got = exp.get_expectations(key).map(|e| (e.add, e.del));
                    let want = model.get(&k).map(|m| (m.add, m.del));
                    prop_assert_eq!(got, want, "key {} after {:?}", key, op);
                    let mut pending: Vec<String> = model
                        .get(&k)
                        .map(|m| m.pending.iter().map(|&p| pod(p)).collect())
                        .unwrap_or_default();
                    pending.sort();
                    prop_assert_eq!(exp.pending_deletions(key), pending);
                    let mut outstanding: Vec<String> = model
                        .get(&k)
                        .and_then(|m| m.tracked.as_ref())
                        .map(|(recorded, _, counted)| recorded.difference(counted).map(|&i| uid(i)).collect())
                        .unwrap_or_default();
                    outstanding.sort();
                    prop_assert_eq!(exp.pending_creations(key), outstanding);
                }
            }
            Ok(())
        })?;
    }
}
