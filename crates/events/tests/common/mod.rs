//! Helpers shared by the recorder's tests.
#![allow(dead_code, unreachable_pub)]

use ctrlkit_events::{Event, EventType};
use k8s_openapi::api::core::v1::ObjectReference;

/// A Normal event with `reason` and `note`.
pub fn normal(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: reason.to_owned(),
        note: Some(note.to_owned()),
        action: "Sync".to_owned(),
        secondary: None,
    }
}

/// A reference to the ReplicaSet `default/<name>`.
pub fn replicaset(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("ReplicaSet".into()),
        namespace: Some("default".into()),
        name: Some(name.into()),
        uid: Some(format!("uid-{name}")),
        ..ObjectReference::default()
    }
}
