//! Bearer tokens the test cluster issues, and who they authenticate.

use std::collections::HashMap;

use parking_lot::RwLock;
use serde_json::Value;

use super::authorizer::{UserInfo, service_account_username};

/// The group every authenticated user is in.
pub const SYSTEM_AUTHENTICATED: &str = "system:authenticated";
/// The user of requests without credentials.
pub const SYSTEM_ANONYMOUS: &str = "system:anonymous";
/// The group of requests without credentials.
pub const SYSTEM_UNAUTHENTICATED: &str = "system:unauthenticated";

/// A request's credentials were not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// The bearer token is not one the cluster issued (or it was revoked).
    #[error("the bearer token is not known to the test cluster")]
    UnknownToken,
    /// The `Authorization` header is not `Bearer <token>`.
    #[error("the Authorization header is not a bearer token")]
    NotBearer,
}

/// The `401 Unauthorized` `Status` kube-apiserver answers bad credentials
/// with.
pub fn unauthorized_status() -> Value {
    crate::status::status_value(401, "Unauthorized", "Unauthorized")
}

/// Tokens issued for users and ServiceAccounts.
#[derive(Debug, Default)]
pub struct TokenRegistry {
    tokens: RwLock<HashMap<String, UserInfo>>,
}

fn new_token() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut rng = rand::rng();
    (0..40)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

impl TokenRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Issues a token for user `name` in `groups` (plus
    /// `system:authenticated`, as kube-apiserver adds it).
    pub fn issue(&self, name: &str, groups: &[&str]) -> String {
        let mut all: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !all.iter().any(|g| g == SYSTEM_AUTHENTICATED) {
            all.push(SYSTEM_AUTHENTICATED.to_string());
        }
        let token = new_token();
        self.tokens.write().insert(
            token.clone(),
            UserInfo {
                name: name.to_string(),
                groups: all,
            },
        );
        token
    }

    /// Issues a token for the ServiceAccount `namespace/name`: user
    /// `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`,
    /// `system:serviceaccounts:<ns>` and `system:authenticated`.
    pub fn issue_service_account(&self, namespace: &str, name: &str) -> String {
        let ns_group = format!("system:serviceaccounts:{namespace}");
        self.issue(
            &service_account_username(namespace, name),
            &["system:serviceaccounts", &ns_group],
        )
    }

    /// Forgets a token; later requests with it are unauthorized.
    pub fn revoke(&self, token: &str) -> bool {
        self.tokens.write().remove(token).is_some()
    }

    /// Who the `Authorization` header value authenticates: the anonymous
    /// user when there is none, the token's user for a known bearer token.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<UserInfo, AuthError> {
        let Some(header) = authorization else {
            return Ok(UserInfo::new(SYSTEM_ANONYMOUS, &[SYSTEM_UNAUTHENTICATED]));
        };
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or(AuthError::NotBearer)?;
        self.tokens
            .read()
            .get(token)
            .cloned()
            .ok_or(AuthError::UnknownToken)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_authenticate_their_users() {
        let reg = TokenRegistry::new();
        let t = reg.issue("jane", &["devs"]);
        let user = reg.authenticate(Some(&format!("Bearer {t}"))).unwrap();
        assert_eq!(user.name, "jane");
        assert_eq!(user.groups, vec!["devs", SYSTEM_AUTHENTICATED]);
        let sa = reg.issue_service_account("kube-system", "rs-controller");
        let user = reg.authenticate(Some(&format!("Bearer {sa}"))).unwrap();
        assert_eq!(user.name, "system:serviceaccount:kube-system:rs-controller");
        assert_eq!(
            user.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                SYSTEM_AUTHENTICATED
            ]
        );
        assert_eq!(reg.authenticate(None).unwrap().name, SYSTEM_ANONYMOUS);
        assert_eq!(
            reg.authenticate(Some("Bearer nope")),
            Err(AuthError::UnknownToken)
        );
        assert_eq!(
            reg.authenticate(Some("Basic abc")),
            Err(AuthError::NotBearer)
        );
        assert!(reg.revoke(&t));
        assert_eq!(
            reg.authenticate(Some(&format!("Bearer {t}"))),
            Err(AuthError::UnknownToken)
        );
        assert_eq!(unauthorized_status()["code"], 401);
    }
}
