#![allow(clippy::unwrap_used)]
//! Many threads observing one key at once never lose or double-count.

use std::sync::Arc;

use ctrlkit_expectations::ControllerExpectations;

const KEY: &str = "default/web";
const THREADS: usize = 8;
const PER_THREAD: usize = 500;

#[test]
fn concurrent_observations_on_one_key_are_exact() {
    let exp = Arc::new(ControllerExpectations::new());
    let total = THREADS * PER_THREAD;
    exp.set_expectations(KEY, i64::try_from(total).unwrap(), 0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..PER_THREAD {
                    exp.creation_observed(KEY);
                    exp.raise(KEY, 0, 1);
                    exp.lower(KEY, 0, 1);
                }
            });
        }
    });
    let e = exp.get_expectations(KEY).unwrap();
    assert_eq!((e.add, e.del), (0, 0));
}

#[test]
fn concurrent_duplicate_deletion_events_count_each_pod_once() {
    let exp = Arc::new(ControllerExpectations::new());
    let pods: Vec<String> = (0..THREADS * PER_THREAD)
        .map(|i| format!("default/pod-{i}"))
        .collect();
    exp.expect_deletions(KEY, pods.iter().cloned());
    std::thread::scope(|s| {
        // Every thread sees every pod (terminating + deleted, relists...),
        // starting at a different offset to maximise contention.
        for t in 0..THREADS {
            let (exp, pods) = (&exp, &pods);
            s.spawn(move || {
                for i in 0..pods.len() {
                    let pod = &pods[(i + t * PER_THREAD) % pods.len()];
                    exp.deletion_observed(KEY, pod);
                    exp.deletion_observed(KEY, "default/someone-else");
                }
            });
        }
    });
    let e = exp.get_expectations(KEY).unwrap();
    assert_eq!((e.add, e.del), (0, 0));
    assert!(exp.pending_deletions(KEY).is_empty());
}

#[test]
fn concurrent_tracked_creations_race_record_and_observe_exactly() {
    let exp = Arc::new(ControllerExpectations::new());
    let ids: Vec<String> = (0..THREADS * PER_THREAD)
        .map(|i| format!("uid-{i}"))
        .collect();
    let total = ids.len();
    exp.expect_tracked_creations(KEY, total);
    std::thread::scope(|s| {
        // Half the threads play the controller (record), half the informer
        // (observe, twice, plus foreign objects): each id races both ways.
        for t in 0..THREADS {
            let (exp, ids) = (&exp, &ids);
            s.spawn(move || {
                let chunk = ids.len() / THREADS;
                for k in 0..ids.len() {
                    let id = &ids[(k + t * chunk) % ids.len()];
                    if t % 2 == 0 {
                        exp.record_creation(KEY, id);
                    } else {
                        exp.creation_observed_id(KEY, id);
                        if k % 100 == 0 {
                            exp.creation_observed_id(KEY, &format!("foreign-{t}-{k}"));
                        }
                    }
                }
            });
        }
    });
    let e = exp.get_expectations(KEY).unwrap();
    assert_eq!((e.add, e.del), (0, 0), "every id counted exactly once");
    assert!(exp.pending_creations(KEY).is_empty());
}

#[test]
fn concurrent_work_on_many_keys_does_not_interfere() {
    let exp = Arc::new(ControllerExpectations::new());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let exp = &exp;
            s.spawn(move || {
                for round in 0..100 {
                    let key = format!("ns/rs-{t}");
                    exp.expect_deletions(&key, (0..5).map(|p| format!("ns/{t}-{round}-{p}")));
                    for p in 0..5 {
                        exp.deletion_observed(&key, &format!("ns/{t}-{round}-{p}"));
                    }
                    assert!(exp.satisfied(&key));
                    exp.expect_creations(&key, 3);
                    for _ in 0..3 {
                        exp.creation_observed(&key);
                    }
                    assert!(exp.satisfied(&key));
                }
            });
        }
    });
    assert_eq!(exp.len(), THREADS);
}
