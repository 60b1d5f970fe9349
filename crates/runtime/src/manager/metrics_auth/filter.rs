//! The HTTP side: bearer token, authentication, authorization, then the
//! handler; answers cached as the [module docs](super) say.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::cache::TtlCache;
use super::{AccessDecision, MetricsAuth, MetricsAuthError, NonResourceRequest, UserInfo};
use crate::manager::error::error_chain;

/// controller-runtime's `CacheTTL` for token reviews, valid or not.
const TOKEN_TTL: Duration = Duration::from_secs(60);
/// controller-runtime's `AllowCacheTTL`.
const ALLOW_TTL: Duration = Duration::from_secs(5 * 60);
/// controller-runtime's `DenyCacheTTL`.
const DENY_TTL: Duration = Duration::from_secs(30);
/// controller-runtime's `TokenAccessReviewTimeout`, for both reviews.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// Entries per cache (see [`TtlCache`]).
const CACHE_CAPACITY: usize = 4096;
/// Added to every authenticated user, as kube-apiserver's
/// `AuthenticatedGroupAdder` does.
const SYSTEM_AUTHENTICATED: &str = "system:authenticated";

/// Admits a request only when its bearer token authenticates a user who
/// may make it.
pub(crate) struct MetricsAuthFilter {
    auth: Arc<dyn MetricsAuth>,
    /// SHA-256 of the token → the user, or `None` for an invalid token.
    tokens: TtlCache<Vec<u8>, Option<UserInfo>>,
    decisions: TtlCache<(UserInfo, NonResourceRequest), AccessDecision>,
}

impl MetricsAuthFilter {
    pub(crate) fn new(auth: Arc<dyn MetricsAuth>) -> Self {
        Self {
            auth,
            tokens: TtlCache::new(CACHE_CAPACITY),
            decisions: TtlCache::new(CACHE_CAPACITY),
        }
    }

    /// `router` with every route it has so far behind the filter.
    pub(crate) fn protect(self: Arc<Self>, router: Router) -> Router {
        router.route_layer(axum::middleware::from_fn_with_state(self, admit))
    }

    /// `Ok` when the request may go on; otherwise the answer to give.
    async fn check(&self, headers: &HeaderMap, verb: String, path: &str) -> Result<(), Response> {
        let Some(token) = bearer_token(headers) else {
            tracing::debug!(path, "metrics: request without a bearer token");
            return Err(unauthorized());
        };
        let user = match self.user(token).await {
            Ok(Some(user)) => user,
            Ok(None) => {
                tracing::debug!(path, "metrics: invalid bearer token");
                return Err(unauthorized());
            }
            Err(error) => {
                tracing::error!(path, error = %error_chain(&error), "metrics: authentication failed");
                return Err(plain(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Authentication failed".into(),
                ));
            }
        };
        let request = NonResourceRequest {
            verb,
            path: path.to_owned(),
        };
        match self.decision(&user, &request).await {
            Ok(decision) if decision.allowed => Ok(()),
            Ok(decision) => {
                tracing::debug!(
                    user = %user.username,
                    verb = %request.verb,
                    path,
                    reason = %decision.reason,
                    "metrics: authorization denied"
                );
                Err(plain(
                    StatusCode::FORBIDDEN,
                    format!("Authorization denied for user {}", user.username),
                ))
            }
            Err(error) => {
                let message = format!("Authorization for user {} failed", user.username);
                tracing::error!(path, error = %error_chain(&error), "metrics: {message}");
                Err(plain(StatusCode::INTERNAL_SERVER_ERROR, message))
            }
        }
    }

    async fn user(&self, token: &str) -> Result<Option<UserInfo>, MetricsAuthError> {
        let key = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .to_vec();
        if let Some(cached) = self.tokens.get(&key) {
            return Ok(cached);
        }
        let mut user = within("TokenReview", self.auth.authenticate(token)).await?;
        if let Some(user) = &mut user
            && !user.groups.iter().any(|g| g == SYSTEM_AUTHENTICATED)
        {
            user.groups.push(SYSTEM_AUTHENTICATED.to_owned());
        }
        self.tokens.insert(key, user.clone(), TOKEN_TTL);
        Ok(user)
    }

    async fn decision(
        &self,
        user: &UserInfo,
        request: &NonResourceRequest,
    ) -> Result<AccessDecision, MetricsAuthError> {
        let key = (user.clone(), request.clone());
        if let Some(cached) = self.decisions.get(&key) {
            return Ok(cached);
        }
        let decision = within("SubjectAccessReview", self.auth.authorize(user, request)).await?;
        let ttl = match decision.allowed {
            true => ALLOW_TTL,
            false => DENY_TTL,
        };
        self.decisions.insert(key, decision.clone(), ttl);
        Ok(decision)
    }
}

async fn admit(
    State(filter): State<Arc<MetricsAuthFilter>>,
    request: Request,
    next: Next,
) -> Response {
    let verb = request.method().as_str().to_ascii_lowercase();
    match filter
        .check(request.headers(), verb, request.uri().path())
        .await
    {
        Ok(()) => next.run(request).await,
        Err(answer) => answer,
    }
}

async fn within<T>(
    kind: &'static str,
    review: impl Future<Output = Result<T, MetricsAuthError>>,
) -> Result<T, MetricsAuthError> {
    tokio::time::timeout(REVIEW_TIMEOUT, review)
        .await
        .unwrap_or(Err(MetricsAuthError::Timeout {
            kind,
            timeout: REVIEW_TIMEOUT,
        }))
}

/// The token of an `Authorization: Bearer <token>` header, read as
/// kube-apiserver's bearer token authenticator reads it: the scheme is
/// case-insensitive, exactly one space separates it from a non-empty
/// token, and anything after a further space is ignored.
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized() -> Response {
    plain(StatusCode::UNAUTHORIZED, "Unauthorized".into())
}

fn plain(code: StatusCode, message: String) -> Response {
    (code, message).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use axum::body::Body;
    use axum::http::HeaderValue;
    use axum::routing::get;
    use tower::ServiceExt;

    use super::*;

    /// Tokens and permissions held in memory; counts the reviews asked.
    #[derive(Default)]
    struct FakeAuth {
        tokens: HashMap<String, UserInfo>,
        allowed: Mutex<HashSet<String>>,
        failing: AtomicBool,
        hanging: AtomicBool,
        authentications: AtomicUsize,
        authorizations: Mutex<Vec<(UserInfo, NonResourceRequest)>>,
    }

    impl FakeAuth {
        fn with_users(users: &[(&str, &str)]) -> Self {
            let tokens = users
                .iter()
                .map(|(token, name)| {
                    let user = UserInfo {
                        username: name.to_string(),
                        uid: format!("uid-{name}"),
                        groups: vec!["system:serviceaccounts".into()],
                        ..UserInfo::default()
                    };
                    (token.to_string(), user)
                })
                .collect();
            Self {
                tokens,
                ..Self::default()
            }
        }

        fn allow(&self, name: &str) {
            self.allowed.lock().unwrap().insert(name.into());
        }

        fn authentications(&self) -> usize {
            self.authentications.load(Ordering::SeqCst)
        }

        fn authorizations(&self) -> usize {
            self.authorizations.lock().unwrap().len()
        }

        async fn trouble(&self) -> Result<(), MetricsAuthError> {
            if self.hanging.load(Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            match self.failing.load(Ordering::SeqCst) {
                true => Err(MetricsAuthError::Other("API server unreachable".into())),
                false => Ok(()),
            }
        }
    }

    #[async_trait::async_trait]
    impl MetricsAuth for FakeAuth {
        async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, MetricsAuthError> {
            self.authentications.fetch_add(1, Ordering::SeqCst);
            self.trouble().await?;
            Ok(self.tokens.get(token).cloned())
        }

        async fn authorize(
            &self,
            user: &UserInfo,
            request: &NonResourceRequest,
        ) -> Result<AccessDecision, MetricsAuthError> {
            self.authorizations
                .lock()
                .unwrap()
                .push((user.clone(), request.clone()));
            self.trouble().await?;
            let allowed =
                self.allowed.lock().unwrap().contains(&user.username) && request.path == "/metrics";
            Ok(AccessDecision {
                allowed,
                reason: match allowed {
                    true => "bound to metrics-reader".into(),
                    false => String::new(),
                },
            })
        }
    }

    fn app(auth: &Arc<FakeAuth>) -> Router {
        let filter = Arc::new(MetricsAuthFilter::new(auth.clone()));
        let router = Router::new().route("/metrics", get(|| async { "demo_total 1" }));
        filter
            .protect(router)
            .route("/unprotected", get(|| async { "open" }))
    }

    async fn call(
        app: &Router,
        method: &str,
        path: &str,
        authorization: Option<&[u8]>,
    ) -> (u16, String) {
        let mut request = axum::http::Request::builder().method(method).uri(path);
        if let Some(value) = authorization {
            request = request.header(
                header::AUTHORIZATION,
                HeaderValue::from_bytes(value).unwrap(),
            );
        }
        let response = app
            .clone()
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = response.status().as_u16();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (code, String::from_utf8(body.to_vec()).unwrap())
    }

    async fn scrape(app: &Router, authorization: &str) -> (u16, String) {
        call(app, "GET", "/metrics", Some(authorization.as_bytes())).await
    }

    #[tokio::test(start_paused = true)]
    async fn missing_or_malformed_credentials_are_401_without_a_review() {
        let auth = Arc::new(FakeAuth::with_users(&[("good", "prometheus")]));
        auth.allow("prometheus");
        let app = app(&auth);
        assert_eq!(
            call(&app, "GET", "/metrics", None).await,
            (401, "Unauthorized".into())
        );
        for header in [
            &b"good"[..],
            b"Basic Z29vZDo=",
            b"Bearer",
            b"Bearer ",
            b"Bearer  good",
            b"Token good",
            b"Bearer \xffgood",
        ] {
            let answer = call(&app, "GET", "/metrics", Some(header)).await;
            assert_eq!(answer.0, 401, "{}", String::from_utf8_lossy(header));
        }
        assert_eq!(auth.authentications(), 0);
        // The scheme is case-insensitive; what follows a second space is
        // ignored, as by kube-apiserver.
        assert_eq!(scrape(&app, "bearer good").await.0, 200);
        assert_eq!(scrape(&app, "  BEARER good trailing").await.0, 200);
        // Only the filtered routes need a token.
        assert_eq!(call(&app, "GET", "/unprotected", None).await.0, 200);
    }

    #[tokio::test(start_paused = true)]
    async fn an_allowed_user_is_served_and_the_review_carries_user_verb_and_path() {
        let auth = Arc::new(FakeAuth::with_users(&[("good", "prometheus")]));
        auth.allow("prometheus");
        let app = app(&auth);
        assert_eq!(
            scrape(&app, "Bearer good").await,
            (200, "demo_total 1".into())
        );
        let (user, request) = auth.authorizations.lock().unwrap()[0].clone();
        assert_eq!(user.username, "prometheus");
        assert_eq!(user.uid, "uid-prometheus");
        assert_eq!(
            user.groups,
            ["system:serviceaccounts", "system:authenticated"],
            "system:authenticated is added as kube-apiserver does"
        );
        assert_eq!(
            request,
            NonResourceRequest {
                verb: "get".into(),
                path: "/metrics".into()
            }
        );
        // The method is the verb, lower-cased.
        call(&app, "HEAD", "/metrics", Some(b"Bearer good")).await;
        let last = auth.authorizations.lock().unwrap().last().cloned().unwrap();
        assert_eq!(last.1.verb, "head");
    }

    #[tokio::test(start_paused = true)]
    async fn an_invalid_token_is_401_and_remembered_for_a_minute() {
        let auth = Arc::new(FakeAuth::with_users(&[("good", "prometheus")]));
        let app = app(&auth);
        for _ in 0..3 {
            assert_eq!(
                scrape(&app, "Bearer forged").await,
                (401, "Unauthorized".into())
            );
        }
        assert_eq!(auth.authentications(), 1);
        assert_eq!(auth.authorizations(), 0, "no authorization without a user");
        tokio::time::advance(TOKEN_TTL).await;
        scrape(&app, "Bearer forged").await;
        assert_eq!(auth.authentications(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_denied_user_is_403_for_30s_and_an_allowed_one_200_for_5_minutes() {
        let auth = Arc::new(FakeAuth::with_users(&[
            ("good", "prometheus"),
            ("other", "jane"),
        ]));
        let app = app(&auth);
        assert_eq!(
            scrape(&app, "Bearer other").await,
            (403, "Authorization denied for user jane".into())
        );
        // Granting takes effect once the denial expires.
        auth.allow("jane");
        assert_eq!(scrape(&app, "Bearer other").await.0, 403);
        assert_eq!(auth.authorizations(), 1, "the denial is cached");
        tokio::time::advance(DENY_TTL).await;
        assert_eq!(scrape(&app, "Bearer other").await.0, 200);
        assert_eq!(auth.authorizations(), 2);

        // Allowed answers are cached for 5 minutes; the token for 1.
        auth.allowed.lock().unwrap().clear();
        tokio::time::advance(ALLOW_TTL - Duration::from_secs(1)).await;
        assert_eq!(scrape(&app, "Bearer other").await.0, 200);
        assert_eq!(auth.authorizations(), 2);
        assert_eq!(
            auth.authentications(),
            2,
            "the token was reviewed again after a minute"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(scrape(&app, "Bearer other").await.0, 403);
        // Each token is reviewed on its own.
        auth.allow("prometheus");
        assert_eq!(scrape(&app, "Bearer good").await.0, 200);
    }

    #[tokio::test(start_paused = true)]
    async fn failed_reviews_are_500_and_never_cached() {
        let auth = Arc::new(FakeAuth::with_users(&[("good", "prometheus")]));
        auth.allow("prometheus");
        let app = app(&auth);
        auth.failing.store(true, Ordering::SeqCst);
        assert_eq!(
            scrape(&app, "Bearer good").await,
            (500, "Authentication failed".into())
        );
        auth.failing.store(false, Ordering::SeqCst);
        assert_eq!(scrape(&app, "Bearer good").await.0, 200);
        assert_eq!(auth.authentications(), 2, "the failure was not cached");

        // Now the token is cached but authorization fails (new path, so no
        // cached decision).
        let filter = MetricsAuthFilter::new(auth.clone());
        filter.user("good").await.unwrap();
        auth.failing.store(true, Ordering::SeqCst);
        let headers = HeaderMap::from_iter([(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer good"),
        )]);
        let answer = filter
            .check(&headers, "get".into(), "/metrics")
            .await
            .unwrap_err();
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        auth.failing.store(false, Ordering::SeqCst);
        assert!(
            filter
                .check(&headers, "get".into(), "/metrics")
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_review_that_never_answers_fails_after_the_timeout() {
        let auth = Arc::new(FakeAuth::with_users(&[("good", "prometheus")]));
        auth.hanging.store(true, Ordering::SeqCst);
        let app = app(&auth);
        let start = tokio::time::Instant::now();
        assert_eq!(scrape(&app, "Bearer good").await.0, 500);
        assert_eq!(start.elapsed(), REVIEW_TIMEOUT);
        let error = within("TokenReview", std::future::pending::<Result<(), _>>())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the TokenReview was not answered within 10s"
        );
    }
}
