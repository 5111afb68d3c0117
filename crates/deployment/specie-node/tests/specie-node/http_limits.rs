//! The HTTP server's limits (`specie_service::server`, docs/api.md "Limits") against real
//! sockets on 127.0.0.1: slow-loris headers, connection floods, withheld bodies, idle
//! keep-alive connections and shutdown. Limits are small (tens of milliseconds, a few
//! connections) so that each test takes a few seconds at most; assertions on time are loose
//! bounds, never exact.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use specie_node::{EmbeddedNode, NodeOptions};
use specie_service::server::serve;
use specie_service::HttpLimits;

/// A node's API served with `limits`. Fields drop in order: the server stops before the node.
struct Server {
    address: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<io::Result<()>>,
    runtime: tokio::runtime::Runtime,
    node: Option<EmbeddedNode>,
    _dir: Option<tempfile::TempDir>,
}

impl Server {
    /// Serves the API of a fresh embedded node.
    fn node(limits: HttpLimits) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = NodeOptions::new(dir.path());
        options.shards = Some(2);
        let node = EmbeddedNode::open(options).expect("node opens");
        let router = specie_api::api::router(node.handle());
        let mut server = Server::with_router(router, limits);
        server.node = Some(node);
        server._dir = Some(dir);
        server
    }

    fn with_router(router: axum::Router, limits: HttpLimits) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let address = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = runtime.spawn(serve(listener, router, limits, async {
            let _ = stopped.await;
        }));
        Server {
            address,
            stop: Some(stop),
            task,
            runtime,
            node: None,
            _dir: None,
        }
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        stream
    }

    /// One request on a fresh connection; its status and body.
    fn request(&self, request: &str) -> io::Result<(u16, String, String)> {
        let mut stream = self.connect();
        stream.write_all(request.as_bytes())?;
        read_response(&mut stream)
    }

    /// `GET /v1/info` on a fresh connection.
    fn info_status(&self) -> io::Result<u16> {
        self.request(&get("/v1/info", "close")).map(|(status, _, _)| status)
    }

    fn is_serving(&self) -> bool {
        !self.task.is_finished()
    }

    /// Triggers shutdown and waits for `serve` to return; how long that took.
    fn shut_down(self) -> Duration {
        let Server {
            stop,
            task,
            runtime,
            node,
            ..
        } = self;
        let started = Instant::now();
        let _ = stop.expect("not stopped yet").send(());
        let result = runtime.block_on(async { tokio::time::timeout(Duration::from_secs(30), task).await });
        let elapsed = started.elapsed();
        result
            .expect("serve returns after shutdown")
            .expect("serve did not panic")
            .expect("serve returns Ok");
        drop(runtime);
        if let Some(node) = node {
            node.shutdown();
        }
        elapsed
    }
}

fn get(path: &str, connection: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: test\r\nconnection: {connection}\r\n\r\n")
}

/// Reads one response with a `content-length` (every response of this server has one).
fn read_response(stream: &mut TcpStream) -> io::Result<(u16, String, String)> {
    let mut bytes = Vec::new();
    let mut byte = [0u8; 1];
    while !bytes.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("closed after {} bytes of a response head", bytes.len()),
            ));
        }
        bytes.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map(|n| n.trim().parse().expect("content-length is a number"))
        .unwrap_or_else(|| panic!("no content-length in {head:?}"));
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body)?;
    Ok((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// The documented error shape and its code.
fn error_code(body: &str) -> String {
    let json: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"));
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{body}");
    json["error"]["code"].as_str().unwrap_or_default().to_string()
}

/// Waits up to `within` for the server to close `stream` (end of stream or reset), discarding
/// anything it sends first. True if it did.
fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut buffer = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        stream.set_read_timeout(Some(left)).unwrap();
        match stream.read(&mut buffer) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => return false,
            Err(_) => return true,
        }
    }
}

/// True if the server has not closed `stream` (nothing to read yet, no end of stream).
fn still_open(stream: &mut TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let open = matches!(stream.read(&mut byte), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
    stream.set_nonblocking(false).unwrap();
    open
}

fn limits(connections_max: usize, header: u64, body: u64, idle: u64) -> HttpLimits {
    HttpLimits {
        connections_max,
        header_timeout_ms: header,
        body_timeout_ms: body,
        idle_timeout_ms: idle,
    }
}

/// Clients that drip their request head a byte at a time (slow-loris) are disconnected once
/// the header time-out passes, though they never stop sending; an ordinary client is served
/// all along.
#[test]
fn slow_loris_headers_are_cut_off_while_others_are_served() {
    let server = Server::node(limits(8, 100, 1_000, 2_000));
    let lorises: Vec<_> = (0..6)
        .map(|_| {
            let mut stream = server.connect();
            thread::spawn(move || {
                let started = Instant::now();
                let head = b"GET /v1/info HTTP/1.1\r\nhost: test\r\n";
                if stream.write_all(head).is_err() {
                    return Some(started.elapsed());
                }
                while started.elapsed() < Duration::from_secs(5) {
                    // One byte of an endless header every 10 ms: never idle, never complete.
                    if stream.write_all(b"x").is_err() {
                        return Some(started.elapsed());
                    }
                    if !still_open(&mut stream) {
                        return Some(started.elapsed());
                    }
                    thread::sleep(Duration::from_millis(10));
                }
                None
            })
        })
        .collect();

    let mut served = 0;
    while served < 3 || lorises.iter().any(|l| !l.is_finished()) {
        assert_eq!(server.info_status().expect("an ordinary client is served"), 200);
        served += 1;
        thread::sleep(Duration::from_millis(20));
    }
    for loris in lorises {
        let closed_after = loris.join().expect("loris thread");
        let closed_after = closed_after.expect("a slow-loris connection was never closed");
        assert!(
            closed_after < Duration::from_secs(3),
            "closed only after {closed_after:?}"
        );
    }
    assert_eq!(server.info_status().expect("served after"), 200);
    assert!(server.is_serving());
    server.shut_down();
}

/// With the cap taken by idle connections, one more client is answered 503 at once; the idle
/// ones are closed after the idle time-out (not the much shorter header time-out), and then
/// ordinary clients are served again.
#[test]
fn connection_flood_is_refused_503_then_served_after_idle_timeout() {
    let server = Server::node(limits(8, 50, 1_000, 1_500));
    let mut idle: Vec<TcpStream> = (0..8).map(|_| server.connect()).collect();
    // Longer than the header time-out: connections that have sent nothing are idle, not slow.
    thread::sleep(Duration::from_millis(200));
    for stream in &mut idle {
        assert!(
            still_open(stream),
            "an idle connection was closed before the idle time-out"
        );
    }

    let started = Instant::now();
    let (status, head, body) = server.request(&get("/v1/info", "keep-alive")).expect("a response");
    let waited = started.elapsed();
    assert_eq!(status, 503, "{head}{body}");
    assert_eq!(error_code(&body), "too_many_connections");
    assert!(head.contains("connection: close"), "{head}");
    assert!(waited < Duration::from_millis(900), "the 503 took {waited:?}");

    for stream in &mut idle {
        assert!(
            closed_within(stream, Duration::from_secs(5)),
            "an idle connection outlived the idle time-out"
        );
    }
    assert_eq!(server.info_status().expect("served again"), 200);
    assert!(server.is_serving());
    server.shut_down();
}

/// A client that sends its head but withholds its body, or drips it, is answered 408
/// `body_timeout` and disconnected; complete requests are unaffected.
#[test]
fn withheld_or_dripped_body_is_answered_408() {
    let server = Server::node(limits(8, 1_000, 100, 2_000));
    let head =
        "POST /v1/uhs/query HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n";

    // Withheld: part of the body, then nothing.
    let mut stream = server.connect();
    let started = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(br#"{"ids": ["#).unwrap();
    let (status, response_head, body) = read_response(&mut stream).expect("a response");
    let waited = started.elapsed();
    assert_eq!(status, 408, "{response_head}{body}");
    assert_eq!(error_code(&body), "body_timeout");
    assert!(response_head.contains("connection: close"), "{response_head}");
    assert!(waited < Duration::from_secs(3), "the 408 took {waited:?}");
    assert!(closed_within(&mut stream, Duration::from_secs(3)));

    // Dripped: a byte every 10 ms, so never idle but never done in time.
    let mut stream = server.connect();
    stream.write_all(head.as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let dripping = Arc::new(AtomicBool::new(true));
    let drip = {
        let dripping = dripping.clone();
        thread::spawn(move || {
            for _ in 0..1000 {
                if !dripping.load(Ordering::Relaxed) || writer.write_all(b" ").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(10));
            }
        })
    };
    let (status, _, body) = read_response(&mut stream).expect("a response");
    dripping.store(false, Ordering::Relaxed);
    drip.join().unwrap();
    assert_eq!(status, 408, "{body}");
    assert_eq!(error_code(&body), "body_timeout");

    // A complete request is served.
    let query = format!(r#"{{"ids": ["{}"]}}"#, "00".repeat(32));
    let request = format!(
        "POST /v1/uhs/query HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{query}",
        query.len()
    );
    let (status, _, body) = server.request(&request).expect("a response");
    assert_eq!((status, body.as_str()), (200, r#"{"present":[false]}"#));
    server.shut_down();
}

/// 300 idle connections against a cap of 64: the excess is refused 503, the server stays up,
/// and an ordinary client is served once the idle time-out has closed the rest.
#[test]
fn flood_of_300_idle_connections_does_not_lock_out_clients() {
    // The idle time-out leaves room for making the flood itself, which can take a second on a
    // busy machine: connections must not time out before the last is made.
    let server = Server::node(limits(64, 50, 1_000, 2_500));
    let mut flood: Vec<TcpStream> = (0..300).map(|_| server.connect()).collect();

    let deadline = Instant::now() + Duration::from_secs(10);
    let served = loop {
        match server.info_status() {
            Ok(200) => break true,
            Ok(503) | Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
            Ok(status) => panic!("unexpected status {status}"),
            Err(_) => break false,
        }
    };
    assert!(served, "no ordinary client served within 10 s of the flood");
    assert!(server.is_serving(), "the server stopped");

    // Every flood connection was closed, most of them (all but the 64 admitted, when the flood
    // is made in less than the idle time-out) after a 503.
    let mut refused = 0;
    for stream in &mut flood {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if let Ok((status, _, body)) = read_response(stream) {
            assert_eq!(status, 503);
            assert_eq!(error_code(&body), "too_many_connections");
            refused += 1;
        }
        assert!(
            closed_within(stream, Duration::from_secs(5)),
            "a flood connection stayed open"
        );
    }
    assert!(refused >= 150, "only {refused} of 300 were refused with a 503");
    assert_eq!(server.info_status().expect("served"), 200);
    assert!(server.is_serving());
    server.shut_down();
}

/// Between requests a keep-alive connection may stay idle longer than the header time-out
/// (which counts from a request's first byte), and is closed once the idle time-out passes.
#[test]
fn keep_alive_outlives_the_header_timeout_and_closes_when_idle() {
    let server = Server::node(limits(8, 50, 1_000, 800));
    let mut stream = server.connect();
    for _ in 0..3 {
        stream.write_all(get("/v1/info", "keep-alive").as_bytes()).unwrap();
        let (status, _, body) = read_response(&mut stream).expect("a response");
        assert_eq!(status, 200, "{body}");
        thread::sleep(Duration::from_millis(250));
    }
    assert!(closed_within(&mut stream, Duration::from_secs(5)));

    // A connection that never sends a byte is closed too.
    let mut silent = server.connect();
    assert!(closed_within(&mut silent, Duration::from_secs(5)));
    server.shut_down();
}

/// A request refused before its body is read (JSON sent as text/plain, its body not even sent
/// yet) is answered with
/// `connection: close`, since the unread body still sits on the connection; one whose body was
/// read keeps the connection for the next request. The header tells a pooling client not to
/// reuse a connection the server is about to close.
#[test]
fn a_request_refused_before_its_body_is_read_closes_its_connection() {
    let server = Server::node(limits(8, 1_000, 1_000, 5_000));
    let body = r#"{"ids": []}"#;
    let post = |content_type: &str| {
        format!(
            "POST /v1/uhs/query HTTP/1.1\r\nhost: test\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let mut stream = server.connect();
    stream.write_all(post("application/json").as_bytes()).unwrap();
    let (status, head, answer) = read_response(&mut stream).expect("a response");
    assert_eq!(status, 200, "{answer}");
    assert!(!head.contains("connection: close"), "{head}");
    // The head only: the server refuses it by its content type, before any of the body came.
    let request = post("text/plain");
    stream
        .write_all(&request.as_bytes()[..request.len() - body.len()])
        .unwrap();
    let (status, head, answer) = read_response(&mut stream).expect("a response on the same connection");
    assert_eq!((status, error_code(&answer).as_str()), (400, "bad_json"));
    assert!(head.contains("connection: close"), "{head}");
    assert!(closed_within(&mut stream, Duration::from_secs(5)));
    server.shut_down();
}

/// On shutdown the server stops accepting, a request in progress finishes and is answered,
/// idle and silent connections are closed, and `serve` returns well before its grace period.
#[test]
fn shutdown_finishes_requests_in_progress() {
    use axum::routing::get as route_get;
    let router = axum::Router::new().route(
        "/slow",
        route_get(|| async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            "done"
        }),
    );
    let server = Server::with_router(router, limits(8, 1_000, 1_000, 30_000));
    let address = server.address;
    let mut silent = server.connect();
    let mut idle = server.connect();
    idle.write_all(get("/slow", "keep-alive").as_bytes()).unwrap();
    assert_eq!(read_response(&mut idle).expect("a response").2, "done");

    let slow = thread::spawn(move || {
        let mut stream = TcpStream::connect(address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.write_all(get("/slow", "keep-alive").as_bytes()).unwrap();
        read_response(&mut stream)
    });
    thread::sleep(Duration::from_millis(150));
    let took = server.shut_down();
    let (status, _, body) = slow.join().unwrap().expect("the request in progress is answered");
    assert_eq!((status, body.as_str()), (200, "done"));
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    assert!(closed_within(&mut idle, Duration::from_secs(1)));
    assert!(closed_within(&mut silent, Duration::from_secs(1)));
    assert!(TcpStream::connect(address).is_err(), "still accepting after shutdown");
}

/// `serve` refuses limits of zero rather than serving nothing.
#[test]
fn zero_limits_are_refused() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let result = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        serve(listener, axum::Router::new(), limits(0, 1, 1, 1), async {}).await
    });
    assert_eq!(result.unwrap_err().kind(), io::ErrorKind::InvalidInput);
}
