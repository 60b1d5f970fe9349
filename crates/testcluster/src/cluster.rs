//! Starting, using and stopping a test cluster.

use std::sync::Arc;

use axum::serve::ListenerExt;
use http::{HeaderName, HeaderValue};
use kube::config::Kubeconfig;
use serde_json::json;

use crate::authz::{Authorization, RbacAuthorizer};
use crate::config::TestClusterConfig;
use crate::decode::Decoders;
use crate::error::Error;
use crate::faults::FaultInjector;
use crate::kubelet::Kubelet;
use crate::ops::{Api, WriteCtx};
use crate::patch::PatchKind;
use crate::rbac::{SYSTEM_MASTERS, TokenRegistry};
use crate::semantics::Part;
use crate::server::{self, INTERNAL_HEADER, Server};
use crate::stats::{Counters, RequestStats};
use crate::store::{Limits, MAX_OBJECT_BYTES, WatchHistory};
use crate::tls::ClusterCerts;

/// The user of the cluster's own client and kubeconfig (in
/// `system:masters`), named as kind and kubeadm name their admin.
pub const ADMIN_USER: &str = "kubernetes-admin";

/// The user of the kubelet simulation's requests (in `system:masters`).
const KUBELET_USER: &str = "ctrlkit:kubelet-simulation";

/// A running in-process API server. Dropping it stops the server, the
/// garbage collector, the kubelet simulation and every open watch.
pub struct TestCluster {
    base_url: String,
    client: kube::Client,
    tokens: Arc<TokenRegistry>,
    /// The bearer token of [`ADMIN_USER`].
    admin_token: String,
    rbac: bool,
    /// The bearer token of the kubelet simulation.
    kubelet_token: String,
    /// The certificate authority and serving certificate of a cluster
    /// serving HTTPS.
    certs: Option<Arc<ClusterCerts>>,
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

/// Who a cluster is to its clients: its certificates (when it serves
/// HTTPS) and the tokens it accepts. Kept across [`TestCluster::restart`].
struct Identity {
    certs: Option<Arc<ClusterCerts>>,
    tokens: Arc<TokenRegistry>,
    admin_token: String,
    kubelet_token: String,
}

impl Identity {
    /// New tokens for the admin and the kubelet simulation, and, for a
    /// cluster that authenticates requests, new certificates: it serves
    /// HTTPS, as kubectl sends tokens only over TLS.
    fn new(rbac: bool) -> Result<Identity, Error> {
        let certs = if rbac {
            Some(Arc::new(ClusterCerts::generate()?))
        } else {
            None
        };
        let tokens = Arc::new(TokenRegistry::new());
        let admin_token = tokens.issue(ADMIN_USER, &[SYSTEM_MASTERS]);
        let kubelet_token = tokens.issue(KUBELET_USER, &[SYSTEM_MASTERS]);
        Ok(Identity {
            certs,
            tokens,
            admin_token,
            kubelet_token,
        })
    }
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

/// A kube client for the cluster at `base_url` (trusting `ca`, DER, when
/// it serves HTTPS) authenticating with `token`; `internal` marks the
/// cluster's own components' requests.
fn client_for(
    base_url: &str,
    ca: Option<&[u8]>,
    internal: bool,
    token: &str,
) -> Result<kube::Client, Error> {
    kube::Client::try_from(config_for(base_url, ca, internal, token)?).map_err(Error::Client)
}

/// The configuration [`client_for`] builds its client from.
fn config_for(
    base_url: &str,
    ca: Option<&[u8]>,
    internal: bool,
    token: &str,
) -> Result<kube::Config, Error> {
    let uri: http::Uri = base_url
        .parse()
        .map_err(|e| Error::Bootstrap(format!("invalid base URL {base_url}: {e}")))?;
    let mut config = kube::Config::new(uri);
    config.root_cert = ca.map(|der| vec![der.to_vec()]);
    if internal {
        config.headers.push((
            HeaderName::from_static(INTERNAL_HEADER),
            HeaderValue::from_static("kubelet"),
        ));
    }
    let bearer = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|e| Error::Bootstrap(format!("invalid token: {e}")))?;
    config.headers.push((http::header::AUTHORIZATION, bearer));
    Ok(config)
}

impl TestCluster {
    /// Start a cluster on 127.0.0.1 and wait until it accepts requests.
    /// The namespaces `default`, `kube-system`, `kube-public` and
    /// `kube-node-lease` exist from the start. Must run inside a tokio
    /// runtime (a multi-threaded one if the test blocks on other work).
    pub async fn start(config: TestClusterConfig) -> Result<TestCluster, Error> {
        Self::start_as(config, None).await
    }

    /// [`start`](Self::start), keeping the identity (certificates and
    /// tokens) of a cluster that ran before, if any.
    async fn start_as(
        config: TestClusterConfig,
        identity: Option<Identity>,
    ) -> Result<TestCluster, Error> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", config.port.unwrap_or(0)))
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let identity = match identity {
            Some(identity) => identity,
            None => Identity::new(config.rbac)?,
        };
        let Identity {
            certs,
            tokens,
            admin_token,
            kubelet_token,
        } = identity;
        let scheme = if certs.is_some() { "https" } else { "http" };
        let base_url = format!("{scheme}://{addr}");
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
        let authz = Authorization::new(tokens.clone());
        if config.rbac {
            api.bootstrap_rbac()
                .map_err(|e| Error::Bootstrap(e.message))?;
            authz.set(Arc::new(RbacAuthorizer::new(api.clone())));
        }
        let decoders = Decoders::default();
        decoders.add(Arc::new(crate::protobuf::ProtobufBodies));
        let faults = Arc::new(FaultInjector::new(config.faults.clone(), config.seed));
        let stats = Arc::new(Counters::new());
        let state = Arc::new(Server {
            stats: stats.clone(),
            api: api.clone(),
            faults: faults.clone(),
            address: addr.to_string(),
            bookmark_interval: config.bookmark_interval,
            sharded_list_and_watch: config.sharded_list_and_watch,
            decoders,
            authz,
        });
        let app = axum::Router::new()
            .fallback(server::handle)
            .with_state(state);
        // When the API closes, the server stops accepting, ends every
        // idle keep-alive connection and each busy one after its request
        // (open watches end with the API), so that no client keeps talking
        // to a stopped cluster, and the port is free again.
        let mut closed = api.closed();
        let stop = async move {
            let _ = closed.wait_for(|c| *c).await;
        };
        let mut tasks = Vec::new();
        let server = match &certs {
            Some(certs) => {
                let (listener, accepting) =
                    crate::tls::TlsListener::spawn(listener, certs.server.clone())
                        .map_err(Error::Bind)?;
                tasks.push(accepting);
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(stop)
                        .await;
                })
            }
            None => {
                let listener = listener.tap_io(|tcp| {
                    // Small request/response pairs must not wait for Nagle.
                    let _ = tcp.set_nodelay(true);
                });
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app)
                        .with_graceful_shutdown(stop)
                        .await;
                })
            }
        };
        tasks.push(tokio::spawn(crate::gc::run(api.clone())));
        let ca_der = certs.as_ref().map(|c| c.ca_der.as_slice());
        let client = client_for(&base_url, ca_der, false, &admin_token)?;
        let kubelet = match &config.kubelet {
            Some(k) if k.dedicated_thread => Some(
                Kubelet::spawn_dedicated(
                    config_for(&base_url, ca_der, true, &kubelet_token)?,
                    k.clone(),
                    config.clock.clone(),
                )
                .await
                .map_err(Error::Kubelet)?,
            ),
            Some(k) => Some(Kubelet::spawn_with_clock(
                client_for(&base_url, ca_der, true, &kubelet_token)?,
                k.clone(),
                config.clock.clone(),
            )),
            None => None,
        };
        Ok(TestCluster {
            base_url,
            client,
            tokens,
            admin_token,
            kubelet_token,
            rbac: config.rbac,
            certs,
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
    /// The certificates and the tokens issued stay as they were (as
    /// kube-apiserver's serving certificate and token files do), so that
    /// clients and kubeconfigs of an RBAC-enforcing cluster stay valid.
    ///
    /// Fails with [`Error::Bind`] if another process took the port in
    /// between.
    pub async fn restart(self) -> Result<TestCluster, Error> {
        let config = self.config.clone().with_port(self.port);
        let identity = Identity {
            certs: self.certs.clone(),
            tokens: self.tokens.clone(),
            admin_token: self.admin_token.clone(),
            kubelet_token: self.kubelet_token.clone(),
        };
        self.shutdown().await;
        TestCluster::start_as(config, Some(identity)).await
    }

    /// A kube client for this cluster, as the admin ([`ADMIN_USER`], in
    /// `system:masters`, allowed everything with or without RBAC).
    /// Requests through it are subject to the configured faults.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Whether RBAC is enforced ([`TestClusterConfig::with_rbac`]).
    pub fn rbac_enabled(&self) -> bool {
        self.rbac
    }

    /// A new bearer token for user `name` in `groups` (plus
    /// `system:authenticated`). With RBAC on, what it may do is what the
    /// Roles and bindings stored in the cluster grant that user or its
    /// groups (`system:masters` may do everything).
    pub fn token_for_user(&self, name: &str, groups: &[&str]) -> String {
        self.tokens.issue(name, groups)
    }

    /// A new bearer token for the ServiceAccount `namespace/name`: user
    /// `system:serviceaccount:<namespace>:<name>`, in
    /// `system:serviceaccounts`, `system:serviceaccounts:<namespace>` and
    /// `system:authenticated`, as kube-apiserver authenticates a
    /// ServiceAccount token. The ServiceAccount object need not exist.
    pub fn token_for_service_account(&self, namespace: &str, name: &str) -> String {
        self.tokens.issue_service_account(namespace, name)
    }

    /// A kube client authenticating as user `name` in `groups` (see
    /// [`token_for_user`](Self::token_for_user)).
    pub fn client_for_user(&self, name: &str, groups: &[&str]) -> Result<kube::Client, Error> {
        client_for(
            &self.base_url,
            self.ca_der(),
            false,
            &self.token_for_user(name, groups),
        )
    }

    fn ca_der(&self) -> Option<&[u8]> {
        self.certs.as_ref().map(|c| c.ca_der.as_slice())
    }

    /// The certificate authority (PEM) whose serving certificate the
    /// cluster presents, when it serves HTTPS (with RBAC on).
    pub fn certificate_authority(&self) -> Option<&str> {
        self.certs.as_ref().map(|c| c.ca_pem.as_str())
    }

    /// A kube client authenticating as the ServiceAccount
    /// `namespace/name` (see
    /// [`token_for_service_account`](Self::token_for_service_account)):
    /// run a controller under its `deploy/*/rbac.yaml` with it.
    pub fn client_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<kube::Client, Error> {
        client_for(
            &self.base_url,
            self.ca_der(),
            false,
            &self.token_for_service_account(namespace, name),
        )
    }

    fn kubeconfig_with(&self, user: &str, token: &str) -> Kubeconfig {
        use base64::Engine as _;
        let mut cluster = json!({"server": self.base_url});
        if let Some(pem) = self.certificate_authority() {
            cluster["certificate-authority-data"] =
                json!(base64::engine::general_purpose::STANDARD.encode(pem));
        }
        let doc = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "testcluster", "cluster": cluster}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "testcluster", "context": {"cluster": "testcluster", "user": user, "namespace": "default"}}],
            "current-context": "testcluster",
            "preferences": {},
        });
        serde_json::from_value(doc).unwrap_or_default()
    }

    /// A kubeconfig for user `name` in `groups`, with a new token.
    pub fn kubeconfig_for_user(&self, name: &str, groups: &[&str]) -> Kubeconfig {
        self.kubeconfig_with(name, &self.token_for_user(name, groups))
    }

    /// A kubeconfig for the ServiceAccount `namespace/name`, with a new
    /// token (for a controller binary run under its RBAC).
    pub fn kubeconfig_for_service_account(&self, namespace: &str, name: &str) -> Kubeconfig {
        let user = crate::rbac::service_account_username(namespace, name);
        self.kubeconfig_with(&user, &self.token_for_service_account(namespace, name))
    }

    /// Write [`kubeconfig_for_user`](Self::kubeconfig_for_user) as YAML to `path`.
    pub fn write_kubeconfig_for_user(
        &self,
        path: &std::path::Path,
        name: &str,
        groups: &[&str],
    ) -> std::io::Result<()> {
        write_yaml(path, &self.kubeconfig_for_user(name, groups))
    }

    /// Write [`kubeconfig_for_service_account`](Self::kubeconfig_for_service_account)
    /// as YAML to `path`.
    pub fn write_kubeconfig_for_service_account(
        &self,
        path: &std::path::Path,
        namespace: &str,
        name: &str,
    ) -> std::io::Result<()> {
        write_yaml(path, &self.kubeconfig_for_service_account(namespace, name))
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

    /// A kubeconfig (cluster and context named `testcluster`, namespace
    /// `default`) pointing at this cluster as the admin
    /// ([`ADMIN_USER`], `system:masters`, with its bearer token).
    pub fn kubeconfig(&self) -> Kubeconfig {
        self.kubeconfig_with(ADMIN_USER, &self.admin_token)
    }

    /// Write [`kubeconfig`](Self::kubeconfig) as YAML to `path`, for kubectl.
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        write_yaml(path, &self.kubeconfig())
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

    /// Install the CustomResourceDefinition of `T` (its
    /// [`CustomResourceExt::crd`](kube::CustomResourceExt::crd), as
    /// `#[derive(CustomResource)]` generates it) and return it once it is
    /// `Established`: its custom objects can be created right away.
    /// Installing it again applies changes (a new version, a schema
    /// change) the same way.
    pub fn install_crd<T: kube::CustomResourceExt>(&self) -> Result<serde_json::Value, Error> {
        let crd = serde_json::to_value(T::crd()).map_err(|e| Error::Manifest {
            document: 0,
            reason: format!("the CustomResourceDefinition does not serialize: {e}"),
        })?;
        self.install_crd_value(crd)
    }

    /// [`install_crd`](Self::install_crd) of every CustomResourceDefinition
    /// in a YAML stream (other documents are an error); returns them in
    /// order.
    pub fn install_crd_yaml(&self, yaml: &str) -> Result<Vec<serde_json::Value>, Error> {
        use serde::Deserialize;
        let mut installed = Vec::new();
        for (document, doc) in serde_yaml::Deserializer::from_str(yaml).enumerate() {
            let value = serde_json::Value::deserialize(doc)
                .map_err(|source| Error::Yaml { document, source })?;
            if value.is_null() {
                continue;
            }
            if value.get("kind").and_then(serde_json::Value::as_str) != Some(crate::crd::CRD_KIND) {
                return Err(Error::Manifest {
                    document,
                    reason: "not a CustomResourceDefinition".into(),
                });
            }
            installed.push(self.install_crd_at(document, value)?);
        }
        Ok(installed)
    }

    /// [`install_crd`](Self::install_crd) of a CustomResourceDefinition
    /// given as JSON.
    pub fn install_crd_value(&self, crd: serde_json::Value) -> Result<serde_json::Value, Error> {
        self.install_crd_at(0, crd)
    }

    fn install_crd_at(
        &self,
        document: usize,
        crd: serde_json::Value,
    ) -> Result<serde_json::Value, Error> {
        let applied = self.apply_object(document, crd)?;
        let name = applied
            .pointer("/metadata/name")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string();
        // The definition is served (or refused) within the write that
        // stored it; its status says which.
        let key = (String::new(), name.clone());
        let stored = self
            .api
            .store
            .get(self.api.crds.definitions(), &key)
            .map(|s| s.value())
            .ok_or_else(|| Error::Manifest {
                document,
                reason: format!("CustomResourceDefinition {name} is gone"),
            })?;
        let condition = |kind: &str| {
            stored
                .pointer("/status/conditions")
                .and_then(serde_json::Value::as_array)
                .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
                .cloned()
        };
        match condition("Established") {
            Some(c) if c["status"] == "True" => Ok(stored),
            other => {
                let cause = condition("NamesAccepted")
                    .filter(|c| c["status"] != "True")
                    .or(other)
                    .unwrap_or_default();
                let text = |k: &str| {
                    cause
                        .get(k)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                Err(Error::NotEstablished {
                    name,
                    reason: text("reason"),
                    message: text("message"),
                })
            }
        }
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
    /// kubelet simulation has stopped and the server has closed its
    /// connections and its port (open requests get a few seconds to
    /// finish).
    pub async fn shutdown(mut self) {
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.shutdown().await;
        }
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

fn write_yaml(path: &std::path::Path, kubeconfig: &Kubeconfig) -> std::io::Result<()> {
    let yaml = serde_yaml::to_string(kubeconfig).map_err(std::io::Error::other)?;
    std::fs::write(path, yaml)
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
