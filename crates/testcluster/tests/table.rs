//! Server-side Table output, which `kubectl get` asks for: kubectl's usual
//! columns per kind (and the `-o wide` ones), `includeObject`, lists and
//! watches.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::kubectl::{ChildGuard, Kubectl};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn get_table(cluster: &ctrlkit_testcluster::TestCluster, path: &str) -> (String, Value) {
    let req = http::Request::get(path)
        .header("Accept", TABLE)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = cluster.client().send(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
    let body = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();
    (ct, serde_json::from_slice(&body).unwrap())
}

fn column_names(table: &Value) -> Vec<(String, u64)> {
    table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_string(),
                c["priority"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tables_have_the_printer_columns_and_include_object() {
    let cluster = common::start().await;
    let client = cluster.client();
    common::create_pod(&client, "web-1", json!({"app": "web"})).await;
    Api::<Pod>::namespaced(client.clone(), "default")
        .patch_status(
            "web-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "10.1.2.3",
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 2, "image": "nginx", "imageID": "", "state": {"running": {}}}]}})),
        )
        .await
        .unwrap();

    let (ct, table) = get_table(&cluster, "/api/v1/namespaces/default/pods").await;
    assert_eq!(ct, "application/json;as=Table;v=v1;g=meta.k8s.io");
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let columns = column_names(&table);
    let names: Vec<(&str, u64)> = columns.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    assert_eq!(
        names,
        [
            ("Name", 0),
            ("Ready", 0),
            ("Status", 0),
            ("Restarts", 0),
            ("Age", 0),
            ("IP", 1),
            ("Node", 1),
            ("Nominated Node", 1),
            ("Readiness Gates", 1)
        ]
    );
    let row = &table["rows"][0];
    assert_eq!(
        row["cells"].as_array().unwrap()[..4],
        [json!("web-1"), json!("1/1"), json!("Running"), json!("2")]
    );
    assert_eq!(row["cells"][5], "10.1.2.3");
    assert_eq!(
        row["object"]["kind"], "PartialObjectMetadata",
        "Metadata is the default"
    );
    assert_eq!(row["object"]["metadata"]["name"], "web-1");
    assert!(row["object"].get("spec").is_none());

    let (_, full) = get_table(
        &cluster,
        "/api/v1/namespaces/default/pods?includeObject=Object",
    )
    .await;
    assert_eq!(full["rows"][0]["object"]["kind"], "Pod");
    assert_eq!(
        full["rows"][0]["object"]["spec"]["containers"][0]["name"],
        "c"
    );
    let (_, bare) = get_table(
        &cluster,
        "/api/v1/namespaces/default/pods/web-1?includeObject=None",
    )
    .await;
    assert_eq!(bare["rows"].as_array().unwrap().len(), 1);
    assert!(bare["rows"][0].get("object").is_none());

    // A kind without a printer and one with: ConfigMap DATA, Secret TYPE DATA.
    let cms: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "cfg"}, "data": {"a": "1", "b": "2"}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let (_, t) = get_table(&cluster, "/api/v1/namespaces/default/configmaps").await;
    assert_eq!(
        column_names(&t)
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>(),
        ["Name", "Data", "Age"]
    );
    assert_eq!(t["rows"][0]["cells"][1], 2);
    // Plain JSON is still the default.
    let plain: Value = client
        .request(
            http::Request::get("/api/v1/namespaces/default/configmaps/cfg")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(plain["kind"], "ConfigMap");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_watches_send_one_row_tables() {
    let cluster = common::start().await;
    let client = cluster.client();
    let req = http::Request::get("/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=5")
        .header("Accept", TABLE)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    common::create_pod(&client, "watched", json!({})).await;
    let mut body = resp.into_body();
    let mut buf = Vec::new();
    let first = loop {
        let frame = http_body_util::BodyExt::frame(&mut body)
            .await
            .unwrap()
            .unwrap();
        buf.extend_from_slice(frame.data_ref().unwrap());
        if let Some(end) = buf.iter().position(|b| *b == b'\n') {
            break serde_json::from_slice::<Value>(&buf[..end]).unwrap();
        }
    };
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "Table");
    assert_eq!(first["object"]["rows"][0]["cells"][0], "watched");
    assert_eq!(first["object"]["rows"][0]["cells"][2], "Pending");
    cluster.shutdown().await;
}

fn header_of(out: &str) -> Vec<String> {
    // Columns are separated by at least two spaces (a header like
    // "NOMINATED NODE" has one).
    out.lines()
        .next()
        .unwrap()
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_prints_the_usual_columns() {
    let cluster = common::start().await;
    let client = cluster.client();
    common::create_pod(&client, "web-1", json!({"app": "web"})).await;
    Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &common::replicaset("web", 3))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());

    let pods = k.run_async(&["get", "pods", "-o", "wide"]).await;
    assert_eq!(
        header_of(&pods),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED NODE",
            "READINESS GATES"
        ],
        "{pods}"
    );
    let row: Vec<&str> = pods.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["web-1", "0/1", "Pending", "0"], "{pods}");
    let rs = k.run_async(&["get", "rs", "-o", "wide"]).await;
    assert_eq!(
        header_of(&rs),
        [
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ],
        "{rs}"
    );
    let row: Vec<&str> = rs.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row[..4], ["web", "3", "0", "0"], "{rs}");
    assert_eq!(row[5..], ["c", "nginx", "app=web"], "{rs}");
    let rs = k.run_async(&["get", "rs"]).await;
    assert_eq!(
        header_of(&rs),
        ["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        "{rs}"
    );

    let ns = k.run_async(&["get", "ns"]).await;
    assert_eq!(header_of(&ns), ["NAME", "STATUS", "AGE"], "{ns}");
    assert!(
        ns.lines()
            .any(|l| l.starts_with("default") && l.contains("Active")),
        "{ns}"
    );

    cluster
        .apply_yaml(
            r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: "nginx:1.27"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Secret
metadata: {name: token}
stringData: {a: b}
data: {c: ZA==}
---
apiVersion: v1
kind: Node
metadata: {name: node-9, labels: {node-role.kubernetes.io/control-plane: ""}}
---
apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: leader}
spec: {holderIdentity: me}
"#,
        )
        .unwrap();
    for (args, header) in [
        (
            &["get", "deploy"][..],
            &["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"][..],
        ),
        (
            &["get", "svc"],
            &[
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE",
            ],
        ),
        (&["get", "secrets"], &["NAME", "TYPE", "DATA", "AGE"]),
        (
            &["get", "nodes"],
            &["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
        ),
        (&["get", "leases"], &["NAME", "HOLDER", "AGE"]),
    ] {
        let out = k.run_async(args).await;
        assert_eq!(header_of(&out), header, "{out}");
    }
    let svc = k.run_async(&["get", "svc", "web", "--no-headers"]).await;
    let cells: Vec<&str> = svc.split_whitespace().collect();
    assert_eq!(
        (cells[1], cells[3], cells[4]),
        ("ClusterIP", "<none>", "80/TCP"),
        "{svc}"
    );
    let node = k
        .run_async(&["get", "node", "node-9", "--no-headers"])
        .await;
    assert_eq!(
        node.split_whitespace().take(3).collect::<Vec<_>>(),
        ["node-9", "Unknown", "control-plane"],
        "{node}"
    );

    // kubectl get -w uses a Table watch: rows, not JSON.
    let mut child = k
        .command(&["get", "pods", "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _guard = ChildGuard(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The initial list shows web-1; a pod created afterwards comes through the watch.
    let first = tokio::task::spawn_blocking(move || {
        rx.recv_timeout(Duration::from_secs(60)).map(|l| (l, rx))
    })
    .await
    .unwrap()
    .unwrap();
    assert!(first.0.starts_with("web-1"), "{}", first.0);
    let rx = first.1;
    common::create_pod(&client, "late", json!({})).await;
    let line = tokio::task::spawn_blocking(move || {
        loop {
            let l = rx.recv_timeout(Duration::from_secs(60)).unwrap();
            if l.starts_with("late") {
                break l;
            }
        }
    })
    .await
    .unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[..4], ["late", "0/1", "Pending", "0"], "{line}");
    cluster.shutdown().await;
}
