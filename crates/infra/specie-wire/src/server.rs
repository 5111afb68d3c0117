//! The server driver: accepts connections, authenticates them, decodes requests, runs the
//! handler, writes answers.
//!
//! A connection first passes the transport's handshake (mutual TLS), bounded in time and in the
//! number of handshakes at once, so strangers cannot hold the slots of authenticated peers. Then
//! [`Admit`] decides, from the peer's proven identity and before a single frame is read, whether
//! that peer may talk to this server at all, and hands back the handler for its requests.
//!
//! Per connection there is one task that reads and dispatches, the handler invocations it
//! spawned (at most `in_flight_max`, holding at most `request_bytes_in_flight_max` of payload
//! plus one request), and one writer task that batches answers into one write. When either
//! bound is reached the connection task stops reading, so a client that
//! sends faster than the handler serves fills its TCP window and is slowed down (backpressure)
//! instead of growing our memory. A malformed frame closes only its own connection.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinError, JoinHandle, JoinSet};

use crate::frame::{encode_frame, Frame, FrameDecoder, FrameEncoder, FrameKind, HEADER_BYTES};
use crate::limits::WireLimits;
use crate::transport::{self, Peer, ReadHalf, Transport, WriteHalf};

/// A boxed, sendable future, as returned by a [`Handler`].
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// Answers one request payload with a response payload, or with an error message that the
/// client receives as `WireError::Remote`.
pub type Handler = Arc<dyn Fn(Vec<u8>) -> BoxFuture<Result<Vec<u8>, String>> + Send + Sync>;

/// Decides once per connection, after the handshake and before any frame is read, whether the
/// peer may talk to this server: the handler for its requests, or why it is refused (logged,
/// counted, and sent to the peer in a connection-level error frame).
pub type Admit = Arc<dyn Fn(&Peer) -> Result<Handler, String> + Send + Sync>;

/// Wraps an async function as a [`Handler`].
pub fn handler_fn<F, Fut>(f: F) -> Handler
where
    F: Fn(Vec<u8>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Vec<u8>, String>> + Send + 'static,
{
    Arc::new(move |payload| Box::pin(f(payload)))
}

/// Admits every peer that passed the transport's handshake, with the same handler.
pub fn admit_all(handler: Handler) -> Admit {
    Arc::new(move |_peer| Ok(handler.clone()))
}

/// What the server turned away, for status pages and tests.
#[derive(Debug, Default)]
pub struct ServerCounters {
    /// Handshakes that failed or timed out: no certificate, a certificate from another CA, an
    /// expired one, or a peer that never finished.
    pub handshakes_failed: AtomicU64,
    /// Connections closed unread because `handshakes_max` handshakes were already under way.
    pub handshakes_over_limit: AtomicU64,
    /// Authenticated peers that [`Admit`] refused, or that speak no protocol version in common.
    pub peers_refused: AtomicU64,
    /// Authenticated connections refused because `connections_max` were being served.
    pub connections_over_limit: AtomicU64,
    /// Requests from admitted peers that the handler refused: not authorised for them, or not
    /// well-formed. Counted by the handler, which alone can tell.
    pub requests_refused: AtomicU64,
    /// Warnings about strangers, rate-limited: a flood of failed handshakes must not fill the
    /// disk with log lines. The counters above count every one.
    stranger_warnings: WarningBudget,
}

/// At most [`STRANGER_WARNINGS_PER_SECOND`] warnings a second; the rest are dropped.
#[derive(Debug, Default)]
struct WarningBudget {
    second: AtomicU64,
    used: AtomicU64,
}

const STRANGER_WARNINGS_PER_SECOND: u64 = 10;

impl WarningBudget {
    fn allow(&self) -> bool {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_secs());
        if self.second.swap(now, Ordering::Relaxed) != now {
            self.used.store(0, Ordering::Relaxed);
        }
        self.used.fetch_add(1, Ordering::Relaxed) < STRANGER_WARNINGS_PER_SECOND
    }
}

impl ServerCounters {
    pub fn snapshot(&self) -> [(&'static str, u64); 5] {
        [
            ("handshakes_failed", self.handshakes_failed.load(Ordering::Relaxed)),
            (
                "handshakes_over_limit",
                self.handshakes_over_limit.load(Ordering::Relaxed),
            ),
            ("peers_refused", self.peers_refused.load(Ordering::Relaxed)),
            (
                "connections_over_limit",
                self.connections_over_limit.load(Ordering::Relaxed),
            ),
            ("requests_refused", self.requests_refused.load(Ordering::Relaxed)),
        ]
    }
}

/// After an accept error (e.g. out of file descriptors) retrying at once would spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);
/// After sending a connection-level error frame, how long we keep reading (and discarding) so
/// that closing a socket with unread input does not reset the connection and destroy the error
/// frame before the peer reads it. Also bounds writing that frame to a peer that does not read.
const CLOSE_DRAIN: Duration = Duration::from_millis(200);

/// What a server needs besides its listener and handler.
#[derive(Clone)]
pub struct ServerSetup {
    pub limits: WireLimits,
    pub transport: Transport,
    pub counters: Arc<ServerCounters>,
}

/// Serves `listener` until `shutdown` becomes true (or its sender is dropped).
///
/// Shutdown is graceful: accepting stops, connections stop reading, requests already being
/// handled finish and their answers are flushed, all within `shutdown_grace_ms`; whatever is
/// still running then is cut off. Returns an error only for invalid limits.
pub async fn serve(
    listener: TcpListener,
    admit: Admit,
    setup: ServerSetup,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let limits = setup.limits.clone();
    limits
        .validate()
        .map_err(|invalid| io::Error::new(io::ErrorKind::InvalidInput, invalid))?;
    let handshake_slots = Arc::new(Semaphore::new(limits.handshakes_max));
    let connection_slots = Arc::new(Semaphore::new(limits.connections_max));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            () = signalled(&mut shutdown) => break,
            // Reap finished connection tasks so the set does not grow with every connection.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, addr)) => match Arc::clone(&handshake_slots).try_acquire_owned() {
                    Ok(handshake_slot) => {
                        connections.spawn(authenticate_and_serve(
                            stream,
                            addr,
                            handshake_slot,
                            Arc::clone(&connection_slots),
                            Arc::clone(&admit),
                            setup.clone(),
                            shutdown.clone(),
                        ));
                    }
                    Err(_) => {
                        setup.counters.handshakes_over_limit.fetch_add(1, Ordering::Relaxed);
                        if setup.counters.stranger_warnings.allow() {
                            tracing::warn!(%addr, handshakes_max = limits.handshakes_max, "connection closed: too many handshakes under way");
                        }
                    }
                },
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(limits.shutdown_grace(), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = connections.len(),
            "shutdown grace elapsed; cutting off connections"
        );
        connections.shutdown().await;
    }
    Ok(())
}

/// Handshake (bounded), admission, a connection slot, then the frame loop.
async fn authenticate_and_serve(
    stream: tokio::net::TcpStream,
    addr: std::net::SocketAddr,
    handshake_slot: OwnedSemaphorePermit,
    connection_slots: Arc<Semaphore>,
    admit: Admit,
    setup: ServerSetup,
    shutdown: watch::Receiver<bool>,
) {
    let limits = &setup.limits;
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%addr, %error, "cannot set TCP_NODELAY");
    }
    let handshake = tokio::time::timeout(
        limits.handshake_timeout(),
        transport::accept(&setup.transport, stream, addr),
    )
    .await;
    drop(handshake_slot);
    let (reader, mut writer, peer, agreed) = match handshake {
        Ok(Ok(established)) => established,
        Ok(Err(error)) => {
            setup.counters.handshakes_failed.fetch_add(1, Ordering::Relaxed);
            if setup.counters.stranger_warnings.allow() {
                tracing::warn!(%addr, %error, "connection refused: handshake failed");
            }
            return;
        }
        Err(_elapsed) => {
            setup.counters.handshakes_failed.fetch_add(1, Ordering::Relaxed);
            if setup.counters.stranger_warnings.allow() {
                tracing::warn!(%addr, timeout_ms = limits.handshake_timeout_ms, "connection refused: no handshake in time");
            }
            return;
        }
    };
    if let Err(incompatible) = agreed {
        setup.counters.peers_refused.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, reason = %incompatible, "connection refused: no protocol version in common");
        refuse(&mut writer, &incompatible.to_string(), limits).await;
        return;
    }
    let handler = match admit(&peer) {
        Ok(handler) => handler,
        Err(reason) => {
            setup.counters.peers_refused.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%peer, %reason, "connection refused: peer not authorised");
            refuse(&mut writer, &format!("not authorised: {reason}"), limits).await;
            return;
        }
    };
    let Ok(slot) = connection_slots.try_acquire_owned() else {
        setup.counters.connections_over_limit.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(%peer, connections_max = limits.connections_max, "connection refused: limit reached");
        let message = format!("server at its limit of {} connections", limits.connections_max);
        refuse(&mut writer, &message, limits).await;
        return;
    };
    serve_connection(reader, writer, peer, handler, limits.clone(), shutdown, slot).await;
}

/// Resolves when shutdown is requested; a dropped sender counts as a request, since nobody
/// could ask for shutdown any more.
async fn signalled(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Tells a peer why it is turned away (a connection-level error frame), within a short bound.
async fn refuse(writer: &mut WriteHalf, message: &str, limits: &WireLimits) {
    let mut bytes = Vec::new();
    let message = truncate_message(message.to_string(), limits.frame_bytes_max);
    if encode_frame(
        FrameKind::Error,
        0,
        message.as_bytes(),
        limits.frame_bytes_max,
        &mut bytes,
    )
    .is_ok()
    {
        let _ = tokio::time::timeout(CLOSE_DRAIN, async {
            writer.write_all(&bytes).await?;
            writer.shutdown().await
        })
        .await;
    }
}

/// Aborts a spawned task when dropped, so a connection task that is cut off takes its writer
/// with it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How a connection ended, for the log and for what we tell the peer.
enum Ending {
    /// Peer closed, or we shut down: answers to everything dispatched were queued.
    Clean,
    /// The peer broke the protocol: tell it why (request id 0) and close.
    Violation(String),
    /// The socket failed; nothing more can be sent.
    Broken(String),
}

async fn serve_connection(
    mut reader: ReadHalf,
    writer: WriteHalf,
    peer: Peer,
    handler: Handler,
    limits: WireLimits,
    mut shutdown: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    // Answers are queued by this task only, at most one per dispatched request plus pongs and a
    // final error frame; when the peer does not read, this fills and this task stops reading.
    let (answers, queue) = mpsc::channel::<Frame>(limits.in_flight_max + 1);
    let writer = AbortOnDrop(tokio::spawn(write_answers(writer, queue, limits.clone())));
    let mut decoder = FrameDecoder::new(limits.frame_bytes_max);
    let mut chunk = vec![0u8; limits.read_chunk_bytes];
    let mut handlers: JoinSet<Result<Vec<u8>, String>> = JoinSet::new();
    let mut requests = Requests::default();
    let mut reading = true;

    let ending = 'serve: loop {
        // Dispatch every complete frame already buffered, as long as a handler slot is free.
        while reading && requests.has_room(&limits) {
            let frame = match decoder.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(error) => break 'serve Ending::Violation(error.to_string()),
            };
            match frame.kind {
                FrameKind::Request if frame.request_id != 0 => {
                    let bytes = frame.payload.len();
                    let task = handlers.spawn(handler(frame.payload));
                    requests.started(task.id(), frame.request_id, bytes);
                }
                FrameKind::Ping => {
                    let pong = Frame::new(FrameKind::Pong, frame.request_id, frame.payload);
                    if answers.send(pong).await.is_err() {
                        break 'serve Ending::Broken("writer stopped".to_string());
                    }
                }
                FrameKind::Request => break 'serve Ending::Violation("request id 0 is reserved".to_string()),
                kind => break 'serve Ending::Violation(format!("a client must not send {kind:?} frames")),
            }
        }
        if !reading && handlers.is_empty() {
            break Ending::Clean;
        }
        tokio::select! {
            biased;
            () = signalled(&mut shutdown), if reading => reading = false,
            Some(joined) = handlers.join_next_with_id(), if !handlers.is_empty() => {
                let answer = answer_frame(joined, &mut requests, limits.frame_bytes_max);
                if answers.send(answer).await.is_err() {
                    break Ending::Broken("writer stopped".to_string());
                }
            }
            read = reader.read(&mut chunk), if reading && requests.has_room(&limits) => match read {
                // The peer finished sending; answer what it asked, then close.
                Ok(0) => reading = false,
                Ok(n) => decoder.feed(&chunk[..n]),
                Err(error) => break Ending::Broken(format!("read failed: {error}")),
            },
        }
    };

    match &ending {
        Ending::Clean => {}
        Ending::Violation(reason) => {
            tracing::warn!(%peer, %reason, "closing connection: protocol violation");
            // The peer is broken; its other requests are not worth finishing.
            handlers.abort_all();
            let message = truncate_message(format!("closing connection: {reason}"), limits.frame_bytes_max);
            // try_send: if the peer is not reading, its queue is full and the error frame is
            // dropped rather than letting a broken peer hold this task.
            let _ = answers.try_send(Frame::new(FrameKind::Error, 0, message.into_bytes()));
        }
        Ending::Broken(reason) => {
            tracing::debug!(%peer, %reason, "connection broken");
            handlers.abort_all();
        }
    }
    // Closing the queue lets the writer flush what is queued, shut down its half and exit.
    drop(answers);
    let mut writer = writer;
    if tokio::time::timeout(limits.shutdown_grace(), &mut writer.0)
        .await
        .is_err()
    {
        tracing::debug!(%peer, "peer is not reading its answers; dropping them");
        return;
    }
    if matches!(ending, Ending::Violation(_)) {
        let _ = tokio::time::timeout(CLOSE_DRAIN, async {
            while let Ok(1..) = reader.read(&mut chunk).await {}
        })
        .await;
    }
}

/// The requests of one connection whose handlers run: their ids, and the bytes they hold.
#[derive(Default)]
struct Requests {
    running: HashMap<tokio::task::Id, (u64, usize)>,
    payload_bytes: usize,
}

impl Requests {
    /// Whether another request may be read and dispatched: fewer than `in_flight_max` run, and
    /// they hold less than `request_bytes_in_flight_max`. So the payloads held never exceed
    /// that bound by more than one frame.
    fn has_room(&self, limits: &WireLimits) -> bool {
        self.running.len() < limits.in_flight_max && self.payload_bytes < limits.request_bytes_in_flight_max
    }

    fn started(&mut self, task: tokio::task::Id, request_id: u64, bytes: usize) {
        self.running.insert(task, (request_id, bytes));
        self.payload_bytes += bytes;
    }

    /// The finished task's request id (0 if unknown, which only a bug would cause).
    fn finished(&mut self, task: tokio::task::Id) -> u64 {
        let Some((request_id, bytes)) = self.running.remove(&task) else {
            return 0;
        };
        debug_assert!(self.payload_bytes >= bytes, "payload bytes counted once");
        self.payload_bytes -= bytes;
        request_id
    }
}

/// The frame answering a finished handler invocation.
fn answer_frame(
    joined: Result<(tokio::task::Id, Result<Vec<u8>, String>), JoinError>,
    requests: &mut Requests,
    frame_bytes_max: usize,
) -> Frame {
    let (task_id, outcome) = match joined {
        Ok((task_id, outcome)) => (task_id, outcome),
        Err(error) => {
            let reason = if error.is_panic() {
                "handler panicked".to_string()
            } else {
                "handler was cancelled".to_string()
            };
            (error.id(), Err(reason))
        }
    };
    // Every spawned task was recorded with its request id; 0 would only mark a bug, and the
    // client treats an unknown id as an answer nobody waits for.
    let request_id = requests.finished(task_id);
    debug_assert_ne!(request_id, 0, "handler task without a request id");
    match outcome {
        Ok(payload) if HEADER_BYTES + payload.len() <= frame_bytes_max => {
            Frame::new(FrameKind::Response, request_id, payload)
        }
        Ok(payload) => {
            let message = format!(
                "response of {} bytes exceeds frame_bytes_max {frame_bytes_max}",
                HEADER_BYTES + payload.len()
            );
            Frame::new(
                FrameKind::Error,
                request_id,
                truncate_message(message, frame_bytes_max).into_bytes(),
            )
        }
        Err(message) => Frame::new(
            FrameKind::Error,
            request_id,
            truncate_message(message, frame_bytes_max).into_bytes(),
        ),
    }
}

/// Cuts an error message to what fits in one frame, on a character boundary.
fn truncate_message(mut message: String, frame_bytes_max: usize) -> String {
    let bytes_max = frame_bytes_max.saturating_sub(HEADER_BYTES);
    if message.len() > bytes_max {
        let mut cut = bytes_max;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
    }
    message
}

/// Writer task: drains queued answers and writes them with one `write_all` per batch.
async fn write_answers(mut socket: WriteHalf, mut queue: mpsc::Receiver<Frame>, limits: WireLimits) {
    let mut encoder = FrameEncoder::new(limits.frame_bytes_max);
    while let Some(first) = queue.recv().await {
        encode_answer(&mut encoder, &first);
        while encoder.buffered_bytes() < limits.write_batch_bytes_max {
            match queue.try_recv() {
                Ok(frame) => encode_answer(&mut encoder, &frame),
                Err(_) => break,
            }
        }
        if socket.write_all(encoder.as_bytes()).await.is_err() {
            // Dropping the queue makes the connection task's next send fail, which ends it.
            return;
        }
        encoder.clear();
    }
    let _ = socket.shutdown().await;
}

fn encode_answer(encoder: &mut FrameEncoder, frame: &Frame) {
    // Answers are sized by `answer_frame` and `truncate_message`, so this cannot fail; if it
    // did, the client would see a timeout for that one request, which is safe.
    if let Err(error) = encoder.push_frame(frame) {
        tracing::error!(%error, request_id = frame.request_id, "answer frame could not be encoded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stranger_warnings_are_limited_per_second() {
        let budget = WarningBudget::default();
        let allowed = (0..1000).filter(|_| budget.allow()).count() as u64;
        // One second boundary may fall inside the loop, allowing one more second's budget.
        assert!(
            (STRANGER_WARNINGS_PER_SECOND..=2 * STRANGER_WARNINGS_PER_SECOND).contains(&allowed),
            "{allowed}"
        );
    }

    #[test]
    fn messages_are_cut_to_fit_a_frame() {
        assert_eq!(truncate_message("short".into(), 1024), "short");
        let cut = truncate_message("ééé".into(), HEADER_BYTES + 3);
        assert_eq!(cut, "é");
        assert_eq!(truncate_message("x".into(), HEADER_BYTES), "");
    }
}
