//! HTTPS for a cluster that enforces RBAC. kubectl (client-go) sends
//! credentials only over TLS — against a plain-HTTP server it sends no
//! bearer token at all — so a cluster whose requests are authenticated
//! serves HTTPS, with a certificate authority made for it and a serving
//! certificate for `127.0.0.1` and `localhost` signed by it. Its
//! kubeconfigs carry the authority (`certificate-authority-data`) and its
//! kube clients trust it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::server::TlsStream;

/// Handshakes in flight at once; more connections wait to be accepted.
const MAX_HANDSHAKES: usize = 64;
/// A client that has not finished its handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the cluster's certificates could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Generating a key or certificate failed.
    #[error("generating the cluster's certificates failed")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the generated certificate or key.
    #[error("configuring TLS failed")]
    Config(#[from] tokio_rustls::rustls::Error),
}

/// The cluster's certificate authority and the server configuration
/// presenting the serving certificate it signed.
pub(crate) struct ClusterCerts {
    /// The authority's certificate, PEM (for kubeconfigs).
    pub(crate) ca_pem: String,
    /// The authority's certificate, DER (for kube clients).
    pub(crate) ca_der: Vec<u8>,
    pub(crate) server: Arc<ServerConfig>,
}

impl std::fmt::Debug for ClusterCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCerts").finish_non_exhaustive()
    }
}

impl ClusterCerts {
    /// A new authority and serving certificate.
    pub(crate) fn generate() -> Result<ClusterCerts, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ctrlkit-testcluster-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(vec!["127.0.0.1".into(), "localhost".into()])?;
        params
            .distinguished_name
            .push(DnType::CommonName, "ctrlkit-testcluster");
        let cert = params.signed_by(&key, &issuer)?;

        let provider = Arc::new(ring::default_provider());
        let key_der = PrivateKeyDer::from(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let mut server = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.der().to_vec())], key_der)?;
        // axum serves HTTP/1.1 here.
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ClusterCerts {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            server: Arc::new(server),
        })
    }
}

/// Hands out the connections that completed a TLS handshake. Handshakes
/// run in their own tasks, so a stalled client delays nobody.
pub(crate) struct TlsListener {
    local_addr: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    /// Accept on `listener` in a task (returned, for the cluster to stop
    /// with its other tasks).
    pub(crate) fn spawn(
        listener: TcpListener,
        config: Arc<ServerConfig>,
    ) -> io::Result<(TlsListener, tokio::task::JoinHandle<()>)> {
        let local_addr = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        let task = tokio::spawn(accept_loop(listener, TlsAcceptor::from(config), tx));
        Ok((TlsListener { local_addr, ready }, task))
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accept loop ended: the cluster is stopping.
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
) {
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = handshakes.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(connection) => connection,
            Err(error) => {
                tracing::debug!(%error, "testcluster: accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Small request/response pairs must not wait for Nagle.
        let _ = stream.set_nodelay(true);
        let acceptor = acceptor.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let _ = ready.send((tls, peer)).await;
                }
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "testcluster: TLS handshake failed")
                }
                Err(_) => tracing::debug!(%peer, "testcluster: TLS handshake timed out"),
            }
        });
    }
}
