//! What the sharding tests share: a test cluster with owner ConfigMaps,
//! a running member's tasks, and a bounded wait.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_runtime::shard::{ShardError, ShardMember};
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::PostParams;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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

/// A ring member as a test runs it: its ring loop and its controller on an
/// informer factory of its own (each test file has its own `start`).
pub(crate) struct Member {
    pub(crate) member: ShardMember,
    pub(crate) stop: CancellationToken,
    pub(crate) factory: SharedInformerFactory,
    pub(crate) ring: JoinHandle<Result<(), ShardError>>,
    pub(crate) controller: JoinHandle<()>,
    /// Feeds a lagging pod cache, if the member has one.
    pub(crate) feeder: Option<JoinHandle<()>>,
}

impl Member {
    /// As `kill -9`: nothing is released, the Lease is left to expire.
    pub(crate) async fn kill(self) {
        self.ring.abort();
        self.controller.abort();
        self.factory.cancellation_token().cancel();
        let _ = self.ring.await;
        let _ = self.controller.await;
        if let Some(f) = self.feeder {
            f.abort();
        }
    }

    /// A graceful stop: drain, release, delete the Lease.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        self.controller.await.unwrap();
        self.ring.await.unwrap().unwrap();
        self.factory.cancellation_token().cancel();
        if let Some(f) = self.feeder {
            f.abort();
        }
    }
}
