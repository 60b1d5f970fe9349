//! `SubjectAccessReview` and `SelfSubjectAccessReview`
//! (authorization.k8s.io/v1): the spec becomes request attributes, the
//! authorizer's decision becomes the status kubectl `auth can-i` reads.
//! `TokenReview` and `SelfSubjectReview` (authentication.k8s.io/v1): who
//! a token, or the requester, is (`kubectl auth whoami`).

use serde_json::{Value, json};

use super::authorizer::{Decision, Policy, UserInfo};
use super::request_info::RequestInfo;
use crate::crd::field::{BadValue, FieldError, invalid_status};

/// The API group of access reviews.
pub const AUTHORIZATION_GROUP: &str = "authorization.k8s.io";
/// The API group of token and self-subject reviews.
pub const AUTHENTICATION_GROUP: &str = "authentication.k8s.io";

/// Decides a request for a user: an authorizer.
pub type Decide<'a> = &'a dyn Fn(&UserInfo, &RequestInfo) -> Decision;

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The request attributes a review's `spec` asks about, or the field
/// errors kube-apiserver rejects the review with.
fn attributes(spec: &Value) -> Result<RequestInfo, Vec<FieldError>> {
    let resource = spec.get("resourceAttributes").filter(|v| !v.is_null());
    let non_resource = spec.get("nonResourceAttributes").filter(|v| !v.is_null());
    match (resource, non_resource) {
        (Some(_), Some(n)) => Err(vec![FieldError::invalid(
            "spec.nonResourceAttributes",
            BadValue::Json(n.clone()),
            "cannot be specified in combination with resourceAttributes",
        )]),
        (None, None) => Err(vec![FieldError::required(
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )]),
        (Some(r), None) => Ok(RequestInfo {
            is_resource_request: true,
            path: String::new(),
            verb: text(r, "verb").to_string(),
            api_prefix: String::new(),
            api_group: text(r, "group").to_string(),
            api_version: text(r, "version").to_string(),
            namespace: text(r, "namespace").to_string(),
            resource: text(r, "resource").to_string(),
            subresource: text(r, "subresource").to_string(),
            name: text(r, "name").to_string(),
        }),
        (None, Some(n)) => Ok(RequestInfo {
            is_resource_request: false,
            path: text(n, "path").to_string(),
            verb: text(n, "verb").to_string(),
            ..RequestInfo::default()
        }),
    }
}

fn answer(
    review: &Value,
    kind: &str,
    decide: Decide<'_>,
    user: &UserInfo,
    attrs: &RequestInfo,
) -> Value {
    let decision = decide(user, attrs);
    let mut status = serde_json::Map::new();
    status.insert("allowed".into(), json!(decision.allowed()));
    if !decision.reason().is_empty() {
        status.insert("reason".into(), json!(decision.reason()));
    }
    let mut out = review.clone();
    out["apiVersion"] = json!(format!("{AUTHORIZATION_GROUP}/v1"));
    out["kind"] = json!(kind);
    if out.get("metadata").is_none_or(|m| !m.is_object()) {
        out["metadata"] = json!({});
    }
    out["status"] = Value::Object(status);
    out
}

/// Evaluates a `SelfSubjectAccessReview` posted by `requester`: the answer
/// is the review with `status.allowed` (and `status.reason`). Invalid
/// specs get the `422` `Status` body as the error.
pub fn self_subject_access_review(
    policy: &Policy<'_>,
    requester: &UserInfo,
    review: &Value,
) -> Result<Value, Value> {
    decide_self_subject_access_review(&|u, r| policy.authorize(u, r), requester, review)
}

/// [`self_subject_access_review`] decided by any authorizer.
pub fn decide_self_subject_access_review(
    decide: Decide<'_>,
    requester: &UserInfo,
    review: &Value,
) -> Result<Value, Value> {
    let spec = review.get("spec").unwrap_or(&Value::Null);
    let attrs = attributes(spec)
        .map_err(|e| invalid_status(AUTHORIZATION_GROUP, "SelfSubjectAccessReview", "", &e))?;
    Ok(answer(
        review,
        "SelfSubjectAccessReview",
        decide,
        requester,
        &attrs,
    ))
}

/// Evaluates a `SubjectAccessReview` for the user and groups in its spec.
pub fn subject_access_review(policy: &Policy<'_>, review: &Value) -> Result<Value, Value> {
    decide_subject_access_review(&|u, r| policy.authorize(u, r), review)
}

/// [`subject_access_review`] decided by any authorizer.
pub fn decide_subject_access_review(decide: Decide<'_>, review: &Value) -> Result<Value, Value> {
    let spec = review.get("spec").unwrap_or(&Value::Null);
    let mut errs = match attributes(spec) {
        Ok(_) => Vec::new(),
        Err(e) => e,
    };
    let groups: Vec<&str> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let user_name = text(spec, "user");
    if user_name.is_empty() && groups.is_empty() {
        errs.push(FieldError::invalid(
            "spec.user",
            BadValue::str(user_name),
            "at least one of user or group must be specified",
        ));
    }
    if !errs.is_empty() {
        return Err(invalid_status(
            AUTHORIZATION_GROUP,
            "SubjectAccessReview",
            "",
            &errs,
        ));
    }
    let attrs = attributes(spec)
        .map_err(|e| invalid_status(AUTHORIZATION_GROUP, "SubjectAccessReview", "", &e))?;
    let user = UserInfo::new(user_name, &groups);
    Ok(answer(review, "SubjectAccessReview", decide, &user, &attrs))
}

fn with_status(review: &Value, group: &str, kind: &str, status: Value) -> Value {
    let mut out = review.clone();
    out["apiVersion"] = json!(format!("{group}/v1"));
    out["kind"] = json!(kind);
    if out.get("metadata").is_none_or(|m| !m.is_object()) {
        out["metadata"] = json!({});
    }
    out["status"] = status;
    out
}

fn user_json(user: &UserInfo) -> Value {
    json!({"username": user.name, "groups": user.groups})
}

/// Evaluates a `TokenReview`: who `spec.token` authenticates, through
/// `authenticate` (`None`: not a token the cluster accepts). A review
/// without a token is the `400` kube-apiserver answers.
pub fn token_review(
    review: &Value,
    authenticate: &dyn Fn(&str) -> Option<UserInfo>,
) -> Result<Value, Value> {
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or("");
    if token.is_empty() {
        return Err(crate::status::status_value(
            400,
            "BadRequest",
            "token is required for TokenReview in authentication",
        ));
    }
    let status = match authenticate(token) {
        Some(user) => {
            let mut status = json!({"authenticated": true, "user": user_json(&user)});
            if let Some(audiences) = review.pointer("/spec/audiences").filter(|a| !a.is_null()) {
                status["audiences"] = audiences.clone();
            }
            status
        }
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    Ok(with_status(
        review,
        AUTHENTICATION_GROUP,
        "TokenReview",
        status,
    ))
}

/// Answers a `SelfSubjectReview` (`kubectl auth whoami`) for `requester`.
pub fn self_subject_review(requester: &UserInfo, review: &Value) -> Value {
    with_status(
        review,
        AUTHENTICATION_GROUP,
        "SelfSubjectReview",
        json!({"userInfo": user_json(requester)}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy_objects() -> (Value, Value) {
        (
            json!({"metadata": {"name": "edit-pods", "namespace": "default"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}]}),
            json!({"metadata": {"name": "jane-edits", "namespace": "default"},
                   "subjects": [{"kind": "User", "name": "jane"}],
                   "roleRef": {"kind": "Role", "name": "edit-pods"}}),
        )
    }

    #[test]
    fn can_i_create_pods() {
        let (role, binding) = policy_objects();
        let policy = Policy {
            roles: vec![&role],
            role_bindings: vec![&binding],
            ..Policy::default()
        };
        let jane = UserInfo::new("jane", &["system:authenticated"]);
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}},
        });
        let out = self_subject_access_review(&policy, &jane, &review).unwrap();
        assert_eq!(out["status"]["allowed"], true);
        assert_eq!(
            out["status"]["reason"],
            "RBAC: allowed by RoleBinding \"jane-edits/default\" of Role \"edit-pods\" to User \"jane\""
        );
        let mut denied = review.clone();
        denied["spec"]["resourceAttributes"]["verb"] = json!("delete");
        let out = self_subject_access_review(&policy, &jane, &denied).unwrap();
        assert_eq!(out["status"], json!({"allowed": false}));
    }

    #[test]
    fn token_reviews_and_whoami() {
        let jane = UserInfo::new("jane", &["devs"]);
        let known = |t: &str| (t == "good").then(|| jane.clone());
        let ok = token_review(
            &json!({"spec": {"token": "good", "audiences": ["api"]}}),
            &known,
        )
        .unwrap();
        assert_eq!(ok["kind"], "TokenReview");
        assert_eq!(ok["status"]["authenticated"], true);
        assert_eq!(
            ok["status"]["user"],
            json!({"username": "jane", "groups": ["devs"]})
        );
        assert_eq!(ok["status"]["audiences"], json!(["api"]));
        let bad = token_review(&json!({"spec": {"token": "forged"}}), &known).unwrap();
        assert!(bad["status"].get("authenticated").is_none());
        let err = token_review(&json!({"spec": {}}), &known).unwrap_err();
        assert_eq!(
            (err["code"].as_u64(), err["reason"].as_str()),
            (Some(400), Some("BadRequest"))
        );
        let me = self_subject_review(&jane, &json!({}));
        assert_eq!(me["status"]["userInfo"]["username"], "jane");
    }

    #[test]
    fn subject_access_review_names_the_subject() {
        let (role, binding) = policy_objects();
        let policy = Policy {
            roles: vec![&role],
            role_bindings: vec![&binding],
            ..Policy::default()
        };
        let sar = json!({"spec": {"user": "jane", "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods", "name": "x"}}});
        assert_eq!(
            subject_access_review(&policy, &sar).unwrap()["status"]["allowed"],
            true
        );
        let bad = json!({"spec": {"resourceAttributes": {"verb": "get"}, "nonResourceAttributes": {"path": "/x", "verb": "get"}}});
        let err = subject_access_review(&policy, &bad).unwrap_err();
        assert_eq!(err["code"], 422);
        assert_eq!(
            err["message"],
            "SubjectAccessReview.authorization.k8s.io \"\" is invalid: [spec.nonResourceAttributes: Invalid value: map[string]interface {}{\"path\":\"/x\", \"verb\":\"get\"}: cannot be specified in combination with resourceAttributes, spec.user: Invalid value: \"\": at least one of user or group must be specified]"
        );
    }
}
