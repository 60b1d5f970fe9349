//! Role-based access control as kube-apiserver enforces it, independent of
//! the server: everything works on RBAC objects as `serde_json::Value`.
//!
//! - [`resolve`]: request attributes (verb, group, resource, subresource,
//!   namespace, name, or a non-resource path) from an HTTP method, path
//!   and query, as kube-apiserver's `RequestInfoFactory` derives them.
//! - [`Policy::authorize`]: the RBAC authorizer over stored Roles,
//!   ClusterRoles (aggregated ones included), RoleBindings and
//!   ClusterRoleBindings; `system:masters` is always allowed.
//! - [`forbidden_status`]: the `403` body of a denied request.
//! - [`self_subject_access_review`] / [`subject_access_review`]: what
//!   `kubectl auth can-i` asks.
//! - [`token_review`] / [`self_subject_review`]: who a token, or the
//!   requester, is.
//! - [`TokenRegistry`]: bearer tokens the test cluster issues for users and
//!   ServiceAccounts.
//! - [`bootstrap_policy`]: the ClusterRoles and bindings kube-apiserver
//!   creates at startup that requests rely on (discovery, reviews).

mod authorizer;
mod bootstrap;
mod request_info;
mod review;
mod tokens;

pub use authorizer::{
    Decision, Policy, SYSTEM_MASTERS, UserInfo, forbidden_message, forbidden_status, rule_allows,
    service_account_username,
};
pub use bootstrap::bootstrap_policy;
pub use request_info::{RequestInfo, resolve};
pub use review::{
    AUTHENTICATION_GROUP, AUTHORIZATION_GROUP, Decide, decide_self_subject_access_review,
    decide_subject_access_review, self_subject_access_review, self_subject_review,
    subject_access_review, token_review,
};
pub use tokens::{
    AuthError, SYSTEM_ANONYMOUS, SYSTEM_AUTHENTICATED, SYSTEM_UNAUTHENTICATED, TokenRegistry,
    unauthorized_status,
};
