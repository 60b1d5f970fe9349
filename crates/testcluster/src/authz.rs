//! Authorization of resource requests: every request is allowed unless an
//! [`Authorizer`] is plugged in (the RBAC evaluator does), whose denials
//! are answered 403 Forbidden with kube-apiserver's message.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::status::ApiError;

/// What a request does, as authorizers see it (kube-apiserver's
/// authorizer attributes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Attributes<'a> {
    /// The bearer token the request carried, if any; authorizers map it
    /// to a user.
    #[cfg_attr(not(test), allow(dead_code))] // read by the RBAC evaluator
    pub(crate) token: Option<&'a str>,
    pub(crate) verb: &'a str,
    pub(crate) api_group: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) subresource: Option<&'a str>,
    pub(crate) namespace: Option<&'a str>,
    pub(crate) name: Option<&'a str>,
}

/// An authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(test), allow(dead_code))] // made by the RBAC evaluator
pub(crate) enum Decision {
    Allow,
    /// Denied for `user` (as the 403 message names them), with an
    /// optional reason appended to the message.
    Deny {
        user: String,
        reason: String,
    },
}

/// Decides whether a request may proceed.
pub(crate) trait Authorizer: Send + Sync {
    fn authorize(&self, attrs: &Attributes<'_>) -> Decision;
}

/// The plugged-in authorizer, if any.
#[derive(Default)]
pub(crate) struct Authorization {
    current: RwLock<Option<Arc<dyn Authorizer>>>,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("enabled", &self.current.read().is_some())
            .finish()
    }
}

impl Authorization {
    /// Authorize every later request with `authorizer`.
    #[cfg_attr(not(test), allow(dead_code))] // the RBAC evaluator plugs in here
    pub(crate) fn set(&self, authorizer: Arc<dyn Authorizer>) {
        *self.current.write() = Some(authorizer);
    }

    /// `Ok` when allowed; otherwise the 403 kube-apiserver answers, e.g.
    /// `pods is forbidden: User "u" cannot list resource "pods" in API
    /// group "" in the namespace "default"`.
    pub(crate) fn check(&self, attrs: &Attributes<'_>) -> Result<(), ApiError> {
        let Some(authorizer) = self.current.read().clone() else {
            return Ok(());
        };
        match authorizer.authorize(attrs) {
            Decision::Allow => Ok(()),
            Decision::Deny { user, reason } => Err(forbidden(attrs, &user, &reason)),
        }
    }
}

fn forbidden(a: &Attributes<'_>, user: &str, reason: &str) -> ApiError {
    let resource = match a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.to_string(),
    };
    let qualified = if a.api_group.is_empty() {
        resource.clone()
    } else {
        format!("{resource}.{}", a.api_group)
    };
    let subject = match a.name {
        Some(n) => format!("{qualified} \"{n}\""),
        None => qualified,
    };
    let scope = match a.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".to_string(),
    };
    let mut message = format!(
        "{subject} is forbidden: User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\"{scope}",
        a.verb, a.api_group
    );
    if !reason.is_empty() {
        message.push_str(": ");
        message.push_str(reason);
    }
    ApiError::new(403, "Forbidden", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct DenyLists;
    impl Authorizer for DenyLists {
        fn authorize(&self, a: &Attributes<'_>) -> Decision {
            if a.verb == "list" {
                Decision::Deny {
                    user: a.token.unwrap_or("system:anonymous").to_string(),
                    reason: String::new(),
                }
            } else {
                Decision::Allow
            }
        }
    }

    #[test]
    fn denials_are_403_with_kube_apiservers_message() {
        let authz = Authorization::default();
        let list = Attributes {
            token: Some("alice"),
            verb: "list",
            api_group: "",
            resource: "pods",
            subresource: None,
            namespace: Some("default"),
            name: None,
        };
        assert!(
            authz.check(&list).is_ok(),
            "everything is allowed by default"
        );
        authz.set(Arc::new(DenyLists));
        let err = authz.check(&list).unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(
            err.message,
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
        );
        let get = Attributes {
            verb: "get",
            ..list
        };
        assert!(authz.check(&get).is_ok());
    }
}
