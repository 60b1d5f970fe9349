//! Scale-out from zero: the `replicaset-controller` binary converging many
//! ReplicaSets on an in-process test cluster with the kubelet simulation.
//!
//! 1. Start a [`TestCluster`] with enough simulated node capacity for every
//!    pod and short kubelet delays; write its kubeconfig to a temp file.
//! 2. Spawn the built controller binary against it and wait until its
//!    informer caches synced.
//! 3. Create `CTRLKIT_BENCH_RS` ReplicaSets (default 1,000) of
//!    `CTRLKIT_BENCH_REPLICAS` replicas (default 10) from 8 concurrent
//!    tasks, and follow them with one watch until every ReplicaSet reports
//!    all its replicas ready.
//! 4. Report (one JSON line) the wall time from the first create to
//!    convergence, the API requests of the controller by verb and resource
//!    (the cluster's request statistics minus the benchmark's own creates
//!    and watch; the kubelet simulation's requests are counted apart by the
//!    cluster), failed requests, status writes per ReplicaSet against the
//!    status changes the watch saw, and the controller's peak RSS (VmHWM)
//!    read from /proc before it is stopped with SIGTERM, and how much of it
//!    is the pages of its executable file (`controller_binary_rss_mib`,
//!    from /proc's smaps: its code and read-only data, a fixed cost of
//!    every process).
//!
//! 5. Also report the `SuccessfulCreate` events written (the sum of their
//!    `count`s, listed after the controller stopped and flushed its event
//!    recorder: one per created pod unless the recorder dropped some).
//!
//! 6. Also report the controller's CPU seconds, and its syncs
//!    (`controller_runtime_reconcile_total`) and the syncs read-own-writes
//!    skipped, scraped from its `/metrics` just before the SIGTERM.
//!
//! The targets: exactly `RS × replicas` pod creates, at most 2 status
//! writes per ReplicaSet per status change, no failed request.
//!
//! **Sharded mode** (issue 16): `CTRLKIT_BENCH_MEMBERS=1,3` runs the
//! workload once per entry, back to back on fresh clusters: `1` is one
//! unsharded replica, `N > 1` is N replicas with `--shard-ring` (1 s
//! renewals, 3 s leases), timed from when the ring is settled (every slot
//! held) so ring formation is not counted. `1r` is a ring of one member:
//! the sharding machinery without the split, to tell its cost apart from
//! that of running several processes. Each sharded run also reports,
//! per member, its share of the owners (`ctrlkit_shard_owners_held`), its
//! syncs, peak RSS (and its binary's pages) and CPU; the targets add each
//! share within 33% ± 5% for 3 members (generally 1/N ± 5 points). The workload:
//! `CTRLKIT_BENCH_RS=3000 CTRLKIT_BENCH_REPLICAS=3 CTRLKIT_BENCH_MEMBERS=1,3
//! cargo bench -p ctrlkit-replicaset --bench scale_out`.
//!
//! Server-side filtering (KEP-5866): the test cluster honours the
//! `shardSelector` parameter, so each member's ReplicaSet informer lists
//! and watches only its slots (pods are filtered on the client: the KEP
//! hashes only `metadata.uid` and `metadata.namespace`, not an owner
//! reference). `CTRLKIT_BENCH_SHARD_FILTER=server,client` runs each
//! sharded entry once with the cluster's `ShardedListAndWatch` gate on
//! (`server`, the default) and once with it off (`client`: the
//! parameter is ignored, every member caches every ReplicaSet); the
//! result line says which (`shard_filter`).
//!
//! `CTRLKIT_BENCH_WORKERS` (default 5) is every controller process's
//! `--workers`: each member of a ring gets as many as the one replica, so
//! three members run three times the concurrent syncs (docs/sharding.md,
//! "The kubelet simulation sends concurrently", on what that costs).
//!
//! `CTRLKIT_BENCH_POD_LATENCY=1` adds `pod_latency_ms`: percentiles of
//! how long after the driver saw each pod created it saw it bound and
//! Ready, from a second watch (off by default: it costs the cluster and
//! the driver CPU). The kubelet simulation is configured to bind after
//! 1 ms and start and turn ready 5 ms each; what this shows beyond that is
//! its lag under load (docs/sharding.md, "Why three members write more
//! statuses").
//!
//! `CTRLKIT_BENCH_CONTROLLER=<path>` runs another build of the controller
//! binary (e.g. a copy built from an earlier commit) under the same driver,
//! for before/after comparisons back to back. The binary `cargo bench`
//! builds carries the features of the package's dev-dependencies (tokio's
//! `test-util`, which makes every tokio `Instant::now` check for a paused
//! clock); the shipped one does not: to measure what the image runs, build
//! it with `cargo build --profile dist -p ctrlkit-replicaset --bin
//! replicaset-controller` (release optimised for size, as the image is)
//! and pass `target/dist/replicaset-controller` here.
//!
//! `cargo bench -p ctrlkit-replicaset --bench scale_out`; a quick run:
//! `CTRLKIT_BENCH_RS=50 cargo bench -p ctrlkit-replicaset --bench scale_out`;
//! `cargo test --bench scale_out` runs 5 ReplicaSets of 2 replicas as a
//! smoke test.
//! The cluster, the kubelet simulation and this driver share the machine
//! with the controller process, so the wall time is end to end. Each runs
//! on threads of its own, as separate components would: the cluster on a
//! two-thread runtime, the kubelet simulation
//! (`KubeletConfig::dedicated_thread`) and the driver (its creates and
//! watches, with a client of its own) on one thread each. On the
//! cluster's runtime their work waited in the server's task queue behind
//! the controllers' requests, and a burst of those held back every pod's
//! start-up (docs/sharding.md, "The kubelet simulation and the driver on
//! threads of their own").
#![allow(clippy::unwrap_used)]
// The result line is one `json!` with more fields than the default limit expands.
#![recursion_limit = "256"]

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{RequestStats, TestCluster, TestClusterConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_replicaset-controller");
const NS: &str = "default";
const CREATE_TASKS: usize = 8;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The controller binary as a child process; its log lines are kept.
struct Controller {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Controller {
    /// One replica; with `shard`, member `shard` of the ring.
    fn spawn(kubeconfig: &str, workers: usize, shard: Option<&str>) -> Self {
        let workers = workers.to_string();
        let bin = std::env::var("CTRLKIT_BENCH_CONTROLLER").unwrap_or_else(|_| BIN.to_owned());
        let mut args = vec![
            "--kubeconfig",
            kubeconfig,
            "--metrics-addr",
            "127.0.0.1:0",
            "--health-addr",
            "0",
            "--workers",
            &workers,
        ];
        if let Some(identity) = shard {
            args.extend([
                "--shard-ring",
                "bench",
                "--shard-identity",
                identity,
                "--lease-namespace",
                NS,
                "--lease-duration",
                "3",
                "--renew-deadline",
                "2",
            ]);
        }
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
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("WARN") || line.contains("ERROR") {
                    eprintln!("[controller] {line}");
                }
                sink.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    fn logged(&self, needle: &str) -> bool {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    fn count_logged(&self, needle: &str) -> usize {
        let lines = self.lines.lock().unwrap();
        lines.iter().filter(|l| l.contains(needle)).count()
    }

    /// The address the controller serves `/metrics` on, from its log.
    fn metrics_addr(&self) -> Option<String> {
        let lines = self.lines.lock().unwrap();
        let line = lines.iter().find(|l| l.contains("serving /metrics"))?;
        let addr = line.split("addr=").nth(1)?.split_whitespace().next()?;
        Some(addr.trim_matches('"').to_owned())
    }

    /// The sum of every sample of the metric family `name` on the
    /// controller's `/metrics` (0 if it cannot be read).
    async fn metric_sum(&self, name: &str) -> f64 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Some(addr) = self.metrics_addr() else {
            return 0.0;
        };
        let Ok(mut stream) = tokio::net::TcpStream::connect(&addr).await else {
            return 0.0;
        };
        let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
        let mut body = String::new();
        if stream.write_all(request.as_bytes()).await.is_err()
            || stream.read_to_string(&mut body).await.is_err()
        {
            return 0.0;
        }
        body.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Peak resident set size in KiB (`VmHWM`), or 0 if unreadable.
    fn peak_rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    /// Resident pages of the controller's own executable file (its code and
    /// read-only data: part of the peak RSS that every process pays) in
    /// KiB, or 0 if unreadable. Code is never unmapped, so read at the end
    /// this is its peak too.
    fn binary_rss_kib(&self) -> u64 {
        let pid = self.child.id();
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return 0;
        };
        let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
        let mut in_binary = false;
        let mut kib = 0;
        for line in smaps.lines() {
            let mut fields = line.split_whitespace();
            match fields.next() {
                // A mapping's header: address range, permissions, offset,
                // device, inode, path.
                Some(first) if first.contains('-') && !first.ends_with(':') => {
                    in_binary = fields.nth(4).is_some_and(|path| exe == Path::new(path));
                }
                Some("Rss:") if in_binary => {
                    kib += fields
                        .next()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                }
                _ => {}
            }
        }
        kib
    }

    /// CPU time (user + system) used so far, in seconds.
    fn cpu_seconds(&self) -> f64 {
        cpu_seconds(&format!("/proc/{}/stat", self.child.id()))
    }

    async fn stop(mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        for _ in 0..1200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.child.kill().unwrap();
        panic!("controller did not exit within 60 s of SIGTERM");
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// KiB as MiB, to one decimal.
fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

/// User + system CPU seconds from a `/proc/<pid>/stat` file (clock ticks
/// of 1/100 s, the value on every common Linux configuration); 0 if
/// unreadable.
fn cpu_seconds(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // The fields after the parenthesised command name; utime and stime are
    // the 14th and 15th fields of the line.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

fn replica_set(name: &str, replicas: usize) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
            }
        }
    }))
    .unwrap()
}

/// What the watch saw of the ReplicaSets.
#[derive(Default)]
struct Seen {
    /// name -> (last status as JSON, number of distinct statuses seen).
    statuses: HashMap<String, (serde_json::Value, u64)>,
    /// ReplicaSets reporting every replica ready.
    converged: usize,
    /// Watch requests opened.
    watches: u64,
}

/// Follows every ReplicaSet in `NS` until `count` of them report `replicas`
/// ready replicas; returns what it saw.
async fn follow(api: Api<ReplicaSet>, count: usize, replicas: usize) -> Seen {
    let mut seen = Seen::default();
    let mut version = "0".to_string();
    let want = i32::try_from(replicas).unwrap();
    loop {
        seen.watches += 1;
        let params = WatchParams::default().timeout(290);
        let mut stream = api.watch(&params, &version).await.unwrap().boxed();
        while let Some(event) = stream.try_next().await.unwrap() {
            let rs = match event {
                WatchEvent::Added(rs) | WatchEvent::Modified(rs) => rs,
                WatchEvent::Bookmark(b) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                WatchEvent::Deleted(_) => continue,
                WatchEvent::Error(e) => panic!("watch error: {e:?}"),
            };
            version = rs.metadata.resource_version.clone().unwrap_or(version);
            let name = rs.metadata.name.clone().unwrap();
            let status = rs.status.clone().unwrap_or_default();
            let value = serde_json::to_value(&status).unwrap();
            let converged = is_converged(&value, want);
            match seen.statuses.get_mut(&name) {
                // The ADDED event of a new ReplicaSet is the baseline.
                None => {
                    seen.converged += usize::from(converged);
                    seen.statuses.insert(name, (value, 0));
                }
                Some(entry) if entry.0 != value => {
                    match (is_converged(&entry.0, want), converged) {
                        (false, true) => seen.converged += 1,
                        (true, false) => seen.converged -= 1,
                        _ => {}
                    }
                    *entry = (value, entry.1 + 1);
                }
                Some(_) => {}
            }
            if seen.converged == count {
                return seen;
            }
        }
    }
}

fn is_converged(status: &serde_json::Value, replicas: i32) -> bool {
    let field = |f: &str| status.get(f).and_then(serde_json::Value::as_i64);
    field("replicas") == Some(replicas.into()) && field("readyReplicas") == Some(replicas.into())
}

/// How long after the driver saw each pod created it saw it bound and
/// Ready: the kubelet simulation's lag behind its configured delays.
#[derive(Default)]
struct PodLatency {
    bound_ms: Vec<u64>,
    ready_ms: Vec<u64>,
}

impl PodLatency {
    fn percentiles(v: &mut [u64]) -> serde_json::Value {
        v.sort_unstable();
        let at = |q: usize| v.get((v.len() * q / 100).min(v.len().saturating_sub(1)));
        json!({"n": v.len(), "p10": at(10), "p50": at(50), "p90": at(90), "max": v.last()})
    }

    fn report(mut self) -> serde_json::Value {
        json!({
            "bound": Self::percentiles(&mut self.bound_ms),
            "ready": Self::percentiles(&mut self.ready_ms),
        })
    }
}

/// Follows the pods in `NS` until `count` of them are Ready; see
/// [`PodLatency`]. A second watch, with its own cost to the cluster and
/// the driver: only with `CTRLKIT_BENCH_POD_LATENCY=1`.
async fn follow_pods(api: Api<Pod>, count: usize) -> PodLatency {
    let mut latency = PodLatency::default();
    // name -> (first seen, seen bound, seen ready).
    let mut pods: HashMap<String, (Instant, bool, bool)> = HashMap::new();
    let params = WatchParams::default().timeout(290);
    let mut stream = api.watch(&params, "0").await.unwrap().boxed();
    while let Some(event) = stream.try_next().await.unwrap() {
        let pod = match event {
            WatchEvent::Added(pod) | WatchEvent::Modified(pod) => pod,
            _ => continue,
        };
        let bound = pod.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let ready = pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        let name = pod.metadata.name.unwrap_or_default();
        let entry = pods.entry(name).or_insert((Instant::now(), false, false));
        let ms = || u64::try_from(entry.0.elapsed().as_millis()).unwrap_or(u64::MAX);
        if bound && !entry.1 {
            latency.bound_ms.push(ms());
        }
        if ready && !entry.2 {
            latency.ready_ms.push(ms());
        }
        (entry.1, entry.2) = (entry.1 || bound, entry.2 || ready);
        if latency.ready_ms.len() == count {
            break;
        }
    }
    latency
}

/// `{"create pods": {"2xx": n, ...}, ...}` for external requests.
fn by_resource(stats: &RequestStats) -> BTreeMap<String, serde_json::Value> {
    stats
        .iter()
        .filter(|(k, _)| !k.internal)
        .map(|(k, c)| {
            let resource = if k.resource.is_empty() {
                "(non-resource)".to_string()
            } else {
                k.resource_path()
            };
            let mut counts = json!({"2xx": c.success});
            if c.client_error > 0 {
                counts["4xx"] = json!(c.client_error);
            }
            if c.server_error > 0 {
                counts["5xx"] = json!(c.server_error);
            }
            (format!("{} {resource}", k.verb), counts)
        })
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not and
    // gets a smoke run of a few small ReplicaSets.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let rs_count = env_usize("CTRLKIT_BENCH_RS", if smoke { 5 } else { 1_000 });
    let replicas = env_usize("CTRLKIT_BENCH_REPLICAS", if smoke { 2 } else { 10 });
    let workers = env_usize("CTRLKIT_BENCH_WORKERS", 5);
    // `N` members; `1` is one unsharded replica, `1r` a ring of one member.
    let members: Vec<(usize, bool)> = std::env::var("CTRLKIT_BENCH_MEMBERS")
        .unwrap_or_else(|_| "1".into())
        .split(',')
        .map(|m| {
            let m = m.trim();
            let (count, ring) = match m.strip_suffix('r') {
                Some(count) => (count, true),
                None => (m, false),
            };
            match count.parse() {
                Ok(n) if n > 0 => (n, ring || n > 1),
                _ => panic!("CTRLKIT_BENCH_MEMBERS: {m:?} is not a positive member count"),
            }
        })
        .collect();
    let filters: Vec<bool> = std::env::var("CTRLKIT_BENCH_SHARD_FILTER")
        .unwrap_or_else(|_| "server".into())
        .split(',')
        .map(|f| match f.trim() {
            "server" => true,
            "client" => false,
            _ => panic!("CTRLKIT_BENCH_SHARD_FILTER: {f:?} is neither server nor client"),
        })
        .collect();
    // One unsharded run per `1`; every filter mode per sharded entry.
    let runs: Vec<(usize, bool, bool)> = members
        .iter()
        .flat_map(|&(m, ring)| match ring {
            false => vec![(m, false, true)],
            true => filters.iter().map(|&f| (m, true, f)).collect(),
        })
        .collect();
    let timeout = Duration::from_secs(env_usize("CTRLKIT_BENCH_TIMEOUT_SECS", 1_800) as u64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        for (members, sharded, server_side) in runs {
            let run = run(rs_count, replicas, workers, members, sharded, server_side);
            tokio::time::timeout(timeout, run)
                .await
                .expect("scale-out did not converge within CTRLKIT_BENCH_TIMEOUT_SECS");
        }
    });
}

/// Runs the driver's part of a run (its creates and watches) to its end
/// on a thread and single-threaded runtime of its own, the current
/// worker handing its other tasks over meanwhile.
///
/// The driver is a client of the API server, not a part of it: on the
/// cluster's runtime its tasks and the cluster's would queue behind each
/// other. Its client must be built inside `work`, so that the client's
/// request buffer and connections are tasks of the driver's runtime.
fn on_driver_thread<T: Send>(work: impl Future<Output = T> + Send) -> T {
    tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            std::thread::Builder::new()
                .name("bench-driver".to_owned())
                .spawn_scoped(scope, || {
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap()
                        .block_on(work)
                })
                .unwrap()
                .join()
                .unwrap()
        })
    })
}

/// A client from `kubeconfig` (the cluster's, in memory).
async fn client_from(kubeconfig: kube::config::Kubeconfig) -> kube::Client {
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// Waits until every member of the ring sees all the others and together
/// they hold every slot.
async fn ring_settled(controllers: &[Controller]) {
    let started = Instant::now();
    loop {
        let mut held = 0.0;
        let mut all_seen = true;
        for c in controllers {
            held += c.metric_sum("ctrlkit_shard_slots_held").await;
            all_seen &= c.metric_sum("ctrlkit_shard_members").await == controllers.len() as f64;
        }
        if all_seen && held == 1024.0 {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the shard ring did not settle"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(
    rs_count: usize,
    replicas: usize,
    workers: usize,
    members: usize,
    sharded: bool,
    server_side: bool,
) {
    let pods = rs_count * replicas;
    // 110 pods per node, as the kubelet's default maxPods, with 10% spare.
    let nodes = (pods * 11 / 10).div_ceil(110).max(1);
    let kubelet = KubeletConfig::with_nodes(nodes, 110)
        .schedule_delay(Duration::from_millis(1))
        .start_delay(Duration::from_millis(5))
        .ready_delay(Duration::from_millis(5))
        .dedicated_thread(true);
    let cluster = TestCluster::start(
        TestClusterConfig::default()
            .with_kubelet(kubelet)
            .with_watch_history(200_000)
            .with_sharded_list_and_watch(server_side),
    )
    .await
    .unwrap();
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    cluster.write_kubeconfig(kubeconfig.path()).unwrap();
    let client = cluster.client();
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);

    let before = cluster.requests();
    let controllers: Vec<Controller> = (0..members)
        .map(|i| {
            let identity = format!("m{i}");
            let shard = sharded.then_some(identity.as_str());
            Controller::spawn(kubeconfig.path().to_str().unwrap(), workers, shard)
        })
        .collect();
    let started = Instant::now();
    while !controllers
        .iter()
        .all(|c| c.logged("informer caches synced"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "controller did not sync its caches"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if sharded {
        ring_settled(&controllers).await;
    }
    let cpu = |cs: &[Controller]| cs.iter().map(Controller::cpu_seconds).sum::<f64>();

    let driver_kubeconfig = cluster.kubeconfig();
    let (created_in, seen, converged_in, controller_cpu, own_cpu, at_convergence, pod_latency) =
        on_driver_thread(async {
            let client = client_from(driver_kubeconfig).await;
            let pod_watch = (std::env::var("CTRLKIT_BENCH_POD_LATENCY").as_deref() == Ok("1"))
                .then(|| tokio::spawn(follow_pods(Api::namespaced(client.clone(), NS), pods)));
            let api: Api<ReplicaSet> = Api::namespaced(client, NS);
            let watch = tokio::spawn(follow(api.clone(), rs_count, replicas));
            let (controller_cpu0, own_cpu0) =
                (cpu(&controllers[..]), cpu_seconds("/proc/self/stat"));
            let t0 = Instant::now();
            futures::stream::iter(0..rs_count)
                .for_each_concurrent(CREATE_TASKS, |i| {
                    let api = api.clone();
                    async move {
                        let rs = replica_set(&format!("rs-{i:05}"), replicas);
                        api.create(&PostParams::default(), &rs).await.unwrap();
                    }
                })
                .await;
            let created_in = t0.elapsed();
            let seen = watch.await.unwrap();
            let converged_in = t0.elapsed();
            let controller_cpu = cpu(&controllers[..]) - controller_cpu0;
            let own_cpu = cpu_seconds("/proc/self/stat") - own_cpu0;
            let at_convergence = cluster.requests().since(&before);
            // After the figures above: waiting for the pod watch to catch up is
            // not part of the run.
            let pod_latency = match pod_watch {
                Some(w) => w.await.unwrap().report(),
                None => serde_json::Value::Null,
            };
            (
                created_in,
                seen,
                converged_in,
                controller_cpu,
                own_cpu,
                at_convergence,
                pod_latency,
            )
        });

    // Late writes after convergence count too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let stats = cluster.requests().since(&before);
    let mut per_member = Vec::new();
    let (mut syncs, mut stale_skips, mut warnings, mut errors) = (0.0, 0.0, 0, 0);
    let mut peak_rss_kib = 0;
    let mut binary_rss_kib = 0;
    let mut shares_ok = true;
    for c in &controllers {
        let member_syncs = c.metric_sum("controller_runtime_reconcile_total").await;
        syncs += member_syncs;
        stale_skips += c
            .metric_sum("replicaset_controller_stale_sync_skips_total")
            .await;
        warnings += c.count_logged("WARN");
        errors += c.count_logged("ERROR");
        let (peak, binary) = (c.peak_rss_kib(), c.binary_rss_kib());
        if peak >= peak_rss_kib {
            (peak_rss_kib, binary_rss_kib) = (peak, binary);
        }
        if sharded {
            let held = c.metric_sum("ctrlkit_shard_owners_held").await;
            let share = held / rs_count as f64;
            shares_ok &= (share - 1.0 / members as f64).abs() <= 0.05;
            per_member.push(json!({
                "owners_held": held,
                "share_pct": (share * 1000.0).round() / 10.0,
                "shard_syncs": c.metric_sum("ctrlkit_shard_syncs_total").await,
                "reconciles": member_syncs,
                "peak_rss_mib": mib(peak),
                "binary_rss_mib": mib(binary),
                "cpu_s": (c.cpu_seconds() * 100.0).round() / 100.0,
            }));
        }
    }
    let mut exits = Vec::new();
    for c in controllers {
        exits.push(c.stop().await);
    }
    let exit = exits
        .iter()
        .find(|e| !e.success())
        .copied()
        .unwrap_or(exits[0]);

    // Cross-check the end state with one list (after the statistics).
    let list = api.list(&ListParams::default()).await.unwrap();
    let all_ready = list.items.len() == rs_count
        && list.items.iter().all(|rs| {
            rs.status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .is_some_and(|r| r == i32::try_from(replicas).unwrap())
        });

    // One SuccessfulCreate per created pod; an aggregate or a repeat is
    // one event with a count.
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), NS);
    let events_written: i64 = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("SuccessfulCreate"))
        .map(|e| i64::from(e.count.unwrap_or(1)))
        .sum();

    // The benchmark's own requests: the ReplicaSet creates and its watch.
    let own_creates = rs_count as u64;
    let own_watches = seen.watches;
    let pod_creates = stats.count("create", "pods");
    let status_writes = stats.count("update", "replicasets/status");
    let status_changes: u64 = seen.statuses.values().map(|(_, n)| *n).sum();
    let max_changes = seen.statuses.values().map(|(_, n)| *n).max().unwrap_or(0);
    let failed = stats.total().failed();
    let controller_requests = stats.total().total() - own_creates - own_watches;
    let writes_per_change = status_writes.total() as f64 / status_changes.max(1) as f64;
    let result = json!({
        "bench": "scale_out",
        "members": members,
        "shard_filter": match (sharded, server_side) {
            (false, _) => "none",
            (true, true) => "server",
            (true, false) => "client",
        },
        "per_member": per_member,
        "replica_sets": rs_count,
        "replicas": replicas,
        "controller_workers": workers,
        "nodes": nodes,
        "wall_time_s": (converged_in.as_secs_f64() * 1000.0).round() / 1000.0,
        "create_phase_s": (created_in.as_secs_f64() * 1000.0).round() / 1000.0,
        "pods_per_s": (pods as f64 / converged_in.as_secs_f64()).round(),
        // The largest member's, when sharded.
        "controller_peak_rss_mib": mib(peak_rss_kib),
        // Of it, the pages of the controller's executable file.
        "controller_binary_rss_mib": mib(binary_rss_kib),
        "controller_cpu_s": (controller_cpu * 100.0).round() / 100.0,
        "cluster_and_driver_cpu_s": (own_cpu * 100.0).round() / 100.0,
        "controller_syncs": syncs,
        "syncs_per_pod": (syncs / pods as f64 * 1000.0).round() / 1000.0,
        "stale_sync_skips": stale_skips,
        "controller_cpu_ms_per_pod": (controller_cpu * 1000.0 / pods as f64 * 1000.0).round() / 1000.0,
        "controller_requests": controller_requests,
        "pod_creates": pod_creates.total(),
        "pod_creates_at_convergence": at_convergence.count("create", "pods").total(),
        "successful_create_events_written": events_written,
        "successful_create_events_missing": pods as i64 - events_written,
        "status_writes": status_writes.total(),
        "status_writes_per_rs": status_writes.total() as f64 / rs_count as f64,
        "status_changes_seen": status_changes,
        "max_status_changes_per_rs": max_changes,
        "pod_latency_ms": pod_latency,
        "status_writes_per_change": (writes_per_change * 1000.0).round() / 1000.0,
        "status_conflicts": stats.code(409),
        "failed_requests": failed,
        "failed_requests_other_than_409": failed - stats.code(409),
        "codes": stats.codes(),
        "requests": by_resource(&stats),
        "bench_own_requests": {"create replicasets": own_creates, "watch replicasets": own_watches},
        "kubelet_requests": stats.internal_total().total(),
        "controller_log": {"warnings": warnings, "errors": errors},
        "controller_exit": exit.code(),
        "end_state_all_ready": all_ready,
        "targets": {
            "exact_pod_creates": pod_creates.total() == pods as u64 && pod_creates.success == pods as u64,
            "at_most_2_status_writes_per_change": writes_per_change <= 2.0,
            "no_failed_requests": failed == 0,
            "shares_within_5_points": !sharded || shares_ok,
        },
    });
    println!("{result}");
    cluster.shutdown().await;
    assert!(all_ready, "not every ReplicaSet ended ready");
    assert_eq!(exit.code(), Some(0), "controller exit status");
}
