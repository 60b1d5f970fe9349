//! Which keys informer events put on the queue, at which priority, and
//! what the expectations observe.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_informer::{Informer, ObjectKey, Store};
use ctrlkit_runtime::{Controller, Owns, Watches, creation_id};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::Event;

struct Fixture {
    apps: Informer<App>,
    pods: Informer<Pod>,
    controller: Controller<App>,
}

fn fixture(owns: Owns<App, Pod>) -> Fixture {
    let apps = Informer::<App>::manual().build();
    let pods = Informer::<Pod>::manual().build();
    let controller = Controller::builder_with(apps.clone())
        .owns_with(owns.informer(pods.clone()))
        .build()
        .unwrap();
    Fixture {
        apps,
        pods,
        controller,
    }
}

fn app(name: &str, uid: &str) -> App {
    object("ns", name, uid, "1")
}

fn pod_of(name: &str, owner: &App, rv: &str) -> Pod {
    owned_by(
        object("ns", name, &format!("uid-{name}"), rv),
        controller_of(owner),
    )
}

impl Fixture {
    fn keys(&self) -> Vec<ObjectKey> {
        drain(self.controller.queue())
    }
}

#[tokio::test]
async fn owners_from_the_initial_list_and_resyncs_wait_behind_live_changes() {
    let f = fixture(Owns::new());
    list(&f.apps, vec![app("listed", "u1")]);
    f.apps.apply_event(Event::Apply(app("live", "u2")));
    assert_eq!(f.keys(), [key("ns", "live"), key("ns", "listed")]);

    // A resync re-announces both at low priority; a change goes first.
    f.apps.resync_now();
    let mut changed = app("listed", "u1");
    changed.metadata.resource_version = Some("2".into());
    f.apps.apply_event(Event::Apply(changed));
    let keys = f.keys();
    assert_eq!(keys[0], key("ns", "listed"), "{keys:?}");
    assert_eq!(keys.len(), 2, "{keys:?}");
}

#[tokio::test]
async fn children_from_the_initial_list_are_low_priority_too() {
    let f = fixture(Owns::new());
    let (a, b) = (app("a", "ua"), app("b", "ub"));
    list(&f.apps, vec![a.clone(), b.clone()]);
    list(&f.pods, vec![]);
    f.keys();
    // A relisted child is a live add for the informer; the initial one is not.
    let pods = Informer::<Pod>::manual().build();
    let controller = Controller::builder_with(f.apps.clone())
        .name("second")
        .owns_with(Owns::new().informer(pods.clone()))
        .build()
        .unwrap();
    drain(controller.queue());
    list(&pods, vec![pod_of("pa", &a, "5")]);
    pods.apply_event(Event::Apply(pod_of("pb", &b, "6")));
    assert_eq!(drain(controller.queue()), [key("ns", "b"), key("ns", "a")]);
}

#[tokio::test]
async fn a_deleted_owner_is_queued_and_its_expectations_dropped() {
    let f = fixture(Owns::new());
    let a = app("a", "ua");
    list(&f.apps, vec![a.clone()]);
    f.keys();
    f.controller.expectations().expect_creations("ns/a", 2);
    f.controller.consistency().wrote_at(
        "ns/a",
        &ctrlkit_consistency::GroupResource::of::<Pod>(),
        "9",
    );
    f.apps.apply_event(Event::Delete(a));
    assert_eq!(f.keys(), [key("ns", "a")]);
    assert!(
        f.controller
            .expectations()
            .get_expectations("ns/a")
            .is_none()
    );
}

#[tokio::test]
async fn children_reach_only_their_controller_with_the_right_kind_group_and_uid() {
    let f = fixture(Owns::new());
    let a = app("a", "ua");
    list(&f.apps, vec![a.clone()]);
    list(&f.pods, vec![]);
    f.keys();

    f.pods.apply_event(Event::Apply(pod_of("mine", &a, "2")));
    assert_eq!(f.keys(), [key("ns", "a")]);

    // Same name, but a Deployment named "a" controls it.
    let mut deployment = object::<Deployment>("ns", "a", "ua", "1");
    deployment.metadata.uid = Some("ua".into());
    let by_kind = owned_by(
        object::<Pod>("ns", "k", "uk", "3"),
        controller_of(&deployment),
    );
    // Same kind and name, another API group.
    let mut other_group = controller_of(&a);
    other_group.api_version = "other.example.com/v1".into();
    let by_group = owned_by(object::<Pod>("ns", "g", "ug", "4"), other_group);
    // The owner was re-created: its UID is new.
    let mut old_uid = controller_of(&a);
    old_uid.uid = "ua-before".into();
    let by_old_uid = owned_by(object::<Pod>("ns", "o", "uo", "5"), old_uid);
    // A namesake owner in another namespace.
    let elsewhere = owned_by(object::<Pod>("other", "e", "ue", "6"), controller_of(&a));
    // An owner the cache does not hold.
    let unknown = pod_of("u", &app("gone", "ugone"), "7");
    // A controller reference without UID belongs to nobody.
    let mut no_uid = controller_of(&a);
    no_uid.uid.clear();
    let by_nobody = owned_by(object::<Pod>("ns", "n", "un", "8"), no_uid);
    for pod in [by_kind, by_group, by_old_uid, elsewhere, unknown, by_nobody] {
        f.pods.apply_event(Event::Apply(pod));
    }
    assert_eq!(f.keys(), Vec::<ObjectKey>::new());
}

#[tokio::test]
async fn updates_deletes_and_tombstones_reach_the_owner() {
    let f = fixture(Owns::new());
    let a = app("a", "ua");
    list(&f.apps, vec![a.clone()]);
    list(&f.pods, vec![pod_of("p", &a, "2"), pod_of("q", &a, "3")]);
    f.keys();

    f.pods.apply_event(Event::Apply(pod_of("p", &a, "4")));
    assert_eq!(f.keys(), [key("ns", "a")]);
    f.pods.apply_event(Event::Delete(pod_of("p", &a, "5")));
    assert_eq!(f.keys(), [key("ns", "a")]);
    // A relist without "q": a tombstone.
    list(&f.pods, vec![]);
    assert_eq!(f.keys(), [key("ns", "a")]);
}

#[tokio::test]
async fn a_change_of_controller_reaches_the_former_and_the_new_owner() {
    let f = fixture(Owns::new().update_filter(|_, _| false));
    let (a, b) = (app("a", "ua"), app("b", "ub"));
    list(&f.apps, vec![a.clone(), b.clone()]);
    list(&f.pods, vec![pod_of("p", &a, "2")]);
    f.keys();

    // The filter keeps plain updates away...
    f.pods.apply_event(Event::Apply(pod_of("p", &a, "3")));
    assert!(f.keys().is_empty());
    // ...but not a change of controller.
    f.pods.apply_event(Event::Apply(pod_of("p", &b, "4")));
    let mut keys = f.keys();
    keys.sort();
    assert_eq!(keys, [key("ns", "a"), key("ns", "b")]);
}

#[tokio::test]
async fn orphans_reach_the_owners_the_mapping_names() {
    let f = fixture(Owns::new().orphans(|pod: &Pod, owners: &Store<App>| {
        // Every owner whose name is the pod's "app" label.
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let wanted = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .cloned();
        owners
            .list_namespace(ns)
            .iter()
            .filter(|o| o.metadata.name == wanted)
            .map(|o| ObjectKey::from_object(o.as_ref()))
            .collect()
    }));
    let a = app("a", "ua");
    list(&f.apps, vec![a.clone(), app("b", "ub")]);
    list(&f.pods, vec![]);
    f.keys();

    let orphan = labelled(object::<Pod>("ns", "o", "uo", "2"), &[("app", "b")]);
    f.pods.apply_event(Event::Apply(orphan.clone()));
    assert_eq!(f.keys(), [key("ns", "b")]);
    // Adopted by "a": a child of "a" now, no longer anyone's orphan.
    f.pods.apply_event(Event::Apply(owned_by(
        labelled(object::<Pod>("ns", "o", "uo", "3"), &[("app", "b")]),
        controller_of(&a),
    )));
    assert_eq!(f.keys(), [key("ns", "a")]);
    // Released again: "a" lost it, "b" may adopt it.
    f.pods.apply_event(Event::Apply(labelled(
        object::<Pod>("ns", "o", "uo", "4"),
        &[("app", "b")],
    )));
    let mut keys = f.keys();
    keys.sort();
    assert_eq!(keys, [key("ns", "a"), key("ns", "b")]);
    // An orphan going away concerns nobody.
    f.pods.apply_event(Event::Delete(orphan));
    assert!(f.keys().is_empty());
}

#[tokio::test]
async fn expectations_observe_creations_by_identity_and_deletions_by_key() {
    let f = fixture(Owns::new());
    let a = app("a", "ua");
    list(&f.apps, vec![a.clone()]);
    list(&f.pods, vec![pod_of("old", &a, "2")]);
    let exp = f.controller.expectations();

    // Tracked creations: only the pod this controller recorded counts.
    exp.expect_tracked_creations("ns/a", 1);
    let ours = pod_of("ours", &a, "3");
    exp.record_creation("ns/a", &creation_id(&ours));
    f.pods
        .apply_event(Event::Apply(pod_of("someone-elses", &a, "4")));
    assert!(!exp.satisfied("ns/a"));
    f.pods.apply_event(Event::Apply(ours));
    assert!(exp.satisfied("ns/a"));

    // Deletions: by namespace/name, also when only the graceful delete is seen.
    exp.expect_deletions("ns/a", ["ns/old", "ns/ours"]);
    let mut terminating = pod_of("old", &a, "5");
    terminating.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    f.pods.apply_event(Event::Apply(terminating));
    assert_eq!(exp.pending_deletions("ns/a"), ["ns/ours"]);
    f.pods.apply_event(Event::Delete(pod_of("ours", &a, "6")));
    assert!(exp.satisfied("ns/a"));
}

#[tokio::test(start_paused = true)]
async fn requeue_after_looks_at_the_owner_again_later() {
    let f = fixture(
        Owns::new().requeue_after(|old: &Pod, new: &Pod, owner: &App| {
            let became_ready = old.metadata.labels.is_none() && new.metadata.labels.is_some();
            became_ready.then(|| Duration::from_secs(u64::try_from(owner.spec.replicas).unwrap()))
        }),
    );
    let mut a = app("a", "ua");
    a.spec.replicas = 10;
    list(&f.apps, vec![a.clone()]);
    list(&f.pods, vec![pod_of("p", &a, "2")]);
    f.keys();
    f.pods.apply_event(Event::Apply(labelled(
        pod_of("p", &a, "3"),
        &[("ready", "yes")],
    )));
    assert_eq!(f.keys(), [key("ns", "a")], "the immediate look");
    tokio::time::sleep(Duration::from_millis(9_900)).await;
    assert!(f.keys().is_empty());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(f.keys(), [key("ns", "a")], "and the later one");
}

#[tokio::test]
async fn watched_objects_map_old_and_new_states() {
    let apps = Informer::<App>::manual().build();
    let secrets = Informer::<Secret>::manual().build();
    let by_label = |s: &Secret| {
        s.metadata
            .labels
            .iter()
            .flatten()
            .filter(|(k, _)| *k == "app")
            .map(|(_, v)| key("ns", v))
            .collect()
    };
    let controller = Controller::builder_with(apps.clone())
        .watches_with(Watches::new(by_label).informer(secrets.clone()))
        .build()
        .unwrap();
    list(&apps, vec![]);
    list(
        &secrets,
        vec![labelled(object("ns", "s", "us", "1"), &[("app", "a")])],
    );
    assert_eq!(drain(controller.queue()), [key("ns", "a")]);
    // Moved from app a to app b: both.
    secrets.apply_event(Event::Apply(labelled(
        object("ns", "s", "us", "2"),
        &[("app", "b")],
    )));
    let mut keys = drain(controller.queue());
    keys.sort();
    assert_eq!(keys, [key("ns", "a"), key("ns", "b")]);
    secrets.apply_event(Event::Delete(labelled(
        object("ns", "s", "us", "3"),
        &[("app", "b")],
    )));
    assert_eq!(drain(controller.queue()), [key("ns", "b")]);
}

#[tokio::test]
async fn a_cluster_scoped_owner_controls_children_in_any_namespace() {
    let namespaces = Informer::<Namespace>::manual().build();
    let configmaps = Informer::<ConfigMap>::manual().build();
    let controller = Controller::builder_with(namespaces.clone())
        .owns_with(Owns::new().informer(configmaps.clone()))
        .build()
        .unwrap();
    let tenant: Namespace = object("", "tenant", "ut", "1");
    list(&namespaces, vec![tenant.clone()]);
    drain(controller.queue());
    list(
        &configmaps,
        vec![owned_by(
            object("tenant", "settings", "uc", "2"),
            controller_of(&tenant),
        )],
    );
    assert_eq!(drain(controller.queue()), [key("", "tenant")]);
}

#[tokio::test]
async fn child_resyncs_are_low_priority_and_transforms_apply_to_children() {
    let f = fixture(Owns::new().transform(|p: &mut Pod| p.spec = None));
    let (a, b) = (app("a", "ua"), app("b", "ub"));
    list(&f.apps, vec![a.clone(), b.clone()]);
    let mut with_spec = pod_of("pa", &a, "2");
    with_spec.spec = Some(Default::default());
    list(&f.pods, vec![with_spec, pod_of("pb", &b, "3")]);
    assert!(
        f.pods.store().get("ns", "pa").unwrap().spec.is_none(),
        "transformed"
    );
    f.keys();

    f.pods.resync_now();
    f.pods.apply_event(Event::Apply(pod_of("pb", &b, "4")));
    assert_eq!(f.keys(), [key("ns", "b"), key("ns", "a")]);
}

#[tokio::test]
async fn owner_state_is_forgotten_when_the_owner_is_deleted_or_re_created() {
    let apps = Informer::<App>::manual().build();
    let pods = Informer::<Pod>::manual().build();
    let forgotten = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let sink = forgotten.clone();
    let controller = Controller::builder_with(apps.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .on_owner_deleted(move |key| sink.lock().push(key.clone()))
        .build()
        .unwrap();
    let old = app("web", "u1");
    apps.apply_event(Event::Apply(old.clone()));
    controller.expectations().expect_creations("ns/web", 2);

    // Deleted and re-created while the watch was away: the update carries
    // another UID, and the old owner's state goes.
    let mut new = app("web", "u2");
    new.metadata.resource_version = Some("2".into());
    apps.apply_event(Event::Apply(new.clone()));
    assert_eq!(*forgotten.lock(), [key("ns", "web")]);
    assert!(
        controller
            .expectations()
            .get_expectations("ns/web")
            .is_none()
    );

    // A plain update forgets nothing; a delete does.
    controller.expectations().expect_creations("ns/web", 1);
    let mut changed = new.clone();
    changed.metadata.resource_version = Some("3".into());
    apps.apply_event(Event::Apply(changed.clone()));
    assert_eq!(forgotten.lock().len(), 1);
    apps.apply_event(Event::Delete(changed));
    assert_eq!(forgotten.lock().len(), 2);
    assert!(
        controller
            .expectations()
            .get_expectations("ns/web")
            .is_none()
    );
}

#[tokio::test]
async fn the_registered_handlers_can_be_driven_directly() {
    let f = fixture(Owns::new());
    let owner = app("web", "u1");
    list(&f.apps, vec![owner.clone()]);
    f.keys();
    // A transition a hand-fed informer cannot produce: an update from a
    // state the cache never held.
    let pods = f.controller.owned_handler::<Pod>().unwrap();
    let old = arc(pod_of("p", &owner, "1"));
    let new = arc(pod_of("p", &owner, "2"));
    pods.on_update(&old, &new);
    assert_eq!(f.keys(), [key("ns", "web")]);
    assert!(f.controller.owned_handler::<ConfigMap>().is_none());
    f.controller
        .owner_handler()
        .on_delete(&ctrlkit_informer::DeletedObject::Final(arc(owner)));
    assert_eq!(f.keys(), [key("ns", "web")]);
}
