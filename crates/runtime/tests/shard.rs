//! Sharded controllers on the in-process test cluster: members of a ring
//! split the owners, hand slots over when members die, join or leave, and
//! a checker inside the reconcile asserts no owner is ever synced by two
//! members at once. Real time with short leases (2 s): the protocol's
//! safety does not depend on timing, only how soon slots move does.
#![allow(clippy::unwrap_used)]

mod shard_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_runtime::shard::{
    CHECK_ANNOTATION, CLAIMS_ANNOTATION, RING_LABEL, SLOTS, ShardConfig, ShardMember, ShardMetrics,
    SlotSet,
};
use ctrlkit_runtime::{Action, Controller, ObjectKey};
use ctrlkit_testcluster::TestCluster;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use shard_support::{
    Member, SyncChecker, cluster_with_owners, covers, sample_busy_overlaps, until,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

const RING: &str = "cms";
const OWNERS: usize = 240;

struct Ctx {
    member: String,
    checker: Arc<SyncChecker>,
    /// How long each sync takes.
    sync_time: Duration,
    /// When a synced owner comes back.
    requeue: Duration,
}

async fn reconcile(
    key: ObjectKey,
    _cm: Option<Arc<ConfigMap>>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    // Held until the sync ends, however it ends: a killed member's syncs
    // are cancelled mid-way, and a dead process syncs nothing.
    let _syncing = ctx.checker.enter(&key, &ctx.member);
    // Long enough for overlapping syncs to be caught.
    tokio::time::sleep(ctx.sync_time).await;
    Ok(Action::requeue_after(ctx.requeue))
}

/// How a member's controller works.
#[derive(Clone, Copy)]
struct Pace {
    workers: usize,
    sync_time: Duration,
    requeue: Duration,
}

impl Pace {
    const FAST: Pace = Pace {
        workers: 4,
        sync_time: Duration::from_millis(5),
        requeue: Duration::from_millis(700),
    };
    /// Workers mostly busy: every handover happens with syncs in flight.
    const SLOW: Pace = Pace {
        workers: 16,
        sync_time: Duration::from_millis(200),
        requeue: Duration::from_secs(2),
    };
}

impl Member {
    fn start(cluster: &TestCluster, namespace: &str, id: &str, checker: &Arc<SyncChecker>) -> Self {
        Self::start_with(cluster, namespace, id, checker, None, Pace::FAST)
    }

    /// A member at [`Pace::SLOW`].
    fn start_slow(cluster: &TestCluster, id: &str, checker: &Arc<SyncChecker>) -> Self {
        Self::start_with(cluster, "default", id, checker, None, Pace::SLOW)
    }

    fn start_with(
        cluster: &TestCluster,
        namespace: &str,
        id: &str,
        checker: &Arc<SyncChecker>,
        metrics: Option<&ShardMetrics>,
        pace: Pace,
    ) -> Self {
        let client = cluster.client();
        let mut config = ShardConfig::new(namespace, RING, id)
            .lease_duration(Duration::from_secs(2))
            .renew_deadline(Duration::from_millis(1500))
            .renew_period(Duration::from_millis(250))
            // These owners never change after they are made, so the cache
            // stays behind the Leases; a gained slot starts once the cache
            // matches a consistent read (at once), the timeout is a bound.
            // Well above that read's time on a loaded machine: the test
            // asserts that no handover waited the timeout out.
            .catch_up_timeout(Duration::from_secs(3));
        if let Some(m) = metrics {
            config = config.metrics(m);
        }
        let member = ShardMember::new(config).unwrap();
        let factory = SharedInformerFactory::new(client.clone());
        let controller = Controller::<ConfigMap>::builder(&factory)
            .name(format!("cm-{id}"))
            .namespace("apps")
            .workers(pace.workers)
            .shard(&member)
            .build()
            .unwrap();
        factory.start();
        let stop = CancellationToken::new();
        let ring = tokio::spawn(member.clone().run(client, stop.clone().cancelled_owned()));
        let ctx = Arc::new(Ctx {
            member: id.to_owned(),
            checker: Arc::clone(checker),
            sync_time: pace.sync_time,
            requeue: pace.requeue,
        });
        let run = controller.run(reconcile, ctx, stop.clone().cancelled_owned());
        let controller = tokio::spawn(async move {
            run.await.unwrap();
        });
        Self {
            member,
            stop,
            factory,
            ring,
            controller,
            feeder: None,
        }
    }
}

async fn claims_on_leases(cluster: &TestCluster, namespace: &str) -> BTreeMap<String, String> {
    let leases: Api<Lease> = Api::namespaced(cluster.client(), namespace);
    leases
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|l| {
            let a = l.metadata.annotations?;
            Some((l.metadata.name?, a.get(CLAIMS_ANNOTATION)?.clone()))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_split_the_owners_and_a_killed_members_slots_move_after_its_lease_expires() {
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = Member::start_with(
        &cluster,
        "default",
        "a",
        &checker,
        Some(&metrics),
        Pace::FAST,
    );
    let b = Member::start(&cluster, "default", "b", &checker);
    let c = Member::start(&cluster, "default", "c", &checker);
    until("the three members hold every slot", || {
        covers(&[&a, &b, &c])
    })
    .await;
    until("every member counts its owners", || {
        [&a, &b, &c]
            .iter()
            .map(|m| m.member.stats().owners_held)
            .sum::<usize>()
            == OWNERS
    })
    .await;
    for m in [&a, &b, &c] {
        let stats = m.member.stats();
        // A third of 240 each, give or take the hash's luck.
        assert!(
            (50..=110).contains(&stats.owners_held),
            "{}: {stats:?}",
            m.member.lease_name()
        );
        assert!((340..=342).contains(&stats.slots_held), "{stats:?}");
    }
    until("every owner was synced", || {
        checker.owners_synced() == OWNERS
    })
    .await;
    // A member's slots as a KEP-5866 shardSelector: the test cluster lists
    // exactly the owners the member holds.
    for m in [&a, &b, &c] {
        let selector: String = m
            .member
            .held_slots()
            .shard_selector()
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'0'..=b'9' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let uri = format!("/api/v1/namespaces/apps/configmaps?shardSelector={selector}");
        let body = cluster
            .client()
            .request_text(http::Request::get(uri).body(Vec::new()).unwrap())
            .await
            .unwrap();
        let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
        let listed = listed["items"].as_array().unwrap().len();
        assert_eq!(
            listed,
            m.member.stats().owners_held,
            "{}",
            m.member.lease_name()
        );
    }
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"ctrlkit_shard_members{ring="cms",member="cms-a"} 3"#),
        "{text}"
    );
    assert!(text.contains("ctrlkit_shard_syncs_total{"), "{text}");

    // Kill c: its slots stay unsynced until its Lease expires, then move.
    let c_slots = c.member.held_slots();
    let orphaned: Vec<ObjectKey> = (0..OWNERS)
        .map(|i| ObjectKey::new("apps", format!("owner-{i}")))
        .filter(|k| checker.last_syncer(k).as_deref() == Some("c"))
        .collect();
    assert!(!orphaned.is_empty());
    let killed = Instant::now();
    c.kill().await;
    until("a and b hold every slot", || covers(&[&a, &b])).await;
    let moved_after = killed.elapsed();
    // Not before the lease (2 s, counted from the last renewal seen, at
    // most a renew period before the kill) could have expired.
    assert!(
        moved_after >= Duration::from_millis(1700),
        "moved after {moved_after:?}"
    );
    assert!(
        a.member
            .held_slots()
            .union(&b.member.held_slots())
            .intersection(&c_slots)
            == c_slots
    );
    // The owners are quiet (no change since they were made), so the caches
    // never reach the Leases' version; a consistent read shows they hold
    // every owner already, so the gained slots started without waiting
    // out the catch-up timeout.
    assert_eq!(
        a.member.stats().catch_up_timeouts + b.member.stats().catch_up_timeouts,
        0
    );
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(r#"ctrlkit_shard_slots_held{ring="cms",member="cms-a"}"#),
        "{text}"
    );
    until("c's owners are synced again", || {
        orphaned
            .iter()
            .all(|k| matches!(checker.last_syncer(k).as_deref(), Some("a" | "b")))
    })
    .await;
    assert_eq!(checker.violations(), 0);
    a.stop().await;
    b.stop().await;
    assert_eq!(checker.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joining_member_gets_slots_only_after_they_are_acknowledged_and_a_leaving_one_hands_over_at_once()
 {
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let a = Member::start_slow(&cluster, "a", &checker);
    let b = Member::start_slow(&cluster, "b", &checker);
    until("a and b hold every slot", || covers(&[&a, &b])).await;
    // Workers busy with every owner: c joins with syncs in flight.
    until("every owner was synced", || {
        checker.owners_synced() == OWNERS
    })
    .await;

    let c = Member::start_slow(&cluster, "c", &checker);
    let (sampling, sampler) =
        sample_busy_overlaps(vec![a.member.clone(), b.member.clone(), c.member.clone()]);
    until("a, b and c hold every slot", || covers(&[&a, &b, &c])).await;
    assert!(c.member.stats().slots_gained >= 340);
    let released = a.member.stats().slots_released + b.member.stats().slots_released;
    assert!(released >= 340, "a and b acknowledged {released} slots");
    // The Leases say the same: disjoint claims that cover everything.
    let claims = claims_on_leases(&cluster, "default").await;
    let mut union = SlotSet::empty();
    let mut total = 0;
    for text in claims.values() {
        let set: SlotSet = text.parse().unwrap();
        total += set.len();
        union = union.union(&set);
    }
    assert_eq!(union, SlotSet::full(), "{claims:?}");
    assert!(total <= SLOTS + 4, "claims overlap: {claims:?}");

    // A graceful leave: released and deleted, its slots move well before
    // its lease could have expired.
    let left = Instant::now();
    c.stop().await;
    until("a and b hold every slot again", || covers(&[&a, &b])).await;
    assert!(left.elapsed() < Duration::from_secs(10));
    assert!(
        !claims_on_leases(&cluster, "default")
            .await
            .contains_key("cms-c")
    );
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    assert_eq!(checker.violations(), 0);
    a.stop().await;
    b.stop().await;
    assert_eq!(checker.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edited_and_foreign_leases_never_cause_double_syncs() {
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let a = Member::start(&cluster, "default", "a", &checker);
    let b = Member::start(&cluster, "default", "b", &checker);
    until("a and b hold every slot", || covers(&[&a, &b])).await;
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");

    // Someone rewrites b's claims by hand, without the check: the Lease
    // counts as claiming everything, and b writes its own claims back.
    let edit = json!({"metadata": {"annotations": {CLAIMS_ANNOTATION: "0-3"}}});
    leases
        .patch("cms-b", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lease = leases.get("cms-b").await.unwrap();
        let ann = lease.metadata.annotations.unwrap();
        if ann.get(CLAIMS_ANNOTATION).map(String::as_str) != Some("0-3")
            && ann.contains_key(CHECK_ANNOTATION)
        {
            break;
        }
        assert!(Instant::now() < deadline, "b never rewrote its Lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    until("a and b hold every slot after the edit", || {
        covers(&[&a, &b])
    })
    .await;

    // A Lease labelled with the ring by hand, never renewed: a member with
    // unreadable claims until it expires; then the ring is whole again.
    let phantom: Lease = serde_json::from_value(json!({
        "metadata": {"name": "cms-phantom", "labels": {RING_LABEL: RING}},
        "spec": {"holderIdentity": "nobody", "leaseDurationSeconds": 1},
    }))
    .unwrap();
    leases
        .create(&PostParams::default(), &phantom)
        .await
        .unwrap();
    until("a and b see the phantom", || a.member.stats().members == 3).await;
    until("a and b hold every slot once the phantom expired", || {
        covers(&[&a, &b])
    })
    .await;

    // The same ring name in another namespace is another ring: it sees
    // none of these members (a ring is namespace/name), and syncs the same
    // owners (hence its own checker; see docs/sharding.md).
    let x = Member::start(&cluster, "other", "x", &Arc::new(SyncChecker::default()));
    until("x alone holds every slot of its ring", || {
        x.member.held_slots() == SlotSet::full() && x.member.stats().members == 1
    })
    .await;
    assert_eq!(a.member.stats().members, 2);
    x.kill().await;

    a.stop().await;
    b.stop().await;
    assert_eq!(checker.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_failing_intermittently_fence_members_but_never_double_sync() {
    use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig};

    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let a = Member::start(&cluster, "default", "a", &checker);
    let b = Member::start(&cluster, "default", "b", &checker);
    let c = Member::start(&cluster, "default", "c", &checker);
    until("the three members hold every slot", || {
        covers(&[&a, &b, &c])
    })
    .await;
    let (sampling, sampler) =
        sample_busy_overlaps(vec![a.member.clone(), b.member.clone(), c.member.clone()]);

    let gained = || -> u64 {
        [&a, &b, &c]
            .iter()
            .map(|m| m.member.stats().slots_gained)
            .sum()
    };
    let gained_before = gained();
    // Every Lease write fails for longer than the renew deadline: all
    // members stop everything (and look expired to each other); then most
    // writes fail for a while, so members come back one by one, hand slots
    // to each other and now and then miss a renewal.
    let leases_failing = |rate: f64| FaultConfig {
        errors: vec![
            ErrorRule::verb("patch", rate, ErrorKind::InternalError).for_resource("leases"),
        ],
        ..FaultConfig::default()
    };
    cluster.faults().set_config(leases_failing(1.0));
    let cut_off = Instant::now();
    until(
        "every member stopped syncing (renew deadline passed)",
        || {
            [&a, &b, &c]
                .iter()
                .all(|m| m.member.busy_slots().is_empty())
        },
    )
    .await;
    // Not before the renew deadline (1.5 s after the last renewal sent,
    // at most a renew period before the cut).
    assert!(cut_off.elapsed() >= Duration::from_millis(1200));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    cluster.faults().set_config(leases_failing(0.8));
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.faults().clear();

    until("the ring is whole again", || covers(&[&a, &b, &c])).await;
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    let failures: u64 = [&a, &b, &c]
        .iter()
        .map(|m| m.member.stats().renew_failures)
        .sum();
    assert!(failures > 10, "{failures} failed renewals");
    // Every slot stopped and started again, through the protocol.
    let moved = gained() - gained_before;
    eprintln!("slots gained during the faults: {moved}");
    assert!(moved >= SLOTS as u64, "only {moved} slots restarted");
    for m in [a, b, c] {
        m.stop().await;
    }
    assert_eq!(checker.violations(), 0);
}

/// A member's Lease writes as kube-apiserver's audit log shows them: a
/// fresh member creates its Lease (no 404 from a patch first), one started
/// again after a crash patches the Lease it left, one started again after
/// a graceful leave creates it anew. No Lease request is answered with an
/// error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_members_lease_writes_are_never_answered_with_errors() {
    let cluster = cluster_with_owners(10, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let leases = |verb| cluster.requests().count(verb, "leases");
    let holds_all = |m: &Member| m.member.held_slots() == SlotSet::full();

    let a = Member::start(&cluster, "default", "a", &checker);
    until("a holds every slot", || holds_all(&a)).await;
    assert_eq!(leases("create").success, 1);
    a.kill().await;

    let patched = leases("patch").success;
    let a = Member::start(&cluster, "default", "a", &checker);
    until("a, started again, holds every slot", || holds_all(&a)).await;
    until("a renewed the Lease it left", || {
        leases("patch").success > patched
    })
    .await;
    assert_eq!(leases("create").success, 1, "the Lease left was not reused");
    a.stop().await;

    let a = Member::start(&cluster, "default", "a", &checker);
    until("a, joined anew, holds every slot", || holds_all(&a)).await;
    assert_eq!(leases("create").success, 2);
    a.stop().await;

    let requests = cluster.requests();
    for (key, counts) in requests.iter().filter(|(k, _)| k.resource == "leases") {
        assert_eq!(
            counts.client_error + counts.server_error,
            0,
            "{} leases: {counts:?}",
            key.verb
        );
    }
    assert_eq!(checker.violations(), 0);
}
