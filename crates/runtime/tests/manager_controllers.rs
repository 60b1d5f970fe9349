//! Controllers on a manager: `Controller::builder_for`, fenced
//! `Manager::child_control` and `Manager::pod_control`, `Manager::add_controller`, the shared
//! controller metrics and `Controller::cache`, against the test cluster.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ctrlkit_childcontrol::{ChildControl, ChildControlError, ChildControlExt};
use ctrlkit_informer::Store;
use ctrlkit_podcontrol::{PodControl, PodControlError};
use ctrlkit_runtime::manager::{FenceClosed, LeaderElectionConfig, Manager, ManagerConfig};
use ctrlkit_runtime::{Action, BuildError, Controller, ObjectKey};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Event, ObjectReference, Pod, PodTemplateSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    for _ in 0..500 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

struct Ctx {
    configmaps: Arc<dyn ChildControl<ConfigMap>>,
    cache: Store<ConfigMap>,
}

/// Gives every Deployment a ConfigMap `<name>-config` holding its replicas.
async fn reconcile(
    key: ObjectKey,
    deployment: Option<Arc<Deployment>>,
    ctx: Arc<Ctx>,
) -> Result<Action, ChildControlError> {
    let Some(deployment) = deployment else {
        return Ok(Action::done());
    };
    // (`spec` is optional in some Kubernetes versions only.)
    let replicas =
        serde_json::to_value(deployment.as_ref()).unwrap_or_default()["spec"]["replicas"]
            .as_i64()
            .unwrap_or(1);
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(format!("{}-config", key.name));
    cm.data = Some([("replicas".to_string(), replicas.to_string())].into());
    let cached = ctx
        .cache
        .get(&key.namespace, &format!("{}-config", key.name));
    ctx.configmaps
        .ensure(deployment.as_ref(), &cm, cached.as_deref())
        .await?;
    Ok(Action::done())
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "pause"}]}
            }
        }
    }))
    .unwrap()
}

fn config_of(namespace: &str) -> ManagerConfig {
    let mut config = ManagerConfig::new("config-controller");
    config.namespace = Some(namespace.into());
    config.metrics_addr = None;
    config.health_addr = None;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_added_to_the_manager_reconciles_children_in_its_namespace() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let mut manager = Manager::with_client(cluster.client(), config_of("default")).unwrap();
    let controller = Controller::<Deployment>::builder_for(&mut manager)
        .name("config-controller")
        .owns::<ConfigMap>()
        .build()
        .unwrap();
    let ctx = Arc::new(Ctx {
        configmaps: manager.child_control("config-controller"),
        cache: controller.cache().unwrap(),
    });
    manager.add_controller(controller, reconcile, ctx);
    let shutdown = CancellationToken::new();
    let registry_probe = manager.status();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    let client = cluster.client();
    let pp = PostParams::default();
    let here: Api<Deployment> = Api::namespaced(client.clone(), "default");
    let elsewhere: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    here.create(&pp, &deployment("web", 2)).await.unwrap();
    elsewhere
        .create(&pp, &deployment("other", 1))
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    eventually("the ConfigMap", || async {
        cms.get_opt("web-config").await.unwrap().is_some()
    })
    .await;
    let cm = cms.get("web-config").await.unwrap();
    let owner = &cm.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Deployment", Some(true))
    );

    // A change reaches the child through `ensure`'s patch.
    let scale = json!({"spec": {"replicas": 3}});
    here.patch("web", &PatchParams::default(), &Patch::Merge(scale))
        .await
        .unwrap();
    eventually("the ConfigMap to follow", || async {
        let cm = cms.get("web-config").await.unwrap();
        cm.data.unwrap()["replicas"] == "3"
    })
    .await;

    // `--namespace` applies: the other namespace is not watched.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert!(other.get_opt("other-config").await.unwrap().is_none());
    assert!(registry_probe.is_ready());

    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn child_controls_from_the_manager_write_only_while_leading() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let mut config = config_of("default");
    config.leader_election = Some(LeaderElectionConfig::new("config-controller", "default"));
    let manager = Manager::with_client(cluster.client(), config).unwrap();
    // Not run: a stand-by that has not won the lease.
    let control = manager.child_control::<ConfigMap>("config-controller");
    let owner = Api::<Deployment>::namespaced(cluster.client(), "default")
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("web-config".into());
    let err = control.create_for(&owner, &cm).await.unwrap_err();
    let ChildControlError::WriteRefused(refused) = &err else {
        panic!("{err:?}")
    };
    let source = std::error::Error::source(refused).unwrap();
    assert_eq!(source.downcast_ref(), Some(&FenceClosed::NotLeader));
    let cms: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    assert!(cms.get_opt("web-config").await.unwrap().is_none());
}

#[tokio::test]
async fn pod_controls_from_the_manager_write_only_while_leading() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let owner = Api::<Deployment>::namespaced(cluster.client(), "default")
        .create(&PostParams::default(), &deployment("web", 1))
        .await
        .unwrap();
    let owner_ref = ObjectReference {
        kind: Some("Deployment".into()),
        namespace: Some("default".into()),
        name: owner.metadata.name.clone(),
        uid: owner.metadata.uid.clone(),
        ..ObjectReference::default()
    };
    let controller_ref = OwnerReference {
        api_version: "apps/v1".into(),
        kind: "Deployment".into(),
        name: "web".into(),
        uid: owner.metadata.uid.clone().unwrap(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let template: PodTemplateSpec = serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "pause"}]}
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(cluster.client(), "default");

    // A stand-by that has not won the lease refuses before sending.
    let mut config = config_of("default");
    config.leader_election = Some(LeaderElectionConfig::new("pod-controller", "default"));
    let standby = Manager::with_client(cluster.client(), config).unwrap();
    let control = standby.pod_control("pod-controller");
    let err = control
        .create_pods("default", &template, &owner_ref, &controller_ref)
        .await
        .unwrap_err();
    let PodControlError::WriteRefused(refused) = &err else {
        panic!("{err:?}")
    };
    let source = std::error::Error::source(refused).unwrap();
    assert_eq!(source.downcast_ref(), Some(&FenceClosed::NotLeader));
    assert!(
        pods.list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // Without leader election the manager writes, as the controller.
    let manager = Manager::with_client(cluster.client(), config_of("default")).unwrap();
    let control = manager
        .pod_control("pod-controller")
        .with_created_metadata_only();
    let created = control
        .create_pods("default", &template, &owner_ref, &controller_ref)
        .await
        .unwrap();
    let stored = pods
        .get(created.metadata.name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(stored.metadata.owner_references, Some(vec![controller_ref]));
    // Its event goes through the manager's recorder for the reporter.
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    eventually("the SuccessfulCreate event", || async {
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("SuccessfulCreate")
                    && e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("pod-controller")
            })
    })
    .await;
}

#[tokio::test]
async fn controllers_of_one_manager_share_its_metrics_under_distinct_names() {
    let client =
        kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let mut manager = Manager::with_client(client, config_of("default")).unwrap();
    let first = Controller::<Deployment>::builder_for(&mut manager)
        .name("one")
        .build()
        .unwrap();
    Controller::<ConfigMap>::builder_for(&mut manager)
        .name("two")
        .build()
        .unwrap();
    let again = Controller::<Secret>::builder_for(&mut manager)
        .name("one")
        .build()
        .unwrap_err();
    assert_eq!(again, BuildError::DuplicateName { name: "one".into() });
    // One set of families in the registry, however many controllers.
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, manager.registry()).unwrap();
    let families = text
        .lines()
        .filter(|l| *l == "# TYPE workqueue_depth gauge")
        .count();
    assert_eq!(families, 1, "{text}");
    assert!(text.contains(r#"workqueue_depth{name="one"} 0"#), "{text}");
    assert!(text.contains(r#"workqueue_depth{name="two"} 0"#), "{text}");

    // A cache the controller does not have is an error naming the kind.
    let err = first.cache::<Secret>().unwrap_err();
    assert_eq!(
        err,
        BuildError::NotCached {
            kind: "Secret".into()
        }
    );
    assert!(err.to_string().contains("declare it with owns or watches"));
    assert!(first.cache::<Deployment>().is_ok());
}

/// ConfigMaps read as a type whose values must be `on` or `off`: a
/// ConfigMap with another value is stored by the server but cannot be
/// decoded into it.
#[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
struct Switches {
    metadata: kube::api::ObjectMeta,
    #[serde(default)]
    data: std::collections::BTreeMap<String, Switch>,
}

#[derive(Clone, Copy, Debug, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Switch {
    On,
    Off,
}

impl k8s_openapi::Resource for Switches {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "ConfigMap";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "configmaps";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::Metadata for Switches {
    type Ty = kube::api::ObjectMeta;
    fn metadata(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

/// An owner the informer cannot decode does not stop the others from
/// being reconciled, and gets a `Warning DecodeFailed` event from the
/// controller's recorder, reported as its `event_reporter` (issue 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undecodable_owner_gets_a_warning_event_and_the_others_reconcile() {
    use k8s_openapi::api::core::v1::Event;
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), "default");
    for (name, value) in [("good", "on"), ("bad", "seven")] {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.data = Some([("n".to_string(), value.to_string())].into());
        configmaps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }

    let mut manager = Manager::with_client(cluster.client(), config_of("default")).unwrap();
    let controller = Controller::<Switches>::builder_for(&mut manager)
        .name("switches")
        .event_reporter("switches-controller")
        .build()
        .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reconcile = |key: ObjectKey,
                     _: Option<Arc<Switches>>,
                     seen: Arc<std::sync::Mutex<Vec<String>>>| async move {
        seen.lock().unwrap().push(key.name.clone());
        Ok::<_, ChildControlError>(Action::done())
    };
    manager.add_controller(controller, reconcile, seen.clone());
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));

    eventually("the decodable owner reconciled", || {
        let seen = seen.clone();
        async move { seen.lock().unwrap().iter().any(|n| n == "good") }
    })
    .await;
    let events: Api<Event> = Api::namespaced(cluster.client(), "default");
    eventually("the DecodeFailed event on the undecodable owner", || {
        let events = events.clone();
        async move {
            let list = events
                .list(&kube::api::ListParams::default().fields("involvedObject.name=bad"))
                .await
                .unwrap();
            list.items.iter().any(|e| {
                e.reason.as_deref() == Some("DecodeFailed")
                    && e.type_.as_deref() == Some("Warning")
                    && e.source.as_ref().and_then(|s| s.component.as_deref())
                        == Some("switches-controller")
            })
        }
    })
    .await;
    assert!(
        !seen.lock().unwrap().iter().any(|n| n == "bad"),
        "the undecodable owner is never handed to reconcile"
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}
