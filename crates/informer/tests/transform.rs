//! Transforms run before objects enter the cache, on every path, and a
//! shared informer keeps one transform.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use ctrlkit_informer::{
    DeletedObject, HandlerFns, Informer, InformerError, SharedInformerFactory, Transform,
    drop_managed_fields,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;

fn offline_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn managed(mut p: Pod) -> Pod {
    p.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("kubectl".into()),
        ..Default::default()
    }]);
    p
}

#[test]
fn handlers_and_the_store_only_ever_see_transformed_objects() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (a, u, d) = (seen.clone(), seen.clone(), seen.clone());
    let handler = HandlerFns::new()
        .on_add(move |p: &Arc<Pod>, _| a.lock().push(p.metadata.managed_fields.is_some()))
        .on_update(move |o: &Arc<Pod>, n: &Arc<Pod>| {
            u.lock().push(o.metadata.managed_fields.is_some());
            u.lock().push(n.metadata.managed_fields.is_some());
        })
        .on_delete(move |gone: &DeletedObject<Pod>| {
            d.lock()
                .push(gone.object().metadata.managed_fields.is_some())
        });
    let informer = Informer::<Pod>::manual()
        .transform(drop_managed_fields::<Pod>)
        .handler(handler)
        .build();
    assert!(informer.has_transform());

    informer.apply_event(Event::Init);
    informer.apply_event(Event::InitApply(managed(pod("ns", "a", "ua", "1"))));
    informer.apply_event(Event::InitDone);
    informer.apply_event(Event::Apply(managed(pod("ns", "b", "ub", "2"))));
    informer.apply_event(Event::Apply(managed(pod("ns", "a", "ua", "3"))));
    informer.apply_event(Event::Delete(managed(pod("ns", "b", "ub", "4"))));

    let store = informer.store();
    assert!(
        store
            .list()
            .iter()
            .all(|p| p.metadata.managed_fields.is_none())
    );
    let seen = seen.lock().clone();
    assert_eq!(seen.len(), 5, "add a, add b, update a (old, new), delete b");
    assert!(seen.iter().all(|had_fields| !had_fields), "{seen:?}");
}

#[test]
fn set_transform_refuses_a_different_one_and_accepts_the_same() {
    let informer = Informer::<Pod>::manual().build();
    assert!(!informer.has_transform());
    informer
        .set_transform(Transform::drop_managed_fields())
        .unwrap();
    // Another controller asking for the same transform is fine.
    informer.set_transform(drop_managed_fields::<Pod>).unwrap();
    let other = Transform::<Pod>::new(|p: &mut Pod| p.metadata.annotations = None);
    assert_eq!(
        informer.check_transform(&other),
        Err(InformerError::TransformConflict)
    );
    assert_eq!(
        informer.set_transform(other),
        Err(InformerError::TransformConflict)
    );

    informer.apply_event(Event::Apply(managed(pod("ns", "a", "ua", "1"))));
    assert!(
        informer
            .store()
            .get("ns", "a")
            .unwrap()
            .metadata
            .managed_fields
            .is_none()
    );
}

#[test]
fn a_transform_cannot_be_added_once_objects_were_cached() {
    let informer = Informer::<Pod>::manual().build();
    informer.apply_event(Event::Apply(managed(pod("ns", "a", "ua", "1"))));
    let err = informer
        .set_transform(Transform::drop_managed_fields())
        .unwrap_err();
    assert_eq!(err, InformerError::TransformAfterStart);
    assert!(
        err.to_string().contains("before the informer starts"),
        "{err}"
    );
    assert!(!informer.has_transform());
    // The cache was left as it was.
    assert!(
        informer
            .store()
            .get("ns", "a")
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );
}

#[tokio::test]
async fn shared_informers_keep_one_transform_and_refuse_after_start() {
    let factory = SharedInformerFactory::new(offline_client());
    let pods = factory.scoped::<Pod>(Some("ns"), watcher::Config::default());
    let same = factory.namespaced::<Pod>("ns", watcher::Config::default());
    assert!(Informer::ptr_eq(&pods, &same));
    pods.set_transform(Transform::drop_managed_fields())
        .unwrap();
    same.set_transform(Transform::drop_managed_fields())
        .unwrap();
    assert_eq!(
        same.set_transform(|p: &mut Pod| p.metadata.labels = None),
        Err(InformerError::TransformConflict)
    );

    // The namespace is ignored for a cluster-scoped kind.
    let namespaces = factory.scoped::<Namespace>(Some("ns"), watcher::Config::default());
    assert!(Informer::ptr_eq(
        &namespaces,
        &factory.all::<Namespace>(watcher::Config::default())
    ));

    factory.start();
    assert_eq!(
        namespaces.set_transform(Transform::drop_managed_fields()),
        Err(InformerError::TransformAfterStart)
    );
    // Asking again for the transform it has stays fine after start.
    pods.set_transform(Transform::drop_managed_fields())
        .unwrap();
    factory.shutdown().await;
}
