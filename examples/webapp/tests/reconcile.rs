//! The WebApp controller as declared for production, on informers fed by
//! hand and fakes for every write, on paused time: children, updates,
//! status and conditions, the finalizer, deletion and bad input.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use ctrlkit::childcontrol::{ChildControlError, Operation, WriteGate};
use ctrlkit::runtime::manager::FenceDriver;
use ctrlkit_example_webapp::resource::{FINALIZER, WebAppSpec};
use ctrlkit_example_webapp::status::{DEGRADED, PROGRESSING, READY};
use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::api::core::v1::Service;
use kube::api::Patch;
use kube::runtime::watcher::Event;
use kube::{Resource, ResourceExt};
use serde_json::json;

#[tokio::test(start_paused = true)]
async fn a_new_webapp_gets_its_children_route_finalizer_and_status() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    // One of each child, controlled by the WebApp, named after it.
    let cms = h.cm_control.created();
    let deploys = h.deploy_control.created();
    let svcs = h.svc_control.created();
    assert_eq!((cms.len(), deploys.len(), svcs.len()), (1, 1, 1));
    assert_eq!(cms[0].name_any(), "web-config");
    assert_eq!(cms[0].data.as_ref().unwrap()["index.html"], "hello");
    assert_eq!(deploys[0].name_any(), "web");
    assert_eq!(svcs[0].name_any(), "web");
    for cref in [
        h.cm_control.controller_refs(),
        h.deploy_control.controller_refs(),
        h.svc_control.controller_refs(),
    ]
    .concat()
    {
        assert_eq!(
            (
                cref.kind.as_str(),
                cref.api_version.as_str(),
                cref.uid.as_str()
            ),
            ("WebApp", "example.ctrlkit.dev/v1", "uid-web")
        );
        assert_eq!(
            (cref.controller, cref.block_owner_deletion),
            (Some(true), Some(true))
        );
    }
    // Events go on the WebApp.
    assert_eq!(
        h.svc_control.creates()[0].owner.name.as_deref(),
        Some("web")
    );

    // The finalizer comes before the route it guards.
    assert_eq!(
        h.api.writes(),
        [
            Call::AddFinalizer("web".into()),
            Call::SetRoute("shop.web".into(), "http://web.shop.svc:8080".into()),
        ]
    );
    assert_eq!(h.webapp("web").finalizers(), [FINALIZER]);
    assert_eq!(
        h.api.routes().unwrap()["shop.web"],
        "http://web.shop.svc:8080"
    );

    // Rolling out: the status says so, for generation 1.
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(status.url.as_deref(), Some("http://web.shop.svc:8080"));
    assert_eq!(
        condition(&status, READY),
        ("False".into(), "RolloutInProgress".into())
    );
    assert_eq!(
        condition(&status, PROGRESSING),
        ("True".into(), "RolloutInProgress".into())
    );
    assert_eq!(
        condition(&status, DEGRADED),
        ("False".into(), "AsExpected".into())
    );

    // The Deployment controller reports 2 then 3 ready pods.
    h.deployment_ready("web", 2);
    h.converge().await;
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(status.ready_replicas, 2);
    assert_eq!(condition(&status, READY).0, "False");
    h.deployment_ready("web", 3);
    h.converge().await;
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(status.ready_replicas, 3);
    assert_eq!(
        condition(&status, READY),
        ("True".into(), "RolloutComplete".into())
    );
    assert_eq!(
        condition(&status, PROGRESSING),
        ("False".into(), "RolloutComplete".into())
    );
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.observed_generation == Some(1))
    );

    // Nothing is ever created twice, and the only patches were statuses.
    assert_eq!(
        h.cm_control.create_count()
            + h.deploy_control.create_count()
            + h.svc_control.create_count(),
        3
    );
    assert_eq!(
        h.cm_control.patch_count() + h.deploy_control.patch_count() + h.svc_control.patch_count(),
        0
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_resync_of_a_converged_webapp_writes_nothing() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;
    h.deployment_ready("web", 3);
    h.converge().await;
    let writes = h.write_count();

    h.webapps.resync_now();
    h.configmaps.resync_now();
    h.deployments.resync_now();
    h.services.resync_now();
    h.routes.resync_now();
    h.settle().await;
    assert_eq!(h.write_count(), writes, "{:?}", h.api.calls());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_spec_change_patches_the_children_and_moves_observed_generation() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;
    h.deployment_ready("web", 3);
    h.converge().await;

    h.edit("web", |app| {
        app.spec.image = "nginx:1.28".into();
        app.spec.replicas = 5;
        app.spec.config = Some([("app.conf".to_string(), "x=1".to_string())].into());
    });
    h.converge().await;

    let deploy_patch = &h.deploy_control.patches()[0];
    let Patch::Merge(body) = &deploy_patch.patch else {
        panic!()
    };
    assert_eq!(body["spec"]["replicas"], 5);
    assert_eq!(
        body["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert_eq!(
        body["metadata"]["uid"],
        h.deployment("web").meta().uid.clone().unwrap()
    );
    let Patch::Merge(cm_body) = &h.cm_control.patches()[0].patch else {
        panic!()
    };
    assert_eq!(
        cm_body["data"],
        json!({"app.conf": "x=1", "index.html": null})
    );
    assert_eq!(h.svc_control.patch_count(), 0, "the Service did not change");
    assert_eq!(
        h.deploy_control.create_count(),
        1,
        "updated, not re-created"
    );

    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(
        condition(&status, PROGRESSING),
        ("True".into(), "RolloutInProgress".into())
    );
    assert_eq!(condition(&status, READY).0, "False");

    // The new pods come up.
    h.deployment_ready("web", 5);
    h.converge().await;
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(
        condition(&status, READY),
        ("True".into(), "RolloutComplete".into())
    );
    assert_eq!(status.ready_replicas, 5);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_child_changed_by_hand_is_put_back() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    let mut svc = (*h.services.store().get(NS, "web").unwrap()).clone();
    svc.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 9999;
    svc.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("team".into(), "blue".into());
    h.services.apply_event(Event::Apply(h.stamp(svc)));
    h.converge().await;

    let Patch::Merge(body) = &h.svc_control.patches()[0].patch else {
        panic!()
    };
    assert_eq!(body["spec"]["ports"][0]["port"], 8080);
    assert!(
        body["metadata"].get("labels").is_none(),
        "others' labels are left alone"
    );
    let svc = h.services.store().get(NS, "web").unwrap();
    assert_eq!(
        svc.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port,
        8080
    );
    assert_eq!(svc.labels()["team"], "blue");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn deletion_removes_the_route_then_the_finalizer_and_leaves_children_to_gc() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.apply(h.new_app("api", spec()));
    h.converge().await;
    assert_eq!(h.api.routes().unwrap().len(), 2);

    h.delete("web");
    h.converge().await;

    let writes = h.api.writes();
    let tail: Vec<_> = writes.iter().rev().take(2).rev().cloned().collect();
    assert_eq!(
        tail,
        [
            Call::RemoveRoute("shop.web".into()),
            Call::RemoveFinalizer("web".into())
        ]
    );
    assert!(
        h.webapps.store().get(NS, "web").is_none(),
        "the API server deleted it"
    );
    let routes = h.api.routes().unwrap();
    assert!(!routes.contains_key("shop.web"));
    assert_eq!(
        routes["shop.api"], "http://api.shop.svc:8080",
        "other entries kept"
    );
    // Children carry controller references: the garbage collector's job.
    let deletes = h.cm_control.delete_count()
        + h.deploy_control.delete_count()
        + h.svc_control.delete_count();
    assert_eq!(deletes, 0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_webapp_gone_without_the_finalizer_still_loses_its_route() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    // Someone removed the finalizer by hand, and the WebApp went at once.
    let app = (*h.webapp("web")).clone();
    h.webapps.apply_event(Event::Delete(app));
    h.converge().await;
    assert_eq!(
        h.api.writes().last(),
        Some(&Call::RemoveRoute("shop.web".into()))
    );
    assert!(h.api.routes().unwrap().is_empty());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_route_removed_from_the_routes_configmap_is_put_back() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    // The routes ConfigMap is deleted: the watch maps its entries to their
    // WebApps, which register again.
    let cached = h.routes.store().get(OPS, "webapp-routes").unwrap();
    h.routes.apply_event(Event::Delete((*cached).clone()));
    h.converge().await;
    let sets = h
        .api
        .writes()
        .into_iter()
        .filter(|c| matches!(c, Call::SetRoute(..)))
        .count();
    assert_eq!(sets, 2);
    assert!(h.routes.store().get(OPS, "webapp-routes").is_some());
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_spec_is_reported_once_and_nothing_is_built() {
    // What the schema would reject on a real server, plus what it cannot
    // express: a name that is no Service name, a bad config key.
    let h = Harness::start().await;
    let bad = WebAppSpec {
        image: String::new(),
        replicas: 500,
        port: 70000,
        config: Some([("../etc".to_string(), "x".to_string())].into()),
    };
    h.apply(h.new_app("web.v2", bad));
    h.converge().await;

    assert_eq!(
        h.write_count(),
        2,
        "one status, one event: {:?}",
        h.api.calls()
    );
    let status = h.webapp("web.v2").status.clone().unwrap();
    assert_eq!(
        condition(&status, READY),
        ("False".into(), "InvalidSpec".into())
    );
    assert_eq!(
        condition(&status, DEGRADED),
        ("True".into(), "InvalidSpec".into())
    );
    assert_eq!(condition(&status, PROGRESSING).0, "False");
    assert_eq!(status.url, None);
    assert_eq!(status.observed_generation, Some(1));
    let message = &status.conditions[0].message;
    for expected in [
        "metadata.name",
        "spec.image: Required value",
        "spec.replicas",
        "spec.port",
        "spec.config",
    ] {
        assert!(
            message.contains(expected),
            "{expected} missing from {message}"
        );
    }
    assert_eq!(
        h.api.warnings(),
        [("InvalidSpec".to_string(), message.clone())]
    );
    assert!(
        h.webapp("web.v2").finalizers().is_empty(),
        "no route, no finalizer"
    );

    // A resync changes nothing; not retried either.
    h.webapps.resync_now();
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(h.write_count(), 2);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn fixing_an_invalid_spec_builds_the_app() {
    let h = Harness::start().await;
    h.apply(h.new_app(
        "web",
        WebAppSpec {
            image: " ".into(),
            ..spec()
        },
    ));
    h.converge().await;
    assert_eq!(h.deploy_control.create_count(), 0);

    h.edit("web", |app| app.spec.image = "nginx:1.27".into());
    h.converge().await;
    assert_eq!(h.deploy_control.create_count(), 1);
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(
        condition(&status, DEGRADED),
        ("False".into(), "AsExpected".into())
    );
    assert_eq!(status.url.as_deref(), Some("http://web.shop.svc:8080"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn an_invalid_change_leaves_the_running_app_alone() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;
    let children = h.write_count() - h.api.calls().len();

    h.edit("web", |app| app.spec.port = 0);
    h.converge().await;
    assert_eq!(
        h.write_count() - h.api.calls().len(),
        children,
        "no child touched"
    );
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(
        condition(&status, READY),
        ("False".into(), "InvalidSpec".into())
    );
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(
        status.url.as_deref(),
        Some("http://web.shop.svc:8080"),
        "still served"
    );
    assert_eq!(
        h.api.routes().unwrap()["shop.web"],
        "http://web.shop.svc:8080"
    );
    assert_eq!(h.webapp("web").finalizers(), [FINALIZER]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_refused_create_is_reported_with_the_server_message_and_retried() {
    let h = Harness::start().await;
    h.deploy_control.fail_next_op(Operation::Create, 1, || {
        ChildControlError::api_status(
            403,
            "Forbidden",
            "exceeded quota: compute, requested: pods=3",
        )
    });
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    let failed = h.api.statuses()[0].clone();
    assert_eq!(
        condition(&failed, DEGRADED),
        ("True".into(), "FailedCreate".into())
    );
    let message = &failed.conditions[2].message;
    assert_eq!(
        message,
        "creating Deployment web: exceeded quota: compute, requested: pods=3"
    );
    assert!(
        h.api.warnings().is_empty(),
        "the child control records FailedCreate itself"
    );

    // Retried with backoff: created, and the status recovers.
    tokio::time::sleep(Duration::from_secs(1)).await;
    h.converge().await;
    assert_eq!(h.deploy_control.created().len(), 1);
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(
        condition(&status, DEGRADED),
        ("False".into(), "AsExpected".into())
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_child_name_taken_by_another_object_is_a_conflict() {
    let mut squatter = Service::default();
    squatter.metadata.namespace = Some(NS.into());
    squatter.metadata.name = Some("web".into());
    squatter.metadata.uid = Some("someone-elses".into());
    let h = Harness::start_with(vec![], vec![squatter]).await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;

    assert_eq!(
        (h.svc_control.create_count(), h.svc_control.patch_count()),
        (0, 0)
    );
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(
        condition(&status, DEGRADED),
        ("True".into(), "ChildConflict".into())
    );
    let warnings = h.api.warnings();
    assert_eq!(warnings.len(), 1);
    assert_eq!(
        warnings[0].1,
        "Service web exists and is not controlled by this WebApp"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stalled_rollout_is_degraded() {
    let h = Harness::start().await;
    h.apply(h.new_app("web", spec()));
    h.converge().await;
    let mut d = (*h.deployment("web")).clone();
    d.status = Some(DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(3),
        updated_replicas: Some(3),
        conditions: Some(vec![DeploymentCondition {
            type_: text("Progressing"),
            status: text("False"),
            reason: Some("ProgressDeadlineExceeded".into()),
            message: Some("ReplicaSet \"web-5d9\" has timed out progressing.".into()),
            ..DeploymentCondition::default()
        }]),
        ..DeploymentStatus::default()
    });
    h.deployments.apply_event(Event::Apply(h.stamp(d)));
    h.converge().await;
    let status = h.webapp("web").status.clone().unwrap();
    assert_eq!(
        condition(&status, DEGRADED),
        ("True".into(), "ProgressDeadlineExceeded".into())
    );
    assert_eq!(
        h.api.warnings(),
        [(
            "ProgressDeadlineExceeded".to_string(),
            "ReplicaSet \"web-5d9\" has timed out progressing.".to_string()
        )]
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_stand_by_writes_nothing_not_even_a_status() {
    let h = Harness::start().await;
    // The manager's fence on a replica that has not won the lease.
    let gate: Arc<dyn WriteGate> = Arc::new(FenceDriver::new(Duration::from_secs(10)).fence());
    h.cm_control.set_write_gate(Some(gate.clone()));
    h.deploy_control.set_write_gate(Some(gate.clone()));
    h.svc_control.set_write_gate(Some(gate.clone()));
    h.api.set_write_gate(Some(Arc::clone(&gate)));
    h.apply(h.new_app("web", spec()));
    h.settle().await;
    h.deliver();
    h.settle().await;

    assert!(h.cm_control.created().is_empty() && h.deploy_control.created().is_empty());
    assert!(h.api.statuses().is_empty(), "{:?}", h.api.calls());
    assert!(h.webapp("web").status.is_none());
    h.stop().await;
}

/// A string field that is optional in some Kubernetes versions only.
fn text<T: From<String>>(s: &str) -> T {
    T::from(s.to_owned())
}

#[test]
fn zero_workers_is_a_build_error_not_a_panic() {
    use clap::Parser;
    use ctrlkit::runtime::manager::Manager;
    use ctrlkit_example_webapp::controller::{Cli, NAME, controller};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client =
            kube::Client::try_from(kube::Config::new("http://127.0.0.1:1".parse().unwrap()))
                .unwrap();
        let cli = Cli::try_parse_from(["webapp-operator", "--workers", "0"]).unwrap();
        let mut manager = Manager::with_client(client, cli.manager.config(NAME)).unwrap();
        let err = controller(&mut manager, &cli).unwrap_err();
        assert!(err.to_string().contains("worker"), "{err}");
    });
}
