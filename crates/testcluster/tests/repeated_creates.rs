//! Creates that repeat an earlier request body but for the name, as a
//! controller's creates from one template do: the objects are the same as
//! those of first-time creates, names and uids apart, and every check on
//! the name still applies.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, ReplicationController};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};

/// POST `body` verbatim to `path`.
async fn post(client: &Client, path: &str, body: &str) -> Result<Value, kube::Error> {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(body.as_bytes().to_vec())
        .unwrap();
    client.request::<Value>(req).await
}

async fn get(client: &Client, path: &str) -> Value {
    let req = http::Request::get(path).body(Vec::new()).unwrap();
    client.request::<Value>(req).await.unwrap()
}

/// The object without what makes it this one: its name, uid, version and
/// creation time, which a create's managedFields entries also carry (so
/// two creates a second apart still compare equal).
fn without_identity(mut object: Value) -> Value {
    let meta = object["metadata"].as_object_mut().unwrap();
    let created = meta.remove("creationTimestamp");
    for field in ["name", "uid", "resourceVersion"] {
        meta.remove(field);
    }
    for entry in meta
        .get_mut("managedFields")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let time = entry.as_object_mut().unwrap().remove("time");
        assert_eq!(
            time, created,
            "a create's managedFields time is its creation time"
        );
    }
    object
}

fn pod_body(name: &str, owner_uid: &str) -> String {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web", "tier": "front"},
                     "annotations": {"note": "n"}, "finalizers": ["example.com/keep"],
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                          "name": "web", "uid": owner_uid, "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "nginx",
                                 "resources": {"requests": {"cpu": "100m"}}}]},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_bodies_make_the_same_objects_with_their_own_names() {
    let cluster = start().await;
    let client = cluster.client();
    // A live owner, so that the garbage collector leaves the pods alone.
    let owner = Api::<ReplicaSet>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &replicaset("web", 0))
        .await
        .unwrap();
    let owner_uid = owner.metadata.uid.unwrap();
    let pods_path = "/api/v1/namespaces/default/pods";
    let mut created = Vec::new();
    for name in ["p-0", "p-1", "p-2"] {
        created.push(
            post(&client, pods_path, &pod_body(name, &owner_uid))
                .await
                .unwrap(),
        );
    }
    let first = without_identity(get(&client, &format!("{pods_path}/p-0")).await);
    let mut uids = Vec::new();
    for (i, response) in created.iter().enumerate() {
        let name = format!("p-{i}");
        let stored = get(&client, &format!("{pods_path}/{name}")).await;
        assert_eq!(&stored, response, "the response is the stored object");
        assert_eq!(stored["metadata"]["name"], name);
        assert_eq!(stored["metadata"]["namespace"], "default");
        assert!(stored["metadata"]["creationTimestamp"].is_string());
        uids.push(stored["metadata"]["uid"].as_str().unwrap().to_string());
        assert_eq!(without_identity(stored), first);
    }
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 3, "every object has its own uid");
    let versions: Vec<u64> = created
        .iter()
        .map(|o| {
            o["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(first["status"], json!({"phase": "Pending"}));
    assert_eq!(first["spec"]["restartPolicy"], "Always");

    // Selectors read what the store keeps of each object.
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let by_label = pods
        .list(&ListParams::default().labels("app=web,tier in (front)"))
        .await
        .unwrap();
    assert_eq!(by_label.items.len(), 3);
    let by_name = pods
        .list(&ListParams::default().fields("metadata.name=p-1"))
        .await
        .unwrap();
    let names: Vec<_> = by_name.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["p-1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_replica_set_and_controller_bodies_keep_their_defaults() {
    let cluster = start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    for name in ["rs-a", "rs-b"] {
        let mut rs = replicaset("web", 2);
        rs.metadata.name = Some(name.into());
        rss.create(&PostParams::default(), &rs).await.unwrap();
    }
    let a = rss.get("rs-a").await.unwrap();
    let b = rss.get("rs-b").await.unwrap();
    assert_eq!(b.metadata.generation, Some(1));
    assert_eq!(a.spec, b.spec);
    assert_ne!(a.metadata.uid, b.metadata.uid);

    // An RC's selector defaults from its template labels.
    let rc_body = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ReplicationController", "metadata": {"name": name},
               "spec": {"template": {"metadata": {"labels": {"app": "rc"}},
                                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
        .to_string()
    };
    let path = "/api/v1/namespaces/default/replicationcontrollers";
    for name in ["rc-a", "rc-b"] {
        post(&client, path, &rc_body(name)).await.unwrap();
    }
    let rcs = Api::<ReplicationController>::namespaced(client.clone(), "default");
    let rc = rcs.get("rc-b").await.unwrap();
    let spec = rc.spec.unwrap();
    assert_eq!(spec.selector, Some([("app".into(), "rc".into())].into()));
    assert_eq!(spec.replicas, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_generate_name_bodies_get_distinct_names() {
    let cluster = start().await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let mut p = pod("", json!({"app": "gen"}));
    p.metadata.name = None;
    p.metadata.generate_name = Some("web-".into());
    let mut names = Vec::new();
    for _ in 0..20 {
        names.push(
            pods.create(&PostParams::default(), &p)
                .await
                .unwrap()
                .name_any(),
        );
    }
    for name in &names {
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(&pods.get(name).await.unwrap().name_any(), name);
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 20);
    let listed = pods
        .list(&ListParams::default().labels("app=gen"))
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_large_bodies_make_the_same_objects() {
    // Bodies past the template size bound take the general path each time.
    let cluster = start().await;
    let client = cluster.client();
    let big = "x".repeat(100 * 1024);
    let body = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "annotations": {"big": big}},
               "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
        .to_string()
    };
    let path = "/api/v1/namespaces/default/pods";
    for name in ["big-0", "big-1"] {
        post(&client, path, &body(name)).await.unwrap();
    }
    let first = get(&client, &format!("{path}/big-0")).await;
    let second = get(&client, &format!("{path}/big-1")).await;
    assert_eq!(second["metadata"]["name"], "big-1");
    assert_eq!(
        second["metadata"]["annotations"]["big"].as_str(),
        Some(big.as_str())
    );
    assert_ne!(first["metadata"]["uid"], second["metadata"]["uid"]);
    assert_eq!(without_identity(first), without_identity(second));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_body_still_has_its_name_checked() {
    let cluster = start().await;
    let client = cluster.client();
    let path = "/api/v1/namespaces/default/pods";
    post(&client, path, &pod_body("good", "u")).await.unwrap();

    let bad = api_error(post(&client, path, &pod_body("Bad_Name", "u")).await);
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
    assert!(bad.message.contains("metadata.name"), "{}", bad.message);
    let too_long = api_error(post(&client, path, &pod_body(&"a".repeat(254), "u")).await);
    assert_eq!(too_long.code, 422);
    let taken = api_error(post(&client, path, &pod_body("good", "u")).await);
    assert_eq!((taken.code, taken.reason.as_str()), (409, "AlreadyExists"));

    // The name as JSON spells it, escapes included.
    let escaped = pod_body("PLACEHOLDER", "u").replace("PLACEHOLDER", "\\u0061b");
    let created = post(&client, path, &escaped).await.unwrap();
    assert_eq!(created["metadata"]["name"], "ab");

    // A dry run of a repeated body stores nothing.
    let dry = post(
        &client,
        &format!("{path}?dryRun=All"),
        &pod_body("dry", "u"),
    )
    .await
    .unwrap();
    assert_eq!(dry["metadata"]["name"], "dry");
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    assert_eq!(api_error(pods.get("dry").await).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_creates_are_collected_with_their_owner() {
    let cluster = start().await;
    let client = cluster.client();
    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", 0))
        .await
        .unwrap();
    let uid = rs.metadata.uid.unwrap();
    let path = "/api/v1/namespaces/default/pods";
    let without_finalizer = |name: &str| {
        let mut body: Value = serde_json::from_str(&pod_body(name, &uid)).unwrap();
        body["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("finalizers");
        body.to_string()
    };
    for i in 0..5 {
        post(&client, path, &without_finalizer(&format!("owned-{i}")))
            .await
            .unwrap();
    }
    rss.delete("web", &DeleteParams::default()).await.unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    eventually(|| async {
        pods.list(&ListParams::default().labels("app=web"))
            .await
            .unwrap()
            .items
            .is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_body_into_a_deleted_namespace_fails_as_a_new_one_does() {
    let cluster = start().await;
    let client = cluster.client();
    let namespaces = Api::<Namespace>::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "brief"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let path = "/api/v1/namespaces/brief/pods";
    post(&client, path, &pod_body("p-0", "u")).await.unwrap();
    namespaces
        .delete("brief", &DeleteParams::default())
        .await
        .unwrap();

    let repeated = api_error(post(&client, path, &pod_body("p-1", "u")).await);
    let fresh = api_error(
        Api::<Pod>::namespaced(client.clone(), "brief")
            .create(&PostParams::default(), &pod("other", json!({})))
            .await,
    );
    assert!(repeated.code == 403 || repeated.code == 404, "{repeated:?}");
    assert_eq!((repeated.code, repeated.reason), (fresh.code, fresh.reason));
}
