//! ResourceQuota: object-count admission with kube-apiserver's 403 message
//! and `status.hard`/`status.used`, as upstream's e2e case "should surface
//! a failure condition on a common issue like exceeded quota" needs.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuota};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

async fn quota(client: &kube::Client, name: &str, hard: serde_json::Value) {
    Api::<ResourceQuota>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"hard": hard}}))
                .unwrap(),
        )
        .await
        .unwrap();
}

async fn used_becomes(client: &kube::Client, name: &str, want: serde_json::Value) {
    let quotas = Api::<ResourceQuota>::namespaced(client.clone(), "default");
    eventually(|| {
        let quotas = quotas.clone();
        let name = name.to_string();
        let want = want.clone();
        async move {
            let q = serde_json::to_value(quotas.get(&name).await.unwrap()).unwrap();
            q["status"]["used"] == want && q["status"]["hard"] == q["spec"]["hard"]
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_past_the_hard_limit_are_forbidden() {
    let cluster = start().await;
    let client = cluster.client();
    quota(&client, "pods-quota", json!({"pods": "2"})).await;
    used_becomes(&client, "pods-quota", json!({"pods": "0"})).await;
    create_pod(&client, "p1", json!({})).await;
    create_pod(&client, "p2", json!({})).await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let err = pods
        .create(&PostParams::default(), &pod("p3", json!({})))
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(status.reason, "Forbidden");
    assert_eq!(
        status.message,
        "pods \"p3\" is forbidden: exceeded quota: pods-quota, requested: pods=1, used: pods=2, limited: pods=2"
    );
    used_becomes(&client, "pods-quota", json!({"pods": "2"})).await;

    // Terminal and deleted pods free their unit.
    pods.patch_status(
        "p1",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    create_pod(&client, "p3", json!({})).await;
    pods.delete("p2", &DeleteParams::default()).await.unwrap();
    used_becomes(&client, "pods-quota", json!({"pods": "1"})).await;
    create_pod(&client, "p4", json!({})).await;
    // Other namespaces are not limited.
    Api::<Pod>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &pod("free", json!({})))
        .await
        .unwrap();
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_quotas_for_any_resource() {
    let cluster = start().await;
    let client = cluster.client();
    quota(
        &client,
        "counts",
        json!({"count/configmaps": "1", "count/pods": "1", "pods": "5"}),
    )
    .await;
    let cms = Api::<ConfigMap>::namespaced(client.clone(), "default");
    let cm =
        |n: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": n}})).unwrap();
    cms.create(&PostParams::default(), &cm("a")).await.unwrap();
    let err = cms
        .create(&PostParams::default(), &cm("b"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 403 && s.message == "configmaps \"b\" is forbidden: exceeded quota: counts, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"),
        "{err}"
    );
    create_pod(&client, "p1", json!({})).await;
    // Only the exceeded resource is named.
    let err = Api::<Pod>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &pod("p2", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.message.ends_with("requested: count/pods=1, used: count/pods=1, limited: count/pods=1")),
        "{err}"
    );
    used_becomes(
        &client,
        "counts",
        json!({"count/configmaps": "1", "count/pods": "1", "pods": "1"}),
    )
    .await;
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reports_the_exceeded_quota() {
    let cluster = start().await;
    let client = cluster.client();
    quota(&client, "q", json!({"pods": "1"})).await;
    create_pod(&client, "first", json!({})).await;
    used_becomes(&client, "q", json!({"pods": "1"})).await;
    let dir = tempfile::tempdir().unwrap();
    let k = kubectl::Kubectl::for_cluster(&cluster, dir.path());
    let path = dir.path().join("pod.yaml");
    std::fs::write(&path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: second\nspec:\n  containers:\n    - name: c\n      image: nginx\n").unwrap();
    let err = k
        .fail_async(&["create", "-f", path.to_str().unwrap()])
        .await;
    assert!(
        err.contains("Forbidden") && err.contains("pods \"second\" is forbidden: exceeded quota: q, requested: pods=1, used: pods=1, limited: pods=1"),
        "{err}"
    );
    let table = k.run_async(&["get", "quota"]).await;
    assert!(table.starts_with("NAME"), "{table}");
    assert!(table.contains("pods: 1/1"), "{table}");
    cluster.shutdown().await;
}
