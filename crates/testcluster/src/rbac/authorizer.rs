//! kube-apiserver's RBAC authorizer (`plugin/pkg/auth/authorizer/rbac`)
//! over Roles, ClusterRoles, RoleBindings and ClusterRoleBindings given as
//! JSON objects, plus the `system:masters` privileged group and the `403`
//! body kube-apiserver answers a denied request with.

use serde_json::{Value, json};

use super::request_info::RequestInfo;
use crate::selectors::LabelSelector;

/// The group whose members are always allowed (`system:masters`).
pub const SYSTEM_MASTERS: &str = "system:masters";

/// Who makes a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name, e.g. `jane` or `system:serviceaccount:ns:sa`.
    pub name: String,
    /// Groups, e.g. `system:authenticated`.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// A user with `groups`.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> Self {
        Self {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        }
    }
}

/// The authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; the reason names the binding that allowed it (empty for
    /// `system:masters`).
    Allow(String),
    /// Not allowed. The reason is empty, or lists the errors met on the
    /// way (e.g. a binding to a role that does not exist).
    Deny(String),
}

impl Decision {
    /// Whether the request is allowed.
    pub fn allowed(&self) -> bool {
        matches!(self, Self::Allow(_))
    }

    /// The reason text.
    pub fn reason(&self) -> &str {
        match self {
            Self::Allow(r) | Self::Deny(r) => r,
        }
    }
}

/// The RBAC objects stored in the cluster.
#[derive(Debug, Clone, Default)]
pub struct Policy<'a> {
    /// Roles (namespaced).
    pub roles: Vec<&'a Value>,
    /// ClusterRoles.
    pub cluster_roles: Vec<&'a Value>,
    /// RoleBindings (namespaced).
    pub role_bindings: Vec<&'a Value>,
    /// ClusterRoleBindings.
    pub cluster_role_bindings: Vec<&'a Value>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a str> {
    v.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// The service account user name `system:serviceaccount:<ns>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

fn applies_to(user: &UserInfo, subject: &Value, namespace: &str) -> bool {
    let name = text(subject, "/name");
    match text(subject, "/kind") {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = match text(subject, "/namespace") {
                "" => namespace,
                ns => ns,
            };
            !ns.is_empty() && user.name == service_account_username(ns, name)
        }
        _ => false,
    }
}

fn describe_subject(subject: &Value, binding_namespace: &str) -> String {
    let kind = text(subject, "/kind");
    let name = text(subject, "/name");
    if kind == "ServiceAccount" {
        let ns = match text(subject, "/namespace") {
            "" => binding_namespace,
            ns => ns,
        };
        format!("{kind} {:?}", format!("{name}/{ns}"))
    } else {
        format!("{kind} {name:?}")
    }
}

impl<'a> Policy<'a> {
    fn cluster_role(&self, name: &str) -> Option<&'a Value> {
        self.cluster_roles
            .iter()
            .copied()
            .find(|r| text(r, "/metadata/name") == name)
    }

    fn role(&self, namespace: &str, name: &str) -> Option<&'a Value> {
        self.roles.iter().copied().find(|r| {
            text(r, "/metadata/name") == name && text(r, "/metadata/namespace") == namespace
        })
    }

    /// The rules of a ClusterRole: its own, or for an aggregated role
    /// (`aggregationRule`) the rules of every ClusterRole its selectors
    /// match, as the aggregation controller writes them.
    pub fn cluster_role_rules(&self, role: &Value) -> Vec<Value> {
        match role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array)
        {
            Some(selectors) => aggregate_rules(role, selectors, &self.cluster_roles),
            None => role
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }

    fn role_ref_rules(&self, role_ref: &Value, namespace: &str) -> Result<Vec<Value>, String> {
        let name = text(role_ref, "/name");
        match text(role_ref, "/kind") {
            "ClusterRole" => self
                .cluster_role(name)
                .map(|r| self.cluster_role_rules(r))
                .ok_or_else(|| format!("clusterrole.rbac.authorization.k8s.io {name:?} not found")),
            "Role" => self
                .role(namespace, name)
                .map(|r| {
                    r.get("rules")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default()
                })
                .ok_or_else(|| format!("role.rbac.authorization.k8s.io {name:?} not found")),
            other => Err(format!("unsupported role reference kind: {other:?}")),
        }
    }

    /// Decides `request` for `user` as kube-apiserver's authorizer chain
    /// does with RBAC: `system:masters` is always allowed; otherwise a rule
    /// of a role bound to the user (cluster-wide, or in the request's
    /// namespace) must allow it.
    pub fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            return Decision::Allow(String::new());
        }
        let mut errors: Vec<String> = Vec::new();
        for binding in &self.cluster_role_bindings {
            let Some(subject) = binding
                .get("subjects")
                .and_then(Value::as_array)
                .and_then(|s| s.iter().find(|s| applies_to(user, s, "")))
            else {
                continue;
            };
            let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
            match self.role_ref_rules(role_ref, "") {
                Ok(rules) => {
                    if rules.iter().any(|r| rule_allows(request, r)) {
                        return Decision::Allow(format!(
                            "RBAC: allowed by ClusterRoleBinding {:?} of {} {:?} to {}",
                            text(binding, "/metadata/name"),
                            text(role_ref, "/kind"),
                            text(role_ref, "/name"),
                            describe_subject(subject, "")
                        ));
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        if !request.namespace.is_empty() {
            for binding in self
                .role_bindings
                .iter()
                .filter(|b| text(b, "/metadata/namespace") == request.namespace)
            {
                let Some(subject) = binding
                    .get("subjects")
                    .and_then(Value::as_array)
                    .and_then(|s| s.iter().find(|s| applies_to(user, s, &request.namespace)))
                else {
                    continue;
                };
                let role_ref = binding.get("roleRef").unwrap_or(&Value::Null);
                match self.role_ref_rules(role_ref, &request.namespace) {
                    Ok(rules) => {
                        if rules.iter().any(|r| rule_allows(request, r)) {
                            return Decision::Allow(format!(
                                "RBAC: allowed by RoleBinding {:?} of {} {:?} to {}",
                                format!(
                                    "{}/{}",
                                    text(binding, "/metadata/name"),
                                    request.namespace
                                ),
                                text(role_ref, "/kind"),
                                text(role_ref, "/name"),
                                describe_subject(subject, &request.namespace)
                            ));
                        }
                    }
                    Err(e) => errors.push(e),
                }
            }
        }
        let mut unique: Vec<String> = Vec::new();
        for e in errors {
            if !unique.contains(&e) {
                unique.push(e);
            }
        }
        let reason = match unique.len() {
            0 => String::new(),
            1 => format!("RBAC: {}", unique[0]),
            _ => format!("RBAC: [{}]", unique.join(", ")),
        };
        Decision::Deny(reason)
    }
}

/// The rules an aggregated ClusterRole gets: those of the other
/// ClusterRoles matching any of its selectors, in name order, each once.
fn aggregate_rules(role: &Value, selectors: &[Value], all: &[&Value]) -> Vec<Value> {
    let own = text(role, "/metadata/name");
    let mut matching: Vec<&Value> = all
        .iter()
        .copied()
        .filter(|r| text(r, "/metadata/name") != own)
        .filter(|r| {
            let labels = r.pointer("/metadata/labels");
            selectors.iter().any(|s| {
                LabelSelector::from_object(s)
                    .is_ok_and(|sel| !sel.is_empty() && sel.matches(labels))
            })
        })
        .collect();
    matching.sort_by_key(|r| text(r, "/metadata/name"));
    let mut rules: Vec<Value> = Vec::new();
    for r in matching {
        for rule in r
            .get("rules")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

fn matches_or_star<'a>(mut values: impl Iterator<Item = &'a str>, wanted: &str) -> bool {
    values.any(|v| v == "*" || v == wanted)
}

/// Whether one PolicyRule allows the request (`rbac.RuleAllows`).
pub fn rule_allows(request: &RequestInfo, rule: &Value) -> bool {
    if !matches_or_star(list(rule, "verbs"), &request.verb) {
        return false;
    }
    if !request.is_resource_request {
        return list(rule, "nonResourceURLs").any(|url| {
            url == "*"
                || url == request.path
                || (url.ends_with('*') && request.path.starts_with(url.trim_end_matches('*')))
        });
    }
    let combined = if request.subresource.is_empty() {
        request.resource.clone()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    let resource_ok = list(rule, "resources").any(|r| {
        r == "*"
            || r == combined
            || (!request.subresource.is_empty()
                && r.len() == request.subresource.len() + 2
                && r.starts_with("*/")
                && r.ends_with(&request.subresource))
    });
    let names: Vec<&str> = list(rule, "resourceNames").collect();
    matches_or_star(list(rule, "apiGroups"), &request.api_group)
        && resource_ok
        && (names.is_empty() || names.contains(&request.name.as_str()))
}

/// kube-apiserver's `forbiddenMessage` for a denied request.
pub fn forbidden_message(user: &UserInfo, request: &RequestInfo) -> String {
    if !request.is_resource_request {
        return format!(
            "User {:?} cannot {} path {:?}",
            user.name, request.verb, request.path
        );
    }
    let resource = if request.subresource.is_empty() {
        request.resource.clone()
    } else {
        format!("{}/{}", request.resource, request.subresource)
    };
    if request.namespace.is_empty() {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
            user.name, request.verb, resource, request.api_group
        )
    } else {
        format!(
            "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
            user.name, request.verb, resource, request.api_group, request.namespace
        )
    }
}

/// The `403 Forbidden` `Status` kube-apiserver answers a denied request
/// with (`responsewriters.Forbidden`): `<resource>[.<group>] ["<name>"] is
/// forbidden: <message>[: <reason>]`, details `{group, kind: <resource>,
/// name}`.
pub fn forbidden_status(user: &UserInfo, request: &RequestInfo, reason: &str) -> Value {
    let mut why = forbidden_message(user, request);
    if !reason.is_empty() {
        why = format!("{why}: {reason}");
    }
    let qualified = if request.api_group.is_empty() {
        request.resource.clone()
    } else {
        format!("{}.{}", request.resource, request.api_group)
    };
    let message = if !request.is_resource_request || qualified.is_empty() {
        format!("forbidden: {why}")
    } else if request.name.is_empty() {
        format!("{qualified} is forbidden: {why}")
    } else {
        format!("{qualified} {:?} is forbidden: {why}", request.name)
    };
    let mut status = crate::status::status_value(403, "Forbidden", &message);
    let mut details = serde_json::Map::new();
    if request.is_resource_request {
        if !request.name.is_empty() {
            details.insert("name".into(), json!(request.name));
        }
        if !request.api_group.is_empty() {
            details.insert("group".into(), json!(request.api_group));
        }
        if !request.resource.is_empty() {
            details.insert("kind".into(), json!(request.resource));
        }
    }
    status["details"] = Value::Object(details);
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::request_info::resolve;

    fn jane() -> UserInfo {
        UserInfo::new("jane", &["devs", "system:authenticated"])
    }

    #[test]
    fn rule_matching_follows_rbac() {
        let req = resolve("GET", "/api/v1/namespaces/ns/pods/web/log", "");
        assert!(rule_allows(
            &req,
            &json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
        ));
        assert!(rule_allows(
            &req,
            &json!({"apiGroups": ["*"], "resources": ["*/log"], "verbs": ["*"]})
        ));
        assert!(!rule_allows(
            &req,
            &json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})
        ));
        assert!(!rule_allows(
            &req,
            &json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"], "resourceNames": ["db"]})
        ));
        assert!(rule_allows(
            &req,
            &json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"], "resourceNames": ["web"]})
        ));
        let health = resolve("GET", "/healthz/ready", "");
        assert!(rule_allows(
            &health,
            &json!({"nonResourceURLs": ["/healthz*"], "verbs": ["get"]})
        ));
        assert!(!rule_allows(
            &health,
            &json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]})
        ));
        assert!(!rule_allows(
            &health,
            &json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
        ));
    }

    #[test]
    fn role_bindings_and_cluster_role_bindings() {
        let role = json!({"metadata": {"name": "pod-reader", "namespace": "ns"},
                          "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]});
        let view = json!({"metadata": {"name": "view"},
                          "rules": [{"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["list"]}]});
        let rb = json!({"metadata": {"name": "read-pods", "namespace": "ns"},
                        "subjects": [{"kind": "User", "name": "jane"}],
                        "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"}});
        let rb_cluster = json!({"metadata": {"name": "view-here", "namespace": "other"},
                        "subjects": [{"kind": "Group", "name": "devs"}],
                        "roleRef": {"kind": "ClusterRole", "name": "view"}});
        let policy = Policy {
            roles: vec![&role],
            cluster_roles: vec![&view],
            role_bindings: vec![&rb, &rb_cluster],
            cluster_role_bindings: vec![],
        };
        let list_pods = resolve("GET", "/api/v1/namespaces/ns/pods", "");
        assert_eq!(
            policy.authorize(&jane(), &list_pods),
            Decision::Allow("RBAC: allowed by RoleBinding \"read-pods/ns\" of Role \"pod-reader\" to User \"jane\"".into())
        );
        // A ClusterRole bound by a RoleBinding applies in that namespace only.
        let rs_other = resolve("GET", "/apis/apps/v1/namespaces/other/replicasets", "");
        assert!(policy.authorize(&jane(), &rs_other).allowed());
        let rs_ns = resolve("GET", "/apis/apps/v1/namespaces/ns/replicasets", "");
        assert_eq!(
            policy.authorize(&jane(), &rs_ns),
            Decision::Deny(String::new())
        );
        let rs_all = resolve("GET", "/apis/apps/v1/replicasets", "");
        assert!(!policy.authorize(&jane(), &rs_all).allowed());
        let masters = UserInfo::new("admin", &[SYSTEM_MASTERS]);
        assert!(policy.authorize(&masters, &rs_all).allowed());
    }

    #[test]
    fn service_accounts_and_missing_roles() {
        let crb = json!({"metadata": {"name": "ctrl"},
                         "subjects": [{"kind": "ServiceAccount", "name": "rs-controller", "namespace": "kube-system"}],
                         "roleRef": {"kind": "ClusterRole", "name": "missing"}});
        let rb = json!({"metadata": {"name": "local", "namespace": "apps"},
                        "subjects": [{"kind": "ServiceAccount", "name": "worker"}],
                        "roleRef": {"kind": "Role", "name": "worker"}});
        let role = json!({"metadata": {"name": "worker", "namespace": "apps"},
                          "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]});
        let policy = Policy {
            roles: vec![&role],
            cluster_roles: vec![],
            role_bindings: vec![&rb],
            cluster_role_bindings: vec![&crb],
        };
        let sa = UserInfo::new(
            service_account_username("kube-system", "rs-controller"),
            &[],
        );
        let req = resolve("GET", "/api/v1/pods", "");
        assert_eq!(
            policy.authorize(&sa, &req),
            Decision::Deny(
                "RBAC: clusterrole.rbac.authorization.k8s.io \"missing\" not found".into()
            )
        );
        // A ServiceAccount subject without namespace means the binding's.
        let worker = UserInfo::new(service_account_username("apps", "worker"), &[]);
        let cm = resolve("POST", "/api/v1/namespaces/apps/configmaps", "");
        assert_eq!(
            policy.authorize(&worker, &cm),
            Decision::Allow("RBAC: allowed by RoleBinding \"local/apps\" of Role \"worker\" to ServiceAccount \"worker/apps\"".into())
        );
    }

    #[test]
    fn aggregated_cluster_roles() {
        let agg = json!({"metadata": {"name": "monitoring"},
                         "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}}]},
                         "rules": []});
        let part = json!({"metadata": {"name": "monitoring-endpoints",
                                       "labels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
                          "rules": [{"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get", "list"]}]});
        let other = json!({"metadata": {"name": "unrelated"}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]});
        let crb = json!({"metadata": {"name": "mon"}, "subjects": [{"kind": "User", "name": "jane"}],
                         "roleRef": {"kind": "ClusterRole", "name": "monitoring"}});
        let policy = Policy {
            roles: vec![],
            cluster_roles: vec![&agg, &part, &other],
            role_bindings: vec![],
            cluster_role_bindings: vec![&crb],
        };
        assert!(
            policy
                .authorize(&jane(), &resolve("GET", "/api/v1/endpoints", ""))
                .allowed()
        );
        assert!(
            !policy
                .authorize(
                    &jane(),
                    &resolve("GET", "/api/v1/namespaces/x/secrets/s", "")
                )
                .allowed()
        );
        assert_eq!(policy.cluster_role_rules(&agg).len(), 1);
    }

    #[test]
    fn forbidden_bodies_match_kube_apiserver() {
        let user = UserInfo::new("jane", &[]);
        let s = forbidden_status(
            &user,
            &resolve("GET", "/api/v1/namespaces/default/pods", ""),
            "",
        );
        assert_eq!(s["code"], 403);
        assert_eq!(s["reason"], "Forbidden");
        assert_eq!(
            s["message"],
            "pods is forbidden: User \"jane\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        assert_eq!(s["details"], json!({"kind": "pods"}));
        let s = forbidden_status(
            &user,
            &resolve(
                "PUT",
                "/apis/apps/v1/namespaces/ns/replicasets/web/status",
                "",
            ),
            "",
        );
        assert_eq!(
            s["message"],
            "replicasets.apps \"web\" is forbidden: User \"jane\" cannot update resource \"replicasets/status\" in API group \"apps\" in the namespace \"ns\""
        );
        assert_eq!(
            s["details"],
            json!({"name": "web", "group": "apps", "kind": "replicasets"})
        );
        let s = forbidden_status(
            &user,
            &resolve("GET", "/api/v1/nodes", ""),
            "RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found",
        );
        assert_eq!(
            s["message"],
            "nodes is forbidden: User \"jane\" cannot list resource \"nodes\" in API group \"\" at the cluster scope: RBAC: clusterrole.rbac.authorization.k8s.io \"x\" not found"
        );
        let s = forbidden_status(&user, &resolve("GET", "/metrics", ""), "");
        assert_eq!(
            s["message"],
            "forbidden: User \"jane\" cannot get path \"/metrics\""
        );
    }
}
