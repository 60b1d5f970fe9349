//! The `replicaset-controller` binary as an operator runs it: a kubeconfig
//! file, HTTP endpoints, SIGTERM for a graceful stop.
#![allow(clippy::unwrap_used)]

mod process;

use std::process::Command;

use k8s_openapi::api::core::v1::ReplicationController;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use process::{Cluster, Process, create_replicaset, http_get, metric_sum, wait_converged};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_replicaset-controller");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_converges_a_replicaset_serves_endpoints_and_stops_on_sigterm() {
    let cluster = Cluster::start().await;
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let mut controller = Process::spawn(
        "rs-controller",
        BIN,
        &[
            "--kubeconfig",
            &kubeconfig,
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
            "--workers",
            "2",
        ],
    );
    let addr = controller.endpoint().await;
    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    process::eventually("/readyz to answer 200", || async {
        (http_get(addr, "/readyz").await.0 == 200).then_some(())
    })
    .await;

    let client = cluster.client();
    let uid = create_replicaset(&client, "default", "web", 3).await;
    wait_converged(&client, "default", "web", &uid, 3).await;

    let (status, metrics) = http_get(addr, "/metrics").await;
    assert_eq!(status, 200);
    assert!(metrics.contains("workqueue_adds_total"), "{metrics}");
    assert!(
        metrics.contains("controller_runtime_reconcile_total"),
        "{metrics}"
    );
    assert!(
        metric_sum(&metrics, "workqueue_adds_total") > 0.0,
        "{metrics}"
    );
    assert!(
        metric_sum(&metrics, "controller_runtime_reconcile_total") > 0.0,
        "{metrics}"
    );

    controller.sigterm();
    let status = controller.wait_exit().await;
    assert!(status.success(), "exit status {status}");
    assert!(controller.logged("shutting down").is_some());
    assert!(controller.logged("stopped").is_some());
    // The endpoints are gone with the process.
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}

#[test]
fn unreadable_kubeconfig_is_a_clear_error_not_a_panic() {
    let output = Command::new(BIN)
        .args([
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--metrics-addr",
            "0",
            "--health-addr",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot load kubeconfig /nonexistent/kubeconfig"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn no_cluster_configuration_at_all_says_where_it_looked() {
    let home = tempfile::tempdir().unwrap();
    let output = Command::new(BIN)
        .args(["--metrics-addr", "0", "--health-addr", "0"])
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .env("HOME", home.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no Kubernetes configuration found"),
        "{stderr}"
    );
    assert!(stderr.contains("--kubeconfig"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn invalid_flags_are_rejected_with_usage_errors() {
    for (args, needle) in [
        (&["--workers", "0"][..], "at least 1"),
        (&["--burst-replicas", "0"][..], "at least 1"),
        (&["--metrics-addr", "nowhere"][..], "invalid address"),
        (
            &[
                "--leader-elect",
                "--lease-duration",
                "5",
                "--renew-deadline",
                "5",
            ][..],
            "renew deadline",
        ),
    ] {
        let output = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn help_explains_every_flag() {
    let output = Command::new(BIN).arg("--help").output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in [
        "--kubeconfig",
        "--context",
        "--namespace",
        "--workers",
        "--burst-replicas",
        "--leader-elect",
        "--lease-name",
        "--lease-namespace",
        "--lease-duration",
        "--renew-deadline",
        "--metrics-addr",
        "--health-addr",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controller_binary_converges_a_replication_controller() {
    let cluster = Cluster::start().await;
    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let mut controller = Process::spawn(
        "rc-controller",
        env!("CARGO_BIN_EXE_replication-controller"),
        &[
            "--kubeconfig",
            &kubeconfig,
            "--namespace",
            "default",
            "--metrics-addr",
            "0",
            "--health-addr",
            "127.0.0.1:0",
        ],
    );
    controller
        .wait_for_log("serving /healthz and /readyz")
        .await;
    assert!(controller.logged("serving /metrics").is_none());

    let client = cluster.client();
    let resource = ApiResource::erase::<ReplicationController>(&());
    let rcs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let rc: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "legacy", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"app": "legacy"},
            "template": {
                "metadata": {"labels": {"app": "legacy"}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    rcs.create(&PostParams::default(), &rc).await.unwrap();
    process::eventually("rc/legacy to report 2 ready replicas", || async {
        let rc = rcs.get("legacy").await.ok()?;
        let ready = rc.data.pointer("/status/readyReplicas")?.as_u64()?;
        (ready == 2).then_some(())
    })
    .await;
    assert_eq!(process::pod_count(&client, "default", "legacy").await, 2);

    controller.sigterm();
    let status = controller.wait_exit().await;
    assert!(status.success(), "exit status {status}");
}

/// One ReplicaSet the client cannot decode (here a number where the pod
/// template has a string; on a real cluster a newer API version's field or
/// a webhook's mistake) blinds nothing: the others converge, and it gets a
/// `Warning DecodeFailed` event naming the problem (issue 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_replicaset_gets_a_warning_event_and_blinds_nothing() {
    use k8s_openapi::api::core::v1::Event;
    use kube::api::ListParams;
    let cluster = Cluster::start().await;
    let client = cluster.client();
    let bad: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "bad"}},
            "template": {
                "metadata": {"labels": {"app": "bad"}},
                "spec": {"containers": [{
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "terminationMessagePath": 42
                }]}
            }
        }
    }))
    .unwrap();
    process::replicasets(&client, "default")
        .create(&PostParams::default(), &bad)
        .await
        .unwrap();

    let kubeconfig = cluster.kubeconfig.path().to_str().unwrap().to_string();
    let mut controller = Process::spawn(
        "rs-controller",
        BIN,
        &[
            "--kubeconfig",
            &kubeconfig,
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ],
    );
    let uid = create_replicaset(&client, "default", "good", 2).await;
    wait_converged(&client, "default", "good", &uid, 2).await;

    let events: Api<Event> = Api::namespaced(client.clone(), "default");
    let warning = process::eventually("a DecodeFailed event on the bad ReplicaSet", || {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default().fields("involvedObject.name=bad"))
                .await
                .ok()?;
            list.items
                .into_iter()
                .find(|e| e.reason.as_deref() == Some("DecodeFailed"))
        }
    })
    .await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    assert_eq!(warning.involved_object.kind.as_deref(), Some("ReplicaSet"));
    assert_eq!(
        warning.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("replicaset-controller")
    );
    let message = warning.message.unwrap_or_default();
    assert!(
        message.contains("terminationMessagePath") || message.contains("invalid type"),
        "{message}"
    );
    controller.sigterm();
    assert!(controller.wait_exit().await.success());
}
