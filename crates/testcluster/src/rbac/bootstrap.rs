//! The part of kube-apiserver's bootstrap RBAC policy
//! (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`) that every request
//! relies on: what makes discovery, health checks and the self reviews
//! work for any authenticated user, and `cluster-admin` for
//! `system:masters`.

use serde_json::{Value, json};

fn meta(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": meta(name),
        "rules": rules,
    })
}

fn binding(name: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> = groups
        .iter()
        .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
        .collect();
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": meta(name),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": subjects,
    })
}

/// The ClusterRoles `cluster-admin`, `system:discovery`,
/// `system:basic-user`, `system:public-info-viewer` and
/// `system:auth-delegator`, and the ClusterRoleBindings that give the
/// first four to `system:masters`, `system:authenticated` (and, for the
/// public information, `system:unauthenticated`), with kube-apiserver's
/// rules.
pub fn bootstrap_policy() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        binding("cluster-admin", &["system:masters"]),
        cluster_role(
            "system:discovery",
            json!([{"nonResourceURLs": [
                "/livez", "/readyz", "/healthz", "/version", "/version/",
                "/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
            ], "verbs": ["get"]}]),
        ),
        binding("system:discovery", &["system:authenticated"]),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"],
                 "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"],
                 "resources": ["selfsubjectreviews"],
                 "verbs": ["create"]},
            ]),
        ),
        binding("system:basic-user", &["system:authenticated"]),
        cluster_role(
            "system:public-info-viewer",
            json!([{"nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/"],
                    "verbs": ["get"]}]),
        ),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        cluster_role(
            "system:auth-delegator",
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{Policy, UserInfo, resolve};

    #[test]
    fn any_authenticated_user_may_discover_and_ask_can_i() {
        let objects = bootstrap_policy();
        let of = |kind: &str| objects.iter().filter(|o| o["kind"] == kind).collect();
        let policy = Policy {
            roles: Vec::new(),
            cluster_roles: of("ClusterRole"),
            role_bindings: Vec::new(),
            cluster_role_bindings: of("ClusterRoleBinding"),
        };
        let jane = UserInfo::new("jane", &["system:authenticated"]);
        for (method, path) in [
            ("GET", "/apis"),
            ("GET", "/api/v1"),
            ("GET", "/openapi/v3/apis/apps/v1"),
            ("GET", "/version"),
            (
                "POST",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            ),
        ] {
            assert!(
                policy
                    .authorize(&jane, &resolve(method, path, ""))
                    .allowed(),
                "{method} {path}"
            );
        }
        assert!(
            !policy
                .authorize(&jane, &resolve("GET", "/api/v1/pods", ""))
                .allowed()
        );
        let anonymous = UserInfo::new("system:anonymous", &["system:unauthenticated"]);
        assert!(
            policy
                .authorize(&anonymous, &resolve("GET", "/version", ""))
                .allowed()
        );
        assert!(
            !policy
                .authorize(&anonymous, &resolve("GET", "/apis", ""))
                .allowed()
        );
        let admin = UserInfo::new("kubernetes-admin", &["system:masters"]);
        assert!(
            policy
                .authorize(&admin, &resolve("DELETE", "/api/v1/nodes/n", ""))
                .allowed()
        );
    }
}
