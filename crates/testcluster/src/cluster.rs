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
use crate::ops::{Api, WriteCtx};
use crate::patch::PatchKind;
use crate::semantics::Part;
use crate::server::{self, INTERNAL_HEADER, Server};
use crate::stats::{Counters, RequestStats};
use crate::store::{Limits, MAX_OBJECT_BYTES, WatchHistory};

/// A running in-process API server. Dropping it stops the server, the
/// garbage collector, the kubelet simulation and every open watch.
pub struct TestCluster {
    base_url: String,
    client: kube::Client,
    faults: Arc<FaultInjector>,
    kubelet: Option<Kubelet>,
    api: Arc<Api>,
    stats: Arc<Counters>,
    /// What the cluster was started with, for [`TestCluster::restart`].
    config: TestClusterConfig,
    port: u16,
    /// The HTTP server; it stops gracefully when the API closes.
    server: Option<tokio::task::JoinHandle<()>>,
    /// The other background tasks (garbage collector).
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// How long [`TestCluster::shutdown`] waits for open connections to finish
/// their requests before it drops them.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

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
        let limits = Limits {
            history_events: config.watch_history,
            history_bytes: config.watch_history_bytes,
            max_object_bytes: MAX_OBJECT_BYTES,
        };
        let api = Arc::new(
            Api::new(limits, config.clock.clone(), config.managed_fields)
                .map_err(|e| Error::Bootstrap(e.to_string()))?,
        );
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
        // When the API closes, the server stops accepting, ends every
        // idle keep-alive connection and each busy one after its request
        // (open watches end with the API), so that no client keeps talking
        // to a stopped cluster, and the port is free again.
        let mut closed = api.closed();
        let server = tokio::spawn(async move {
            let stop = async move {
                let _ = closed.wait_for(|c| *c).await;
            };
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop)
                .await;
        });
        let tasks = vec![tokio::spawn(crate::gc::run(api.clone()))];
        let client = client_for(&base_url, false)?;
        let kubelet = match &config.kubelet {
            Some(k) => Some(Kubelet::spawn_with_clock(
                client_for(&base_url, true)?,
                k.clone(),
                config.clock.clone(),
            )),
            None => None,
        };
        Ok(TestCluster {
            base_url,
            client,
            faults,
            kubelet,
            api,
            stats,
            port: addr.port(),
            config,
            server: Some(server),
            tasks,
        })
    }

    /// Stop this cluster and start a new one with the same configuration
    /// on the same port: as when kube-apiserver restarts on an emptied
    /// etcd, every object is gone and resourceVersions start again from
    /// the beginning (lower than the ones clients saw). Clients made with
    /// [`client`](Self::client) before keep working: their connections
    /// were closed, and they reconnect to the new server. A watch resumed
    /// from a version the new cluster has not reached gets kube-apiserver's
    /// `504` "Too large resource version" `ERROR` event.
    ///
    /// Fails with [`Error::Bind`] if another process took the port in
    /// between.
    pub async fn restart(self) -> Result<TestCluster, Error> {
        let config = self.config.clone().with_port(self.port);
        self.shutdown().await;
        TestCluster::start(config).await
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

    /// The TCP port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The watch history's size: events kept, the bytes they hold on to
    /// (bounded by [`TestClusterConfig::watch_history_bytes`]), the oldest
    /// version a watch can resume from and the current resourceVersion.
    pub fn watch_history(&self) -> WatchHistory {
        self.api.store.history()
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

    /// Apply every object of a multi-document YAML stream (`---`
    /// separated; `kind: List` documents apply their items) as
    /// `kubectl apply --server-side --force-conflicts` would, with the
    /// field manager `testcluster-apply`, through the same machinery as API
    /// requests (validation, defaulting, watches, quota). Objects without
    /// a namespace go to `default`. Returns the applied objects as the API
    /// serves them. Stops at the first document that fails; the ones
    /// before it stay applied.
    pub fn apply_yaml(&self, yaml: &str) -> Result<Vec<serde_json::Value>, Error> {
        use serde::Deserialize;
        let mut applied = Vec::new();
        for (document, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
            let value = serde_json::Value::deserialize(doc)
                .map_err(|source| Error::Yaml { document, source })?;
            if value.is_null() {
                continue;
            }
            let is_list = value
                .get("kind")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|k| k.ends_with("List"))
                && value.get("items").is_some_and(serde_json::Value::is_array);
            let objects = match value {
                serde_json::Value::Object(mut m) if is_list => match m.remove("items") {
                    Some(serde_json::Value::Array(items)) => items,
                    _ => Vec::new(),
                },
                other => vec![other],
            };
            for object in objects {
                applied.push(self.apply_object(document, object)?);
            }
        }
        Ok(applied)
    }

    /// [`apply_yaml`](Self::apply_yaml) of a file's contents.
    pub fn apply_yaml_file(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Vec<serde_json::Value>, Error> {
        let path = path.as_ref();
        let yaml = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        self.apply_yaml(&yaml)
    }

    fn apply_object(
        &self,
        document: usize,
        object: serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        let manifest = |reason: String| Error::Manifest { document, reason };
        let field = |path: &[&str]| {
            path.iter()
                .try_fold(&object, |v, k| v.get(*k))
                .and_then(serde_json::Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let (api_version, kind) = (field(&["apiVersion"]), field(&["kind"]));
        if api_version.is_empty() || kind.is_empty() {
            return Err(manifest("apiVersion and kind are required".into()));
        }
        let def = self
            .api
            .registry
            .snapshot()
            .by_kind(&api_version, &kind)
            .cloned()
            .ok_or_else(|| {
                manifest(format!(
                    "the cluster does not serve {kind} in {api_version}"
                ))
            })?;
        let name = field(&["metadata", "name"]);
        if name.is_empty() {
            return Err(manifest(format!("{kind}: metadata.name is required")));
        }
        let namespace = match field(&["metadata", "namespace"]) {
            ns if !def.namespaced => ns,
            ns if ns.is_empty() => "default".to_string(),
            ns => ns,
        };
        let body = serde_json::to_vec(&object).map_err(|e| manifest(e.to_string()))?;
        let ctx = WriteCtx::new("testcluster-apply", false);
        let stored = self
            .api
            .patch(
                &def,
                &namespace,
                &name,
                Part::Main,
                PatchKind::Apply,
                &body,
                true,
                ctx,
            )
            .map_err(|e| Error::Rejected {
                document,
                code: e.code,
                reason: e.reason.to_string(),
                message: e.message,
            })?;
        Ok(def.to_view(stored.value()))
    }

    /// Stop the server and every background task; returns once the
    /// server has closed its connections and its port (open requests get
    /// a few seconds to finish).
    pub async fn shutdown(mut self) {
        self.stop();
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        if let Some(mut server) = self.server.take()
            && tokio::time::timeout(SHUTDOWN_GRACE, &mut server)
                .await
                .is_err()
        {
            server.abort();
            let _ = server.await;
        }
    }

    /// Close the API (which ends open watches and starts the server's
    /// graceful stop) and stop the other tasks.
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
        // The server task finishes on its own once its connections close.
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ResourceDef;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};

    /// A type registered while the cluster runs is served at once by the
    /// generic machinery: CRUD, lists, discovery, Table output, quota.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_type_registered_at_runtime_is_served() {
        let cluster = TestCluster::start(TestClusterConfig::default())
            .await
            .unwrap();
        let gvk = GroupVersionKind::gvk("example.com", "v1", "Widget");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "widgets");
        let widgets = kube::Api::<DynamicObject>::namespaced_with(cluster.client(), "default", &ar);
        assert!(
            widgets.list(&ListParams::default()).await.is_err(),
            "not served yet"
        );

        let def = ResourceDef::new("example.com", "v1", "widgets", "widget", "Widget", true)
            .short_names(&["wd"])
            .categories(&["all"])
            .with_status()
            .with_generation();
        cluster.api.registry.register(def, None).unwrap();

        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1"}, "spec": {"size": 3}
        }))
        .unwrap();
        let created = widgets.create(&PostParams::default(), &obj).await.unwrap();
        assert_eq!(created.metadata.generation, Some(1));
        assert_eq!(
            widgets
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len(),
            1
        );
        let discovery = kube::discovery::Discovery::new(cluster.client())
            .run()
            .await
            .unwrap();
        assert!(discovery.resolve_gvk(&gvk).is_some());
        let doc: serde_json::Value = cluster
            .client()
            .request(
                http::Request::get("/apis/example.com/v1")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(doc["resources"][0]["shortNames"], json!(["wd"]));
        assert_eq!(doc["resources"][1]["name"], "widgets/status");
        // Quota counts it as count/widgets.example.com.
        cluster
            .apply_yaml("apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: q\nspec:\n  hard:\n    count/widgets.example.com: \"1\"\n")
            .unwrap();
        let mut second = obj.clone();
        second.metadata.name = Some("w2".into());
        let err = widgets
            .create(&PostParams::default(), &second)
            .await
            .unwrap_err();
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 403),
            "{err}"
        );

        // Unregistered, it is a 404 path again; the id is not reused.
        cluster.api.registry.unregister(created_id(&cluster));
        assert!(widgets.list(&ListParams::default()).await.is_err());
        cluster.shutdown().await;
    }

    fn created_id(cluster: &TestCluster) -> crate::resources::ResourceId {
        cluster
            .api
            .registry
            .snapshot()
            .lookup("example.com", "v1", "widgets")
            .map(|d| d.id)
            .unwrap()
    }
}
