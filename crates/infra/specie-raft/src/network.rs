//! How replicas of one group talk: a byte-level [`RaftTransport`] that any network can implement
//! (specie-cluster's mutual-TLS one; the fault-injecting in-process `specie-faultnet` of the tests
//! and the simulator), and the adapters between it and openraft. Requests and responses are
//! opaque bytes to the transport (the [`crate::codec`] encoding), so a transport needs no
//! openraft types and no knowledge of Raft.

// The error types are openraft's, fixed by the traits implemented here; large as they are, they
// only travel on failure paths.
#![allow(clippy::result_large_err)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

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

/// openraft's view of the transport: one [`Peer`] per target.
pub(crate) struct NetworkFactory {
    pub transport: Arc<dyn RaftTransport>,
    pub local: NodeId,
    pub backoff: Duration,
    /// An append-entries request encoding to more than this is sent in smaller pieces.
    pub request_bytes_max: usize,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Peer;

    async fn new_client(&mut self, target: NodeId, _node: &EmptyNode) -> Peer {
        Peer {
            transport: self.transport.clone(),
            local: self.local,
            target,
            backoff: self.backoff,
            request_bytes_max: self.request_bytes_max,
        }
    }
}

pub(crate) struct Peer {
    transport: Arc<dyn RaftTransport>,
    local: NodeId,
    target: NodeId,
    backoff: Duration,
    request_bytes_max: usize,
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
        let bytes = match tokio::time::timeout(timeout, self.transport.call(self.target, request)).await {
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

impl RaftNetwork<TypeConfig> for Peer {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>> {
        let entries = rpc.entries.len() as u64;
        let request = codec::encode_request(&RaftRequest::AppendEntries(rpc));
        if request.len() > self.request_bytes_max && entries > 1 {
            // openraft resends fewer entries at once, down to one (which always fits: an entry
            // is bounded well below `request_bytes_max`).
            return Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint(
                entries / 2,
            )));
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
