#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod codec;
mod fsio;
mod log_store;
mod network;
mod replica;
mod runtime;
mod state_machine;
mod types;

#[cfg(test)]
mod suite_test;

pub use codec::DecodeError;

/// The RPC codec's decoders, each as one function, so a fuzzer can feed them a peer's bytes: what
/// decodes is re-encoded, and must give back the same bytes.
pub mod fuzzing {
    use crate::codec::{self, RequestKind};

    /// `bytes` decoded as a request from a peer, and encoded again; `None` if they do not decode.
    pub fn reencode_request(bytes: &[u8]) -> Option<Vec<u8>> {
        codec::decode_request(bytes)
            .ok()
            .map(|request| codec::encode_request(&request))
    }

    /// `bytes` decoded as the answer to each kind of request, and encoded again, for each kind
    /// under which they decode.
    pub fn reencode_responses(bytes: &[u8]) -> Vec<Vec<u8>> {
        [
            RequestKind::AppendEntries,
            RequestKind::Vote,
            RequestKind::InstallSnapshot,
        ]
        .into_iter()
        .filter_map(|kind| codec::decode_response(kind, bytes).ok())
        .map(|response| codec::encode_response(&response))
        .collect()
    }
}

pub use network::{RaftTransport, RpcFuture, RpcHandler, TransportError};
pub use replica::{
    prepare, Leadership, Membership, MembershipError, Origin, PrepareError, ProposeError, Replica, ReplicaConfig,
    ReplicaMetrics, Role, Start, StartError,
};
pub use runtime::seed_thread_rng;
pub use state_machine::{Proposer, ReplicatedStateMachine, SnapshotRefused};
pub use types::NodeId;
