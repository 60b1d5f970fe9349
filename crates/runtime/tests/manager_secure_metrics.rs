//! `--metrics-secure` end to end on real sockets: HTTPS (self-signed, or
//! certificate files that are reloaded), the 401/403/200 answers, and the
//! TokenReview and SubjectAccessReview the manager sends. The API server is
//! a stub that answers the reviews with the test cluster's token registry
//! and RBAC authorizer (the test cluster itself does not serve the review
//! APIs yet), and enforces RBAC on the controller's own review requests.
#![allow(clippy::unwrap_used)]

mod manager_support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::routing::post;
use ctrlkit_runtime::manager::{
    KubeMetricsAuth, Manager, ManagerError, MetricsAuth, MetricsAuthError, NonResourceRequest,
    SecureMetricsConfig, TlsFiles, UserInfo,
};
use ctrlkit_testcluster::rbac::{
    Policy, TokenRegistry, forbidden_status, resolve, subject_access_review,
};
use manager_support::{config, http_get, offline_client};
use prometheus_client::metrics::counter::Counter;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, RootCertStore};
use tokio_util::sync::CancellationToken;

const CONTROLLER: (&str, &str) = ("ctrlkit-system", "replicaset-controller");
const PROMETHEUS: (&str, &str) = ("monitoring", "prometheus");

/// RBAC as deploy/ and a cluster operator would set it up: the controller
/// may review tokens and access (system:auth-delegator's rules), Prometheus
/// may get /metrics.
fn rbac(controller_may_review: bool) -> Vec<Value> {
    let mut objects = vec![
        json!({"kind": "ClusterRole", "metadata": {"name": "metrics-reader"},
               "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": "prometheus-metrics"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
               "subjects": [{"kind": "ServiceAccount", "namespace": PROMETHEUS.0, "name": PROMETHEUS.1}]}),
        json!({"kind": "ClusterRole", "metadata": {"name": "metrics-auth"},
               "rules": [
                   {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                   {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]}),
    ];
    if controller_may_review {
        objects.push(json!({"kind": "ClusterRoleBinding", "metadata": {"name": "controller-metrics-auth"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-auth"},
            "subjects": [{"kind": "ServiceAccount", "namespace": CONTROLLER.0, "name": CONTROLLER.1}]}));
    }
    objects
}

/// An API server that serves the two review APIs only.
struct Stub {
    tokens: TokenRegistry,
    rbac: Vec<Value>,
    /// (path, body) of every review it was sent.
    reviews: Mutex<Vec<(String, Value)>>,
}

impl Stub {
    fn policy(&self) -> Policy<'_> {
        let of = |kind: &str| self.rbac.iter().filter(|o| o["kind"] == kind).collect();
        Policy {
            roles: of("Role"),
            cluster_roles: of("ClusterRole"),
            role_bindings: of("RoleBinding"),
            cluster_role_bindings: of("ClusterRoleBinding"),
        }
    }

    fn reviews(&self, path_end: &str) -> Vec<Value> {
        let reviews = self.reviews.lock().unwrap();
        reviews
            .iter()
            .filter(|(path, _)| path.ends_with(path_end))
            .map(|(_, body)| body.clone())
            .collect()
    }
}

async fn review(
    State(stub): State<Arc<Stub>>,
    uri: Uri,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let path = uri.path().to_string();
    stub.reviews
        .lock()
        .unwrap()
        .push((path.clone(), body.clone()));
    // The caller (the controller) needs RBAC for the review itself.
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Ok(caller) = stub.tokens.authenticate(authorization) else {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"kind": "Status", "code": 401})),
        );
    };
    let request = resolve("POST", &path, "");
    let policy = stub.policy();
    let decision = policy.authorize(&caller, &request);
    if !decision.allowed() {
        let status = forbidden_status(&caller, &request, decision.reason());
        return (StatusCode::FORBIDDEN, Json(status));
    }
    let mut answer = body.clone();
    if path.ends_with("/tokenreviews") {
        let token = body["spec"]["token"].as_str().unwrap_or("");
        answer["status"] = match stub.tokens.authenticate(Some(&format!("Bearer {token}"))) {
            Ok(user) => json!({"authenticated": true, "user": {
                "username": user.name, "uid": format!("uid-of-{}", user.name), "groups": user.groups,
                "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]}}}),
            Err(error) => json!({"authenticated": false, "error": error.to_string()}),
        };
        return (StatusCode::CREATED, Json(answer));
    }
    match subject_access_review(&policy, &body) {
        Ok(answer) => (StatusCode::CREATED, Json(answer)),
        Err(status) => (StatusCode::UNPROCESSABLE_ENTITY, Json(status)),
    }
}

/// Starts the stub; returns it and a client that authenticates as the
/// controller's ServiceAccount.
async fn stub_api_server(controller_may_review: bool) -> (Arc<Stub>, kube::Client) {
    let stub = Arc::new(Stub {
        tokens: TokenRegistry::new(),
        rbac: rbac(controller_may_review),
        reviews: Mutex::new(Vec::new()),
    });
    let controller_token = stub
        .tokens
        .issue_service_account(CONTROLLER.0, CONTROLLER.1);
    let app = axum::Router::new()
        .route("/apis/authentication.k8s.io/v1/tokenreviews", post(review))
        .route(
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            post(review),
        )
        .with_state(stub.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    config.headers.push((
        header::AUTHORIZATION,
        format!("Bearer {controller_token}").parse().unwrap(),
    ));
    (stub, kube::Client::try_from(config).unwrap())
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Trusts any certificate: a scraper of a self-signed endpoint
/// (`insecure_skip_verify`).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn insecure_client() -> Arc<ClientConfig> {
    let provider = provider();
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    Arc::new(config)
}

fn client_trusting(root: CertificateDer<'static>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(root).unwrap();
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

/// What an HTTPS GET got back.
struct Answer {
    code: u16,
    body: String,
    /// The certificate the server presented.
    cert: CertificateDer<'static>,
}

/// One GET over a fresh TLS connection to `addr`, verified by `tls` for
/// `server_name`.
async fn https_get(
    addr: SocketAddr,
    tls: Arc<ClientConfig>,
    server_name: &str,
    authorization: Option<&str>,
) -> Result<Answer, std::io::Error> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from(server_name.to_string()).unwrap();
    let mut stream = TlsConnector::from(tls).connect(name, tcp).await?;
    let cert = stream.get_ref().1.peer_certificates().unwrap()[0].clone();
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: test\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response[9..12].parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Ok(Answer { code, body, cert })
}

async fn scrape(addr: SocketAddr, token: Option<&str>) -> (u16, String) {
    let authorization = token.map(|t| format!("Bearer {t}"));
    let answer = https_get(
        addr,
        insecure_client(),
        "localhost",
        authorization.as_deref(),
    )
    .await
    .unwrap();
    (answer.code, answer.body)
}

fn secure_config(tls_files: Option<TlsFiles>) -> ctrlkit_runtime::manager::ManagerConfig {
    let mut config = config("secure-metrics");
    config.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    config.health_addr = Some("127.0.0.1:0".parse().unwrap());
    config.secure_metrics = Some(SecureMetricsConfig { tls_files });
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scrapes_need_a_token_the_api_server_accepts_and_rbac_for_metrics() {
    let (stub, client) = stub_api_server(true).await;
    let prometheus = stub
        .tokens
        .issue_service_account(PROMETHEUS.0, PROMETHEUS.1);
    let jane = stub.tokens.issue("jane", &["developers"]);

    let mut manager = Manager::with_client(client, secure_config(None)).unwrap();
    let counter = Counter::<u64>::default();
    manager
        .registry_mut()
        .register("demo_things", "things done", counter.clone());
    counter.inc();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let endpoints = status.endpoints().await.unwrap();
    let (metrics, health) = (endpoints.metrics.unwrap(), endpoints.health.unwrap());

    assert_eq!(scrape(metrics, None).await, (401, "Unauthorized".into()));
    assert_eq!(scrape(metrics, Some("forged")).await.0, 401);
    assert_eq!(
        scrape(metrics, Some(&jane)).await,
        (403, "Authorization denied for user jane".into())
    );
    let (code, body) = scrape(metrics, Some(&prometheus)).await;
    assert_eq!(code, 200);
    assert!(body.contains("demo_things_total 1"), "{body}");

    // What the API server was asked.
    let token_reviews = stub.reviews("/tokenreviews");
    assert_eq!(
        token_reviews[0],
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
               "spec": {"token": "forged"}})
    );
    let access_reviews = stub.reviews("/subjectaccessreviews");
    assert_eq!(access_reviews.len(), 2, "jane and prometheus");
    let user = "system:serviceaccount:monitoring:prometheus";
    assert_eq!(
        access_reviews[1],
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
               "spec": {
                   "user": user,
                   "uid": format!("uid-of-{user}"),
                   "groups": ["system:serviceaccounts", "system:serviceaccounts:monitoring", "system:authenticated"],
                   "extra": {"authentication.kubernetes.io/pod-name": ["prometheus-0"]},
                   "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    );

    // Cached: scraping again asks nothing.
    let asked = stub.reviews.lock().unwrap().len();
    assert_eq!(scrape(metrics, Some(&prometheus)).await.0, 200);
    assert_eq!(scrape(metrics, Some(&jane)).await.0, 403);
    assert_eq!(stub.reviews.lock().unwrap().len(), asked);

    // Plain HTTP gets no metrics from the HTTPS port; the probes stay
    // plain and open on their own address.
    let mut tcp = tokio::net::TcpStream::connect(metrics).await.unwrap();
    tcp.write_all(b"GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    let _ = tcp.read_to_end(&mut raw).await;
    assert!(!String::from_utf8_lossy(&raw).contains("demo_things"));
    assert_eq!(http_get(health, "/healthz").await, (200, "ok".into()));
    assert_eq!(http_get(health, "/metrics").await.0, 404);

    // The generated certificate is valid for localhost and 127.0.0.1.
    let cert = https_get(metrics, insecure_client(), "localhost", None)
        .await
        .unwrap()
        .cert;
    for name in ["localhost", "127.0.0.1"] {
        let answer = https_get(metrics, client_trusting(cert.clone()), name, None).await;
        assert_eq!(answer.unwrap().code, 401, "{name}");
    }
    assert!(
        https_get(metrics, client_trusting(cert), "metrics.example", None)
            .await
            .is_err()
    );

    shutdown.cancel();
    running.await.unwrap().unwrap();
    assert!(
        tokio::net::TcpStream::connect(metrics).await.is_err(),
        "the HTTPS endpoint stops with the manager"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kube_reviews_report_the_api_servers_answers_and_errors() {
    let (stub, client) = stub_api_server(true).await;
    let auth = KubeMetricsAuth::new(client);
    let token = stub.tokens.issue("jane", &["developers"]);
    let jane = auth.authenticate(&token).await.unwrap().unwrap();
    assert_eq!(
        jane,
        UserInfo {
            username: "jane".into(),
            uid: "uid-of-jane".into(),
            groups: vec!["developers".into(), "system:authenticated".into()],
            extra: [(
                "authentication.kubernetes.io/pod-name".to_string(),
                vec!["prometheus-0".to_string()]
            )]
            .into()
        }
    );
    assert_eq!(auth.authenticate("forged").await.unwrap(), None);
    let get_metrics = NonResourceRequest {
        verb: "get".into(),
        path: "/metrics".into(),
    };
    let decision = auth.authorize(&jane, &get_metrics).await.unwrap();
    assert!(!decision.allowed);
    let reader = UserInfo {
        username: "system:serviceaccount:monitoring:prometheus".into(),
        ..UserInfo::default()
    };
    let decision = auth.authorize(&reader, &get_metrics).await.unwrap();
    assert!(decision.allowed, "{decision:?}");
    assert!(decision.reason.contains("metrics-reader"), "{decision:?}");
    let push = NonResourceRequest {
        verb: "post".into(),
        path: "/metrics".into(),
    };
    assert!(!auth.authorize(&reader, &push).await.unwrap().allowed);

    // Without RBAC for the reviews the API server refuses them: an error
    // (answered 500), not a verdict on the scraper.
    let (stub, client) = stub_api_server(false).await;
    let auth = KubeMetricsAuth::new(client.clone());
    let token = stub.tokens.issue("jane", &[]);
    let error = auth.authenticate(&token).await.unwrap_err();
    let MetricsAuthError::TokenReview(kube::Error::Api(status)) = &error else {
        panic!("unexpected {error:?}");
    };
    assert_eq!(status.code, 403);
    let error = auth.authorize(&reader, &get_metrics).await.unwrap_err();
    assert!(
        matches!(error, MetricsAuthError::SubjectAccessReview(_)),
        "{error:?}"
    );

    // Through the manager (whose client is this stub's): a 500.
    let manager = Manager::with_client(client, secure_config(None)).unwrap();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let metrics = status.endpoints().await.unwrap().metrics.unwrap();
    assert_eq!(
        scrape(metrics, Some(&token)).await,
        (500, "Authentication failed".into())
    );
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_metrics_auth_can_replace_the_managers_client() {
    // The manager's own client reaches nothing; the reviews go elsewhere.
    let (stub, reviews_client) = stub_api_server(true).await;
    let prometheus = stub
        .tokens
        .issue_service_account(PROMETHEUS.0, PROMETHEUS.1);
    let mut manager = Manager::with_client(offline_client(), secure_config(None)).unwrap();
    manager.set_metrics_auth(Arc::new(KubeMetricsAuth::new(reviews_client)));
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let metrics = status.endpoints().await.unwrap().metrics.unwrap();
    assert_eq!(scrape(metrics, Some(&prometheus)).await.0, 200);
    shutdown.cancel();
    running.await.unwrap().unwrap();
}

/// A CA and a leaf for localhost signed by it, as PEM (cert, key), with the
/// CA's certificate.
struct Issued {
    ca: CertificateDer<'static>,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Issued {
    fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = params.self_signed(&key).unwrap().der().clone();
        Self {
            ca,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    fn leaf(&self) -> (String, String, CertificateDer<'static>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().clone())
    }
}

/// Writes `contents` and moves the modification time on, as a rotation
/// does, even on file systems with coarse timestamps.
fn rotate(path: &Path, contents: &str, generation: u64) {
    std::fs::write(path, contents).unwrap();
    let file = std::fs::File::options().write(true).open(path).unwrap();
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + generation);
    file.set_modified(when).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_files_are_served_and_reloaded_when_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::in_dir(dir.path(), "tls.crt", "tls.key");
    let ca = Issued::new();
    let (cert_pem, key_pem, first) = ca.leaf();
    rotate(&files.cert, &cert_pem, 1);
    rotate(&files.key, &key_pem, 1);

    let manager =
        Manager::with_client(offline_client(), secure_config(Some(files.clone()))).unwrap();
    let status = manager.status();
    let shutdown = CancellationToken::new();
    let running = tokio::spawn(manager.run(shutdown.clone()));
    let metrics = status.endpoints().await.unwrap().metrics.unwrap();
    let trusting = || client_trusting(ca.ca.clone());

    let answer = https_get(metrics, trusting(), "localhost", None)
        .await
        .unwrap();
    assert_eq!((answer.code, answer.cert), (401, first.clone()));

    // Rotated half-way (new certificate, old key): the old pair stays.
    let (cert_pem, key_pem, second) = ca.leaf();
    rotate(&files.cert, &cert_pem, 2);
    let answer = https_get(metrics, trusting(), "localhost", None)
        .await
        .unwrap();
    assert_eq!(answer.cert, first);
    // The key follows: the new pair is served from the next handshake on.
    rotate(&files.key, &key_pem, 2);
    let answer = https_get(metrics, trusting(), "localhost", None)
        .await
        .unwrap();
    assert_eq!(answer.cert, second);

    shutdown.cancel();
    running.await.unwrap().unwrap();

    // Files that cannot be read fail the start, naming the file.
    std::fs::remove_file(&files.key).unwrap();
    let manager =
        Manager::with_client(offline_client(), secure_config(Some(files.clone()))).unwrap();
    let status = manager.status();
    let error = manager.run(CancellationToken::new()).await.unwrap_err();
    assert!(matches!(error, ManagerError::MetricsTls(_)), "{error:?}");
    let source = std::error::Error::source(&error).unwrap().to_string();
    assert!(
        source.contains(&files.key.display().to_string()),
        "{source}"
    );
    assert_eq!(status.endpoints().await, None);
}
