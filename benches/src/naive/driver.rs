//! Runs the scenario against one controller on a fresh testcluster.

use std::time::Duration;

use ctrlkit_informer::SharedInformerFactory;
use ctrlkit_replicaset::{ControllerOptions, ReplicaSetController};
use ctrlkit_testcluster::faults::FaultConfig;
use ctrlkit_testcluster::kubelet::KubeletConfig;
use ctrlkit_testcluster::{RequestStats, TestCluster, TestClusterConfig};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::controller::{NaiveController, PodSource};
use super::observe::Driver;
use super::report::{RunReport, StepReport};
use super::scenario::{Scenario, Subject};

/// The namespace the scenario runs in.
pub const NAMESPACE: &str = "compare";

/// Why a run could not be carried out (a controller that misbehaves is a
/// result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The scenario cannot be run as given.
    #[error("invalid scenario: {0}")]
    Scenario(String),
    /// The test cluster did not start.
    #[error("starting the test cluster failed: {0}")]
    Cluster(#[from] ctrlkit_testcluster::Error),
    /// A request of the driver failed.
    #[error("a request of the driver failed: {0}")]
    Kube(#[from] kube::Error),
    /// ctrlkit's controller could not be built or failed to run.
    #[error("ctrlkit's controller failed: {0}")]
    Ctrlkit(#[from] ctrlkit_replicaset::Error),
}

/// A controller under test, running.
enum Running {
    Ctrlkit {
        token: CancellationToken,
        task: JoinHandle<Result<(), ctrlkit_replicaset::Error>>,
        factory: Box<SharedInformerFactory>,
    },
    Naive(NaiveController),
}

impl Running {
    async fn start(subject: Subject, client: kube::Client) -> Result<Running, CompareError> {
        Ok(match subject {
            Subject::Ctrlkit => {
                let factory = SharedInformerFactory::new(client.clone());
                let options = ControllerOptions {
                    namespace: Some(NAMESPACE.to_owned()),
                    ..ControllerOptions::default()
                };
                let controller = ReplicaSetController::new(client, &factory, options, None)?;
                factory.start();
                let token = CancellationToken::new();
                let task = tokio::spawn(controller.run(token.clone()));
                Running::Ctrlkit {
                    token,
                    task,
                    factory: Box::new(factory),
                }
            }
            Subject::NaiveCache => {
                Running::Naive(NaiveController::start(client, NAMESPACE, PodSource::Cache).await)
            }
            Subject::NaiveShared => Running::Naive(
                NaiveController::start(client, NAMESPACE, PodSource::SharedCache).await,
            ),
            Subject::NaiveList => {
                Running::Naive(NaiveController::start(client, NAMESPACE, PodSource::List).await)
            }
        })
    }

    async fn stop(self) -> Result<(), CompareError> {
        match self {
            Running::Ctrlkit {
                token,
                task,
                factory,
            } => {
                token.cancel();
                let result = task.await;
                factory.shutdown().await;
                match result {
                    Ok(r) => r?,
                    // The task panicked: surface it where the run happens.
                    Err(e) => std::panic::resume_unwind(e.into_panic()),
                }
            }
            Running::Naive(naive) => naive.stop().await,
        }
        Ok(())
    }
}

/// Runs `scenario` against `subject` on a fresh test cluster with the
/// scenario's kubelet and watch delay, and reports what the controller
/// did. Uses tokio's clock, so it runs under paused time too.
pub async fn run(scenario: &Scenario, subject: Subject) -> Result<RunReport, CompareError> {
    if scenario.steps.is_empty() || scenario.replica_sets == 0 {
        return Err(CompareError::Scenario(
            "it needs at least one ReplicaSet and one step".into(),
        ));
    }
    let config = TestClusterConfig::default()
        .with_seed(scenario.seed)
        .with_kubelet(KubeletConfig::with_nodes(
            scenario.nodes,
            scenario.pods_per_node,
        ))
        .with_faults(FaultConfig::default().with_watch_delay(scenario.watch_delay));
    let cluster = TestCluster::start(config).await?;
    let result = drive(scenario, subject, &cluster).await;
    cluster.shutdown().await;
    result
}

async fn drive(
    scenario: &Scenario,
    subject: Subject,
    cluster: &TestCluster,
) -> Result<RunReport, CompareError> {
    let before = cluster.requests();
    let mut driver = Driver::new(cluster.client(), NAMESPACE);
    driver.create_namespace().await?;
    let running = Running::start(subject, cluster.client()).await?;
    let started = Instant::now();
    let names: Vec<String> = (0..scenario.replica_sets)
        .map(|i| format!("rs-{i}"))
        .collect();
    let mut steps = Vec::new();
    let mut peak_excess = 0;
    let mut previous = 0;
    for (i, &replicas) in scenario.steps.iter().enumerate() {
        for name in &names {
            if i == 0 {
                driver.create_replica_set(name, replicas).await?;
            } else {
                driver.scale(name, replicas).await?;
            }
        }
        let step = settle(
            scenario,
            cluster,
            &mut driver,
            replicas,
            previous.max(replicas),
        )
        .await?;
        peak_excess = peak_excess.max(step.peak_excess);
        steps.push(step);
        previous = replicas;
    }
    let wall = started.elapsed();
    running.stop().await?;
    let requests = cluster.requests().since(&before);
    Ok(RunReport::new(
        scenario,
        subject,
        &requests,
        driver.sent(),
        steps,
        wall,
    ))
}

/// Polls until the cluster shows `target` pods per ReplicaSet and no pod
/// was created or deleted for `scenario.settle`, or the deadline passes.
async fn settle(
    scenario: &Scenario,
    cluster: &TestCluster,
    driver: &mut Driver,
    target: i32,
    threshold: i32,
) -> Result<StepReport, CompareError> {
    let start = Instant::now();
    let mut stable_since: Option<(Instant, u64)> = None;
    let mut peak_excess = 0;
    loop {
        let look = driver.look(target, threshold).await?;
        let writes = pod_writes(&cluster.requests());
        let now = Instant::now();
        peak_excess = peak_excess.max(look.excess);
        stable_since = match stable_since {
            _ if !look.converged => None,
            Some((since, w)) if w == writes => {
                if now - since >= scenario.settle {
                    return Ok(StepReport {
                        replicas: target,
                        converged: true,
                        converge: since - start,
                        peak_excess,
                    });
                }
                Some((since, w))
            }
            _ => Some((now, writes)),
        };
        if now - start >= scenario.step_deadline {
            return Ok(StepReport {
                replicas: target,
                converged: false,
                converge: now - start,
                peak_excess,
            });
        }
        tokio::time::sleep(scenario.poll.max(Duration::from_millis(1))).await;
    }
}

/// Pod creations and deletions answered so far (any outcome).
fn pod_writes(stats: &RequestStats) -> u64 {
    stats.count("create", "pods").total() + stats.count("delete", "pods").total()
}
