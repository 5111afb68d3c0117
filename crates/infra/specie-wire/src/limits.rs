//! Every bound the wire protocol enforces, in one place, each named with its unit.

use std::time::Duration;

use thiserror::Error;

use crate::frame::{FRAME_BYTES_MAX_FORMAT, HEADER_BYTES};

/// Bounds for clients and servers. Both ends of a connection should use the same
/// `frame_bytes_max`: a sender refuses to send what its own limit forbids, a receiver closes the
/// connection on a frame over its limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireLimits {
    /// Largest frame, header included, that is sent or accepted.
    pub frame_bytes_max: usize,
    /// Client: requests awaiting an answer at once (more callers wait for a slot, within their
    /// deadline). Server: handler invocations at once per connection (when full, the server
    /// stops reading that connection, which pushes back through TCP flow control).
    pub in_flight_max: usize,
    /// Server: bytes of request payloads per connection whose handler has not finished, at most
    /// (plus one request: a request larger than this is still served, alone). When it is
    /// reached, the server stops reading that connection, as for `in_flight_max`, so a peer that
    /// sends large requests faster than they are handled cannot grow our memory.
    pub request_bytes_in_flight_max: usize,
    /// Server: authenticated connections served at once. Further connections get an error frame
    /// and are closed.
    pub connections_max: usize,
    /// Server: connections still in their TLS handshake at once. Further connections are closed
    /// at once, unread, so strangers cannot hold the slots of authenticated peers.
    pub handshakes_max: usize,
    /// Both: a TLS handshake (client: within the connect time-out as well) must finish within
    /// this long, so a stranger cannot hold a connection open without authenticating.
    pub handshake_timeout_ms: u64,
    /// Client: first reconnect delay after a failed connect or a lost connection.
    pub reconnect_backoff_ms_min: u64,
    /// Client: the reconnect delay doubles per consecutive failure up to this bound (jittered
    /// down by up to half, so that many clients of one restarted peer do not reconnect in step).
    pub reconnect_backoff_ms_max: u64,
    /// Client: one TCP connect attempt gives up after this long (or at the call's deadline).
    pub connect_timeout_ms: u64,
    /// Bytes coalesced into one write by the writer tasks (a single frame may exceed it).
    pub write_batch_bytes_max: usize,
    /// Bytes requested from the socket per read.
    pub read_chunk_bytes: usize,
    /// Server: after shutdown is signalled, how long connections may take to finish requests
    /// already being handled and flush their answers before they are cut off.
    pub shutdown_grace_ms: u64,
}

/// One way in which [`WireLimits`] cannot work.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum WireLimitProblem {
    #[error("frame_bytes_max {frame_bytes_max} is below the {}-byte frame header", HEADER_BYTES)]
    FrameBelowHeader { frame_bytes_max: usize },
    #[error(
        "frame_bytes_max {frame_bytes_max} exceeds what the u32 length field can express ({})",
        FRAME_BYTES_MAX_FORMAT
    )]
    FrameBeyondFormat { frame_bytes_max: usize },
    /// A slot count, time-out or size that is zero, which would stall or refuse everything.
    #[error("{field} must be at least 1")]
    Zero { field: &'static str },
    #[error("reconnect_backoff_ms_max is below reconnect_backoff_ms_min")]
    BackoffMaxBelowMin {
        reconnect_backoff_ms_min: u64,
        reconnect_backoff_ms_max: u64,
    },
}

/// Every problem [`WireLimits::validate`] found, shown joined by `; `.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{}", problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidWireLimits {
    pub problems: Vec<WireLimitProblem>,
}

impl Default for WireLimits {
    fn default() -> Self {
        WireLimits {
            // A dtxn of 10 000 compact transactions with a few ids each is well under 4 MiB.
            frame_bytes_max: 16 * 1024 * 1024,
            in_flight_max: 1024,
            request_bytes_in_flight_max: 64 * 1024 * 1024,
            connections_max: 1024,
            handshakes_max: 64,
            handshake_timeout_ms: 2_000,
            reconnect_backoff_ms_min: 20,
            reconnect_backoff_ms_max: 2_000,
            connect_timeout_ms: 2_000,
            write_batch_bytes_max: 1024 * 1024,
            read_chunk_bytes: 64 * 1024,
            shutdown_grace_ms: 5_000,
        }
    }
}

impl WireLimits {
    /// Rejects limits that cannot work (zero slots, frames too small for a header, …), naming
    /// every problem at once.
    pub fn validate(&self) -> Result<(), InvalidWireLimits> {
        let at_least_one = |field: &'static str, value: u64| (value == 0).then_some(WireLimitProblem::Zero { field });
        let problems: Vec<WireLimitProblem> = [
            (self.frame_bytes_max < HEADER_BYTES).then_some(WireLimitProblem::FrameBelowHeader {
                frame_bytes_max: self.frame_bytes_max,
            }),
            (self.frame_bytes_max as u64 > FRAME_BYTES_MAX_FORMAT).then_some(WireLimitProblem::FrameBeyondFormat {
                frame_bytes_max: self.frame_bytes_max,
            }),
            at_least_one("in_flight_max", self.in_flight_max as u64),
            at_least_one("request_bytes_in_flight_max", self.request_bytes_in_flight_max as u64),
            at_least_one("connections_max", self.connections_max as u64),
            at_least_one("handshakes_max", self.handshakes_max as u64),
            at_least_one("handshake_timeout_ms", self.handshake_timeout_ms),
            at_least_one("reconnect_backoff_ms_min", self.reconnect_backoff_ms_min),
            (self.reconnect_backoff_ms_max < self.reconnect_backoff_ms_min).then_some(
                WireLimitProblem::BackoffMaxBelowMin {
                    reconnect_backoff_ms_min: self.reconnect_backoff_ms_min,
                    reconnect_backoff_ms_max: self.reconnect_backoff_ms_max,
                },
            ),
            at_least_one("connect_timeout_ms", self.connect_timeout_ms),
            at_least_one("write_batch_bytes_max", self.write_batch_bytes_max as u64),
            at_least_one("read_chunk_bytes", self.read_chunk_bytes as u64),
        ]
        .into_iter()
        .flatten()
        .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidWireLimits { problems })
        }
    }

    pub(crate) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(self.connect_timeout_ms)
    }

    pub(crate) fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    pub(crate) fn shutdown_grace(&self) -> Duration {
        Duration::from_millis(self.shutdown_grace_ms)
    }
}

/// The reconnect delay before attempt number `failures` (1 after the first failure), before
/// jitter: `min * 2^(failures-1)`, capped at `max`.
pub(crate) fn backoff_ceiling_ms(failures: u32, min_ms: u64, max_ms: u64) -> u64 {
    let shift = failures.saturating_sub(1).min(63);
    min_ms
        .checked_shl(shift)
        .filter(|&ms| ms >> shift == min_ms)
        .unwrap_or(u64::MAX)
        .min(max_ms)
}

/// The jittered delay: uniform in `[ceiling/2, ceiling]`, with `unit` uniform in `[0, 1)`.
/// Pure so that the bound is testable; the client passes a random `unit`.
pub(crate) fn backoff_ms(failures: u32, min_ms: u64, max_ms: u64, unit: f64) -> u64 {
    let ceiling = backoff_ceiling_ms(failures, min_ms, max_ms);
    let half = ceiling / 2;
    let spread = (ceiling - half) as f64 * unit.clamp(0.0, 1.0);
    (half + spread as u64).min(ceiling)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_limits_are_named() {
        assert_eq!(WireLimits::default().validate(), Ok(()));
        let bad = WireLimits {
            frame_bytes_max: 3,
            in_flight_max: 0,
            ..WireLimits::default()
        };
        let invalid = bad.validate().unwrap_err();
        assert_eq!(
            invalid.problems,
            [
                WireLimitProblem::FrameBelowHeader { frame_bytes_max: 3 },
                WireLimitProblem::Zero { field: "in_flight_max" },
            ]
        );
        let message = invalid.to_string();
        assert_eq!(
            message,
            format!(
                "frame_bytes_max 3 is below the {HEADER_BYTES}-byte frame header; in_flight_max must be at least 1"
            )
        );
    }

    #[test]
    fn backoff_doubles_and_is_bounded() {
        assert_eq!(backoff_ceiling_ms(1, 20, 2000), 20);
        assert_eq!(backoff_ceiling_ms(2, 20, 2000), 40);
        assert_eq!(backoff_ceiling_ms(7, 20, 2000), 1280);
        assert_eq!(backoff_ceiling_ms(8, 20, 2000), 2000);
        assert_eq!(backoff_ceiling_ms(u32::MAX, 20, 2000), 2000);
        assert_eq!(backoff_ceiling_ms(64, u64::MAX / 2, u64::MAX), u64::MAX);
        for failures in [1, 5, 100] {
            for unit in [0.0, 0.5, 0.999_999, 1.0] {
                let ms = backoff_ms(failures, 20, 2000, unit);
                let ceiling = backoff_ceiling_ms(failures, 20, 2000);
                assert!(ms >= ceiling / 2 && ms <= ceiling, "{failures} {unit} {ms}");
            }
        }
    }
}
