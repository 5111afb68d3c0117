//! specie's internal protocol: length-prefixed, checksummed binary frames over TCP, for the
//! roles of Hamilton's 2PC (sentinel, coordinator, shard) when they run as separate processes.
//!
//! * [`frame`]: the pure (sans-IO) codec — [`FrameEncoder`] batches frames into one buffer,
//!   [`FrameDecoder`] turns a byte stream in any chunking into frames and rejects bad input with
//!   a typed [`FrameError`] before allocating for it.
//! * [`client`]: a tokio [`Client`] that multiplexes concurrent calls over one connection, with
//!   a deadline on every call, an in-flight limit, batched writes and lazy reconnects with
//!   bounded, jittered exponential backoff.
//! * [`server`]: [`serve`] runs a [`Handler`] per request with per-connection in-flight and
//!   global connection limits, batched answers and graceful shutdown.
//! * [`transport`]: mutual TLS 1.3 (each process proves its identity with a certificate from the
//!   cluster's CA), or insecure plaintext for measuring what TLS costs.
//! * [`version`]: which protocol versions a build speaks, agreed in the TLS handshake.
//! * [`WireLimits`]: every bound, named with its unit.
//!
//! The format and semantics are specified in `docs/wire-protocol.md`.

pub mod client;
mod error;
pub mod frame;
mod limits;
pub mod pki;
pub mod server;
pub mod transport;
pub mod version;

pub use client::Client;
pub use error::WireError;
pub use frame::{Frame, FrameDecoder, FrameEncoder, FrameError, FrameKind, HEADER_BYTES};
pub use limits::{InvalidWireLimits, WireLimitProblem, WireLimits};
pub use server::{admit_all, handler_fn, serve, Admit, BoxFuture, Handler, ServerCounters, ServerSetup};
pub use transport::{Peer, TlsCredentials, TlsError, Transport};
