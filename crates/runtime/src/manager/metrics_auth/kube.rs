//! [`MetricsAuth`] through the API server: a TokenReview
//! (`authentication.k8s.io/v1`) for the token, a SubjectAccessReview
//! (`authorization.k8s.io/v1`) for the request.
//!
//! The reviews are written with the crate's own serde types rather than
//! k8s-openapi's: their Rust shape changes between Kubernetes versions
//! (`TokenReviewSpec.token` stopped being optional in 1.36), the wire
//! format does not.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{AccessDecision, MetricsAuth, MetricsAuthError, NonResourceRequest, UserInfo};

const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

/// Delegates authentication and authorization to the API server, as
/// kube-apiserver's aggregated servers and controller-runtime's secure
/// metrics do.
///
/// The process's ServiceAccount needs `create` on `tokenreviews`
/// (`authentication.k8s.io`) and `subjectaccessreviews`
/// (`authorization.k8s.io`), both cluster-scoped (the built-in
/// `system:auth-delegator` ClusterRole grants exactly these); the scraper
/// needs `get` on the non-resource URL `/metrics`.
#[derive(Clone)]
pub struct KubeMetricsAuth {
    client: kube::Client,
}

impl std::fmt::Debug for KubeMetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeMetricsAuth").finish_non_exhaustive()
    }
}

impl KubeMetricsAuth {
    /// Reviews through `client` (the manager uses its own).
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    /// POSTs `review` to `path` and returns the answer's status.
    async fn create<S: DeserializeOwned>(
        &self,
        path: &str,
        review: &Review<'_, impl Serialize>,
    ) -> Result<Option<S>, kube::Error> {
        let body = serde_json::to_vec(review).map_err(kube::Error::SerdeError)?;
        let request = http::Request::post(path)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| kube::Error::BuildRequest(kube::core::request::Error::BuildRequest(e)))?;
        let answer: Answer<S> = self.client.request(request).await?;
        Ok(answer.status)
    }
}

#[async_trait::async_trait]
impl MetricsAuth for KubeMetricsAuth {
    async fn authenticate(&self, token: &str) -> Result<Option<UserInfo>, MetricsAuthError> {
        // No audiences: the API server's own, as controller-runtime asks.
        let review = Review {
            api_version: "authentication.k8s.io/v1",
            kind: "TokenReview",
            spec: TokenReviewSpec { token },
        };
        let status: TokenReviewStatus = self
            .create(TOKEN_REVIEWS, &review)
            .await
            .map_err(MetricsAuthError::TokenReview)?
            .ok_or(MetricsAuthError::NoStatus {
                kind: "TokenReview",
            })?;
        if !status.authenticated {
            if !status.error.is_empty() {
                tracing::debug!(error = %status.error, "metrics: the API server rejected a bearer token");
            }
            return Ok(None);
        }
        let user = status.user;
        Ok(Some(UserInfo {
            username: user.username,
            uid: user.uid,
            groups: user.groups,
            extra: user.extra,
        }))
    }

    async fn authorize(
        &self,
        user: &UserInfo,
        request: &NonResourceRequest,
    ) -> Result<AccessDecision, MetricsAuthError> {
        let review = Review {
            api_version: "authorization.k8s.io/v1",
            kind: "SubjectAccessReview",
            spec: SubjectAccessReviewSpec {
                user: &user.username,
                uid: &user.uid,
                groups: &user.groups,
                extra: &user.extra,
                non_resource_attributes: NonResourceAttributes {
                    path: &request.path,
                    verb: &request.verb,
                },
            },
        };
        let status: SubjectAccessReviewStatus = self
            .create(SUBJECT_ACCESS_REVIEWS, &review)
            .await
            .map_err(MetricsAuthError::SubjectAccessReview)?
            .ok_or(MetricsAuthError::NoStatus {
                kind: "SubjectAccessReview",
            })?;
        let reason = match (status.reason.as_str(), status.evaluation_error.as_str()) {
            (reason, "") => reason.to_owned(),
            ("", error) => error.to_owned(),
            (reason, error) => format!("{reason}; {error}"),
        };
        Ok(AccessDecision {
            allowed: status.allowed,
            reason,
        })
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Review<'a, S> {
    api_version: &'a str,
    kind: &'a str,
    spec: S,
}

#[derive(Deserialize)]
struct Answer<S> {
    status: Option<S>,
}

#[derive(Serialize)]
struct TokenReviewSpec<'a> {
    token: &'a str,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct TokenReviewStatus {
    authenticated: bool,
    error: String,
    user: ReviewedUser,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ReviewedUser {
    username: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubjectAccessReviewSpec<'a> {
    #[serde(skip_serializing_if = "str::is_empty")]
    user: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    uid: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    groups: &'a [String],
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    extra: &'a BTreeMap<String, Vec<String>>,
    non_resource_attributes: NonResourceAttributes<'a>,
}

#[derive(Serialize)]
struct NonResourceAttributes<'a> {
    path: &'a str,
    verb: &'a str,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SubjectAccessReviewStatus {
    allowed: bool,
    reason: String,
    evaluation_error: String,
}
