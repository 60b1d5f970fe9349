//! `create_for` and `ensure`: children written from the object the owner
//! wants, on the recording fake.
#![allow(clippy::unwrap_used)]

use ctrlkit_childcontrol::{
    ChildControl, ChildControlError, ChildControlExt, Ensured, FakeChildControl,
};
use ctrlkit_worker::SyncError;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Patch;
use serde_json::json;

fn owner() -> Deployment {
    let mut d = Deployment::default();
    d.metadata.name = Some("web".into());
    d.metadata.namespace = Some("ns".into());
    d.metadata.uid = Some("web-uid".into());
    d
}

fn desired(message: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("web-config".into());
    cm.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
    cm.data = Some([("message".to_string(), message.to_string())].into());
    cm
}

#[tokio::test]
async fn create_for_puts_the_child_in_the_owners_namespace_under_its_control() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let created = fake.create_for(&owner(), &desired("hi")).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("ns"));
    let refs = created.metadata.owner_references.unwrap();
    assert_eq!(
        (refs[0].kind.as_str(), refs[0].uid.as_str()),
        ("Deployment", "web-uid")
    );
    assert_eq!(refs[0].controller, Some(true));
    assert_eq!(fake.creates()[0].owner.name.as_deref(), Some("web"));
}

#[tokio::test]
async fn create_for_an_owner_never_stored_is_an_error_not_a_request() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let mut unsaved = owner();
    unsaved.metadata.uid = None;
    let err = fake.create_for(&unsaved, &desired("hi")).await.unwrap_err();
    assert!(
        matches!(err, ChildControlError::InvalidTemplate(_)),
        "{err}"
    );
    assert!(err.is_terminal());
    assert_eq!(fake.create_count(), 0);
}

#[tokio::test]
async fn ensure_creates_then_leaves_alone_then_patches_only_what_drifted() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let Ensured::Created(mut cached) = fake.ensure(&owner(), &desired("hi"), None).await.unwrap()
    else {
        panic!("not created")
    };
    // Fields the server or others add do not count as drift.
    cached.metadata.uid = Some("cm-uid".into());
    cached.metadata.resource_version = Some("7".into());
    cached
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("other".into(), "x".into());
    let unchanged = fake
        .ensure(&owner(), &desired("hi"), Some(&cached))
        .await
        .unwrap();
    assert_eq!(unchanged, Ensured::Unchanged);
    assert!(fake.patches().is_empty());

    let updated = fake
        .ensure(&owner(), &desired("bye"), Some(&cached))
        .await
        .unwrap();
    assert!(matches!(updated, Ensured::Updated(_)), "{updated:?}");
    let patches = fake.patches();
    assert_eq!(
        (patches[0].namespace.as_str(), patches[0].name.as_str()),
        ("ns", "web-config")
    );
    let Patch::Merge(patch) = &patches[0].patch else {
        panic!("{:?}", patches[0].patch)
    };
    assert_eq!(
        patch,
        &json!({
            "data": {"message": "bye"},
            "metadata": {"labels": {"app": "web"}, "uid": "cm-uid"}
        })
    );
    assert_eq!(fake.create_count(), 1);
}

#[tokio::test]
async fn ensure_leaves_a_child_of_another_owner_alone() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let mut theirs = desired("theirs");
    theirs.metadata.namespace = Some("ns".into());
    let err = fake
        .ensure(&owner(), &desired("hi"), Some(&theirs))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ChildControlError::NotControlled { .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "ConfigMap web-config exists and is not controlled by this owner"
    );
    assert!(fake.patches().is_empty() && fake.create_count() == 0);
}

#[tokio::test]
async fn ensure_needs_a_name() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let mut nameless = desired("hi");
    nameless.metadata.name = None;
    nameless.metadata.generate_name = Some("web-".into());
    let err = fake.ensure(&owner(), &nameless, None).await.unwrap_err();
    assert!(
        matches!(err, ChildControlError::InvalidTemplate(_)),
        "{err}"
    );
    assert_eq!(fake.create_count(), 0);
}

#[tokio::test]
async fn api_errors_are_retried_by_a_reconcile_returning_them() {
    let fake = FakeChildControl::<ConfigMap>::new();
    fake.fail_next(1, || {
        ChildControlError::api_status(500, "InternalError", "etcd down")
    });
    let err = fake.create_for(&owner(), &desired("hi")).await.unwrap_err();
    assert!(!err.is_terminal(), "{err}");
    // The fake is still a plain ChildControl.
    let _: &dyn ChildControl<ConfigMap> = &fake;
}
