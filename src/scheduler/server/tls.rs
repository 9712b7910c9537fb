//! TLS for the daemon's endpoints: the certificate (from files, or a
//! self-signed one made at start, as kube-scheduler does without
//! `--tls-cert-file`) and a listener that hands axum finished TLS streams.
//!
//! Handshakes run in their own tasks, bounded in number and time, so a slow
//! or silent client cannot hold up the accept loop or pile up connections.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Where the serving certificate comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CertSource {
    /// `--tls-cert-file` and `--tls-private-key-file` (PEM).
    Files { cert: PathBuf, key: PathBuf },
    /// A self-signed certificate for this host, made at start and never
    /// written to disk.
    #[default]
    SelfSigned,
}

/// A handshake that has not finished within this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; further connections wait to be accepted.
const MAX_HANDSHAKES: usize = 64;

/// The rustls server configuration for `source` (HTTP/1.1 only: that is
/// what the server speaks and what Prometheus and the kubelet use).
pub fn server_config(source: &CertSource) -> anyhow::Result<Arc<ServerConfig>> {
    let (certs, key) = match source {
        CertSource::Files { cert, key } => (read_certs(cert)?, read_key(key)?),
        CertSource::SelfSigned => self_signed()?,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| anyhow::anyhow!("the serving certificate and key do not match: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| anyhow::anyhow!("reading --tls-cert-file {}: {e}", path.display()))?;
    if certs.is_empty() {
        anyhow::bail!("--tls-cert-file {} has no certificate", path.display());
    }
    Ok(certs)
}

fn read_key(path: &Path) -> anyhow::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path)
        .map_err(|e| anyhow::anyhow!("reading --tls-private-key-file {}: {e}", path.display()))
}

/// A self-signed certificate for `localhost`, the loopback addresses and
/// this host's name (kube-scheduler's names for its generated one). Clients
/// either skip verification (Prometheus' `insecureSkipVerify`) or are given
/// a real certificate through the flags.
fn self_signed() -> anyhow::Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Some(host) = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()) {
        names.push(host);
    }
    let certified = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::try_from(certified.signing_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("encoding the generated key: {e}"))?;
    Ok((vec![certified.cert.der().clone()], key))
}

/// A client configuration for reading a scheduler's endpoints: trusting the
/// PEM certificates in `ca`, or with none, any certificate (the self-signed
/// one a scheduler makes at start, as Prometheus' `insecureSkipVerify`).
/// Signatures are checked either way.
pub fn client_config(ca: Option<&Path>) -> anyhow::Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    // No ALPN: hyper-rustls sets its own, and the server speaks HTTP/1.1 to
    // clients that offer none.
    let config = match ca {
        Some(path) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(path)? {
                roots.add(cert)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// Accepts any server certificate, but checks the handshake's signatures.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A listener for `axum::serve` that yields TLS streams. A background task
/// accepts TCP connections and runs handshakes; dropping the listener (when
/// the server stops) stops it.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    acceptor: tokio::task::AbortHandle,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(MAX_HANDSHAKES);
        let task = tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), tx));
        Ok(TlsListener {
            local,
            ready,
            acceptor: task.abort_handle(),
        })
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor.abort();
    }
}

async fn accept_loop(
    tcp: TcpListener,
    tls: TlsAcceptor,
    ready: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match tcp.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: back off rather than spin.
                tracing::warn!(error = %e, "accepting a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if ready.is_closed() {
            return;
        }
        let tls = tls.clone();
        let ready = ready.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(stream)) => {
                    let _ = ready.send((stream, peer)).await;
                }
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends when the listener is dropped.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_and_file_certificates_load() {
        server_config(&CertSource::SelfSigned).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let made = rcgen::generate_simple_self_signed(vec!["muster.test".into()]).unwrap();
        let cert = dir.path().join("tls.crt");
        let key = dir.path().join("tls.key");
        std::fs::write(&cert, made.cert.pem()).unwrap();
        std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
        server_config(&CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        })
        .unwrap();
        // A key that is not the certificate's is refused at start.
        let other = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
        std::fs::write(&key, other.signing_key.serialize_pem()).unwrap();
        let err = server_config(&CertSource::Files {
            cert: cert.clone(),
            key,
        })
        .unwrap_err();
        assert!(err.to_string().contains("do not match"), "{err}");
        let missing = server_config(&CertSource::Files {
            cert: dir.path().join("none.crt"),
            key: cert.clone(),
        })
        .unwrap_err();
        assert!(missing.to_string().contains("--tls-cert-file"), "{missing}");
        client_config(None).unwrap();
        client_config(Some(&cert)).unwrap();
    }
}
