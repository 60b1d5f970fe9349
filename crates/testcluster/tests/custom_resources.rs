//! CustomResourceDefinitions served end to end through kube-client: the
//! definition's lifecycle (established within its create, names
//! conflicts, updates, deletion with its objects), and custom objects
//! with schema defaults, pruning and validation, generation,
//! subresources, several versions, patches, watches and finalizers.
#![allow(clippy::unwrap_used)]

mod common;

use common::crds::{crontab, crontab_object, crontab_version};
use common::{api_error, eventually, start};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::{Value, json};

fn crontabs(client: &kube::Client, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("stable.example.com", version, "CronTab");
    Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(&gvk, "crontabs"),
    )
}

fn dynamic(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

fn crd_api(client: &kube::Client) -> Api<CustomResourceDefinition> {
    Api::all(client.clone())
}

async fn create_crd(client: &kube::Client, crd: Value) -> CustomResourceDefinition {
    crd_api(client)
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .unwrap()
}

fn condition(crd: &Value, kind: &str) -> Value {
    crd["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or(Value::Null)
}

async fn get_json(client: &kube::Client, path: &str) -> Value {
    client
        .request(http::Request::get(path).body(Vec::new()).unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_is_established_and_served_within_its_create() {
    let cluster = start().await;
    let client = cluster.client();
    let created = create_crd(&client, crontab()).await;
    // The first custom object right after the definition: no waiting.
    let obj = crontabs(&client, "v1")
        .create(
            &PostParams::default(),
            &dynamic(crontab_object("first", "* * * * */5")),
        )
        .await
        .unwrap();
    assert_eq!(obj.metadata.generation, Some(1));
    // The create answered the definition as stored; its status follows.
    assert_eq!(created.status.unwrap().stored_versions.unwrap(), ["v1"]);
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("crontabs.stable.example.com")
            .await
            .unwrap(),
    )
    .unwrap();
    let names = condition(&crd, "NamesAccepted");
    assert_eq!(
        (&names["status"], &names["reason"], &names["message"]),
        (
            &json!("True"),
            &json!("NoConflicts"),
            &json!("no conflicts found")
        )
    );
    let established = condition(&crd, "Established");
    assert_eq!(
        (
            &established["status"],
            &established["reason"],
            &established["message"]
        ),
        (
            &json!("True"),
            &json!("InitialNamesAccepted"),
            &json!("the initial names have been accepted")
        )
    );
    assert_eq!(
        crd["status"]["acceptedNames"],
        json!({"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList",
               "shortNames": ["ct"], "categories": ["all"]})
    );
    assert_eq!(crd["metadata"]["generation"], 1);

    // Legacy and aggregated discovery list it with its short name,
    // category and subresources.
    let list = get_json(&client, "/apis/stable.example.com/v1").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["crontabs", "crontabs/scale", "crontabs/status"]);
    assert_eq!(list["resources"][0]["shortNames"], json!(["ct"]));
    assert_eq!(list["resources"][0]["categories"], json!(["all"]));
    let discovery = kube::discovery::Discovery::new(client.clone())
        .run_aggregated()
        .await
        .unwrap();
    let gvk = GroupVersionKind::gvk("stable.example.com", "v1", "CronTab");
    let (ar, caps) = discovery.resolve_gvk(&gvk).unwrap();
    assert_eq!(ar.plural, "crontabs");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "scale"));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_objects_are_defaulted_pruned_and_validated() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    let mut body = crontab_object("defaulted", "* * * * */5");
    body["spec"]["unknown"] = json!("pruned");
    body["status"] = json!({"replicas": 9});
    let obj = api
        .create(&PostParams::default(), &dynamic(body))
        .await
        .unwrap();
    assert_eq!(obj.data["spec"]["replicas"], 1, "default from the schema");
    assert!(obj.data["spec"].get("unknown").is_none(), "pruned");
    assert!(obj.data.get("status").is_none(), "create cannot set status");

    // Validation: 422 with kube-apiserver's message and causes.
    let mut bad = crontab_object("bad", "every minute");
    bad["spec"]["replicas"] = json!(15);
    let err = api_error(api.create(&PostParams::default(), &dynamic(bad)).await);
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "CronTab.stable.example.com \"bad\" is invalid: [spec.cronSpec: Invalid value: \"every minute\": \
         spec.cronSpec in body should match '^(\\d+|\\*)(/\\d+)?(\\s+(\\d+|\\*)(/\\d+)?){4}$', \
         spec.replicas: Invalid value: 15: spec.replicas in body should be less than or equal to 10]"
    );
    let raw: Value = client
        .request::<Value>(
            http::Request::post("/apis/stable.example.com/v1/namespaces/default/crontabs")
                .header("content-type", "application/json")
                .body(
                    serde_json::to_vec(
                        &json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                    "metadata": {"name": "norequired"}, "spec": {}}),
                    )
                    .unwrap(),
                )
                .unwrap(),
        )
        .await
        .map_err(|e| match e {
            kube::Error::Api(s) => serde_json::to_value(*s).unwrap(),
            other => panic!("{other}"),
        })
        .unwrap_err();
    assert_eq!(
        raw["details"],
        json!({"name": "norequired", "group": "stable.example.com", "kind": "CronTab",
               "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.cronSpec"}]})
    );
    // Nothing invalid was stored; updates and patches are validated too.
    assert_eq!(
        api.list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
    let err = api_error(
        api.patch(
            "defaulted",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": -1}})),
        )
        .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("spec.replicas in body should be greater than or equal to 0"),
        "{}",
        err.message
    );
    let unchanged = api.get("defaulted").await.unwrap();
    assert_eq!(unchanged.data["spec"]["replicas"], 1);
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generation_status_and_scale_subresources() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    api.create(
        &PostParams::default(),
        &dynamic(crontab_object("job", "* * * * */5")),
    )
    .await
    .unwrap();
    // Metadata changes keep the generation; anything else bumps it.
    let labelled = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(1));
    let changed = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"image": "nginx"}})),
        )
        .await
        .unwrap();
    assert_eq!(changed.metadata.generation, Some(2));
    // The main resource ignores status; the status subresource writes
    // only status and keeps the generation.
    let ignored = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 4}})),
        )
        .await
        .unwrap();
    assert!(ignored.data.get("status").is_none());
    let status = api
        .patch_status(
            "job",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"replicas": 2, "selector": "app=job"}, "spec": {"image": "x"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["replicas"], 2);
    assert_eq!(status.data["spec"]["image"], "nginx");
    assert_eq!(status.metadata.generation, Some(2));
    // Scale reads the declared paths and writes spec.replicas.
    let scale: Value = get_json(
        &client,
        "/apis/stable.example.com/v1/namespaces/default/crontabs/job/scale",
    )
    .await;
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(
        scale["status"],
        json!({"replicas": 2, "selector": "app=job"})
    );
    let scaled = api
        .patch_scale(
            "job",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let after = api.get("job").await.unwrap();
    assert_eq!(after.data["spec"]["replicas"], 3);
    assert_eq!(after.metadata.generation, Some(3));
    // Strategic merge is not for custom resources: 415 as kube-apiserver.
    let err = api_error(
        api.patch(
            "job",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"image": "y"}})),
        )
        .await,
    );
    assert_eq!(err.code, 415);
    assert_eq!(
        err.message,
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    );
    // JSON patch and server-side apply work.
    let patched = api
        .patch(
            "job",
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(
                    json!([{"op": "replace", "path": "/spec/image", "value": "alpine"}]),
                )
                .unwrap(),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["image"], "alpine");
    let applied = api
        .patch(
            "job",
            &PatchParams::apply("tester").force(),
            &Patch::Apply(json!({"apiVersion": "stable.example.com/v1", "kind": "CronTab",
                                  "metadata": {"name": "job"}, "spec": {"cronSpec": "*/2 * * * *"}})),
        )
        .await
        .unwrap();
    assert_eq!(applied.data["spec"]["cronSpec"], "*/2 * * * *");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn versions_share_objects_stored_at_the_storage_version() {
    let cluster = start().await;
    let client = cluster.client();
    let mut crd = crontab();
    crd["spec"]["versions"] = json!([crontab_version("v1", true), crontab_version("v2", false)]);
    create_crd(&client, crd).await;
    let mut body = crontab_object("multi", "* * * * */5");
    body["apiVersion"] = json!("stable.example.com/v2");
    let created = crontabs(&client, "v2")
        .create(&PostParams::default(), &dynamic(body))
        .await
        .unwrap();
    assert_eq!(created.types.unwrap().api_version, "stable.example.com/v2");
    let as_v1 = crontabs(&client, "v1").get("multi").await.unwrap();
    assert_eq!(as_v1.types.unwrap().api_version, "stable.example.com/v1");
    let listed = crontabs(&client, "v2")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        "stable.example.com/v2"
    );
    // Discovery prefers v2 (kube-apiserver's version priority).
    let group = get_json(&client, "/apis/stable.example.com").await;
    assert_eq!(group["preferredVersion"]["version"], "v2");
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);

    // Making v2 the storage version records it; objects written from then
    // on are stored at v2 and still served at v1.
    let crds = crd_api(&client);
    let mut current =
        serde_json::to_value(crds.get("crontabs.stable.example.com").await.unwrap()).unwrap();
    current["spec"]["versions"][0]["storage"] = json!(false);
    current["spec"]["versions"][1]["storage"] = json!(true);
    let updated = crds
        .replace(
            "crontabs.stable.example.com",
            &PostParams::default(),
            &serde_json::from_value(current).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        updated.status.unwrap().stored_versions.unwrap(),
        ["v1", "v2"]
    );
    assert_eq!(updated.metadata.generation, Some(2));
    crontabs(&client, "v1")
        .create(
            &PostParams::default(),
            &dynamic(crontab_object("later", "* * * * *")),
        )
        .await
        .unwrap();
    let later = crontabs(&client, "v1").get("later").await.unwrap();
    assert_eq!(later.types.unwrap().api_version, "stable.example.com/v1");
    // A watch at v1 sees both objects at v1.
    let events: Vec<_> = crontabs(&client, "v1")
        .watch(&WatchParams::default().timeout(1), "0")
        .await
        .unwrap()
        .take(2)
        .try_collect()
        .await
        .unwrap();
    for e in events {
        let WatchEvent::Added(o) = e else {
            panic!("{e:?}")
        };
        assert_eq!(o.types.unwrap().api_version, "stable.example.com/v1");
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_changes_take_effect_and_defaults_apply_on_read() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    api.create(
        &PostParams::default(),
        &dynamic(crontab_object("old", "* * * * *")),
    )
    .await
    .unwrap();
    // A new field with a default and a stricter maximum.
    let crds = crd_api(&client);
    let mut current =
        serde_json::to_value(crds.get("crontabs.stable.example.com").await.unwrap()).unwrap();
    let props = &mut current["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        ["properties"];
    props["suspend"] = json!({"type": "boolean", "default": false});
    props["replicas"]["maximum"] = json!(5);
    crds.replace(
        "crontabs.stable.example.com",
        &PostParams::default(),
        &serde_json::from_value(current).unwrap(),
    )
    .await
    .unwrap();
    let old = api.get("old").await.unwrap();
    assert_eq!(old.data["spec"]["suspend"], false, "defaulted on read");
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"]["suspend"], false);
    let mut too_many = crontab_object("many", "* * * * *");
    too_many["spec"]["replicas"] = json!(7);
    let err = api_error(api.create(&PostParams::default(), &dynamic(too_many)).await);
    assert!(
        err.message.contains("should be less than or equal to 5"),
        "{}",
        err.message
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_and_lists_select_custom_objects() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    let mut watch = api
        .watch(&WatchParams::default().labels("tier=web").timeout(10), "0")
        .await
        .unwrap()
        .boxed();
    for (name, tier) in [("a", "web"), ("b", "db"), ("c", "web")] {
        let mut o = crontab_object(name, "* * * * *");
        o["metadata"]["labels"] = json!({"tier": tier});
        api.create(&PostParams::default(), &dynamic(o))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    while seen.len() < 2 {
        match watch.try_next().await.unwrap().unwrap() {
            WatchEvent::Added(o) => seen.push(o.metadata.name.unwrap()),
            WatchEvent::Bookmark(_) => {}
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, ["a", "c"]);
    let db = api
        .list(&ListParams::default().labels("tier=db"))
        .await
        .unwrap();
    assert_eq!(db.items.len(), 1);
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=c"))
        .await
        .unwrap();
    assert_eq!(by_name.items[0].metadata.name.as_deref(), Some("c"));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_definition_deletes_its_objects_then_itself() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    api.create(
        &PostParams::default(),
        &dynamic(crontab_object("plain", "* * * * *")),
    )
    .await
    .unwrap();
    let mut held = crontab_object("held", "* * * * *");
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.create(&PostParams::default(), &dynamic(held))
        .await
        .unwrap();

    crd_api(&client)
        .delete("crontabs.stable.example.com", &DeleteParams::default())
        .await
        .unwrap();
    // Terminating while an object's finalizer holds it; the plain one is gone.
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("crontabs.stable.example.com")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        crd["metadata"]["finalizers"],
        json!(["customresourcecleanup.apiextensions.k8s.io"])
    );
    let terminating = condition(&crd, "Terminating");
    assert_eq!(
        (
            &terminating["status"],
            &terminating["reason"],
            &terminating["message"]
        ),
        (
            &json!("True"),
            &json!("InstanceDeletionInProgress"),
            &json!("CustomResource deletion is in progress")
        )
    );
    let remaining = api.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(remaining.len(), 1);
    assert!(remaining[0].metadata.deletion_timestamp.is_some());
    // No creates while terminating (405, as kube-apiserver).
    let err = api_error(
        api.create(
            &PostParams::default(),
            &dynamic(crontab_object("new", "* * * * *")),
        )
        .await,
    );
    assert_eq!(err.code, 405);
    assert_eq!(
        err.message,
        "create not allowed while custom resource definition is terminating"
    );

    // Releasing the finalizer lets the object, then the definition, go.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        crd_api(&client)
            .get_opt("crontabs.stable.example.com")
            .await
            .unwrap()
            .is_none()
    );
    let err = api_error(api.list(&ListParams::default()).await);
    assert_eq!(err.code, 404);
    let err = api_error(
        client
            .request::<Value>(
                http::Request::get("/apis/stable.example.com/v1")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await,
    );
    assert_eq!(err.code, 404);
    // Created again, it is a fresh type with no objects.
    create_crd(&client, crontab()).await;
    assert!(
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conflicting_names_are_not_accepted_until_freed() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    // Another definition of the group claiming the kind CronTab.
    let mut other = crontab();
    other["metadata"]["name"] = json!("crontabz.stable.example.com");
    other["spec"]["names"] = json!({"plural": "crontabz", "singular": "crontabz", "kind": "CronTab", "listKind": "CronTabzList"});
    create_crd(&client, other).await;
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("crontabz.stable.example.com")
            .await
            .unwrap(),
    )
    .unwrap();
    let names = condition(&crd, "NamesAccepted");
    assert_eq!(
        (&names["status"], &names["reason"], &names["message"]),
        (
            &json!("False"),
            &json!("KindConflict"),
            &json!("\"CronTab\" is already in use")
        )
    );
    let established = condition(&crd, "Established");
    assert_eq!(
        (
            &established["status"],
            &established["reason"],
            &established["message"]
        ),
        (
            &json!("False"),
            &json!("NotAccepted"),
            &json!("not all names are accepted")
        )
    );
    let err = api_error(
        client
            .request::<Value>(
                http::Request::get("/apis/stable.example.com/v1/namespaces/default/crontabz")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await,
    );
    assert_eq!(err.code, 404, "not served");
    // A short name taken by another definition.
    let mut short = crontab();
    short["metadata"]["name"] = json!("timers.stable.example.com");
    short["spec"]["names"] = json!({"plural": "timers", "kind": "Timer", "shortNames": ["ct"]});
    create_crd(&client, short).await;
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("timers.stable.example.com")
            .await
            .unwrap(),
    )
    .unwrap();
    let names = condition(&crd, "NamesAccepted");
    assert_eq!(
        (&names["reason"], &names["message"]),
        (
            &json!("ShortNamesConflict"),
            &json!("\"ct\" is already in use")
        )
    );
    // Deleting the first definition frees its names.
    crd_api(&client)
        .delete("crontabs.stable.example.com", &DeleteParams::default())
        .await
        .unwrap();
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("crontabz.stable.example.com")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(condition(&crd, "Established")["status"], "True");
    assert!(
        client
            .request::<Value>(
                http::Request::get("/apis/stable.example.com/v1/namespaces/default/crontabz")
                    .body(Vec::new())
                    .unwrap(),
            )
            .await
            .is_ok()
    );
    // A definition in a built-in group (approved) cannot take a built-in
    // type's names.
    let lease = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "leases.coordination.k8s.io",
                     "annotations": {"api-approved.kubernetes.io": "unapproved, testing"}},
        "spec": {"group": "coordination.k8s.io", "scope": "Namespaced",
                 "names": {"plural": "leases", "kind": "Lease"},
                 "versions": [{"name": "v2", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    create_crd(&client, lease).await;
    let crd = serde_json::to_value(
        crd_api(&client)
            .get("leases.coordination.k8s.io")
            .await
            .unwrap(),
    )
    .unwrap();
    let names = condition(&crd, "NamesAccepted");
    assert_eq!(
        (&names["status"], &names["reason"], &names["message"]),
        (
            &json!("False"),
            &json!("ListKindConflict"),
            &json!("\"LeaseList\" is already in use")
        )
    );
    cluster.shutdown().await;
}

/// A definition kube-apiserver refuses is 422 with its message and
/// causes, and is not stored; an invalid update changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_definitions_are_rejected_and_nothing_changes() {
    let cluster = start().await;
    let client = cluster.client();
    let crds = crd_api(&client);
    let reject = |crd: Value| {
        let crds = crds.clone();
        async move {
            let typed: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
            api_error(crds.create(&PostParams::default(), &typed).await)
        }
    };
    // metadata.name not <plural>.<group>
    let mut bad_name = crontab();
    bad_name["metadata"]["name"] = json!("crontab.stable.example.com");
    let err = reject(bad_name).await;
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        err.message,
        "CustomResourceDefinition.apiextensions.k8s.io \"crontab.stable.example.com\" is invalid: \
         metadata.name: Invalid value: \"crontab.stable.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    // No storage version.
    let mut no_storage = crontab();
    no_storage["spec"]["versions"][0]["storage"] = json!(false);
    let err = reject(no_storage).await;
    assert!(
        err.message.contains(
            "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{"
        ),
        "{}",
        err.message
    );
    assert!(
        err.message
            .ends_with("must have exactly one version marked as storage version"),
        "{}",
        err.message
    );
    // An invalid schema.
    let mut bad_schema = crontab();
    bad_schema["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["image"] = json!({"description": "no type"});
    let err = reject(bad_schema).await;
    assert!(
        err.message.contains("spec.validation.openAPIV3Schema.properties[spec].properties[image].type: Required value: must not be empty for specified object fields"),
        "{}",
        err.message
    );
    // A protected group without approval.
    let mut protected = crontab();
    protected["metadata"]["name"] = json!("crontabs.stable.k8s.io");
    protected["spec"]["group"] = json!("stable.k8s.io");
    let err = reject(protected).await;
    assert!(err.message.ends_with("metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"), "{}", err.message);
    assert!(
        crds.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // An update that renames the plural is refused; the stored definition
    // and its objects are untouched.
    create_crd(&client, crontab()).await;
    crontabs(&client, "v1")
        .create(
            &PostParams::default(),
            &dynamic(crontab_object("kept", "* * * * *")),
        )
        .await
        .unwrap();
    let before = crds.get("crontabs.stable.example.com").await.unwrap();
    let mut renamed = serde_json::to_value(&before).unwrap();
    renamed["spec"]["names"]["plural"] = json!("crontabz");
    let err = api_error(
        crds.replace(
            "crontabs.stable.example.com",
            &PostParams::default(),
            &serde_json::from_value(renamed).unwrap(),
        )
        .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("spec.names.plural: Invalid value: \"crontabz\": field is immutable"),
        "{}",
        err.message
    );
    let after = crds.get("crontabs.stable.example.com").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert!(crontabs(&client, "v1").get("kept").await.is_ok());
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_on_custom_objects_are_honoured() {
    let cluster = start().await;
    let client = cluster.client();
    create_crd(&client, crontab()).await;
    let api = crontabs(&client, "v1");
    let mut o = crontab_object("fin", "* * * * *");
    o["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    api.create(&PostParams::default(), &dynamic(o))
        .await
        .unwrap();
    api.delete("fin", &DeleteParams::default()).await.unwrap();
    let terminating = api.get("fin").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    api.patch(
        "fin",
        &PatchParams::default(),
        &Patch::Json::<()>(
            serde_json::from_value(json!([{"op": "remove", "path": "/metadata/finalizers"}]))
                .unwrap(),
        ),
    )
    .await
    .unwrap();
    eventually(|| async { api.get_opt("fin").await.unwrap().is_none() }).await;
    cluster.shutdown().await;
}

/// A custom resource type as an operator author writes it.
#[derive(
    kube::CustomResource, serde::Deserialize, serde::Serialize, Clone, Debug, schemars::JsonSchema,
)]
#[kube(
    group = "example.ctrlkit.dev",
    version = "v1",
    kind = "Backup",
    namespaced,
    status = "BackupStatus",
    shortname = "bk",
    printcolumn = r#"{"name": "Target", "type": "string", "jsonPath": ".spec.target"}"#
)]
struct BackupSpec {
    target: String,
    #[serde(default)]
    keep: u32,
}

#[derive(serde::Deserialize, serde::Serialize, Clone, Debug, Default, schemars::JsonSchema)]
struct BackupStatus {
    done: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_crd_serves_a_derived_type_in_one_call() {
    let cluster = start().await;
    let crd = cluster.install_crd::<Backup>().unwrap();
    assert_eq!(crd["metadata"]["name"], "backups.example.ctrlkit.dev");
    assert_eq!(condition(&crd, "Established")["status"], "True");
    let backups: Api<Backup> = Api::namespaced(cluster.client(), "default");
    let created = backups
        .create(
            &PostParams::default(),
            &Backup::new(
                "nightly",
                BackupSpec {
                    target: "db".into(),
                    keep: 3,
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.keep, 3);
    let status = backups
        .patch_status(
            "nightly",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"done": true}})),
        )
        .await
        .unwrap();
    assert!(status.status.unwrap().done);
    // The schema kube derives is enforced.
    let err = api_error(
        crontabs(&cluster.client(), "v1")
            .create(
                &PostParams::default(),
                &dynamic(crontab_object("x", "* * * * *")),
            )
            .await,
    );
    assert_eq!(err.code, 404, "only what was installed is served");
    let bad: Api<DynamicObject> = Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("example.ctrlkit.dev", "v1", "Backup"),
            "backups",
        ),
    );
    let err = api_error(
        bad.create(
            &PostParams::default(),
            &dynamic(
                json!({"apiVersion": "example.ctrlkit.dev/v1", "kind": "Backup",
                            "metadata": {"name": "bad"}, "spec": {"keep": "many"}}),
            ),
        )
        .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message.contains("spec.target: Required value"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("spec.keep: Invalid value: \"string\""),
        "{}",
        err.message
    );
    // Installing again (unchanged) is a no-op; a conflicting definition
    // is an error naming the conflict.
    cluster.install_crd::<Backup>().unwrap();
    let mut clash = serde_json::to_value(Backup::crd()).unwrap();
    clash["metadata"]["name"] = json!("archives.example.ctrlkit.dev");
    clash["spec"]["names"] =
        json!({"plural": "archives", "kind": "Backup", "listKind": "ArchiveList"});
    let err = cluster.install_crd_value(clash).unwrap_err();
    assert_eq!(
        err.to_string(),
        "CustomResourceDefinition archives.example.ctrlkit.dev is not established: KindConflict: \"Backup\" is already in use"
    );
    cluster.shutdown().await;
}
