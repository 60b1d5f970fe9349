//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::time::Duration;

/// Lets spawned tasks (the timer task, workers) run until they block again.
/// On a current-thread runtime a handful of yields is enough: each yield
/// lets every woken task run once and the timer wheel be processed.
pub async fn settle() {
    for _ in 0..8 {
        tokio::task::yield_now().await;
    }
}

/// Deadlock guard: fails the test instead of hanging forever.
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(Duration::from_secs(60), fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

pub fn s(v: &str) -> String {
    v.to_string()
}
