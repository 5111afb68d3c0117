//! Client and server over real TCP on 127.0.0.1.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use specie_wire::{
    admit_all, handler_fn, serve, Client, Frame, FrameKind, Handler, ServerSetup, Transport, WireError, WireLimits,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Generous for a loaded 2-core CI machine, small next to the deadlines under test.
const SLACK: Duration = Duration::from_millis(250);
const LONG: Duration = Duration::from_secs(5);

struct Server {
    addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn start_on(listener: TcpListener, handler: Handler, limits: WireLimits) -> Server {
    let addr = listener.local_addr().unwrap();
    let (shutdown, signal) = watch::channel(false);
    let setup = ServerSetup {
        limits,
        transport: Transport::InsecurePlaintext,
        counters: Default::default(),
    };
    let task = tokio::spawn(serve(listener, admit_all(handler), setup, signal));
    Server { addr, shutdown, task }
}

async fn start(handler: Handler, limits: WireLimits) -> Server {
    start_on(TcpListener::bind("127.0.0.1:0").await.unwrap(), handler, limits).await
}

/// Echoes, except: "hang" never answers, "slow" answers after 200 ms, "fail" is an error,
/// "panic" panics.
fn test_handler() -> Handler {
    handler_fn(|payload: Vec<u8>| async move {
        match payload.as_slice() {
            b"hang" => std::future::pending().await,
            b"slow" => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Ok(payload)
            }
            b"fail" => Err("refused on purpose".to_string()),
            b"panic" => panic!("handler bug"),
            _ => Ok(payload),
        }
    })
}

fn client(addr: SocketAddr, limits: WireLimits) -> Client {
    Client::new(addr.to_string(), "server.test", limits, Transport::InsecurePlaintext).unwrap()
}

fn fast_reconnect() -> WireLimits {
    WireLimits {
        reconnect_backoff_ms_min: 10,
        reconnect_backoff_ms_max: 100,
        connect_timeout_ms: 500,
        shutdown_grace_ms: 1_000,
        ..WireLimits::default()
    }
}

/// Reads a raw connection to its end (bounded), returning the frames the server sent.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<Frame> {
    let mut bytes = Vec::new();
    tokio::time::timeout(LONG, stream.read_to_end(&mut bytes))
        .await
        .expect("server closes the connection")
        .ok();
    let mut decoder = specie_wire::FrameDecoder::new(1 << 20);
    decoder.feed(&bytes);
    let mut frames = Vec::new();
    while let Ok(Some(frame)) = decoder.next_frame() {
        frames.push(frame);
    }
    frames
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_1000_concurrent_calls_on_one_connection() {
    let server = start(test_handler(), WireLimits::default()).await;
    let client = client(server.addr, WireLimits::default());
    let mut calls = tokio::task::JoinSet::new();
    for i in 0u32..1000 {
        let client = client.clone();
        calls.spawn(async move {
            let payload = format!("request {i}").into_bytes();
            let answer = client.call(payload.clone(), LONG).await.unwrap();
            assert_eq!(answer, payload);
        });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    assert_eq!(client.in_flight(), 0);
    assert!(client.ping(LONG).await.unwrap() < LONG);
    server.shutdown.send(true).unwrap();
    server.task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_typed() {
    let limits = WireLimits {
        frame_bytes_max: 1024,
        ..WireLimits::default()
    };
    let server = start(test_handler(), limits.clone()).await;
    let client = client(server.addr, limits);
    assert_eq!(
        client.call(b"fail".to_vec(), LONG).await,
        Err(WireError::Remote {
            message: "refused on purpose".to_string()
        })
    );
    assert_eq!(
        client.call(b"panic".to_vec(), LONG).await,
        Err(WireError::Remote {
            message: "handler panicked".to_string()
        })
    );
    let too_big = client.call(vec![0u8; 1024], LONG).await.unwrap_err();
    assert!(matches!(
        too_big,
        WireError::FrameTooLarge {
            frame_bytes: 1044,
            frame_bytes_max: 1024
        }
    ));
    assert!(too_big.certainly_not_sent());
    // None of that hurt the connection.
    assert_eq!(client.call(b"ok".to_vec(), LONG).await.unwrap(), b"ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unanswered_call_times_out_and_the_client_stays_usable() {
    let limits = WireLimits {
        in_flight_max: 2,
        ..WireLimits::default()
    };
    let server = start(test_handler(), WireLimits::default()).await;
    let client = client(server.addr, limits);
    let deadline = Duration::from_millis(300);
    let started = Instant::now();
    let answer = client.call(b"hang".to_vec(), deadline).await;
    let elapsed = started.elapsed();
    assert_eq!(answer, Err(WireError::Timeout { timeout_ms: 300 }));
    assert!(elapsed >= deadline && elapsed < deadline + SLACK, "{elapsed:?}");
    assert_eq!(client.in_flight(), 0, "the timed-out call released its slot");

    // Both slots taken by hanging calls: a third caller waits for a slot, but only until its
    // own deadline.
    let hangers: Vec<_> = (0..2)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.call(b"hang".to_vec(), Duration::from_millis(600)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(client.in_flight(), 2);
    let started = Instant::now();
    let blocked = client.call(b"echo".to_vec(), Duration::from_millis(200)).await;
    assert!(matches!(blocked, Err(WireError::Timeout { .. })), "{blocked:?}");
    assert!(started.elapsed() < Duration::from_millis(200) + SLACK);
    for hanger in hangers {
        assert!(matches!(hanger.await.unwrap(), Err(WireError::Timeout { .. })));
    }
    // Slots are back, and the same connection still answers.
    assert_eq!(client.call(b"echo".to_vec(), LONG).await.unwrap(), b"echo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_accepts_but_never_reads_cannot_wedge_a_caller() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and holds connections without reading or answering.
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    let client = client(addr, WireLimits::default());
    let deadline = Duration::from_millis(200);
    for _ in 0..3 {
        let started = Instant::now();
        let answer = client.call(vec![7u8; 100_000], deadline).await;
        assert!(matches!(answer, Err(WireError::Timeout { .. })), "{answer:?}");
        assert!(started.elapsed() < deadline + SLACK, "{:?}", started.elapsed());
    }
    silent.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_restart_fails_pending_calls_fast_then_reconnects() {
    let limits = fast_reconnect();
    let server = start(test_handler(), limits.clone()).await;
    let addr = server.addr;
    let client = client(addr, limits.clone());
    assert_eq!(client.call(b"before".to_vec(), LONG).await.unwrap(), b"before");

    // A call pending when the server dies fails at once, not at its 5 s deadline.
    let pending = {
        let client = client.clone();
        tokio::spawn(async move { client.call(b"hang".to_vec(), LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let killed_at = Instant::now();
    server.task.abort(); // a crash: no graceful shutdown
    let _ = server.task.await;
    let lost = pending.await.unwrap();
    assert!(matches!(lost, Err(WireError::ConnectionLost { .. })), "{lost:?}");
    assert!(killed_at.elapsed() < SLACK, "{:?}", killed_at.elapsed());

    // While the server is down, calls fail fast and were certainly not sent.
    for _ in 0..5 {
        let started = Instant::now();
        let error = client.call(b"down".to_vec(), LONG).await.unwrap_err();
        assert!(error.certainly_not_sent(), "{error:?}");
        assert!(started.elapsed() < SLACK, "{:?}", started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Same port again: the client reconnects within its bounded backoff.
    let restarted = start_on(TcpListener::bind(addr).await.unwrap(), test_handler(), limits.clone()).await;
    let started = Instant::now();
    let answer = loop {
        match client.call(b"after".to_vec(), LONG).await {
            Ok(answer) => break answer,
            Err(error) => {
                assert!(error.certainly_not_sent(), "{error:?}");
                assert!(started.elapsed() < Duration::from_secs(2), "no reconnect: {error:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    assert_eq!(answer, b"after");
    // The backoff is bounded by reconnect_backoff_ms_max (100 ms) plus one retry step.
    assert!(
        started.elapsed() < Duration::from_millis(100) + SLACK,
        "{:?}",
        started.elapsed()
    );
    restarted.shutdown.send(true).unwrap();
    restarted.task.await.unwrap().unwrap();
}

/// Counts handler invocations running at once and remembers the most seen.
fn counting_handler(running: Arc<AtomicUsize>, most: Arc<AtomicUsize>) -> Handler {
    handler_fn(move |payload: Vec<u8>| {
        let running = Arc::clone(&running);
        let most = Arc::clone(&most);
        async move {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(payload)
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_flight_max_is_respected_by_server_and_client() {
    for (server_in_flight_max, client_in_flight_max, expected_most) in [(4, 64, 4), (64, 3, 3)] {
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let server = start(
            counting_handler(Arc::clone(&running), Arc::clone(&most)),
            WireLimits {
                in_flight_max: server_in_flight_max,
                ..WireLimits::default()
            },
        )
        .await;
        let client = client(
            server.addr,
            WireLimits {
                in_flight_max: client_in_flight_max,
                ..WireLimits::default()
            },
        );
        let mut calls = tokio::task::JoinSet::new();
        for i in 0u32..64 {
            let client = client.clone();
            calls.spawn(async move { client.call(i.to_le_bytes().to_vec(), LONG).await });
        }
        while let Some(done) = calls.join_next().await {
            done.unwrap().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), expected_most);
        assert_eq!(running.load(Ordering::SeqCst), 0);
        server.shutdown.send(true).unwrap();
        server.task.await.unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_connection() {
    let limits = WireLimits {
        frame_bytes_max: 1024,
        ..WireLimits::default()
    };
    let server = start(test_handler(), limits.clone()).await;
    let good = client(server.addr, limits);
    assert_eq!(good.call(b"one".to_vec(), LONG).await.unwrap(), b"one");

    let mut oversize_header = Vec::new();
    oversize_header.extend_from_slice(b"SW\x01\x01");
    oversize_header.extend_from_slice(&1u64.to_le_bytes());
    oversize_header.extend_from_slice(&u32::MAX.to_le_bytes());
    oversize_header.extend_from_slice(&[0u8; 4]);
    let mut bad_checksum = Vec::new();
    specie_wire::frame::encode_frame(FrameKind::Request, 1, b"x", 1024, &mut bad_checksum).unwrap();
    bad_checksum[16] ^= 0xff;
    let mut response = Vec::new();
    specie_wire::frame::encode_frame(FrameKind::Response, 1, b"", 1024, &mut response).unwrap();
    let cases: [(&[u8], &str); 4] = [
        (&oversize_header, "exceeds the limit of 1024 bytes"),
        (b"GET / HTTP/1.1\r\n\r\n", "bad frame magic"),
        (&bad_checksum, "checksum mismatch"),
        (&response, "must not send Response"),
    ];
    for (bytes, reason) in cases {
        let mut raw = TcpStream::connect(server.addr).await.unwrap();
        raw.write_all(bytes).await.unwrap();
        let frames = read_until_closed(&mut raw).await;
        assert_eq!(frames.len(), 1, "{reason}: {frames:?}");
        assert_eq!(frames[0].kind, FrameKind::Error);
        assert_eq!(frames[0].request_id, 0);
        let message = String::from_utf8_lossy(&frames[0].payload).into_owned();
        assert!(message.contains(reason), "{message}");
        // The well-behaved client's connection is untouched.
        assert_eq!(good.call(b"still here".to_vec(), LONG).await.unwrap(), b"still here");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_turned_away() {
    let limits = WireLimits {
        connections_max: 2,
        ..WireLimits::default()
    };
    let server = start(test_handler(), limits.clone()).await;
    let first = client(server.addr, limits.clone());
    let second = client(server.addr, limits.clone());
    first.call(b"a".to_vec(), LONG).await.unwrap();
    second.call(b"b".to_vec(), LONG).await.unwrap();
    let mut third = TcpStream::connect(server.addr).await.unwrap();
    let frames = read_until_closed(&mut third).await;
    assert_eq!(frames.len(), 1);
    assert!(String::from_utf8_lossy(&frames[0].payload).contains("limit of 2 connections"));
    // A client turned away fails at once (usually with the server's reason; a reset can beat
    // the error frame to the caller, so only the kind of error is asserted).
    let started = Instant::now();
    let refused = client(server.addr, limits).call(b"c".to_vec(), LONG).await.unwrap_err();
    assert!(matches!(&refused, WireError::ConnectionLost { .. }), "{refused:?}");
    assert!(started.elapsed() < SLACK);
    drop(first);
    // The freed slot is reusable once the server has seen the close.
    let started = Instant::now();
    let fourth = client(server.addr, fast_reconnect());
    while fourth.call(b"d".to_vec(), LONG).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(2), "slot never freed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_finishes_running_requests() {
    let server = start(test_handler(), fast_reconnect()).await;
    let client = client(server.addr, fast_reconnect());
    client.call(b"warm".to_vec(), LONG).await.unwrap();
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.call(b"slow".to_vec(), LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.shutdown.send(true).unwrap();
    assert_eq!(slow.await.unwrap().unwrap(), b"slow");
    tokio::time::timeout(LONG, server.task).await.unwrap().unwrap().unwrap();
    let after = client.call(b"after".to_vec(), LONG).await.unwrap_err();
    assert!(
        matches!(
            after,
            WireError::ConnectionLost { .. } | WireError::ConnectFailed { .. } | WireError::Unavailable { .. }
        ),
        "{after:?}"
    );
}

/// Requests whose handlers run hold at most `request_bytes_in_flight_max` of payload (plus one
/// request) per connection: beyond it the server stops reading, however many slots are free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_requests_are_served_within_the_connections_byte_bound() {
    const REQUEST_BYTES: usize = 40_000;
    let held = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let handler = {
        let (held, peak) = (held.clone(), peak.clone());
        handler_fn(move |payload: Vec<u8>| {
            let (held, peak) = (held.clone(), peak.clone());
            async move {
                let now = held.fetch_add(payload.len(), Ordering::SeqCst) + payload.len();
                peak.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                held.fetch_sub(payload.len(), Ordering::SeqCst);
                Ok(payload[..8].to_vec())
            }
        })
    };
    let limits = WireLimits {
        request_bytes_in_flight_max: 100_000,
        ..WireLimits::default()
    };
    let server = start(handler, limits).await;
    let client = client(server.addr, WireLimits::default());
    let mut calls = tokio::task::JoinSet::new();
    for i in 0u64..20 {
        let client = client.clone();
        calls.spawn(async move {
            let mut payload = vec![0u8; REQUEST_BYTES];
            payload[..8].copy_from_slice(&i.to_le_bytes());
            assert_eq!(client.call(payload, LONG).await.unwrap(), i.to_le_bytes());
        });
    }
    while let Some(done) = calls.join_next().await {
        done.unwrap();
    }
    let peak = peak.load(Ordering::SeqCst);
    // Three requests at once (the third starts below the bound), not all twenty.
    assert!(
        (REQUEST_BYTES..100_000 + REQUEST_BYTES).contains(&peak),
        "{peak} bytes held at once"
    );
    server.shutdown.send(true).unwrap();
    server.task.await.unwrap().unwrap();
}

/// A request still queued when its call gives up is never sent: a peer slow to read gets the
/// request being written, not the backlog of abandoned ones behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_abandoned_before_they_are_written_are_not_sent() {
    const REQUEST_BYTES: usize = 8 << 20;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = client(addr, WireLimits::default());
    // A peer that reads nothing for a while: the first request fills the socket's buffers and
    // the rest wait in the client's queue until their deadline.
    let calls: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move { client.call(vec![7u8; REQUEST_BYTES], Duration::from_millis(200)).await })
        })
        .collect();
    let (mut peer, _) = listener.accept().await.unwrap();
    for call in calls {
        assert!(matches!(call.await.unwrap(), Err(WireError::Timeout { .. })));
    }
    let mut received = 0usize;
    let mut chunk = vec![0u8; 1 << 20];
    while let Ok(Ok(n @ 1..)) = tokio::time::timeout(Duration::from_millis(300), peer.read(&mut chunk)).await {
        received += n;
    }
    assert!(
        (1..2 * REQUEST_BYTES).contains(&received),
        "{received} bytes of 4 abandoned requests of {REQUEST_BYTES} reached the peer"
    );
}
