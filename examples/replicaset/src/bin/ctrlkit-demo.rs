//! `ctrlkit-demo`: the ReplicaSet and ReplicationController controllers at
//! work, with nothing to install.
//!
//! Starts ctrlkit's in-process test cluster (an API server plus a simulated
//! kubelet that schedules pods and makes them ready), runs both
//! controllers against it, and walks through creating, scaling, orphaning,
//! re-adopting and deleting, printing one line per step. Exits 0 only if
//! every step converged within its timeout.
//!
//! ```text
//! cargo run --release -p ctrlkit-replicaset --bin ctrlkit-demo
//! RUST_LOG=info,ctrlkit_replicaset=debug cargo run -p ctrlkit-replicaset --bin ctrlkit-demo
//! ```

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_replicaset::{ControllerOptions, ReplicaSetController, ReplicationManager};
use ctrlkit_runtime::manager::{LogFilter, LogFormat, init_logging};
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{TestCluster, TestClusterConfig};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Pod, ReplicationController};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// Walks ctrlkit's ReplicaSet and ReplicationController controllers through
/// create, scale up, scale down, orphan and re-adopt, and garbage
/// collection, against an in-process test cluster with a simulated kubelet.
/// Prints one line per step; exits 0 only if every step converged.
///
/// Detailed logs: set RUST_LOG (e.g. RUST_LOG=info).
#[derive(Debug, Parser)]
#[command(name = "ctrlkit-demo", version)]
struct Cli {
    /// How long each step may take to converge, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    step_timeout: u64,
}

const NAMESPACE: &str = "default";
const STEPS: usize = 12;
const POLL: Duration = Duration::from_millis(50);

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // Quiet unless RUST_LOG asks for more: the demo prints its own steps.
    if let Ok(filter) = LogFilter::from_env_or("off") {
        init_logging(LogFormat::Text, &filter);
    }
    let mut demo = Demo {
        step: 0,
        timeout: Duration::from_secs(cli.step_timeout),
    };
    match run(&mut demo).await {
        Ok(()) => {
            println!("all {STEPS} steps converged");
            ExitCode::SUCCESS
        }
        Err(message) => {
            println!("FAILED: {message}");
            eprintln!(
                "ctrlkit-demo: step {} did not converge: {message}",
                demo.step
            );
            ExitCode::FAILURE
        }
    }
}

async fn run(demo: &mut Demo) -> Result<(), String> {
    let config = TestClusterConfig::default().with_kubelet(KubeletConfig::with_nodes(2, 110));
    let started = Instant::now();
    demo.begin("start the test cluster (API server + simulated kubelet, 2 nodes)");
    let cluster = TestCluster::start(config)
        .await
        .map_err(|e| format!("cannot start the test cluster: {e}"))?;
    demo.ok(format!("{} in {}", cluster.base_url(), secs(started)));
    let client = cluster.client();

    let started = Instant::now();
    demo.begin("start both controllers on one shared informer factory");
    let factory = SharedInformerFactory::new(client.clone());
    let options = ControllerOptions::default();
    let rs_controller = ReplicaSetController::new(client.clone(), &factory, options.clone(), None)
        .map_err(|e| format!("cannot build the ReplicaSet controller: {e}"))?;
    let rc_controller = ReplicationManager::new(client.clone(), &factory, options, None)
        .map_err(|e| format!("cannot build the ReplicationController controller: {e}"))?;
    factory.start();
    tokio::time::timeout(demo.timeout, factory.wait_for_cache_sync())
        .await
        .map_err(|_| "informer caches did not sync".to_string())?
        .map_err(|e| format!("informer caches did not sync: {e}"))?;
    let stop = CancellationToken::new();
    let rs_task = tokio::spawn(rs_controller.run(stop.clone()));
    let rc_task = tokio::spawn(rc_controller.run(stop.clone()));
    demo.ok(format!("caches synced in {}", secs(started)));

    let rs = Owner::new(
        client.clone(),
        ApiResource::erase::<ReplicaSet>(&()),
        "rs",
        "demo-rs",
    );
    let rc = Owner::new(
        client.clone(),
        ApiResource::erase::<ReplicationController>(&()),
        "rc",
        "demo-rc",
    );
    let pods: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ApiResource::erase::<Pod>(&()));

    let (rs, rc, pods) = (&rs, &rc, &pods);

    demo.begin("create rs/demo-rs with 3 replicas");
    rs.create(3).await?;
    demo.converge(move || async move { rs.converged(pods, 3).await.map(Some) })
        .await?;

    demo.begin("create rc/demo-rc with 2 replicas");
    rc.create(2).await?;
    demo.converge(move || async move { rc.converged(pods, 2).await.map(Some) })
        .await?;

    demo.begin("scale rs/demo-rs to 10");
    rs.scale(10).await?;
    demo.converge(move || async move { rs.converged(pods, 10).await.map(Some) })
        .await?;

    demo.begin("scale rs/demo-rs down to 2");
    rs.scale(2).await?;
    demo.converge(move || async move { rs.converged(pods, 2).await.map(Some) })
        .await?;

    // Orphan: drop the pod's ownerReferences; it still matches the
    // selector, so the controller adopts it again.
    let victim = rs
        .owned_pods(pods)
        .await?
        .into_iter()
        .next()
        .ok_or("rs/demo-rs has no pod")?;
    let victim = &victim.metadata.name.clone().unwrap_or_default();
    demo.begin(&format!("orphan pod {victim} (remove its ownerReferences)"));
    let orphaned = pods
        .patch(
            victim,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": null}})),
        )
        .await
        .map_err(|e| format!("cannot patch pod {victim}: {e}"))?;
    if rs.controls(&orphaned) {
        return Err(format!("pod {victim} still has its controller reference"));
    }
    demo.converge(move || async move {
        let pod = pods.get(victim).await.map_err(|e| e.to_string())?;
        if !rs.controls(&pod) {
            return Err("not adopted yet".into());
        }
        let summary = rs.converged(pods, 2).await?;
        Ok(Some(format!("re-adopted; {summary}")))
    })
    .await?;

    // Relabel out of the selector: the controller releases the pod and
    // creates a replacement.
    demo.begin(&format!(
        "relabel pod {victim} out of rs/demo-rs's selector"
    ));
    set_app_label(pods, victim, "demo-rs-away").await?;
    demo.converge(move || async move {
        let pod = pods.get(victim).await.map_err(|e| e.to_string())?;
        if rs.controls(&pod) {
            return Err("not released yet".into());
        }
        let summary = rs.converged(pods, 2).await?;
        Ok(Some(format!("released, replacement created; {summary}")))
    })
    .await?;

    // Relabel back: adopted again, which makes 3, so one pod is deleted.
    demo.begin(&format!("relabel pod {victim} back"));
    set_app_label(pods, victim, "demo-rs").await?;
    demo.converge(move || async move {
        let matching = rs.matching_pods(pods).await?;
        let strays = matching
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !rs.controls(p))
            .count();
        if strays > 0 {
            return Err(format!("{strays} matching pod(s) not adopted yet"));
        }
        let summary = rs.converged(pods, 2).await?;
        Ok(Some(format!("adopted, surplus deleted; {summary}")))
    })
    .await?;

    demo.begin("scale rc/demo-rc to 5");
    rc.scale(5).await?;
    demo.converge(move || async move { rc.converged(pods, 5).await.map(Some) })
        .await?;

    demo.begin("delete rs/demo-rs and rc/demo-rc (pods are garbage collected)");
    rs.delete().await?;
    rc.delete().await?;
    demo.converge(move || async move {
        let left = rs.matching_pods(pods).await?.len() + rc.matching_pods(pods).await?.len();
        let owners = usize::from(rs.exists().await?) + usize::from(rc.exists().await?);
        if left == 0 && owners == 0 {
            Ok(Some("owners and pods gone".to_string()))
        } else {
            Err(format!("{owners} owner(s) and {left} pod(s) left"))
        }
    })
    .await?;

    let started = Instant::now();
    demo.begin("stop the controllers (drain in-flight syncs)");
    stop.cancel();
    for (name, task) in [("ReplicaSet", rs_task), ("ReplicationController", rc_task)] {
        match tokio::time::timeout(demo.timeout, task).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(format!("the {name} controller failed: {e}")),
            Ok(Err(e)) => return Err(format!("the {name} controller task failed: {e}")),
            Err(_) => return Err(format!("the {name} controller did not stop")),
        }
    }
    factory.shutdown().await;
    cluster.shutdown().await;
    demo.ok(format!("stopped in {}", secs(started)));
    Ok(())
}

/// Step bookkeeping and output.
struct Demo {
    step: usize,
    timeout: Duration,
}

impl Demo {
    fn begin(&mut self, what: &str) {
        self.step += 1;
        print!("[{}/{STEPS}] {what} ... ", self.step);
        let _ = std::io::stdout().flush();
    }

    fn ok(&self, detail: String) {
        println!("ok ({detail})");
    }

    /// Polls `check` until it returns `Ok(Some(detail))`, or fails after
    /// the step timeout. `Err` means "not yet" (what is seen so far, or an
    /// API error to retry); the last one is reported on timeout.
    async fn converge<F, Fut>(&self, mut check: F) -> Result<(), String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<String>, String>>,
    {
        let started = Instant::now();
        let mut last = String::from("not converged yet");
        loop {
            match check().await {
                Ok(Some(detail)) => {
                    self.ok(format!("{detail} in {}", secs(started)));
                    return Ok(());
                }
                Ok(None) => {}
                Err(error) => last = error,
            }
            if started.elapsed() > self.timeout {
                println!("FAILED");
                return Err(format!(
                    "timed out after {}s: {last}",
                    self.timeout.as_secs()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// A ReplicaSet or ReplicationController the demo drives, handled as
/// plain JSON so the demo builds against every supported API version.
struct Owner {
    api: Api<DynamicObject>,
    resource: ApiResource,
    short: &'static str,
    name: &'static str,
}

impl Owner {
    fn new(
        client: kube::Client,
        resource: ApiResource,
        short: &'static str,
        name: &'static str,
    ) -> Self {
        Self {
            api: Api::namespaced_with(client, NAMESPACE, &resource),
            resource,
            short,
            name,
        }
    }

    fn label(&self) -> String {
        format!("app={}", self.name)
    }

    async fn create(&self, replicas: i32) -> Result<(), String> {
        // RCs select with a plain label map; ReplicaSets with matchLabels.
        let selector = if self.resource.kind == "ReplicaSet" {
            json!({"matchLabels": {"app": self.name}})
        } else {
            json!({"app": self.name})
        };
        let object = json!({
            "apiVersion": self.resource.api_version,
            "kind": self.resource.kind,
            "metadata": {"name": self.name, "namespace": NAMESPACE},
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {
                    "metadata": {"labels": {"app": self.name}},
                    "spec": {"containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]}
                }
            }
        });
        let object: DynamicObject = serde_json::from_value(object)
            .map_err(|e| format!("bad {} manifest: {e}", self.short))?;
        self.api
            .create(&PostParams::default(), &object)
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot create {}/{}: {e}", self.short, self.name))
    }

    async fn scale(&self, replicas: i32) -> Result<(), String> {
        self.api
            .patch(
                self.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot scale {}/{}: {e}", self.short, self.name))
    }

    async fn delete(&self) -> Result<(), String> {
        self.api
            .delete(self.name, &DeleteParams::background())
            .await
            .map(|_| ())
            .map_err(|e| format!("cannot delete {}/{}: {e}", self.short, self.name))
    }

    async fn exists(&self) -> Result<bool, String> {
        self.api
            .get_opt(self.name)
            .await
            .map(|o| o.is_some())
            .map_err(|e| e.to_string())
    }

    /// Whether `pod`'s controller reference points at this owner.
    fn controls(&self, pod: &DynamicObject) -> bool {
        pod.metadata.owner_references.iter().flatten().any(|r| {
            r.controller == Some(true) && r.kind == self.resource.kind && r.name == self.name
        })
    }

    /// Pods carrying the owner's label, terminating ones included.
    async fn matching_pods(&self, pods: &Api<DynamicObject>) -> Result<Vec<DynamicObject>, String> {
        pods.list(&ListParams::default().labels(&self.label()))
            .await
            .map(|l| l.items)
            .map_err(|e| e.to_string())
    }

    /// Active (not terminating) pods controlled by this owner.
    async fn owned_pods(&self, pods: &Api<DynamicObject>) -> Result<Vec<DynamicObject>, String> {
        let all = pods
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(all
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && self.controls(p))
            .collect())
    }

    /// `Ok(summary)` once exactly `want` active pods are controlled by
    /// the owner, all ready, no other active pod matches its label, and
    /// its status reports `want` replicas, all ready, for the current
    /// generation; `Err(what is seen)` before.
    async fn converged(&self, pods: &Api<DynamicObject>, want: usize) -> Result<String, String> {
        let owned = self.owned_pods(pods).await?;
        let ready = owned.iter().filter(|p| is_ready(&p.data)).count();
        let stray = self
            .matching_pods(pods)
            .await?
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && !self.controls(p))
            .count();
        let owner = self.api.get(self.name).await.map_err(|e| e.to_string())?;
        let status = |field: &str| {
            owner
                .data
                .pointer(&format!("/status/{field}"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
        };
        let up_to_date = status("observedGeneration") >= owner.metadata.generation.unwrap_or(0);
        let summary = format!(
            "{} pods, {ready} ready; status replicas={} readyReplicas={}",
            owned.len(),
            status("replicas"),
            status("readyReplicas")
        );
        let want_i64 = i64::try_from(want).unwrap_or(i64::MAX);
        let done = owned.len() == want
            && ready == want
            && stray == 0
            && up_to_date
            && status("replicas") == want_i64
            && status("readyReplicas") == want_i64;
        if done { Ok(summary) } else { Err(summary) }
    }
}

async fn set_app_label(pods: &Api<DynamicObject>, name: &str, value: &str) -> Result<(), String> {
    pods.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"app": value}}})),
    )
    .await
    .map(|_| ())
    .map_err(|e| format!("cannot relabel pod {name}: {e}"))
}

/// Whether a pod's `Ready` condition is `True`.
fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn secs(since: Instant) -> String {
    format!("{:.1}s", since.elapsed().as_secs_f64())
}
