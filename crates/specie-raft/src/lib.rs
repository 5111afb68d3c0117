#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod codec;
mod fsio;
mod log_store;
pub mod memnet;
mod network;
mod replica;
mod runtime;
mod state_machine;
mod types;

#[cfg(test)]
mod suite_test;

pub use codec::DecodeError;
pub use fsio::SyncMode;
pub use network::{RaftTransport, RpcFuture, RpcHandler, TransportError};
pub use replica::{Leadership, ProposeError, Replica, ReplicaConfig, ReplicaMetrics, Role, StartError};
pub use runtime::seed_thread_rng;
pub use state_machine::ReplicatedStateMachine;
pub use types::NodeId;
