//! An in-process [`RaftTransport`] for tests and the embedded deployment: replicas of one group
//! in one process, with faults on demand. Links can be cut and healed (one direction or both),
//! a node can be isolated, and requests or replies can be dropped at random with a seeded
//! generator. Messages still go through the byte encoding, as over a real network.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::network::{RaftTransport, RpcFuture, RpcHandler, TransportError};
use crate::types::NodeId;

/// Probabilities are in parts per million, so a fault rate is an exact integer.
const PARTS: u32 = 1_000_000;

struct State {
    handlers: BTreeMap<NodeId, RpcHandler>,
    /// Directed links that deliver nothing: `(from, to)`.
    cut: BTreeSet<(NodeId, NodeId)>,
    drop_per_million: u32,
    rng: StdRng,
    delivered: u64,
    dropped: u64,
}

/// The network; clone it freely (clones share the links).
#[derive(Clone)]
pub struct MemNetwork {
    state: Arc<Mutex<State>>,
}

/// Message counts, to check that a test's faults actually happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemNetworkStats {
    pub delivered: u64,
    pub dropped: u64,
}

impl MemNetwork {
    /// `seed` drives the random drops, so a failing run's fault pattern can be replayed (as far
    /// as task scheduling allows).
    pub fn new(seed: u64) -> Self {
        MemNetwork {
            state: Arc::new(Mutex::new(State {
                handlers: BTreeMap::new(),
                cut: BTreeSet::new(),
                drop_per_million: 0,
                rng: StdRng::seed_from_u64(seed),
                delivered: 0,
                dropped: 0,
            })),
        }
    }

    /// The transport replica `local` sends through.
    pub fn transport(&self, local: NodeId) -> Arc<dyn RaftTransport> {
        Arc::new(Endpoint {
            network: self.clone(),
            local,
        })
    }

    /// Routes requests for `node` to `handler` (replacing an earlier instance after a restart).
    pub fn register(&self, node: NodeId, handler: RpcHandler) {
        self.state.lock().handlers.insert(node, handler);
    }

    /// `node` is down: requests to it are unreachable.
    pub fn unregister(&self, node: NodeId) {
        self.state.lock().handlers.remove(&node);
    }

    /// Stops delivery from `from` to `to` (requests and the replies to them).
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) {
        self.state.lock().cut.insert((from, to));
    }

    /// Stops delivery between `a` and `b`, both ways.
    pub fn cut(&self, a: NodeId, b: NodeId) {
        let mut state = self.state.lock();
        state.cut.insert((a, b));
        state.cut.insert((b, a));
    }

    pub fn heal(&self, a: NodeId, b: NodeId) {
        let mut state = self.state.lock();
        state.cut.remove(&(a, b));
        state.cut.remove(&(b, a));
    }

    /// Cuts `node` off from every other node in `peers`.
    pub fn isolate(&self, node: NodeId, peers: impl IntoIterator<Item = NodeId>) {
        for peer in peers {
            if peer != node {
                self.cut(node, peer);
            }
        }
    }

    pub fn heal_all(&self) {
        self.state.lock().cut.clear();
    }

    /// Drops each request, and each reply, with probability `per_million / 1_000_000`.
    pub fn set_drop_rate(&self, per_million: u32) {
        self.state.lock().drop_per_million = per_million.min(PARTS);
    }

    pub fn stats(&self) -> MemNetworkStats {
        let state = self.state.lock();
        MemNetworkStats {
            delivered: state.delivered,
            dropped: state.dropped,
        }
    }

    /// Whether a message from `from` to `to` gets through now: the link is up and the dice say so.
    fn pass(&self, from: NodeId, to: NodeId) -> Result<(), TransportError> {
        let mut state = self.state.lock();
        if state.cut.contains(&(from, to)) {
            return Err(TransportError::Unreachable {
                node: to,
                reason: "link cut".into(),
            });
        }
        let drop_per_million = state.drop_per_million;
        if drop_per_million > 0 && state.rng.gen_range(0..PARTS) < drop_per_million {
            state.dropped += 1;
            return Err(TransportError::Lost {
                node: to,
                reason: "dropped by fault injection".into(),
            });
        }
        state.delivered += 1;
        Ok(())
    }
}

struct Endpoint {
    network: MemNetwork,
    local: NodeId,
}

impl RaftTransport for Endpoint {
    fn call(&self, target: NodeId, request: Vec<u8>) -> RpcFuture<'_> {
        Box::pin(async move {
            self.network.pass(self.local, target)?;
            let handler = self.network.state.lock().handlers.get(&target).cloned();
            let Some(handler) = handler else {
                return Err(TransportError::Unreachable {
                    node: target,
                    reason: "no replica registered".into(),
                });
            };
            let response = handler.handle(&request).await;
            // The reply travels back over the same link, which may have failed meanwhile.
            self.network.pass(target, self.local)?;
            Ok(response)
        })
    }
}
