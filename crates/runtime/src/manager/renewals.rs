//! Observing the leader's lease renewals, for the write fence.
//!
//! kube-lease-manager renews inside `LeaseManager::changed()`, which only
//! returns when leadership changes, so it cannot tell when a renewal
//! succeeded. The manager therefore gives it a client that watches its own
//! requests: a PATCH of our Lease that sets `spec.renewTime` and whose
//! answer names this process as the holder is a successful renewal (or
//! acquisition). A renewal patch does not carry a precondition, so a 2xx
//! alone proves nothing: after another replica took the lease, our renewal
//! still succeeds but the answer names the other holder.

use std::time::SystemTime;

use http::{Method, Request, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::client::Body;
use serde::Deserialize;
use tokio::time::Instant;

use super::fence::FenceDriver;

/// The part of a Lease patch or a Lease the tracker reads.
#[derive(Deserialize)]
struct LeaseShape {
    spec: Option<LeaseSpecShape>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LeaseSpecShape {
    holder_identity: Option<String>,
    renew_time: Option<MicroTime>,
}

/// `client`, with every successful renewal of the Lease
/// `namespace`/`name` by `identity` recorded in `driver`.
pub(crate) fn renewal_tracking_client(
    client: kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
    driver: FenceDriver,
) -> kube::Client {
    let default_namespace = client.default_namespace().to_owned();
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}");
    let identity = identity.to_owned();
    let service = tower::service_fn(move |request: Request<Body>| {
        let client = client.clone();
        let driver = driver.clone();
        let identity = identity.clone();
        let renewal = request.method() == Method::PATCH && request.uri().path() == lease_path;
        // kube's request bodies are in memory: the copy is cheap.
        let patch = renewal.then(|| request.body().try_clone()).flatten();
        async move {
            let sent_at = match patch {
                Some(patch) => renewal_sent_at(patch).await,
                None => None,
            };
            let response = client.send(request).await?;
            let Some(sent_at) = sent_at else {
                return Ok::<_, kube::Error>(response);
            };
            if !response.status().is_success() {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect_bytes().await?;
            if holder(&bytes).as_deref() == Some(identity.as_str()) {
                driver.renewed(sent_at);
            }
            Ok(Response::from_parts(parts, Body::from(bytes)))
        }
    });
    kube::Client::new(service, default_namespace)
}

/// When the renewal in `patch` counts from, if it is one (it sets
/// `spec.renewTime`): now, or the `renewTime` it carries if the wall clock
/// says that was earlier (the process may have been paused between
/// stamping the patch and sending it).
async fn renewal_sent_at(patch: Body) -> Option<Instant> {
    let now = Instant::now();
    let bytes = patch.collect_bytes().await.ok()?;
    let renew_time = serde_json::from_slice::<LeaseShape>(&bytes)
        .ok()?
        .spec?
        .renew_time?;
    let stamped = SystemTime::from(renew_time.0);
    let earlier = SystemTime::now()
        .duration_since(stamped)
        .ok()
        .and_then(|ago| now.checked_sub(ago));
    Some(earlier.map_or(now, |e| e.min(now)))
}

fn holder(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<LeaseShape>(body)
        .ok()?
        .spec?
        .holder_identity
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ctrlkit_testcluster::faults::{ErrorKind, ErrorRule, FaultConfig};
    use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::Api;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    use super::*;

    async fn lease(client: &kube::Client, name: &str) -> Api<Lease> {
        let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
        let lease: Lease = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        leases.create(&PostParams::default(), &lease).await.unwrap();
        leases
    }

    fn renew(holder: Option<&str>) -> Patch<serde_json::Value> {
        let mut spec = json!({
            "renewTime": MicroTime(k8s_openapi::jiff::Timestamp::now()),
            "leaseDurationSeconds": 15,
        });
        if let Some(holder) = holder {
            spec["holderIdentity"] = json!(holder);
        }
        Patch::Merge(json!({"spec": spec}))
    }

    #[tokio::test]
    async fn records_only_successful_renewals_that_name_us() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        let plain = lease(&cluster.client(), "l").await;
        let driver = FenceDriver::new(Duration::from_secs(10));
        driver.start_leading();
        let fence = driver.fence();
        let tracked: Api<Lease> = Api::namespaced(
            renewal_tracking_client(cluster.client(), "default", "l", "me", driver.clone()),
            "default",
        );
        let pp = PatchParams::default();

        // Someone else holds it: our renewal succeeds but proves nothing.
        plain.patch("l", &pp, &renew(Some("other"))).await.unwrap();
        tracked.patch("l", &pp, &renew(None)).await.unwrap();
        assert!(!fence.is_open());

        // A patch that does not set renewTime is not a renewal.
        plain.patch("l", &pp, &renew(Some("me"))).await.unwrap();
        let transitions = Patch::Merge(json!({"spec": {"leaseTransitions": 3}}));
        tracked.patch("l", &pp, &transitions).await.unwrap();
        assert!(!fence.is_open());

        // Reads are not renewals either; the answer still reaches the caller.
        let read = tracked.get("l").await.unwrap();
        assert_eq!(read.spec.unwrap().lease_transitions, Some(3));
        assert!(!fence.is_open());

        let renewed = tracked.patch("l", &pp, &renew(None)).await.unwrap();
        assert_eq!(renewed.spec.unwrap().holder_identity.as_deref(), Some("me"));
        assert!(fence.is_open());
    }

    #[tokio::test]
    async fn other_leases_and_failed_requests_are_not_renewals() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        lease(&cluster.client(), "mine").await;
        lease(&cluster.client(), "theirs").await;
        let driver = FenceDriver::new(Duration::from_secs(10));
        driver.start_leading();
        let client =
            renewal_tracking_client(cluster.client(), "default", "mine", "me", driver.clone());
        let tracked: Api<Lease> = Api::namespaced(client, "default");
        let pp = PatchParams::default();
        tracked
            .patch("theirs", &pp, &renew(Some("me")))
            .await
            .unwrap();
        assert!(!driver.fence().is_open());
        // Our lease, but the server fails the request.
        cluster.faults().set_config(FaultConfig::none().with_error(
            ErrorRule::verb("patch", 1.0, ErrorKind::InternalError).for_resource("leases"),
        ));
        let failed = tracked.patch("mine", &pp, &renew(Some("me"))).await;
        assert!(failed.is_err());
        assert!(!driver.fence().is_open());
        cluster.faults().clear();
        tracked
            .patch("mine", &pp, &renew(Some("me")))
            .await
            .unwrap();
        assert!(driver.fence().is_open());
    }
}
