//! webapp-operator end to end against a cluster: the CRD installed from
//! the Rust type, the operator's wiring (`controller::add_to`) running in
//! a ctrlkit manager in this process, and a WebApp created, changed,
//! rejected by the schema and deleted through the API.
//!
//! By default the cluster is ctrlkit-testcluster, in this process (the CRD
//! installed with `TestCluster::install_crd::<WebApp>()`). It runs no
//! Deployment controller, so the test writes the Deployment's status once
//! the operator created it, as that controller would. With
//! `CTRLKIT_E2E_KUBECONFIG` set, the same scenario runs against the cluster
//! of that kubeconfig instead (any conformant cluster: kind, minikube, a
//! real one; the operator's Deployment needs pods to start, so the cluster
//! needs nodes and the `registry.k8s.io/pause` image).
//!
//! Everything happens in a fresh namespace `webapp-e2e-<n>`, deleted at
//! the end; on a real cluster the CRD is left installed if it was there
//! before.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::time::{Duration, Instant};

use clap::Parser;
use ctrlkit::informer::is_controlled_by;
use ctrlkit::prelude::ObjectKey;
use ctrlkit::runtime::manager::Manager;
use ctrlkit_example_webapp::controller::{Cli, NAME, add_to};
use ctrlkit_example_webapp::resource::{FINALIZER, WebApp, WebAppSpec, crd};
use ctrlkit_example_webapp::routes::{DEFAULT_NAME, entry};
use ctrlkit_example_webapp::status::READY;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const KUBECONFIG_VAR: &str = "CTRLKIT_E2E_KUBECONFIG";
const TIMEOUT: Duration = Duration::from_secs(180);

/// The cluster the test runs against.
enum Target {
    /// ctrlkit-testcluster in this process (the default).
    InProcess(Box<TestCluster>),
    /// The cluster of `CTRLKIT_E2E_KUBECONFIG`.
    Real(std::ffi::OsString),
}

impl Target {
    async fn start() -> Target {
        match std::env::var_os(KUBECONFIG_VAR) {
            Some(kubeconfig) => Target::Real(kubeconfig),
            None => {
                let cluster = TestCluster::start(TestClusterConfig::default())
                    .await
                    .unwrap();
                cluster.install_crd::<WebApp>().unwrap();
                Target::InProcess(Box::new(cluster))
            }
        }
    }

    /// The manager as `webapp-operator` with `args` builds it.
    async fn manager(&self, args: &[&str]) -> (Cli, Manager) {
        let kubeconfig = match self {
            Target::Real(path) => vec!["--kubeconfig", path.to_str().unwrap()],
            Target::InProcess(_) => vec![],
        };
        let argv = std::iter::once(NAME)
            .chain(kubeconfig)
            .chain(args.iter().copied());
        let cli = Cli::try_parse_from(argv).unwrap();
        let manager = match self {
            Target::Real(_) => Manager::from_args(NAME, &cli.manager).await.unwrap(),
            Target::InProcess(cluster) => {
                Manager::with_client(cluster.client(), cli.manager.config(NAME)).unwrap()
            }
        };
        (cli, manager)
    }

    /// Without a Deployment controller, writes what it would once the
    /// rollout of `namespace/name` is done.
    async fn roll_out(&self, client: &Client, namespace: &str, name: &str) {
        if matches!(self, Target::Real(_)) {
            return; // the cluster's own Deployment controller does it
        }
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
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
}

/// Polls `check` every half second until it returns `Some`, or fails the
/// test after [`TIMEOUT`] naming `what`.
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
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn install_crd(client: &Client) -> bool {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd().name_any();
    let existed = crds.get_opt(&name).await.unwrap().is_some();
    crds.patch(
        &name,
        &PatchParams::apply("webapp-e2e").force(),
        &Patch::Apply(crd()),
    )
    .await
    .unwrap();
    wait_for("the CRD to be established", || async {
        let crd = crds.get(&name).await.ok()?;
        let conditions = crd.status?.conditions?;
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(())
    })
    .await;
    existed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webapp_is_run_updated_validated_and_cleaned_up() {
    let target = Target::start().await;
    let ns = format!(
        "webapp-e2e-{}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    );
    let (cli, mut manager) = target
        .manager(&[
            "--namespace",
            &ns,
            "--routes-namespace",
            &ns,
            "--metrics-addr",
            "0",
            "--health-addr",
            "0",
        ])
        .await;
    let client = manager.client().clone();
    let crd_existed = match target {
        Target::Real(_) => install_crd(&client).await,
        Target::InProcess(_) => true,
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.clone());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    add_to(&mut manager, &cli).unwrap();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    let webapps: Api<WebApp> = Api::namespaced(client.clone(), &ns);
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let spec = WebAppSpec {
        image: "registry.k8s.io/pause:3.10".into(),
        replicas: 1,
        port: 8080,
        config: Some([("index.html".to_string(), "v1".to_string())].into()),
    };
    let app = webapps
        .create(&PostParams::default(), &WebApp::new("web", spec))
        .await
        .unwrap();
    let uid = app.uid().unwrap();
    let route = entry(&ObjectKey::new(&ns, "web"));

    // Children with controller references, the finalizer, the route.
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
    wait_for("the route", || async {
        let routes = configmaps.get_opt(DEFAULT_NAME).await.ok()??;
        (routes.data?.get(&route)? == &format!("http://web.{ns}.svc:8080")).then_some(())
    })
    .await;
    assert!(
        webapps
            .get("web")
            .await
            .unwrap()
            .finalizers()
            .contains(&FINALIZER.to_string())
    );

    // Ready once the pod runs.
    target.roll_out(&client, &ns, "web").await;
    wait_for("Ready=True", || async {
        let status = webapps.get("web").await.ok()?.status?;
        let ready = status.conditions.iter().find(|c| c.type_ == READY)?;
        (ready.status == "True"
            && status.observed_generation == Some(1)
            && status.ready_replicas == 1)
            .then_some(())
    })
    .await;

    // A spec change reaches the children and the status.
    let change = json!({"spec": {"replicas": 2, "config": {"index.html": "v2"}}});
    webapps
        .patch("web", &PatchParams::default(), &Patch::Merge(change))
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
    wait_for("observedGeneration 2", || async {
        (webapps.get("web").await.ok()?.status?.observed_generation == Some(2)).then_some(())
    })
    .await;

    // The schema rejects what the reconcile never sees from a real server.
    let bad = json!({
        "apiVersion": "example.ctrlkit.dev/v1", "kind": "WebApp",
        "metadata": {"name": "bad"}, "spec": {"image": "", "replicas": 101}
    });
    let bad: WebApp = serde_json::from_value(bad).unwrap();
    let err = webapps
        .create(&PostParams::default(), &bad)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 422, "{status:?}");

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
    running.await.unwrap().unwrap();
    namespaces
        .delete(&ns, &DeleteParams::default())
        .await
        .unwrap();
    if !crd_existed {
        let crds: Api<CustomResourceDefinition> = Api::all(client);
        crds.delete(&crd().name_any(), &DeleteParams::default())
            .await
            .unwrap();
    }
}
