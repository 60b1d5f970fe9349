//! Every builder option, and every misuse as a typed error.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use ctrlkit_informer::{
    BY_CONTROLLER_UID, HandlerFns, Informer, InformerError, SharedInformerFactory, Transform,
};
use ctrlkit_runtime::{BuildError, Controller, ControllerMetrics, Owns, Watches};
use ctrlkit_workqueue::rate_limiter::ItemExponentialFailureRateLimiter;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::watcher::{self, Event};
use prometheus_client::registry::Registry;

fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn manual<K>() -> Informer<K>
where
    K: kube::Resource
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    Informer::manual().build()
}

fn err<K>(built: Result<Controller<K>, BuildError>) -> BuildError {
    match built {
        Ok(_) => panic!("the build should have failed"),
        Err(e) => e,
    }
}

#[test]
fn misuse_is_a_typed_error() {
    let cases: Vec<(BuildError, BuildError)> = vec![
        (
            err(Controller::builder_with(manual::<App>()).workers(0).build()),
            BuildError::ZeroWorkers,
        ),
        (
            err(Controller::builder_with(manual::<App>()).name("").build()),
            BuildError::EmptyName,
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .timeout(Duration::ZERO)
                .build()),
            BuildError::ZeroTimeout,
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .namespace("")
                .build()),
            BuildError::EmptyNamespace,
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .index("by-x", |_| vec![])
                .index("by-x", |_| vec![])
                .build()),
            BuildError::DuplicateIndex {
                kind: "App".into(),
                name: "by-x".into(),
            },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .index("", |_| vec![])
                .build()),
            BuildError::EmptyIndexName { kind: "App".into() },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .owns_with(
                    Owns::new()
                        .informer(manual::<Pod>())
                        .index(BY_CONTROLLER_UID, |_| vec![]),
                )
                .build()),
            BuildError::DuplicateIndex {
                kind: "Pod".into(),
                name: BY_CONTROLLER_UID.into(),
            },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .owns_with(Owns::new().informer(manual::<Pod>()))
                .owns_with(Owns::new().informer(manual::<Pod>()))
                .build()),
            BuildError::DuplicateOwns { kind: "Pod".into() },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .owns_with(Owns::new().informer(manual::<Namespace>()))
                .build()),
            BuildError::ClusterScopedChild {
                child: "Namespace".into(),
                owner: "App".into(),
            },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .owns::<Pod>()
                .build()),
            BuildError::NoInformer { kind: "Pod".into() },
        ),
        (
            err(Controller::builder_with(manual::<App>())
                .watches::<Secret>(|_| vec![])
                .build()),
            BuildError::NoInformer {
                kind: "Secret".into(),
            },
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
        assert!(!got.to_string().is_empty());
    }
    let msg = BuildError::ClusterScopedChild {
        child: "Namespace".into(),
        owner: "App".into(),
    }
    .to_string();
    assert!(msg.contains("may only have cluster-scoped owners"), "{msg}");
}

#[test]
fn a_failed_build_registers_nothing() {
    let owners = manual::<App>();
    let pods = manual::<Pod>();
    let built = Controller::builder_with(owners.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .watches::<Secret>(|_| vec![])
        .build();
    assert_eq!(
        err(built),
        BuildError::NoInformer {
            kind: "Secret".into()
        }
    );
    assert!(format!("{owners:?}").contains("handlers: 0"), "{owners:?}");
    assert!(format!("{pods:?}").contains("handlers: 0"), "{pods:?}");
    assert!(!pods.store().has_index(BY_CONTROLLER_UID));
}

#[test]
fn owning_is_allowed_across_scopes_the_other_way_and_for_the_owner_kind_itself() {
    // A cluster-scoped owner may control namespaced children.
    Controller::builder_with(manual::<Namespace>())
        .owns_with(Owns::new().informer(manual::<ConfigMap>()))
        .build()
        .unwrap();
    // Objects of a kind may control others of the same kind.
    Controller::builder_with(manual::<App>())
        .owns_with(Owns::new().informer(manual::<App>()))
        .build()
        .unwrap();
}

#[test]
fn names_default_to_the_kind_and_are_unique_per_metrics() {
    let c = Controller::builder_with(manual::<Deployment>())
        .build()
        .unwrap();
    assert_eq!(c.name(), "deployment");
    assert_eq!(c.queue().len(), 0);

    let mut registry = Registry::default();
    let metrics = ControllerMetrics::register(&mut registry);
    let _a = Controller::builder_with(manual::<App>())
        .name("apps")
        .metrics(&metrics)
        .build()
        .unwrap();
    assert_eq!(
        err(Controller::builder_with(manual::<App>())
            .name("apps")
            .metrics(&metrics)
            .build()),
        BuildError::DuplicateName {
            name: "apps".into()
        }
    );
    Controller::builder_with(manual::<App>())
        .name("other")
        .metrics(&metrics)
        .build()
        .unwrap();
}

#[test]
fn indexes_stores_and_sync_state() {
    let owners = manual::<App>();
    let pods = manual::<Pod>();
    let secrets = manual::<Secret>();
    let controller = Controller::builder_with(owners.clone())
        .index("by-replicas", |a: &App| vec![a.spec.replicas.to_string()])
        .owns_with(
            Owns::new()
                .informer(pods.clone())
                .index("by-node", |_: &Pod| vec![]),
        )
        .watches_with(Watches::new(|_: &Secret| vec![]).informer(secrets.clone()))
        .expectations_ttl(Duration::from_secs(7))
        .build()
        .unwrap();
    assert!(owners.store().has_index("by-replicas"));
    assert!(pods.store().has_index(BY_CONTROLLER_UID));
    assert!(pods.store().has_index("by-node"));
    assert_eq!(controller.expectations().ttl(), Duration::from_secs(7));

    let mut app = object::<App>("ns", "a", "ua", "1");
    app.spec.replicas = 3;
    list(&owners, vec![app]);
    list(&pods, vec![]);
    assert!(
        !controller.has_synced(),
        "the Secret informer has not listed yet"
    );
    list(&secrets, vec![object("ns", "s", "us", "2")]);
    assert!(controller.has_synced());

    assert_eq!(
        controller
            .store()
            .by_index("by-replicas", "3")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(controller.store_of::<App>().unwrap().len(), 1);
    assert!(controller.store_of::<Pod>().unwrap().is_empty());
    assert_eq!(controller.store_of::<Secret>().unwrap().len(), 1);
    assert!(controller.store_of::<ConfigMap>().is_none());
}

fn with_managed_fields<K: kube::Resource>(mut obj: K) -> K {
    obj.meta_mut().managed_fields = Some(vec![ManagedFieldsEntry::default()]);
    obj
}

#[test]
fn drop_managed_fields_applies_before_every_cache_unless_a_kind_has_its_own() {
    let owners = manual::<App>();
    let pods = manual::<Pod>();
    let secrets = manual::<Secret>();
    Controller::builder_with(owners.clone())
        .owns_with(Owns::new().informer(pods.clone()))
        .watches_with(
            Watches::new(|_: &Secret| vec![])
                .informer(secrets.clone())
                .transform(|s: &mut Secret| s.data = None),
        )
        .drop_managed_fields()
        .build()
        .unwrap();
    owners.apply_event(Event::Apply(with_managed_fields(object::<App>(
        "ns", "a", "u", "1",
    ))));
    pods.apply_event(Event::Apply(with_managed_fields(object::<Pod>(
        "ns", "p", "u", "1",
    ))));
    let mut secret = with_managed_fields(object::<Secret>("ns", "s", "u", "1"));
    secret.data = Some(Default::default());
    secrets.apply_event(Event::Apply(secret));

    assert!(
        owners
            .store()
            .get("ns", "a")
            .unwrap()
            .metadata
            .managed_fields
            .is_none()
    );
    assert!(
        pods.store()
            .get("ns", "p")
            .unwrap()
            .metadata
            .managed_fields
            .is_none()
    );
    let cached = secrets.store().get("ns", "s").unwrap();
    assert!(cached.data.is_none(), "its own transform ran");
    assert!(
        cached.metadata.managed_fields.is_some(),
        "instead of the default one"
    );
}

#[test]
fn the_owner_transform_runs_before_the_cache() {
    let owners = manual::<App>();
    Controller::builder_with(owners.clone())
        .transform(|a: &mut App| a.spec.replicas = 0)
        .build()
        .unwrap();
    let mut app = object::<App>("ns", "a", "u", "1");
    app.spec.replicas = 5;
    owners.apply_event(Event::Apply(app));
    assert_eq!(owners.store().get("ns", "a").unwrap().spec.replicas, 0);
}

#[tokio::test]
async fn factory_informers_follow_namespace_and_watcher_config() {
    let factory = SharedInformerFactory::new(offline_client());
    let config = watcher::Config::default().labels("tier=web");
    let controller = Controller::<Deployment>::builder(&factory)
        .namespace("demo")
        .watcher_config(config.clone())
        .owns_with(
            Owns::<Deployment, Pod>::new()
                .watcher_config(watcher::Config::default().labels("owned=yes")),
        )
        .watches::<Secret>(|_| vec![])
        .build()
        .unwrap();
    assert!(Informer::ptr_eq(
        controller.informer(),
        &factory.namespaced::<Deployment>("demo", config)
    ));
    let pods = factory.namespaced::<Pod>("demo", watcher::Config::default().labels("owned=yes"));
    assert!(pods.store().has_index(BY_CONTROLLER_UID));
    assert!(format!("{pods:?}").contains("handlers: 1"));
    let secrets = factory.namespaced::<Secret>("demo", watcher::Config::default());
    assert!(format!("{secrets:?}").contains("handlers: 1"));
    assert_eq!(factory.len(), 3, "no informer outside the namespace");
}

#[tokio::test]
async fn shared_informers_refuse_conflicting_or_late_transforms() {
    let factory = SharedInformerFactory::new(offline_client());
    let pods = factory.all::<Pod>(watcher::Config::default());
    pods.set_transform(|p: &mut Pod| p.status = None).unwrap();
    let built = Controller::<App>::builder(&factory)
        .owns::<Pod>()
        .drop_managed_fields()
        .build();
    assert_eq!(
        err(built),
        BuildError::Informer {
            kind: "Pod".into(),
            source: InformerError::TransformConflict
        }
    );

    // Two controllers asking for the same transform share the informer.
    let secrets = factory.all::<Secret>(watcher::Config::default());
    for name in ["a", "b"] {
        Controller::<App>::builder(&factory)
            .name(name)
            .watches_with(
                Watches::new(|_: &Secret| vec![]).transform(Transform::drop_managed_fields()),
            )
            .build()
            .unwrap();
    }
    assert!(secrets.has_transform());

    // The App informer is running now: too late for a transform.
    factory.start();
    let built = Controller::<App>::builder(&factory)
        .name("c")
        .drop_managed_fields()
        .build();
    assert!(matches!(
        err(built),
        BuildError::Informer {
            source: InformerError::TransformAfterStart,
            ..
        }
    ));
    factory.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn the_rate_limiter_spaces_retries() {
    let controller = Controller::builder_with(manual::<App>())
        .rate_limiter(ItemExponentialFailureRateLimiter::new(
            Duration::from_secs(2),
            Duration::from_secs(60),
        ))
        .build()
        .unwrap();
    let queue = controller.queue();
    queue.add_rate_limited(key("ns", "a"));
    tokio::time::sleep(Duration::from_millis(1900)).await;
    assert!(queue.try_get().is_none());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(queue.try_get(), Some(key("ns", "a")));
}

#[test]
fn handlers_registered_on_informers_are_counted_once_per_controller() {
    let pods = manual::<Pod>();
    pods.add_event_handler(HandlerFns::new());
    Controller::builder_with(manual::<App>())
        .owns_with(Owns::new().informer(pods.clone()))
        .build()
        .unwrap();
    assert!(format!("{pods:?}").contains("handlers: 2"));
}
