//! Helpers shared by the manager's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ctrlkit_runtime::manager::{BoxError, FnRunnable, ManagerConfig, Runnable};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// A client that is never used: runnables in these tests do not call the
/// API server, and managers without informers or leader election do not
/// either.
pub(crate) fn offline_client() -> kube::Client {
    kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap()
}

pub(crate) fn config(name: &str) -> ManagerConfig {
    ManagerConfig::new(name)
}

/// One GET over a fresh connection: (status, body).
pub(crate) async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// Polls `check` every 20 ms (real time) for up to `limit`.
pub(crate) async fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a [`Probe`] runnable went through.
#[derive(Debug, Default)]
pub(crate) struct Trace {
    pub(crate) started: AtomicBool,
    pub(crate) cancelled: AtomicBool,
    /// Its future was dropped (finished, or aborted).
    pub(crate) dropped: AtomicBool,
    pub(crate) finished: AtomicBool,
    pub(crate) iterations: AtomicUsize,
}

impl Trace {
    pub(crate) fn started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }
    pub(crate) fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
    pub(crate) fn dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }
    pub(crate) fn finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }
}

struct DropFlag(Arc<Trace>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// A runnable that ticks every 10 ms until cancelled, then spends `drain`
/// finishing its in-flight work (ignoring further cancellation) and
/// returns `Ok`.
pub(crate) fn probe(name: &str, drain: Duration) -> (impl Runnable + use<>, Arc<Trace>) {
    probe_with(name, drain, true)
}

/// [`probe`], run on stand-bys too unless `leader_election`.
pub(crate) fn probe_with(
    name: &str,
    drain: Duration,
    leader_election: bool,
) -> (impl Runnable + use<>, Arc<Trace>) {
    let trace = Arc::new(Trace::default());
    let t = trace.clone();
    let runnable = FnRunnable::new(name, move |stop: CancellationToken| async move {
        let _dropped = DropFlag(t.clone());
        t.started.store(true, Ordering::SeqCst);
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(10)) => {
                    t.iterations.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        t.cancelled.store(true, Ordering::SeqCst);
        tokio::time::sleep(drain).await;
        t.finished.store(true, Ordering::SeqCst);
        Ok::<_, BoxError>(())
    });
    let runnable = match leader_election {
        true => runnable,
        false => runnable.without_leader_election(),
    };
    (runnable, trace)
}
