//! The kubelet simulation, observed through a kube client.
//!
//! The server is a real HTTP server, so these tests run on real time with
//! short kubelet delays; timeouts are only deadlock guards and nothing
//! asserts how long a step took.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_testcluster::{
    TestCluster, TestClusterConfig,
    kubelet::{KubeletConfig, KubeletError},
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams},
    runtime::{
        wait::{Condition, await_condition, conditions},
        watcher,
    },
};

const GUARD: Duration = Duration::from_secs(60);

fn fast_kubelet(nodes: usize, pods_per_node: usize) -> KubeletConfig {
    KubeletConfig::with_nodes(nodes, pods_per_node)
        .schedule_delay(Duration::from_millis(5))
        .start_delay(Duration::from_millis(20))
        .ready_delay(Duration::from_millis(20))
        .deletion_delay(Duration::from_millis(5))
}

async fn cluster(kubelet: KubeletConfig) -> TestCluster {
    TestCluster::start(TestClusterConfig::default().with_kubelet(kubelet))
        .await
        .unwrap()
}

fn pod(name: &str, node: Option<&str>) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "nginx:1.27"}],
        },
    }))
    .unwrap()
}

fn is_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

async fn wait_for(api: &Api<Pod>, name: &str, cond: impl Condition<Pod>) -> Pod {
    tokio::time::timeout(GUARD, await_condition(api.clone(), name, cond))
        .await
        .unwrap_or_else(|_| panic!("pod {name} never reached the expected state"))
        .unwrap()
        .unwrap_or_else(|| panic!("pod {name} is gone"))
}

async fn wait_ready(api: &Api<Pod>, name: &str) -> Pod {
    wait_for(api, name, |p: Option<&Pod>| p.is_some_and(is_ready)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_bound_started_and_become_ready() {
    let tc = cluster(fast_kubelet(2, 10)).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    for i in 0..3 {
        pods.create(&PostParams::default(), &pod(&format!("web-{i}"), None))
            .await
            .unwrap();
    }
    for i in 0..3 {
        let p = wait_ready(&pods, &format!("web-{i}")).await;
        let spec = p.spec.as_ref().unwrap();
        assert!(
            matches!(spec.node_name.as_deref(), Some("node-1" | "node-2")),
            "{:?}",
            spec.node_name
        );
        let status = p.status.as_ref().unwrap();
        assert_eq!(status.phase.as_deref(), Some("Running"));
        assert!(status.pod_ip.is_some());
        assert!(status.host_ip.is_some());
        assert!(status.start_time.is_some());
        let conditions = status.conditions.as_ref().unwrap();
        for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            let c = conditions
                .iter()
                .find(|c| c.type_ == kind)
                .unwrap_or_else(|| panic!("no {kind} condition"));
            assert_eq!(c.status, "True", "{kind}");
            assert!(c.last_transition_time.is_some(), "{kind}");
        }
        let cs = &status.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.name, "app");
        assert!(cs.ready);
        assert_eq!(cs.started, Some(true));
        assert_eq!(cs.restart_count, 0);
        assert!(cs.state.as_ref().unwrap().running.is_some());
    }
    let stats = tc.kubelet().unwrap().stats();
    assert_eq!(stats.bound, 3);
    assert_eq!(stats.admitted, 3);
    assert_eq!(stats.started, 3);
    assert_eq!(stats.rejected, 0);
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_beyond_capacity_stay_pending_until_a_slot_frees() {
    let tc = cluster(fast_kubelet(1, 2)).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    for name in ["a", "b"] {
        pods.create(&PostParams::default(), &pod(name, None))
            .await
            .unwrap();
    }
    wait_ready(&pods, "a").await;
    wait_ready(&pods, "b").await;
    pods.create(&PostParams::default(), &pod("c", None))
        .await
        .unwrap();
    // The scheduler reports that no node can take "c".
    let c = wait_for(&pods, "c", |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()?.conditions.clone())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
    })
    .await;
    assert_eq!(phase(&c), Some("Pending"));
    assert!(c.spec.as_ref().unwrap().node_name.is_none());
    assert_eq!(tc.kubelet().unwrap().stats().unschedulable, 1);

    // Free a slot: "c" is scheduled and runs.
    pods.delete("a", &DeleteParams::default()).await.unwrap();
    let c = wait_ready(&pods, "c").await;
    assert_eq!(c.spec.unwrap().node_name.as_deref(), Some("node-1"));
    // "b" and "c" fill the node; nothing was ever rejected.
    assert_eq!(tc.kubelet().unwrap().stats().rejected, 0);
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_cue_fails_new_pods_with_out_of_pods() {
    let tc = cluster(fast_kubelet(1, 10)).await;
    let kubelet = tc.kubelet().unwrap();
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    kubelet.reject_new_pods(Some("OutOfpods"));
    pods.create(&PostParams::default(), &pod("rejected", None))
        .await
        .unwrap();
    let p = wait_for(&pods, "rejected", |p: Option<&Pod>| {
        p.is_some_and(|p| phase(p) == Some("Failed"))
    })
    .await;
    let status = p.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("OutOfpods"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod Node didn't have enough resource: pods, requested: 1, used: 10, capacity: 10")
    );
    assert_eq!(kubelet.stats().rejected, 1);

    kubelet.reject_new_pods(None);
    pods.create(&PostParams::default(), &pod("accepted", None))
        .await
        .unwrap();
    wait_ready(&pods, "accepted").await;
    assert_eq!(kubelet.stats().rejected, 1);
    tc.shutdown().await;
}

/// Seed 003: pods created with `spec.nodeName` on a full node are rejected
/// by the kubelet's admission with `OutOfpods`, and a Warning event says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_pinned_to_a_full_node_are_rejected_out_of_pods() {
    let tc = cluster(fast_kubelet(1, 1)).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    pods.create(&PostParams::default(), &pod("first", Some("node-1")))
        .await
        .unwrap();
    wait_ready(&pods, "first").await;
    pods.create(&PostParams::default(), &pod("second", Some("node-1")))
        .await
        .unwrap();
    let p = wait_for(&pods, "second", |p: Option<&Pod>| {
        p.is_some_and(|p| phase(p) == Some("Failed"))
    })
    .await;
    let status = p.status.unwrap();
    assert_eq!(status.reason.as_deref(), Some("OutOfpods"));
    assert_eq!(
        status.message.as_deref(),
        Some("Pod Node didn't have enough resource: pods, requested: 1, used: 1, capacity: 1")
    );
    // Pinned pods are never bound through the binding subresource.
    assert_eq!(tc.kubelet().unwrap().stats().bound, 0);

    let events: Api<Event> = Api::default_namespaced(tc.client());
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let list = events.list(&ListParams::default()).await.unwrap();
        if let Some(e) = list
            .items
            .iter()
            .find(|e| e.involved_object.name.as_deref() == Some("second"))
        {
            assert_eq!(e.reason.as_deref(), Some("OutOfpods"));
            assert_eq!(e.type_.as_deref(), Some("Warning"));
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no OutOfpods event recorded"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_restarts_containers_and_readiness_can_be_forced() {
    let tc = cluster(fast_kubelet(1, 10)).await;
    let kubelet = tc.kubelet().unwrap();
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    pods.create(&PostParams::default(), &pod("crashy", None))
        .await
        .unwrap();
    wait_ready(&pods, "crashy").await;

    // Record every version of the pod from now on.
    let (tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<Pod>();
    let watch_api = pods.clone();
    let recorder = tokio::spawn(async move {
        let cfg = watcher::Config::default().fields("metadata.name=crashy");
        let mut stream = watcher(watch_api, cfg).boxed();
        while let Some(Ok(ev)) = stream.next().await {
            if let watcher::Event::Apply(p) | watcher::Event::InitApply(p) = ev {
                let _ = tx.send(p);
            }
        }
    });

    // Once the watcher has listed the pod, it sees every later change.
    tokio::time::timeout(GUARD, seen.recv())
        .await
        .expect("watcher never listed the pod")
        .unwrap();
    kubelet.crash_pod("default", "crashy").await.unwrap();
    let restarts = |p: &Pod| {
        p.status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count
    };
    // The crash shows as a not-ready version with one restart, then the
    // pod is ready again.
    let mut saw_not_ready = false;
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        let p = tokio::time::timeout_at(deadline, seen.recv())
            .await
            .expect("pod never became ready after the crash")
            .unwrap();
        if restarts(&p) == 1 && !is_ready(&p) {
            saw_not_ready = true;
            let cs = &p
                .status
                .as_ref()
                .unwrap()
                .container_statuses
                .as_ref()
                .unwrap()[0];
            assert!(!cs.ready);
            let last = cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap();
            assert_eq!(last.exit_code, 1);
        }
        if saw_not_ready && restarts(&p) == 1 && is_ready(&p) {
            break;
        }
    }
    assert_eq!(kubelet.stats().crashes, 1);

    kubelet
        .set_pod_ready("default", "crashy", false)
        .await
        .unwrap();
    let p = pods.get("crashy").await.unwrap();
    assert!(!is_ready(&p), "forced not ready");
    kubelet
        .set_pod_ready("default", "crashy", true)
        .await
        .unwrap();
    let p = pods.get("crashy").await.unwrap();
    assert!(is_ready(&p), "ready again");
    recorder.abort();

    let err = kubelet.crash_pod("default", "nope").await.unwrap_err();
    assert!(matches!(err, KubeletError::PodNotFound { .. }), "{err}");
    tc.shutdown().await;
}

/// The simulation sends its requests without waiting for each other's
/// answers, but one pod's status patches still land in the order the
/// changes were made: a crash and then a forced ready, on many pods at
/// once, leave every pod ready with one restart (the crash's patch landing
/// last would leave it not ready for good: its ready timer finds it ready).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pods_status_patches_land_in_order() {
    const PODS: usize = 20;
    let tc = cluster(fast_kubelet(2, PODS)).await;
    let kubelet = tc.kubelet().unwrap();
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    let names: Vec<String> = (0..PODS).map(|i| format!("p{i}")).collect();
    for name in &names {
        pods.create(&PostParams::default(), &pod(name, None))
            .await
            .unwrap();
    }
    for name in &names {
        wait_ready(&pods, name).await;
    }

    futures::future::join_all(names.iter().map(|name| async move {
        // Queued in this order: join polls the crash first.
        let (crashed, ready) = tokio::join!(
            kubelet.crash_pod("default", name),
            kubelet.set_pod_ready("default", name, true),
        );
        crashed.unwrap();
        ready.unwrap();
    }))
    .await;

    for name in &names {
        let p = pods.get(name).await.unwrap();
        let restarts = p
            .status
            .as_ref()
            .unwrap()
            .container_statuses
            .as_ref()
            .unwrap()[0]
            .restart_count;
        assert_eq!(restarts, 1, "{name}");
        assert!(
            is_ready(&p),
            "{name} is left with the crash's not-ready status"
        );
    }
    assert_eq!(kubelet.stats().crashes, PODS as u64);
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_deletion_of_a_bound_pod_finishes() {
    let tc = cluster(fast_kubelet(1, 10)).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    pods.create(&PostParams::default(), &pod("doomed", None))
        .await
        .unwrap();
    let p = wait_ready(&pods, "doomed").await;
    let uid = p.metadata.uid.unwrap();
    pods.delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    tokio::time::timeout(
        GUARD,
        await_condition(pods.clone(), "doomed", conditions::is_deleted(&uid)),
    )
    .await
    .expect("graceful deletion never finished")
    .unwrap();
    // The kubelet counts the deletion once its DELETE call returns, which
    // may be just after the watch above saw the pod go.
    let deadline = tokio::time::Instant::now() + GUARD;
    while tc.kubelet().unwrap().stats().deletions_finished != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "deletion not counted"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tc.shutdown().await;
}
