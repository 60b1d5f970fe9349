//! KEP-5866's `shardSelector` on list and watch, over HTTP: every resource
//! is filtered by the 64-bit FNV-1a hash of the UID (or namespace), and a
//! bad selector is a 400 that says what is wrong.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

const LOW: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const HIGH: &str = "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')";

fn fnv1a_64(value: &str) -> u64 {
    value.bytes().fold(0xcbf2_9ce4_8422_2325, |h: u64, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Percent-encodes a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn get(client: &kube::Client, uri: &str) -> Result<String, kube::Error> {
    client
        .request_text(http::Request::get(uri).body(Vec::new()).unwrap())
        .await
}

async fn create(client: &kube::Client, n: std::ops::Range<usize>) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    for i in n {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("cm-{i}")}})).unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
    }
}

/// `uid -> name` of a list response.
fn items(body: &str) -> Vec<(String, String)> {
    let list: Value = serde_json::from_str(body).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            (
                m["uid"].as_str().unwrap().into(),
                m["name"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[tokio::test]
async fn lists_are_split_by_the_hash_of_the_uid() {
    let cluster = start().await;
    let client = cluster.client();
    create(&client, 0..40).await;
    let base = "/api/v1/namespaces/default/configmaps";
    let all = items(&get(&client, base).await.unwrap());
    let low = items(
        &get(&client, &format!("{base}?shardSelector={}", encode(LOW)))
            .await
            .unwrap(),
    );
    let high = items(
        &get(&client, &format!("{base}?shardSelector={}", encode(HIGH)))
            .await
            .unwrap(),
    );
    for (uid, name) in &low {
        assert!(fnv1a_64(uid) < 1 << 63, "{name} is in the upper half");
    }
    for (uid, name) in &high {
        assert!(fnv1a_64(uid) >= 1 << 63, "{name} is in the lower half");
    }
    let union: BTreeSet<_> = low.iter().chain(&high).cloned().collect();
    assert_eq!(union, all.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(low.len() + high.len(), all.len());
    assert!(!low.is_empty() && !high.is_empty());

    // Both halves, ORed, are everything; across namespaces too.
    let both = encode(&format!("{LOW} || {HIGH}"));
    let every = items(
        &get(&client, &format!("/api/v1/configmaps?shardSelector={both}"))
            .await
            .unwrap(),
    );
    assert!(every.len() >= all.len());
}

#[tokio::test]
async fn watches_send_only_the_events_of_their_range() {
    let cluster = start().await;
    let client = cluster.client();
    let base = "/api/v1/namespaces/default/configmaps";
    let list: Value = serde_json::from_str(&get(&client, base).await.unwrap()).unwrap();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    create(&client, 0..30).await;
    let body = get(
        &client,
        &format!(
            "{base}?watch=true&resourceVersion={rv}&timeoutSeconds=1&shardSelector={}",
            encode(LOW)
        ),
    )
    .await
    .unwrap();
    let uids: Vec<String> = body
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "ADDED")
        .map(|e| e["object"]["metadata"]["uid"].as_str().unwrap().to_owned())
        .collect();
    let expected = items(&get(&client, base).await.unwrap())
        .into_iter()
        .filter(|(uid, _)| fnv1a_64(uid) < 1 << 63)
        .count();
    assert_eq!(uids.len(), expected, "{body}");
    assert!(uids.iter().all(|u| fnv1a_64(u) < 1 << 63));
}

#[tokio::test]
async fn a_bad_selector_is_a_400_saying_why() {
    let cluster = start().await;
    let client = cluster.client();
    for (uri, says) in [
        (
            "/api/v1/namespaces/default/configmaps",
            "unsupported field path",
        ),
        (
            "/api/v1/namespaces/default/configmaps?watch=true",
            "unsupported field path",
        ),
    ] {
        let selector = encode("shardRange(object.metadata.name, '0x0', '0x1')");
        let err = api_error(
            get(
                &client,
                &format!("{uri}?shardSelector={selector}").replace("?watch=true?", "?watch=true&"),
            )
            .await,
        );
        assert_eq!(err.code, 400);
        assert!(err.message.contains(says), "{}", err.message);
        assert!(
            err.message.contains("invalid shardSelector"),
            "{}",
            err.message
        );
    }
}

/// KEP-5866: a list made with a selector carries it back in
/// `metadata.shardInfo.selector`; with the feature gate off the parameter
/// is ignored as by an older server: every object, no `shardInfo`.
#[tokio::test]
async fn lists_echo_the_selector_and_a_server_without_the_gate_ignores_it() {
    let cluster = start().await;
    let client = cluster.client();
    create(&client, 0..10).await;
    let base = "/api/v1/namespaces/default/configmaps";
    let list: Value = serde_json::from_str(
        &get(&client, &format!("{base}?shardSelector={}", encode(LOW)))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(list["metadata"]["shardInfo"]["selector"], LOW);
    let plain: Value = serde_json::from_str(&get(&client, base).await.unwrap()).unwrap();
    assert!(plain["metadata"].get("shardInfo").is_none());

    let old = TestCluster::start(TestClusterConfig::default().with_sharded_list_and_watch(false))
        .await
        .unwrap();
    let client = old.client();
    create(&client, 0..10).await;
    let body = get(&client, &format!("{base}?shardSelector={}", encode(LOW)))
        .await
        .unwrap();
    assert_eq!(items(&body).len(), 10, "ignored: every object");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert!(list["metadata"].get("shardInfo").is_none());
    // Not even parsed: an invalid selector is ignored too.
    let bad = encode("shardRange(object.metadata.name, '0x0', '0x1')");
    assert!(
        get(&client, &format!("{base}?shardSelector={bad}"))
            .await
            .is_ok()
    );
}
