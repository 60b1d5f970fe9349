//! Sharded controllers that create children, on the in-process test
//! cluster: a handover must not make the gaining member create again the
//! children the previous holder created just before it let go, even when
//! the gaining member's child watch lags; and three members split the
//! owners, each creating only its owners' children, a killed member's
//! owners being taken over without a child created twice.
#![allow(clippy::unwrap_used)]

mod shard_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_expectations::ControllerExpectations;
use ctrlkit_informer::{
    Informer, ShardSelectorSupport, SharedInformerFactory, Store, controller_ref,
};
use ctrlkit_runtime::child::{ChildControl, KubeChildControl, controller_ref_for};
use ctrlkit_runtime::shard::{
    SLOT_LABEL, SLOTS, ShardConfig, ShardMember, SlotSet, slot_label_value, slot_labeller,
};
use ctrlkit_runtime::{Action, Controller, ObjectKey, Owns, creation_id};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Resource};
use parking_lot::Mutex;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use shard_support::{Member, covers, until};

type Error = Box<dyn std::error::Error + Send + Sync>;

const RING: &str = "rs";
const NS: &str = "apps";
const CHILDREN: usize = 3;

struct Ctx {
    member: String,
    pods: KubeChildControl<Pod>,
    cache: Store<Pod>,
    expectations: Arc<ControllerExpectations>,
    /// Pods created, by owner UID, by every member.
    creates: Arc<Mutex<HashMap<String, usize>>>,
    /// The members that synced each owner, in order (repeats collapsed).
    synced: Arc<Mutex<HashMap<ObjectKey, Vec<String>>>>,
    /// The pods a member's cache held for an owner when it first synced
    /// it, by owner and member.
    first_look: Arc<Mutex<HashMap<(ObjectKey, String), usize>>>,
}

/// Keeps three pods per ConfigMap owner, as a ReplicaSet controller does:
/// expectations for its own creations, the cache for everything else.
async fn reconcile(
    key: ObjectKey,
    owner: Option<Arc<ConfigMap>>,
    ctx: Arc<Ctx>,
) -> Result<Action, Error> {
    let Some(owner) = owner else {
        return Ok(Action::done());
    };
    let uid = owner.meta().uid.clone().unwrap_or_default();
    let exp_key = key.to_string();
    // Before reading the cache, as upstream's syncReplicaSet does: read
    // first, a pod of ours arriving in between would satisfy the
    // expectations and the stale count would create a pod too many.
    let satisfied = ctx.expectations.satisfied(&exp_key);
    let have = ctx.cache.by_controller(&key.namespace, &uid, false)?.len();
    {
        let mut synced = ctx.synced.lock();
        let by = synced.entry(key.clone()).or_default();
        if by.last() != Some(&ctx.member) {
            by.push(ctx.member.clone());
        }
        ctx.first_look
            .lock()
            .entry((key.clone(), ctx.member.clone()))
            .or_insert(have);
    }
    if !satisfied {
        return Ok(Action::done());
    }
    let missing = CHILDREN.saturating_sub(have);
    if missing == 0 {
        return Ok(Action::done());
    }
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{}-", key.name)},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))?;
    let cref = controller_ref_for(owner.as_ref()).ok_or("owner without UID")?;
    ctx.expectations.expect_tracked_creations(&exp_key, missing);
    for _ in 0..missing {
        match ctx
            .pods
            .create(&key.namespace, &pod, &owner.object_ref(&()), &cref)
            .await
        {
            Ok(created) => {
                *ctx.creates.lock().entry(uid.clone()).or_default() += 1;
                ctx.expectations
                    .record_creation(&exp_key, &creation_id(&created));
            }
            Err(e) => {
                ctx.expectations.lower(&exp_key, 1, 0);
                return Err(e.into());
            }
        }
    }
    Ok(Action::done())
}

#[derive(Default)]
struct Shared {
    creates: Arc<Mutex<HashMap<String, usize>>>,
    synced: Arc<Mutex<HashMap<ObjectKey, Vec<String>>>>,
    first_look: Arc<Mutex<HashMap<(ObjectKey, String), usize>>>,
}

impl Shared {
    /// The member that synced `key` last.
    fn last_syncer(&self, key: &ObjectKey) -> Option<String> {
        self.synced.lock().get(key)?.last().cloned()
    }
}

impl Member {
    /// Member `id`; with `pod_lag`, its pod cache shows each pod event
    /// that long after the API server sent it (a watch that lags).
    fn start(
        cluster: &TestCluster,
        id: &str,
        shared: &Shared,
        catch_up: Duration,
        pod_lag: Option<Duration>,
    ) -> Self {
        let client = cluster.client();
        let member = ShardMember::new(
            ShardConfig::new("default", RING, id)
                .lease_duration(Duration::from_secs(2))
                .renew_deadline(Duration::from_millis(1500))
                .renew_period(Duration::from_millis(250))
                .catch_up_timeout(catch_up),
        )
        .unwrap();
        let factory = SharedInformerFactory::new(client.clone());
        let mut owns = Owns::<ConfigMap, Pod>::new();
        let mut feeder = None;
        if let Some(lag) = pod_lag {
            let pods = Informer::<Pod>::manual().build();
            owns = owns.informer(pods.clone());
            let api: Api<Pod> = Api::namespaced(client.clone(), NS);
            // One task stamps each event as it arrives, another applies it
            // `lag` later, in order.
            let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let reader = tokio::spawn(async move {
                let events = watcher(api, watcher::Config::default());
                let mut events = std::pin::pin!(events);
                while let Some(event) = events.next().await {
                    if let Ok(event) = event
                        && tx.send((Instant::now() + lag, event)).is_err()
                    {
                        break;
                    }
                }
            });
            feeder = Some(tokio::spawn(async move {
                let _reader = AbortOnDrop(reader);
                while let Some((due, event)) = rx.recv().await {
                    tokio::time::sleep_until(due).await;
                    pods.apply_event(event);
                }
            }));
        }
        let controller = Controller::<ConfigMap>::builder(&factory)
            .name(format!("rs-{id}"))
            .namespace(NS)
            .owns_with(owns)
            .workers(8)
            .shard(&member)
            .build()
            .unwrap();
        factory.start();
        let stop = CancellationToken::new();
        // Join the ring once the caches synced, so the workers run as soon
        // as slots arrive (as a deployment's readiness gate would).
        let ring = {
            let (member, controller, client) = (member.clone(), controller.clone(), client.clone());
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    synced = controller.wait_for_cache_sync() => synced.unwrap(),
                    () = stop.cancelled() => return Ok(()),
                }
                member.run(client, stop.cancelled_owned()).await
            })
        };
        let ctx = Arc::new(Ctx {
            member: id.to_owned(),
            // The slot label, so each member's pod watch holds only its
            // slots' pods (and the unlabelled ones).
            pods: KubeChildControl::new(client, format!("rs-{id}"))
                .with_child_labeller(slot_labeller()),
            cache: controller.store_of::<Pod>().unwrap(),
            expectations: Arc::clone(controller.expectations()),
            creates: Arc::clone(&shared.creates),
            synced: Arc::clone(&shared.synced),
            first_look: Arc::clone(&shared.first_look),
        });
        let run = controller.run(reconcile, ctx, stop.clone().cancelled_owned());
        let controller = tokio::spawn(async move {
            run.await.unwrap();
        });
        Self {
            member,
            factory,
            stop,
            ring,
            controller,
            feeder,
        }
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn cluster() -> TestCluster {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(cluster.client())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();
    cluster
}

async fn create_owners(cluster: &TestCluster, names: impl Iterator<Item = String>) {
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    futures::stream::iter(names)
        .for_each_concurrent(8, |name| {
            let cms = cms.clone();
            async move {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
            }
        })
        .await;
}

/// Pods on the server, by controller UID.
async fn pods_by_owner(cluster: &TestCluster) -> HashMap<String, usize> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), NS);
    let mut by_owner: HashMap<String, usize> = HashMap::new();
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let owner = pod
            .metadata
            .owner_references
            .unwrap_or_default()
            .into_iter()
            .find(|r| r.controller == Some(true));
        if let Some(owner) = owner {
            *by_owner.entry(owner.uid).or_default() += 1;
        }
    }
    by_owner
}

async fn owner_uids(cluster: &TestCluster) -> Vec<String> {
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    cms.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.uid)
        .collect()
}

/// Keeps the pod and ConfigMap caches moving (an unowned pod and a
/// ConfigMap patched every `every`): a cluster under load.
fn churn(cluster: &TestCluster, every: Duration) -> (CancellationToken, JoinHandle<()>) {
    let stop = CancellationToken::new();
    let done = stop.clone();
    let client = cluster.client();
    let task = tokio::spawn(async move {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
        let cms: Api<ConfigMap> = Api::namespaced(client, NS);
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "churn"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "churn"}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
        let mut i = 0u64;
        while !done.is_cancelled() {
            i += 1;
            let patch = Patch::Merge(json!({"metadata": {"labels": {"tick": i.to_string()}}}));
            pods.patch("churn", &PatchParams::default(), &patch)
                .await
                .unwrap();
            cms.patch("churn", &PatchParams::default(), &patch)
                .await
                .unwrap();
            tokio::time::sleep(every).await;
        }
    });
    (stop, task)
}

/// Every owner on the server has exactly its pods (nothing deletes pods
/// here, so one created twice would show), and no member counted more
/// creates for an owner than it has pods (a killed member's last create
/// may reach the server uncounted).
async fn assert_exactly_three_each(cluster: &TestCluster, shared: &Shared) {
    let owners = owner_uids(cluster).await;
    let pods = pods_by_owner(cluster).await;
    let creates = shared.creates.lock().clone();
    let wrong: Vec<_> = owners
        .iter()
        .filter(|u| pods.get(*u) != Some(&CHILDREN) || creates.get(*u) > pods.get(*u))
        .map(|u| (u, pods.get(u), creates.get(u)))
        .collect();
    assert!(
        wrong.is_empty(),
        "owners without exactly {CHILDREN} pods (uid, pods, creates): {wrong:?}"
    );
    assert_eq!(
        pods.values().sum::<usize>(),
        CHILDREN * owners.len(),
        "pods created in all"
    );
}

/// Waits until every owner on the server has its pods, then a little
/// longer for a late double create to show.
async fn settle(cluster: &TestCluster) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let owners = owner_uids(cluster).await;
        let pods = pods_by_owner(cluster).await;
        if owners
            .iter()
            .all(|u| pods.get(u).copied().unwrap_or(0) >= CHILDREN)
        {
            break;
        }
        assert!(Instant::now() < deadline, "owners never got their pods");
        // Listing every pod is not cheap in a debug build: not too often.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gaining_member_with_a_lagging_child_watch_does_not_create_the_previous_holders_children_again()
 {
    let cluster = cluster().await;
    let shared = Shared::default();
    let (churning, churner) = churn(&cluster, Duration::from_millis(10));
    let a = Member::start(&cluster, "a", &shared, Duration::from_secs(10), None);
    until("a holds every slot", || {
        a.member.held_slots() == SlotSet::full()
    })
    .await;

    // Owners keep coming while b joins: a creates pods for them up to the
    // moment it acknowledges giving half of the slots up, and b's pod
    // cache shows every pod 800 ms late.
    let owners = {
        let cluster_client = cluster.client();
        tokio::spawn(async move {
            let cms: Api<ConfigMap> = Api::namespaced(cluster_client, NS);
            for i in 0..200 {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("owner-{i}")}}))
                        .unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let b = Member::start(
        &cluster,
        "b",
        &shared,
        Duration::from_secs(10),
        Some(Duration::from_millis(800)),
    );
    until("a and b hold every slot", || covers(&[&a, &b])).await;
    owners.await.unwrap();
    settle(&cluster).await;

    let b_stats = b.member.stats();
    assert!(b_stats.slots_gained >= 500, "{b_stats:?}");
    assert_eq!(b_stats.catch_up_timeouts, 0, "b's caches caught up in time");
    let by_b = shared
        .synced
        .lock()
        .values()
        .filter(|m| m.last().is_some_and(|m| m == "b"))
        .count();
    assert!(by_b > 30, "b synced only {by_b} owners");
    assert_exactly_three_each(&cluster, &shared).await;
    let owners = owner_uids(&cluster).await.len();
    let creates: usize = shared.creates.lock().values().sum();
    assert_eq!(creates, CHILDREN * owners, "creates counted");

    churning.cancel();
    churner.await.unwrap();
    a.stop().await;
    b.stop().await;
}

/// The UIDs in a member's owner cache, which must come from a filtered
/// list (the server honoured its shard selector).
fn owner_cache(m: &Member) -> Vec<String> {
    let owners = m
        .factory
        .namespaced::<ConfigMap>(NS, watcher::Config::default());
    assert_eq!(
        owners.shard_selector_support(),
        ShardSelectorSupport::Honoured,
        "{}",
        m.member.lease_name()
    );
    owners
        .store()
        .list()
        .iter()
        .filter_map(|o| o.metadata.uid.clone())
        .collect()
}

/// The names of the pods in a member's pod cache.
fn child_cache(m: &Member) -> Vec<String> {
    let mut names: Vec<String> = m
        .factory
        .namespaced::<Pod>(NS, watcher::Config::default())
        .store()
        .list()
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// The names of the pods on the server a member's pod cache must hold:
/// the orphans and the pods whose controller is in a slot it holds.
async fn children_of(cluster: &TestCluster, held: &SlotSet) -> Vec<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client(), NS);
    let mut names: Vec<String> = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| controller_ref(&p.metadata).is_none_or(|r| held.contains_uid(&r.uid)))
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    names
}

/// The split target at a fifth of its scale: three members, 600
/// owners of three pods each, created through `KubeChildControl`. Each
/// member syncs about a third of the owners and exactly 1,800 pods are
/// created; then one member is killed while more owners arrive, the
/// others take its owners over, and still no pod is created twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_split_600_owners_and_take_over_a_killed_members_without_creating_twice() {
    const OWNERS: usize = 600;
    let cluster = cluster().await;
    let shared = Shared::default();
    let (churning, churner) = churn(&cluster, Duration::from_millis(50));
    let catch_up = Duration::from_secs(5);
    let a = Member::start(&cluster, "a", &shared, catch_up, None);
    let b = Member::start(&cluster, "b", &shared, catch_up, None);
    let c = Member::start(&cluster, "c", &shared, catch_up, None);
    until("the three members hold every slot", || {
        covers(&[&a, &b, &c])
    })
    .await;

    create_owners(&cluster, (0..OWNERS).map(|i| format!("owner-{i}"))).await;
    settle(&cluster).await;
    // The churn ConfigMap is an owner too.
    assert_eq!(owner_uids(&cluster).await.len(), OWNERS + 1);
    assert_exactly_three_each(&cluster, &shared).await;
    assert_eq!(
        shared.creates.lock().values().sum::<usize>(),
        CHILDREN * (OWNERS + 1),
        "creates counted"
    );
    // Each owner was synced by one member only: the one holding its slot.
    let members = [("a", &a), ("b", &b), ("c", &c)];
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), NS);
    let mut synced_by: HashMap<&str, usize> = HashMap::new();
    for cm in cms.list(&ListParams::default()).await.unwrap().items {
        let key = ObjectKey::from_object(&cm);
        if !key.name.starts_with("owner-") {
            continue;
        }
        let uid = cm.metadata.uid.unwrap();
        let holder = members
            .iter()
            .find(|(_, m)| m.member.holds_uid(&uid))
            .map(|(id, _)| *id)
            .unwrap();
        let by = shared.synced.lock().get(&key).cloned().unwrap_or_default();
        assert_eq!(
            by,
            [holder],
            "{key} synced by {by:?}; its slot is {holder}'s"
        );
        *synced_by.entry(holder).or_default() += 1;
    }
    for (id, m) in members {
        let slots = m.member.held_slots().len() as f64 / SLOTS as f64;
        assert!(
            (0.332..=0.335).contains(&slots),
            "{id} holds {slots} of the slots"
        );
        // The 33% ± 5% is for 3,000 owners; with 600 random UIDs
        // the hash's luck alone has a standard deviation of 1.9%, so the
        // bound is 4.5 of those (a false failure about once in 10^5 runs).
        // Who synced what is checked exactly above.
        let share = synced_by[id] as f64 / OWNERS as f64;
        let sigma = (slots * (1.0 - slots) / OWNERS as f64).sqrt();
        assert!(
            (share - slots).abs() <= 4.5 * sigma,
            "{id} synced {:.1}% of the owners",
            share * 100.0
        );
    }
    assert_eq!(synced_by.values().sum::<usize>(), OWNERS);
    // Server-side filtering: each member's owner cache holds only the
    // owners of its slots (KEP-5866 shardSelector on its list and watch).
    for (id, m) in members {
        let cached = owner_cache(m);
        assert!(
            !cached.is_empty() && cached.len() < OWNERS / 2,
            "{id}: {}",
            cached.len()
        );
        let held = m.member.held_slots();
        assert!(
            cached.iter().all(|uid| held.contains_uid(uid)),
            "{id} caches owners of other members"
        );
    }

    // Child caches: each member keeps the orphans (the churn pod) and the
    // pods of its own slots' owners, nothing else (a client filter; the
    // server cannot select pods by their owner).
    for (id, m) in members {
        let want = children_of(&cluster, &m.member.held_slots()).await;
        assert!(want.len() < CHILDREN * OWNERS / 2, "{id}: {}", want.len());
        assert!(want.iter().any(|n| n == "churn"), "the orphan is kept");
        until(&format!("{id}'s pod cache"), || child_cache(m) == want).await;
    }
    // Every pod created carries its owner's slot.
    let pods: Api<Pod> = Api::namespaced(cluster.client(), NS);
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        if let Some(owner) = controller_ref(&pod.metadata) {
            let label = pod.metadata.labels.as_ref().and_then(|l| l.get(SLOT_LABEL));
            assert_eq!(
                label,
                Some(&slot_label_value(&owner.uid)),
                "{:?}",
                pod.metadata.name
            );
        }
    }
    // A pod labelled with one of b's slots is sent to b only (the server
    // applies each member's `notin` selector of the other slots).
    let owners = cms.list(&ListParams::default()).await.unwrap().items;
    let owned_by = |m: &Member| {
        let owner = owners
            .iter()
            .find(|o| m.member.holds_uid(o.metadata.uid.as_deref().unwrap()))
            .unwrap();
        let uid = owner.metadata.uid.clone().unwrap();
        let reference = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner.metadata.name,
            "uid": uid, "controller": true,
        }]);
        (reference, slot_label_value(&uid))
    };
    let (b_owner, b_slot) = owned_by(&b);
    let (a_owner, a_slot) = owned_by(&a);
    let create = |name: &'static str, labels: serde_json::Value, owners: serde_json::Value| {
        let pods = pods.clone();
        async move {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
    };
    create("tagged", json!({SLOT_LABEL: b_slot}), b_owner).await;
    create("marker", json!({}), json!([])).await;
    let has = |m: &Member, name: &str| child_cache(m).iter().any(|n| n == name);
    until("the unlabelled marker in every pod cache", || {
        members.iter().all(|(_, m)| has(m, "marker"))
    })
    .await;
    // Watches deliver in order: a and c would have had `tagged` first.
    assert!(has(&b, "tagged"), "b's slot");
    assert!(!has(&a, "tagged") && !has(&c, "tagged"), "sent to b only");

    // Wrong labels, which only b is sent: an orphan's (kept after its
    // owner let it go) and an a-owned pod's labelled with b's slot (edited
    // by hand). b corrects both, so the orphan reaches every member and
    // the pod its owner's member.
    create("stale", json!({SLOT_LABEL: b_slot}), json!([])).await;
    create("misplaced", json!({SLOT_LABEL: b_slot}), a_owner.clone()).await;
    // And an a-owned pod without the label (as created before sharding):
    // every member is sent it, a labels it.
    create("bare", json!({}), a_owner).await;
    until("the stale orphan in every pod cache", || {
        members.iter().all(|(_, m)| has(m, "stale"))
    })
    .await;
    until("the misplaced pod in a's pod cache only", || {
        has(&a, "misplaced") && !has(&b, "misplaced") && !has(&c, "misplaced")
    })
    .await;
    let label = |pod: Pod| pod.metadata.labels.unwrap_or_default().remove(SLOT_LABEL);
    // Counted once the patch was answered (a member may see its watch
    // event before that).
    until("b's two corrections and a's label counted", || {
        b.member.stats().children_relabelled == 2 && a.member.stats().children_relabelled == 1
    })
    .await;
    assert!(has(&a, "bare") && !has(&b, "bare") && !has(&c, "bare"));
    assert_eq!(label(pods.get("stale").await.unwrap()), None);
    assert_eq!(
        label(pods.get("misplaced").await.unwrap()),
        Some(a_slot.clone())
    );
    assert_eq!(label(pods.get("bare").await.unwrap()), Some(a_slot));
    assert_eq!(c.member.stats().children_relabelled, 0);

    let names = ["tagged", "marker", "stale", "misplaced", "bare"];
    for name in names {
        pods.delete(name, &DeleteParams::default()).await.unwrap();
    }
    until("the test's pods gone", || {
        members
            .iter()
            .all(|(_, m)| names.iter().all(|n| !has(m, n)))
    })
    .await;

    // An orphan adopted by an owner of a's slots leaves b's and c's pod
    // caches and stays in a's (this test's reconcile never deletes a pod,
    // and the pod is deleted before the pods are counted again).
    let pods: Api<Pod> = Api::namespaced(cluster.client(), NS);
    let stray: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &stray).await.unwrap();
    let cached = |m: &Member| child_cache(m).iter().any(|n| n == "stray");
    until("the orphan in every pod cache", || {
        members.iter().all(|(_, m)| cached(m))
    })
    .await;
    let adopter = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .find(|c| a.member.holds_uid(c.metadata.uid.as_deref().unwrap()))
        .unwrap();
    let adopt = Patch::Merge(json!({"metadata": {"ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": adopter.metadata.name,
        "uid": adopter.metadata.uid, "controller": true,
    }]}}));
    pods.patch("stray", &PatchParams::default(), &adopt)
        .await
        .unwrap();
    until("the adopted pod out of b's and c's caches", || {
        !cached(&b) && !cached(&c)
    })
    .await;
    assert!(cached(&a), "a's slot: still cached");
    pods.delete("stray", &DeleteParams::default())
        .await
        .unwrap();
    until("the stray pod gone", || !cached(&a)).await;

    // Kill c while a stream of new owners arrives: c's owners, old and
    // new, are synced again by a and b once its Lease expires.
    let c_owners: Vec<ObjectKey> = shared
        .synced
        .lock()
        .iter()
        .filter(|(_, m)| m.last().is_some_and(|m| m == "c"))
        .map(|(k, _)| k.clone())
        .collect();
    let more = {
        let cluster_client = cluster.client();
        tokio::spawn(async move {
            let cms: Api<ConfigMap> = Api::namespaced(cluster_client, NS);
            for i in OWNERS..OWNERS + 150 {
                let cm: ConfigMap =
                    serde_json::from_value(json!({"metadata": {"name": format!("owner-{i}")}}))
                        .unwrap();
                cms.create(&PostParams::default(), &cm).await.unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.kill().await;
    more.await.unwrap();
    until("a and b hold every slot", || covers(&[&a, &b])).await;
    until("c's owners are synced again by a or b", || {
        c_owners
            .iter()
            .all(|k| matches!(shared.last_syncer(k).as_deref(), Some("a" | "b")))
    })
    .await;
    // Their pod caches had c's pods before they synced c's owners: each
    // first look at an owner c had settled shows its three pods.
    let looks = shared.first_look.lock().clone();
    for key in &c_owners {
        for id in ["a", "b"] {
            if let Some(have) = looks.get(&(key.clone(), id.to_owned())) {
                assert_eq!(*have, CHILDREN, "{id}'s first look at {key}");
            }
        }
    }
    settle(&cluster).await;
    assert_eq!(owner_uids(&cluster).await.len(), OWNERS + 150 + 1);
    assert_exactly_three_each(&cluster, &shared).await;
    // a and b relisted for c's slots: between them they cache every owner
    // once, none twice.
    let (in_a, in_b) = (owner_cache(&a), owner_cache(&b));
    assert_eq!(in_a.len() + in_b.len(), OWNERS + 150 + 1);
    assert!(in_a.iter().all(|uid| !in_b.contains(uid)));

    churning.cancel();
    churner.await.unwrap();
    a.stop().await;
    b.stop().await;
}
