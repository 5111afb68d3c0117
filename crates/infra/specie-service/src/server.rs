//! The HTTP/1.1 server in front of the API: an accept loop on hyper with limits, so that idle,
//! slow or withheld clients cannot take the server from everyone else.
//!
//! ```text
//! accept ─▶ permit? ──no──▶ raw 503 too_many_connections, close (no read, no wait)
//!             │ yes
//!             ▼
//!   idle ≤ idle_timeout ─▶ first byte ─▶ head complete ≤ header_timeout ─▶ body ≤ body_timeout ─▶ handler
//!     (connection closed)                 (connection closed)                (408 body_timeout)
//!   ▲                                                                                           │
//!   └──────────────────────────── response written (keep-alive) ◀───────────────────────────────┘
//! ```
//! - **connections_max**: a semaphore; a connection over the cap is answered at once with
//!   `503 too_many_connections` and closed, so a flood costs the server one short write each.
//! - **header_timeout**: hyper's http1 `header_read_timeout`, through a timer of ours that starts
//!   the clock at the head's first byte rather than when hyper begins to wait for it (hyper alone
//!   would also close keep-alive connections idle for that long).
//! - **body_timeout**: the request body is wrapped in a deadline set when the head is complete;
//!   a handler that reads past it sees an error, and the client gets `408 body_timeout`.
//! - **idle_timeout**: before a request's first byte the same timer waits this long instead;
//!   and a connection with no handler running that moves no byte either way for this long (a
//!   client that stopped reading its response, say) is dropped.
//!
//! Shutdown stops accepting at once, closes idle connections, lets requests in progress finish
//! for up to [`SHUTDOWN_GRACE`], then drops whatever is left.

use std::convert::Infallible;
use std::future::Future;
use std::io::{self, Write as _};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use axum::http::{Request, Response, StatusCode};
use axum::Router;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::server::conn::http1;
use hyper::service::{service_fn, Service as _};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::error::error_json;

/// How long requests in progress may run on after shutdown begins; what is left is dropped.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// The longest any of the time-outs may be (a day): longer is surely a mistake.
pub const TIMEOUT_MS_LIMIT: u64 = 24 * 60 * 60 * 1000;
/// The most connections [`HttpLimits::connections_max`] may allow.
pub const CONNECTIONS_MAX_LIMIT: usize = 1 << 20;

/// How long `accept` pauses after an error such as EMFILE (out of file descriptors), instead of
/// retrying in a tight loop while the condition lasts.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// Refused connections whose close is lingering at once; past this they are closed outright.
const REFUSALS_LINGERING_MAX: usize = 64;
/// How long a refused connection lingers, reading and discarding what the client already sent,
/// so that closing it does not reset the connection and destroy the 503 before it is read.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);
const REFUSAL_DRAIN_BYTES_MAX: usize = 64 * 1024;

/// Limits of the HTTP server; see docs/api.md, "Limits".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpLimits {
    /// Most connections served at once; one more is answered 503 `too_many_connections`.
    pub connections_max: usize,
    /// Time to receive a request's complete head, from its first byte; then the connection is
    /// closed without a response.
    pub header_timeout_ms: u64,
    /// Time to receive a request's complete body, from the end of its head; then 408 `body_timeout`.
    pub body_timeout_ms: u64,
    /// Time a connection may stay open with no request in progress and no byte moving, before a
    /// request's first byte or after a response; then it is closed.
    pub idle_timeout_ms: u64,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            connections_max: 512,
            header_timeout_ms: 5_000,
            body_timeout_ms: 10_000,
            idle_timeout_ms: 30_000,
        }
    }
}

/// An HTTP limit outside what the server accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name} is {value}; it must be between 1 and {max}")]
pub struct HttpLimitError {
    pub name: &'static str,
    pub value: u64,
    pub max: u64,
}

impl HttpLimits {
    /// Refuses zeros (a limit of zero would refuse everything) and values past
    /// [`CONNECTIONS_MAX_LIMIT`] and [`TIMEOUT_MS_LIMIT`].
    pub fn validate(&self) -> Result<(), HttpLimitError> {
        for (name, value, max) in [
            (
                "connections_max",
                self.connections_max as u64,
                CONNECTIONS_MAX_LIMIT as u64,
            ),
            ("header_timeout_ms", self.header_timeout_ms, TIMEOUT_MS_LIMIT),
            ("body_timeout_ms", self.body_timeout_ms, TIMEOUT_MS_LIMIT),
            ("idle_timeout_ms", self.idle_timeout_ms, TIMEOUT_MS_LIMIT),
        ] {
            if value == 0 || value > max {
                return Err(HttpLimitError { name, value, max });
            }
        }
        Ok(())
    }

    fn header_timeout(&self) -> Duration {
        Duration::from_millis(self.header_timeout_ms)
    }

    fn body_timeout(&self) -> Duration {
        Duration::from_millis(self.body_timeout_ms)
    }

    fn idle_timeout(&self) -> Duration {
        Duration::from_millis(self.idle_timeout_ms)
    }
}

/// Why a process could not serve its API, or stopped serving it with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeUntilError {
    #[error("cannot start a runtime: {0}")]
    Runtime(#[source] io::Error),
    #[error("cannot listen for Ctrl-C: {0}")]
    Signal(#[source] io::Error),
    #[error(
        "cannot listen on {listen}: {source}{}",
        if source.kind() == io::ErrorKind::AddrInUse {
            "; another process (another node, or this one started twice?) serves that port: stop it, or \
             choose another address with --listen"
        } else {
            ""
        }
    )]
    Listen {
        listen: std::net::SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("the API server failed: {0}")]
    Server(#[source] io::Error),
}

/// Serves `router` on `listen` within `limits`, on a runtime of its own, until Ctrl-C. Once it
/// listens, `started` is told the address it got (an ephemeral port, if asked for port 0).
pub fn serve_until_ctrl_c(
    listen: std::net::SocketAddr,
    router: Router,
    limits: HttpLimits,
    started: impl FnOnce(std::net::SocketAddr),
) -> Result<(), ServeUntilError> {
    Listening::bind(listen)?.serve_until_ctrl_c(router, limits, started)
}

/// A port bound on a runtime of its own, not served yet: a server binds its port before it
/// creates or locks anything, so that a busy port fails first and leaves nothing behind.
pub struct Listening {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    local: std::net::SocketAddr,
}

impl Listening {
    /// Starts a runtime (two worker threads) and binds `listen` on it.
    pub fn bind(listen: std::net::SocketAddr) -> Result<Listening, ServeUntilError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(ServeUntilError::Runtime)?;
        let listener = runtime
            .block_on(TcpListener::bind(listen))
            .map_err(|source| ServeUntilError::Listen { listen, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServeUntilError::Listen { listen, source })?;
        Ok(Listening {
            runtime,
            listener,
            local,
        })
    }

    /// The address bound (the port chosen, if asked for port 0).
    pub fn local_addr(&self) -> std::net::SocketAddr {
        self.local
    }

    /// Serves `router` within `limits` until Ctrl-C; `started` is told the address first.
    pub fn serve_until_ctrl_c(
        self,
        router: Router,
        limits: HttpLimits,
        started: impl FnOnce(std::net::SocketAddr),
    ) -> Result<(), ServeUntilError> {
        let Listening {
            runtime,
            listener,
            local,
        } = self;
        // Listen for Ctrl-C before saying where it serves: whoever reads that line may send it
        // at once, and a SIGINT before the handler exists would kill the process mid-start.
        let interrupt = {
            let _entered = runtime.enter();
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
                .map_err(ServeUntilError::Signal)?
        };
        started(local);
        runtime
            .block_on(serve(listener, router, limits, async move {
                let mut interrupt = interrupt;
                interrupt.recv().await;
            }))
            .map_err(ServeUntilError::Server)
    }
}

/// Serves `router` on an ephemeral port of 127.0.0.1 within `limits`, on a runtime of its own
/// (two worker threads) that serves until it is dropped: an embedding program's, or a test's,
/// in-process server. The runtime, and the address it listens on.
pub fn serve_on_loopback(
    router: Router,
    limits: HttpLimits,
) -> io::Result<(tokio::runtime::Runtime, std::net::SocketAddr)> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0"))?;
    let address = listener.local_addr()?;
    runtime.spawn(serve(listener, router, limits, std::future::pending()));
    Ok((runtime, address))
}

/// Serves `router` over HTTP/1.1 on `listener` within `limits` until `shutdown` resolves, then
/// stops accepting, lets requests in progress finish (for up to [`SHUTDOWN_GRACE`]) and returns.
/// Fails only if `limits` are invalid; accept errors (EMFILE) are logged and retried.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    limits
        .validate()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("invalid HTTP limits: {e}")))?;
    let router = crate::observe::with_operations(router);
    let permits = Arc::new(Semaphore::new(limits.connections_max));
    let lingering = Arc::new(Semaphore::new(REFUSALS_LINGERING_MAX));
    let refusal = Bytes::from(too_many_connections_response(limits.connections_max));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            Some(joined) = tasks.join_next(), if !tasks.is_empty() => {
                if let Err(error) = joined {
                    if error.is_panic() {
                        tracing::error!("an HTTP connection task panicked: {error}");
                    }
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    match permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            tasks.spawn(serve_connection(stream, router.clone(), limits, stopped.clone(), permit));
                        }
                        Err(_) => refuse(stream, refusal.clone(), &lingering, &mut tasks),
                    }
                }
                Err(error) if is_per_connection(&error) => {}
                Err(error) => {
                    tracing::warn!("accepting an HTTP connection failed ({error}); pausing {ACCEPT_ERROR_PAUSE:?}");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            },
        }
    }
    crate::health::set_draining();
    drop(listener);
    let _ = stop.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            "{} HTTP connections still busy {SHUTDOWN_GRACE:?} after shutdown began; dropping them",
            tasks.len()
        );
    }
    tasks.shutdown().await;
    Ok(())
}

/// Errors of one incoming connection (it went away before it was accepted), not of the listener.
fn is_per_connection(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

fn too_many_connections_response(connections_max: usize) -> Vec<u8> {
    let body = error_json(
        "too_many_connections",
        &format!("the server is serving its limit of {connections_max} connections; retry shortly"),
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Answers a connection over the cap without reading its request: the 503 fits in a fresh
/// socket's send buffer, so it is written at once. If few refusals are lingering, this one
/// lingers too (in the background, bounded); otherwise it is closed now.
fn refuse(stream: TcpStream, response: Bytes, lingering: &Arc<Semaphore>, tasks: &mut JoinSet<()>) {
    // Written on the socket itself: tokio's `try_write` would see no write readiness yet on a
    // socket this fresh and write nothing. The socket is non-blocking, so this cannot wait.
    let Ok(stream) = stream.into_std() else {
        return;
    };
    let written = (&stream).write(&response).unwrap_or(0);
    let Ok(permit) = lingering.clone().try_acquire_owned() else {
        return;
    };
    let Ok(stream) = TcpStream::from_std(stream) else {
        return;
    };
    tasks.spawn(async move {
        let _permit = permit;
        let mut stream = stream;
        let rest = response.slice(written.min(response.len())..);
        match tokio::time::timeout(REFUSAL_LINGER, stream.write_all(&rest)).await {
            Ok(Ok(())) => {}
            _ => return,
        }
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let mut drained = 0;
        let _ = tokio::time::timeout(REFUSAL_LINGER, async {
            while drained < REFUSAL_DRAIN_BYTES_MAX {
                match stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
        })
        .await;
    });
}

/// One connection, from accept to close; holds its permit throughout.
async fn serve_connection(
    stream: TcpStream,
    router: Router,
    limits: HttpLimits,
    mut stopped: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(TrackedIo {
        inner: stream,
        activity: activity.clone(),
    });
    let body_timeout = limits.body_timeout();
    let handler_activity = activity.clone();
    let service = service_fn(move |request: Request<Incoming>| {
        let router = router.clone();
        let in_flight = InFlight::begin(&handler_activity);
        async move {
            let _in_flight = in_flight;
            let timed_out = Arc::new(AtomicBool::new(false));
            let read_whole = Arc::new(AtomicBool::new(false));
            let request = request.map(|body| {
                read_whole.store(hyper::body::Body::is_end_stream(&body), Ordering::Release);
                DeadlineBody {
                    inner: body,
                    deadline: Box::pin(tokio::time::sleep(body_timeout)),
                    timed_out: timed_out.clone(),
                    read_whole: read_whole.clone(),
                }
            });
            let mut response = match TowerToHyperService::new(router).call(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            };
            if timed_out.load(Ordering::Acquire) {
                return Ok::<_, Infallible>(body_timeout_response(body_timeout));
            }
            if !read_whole.load(Ordering::Acquire) {
                // Refused before its body was read (a wrong content type, say): the rest of the
                // body may still be on its way, and hyper may close rather than wait to drain
                // it. Say so, or a client reusing the connection sees its next request fail.
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response)
        }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(HeadTimer {
            activity: activity.clone(),
            idle: limits.idle_timeout(),
        })
        .header_read_timeout(limits.header_timeout())
        .keep_alive(true);
    let mut connection = std::pin::pin!(builder.serve_connection(io, service));

    let idle = limits.idle_timeout();
    let mut stopping = false;
    loop {
        // Nothing to time while a handler runs (a submission may wait up to two minutes for
        // finality); otherwise wake when the connection will have been still for `idle`.
        let wake = if activity.in_flight() > 0 {
            idle
        } else {
            idle.saturating_sub(activity.still_for())
        };
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!("HTTP connection closed: {error}");
                }
                return;
            }
            () = tokio::time::sleep(wake.max(Duration::from_millis(1))) => {
                if activity.in_flight() == 0 && activity.still_for() >= idle {
                    tracing::debug!("dropping an HTTP connection still for {idle:?} with no request in progress");
                    return;
                }
            }
            _ = stopped.changed(), if !stopping => {
                stopping = true;
                if activity.reads() == 0 {
                    // Never sent a byte: nothing is owed to it (hyper would wait for a request).
                    return;
                }
                // Closes the connection if idle, else after the response in progress.
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

fn body_timeout_response(body_timeout: Duration) -> Response<Body> {
    let body = error_json(
        "body_timeout",
        &format!(
            "the request body did not arrive within {} ms of its header",
            body_timeout.as_millis()
        ),
    );
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::REQUEST_TIMEOUT;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// What a connection has been doing, shared by its IO, its timer, its handlers and its task.
struct Activity {
    epoch: Instant,
    /// Reads that returned at least one byte.
    reads: AtomicU64,
    /// Milliseconds from `epoch` to the last byte read or written.
    last_io_ms: AtomicU64,
    /// Handlers running (from a complete head to the handler's response).
    in_flight: AtomicUsize,
}

impl Activity {
    fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            reads: AtomicU64::new(0),
            last_io_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn read(&self) {
        self.reads.fetch_add(1, Ordering::AcqRel);
        self.last_io_ms.store(self.now_ms(), Ordering::Release);
    }

    fn wrote(&self) {
        self.last_io_ms.store(self.now_ms(), Ordering::Release);
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Acquire)
    }

    fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// How long since a byte last moved either way.
    fn still_for(&self) -> Duration {
        Duration::from_millis(self.now_ms().saturating_sub(self.last_io_ms.load(Ordering::Acquire)))
    }
}

/// A handler running; counted from its creation until dropped (finished or cancelled).
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(activity.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The socket, recording each byte read or written in the connection's [`Activity`].
struct TrackedIo {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for TrackedIo {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.wrote();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// hyper's timer for one connection. An HTTP/1 server connection asks it only for the header
/// read timeout, which hyper starts as soon as it waits for a request, so on its own it would
/// also close a keep-alive connection idle for that long. The sleeps given here wait up to the
/// idle time-out for the head's first byte, and only then start the header time-out.
struct HeadTimer {
    activity: Arc<Activity>,
    idle: Duration,
}

impl hyper::rt::Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        TokioTimer::new().sleep(duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        let now = self.now();
        Box::pin(HeadSleep {
            activity: self.activity.clone(),
            reads_at_start: self.activity.reads(),
            head_started: false,
            header: deadline.saturating_duration_since(now),
            sleep: Box::pin(tokio::time::sleep_until((now + self.idle).into())),
        })
    }

    fn now(&self) -> Instant {
        tokio::time::Instant::now().into()
    }
}

/// Fires `idle` after its creation if no byte has arrived by then, else `header` after the
/// first byte. hyper polls it after every read that leaves the head incomplete, which is when
/// it notices the first byte.
struct HeadSleep {
    activity: Arc<Activity>,
    reads_at_start: u64,
    head_started: bool,
    header: Duration,
    sleep: Pin<Box<tokio::time::Sleep>>,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if !this.head_started && this.activity.reads() != this.reads_at_start {
            this.head_started = true;
            this.sleep.as_mut().reset(tokio::time::Instant::now() + this.header);
        }
        this.sleep.as_mut().poll(cx)
    }
}

impl hyper::rt::Sleep for HeadSleep {}

/// A request body that fails once its deadline passes, and says so in `timed_out`; says in
/// `read_whole` once it has been read to its end.
struct DeadlineBody {
    inner: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
    timed_out: Arc<AtomicBool>,
    read_whole: Arc<AtomicBool>,
}

#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl hyper::body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            if frame.is_none() || this.inner.is_end_stream() {
                this.read_whole.store(true, Ordering::Release);
            }
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.timed_out.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(Box::new(BodyTimedOut))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_validate() {
        assert_eq!(HttpLimits::default().validate(), Ok(()));
        let invalid = [
            HttpLimits {
                connections_max: 0,
                ..HttpLimits::default()
            },
            HttpLimits {
                header_timeout_ms: 0,
                ..HttpLimits::default()
            },
            HttpLimits {
                body_timeout_ms: 0,
                ..HttpLimits::default()
            },
            HttpLimits {
                idle_timeout_ms: 0,
                ..HttpLimits::default()
            },
            HttpLimits {
                idle_timeout_ms: u64::MAX,
                ..HttpLimits::default()
            },
        ];
        for limits in invalid {
            assert!(limits.validate().is_err(), "{limits:?}");
        }
    }

    #[test]
    fn limits_serde() {
        let limits: HttpLimits = serde_json::from_str(r#"{"connections_max": 8}"#).unwrap();
        assert_eq!(
            limits,
            HttpLimits {
                connections_max: 8,
                ..HttpLimits::default()
            }
        );
        assert!(serde_json::from_str::<HttpLimits>(r#"{"connections": 8}"#).is_err());
        let text = toml::to_string(&HttpLimits::default()).unwrap();
        assert_eq!(toml::from_str::<HttpLimits>(&text).unwrap(), HttpLimits::default());
    }

    #[test]
    fn refusal_is_a_complete_response() {
        let response = String::from_utf8(too_many_connections_response(8)).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "));
        assert!(head.contains(&format!("content-length: {}", body.len())));
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(json["error"]["code"], "too_many_connections");
    }
}
