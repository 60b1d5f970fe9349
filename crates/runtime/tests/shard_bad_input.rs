//! Bad input to a shard ring (issue 16, "Bad input"): two rings of one
//! name in different namespaces, Leases edited by hand (claims or check
//! garbled, holder changed, label removed), clock skew between members,
//! and renewals failing intermittently. Each must leave no owner synced by
//! two members at once (a checker in the reconcile and a sampler of the
//! members' busy slots), and say what happened: a warning in the logs and
//! a counter in the shard metrics. Real time with short leases (2 s), as
//! `shard.rs`; each test its own ring name, so the captured logs (one
//! subscriber for the whole binary) tell the tests apart.
#![allow(clippy::unwrap_used)]

mod shard_support;

use std::io;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_runtime::shard::{
    CHECK_ANNOTATION, CLAIMS_ANNOTATION, RELEASED_ANNOTATION, RING_LABEL, ShardConfig, ShardMember,
    ShardMetrics, SlotSet, fnv1a_64,
};
use ctrlkit_runtime::{Action, Controller, ObjectKey};
use ctrlkit_testcluster::TestCluster;
use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use shard_support::{
    Member, SyncChecker, cluster_with_owners, covers, sample_busy_overlaps, until,
};

type Error = Box<dyn std::error::Error + Send + Sync>;

const OWNERS: usize = 120;

// ----- log capture -------------------------------------------------------

/// Every warning the runtime logs, from every test of this binary.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Logs {
        self.clone()
    }
}

/// The captured logs; installs the process-wide subscriber on first use
/// (the members' tasks run on the runtime's worker threads, so a
/// thread-local one would miss them).
fn logs() -> &'static Logs {
    static LOGS: OnceLock<Logs> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("ctrlkit_runtime=warn"))
            .with_writer(logs.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::set_global_default(subscriber).unwrap();
        logs
    })
}

impl Logs {
    /// Warnings about ring `ring` that contain `needle`.
    fn warned(&self, ring: &str, needle: &str) -> bool {
        let ring = format!("ring={ring} ");
        String::from_utf8_lossy(&self.0.lock())
            .lines()
            .any(|l| l.contains("WARN") && l.contains(&ring) && l.contains(needle))
    }
}

// ----- members -----------------------------------------------------------

struct Ctx {
    member: String,
    checker: Arc<SyncChecker>,
}

async fn reconcile(
    key: ObjectKey,
    _cm: Option<Arc<ConfigMap>>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let _syncing = ctx.checker.enter(&key, &ctx.member);
    // Long enough for overlapping syncs to be caught.
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(Action::requeue_after(Duration::from_millis(500)))
}

/// Member `id` of ring `ring` (Leases in `namespace`), syncing the
/// ConfigMaps of `apps` through `checker`.
fn start(
    cluster: &TestCluster,
    namespace: &str,
    ring: &str,
    id: &str,
    checker: &Arc<SyncChecker>,
    metrics: &ShardMetrics,
) -> Member {
    logs();
    let client = cluster.client();
    let config = ShardConfig::new(namespace, ring, id)
        .lease_duration(Duration::from_secs(2))
        .renew_deadline(Duration::from_millis(1500))
        .renew_period(Duration::from_millis(250))
        .catch_up_timeout(Duration::from_millis(300))
        .metrics(metrics);
    let member = ShardMember::new(config).unwrap();
    let factory = SharedInformerFactory::new(client.clone());
    let controller = Controller::<ConfigMap>::builder(&factory)
        .name(format!("cm-{namespace}-{id}"))
        .namespace("apps")
        .workers(4)
        .shard(&member)
        .build()
        .unwrap();
    factory.start();
    let stop = CancellationToken::new();
    let ring_task = tokio::spawn(member.clone().run(client, stop.clone().cancelled_owned()));
    let ctx = Arc::new(Ctx {
        member: format!("{namespace}/{id}"),
        checker: Arc::clone(checker),
    });
    let run = controller.run(reconcile, ctx, stop.clone().cancelled_owned());
    let controller = tokio::spawn(async move {
        run.await.unwrap();
    });
    Member {
        member,
        stop,
        factory,
        ring: ring_task,
        controller,
        feeder: None,
    }
}

fn metrics_text(registry: &Registry) -> String {
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, registry).unwrap();
    text
}

fn anomalies(m: &Member) -> u64 {
    m.member.stats().lease_anomalies
}

async fn patch(leases: &Api<Lease>, name: &str, patch: serde_json::Value) {
    leases
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Every patch of the Lease `name` (its member's renewals) fails.
fn lease_patches_fail(name: &str) -> FaultConfig {
    FaultConfig::none().with_error(
        ErrorRule::verb("patch", 1.0, ErrorKind::InternalError)
            .for_resource("leases")
            .for_name(name),
    )
}

/// Waits until `name`'s Lease satisfies `cond` (as the member rewrites it).
async fn until_lease(
    leases: &Api<Lease>,
    name: &str,
    what: &str,
    mut cond: impl FnMut(&Lease) -> bool,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(lease)) = leases.get_opt(name).await
            && cond(&lease)
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// ----- the tests ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_ring_name_in_two_namespaces_is_two_independent_rings() {
    const RING: &str = "twin";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let (one, two) = (
        Arc::new(SyncChecker::default()),
        Arc::new(SyncChecker::default()),
    );
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    // Member `a` in both: the same Lease name, `twin-a`, in each namespace.
    let a1 = start(&cluster, "default", RING, "a", &one, &metrics);
    let b1 = start(&cluster, "default", RING, "b", &one, &metrics);
    let mut other_metrics_registry = Registry::default();
    let other_metrics = ShardMetrics::register(&mut other_metrics_registry);
    let a2 = start(&cluster, "other", RING, "a", &two, &other_metrics);
    let c2 = start(&cluster, "other", RING, "c", &two, &other_metrics);
    until("each ring's members hold every slot", || {
        covers(&[&a1, &b1]) && covers(&[&a2, &c2])
    })
    .await;
    until("both rings synced owners", || {
        one.syncs() > 0 && two.syncs() > 0
    })
    .await;

    // A hand edit in one ring is seen by that ring only.
    let default_leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    patch(
        &default_leases,
        "twin-b",
        json!({"metadata": {"annotations": {CHECK_ANNOTATION: "0000"}}}),
    )
    .await;
    until("a of the default ring saw the garbled Lease", || {
        anomalies(&a1) > 0
    })
    .await;
    until_lease(&default_leases, "twin-b", "b rewrote its Lease", |l| {
        l.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CHECK_ANNOTATION))
            != Some(&"0000".to_owned())
    })
    .await;
    until("the default ring is whole again", || covers(&[&a1, &b1])).await;

    // Killing `a` of the other ring moves slots in that ring only: its
    // namesake in the default ring keeps its Lease and its slots.
    let before = (a1.member.held_slots(), b1.member.held_slots());
    let gained_before = a1.member.stats().slots_gained + b1.member.stats().slots_gained;
    a2.kill().await;
    until("c alone holds the other ring", || covers(&[&c2])).await;
    assert_eq!((a1.member.held_slots(), b1.member.held_slots()), before);
    assert_eq!(
        a1.member.stats().slots_gained + b1.member.stats().slots_gained,
        gained_before
    );
    assert!(covers(&[&a1, &b1]));
    assert!(default_leases.get_opt("twin-a").await.unwrap().is_some());
    assert_eq!(anomalies(&c2), 0, "the other ring saw nothing wrong");

    for m in [a1, b1, c2] {
        m.stop().await;
    }
    assert_eq!(one.violations(), 0);
    assert_eq!(two.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hand_edited_leases_are_reported_and_never_cause_double_syncs() {
    const RING: &str = "edits";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = start(&cluster, "default", RING, "a", &checker, &metrics);
    let b = start(&cluster, "default", RING, "b", &checker, &metrics);
    let c = start(&cluster, "default", RING, "c", &checker, &metrics);
    until("the members hold every slot", || covers(&[&a, &b, &c])).await;
    let (sampling, sampler) =
        sample_busy_overlaps(vec![a.member.clone(), b.member.clone(), c.member.clone()]);
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");

    // b's check garbled: the others count its Lease as claiming everything
    // and say so; b sees its Lease written by someone else and rewrites it.
    // b's renewals (patches) fail until it has seen the edit: a renewal
    // landing first would overwrite it unseen (the test then failed now
    // and then, with no own_lease_edited for b).
    cluster.faults().set_config(lease_patches_fail("edits-b"));
    loop {
        // A renewal already in flight may still land: read again then.
        let mut lease = leases.get("edits-b").await.unwrap();
        lease
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(CHECK_ANNOTATION.to_owned(), "0000".to_owned());
        match leases.replace("edits-b", &Default::default(), &lease).await {
            Ok(_) => break,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("cannot edit b's Lease: {e}"),
        }
    }
    until("b saw its Lease edited", || {
        metrics_text(&registry).contains(
            r#"ctrlkit_shard_lease_anomalies_total{ring="edits",member="edits-b",reason="own_lease_edited"}"#,
        )
    })
    .await;
    cluster.faults().clear();
    until_lease(&leases, "edits-b", "b rewrote its claims", |l| {
        l.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(CHECK_ANNOTATION))
            != Some(&"0000".to_owned())
    })
    .await;

    // c's holder changed: the others say the holder does not match the
    // name; c rewrites it.
    patch(
        &leases,
        "edits-c",
        json!({"spec": {"holderIdentity": "mallory"}}),
    )
    .await;
    until_lease(&leases, "edits-c", "c rewrote its holder", |l| {
        l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some("c")
    })
    .await;

    // a's ring label removed: it leaves everyone's informer; a says its
    // Lease was removed and puts the label back at its next renewal.
    patch(
        &leases,
        "edits-a",
        json!({"metadata": {"labels": {RING_LABEL: null}}}),
    )
    .await;
    until_lease(&leases, "edits-a", "a relabelled its Lease", |l| {
        l.metadata
            .labels
            .as_ref()
            .and_then(|m| m.get(RING_LABEL))
            .map(String::as_str)
            == Some(RING)
    })
    .await;

    until("the ring is whole again", || covers(&[&a, &b, &c])).await;
    let text = metrics_text(&registry);
    for (member, reason) in [
        ("edits-a", "invalid_claims"),
        ("edits-b", "own_lease_edited"),
        ("edits-a", "holder_mismatch"),
        ("edits-c", "own_lease_edited"),
        ("edits-a", "own_lease_removed"),
    ] {
        let series = format!(
            r#"ctrlkit_shard_lease_anomalies_total{{ring="edits",member="{member}",reason="{reason}"}}"#
        );
        assert!(text.contains(&series), "no {series} in\n{text}");
        assert!(logs().warned(RING, reason), "no warning with {reason}");
    }
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    for m in [a, b, c] {
        m.stop().await;
    }
    assert!(checker.syncs() > 0);
    assert_eq!(checker.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clock_skew_between_members_moves_no_slot() {
    const RING: &str = "skew";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = start(&cluster, "default", RING, "a", &checker, &metrics);
    let b = start(&cluster, "default", RING, "b", &checker, &metrics);
    until("the members hold every slot", || covers(&[&a, &b])).await;
    let held = (a.member.held_slots(), b.member.held_slots());
    let (sampling, sampler) = sample_busy_overlaps(vec![a.member.clone(), b.member.clone()]);
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");

    // b's renewTime as a node whose clock is 25 years behind, then one an
    // hour ahead, rewritten between b's own renewals for two lease
    // durations: a must neither expire b nor keep it alive by the stamp.
    let until_time = tokio::time::Instant::now() + Duration::from_secs(4);
    let mut behind = true;
    while tokio::time::Instant::now() < until_time {
        let stamp = if behind {
            "2001-01-01T00:00:00.000000Z".to_owned()
        } else {
            (k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_hours(1))
                .to_string()
        };
        patch(&leases, "skew-b", json!({"spec": {"renewTime": stamp}})).await;
        behind = !behind;
        assert_eq!(a.member.stats().members, 2, "a lost sight of b");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    assert_eq!(
        (a.member.held_slots(), b.member.held_slots()),
        held,
        "slots moved"
    );
    assert!(covers(&[&a, &b]));
    let series =
        r#"ctrlkit_shard_lease_anomalies_total{ring="skew",member="skew-a",reason="clock_skew"}"#;
    let text = metrics_text(&registry);
    assert!(text.contains(series), "no {series} in\n{text}");
    assert!(logs().warned(RING, "ahead of"));
    assert!(logs().warned(RING, "behind"));
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    a.stop().await;
    b.stop().await;
    assert_eq!(checker.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_failing_intermittently_are_counted_and_never_double_sync() {
    const RING: &str = "renew";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let checker = Arc::new(SyncChecker::default());
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = start(&cluster, "default", RING, "a", &checker, &metrics);
    let b = start(&cluster, "default", RING, "b", &checker, &metrics);
    let c = start(&cluster, "default", RING, "c", &checker, &metrics);
    until("the members hold every slot", || covers(&[&a, &b, &c])).await;
    let (sampling, sampler) =
        sample_busy_overlaps(vec![a.member.clone(), b.member.clone(), c.member.clone()]);

    // Lease writes fail now and then, then most of the time (a member may
    // miss its renew deadline and stop everything, then come back).
    for rate in [0.3, 0.9] {
        cluster.faults().set_config(FaultConfig {
            errors: vec![
                ErrorRule::verb("patch", rate, ErrorKind::InternalError).for_resource("leases"),
            ],
            ..FaultConfig::default()
        });
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    cluster.faults().clear();
    until("the ring is whole again", || covers(&[&a, &b, &c])).await;

    let failures: u64 = [&a, &b, &c]
        .iter()
        .map(|m| m.member.stats().renew_failures)
        .sum();
    assert!(failures > 0);
    let text = metrics_text(&registry);
    assert!(
        text.contains(r#"ctrlkit_shard_renew_failures_total{ring="renew",member="renew-a"}"#),
        "{text}"
    );
    assert!(logs().warned(RING, "cannot renew the shard Lease"));
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    for m in [a, b, c] {
        m.stop().await;
    }
    assert_eq!(checker.violations(), 0);
}

/// A ring Lease's label removed by hand hides its member from the ring's
/// informer, and a member joining afterwards never saw it: it must still
/// not take the hidden member's slots until that Lease would have expired
/// (or shows up again), as the members that saw it vanish do. The hidden
/// member is played by a hand-made Lease claiming every slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joining_does_not_take_the_slots_of_a_lease_hidden_by_hand() {
    const RING: &str = "hidden";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    let check =
        |name: &str, claims: &str| format!("{:016x}", fnv1a_64(&format!("{name}\n{claims}")));
    let hidden: Lease = serde_json::from_value(json!({
        "metadata": {"name": "hidden-x", "annotations": {
            CLAIMS_ANNOTATION: "0-1023", CHECK_ANNOTATION: check("hidden-x", "0-1023"),
        }},
        "spec": {"holderIdentity": "x", "leaseDurationSeconds": 60,
                 "renewTime": k8s_openapi::jiff::Timestamp::now().to_string()},
    }))
    .unwrap();
    leases.create(&Default::default(), &hidden).await.unwrap();

    let checker = Arc::new(SyncChecker::default());
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = start(&cluster, "default", RING, "a", &checker, &metrics);
    // a has joined and renewed its own Lease twice since: it went through
    // many steps of the protocol, each of which may start slots.
    let mut renewals = Vec::new();
    until_lease(&leases, "hidden-a", "a renewed its Lease twice", |l| {
        let at = l.spec.as_ref().and_then(|s| s.renew_time.clone());
        if renewals.last() != Some(&at) {
            renewals.push(at);
        }
        renewals.len() >= 3
    })
    .await;
    assert!(
        a.member.held_slots().is_empty(),
        "took the hidden member's slots"
    );
    assert_eq!(checker.syncs(), 0);

    // The hidden member shows up and leaves gracefully: its slots move.
    patch(
        &leases,
        "hidden-x",
        json!({"metadata": {"labels": {RING_LABEL: RING}, "annotations": {
            CLAIMS_ANNOTATION: "", CHECK_ANNOTATION: check("hidden-x", ""),
            RELEASED_ANNOTATION: "true",
        }}}),
    )
    .await;
    until("a holds every slot", || {
        a.member.held_slots() == SlotSet::full()
    })
    .await;
    until("a syncs", || checker.syncs() > 0).await;
    a.stop().await;
    assert_eq!(checker.violations(), 0);
}

/// A ring Lease deleted by hand shows in no list, yet its member may
/// still be syncing: until its watch shows it the delete (a lagging watch
/// can take a while) and, when its renewals fail, until its renew
/// deadline. A member joining meanwhile sees no one claiming those slots,
/// and must still not start them before one lease duration has passed
/// since it joined. The deleted member's renewals fail here, so the ring
/// stays without it until the faults are cleared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_joining_after_a_lease_was_deleted_by_hand_waits_a_lease_duration() {
    const RING: &str = "deleted";
    let cluster = cluster_with_owners(OWNERS, "other").await;
    let leases: Api<Lease> = Api::namespaced(cluster.client(), "default");
    let checker = Arc::new(SyncChecker::default());
    let mut registry = Registry::default();
    let metrics = ShardMetrics::register(&mut registry);
    let a = start(&cluster, "default", RING, "a", &checker, &metrics);
    until("a holds every slot", || {
        a.member.held_slots() == SlotSet::full()
    })
    .await;
    until("a syncs", || checker.syncs() > 0).await;

    cluster.faults().set_config(lease_patches_fail("deleted-a"));
    leases
        .delete("deleted-a", &Default::default())
        .await
        .unwrap();
    let joined = tokio::time::Instant::now();
    let b = start(&cluster, "default", RING, "b", &checker, &metrics);
    let (sampling, sampler) = sample_busy_overlaps(vec![a.member.clone(), b.member.clone()]);
    until("b holds a slot", || !b.member.held_slots().is_empty()).await;
    // The member's lease duration (2 s) from its join-time list, which
    // came after `joined`.
    assert!(
        joined.elapsed() >= Duration::from_secs(2),
        "b started slots nobody visibly claimed {:?} after joining",
        joined.elapsed()
    );
    until("b holds every slot", || {
        b.member.held_slots() == SlotSet::full()
    })
    .await;
    assert!(logs().warned(RING, "re-creating it at the next renewal"));

    cluster.faults().clear();
    until("a re-created its Lease and the two share the slots", || {
        covers(&[&a, &b])
    })
    .await;
    sampling.cancel();
    assert_eq!(sampler.await.unwrap(), 0, "busy slots overlapped");
    a.stop().await;
    b.stop().await;
    assert_eq!(checker.violations(), 0);
}
