//! Helpers for tests that run the controller binaries as child processes
//! against an in-process test cluster.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Deadlock guard for anything that should happen "soon"; generous for a
/// loaded 2-core machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A cluster with a kubelet and its kubeconfig written to a temp file.
pub struct Cluster {
    pub cluster: TestCluster,
    pub kubeconfig: tempfile::NamedTempFile,
}

impl Cluster {
    /// Pod creates and deletes the API server answered with success since
    /// `before`.
    pub fn pod_writes(&self, before: &ctrlkit_testcluster::RequestStats) -> (u64, u64) {
        let since = self.cluster.requests().since(before);
        (
            since.count("create", "pods").success,
            since.count("delete", "pods").success,
        )
    }

    pub async fn start() -> Self {
        let cluster = TestCluster::start(
            TestClusterConfig::default().with_kubelet(KubeletConfig::with_nodes(1, 110)),
        )
        .await
        .unwrap();
        let kubeconfig = tempfile::NamedTempFile::new().unwrap();
        cluster.write_kubeconfig(kubeconfig.path()).unwrap();
        Self {
            cluster,
            kubeconfig,
        }
    }

    pub fn client(&self) -> kube::Client {
        self.cluster.client()
    }
}

/// A running controller binary; killed on drop if still running.
pub struct Process {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The thread collecting stderr; done once the process exited and its
    /// last line was read.
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Process {
    /// Starts `bin` with `args`; stderr (the logs) is collected line by
    /// line and echoed with a prefix, so a failing test shows them.
    pub fn spawn(name: &str, bin: &str, args: &[&str]) -> Self {
        let mut child = Command::new(bin)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let prefix = name.to_string();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{prefix}] {line}");
                sink.lock().unwrap().push(line);
            }
        });
        Self {
            name: name.to_string(),
            child,
            lines,
            reader: Some(reader),
        }
    }

    pub fn logs(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub fn logged(&self, needle: &str) -> Option<String> {
        self.logs().into_iter().find(|l| l.contains(needle))
    }

    /// Waits for a log line containing `needle`.
    pub async fn wait_for_log(&self, needle: &str) -> String {
        eventually(&format!("{}: log line {needle:?}", self.name), || async {
            self.logged(needle)
        })
        .await
    }

    /// The address of the endpoints (metrics and health on one server,
    /// as the tests pass the same `127.0.0.1:0` for both).
    pub async fn endpoint(&self) -> SocketAddr {
        let line = self
            .wait_for_log("serving /metrics, /healthz and /readyz")
            .await;
        field(&line, "addr").parse().unwrap()
    }

    pub fn sigterm(&self) {
        self.signal("TERM");
    }

    /// Sends `signal` (`"KILL"`, `"STOP"`, `"CONT"`, …) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit and for its last log line to be
    /// collected (a process that fails at start exits before the reader
    /// has read what it wrote).
    pub async fn wait_exit(&mut self) -> ExitStatus {
        let name = self.name.clone();
        let child = &mut self.child;
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                if let Some(reader) = self.reader.take() {
                    tokio::task::spawn_blocking(move || reader.join())
                        .await
                        .unwrap()
                        .unwrap();
                }
                return status;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{name} did not exit within {PATIENCE:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The value of `key=value` in a tracing log line.
pub fn field(line: &str, key: &str) -> String {
    let start = line
        .find(&format!("{key}="))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        + key.len()
        + 1;
    line[start..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_matches('"')
        .to_string()
}

/// Polls `check` until it returns `Some`, panicking after [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `GET path` over plain HTTP/1.1: (status, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Sum of the samples of a metric family in a text exposition.
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub fn replicasets(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&()),
    )
}

pub fn pods(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
    )
}

/// Creates a ReplicaSet selecting `app=<name>` (JSON, so the test builds
/// against every supported API version). Returns its UID.
pub async fn create_replicaset(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> String {
    let rs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap();
    let created = replicasets(client, namespace)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    created.metadata.uid.unwrap()
}

/// Waits until `replicas` active pods carry a controller reference to the
/// ReplicaSet and its status reports them all ready.
pub async fn wait_converged(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    uid: &str,
    replicas: usize,
) {
    let rs_api = replicasets(client, namespace);
    let pod_api = pods(client, namespace);
    eventually(
        &format!("rs/{name} to have {replicas} ready pods"),
        || async {
            let owned = pod_api
                .list(&ListParams::default().labels(&format!("app={name}")))
                .await
                .ok()?
                .items
                .into_iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| {
                    p.metadata
                        .owner_references
                        .iter()
                        .flatten()
                        .any(|r| r.controller == Some(true) && r.uid == uid)
                })
                .count();
            let rs = rs_api.get(name).await.ok()?;
            let ready = rs
                .data
                .pointer("/status/readyReplicas")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            (owned == replicas && ready == replicas as u64).then_some(())
        },
    )
    .await;
}

/// Sets `spec.replicas` of the ReplicaSet `name`.
pub async fn scale_replicaset(client: &kube::Client, namespace: &str, name: &str, replicas: i32) {
    replicasets(client, namespace)
        .patch(
            name,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

/// The number of pods that exist for `app=<name>`.
pub async fn pod_count(client: &kube::Client, namespace: &str, name: &str) -> usize {
    pods(client, namespace)
        .list(&ListParams::default().labels(&format!("app={name}")))
        .await
        .unwrap()
        .items
        .len()
}
