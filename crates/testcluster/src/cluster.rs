//! Starting, using and stopping a test cluster.

use std::sync::Arc;

use axum::serve::ListenerExt;
use http::{HeaderName, HeaderValue};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::authz::Authorization;
use crate::config::TestClusterConfig;
use crate::decode::Decoders;
use crate::error::Error;
use crate::faults::FaultInjector;
use crate::kubelet::Kubelet;
use crate::ops::Api;
use crate::server::{self, INTERNAL_HEADER, Server};
use crate::stats::{Counters, RequestStats};

/// A running in-process API server. Dropping it stops the server, the
/// garbage collector, the kubelet simulation and every open watch.
pub struct TestCluster {
    base_url: String,
    client: kube::Client,
    faults: Arc<FaultInjector>,
    kubelet: Option<Kubelet>,
    api: Arc<Api>,
    stats: Arc<Counters>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for TestCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCluster")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

fn client_for(base_url: &str, internal: bool) -> Result<kube::Client, Error> {
    let uri: http::Uri = base_url
        .parse()
        .map_err(|e| Error::Bootstrap(format!("invalid base URL {base_url}: {e}")))?;
    let mut config = kube::Config::new(uri);
    if internal {
        config.headers.push((
            HeaderName::from_static(INTERNAL_HEADER),
            HeaderValue::from_static("kubelet"),
        ));
    }
    kube::Client::try_from(config).map_err(Error::Client)
}

impl TestCluster {
    /// Start a cluster on 127.0.0.1 and wait until it accepts requests.
    /// The namespaces `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` exist from the start. Must run inside a tokio
    /// runtime (a multi-threaded one if the test blocks on other work).
    pub async fn start(config: TestClusterConfig) -> Result<TestCluster, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port.unwrap_or(0)))
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let base_url = format!("http://{addr}");
        let api =
            Arc::new(Api::new(config.watch_history).map_err(|e| Error::Bootstrap(e.to_string()))?);
        api.bootstrap().map_err(|e| Error::Bootstrap(e.message))?;
        let faults = Arc::new(FaultInjector::new(config.faults.clone(), config.seed));
        let stats = Arc::new(Counters::new());
        let state = Arc::new(Server {
            stats: stats.clone(),
            api: api.clone(),
            faults: faults.clone(),
            address: addr.to_string(),
            bookmark_interval: config.bookmark_interval,
            decoders: Decoders::default(),
            authz: Authorization::default(),
        });
        let app = axum::Router::new()
            .fallback(server::handle)
            .with_state(state);
        let listener = listener.tap_io(|tcp| {
            // Small request/response pairs must not wait for Nagle.
            let _ = tcp.set_nodelay(true);
        });
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        }));
        tasks.push(tokio::spawn(crate::gc::run(api.clone())));
        let client = client_for(&base_url, false)?;
        let kubelet = match config.kubelet {
            Some(k) => Some(Kubelet::spawn(client_for(&base_url, true)?, k)),
            None => None,
        };
        Ok(TestCluster {
            base_url,
            client,
            faults,
            kubelet,
            api,
            stats,
            tasks,
        })
    }

    /// A kube client for this cluster. Requests through it are subject to
    /// the configured faults.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The server's base URL, e.g. `http://127.0.0.1:41234`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// A kubeconfig (cluster, user and context all named `testcluster`)
    /// pointing at this cluster, without credentials.
    pub fn kubeconfig(&self) -> Kubeconfig {
        let doc = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testcluster", "cluster": {"server": self.base_url}}],
            "users": [{"name": "testcluster", "user": {}}],
            "contexts": [{"name": "testcluster", "context": {"cluster": "testcluster", "user": "testcluster", "namespace": "default"}}],
            "current-context": "testcluster",
            "preferences": {},
        });
        serde_json::from_value(doc).unwrap_or_default()
    }

    /// Write [`kubeconfig`](Self::kubeconfig) as YAML to `path`, for kubectl.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        let yaml = serde_yaml::to_string(&self.kubeconfig()).map_err(std::io::Error::other)?;
        std::fs::write(path, yaml)
    }

    /// The fault injector: change faults at runtime, read the fault log.
    pub fn faults(&self) -> &FaultInjector {
        &self.faults
    }

    /// The kubelet simulation, if configured.
    pub fn kubelet(&self) -> Option<&Kubelet> {
        self.kubelet.as_ref()
    }

    /// The requests answered so far, by verb, resource and status (see
    /// [`RequestStats`]). Cheap: counting is a relaxed atomic increment
    /// per request; the snapshot reads a few thousand counters.
    ///
    /// To measure a piece of work, snapshot before and after and take
    /// [`RequestStats::since`]; or call [`reset_requests`](Self::reset_requests) first.
    pub fn requests(&self) -> RequestStats {
        self.stats.snapshot()
    }

    /// Set every request count to zero. Requests answered while the reset
    /// runs may or may not be counted; snapshots with
    /// [`RequestStats::since`] avoid that race.
    pub fn reset_requests(&self) {
        self.stats.reset();
    }

    /// Stop the server and every background task.
    pub async fn shutdown(mut self) {
        self.stop();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        self.kubelet = None;
        self.api.close();
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        self.stop();
    }
}
