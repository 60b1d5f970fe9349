//! Helpers shared by the recorder's tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use ctrlkit_events::{Event, EventType};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use parking_lot::Mutex;
use serde_json::json;

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

/// How the mock answers the n-th request (from 0): `None` is a transport
/// failure, `Some(201)` lets the mock's event store answer (a create of a
/// name it has is 409 AlreadyExists, a patch of a name it lacks 404
/// NotFound, as the API server), another code is a Status with it.
pub type Answer = Arc<dyn Fn(usize) -> Option<u16> + Send + Sync>;

/// Awaited before the mock answers a request: delays or stalls it.
pub type Hold = Arc<dyn Fn(&Call) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A request to the mock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// `"create"` or `"patch"`.
    pub verb: &'static str,
    /// The event's name.
    pub name: String,
    /// The `count` the request writes.
    pub count: Option<i64>,
}

impl Call {
    /// The object the event is about (events are named `<object>.<hex>`).
    pub fn object(&self) -> &str {
        self.name.rsplit_once('.').map_or("", |(object, _)| object)
    }
}

#[derive(Default)]
struct MockState {
    /// Events by name, as stored.
    events: HashMap<String, serde_json::Value>,
    /// Requests answered, in the order they were answered, with the code.
    answered: Vec<(Call, u16)>,
    in_flight: usize,
    peak_in_flight: usize,
}

/// A mock API server for events: answers as [`Answer`] says, after
/// [`Hold`], and remembers what it answered.
pub struct MockApi {
    /// A client of the mock.
    pub client: Client,
    requests: Arc<AtomicUsize>,
    state: Arc<Mutex<MockState>>,
}

fn status(code: u16, reason: &str) -> (StatusCode, Bytes) {
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "code": code, "reason": reason, "message": reason});
    (
        StatusCode::from_u16(code).unwrap(),
        Bytes::from(status.to_string()),
    )
}

impl MockState {
    /// What an API server storing events answers `call` with `body`.
    fn store(&mut self, call: &Call, body: &[u8]) -> (StatusCode, Bytes) {
        let body: serde_json::Value = serde_json::from_slice(body).unwrap();
        match call.verb {
            "create" if self.events.contains_key(&call.name) => status(409, "AlreadyExists"),
            "create" => {
                self.events.insert(call.name.clone(), body.clone());
                (StatusCode::CREATED, Bytes::from(body.to_string()))
            }
            _ => match self.events.get_mut(&call.name) {
                None => status(404, "NotFound"),
                Some(stored) => {
                    for field in ["count", "lastTimestamp", "message"] {
                        if let Some(value) = body.get(field) {
                            stored[field] = value.clone();
                        }
                    }
                    (StatusCode::OK, Bytes::from(stored.to_string()))
                }
            },
        }
    }
}

impl MockApi {
    /// A mock answering with `answer`, each request after `hold` if given.
    pub fn new(answer: Answer, hold: Option<Hold>) -> Self {
        let requests = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(Mutex::new(MockState::default()));
        let (seen, shared) = (requests.clone(), state.clone());
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let n = seen.fetch_add(1, Ordering::SeqCst);
            let (answer, hold, state) = (answer.clone(), hold.clone(), shared.clone());
            async move {
                let verb = if req.method() == http::Method::POST {
                    "create"
                } else {
                    "patch"
                };
                let path_name = req.uri().path().rsplit('/').next().unwrap().to_owned();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
                let call = Call {
                    verb,
                    name: if verb == "create" {
                        value["metadata"]["name"].as_str().unwrap().to_owned()
                    } else {
                        path_name
                    },
                    count: value["count"].as_i64(),
                };
                {
                    let mut state = state.lock();
                    state.in_flight += 1;
                    state.peak_in_flight = state.peak_in_flight.max(state.in_flight);
                }
                if let Some(hold) = hold {
                    hold(&call).await;
                }
                let mut state = state.lock();
                state.in_flight -= 1;
                let (code, body) = match answer(n) {
                    None => {
                        return Err::<Response<Full<Bytes>>, _>(std::io::Error::other(
                            "connection reset",
                        ));
                    }
                    Some(201) => state.store(&call, &body),
                    Some(code) => status(code, "InternalError"),
                };
                state.answered.push((call, code.as_u16()));
                Ok(Response::builder()
                    .status(code)
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(body))
                    .unwrap())
            }
        });
        Self {
            client: Client::new(service, "default"),
            requests,
            state,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// Requests answered so far, in order, with their status codes.
    pub fn answered(&self) -> Vec<(Call, u16)> {
        self.state.lock().answered.clone()
    }

    /// The most requests the mock held at once.
    pub fn peak_in_flight(&self) -> usize {
        self.state.lock().peak_in_flight
    }

    /// The events the mock stores.
    pub fn stored(&self) -> HashMap<String, serde_json::Value> {
        self.state.lock().events.clone()
    }
}

/// A client of a [`MockApi`] answering with `answer`, and its count of
/// requests received.
pub fn mock_client(answer: Answer) -> (Client, Arc<AtomicUsize>) {
    let mock = MockApi::new(answer, None);
    (mock.client, mock.requests)
}

/// Every request answered with `code` (201: by the event store).
pub fn always(code: u16) -> Answer {
    Arc::new(move |_| Some(code))
}
