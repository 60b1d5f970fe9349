//! A ReplicaSet controller written the way an operator author would with
//! kube-runtime's `Controller` alone.
//!
//! `Controller::new(Api<ReplicaSet>).owns(Api<Pod>)` triggers a reconcile
//! whenever a ReplicaSet or one of its pods changes. The reconcile reads
//! the ReplicaSet's pods, creates the difference (generateName and a
//! controller reference) or deletes the surplus, and writes the status when
//! it changed. There is no bookkeeping of creations and deletions that are
//! in flight: the pod list it reads is the only memory it has.
//!
//! With [`PodSource::Cache`] the pods come from a reflector store (as kube-rs
//! examples keep one), fed by its own pod watch: cheap, but after a create
//! the store does not show the new pod until its watch event arrives; and
//! with kube-runtime's stable API `owns` opens a second pod watch for the
//! triggers, so a reconcile may also start before the store shows the
//! event that triggered it. [`PodSource::SharedCache`] feeds the store and
//! the triggers from one pod watch. With [`PodSource::List`] every
//! reconcile lists the pods live with the ReplicaSet's label selector:
//! never stale, one LIST request per reconcile.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ParseExpressionError, Selector, SelectorExt};
use kube::runtime::controller::{
    Action, Config, Controller, applier, trigger_owners, trigger_self,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Where the reconcile reads a ReplicaSet's pods from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodSource {
    /// A reflector store fed by a pod watch (may lag the API server).
    Cache,
    /// A live LIST with the ReplicaSet's selector in every reconcile.
    List,
    /// A reflector store fed by the same pod watch that triggers the
    /// reconciles, so the store is never behind the trigger (what
    /// kube-runtime's unstable `owns_shared_stream` gives; built here from
    /// its stable `applier` and trigger functions).
    SharedCache,
}

/// Why a reconcile failed; kube-runtime requeues the ReplicaSet after
/// [`RETRY_AFTER`].
#[derive(Debug, thiserror::Error)]
pub enum NaiveError {
    /// The ReplicaSet's label selector cannot be turned into a selector.
    #[error("ReplicaSet {name} has an invalid selector: {source}")]
    Selector {
        /// The ReplicaSet.
        name: String,
        /// Why the selector was refused.
        source: ParseExpressionError,
    },
    /// A request to the API server failed.
    #[error("API request failed: {0}")]
    Kube(#[from] kube::Error),
}

/// How long kube-runtime waits before retrying a failed reconcile.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

/// What the reconcile needs.
struct Context {
    client: Client,
    /// `Some` for [`PodSource::Cache`].
    pods: Option<Store<Pod>>,
}

/// A running naive controller; stop it with [`NaiveController::stop`].
pub struct NaiveController {
    token: CancellationToken,
    controller: JoinHandle<()>,
    reflector: Option<JoinHandle<()>>,
}

impl NaiveController {
    /// Starts the controller for the ReplicaSets of `namespace` on the
    /// current tokio runtime. With [`PodSource::Cache`] it first waits for
    /// the pod store's initial list, as an operator would before serving.
    pub async fn start(client: Client, namespace: &str, source: PodSource) -> NaiveController {
        let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
        let pods_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let token = CancellationToken::new();
        let shutdown = token.clone().cancelled_owned();
        let config = watcher::Config::default;
        let (controller, reflector) = match source {
            PodSource::Cache => {
                let (reader, writer) = reflector::store();
                let stream = reflector::reflector(writer, watcher(pods_api.clone(), config()))
                    .default_backoff()
                    .touched_objects()
                    .for_each(|_| futures::future::ready(()));
                let task = tokio::spawn(stream);
                // Only fails if the writer is gone, i.e. the task ended.
                let _ = reader.wait_until_ready().await;
                let context = Arc::new(Context {
                    client,
                    pods: Some(reader),
                });
                let run = Controller::new(replica_sets, config())
                    .owns(pods_api, config())
                    .graceful_shutdown_on(shutdown)
                    .run(reconcile, error_policy, context)
                    .for_each(|_| futures::future::ready(()));
                (tokio::spawn(run), Some(task))
            }
            PodSource::List => {
                let context = Arc::new(Context { client, pods: None });
                let run = Controller::new(replica_sets, config())
                    .owns(pods_api, config())
                    .graceful_shutdown_on(shutdown)
                    .run(reconcile, error_policy, context)
                    .for_each(|_| futures::future::ready(()));
                (tokio::spawn(run), None)
            }
            PodSource::SharedCache => {
                let (owner_store, owner_writer) = reflector::store();
                let (pod_store, pod_writer) = reflector::store();
                let owners = reflector::reflector(owner_writer, watcher(replica_sets, config()))
                    .default_backoff()
                    .touched_objects();
                let pods = reflector::reflector(pod_writer, watcher(pods_api, config()))
                    .default_backoff()
                    .touched_objects();
                let queue = futures::stream::select(
                    trigger_self(owners, ()),
                    trigger_owners::<ReplicaSet, _>(pods, (), ()),
                )
                .take_until(shutdown);
                let context = Arc::new(Context {
                    client,
                    pods: Some(pod_store),
                });
                let run = applier(
                    |rs, ctx| Box::pin(reconcile(rs, ctx)),
                    error_policy,
                    context,
                    owner_store,
                    queue,
                    Config::default(),
                )
                .for_each(|_| futures::future::ready(()));
                (tokio::spawn(run), None)
            }
        };
        NaiveController {
            token,
            controller,
            reflector,
        }
    }

    /// Stops triggering reconciles, waits for those running, and stops the
    /// pod watch.
    pub async fn stop(self) {
        self.token.cancel();
        let _ = self.controller.await;
        if let Some(task) = self.reflector {
            task.abort();
            let _ = task.await;
        }
    }
}

fn error_policy(_rs: Arc<ReplicaSet>, _error: &NaiveError, _ctx: Arc<Context>) -> Action {
    Action::requeue(RETRY_AFTER)
}

async fn reconcile(rs: Arc<ReplicaSet>, ctx: Arc<Context>) -> Result<Action, NaiveError> {
    let (Some(namespace), Some(uid)) = (rs.namespace(), rs.uid()) else {
        return Ok(Action::await_change());
    };
    let spec = &rs.spec;
    if rs.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = rs.name_any();
    let selector =
        Selector::try_from(spec.selector.clone()).map_err(|source| NaiveError::Selector {
            name: name.clone(),
            source,
        })?;
    if let Some(store) = &ctx.pods {
        // Before the first list the store is empty; only fails if the
        // writer is gone.
        let _ = store.wait_until_ready().await;
    }
    let mut pods = owned_pods(&ctx, &namespace, &uid, &selector).await?;
    let want = usize::try_from(spec.replicas.unwrap_or(1)).unwrap_or(0);
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &namespace);

    if pods.len() < want {
        let pod = pod_for(&rs, &uid);
        for _ in pods.len()..want {
            api.create(&PostParams::default(), &pod).await?;
        }
    } else if pods.len() > want {
        // Not-ready pods go first.
        pods.sort_by_key(is_ready);
        for pod in &pods[..pods.len() - want] {
            match api.delete(&pod.name_any(), &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    write_status(&ctx.client, &rs, &namespace, &pods).await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// The active pods matching the selector that this ReplicaSet controls.
async fn owned_pods(
    ctx: &Context,
    namespace: &str,
    uid: &str,
    selector: &Selector,
) -> Result<Vec<Pod>, NaiveError> {
    let candidates: Vec<Pod> = match &ctx.pods {
        Some(store) => store
            .state()
            .into_iter()
            .filter(|p| p.namespace().as_deref() == Some(namespace))
            .map(|p| (*p).clone())
            .collect(),
        None => {
            let api: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
            let params = ListParams::default().labels(&selector.to_string());
            api.list(&params).await?.items
        }
    };
    Ok(candidates
        .into_iter()
        .filter(|p| selector.matches(p.labels()))
        .filter(|p| controlled_by(p, uid))
        .filter(is_active)
        .collect())
}

fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

fn is_active(pod: &Pod) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    pod.meta().deletion_timestamp.is_none() && !matches!(phase, Some("Succeeded" | "Failed"))
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A pod from the ReplicaSet's template, named `<rs>-<random>` by the
/// server and controlled by the ReplicaSet.
fn pod_for(rs: &ReplicaSet, uid: &str) -> Pod {
    let template = rs.spec.template.clone().unwrap_or_default();
    let labels = template.metadata.as_ref().and_then(|m| m.labels.clone());
    let annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone());
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", rs.name_any())),
            labels,
            annotations,
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name: rs.name_any(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// Writes `replicas`, `readyReplicas`, `availableReplicas`,
/// `fullyLabeledReplicas` and `observedGeneration` as seen in this
/// reconcile, unless the ReplicaSet already shows them.
async fn write_status(
    client: &Client,
    rs: &ReplicaSet,
    namespace: &str,
    pods: &[Pod],
) -> Result<(), NaiveError> {
    let replicas = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    let ready = i32::try_from(pods.iter().filter(|p| is_ready(p)).count()).unwrap_or(i32::MAX);
    let generation = rs.metadata.generation;
    let current = rs.status.as_ref();
    let unchanged = current.is_some_and(|s| {
        s.replicas == replicas
            && s.ready_replicas.unwrap_or(0) == ready
            && s.available_replicas.unwrap_or(0) == ready
            && s.observed_generation == generation
    });
    if unchanged {
        return Ok(());
    }
    let patch = json!({"status": {
        "replicas": replicas,
        "fullyLabeledReplicas": replicas,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "observedGeneration": generation,
    }});
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    api.patch_status(
        &rs.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}
