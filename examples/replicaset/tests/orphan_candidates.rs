//! A sync reads only the orphans its selector could match (through the
//! orphan label index), and adopts exactly the ones it adopted before:
//! equality, set-based-only and mixed selectors, for both owner kinds.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Harness, NS, PodSpec, replica_set_from, replication_controller};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::ReplicationController;
use serde_json::{Value, json};

/// A ReplicaSet `web` with `replicas`, `selector` and template labels.
fn replica_set(replicas: i32, selector: Value, template_labels: Value) -> ReplicaSet {
    replica_set_from(json!({
        "metadata": {
            "name": "web", "namespace": NS, "uid": "uid-web",
            "resourceVersion": "18", "generation": 1
        },
        "spec": {
            "replicas": replicas,
            "selector": selector,
            "template": {
                "metadata": {"labels": template_labels},
                "spec": {"containers": [{"name": "c", "image": "foo/bar"}]}
            }
        }
    }))
}

/// A running orphan with `labels`.
fn orphan(labels: Value) -> PodSpec {
    let mut spec = PodSpec::running("unused");
    spec.labels = labels;
    spec
}

/// The names of the adopted pods, sorted.
fn adopted<O: ctrlkit_replicaset::ReplicaOwner>(h: &Harness<O>) -> Vec<String> {
    let mut names: Vec<_> = h.fake.patches().into_iter().map(|(n, _)| n).collect();
    names.sort();
    names
}

#[tokio::test]
async fn only_orphans_with_every_selected_label_are_adopted() {
    let h = Harness::<ReplicaSet>::new();
    let labels = json!({"app": "web", "tier": "fe"});
    h.owner(&replica_set(
        3,
        json!({"matchLabels": labels.clone()}),
        labels.clone(),
    ));
    h.pod(&orphan(json!({"app": "web", "tier": "fe", "extra": "x"})).build("match"));
    h.pod(&orphan(json!({"app": "web"})).build("half"));
    h.pod(&orphan(json!({"app": "db", "tier": "fe"})).build("other-app"));
    h.pod(&orphan(json!({"team": "x"})).build("unrelated"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(adopted(&h), ["match"]);
    assert_eq!(h.fake.create_count(), 2);
}

#[tokio::test]
async fn set_based_only_selectors_still_adopt_every_matching_orphan() {
    let h = Harness::<ReplicaSet>::new();
    h.owner(&replica_set(
        2,
        json!({"matchExpressions": [
            {"key": "app", "operator": "In", "values": ["web", "canary"]},
            {"key": "legacy", "operator": "DoesNotExist"}
        ]}),
        json!({"app": "web"}),
    ));
    h.pod(&orphan(json!({"app": "web"})).build("web"));
    h.pod(&orphan(json!({"app": "canary"})).build("canary"));
    h.pod(&orphan(json!({"app": "web", "legacy": "yes"})).build("legacy"));
    h.pod(&orphan(json!({"app": "db"})).build("db"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(adopted(&h), ["canary", "web"]);
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test]
async fn mixed_selectors_narrow_by_equality_and_filter_the_rest() {
    let h = Harness::<ReplicaSet>::new();
    h.owner(&replica_set(
        2,
        json!({
            "matchLabels": {"tier": "fe"},
            "matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["db"]}]
        }),
        json!({"tier": "fe", "app": "web"}),
    ));
    h.pod(&orphan(json!({"tier": "fe", "app": "web"})).build("web"));
    h.pod(&orphan(json!({"tier": "fe"})).build("no-app"));
    h.pod(&orphan(json!({"tier": "fe", "app": "db"})).build("db"));
    h.pod(&orphan(json!({"app": "web"})).build("no-tier"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(adopted(&h), ["no-app", "web"]);
    assert_eq!(h.fake.create_count(), 0);
}

#[tokio::test]
async fn replication_controllers_adopt_through_the_index_too() {
    let h = Harness::<ReplicationController>::new();
    h.owner(&replication_controller("legacy", 2, "legacy"));
    h.pod(&orphan(json!({"app": "legacy", "x": "y"})).build("match"));
    h.pod(&orphan(json!({"app": "other"})).build("other"));
    h.controller
        .sync(&common::key("default/legacy"))
        .await
        .unwrap();
    assert_eq!(adopted(&h), ["match"]);
    assert_eq!(h.fake.create_count(), 1);
}

#[tokio::test]
async fn an_orphan_relabelled_to_match_is_adopted_by_the_next_sync() {
    let h = Harness::<ReplicaSet>::new();
    h.owner(&replica_set(
        1,
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web"}),
    ));
    // Enough pods already, plus an orphan that does not match.
    let rs = replica_set(
        1,
        json!({"matchLabels": {"app": "web"}}),
        json!({"app": "web"}),
    );
    h.pod(&PodSpec::running("web").owned_by(&rs).build("mine"));
    h.pod(&orphan(json!({"app": "db"})).build("stray"));
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert!(adopted(&h).is_empty());

    // Relabelled: now the index lists it under app=web, and it is adopted
    // (then deleted as surplus by a later sync, as before).
    let mut relabelled = orphan(json!({"app": "web"})).build("stray");
    relabelled.metadata.resource_version = Some("2".into());
    h.pod(&relabelled);
    h.controller
        .sync(&common::key("default/web"))
        .await
        .unwrap();
    assert_eq!(adopted(&h), ["stray"]);
}
