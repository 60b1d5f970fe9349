//! `KubeChildControl` against a scripted in-process API: the HTTP requests
//! it sends for children of other kinds than pods, the events it records,
//! and the write gate.
#![allow(clippy::unwrap_used)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use ctrlkit_childcontrol::{
    ChildControl, ChildControlError, KubeChildControl, Operation, WriteAttempt, WriteGate,
    WriteRefused,
};
use ctrlkit_events::Recorder;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Preconditions};
use kube::Client;
use kube::api::Patch;
use serde_json::{Value, json};

#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    content_type: String,
    body: Value,
}

impl Seen {
    fn is_event(&self) -> bool {
        self.path.ends_with("/events")
    }
}

type Responder = dyn Fn(&Seen) -> (StatusCode, Value) + Send + Sync;

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
                query: parts.uri.query().unwrap_or_default().to_owned(),
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

/// Echoes created and patched objects, naming generated ones.
fn healthy(req: &Seen) -> (StatusCode, Value) {
    match req.method {
        Method::POST if req.is_event() => (StatusCode::CREATED, req.body.clone()),
        Method::POST => {
            let mut obj = req.body.clone();
            if obj["metadata"].get("name").is_none() {
                let prefix = obj["metadata"]["generateName"]
                    .as_str()
                    .unwrap_or("")
                    .to_owned();
                obj["metadata"]["name"] = json!(format!("{prefix}q8x2z"));
            }
            obj["metadata"]["uid"] = json!("child-uid-1");
            obj["metadata"]["resourceVersion"] = json!("42");
            (StatusCode::CREATED, obj)
        }
        Method::DELETE => (
            StatusCode::OK,
            json!({"kind": "Status", "status": "Success"}),
        ),
        Method::PATCH => (
            StatusCode::OK,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "web-config", "namespace": "ns", "resourceVersion": "43"}}),
        ),
        _ => (StatusCode::METHOD_NOT_ALLOWED, json!({})),
    }
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure",
           "code": code, "reason": reason, "message": message})
}

fn failing(method: Method, code: u16, answer: Value) -> Arc<Responder> {
    Arc::new(move |req: &Seen| {
        if req.method == method && !req.is_event() {
            (StatusCode::from_u16(code).unwrap(), answer.clone())
        } else {
            healthy(req)
        }
    })
}

fn owner() -> ObjectReference {
    ObjectReference {
        api_version: Some("example.com/v1".into()),
        kind: Some("App".into()),
        name: Some("web".into()),
        namespace: Some("ns".into()),
        uid: Some("app-uid".into()),
        ..ObjectReference::default()
    }
}

fn controller_ref() -> OwnerReference {
    OwnerReference {
        api_version: "example.com/v1".into(),
        kind: "App".into(),
        name: "web".into(),
        uid: "app-uid".into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn template() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            generate_name: Some("web-config-".into()),
            labels: Some([("app".to_string(), "web".to_string())].into()),
            resource_version: Some("999".into()),
            ..ObjectMeta::default()
        },
        data: Some([("mode".to_string(), "fast".to_string())].into()),
        ..ConfigMap::default()
    }
}

fn requests(seen: &Arc<Mutex<Vec<Seen>>>) -> Vec<Seen> {
    seen.lock().unwrap().clone()
}

/// A control recording as `reporter` through a recorder the test can
/// flush: events are written by a background task.
fn with_recorder(client: Client, reporter: &str) -> (KubeChildControl<ConfigMap>, Recorder) {
    let recorder = Recorder::new(client.clone(), reporter);
    (
        KubeChildControl::with_event_recorder(client, recorder.clone()),
        recorder,
    )
}

#[tokio::test]
async fn create_posts_the_child_and_records_successful_create() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubeChildControl::<ConfigMap>::new(client, "app-controller");
    let cm = control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    assert_eq!(cm.metadata.name.as_deref(), Some("web-config-q8x2z"));

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
    assert_eq!(create.path, "/api/v1/namespaces/ns/configmaps");
    let meta = &create.body["metadata"];
    assert_eq!(meta["namespace"], "ns");
    assert_eq!(meta["generateName"], "web-config-");
    assert!(
        meta.get("resourceVersion").is_none(),
        "server fields cleared"
    );
    assert_eq!(
        meta["ownerReferences"],
        json!([{"apiVersion": "example.com/v1", "kind": "App", "name": "web", "uid": "app-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(create.body["data"], json!({"mode": "fast"}));

    let event = &reqs[1];
    assert_eq!(event.path, "/api/v1/namespaces/ns/events");
    assert_eq!(event.body["reason"], "SuccessfulCreate");
    assert_eq!(event.body["type"], "Normal");
    assert_eq!(event.body["action"], "CreateConfigMap");
    assert_eq!(event.body["message"], "Created configmap: web-config-q8x2z");
    assert_eq!(event.body["involvedObject"]["kind"], "App");
    assert_eq!(event.body["related"]["kind"], "ConfigMap");
    assert_eq!(event.body["related"]["uid"], "child-uid-1");
    assert_eq!(event.body["reportingComponent"], "app-controller");
    assert_eq!(event.body["source"]["component"], "app-controller");
    assert_eq!(event.body["count"], 1);
}

#[tokio::test]
async fn created_metadata_only_returns_the_child_sent_with_the_assigned_metadata() {
    // The server also fills in a field the child was sent without.
    let (client, _seen) = mock_client(Arc::new(|req: &Seen| {
        let (code, mut body) = healthy(req);
        if req.method == Method::POST && !req.is_event() {
            body["immutable"] = json!(true);
            body["metadata"]["creationTimestamp"] = json!("2026-11-26T01:00:00Z");
            body["metadata"]["managedFields"] = json!([{"manager": "x", "operation": "Update"}]);
        }
        (code, body)
    }));
    let control = KubeChildControl::<ConfigMap>::without_events(client);
    let full = control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    assert_eq!(full.immutable, Some(true), "by default the stored object");

    let slim = control
        .clone()
        .with_created_metadata_only()
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    assert_eq!(slim.metadata.name.as_deref(), Some("web-config-q8x2z"));
    assert_eq!(slim.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(slim.metadata.uid.as_deref(), Some("child-uid-1"));
    assert_eq!(slim.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(
        slim.metadata.creation_timestamp,
        full.metadata.creation_timestamp
    );
    assert!(slim.metadata.creation_timestamp.is_some());
    assert_eq!(
        slim.metadata.owner_references,
        full.metadata.owner_references
    );
    assert_eq!(slim.data, full.data, "as sent");
    assert_eq!(slim.immutable, None, "the rest of the response is not read");
    assert_eq!(slim.metadata.managed_fields, None);
}

#[tokio::test]
async fn failures_record_the_servers_message_not_a_debug_dump() {
    let quota = status(
        403,
        "Forbidden",
        "configmaps \"web-config-\" is forbidden: exceeded quota: cms",
    );
    let (client, seen) = mock_client(failing(Method::POST, 403, quota));
    let (control, recorder) = with_recorder(client, "app-controller");
    let err = control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap_err();
    recorder.flush().await;
    assert!(err.is_forbidden() && !err.is_namespace_terminating());
    assert_eq!(
        err.to_string(),
        "configmaps \"web-config-\" is forbidden: exceeded quota: cms"
    );
    let reqs = requests(&seen);
    assert_eq!(reqs[1].body["reason"], "FailedCreate");
    assert_eq!(reqs[1].body["type"], "Warning");
    assert_eq!(
        reqs[1].body["message"],
        "Error creating: configmaps \"web-config-\" is forbidden: exceeded quota: cms"
    );

    let conflict = status(
        409,
        "Conflict",
        "Precondition failed: UID in precondition: a",
    );
    let (client, seen) = mock_client(failing(Method::DELETE, 409, conflict));
    let (control, recorder) = with_recorder(client, "app-controller");
    let err = control
        .delete("ns", "web-config", &owner(), None)
        .await
        .unwrap_err();
    recorder.flush().await;
    assert!(err.is_conflict());
    let reqs = requests(&seen);
    assert_eq!(reqs[1].body["reason"], "FailedDelete");
    assert_eq!(
        reqs[1].body["message"],
        "Error deleting: Precondition failed: UID in precondition: a"
    );
}

#[tokio::test]
async fn namespace_terminating_is_its_own_error_without_event() {
    let answer = status(
        403,
        "Forbidden",
        "unable to create new content in namespace ns because it is being terminated",
    );
    let (client, seen) = mock_client(failing(Method::POST, 403, answer));
    let (control, recorder) = with_recorder(client, "c");
    let err = control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap_err();
    recorder.flush().await;
    assert!(
        matches!(&err, ChildControlError::NamespaceTerminating { namespace } if namespace == "ns")
    );
    assert_eq!(requests(&seen).len(), 1, "no event");
}

#[tokio::test]
async fn delete_sends_preconditions_records_the_event_and_ignores_missing_children() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let (control, recorder) = with_recorder(client, "c");
    let pre = Preconditions {
        uid: Some("child-uid".into()),
        resource_version: None,
    };
    control
        .delete("ns", "web-config", &owner(), Some(&pre))
        .await
        .unwrap();
    recorder.flush().await;
    let reqs = requests(&seen);
    assert_eq!(reqs[0].method, Method::DELETE);
    assert_eq!(reqs[0].path, "/api/v1/namespaces/ns/configmaps/web-config");
    assert_eq!(reqs[0].body["preconditions"], json!({"uid": "child-uid"}));
    assert_eq!(reqs[1].body["reason"], "SuccessfulDelete");
    assert_eq!(reqs[1].body["message"], "Deleted configmap: web-config");
    assert_eq!(reqs[1].body["related"]["uid"], "child-uid");

    // A bare 404 without a reason counts as gone too.
    let (client, seen) = mock_client(failing(Method::DELETE, 404, status(404, "", "gone")));
    let (control, recorder) = with_recorder(client, "c");
    control.delete("ns", "gone", &owner(), None).await.unwrap();
    recorder.flush().await;
    assert_eq!(
        requests(&seen).len(),
        1,
        "no event for a child already gone"
    );
}

#[tokio::test]
async fn patches_use_their_content_type_and_apply_names_the_field_manager() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let (control, recorder) = with_recorder(client, "app-controller");
    let body = json!({"metadata": {"labels": {"x": "y"}}});
    let cm = control
        .patch("ns", "web-config", &Patch::Merge(body.clone()))
        .await
        .unwrap();
    assert_eq!(cm.metadata.resource_version.as_deref(), Some("43"));
    control
        .patch("ns", "web-config", &Patch::Strategic(body.clone()))
        .await
        .unwrap();
    control
        .patch("ns", "web-config", &Patch::Apply(body.clone()))
        .await
        .unwrap();
    recorder.flush().await;
    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 3, "patches record no events");
    assert_eq!(reqs[0].content_type, "application/merge-patch+json");
    assert_eq!(
        reqs[1].content_type,
        "application/strategic-merge-patch+json"
    );
    assert_eq!(reqs[2].content_type, "application/apply-patch+yaml");
    assert!(
        reqs[2].query.contains("fieldManager=app-controller"),
        "{}",
        reqs[2].query
    );
    assert_eq!(reqs[0].body, body);
}

#[tokio::test]
async fn cluster_scoped_children_ignore_the_namespace() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubeChildControl::<Namespace>::without_events(client);
    let mut template = Namespace::default();
    template.metadata.name = Some("tenant-a".into());
    let ns = control
        .create("ignored", &template, &owner(), &controller_ref())
        .await
        .unwrap();
    assert_eq!(ns.metadata.name.as_deref(), Some("tenant-a"));
    let reqs = requests(&seen);
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].path, "/api/v1/namespaces");
    assert!(reqs[0].body["metadata"].get("namespace").is_none());
}

#[tokio::test]
async fn the_write_gate_refuses_before_any_request() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let open = Arc::new(AtomicBool::new(true));
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let gate: Arc<dyn WriteGate> = {
        let (open, attempts) = (open.clone(), attempts.clone());
        Arc::new(move |a: &WriteAttempt<'_>| {
            attempts.lock().unwrap().push((
                a.operation,
                a.kind.to_owned(),
                a.namespace.to_owned(),
                a.name.map(str::to_owned),
            ));
            if open.load(Ordering::SeqCst) {
                Ok(())
            } else {
                Err(WriteRefused::new("lease lost"))
            }
        })
    };
    let (control, recorder) = with_recorder(client, "c");
    let control = control.with_write_gate(gate);
    control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap();
    open.store(false, Ordering::SeqCst);
    let create = control
        .create("ns", &template(), &owner(), &controller_ref())
        .await
        .unwrap_err();
    let delete = control.delete("ns", "a", &owner(), None).await.unwrap_err();
    let patch = control
        .patch("ns", "a", &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    for err in [create, delete, patch] {
        assert!(err.is_write_refused(), "{err:?}");
        assert_eq!(err.to_string(), "write refused: lease lost");
    }
    recorder.flush().await;
    assert_eq!(
        requests(&seen).len(),
        2,
        "one create and its event, nothing after"
    );
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(
        attempts.iter().map(|a| a.0).collect::<Vec<_>>(),
        [
            Operation::Create,
            Operation::Create,
            Operation::Delete,
            Operation::Patch
        ]
    );
    assert_eq!(attempts[0].1, "ConfigMap");
    assert_eq!(attempts[0].2, "ns");
    assert_eq!(attempts[0].3, None, "a generated name is not known yet");
    assert_eq!(attempts[2].3.as_deref(), Some("a"));
}

#[tokio::test]
async fn invalid_templates_send_nothing() {
    let (client, seen) = mock_client(Arc::new(healthy));
    let control = KubeChildControl::<ConfigMap>::new(client, "c");
    let mut unnamed = template();
    unnamed.metadata.generate_name = None;
    let err = control
        .create("ns", &unnamed, &owner(), &controller_ref())
        .await
        .unwrap_err();
    assert!(err.is_invalid());
    let mut not_controller = controller_ref();
    not_controller.controller = None;
    assert!(
        control
            .create("ns", &template(), &owner(), &not_controller)
            .await
            .unwrap_err()
            .is_invalid()
    );
    assert!(requests(&seen).is_empty());
    assert!(format!("{control:?}").contains("records_events: true"));
}
