//! The HTTP endpoints a cluster expects from a controller: `/metrics` for
//! Prometheus, `/healthz` for the liveness probe, `/readyz` for the
//! readiness probe.

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
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

use super::error::ManagerError;
use super::metrics_auth::MetricsAuthFilter;
use super::metrics_tls::TlsListener;
use super::status::{Endpoints, ManagerStatus};

/// The content type of prometheus-client's text encoding (OpenMetrics),
/// which Prometheus scrapes natively.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running endpoint server; it stops when its shutdown token is
/// cancelled.
#[derive(Debug)]
pub(crate) struct HttpServer {
    local_addr: SocketAddr,
    task: JoinHandle<()>,
}

impl HttpServer {
    /// Waits until the server has stopped (after the token is cancelled
    /// and open connections have finished).
    pub(crate) async fn stopped(self) {
        let _ = self.task.await;
    }
}

/// `/metrics` over HTTPS with authentication and authorization.
pub(crate) struct SecureMetrics {
    pub(crate) tls: Arc<ServerConfig>,
    pub(crate) filter: Arc<MetricsAuthFilter>,
}

/// Binds the metrics and health servers (one server when the addresses
/// are equal and metrics are plain), logs the bound addresses and
/// publishes them in `status`. Returns once every socket is bound, so a
/// bind error (address in use, no permission) is reported before anything
/// else starts.
pub(crate) async fn start(
    metrics_addr: Option<SocketAddr>,
    health_addr: Option<SocketAddr>,
    registry: Arc<Registry>,
    secure: Option<SecureMetrics>,
    status: &ManagerStatus,
    stop: &CancellationToken,
) -> Result<Vec<HttpServer>, ManagerError> {
    let mut servers = Vec::new();
    let mut bound = Endpoints {
        metrics: None,
        health: None,
    };
    match (metrics_addr, health_addr) {
        (Some(m), Some(h)) if m == h && secure.is_none() => {
            let app = router(Some(registry), Some(status.clone()));
            let server = serve(m, app, None, stop).await?;
            tracing::info!(addr = %server.local_addr, "serving /metrics, /healthz and /readyz");
            bound.metrics = Some(server.local_addr);
            bound.health = Some(server.local_addr);
            servers.push(server);
        }
        (metrics, health) => {
            if let Some(addr) = metrics {
                let mut app = router(Some(registry), None);
                let tls = match secure {
                    Some(secure) => {
                        app = secure.filter.protect(app);
                        Some(secure.tls)
                    }
                    None => None,
                };
                let https = tls.is_some();
                let server = serve(addr, app, tls, stop).await?;
                match https {
                    true => {
                        tracing::info!(addr = %server.local_addr, "serving /metrics over HTTPS to authorized scrapers")
                    }
                    false => tracing::info!(addr = %server.local_addr, "serving /metrics"),
                }
                bound.metrics = Some(server.local_addr);
                servers.push(server);
            }
            if let Some(addr) = health {
                let server = serve(addr, router(None, Some(status.clone())), None, stop).await?;
                tracing::info!(addr = %server.local_addr, "serving /healthz and /readyz");
                bound.health = Some(server.local_addr);
                servers.push(server);
            }
        }
    }
    status.set_endpoints(bound);
    Ok(servers)
}

/// `/metrics` when `registry` is given; `/healthz` and `/readyz` when
/// `status` is given.
///
/// - `/metrics`: every metric in the registry, OpenMetrics text.
/// - `/healthz`: `200 ok` for as long as the process serves HTTP; it says
///   nothing about caches or leadership, so a slow initial list or a
///   stand-by never gets the pod restarted.
/// - `/readyz`: `200 ok` when [`ManagerStatus::readiness`] says so, `503`
///   with the reason otherwise.
fn router(registry: Option<Arc<Registry>>, status: Option<ManagerStatus>) -> Router {
    let mut router = Router::new();
    if let Some(registry) = registry {
        router = router.route("/metrics", get(metrics).with_state(registry));
    }
    if let Some(status) = status {
        router = router
            .route("/healthz", get(|| async { "ok" }))
            .route("/readyz", get(ready).with_state(status));
    }
    router
}

/// Serves `app` on `addr`, over TLS with `tls`.
async fn serve(
    addr: SocketAddr,
    app: Router,
    tls: Option<Arc<ServerConfig>>,
    stop: &CancellationToken,
) -> Result<HttpServer, ManagerError> {
    let bind_error = |source| ManagerError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let local_addr = listener.local_addr().map_err(bind_error)?;
    let stop = stop.clone();
    let task = match tls {
        None => tokio::spawn(run(listener, app, stop)),
        Some(tls) => {
            let listener = TlsListener::new(listener, tls).map_err(bind_error)?;
            tokio::spawn(run(listener, app, stop))
        }
    };
    Ok(HttpServer { local_addr, task })
}

async fn run<L>(listener: L, app: Router, stop: CancellationToken)
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { stop.cancelled().await })
        .await;
    if let Err(error) = served {
        tracing::error!(%error, "HTTP endpoint server failed");
    }
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

async fn ready(State(status): State<ManagerStatus>) -> Response {
    let readiness = status.readiness();
    let code = match readiness.is_ready() {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    (code, readiness.to_string()).into_response()
}
