//! Fault injection observed through kube clients.
//!
//! The server is a real HTTP server, so these tests run on real time.
//! Timeouts are deadlock guards only; the one timing check is a lower bound
//! (an injected delay can make things slower, never faster).
#![allow(clippy::unwrap_used)]

use std::{collections::BTreeSet, time::Duration};

use ctrlkit_testcluster::{
    TestCluster, TestClusterConfig,
    faults::{ErrorKind, ErrorRule, FaultConfig, FaultKind, InjectedFault, Latency},
};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::{coordination::v1::Lease, core::v1::Pod};
use kube::{
    Api,
    api::{DeleteParams, ListParams, PostParams, WatchEvent, WatchParams},
    runtime::watcher,
};

const GUARD: Duration = Duration::from_secs(60);

async fn cluster(seed: u64, faults: FaultConfig) -> TestCluster {
    TestCluster::start(
        TestClusterConfig::default()
            .with_seed(seed)
            .with_faults(faults),
    )
    .await
    .unwrap()
}

/// A client that does not retry 429/503/504 by itself (kube's default
/// client does), so every injected error reaches the caller.
fn no_retry_client(tc: &TestCluster) -> kube::Client {
    let mut config = kube::Config::new(tc.base_url().parse().unwrap());
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]},
    }))
    .unwrap()
}

fn api_code(r: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(s)) => (s.code, s.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_errors_surface_as_api_errors() {
    let faults = FaultConfig::default()
        .with_error(ErrorRule::verb("get", 1.0, ErrorKind::InternalError))
        .with_error(ErrorRule::verb(
            "list",
            1.0,
            ErrorKind::TooManyRequests {
                retry_after_secs: 2,
            },
        ))
        .with_error(ErrorRule::verb("create", 1.0, ErrorKind::Conflict).for_resource("pods"))
        .with_error(ErrorRule::verb("delete", 1.0, ErrorKind::Timeout));
    let tc = cluster(1, faults).await;
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(&tc));

    assert_eq!(api_code(pods.get("x").await), (500, "InternalError".into()));
    assert_eq!(
        api_code(pods.list(&ListParams::default()).await),
        (429, "TooManyRequests".into())
    );
    assert_eq!(
        api_code(pods.create(&PostParams::default(), &pod("x")).await),
        (409, "Conflict".into())
    );
    assert_eq!(
        api_code(pods.delete("x", &DeleteParams::default()).await),
        (504, "Timeout".into())
    );
    // Rules are per resource: leases can still be created.
    let leases: Api<Lease> = Api::default_namespaced(no_retry_client(&tc));
    let lease: Lease =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "fine"}})).unwrap();
    leases.create(&PostParams::default(), &lease).await.unwrap();

    // 429 carries Retry-After, as kube's retry policy expects.
    let req = http::Request::get(format!("{}/api/v1/namespaces/default/pods", tc.base_url()))
        .body(Vec::new())
        .unwrap();
    let resp = no_retry_client(&tc)
        .send(req.map(Into::into))
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert_eq!(resp.headers().get(http::header::RETRY_AFTER).unwrap(), "2");

    let kinds: Vec<FaultKind> = tc.faults().log().into_iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![
            FaultKind::Error(ErrorKind::InternalError),
            FaultKind::Error(ErrorKind::TooManyRequests {
                retry_after_secs: 2
            }),
            FaultKind::Error(ErrorKind::Conflict),
            FaultKind::Error(ErrorKind::Timeout),
            FaultKind::Error(ErrorKind::TooManyRequests {
                retry_after_secs: 2
            }),
        ]
    );

    // Faults change at runtime.
    tc.faults().clear();
    pods.create(&PostParams::default(), &pod("x"))
        .await
        .unwrap();
    pods.get("x").await.unwrap();
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_default_client_retries_injected_429() {
    // One 429 on the first list, then the faults are gone: kube's default
    // client waits for Retry-After and retries by itself.
    let tc = cluster(0, FaultConfig::default()).await;
    tc.faults()
        .set_config(FaultConfig::default().with_error(ErrorRule::verb(
            "list",
            1.0,
            ErrorKind::TooManyRequests {
                retry_after_secs: 1,
            },
        )));
    let faults = tc.faults();
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    let lp = ListParams::default();
    let list = pods.list(&lp);
    let clear = async {
        while faults.log().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        faults.clear();
    };
    let (list, ()) = tokio::time::timeout(GUARD, async { tokio::join!(list, clear) })
        .await
        .unwrap();
    list.unwrap();
    assert!(!tc.faults().log().is_empty());
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_is_added() {
    let delay = Duration::from_millis(300);
    let tc = cluster(
        0,
        FaultConfig::default().with_latency(Latency::Fixed(delay)),
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    let start = std::time::Instant::now();
    pods.list(&ListParams::default()).await.unwrap();
    assert!(start.elapsed() >= delay);
    assert_eq!(tc.faults().log()[0].kind, FaultKind::Latency(delay));
    tc.shutdown().await;
}

/// Collect pod names from a kube-runtime watcher until `want` are seen.
async fn watch_until_seen(
    stream: &mut (impl futures::Stream<Item = Result<watcher::Event<Pod>, watcher::Error>> + Unpin),
    want: &BTreeSet<String>,
    inits: &mut usize,
) {
    let mut seen = BTreeSet::new();
    while !want.is_subset(&seen) {
        let ev = tokio::time::timeout(GUARD, stream.next())
            .await
            .expect("watcher stalled")
            .expect("watcher ended");
        match ev {
            Ok(watcher::Event::Init) => *inits += 1,
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => {
                seen.insert(p.metadata.name.unwrap());
            }
            // Errors (e.g. 410) are reported and the watcher recovers.
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_reconnects_after_watch_cuts() {
    let tc = cluster(0, FaultConfig::default().with_watch_cut_after_events(2)).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    let mut inits = 0;
    // Let the initial list finish before creating pods.
    loop {
        let ev = tokio::time::timeout(GUARD, stream.next()).await.unwrap();
        if let Some(Ok(watcher::Event::InitDone)) = ev {
            break;
        }
    }
    let names: BTreeSet<String> = (0..7).map(|i| format!("p{i}")).collect();
    let creator = {
        let pods = pods.clone();
        let names = names.clone();
        tokio::spawn(async move {
            for n in names {
                pods.create(&PostParams::default(), &pod(&n)).await.unwrap();
            }
        })
    };
    watch_until_seen(&mut stream, &names, &mut inits).await;
    creator.await.unwrap();
    let cuts = tc
        .faults()
        .log()
        .into_iter()
        .filter(|f| f.kind == FaultKind::WatchCutAfterEvents(2))
        .count();
    assert!(cuts >= 3, "7 events over watches of 2 events: {cuts} cuts");
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forced_gone_makes_the_watcher_relist_and_recover() {
    let tc = cluster(0, FaultConfig::default()).await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    pods.create(&PostParams::default(), &pod("before"))
        .await
        .unwrap();
    tc.faults().force_gone_next_watch(Some("pods"));
    let mut stream = watcher(pods.clone(), watcher::Config::default()).boxed();
    let mut inits = 0;
    let mut gone = 0;
    // The first watch after the initial list gets 410 Gone; the watcher
    // reports it and lists again.
    while inits < 2 {
        match tokio::time::timeout(GUARD, stream.next())
            .await
            .expect("watcher stalled")
            .unwrap()
        {
            Ok(watcher::Event::Init) => inits += 1,
            Err(watcher::Error::WatchError(s)) if s.code == 410 => gone += 1,
            _ => {}
        }
    }
    assert_eq!(gone, 1);
    // The next watch works: a new pod is seen.
    pods.create(&PostParams::default(), &pod("after"))
        .await
        .unwrap();
    let want = BTreeSet::from(["after".to_owned(), "before".to_owned()]);
    watch_until_seen(&mut stream, &want, &mut inits).await;
    let forced: Vec<InjectedFault> = tc
        .faults()
        .log()
        .into_iter()
        .filter(|f| f.kind == FaultKind::ForcedGone)
        .collect();
    assert_eq!(forced.len(), 1);
    assert_eq!(forced[0].resource, "pods");
    tc.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_watch_delivery_keeps_order() {
    let (min, max) = (Duration::from_millis(100), Duration::from_millis(400));
    let tc = cluster(
        5,
        FaultConfig::default().with_watch_delay(Latency::Uniform { min, max }),
    )
    .await;
    let pods: Api<Pod> = Api::default_namespaced(tc.client());
    let list = pods.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut events = pods
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    let names: Vec<String> = (0..6).map(|i| format!("d{i}")).collect();
    let mut sent = Vec::new();
    for n in &names {
        sent.push(std::time::Instant::now());
        pods.create(&PostParams::default(), &pod(n)).await.unwrap();
    }
    let mut got = Vec::new();
    while got.len() < names.len() {
        let ev = tokio::time::timeout(GUARD, events.try_next())
            .await
            .expect("watch stalled")
            .unwrap()
            .expect("watch ended");
        if let WatchEvent::Added(p) = ev {
            // Produced after its create request started, delivered at
            // least `min` later.
            assert!(sent[got.len()].elapsed() >= min);
            got.push(p.metadata.name.unwrap());
        }
    }
    assert_eq!(got, names, "delivery order is the order of changes");
    assert!(
        tc.faults()
            .log()
            .iter()
            .any(|f| matches!(f.kind, FaultKind::WatchDelayed(_)))
    );
    tc.shutdown().await;
}

/// A fixed, sequential request sequence; returns what each request saw.
async fn run_sequence(tc: &TestCluster) -> Vec<Result<(), u16>> {
    let pods: Api<Pod> = Api::default_namespaced(no_retry_client(tc));
    let code = |r: Result<(), kube::Error>| {
        r.map_err(|e| match e {
            kube::Error::Api(s) => s.code,
            other => panic!("unexpected error {other}"),
        })
    };
    let mut out = Vec::new();
    for i in 0..20 {
        let name = format!("r{i}");
        out.push(code(
            pods.create(&PostParams::default(), &pod(&name))
                .await
                .map(drop),
        ));
        out.push(code(pods.get(&name).await.map(drop)));
        out.push(code(pods.list(&ListParams::default()).await.map(drop)));
    }
    out
}

fn reproducible_faults() -> FaultConfig {
    FaultConfig::default()
        .with_error(ErrorRule::verb("create", 0.3, ErrorKind::Conflict))
        .with_error(ErrorRule::verb("get", 0.3, ErrorKind::InternalError))
        .with_error(ErrorRule::verb("list", 0.3, ErrorKind::Timeout))
        .with_latency(Latency::Uniform {
            min: Duration::ZERO,
            max: Duration::from_millis(3),
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_same_faults_different_seed_different_faults() {
    let mut logs = Vec::new();
    let mut outcomes = Vec::new();
    for seed in [42, 42, 43] {
        let tc = cluster(seed, reproducible_faults()).await;
        outcomes.push(run_sequence(&tc).await);
        logs.push(tc.faults().log());
        tc.shutdown().await;
    }
    assert!(
        logs[0]
            .iter()
            .any(|f| matches!(f.kind, FaultKind::Error(_)))
    );
    assert_eq!(logs[0], logs[1], "same seed, same request sequence");
    assert_eq!(outcomes[0], outcomes[1]);
    assert_ne!(logs[0], logs[2], "a different seed gives other faults");
    assert_ne!(outcomes[0], outcomes[2]);
}
