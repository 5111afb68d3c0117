//! The client driver: one peer address, one TCP connection at a time, many concurrent calls.
//!
//! Structure per connection: callers put request frames on a bounded queue and wait on a
//! oneshot; a writer task drains the queue and writes everything queued with one `write_all`
//! (batching); a reader task decodes answers and routes them to the waiting callers by request
//! id. Callers never touch the socket, so a slow or dead peer can only make a caller wait until
//! its own deadline.
//!
//! Failure handling: when the connection breaks, every pending call fails at once with
//! [`WireError::ConnectionLost`]. Reconnection is lazy (the next call dials) and paced by
//! exponential backoff with jitter, bounded by `reconnect_backoff_ms_max`; calls made while the
//! client is backing off fail at once with [`WireError::Unavailable`] instead of queueing behind a
//! peer that is probably down, so callers can try another replica or retry on their own terms.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch, Mutex, Semaphore};
use tokio::time::Instant;

use crate::error::WireError;
use crate::frame::{frame_bytes, Frame, FrameDecoder, FrameEncoder, FrameKind};
use crate::limits::{backoff_ms, InvalidWireLimits, WireLimits};
use crate::transport::{self, ReadHalf, Transport, WriteHalf};

/// A multiplexing RPC client for one peer. Cheap to clone; clones share the connection, the
/// in-flight slots and the backoff state.
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

struct ClientInner {
    addr: String,
    /// The identity the peer's certificate must prove (mutual TLS).
    peer_name: String,
    transport: Transport,
    limits: WireLimits,
    /// One permit per request awaiting an answer: callers beyond `in_flight_max` wait here.
    slots: Semaphore,
    /// Request ids are unique for the life of the client (0 is reserved for connection-level
    /// errors), so an answer can never be mistaken for one to a newer request.
    next_request_id: AtomicU64,
    /// Held across a connect attempt so that concurrent callers do not all dial at once.
    link: Mutex<Link>,
}

struct Link {
    conn: Option<Conn>,
    /// Consecutive connects that failed or led to a connection that broke before any answer.
    failures: u32,
    next_attempt_at: Option<Instant>,
}

/// A caller's handle on the current connection.
#[derive(Clone)]
struct Conn {
    outgoing: mpsc::Sender<Frame>,
    shared: Arc<ConnShared>,
}

type Answer = Result<Vec<u8>, WireError>;

/// State shared by callers, the reader task and the writer task of one connection.
struct ConnShared {
    addr: String,
    pending: StdMutex<Pending>,
    /// Set once an answer arrived, which proves the peer works and resets the backoff.
    answered: AtomicBool,
    /// Flipped to true when the connection is failed; both tasks stop on it.
    stop: watch::Sender<bool>,
}

struct Pending {
    /// When and why the connection ended; registering a call afterwards fails, so no call can
    /// be left waiting on a connection that will never answer.
    closed: Option<(Instant, WireError)>,
    calls: HashMap<u64, oneshot::Sender<Answer>>,
}

impl ConnShared {
    fn pending(&self) -> MutexGuard<'_, Pending> {
        // Nothing panics while holding this lock; recovering from poison keeps calls failing
        // cleanly rather than panicking in every caller.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(self: &Arc<Self>, request_id: u64, answer: oneshot::Sender<Answer>) -> Result<PendingSlot, WireError> {
        let mut pending = self.pending();
        if let Some((_, why)) = &pending.closed {
            // Why the connection ended (a peer's refusal, say) tells the caller more than that it did.
            return Err(why.clone());
        }
        pending.calls.insert(request_id, answer);
        Ok(PendingSlot {
            shared: Arc::clone(self),
            request_id,
        })
    }

    /// Delivers an answer; an answer nobody waits for (the call timed out) is dropped.
    fn complete(&self, request_id: u64, answer: Answer) {
        let waiter = self.pending().calls.remove(&request_id);
        if let Some(waiter) = waiter {
            // The caller may have given up between our removal and this send; that is fine.
            let _ = waiter.send(answer);
        }
    }

    fn closed_at(&self) -> Option<Instant> {
        self.pending().closed.as_ref().map(|(at, _)| *at)
    }

    /// Ends the connection: fails every pending call with `error` and stops both tasks.
    fn fail_all(&self, error: WireError) {
        let waiters: Vec<_> = {
            let mut pending = self.pending();
            if pending.closed.is_none() {
                pending.closed = Some((Instant::now(), error.clone()));
            }
            pending.calls.drain().map(|(_, waiter)| waiter).collect()
        };
        if !waiters.is_empty() {
            tracing::debug!(addr = %self.addr, calls = waiters.len(), %error, "failing pending calls");
        }
        for waiter in waiters {
            let _ = waiter.send(Err(error.clone()));
        }
        self.stop.send_replace(true);
    }

    fn lost(&self, reason: impl Into<String>) -> WireError {
        WireError::ConnectionLost {
            addr: self.addr.clone(),
            reason: reason.into(),
        }
    }
}

/// Frees a call's pending entry however the call ends (answer, deadline, or the caller's future
/// being dropped), so timed-out calls leave nothing behind.
struct PendingSlot {
    shared: Arc<ConnShared>,
    request_id: u64,
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        self.shared.pending().calls.remove(&self.request_id);
    }
}

impl Client {
    /// A client for the process `peer_name` at `addr` (`host:port`, resolved at each connect).
    /// Over mutual TLS the server's certificate must name `peer_name`, or the connection fails.
    /// Does not connect yet: the first call does. Fails only if `limits` are invalid.
    pub fn new(
        addr: impl Into<String>,
        peer_name: impl Into<String>,
        limits: WireLimits,
        transport: Transport,
    ) -> Result<Client, InvalidWireLimits> {
        limits.validate()?;
        Ok(Client {
            inner: Arc::new(ClientInner {
                addr: addr.into(),
                peer_name: peer_name.into(),
                transport,
                slots: Semaphore::new(limits.in_flight_max),
                limits,
                next_request_id: AtomicU64::new(1),
                link: Mutex::new(Link {
                    conn: None,
                    failures: 0,
                    next_attempt_at: None,
                }),
            }),
        })
    }

    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    pub fn limits(&self) -> &WireLimits {
        &self.inner.limits
    }

    /// Sends `payload` as a request and waits for its answer for at most `timeout`.
    pub async fn call(&self, payload: Vec<u8>, timeout: Duration) -> Result<Vec<u8>, WireError> {
        let timeout_ms = timeout.as_millis() as u64;
        self.exchange(FrameKind::Request, payload, Instant::now() + timeout, timeout_ms)
            .await
    }

    /// Like [`Client::call`] with an absolute deadline, for callers that spread one deadline
    /// over several calls (e.g. the phases of a 2PC round).
    pub async fn call_by(&self, payload: Vec<u8>, deadline: Instant) -> Result<Vec<u8>, WireError> {
        let timeout_ms = deadline.saturating_duration_since(Instant::now()).as_millis() as u64;
        self.exchange(FrameKind::Request, payload, deadline, timeout_ms).await
    }

    /// A round trip that does not reach the handler: checks that the peer's connection loop
    /// is alive. Returns the round-trip time.
    pub async fn ping(&self, timeout: Duration) -> Result<Duration, WireError> {
        let started = Instant::now();
        self.exchange(
            FrameKind::Ping,
            Vec::new(),
            started + timeout,
            timeout.as_millis() as u64,
        )
        .await?;
        Ok(started.elapsed())
    }

    /// Requests currently holding an in-flight slot.
    pub fn in_flight(&self) -> usize {
        self.inner.limits.in_flight_max - self.inner.slots.available_permits()
    }

    /// `timeout_ms` is only for the error message: the caller's view of its deadline.
    async fn exchange(
        &self,
        kind: FrameKind,
        payload: Vec<u8>,
        deadline: Instant,
        timeout_ms: u64,
    ) -> Result<Vec<u8>, WireError> {
        let limits = &self.inner.limits;
        let bytes = frame_bytes(payload.len());
        if bytes > limits.frame_bytes_max as u64 {
            return Err(WireError::FrameTooLarge {
                frame_bytes: bytes,
                frame_bytes_max: limits.frame_bytes_max as u64,
            });
        }
        // One deadline covers every wait: for a slot, for the connection, for queue space and
        // for the answer. Dropping the inner future on expiry releases the slot and the
        // pending entry.
        match tokio::time::timeout_at(deadline, self.exchange_within_deadline(kind, payload)).await {
            Ok(answer) => answer,
            Err(_elapsed) => Err(WireError::Timeout { timeout_ms }),
        }
    }

    async fn exchange_within_deadline(&self, kind: FrameKind, payload: Vec<u8>) -> Result<Vec<u8>, WireError> {
        let _slot = self
            .inner
            .slots
            .acquire()
            .await
            .map_err(|_closed| WireError::ConnectionLost {
                addr: self.inner.addr.clone(),
                reason: "client closed".to_string(),
            })?;
        let conn = self.inner.connection().await?;
        let request_id = self.inner.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (answer_tx, answer_rx) = oneshot::channel();
        let _pending = conn.shared.register(request_id, answer_tx)?;
        conn.outgoing
            .send(Frame::new(kind, request_id, payload))
            .await
            .map_err(|_| conn.shared.lost("connection closed while sending"))?;
        match answer_rx.await {
            Ok(answer) => answer,
            // The reader dropped our entry without answering: only on a path that also fails
            // the connection, so report that.
            Err(_) => Err(conn.shared.lost("connection closed while awaiting the answer")),
        }
    }
}

impl ClientInner {
    /// The live connection, or a new one if allowed by the backoff.
    async fn connection(&self) -> Result<Conn, WireError> {
        let mut link = self.link.lock().await;
        if let Some(conn) = &link.conn {
            let Some(lost_at) = conn.shared.closed_at() else {
                return Ok(conn.clone());
            };
            if conn.shared.answered.load(Ordering::Relaxed) {
                // The connection worked for a while: a new episode of failures starts.
                link.failures = 0;
            }
            link.failures = link.failures.saturating_add(1);
            link.next_attempt_at = Some(lost_at + self.backoff(link.failures));
            link.conn = None;
        }
        let now = Instant::now();
        if let Some(at) = link.next_attempt_at {
            if now < at {
                return Err(WireError::Unavailable {
                    addr: self.addr.clone(),
                    retry_in_ms: (at - now).as_millis() as u64,
                });
            }
        }
        let connected = match tokio::time::timeout(self.limits.connect_timeout(), TcpStream::connect(&self.addr)).await
        {
            Ok(Ok(stream)) => stream.set_nodelay(true).map(|()| stream),
            Ok(Err(error)) => Err(error),
            Err(_elapsed) => Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {} ms", self.limits.connect_timeout_ms),
            )),
        };
        let established = match connected {
            Ok(stream) => match tokio::time::timeout(
                self.limits.handshake_timeout(),
                transport::connect(&self.transport, stream, &self.peer_name),
            )
            .await
            {
                Ok(Ok(halves)) => Ok(halves),
                Ok(Err(error)) => Err(std::io::Error::new(error.kind(), format!("handshake failed: {error}"))),
                Err(_elapsed) => Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("no handshake within {} ms", self.limits.handshake_timeout_ms),
                )),
            },
            Err(error) => Err(error),
        };
        match established {
            Ok((read_half, write_half)) => {
                let conn = self.start_connection(read_half, write_half);
                link.conn = Some(conn.clone());
                link.next_attempt_at = None;
                Ok(conn)
            }
            Err(error) => {
                link.failures = link.failures.saturating_add(1);
                link.next_attempt_at = Some(Instant::now() + self.backoff(link.failures));
                Err(WireError::ConnectFailed {
                    addr: self.addr.clone(),
                    reason: error.to_string(),
                })
            }
        }
    }

    fn backoff(&self, failures: u32) -> Duration {
        let unit: f64 = rand::thread_rng().gen();
        Duration::from_millis(backoff_ms(
            failures,
            self.limits.reconnect_backoff_ms_min,
            self.limits.reconnect_backoff_ms_max,
            unit,
        ))
    }

    fn start_connection(&self, read_half: ReadHalf, write_half: WriteHalf) -> Conn {
        // Each queued frame holds an in-flight slot, so this queue never holds more than
        // in_flight_max frames and a send waits only while the writer is blocked on the socket.
        let (outgoing, queue) = mpsc::channel(self.limits.in_flight_max);
        let shared = Arc::new(ConnShared {
            addr: self.addr.clone(),
            pending: StdMutex::new(Pending {
                closed: None,
                calls: HashMap::new(),
            }),
            answered: AtomicBool::new(false),
            stop: watch::Sender::new(false),
        });
        tokio::spawn(write_requests(
            write_half,
            queue,
            Arc::clone(&shared),
            self.limits.clone(),
        ));
        tokio::spawn(read_answers(read_half, Arc::clone(&shared), self.limits.clone()));
        Conn { outgoing, shared }
    }
}

/// Writer task: drains the queue and writes all queued frames with one `write_all`.
async fn write_requests(
    mut socket: WriteHalf,
    mut queue: mpsc::Receiver<Frame>,
    shared: Arc<ConnShared>,
    limits: WireLimits,
) {
    let mut stop = shared.stop.subscribe();
    let mut encoder = FrameEncoder::new(limits.frame_bytes_max);
    let error = loop {
        let first = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break None,
            frame = queue.recv() => frame,
        };
        // All senders gone: the client and every call using this connection are gone.
        let Some(first) = first else {
            break Some(shared.lost("client dropped"));
        };
        encode_request(&mut encoder, &first, &shared);
        while encoder.buffered_bytes() < limits.write_batch_bytes_max {
            match queue.try_recv() {
                Ok(frame) => encode_request(&mut encoder, &frame, &shared),
                Err(_) => break,
            }
        }
        if encoder.is_empty() {
            continue;
        }
        let written = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break None,
            written = socket.write_all(encoder.as_bytes()) => written,
        };
        if let Err(error) = written {
            break Some(shared.lost(format!("write failed: {error}")));
        }
        encoder.clear();
    };
    if let Some(error) = error {
        shared.fail_all(error);
    }
    // Best effort: tells the peer we are done; the socket closes when both halves are dropped.
    let _ = socket.shutdown().await;
}

fn encode_request(encoder: &mut FrameEncoder, frame: &Frame, shared: &ConnShared) {
    // A call that gave up (its deadline passed, or its caller dropped it) while its request
    // waited in the queue has nobody to answer: it is not sent, so a peer that is slow to read
    // is not also sent the retries' abandoned originals.
    if !shared.pending().calls.contains_key(&frame.request_id) {
        return;
    }
    // Callers check the size before queueing, so this fails only if that check is wrong; the
    // caller then gets the error instead of waiting for its deadline.
    if let Err(error) = encoder.push_frame(frame) {
        shared.complete(frame.request_id, Err(WireError::Protocol(error)));
    }
}

/// Reader task: decodes answers and hands each to the call waiting for it.
async fn read_answers(mut socket: ReadHalf, shared: Arc<ConnShared>, limits: WireLimits) {
    let mut stop = shared.stop.subscribe();
    let mut decoder = FrameDecoder::new(limits.frame_bytes_max);
    let mut chunk = vec![0u8; limits.read_chunk_bytes];
    let error = 'read: loop {
        let read = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break None,
            read = socket.read(&mut chunk) => read,
        };
        match read {
            Ok(0) => break Some(shared.lost("closed by peer")),
            Ok(n) => decoder.feed(&chunk[..n]),
            Err(error) => break Some(shared.lost(format!("read failed: {error}"))),
        }
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if let Err(error) = route_answer(frame, &shared) {
                        break 'read Some(error);
                    }
                }
                Ok(None) => break,
                Err(error) => break 'read Some(WireError::Protocol(error)),
            }
        }
    };
    if let Some(error) = error {
        shared.fail_all(error);
    }
}

fn route_answer(frame: Frame, shared: &ConnShared) -> Result<(), WireError> {
    match frame.kind {
        FrameKind::Response | FrameKind::Pong => {
            shared.answered.store(true, Ordering::Relaxed);
            shared.complete(frame.request_id, Ok(frame.payload));
            Ok(())
        }
        FrameKind::Error if frame.request_id != 0 => {
            shared.answered.store(true, Ordering::Relaxed);
            let message = String::from_utf8_lossy(&frame.payload).into_owned();
            shared.complete(frame.request_id, Err(WireError::Remote { message }));
            Ok(())
        }
        FrameKind::Error => Err(shared.lost(format!(
            "peer closed the connection: {}",
            String::from_utf8_lossy(&frame.payload)
        ))),
        FrameKind::Request | FrameKind::Ping => Err(shared.lost(format!(
            "peer sent a {:?} frame, which a server must not send",
            frame.kind
        ))),
    }
}
