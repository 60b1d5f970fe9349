//! HTTPS for the secure metrics endpoint: the certificate from files
//! (reloaded when they change, as controller-runtime's certwatcher does) or
//! a self-signed one generated at start, and a listener that completes TLS
//! handshakes off the accept loop.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The names a generated certificate is valid for (controller-runtime's
/// choice: scrapers of a self-signed endpoint skip verification anyway).
const SELF_SIGNED_NAMES: [&str; 2] = ["localhost", "127.0.0.1"];
/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; further connections wait in the
/// kernel's backlog.
const MAX_HANDSHAKES: usize = 64;
/// Pause after an accept error that is not about one connection (e.g. out
/// of file descriptors), as axum's own accept loop does.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_secs(1);

/// The PEM files the metrics server presents (`--metrics-cert-path` with
/// `--metrics-cert-name` and `--metrics-cert-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, leaf first (e.g. `tls.crt` of a
    /// `kubernetes.io/tls` Secret).
    pub cert: PathBuf,
    /// The private key of the leaf certificate (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `dir/cert_name` and `dir/key_name`.
    pub fn in_dir(dir: &Path, cert_name: &str, key_name: &str) -> Self {
        Self {
            cert: dir.join(cert_name),
            key: dir.join(key_name),
        }
    }
}

/// Why the metrics server's certificate could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsTlsError {
    /// The certificate file could not be read or holds no certificate.
    #[error("cannot read the metrics certificate {}", path.display())]
    Cert {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key file could not be read or holds no private key.
    #[error("cannot read the metrics private key {}", path.display())]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The key is not usable, or does not belong to the certificate.
    #[error("the metrics key {} does not fit the certificate {}", key.display(), cert.display())]
    KeyPair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls reported.
        #[source]
        source: rustls::Error,
    },
    /// A self-signed certificate could not be generated.
    #[error("cannot generate a self-signed certificate for the metrics server")]
    SelfSigned(#[source] rcgen::Error),
    /// rustls refused the configuration.
    #[error("cannot configure TLS for the metrics server")]
    Config(#[source] rustls::Error),
}

/// The server configuration: HTTP/1.1 only (axum serves HTTP/1.1 here,
/// and kubebuilder disables HTTP/2 on metrics for its rapid-reset CVEs),
/// ring as the crypto provider, `files` or a self-signed certificate.
pub(crate) fn server_config(
    files: Option<&TlsFiles>,
) -> Result<Arc<ServerConfig>, MetricsTlsError> {
    let provider = Arc::new(ring::default_provider());
    let resolver: Arc<dyn ResolvesServerCert> = match files {
        Some(files) => Arc::new(ReloadingCert::load(files.clone(), provider.clone())?),
        None => Arc::new(FixedCert(self_signed(&provider)?)),
    };
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(MetricsTlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn self_signed(provider: &CryptoProvider) -> Result<Arc<CertifiedKey>, MetricsTlsError> {
    let names: Vec<String> = SELF_SIGNED_NAMES.iter().map(|n| n.to_string()).collect();
    let generated =
        rcgen::generate_simple_self_signed(names).map_err(MetricsTlsError::SelfSigned)?;
    let key = PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der());
    let cert = generated.cert.der().clone();
    CertifiedKey::from_der(vec![cert], key.into(), provider)
        .map(Arc::new)
        .map_err(MetricsTlsError::Config)
}

/// One certificate for the process's lifetime.
#[derive(Debug)]
struct FixedCert(Arc<CertifiedKey>);

impl ResolvesServerCert for FixedCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// The certificate in [`TlsFiles`], read again on the first handshake
/// after either file changed (modification time or size; a Secret volume
/// swaps a symlink, which changes both). A rotation caught half-way (new
/// certificate, old key) is logged and the previous pair kept until the
/// files change again. Checking costs two `stat` calls per handshake,
/// and handshakes are rare: scrapers keep their connections.
#[derive(Debug)]
struct ReloadingCert {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: Mutex<Loaded>,
}

#[derive(Debug)]
struct Loaded {
    stamp: Stamp,
    key: Arc<CertifiedKey>,
}

/// (modification time, length) of the certificate and the key file.
type Stamp = [Option<(SystemTime, u64)>; 2];

impl ReloadingCert {
    fn load(files: TlsFiles, provider: Arc<CryptoProvider>) -> Result<Self, MetricsTlsError> {
        let stamp = stamp(&files);
        let key = read_pair(&files, &provider)?;
        Ok(Self {
            files,
            provider,
            current: Mutex::new(Loaded { stamp, key }),
        })
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        let now = stamp(&self.files);
        if now != current.stamp {
            current.stamp = now;
            match read_pair(&self.files, &self.provider) {
                Ok(key) => {
                    tracing::info!(cert = %self.files.cert.display(), "metrics: reloaded the TLS certificate");
                    current.key = key;
                }
                Err(error) => tracing::warn!(
                    error = %super::error::error_chain(&error),
                    "metrics: keeping the previous TLS certificate"
                ),
            }
        }
        Some(current.key.clone())
    }
}

fn stamp(files: &TlsFiles) -> Stamp {
    let of = |path: &Path| {
        let meta = std::fs::metadata(path).ok()?;
        Some((meta.modified().ok()?, meta.len()))
    };
    [of(&files.cert), of(&files.key)]
}

fn read_pair(
    files: &TlsFiles,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, MetricsTlsError> {
    let cert_error = |source| MetricsTlsError::Cert {
        path: files.cert.clone(),
        source,
    };
    let chain = CertificateDer::pem_file_iter(&files.cert)
        .map_err(cert_error)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cert_error)?;
    if chain.is_empty() {
        return Err(cert_error(rustls::pki_types::pem::Error::NoItemsFound));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|source| MetricsTlsError::Key {
        path: files.key.clone(),
        source,
    })?;
    CertifiedKey::from_der(chain, key, provider)
        .map(Arc::new)
        .map_err(|source| MetricsTlsError::KeyPair {
            cert: files.cert.clone(),
            key: files.key.clone(),
            source,
        })
}

/// Accepts TCP connections and hands out those that completed a TLS
/// handshake. Handshakes run in their own tasks, so a client that stalls
/// in one delays nobody; the accept loop stops when the listener is
/// dropped (axum drops it when the server shuts down).
pub(crate) struct TlsListener {
    local_addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    _stop: DropGuard,
}

impl TlsListener {
    /// Starts accepting on `listener`. Must be called inside a tokio
    /// runtime.
    pub(crate) fn new(listener: TcpListener, config: Arc<ServerConfig>) -> io::Result<Self> {
        let local_addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(
            listener,
            TlsAcceptor::from(config),
            tx,
            stop.clone(),
        ));
        Ok(Self {
            local_addr,
            ready,
            _stop: stop.drop_guard(),
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop only ends once this listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local_addr)
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
    stop: CancellationToken,
) {
    let handshakes = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let permit = tokio::select! {
            _ = stop.cancelled() => return,
            permit = handshakes.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return, // never closed
            },
        };
        let (stream, peer) = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(connection) => connection,
                Err(error) if is_connection_error(&error) => continue,
                Err(error) => {
                    tracing::warn!(%error, "metrics: cannot accept connections");
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                    }
                }
            },
        };
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    // The server stopped if nobody receives: drop it.
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(error)) => tracing::debug!(%peer, %error, "metrics: TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "metrics: TLS handshake timed out"),
            }
        });
    }
}

/// Errors about one connection, not the listener.
fn is_connection_error(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
