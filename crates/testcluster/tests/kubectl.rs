//! Stock `kubectl` against the `testcluster` binary.
//!
//! Needs kubectl at /usr/bin/kubectl (or on PATH); CI installs it. Every
//! kubectl call gets `--request-timeout`, and every wait has a generous
//! deadline that only guards against hangs.
#![allow(clippy::unwrap_used)]

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use serde_json::Value;

mod common;
use common::kubectl::{ChildGuard, GUARD, Kubectl, kubectl_binary};

/// Start the binary and wait for its `ready` line.
fn start_cluster(kubeconfig: &Path) -> (ChildGuard, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_testcluster"))
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .args(["--start-delay-ms", "20", "--ready-delay-ms", "20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let guard = ChildGuard(child);
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = rx
        .recv_timeout(GUARD)
        .expect("testcluster did not print its ready line");
    assert!(line.contains("ready"), "unexpected first line: {line}");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in the ready line: {line}"))
        .to_owned();
    (guard, url)
}

const MANIFESTS: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: app
          image: nginx:1.27
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: legacy
spec:
  replicas: 1
  selector:
    app: legacy
  template:
    metadata:
      labels:
        app: legacy
    spec:
      containers:
        - name: app
          image: nginx:1.27
"#;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: watched
spec:
  containers:
    - name: app
      image: nginx:1.27
"#;

#[test]
fn stock_kubectl_works_against_the_binary() {
    let kubectl_bin = kubectl_binary();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let (mut server, url) = start_cluster(&kubeconfig);
    let k = Kubectl {
        bin: kubectl_bin,
        kubeconfig,
    };
    let config = k.run(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    assert_eq!(config, url);

    // create -f (server-side validation works: the server serves OpenAPI v3)
    let manifests = dir.path().join("workloads.yaml");
    std::fs::write(&manifests, MANIFESTS).unwrap();
    let created = k.run(&["create", "-f", manifests.to_str().unwrap()]);
    assert!(created.contains("replicaset.apps/web created"), "{created}");
    assert!(
        created.contains("replicationcontroller/legacy created"),
        "{created}"
    );
    let err = k.fail(&["create", "-f", manifests.to_str().unwrap()]);
    assert!(
        err.contains("AlreadyExists") || err.contains("already exists"),
        "{err}"
    );

    // get -o json
    let rs = k.json(&["get", "replicaset", "web"]);
    assert_eq!(rs["kind"], "ReplicaSet");
    assert_eq!(rs["apiVersion"], "apps/v1");
    assert_eq!(rs["spec"]["replicas"], 2);
    assert_eq!(rs["metadata"]["labels"]["app"], "web");
    assert_eq!(rs["metadata"]["generation"], 1);
    assert!(
        rs["metadata"]["uid"]
            .as_str()
            .is_some_and(|u| !u.is_empty())
    );
    assert_eq!(
        rs["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );
    let rc = k.json(&["get", "rc", "legacy"]);
    assert_eq!(rc["kind"], "ReplicationController");
    assert_eq!(rc["spec"]["replicas"], 1);
    assert_eq!(rc["spec"]["selector"]["app"], "legacy");
    let list = k.json(&["get", "replicasets"]);
    assert_eq!(list["items"].as_array().unwrap().len(), 1);

    // scale (through the scale subresource)
    let out = k.run(&["scale", "replicaset", "web", "--replicas=5"]);
    assert!(out.contains("scaled"), "{out}");
    let rs = k.json(&["get", "replicaset", "web"]);
    assert_eq!(rs["spec"]["replicas"], 5);
    assert_eq!(
        rs["metadata"]["generation"], 2,
        "spec change bumps generation"
    );
    k.run(&["scale", "rc", "legacy", "--replicas=3"]);
    assert_eq!(k.json(&["get", "rc", "legacy"])["spec"]["replicas"], 3);

    // label, with and without --overwrite
    k.run(&["label", "replicaset", "web", "tier=frontend"]);
    let err = k.fail(&["label", "replicaset", "web", "tier=backend"]);
    assert!(err.contains("already has a value"), "{err}");
    k.run(&["label", "--overwrite", "replicaset", "web", "tier=backend"]);
    let labels = &k.json(&["get", "replicaset", "web"])["metadata"]["labels"];
    assert_eq!(labels["tier"], "backend");
    assert_eq!(labels["app"], "web");
    let selected = k.json(&["get", "replicasets", "-l", "tier=backend"]);
    assert_eq!(selected["items"].as_array().unwrap().len(), 1);

    // delete
    let out = k.run(&["delete", "replicaset", "web"]);
    assert!(out.contains("deleted"), "{out}");
    k.run(&["delete", "rc", "legacy"]);
    let err = k.fail(&["get", "replicaset", "web"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );

    // get pods -w shows a pod come, become ready (kubelet simulation), go.
    let mut watch = k
        .command(&["get", "pods", "-w", "-o", "json", "--output-watch-events"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let watch_out = watch.stdout.take().unwrap();
    let watch = ChildGuard(watch);
    let (tx, events) = mpsc::channel::<Value>();
    thread::spawn(move || {
        for v in serde_json::Deserializer::from_reader(watch_out).into_iter::<Value>() {
            let Ok(v) = v else { break };
            if tx.send(v).is_err() {
                break;
            }
        }
    });
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, POD).unwrap();
    k.run(&["create", "-f", pod.to_str().unwrap()]);
    let deadline = Instant::now() + GUARD;
    let mut seen = Vec::new();
    let next_event = |seen: &Vec<String>| loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = events
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("watch output incomplete, saw {seen:?}"));
        if ev["object"]["metadata"]["name"] == "watched" {
            return ev["type"].as_str().unwrap().to_owned();
        }
    };
    // The pod shows up (from kubectl's initial list or its watch); from
    // then on kubectl's watch sees every change.
    seen.push(next_event(&seen));
    k.run(&[
        "wait",
        "--for=condition=Ready",
        "pod/watched",
        "--timeout=60s",
    ]);
    let pod_json = k.json(&["get", "pod", "watched"]);
    assert_eq!(pod_json["status"]["phase"], "Running");
    assert!(pod_json["spec"]["nodeName"].as_str().is_some());
    // kubectl delete waits until the kubelet has finished the deletion.
    k.run(&["delete", "pod", "watched", "--timeout=60s"]);
    while !seen.iter().any(|t| t == "DELETED") {
        seen.push(next_event(&seen));
    }
    assert_eq!(seen.first().map(String::as_str), Some("ADDED"), "{seen:?}");
    assert!(seen.iter().any(|t| t == "MODIFIED"), "{seen:?}");
    drop(watch);

    // SIGTERM: the server stops and exits cleanly.
    let pid = server.0.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(status.success());
    let deadline = Instant::now() + GUARD;
    let exit = loop {
        if let Some(exit) = server.0.try_wait().unwrap() {
            break exit;
        }
        assert!(Instant::now() < deadline, "testcluster ignored SIGTERM");
        thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "testcluster exited with {exit}");
}
