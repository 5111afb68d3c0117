//! Who is on the other end of a connection: mutual TLS 1.3 (rustls, ring) with every process
//! holding a certificate from the cluster's CA, or, for measuring what TLS costs, nothing at all.
//!
//! A process's identity is the first DNS name in its certificate's subject alternative names
//! (`docs/wire-protocol.md`, "Authentication"). The server learns the client's identity from the
//! client certificate, verified against the CA, before it reads a single frame; the client checks
//! that the server's certificate names the process it meant to reach, so a certificate of one
//! role cannot impersonate another.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// How a process's connections are secured. Cheap to clone.
#[derive(Clone)]
pub enum Transport {
    /// Mutual TLS: every connection is encrypted and both ends are authenticated.
    MutualTls(Arc<TlsCredentials>),
    /// No encryption, no authentication: every connection is anonymous, and a cluster on this
    /// transport authorises no one (it cannot tell roles apart). Only for measuring what TLS
    /// costs (`specie bench cluster --compare-transport`); never for a deployment.
    InsecurePlaintext,
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Transport::MutualTls(credentials) => write!(f, "MutualTls({})", credentials.name),
            Transport::InsecurePlaintext => write!(f, "InsecurePlaintext"),
        }
    }
}

/// Why credentials could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what}: no PEM {kind} found")]
    NoPem { what: String, kind: &'static str },
    #[error("{what}: {reason}")]
    Invalid { what: String, reason: String },
}

/// This process's certificate chain and key, and the CA its peers must chain to, as rustls
/// configurations built once and shared by every connection (so TLS sessions resume across
/// reconnects instead of repeating full handshakes).
pub struct TlsCredentials {
    /// This process's own identity, as its certificate names it.
    name: String,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(what: &str, reason: impl fmt::Display) -> TlsError {
    TlsError::Invalid {
        what: what.to_string(),
        reason: reason.to_string(),
    }
}

impl TlsCredentials {
    /// Builds credentials from PEM text: the CA certificate(s) peers must chain to, this
    /// process's certificate chain (leaf first) and its private key.
    pub fn from_pem(ca_pem: &[u8], chain_pem: &[u8], key_pem: &[u8]) -> Result<TlsCredentials, TlsError> {
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_pem) {
            let ca = ca.map_err(|e| invalid("CA certificate", e))?;
            roots.add(ca).map_err(|e| invalid("CA certificate", e))?;
        }
        if roots.is_empty() {
            return Err(TlsError::NoPem {
                what: "CA certificate".into(),
                kind: "certificate",
            });
        }
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem)
            .collect::<Result<_, _>>()
            .map_err(|e| invalid("certificate", e))?;
        let leaf = chain.first().ok_or(TlsError::NoPem {
            what: "certificate".into(),
            kind: "certificate",
        })?;
        let name =
            identity_of(leaf).ok_or_else(|| invalid("certificate", "it names no DNS subject alternative name"))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| invalid("private key", e))?;
        let roots = Arc::new(roots);

        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| invalid("CA certificate", e))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| invalid("TLS configuration", e))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| invalid("certificate and key", e))?;
        let client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| invalid("TLS configuration", e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid("certificate and key", e))?;
        Ok(TlsCredentials {
            name,
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// This process's identity.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// The identity a certificate carries: its first DNS subject alternative name. Only called on
/// certificates rustls has verified against the CA (or on our own).
fn identity_of(certificate: &CertificateDer<'_>) -> Option<String> {
    let parsed = webpki::EndEntityCert::try_from(certificate).ok()?;
    let name = parsed.valid_dns_names().next().map(str::to_string);
    name
}

/// The other end of an accepted connection, as far as the transport can vouch for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub addr: SocketAddr,
    /// The identity its client certificate proves; `None` on an insecure plaintext transport.
    pub name: Option<String>,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{name} ({})", self.addr),
            None => write!(f, "anonymous ({})", self.addr),
        }
    }
}

/// The two directions of an established connection, whatever the transport.
pub(crate) type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
pub(crate) type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// Server side: runs the handshake (the caller bounds it in time) and says who connected.
pub(crate) async fn accept(
    transport: &Transport,
    stream: TcpStream,
    addr: SocketAddr,
) -> std::io::Result<(ReadHalf, WriteHalf, Peer)> {
    match transport {
        Transport::InsecurePlaintext => {
            let (read, write) = stream.into_split();
            Ok((Box::new(read), Box::new(write), Peer { addr, name: None }))
        }
        Transport::MutualTls(credentials) => {
            let acceptor = tokio_rustls::TlsAcceptor::from(credentials.server.clone());
            let tls = acceptor.accept(stream).await?;
            // rustls completed the handshake only with a client certificate that chains to the CA
            // and is within its validity period; its name is therefore the peer's identity.
            let name = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .and_then(identity_of)
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::PermissionDenied,
                        "client certificate names no DNS subject alternative name",
                    )
                })?;
            let (read, write) = tokio::io::split(tls);
            Ok((Box::new(read), Box::new(write), Peer { addr, name: Some(name) }))
        }
    }
}

/// Client side: runs the handshake and checks the server is `expected_name`.
pub(crate) async fn connect(
    transport: &Transport,
    stream: TcpStream,
    expected_name: &str,
) -> std::io::Result<(ReadHalf, WriteHalf)> {
    match transport {
        Transport::InsecurePlaintext => {
            let (read, write) = stream.into_split();
            Ok((Box::new(read), Box::new(write)))
        }
        Transport::MutualTls(credentials) => {
            let server_name = ServerName::try_from(expected_name.to_string()).map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("'{expected_name}' is not a valid peer name: {e}"),
                )
            })?;
            let connector = tokio_rustls::TlsConnector::from(credentials.client.clone());
            let tls = connector.connect(server_name, stream).await?;
            let (read, write) = tokio::io::split(tls);
            Ok((Box::new(read), Box::new(write)))
        }
    }
}
