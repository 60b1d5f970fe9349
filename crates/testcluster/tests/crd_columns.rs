//! `additionalPrinterColumns` as stock `kubectl get` shows them: a fake
//! API server answers Table requests with the columns and cells
//! `ctrlkit_testcluster::crd::PrinterColumns` computes.
//!
//! Needs kubectl at /usr/bin/kubectl (or on PATH); CI installs it.
#![allow(clippy::unwrap_used)]

#[path = "crd_openapi/fake_apiserver.rs"]
mod fake_apiserver;

use ctrlkit_testcluster::crd::{CustomResourceDefinition, PrinterColumns};
use fake_apiserver::{FakeApiserver, kubectl};
use serde_json::{Value, json};

fn crd(columns: Value) -> CustomResourceDefinition {
    CustomResourceDefinition::from_value(&json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": columns,
            }],
        },
    }))
    .unwrap()
}

fn crontab(name: &str, created: &str, spec: Value, status: Value) -> Value {
    json!({
        "apiVersion": "stable.example.com/v1", "kind": "CronTab",
        "metadata": {"name": name, "namespace": "default", "creationTimestamp": created,
                     "uid": format!("uid-{name}"), "resourceVersion": "1"},
        "spec": spec, "status": status,
    })
}

fn now() -> jiff::Timestamp {
    "2026-01-02T03:04:05Z".parse().unwrap()
}

/// kubectl's table output as rows of cells, cut at the header's column
/// starts (empty cells print as blanks).
fn table(out: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|&(i, c)| c != ' ' && (i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    std::iter::once(header)
        .chain(lines)
        .map(|line| {
            starts
                .iter()
                .enumerate()
                .map(|(n, &start)| {
                    let end = starts
                        .get(n + 1)
                        .copied()
                        .unwrap_or(line.len())
                        .min(line.len());
                    line.get(start.min(line.len())..end)
                        .unwrap_or("")
                        .trim()
                        .to_string()
                })
                .collect()
        })
        .collect()
}

#[test]
fn kubectl_get_shows_declared_columns() {
    let crd = crd(json!([
        {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
        {"name": "Images", "type": "string", "jsonPath": ".spec.containers[*].image", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]));
    let objects = vec![
        crontab(
            "hourly",
            "2026-01-02T02:59:00Z",
            json!({"cronSpec": "@hourly", "replicas": 3, "containers": [{"image": "busybox"}, {"image": "nginx"}]}),
            json!({"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}),
        ),
        crontab(
            "daily",
            "2025-12-30T03:04:05Z",
            json!({"cronSpec": "@daily"}),
            json!({}),
        ),
    ];
    // The cells the server sends, as kube-apiserver computes them.
    let columns = PrinterColumns::for_version(crd.version("v1").unwrap());
    assert_eq!(
        columns.cells(&objects[0], now()),
        vec![
            json!("hourly"),
            json!("@hourly"),
            json!(3),
            json!("True"),
            json!("busybox"),
            json!("5m5s")
        ]
    );
    assert_eq!(
        columns.cells(&objects[1], now()),
        vec![
            json!("daily"),
            json!("@daily"),
            Value::Null,
            Value::Null,
            Value::Null,
            json!("3d")
        ]
    );

    let server = FakeApiserver::start(crd, objects, now());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(dir.path());
    let cache = dir.path().join("cache");

    let out = kubectl(&kubeconfig, &cache, &["get", "crontabs"]).unwrap();
    assert_eq!(
        table(&out),
        vec![
            vec!["NAME", "SPEC", "REPLICAS", "READY", "AGE"],
            vec!["hourly", "@hourly", "3", "True", "5m5s"],
            // kubectl prints an empty (null) cell as a blank.
            vec!["daily", "@daily", "", "", "3d"],
        ],
        "{out}"
    );
    // Priority 1 columns only with -o wide, in declared order.
    let wide = kubectl(&kubeconfig, &cache, &["get", "crontabs", "-o", "wide"]).unwrap();
    assert_eq!(
        table(&wide),
        vec![
            vec!["NAME", "SPEC", "REPLICAS", "READY", "IMAGES", "AGE"],
            vec!["hourly", "@hourly", "3", "True", "busybox", "5m5s"],
            vec!["daily", "@daily", "", "", "", "3d"],
        ],
        "{wide}"
    );
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.starts_with("/apis/stable.example.com/v1/namespaces/default/crontabs")),
        "{:?}",
        server.requests()
    );
}

#[test]
fn kubectl_get_without_declared_columns_shows_name_and_age() {
    let objects = vec![crontab(
        "hourly",
        "2026-01-02T01:04:05Z",
        json!({}),
        json!({}),
    )];
    let server = FakeApiserver::start(crd(json!([])), objects, now());
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig(dir.path());
    let out = kubectl(&kubeconfig, &dir.path().join("cache"), &["get", "crontabs"]).unwrap();
    assert_eq!(
        table(&out),
        vec![vec!["NAME", "AGE"], vec!["hourly", "120m"]],
        "{out}"
    );
}
