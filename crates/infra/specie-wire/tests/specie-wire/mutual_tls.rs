//! Mutual TLS between client and server over real TCP on 127.0.0.1: who gets in, who does not,
//! and that strangers cannot hold a server's slots.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use specie_wire::pki::{CertificateAuthority, Issued, PROCESS_VALIDITY};
use specie_wire::version::{ProtocolVersions, PROTOCOL};
use specie_wire::{
    handler_fn, serve, Admit, Client, Peer, ServerCounters, ServerSetup, TlsCredentials, Transport, WireError,
    WireLimits,
};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const SERVER: &str = "1.shard-0.shard.specie";
const CLIENT: &str = "1.coordinator-0.coordinator.specie";
const TIMEOUT: Duration = Duration::from_secs(5);

fn credentials(ca: &CertificateAuthority, issued: &Issued) -> Transport {
    speaking(ca, issued, PROTOCOL)
}

/// Credentials of a build that speaks `versions` of the protocol.
fn speaking(ca: &CertificateAuthority, issued: &Issued, versions: ProtocolVersions) -> Transport {
    Transport::MutualTls(Arc::new(
        TlsCredentials::speaking(
            ca.cert_pem().as_bytes(),
            issued.cert_pem.as_bytes(),
            issued.key_pem.as_bytes(),
            versions,
        )
        .unwrap(),
    ))
}

struct Server {
    addr: SocketAddr,
    counters: Arc<ServerCounters>,
    /// Every peer the server admitted, by the name its certificate proves.
    admitted: Arc<Mutex<Vec<Option<String>>>>,
    _shutdown: watch::Sender<bool>,
}

/// A TLS echo server that admits only `allowed` (by certificate name).
async fn start(ca: &CertificateAuthority, allowed: &'static str, limits: WireLimits) -> Server {
    start_speaking(ca, allowed, limits, PROTOCOL).await
}

async fn start_speaking(
    ca: &CertificateAuthority,
    allowed: &'static str,
    limits: WireLimits,
    versions: ProtocolVersions,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counters = Arc::new(ServerCounters::default());
    let admitted = Arc::new(Mutex::new(vec![]));
    let seen = admitted.clone();
    let admit: Admit = Arc::new(move |peer: &Peer| {
        if peer.name.as_deref() != Some(allowed) {
            return Err(format!("{peer} may not call this server"));
        }
        seen.lock().unwrap().push(peer.name.clone());
        Ok(handler_fn(|payload: Vec<u8>| async move { Ok(payload) }))
    });
    let setup = ServerSetup {
        limits,
        transport: speaking(ca, &ca.issue(SERVER, PROCESS_VALIDITY).unwrap(), versions),
        counters: counters.clone(),
    };
    let (shutdown, signal) = watch::channel(false);
    tokio::spawn(serve(listener, admit, setup, signal));
    Server {
        addr,
        counters,
        admitted,
        _shutdown: shutdown,
    }
}

fn client(server: &Server, expected: &str, transport: Transport) -> Client {
    let limits = WireLimits {
        reconnect_backoff_ms_min: 1,
        reconnect_backoff_ms_max: 1,
        ..WireLimits::default()
    };
    Client::new(server.addr.to_string(), expected, limits, transport).unwrap()
}

async fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn authenticated_peers_talk_and_the_server_knows_who_they_are() {
    let ca = CertificateAuthority::generate().unwrap();
    let server = start(&ca, CLIENT, WireLimits::default()).await;
    let transport = credentials(&ca, &ca.issue(CLIENT, PROCESS_VALIDITY).unwrap());
    let first = client(&server, SERVER, transport);
    for i in 0..100u32 {
        let payload = i.to_le_bytes().to_vec();
        assert_eq!(first.call(payload.clone(), TIMEOUT).await.unwrap(), payload);
    }
    assert_eq!(*server.admitted.lock().unwrap(), vec![Some(CLIENT.to_string())]);
    // A certificate issued later by the CA rebuilt from its key chains to the original CA.
    let rebuilt = CertificateAuthority::from_key_pem(&ca.key_pem()).unwrap();
    let later = client(
        &server,
        SERVER,
        credentials(&ca, &rebuilt.issue(CLIENT, PROCESS_VALIDITY).unwrap()),
    );
    assert_eq!(later.call(b"again".to_vec(), TIMEOUT).await.unwrap(), b"again");
}

#[tokio::test]
async fn strangers_fail_the_handshake_and_the_server_keeps_serving() {
    let ca = CertificateAuthority::generate().unwrap();
    let server = start(&ca, CLIENT, WireLimits::default()).await;
    let other_ca = CertificateAuthority::generate().unwrap();
    let now = SystemTime::now();
    let strangers = [
        ("no TLS at all", Transport::InsecurePlaintext),
        (
            "a certificate from another CA",
            credentials(&ca, &other_ca.issue(CLIENT, PROCESS_VALIDITY).unwrap()),
        ),
        (
            "an expired certificate",
            credentials(
                &ca,
                &ca.issue_between(CLIENT, now - Duration::from_secs(7200), now - Duration::from_secs(3600))
                    .unwrap(),
            ),
        ),
        (
            "a certificate not valid yet",
            credentials(
                &ca,
                &ca.issue_between(CLIENT, now + Duration::from_secs(3600), now + Duration::from_secs(7200))
                    .unwrap(),
            ),
        ),
    ];
    for (i, (what, transport)) in strangers.into_iter().enumerate() {
        let stranger = client(&server, SERVER, transport);
        let answer = stranger.call(b"let me in".to_vec(), TIMEOUT).await;
        assert!(answer.is_err(), "{what}: got an answer");
        let failed = i as u64 + 1;
        wait_for(what, || {
            server.counters.handshakes_failed.load(Ordering::Relaxed) >= failed
        })
        .await;
    }
    assert!(server.admitted.lock().unwrap().is_empty());
    let honest = client(
        &server,
        SERVER,
        credentials(&ca, &ca.issue(CLIENT, PROCESS_VALIDITY).unwrap()),
    );
    assert_eq!(honest.call(b"hello".to_vec(), TIMEOUT).await.unwrap(), b"hello");
}

#[tokio::test]
async fn a_valid_certificate_of_another_identity_is_refused_before_any_request() {
    let ca = CertificateAuthority::generate().unwrap();
    let server = start(&ca, CLIENT, WireLimits::default()).await;
    let wrong_role = credentials(&ca, &ca.issue("sentinel-0.sentinel.specie", PROCESS_VALIDITY).unwrap());
    let answer = client(&server, SERVER, wrong_role).call(b"x".to_vec(), TIMEOUT).await;
    match answer {
        Err(WireError::ConnectionLost { reason, .. }) => assert!(reason.contains("not authorised"), "{reason}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(server.counters.peers_refused.load(Ordering::Relaxed), 1);
    assert!(server.admitted.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_client_refuses_a_server_that_is_not_who_it_meant_to_reach() {
    let ca = CertificateAuthority::generate().unwrap();
    let server = start(&ca, CLIENT, WireLimits::default()).await;
    let transport = credentials(&ca, &ca.issue(CLIENT, PROCESS_VALIDITY).unwrap());
    let answer = client(&server, "2.shard-0.shard.specie", transport)
        .call(b"x".to_vec(), TIMEOUT)
        .await;
    assert!(
        matches!(&answer, Err(error) if error.certainly_not_sent()),
        "{answer:?}"
    );
}

#[tokio::test]
async fn silent_strangers_are_cut_off_and_cannot_hold_more_than_their_slots() {
    let ca = CertificateAuthority::generate().unwrap();
    let limits = WireLimits {
        handshakes_max: 4,
        handshake_timeout_ms: 300,
        ..WireLimits::default()
    };
    let server = start(&ca, CLIENT, limits).await;
    // Four strangers connect and say nothing: they hold every handshake slot.
    let mut silent = vec![];
    for _ in 0..4 {
        silent.push(TcpStream::connect(server.addr).await.unwrap());
    }
    // A fifth is closed at once, unread.
    let mut fifth = TcpStream::connect(server.addr).await.unwrap();
    let mut byte = [0u8; 1];
    let closed = tokio::time::timeout(Duration::from_millis(250), fifth.read(&mut byte)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the fifth stranger was not closed at once: {closed:?}"
    );
    // The four are cut off once the handshake time-out passes.
    for mut stream in silent {
        let closed = tokio::time::timeout(TIMEOUT, stream.read(&mut byte)).await;
        assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    }
    wait_for("four failed handshakes", || {
        server.counters.handshakes_failed.load(Ordering::Relaxed) == 4
    })
    .await;
    assert!(server.counters.handshakes_over_limit.load(Ordering::Relaxed) >= 1);
    // Then an honest peer gets in.
    let honest = client(
        &server,
        SERVER,
        credentials(&ca, &ca.issue(CLIENT, PROCESS_VALIDITY).unwrap()),
    );
    assert_eq!(honest.call(b"hello".to_vec(), TIMEOUT).await.unwrap(), b"hello");
}

fn versions(oldest: u16, newest: u16) -> ProtocolVersions {
    ProtocolVersions { oldest, newest }
}

fn refusal(answer: Result<Vec<u8>, WireError>) -> String {
    match answer {
        Err(WireError::ConnectionLost { reason, .. }) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A rolling upgrade's view of the handshake: a build speaking versions 2 to 3 talks with
/// builds that still speak 2 or already speak 3, and turns away those that speak only older or
/// only newer versions, each told both sides' versions, before any request.
#[tokio::test]
async fn peers_agree_on_a_common_version_or_are_refused_with_both_named() {
    let ca = CertificateAuthority::generate().unwrap();
    let server = start_speaking(&ca, CLIENT, WireLimits::default(), versions(2, 3)).await;
    let issued = ca.issue(CLIENT, PROCESS_VALIDITY).unwrap();
    for compatible in [versions(1, 2), versions(3, 4), versions(2, 3)] {
        let peer = client(&server, SERVER, speaking(&ca, &issued, compatible));
        assert_eq!(peer.call(b"hi".to_vec(), TIMEOUT).await.unwrap(), b"hi", "{compatible}");
    }
    for (incompatible, named) in [(versions(1, 1), "version 1"), (versions(4, 5), "versions 4 to 5")] {
        let peer = client(&server, SERVER, speaking(&ca, &issued, incompatible));
        let reason = refusal(peer.call(b"hi".to_vec(), TIMEOUT).await);
        assert!(
            reason.contains("the server speaks specie protocol versions 2 to 3")
                && reason.contains(&format!("the client speaks {named}")),
            "{reason}"
        );
    }
    assert_eq!(server.counters.peers_refused.load(Ordering::Relaxed), 2);
    assert_eq!(server.admitted.lock().unwrap().len(), 3);
}

/// TLS configurations of a build from before versions were agreed: no ALPN at all.
fn unversioned(ca: &CertificateAuthority, issued: &Issued) -> (rustls::ClientConfig, rustls::ServerConfig) {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem().as_bytes()).unwrap())
        .unwrap();
    let roots = Arc::new(roots);
    let chain = vec![CertificateDer::from_pem_slice(issued.cert_pem.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes()).unwrap();
    let client = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_client_auth_cert(chain.clone(), key.clone_key())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .unwrap();
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(chain, key)
        .unwrap();
    (client, server)
}

/// What a client of a build from before versions were agreed (no ALPN) reads from `server`
/// after its handshake: nothing (the server keeps the connection for its frames) or a refusal.
async fn unversioned_client_reads(ca: &CertificateAuthority, server: &Server) -> String {
    let (old_client, _) = unversioned(ca, &ca.issue(CLIENT, PROCESS_VALIDITY).unwrap());
    let stream = TcpStream::connect(server.addr).await.unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(old_client));
    let mut tls = connector.connect(SERVER.try_into().unwrap(), stream).await.unwrap();
    let mut said = vec![];
    let _ = tokio::time::timeout(Duration::from_millis(500), tls.read_to_end(&mut said)).await;
    String::from_utf8_lossy(&said).into_owned()
}

/// A server of a build from before versions were agreed, and the bytes the first client that
/// connects sends it.
async fn unversioned_server(ca: &CertificateAuthority) -> (SocketAddr, tokio::task::JoinHandle<Vec<u8>>) {
    let (_, old_server) = unversioned(ca, &ca.issue(SERVER, PROCESS_VALIDITY).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(old_server));
    let received = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(stream).await.unwrap();
        let mut read = vec![];
        let _ = tokio::time::timeout(Duration::from_secs(2), tls.read_to_end(&mut read)).await;
        read
    });
    (addr, received)
}

/// A build that names no version in its handshake predates versions, and speaks version 1: it is
/// served by, and served, a build that speaks version 1, and refused, both named, by one that
/// does not.
#[tokio::test]
async fn a_build_that_names_no_version_speaks_version_1() {
    let ca = CertificateAuthority::generate().unwrap();
    let current = start(&ca, CLIENT, WireLimits::default()).await;
    assert_eq!(unversioned_client_reads(&ca, &current).await, "");
    wait_for("the old client admitted", || {
        current.admitted.lock().unwrap().len() == 1
    })
    .await;
    assert_eq!(current.counters.peers_refused.load(Ordering::Relaxed), 0);

    let newer = start_speaking(&ca, CLIENT, WireLimits::default(), versions(2, 3)).await;
    let said = unversioned_client_reads(&ca, &newer).await;
    assert!(
        said.contains("the server speaks specie protocol versions 2 to 3, the client speaks version 1"),
        "{said}"
    );
    assert_eq!(newer.counters.peers_refused.load(Ordering::Relaxed), 1);
    assert!(newer.admitted.lock().unwrap().is_empty());

    let issued = ca.issue(CLIENT, PROCESS_VALIDITY).unwrap();
    let call = |addr: SocketAddr, transport: Transport| async move {
        let client = Client::new(addr.to_string(), SERVER, WireLimits::default(), transport).unwrap();
        client.call(b"x".to_vec(), Duration::from_millis(300)).await
    };
    let (addr, received) = unversioned_server(&ca).await;
    let _ = call(addr, speaking(&ca, &issued, PROTOCOL)).await;
    assert!(
        !received.await.unwrap().is_empty(),
        "a version-1 client sends to an old server"
    );

    let (addr, received) = unversioned_server(&ca).await;
    let answer = call(addr, speaking(&ca, &issued, versions(2, 2))).await;
    let message = format!("{answer:?}");
    assert!(
        message.contains("the client speaks specie protocol version 2, the server speaks version 1"),
        "{message}"
    );
    assert!(
        received.await.unwrap().is_empty(),
        "a request reached a server of no common version"
    );
}
