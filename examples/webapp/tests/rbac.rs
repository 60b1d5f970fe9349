//! webapp-operator under exactly the RBAC `deploy/webapp-operator/rbac.yaml`
//! grants, against a test cluster that enforces RBAC and serves the
//! WebApp CRD from `deploy/webapp-operator/crd.yaml`: the operator's
//! wiring (`controller::add_to`) runs in a ctrlkit manager in this process
//! as the ServiceAccount, with leader election, through a full scenario
//! (children, route, finalizer, status, a spec change, deletion) without a
//! single 403. With `create` on Deployments taken away, it meets the 403
//! and reports it: `Degraded=True` with reason `FailedCreate` and the API
//! server's message, and a `FailedCreate` Warning event.
//!
//! The test cluster runs no Deployment controller; the test writes the
//! Deployment's status as one would.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::{Duration, Instant};

use clap::Parser;
use ctrlkit::informer::is_controlled_by;
use ctrlkit::prelude::ObjectKey;
use ctrlkit::runtime::manager::Manager;
use ctrlkit_example_webapp::controller::{Cli, NAME, add_to};
use ctrlkit_example_webapp::resource::{FINALIZER, WebApp, WebAppSpec};
use ctrlkit_example_webapp::routes::{DEFAULT_NAME, entry};
use ctrlkit_example_webapp::status::{DEGRADED, READY};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const DEPLOY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy");
const PATIENCE: Duration = Duration::from_secs(60);

async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A cluster enforcing RBAC with the CRD, the namespace and the operator's
/// RBAC (`edit`ed first) installed, and the operator running under its
/// ServiceAccount.
async fn start(
    edit: impl FnOnce(String) -> String,
) -> (
    TestCluster,
    CancellationToken,
    tokio::task::JoinHandle<()>,
    TempFile,
) {
    let cluster = TestCluster::start(TestClusterConfig::default().with_rbac(true))
        .await
        .unwrap();
    let crd = std::fs::read_to_string(format!("{DEPLOY}/webapp-operator/crd.yaml")).unwrap();
    cluster.install_crd_yaml(&crd).unwrap();
    cluster
        .apply_yaml_file(format!("{DEPLOY}/namespace.yaml"))
        .unwrap();
    let rbac = std::fs::read_to_string(format!("{DEPLOY}/webapp-operator/rbac.yaml")).unwrap();
    cluster.apply_yaml(&edit(rbac)).unwrap();
    let kubeconfig = TempFile::new("kubeconfig");
    cluster
        .write_kubeconfig_for_service_account(&kubeconfig.0, "ctrlkit-system", NAME)
        .unwrap();
    let cli = Cli::try_parse_from([
        NAME,
        "--kubeconfig",
        kubeconfig.0.to_str().unwrap(),
        "--routes-namespace",
        "default",
        "--leader-elect",
        "--lease-namespace",
        "ctrlkit-system",
        "--metrics-addr",
        "0",
        "--health-addr",
        "0",
    ])
    .unwrap();
    let mut manager = Manager::from_args(NAME, &cli.manager).await.unwrap();
    add_to(&mut manager, &cli).unwrap();
    let shutdown = CancellationToken::new();
    let run = manager.run(shutdown.clone());
    let running = tokio::spawn(async move { run.await.unwrap() });
    (cluster, shutdown, running, kubeconfig)
}

/// A file in the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str) -> TempFile {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TempFile(
            std::env::temp_dir().join(format!("webapp-rbac-{}-{n}-{name}", std::process::id())),
        )
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn spec(replicas: i32) -> WebAppSpec {
    WebAppSpec {
        image: "registry.k8s.io/pause:3.10".into(),
        replicas,
        port: 8080,
        config: Some([("index.html".to_string(), "v1".to_string())].into()),
    }
}

/// What a Deployment controller would write once the rollout is done.
async fn roll_out(client: &Client, name: &str) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let d = deployments.get(name).await.unwrap();
    let replicas = serde_json::to_value(&d).unwrap()["spec"]["replicas"]
        .as_i64()
        .unwrap_or(1);
    let status = json!({"status": {
        "observedGeneration": d.metadata.generation,
        "replicas": replicas, "updatedReplicas": replicas,
        "readyReplicas": replicas, "availableReplicas": replicas,
    }});
    deployments
        .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_runs_under_its_shipped_rbac() {
    let (cluster, shutdown, running, _dir) = start(|m| m).await;
    let client = cluster.client();
    let webapps: Api<WebApp> = Api::namespaced(client.clone(), "default");
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let app = webapps
        .create(&PostParams::default(), &WebApp::new("web", spec(1)))
        .await
        .unwrap();
    let uid = app.uid().unwrap();
    let cm = wait_for("the ConfigMap", || async {
        configmaps.get_opt("web-config").await.ok()?
    })
    .await;
    assert!(is_controlled_by(&cm.metadata, &uid));
    let deployment = wait_for("the Deployment", || async {
        deployments.get_opt("web").await.ok()?
    })
    .await;
    assert!(is_controlled_by(&deployment.metadata, &uid));
    let service = wait_for("the Service", || async {
        services.get_opt("web").await.ok()?
    })
    .await;
    assert!(is_controlled_by(&service.metadata, &uid));
    let route = entry(&ObjectKey::new("default", "web"));
    wait_for("the route", || async {
        let routes = configmaps.get_opt(DEFAULT_NAME).await.ok()??;
        (routes.data?.get(&route)? == "http://web.default.svc:8080").then_some(())
    })
    .await;
    let with_finalizer = webapps.get("web").await.unwrap();
    assert!(with_finalizer.finalizers().contains(&FINALIZER.to_string()));

    roll_out(&client, "web").await;
    wait_for("Ready=True", || async {
        let status = webapps.get("web").await.ok()?.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == READY)?;
        (ready.status == "True" && status.observed_generation == Some(1)).then_some(())
    })
    .await;

    // A spec change reaches the children and the status.
    webapps
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2, "config": {"index.html": "v2"}}})),
        )
        .await
        .unwrap();
    wait_for("the Deployment to scale", || async {
        let d = deployments.get("web").await.ok()?;
        (serde_json::to_value(&d).ok()?["spec"]["replicas"] == 2).then_some(())
    })
    .await;
    wait_for("the ConfigMap to change", || async {
        (configmaps
            .get("web-config")
            .await
            .ok()?
            .data?
            .get("index.html")?
            == "v2")
            .then_some(())
    })
    .await;
    roll_out(&client, "web").await;
    wait_for("observedGeneration 2 and Ready", || async {
        let status = webapps.get("web").await.ok()?.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == READY)?;
        (status.observed_generation == Some(2) && ready.status == "True").then_some(())
    })
    .await;

    // Deletion: the finalizer removes the route, then the WebApp goes.
    webapps
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    wait_for("the WebApp to go", || async {
        webapps.get_opt("web").await.ok()?.is_none().then_some(())
    })
    .await;
    let routes = configmaps.get(DEFAULT_NAME).await.unwrap();
    assert!(!routes.data.unwrap_or_default().contains_key(&route));

    shutdown.cancel();
    running.await.unwrap();
    let stats = cluster.requests();
    assert_eq!(stats.code(403), 0, "{stats}");
    assert_eq!(stats.code(401), 0, "{stats}");
    cluster.shutdown().await;
}

/// The manifest with `create` taken out of the Deployments rule.
fn without_deployment_create(manifest: String) -> String {
    let rule =
        "resources: [\"deployments\"]\n    verbs: [\"list\", \"watch\", \"create\", \"patch\"]";
    assert!(
        manifest.contains(rule),
        "the Deployments rule changed shape"
    );
    manifest.replace(
        rule,
        "resources: [\"deployments\"]\n    verbs: [\"list\", \"watch\", \"patch\"]",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_reports_a_forbidden_create() {
    let (cluster, shutdown, running, _dir) = start(without_deployment_create).await;
    let client = cluster.client();
    let webapps: Api<WebApp> = Api::namespaced(client.clone(), "default");
    webapps
        .create(&PostParams::default(), &WebApp::new("web", spec(1)))
        .await
        .unwrap();
    let forbidden = "deployments.apps is forbidden: User \"system:serviceaccount:ctrlkit-system:webapp-operator\" \
                     cannot create resource \"deployments\" in API group \"apps\" in the namespace \"default\"";
    let degraded = wait_for("Degraded=True", || async {
        let status = webapps.get("web").await.ok()?.status?;
        status
            .conditions
            .into_iter()
            .find(|c| c.type_ == DEGRADED && c.status == "True")
    })
    .await;
    assert_eq!(degraded.reason, "FailedCreate");
    assert!(degraded.message.contains(forbidden), "{}", degraded.message);
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::erase::<k8s_openapi::api::events::v1::Event>(&()),
    );
    let event = wait_for("a FailedCreate Warning event", || async {
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
    assert!(cluster.requests().code(403) > 0);
    shutdown.cancel();
    running.await.unwrap();
    cluster.shutdown().await;
}
