//! How replicas of one group talk: a byte-level [`RaftTransport`] that any network can implement
//! (specie-cluster's mutual-TLS one; the fault-injecting in-process `specie-faultnet` of the tests
//! and the simulator), and the adapters between it and openraft. Requests and responses are
//! opaque bytes to the transport (the [`crate::codec`] encoding), so a transport needs no
//! openraft types and no knowledge of Raft.

// The error types are openraft's, fixed by the traits implemented here; large as they are, they
// only travel on failure paths.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use openraft::error::SnapshotMismatch;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{AnyError, EmptyNode, RPCTypes, Raft, RaftNetwork, RaftNetworkFactory, SnapshotSegmentId};

use crate::codec::{self, RaftRequest, RaftResponse, RequestKind};
use crate::types::{NodeId, TypeConfig};

/// Why a request got no response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The peer cannot be reached now (down, partitioned, refusing): Raft backs off before
    /// retrying it.
    #[error("node {node} unreachable: {reason}")]
    Unreachable { node: NodeId, reason: String },
    /// This request was lost (connection reset, message dropped): Raft retries soon.
    #[error("request to node {node} lost: {reason}")]
    Lost { node: NodeId, reason: String },
}

/// The future a [`RaftTransport`] call returns.
pub type RpcFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send + 'a>>;

/// Carries one replica group's Raft messages. `call` delivers `request` to replica `target` of
/// the same group, which answers it with [`RpcHandler::handle`]; the call resolves with those
/// response bytes. A transport owns its own framing, connection handling and the group's
/// addressing; it must not reorder a reply onto the wrong request. It may drop requests or
/// replies (say so with [`TransportError`]): Raft retries.
pub trait RaftTransport: Send + Sync + 'static {
    fn call(&self, target: NodeId, request: Vec<u8>) -> RpcFuture<'_>;
}

/// Answers requests arriving from the transport for one local replica. Cheap to clone.
#[derive(Clone)]
pub struct RpcHandler {
    raft: Raft<TypeConfig>,
    snapshot_stream: Arc<parking_lot::Mutex<SnapshotStream>>,
}

/// The snapshot being received: its id and the end of the bytes received so far.
///
/// openraft writes a chunk at its `offset` into an in-memory buffer, padding any gap with zeros,
/// so one chunk claiming an offset of 2^40 would allocate a terabyte. Chunks must therefore
/// continue the stream (or restart it at 0); any other is answered with a snapshot mismatch,
/// which makes an honest sender restart from the offset we expect.
#[derive(Debug, Default)]
pub(crate) struct SnapshotStream {
    current: Option<(String, u64)>,
}

impl SnapshotStream {
    /// Where the next chunk of snapshot `id` must start (at the latest).
    fn expected_offset(&self, id: &str) -> u64 {
        match &self.current {
            Some((current, end)) if current == id => *end,
            _ => 0,
        }
    }
}

impl RpcHandler {
    pub(crate) fn new(raft: Raft<TypeConfig>, snapshot_stream: Arc<parking_lot::Mutex<SnapshotStream>>) -> Self {
        RpcHandler { raft, snapshot_stream }
    }

    /// Handles one request's bytes and returns the response's bytes. Never fails: a request that
    /// cannot be decoded, or a replica that has stopped, gets a response saying so.
    pub async fn handle(&self, request: &[u8]) -> Vec<u8> {
        let response = match codec::decode_request(request) {
            Err(error) => RaftResponse::MalformedRequest(error.to_string()),
            Ok(RaftRequest::AppendEntries(rpc)) => match self.raft.append_entries(rpc).await {
                Ok(resp) => RaftResponse::AppendEntries(resp),
                Err(_) => RaftResponse::RemoteStopped,
            },
            Ok(RaftRequest::Vote(rpc)) => match self.raft.vote(rpc).await {
                Ok(resp) => RaftResponse::Vote(resp),
                Err(_) => RaftResponse::RemoteStopped,
            },
            Ok(RaftRequest::InstallSnapshot(rpc)) => {
                let id = rpc.meta.snapshot_id.clone();
                let expected = self.snapshot_stream.lock().expected_offset(&id);
                if rpc.offset > expected {
                    let segment = |offset| SnapshotSegmentId { id: id.clone(), offset };
                    let mismatch = SnapshotMismatch {
                        expect: segment(expected),
                        got: segment(rpc.offset),
                    };
                    return codec::encode_response(&codec::install_snapshot_error_response(
                        InstallSnapshotError::SnapshotMismatch(mismatch),
                    ));
                }
                // The decoder refused chunks whose end overflows.
                let end = rpc.offset + rpc.data.len() as u64;
                let done = rpc.done;
                match self.raft.install_snapshot(rpc).await {
                    Ok(resp) => {
                        let mut stream = self.snapshot_stream.lock();
                        stream.current = (!done).then(|| (id, end.max(expected)));
                        RaftResponse::InstallSnapshot(resp)
                    }
                    Err(RaftError::APIError(error)) => codec::install_snapshot_error_response(error),
                    Err(RaftError::Fatal(_)) => RaftResponse::RemoteStopped,
                }
            }
        };
        codec::encode_response(&response)
    }
}

/// How many entries of an append-entries request of `entries` entries encoding to `bytes` to
/// send at once so that a request holds at most about `append_bytes_max`; `None`: send it whole
/// (it fits, or it is a single entry, which always goes alone whatever its size).
pub(crate) fn entries_hint(entries: u64, bytes: usize, append_bytes_max: usize) -> Option<u64> {
    if bytes <= append_bytes_max || entries <= 1 {
        return None;
    }
    // Proportional to the bytes, assuming entries of even size; an uneven batch that still
    // does not fit is cut again on the next try.
    let fitting = (u128::from(entries) * append_bytes_max as u128 / bytes as u128) as u64;
    let hint = fitting.clamp(1, entries - 1);
    debug_assert!((1..entries).contains(&hint));
    Some(hint)
}

/// The share of a peer's byte budget that a request of `bytes` holds: all of it for a request
/// larger than the budget, which then goes alone.
fn budget_share(bytes: usize, peer_bytes_in_flight_max: u32) -> u32 {
    bytes.min(peer_bytes_in_flight_max as usize) as u32
}

/// How large an append to one peer may be: `append_bytes_max`, halved (down to one entry) each
/// time an append is answered only after openraft gave up on it, and doubled back (up to
/// `append_bytes_max`) by each large one answered in time. openraft's append time-out is fixed
/// (`heartbeat_interval_ms`), so over a link too slow for `append_bytes_max` the requests shrink
/// until they fit, and catch-up progresses; over a fast one nothing changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AppendSizing {
    append_bytes_max: usize,
    limit_bytes: usize,
}

impl AppendSizing {
    pub(crate) fn new(append_bytes_max: usize) -> AppendSizing {
        assert!(append_bytes_max > 0, "an append must hold a byte");
        AppendSizing {
            append_bytes_max,
            limit_bytes: append_bytes_max,
        }
    }

    pub(crate) fn limit_bytes(&self) -> usize {
        self.limit_bytes
    }

    /// An append of `request_bytes` was answered, before openraft's time-out or not.
    pub(crate) fn answered(&mut self, request_bytes: usize, in_time: bool) {
        if !in_time {
            self.limit_bytes = (self.limit_bytes.min(request_bytes) / 2).max(1);
        } else if request_bytes.saturating_mul(2) >= self.limit_bytes {
            // Only a request near the limit shows the limit fits; heartbeats show nothing.
            self.limit_bytes = self.limit_bytes.saturating_mul(2).min(self.append_bytes_max);
        }
        debug_assert!((1..=self.append_bytes_max).contains(&self.limit_bytes));
    }
}

/// What every openraft client of one peer (its replication and snapshot streams, in every
/// term) shares: the budget of bytes sent and not yet answered, and the append size.
pub(crate) struct PeerLink {
    budget: Arc<Semaphore>,
    sizing: parking_lot::Mutex<AppendSizing>,
}

/// The [`PeerLink`] of each peer.
#[derive(Clone)]
pub(crate) struct PeerLinks {
    peer_bytes_in_flight_max: u32,
    append_bytes_max: usize,
    links: Arc<parking_lot::Mutex<BTreeMap<NodeId, Arc<PeerLink>>>>,
}

impl PeerLinks {
    pub(crate) fn new(peer_bytes_in_flight_max: u32, append_bytes_max: usize) -> PeerLinks {
        assert!(peer_bytes_in_flight_max > 0, "a peer's budget must hold a byte");
        PeerLinks {
            peer_bytes_in_flight_max,
            append_bytes_max,
            links: Arc::default(),
        }
    }

    fn of(&self, target: NodeId) -> Arc<PeerLink> {
        let mut links = self.links.lock();
        let link = links.entry(target).or_insert_with(|| {
            Arc::new(PeerLink {
                budget: Arc::new(Semaphore::new(self.peer_bytes_in_flight_max as usize)),
                sizing: parking_lot::Mutex::new(AppendSizing::new(self.append_bytes_max)),
            })
        });
        Arc::clone(link)
    }
}

/// openraft's view of the transport: one [`Peer`] per target.
pub(crate) struct NetworkFactory {
    pub transport: Arc<dyn RaftTransport>,
    pub local: NodeId,
    pub backoff: Duration,
    pub links: PeerLinks,
    /// How long a request holds its share of its peer's budget, waiting for an answer.
    pub request_answer_wait: Duration,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, _node: &EmptyNode) -> Peer {
        Peer {
            transport: self.transport.clone(),
            local: self.local,
            target,
            backoff: self.backoff,
            link: self.links.of(target),
            peer_bytes_in_flight_max: self.links.peer_bytes_in_flight_max,
            request_answer_wait: self.request_answer_wait,
        }
    }
}

pub(crate) struct Peer {
    transport: Arc<dyn RaftTransport>,
    local: NodeId,
    target: NodeId,
    backoff: Duration,
    /// Shared with every other client of `target`.
    link: Arc<PeerLink>,
    peer_bytes_in_flight_max: u32,
    request_answer_wait: Duration,
}

type RpcResult<T, E = openraft::error::Infallible> = Result<T, RPCError<NodeId, EmptyNode, RaftError<NodeId, E>>>;

fn unexpected<T, E: std::error::Error>(response: RaftResponse) -> RpcResult<T, E> {
    let error = AnyError::error(format!("unexpected response {response:?}"));
    Err(RPCError::Network(NetworkError::new(&error)))
}

impl Peer {
    /// Sends one encoded request and decodes the reply; transport failures, time-outs and a
    /// stopped peer become the errors openraft retries on.
    async fn call<E: std::error::Error>(
        &self,
        kind: RequestKind,
        request: Vec<u8>,
        option: &RPCOption,
    ) -> RpcResult<RaftResponse, E> {
        let action = match kind {
            RequestKind::AppendEntries => RPCTypes::AppendEntries,
            RequestKind::Vote => RPCTypes::Vote,
            RequestKind::InstallSnapshot => RPCTypes::InstallSnapshot,
        };
        let timeout = option.hard_ttl();
        let sending = async {
            match kind {
                // Votes are small, and elections must not wait behind a catch-up.
                RequestKind::Vote => self.transport.call(self.target, request).await,
                RequestKind::AppendEntries | RequestKind::InstallSnapshot => {
                    self.send_within_budget(kind, request, timeout).await
                }
            }
        };
        let bytes = match tokio::time::timeout(timeout, sending).await {
            Err(_) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.local,
                    target: self.target,
                    timeout,
                }))
            }
            Ok(Err(error @ TransportError::Unreachable { .. })) => {
                return Err(RPCError::Unreachable(Unreachable::new(&error)))
            }
            Ok(Err(error @ TransportError::Lost { .. })) => return Err(RPCError::Network(NetworkError::new(&error))),
            Ok(Ok(bytes)) => bytes,
        };
        match codec::decode_response(kind, &bytes) {
            Err(error) => Err(RPCError::Network(NetworkError::new(&error))),
            // A stopped replica is as good as a down one: back off.
            Ok(RaftResponse::RemoteStopped) => {
                let error = AnyError::error(format!("raft on node {} has stopped", self.target));
                Err(RPCError::Unreachable(Unreachable::from(error)))
            }
            Ok(RaftResponse::MalformedRequest(reason)) => {
                let error = AnyError::error(format!("node {} could not decode our request: {reason}", self.target));
                Err(RPCError::Network(NetworkError::new(&error)))
            }
            Ok(response) => Ok(response),
        }
    }
}

impl Peer {
    /// Sends `request` once the peer's byte budget has room for it. It then holds its share
    /// until its answer comes, or for `request_answer_wait` at most, even after openraft has
    /// stopped waiting (openraft gives an append up after `heartbeat_interval_ms`): a request
    /// once handed to the transport is on its way, and costs the peer memory until handled, so
    /// retries of a request that does not fit in openraft's time-out cannot pile up.
    /// An append's answer also tells the peer's [`AppendSizing`] whether it came within
    /// `timeout`, openraft's.
    async fn send_within_budget(
        &self,
        kind: RequestKind,
        request: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransportError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let bytes = request.len();
        let share = budget_share(bytes, self.peer_bytes_in_flight_max);
        let permit = Arc::clone(&self.link.budget)
            .acquire_many_owned(share)
            .await
            .map_err(|_closed| TransportError::Unreachable {
                node: self.target,
                reason: "peer budget closed".into(),
            })?;
        let (transport, target, wait) = (Arc::clone(&self.transport), self.target, self.request_answer_wait);
        let link = Arc::clone(&self.link);
        // A task of its own, so that openraft dropping this future does not drop the call.
        let call = tokio::spawn(async move {
            let answer = tokio::time::timeout(wait, transport.call(target, request)).await;
            drop(permit);
            let in_time = tokio::time::Instant::now() <= deadline;
            match &answer {
                _ if kind != RequestKind::AppendEntries => {}
                Ok(Ok(_)) => link.sizing.lock().answered(bytes, in_time),
                // A peer that is down says nothing about how large an append may be.
                Ok(Err(TransportError::Unreachable { .. })) => {}
                Ok(Err(TransportError::Lost { .. })) | Err(_) if !in_time => link.sizing.lock().answered(bytes, false),
                Ok(Err(TransportError::Lost { .. })) | Err(_) => {}
            }
            answer
        });
        match call.await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_elapsed)) => Err(TransportError::Lost {
                node: target,
                reason: format!("no answer within {} ms", wait.as_millis()),
            }),
            Err(error) => Err(TransportError::Lost {
                node: target,
                reason: format!("call failed: {error}"),
            }),
        }
    }
}

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let entries = rpc.entries.len() as u64;
        let request = codec::encode_request(&RaftRequest::AppendEntries(rpc));
        let limit_bytes = self.link.sizing.lock().limit_bytes();
        if let Some(hint) = entries_hint(entries, request.len(), limit_bytes) {
            // openraft resends fewer entries at once, down to one (which always goes: an entry
            // is bounded below `request_bytes_max`). Smaller requests cross a slow link within
            // openraft's append time-out, so a lagging follower catches up.
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(hint)));
        }
        match self.call(RequestKind::AppendEntries, request, &option).await? {
            RaftResponse::AppendEntries(resp) => Ok(resp),
            other => unexpected(other),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        let request = codec::encode_request(&RaftRequest::InstallSnapshot(rpc));
        match self.call(RequestKind::InstallSnapshot, request, &option).await? {
            RaftResponse::InstallSnapshot(resp) => Ok(resp),
            RaftResponse::SnapshotMismatch(mismatch) => Err(RPCError::RemoteError(RemoteError::new(
                self.target,
                RaftError::APIError(InstallSnapshotError::SnapshotMismatch(mismatch)),
            ))),
            other => unexpected(other),
        }
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> RpcResult<VoteResponse<NodeId>> {
        let request = codec::encode_request(&RaftRequest::Vote(rpc));
        match self.call(RequestKind::Vote, request, &option).await? {
            RaftResponse::Vote(resp) => Ok(resp),
            other => unexpected(other),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_append_is_cut_in_proportion_to_its_bytes() {
        assert_eq!(entries_hint(64, 4 << 20, 4 << 20), None, "fits");
        assert_eq!(entries_hint(1, 30 << 20, 4 << 20), None, "one entry goes alone");
        assert_eq!(entries_hint(64, 32 << 20, 4 << 20), Some(8));
        assert_eq!(entries_hint(2, 9 << 20, 4 << 20), Some(1));
        assert_eq!(entries_hint(64, (4 << 20) + 1, 4 << 20), Some(63));
    }

    #[test]
    fn a_request_holds_its_bytes_of_the_budget_and_at_most_all_of_it() {
        assert_eq!(budget_share(1_000, 16 << 20), 1_000);
        assert_eq!(budget_share(64 << 20, 16 << 20), 16 << 20);
    }

    #[test]
    fn every_client_of_a_peer_shares_its_link() {
        let links = PeerLinks::new(1_000, 4_000);
        let first = links.of(2);
        assert!(Arc::ptr_eq(&first, &links.of(2)));
        assert!(!Arc::ptr_eq(&first, &links.of(3)));
        assert_eq!(first.budget.available_permits(), 1_000);
        assert_eq!(first.sizing.lock().limit_bytes(), 4_000);
    }

    #[test]
    fn appends_shrink_when_late_and_grow_back_when_in_time() {
        let mut sizing = AppendSizing::new(4 << 20);
        sizing.answered(4 << 20, false);
        assert_eq!(sizing.limit_bytes(), 2 << 20);
        // A late answer to a smaller request halves from that request's size.
        sizing.answered(1 << 20, false);
        assert_eq!(sizing.limit_bytes(), 512 << 10);
        // Heartbeats answered in time show nothing.
        sizing.answered(100, true);
        assert_eq!(sizing.limit_bytes(), 512 << 10);
        sizing.answered(300 << 10, true);
        assert_eq!(sizing.limit_bytes(), 1 << 20);
        for _ in 0..10 {
            let limit = sizing.limit_bytes();
            sizing.answered(limit, true);
        }
        assert_eq!(sizing.limit_bytes(), 4 << 20, "never above append_bytes_max");
        for _ in 0..40 {
            sizing.answered(1, false);
        }
        assert_eq!(sizing.limit_bytes(), 1, "never below a byte: one entry still goes");
    }
}
