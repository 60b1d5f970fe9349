//! Sharding through the manager (`--shard-ring`): three managers on the
//! in-process test cluster, each with a controller declared the usual way
//! (`builder_for` + `add_controller`) and one declared on the manager's
//! factory and run by hand (as the ReplicaSet binary does), and no
//! sharding code of their own. The owners are split between them, no
//! owner is synced by two managers at once, and a manager shut down
//! releases its Lease so the others take its owners over at once. Real
//! time with short leases (3 s), like `shard.rs`.
#![allow(clippy::unwrap_used)]

mod shard_support;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_runtime::manager::{
    ConfigError, FnRunnable, Manager, ManagerConfig, ManagerError, ManagerStatus, ShardingConfig,
    WakeupBatching,
};
use ctrlkit_runtime::shard::{RING_LABEL, ShardMember};
use ctrlkit_runtime::{Action, Controller, ObjectKey};
use ctrlkit_testcluster::TestCluster;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::ListParams;
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use shard_support::{cluster_with_owners, until};

type Error = Box<dyn std::error::Error + Send + Sync>;

const RING: &str = "cms";
const LEASES: &str = "ring";
const OWNERS: usize = 150;

/// Who syncs what, per controller: a sync of an owner that another
/// manager is syncing at the same moment is a violation.
#[derive(Default)]
struct Checker {
    holders: Mutex<HashMap<(String, ObjectKey), String>>,
    /// The last manager that synced each owner, per controller.
    last: Mutex<HashMap<(String, ObjectKey), String>>,
    violations: AtomicUsize,
}

impl Checker {
    /// The owners `controller` synced, with their last syncer.
    fn synced_by(&self, controller: &str) -> HashMap<ObjectKey, String> {
        self.last
            .lock()
            .iter()
            .filter(|((c, _), _)| c == controller)
            .map(|((_, k), m)| (k.clone(), m.clone()))
            .collect()
    }
}

struct Ctx {
    manager: String,
    controller: String,
    checker: Arc<Checker>,
}

async fn reconcile(
    key: ObjectKey,
    _cm: Option<Arc<ConfigMap>>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let id = (ctx.controller.clone(), key);
    {
        let mut holders = ctx.checker.holders.lock();
        if let Some(other) = holders.insert(id.clone(), ctx.manager.clone()) {
            eprintln!(
                "VIOLATION: {id:?} synced by {} while {other} syncs it",
                ctx.manager
            );
            ctx.checker.violations.fetch_add(1, Ordering::SeqCst);
        }
        ctx.checker
            .last
            .lock()
            .insert(id.clone(), ctx.manager.clone());
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    ctx.checker.holders.lock().remove(&id);
    Ok(Action::requeue_after(Duration::from_millis(500)))
}

fn sharding(identity: &str) -> ShardingConfig {
    let mut sharding = ShardingConfig::new(RING, LEASES);
    sharding.identity = identity.to_owned();
    sharding.lease_duration = Duration::from_secs(3);
    sharding.renew_deadline = Duration::from_secs(2);
    sharding
}

struct Running {
    member: ShardMember,
    batching: WakeupBatching,
    status: ManagerStatus,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ManagerError>>,
}

/// A sharded manager with the two controllers; returns once it runs.
fn start(cluster: &TestCluster, identity: &str, checker: &Arc<Checker>) -> Running {
    let mut config = ManagerConfig::new("cm-controller");
    let batching = WakeupBatching::new(Duration::from_millis(1));
    config.sharding = Some(ShardingConfig {
        wakeup_batching: Some(batching.clone()),
        ..sharding(identity)
    });
    config.shutdown_grace_period = Duration::from_secs(10);
    config.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    let mut manager = Manager::with_client(cluster.client(), config).unwrap();
    let ctx = |controller: &str| {
        Arc::new(Ctx {
            manager: identity.to_owned(),
            controller: controller.to_owned(),
            checker: Arc::clone(checker),
        })
    };
    // The usual way.
    let declared = Controller::<ConfigMap>::builder_for(&mut manager)
        .name("declared")
        .workers(4)
        .build()
        .unwrap();
    manager.add_controller(declared, reconcile, ctx("declared"));
    // On the factory, run by hand: the ReplicaSet binary's way.
    let by_hand = Controller::<ConfigMap>::builder(manager.factory())
        .name("by-hand")
        .workers(4)
        .build()
        .unwrap();
    let by_hand_ctx = ctx("by-hand");
    manager.add(FnRunnable::new("by-hand", move |stop| async move {
        by_hand
            .run(reconcile, by_hand_ctx, stop.cancelled_owned())
            .await
            .map(drop)
    }));
    let member = manager.shard_member().unwrap().clone();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(manager.run(shutdown.clone()));
    Running {
        member,
        batching,
        status,
        shutdown,
        task,
    }
}

/// `GET /metrics` over a plain connection.
async fn http_get_metrics(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}

/// The wakeup window of a member holding `held` of the slots, from a base
/// of 1 ms: the ring over its share.
fn window_for(held: usize) -> Duration {
    let ns = 1_000_000 * ctrlkit_runtime::shard::SLOTS as u64 / held.max(1) as u64;
    Duration::from_nanos(ns).min(Duration::from_millis(8))
}

/// Every owner synced by `controller`, each last by a manager in `by`.
fn all_synced_by(checker: &Checker, controller: &str, by: &[&str]) -> bool {
    let synced = checker.synced_by(controller);
    synced.len() == OWNERS && synced.values().all(|m| by.contains(&m.as_str()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_managers_split_every_controllers_owners_and_a_shut_down_one_hands_over() {
    let cluster = cluster_with_owners(OWNERS, LEASES).await;
    let checker = Arc::new(Checker::default());
    let managers: Vec<Running> = ["m0", "m1", "m2"]
        .iter()
        .map(|id| start(&cluster, id, &checker))
        .collect();
    until(
        "the three members see each other and split the slots",
        || {
            let held: usize = managers.iter().map(|m| m.member.held_slots().len()).sum();
            held == ctrlkit_runtime::shard::SLOTS
                && managers.iter().all(|m| m.member.stats().members == 3)
        },
    )
    .await;
    // Each member is sent about a third of the events: it waits about
    // three times the base window before its thread sleeps.
    until("each member's wakeup window follows its share", || {
        managers
            .iter()
            .all(|m| m.batching.window() == window_for(m.member.held_slots().len()))
    })
    .await;
    for m in &managers {
        let window = m.batching.window();
        assert!(
            (Duration::from_micros(2_900)..=Duration::from_micros(3_100)).contains(&window),
            "{window:?}"
        );
    }
    until("both controllers synced every owner", || {
        ["declared", "by-hand"]
            .iter()
            .all(|c| checker.synced_by(c).len() == OWNERS)
    })
    .await;
    // Each owner is synced by the manager holding its slot, in both
    // controllers; every manager has a share.
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "apps");
    let uids: HashMap<String, String> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|c| (c.metadata.name.unwrap(), c.metadata.uid.unwrap()))
        .collect();
    for controller in ["declared", "by-hand"] {
        let mut shares: HashMap<String, usize> = HashMap::new();
        for (key, manager) in checker.synced_by(controller) {
            let holder = ["m0", "m1", "m2"]
                .iter()
                .zip(&managers)
                .find(|(_, m)| m.member.holds_uid(&uids[&key.name]))
                .map(|(id, _)| *id)
                .unwrap();
            assert_eq!(
                manager, holder,
                "{controller}: {key} synced by a non-holder"
            );
            *shares.entry(manager).or_default() += 1;
        }
        assert_eq!(shares.len(), 3, "{controller}: {shares:?}");
        assert!(
            shares.values().all(|n| (20..=80).contains(n)),
            "{controller}: {shares:?}"
        );
    }
    // Counted again at least once per renew period: both controllers are
    // attached.
    until("the owners held to count both controllers' owners", || {
        managers
            .iter()
            .map(|m| m.member.stats().owners_held)
            .sum::<usize>()
            == 2 * OWNERS
    })
    .await;
    // The member's metrics are on the manager's /metrics, and it is ready.
    let status = &managers[1].status;
    assert!(status.is_ready());
    let addr = status.endpoints().await.unwrap().metrics.unwrap();
    let metrics = http_get_metrics(addr).await;
    assert!(
        metrics.contains(r#"ctrlkit_shard_slots_held{ring="cms",member="cms-m1"}"#),
        "{metrics}"
    );

    // A graceful shutdown drains, releases and deletes the Lease: the
    // others take its owners over without waiting for it to expire.
    let mut managers = managers.into_iter();
    let first = managers.next().unwrap();
    let rest: Vec<Running> = managers.collect();
    checker.last.lock().clear();
    first.shutdown.cancel();
    first.task.await.unwrap().unwrap();
    let leases: Api<Lease> = Api::namespaced(cluster.client(), LEASES);
    let left: HashSet<String> = leases
        .list(&ListParams::default().labels(&format!("{RING_LABEL}={RING}")))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|l| l.metadata.name.unwrap())
        .collect();
    assert_eq!(
        left,
        HashSet::from(["cms-m1".to_owned(), "cms-m2".to_owned()])
    );
    until("the other two sync every owner", || {
        ["declared", "by-hand"]
            .iter()
            .all(|c| all_synced_by(&checker, c, &["m1", "m2"]))
    })
    .await;
    until("the other two wait twice the base window", || {
        // Balanced to one slot: 512 each.
        rest.iter().all(|m| {
            m.member.held_slots().len() == 512 && m.batching.window() == Duration::from_millis(2)
        })
    })
    .await;
    for m in rest {
        m.shutdown.cancel();
        m.task.await.unwrap().unwrap();
    }
    assert_eq!(checker.violations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn sharding_is_checked_before_anything_starts() {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let mut config = ManagerConfig::new("m");
    config.sharding = Some(sharding("a"));
    config.leader_election = Some(ctrlkit_runtime::manager::LeaderElectionConfig::new(
        "m", "ns",
    ));
    let err = Manager::with_client(client.clone(), config.clone()).unwrap_err();
    assert!(
        matches!(
            err,
            ManagerError::Config(ConfigError::ShardingWithLeaderElection)
        ),
        "{err:?}"
    );
    config.leader_election = None;
    for (change, needle) in [
        (
            (|s: &mut ShardingConfig| s.ring = "Bad_Ring".into()) as fn(&mut ShardingConfig),
            "not a valid object name",
        ),
        (|s| s.identity = String::new(), "must not be empty"),
        (
            |s| s.renew_deadline = Duration::from_secs(3),
            "renew deadline",
        ),
    ] {
        let mut bad = config.clone();
        change(bad.sharding.as_mut().unwrap());
        let err = Manager::with_client(client.clone(), bad).unwrap_err();
        assert!(err.is_config(), "{err:?}");
        let chain = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(chain.contains(needle), "{chain}");
    }
    // A valid one: the member exists.
    let manager = Manager::with_client(client, config).unwrap();
    assert_eq!(manager.shard_member().unwrap().lease_name(), "cms-a");
}

/// A sharded manager's child controls label each child with its owner's
/// slot (what each member's child informers select on); an unsharded
/// manager's write no label.
#[tokio::test]
async fn a_sharded_managers_child_controls_label_children_with_their_owners_slot() {
    use ctrlkit_runtime::child::{ChildControl, controller_ref_for};
    use ctrlkit_runtime::shard::{SLOT_LABEL, slot_label_value};
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::api::PostParams;

    let cluster = TestCluster::start(ctrlkit_testcluster::TestClusterConfig::default())
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    let owner: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "owner"}})).unwrap();
    let owner = cms.create(&PostParams::default(), &owner).await.unwrap();
    let controller_ref = controller_ref_for(&owner).unwrap();
    let reference = ObjectReference {
        name: owner.metadata.name.clone(),
        namespace: Some("default".into()),
        uid: owner.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    for (sharded, name) in [(true, "labelled"), (false, "plain")] {
        let mut config = ManagerConfig::new("m");
        config.sharding = sharded.then(|| sharding(name));
        let manager = Manager::with_client(cluster.client(), config).unwrap();
        assert_eq!(manager.child_labeller().is_some(), sharded);
        let template: ConfigMap = serde_json::from_value(
            serde_json::json!({"metadata": {"name": name, "labels": {"app": "web"}}}),
        )
        .unwrap();
        let created = manager
            .child_control::<ConfigMap>("m")
            .create("default", &template, &reference, &controller_ref)
            .await
            .unwrap();
        let labels = created.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("web"));
        let want = sharded.then(|| slot_label_value(&controller_ref.uid));
        assert_eq!(labels.get(SLOT_LABEL), want.as_ref(), "{name}");
    }
    cluster.shutdown().await;
}
