//! A minimal API server for one CRD, built only from
//! `ctrlkit_testcluster::crd`'s public API, for driving stock kubectl
//! against the OpenAPI document and the Table columns before the test
//! cluster's server serves them: legacy discovery for the CRD, the
//! `/openapi/v3` index and group-version document, and Table lists of a
//! fixed set of objects. Every request's path and query is recorded.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use ctrlkit_testcluster::crd::{CustomResourceDefinition, GroupVersionDocument, PrinterColumns};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// What the server serves.
struct Served {
    crd: CustomResourceDefinition,
    objects: Vec<Value>,
    now: jiff::Timestamp,
    requests: Mutex<Vec<String>>,
}

/// The server, stopped when dropped.
pub(crate) struct FakeApiserver {
    pub(crate) addr: SocketAddr,
    served: Arc<Served>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApiserver {
    /// Serves `crd` with `objects` (all in namespace `default`), ages
    /// measured up to `now`.
    pub(crate) fn start(
        crd: CustomResourceDefinition,
        objects: Vec<Value>,
        now: jiff::Timestamp,
    ) -> Self {
        let served = Arc::new(Served {
            crd,
            objects,
            now,
            requests: Mutex::new(Vec::new()),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = served.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let app = Router::new().fallback(handle).with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Self {
            addr,
            served,
            shutdown: Some(tx),
            thread: Some(thread),
        }
    }

    /// The requests seen so far (`path?query`).
    pub(crate) fn requests(&self) -> Vec<String> {
        self.served.requests.lock().clone()
    }

    /// A kubeconfig for this server in `dir`.
    pub(crate) fn kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let config = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: http://{}\nusers:\n- name: fake\n  user:\n    token: fake\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\n",
            self.addr
        );
        std::fs::write(&path, config).unwrap();
        path
    }
}

impl Drop for FakeApiserver {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn respond(status: StatusCode, content_type: &str, body: Vec<u8>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap()
}

fn json_response(v: &Value) -> Response {
    respond(
        StatusCode::OK,
        "application/json",
        v.to_string().into_bytes(),
    )
}

fn not_found(path: &str) -> Response {
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                        "message": format!("the server could not find the requested resource ({path})"),
                        "reason": "NotFound", "code": 404});
    respond(
        StatusCode::NOT_FOUND,
        "application/json",
        status.to_string().into_bytes(),
    )
}

async fn handle(State(served): State<Arc<Served>>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    served.requests.lock().push(if query.is_empty() {
        path.clone()
    } else {
        format!("{path}?{query}")
    });
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .unwrap_or("")
        .to_string();
    let crd = &served.crd;
    let served_versions: Vec<&str> = crd
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let group_base = format!("/apis/{}/", crd.group);
    match path.as_str() {
        "/version" => json_response(
            &json!({"major": "1", "minor": "32", "gitVersion": "v1.32.0",
                                              "platform": "linux/amd64"}),
        ),
        "/api" => json_response(&json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})),
        "/api/v1" => json_response(
            &json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": []}),
        ),
        "/apis" => {
            let versions: Vec<Value> = served_versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{}/{v}", crd.group), "version": v}))
                .collect();
            let preferred = crd
                .storage_version()
                .map(|v| v.name.clone())
                .unwrap_or_default();
            json_response(
                &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
                    "name": crd.group, "versions": versions,
                    "preferredVersion": {"groupVersion": format!("{}/{preferred}", crd.group), "version": preferred},
                }]}),
            )
        }
        "/openapi/v3" => {
            let mut paths = serde_json::Map::new();
            for v in &served_versions {
                let doc = GroupVersionDocument::build([crd], &crd.group, v).unwrap();
                let (key, entry) = doc.index_entry();
                paths.insert(key, entry);
            }
            json_response(&json!({"paths": paths}))
        }
        p if p.starts_with("/openapi/v3/apis/") => {
            let rest = &p["/openapi/v3/apis/".len()..];
            let Some((group, version)) = rest.split_once('/') else {
                return not_found(p);
            };
            match GroupVersionDocument::build([crd], group, version) {
                Some(doc) => respond(StatusCode::OK, "application/json", doc.body().to_vec()),
                None => not_found(p),
            }
        }
        p if p.starts_with(&group_base) => {
            let rest = &p[group_base.len()..];
            let parts: Vec<&str> = rest.split('/').collect();
            match parts.as_slice() {
                [version] if served_versions.contains(version) => discovery(crd, version),
                [version, "namespaces", _, plural] if *plural == crd.names.plural => {
                    list(&served, version, &accept)
                }
                _ => not_found(p),
            }
        }
        p => not_found(p),
    }
}

fn discovery(crd: &CustomResourceDefinition, version: &str) -> Response {
    let v = crd.version(version).unwrap();
    let mut resources = vec![json!({
        "name": crd.names.plural, "singularName": crd.names.singular, "namespaced": crd.namespaced(),
        "kind": crd.names.kind, "shortNames": crd.names.short_names, "categories": crd.names.categories,
        "verbs": ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"],
    })];
    if v.subresources.status {
        resources.push(json!({"name": format!("{}/status", crd.names.plural), "singularName": "",
            "namespaced": crd.namespaced(), "kind": crd.names.kind, "verbs": ["get", "patch", "update"]}));
    }
    json_response(&json!({"kind": "APIResourceList", "apiVersion": "v1",
                          "groupVersion": format!("{}/{version}", crd.group), "resources": resources}))
}

fn list(served: &Served, version: &str, accept: &str) -> Response {
    let crd = &served.crd;
    let api_version = format!("{}/{version}", crd.group);
    if !accept.contains("as=Table") {
        return json_response(
            &json!({"kind": crd.names.list_kind, "apiVersion": api_version,
                                     "metadata": {"resourceVersion": "1"}, "items": served.objects}),
        );
    }
    let columns = PrinterColumns::for_version(crd.version(version).unwrap());
    let rows: Vec<Value> = served
        .objects
        .iter()
        .map(|o| {
            json!({
                "cells": columns.cells(o, served.now),
                "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                           "metadata": o["metadata"]},
            })
        })
        .collect();
    let table = json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "1"},
                       "columnDefinitions": columns.definitions(), "rows": rows});
    respond(
        StatusCode::OK,
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        table.to_string().into_bytes(),
    )
}

/// Stock kubectl (at /usr/bin/kubectl or on PATH) against a kubeconfig,
/// with its caches in `cache`: stdout, or stderr when it fails.
pub(crate) fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> Result<String, String> {
    let bin = ["/usr/bin/kubectl"]
        .iter()
        .map(PathBuf::from)
        .chain(
            std::env::var_os("PATH")
                .map(|p| {
                    std::env::split_paths(&p)
                        .map(|d| d.join("kubectl"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default(),
        )
        .find(|p| p.exists())
        .expect(
            "kubectl is not installed (looked at /usr/bin/kubectl and on PATH); CI installs it",
        );
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--request-timeout=30s")
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err(String::from_utf8(out.stderr).unwrap())
    }
}
