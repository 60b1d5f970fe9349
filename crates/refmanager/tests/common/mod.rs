//! Fixtures shared by the integration tests (after upstream's
//! controller_ref_manager_test.go helpers).
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;

use ctrlkit_refmanager::{OwnerMeta, Selector};

pub const OWNER_UID: &str = "123";

pub fn labels(tier: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("type".to_string(), tier.to_string())])
}

/// `type=production`, as upstream's productionLabel selector.
pub fn production() -> Selector {
    Selector::from_map(&labels("production")).unwrap()
}

pub fn now() -> Time {
    Time(Timestamp::from_second(1_700_000_000).unwrap())
}

/// The owner: a ReplicationController `ctrl` in `default` with UID 123.
pub fn owner() -> OwnerMeta {
    OwnerMeta::new("v1", "ReplicationController", "ctrl", OWNER_UID)
        .unwrap()
        .with_namespace("default")
}

pub fn controller_ref_to(uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Fake".into(),
        name: format!("owner-{uid}"),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A pod in `default` with the `type` label and, if `owner_uid` is given, a
/// controller reference to that UID.
pub fn pod(name: &str, tier: &str, owner_uid: Option<&str>) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels(tier)),
            owner_references: owner_uid.map(|uid| vec![controller_ref_to(uid)]),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn deleting(mut pod: Pod) -> Pod {
    pod.metadata.deletion_timestamp = Some(now());
    pod
}

pub fn in_namespace(mut pod: Pod, ns: &str) -> Pod {
    pod.metadata.namespace = Some(ns.into());
    pod
}

pub fn names(pods: &[Pod]) -> Vec<&str> {
    pods.iter()
        .map(|p| p.metadata.name.as_deref().unwrap())
        .collect()
}
