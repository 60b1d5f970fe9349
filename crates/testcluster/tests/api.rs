//! CRUD, conflicts, naming, selectors, paging and validation through kube-client.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, ReplicationController};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_namespaces_and_version() {
    let cluster = start().await;
    let client = cluster.client();
    let namespaces = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let names: Vec<_> = namespaces.items.iter().map(|n| n.name_any()).collect();
    assert!(names.contains(&"default".to_string()));
    assert!(names.contains(&"kube-system".to_string()));
    let version = client.apiserver_version().await.unwrap();
    assert_eq!(version.major, "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_crud_sets_server_fields() {
    let cluster = start().await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let created = pods
        .create(&PostParams::default(), &pod("a", json!({"app": "x"})))
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(created.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(created.status.unwrap().phase.as_deref(), Some("Pending"));
    let rv1: u64 = created
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();

    let mut got = pods.get("a").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    got.labels_mut().insert("tier".into(), "front".into());
    let replaced = pods
        .replace("a", &PostParams::default(), &got)
        .await
        .unwrap();
    let rv2: u64 = replaced
        .metadata
        .resource_version
        .clone()
        .unwrap()
        .parse()
        .unwrap();
    assert!(rv2 > rv1, "resourceVersion grows");
    assert_eq!(
        replaced.labels().get("tier").map(String::as_str),
        Some("front")
    );

    let list = pods.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());

    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let err = api_error(pods.get("a").await);
    assert_eq!(err.code, 404);
    assert_eq!(err.reason, "NotFound");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_for_every_resource() {
    let cluster = start().await;
    let client = cluster.client();
    let pp = PostParams::default();

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "team-a"}})).unwrap();
    let ns = Api::<Namespace>::all(client.clone())
        .create(&pp, &ns)
        .await
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));

    let rcs = Api::<ReplicationController>::namespaced(client.clone(), "team-a");
    let rc: ReplicationController = serde_json::from_value(json!({
        "metadata": {"name": "rc"},
        "spec": {"template": {"metadata": {"labels": {"app": "rc"}},
                 "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    }))
    .unwrap();
    let rc = rcs.create(&pp, &rc).await.unwrap();
    let spec = rc.spec.unwrap();
    assert_eq!(spec.replicas, Some(1), "replicas default to 1");
    assert_eq!(
        spec.selector.unwrap().get("app").map(String::as_str),
        Some("rc"),
        "selector defaults from template labels"
    );
    rcs.delete("rc", &DeleteParams::default()).await.unwrap();

    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let mut rs = replicaset("web", 2);
    rs.spec.replicas = None;
    let rs = rss.create(&pp, &rs).await.unwrap();
    assert_eq!(rs.spec.replicas, Some(1));
    assert_eq!(rs.metadata.generation, Some(1));
    assert_eq!(
        rss.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );

    let events = Api::<Event>::namespaced(client.clone(), "default");
    let ev: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "web."},
        "involvedObject": {"kind": "ReplicaSet", "name": "web", "namespace": "default"},
        "reason": "SuccessfulCreate", "message": "created pod", "type": "Normal"
    }))
    .unwrap();
    let ev = events.create(&pp, &ev).await.unwrap();
    assert!(ev.name_any().starts_with("web."));

    let events_v1 = Api::<EventV1>::namespaced(client.clone(), "default");
    let ev1: EventV1 = serde_json::from_value(json!({
        "metadata": {"name": "e1"}, "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "x", "reportingInstance": "y", "action": "Create", "reason": "R", "type": "Normal"
    }))
    .unwrap();
    events_v1.create(&pp, &ev1).await.unwrap();
    assert_eq!(
        events_v1.get("e1").await.unwrap().reason.as_deref(),
        Some("R")
    );

    let leases = Api::<Lease>::namespaced(client.clone(), "default");
    let lease: Lease = serde_json::from_value(
        json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}}),
    )
    .unwrap();
    leases.create(&pp, &lease).await.unwrap();
    let mut got = leases.get("l").await.unwrap();
    got.spec.as_mut().unwrap().holder_identity = Some("you".into());
    leases.replace("l", &pp, &got).await.unwrap();
    assert_eq!(
        leases
            .get("l")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("you")
    );
    leases.delete("l", &DeleteParams::default()).await.unwrap();
    assert_eq!(api_error(leases.get("l").await).code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicts_and_already_exists() {
    let cluster = start().await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let created = create_pod(&cluster.client(), "a", json!({})).await;

    let err = api_error(
        pods.create(&PostParams::default(), &pod("a", json!({})))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (409, "AlreadyExists"));

    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.labels_mut().insert("v".into(), "1".into());
    pods.replace("a", &PostParams::default(), &fresh)
        .await
        .unwrap();
    stale.labels_mut().insert("v".into(), "2".into());
    let err = api_error(pods.replace("a", &PostParams::default(), &stale).await);
    assert_eq!((err.code, err.reason.as_str()), (409, "Conflict"));

    // Without a resourceVersion the update is unconditional.
    stale.metadata.resource_version = None;
    let updated = pods
        .replace("a", &PostParams::default(), &stale)
        .await
        .unwrap();
    assert_eq!(updated.labels().get("v").map(String::as_str), Some("2"));

    let err = api_error(
        Api::<Pod>::namespaced(cluster.client(), "nope")
            .create(&PostParams::default(), &pod("x", json!({})))
            .await,
    );
    assert_eq!(err.code, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_name_adds_five_characters() {
    let cluster = start().await;
    let pods = Api::<Pod>::namespaced(cluster.client(), "default");
    let mut p = pod("", json!({}));
    p.metadata.name = None;
    p.metadata.generate_name = Some("web-".into());
    let a = pods.create(&PostParams::default(), &p).await.unwrap();
    let b = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(a.name_any().len(), "web-".len() + 5);
    assert!(a.name_any().starts_with("web-"));
    assert_ne!(a.name_any(), b.name_any());

    let long = "x".repeat(80);
    p.metadata.generate_name = Some(long);
    let c = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(
        c.name_any().len(),
        58 + 5,
        "the base is cut to 58 characters"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_field_selectors() {
    let cluster = start().await;
    let client = cluster.client();
    create_pod(&client, "a", json!({"app": "web", "tier": "front"})).await;
    create_pod(&client, "b", json!({"app": "web", "tier": "back"})).await;
    create_pod(&client, "c", json!({"app": "db"})).await;
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let names = |sel: &str| {
        let pods = pods.clone();
        let sel = sel.to_string();
        async move {
            let mut n: Vec<String> = pods
                .list(&ListParams::default().labels(&sel))
                .await
                .unwrap()
                .items
                .iter()
                .map(|p| p.name_any())
                .collect();
            n.sort();
            n.join(",")
        }
    };
    assert_eq!(names("app=web").await, "a,b");
    assert_eq!(names("app==web,tier!=front").await, "b");
    assert_eq!(names("tier in (front,back)").await, "a,b");
    assert_eq!(names("app notin (web)").await, "c");
    assert_eq!(names("tier").await, "a,b");
    assert_eq!(names("!tier").await, "c");

    let by_field = pods
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(by_field.items.len(), 1);
    let pending = pods
        .list(&ListParams::default().fields("status.phase=Pending,spec.nodeName="))
        .await
        .unwrap();
    assert_eq!(pending.items.len(), 3);
    let all_ns = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields("metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(all_ns.items.len(), 3);

    let err = api_error(pods.list(&ListParams::default().labels("app in web")).await);
    assert_eq!(err.code, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_with_limit_and_continue() {
    let cluster = start().await;
    let client = cluster.client();
    for i in 0..7 {
        create_pod(&client, &format!("p{i}"), json!({})).await;
    }
    let pods = Api::<Pod>::namespaced(client, "default");
    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = pods.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.iter().map(|p| p.name_any()));
        token = page.metadata.continue_.filter(|c| !c.is_empty());
        if token.is_none() {
            break;
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("p{i}")).collect::<Vec<_>>());

    // Every page is at the first page's resourceVersion, as kube-apiserver
    // serves a continued list: a pod created between pages, behind the
    // continue key, is missed by the list but not by a watch from there.
    let first = pods.list(&ListParams::default().limit(3)).await.unwrap();
    let rv = first.metadata.resource_version.clone().unwrap();
    create_pod(&pods.clone().into_client(), "p0a", json!({})).await;
    let token = first.metadata.continue_.unwrap();
    let rest = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.metadata.resource_version, Some(rv));
    assert!(rest.items.iter().all(|p| p.name_any() != "p0a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_errors_are_422_status() {
    let cluster = start().await;
    let client = cluster.client();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    let err = api_error(
        pods.create(&PostParams::default(), &pod("Bad_Name", json!({})))
            .await,
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.contains("metadata.name"), "{}", err.message);

    let mut no_containers = pod("ok", json!({}));
    no_containers.spec.as_mut().unwrap().containers.clear();
    assert_eq!(
        api_error(pods.create(&PostParams::default(), &no_containers).await).code,
        422
    );

    let rss = Api::<ReplicaSet>::namespaced(client.clone(), "default");
    let mut mismatch = replicaset("rs", 1);
    mismatch
        .spec
        .template
        .as_mut()
        .unwrap()
        .metadata
        .as_mut()
        .unwrap()
        .labels = Some([("app".to_string(), "other".to_string())].into());
    let err = api_error(rss.create(&PostParams::default(), &mismatch).await);
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));

    let mut empty_selector = replicaset("rs", 1);
    empty_selector.spec.selector = Default::default();
    assert_eq!(
        api_error(rss.create(&PostParams::default(), &empty_selector).await).code,
        422
    );

    let mut negative = replicaset("rs", 1);
    negative.spec.replicas = Some(-1);
    assert_eq!(
        api_error(rss.create(&PostParams::default(), &negative).await).code,
        422
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_scale_subresources_and_generation() {
    let cluster = start().await;
    let rss = Api::<ReplicaSet>::namespaced(cluster.client(), "default");
    let rs = rss
        .create(&PostParams::default(), &replicaset("web", 1))
        .await
        .unwrap();
    assert_eq!(rs.metadata.generation, Some(1));

    // A main-resource write ignores status.
    let mut with_status = rs.clone();
    with_status.status.as_mut().unwrap().replicas = 9;
    let after = rss
        .replace("web", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().replicas, 0);
    assert_eq!(
        after.metadata.generation,
        Some(1),
        "no spec change, no generation bump"
    );

    // A status write ignores spec and keeps the generation.
    let mut status_write = after.clone();
    status_write.status.as_mut().unwrap().replicas = 3;
    status_write.spec.replicas = Some(7);
    let after = rss
        .replace_status("web", &PostParams::default(), &status_write)
        .await
        .unwrap();
    assert_eq!(after.status.as_ref().unwrap().replicas, 3);
    assert_eq!(after.spec.replicas, Some(1));
    assert_eq!(after.metadata.generation, Some(1));

    // A spec change bumps the generation.
    let mut spec_write = after.clone();
    spec_write.spec.min_ready_seconds = Some(5);
    let after = rss
        .replace("web", &PostParams::default(), &spec_write)
        .await
        .unwrap();
    assert_eq!(after.metadata.generation, Some(2));

    // Scale reads and writes spec.replicas.
    let scale = rss.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let patch = kube::api::Patch::Merge(json!({"spec": {"replicas": 4}}));
    let scale = rss
        .patch_scale("web", &Default::default(), &patch)
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(4));
    let rs = rss.get("web").await.unwrap();
    assert_eq!(rs.spec.replicas, Some(4));
    assert_eq!(rs.status.unwrap().replicas, 3, "scale leaves status alone");
    assert_eq!(
        rs.metadata.generation,
        Some(3),
        "spec.replicas changed, as on kube-apiserver"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_binding() {
    let cluster = start().await;
    let client = cluster.client();
    create_pod(&client, "a", json!({})).await;
    let req = http::Request::post("/api/v1/namespaces/default/pods/a/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "a"}, "target": {"kind": "Node", "name": "node-1"}})).unwrap())
        .unwrap();
    client.request_text(req).await.unwrap();
    let pods = Api::<Pod>::namespaced(client.clone(), "default");
    assert_eq!(
        pods.get("a")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref(),
        Some("node-1")
    );
    let again = http::Request::post("/api/v1/namespaces/default/pods/a/binding")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"target": {"name": "node-2"}})).unwrap())
        .unwrap();
    let err = api_error(client.request_text(again).await);
    assert_eq!(err.code, 409);
}
