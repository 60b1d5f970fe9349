//! What the sharding tests share: a test cluster with owner ConfigMaps,
//! and a bounded wait.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::time::Instant;

/// A test cluster with the namespaces `apps` and `other`, and `owners`
/// ConfigMaps `owner-<i>` in `apps`.
pub(crate) async fn cluster_with_owners(owners: usize, other: &str) -> TestCluster {
    let cluster = TestCluster::start(TestClusterConfig::default())
        .await
        .unwrap();
    let client = cluster.client();
    for ns in ["apps", other] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap();
    }
    let cms: Api<ConfigMap> = Api::namespaced(client, "apps");
    for i in 0..owners {
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": format!("owner-{i}")}})).unwrap();
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    cluster
}

/// Waits (real time, at most 30 s) until `cond` holds.
pub(crate) async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
