//! A delay-injecting TCP relay: listens on a fresh 127.0.0.1 port and forwards every connection
//! to one target, holding each chunk of bytes for a fixed one-way delay in each direction.
//!
//! The delay is latency, not a bandwidth limit: each chunk is stamped with its due time when it
//! is read and written once that time comes, so chunks read 1 ms apart leave 1 ms apart, in
//! order. What a direction may hold at once is bounded ([`RelayLimits::queued_bytes_max`]); past
//! it, reading stops until the writer catches up (TCP's own flow control then slows the sender).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// The bounds of one relay.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RelayLimits {
    /// Connections relayed at once; a connection beyond it is closed as it is accepted.
    pub(crate) connections_max: usize,
    /// Bytes read from a socket at a time.
    pub(crate) chunk_bytes_max: usize,
    /// Bytes one direction of one connection holds while they wait out the delay.
    pub(crate) queued_bytes_max: usize,
    /// How long connecting to the target may take.
    pub(crate) connect_timeout: Duration,
}

impl Default for RelayLimits {
    fn default() -> RelayLimits {
        RelayLimits {
            connections_max: 64,
            chunk_bytes_max: 64 * 1024,
            queued_bytes_max: 16 * 1024 * 1024,
            connect_timeout: Duration::from_secs(2),
        }
    }
}

/// What a relay has done so far.
#[derive(Debug, Default)]
pub(crate) struct RelayCounters {
    pub(crate) connections_accepted: AtomicU64,
    /// Closed at once: [`RelayLimits::connections_max`] were open.
    pub(crate) connections_refused: AtomicU64,
    /// Both directions, as written to their destination.
    pub(crate) bytes_relayed: AtomicU64,
}

/// A running relay; dropping it closes its listener and every connection it relays.
pub(crate) struct Relay {
    pub(crate) address: SocketAddr,
    pub(crate) target: SocketAddr,
    pub(crate) delay: Duration,
    pub(crate) counters: Arc<RelayCounters>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        // The accept loop owns the connections' JoinSet: aborting it aborts them all.
        self.task.abort();
    }
}

impl Relay {
    /// Listens on a fresh port of 127.0.0.1 and relays each connection to `target`, `delay`
    /// late in each direction. Must be called within a tokio runtime.
    pub(crate) async fn start(target: SocketAddr, delay: Duration, limits: RelayLimits) -> std::io::Result<Relay> {
        assert!(limits.connections_max > 0 && limits.chunk_bytes_max > 0);
        assert!(limits.queued_bytes_max >= limits.chunk_bytes_max);
        assert!(
            u32::try_from(limits.chunk_bytes_max).is_ok(),
            "a chunk's bytes are semaphore permits"
        );
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let address = listener.local_addr()?;
        let counters = Arc::new(RelayCounters::default());
        let task = tokio::spawn(accept_loop(listener, target, delay, limits, counters.clone()));
        Ok(Relay {
            address,
            target,
            delay,
            counters,
            task,
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    delay: Duration,
    limits: RelayLimits,
    counters: Arc<RelayCounters>,
) {
    let slots = Arc::new(Semaphore::new(limits.connections_max));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((inbound, _)) = accepted else {
                    // Out of descriptors, or a connection reset before it was accepted: go on.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    counters.connections_refused.fetch_add(1, Ordering::Relaxed);
                    drop(inbound);
                    continue;
                };
                counters.connections_accepted.fetch_add(1, Ordering::Relaxed);
                let counters = counters.clone();
                connections.spawn(async move {
                    // An error ends this connection only; both sockets close as it returns.
                    let _ = relay_connection(inbound, target, delay, limits, &counters).await;
                    drop(slot);
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Relays one accepted connection until either direction ends (its end delivered, or an
/// error); then both sockets close.
async fn relay_connection(
    inbound: TcpStream,
    target: SocketAddr,
    delay: Duration,
    limits: RelayLimits,
    counters: &RelayCounters,
) -> std::io::Result<()> {
    let outbound = tokio::time::timeout(limits.connect_timeout, TcpStream::connect(target))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connecting to the relay's target"))??;
    inbound.set_nodelay(true)?;
    outbound.set_nodelay(true)?;
    let (inbound_read, inbound_write) = inbound.into_split();
    let (outbound_read, outbound_write) = outbound.into_split();
    // Whichever direction finishes first ends the connection: the other is dropped, and with it
    // its halves of both sockets.
    tokio::select! {
        forward = delayed_pipe(inbound_read, outbound_write, delay, limits, counters) => forward,
        backward = delayed_pipe(outbound_read, inbound_write, delay, limits, counters) => backward,
    }
}

/// Bytes read at one time, due at another; `None` is the end of the stream.
struct Chunk {
    due: Instant,
    bytes: Option<Vec<u8>>,
    /// The chunk's share of the direction's [`RelayLimits::queued_bytes_max`], given back once
    /// it is written.
    _queued: Option<OwnedSemaphorePermit>,
}

/// Copies `reader` to `writer`, each chunk `delay` after it was read, in order. Returns once the
/// end of `reader` has been delivered (the writer shut down) or on the first error.
async fn delayed_pipe(
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
    delay: Duration,
    limits: RelayLimits,
    counters: &RelayCounters,
) -> std::io::Result<()> {
    let (chunks, mut due) = mpsc::unbounded_channel::<Chunk>();
    let queued = Arc::new(Semaphore::new(limits.queued_bytes_max));
    let read_side = async move {
        let mut buffer = vec![0u8; limits.chunk_bytes_max];
        loop {
            let count = reader.read(&mut buffer).await?;
            let at = Instant::now() + delay;
            if count == 0 {
                let end = Chunk {
                    due: at,
                    bytes: None,
                    _queued: None,
                };
                // The writer is gone only after an error, which ends the pipe anyway.
                let _ = chunks.send(end);
                return Ok::<(), std::io::Error>(());
            }
            let permits = u32::try_from(count).expect("a chunk is at most chunk_bytes_max");
            let share = queued.clone().acquire_many_owned(permits).await.expect("never closed");
            let chunk = Chunk {
                due: at,
                bytes: Some(buffer[..count].to_vec()),
                _queued: Some(share),
            };
            if chunks.send(chunk).is_err() {
                return Ok(());
            }
        }
    };
    let write_side = async move {
        while let Some(chunk) = due.recv().await {
            tokio::time::sleep_until(chunk.due).await;
            let Some(bytes) = chunk.bytes else {
                writer.shutdown().await?;
                return Ok(());
            };
            writer.write_all(&bytes).await?;
            counters.bytes_relayed.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        }
        Ok::<(), std::io::Error>(())
    };
    tokio::try_join!(read_side, write_side).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant as StdInstant;

    /// A target that sends back whatever it reads, until its peer closes.
    async fn echo_target() -> SocketAddr {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = stream.into_split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        address
    }

    /// 100 one-byte writes 1 ms apart through a 50 ms relay and back: every byte comes back in
    /// order, no sooner than twice the delay after it was sent, and the whole stream takes about
    /// its own length plus the round trip, far from 100 × 50 ms (the delay is latency, not a
    /// per-chunk cost).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bytes_arrive_in_order_delayed_and_not_serialised() {
        let delay = Duration::from_millis(50);
        let relay = Relay::start(echo_target().await, delay, RelayLimits::default())
            .await
            .unwrap();
        let stream = TcpStream::connect(relay.address).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (mut read, mut write) = stream.into_split();
        const WRITES: usize = 100;
        let started = StdInstant::now();
        let sender = tokio::spawn(async move {
            let mut sent_at = Vec::with_capacity(WRITES);
            for i in 0..WRITES {
                sent_at.push(StdInstant::now());
                write.write_all(&[i as u8]).await.unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            (sent_at, write)
        });
        let mut received = Vec::with_capacity(WRITES);
        let mut received_at = Vec::with_capacity(WRITES);
        let mut buffer = [0u8; 256];
        while received.len() < WRITES {
            let count = read.read(&mut buffer).await.unwrap();
            assert!(count > 0, "the relay closed early");
            received.extend_from_slice(&buffer[..count]);
            received_at.extend(std::iter::repeat_n(StdInstant::now(), count));
        }
        let elapsed = started.elapsed();
        let (sent_at, _write) = sender.await.unwrap();
        assert_eq!(received, (0..WRITES).map(|i| i as u8).collect::<Vec<u8>>());
        for (sent, back) in sent_at.iter().zip(&received_at) {
            assert!(
                *back - *sent >= 2 * delay,
                "a byte came back {:?} after it was sent",
                *back - *sent
            );
        }
        assert!(
            elapsed < Duration::from_millis(1_000),
            "100 writes 1 ms apart took {elapsed:?} through a {delay:?} relay: the delay serialises"
        );
        assert_eq!(relay.counters.bytes_relayed.load(Ordering::Relaxed), 2 * WRITES as u64);
    }

    /// When the client closes, the target sees the end of the stream after what was sent; when
    /// the target closes, the client does.
    #[tokio::test]
    async fn a_close_on_either_side_closes_the_other() {
        let target = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let relay = Relay::start(
            target.local_addr().unwrap(),
            Duration::from_millis(5),
            RelayLimits::default(),
        )
        .await
        .unwrap();
        let mut client = TcpStream::connect(relay.address).await.unwrap();
        let (mut server, _) = target.accept().await.unwrap();
        client.write_all(b"last words").await.unwrap();
        drop(client);
        let mut heard = vec![];
        server.read_to_end(&mut heard).await.unwrap();
        assert_eq!(heard, b"last words");

        let mut client = TcpStream::connect(relay.address).await.unwrap();
        let (server, _) = target.accept().await.unwrap();
        drop(server);
        let mut heard = vec![];
        // The end of the stream, or a reset: either way nothing more comes.
        let _ = client.read_to_end(&mut heard).await;
        assert!(heard.is_empty());
    }

    /// A connection beyond `connections_max` is closed as it is accepted, and counted.
    #[tokio::test]
    async fn connections_beyond_the_limit_are_refused() {
        let limits = RelayLimits {
            connections_max: 1,
            ..RelayLimits::default()
        };
        let relay = Relay::start(echo_target().await, Duration::from_millis(1), limits)
            .await
            .unwrap();
        let mut first = TcpStream::connect(relay.address).await.unwrap();
        first.write_all(b"x").await.unwrap();
        let mut echoed = [0u8; 1];
        first.read_exact(&mut echoed).await.unwrap();
        let mut second = TcpStream::connect(relay.address).await.unwrap();
        let mut heard = vec![];
        let _ = second.read_to_end(&mut heard).await;
        assert!(heard.is_empty());
        assert_eq!(relay.counters.connections_refused.load(Ordering::Relaxed), 1);
        assert_eq!(relay.counters.connections_accepted.load(Ordering::Relaxed), 1);
    }
}
