//! Stock kubectl (1.32) against custom resources the test cluster serves
//! from a CustomResourceDefinition: `kubectl explain` from the served
//! OpenAPI v3 document, `kubectl get` with the definition's printer
//! columns, `get all`, `scale`, `patch`, `apply` and `delete`.
//!
//! Needs kubectl at /usr/bin/kubectl (or on PATH); CI installs it.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};

use common::crds::{crontab, crontab_object};
use common::kubectl::{Kubectl, table};
use ctrlkit_testcluster::crd::{CustomResourceDefinition, GroupVersionDocument};
use ctrlkit_testcluster::{Clock, TestCluster, TestClusterConfig};
use serde_json::{Value, json};

/// A clock the test sets.
#[derive(Debug, Clone)]
struct SetClock(Arc<Mutex<jiff::Timestamp>>);

impl SetClock {
    fn at(t: &str) -> SetClock {
        SetClock(Arc::new(Mutex::new(t.parse().unwrap())))
    }

    fn set(&self, t: &str) {
        *self.0.lock().unwrap() = t.parse().unwrap();
    }
}

impl Clock for SetClock {
    fn now(&self) -> jiff::Timestamp {
        *self.0.lock().unwrap()
    }
}

/// The CronTab of the OpenAPI tests: descriptions, an enum, a required
/// field and an embedded resource.
fn explained_crontab() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "CronTab runs a command on a schedule.",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "CronTabSpec is the desired schedule.",
                            "required": ["cronSpec"],
                            "properties": {
                                "cronSpec": {"type": "string", "description": "The schedule in cron format."},
                                "image": {"type": "string", "description": "The image the job runs."},
                                "replicas": {"type": "integer", "minimum": 0, "description": "How many jobs run at once."},
                                "policy": {"type": "string", "enum": ["Allow", "Forbid"], "description": "What happens when runs overlap."},
                                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                             "x-kubernetes-preserve-unknown-fields": true,
                                             "description": "The object each run creates."},
                            },
                        },
                        "status": {"type": "object", "properties": {
                            "lastRun": {"type": "string", "format": "date-time", "description": "When it last ran."},
                        }},
                    },
                }},
                "subresources": {"status": {}},
            }],
        },
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reads_the_served_schema() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    cluster.install_crd_value(explained_crontab()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_cluster(&cluster, dir.path());

    let top = kubectl.run_async(&["explain", "crontabs"]).await;
    for expected in [
        "GROUP:      stable.example.com",
        "KIND:       CronTab",
        "VERSION:    v1",
        "CronTab runs a command on a schedule.",
        "apiVersion\t<string>",
        "metadata\t<ObjectMeta>",
        "Standard object's metadata.",
        "spec\t<Object>",
        "CronTabSpec is the desired schedule.",
        "status\t<Object>",
    ] {
        assert!(top.contains(expected), "missing {expected:?} in:\n{top}");
    }
    let spec = kubectl.run_async(&["explain", "crontabs.spec"]).await;
    for expected in [
        "FIELD: spec <Object>",
        "cronSpec\t<string> -required-",
        "The schedule in cron format.",
        "replicas\t<integer>",
        "policy\t<string>",
        "enum: Allow, Forbid",
        "template\t<Object>",
    ] {
        assert!(spec.contains(expected), "missing {expected:?} in:\n{spec}");
    }
    // Short names resolve; the embedded resource and metadata work.
    let field = kubectl.run_async(&["explain", "ct.spec.cronSpec"]).await;
    assert!(field.contains("FIELD: cronSpec <string>"), "{field}");
    let embedded = kubectl
        .run_async(&["explain", "crontabs.spec.template"])
        .await;
    assert!(embedded.contains("kind\t<string> -required-"), "{embedded}");
    let name = kubectl
        .run_async(&["explain", "crontabs.metadata.name"])
        .await;
    assert!(
        name.contains("Name must be unique within a namespace."),
        "{name}"
    );
    let recursive = kubectl
        .run_async(&["explain", "crontabs.spec", "--recursive"])
        .await;
    assert!(recursive.contains("ownerReferences"), "{recursive}");
    let err = kubectl.fail_async(&["explain", "crontabs.spec.nope"]).await;
    assert!(err.contains("field \"nope\" does not exist"), "{err}");

    // The index points at the document by its hash; the document carries
    // it as its ETag.
    let crd = CustomResourceDefinition::from_value(&explained_crontab()).unwrap();
    let doc = GroupVersionDocument::build([&crd], "stable.example.com", "v1").unwrap();
    let client = cluster.client();
    let index: Value = client
        .request(http::Request::get("/openapi/v3").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        index["paths"]["apis/stable.example.com/v1"]["serverRelativeURL"],
        doc.server_relative_url()
    );
    assert!(
        index["paths"]["apis/apps/v1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .starts_with("/openapi/v3/apis/apps/v1?hash=")
    );
    let served: Value = client
        .request(
            http::Request::get(doc.server_relative_url())
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(served.to_string().as_bytes(), doc.body());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_shows_the_printer_columns() {
    let clock = SetClock::at("2026-01-02T02:59:00Z");
    let cluster = TestCluster::start(TestClusterConfig::default().with_clock(clock.clone()))
        .await
        .unwrap();
    let mut crd = json!({
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
                "additionalPrinterColumns": [
                    {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "Images", "type": "string", "jsonPath": ".spec.containers[*].image", "priority": 1},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
            }],
        },
    });
    cluster.install_crd_value(crd.clone()).unwrap();
    cluster
        .apply_yaml(
            "apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: hourly\n\
             spec:\n  cronSpec: '@hourly'\n  replicas: 3\n  containers: [{image: busybox}, {image: nginx}]\n\
             status:\n  conditions: [{type: Synced, status: 'False'}, {type: Ready, status: 'True'}]\n",
        )
        .unwrap();
    clock.set("2025-12-30T03:04:05Z");
    cluster
        .apply_yaml("apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: daily\nspec:\n  cronSpec: '@daily'\n")
        .unwrap();
    clock.set("2026-01-02T03:04:05Z");
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_cluster(&cluster, dir.path());
    let out = kubectl.run_async(&["get", "crontabs"]).await;
    assert_eq!(
        table(&out),
        vec![
            vec!["NAME", "SPEC", "REPLICAS", "READY", "AGE"],
            // kubectl prints an empty (null) cell as a blank.
            vec!["daily", "@daily", "", "", "3d"],
            vec!["hourly", "@hourly", "3", "True", "5m5s"],
        ],
        "{out}"
    );
    let wide = kubectl.run_async(&["get", "crontabs", "-o", "wide"]).await;
    assert_eq!(
        table(&wide)[0],
        vec!["NAME", "SPEC", "REPLICAS", "READY", "IMAGES", "AGE"],
        "{wide}"
    );
    assert_eq!(table(&wide)[2][4], "busybox", "{wide}");

    // Without declared columns: NAME and AGE.
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("additionalPrinterColumns");
    cluster.install_crd_value(crd).unwrap();
    let out = kubectl.run_async(&["get", "crontabs"]).await;
    assert_eq!(
        table(&out),
        vec![
            vec!["NAME", "AGE"],
            vec!["daily", "3d"],
            vec!["hourly", "5m5s"]
        ],
        "{out}"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_manages_custom_resources_as_built_in_ones() {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubectl = Kubectl::for_cluster(&cluster, dir.path());
    let crd_yaml = serde_yaml::to_string(&crontab()).unwrap();
    let out = kubectl.apply(dir.path(), &crd_yaml).await;
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/crontabs.stable.example.com created"
        ),
        "{out}"
    );
    let crd = kubectl
        .json_async(&["get", "crd", "crontabs.stable.example.com"])
        .await;
    assert!(
        crd["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    );
    let object = serde_yaml::to_string(&crontab_object("nightly", "0 2 * * *")).unwrap();
    let path = dir.path().join("nightly.yaml");
    std::fs::write(&path, object).unwrap();
    let out = kubectl
        .run_async(&["create", "-f", path.to_str().unwrap()])
        .await;
    assert!(
        out.contains("crontab.stable.example.com/nightly created"),
        "{out}"
    );

    let out = kubectl.run_async(&["get", "ct"]).await;
    assert_eq!(table(&out)[1][..3], ["nightly", "0 2 * * *", "1"], "{out}");
    // The `all` category.
    let all = kubectl.run_async(&["get", "all"]).await;
    assert!(all.contains("crontab.stable.example.com/nightly"), "{all}");
    // The scale subresource.
    let out = kubectl
        .run_async(&["scale", "crontab/nightly", "--replicas=3"])
        .await;
    assert!(
        out.contains("crontab.stable.example.com/nightly scaled"),
        "{out}"
    );
    let obj = kubectl.json_async(&["get", "crontab", "nightly"]).await;
    assert_eq!(obj["spec"]["replicas"], 3);
    assert_eq!(obj["metadata"]["generation"], 2);
    // Merge patches work; strategic merge (kubectl's default) is 415.
    kubectl
        .run_async(&[
            "patch",
            "ct",
            "nightly",
            "--type=merge",
            "-p",
            "{\"spec\":{\"image\":\"alpine\"}}",
        ])
        .await;
    let err = kubectl
        .fail_async(&[
            "patch",
            "ct",
            "nightly",
            "-p",
            "{\"spec\":{\"image\":\"x\"}}",
        ])
        .await;
    assert!(
        err.contains("the body of the request was in an unknown format"),
        "{err}"
    );
    // Invalid objects are refused with the field named.
    let err = kubectl
        .fail_async(&[
            "patch",
            "ct",
            "nightly",
            "--type=merge",
            "-p",
            "{\"spec\":{\"replicas\":50}}",
        ])
        .await;
    assert!(
        err.contains("spec.replicas: Invalid value: 50: spec.replicas in body should be less than or equal to 10"),
        "{err}"
    );
    // Deleting the definition takes its objects and its type with it.
    kubectl
        .run_async(&["delete", "crd", "crontabs.stable.example.com"])
        .await;
    // (kubectl still resolves `ct` from its discovery cache, as it would
    // against kube-apiserver; the list itself is 404.)
    let err = kubectl.fail_async(&["get", "ct"]).await;
    assert!(
        err.contains(
            "Unable to list \"stable.example.com/v1, Resource=crontabs\": the server could not find the requested resource"
        ),
        "{err}"
    );
    cluster.shutdown().await;
}
