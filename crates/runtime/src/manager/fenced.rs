//! Putting the write fence in front of every write a controller makes.
//!
//! Two places check the [`LeaderFence`]: the client the
//! [`Manager`](super::Manager) hands out, which refuses every write
//! request (`POST`, `PUT`, `PATCH`, `DELETE`) while the fence is closed —
//! child creates, deletes and patches, adoption patches, status writes,
//! events, whatever API a controller calls — and the child controls' write
//! gate ([`LeaderFence`] is a [`WriteGate`]), which refuses a child write
//! before it is even built, so no `FailedCreate` event is attempted for it.
//! Both read the fence right before the request, so a process resumed
//! after a pause longer than the renew deadline sends nothing.

use http::{Method, Request};
use kube::client::Body;

use super::fence::LeaderFence;
use ctrlkit_childcontrol::{WriteAttempt, WriteGate, WriteRefused};

impl WriteGate for LeaderFence {
    /// Refuses every child write while the fence is closed, with the
    /// [`FenceClosed`](super::FenceClosed) reason as the error's source.
    fn check(&self, _attempt: &WriteAttempt<'_>) -> Result<(), WriteRefused> {
        LeaderFence::check(self)
            .map_err(|closed| WriteRefused::with_source("leader fence closed", closed))
    }
}

/// Whether a request changes something on the server.
fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// `client`, refusing every write request while `fence` is closed: the
/// request is not sent and fails with `kube::Error::Service` whose source
/// is the [`FenceClosed`](super::FenceClosed) reason. Reads (`GET`, lists,
/// watches) always go through. An unfenced fence returns `client` as is.
pub(crate) fn fenced_client(client: kube::Client, fence: LeaderFence) -> kube::Client {
    if !fence.is_elected() {
        return client;
    }
    let default_namespace = client.default_namespace().to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let refused = if is_write(request.method()) {
            fence.check().err()
        } else {
            None
        };
        async move {
            if let Some(closed) = refused {
                tracing::debug!(
                    method = %request.method(),
                    path = request.uri().path(),
                    reason = %closed,
                    "write refused by the leader fence"
                );
                return Err(kube::Error::Service(Box::new(closed)));
            }
            client.send(request).await
        }
    });
    kube::Client::new(service, default_namespace)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ctrlkit_childcontrol::{ChildControl, ChildControlError, KubeChildControl, Operation};
    use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::Api;
    use kube::api::{DeleteParams, PostParams};
    use std::sync::Arc;
    use tokio::time::Instant;

    use super::super::fence::{FenceClosed, FenceDriver};
    use super::*;

    /// Any kind the test cluster serves will do.
    fn lease(name: &str) -> Lease {
        let mut lease = Lease::default();
        lease.metadata.name = Some(name.into());
        lease
    }

    fn fence_error(error: &kube::Error) -> Option<FenceClosed> {
        match error {
            kube::Error::Service(source) => source.downcast_ref::<FenceClosed>().copied(),
            _ => None,
        }
    }

    #[tokio::test]
    async fn writes_wait_for_the_fence_and_reads_never_do() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        let driver = FenceDriver::new(Duration::from_secs(10));
        let client = fenced_client(cluster.client(), driver.fence());
        let api: Api<Lease> = Api::namespaced(client, "default");
        let pp = PostParams::default();

        // A stand-by writes nothing but reads.
        let refused = api.create(&pp, &lease("a")).await.unwrap_err();
        assert_eq!(fence_error(&refused), Some(FenceClosed::NotLeader));
        assert!(
            api.list(&Default::default())
                .await
                .unwrap()
                .items
                .is_empty()
        );

        driver.renewed(Instant::now());
        driver.start_leading();
        api.create(&pp, &lease("a")).await.unwrap();

        // Lost: deletes are refused too; the object is still there.
        driver.stop();
        let refused = api.delete("a", &DeleteParams::default()).await.unwrap_err();
        assert_eq!(fence_error(&refused), Some(FenceClosed::Stopped));
        assert!(api.get_opt("a").await.unwrap().is_some());
        let plain: Api<Lease> = Api::namespaced(cluster.client(), "default");
        assert_eq!(
            plain.list(&Default::default()).await.unwrap().items.len(),
            1
        );
    }

    #[tokio::test]
    async fn an_unfenced_client_is_the_client_itself() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        let api: Api<Lease> = Api::namespaced(
            fenced_client(cluster.client(), LeaderFence::unfenced()),
            "default",
        );
        api.create(&PostParams::default(), &lease("a"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn the_fence_is_a_child_write_gate() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        let driver = FenceDriver::new(Duration::from_secs(10));
        let control = KubeChildControl::<Lease>::new(cluster.client(), "test")
            .with_write_gate(Arc::new(driver.fence()));
        let cref = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            name: "owner".into(),
            uid: "owner-uid".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let owner = Default::default();
        let err = control
            .create("default", &lease("child"), &owner, &cref)
            .await
            .unwrap_err();
        let ChildControlError::WriteRefused(refused) = &err else {
            panic!("{err:?}");
        };
        let source = std::error::Error::source(refused).unwrap();
        assert_eq!(
            source.downcast_ref::<FenceClosed>(),
            Some(&FenceClosed::NotLeader)
        );
        let attempt = WriteAttempt {
            operation: Operation::Delete,
            kind: "Lease",
            namespace: "default",
            name: Some("child"),
        };
        driver.renewed(Instant::now());
        driver.start_leading();
        assert!(WriteGate::check(&driver.fence(), &attempt).is_ok());
        control
            .create("default", &lease("child"), &owner, &cref)
            .await
            .unwrap();
    }
}
