//! Both controller binaries under exactly the RBAC their deploy manifests
//! grant (`deploy/*/rbac.yaml`, applied as shipped), against a test
//! cluster that enforces RBAC: a full scenario (create, scale up and down,
//! replace a deleted pod, leader election) answers no request 403. With
//! one verb taken away (`create` on pods) the controller meets the 403
//! and reports it on the owner: a `ReplicaFailure` condition with reason
//! `FailedCreate` and the API server's message, and a `FailedCreate`
//! Warning event.
#![allow(clippy::unwrap_used)]

mod process;

use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use process::{Process, eventually, pod_count, wait_converged};
use serde_json::{Value, json};

const NAMESPACE_YAML: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/namespace.yaml");

/// The controller under test: its binary, ServiceAccount, manifest and
/// owner type.
struct Controller {
    bin: &'static str,
    service_account: &'static str,
    rbac_yaml: &'static str,
    resource: ApiResource,
}

fn replicaset_controller() -> Controller {
    Controller {
        bin: env!("CARGO_BIN_EXE_replicaset-controller"),
        service_account: "replicaset-controller",
        rbac_yaml: concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/replicaset-controller/rbac.yaml"
        ),
        resource: ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&()),
    }
}

fn replication_controller() -> Controller {
    Controller {
        bin: env!("CARGO_BIN_EXE_replication-controller"),
        service_account: "replication-controller",
        rbac_yaml: concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/replication-controller/rbac.yaml"
        ),
        resource: ApiResource::erase::<k8s_openapi::api::core::v1::ReplicationController>(&()),
    }
}

/// An owner of `replicas` pause pods labelled `app=<name>`.
fn owner(controller: &Controller, name: &str, replicas: i32) -> DynamicObject {
    let template = json!({
        "metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
    });
    let selector = if controller.resource.kind == "ReplicaSet" {
        json!({"matchLabels": {"app": name}})
    } else {
        json!({"app": name})
    };
    serde_json::from_value(json!({
        "apiVersion": controller.resource.api_version,
        "kind": controller.resource.kind,
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }))
    .unwrap()
}

/// A cluster enforcing RBAC with a kubelet, the namespace and the
/// controller's RBAC applied (`edit` may change the manifest first), and
/// the controller running under its ServiceAccount.
async fn start(
    controller: &Controller,
    edit: impl FnOnce(String) -> String,
) -> (TestCluster, Process, tempfile::NamedTempFile) {
    let cluster = TestCluster::start(
        TestClusterConfig::default()
            .with_rbac(true)
            .with_kubelet(KubeletConfig::with_nodes(1, 110)),
    )
    .await
    .unwrap();
    cluster.apply_yaml_file(NAMESPACE_YAML).unwrap();
    let manifest = std::fs::read_to_string(controller.rbac_yaml).unwrap();
    cluster.apply_yaml(&edit(manifest)).unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    cluster
        .write_kubeconfig_for_service_account(
            kubeconfig.path(),
            "ctrlkit-system",
            controller.service_account,
        )
        .unwrap();
    let process = Process::spawn(
        controller.service_account,
        controller.bin,
        &[
            "--kubeconfig",
            kubeconfig.path().to_str().unwrap(),
            "--leader-elect",
            "--lease-namespace",
            "ctrlkit-system",
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "127.0.0.1:0",
        ],
    );
    (cluster, process, kubeconfig)
}

async fn full_scenario_without_a_403(controller: Controller) {
    let (cluster, mut process, _kubeconfig) = start(&controller, |m| m).await;
    process
        .wait_for_log("serving /metrics, /healthz and /readyz")
        .await;
    let client = cluster.client();
    let owners: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &controller.resource);
    let created = owners
        .create(&Default::default(), &owner(&controller, "web", 3))
        .await
        .unwrap();
    let uid = created.metadata.uid.unwrap();
    wait_converged_any(&client, &controller, "web", &uid, 3).await;
    // A deleted pod is replaced; scaling down deletes pods.
    let pods = process::pods(&client, "default");
    let victim = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .unwrap()
        .items[0]
        .metadata
        .name
        .clone()
        .unwrap();
    pods.delete(&victim, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    wait_converged_any(&client, &controller, "web", &uid, 3).await;
    owners
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    wait_converged_any(&client, &controller, "web", &uid, 1).await;
    // Leader election ran under the Role's lease rules.
    let leases: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "ctrlkit-system",
        &ApiResource::erase::<k8s_openapi::api::coordination::v1::Lease>(&()),
    );
    assert!(leases.get(controller.service_account).await.is_ok());

    let stats = cluster.requests();
    assert_eq!(stats.code(403), 0, "{stats}");
    assert_eq!(stats.code(401), 0, "{stats}");
    process.sigterm();
    assert!(process.wait_exit().await.success());
    cluster.shutdown().await;
}

/// `wait_converged` for either owner type.
async fn wait_converged_any(
    client: &kube::Client,
    controller: &Controller,
    name: &str,
    uid: &str,
    replicas: usize,
) {
    if controller.resource.kind == "ReplicaSet" {
        return wait_converged(client, "default", name, uid, replicas).await;
    }
    let owners: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &controller.resource);
    eventually(&format!("{name} to have {replicas} ready pods"), || async {
        let rc = owners.get(name).await.ok()?;
        let ready = rc
            .data
            .pointer("/status/readyReplicas")
            .and_then(Value::as_u64)?;
        let pods = pod_count(client, "default", name).await;
        (ready == replicas as u64 && pods == replicas).then_some(())
    })
    .await;
}

/// The manifest with `create` taken out of the pods rule.
fn without_pod_create(manifest: String) -> String {
    let edited = manifest.replace(
        "verbs: [\"list\", \"watch\", \"create\", \"delete\", \"patch\"]",
        "verbs: [\"list\", \"watch\", \"delete\", \"patch\"]",
    );
    assert_ne!(edited, manifest, "the pods rule changed shape");
    edited
}

async fn a_missing_verb_is_met_and_reported(controller: Controller) {
    let (cluster, process, _kubeconfig) = start(&controller, without_pod_create).await;
    process
        .wait_for_log("serving /metrics, /healthz and /readyz")
        .await;
    let client = cluster.client();
    let owners: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &controller.resource);
    owners
        .create(&Default::default(), &owner(&controller, "web", 2))
        .await
        .unwrap();
    let user = format!(
        "system:serviceaccount:ctrlkit-system:{}",
        controller.service_account
    );
    let forbidden = format!(
        "is forbidden: User \"{user}\" cannot create resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    let condition = eventually("the ReplicaFailure condition", || async {
        let o = owners.get("web").await.ok()?;
        o.data
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "ReplicaFailure")
            .cloned()
    })
    .await;
    assert_eq!(condition["status"], "True");
    assert_eq!(condition["reason"], "FailedCreate");
    assert!(
        condition["message"].as_str().unwrap().contains(&forbidden),
        "{condition}"
    );
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&()),
    );
    let event = eventually("a FailedCreate Warning event", || async {
        events
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| e.data["reason"] == "FailedCreate")
    })
    .await;
    assert_eq!(event.data["type"], "Warning");
    assert!(
        event.data["note"]
            .as_str()
            .unwrap_or("")
            .contains(&forbidden),
        "{:?}",
        event.data
    );
    assert_eq!(pod_count(&client, "default", "web").await, 0);
    assert!(cluster.requests().code(403) > 0);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_controller_runs_under_its_shipped_rbac() {
    full_scenario_without_a_403(replicaset_controller()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controller_runs_under_its_shipped_rbac() {
    full_scenario_without_a_403(replication_controller()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicaset_controller_reports_a_forbidden_create() {
    a_missing_verb_is_met_and_reported(replicaset_controller()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_controller_reports_a_forbidden_create() {
    a_missing_verb_is_met_and_reported(replication_controller()).await;
}
