//! `KubePodControl` against a scripted in-process API: the HTTP requests it
//! sends and how it treats the answers.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ctrlkit_events::Recorder;
use ctrlkit_podcontrol::{KubePodControl, PodControl, PodControlError};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::{Container, ObjectReference, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Preconditions};
use kube::Client;
use serde_json::{Value, json};

/// One request the client sent.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    content_type: String,
    body: Value,
}

impl Seen {
    fn is_event(&self) -> bool {
        self.path.ends_with("/events")
    }
}

type Responder = dyn Fn(&Seen) -> (StatusCode, Value) + Send + Sync;

/// A client whose every request is recorded and answered by `respond`.
fn mock_client(respond: Arc<Responder>) -> (Client, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let service = tower::service_fn(move |req: Request<kube::client::Body>| {
        let log = log.clone();
        let respond = respond.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body.collect().await.unwrap().to_bytes();
            let request = Seen {
                method: parts.method,
                path: parts.uri.path().to_owned(),
                content_type: parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default(),
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            };
            let (status, body) = respond(&request);
            log.lock().unwrap().push(request);
            let response = Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap();
            Ok::<_, Infallible>(response)
        }
    });
    (Client::new(service, "default"), seen)
}

/// Answers like a healthy API server: echoes created and patched objects,
/// giving created pods a name and UID.
fn healthy(req: &Seen) -> (StatusCode, Value) {
    match req.method {
        Method::POST if req.is_event() => (StatusCode::CREATED, req.body.clone()),
        Method::POST => {
            let mut pod = req.body.clone();
            let prefix = pod["metadata"]["generateName"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            pod["metadata"]["name"] = json!(format!("{prefix}x7k2p"));
            pod["metadata"]["uid"] = json!("pod-uid-1");
            pod["metadata"]["resourceVersion"] = json!("42");
            (StatusCode::CREATED, pod)
        }
        Method::DELETE => (
            StatusCode::OK,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}),
        ),
        Method::PATCH => {
            let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": "p", "namespace": "ns"}});
            if let Some(labels) = req.body["metadata"].get("labels") {
                pod["metadata"]["labels"] = labels.clone();
            }
            (StatusCode::OK, pod)
        }
        _ => (StatusCode::METHOD_NOT_ALLOWED, json!({})),
    }
}

fn status(code: u16, reason: &str, message: &str, details: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
           "code": code, "reason": reason, "message": message, "details": details})
}

/// `healthy`, except that requests matching `(method, is_event)` get
/// `answer`.
fn failing(method: Method, events: bool, code: u16, answer: Value) -> Arc<Responder> {
    Arc::new(move |req: &Seen| {
        if req.method == method && req.is_event() == events {
            (StatusCode::from_u16(code).unwrap(), answer.clone())
        } else {
            healthy(req)
        }
    })
}

fn owner() -> ObjectReference {
    ObjectReference {
        api_version: Some("apps/v1".into()),
        kind: Some("ReplicaSet".into()),
        name: Some("web".into()),
        namespace: Some("ns".into()),
        uid: Some("rs-uid".into()),
        ..ObjectReference::default()
    }
}

fn controller_ref() -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "ReplicaSet".into(),
        name: "web".into(),
        uid: "rs-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn template() -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([("app".into(), "web".into())])),
            annotations: Some(BTreeMap::from([("a".into(), "b".into())])),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "nginx".into(),
                image: Some("nginx:1.27".into()),
                ..Container::default()
            }],
            ..PodSpec::default()
        }),
    }
}

fn requests(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
    seen.lock().unwrap().clone()
}

/// A pod control recording as `reporter` through a recorder the test can
/// flush: events are written by a background task.
fn with_recorder(client: Client, reporter: &str) -> (KubePodControl, Recorder) {
    let recorder = Recorder::new(client.clone(), reporter);
    (
        KubePodControl::with_event_recorder(client, recorder.clone()),
        recorder,
    )
}

#[tokio::test]
async fn create_posts_the_pod_and_records_successful_create() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubePodControl::new(client, "replicaset-controller");
    let pod = control
        .create_pods("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    assert_eq!(pod.metadata.name.as_deref(), Some("web-x7k2p"));
    assert_eq!(pod.metadata.uid.as_deref(), Some("pod-uid-1"));

    // The event is written by the recorder's background task.
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while requests(&seen).len() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 2, "{reqs:#?}");
    let create = &reqs[0];
    assert_eq!(create.method, Method::POST);
    assert_eq!(create.path, "/api/v1/namespaces/ns/pods");
    let meta = &create.body["metadata"];
    assert_eq!(meta["generateName"], "web-");
    assert!(meta.get("name").is_none());
    assert_eq!(meta["labels"], json!({"app": "web"}));
    assert_eq!(meta["annotations"], json!({"a": "b"}));
    assert_eq!(
        meta["ownerReferences"],
        json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(create.body["spec"]["containers"][0]["image"], "nginx:1.27");

    let event = &reqs[1];
    assert_eq!(event.method, Method::POST);
    assert_eq!(event.path, "/api/v1/namespaces/ns/events");
    assert_eq!(event.body["reason"], "SuccessfulCreate");
    assert_eq!(event.body["type"], "Normal");
    assert_eq!(event.body["message"], "Created pod: web-x7k2p");
    assert_eq!(event.body["involvedObject"]["name"], "web");
    assert_eq!(event.body["involvedObject"]["kind"], "ReplicaSet");
    assert_eq!(event.body["related"]["name"], "web-x7k2p");
    assert_eq!(event.body["reportingComponent"], "replicaset-controller");
    assert_eq!(event.body["source"]["component"], "replicaset-controller");
}

#[tokio::test]
async fn create_failure_records_failed_create_and_keeps_the_status() {
    let answer = status(500, "InternalError", "etcd is sad", json!({}));
    let (client, seen) = mock_client(failing(Method::POST, false, 500, answer));
    let (control, recorder) = with_recorder(client, "rs");
    let err = control
        .create_pods("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap_err();
    recorder.flush().await;
    assert_eq!(err.status_code(), Some(500));
    assert!(matches!(err, PodControlError::Api(_)));

    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].body["reason"], "FailedCreate");
    assert_eq!(reqs[1].body["type"], "Warning");
    assert_eq!(reqs[1].body["message"], "Error creating: etcd is sad");
}

#[tokio::test]
async fn namespace_terminating_is_its_own_error_without_event() {
    let by_cause = status(
        403,
        "Forbidden",
        "pods \"web-\" is forbidden: unable to create new content in namespace ns because it is being terminated",
        json!({"kind": "pods", "causes": [{"reason": "NamespaceTerminating",
               "message": "namespace ns is being terminated", "field": "metadata.namespace"}]}),
    );
    let by_message = status(
        403,
        "Forbidden",
        "unable to create new content in namespace ns because it is being terminated",
        json!({}),
    );
    for answer in [by_cause, by_message] {
        let (client, seen) = mock_client(failing(Method::POST, false, 403, answer));
        let (control, recorder) = with_recorder(client, "rs");
        let err = control
            .create_pods("ns", &template(), &owner(), &controller_ref())
            .await
            .unwrap_err();
        recorder.flush().await;
        assert!(
            matches!(&err, PodControlError::NamespaceTerminating { namespace } if namespace == "ns"),
            "{err:?}"
        );
        assert!(err.is_namespace_terminating());
        assert_eq!(requests(&seen).len(), 1, "no event expected");
    }

    // Another Forbidden (e.g. quota) is a normal failure with an event.
    let quota = status(403, "Forbidden", "exceeded quota: pods", json!({}));
    let (client, seen) = mock_client(failing(Method::POST, false, 403, quota));
    let (control, recorder) = with_recorder(client, "rs");
    let err = control
        .create_pods("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap_err();
    recorder.flush().await;
    assert!(err.is_forbidden() && !err.is_namespace_terminating());
    assert_eq!(requests(&seen)[1].body["reason"], "FailedCreate");
}

#[tokio::test]
async fn invalid_templates_send_nothing() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubePodControl::new(client, "rs");
    let mut unlabelled = template();
    unlabelled.metadata.as_mut().unwrap().labels = None;
    let err = control
        .create_pods("ns", &unlabelled, &owner(), &controller_ref())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no labels"));

    let mut not_controller = controller_ref();
    not_controller.controller = Some(false);
    let err = control
        .create_pods("ns", &template(), &owner(), &not_controller)
        .await
        .unwrap_err();
    assert!(matches!(err, PodControlError::InvalidTemplate(_)));
    assert!(requests(&seen).is_empty());
}

#[tokio::test]
async fn delete_sends_preconditions_and_records_successful_delete() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let (control, recorder) = with_recorder(client, "rs");
    let pre = Preconditions {
        uid: Some("pod-uid".into()),
        resource_version: Some("7".into()),
    };
    control
        .delete_pod("ns", "web-1", &owner(), Some(&pre))
        .await
        .unwrap();
    recorder.flush().await;

    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[0].method, Method::DELETE);
    assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/pods/web-1");
    assert_eq!(
        reqs[0].body["preconditions"],
        json!({"uid": "pod-uid", "resourceVersion": "7"})
    );
    assert_eq!(reqs[1].body["reason"], "SuccessfulDelete");
    assert_eq!(reqs[1].body["message"], "Deleted pod: web-1");
    assert_eq!(reqs[1].body["related"]["name"], "web-1");

    // Without preconditions none are sent.
    control
        .delete_pod("ns", "web-2", &owner(), None)
        .await
        .unwrap();
    let reqs = requests(&seen);
    assert!(
        reqs[2].body.get("preconditions").is_none(),
        "{:?}",
        reqs[2].body
    );
}

#[tokio::test]
async fn deleting_a_missing_pod_is_ok_and_silent() {
    let answer = status(
        404,
        "NotFound",
        "pods \"gone\" not found",
        json!({"name": "gone", "kind": "pods"}),
    );
    let (client, seen) = mock_client(failing(Method::DELETE, false, 404, answer));
    let (control, recorder) = with_recorder(client, "rs");
    control
        .delete_pod("ns", "gone", &owner(), None)
        .await
        .unwrap();
    recorder.flush().await;
    assert_eq!(
        requests(&seen).len(),
        1,
        "no event for an already-deleted pod"
    );
}

#[tokio::test]
async fn delete_failure_records_failed_delete_and_stays_typed() {
    let answer = status(
        409,
        "Conflict",
        "Precondition failed: UID in precondition: a, UID in object meta: b",
        json!({}),
    );
    let (client, seen) = mock_client(failing(Method::DELETE, false, 409, answer));
    let (control, recorder) = with_recorder(client, "rs");
    let err = control
        .delete_pod("ns", "p", &owner(), None)
        .await
        .unwrap_err();
    recorder.flush().await;
    assert!(err.is_conflict());
    let reqs = requests(&seen);
    assert_eq!(reqs[1].body["reason"], "FailedDelete");
    assert_eq!(reqs[1].body["type"], "Warning");
    assert!(
        reqs[1].body["message"]
            .as_str()
            .unwrap()
            .starts_with("Error deleting: Precondition failed"),
        "{}",
        reqs[1].body["message"]
    );
}

#[tokio::test]
async fn patch_is_a_strategic_merge_patch_without_events() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let patch = json!({"metadata": {"uid": "pod-uid", "labels": {"x": "y"}}});
    let pod = KubePodControl::new(client, "rs")
        .patch_pod("ns", "p", &patch)
        .await
        .unwrap();
    assert_eq!(pod.metadata.labels.unwrap()["x"], "y");
    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, Method::PATCH);
    assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/pods/p");
    assert_eq!(
        reqs[0].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(reqs[0].body, patch);
}

#[tokio::test]
async fn patch_errors_are_typed() {
    let answer = status(404, "NotFound", "pods \"p\" not found", json!({}));
    let (client, _) = mock_client(failing(Method::PATCH, false, 404, answer));
    let err = KubePodControl::new(client, "rs")
        .patch_pod("ns", "p", &json!({}))
        .await
        .unwrap_err();
    assert!(err.is_not_found());
}

#[tokio::test]
async fn event_failures_never_fail_the_operation() {
    let answer = status(500, "InternalError", "events are down", json!({}));
    let (client, seen) = mock_client(failing(Method::POST, true, 500, answer));
    let (control, recorder) = with_recorder(client, "rs");
    control
        .create_pods("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    control.delete_pod("ns", "p", &owner(), None).await.unwrap();
    recorder.flush().await;
    assert_eq!(recorder.stats().failed, 2);
    assert_eq!(requests(&seen).iter().filter(|r| r.is_event()).count(), 2);
}

#[tokio::test]
async fn without_events_records_nothing() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubePodControl::without_events(client);
    control
        .create_pods("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    control.delete_pod("ns", "p", &owner(), None).await.unwrap();
    assert!(requests(&seen).iter().all(|r| !r.is_event()));
    assert_eq!(requests(&seen).len(), 2);
    assert!(format!("{control:?}").contains("records_events: false"));
}

#[tokio::test]
async fn long_owner_names_are_cut_to_58_characters() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let long = "a".repeat(70);
    let mut owner = owner();
    owner.name = Some(long.clone());
    let mut cref = controller_ref();
    cref.name = long;
    KubePodControl::new(client, "rs")
        .create_pods("ns", &template(), &owner, &cref)
        .await
        .unwrap();
    let generate_name = requests(&seen)[0].body["metadata"]["generateName"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(generate_name, "a".repeat(58));
}
