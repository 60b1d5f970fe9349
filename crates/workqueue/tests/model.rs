//! Property test: random sequences of operations against a simple
//! reference model of the queue's documented semantics.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::settle;
use ctrlkit_workqueue::WorkQueue;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Add(u8, i32),
    AddAfter(u8, u64, i32),
    Get,
    Done(u8),
    DoneProcessing(usize),
    Advance(u64),
    ShutDown,
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..5;
    let prio = prop_oneof![2 => Just(0i32), 1 => -2i32..4];
    prop_oneof![
        6 => (key.clone(), prio.clone()).prop_map(|(k, p)| Op::Add(k, p)),
        3 => (key.clone(), 0u64..6, prio).prop_map(|(k, d, p)| Op::AddAfter(k, d, p)),
        6 => Just(Op::Get),
        1 => key.prop_map(Op::Done),
        4 => (0usize..8).prop_map(Op::DoneProcessing),
        3 => (1u64..5).prop_map(Op::Advance),
        1 => Just(Op::ShutDown),
    ]
}

/// The reference: plain collections, linear scans, no cleverness.
#[derive(Default)]
struct Model {
    /// (key, priority, sequence number)
    queued: Vec<(u8, i32, u64)>,
    processing: HashSet<u8>,
    /// Added while processing: queued again on done with this priority.
    requeue: HashMap<u8, i32>,
    /// key -> (due ms, priority, sequence number of the due time)
    waiting: HashMap<u8, (u64, i32, u64)>,
    now: u64,
    seq: u64,
    shut: bool,
}

impl Model {
    fn add(&mut self, key: u8, prio: i32) {
        if self.shut {
            return;
        }
        if let Some(q) = self.queued.iter_mut().find(|q| q.0 == key) {
            q.1 = q.1.max(prio);
            return;
        }
        if self.processing.contains(&key) {
            let p = self.requeue.entry(key).or_insert(prio);
            *p = (*p).max(prio);
            return;
        }
        self.seq += 1;
        self.queued.push((key, prio, self.seq));
    }

    fn get(&mut self) -> Option<u8> {
        let best = (0..self.queued.len()).min_by_key(|&i| {
            let (_, p, s) = self.queued[i];
            (-(p as i64), s)
        })?;
        let (key, _, _) = self.queued.remove(best);
        self.processing.insert(key);
        Some(key)
    }

    fn done(&mut self, key: u8) {
        if !self.processing.remove(&key) {
            return;
        }
        if let Some(p) = self.requeue.remove(&key) {
            self.seq += 1;
            self.queued.push((key, p, self.seq));
        }
    }

    fn add_after(&mut self, key: u8, delay: u64, prio: i32) {
        if self.shut {
            return;
        }
        if delay == 0 {
            return self.add(key, prio);
        }
        let due = self.now + delay;
        self.seq += 1;
        let seq = self.seq;
        let w = self.waiting.entry(key).or_insert((due, prio, seq));
        w.1 = w.1.max(prio);
        if due < w.0 {
            *w = (due, w.1, seq);
        }
    }

    fn advance(&mut self, by: u64) {
        self.now += by;
        let mut due: Vec<(u64, u64, u8, i32)> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.0 <= self.now)
            .map(|(k, w)| (w.0, w.2, *k, w.1))
            .collect();
        due.sort_unstable();
        for (_, _, key, prio) in due {
            self.waiting.remove(&key);
            self.add(key, prio);
        }
    }
}

async fn check(ops: Vec<Op>) {
    let queue = WorkQueue::<u8>::new();
    let mut model = Model::default();
    let mut held: Vec<u8> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Add(k, p) => {
                queue.add_with_priority(k, p);
                model.add(k, p);
            }
            Op::AddAfter(k, d, p) => {
                queue.add_after_with_priority(k, Duration::from_millis(d), p);
                model.add_after(k, d, p);
            }
            Op::Get => {
                let got = queue.try_get();
                assert_eq!(got, model.get(), "step {step}: get");
                held.extend(got);
            }
            Op::Done(k) => {
                queue.done(&k);
                model.done(k);
                held.retain(|h| *h != k);
            }
            Op::DoneProcessing(i) => {
                if !held.is_empty() {
                    let k = held.remove(i % held.len());
                    queue.done(&k);
                    model.done(k);
                }
            }
            Op::Advance(ms) => {
                tokio::time::advance(Duration::from_millis(ms)).await;
                settle().await;
                model.advance(ms);
            }
            Op::ShutDown => {
                queue.shut_down();
                model.shut = true;
                model.waiting.clear();
            }
        }
        assert_eq!(queue.len(), model.queued.len(), "step {step}: len");
        assert_eq!(queue.is_shutting_down(), model.shut);
    }
    // Everything left comes out in the model's order.
    queue.shut_down();
    loop {
        let got = queue.try_get();
        assert_eq!(got, model.get(), "final drain");
        if got.is_none() {
            break;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn queue_matches_the_model(ops in proptest::collection::vec(op(), 1..80)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(check(ops));
    }
}
