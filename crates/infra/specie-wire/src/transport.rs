//! Who is on the other end of a connection: mutual TLS 1.3 (rustls, ring) with every process
//! holding a certificate from the cluster's CA, or, for measuring what TLS costs, nothing at all.
//!
//! A process's identity is the first DNS name in its certificate's subject alternative names
//! (`docs/wire-protocol.md`, "Authentication"). The server learns the client's identity from the
//! client certificate, verified against the CA, before it reads a single frame; the client checks
//! that the server's certificate names the process it meant to reach, so a certificate of one
//! role cannot impersonate another. In the same handshake the two agree on the version of
//! specie's protocol they speak (ALPN, [`crate::version`]); the server turns away a peer with no
//! version in common, with a message naming both.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::version::{alpn_id, End, Incompatible, Negotiated, ProtocolVersions, PROTOCOL, UNNAMED};

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
    /// The protocol versions this process speaks.
    versions: ProtocolVersions,
    /// What the server answers a client that offers no version it speaks (no ALPN): the
    /// handshake completes, so that the refusal can say why in a frame.
    server: Arc<ServerConfig>,
    /// One configuration per version this process speaks, each selecting that version's
    /// identifier; all share `server`'s session cache, so sessions resume whichever is chosen.
    server_by_version: Vec<(u16, Arc<ServerConfig>)>,
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
    /// process's certificate chain (leaf first) and its private key. It speaks this build's
    /// protocol versions, [`PROTOCOL`].
    pub fn from_pem(ca_pem: &[u8], chain_pem: &[u8], key_pem: &[u8]) -> Result<TlsCredentials, TlsError> {
        TlsCredentials::speaking(ca_pem, chain_pem, key_pem, PROTOCOL)
    }

    /// [`TlsCredentials::from_pem`] for a process that speaks `versions`: what a build of
    /// another release would speak, to test upgrades against.
    pub fn speaking(
        ca_pem: &[u8],
        chain_pem: &[u8],
        key_pem: &[u8],
        versions: ProtocolVersions,
    ) -> Result<TlsCredentials, TlsError> {
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
        let mut client = ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| invalid("TLS configuration", e))?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(|e| invalid("certificate and key", e))?;
        client.alpn_protocols = versions.alpn_ids();
        let server_by_version = (versions.oldest..=versions.newest)
            .map(|version| (version, Arc::new(selecting(&server, version))))
            .collect();
        Ok(TlsCredentials {
            name,
            versions,
            server: Arc::new(server),
            server_by_version,
            client: Arc::new(client),
        })
    }

    /// This process's identity.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// `base` selecting the identifier of `version`.
fn selecting(base: &ServerConfig, version: u16) -> ServerConfig {
    let mut config = base.clone();
    config.alpn_protocols = vec![alpn_id(version)];
    config
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

/// What the server's handshake established: the connection, who is on the other end, and
/// whether the two speak a common version (always, on the plaintext transport, which agrees on
/// nothing). An incompatible peer has completed the handshake only so that it can be told why
/// it is refused.
pub(crate) type Accepted = (ReadHalf, WriteHalf, Peer, Result<(), Incompatible>);

/// Server side: runs the handshake (the caller bounds it in time), agrees on a protocol version
/// and says who connected.
pub(crate) async fn accept(transport: &Transport, stream: TcpStream, addr: SocketAddr) -> std::io::Result<Accepted> {
    match transport {
        Transport::InsecurePlaintext => {
            let (read, write) = stream.into_split();
            Ok((Box::new(read), Box::new(write), Peer { addr, name: None }, Ok(())))
        }
        Transport::MutualTls(credentials) => {
            let start = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream).await?;
            let offered = start.client_hello().alpn().is_some();
            let negotiated = credentials.versions.negotiate(start.client_hello().alpn());
            let (config, agreed) = match negotiated {
                // A client that offered no identifier is answered without one.
                Negotiated::Agreed(_) if !offered => (credentials.server.clone(), Ok(())),
                Negotiated::Agreed(version) => {
                    let (_, config) = credentials
                        .server_by_version
                        .iter()
                        .find(|(each, _)| *each == version)
                        .expect("agreed on a version this process speaks");
                    (config.clone(), Ok(()))
                }
                // Select the newest identifier it offered, so that its handshake completes and
                // the refusal reaches it as a frame it reads.
                Negotiated::Incompatible(incompatible) => match incompatible.theirs {
                    Some(theirs) => (
                        Arc::new(selecting(&credentials.server, theirs.newest)),
                        Err(incompatible),
                    ),
                    None => (credentials.server.clone(), Err(incompatible)),
                },
            };
            let tls = start.into_stream(config).await?;
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
            Ok((Box::new(read), Box::new(write), Peer { addr, name: Some(name) }, agreed))
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
            // rustls accepts only an identifier this client offered; a server that selected none
            // is a build from before versions were agreed, which speaks version 1.
            if tls.get_ref().1.alpn_protocol().is_none() && !credentials.versions.contains(UNNAMED) {
                let refused = Incompatible {
                    refused_by: End::Client,
                    ours: credentials.versions,
                    theirs: Some(ProtocolVersions {
                        oldest: UNNAMED,
                        newest: UNNAMED,
                    }),
                };
                return Err(std::io::Error::new(std::io::ErrorKind::Unsupported, refused));
            }
            let (read, write) = tokio::io::split(tls);
            Ok((Box::new(read), Box::new(write)))
        }
    }
}
