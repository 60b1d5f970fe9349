//! `managedFields` as kube-apiserver returns them: one entry per manager,
//! operation and subresource, for creates, updates, status writes and
//! server-side apply; the manager from `fieldManager` or the User-Agent.
#![allow(clippy::unwrap_used)]

mod common;

use common::kubectl::Kubectl;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn entries(obj: &impl serde::Serialize) -> Vec<Value> {
    serde_json::to_value(obj).unwrap()["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn entry<'a>(all: &'a [Value], manager: &str) -> &'a Value {
    all.iter()
        .find(|e| e["manager"] == manager)
        .unwrap_or_else(|| panic!("no entry for {manager}: {all:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_update_status_and_apply_sequences() {
    let cluster = common::start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let pp = PostParams {
        field_manager: Some("creator".into()),
        ..PostParams::default()
    };
    let rs = rss
        .create(&pp, &common::replicaset("web", 1))
        .await
        .unwrap();
    let all = entries(&rs);
    assert_eq!(all.len(), 1, "{all:?}");
    let e = &all[0];
    assert_eq!(e["manager"], "creator");
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        e["time"],
        json!(rs.metadata.creation_timestamp.as_ref().unwrap())
    );
    assert!(e.get("subresource").is_none());
    let f = &e["fieldsV1"];
    assert!(f["f:spec"]["f:replicas"].is_object(), "{f}");
    assert!(
        f["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["."].is_object(),
        "{f}"
    );
    assert!(
        f.get("f:status").is_none(),
        "status is the status subresource's: {f}"
    );
    assert!(
        f["f:metadata"].get("f:name").is_none(),
        "server-owned metadata is not listed: {f}"
    );

    // A status write is its own entry, with subresource status.
    let status_pp = PatchParams {
        field_manager: Some("status-writer".into()),
        ..PatchParams::default()
    };
    let rs = rss
        .patch_status(
            "web",
            &status_pp,
            &Patch::Merge(json!({"status": {"replicas": 1, "readyReplicas": 1}})),
        )
        .await
        .unwrap();
    let all = entries(&rs);
    let st = entry(&all, "status-writer");
    assert_eq!(st["subresource"], "status");
    assert_eq!(
        st["fieldsV1"],
        json!({"f:status": {"f:readyReplicas": {}, "f:replicas": {}}})
    );

    // An update takes the fields it changed from their old manager.
    let scaler = PatchParams {
        field_manager: Some("scaler".into()),
        ..PatchParams::default()
    };
    let rs = rss
        .patch(
            "web",
            &scaler,
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    let all = entries(&rs);
    assert_eq!(
        entry(&all, "scaler")["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );
    assert!(
        entry(&all, "creator")["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    // A no-op write changes nothing, not even times.
    let again = rss
        .patch(
            "web",
            &scaler,
            &Patch::Merge(json!({"spec": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert_eq!(again.resource_version(), rs.resource_version());

    // Apply: its own entry, listed first, owning its configuration.
    let apply = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "labels": {"tier": "web"}}});
    let rs = rss
        .patch("web", &PatchParams::apply("applier"), &Patch::Apply(apply))
        .await
        .unwrap();
    let all = entries(&rs);
    assert_eq!(all[0]["manager"], "applier");
    assert_eq!(all[0]["operation"], "Apply");
    assert_eq!(
        all[0]["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:tier": {}}}})
    );
    let managers: Vec<_> = all.iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(managers.len(), 4, "{managers:?}");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manager_defaults_to_the_user_agent_prefix() {
    let cluster = common::start().await;
    let req = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/json")
        .header("user-agent", "my-operator/1.2.3 (linux/amd64)")
        .body(kube::client::Body::from(
            br#"{"metadata":{"name":"ua"},"data":{"k":"v"}}"#.to_vec(),
        ))
        .unwrap();
    assert_eq!(cluster.client().send(req).await.unwrap().status(), 201);
    let cm = Api::<ConfigMap>::namespaced(cluster.client(), "default")
        .get("ua")
        .await
        .unwrap();
    let all = entries(&cm);
    assert_eq!(all[0]["manager"], "my-operator");
    assert_eq!(all[0]["fieldsV1"], json!({"f:data": {".": {}, "f:k": {}}}));

    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    k.apply(
        dir.path(),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  a: b\n",
    )
    .await;
    k.run_async(&["label", "cm", "applied", "team=x"]).await;
    let cm = k
        .json_async(&["get", "cm", "applied", "--show-managed-fields"])
        .await;
    let all = cm["metadata"]["managedFields"].as_array().unwrap().clone();
    let managers: Vec<_> = all.iter().map(|e| e["manager"].as_str().unwrap()).collect();
    assert_eq!(managers, ["kubectl-client-side-apply", "kubectl-label"]);
    assert_eq!(
        entry(&all, "kubectl-label")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {".": {}, "f:team": {}}}})
    );
    // kubectl hides them unless asked.
    let plain = k.json_async(&["get", "cm", "applied"]).await;
    assert!(plain["metadata"].get("managedFields").is_none());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_fields_can_be_left_out() {
    let cluster = ctrlkit_testcluster::TestCluster::start(
        ctrlkit_testcluster::TestClusterConfig::default().with_managed_fields(false),
    )
    .await
    .unwrap();
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let rs = rss
        .create(&PostParams::default(), &common::replicaset("web", 1))
        .await
        .unwrap();
    assert!(entries(&rs).is_empty());
    let rs = rss
        .patch("web", &PatchParams::apply("a"), &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web", "labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert!(entries(&rs).is_empty());
    assert_eq!(rs.labels()["x"], "y");
    cluster.shutdown().await;
}
