//! kube-lease-manager (server-side apply plus strategic merge on Leases)
//! works against the test cluster: two managers, one holder at a time.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use kube_lease_manager::LeaseManagerBuilder;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_lease_manager_holds_the_lease() {
    let cluster = start().await;
    let client = cluster.client();
    let a = LeaseManagerBuilder::new(client.clone(), "leader")
        .with_identity("a")
        .with_duration(5)
        .with_grace(1)
        .build()
        .await
        .unwrap();
    let b = LeaseManagerBuilder::new(client.clone(), "leader")
        .with_identity("b")
        .with_duration(5)
        .with_grace(1)
        .build()
        .await
        .unwrap();
    let guard = Duration::from_secs(30);
    let a_locked = tokio::time::timeout(guard, a.changed())
        .await
        .unwrap()
        .unwrap();
    assert!(a_locked, "the first manager takes the free lease");
    // b cannot take it while a holds it: its change() does not resolve
    // to "locked" while a keeps renewing.
    let b_attempt = tokio::time::timeout(Duration::from_millis(500), b.changed()).await;
    assert!(
        !matches!(b_attempt, Ok(Ok(true))),
        "b must not hold the lease while a does"
    );
    a.release().await.unwrap();
    let b_locked = tokio::time::timeout(guard, async {
        loop {
            if b.changed().await.unwrap() {
                return true;
            }
        }
    })
    .await
    .unwrap();
    assert!(b_locked, "b takes the lease after a released it");
}
