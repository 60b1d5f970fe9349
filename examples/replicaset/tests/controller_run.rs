//! `Controller::run`: waiting for the caches, syncing through the worker
//! harness with retries, and draining on shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Harness, replica_set};
use k8s_openapi::api::apps::v1::ReplicaSet;
use kube::runtime::watcher::Event;
use tokio_util::sync::CancellationToken;

#[tokio::test(start_paused = true)]
async fn failed_syncs_are_retried_with_backoff_until_they_succeed() {
    let h = Harness::<ReplicaSet>::new();
    let rs = replica_set("web", 0, "web");
    *h.client.live.lock() = Some(rs.clone());
    // Three syncs fail (each: write, fresh read, write again); the fourth
    // writes the status.
    h.client.update_failures.lock().extend([500; 6]);
    h.owners.apply_event(Event::Init);
    h.owners.apply_event(Event::InitApply(rs));
    h.owners.apply_event(Event::InitDone);
    h.pods.apply_event(Event::Init);
    h.pods.apply_event(Event::InitDone);
    assert!(h.controller.runtime().has_synced());

    let Harness {
        controller, client, ..
    } = h;
    let token = CancellationToken::new();
    let run = tokio::spawn(controller.run(token.clone()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(client.updates().len(), 7);
    assert_eq!(client.gets(), 3);
    token.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test(start_paused = true)]
async fn run_returns_when_shut_down_before_the_caches_sync() {
    let h = Harness::<ReplicaSet>::new();
    assert!(!h.controller.runtime().has_synced());
    let token = CancellationToken::new();
    token.cancel();
    h.controller.run(token).await.unwrap();
}
