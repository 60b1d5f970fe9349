//! Authentication and authorization of requests, as kube-apiserver's
//! filters do them. Nothing is checked unless an [`Authorizer`] is plugged
//! in ([`Authorization::set`]; the cluster plugs in [`RbacAuthorizer`]
//! when started with RBAC): then every request is authenticated by its
//! bearer token (`401 Unauthorized` for a token the cluster did not
//! issue; no token is `system:anonymous`) and authorized (`403 Forbidden`
//! with kube-apiserver's message and details).
//!
//! Tokens are issued in both modes, so clients for users and
//! ServiceAccounts work the same with and without enforcement; the review
//! APIs answer in both modes, allowing everything when nothing enforces
//! (kube-apiserver's `AlwaysAllow`).

use std::sync::Arc;

use parking_lot::RwLock;
use serde_json::Value;

use crate::ops::Api;
use crate::rbac::{
    Decision, Policy, RequestInfo, TokenRegistry, UserInfo, forbidden_status, resolve,
    unauthorized_status,
};
use crate::status::ApiError;

/// Decides whether a user may make a request.
pub(crate) trait Authorizer: Send + Sync {
    fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision;
}

/// The cluster's token registry and the plugged-in authorizer, if any.
pub(crate) struct Authorization {
    tokens: Arc<TokenRegistry>,
    current: RwLock<Option<Arc<dyn Authorizer>>>,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("enforcing", &self.current.read().is_some())
            .finish_non_exhaustive()
    }
}

impl Authorization {
    /// Authenticating with `tokens`, enforcing nothing yet.
    pub(crate) fn new(tokens: Arc<TokenRegistry>) -> Authorization {
        Authorization {
            tokens,
            current: RwLock::new(None),
        }
    }

    /// Authenticate and authorize every later request with `authorizer`.
    pub(crate) fn set(&self, authorizer: Arc<dyn Authorizer>) {
        *self.current.write() = Some(authorizer);
    }

    fn enforcing(&self) -> Option<Arc<dyn Authorizer>> {
        self.current.read().clone()
    }

    /// `Ok` when the request may proceed (with its user when anything
    /// enforces); otherwise kube-apiserver's 401 or 403.
    pub(crate) fn check(
        &self,
        method: &str,
        path: &str,
        query: &str,
        authorization: Option<&str>,
    ) -> Result<Option<UserInfo>, ApiError> {
        let Some(authorizer) = self.enforcing() else {
            return Ok(None);
        };
        let user = self
            .tokens
            .authenticate(authorization)
            .map_err(|_| ApiError::from_status(&unauthorized_status()))?;
        let request = resolve(method, path, query);
        let decision = authorizer.authorize(&user, &request);
        if decision.allowed() {
            Ok(Some(user))
        } else {
            Err(ApiError::from_status(&forbidden_status(
                &user,
                &request,
                decision.reason(),
            )))
        }
    }

    /// Who an `Authorization` header authenticates, leniently: anonymous
    /// for credentials the cluster does not know (used by the reviews
    /// when nothing enforces).
    pub(crate) fn user_of(&self, authorization: Option<&str>) -> UserInfo {
        self.tokens
            .authenticate(authorization)
            .or_else(|_| self.tokens.authenticate(None))
            .unwrap_or_default()
    }

    /// Who a bearer token (without `Bearer `) authenticates, if anyone.
    pub(crate) fn token_user(&self, token: &str) -> Option<UserInfo> {
        self.tokens
            .authenticate(Some(&format!("Bearer {token}")))
            .ok()
    }

    /// The decision on `request` for `user`: the authorizer's, or allowed
    /// when nothing enforces.
    pub(crate) fn decide(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        match self.enforcing() {
            Some(a) => a.authorize(user, request),
            None => Decision::Allow(String::new()),
        }
    }
}

/// The Roles, ClusterRoles and bindings stored in the cluster, as of one
/// RBAC epoch.
struct PolicyCache {
    epoch: u64,
    roles: Vec<Value>,
    cluster_roles: Vec<Value>,
    role_bindings: Vec<Value>,
    cluster_role_bindings: Vec<Value>,
}

/// kube-apiserver's RBAC authorizer over the cluster's stored RBAC
/// objects. The objects are read once and kept until an RBAC object is
/// written (the API's RBAC epoch changes).
pub(crate) struct RbacAuthorizer {
    api: Arc<Api>,
    cache: RwLock<Arc<PolicyCache>>,
}

impl RbacAuthorizer {
    pub(crate) fn new(api: Arc<Api>) -> RbacAuthorizer {
        let cache = Arc::new(Self::load(&api));
        RbacAuthorizer {
            api,
            cache: RwLock::new(cache),
        }
    }

    fn load(api: &Api) -> PolicyCache {
        // The epoch first: a write racing with the reads below makes the
        // next request reload.
        let epoch = api.rbac_epoch();
        let values = |table| {
            api.store
                .list(table, None, None)
                .0
                .iter()
                .map(|s| s.value())
                .collect::<Vec<_>>()
        };
        let [roles, cluster_roles, role_bindings, cluster_role_bindings] = api.rbac_tables();
        PolicyCache {
            epoch,
            roles: values(roles),
            cluster_roles: values(cluster_roles),
            role_bindings: values(role_bindings),
            cluster_role_bindings: values(cluster_role_bindings),
        }
    }

    fn current(&self) -> Arc<PolicyCache> {
        let cached = self.cache.read().clone();
        if cached.epoch == self.api.rbac_epoch() {
            return cached;
        }
        let fresh = Arc::new(Self::load(&self.api));
        *self.cache.write() = fresh.clone();
        fresh
    }
}

impl Authorizer for RbacAuthorizer {
    fn authorize(&self, user: &UserInfo, request: &RequestInfo) -> Decision {
        let cache = self.current();
        let policy = Policy {
            roles: cache.roles.iter().collect(),
            cluster_roles: cache.cluster_roles.iter().collect(),
            role_bindings: cache.role_bindings.iter().collect(),
            cluster_role_bindings: cache.cluster_role_bindings.iter().collect(),
        };
        policy.authorize(user, request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct DenyLists;
    impl Authorizer for DenyLists {
        fn authorize(&self, _: &UserInfo, r: &RequestInfo) -> Decision {
            if r.verb == "list" {
                Decision::Deny(String::new())
            } else {
                Decision::Allow(String::new())
            }
        }
    }

    #[test]
    fn unknown_tokens_are_401_and_denials_403() {
        let tokens = Arc::new(TokenRegistry::new());
        let alice = tokens.issue("alice", &[]);
        let authz = Authorization::new(tokens);
        let bearer = format!("Bearer {alice}");
        assert_eq!(
            authz
                .check(
                    "GET",
                    "/api/v1/namespaces/default/pods",
                    "",
                    Some("Bearer x")
                )
                .unwrap(),
            None,
            "nothing is checked until an authorizer is plugged in"
        );
        authz.set(Arc::new(DenyLists));
        let err = authz
            .check("GET", "/api/v1/namespaces/default/pods", "", Some(&bearer))
            .unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let user = authz
            .check(
                "GET",
                "/api/v1/namespaces/default/pods/p",
                "",
                Some(&bearer),
            )
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        let err = authz
            .check("GET", "/api/v1/pods", "", Some("Bearer forged"))
            .unwrap_err();
        assert_eq!((err.code, err.reason), (401, "Unauthorized"));
        assert_eq!(
            authz.user_of(Some("Bearer forged")).name,
            "system:anonymous"
        );
    }
}
