//! RBAC: the replicaset controller's shipped manifest evaluated by the
//! authorizer alone, then the cluster enforcing RBAC (opt in): bearer
//! tokens for users and ServiceAccounts, 401 and 403 as kube-apiserver
//! answers them, a policy that follows every Role and binding change, and
//! the review APIs (`kubectl auth can-i`, `auth whoami`, TokenReview,
//! SubjectAccessReview) with and without enforcement.
#![allow(clippy::unwrap_used)]

mod common;

use common::kubectl::Kubectl;
use common::{api_error, start};
use ctrlkit_testcluster::rbac::{
    Policy, TokenRegistry, forbidden_status, resolve, self_subject_access_review,
};
use ctrlkit_testcluster::{ADMIN_USER, TestCluster, TestClusterConfig};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/replicaset-controller/rbac.yaml"
    ))
    .unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| Value::deserialize(doc).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

#[test]
fn the_controller_may_do_what_it_does_and_nothing_else() {
    let objects = manifest();
    let policy = Policy {
        roles: of_kind(&objects, "Role"),
        cluster_roles: of_kind(&objects, "ClusterRole"),
        role_bindings: of_kind(&objects, "RoleBinding"),
        cluster_role_bindings: of_kind(&objects, "ClusterRoleBinding"),
    };
    let tokens = TokenRegistry::new();
    let token = tokens.issue_service_account("ctrlkit-system", "replicaset-controller");
    let user = tokens
        .authenticate(Some(&format!("Bearer {token}")))
        .unwrap();

    let allowed = [
        (
            "GET",
            "/apis/apps/v1/replicasets",
            "watch=true&allowWatchBookmarks=true",
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/default/replicasets/web/status",
            "",
        ),
        ("POST", "/api/v1/namespaces/default/pods", ""),
        ("DELETE", "/api/v1/namespaces/default/pods/web-abcde", ""),
        ("PATCH", "/api/v1/namespaces/default/pods/web-abcde", ""),
        (
            "POST",
            "/apis/events.k8s.io/v1/namespaces/default/events",
            "",
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/ctrlkit-system/leases/replicaset-controller",
            "",
        ),
    ];
    for (method, path, query) in allowed {
        let req = resolve(method, path, query);
        assert!(policy.authorize(&user, &req).allowed(), "{method} {path}");
    }

    // The Role grants the lease by name only, and only in its namespace.
    let other_lease = resolve(
        "GET",
        "/apis/coordination.k8s.io/v1/namespaces/ctrlkit-system/leases/other",
        "",
    );
    assert!(!policy.authorize(&user, &other_lease).allowed());
    let update_rs = resolve(
        "PUT",
        "/apis/apps/v1/namespaces/default/replicasets/web",
        "",
    );
    let decision = policy.authorize(&user, &update_rs);
    assert!(!decision.allowed());
    let body = forbidden_status(&user, &update_rs, decision.reason());
    assert_eq!(
        body["message"],
        "replicasets.apps \"web\" is forbidden: User \"system:serviceaccount:ctrlkit-system:replicaset-controller\" \
         cannot update resource \"replicasets\" in API group \"apps\" in the namespace \"default\""
    );

    // `kubectl auth can-i delete pods` as that ServiceAccount.
    let review = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "default", "verb": "delete", "resource": "pods"}}});
    let answer = self_subject_access_review(&policy, &user, &review).unwrap();
    assert_eq!(answer["status"]["allowed"], true);
    assert_eq!(
        answer["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"ctrlkit:replicaset-controller\" of ClusterRole \
         \"ctrlkit:replicaset-controller\" to ServiceAccount \"replicaset-controller/ctrlkit-system\""
    );
}

async fn rbac_cluster() -> TestCluster {
    TestCluster::start(TestClusterConfig::default().with_rbac(true))
        .await
        .unwrap()
}

async fn post(client: &kube::Client, path: &str, body: Value) -> Result<Value, kube::Error> {
    client
        .request::<Value>(
            http::Request::post(path)
                .header("content-type", "application/json")
                .body(serde_json::to_vec(&body).unwrap())
                .unwrap(),
        )
        .await
}

fn can_i(verb: &str, resource: &str, namespace: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
           "spec": {"resourceAttributes": {"namespace": namespace, "verb": verb, "resource": resource}}})
}

const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_rbac_everything_is_allowed_and_reviews_say_so() {
    let cluster = start().await;
    assert!(!cluster.rbac_enabled());
    let jane = cluster.client_for_user("jane", &[]).unwrap();
    let pods: Api<Pod> = Api::namespaced(jane.clone(), "default");
    pods.list(&ListParams::default()).await.unwrap();
    let review = post(&jane, SSAR, can_i("delete", "nodes", ""))
        .await
        .unwrap();
    assert_eq!(review["status"], json!({"allowed": true}));
    // Who the cluster's own client is.
    let me = post(
        &cluster.client(),
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
    )
    .await
    .unwrap();
    assert_eq!(me["status"]["userInfo"]["username"], ADMIN_USER);
    assert_eq!(
        me["status"]["userInfo"]["groups"],
        json!(["system:masters", "system:authenticated"])
    );
    // kubectl sends the review as protobuf. Over plain HTTP (RBAC off)
    // kubectl sends no credentials, so it is anonymous, and allowed.
    let dir = tempfile::tempdir().unwrap();
    let k = Kubectl::for_cluster(&cluster, dir.path());
    assert_eq!(
        k.run_async(&["auth", "can-i", "delete", "pods"])
            .await
            .trim(),
        "yes"
    );
    let whoami = k.run_async(&["auth", "whoami", "-o", "json"]).await;
    let whoami: Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "system:anonymous");
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_authenticated_and_requests_authorized() {
    let cluster = rbac_cluster().await;
    let admin = cluster.client();
    let pods: Api<Pod> = Api::namespaced(admin.clone(), "default");
    pods.list(&ListParams::default()).await.unwrap();

    // The cluster serves HTTPS (kubectl sends tokens only over TLS).
    assert!(cluster.base_url().starts_with("https://"));
    assert!(
        cluster
            .certificate_authority()
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----")
    );
    let insecure = || {
        let mut config = kube::Config::new(cluster.base_url().parse().unwrap());
        config.accept_invalid_certs = true;
        config
    };
    // A token the cluster did not issue: 401.
    let mut config = insecure();
    config.headers.push((
        http::header::AUTHORIZATION,
        "Bearer forged".parse().unwrap(),
    ));
    let forged = kube::Client::try_from(config).unwrap();
    let err = api_error(
        Api::<Pod>::namespaced(forged, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(
        (err.code, err.reason.as_str(), err.message.as_str()),
        (401, "Unauthorized", "Unauthorized")
    );

    // No token: system:anonymous, who may read /version only.
    let anonymous = kube::Client::try_from(insecure()).unwrap();
    anonymous.apiserver_version().await.unwrap();
    let err = api_error(
        Api::<Pod>::namespaced(anonymous, "default")
            .list(&ListParams::default())
            .await,
    );
    assert_eq!(err.code, 403);
    assert_eq!(
        err.message,
        "pods is forbidden: User \"system:anonymous\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );

    // A ServiceAccount with no bindings may discover, not read.
    let robot = cluster.client_for_service_account("demo", "robot").unwrap();
    kube::discovery::Discovery::new(robot.clone())
        .run_aggregated()
        .await
        .unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(robot.clone(), "default");
    let err = api_error(cms.get("settings").await);
    assert_eq!((err.code, err.reason.as_str()), (403, "Forbidden"));
    assert_eq!(
        err.message,
        "configmaps \"settings\" is forbidden: User \"system:serviceaccount:demo:robot\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"default\""
    );
    let raw = match cms.get("settings").await {
        Err(kube::Error::Api(s)) => serde_json::to_value(*s).unwrap(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        raw["details"],
        json!({"name": "settings", "kind": "configmaps"})
    );

    // A Role and binding grant exactly their rules, from the next request.
    cluster
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: cm-reader, namespace: default}\n\
             rules: [{apiGroups: [''], resources: [configmaps], verbs: [get, list]}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: robot-reads, namespace: default}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cm-reader}\n\
             subjects: [{kind: ServiceAccount, name: robot, namespace: demo}]\n",
        )
        .unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await,
    );
    assert_eq!(err.code, 403);
    let elsewhere: Api<ConfigMap> = Api::namespaced(robot.clone(), "kube-system");
    assert_eq!(
        api_error(elsewhere.list(&ListParams::default()).await).code,
        403
    );
    // Taking the verb away takes effect at once.
    cluster
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: cm-reader, namespace: default}\n\
             rules: [{apiGroups: [''], resources: [configmaps], verbs: [get]}]\n",
        )
        .unwrap();
    assert_eq!(api_error(cms.list(&ListParams::default()).await).code, 403);

    // A binding to a Role that does not exist is stored and grants
    // nothing; the 403 says why.
    cluster
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: dangling, namespace: default}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: ghost}\n\
             subjects: [{kind: ServiceAccount, name: robot, namespace: demo}]\n",
        )
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(robot.clone(), "default");
    let err = api_error(pods.list(&ListParams::default()).await);
    assert_eq!(
        err.message,
        "pods is forbidden: User \"system:serviceaccount:demo:robot\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\": RBAC: role.rbac.authorization.k8s.io \"ghost\" not found"
    );
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_and_kubectl_auth_under_rbac() {
    let cluster = rbac_cluster().await;
    cluster
        .apply_yaml(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: pod-reader}\n\
             rules: [{apiGroups: [''], resources: [pods], verbs: [get, list, watch]}]\n---\n\
             apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: jane-reads}\n\
             roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-reader}\n\
             subjects: [{kind: User, name: jane}]\n",
        )
        .unwrap();
    let jane = cluster.client_for_user("jane", &["devs"]).unwrap();
    let allowed = post(&jane, SSAR, can_i("list", "pods", "default"))
        .await
        .unwrap();
    assert_eq!(allowed["status"]["allowed"], true);
    assert_eq!(
        allowed["status"]["reason"],
        "RBAC: allowed by ClusterRoleBinding \"jane-reads\" of ClusterRole \"pod-reader\" to User \"jane\""
    );
    let denied = post(&jane, SSAR, can_i("delete", "pods", "default"))
        .await
        .unwrap();
    assert_eq!(denied["status"], json!({"allowed": false}));
    // jane may not ask about others; the admin may.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                     "spec": {"user": "jane", "groups": ["devs"],
                              "resourceAttributes": {"namespace": "default", "verb": "watch", "resource": "pods"}}});
    let err = api_error(
        post(
            &jane,
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            sar.clone(),
        )
        .await,
    );
    assert_eq!(err.code, 403);
    let answer = post(
        &cluster.client(),
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        sar,
    )
    .await
    .unwrap();
    assert_eq!(answer["status"]["allowed"], true);
    // TokenReview: who a token is.
    let token = cluster.token_for_service_account("monitoring", "prometheus");
    let review = post(
        &cluster.client(),
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}),
    )
    .await
    .unwrap();
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["user"]["username"],
        "system:serviceaccount:monitoring:prometheus"
    );
    let review = post(
        &cluster.client(),
        "/apis/authentication.k8s.io/v1/tokenreviews",
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "forged"}}),
    )
    .await
    .unwrap();
    assert!(review["status"].get("authenticated").is_none(), "{review}");
    // Reviews are create only (for whoever may list them at all).
    let err = api_error(
        cluster
            .client()
            .request::<Value>(http::Request::get(SSAR).body(Vec::new()).unwrap())
            .await,
    );
    assert_eq!(err.code, 405);

    // kubectl as jane: can-i (a protobuf review), whoami, a forbidden get.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    cluster
        .write_kubeconfig_for_user(&kubeconfig, "jane", &["devs"])
        .unwrap();
    let k = Kubectl {
        bin: common::kubectl::kubectl_binary(),
        kubeconfig,
    };
    assert_eq!(
        k.run_async(&["auth", "can-i", "list", "pods"]).await.trim(),
        "yes"
    );
    let no = k
        .output_async(&["auth", "can-i", "create", "deployments"])
        .await;
    assert_eq!(no.unwrap_err().trim(), "", "`no` is an exit status");
    assert_eq!(
        k.command(&["auth", "can-i", "create", "deployments"])
            .output()
            .unwrap()
            .stdout,
        b"no\n"
    );
    let whoami = k.run_async(&["auth", "whoami"]).await;
    assert!(whoami.contains("jane"), "{whoami}");
    let err = k.fail_async(&["get", "configmaps"]).await;
    assert!(
        err.contains("configmaps is forbidden: User \"jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""),
        "{err}"
    );
    // The ServiceAccount kubeconfig writer.
    let sa_kubeconfig = dir.path().join("sa-kubeconfig");
    cluster
        .write_kubeconfig_for_service_account(&sa_kubeconfig, "demo", "robot")
        .unwrap();
    let k = Kubectl {
        bin: common::kubectl::kubectl_binary(),
        kubeconfig: sa_kubeconfig,
    };
    let whoami = k.run_async(&["auth", "whoami"]).await;
    assert!(
        whoami.contains("system:serviceaccount:demo:robot"),
        "{whoami}"
    );
    cluster.shutdown().await;
}
