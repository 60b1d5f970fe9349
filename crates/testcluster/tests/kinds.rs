//! The built-in kinds an operator commonly owns, served generically:
//! CRUD, selectors, watch, patches, status, generation, finalizers, GC and
//! discovery (legacy and aggregated), through kube-rs and stock kubectl.
#![allow(clippy::unwrap_used)]

mod common;

use common::kubectl::Kubectl;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};

/// (group, version, kind, plural, namespaced, a valid object).
fn kinds() -> Vec<(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    Value,
)> {
    let template = json!({"metadata": {"labels": {"app": "x"}},
                          "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}});
    let selector = json!({"matchLabels": {"app": "x"}});
    vec![
        (
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            json!({"data": {"k": "v"}}),
        ),
        (
            "",
            "v1",
            "Secret",
            "secrets",
            true,
            json!({"stringData": {"k": "v"}}),
        ),
        (
            "",
            "v1",
            "Service",
            "services",
            true,
            json!({"spec": {"ports": [{"port": 80}], "selector": {"app": "x"}}}),
        ),
        (
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            json!({}),
        ),
        (
            "",
            "v1",
            "Endpoints",
            "endpoints",
            true,
            json!({"subsets": []}),
        ),
        (
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        ("", "v1", "Node", "nodes", false, json!({"spec": {}})),
        (
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
            true,
            json!({"spec": {"hard": {"pods": "10"}}}),
        ),
        (
            "",
            "v1",
            "LimitRange",
            "limitranges",
            true,
            json!({"spec": {"limits": [{"type": "Container"}]}}),
        ),
        (
            "",
            "v1",
            "Event",
            "events",
            true,
            json!({"involvedObject": {"kind": "Pod", "name": "p"}, "reason": "R", "message": "m"}),
        ),
        (
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            true,
            json!({"addressType": "IPv4", "endpoints": []}),
        ),
        (
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            json!({"spec": {"selector": selector, "template": template}}),
        ),
        (
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            true,
            json!({"spec": {"selector": selector, "serviceName": "x", "template": template}}),
        ),
        (
            "apps",
            "v1",
            "DaemonSet",
            "daemonsets",
            true,
            json!({"spec": {"selector": selector, "template": template}}),
        ),
        (
            "batch",
            "v1",
            "Job",
            "jobs",
            true,
            json!({"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ),
        (
            "batch",
            "v1",
            "CronJob",
            "cronjobs",
            true,
            json!({"spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            true,
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}, "subjects": []}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            json!({"rules": []}),
        ),
        (
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}}),
        ),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            json!({"spec": {"holderIdentity": "me"}}),
        ),
        (
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            json!({"regarding": {"kind": "Pod", "name": "p"}, "reason": "R", "note": "m", "action": "A", "reportingController": "c", "reportingInstance": "i", "eventTime": "2026-01-01T00:00:00.000000Z"}),
        ),
    ]
}

fn api_for(
    client: &kube::Client,
    g: &str,
    v: &str,
    k: &str,
    plural: &str,
    namespaced: bool,
) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(g, v, k), plural);
    if namespaced {
        Api::namespaced_with(client.clone(), "default", &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    }
}

fn object(name: &str, body: &Value, g: &str, v: &str, k: &str) -> DynamicObject {
    let mut obj = body.clone();
    obj["apiVersion"] = json!(if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    });
    obj["kind"] = json!(k);
    obj["metadata"] = json!({"name": name, "labels": {"suite": "kinds"}});
    serde_json::from_value(obj).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_builtin_kind_is_served_generically() {
    let cluster = common::start().await;
    let client = cluster.client();
    for (g, v, k, plural, namespaced, body) in kinds() {
        let api = api_for(&client, g, v, k, plural, namespaced);
        let what = format!("{plural}.{g}");
        let created = api
            .create(&PostParams::default(), &object("one", &body, g, v, k))
            .await
            .unwrap_or_else(|e| panic!("create {what}: {e}"));
        assert!(created.metadata.uid.is_some(), "{what}");
        assert_eq!(created.types.as_ref().unwrap().kind, k, "{what}");
        api.create(&PostParams::default(), &object("two", &body, g, v, k))
            .await
            .unwrap();
        let err = api
            .create(&PostParams::default(), &object("one", &body, g, v, k))
            .await
            .unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 409),
            "{what}: {err}"
        );

        // Selectors and paging.
        let listed = api
            .list(
                &ListParams::default()
                    .labels("suite=kinds")
                    .fields("metadata.name=two"),
            )
            .await
            .unwrap();
        let names: Vec<_> = listed
            .items
            .iter()
            .map(|o| o.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, ["two"], "{what}");
        let page = api
            .list(&ListParams::default().labels("suite=kinds").limit(1))
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1, "{what}");
        assert!(page.metadata.continue_.is_some(), "{what}");

        // Every patch type.
        let p = api
            .patch(
                "one",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"m": "1"}}})),
            )
            .await
            .unwrap();
        assert_eq!(p.metadata.labels.as_ref().unwrap()["m"], "1", "{what}");
        let p = api
            .patch(
                "one",
                &PatchParams::default(),
                &Patch::Strategic(json!({"metadata": {"annotations": {"s": "1"}}})),
            )
            .await
            .unwrap();
        assert_eq!(p.metadata.annotations.as_ref().unwrap()["s"], "1", "{what}");
        let jp: json_patch::Patch = serde_json::from_value(
            json!([{"op": "add", "path": "/metadata/labels/j", "value": "1"}]),
        )
        .unwrap();
        let p = api
            .patch("one", &PatchParams::default(), &Patch::Json::<()>(jp))
            .await
            .unwrap();
        assert_eq!(p.metadata.labels.as_ref().unwrap()["j"], "1", "{what}");
        let apply = json!({"apiVersion": created.types.as_ref().unwrap().api_version, "kind": k,
                           "metadata": {"name": "one", "labels": {"a": "1"}}});
        let p = api
            .patch(
                "one",
                &PatchParams::apply("kinds-test"),
                &Patch::Apply(apply),
            )
            .await
            .unwrap();
        assert_eq!(p.metadata.labels.as_ref().unwrap()["a"], "1", "{what}");

        // Finalizers hold a delete until they are removed.
        api.patch(
            "two",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .unwrap();
        api.delete("two", &DeleteParams::default()).await.unwrap();
        let held = api.get("two").await.unwrap();
        assert!(held.metadata.deletion_timestamp.is_some(), "{what}");
        api.patch(
            "two",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
        assert!(api.get_opt("two").await.unwrap().is_none(), "{what}");
        api.delete("one", &DeleteParams::background())
            .await
            .unwrap();
        assert!(api.get_opt("one").await.unwrap().is_none(), "{what}");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_subresource_generation_and_scale() {
    let cluster = common::start().await;
    let client = cluster.client();
    let deployments = api_for(&client, "apps", "v1", "Deployment", "deployments", true);
    let (_, _, _, _, _, body) = kinds().into_iter().find(|k| k.2 == "Deployment").unwrap();
    let created = deployments
        .create(
            &PostParams::default(),
            &object("web", &body, "apps", "v1", "Deployment"),
        )
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(created.data["spec"]["replicas"], 1, "defaulted");
    assert_eq!(created.data["spec"]["strategy"]["type"], "RollingUpdate");

    // A main-resource write ignores status; a spec change bumps generation.
    let p = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}, "status": {"replicas": 9}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
    assert!(p.data["status"].get("replicas").is_none());
    // A status write changes only status and keeps generation.
    let p = deployments
        .patch_status("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 7}, "status": {"replicas": 3, "observedGeneration": 2}})))
        .await
        .unwrap();
    assert_eq!(p.data["status"]["replicas"], 3);
    assert_eq!(p.data["spec"]["replicas"], 3);
    assert_eq!(p.metadata.generation, Some(2));
    // A metadata-only change does not bump generation.
    let p = deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));

    // The scale subresource.
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=x"));
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 5}})),
        )
        .await
        .unwrap();
    assert_eq!(
        deployments.get("web").await.unwrap().data["spec"]["replicas"],
        5
    );

    // ConfigMaps have no status subresource.
    let cms = api_for(&client, "", "v1", "ConfigMap", "configmaps", true);
    cms.create(
        &PostParams::default(),
        &object("c", &json!({}), "", "v1", "ConfigMap"),
    )
    .await
    .unwrap();
    let err = cms
        .patch_status("c", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err}"
    );

    // Validation per kind: a Deployment whose selector misses its template.
    let mut bad = body.clone();
    bad["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
    let err = deployments
        .create(
            &PostParams::default(),
            &object("bad", &bad, "apps", "v1", "Deployment"),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422 && s.message.contains("spec.template.metadata.labels")),
        "{err}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_garbage_collection_across_kinds() {
    let cluster = common::start().await;
    let client = cluster.client();
    let cms = api_for(&client, "", "v1", "ConfigMap", "configmaps", true);
    let deployments = api_for(&client, "apps", "v1", "Deployment", "deployments", true);
    let mut events = cms
        .watch(
            &WatchParams::default().labels("suite=kinds").timeout(10),
            "0",
        )
        .await
        .unwrap()
        .boxed();

    let (_, _, _, _, _, body) = kinds().into_iter().find(|k| k.2 == "Deployment").unwrap();
    let owner = deployments
        .create(
            &PostParams::default(),
            &object("owner", &body, "apps", "v1", "Deployment"),
        )
        .await
        .unwrap();
    let mut cm = object("owned", &json!({"data": {"a": "b"}}), "", "v1", "ConfigMap");
    cm.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "name": "owner",
        "uid": owner.metadata.uid.clone().unwrap(), "controller": true}))
        .unwrap(),
    ]);
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let first = events.try_next().await.unwrap().unwrap();
    assert!(
        matches!(first, WatchEvent::Added(ref o) if o.metadata.name.as_deref() == Some("owned"))
    );

    deployments
        .delete("owner", &DeleteParams::default())
        .await
        .unwrap();
    // The collector deletes the ConfigMap whose only owner is gone.
    loop {
        match events.try_next().await.unwrap().unwrap() {
            WatchEvent::Deleted(o) => {
                assert_eq!(o.metadata.name.as_deref(), Some("owned"));
                break;
            }
            WatchEvent::Modified(_) | WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_lists_every_kind_legacy_and_aggregated() {
    let cluster = common::start().await;
    let client = cluster.client();
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run()
        .await
        .unwrap();
    for (g, v, k, plural, namespaced, _) in kinds() {
        let gvk = GroupVersionKind::gvk(g, v, k);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("{gvk:?} not discovered"));
        assert_eq!(ar.plural, plural);
        assert_eq!(
            caps.scope == kube::discovery::Scope::Namespaced,
            namespaced,
            "{plural}"
        );
    }

    // Legacy resource lists carry short names, categories, verbs, subresources.
    let apps: Value = client
        .request(
            http::Request::get("/apis/apps/v1")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let deploy = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "deployments")
        .unwrap();
    assert_eq!(deploy["shortNames"], json!(["deploy"]));
    assert_eq!(deploy["categories"], json!(["all"]));
    assert!(
        deploy["verbs"]
            .as_array()
            .unwrap()
            .contains(&json!("watch"))
    );
    let names: Vec<_> = apps["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"deployments/scale") && names.contains(&"deployments/status"),
        "{names:?}"
    );

    // Aggregated discovery, as kubectl 1.32 asks for it.
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    for (path, group) in [("/api", ""), ("/apis", "apps")] {
        let req = http::Request::get(path)
            .header("Accept", accept)
            .body(Vec::new())
            .unwrap();
        let resp = client
            .send(req.map(kube::client::Body::from))
            .await
            .unwrap();
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert_eq!(
            ct,
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        );
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        let doc: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(doc["kind"], "APIGroupDiscoveryList");
        let item = doc["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["metadata"]["name"].as_str().unwrap_or("") == group)
            .unwrap_or_else(|| panic!("group {group:?} missing: {doc}"));
        let resources = item["versions"][0]["resources"].as_array().unwrap();
        let want = if group.is_empty() {
            "pods"
        } else {
            "deployments"
        };
        let r = resources.iter().find(|r| r["resource"] == want).unwrap();
        assert_eq!(r["scope"], "Namespaced");
        assert_eq!(r["categories"], json!(["all"]));
        assert!(
            r["subresources"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s["subresource"] == "status")
        );
    }
    cluster.shutdown().await;
}

const APPLIED: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
data:
  mode: fast
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: app
          image: nginx:1.27
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
    - port: 80
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: reader
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list"]
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_applies_gets_and_discovers_the_kinds() {
    let cluster = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    let out = k.apply(dir.path(), APPLIED).await;
    for line in [
        "configmap/settings created",
        "deployment.apps/web created",
        "service/web created",
        "clusterrole.rbac.authorization.k8s.io/reader created",
    ] {
        assert!(out.contains(line), "{out}");
    }
    // Applying again changes nothing.
    let out = k.apply(dir.path(), APPLIED).await;
    assert!(out.contains("configmap/settings unchanged"), "{out}");
    assert!(out.contains("deployment.apps/web unchanged"), "{out}");

    let names = k
        .run_async(&["get", "cm,deploy,svc,clusterrole", "-o", "name"])
        .await;
    for name in [
        "configmap/settings",
        "deployment.apps/web",
        "service/web",
        "clusterrole.rbac.authorization.k8s.io/reader",
    ] {
        assert!(names.lines().any(|l| l == name), "{name} in {names}");
    }
    // `all` is a discovery category.
    let all = k.run_async(&["get", "all", "-o", "name"]).await;
    assert!(
        all.contains("deployment.apps/web") && all.contains("service/web"),
        "{all}"
    );
    assert!(!all.contains("configmap"), "{all}");

    let resources = k.run_async(&["api-resources", "--no-headers"]).await;
    for row in [
        ["deployments", "deploy", "apps/v1", "true", "Deployment"],
        ["configmaps", "cm", "v1", "true", "ConfigMap"],
        ["nodes", "no", "v1", "false", "Node"],
        ["cronjobs", "cj", "batch/v1", "true", "CronJob"],
    ] {
        assert!(
            resources
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == row),
            "{row:?} in {resources}"
        );
    }
    let svc = k.json_async(&["get", "svc", "web"]).await;
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert!(
        svc["spec"]["clusterIP"]
            .as_str()
            .unwrap()
            .starts_with("10.")
    );
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
    k.run_async(&["delete", "deploy", "web"]).await;
    let err = k.fail_async(&["get", "deploy", "web"]).await;
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
    cluster.shutdown().await;
}

/// Typed `kubectl create ...` builds the object from Go structs and sends
/// it as a protobuf body; the server decodes it as kube-apiserver does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_kubectl_creates_send_protobuf_bodies() {
    let cluster = common::start().await;
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    for (args, created) in [
        (
            &["create", "namespace", "demo"][..],
            "namespace/demo created",
        ),
        (
            &[
                "create",
                "configmap",
                "cm1",
                "--from-literal=a=b",
                "-n",
                "demo",
            ],
            "configmap/cm1 created",
        ),
        (
            &[
                "create",
                "secret",
                "generic",
                "s1",
                "--from-literal=pw=hunter2",
                "-n",
                "demo",
            ],
            "secret/s1 created",
        ),
        (
            &[
                "create",
                "deployment",
                "web",
                "--image=nginx",
                "--replicas=2",
                "-n",
                "demo",
            ],
            "deployment.apps/web created",
        ),
        (
            &[
                "create",
                "service",
                "clusterip",
                "svc1",
                "--tcp=80:8080",
                "-n",
                "demo",
            ],
            "service/svc1 created",
        ),
        (
            &["create", "serviceaccount", "robot", "-n", "demo"],
            "serviceaccount/robot created",
        ),
        (
            &[
                "create",
                "role",
                "reader",
                "--verb=get,list",
                "--resource=pods",
                "-n",
                "demo",
            ],
            "role.rbac.authorization.k8s.io/reader created",
        ),
        (
            &[
                "create",
                "rolebinding",
                "robot-reads",
                "--role=reader",
                "--serviceaccount=demo:robot",
                "-n",
                "demo",
            ],
            "rolebinding.rbac.authorization.k8s.io/robot-reads created",
        ),
        (
            &[
                "create",
                "clusterrole",
                "node-reader",
                "--verb=get",
                "--resource=nodes",
            ],
            "clusterrole.rbac.authorization.k8s.io/node-reader created",
        ),
        (
            &[
                "create",
                "job",
                "once",
                "--image=busybox",
                "-n",
                "demo",
                "--",
                "echo",
                "hi",
            ],
            "job.batch/once created",
        ),
        (
            &[
                "create",
                "cronjob",
                "nightly",
                "--image=busybox",
                "--schedule=0 2 * * *",
                "-n",
                "demo",
                "--",
                "echo",
                "hi",
            ],
            "cronjob.batch/nightly created",
        ),
        (
            &[
                "create",
                "quota",
                "q",
                "--hard=pods=10,count/configmaps=5",
                "-n",
                "demo",
            ],
            "resourcequota/q created",
        ),
    ] {
        let out = k.run_async(args).await;
        assert!(out.contains(created), "{args:?}: {out}");
    }
    let cm = k.json_async(&["get", "cm", "cm1", "-n", "demo"]).await;
    assert_eq!(cm["data"], json!({"a": "b"}));
    let secret = k.json_async(&["get", "secret", "s1", "-n", "demo"]).await;
    assert_eq!(secret["data"]["pw"], "aHVudGVyMg==");
    assert_eq!(secret["type"], "Opaque");
    let deploy = k.json_async(&["get", "deploy", "web", "-n", "demo"]).await;
    assert_eq!(deploy["spec"]["replicas"], 2);
    assert_eq!(
        deploy["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    let svc = k.json_async(&["get", "svc", "svc1", "-n", "demo"]).await;
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 8080);
    let binding = k
        .json_async(&["get", "rolebinding", "robot-reads", "-n", "demo"])
        .await;
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "demo"}])
    );
    let job = k.json_async(&["get", "job", "once", "-n", "demo"]).await;
    assert_eq!(
        job["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["echo", "hi"])
    );
    let cron = k
        .json_async(&["get", "cronjob", "nightly", "-n", "demo"])
        .await;
    assert_eq!(cron["spec"]["schedule"], "0 2 * * *");
    let quota = k.json_async(&["get", "quota", "q", "-n", "demo"]).await;
    assert_eq!(
        quota["spec"]["hard"],
        json!({"pods": "10", "count/configmaps": "5"})
    );
    // A second create of the same name is refused as on kube-apiserver.
    let err = k.fail_async(&["create", "namespace", "demo"]).await;
    assert!(err.contains("namespaces \"demo\" already exists"), "{err}");
    cluster.shutdown().await;
}

/// A protobuf body that does not decode is a 400 naming what failed;
/// nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undecodable_protobuf_bodies_are_bad_requests() {
    let cluster = common::start().await;
    let client = cluster.client();
    let post = |body: Vec<u8>| {
        http::Request::post("/api/v1/namespaces/default/configmaps")
            .header("content-type", "application/vnd.kubernetes.protobuf")
            .body(body)
            .unwrap()
    };
    let status = |r: Result<Value, kube::Error>| match r {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    };
    let err = status(
        client
            .request::<Value>(post(b"{\"kind\":\"ConfigMap\"}".to_vec()))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        err.message,
        "the protobuf body of this ConfigMap request could not be decoded: \
         the protobuf body does not start with the Kubernetes magic number k8s\\0"
    );
    // typeMeta {apiVersion: v1, kind: ConfigMap}, then a raw field cut short.
    let mut truncated = b"k8s\0".to_vec();
    truncated.extend([0x0a, 0x0f, 0x0a, 0x02, b'v', b'1', 0x12, 0x09]);
    truncated.extend(b"ConfigMap");
    truncated.extend([0x12, 0x20, 0x0a]);
    let err = status(client.request::<Value>(post(truncated)).await);
    assert_eq!(err.code, 400);
    assert!(err.message.contains("truncated"), "{}", err.message);
    // A kind the decoder does not know.
    let mut unknown = b"k8s\0".to_vec();
    unknown.extend([0x0a, 0x0a, 0x0a, 0x02, b'v', b'1', 0x12, 0x04]);
    unknown.extend(b"Nope");
    let err = status(client.request::<Value>(post(unknown)).await);
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("kind \"Nope\" in \"v1\""),
        "{}",
        err.message
    );
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    assert!(
        cms.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    cluster.shutdown().await;
}
