//! Upstream's sorting scenarios (`TestSortingActivePods`,
//! `TestSortingActivePodsWithRanks`) plus each tie-break in isolation.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::*;
use crate::pod::test_pods::*;
use crate::pod::{PHASE_FAILED, PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_UNKNOWN};

fn now() -> Timestamp {
    ts("2026-03-01T12:00:00Z")
}

fn ago(hours: i64) -> Timestamp {
    now() - SignedDuration::from_hours(hours)
}

fn month_ago() -> Timestamp {
    ago(24 * 30)
}

fn scheduled(name: &str, phase: &str) -> Pod {
    with_phase(with_node(pod(name), "node"), phase)
}

fn ready_pod(name: &str, since: Option<Timestamp>) -> Pod {
    ready(with_node(pod(name), "node"), since)
}

fn with_cost(mut p: Pod, cost: &str) -> Pod {
    p.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(POD_DELETION_COST_ANNOTATION.into(), cost.into());
    p
}

fn with_uid(mut p: Pod, uid: &str) -> Pod {
    p.metadata.uid = Some(uid.into());
    p
}

fn with_sidecar(mut p: Pod, restarts: i32) -> Pod {
    p.spec.get_or_insert_with(Default::default).init_containers = Some(vec![Container {
        name: "sidecar".into(),
        restart_policy: Some("Always".into()),
        ..Container::default()
    }]);
    p.status
        .get_or_insert_with(Default::default)
        .init_container_statuses = Some(vec![ContainerStatus {
        name: "sidecar".into(),
        restart_count: restarts,
        ..ContainerStatus::default()
    }]);
    p
}

fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap()
}

fn less(a: &Pod, ra: usize, b: &Pod, rb: usize) -> bool {
    deletes_before(a, ra, b, rb, Some(now()), RankingOptions::default())
}

/// A deterministic shuffle (xorshift), so the test needs no RNG crate.
fn shuffled<T: Clone>(items: &[T], seed: u64) -> Vec<T> {
    let mut v = items.to_vec();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.swap(i, (s % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn sorting_active_pods_matches_upstream_order() {
    // TestSortingActivePods: 9 pods, each strictly before the next.
    let then = month_ago();
    let expected = vec![
        with_phase(pod("unscheduled-pending"), PHASE_PENDING),
        scheduled("scheduled-pending", PHASE_PENDING),
        scheduled("unknown", PHASE_UNKNOWN),
        scheduled("running-not-ready", PHASE_RUNNING),
        restarts(ready_pod("ready-no-ltt", None), 3),
        restarts(ready_pod("ready-now", Some(now())), 3),
        restarts(ready_pod("ready-then", Some(then)), 3),
        created(
            restarts(ready_pod("ready-then-created-now", Some(then)), 2),
            now(),
        ),
        created(
            restarts(ready_pod("ready-then-created-then", Some(then)), 2),
            then,
        ),
    ];
    let want: Vec<&str> = expected.iter().map(name).collect();
    for seed in 0..20 {
        let mut pods = shuffled(&expected, seed);
        sort_active_pods(&mut pods);
        let got: Vec<&str> = pods.iter().map(name).collect();
        assert_eq!(got, want, "seed {seed}");
    }
}

/// The pods of upstream's `TestSortingActivePodsWithRanks` (1.35 version:
/// every pod has a sidecar init container).
fn ranked_pods() -> BTreeMap<String, Pod> {
    let then = month_ago();
    let pods = [
        with_phase(pod("unscheduled"), PHASE_PENDING),
        scheduled("pending", PHASE_PENDING),
        scheduled("unknown-phase", PHASE_UNKNOWN),
        scheduled("not-ready", PHASE_RUNNING),
        ready_pod("ready-no-last-transition-time", None),
        created(ready_pod("ready-now", Some(now())), now()),
        created(ready_pod("ready-then", Some(then)), then),
        created(
            restarts(ready_pod("ready-high-restarts", Some(now())), 9001),
            now(),
        ),
        created(
            with_sidecar(
                restarts(ready_pod("ready-high-side-restarts", Some(now())), 9001),
                9001,
            ),
            now(),
        ),
        created(ready_pod("ready-now-created-then", Some(now())), then),
        with_cost(
            created(ready_pod("low-deletion-cost", Some(now())), then),
            "10",
        ),
        with_cost(
            created(ready_pod("high-deletion-cost", Some(now())), then),
            "100",
        ),
        created(
            with_phase(pod("unscheduled-5-hours"), PHASE_PENDING),
            ago(5),
        ),
        created(
            with_phase(pod("unscheduled-10-hours"), PHASE_PENDING),
            ago(8),
        ),
        created(ready_pod("ready-2-hours", Some(ago(2))), then),
        created(ready_pod("ready-5-hours", Some(ago(5))), then),
        created(ready_pod("ready-10-hours", Some(ago(8))), then),
    ];
    pods.into_iter()
        .map(|p| {
            let p = if p.status.as_ref().unwrap().init_container_statuses.is_none() {
                with_sidecar(p, 0)
            } else {
                p
            };
            (p.metadata.name.clone().unwrap(), p)
        })
        .collect()
}

#[test]
fn ranked_equality_cases() {
    let pods = ranked_pods();
    for n in [
        "unscheduled",
        "pending",
        "unknown-phase",
        "not-ready",
        "ready-now-created-then",
        "ready-now",
        "ready-then",
        "ready-high-restarts",
    ] {
        assert!(!less(&pods[n], 1, &pods[n], 1), "{n} < itself");
    }
    for (a, b) in [
        ("unscheduled-5-hours", "unscheduled-10-hours"),
        ("ready-5-hours", "ready-10-hours"),
    ] {
        assert!(!less(&pods[a], 1, &pods[b], 1), "{a} < {b}");
        assert!(!less(&pods[b], 1, &pods[a], 1), "{b} < {a}");
    }
}

#[test]
fn ranked_inequality_cases() {
    let pods = ranked_pods();
    let cases = [
        ("unscheduled", 1, "pending", 2),
        ("unscheduled", 2, "pending", 1),
        ("pending", 1, "unknown-phase", 2),
        ("unknown-phase", 1, "not-ready", 2),
        ("not-ready", 1, "ready-no-last-transition-time", 1),
        ("ready-no-last-transition-time", 1, "ready-now", 1),
        ("ready-now", 2, "ready-no-last-transition-time", 1),
        ("ready-now", 1, "ready-then", 1),
        ("ready-now", 2, "ready-then", 1),
        ("ready-high-restarts", 1, "ready-now", 1),
        ("ready-now", 2, "ready-high-restarts", 1),
        ("ready-now", 1, "ready-now-created-then", 1),
        ("ready-now-created-then", 2, "ready-now", 1),
        ("low-deletion-cost", 2, "high-deletion-cost", 1),
        ("ready-2-hours", 1, "ready-5-hours", 1),
        ("ready-high-side-restarts", 1, "ready-high-restarts", 1),
    ];
    for (a, ra, b, rb) in cases {
        assert!(less(&pods[a], ra, &pods[b], rb), "({a},{ra}) < ({b},{rb})");
        assert!(!less(&pods[b], rb, &pods[a], ra), "({b},{rb}) < ({a},{ra})");
    }

    // With PodDeletionCost disabled the rank decides.
    let no_cost = RankingOptions::default().with_deletion_cost(false);
    let (low, high) = (&pods["low-deletion-cost"], &pods["high-deletion-cost"]);
    assert!(deletes_before(high, 2, low, 1, Some(now()), no_cost));
    assert!(!deletes_before(low, 1, high, 2, Some(now()), no_cost));
}

#[test]
fn ranked_sort_of_all_upstream_pods_is_consistent_with_less() {
    let pods: Vec<Pod> = ranked_pods().into_values().collect();
    for seed in 0..10 {
        let input = shuffled(&pods, seed);
        let mut sorted = input.clone();
        sort_for_deletion(&mut sorted, &[], now());
        assert_eq!(sorted.len(), input.len());
        for w in sorted.windows(2) {
            assert!(
                !less(&w[1], 0, &w[0], 0),
                "{} before {}",
                name(&w[0]),
                name(&w[1])
            );
        }
        assert!(name(&sorted[0]).starts_with("unscheduled"));
    }
}

/// Two identical ready, scheduled pods; `tweak` makes the first one the
/// one to delete first through exactly one step.
#[test]
fn each_tie_break_decides_on_its_own() {
    type Tweak = fn(Pod, Pod) -> (Pod, usize, Pod, usize);
    let base = || created(ready_pod("p", Some(ago(3))), ago(100));
    let steps: [(&str, Tweak); 10] = [
        ("unscheduled before scheduled", |a, b| {
            let mut a = a;
            a.spec.as_mut().unwrap().node_name = None;
            (a, 0, b, 0)
        }),
        ("pending before running", |a, b| {
            (with_phase(a, PHASE_PENDING), 0, b, 0)
        }),
        ("unknown before running", |a, b| {
            (with_phase(a, PHASE_UNKNOWN), 0, b, 0)
        }),
        ("not ready before ready", |a, b| {
            let mut a = a;
            a.status.as_mut().unwrap().conditions = None;
            (a, 0, b, 0)
        }),
        ("lower cost first", |a, b| (with_cost(a, "-1"), 0, b, 0)),
        ("higher rank first", |a, b| (a, 2, b, 1)),
        ("more recently ready first", |a, b| {
            (ready(a, Some(ago(1))), 0, b, 0)
        }),
        ("more restarts first", |a, b| (restarts(a, 1), 0, b, 0)),
        ("more sidecar restarts first", |a, b| {
            (with_sidecar(a, 1), 0, with_sidecar(b, 0), 0)
        }),
        ("newer first", |a, b| (created(a, ago(1)), 0, b, 0)),
    ];
    for (what, tweak) in steps {
        let (a, ra, b, rb) = tweak(base(), base());
        assert!(less(&a, ra, &b, rb), "{what}");
        assert!(!less(&b, rb, &a, ra), "{what} (reversed)");
    }
    assert!(!less(&base(), 0, &base(), 0));
}

#[test]
fn step_precedence() {
    // Readiness beats cost.
    let not_ready_expensive = with_cost(scheduled("a", PHASE_RUNNING), "1000");
    let ready_cheap = with_cost(ready_pod("b", Some(now())), "-1000");
    assert!(less(&not_ready_expensive, 0, &ready_cheap, 0));
    // Cost beats rank.
    let cheap = with_cost(ready_pod("a", Some(now())), "1");
    let dear = with_cost(ready_pod("b", Some(now())), "2");
    assert!(less(&cheap, 0, &dear, 5));
    // Rank beats ready time and restarts.
    let old_calm = ready_pod("a", Some(month_ago()));
    let new_crashy = restarts(ready_pod("b", Some(now())), 50);
    assert!(less(&old_calm, 3, &new_crashy, 2));
    // Ready time beats restarts.
    assert!(less(
        &ready_pod("a", Some(ago(1))),
        0,
        &restarts(ready_pod("b", Some(month_ago())), 9),
        0
    ));
}

#[test]
fn malformed_cost_counts_as_zero() {
    let malformed = with_cost(ready_pod("a", Some(now())), "+10");
    let negative = with_cost(ready_pod("b", Some(now())), "-1");
    let none = ready_pod("c", Some(now()));
    assert!(less(&negative, 0, &malformed, 0));
    assert!(!less(&malformed, 0, &none, 0));
    assert!(!less(&none, 0, &malformed, 0));
    assert!(less(
        &none,
        0,
        &with_cost(ready_pod("d", Some(now())), "5"),
        0
    ));
}

#[test]
fn logarithmic_buckets() {
    let n = now();
    let ns = |d: i64| n - SignedDuration::from_nanos(d);
    assert_eq!(logarithmic_rank(n, n), -1);
    assert_eq!(logarithmic_rank(n + SignedDuration::from_secs(1), n), -1);
    assert_eq!(logarithmic_rank(ns(1), n), 0);
    assert_eq!(logarithmic_rank(ns(2), n), 1);
    assert_eq!(logarithmic_rank(ns(3), n), 1);
    assert_eq!(logarithmic_rank(ns(4), n), 2);
    assert_eq!(logarithmic_rank(ns(1023), n), 9);
    assert_eq!(logarithmic_rank(ns(1024), n), 10);
    assert_eq!(logarithmic_rank(ago(5), n), 44);
    assert_eq!(logarithmic_rank(ago(8), n), 44);
    assert_eq!(logarithmic_rank(ago(10), n), 45);
    assert_eq!(logarithmic_rank(Timestamp::MIN, Timestamp::MAX), 69);
}

#[test]
fn same_bucket_ties_go_to_the_smaller_uid() {
    let five = with_uid(ready_pod("five", Some(ago(5))), "b");
    let eight = with_uid(ready_pod("eight", Some(ago(8))), "a");
    // Same bucket: the UID decides, not which is more recent.
    assert!(less(&eight, 0, &five, 0));
    assert!(!less(&five, 0, &eight, 0));
    // Different buckets: recency decides, whatever the UIDs.
    let two = with_uid(ready_pod("two", Some(ago(2))), "z");
    assert!(less(&two, 0, &eight, 0));
    // Same raw ready time: falls through to restarts, not to the UID.
    let calm = with_uid(ready_pod("calm", Some(ago(5))), "a");
    let crashy = restarts(with_uid(ready_pod("crashy", Some(ago(5))), "b"), 1);
    assert!(less(&crashy, 0, &calm, 0));
    // Creation times are bucketed the same way.
    let c5 = with_uid(created(scheduled("c5", PHASE_PENDING), ago(5)), "b");
    let c8 = with_uid(created(scheduled("c8", PHASE_PENDING), ago(8)), "a");
    assert!(less(&c8, 0, &c5, 0));
}

#[test]
fn without_now_or_buckets_plain_recency_decides() {
    let five = with_uid(ready_pod("five", Some(ago(5))), "b");
    let eight = with_uid(ready_pod("eight", Some(ago(8))), "a");
    let flat = RankingOptions::default().with_logarithmic_scale_down(false);
    assert!(deletes_before(&five, 0, &eight, 0, Some(now()), flat));
    assert!(deletes_before(
        &five,
        0,
        &eight,
        0,
        None,
        RankingOptions::default()
    ));
    assert!(!deletes_before(
        &eight,
        0,
        &five,
        0,
        None,
        RankingOptions::default()
    ));
    // A missing ready time is "most recent" in every mode.
    let no_ltt = ready_pod("x", None);
    assert!(less(&no_ltt, 0, &five, 0));
    let mut ranked = ActivePodsWithRanks::new(vec![eight, five], vec![], now()).with_options(flat);
    ranked.now = None;
    ranked.sort();
    assert_eq!(name(&ranked.pods[0]), "five");
}

#[test]
fn active_pods_with_ranks_keeps_ranks_in_step() {
    let pods = vec![
        ready_pod("a", Some(now())),
        ready_pod("b", Some(now())),
        ready_pod("c", Some(now())),
    ];
    let mut ranked = ActivePodsWithRanks::new(pods, vec![1, 3], now());
    assert_eq!(ranked.rank(2), 0);
    assert!(ranked.less(1, 0));
    assert!(!ranked.less(0, 7));
    ranked.sort();
    let names: Vec<&str> = ranked.pods.iter().map(name).collect();
    assert_eq!(names, ["b", "a", "c"]);
    assert_eq!(ranked.ranks, [3, 1, 0]);
}

#[test]
fn colocation_rank_counts_active_related_pods_per_node() {
    let on = |name: &str, node: Option<&str>, phase: &str| {
        let p = with_phase(pod(name), phase);
        match node {
            Some(n) => with_node(p, n),
            None => p,
        }
    };
    let related = vec![
        on("r1", Some("n1"), PHASE_RUNNING),
        on("r2", Some("n1"), PHASE_RUNNING),
        on("r3", Some("n1"), PHASE_PENDING),
        on("r4", Some("n1"), PHASE_FAILED),
        on("r5", Some("n1"), PHASE_SUCCEEDED),
        on("r6", Some("n2"), PHASE_RUNNING),
        on("r7", None, PHASE_PENDING),
        on("r8", None, PHASE_PENDING),
    ];
    let mut deleting = on("r9", Some("n2"), PHASE_RUNNING);
    deleting.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let mut related = related;
    related.push(deleting);

    let to_rank = vec![
        on("a", Some("n1"), PHASE_RUNNING),
        on("b", Some("n2"), PHASE_RUNNING),
        on("c", None, PHASE_PENDING),
        on("d", Some("n3"), PHASE_RUNNING),
    ];
    assert_eq!(
        rank_by_related_pods_on_same_node(&to_rank, &related),
        [3, 1, 2, 0]
    );
    assert_eq!(
        rank_by_related_pods_on_same_node(&to_rank, &[] as &[Pod]),
        [0, 0, 0, 0]
    );
}

#[test]
fn pods_to_delete_prefers_doubled_up_nodes() {
    let p = |name: &str, node: &str| ready(with_node(pod(name), node), Some(month_ago()));
    let pods = vec![
        p("alone", "n1"),
        p("crowded-1", "n2"),
        p("crowded-2", "n2"),
        p("other", "n3"),
    ];
    let doomed = pods_to_delete(pods.clone(), &pods, 1, now());
    assert!(name(&doomed[0]).starts_with("crowded"));
    let doomed = pods_to_delete(pods.iter().collect(), &pods, 2, now());
    let mut names: Vec<&str> = doomed.iter().map(|p| name(p)).collect();
    names.sort_unstable();
    assert_eq!(names, ["crowded-1", "crowded-2"]);
    // Asking for all (or more) keeps the input order, unsorted.
    let all = pods_to_delete(pods.clone(), &pods, 4, now());
    assert_eq!(all, pods);
    assert_eq!(pods_to_delete(pods.clone(), &pods, 10, now()), pods);
    assert!(pods_to_delete(pods.clone(), &pods, 0, now()).is_empty());
}

#[test]
fn logging_order_prefers_long_running_ready_pods() {
    let then = month_ago();
    let expected = [
        restarts(ready_pod("ready-long-crashy", Some(then)), 5),
        ready_pod("ready-long", Some(then)),
        ready_pod("ready-recent", Some(now())),
        ready_pod("ready-no-ltt", None),
        scheduled("running-not-ready", PHASE_RUNNING),
        scheduled("unknown", PHASE_UNKNOWN),
        created(scheduled("pending-old", PHASE_PENDING), then),
        created(scheduled("pending-new", PHASE_PENDING), now()),
        scheduled("pending-no-creation", PHASE_PENDING),
        with_phase(pod("unscheduled"), PHASE_PENDING),
    ];
    for seed in 0..10 {
        let input = shuffled(&expected, seed);
        let order = sort_by_less(input.len(), |i, j| logs_before(&input[i], &input[j]));
        let got: Vec<&str> = order.iter().map(|&i| name(&input[i])).collect();
        let want: Vec<&str> = expected.iter().map(name).collect();
        assert_eq!(got, want, "seed {seed}");
    }
}
