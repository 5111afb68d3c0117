use thiserror::Error;

use crate::frame::FrameError;

/// Why a call did not return an answer. `Clone` because one connection loss fails every call
/// pending on it with the same error.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireError {
    /// The deadline passed: waiting for a slot, connecting, sending or awaiting the answer. The
    /// request may or may not have been executed by the peer.
    #[error("no answer within the {timeout_ms} ms deadline")]
    Timeout { timeout_ms: u64 },
    /// A connect attempt failed (refused, unreachable, or slower than `connect_timeout_ms`).
    #[error("cannot connect to {addr}: {reason}")]
    ConnectFailed { addr: String, reason: String },
    /// The client is waiting out its reconnect backoff after a failure; calls fail at once
    /// rather than queue behind a peer that is probably down.
    #[error("{addr} is unavailable; next reconnect attempt in {retry_in_ms} ms")]
    Unavailable { addr: String, retry_in_ms: u64 },
    /// The connection broke while the request was pending. The request may or may not have been
    /// executed by the peer.
    #[error("connection to {addr} lost: {reason}")]
    ConnectionLost { addr: String, reason: String },
    /// The peer's handler answered with an error.
    #[error("peer error: {message}")]
    Remote { message: String },
    /// The request is larger than `frame_bytes_max`; it was not sent.
    #[error("request frame of {frame_bytes} bytes exceeds the limit of {frame_bytes_max} bytes")]
    FrameTooLarge { frame_bytes: u64, frame_bytes_max: u64 },
    /// The peer sent bytes that are not a valid frame; the connection was closed.
    #[error("protocol error from peer: {0}")]
    Protocol(#[from] FrameError),
}

impl WireError {
    /// Whether the request certainly did not reach the peer's handler, so that retrying it
    /// cannot execute it twice.
    pub fn certainly_not_sent(&self) -> bool {
        matches!(
            self,
            WireError::ConnectFailed { .. } | WireError::Unavailable { .. } | WireError::FrameTooLarge { .. }
        )
    }
}
