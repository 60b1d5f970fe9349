//! Throughput of the test cluster through kube-client. Prints JSON lines.
//!
//! `cargo bench -p ctrlkit-testcluster --bench throughput`
//! (`... --bench throughput -- WORD...` runs only the phase groups whose
//! name contains a WORD: `inproc_creates`, `inproc_watch` (raw creates,
//! watches and list, after the in-process creates), `external_creates`,
//! `echo_floor`, `custom` (custom objects: CRD install and first object,
//! creates, watches), `rbac` (creates with RBAC enforced), `memory` (RSS
//! per stored pod, ConfigMap and custom object)).
//!
//! Every line carries the CPU seconds of its phase, so figures from a
//! shared machine can be judged by rate per CPU-second too.
//!
//! Two setups:
//! - in-process: client and server share the process and its cores, as in
//!   a test, so the figures are end to end and include kube-client's own
//!   serialization;
//! - external: the `testcluster` binary serves in its own process and this
//!   process is only the client, so the server's CPU is counted apart;
//!   `echo_floor` runs the same creates against a server that does no
//!   work (this binary, as an echo server), for the floor set by the
//!   client, the HTTP stack and the kernel.
//!
//! Most create phases send bodies alike but for the name, which the
//! server creates from the first one's result; one phase per setup sends
//! bodies that each differ (`"bodies": "distinct"`), for the general path.
//!
//! The create tasks clone one `Pod` template and set the name, as a
//! controller does; building each `Pod` from a `json!` literal (as the
//! first version of this bench did) adds client work that is neither
//! kube-client's nor the server's.
#![allow(clippy::unwrap_used)]

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use futures::StreamExt;
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};
use serde_json::json;

const PODS: usize = 10_000;
const TASKS: usize = 8;
const WATCHERS: usize = 10;

fn pod_template(owner_uid: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "labels": {"app": "bench", "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "bench",
                                 "uid": owner_uid, "controller": true}]
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                 "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    }))
    .unwrap()
}

/// (resident set bytes, CPU seconds) of a process (`self` or a pid).
fn proc_usage(pid: &str) -> (u64, f64) {
    let statm = std::fs::read_to_string(format!("/proc/{pid}/statm")).unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map_or(0.0, |f| {
        f.iter().filter_map(|x| x.parse::<f64>().ok()).sum()
    });
    (pages * 4096, ticks / 100.0)
}

fn rss_bytes() -> u64 {
    proc_usage("self").0
}

/// CPU time (user + system) this process has used so far, in seconds.
fn cpu_seconds() -> f64 {
    proc_usage("self").1
}

/// How the create tasks reach the server.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Clients {
    /// One `kube::Client` cloned into every task (one request queue and
    /// one connection pool).
    Shared,
    /// A `kube::Client` of its own per task.
    PerTask,
}

impl Clients {
    fn label(self) -> &'static str {
        match self {
            Clients::Shared => "shared",
            Clients::PerTask => "per_task",
        }
    }
}

/// What the create request bodies share.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bodies {
    /// One template, bodies alike but for the name: a controller's pods.
    /// The server creates all but the first from the first's result.
    Template,
    /// Each body also carries an annotation of its own, so every create
    /// takes the server's general path (parse, default, validate,
    /// serialize).
    Distinct,
}

impl Bodies {
    fn label(self) -> &'static str {
        match self {
            Bodies::Template => "template",
            Bodies::Distinct => "distinct",
        }
    }
}

fn new_client(base_url: &str) -> Client {
    Client::try_from(kube::Config::new(base_url.parse().unwrap())).unwrap()
}

/// Create `PODS` pods named `{prefix}-{i}` in `ns` from `TASKS` tasks.
async fn create_pods(
    client: &Client,
    base_url: &str,
    (clients, bodies): (Clients, Bodies),
    ns: &str,
    prefix: &str,
) {
    // The pods are owned by a real ReplicaSet, so the garbage collector
    // leaves them alone (it deletes pods whose owners do not exist).
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "spec": {"replicas": PODS, "selector": {"matchLabels": {"app": "bench"}},
                 "template": {"metadata": {"labels": {"app": "bench"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}}}
    }))
    .unwrap();
    let rs = Api::<ReplicaSet>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap();
    let template = pod_template(&rs.metadata.uid.unwrap());
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let client = match clients {
            Clients::Shared => client.clone(),
            Clients::PerTask => new_client(base_url),
        };
        let api = Api::<Pod>::namespaced(client, ns);
        let prefix = prefix.to_string();
        let template = template.clone();
        handles.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(TASKS) {
                let mut pod = template.clone();
                pod.metadata.name = Some(format!("{prefix}-{i}"));
                if bodies == Bodies::Distinct {
                    pod.metadata.annotations =
                        Some([("bench/index".to_string(), i.to_string())].into());
                }
                api.create(&PostParams::default(), &pod).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

/// Create `PODS` pods over raw HTTP from `TASKS` tasks: bodies serialized
/// up front and responses not decoded, so this is mostly the server's cost.
async fn create_pods_raw(client: &Client, ns: &str, prefix: &str) {
    let template = pod_template("none");
    let bodies: Vec<Vec<u8>> = (0..PODS)
        .map(|i| {
            let mut p = template.clone();
            p.metadata.name = Some(format!("{prefix}-{i}"));
            p.metadata.owner_references = None;
            serde_json::to_vec(&p).unwrap()
        })
        .collect();
    let path = format!("/api/v1/namespaces/{ns}/pods");
    send_raw(client, http::StatusCode::CREATED, move |i| {
        http::Request::post(path.as_str())
            .header("content-type", "application/json")
            .body(kube::client::Body::from(bodies[i].clone()))
            .unwrap()
    })
    .await;
}

/// Send `PODS` raw requests from `TASKS` tasks, request `i` made by
/// `request(i)` and answered with `expect`; the answers are read, not
/// decoded.
async fn send_raw<F>(client: &Client, expect: http::StatusCode, request: F)
where
    F: Fn(usize) -> http::Request<kube::client::Body> + Send + Sync + 'static,
{
    let request = Arc::new(request);
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let client = client.clone();
        let request = request.clone();
        handles.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(TASKS) {
                let resp = client.send(request(i)).await.unwrap();
                assert_eq!(resp.status(), expect);
                resp.into_body().collect().await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

/// Count watch frames on a raw HTTP watch until `want` were received.
async fn raw_watch(client: Client, path: String, want: usize) {
    let req = http::Request::get(path)
        .body(kube::client::Body::empty())
        .unwrap();
    let resp = client.send(req).await.unwrap();
    let mut body = resp.into_body();
    let mut seen = 0;
    while seen < want {
        let frame = body.frame().await.unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            seen += data.iter().filter(|b| **b == b'\n').count();
        }
    }
}

/// Wall-clock and CPU seconds of one phase, of this process and of the
/// external server process if there is one.
struct Phase {
    wall: Instant,
    cpu: f64,
    server: Option<(String, f64)>,
}

impl Phase {
    fn start(server_pid: Option<u32>) -> Phase {
        let server = server_pid.map(|p| {
            let pid = p.to_string();
            let cpu = proc_usage(&pid).1;
            (pid, cpu)
        });
        Phase {
            wall: Instant::now(),
            cpu: cpu_seconds(),
            server,
        }
    }

    /// (wall seconds, this process's CPU seconds, the server process's CPU
    /// seconds if external) since the start.
    fn end(&self) -> (f64, f64, Option<f64>) {
        let server = self
            .server
            .as_ref()
            .map(|(pid, cpu)| proc_usage(pid).1 - cpu);
        (
            self.wall.elapsed().as_secs_f64(),
            cpu_seconds() - self.cpu,
            server,
        )
    }
}

async fn namespace(client: &Client, ns: &str) -> String {
    let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &n)
        .await
        .unwrap();
    Api::<Pod>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[allow(clippy::too_many_arguments)]
fn create_line(
    bench: &str,
    setup: &str,
    (clients, bodies): (Clients, Bodies),
    stored: usize,
    watchers: &str,
    (wall, cpu, server): (f64, f64, Option<f64>),
) {
    let mut line = json!({"bench": bench, "setup": setup, "clients": clients.label(),
        "bodies": bodies.label(), "tasks": TASKS,
        "pods": PODS, "stored_before": stored, "watchers": watchers,
        "creates_per_sec": (PODS as f64 / wall).round()});
    match server {
        None => {
            line["process_cpu_sec"] = json!(round2(cpu));
            line["creates_per_process_cpu_sec"] = json!((PODS as f64 / cpu).round());
        }
        Some(server) => {
            line["client_cpu_sec"] = json!(round2(cpu));
            line["server_cpu_sec"] = json!(round2(server));
            line["server_cpu_us_per_create"] = json!((server * 1e6 / PODS as f64).round());
            line["client_cpu_us_per_create"] = json!((cpu * 1e6 / PODS as f64).round());
        }
    }
    println!("{line}");
}

/// Creates with `WATCHERS` live watchers on the namespace, raw HTTP
/// (`raw`) or kube-client; prints the create and delivery rates.
async fn create_with_watchers(
    client: &Client,
    url: &str,
    ns: &str,
    prefix: &str,
    raw: bool,
    stored: usize,
) {
    let rv = namespace(client, ns).await;
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        if raw {
            let path = format!("/api/v1/namespaces/{ns}/pods?watch=true&resourceVersion={rv}");
            watchers.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
            continue;
        }
        let api = Api::<Pod>::namespaced(client.clone(), ns);
        let stream = api
            .watch(&WatchParams::default().disable_bookmarks(), &rv)
            .await
            .unwrap();
        let delivered = delivered.clone();
        watchers.push(tokio::spawn(async move {
            let mut stream = stream.boxed();
            let mut seen = 0;
            while seen < PODS {
                if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                    seen += 1;
                    delivered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let phase = Phase::start(None);
    create_pods(client, url, (Clients::Shared, Bodies::Template), ns, prefix).await;
    let creates = phase.end();
    for w in watchers {
        tokio::time::timeout(Duration::from_secs(300), w)
            .await
            .unwrap()
            .unwrap();
    }
    let (wall, cpu, _) = phase.end();
    let kind = if raw { "raw_http" } else { "kube_client" };
    create_line(
        "create_pods",
        "in_process",
        (Clients::Shared, Bodies::Template),
        stored,
        &format!("{WATCHERS} {kind}"),
        creates,
    );
    println!(
        "{}",
        json!({"bench": format!("watch_live_{kind}"), "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "process_cpu_sec": round2(cpu),
               "note": "bounded by the concurrent create rate (the process CPU includes the creates)"})
    );
}

/// Phase groups selected on the command line (all when none is named).
struct Selection(Vec<String>);

impl Selection {
    fn from_args() -> Selection {
        Selection(
            std::env::args()
                .skip(1)
                .filter(|a| !a.starts_with("--"))
                .collect(),
        )
    }

    fn wants(&self, group: &str) -> bool {
        self.0.is_empty() || self.0.iter().any(|w| group.contains(w.as_str()))
    }
}

/// The `testcluster` binary serving in a child process.
struct External {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl External {
    /// The `testcluster` binary.
    fn start() -> External {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        // CTRLKIT_TESTCLUSTER_BIN runs another build of the server (to
        // compare two versions with the same client).
        let bin = std::env::var_os("CTRLKIT_TESTCLUSTER_BIN")
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_testcluster").into());
        let mut command = std::process::Command::new(bin);
        command
            .arg("--kubeconfig-out")
            .arg(&kubeconfig)
            .args(["--no-kubelet", "--watch-history", &(4 * PODS).to_string()])
            .args(
                std::env::var("CTRLKIT_TESTCLUSTER_MANAGED_FIELDS")
                    .is_ok_and(|v| v == "off")
                    .then_some("--no-managed-fields"),
            )
            .env("RUST_LOG", "warn");
        External::spawn(command, dir)
    }

    /// This bench binary as an [`echo_server`].
    fn echo() -> External {
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command.env(ECHO_SERVER, "1");
        External::spawn(command, tempfile::tempdir().unwrap())
    }

    fn spawn(mut command: std::process::Command, dir: tempfile::TempDir) -> External {
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("ready"), "unexpected first line: {line:?}");
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap()
            .to_string();
        External {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for External {
    fn drop(&mut self) {
        // SIGTERM first: the server shuts down gracefully (and a profiler
        // wrapping it through CTRLKIT_TESTCLUSTER_BIN writes its output).
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..300 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Set in the environment of this bench binary to make it an
/// [`echo_server`] instead.
const ECHO_SERVER: &str = "CTRLKIT_BENCH_ECHO_SERVER";

/// The cheapest server kube-client can create pods against: one HTTP
/// server on the same stack as the test cluster's (axum, hyper, tokio)
/// that answers a create with its own request body (with a uid, which the
/// bench reads from the ReplicaSet) and a list with an empty one. What the
/// test cluster costs beyond it is its own work.
fn echo_server() {
    use axum::body::Bytes;
    use axum::http::{StatusCode, Uri, header};
    use axum::response::{IntoResponse, Response};

    async fn create(uri: Uri, body: Bytes) -> Response {
        let json = [(header::CONTENT_TYPE, "application/json")];
        if uri.path().ends_with("/pods") {
            return (StatusCode::CREATED, json, body).into_response();
        }
        let mut object: serde_json::Value = serde_json::from_slice(&body).unwrap();
        object["metadata"]["uid"] = json!("00000000-0000-4000-8000-000000000000");
        (StatusCode::CREATED, json, object.to_string()).into_response()
    }
    async fn list() -> Response {
        let empty =
            r#"{"apiVersion":"v1","kind":"List","metadata":{"resourceVersion":"1"},"items":[]}"#;
        ([(header::CONTENT_TYPE, "application/json")], empty).into_response()
    }

    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        println!("ready http://{}", listener.local_addr().unwrap());
        let app = axum::Router::new().fallback(axum::routing::post(create).get(list));
        axum::serve(listener, app).await.unwrap();
    });
}

/// Creates against the `testcluster` binary in a child process: into an
/// empty store, then with `PODS` pods stored, for each client setup.
async fn external_creates() {
    let server = External::start();
    let pid = Some(server.child.id());
    let client = new_client(&server.url);
    let mut stored = 0;
    for (i, clients) in [Clients::Shared, Clients::PerTask].into_iter().enumerate() {
        for round in 0..2 {
            let ns = format!("ext-{i}-{round}");
            namespace(&client, &ns).await;
            let phase = Phase::start(pid);
            create_pods(&client, &server.url, (clients, Bodies::Template), &ns, "e").await;
            create_line(
                "create_pods",
                "external",
                (clients, Bodies::Template),
                stored,
                "none",
                phase.end(),
            );
            stored += PODS;
        }
    }
    let (rss, _) = proc_usage(&server.child.id().to_string());
    // Measured after the RSS: the annotations make these pods larger.
    let ns = "ext-distinct";
    namespace(&client, ns).await;
    let phase = Phase::start(pid);
    let setup = (Clients::Shared, Bodies::Distinct);
    create_pods(&client, &server.url, setup, ns, "e").await;
    create_line(
        "create_pods",
        "external",
        setup,
        stored,
        "none",
        phase.end(),
    );
    println!(
        "{}",
        json!({"bench": "memory_per_stored_pod", "setup": "external", "rss_bytes_per_pod": rss / stored as u64,
               "note": "server process RSS over the pods stored (includes a history entry per create and the idle process)"})
    );
}

/// The same creates against an [`echo_server`], for the floor any server
/// on this machine and stack has: the client's work and the kernel's.
async fn echo_floor() {
    let server = External::echo();
    let client = new_client(&server.url);
    for round in 0..2 {
        let ns = format!("echo-{round}");
        namespace(&client, &ns).await;
        let phase = Phase::start(Some(server.child.id()));
        create_pods(
            &client,
            &server.url,
            (Clients::Shared, Bodies::Template),
            &ns,
            "e",
        )
        .await;
        create_line(
            "create_pods",
            "echo_server",
            (Clients::Shared, Bodies::Template),
            0,
            "none",
            phase.end(),
        );
    }
}

async fn in_process(sel: &Selection) {
    // CTRLKIT_TESTCLUSTER_MANAGED_FIELDS=off measures objects without
    // managedFields (the shape before the cluster kept them).
    let managed = std::env::var("CTRLKIT_TESTCLUSTER_MANAGED_FIELDS").map_or(true, |v| v != "off");
    let config = TestClusterConfig::default()
        .with_watch_history(8 * PODS)
        .with_managed_fields(managed);
    let cluster = TestCluster::start(config).await.unwrap();
    let client = cluster.client();
    let url = cluster.base_url().to_string();
    let start_rv = namespace(&client, "bench-a").await;
    let pods_a = Api::<Pod>::namespaced(client.clone(), "bench-a");

    // 1. Creates into an empty store.
    let rss_before = rss_bytes();
    let phase = Phase::start(None);
    create_pods(
        &client,
        &url,
        (Clients::Shared, Bodies::Template),
        "bench-a",
        "p",
    )
    .await;
    create_line(
        "create_pods",
        "in_process",
        (Clients::Shared, Bodies::Template),
        0,
        "none",
        phase.end(),
    );
    let rss_after = rss_bytes();
    println!(
        "{}",
        json!({"bench": "memory_per_stored_pod", "setup": "in_process", "rss_delta_bytes_per_pod": (rss_after.saturating_sub(rss_before)) / PODS as u64,
               "note": "process RSS delta over 10,000 creates; includes the watch history entry per create and client-side garbage"})
    );

    // 2. The target: creates with 10,000 pods stored, with one shared
    // client and with a client per task.
    let mut stored = PODS;
    for (i, clients) in [Clients::Shared, Clients::PerTask].into_iter().enumerate() {
        let ns = format!("bench-b{i}");
        namespace(&client, &ns).await;
        let phase = Phase::start(None);
        create_pods(&client, &url, (clients, Bodies::Template), &ns, "q").await;
        create_line(
            "create_pods",
            "in_process",
            (clients, Bodies::Template),
            stored,
            "none",
            phase.end(),
        );
        stored += PODS;
    }
    // The general path: every body different.
    namespace(&client, "bench-distinct").await;
    let phase = Phase::start(None);
    let setup = (Clients::Shared, Bodies::Distinct);
    create_pods(&client, &url, setup, "bench-distinct", "d").await;
    create_line(
        "create_pods",
        "in_process",
        setup,
        stored,
        "none",
        phase.end(),
    );
    stored += PODS;
    if !sel.wants("inproc_watch") {
        cluster.shutdown().await;
        return;
    }

    // 3. The same over raw HTTP (no client-side serde): the server's rate.
    namespace(&client, "bench-raw").await;
    let phase = Phase::start(None);
    create_pods_raw(&client, "bench-raw", "r").await;
    create_line(
        "create_pods_raw_http",
        "in_process",
        (Clients::Shared, Bodies::Template),
        stored,
        "none",
        phase.end(),
    );
    stored += PODS;

    // 4. Live watch delivery while creating: raw HTTP watchers (the
    // server's cost), then kube-client watchers (which decode every
    // event into a Pod in this process).
    create_with_watchers(&client, &url, "bench-c", "s", true, stored).await;
    create_with_watchers(&client, &url, "bench-d", "t", false, stored + PODS).await;

    // 5. Replay delivery: 10 watchers replay 10,000 kept events each.
    let phase = Phase::start(None);
    let mut handles = Vec::new();
    for _ in 0..WATCHERS {
        let api = Api::<Pod>::namespaced(client.clone(), "bench-a");
        let rv = start_rv.clone();
        handles.push(tokio::spawn(async move {
            let mut stream = api
                .watch(&WatchParams::default().disable_bookmarks(), &rv)
                .await
                .unwrap()
                .boxed();
            let mut seen = 0;
            while seen < PODS {
                if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                    seen += 1;
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let (wall, cpu, _) = phase.end();
    println!(
        "{}",
        json!({"bench": "watch_replay_kube_client", "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
    );

    // 6. The same replay over raw HTTP (frames counted, not decoded): the server's delivery rate.
    let phase = Phase::start(None);
    let mut handles = Vec::new();
    for _ in 0..WATCHERS {
        let path = format!("/api/v1/namespaces/bench-a/pods?watch=true&resourceVersion={start_rv}");
        handles.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
    }
    for h in handles {
        h.await.unwrap();
    }
    let (wall, cpu, _) = phase.end();
    println!(
        "{}",
        json!({"bench": "watch_replay_raw_http", "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
    );

    // 7. A full list of 10,000 pods.
    let start = Instant::now();
    let list = pods_a.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), PODS);
    println!(
        "{}",
        json!({"bench": "list_10000_pods_kube_client", "millis": start.elapsed().as_millis()})
    );

    // Every request succeeded; requests by verb.
    let stats = cluster.requests();
    assert_eq!(stats.total().failed(), 0, "failed requests:\n{stats}");
    let by_verb: serde_json::Map<String, serde_json::Value> = stats
        .by_verb()
        .into_iter()
        .map(|(verb, c)| (verb.to_string(), json!(c.total())))
        .collect();
    println!(
        "{}",
        json!({"bench": "requests", "by_verb": by_verb, "failed": 0})
    );
    cluster.shutdown().await;
}

/// The CronTab CRD of the Kubernetes docs (schema with a pattern, bounds
/// and a default; status and scale subresources; printer columns), in
/// `group`.
fn crontab_crd(group: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("crontabs.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "required": ["cronSpec"], "properties": {
                        "cronSpec": {"type": "string", "pattern": "^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$"},
                        "image": {"type": "string"},
                        "replicas": {"type": "integer", "minimum": 0, "maximum": 100, "default": 1},
                    }},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                }}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                "additionalPrinterColumns": [{"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"}],
            }],
        },
    })
}

fn crontabs(client: &Client, group: &str, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(group, "v1", "CronTab");
    Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "crontabs"),
    )
}

fn crontab(group: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "CronTab",
        "metadata": {"labels": {"app": "bench"}},
        "spec": {"cronSpec": "*/5 * * * *", "image": "registry.example/cron:1.0", "replicas": 2},
    }))
    .unwrap()
}

/// Create `PODS` custom objects named `{prefix}-{i}` in `ns` from `TASKS`
/// tasks sharing `client`.
async fn create_custom(client: &Client, group: &str, ns: &str, prefix: &str, bodies: Bodies) {
    let template = crontab(group);
    let mut handles = Vec::new();
    for t in 0..TASKS {
        let api = crontabs(client, group, ns);
        let prefix = prefix.to_string();
        let template = template.clone();
        handles.push(tokio::spawn(async move {
            for i in (t..PODS).step_by(TASKS) {
                let mut o = template.clone();
                o.metadata.name = Some(format!("{prefix}-{i}"));
                if bodies == Bodies::Distinct {
                    o.metadata.annotations =
                        Some([("bench/index".to_string(), i.to_string())].into());
                }
                api.create(&PostParams::default(), &o).await.unwrap();
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
}

/// Custom objects: CRD install + first object latency, creates with
/// 10,000 stored, watch replay to 10 watchers.
async fn custom_resources() {
    let cluster = TestCluster::start(TestClusterConfig::default().with_watch_history(8 * PODS))
        .await
        .unwrap();
    let client = cluster.client();
    let crds = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    // 1. POST a CRD, then POST its first object, through kube-client.
    let mut latencies = Vec::new();
    for i in 0..20 {
        let group = format!("g{i}.bench.example.com");
        let crd: DynamicObject = serde_json::from_value(crontab_crd(&group)).unwrap();
        let mut first = crontab(&group);
        first.metadata.name = Some("first".into());
        let start = Instant::now();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        crontabs(&client, &group, "default")
            .create(&PostParams::default(), &first)
            .await
            .unwrap();
        latencies.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({"bench": "crd_install_and_first_object", "runs": latencies.len(),
               "median_ms": round2(latencies[latencies.len() / 2]), "min_ms": round2(latencies[0]),
               "max_ms": round2(latencies[latencies.len() - 1]),
               "note": "kube-client POST of the CRD then POST of its first custom object, in process"})
    );

    let group = "stable.bench.example.com";
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(crontab_crd(group)).unwrap(),
    )
    .await
    .unwrap();
    let start_rv = namespace(&client, "cr-a").await;
    let setup = (Clients::Shared, Bodies::Template);
    // 2. Creates into an empty table, then with 10,000 stored, then
    // distinct bodies (schema default, prune and validation each time).
    let phase = Phase::start(None);
    create_custom(&client, group, "cr-a", "c", Bodies::Template).await;
    custom_line(setup, 0, phase.end());
    namespace(&client, "cr-b").await;
    let phase = Phase::start(None);
    create_custom(&client, group, "cr-b", "c", Bodies::Template).await;
    custom_line(setup, PODS, phase.end());
    namespace(&client, "cr-c").await;
    let phase = Phase::start(None);
    create_custom(&client, group, "cr-c", "c", Bodies::Distinct).await;
    custom_line((Clients::Shared, Bodies::Distinct), 2 * PODS, phase.end());

    // 3. 10 kube-client watchers replay 10,000 events each (decoded as
    // DynamicObjects), then the same over raw HTTP.
    let phase = Phase::start(None);
    let mut handles = Vec::new();
    for _ in 0..WATCHERS {
        let api = crontabs(&client, group, "cr-a");
        let rv = start_rv.clone();
        handles.push(tokio::spawn(async move {
            let mut stream = api
                .watch(&WatchParams::default().disable_bookmarks(), &rv)
                .await
                .unwrap()
                .boxed();
            let mut seen = 0;
            while seen < PODS {
                if let Some(Ok(WatchEvent::Added(_))) = stream.next().await {
                    seen += 1;
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let (wall, cpu, _) = phase.end();
    println!(
        "{}",
        json!({"bench": "watch_replay_kube_client", "objects": "custom", "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
    );
    let phase = Phase::start(None);
    let mut handles = Vec::new();
    for _ in 0..WATCHERS {
        let path = format!(
            "/apis/{group}/v1/namespaces/cr-a/crontabs?watch=true&resourceVersion={start_rv}"
        );
        handles.push(tokio::spawn(raw_watch(client.clone(), path, PODS)));
    }
    for h in handles {
        h.await.unwrap();
    }
    let (wall, cpu, _) = phase.end();
    println!(
        "{}",
        json!({"bench": "watch_replay_raw_http", "objects": "custom", "watchers": WATCHERS, "events": WATCHERS * PODS,
               "events_per_sec": ((WATCHERS * PODS) as f64 / wall).round(), "events_per_process_cpu_sec": ((WATCHERS * PODS) as f64 / cpu).round()})
    );
    let stats = cluster.requests();
    assert_eq!(stats.total().failed(), 0, "failed requests:\n{stats}");
    cluster.shutdown().await;
}

fn custom_line(
    (clients, bodies): (Clients, Bodies),
    stored: usize,
    (wall, cpu, _): (f64, f64, Option<f64>),
) {
    println!(
        "{}",
        json!({"bench": "create_custom_objects", "setup": "in_process", "clients": clients.label(),
               "bodies": bodies.label(), "tasks": TASKS, "objects": PODS, "stored_before": stored,
               "creates_per_sec": (PODS as f64 / wall).round(), "process_cpu_sec": round2(cpu),
               "creates_per_process_cpu_sec": (PODS as f64 / cpu).round()})
    );
}

/// Creates with RBAC enforced (HTTPS, every request authenticated and
/// authorized): as the admin (`system:masters`) and as a ServiceAccount
/// whose ClusterRoleBinding the policy evaluates, 10,000 pods stored.
async fn rbac_creates() {
    let cluster = TestCluster::start(
        TestClusterConfig::default()
            .with_rbac(true)
            .with_watch_history(4 * PODS),
    )
    .await
    .unwrap();
    let admin = cluster.client();
    cluster
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: bench}\n\
             rules: [{apiGroups: ['', apps], resources: [pods, replicasets, namespaces], verbs: ['*']}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: bench}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: bench}\n\
             subjects: [{kind: ServiceAccount, name: bench, namespace: default}]\n",
        )
        .unwrap();
    let sa = cluster
        .client_for_service_account("default", "bench")
        .unwrap();
    let url = cluster.base_url().to_string();
    let setup = (Clients::Shared, Bodies::Template);
    for (i, (who, client)) in [
        ("admin", &admin),
        ("admin", &admin),
        ("service_account", &sa),
    ]
    .into_iter()
    .enumerate()
    {
        let ns = format!("rbac-{i}");
        namespace(&admin, &ns).await;
        let phase = Phase::start(None);
        create_pods(client, &url, setup, &ns, "p").await;
        create_line(
            "create_pods",
            &format!("in_process_rbac_https_{who}"),
            setup,
            i * PODS,
            "none",
            phase.end(),
        );
    }
    let stats = cluster.requests();
    assert_eq!(stats.total().failed(), 0, "failed requests:\n{stats}");
    cluster.shutdown().await;
}

/// The status a kubelet reports for pod `i` at `stage` 0 (admitted,
/// containers being created), 1 (running, not ready) or 2 (ready), as a
/// merge patch of `pods/status`: the shape of the test cluster's kubelet
/// simulation.
fn kubelet_status_patch(i: usize, stage: usize) -> Vec<u8> {
    let t0 = "2026-01-01T00:00:00Z";
    let t1 = "2026-01-01T00:00:01Z";
    let ready = stage == 2;
    let running = stage >= 1;
    let cond = |type_: &str, ok: bool, at: &str| {
        let mut c = json!({"type": type_, "status": if ok { "True" } else { "False" },
                           "lastProbeTime": null, "lastTransitionTime": at});
        if !ok {
            c["reason"] = json!("ContainersNotReady");
            c["message"] = json!("containers with unready status: [app]");
        }
        c
    };
    let state = if running {
        json!({"running": {"startedAt": t1}})
    } else {
        json!({"waiting": {"reason": "ContainerCreating"}})
    };
    let mut container = json!({"name": "app", "image": "registry.example/app:1.0",
        "imageID": "sim://registry.example/app:1.0", "ready": ready, "started": running,
        "restartCount": 0, "state": state, "lastState": {}});
    let ip = format!("10.0.{}.{}", i / 250, i % 250 + 1);
    let mut status = json!({
        "phase": if running { "Running" } else { "Pending" },
        "conditions": [cond("PodScheduled", true, t0), cond("Initialized", true, t0),
                       cond("ContainersReady", ready, t1), cond("Ready", ready, t1)],
        "containerStatuses": [],
        "hostIP": "192.168.0.1", "hostIPs": [{"ip": "192.168.0.1"}],
        "startTime": t0, "qosClass": "BestEffort",
    });
    if running {
        container["containerID"] = json!(format!("sim://p-{i}-0"));
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    status["containerStatuses"] = json!([container]);
    serde_json::to_vec(&json!({"status": status})).unwrap()
}

/// A kubelet's status patches: `PODS` pods created, then each reported
/// admitted, running and ready (three merge patches of `pods/status`, one
/// stage at a time over `TASKS` tasks), raw HTTP with bodies built up
/// front, so the figure is mostly the server's cost.
async fn status_patches() {
    let cluster = TestCluster::start(TestClusterConfig::default().with_watch_history(4 * PODS))
        .await
        .unwrap();
    let client = cluster.client();
    let ns = "status";
    namespace(&client, ns).await;
    create_pods_raw(&client, ns, "p").await;
    for (stage, label) in ["admitted", "running", "ready"].into_iter().enumerate() {
        let bodies: Vec<Vec<u8>> = (0..PODS).map(|i| kubelet_status_patch(i, stage)).collect();
        let phase = Phase::start(None);
        send_raw(&client, http::StatusCode::OK, move |i| {
            http::Request::patch(format!("/api/v1/namespaces/{ns}/pods/p-{i}/status"))
                .header("content-type", "application/merge-patch+json")
                .body(kube::client::Body::from(bodies[i].clone()))
                .unwrap()
        })
        .await;
        let (wall, cpu, _) = phase.end();
        println!(
            "{}",
            json!({"bench": "status_patches", "setup": "in_process", "stage": label,
                   "tasks": TASKS, "pods": PODS,
                   "patches_per_sec": (PODS as f64 / wall).round(),
                   "process_cpu_sec": round2(cpu),
                   "process_cpu_us_per_patch": (cpu * 1e6 / PODS as f64).round()})
        );
    }
    cluster.shutdown().await;
}

/// The resident memory each stored object adds, for 10,000 ConfigMaps,
/// custom objects and pods created in turn in one cluster (no deletes, so
/// no freed memory is reused between them), and the size of each object's
/// JSON as a list serves it.
async fn memory() {
    let cluster = TestCluster::start(TestClusterConfig::default().with_watch_history(PODS))
        .await
        .unwrap();
    let client = cluster.client();
    let group = "mem.bench.example.com";
    cluster.install_crd_value(crontab_crd(group)).unwrap();
    for kind in ["configmap", "custom", "pod"] {
        let ns = format!("mem-{kind}");
        namespace(&client, &ns).await;
        let before = rss_bytes();
        let json_bytes = match kind {
            "configmap" => {
                let cm: ConfigMap = serde_json::from_value(json!({
                    "metadata": {"labels": {"app": "bench"}},
                    "data": {"config.yaml": "mode: fast\nreplicas: 3\n", "index.html": "<h1>hello</h1>"},
                }))
                .unwrap();
                let api = Api::<ConfigMap>::namespaced(client.clone(), &ns);
                let mut handles = Vec::new();
                for t in 0..TASKS {
                    let (api, cm) = (api.clone(), cm.clone());
                    handles.push(tokio::spawn(async move {
                        for i in (t..PODS).step_by(TASKS) {
                            let mut c = cm.clone();
                            c.metadata.name = Some(format!("cm-{i}"));
                            api.create(&PostParams::default(), &c).await.unwrap();
                        }
                    }));
                }
                for h in handles {
                    h.await.unwrap();
                }
                list_bytes(&client, &format!("/api/v1/namespaces/{ns}/configmaps")).await
            }
            "custom" => {
                create_custom(&client, group, &ns, "c", Bodies::Template).await;
                list_bytes(
                    &client,
                    &format!("/apis/{group}/v1/namespaces/{ns}/crontabs"),
                )
                .await
            }
            _ => {
                create_pods(
                    &client,
                    cluster.base_url(),
                    (Clients::Shared, Bodies::Template),
                    &ns,
                    "p",
                )
                .await;
                list_bytes(&client, &format!("/api/v1/namespaces/{ns}/pods")).await
            }
        };
        let after = rss_bytes();
        println!(
            "{}",
            json!({"bench": "memory_per_stored_object", "kind": kind, "objects": PODS,
                   "rss_delta_bytes_per_object": after.saturating_sub(before) / PODS as u64,
                   "json_bytes_per_object": json_bytes / PODS,
                   "note": "process RSS delta (object, serialized form, watch history entry, client-side garbage)"})
        );
    }
    cluster.shutdown().await;
}

/// The total size of the items of a list.
async fn list_bytes(client: &Client, path: &str) -> usize {
    let list: serde_json::Value = client
        .request(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.to_string().len())
        .sum()
}

fn main() {
    if std::env::var_os(ECHO_SERVER).is_some() {
        return echo_server();
    }
    let sel = Selection::from_args();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // The external server first, while this process is fresh: run
        // after the in-process phases (60,000 pods dropped, watchers
        // winding down), the first external phase measured twice the
        // client CPU per create.
        if sel.wants("external_creates") {
            external_creates().await;
        }
        if sel.wants("echo_floor") {
            echo_floor().await;
        }
        if sel.wants("inproc_creates") || sel.wants("inproc_watch") {
            in_process(&sel).await;
        }
        if sel.wants("custom") {
            custom_resources().await;
        }
        if sel.wants("rbac") {
            rbac_creates().await;
        }
        if sel.wants("memory") {
            memory().await;
        }
        if sel.wants("status_patches") {
            status_patches().await;
        }
    });
}
