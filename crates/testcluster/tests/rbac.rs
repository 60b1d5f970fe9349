//! The replicaset controller's shipped RBAC manifest, evaluated by the
//! test cluster's RBAC authorizer on the requests the controller makes.
#![allow(clippy::unwrap_used)]

use ctrlkit_testcluster::rbac::{
    Policy, TokenRegistry, forbidden_status, resolve, self_subject_access_review,
};
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
