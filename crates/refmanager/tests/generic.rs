//! The same claim logic over other dependent types: ReplicaSets owned by a
//! Deployment, a caller-written `claim_object`, and the kube-backed pieces
//! (`ApiPatcher`, `ApiRecheck`) against a mock API server.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::{controller_ref_to, now};
use ctrlkit_podcontrol::PodControl;
use ctrlkit_refmanager::{
    AlwaysAdopt, ApiPatcher, ApiRecheck, BaseRefManager, CanAdoptError, ClaimError,
    ControllerRefManager, Decision, DependentControl, OwnerMeta, PodControllerRefManager,
    ReplicaSetControllerRefManager, Selector, SkipReason,
};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use serde_json::{Value, json};

const DEPLOY_UID: &str = "deploy-uid";

/// Records ReplicaSet patches in memory; optionally fails them.
#[derive(Default)]
struct RsPatcher {
    patches: Mutex<Vec<(String, Value)>>,
    fail_with: Mutex<Option<u16>>,
}

#[async_trait]
impl DependentControl<ReplicaSet> for RsPatcher {
    type Error = kube::Error;

    async fn patch_dependent(
        &self,
        _ns: &str,
        name: &str,
        patch: &Value,
    ) -> Result<(), kube::Error> {
        self.patches
            .lock()
            .unwrap()
            .push((name.to_owned(), patch.clone()));
        match *self.fail_with.lock().unwrap() {
            None => Ok(()),
            Some(code) => Err(kube::Error::Api(
                kube::core::Status::failure("injected", "")
                    .with_code(code)
                    .boxed(),
            )),
        }
    }
}

fn deployment() -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some(DEPLOY_UID.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn rs(name: &str, app: &str, track: Option<&str>, owner: Option<&str>) -> ReplicaSet {
    let mut labels = BTreeMap::from([("app".to_string(), app.to_string())]);
    if let Some(track) = track {
        labels.insert("track".into(), track.into());
    }
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            labels: Some(labels),
            owner_references: owner.map(|uid| vec![controller_ref_to(uid)]),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `app=web, track notin (canary)`.
fn web_not_canary() -> Selector {
    Selector::from_label_selector(&LabelSelector {
        match_labels: Some(BTreeMap::from([("app".into(), "web".into())])),
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "track".into(),
            operator: "NotIn".into(),
            values: Some(vec!["canary".into()]),
        }]),
    })
    .unwrap()
}

#[tokio::test]
async fn claims_replicasets_for_a_deployment() {
    let patcher = Arc::new(RsPatcher::default());
    let owner = OwnerMeta::from_resource(&deployment()).unwrap();
    let manager =
        ReplicaSetControllerRefManager::new(patcher.clone(), owner, web_not_canary(), AlwaysAdopt);
    let sets = vec![
        rs("kept", "web", None, Some(DEPLOY_UID)),
        rs("canary", "web", Some("canary"), Some(DEPLOY_UID)),
        rs("orphan", "web", Some("stable"), None),
        rs("other-app", "api", None, None),
        rs("foreign", "web", None, Some("someone-else")),
    ];
    let out = manager.claim_replica_sets(&sets, &[]).await;
    assert!(out.is_ok());
    let claimed: Vec<_> = out
        .claimed
        .iter()
        .map(|r| r.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(claimed, ["kept", "orphan"]);
    assert_eq!(
        *patcher.patches.lock().unwrap(),
        vec![
            (
                "canary".to_string(),
                json!({"metadata":{"uid":"uid-canary",
                    "ownerReferences":[{"$patch":"delete","uid":DEPLOY_UID}]}})
            ),
            (
                "orphan".to_string(),
                json!({"metadata":{"uid":"uid-orphan","ownerReferences":[{
                    "apiVersion":"apps/v1","kind":"Deployment","name":"web","uid":DEPLOY_UID,
                    "controller":true,"blockOwnerDeletion":true}]}})
            ),
        ]
    );
}

#[tokio::test]
async fn replicaset_release_swallows_invalid_and_not_found_only() {
    for (code, ok) in [(404, true), (422, true), (500, false)] {
        let patcher = Arc::new(RsPatcher::default());
        *patcher.fail_with.lock().unwrap() = Some(code);
        let owner = OwnerMeta::from_resource(&deployment()).unwrap();
        let manager: ControllerRefManager<ReplicaSet, _> =
            ControllerRefManager::new(patcher, owner, web_not_canary(), AlwaysAdopt);
        let out = manager
            .claim(
                vec![rs("canary", "web", Some("canary"), Some(DEPLOY_UID))],
                &[],
            )
            .await;
        assert_eq!(out.is_ok(), ok, "{code}");
    }
}

/// The decision table, checked cell by cell through the public API.
#[test]
fn decision_table() {
    let alive = OwnerMeta::new("apps/v1", "Deployment", "web", DEPLOY_UID)
        .unwrap()
        .with_namespace("default");
    let dying = alive.clone().with_deletion_timestamp(now());
    let cluster = OwnerMeta::new("example.com/v1", "Fleet", "f", DEPLOY_UID).unwrap();
    let decide = |owner: &OwnerMeta, obj: &ReplicaSet, matches: bool| {
        BaseRefManager::new(owner.clone(), Selector::everything(), AlwaysAdopt)
            .decide(obj, |_| matches)
    };
    let ours = rs("x", "web", None, Some(DEPLOY_UID));
    let theirs = rs("x", "web", None, Some("other"));
    let orphan = rs("x", "web", None, None);
    let mut dying_orphan = orphan.clone();
    dying_orphan.metadata.deletion_timestamp = Some(now());
    let mut far_orphan = orphan.clone();
    far_orphan.metadata.namespace = Some("elsewhere".into());

    use Decision::*;
    use SkipReason::*;
    for owner in [&alive, &dying] {
        for matches in [true, false] {
            assert_eq!(decide(owner, &theirs, matches), Skip(OwnedByOther));
        }
        assert_eq!(decide(owner, &ours, true), Keep);
    }
    assert_eq!(decide(&dying, &ours, false), Skip(OwnerBeingDeleted));
    assert_eq!(decide(&alive, &ours, false), Release);
    assert_eq!(decide(&dying, &orphan, true), Skip(OwnerBeingDeleted));
    assert_eq!(decide(&alive, &orphan, false), Skip(NotMatching));
    assert_eq!(
        decide(&alive, &dying_orphan, true),
        Skip(DependentBeingDeleted)
    );
    assert_eq!(decide(&alive, &far_orphan, true), Skip(OtherNamespace));
    assert_eq!(decide(&cluster, &far_orphan, true), Adopt);
    assert_eq!(decide(&alive, &orphan, true), Adopt);
}

#[test]
fn match_predicate_is_not_consulted_when_the_answer_cannot_matter() {
    let owner = OwnerMeta::new("apps/v1", "Deployment", "web", DEPLOY_UID).unwrap();
    let base = BaseRefManager::new(owner.clone(), Selector::everything(), AlwaysAdopt);
    let theirs = rs("x", "web", None, Some("other"));
    assert_eq!(
        base.decide(&theirs, |_| panic!("must not be called")),
        Decision::Skip(SkipReason::OwnedByOther)
    );
    let dying = BaseRefManager::new(
        owner.with_deletion_timestamp(now()),
        Selector::everything(),
        AlwaysAdopt,
    );
    let orphan = rs("x", "web", None, None);
    assert_eq!(
        dying.decide(&orphan, |_| panic!("must not be called")),
        Decision::Skip(SkipReason::OwnerBeingDeleted)
    );
}

/// `claim_object` with writes of the caller's own, over ConfigMaps.
#[tokio::test]
async fn claim_object_with_custom_writes() {
    let owner = OwnerMeta::new("example.com/v1", "Bundle", "b", "bundle-uid")
        .unwrap()
        .with_namespace("default");
    let base = BaseRefManager::new(owner, Selector::everything(), AlwaysAdopt);
    let cm = |name: &str, owner: Option<&str>| ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            uid: Some(format!("uid-{name}")),
            owner_references: owner.map(|u| vec![controller_ref_to(u)]),
            ..Default::default()
        },
        ..Default::default()
    };
    let log = Mutex::new(Vec::new());
    let adopt = async |c: &ConfigMap| {
        log.lock()
            .unwrap()
            .push(format!("adopt {}", c.metadata.name.as_deref().unwrap()));
        Ok::<(), Infallible>(())
    };
    let release = async |c: &ConfigMap| {
        log.lock()
            .unwrap()
            .push(format!("release {}", c.metadata.name.as_deref().unwrap()));
        Ok::<(), Infallible>(())
    };
    let wanted = |c: &ConfigMap| c.metadata.name.as_deref() != Some("unwanted");

    assert!(
        base.claim_object(&cm("orphan", None), wanted, adopt, release)
            .await
            .unwrap()
    );
    assert!(
        !base
            .claim_object(&cm("unwanted", Some("bundle-uid")), wanted, adopt, release)
            .await
            .unwrap()
    );
    assert!(
        base.claim_object(&cm("mine", Some("bundle-uid")), wanted, adopt, release)
            .await
            .unwrap()
    );
    assert_eq!(*log.lock().unwrap(), ["adopt orphan", "release unwanted"]);
}

#[tokio::test]
async fn claim_object_treats_not_found_as_not_claimed_and_surfaces_the_rest() {
    let owner = OwnerMeta::new("apps/v1", "Deployment", "web", DEPLOY_UID)
        .unwrap()
        .with_namespace("default");
    let base = BaseRefManager::new(owner, Selector::everything(), AlwaysAdopt);
    let status = |code: u16, reason: &str| {
        kube::Error::Api(
            kube::core::Status::failure("x", reason)
                .with_code(code)
                .boxed(),
        )
    };
    let orphan = rs("orphan", "web", None, None);
    let noop = async |_: &ReplicaSet| Ok::<(), kube::Error>(());

    let gone = async |_: &ReplicaSet| Err(status(404, "NotFound"));
    assert!(
        !base
            .claim_object(&orphan, |_| true, gone, noop)
            .await
            .unwrap()
    );

    let boom = async |_: &ReplicaSet| Err(status(500, "InternalError"));
    let err = base
        .claim_object(&orphan, |_| true, boom, noop)
        .await
        .unwrap_err();
    assert!(matches!(err, ClaimError::Adopt { .. }));

    // Unlike the ref manager's own release, claim_object does not swallow
    // Invalid: that is the release write's business (as upstream).
    let ours = rs("ours", "web", None, Some(DEPLOY_UID));
    let invalid = async |_: &ReplicaSet| Err(status(422, "Invalid"));
    let err = base
        .claim_object(&ours, |_| false, noop, invalid)
        .await
        .unwrap_err();
    assert!(matches!(err, ClaimError::Release { .. }));
}

// ----- kube-backed pieces against a mock API server ---------------------------

type Seen = Arc<Mutex<Vec<(String, String, Option<String>, Value)>>>;

/// A `kube::Client` whose "API server" records requests and answers with
/// `respond(method, path)`.
fn mock_client(respond: fn(&str, &str) -> (u16, Value)) -> (kube::Client, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let service = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let log = log.clone();
        async move {
            let method = req.method().to_string();
            let path = req.uri().path().to_string();
            let content_type = req
                .headers()
                .get(http::header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_string());
            let bytes = req.into_body().collect_bytes().await.unwrap();
            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            log.lock()
                .unwrap()
                .push((method.clone(), path.clone(), content_type, body));
            let (code, reply) = respond(&method, &path);
            let response = http::Response::builder()
                .status(code)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(kube::client::Body::from(
                    serde_json::to_vec(&reply).unwrap(),
                ))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    (kube::Client::new(service, "default"), seen)
}

fn rs_json(uid: &str, deleting: bool) -> Value {
    let mut v = json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "rs1", "namespace": "default", "uid": uid},
    });
    if deleting {
        v["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
    }
    v
}

fn not_found() -> Value {
    json!({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"not found"})
}

#[tokio::test]
async fn api_patcher_sends_a_strategic_merge_patch() {
    let (client, seen) = mock_client(|_, _| (200, rs_json("uid-rs1", false)));
    let patcher = ApiPatcher::<ReplicaSet>::new(client).with_field_manager("ctrlkit");
    let patch = json!({"metadata":{"uid":"uid-rs1"}});
    patcher
        .patch_dependent("default", "rs1", &patch)
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (method, path, content_type, body) = &seen[0];
    assert_eq!(method, "PATCH");
    assert_eq!(path, "/apis/apps/v1/namespaces/default/replicasets/rs1");
    assert_eq!(
        content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );
    assert_eq!(body, &patch);
}

#[tokio::test]
async fn api_patcher_not_found_is_classified() {
    let (client, _) = mock_client(|_, _| (404, not_found()));
    let patcher = ApiPatcher::<ReplicaSet>::new(client);
    let err = patcher
        .patch_dependent("default", "rs1", &json!({}))
        .await
        .unwrap_err();
    assert!(ctrlkit_refmanager::ApiErrorClass::is_not_found(&err));
}

async fn recheck_with(
    respond: fn(&str, &str) -> (u16, Value),
) -> (Result<(), CanAdoptError>, Seen) {
    use ctrlkit_refmanager::CanAdopt;
    let (client, seen) = mock_client(respond);
    let owner = OwnerMeta::new("apps/v1", "ReplicaSet", "rs1", "uid-rs1")
        .unwrap()
        .with_namespace("default");
    let check = ApiRecheck::new(kube::Api::<ReplicaSet>::namespaced(client, "default"));
    (check.can_adopt(&owner).await, seen)
}

#[tokio::test]
async fn api_recheck_reads_the_owner_live() {
    let (ok, seen) = recheck_with(|_, _| (200, rs_json("uid-rs1", false))).await;
    ok.unwrap();
    let (method, path) = {
        let seen = seen.lock().unwrap();
        (seen[0].0.clone(), seen[0].1.clone())
    };
    assert_eq!(method, "GET");
    assert_eq!(path, "/apis/apps/v1/namespaces/default/replicasets/rs1");

    let (err, _) = recheck_with(|_, _| (200, rs_json("other", false))).await;
    assert!(matches!(err, Err(CanAdoptError::UidChanged { .. })));
    let (err, _) = recheck_with(|_, _| (200, rs_json("uid-rs1", true))).await;
    assert!(matches!(err, Err(CanAdoptError::BeingDeleted { .. })));
    let (err, _) = recheck_with(|_, _| (404, not_found())).await;
    assert!(matches!(err, Err(CanAdoptError::Gone { .. })));
    let (err, _) = recheck_with(|_, _| {
        (
            500,
            json!({"kind":"Status","code":500,"reason":"InternalError"}),
        )
    })
    .await;
    assert!(matches!(err, Err(CanAdoptError::ReadFailed { .. })));
}

/// A claim future can be spawned on a multi-threaded runtime with the
/// usual production types.
#[tokio::test]
async fn claim_futures_are_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (client, _) = mock_client(|_, _| (200, Value::Null));
    let control: Arc<dyn PodControl> = Arc::new(ctrlkit_podcontrol::FakePodControl::new());
    let owner = OwnerMeta::new("apps/v1", "ReplicaSet", "rs1", "uid-rs1").unwrap();
    let check = ApiRecheck::new(kube::Api::<ReplicaSet>::namespaced(
        client.clone(),
        "default",
    ));
    let manager =
        PodControllerRefManager::new(control, owner.clone(), Selector::everything(), check);
    let pods: Vec<Arc<Pod>> = Vec::new();
    assert_send(&manager.claim_pods(pods, &[]));

    let rs_manager: ControllerRefManager<ReplicaSet, _> = ControllerRefManager::new(
        Arc::new(ApiPatcher::<ReplicaSet>::new(client)),
        owner,
        Selector::everything(),
        AlwaysAdopt,
    );
    let sets: Vec<ReplicaSet> = Vec::new();
    assert_send(&rs_manager.claim(&sets, &[]));
}
