//! The recording fake and the observing wrapper.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use ctrlkit_childcontrol::{
    ChildControl, ChildControlError, FakeChildControl, Observed, Operation, RecordWrites,
    WriteAttempt, WriteGate, WriteObserver, WriteRefused,
};
use ctrlkit_consistency::{ConsistencyStore, GroupResource};
use ctrlkit_informer::Informer;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Preconditions};
use kube::api::Patch;
use kube::runtime::watcher::Event;
use serde_json::json;

fn owner() -> ObjectReference {
    ObjectReference {
        kind: Some("App".into()),
        name: Some("web".into()),
        namespace: Some("ns".into()),
        ..Default::default()
    }
}

fn cref() -> OwnerReference {
    OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "App".into(),
        name: "web".into(),
        uid: "app-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn generated(prefix: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.generate_name = Some(prefix.into());
    cm
}

fn boom() -> ChildControlError {
    ChildControlError::api_status(500, "InternalError", "boom")
}

#[tokio::test]
async fn creates_are_identified_like_the_api_server_would() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let a = fake
        .create("ns", &generated("web-"), &owner(), &cref())
        .await
        .unwrap();
    let mut fixed = generated("ignored-");
    fixed.metadata.name = Some("web-config".into());
    let b = fake.create("ns", &fixed, &owner(), &cref()).await.unwrap();
    assert_eq!(a.metadata.name.as_deref(), Some("web-0"));
    assert_eq!(
        b.metadata.name.as_deref(),
        Some("web-config"),
        "a fixed name is kept"
    );
    assert_ne!(a.metadata.uid, b.metadata.uid);
    assert_eq!(a.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(a.metadata.owner_references, Some(vec![cref()]));
    assert!(a.metadata.resource_version.is_some());
    assert_eq!(fake.created(), vec![a, b]);
    assert_eq!(fake.templates(), vec![generated("web-"), fixed]);
    assert_eq!(fake.controller_refs(), vec![cref(), cref()]);
    assert_eq!(fake.creates()[0].owner, owner());

    // The real control's validation applies: recorded, but refused.
    let err = fake
        .create("ns", &ConfigMap::default(), &owner(), &cref())
        .await
        .unwrap_err();
    assert!(err.is_invalid());
    assert_eq!(fake.create_count(), 3);
    assert_eq!(fake.created().len(), 2);
}

#[tokio::test]
async fn failures_limits_and_clear_work_as_for_pods() {
    let fake = FakeChildControl::<ConfigMap>::new();
    fake.fail_after_op(Operation::Delete, 1, boom);
    fake.set_create_limit(1);
    assert!(fake.delete("ns", "a", &owner(), None).await.is_ok());
    assert_eq!(
        fake.delete("ns", "b", &owner(), None)
            .await
            .unwrap_err()
            .status_code(),
        Some(500)
    );
    fake.create("ns", &generated("x-"), &owner(), &cref())
        .await
        .unwrap();
    let err = fake
        .create("ns", &generated("x-"), &owner(), &cref())
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("not creating configmap, limit 1 already reached"),
        "{err}"
    );
    assert_eq!(fake.deleted_names(), ["a", "b"]);
    assert_eq!(fake.deleted_keys(), ["ns/a", "ns/b"]);

    fake.clear();
    assert_eq!((fake.create_count(), fake.delete_count()), (0, 0));
    assert!(
        fake.delete("ns", "c", &owner(), None).await.is_err(),
        "failures survive clear"
    );
    fake.clear_failures();
    assert!(fake.delete("ns", "c", &owner(), None).await.is_ok());
    let next = fake
        .create("ns", &generated("x-"), &owner(), &cref())
        .await
        .unwrap();
    assert_eq!(
        next.metadata.name.as_deref(),
        Some("x-1"),
        "names keep counting"
    );
}

#[tokio::test]
async fn patches_of_every_type_apply_to_a_minimal_object() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let merged = fake
        .patch(
            "ns",
            "cm",
            &Patch::Merge(json!({"data": {"a": "1"}, "metadata": {"labels": {"l": "v"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.name.as_deref(), Some("cm"));
    assert_eq!(merged.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(merged.data.unwrap()["a"], "1");
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/data", "value": {"b": "2"}}]))
            .unwrap();
    let json_patched = fake.patch("ns", "cm", &Patch::Json(ops)).await.unwrap();
    assert_eq!(json_patched.data.unwrap()["b"], "2");
    let bad = fake
        .patch("ns", "cm", &Patch::Strategic(json!({"data": "not-a-map"})))
        .await
        .unwrap_err();
    assert!(matches!(bad, ChildControlError::InvalidPatch(_)), "{bad:?}");
    assert_eq!(fake.patch_count(), 3);
    assert_eq!(fake.patches()[0].name, "cm");
}

#[tokio::test]
async fn the_fakes_write_gate_refuses_recorded_calls() {
    let fake = FakeChildControl::<ConfigMap>::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let gate: Arc<dyn WriteGate> = Arc::new(move |a: &WriteAttempt<'_>| {
        log.lock().unwrap().push(a.operation);
        Err(WriteRefused::new("fenced"))
    });
    fake.set_write_gate(Some(gate));
    fake.fail_next(1, boom);
    let err = fake
        .create("ns", &generated("x-"), &owner(), &cref())
        .await
        .unwrap_err();
    assert!(err.is_write_refused());
    assert!(
        fake.delete("ns", "a", &owner(), None)
            .await
            .unwrap_err()
            .is_write_refused()
    );
    assert!(
        fake.patch("ns", "a", &Patch::Merge(json!({})))
            .await
            .unwrap_err()
            .is_write_refused()
    );
    assert_eq!(
        *seen.lock().unwrap(),
        [Operation::Create, Operation::Delete, Operation::Patch]
    );
    assert_eq!(
        (fake.create_count(), fake.delete_count(), fake.patch_count()),
        (1, 1, 1)
    );
    fake.set_write_gate(None);
    // The refusals did not consume the planned failure.
    assert!(
        !fake
            .delete("ns", "a", &owner(), None)
            .await
            .unwrap_err()
            .is_write_refused()
    );
}

/// Remembers what it was told.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl WriteObserver<Secret> for Log {
    fn created(&self, child: &Secret) {
        self.0.lock().unwrap().push(format!(
            "created {}",
            child.metadata.name.as_deref().unwrap()
        ));
    }
    fn patched(&self, child: &Secret) {
        self.0.lock().unwrap().push(format!(
            "patched {}",
            child.metadata.name.as_deref().unwrap()
        ));
    }
    fn deleted(&self, namespace: &str, name: &str) {
        self.0
            .lock()
            .unwrap()
            .push(format!("deleted {namespace}/{name}"));
    }
}

#[tokio::test]
async fn observed_sees_successful_writes_only() {
    let fake = FakeChildControl::<Secret>::new();
    let control = Observed::new(fake.clone(), Log::default());
    let mut template = Secret::default();
    template.metadata.generate_name = Some("s-".into());
    control
        .create("ns", &template, &owner(), &cref())
        .await
        .unwrap();
    control
        .patch("ns", "s-0", &Patch::Merge(json!({})))
        .await
        .unwrap();
    let pre = Preconditions {
        uid: Some("u".into()),
        resource_version: None,
    };
    control
        .delete("ns", "s-0", &owner(), Some(&pre))
        .await
        .unwrap();
    fake.fail_next(3, boom);
    assert!(
        control
            .create("ns", &template, &owner(), &cref())
            .await
            .is_err()
    );
    assert!(
        control
            .patch("ns", "s-0", &Patch::Merge(json!({})))
            .await
            .is_err()
    );
    assert!(control.delete("ns", "s-0", &owner(), None).await.is_err());
    assert_eq!(
        *control.observer().0.lock().unwrap(),
        ["created s-0", "patched s-0", "deleted ns/s-0"]
    );
    assert_eq!(control.inner().deletes()[0].preconditions, Some(pre));
}

#[tokio::test(start_paused = true)]
async fn record_writes_waits_for_the_informer_to_show_them() {
    let secrets = Informer::<Secret>::manual().build();
    secrets.apply_event(Event::Init);
    secrets.apply_event(Event::InitDone);
    let store = ConsistencyStore::builder()
        .cache(GroupResource::of::<Secret>(), secrets.store())
        .build();
    let control: Arc<dyn ChildControl<Secret>> = Arc::new(Observed::new(
        FakeChildControl::<Secret>::new(),
        RecordWrites::<Secret>::new(store.clone(), "ns/web"),
    ));
    let mut template = Secret::default();
    template.metadata.generate_name = Some("s-".into());
    let created = control
        .create("ns", &template, &owner(), &cref())
        .await
        .unwrap();
    assert!(
        store.ensure_ready("ns/web").is_err(),
        "the informer has not shown it yet"
    );
    assert!(store.ensure_ready("ns/other").is_ok());
    secrets.apply_event(Event::Apply(created));
    assert!(store.ensure_ready("ns/web").is_ok());
}
