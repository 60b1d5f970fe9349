//! The HTTP endpoints a cluster expects from a controller: `/metrics` for
//! Prometheus, `/healthz` for the liveness probe, `/readyz` for the
//! readiness probe.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ops::OpsError;

/// The content type of prometheus-client's text encoding (OpenMetrics),
/// which Prometheus scrapes natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Answers "is this process ready to serve?" for `/readyz`.
///
/// A controller is ready once its informer caches have synced: before
/// that it would act on a partial view of the cluster. The check is a
/// cheap closure called on every probe.
#[derive(Clone)]
pub struct Readiness(Arc<dyn Fn() -> bool + Send + Sync>);

impl Readiness {
    /// Wraps a check, e.g. `Readiness::new(move || factory.has_synced())`.
    pub fn new(check: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(check))
    }

    /// Runs the check.
    pub fn is_ready(&self) -> bool {
        (self.0)()
    }
}

impl fmt::Debug for Readiness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Readiness").field(&self.is_ready()).finish()
    }
}

/// A running endpoint server; it stops when the shutdown token given to
/// [`serve_http`] is cancelled.
#[derive(Debug)]
pub struct HttpServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// The address actually bound (useful when port 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Waits until the server has stopped (after the token is cancelled
    /// and open connections have finished).
    pub async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// Builds the routes: `/metrics` when `registry` is given; `/healthz` and
/// `/readyz` when `readiness` is given.
///
/// - `/metrics`: every metric in the registry, in the OpenMetrics text
///   format (the workqueue's `workqueue_*` and the worker's
///   `controller_runtime_reconcile_*` families, registered into the same
///   registry by the controller).
/// - `/healthz`: `200 ok` for as long as the process serves HTTP; it says
///   nothing about the caches, so a slow initial list never gets the pod
///   killed.
/// - `/readyz`: `200 ok` once `readiness` says so, `503` before.
pub fn router(registry: Option<Arc<Registry>>, readiness: Option<Readiness>) -> Router {
    let mut router = Router::new();
    if let Some(registry) = registry {
        router = router.route("/metrics", get(metrics).with_state(registry));
    }
    if let Some(readiness) = readiness {
        router = router
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(ready).with_state(readiness));
    }
    router
}

/// Listens on `addr` (port 0 picks a free port; see
/// [`HttpServer::local_addr`]) and serves [`router`] until `shutdown` is
/// cancelled. Returns once the socket is bound, so a bind error (address
/// in use, no permission) is reported before the controller starts.
pub async fn serve_http(
    addr: SocketAddr,
    registry: Option<Arc<Registry>>,
    readiness: Option<Readiness>,
    shutdown: CancellationToken,
) -> Result<HttpServer, OpsError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| OpsError::Bind { addr, source })?;
    let local_addr = listener
        .local_addr()
        .map_err(|source| OpsError::Bind { addr, source })?;
    let app = router(registry, readiness);
    let task = tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(error) = served {
            tracing::error!(%error, "HTTP endpoint server failed");
        }
    });
    Ok(HttpServer { local_addr, task })
}

async fn metrics(State(registry): State<Arc<Registry>>) -> Response {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &registry) {
        Ok(()) => ([(header::CONTENT_TYPE, OPENMETRICS)], body).into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode metrics: {error}"),
        )
            .into_response(),
    }
}

async fn ready(State(readiness): State<Readiness>) -> Response {
    if readiness.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "informer caches not synced yet",
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response[9..12].parse().unwrap();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
        (status, body)
    }

    #[tokio::test]
    async fn serves_metrics_health_and_readiness() {
        let mut registry = Registry::default();
        let counter = Counter::<u64>::default();
        registry.register("demo_things", "things done", counter.clone());
        counter.inc();
        let synced = Arc::new(AtomicBool::new(false));
        let flag = synced.clone();
        let readiness = Readiness::new(move || flag.load(Ordering::SeqCst));
        let shutdown = CancellationToken::new();
        let server = serve_http(
            "127.0.0.1:0".parse().unwrap(),
            Some(Arc::new(registry)),
            Some(readiness),
            shutdown.clone(),
        )
        .await
        .unwrap();
        let addr = server.local_addr();
        assert_ne!(addr.port(), 0);

        assert_eq!(get(addr, "/healthz").await.0, 200);
        assert_eq!(get(addr, "/readyz").await.0, 503);
        synced.store(true, Ordering::SeqCst);
        assert_eq!(get(addr, "/readyz").await.0, 200);
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(body.contains("demo_things_total 1"), "{body}");
        assert_eq!(get(addr, "/nope").await.0, 404);

        shutdown.cancel();
        server.stopped().await;
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test]
    async fn metrics_only_server_has_no_probes() {
        let shutdown = CancellationToken::new();
        let server = serve_http(
            "127.0.0.1:0".parse().unwrap(),
            Some(Arc::new(Registry::default())),
            None,
            shutdown.clone(),
        )
        .await
        .unwrap();
        assert_eq!(get(server.local_addr(), "/metrics").await.0, 200);
        assert_eq!(get(server.local_addr(), "/healthz").await.0, 404);
        shutdown.cancel();
    }

    #[tokio::test]
    async fn bind_error_names_the_address() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let err = serve_http(addr, None, None, CancellationToken::new())
            .await
            .unwrap_err();
        assert!(err.to_string().contains(&addr.to_string()), "{err}");
    }
}
