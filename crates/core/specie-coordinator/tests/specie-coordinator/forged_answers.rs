//! Whatever the network and the log hand it, a coordinator does not panic: after submissions,
//! arbitrary shard answers (forged, for shard indexes that exist or not, for dtxns it never
//! started, with any number of votes, duplicated and reordered real ones), ticks, leadership
//! changes and commands another leader put in the log, interleaved with real shards answering
//! real requests. It only ever sends to shards that exist, and reports each submission at most
//! once.

use std::collections::HashMap;

use proptest::prelude::*;
use specie_coordinator::{
    Coordinator, CoordinatorCommand, CoordinatorConfig, CoordinatorOutput, CoordinatorState, TxResult,
};
use specie_shard::{Refusal, ShardRange, ShardRequest, ShardResponse, ShardState, Vote};
use specie_transaction::{CompactTransaction, Txid, UhsId};

const SHARDS: usize = 3;

/// Eight ids spread over the three shards' ranges.
fn id(n: u8) -> UhsId {
    let mut bytes = [n; 32];
    bytes[0] = n.wrapping_mul(37);
    UhsId(bytes)
}

fn compact(txid: u8, spent: Vec<u8>, created: Vec<u8>) -> CompactTransaction {
    CompactTransaction {
        txid: Txid([txid; 32]),
        spent: spent.into_iter().map(id).collect(),
        created: created.into_iter().map(id).collect(),
        ..Default::default()
    }
}

fn tx() -> impl Strategy<Value = CompactTransaction> {
    let ids = || prop::collection::vec(0u8..8, 0..3);
    (any::<u8>(), ids(), ids()).prop_map(|(txid, spent, created)| compact(txid, spent, created))
}

fn vote() -> impl Strategy<Value = Vote> {
    (0u8..5).prop_map(|b| Vote::from_u8(b).unwrap())
}

fn dtxn() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..6, 1 => any::<u64>(), 1 => Just(u64::MAX)]
}

fn response() -> impl Strategy<Value = ShardResponse> {
    prop_oneof![
        (dtxn(), prop::collection::vec(vote(), 0..4)).prop_map(|(dtxn, votes)| ShardResponse::Prepared { dtxn, votes }),
        dtxn().prop_map(|dtxn| ShardResponse::Committed { dtxn }),
        dtxn().prop_map(|dtxn| ShardResponse::Discarded { dtxn }),
        dtxn().prop_map(|dtxn| ShardResponse::Stale { dtxn }),
        (dtxn(), 0u8..7).prop_map(|(dtxn, r)| ShardResponse::Refused {
            dtxn,
            reason: Refusal::from_u8(r).unwrap()
        }),
    ]
}

fn command() -> impl Strategy<Value = CoordinatorCommand> {
    prop_oneof![
        (dtxn(), prop::collection::vec(tx(), 0..3)).prop_map(|(dtxn, txs)| CoordinatorCommand::Prepare { dtxn, txs }),
        (dtxn(), prop::collection::vec(vote(), 0..4))
            .prop_map(|(dtxn, outcomes)| CoordinatorCommand::Commit { dtxn, outcomes }),
        prop::collection::vec(dtxn(), 0..4).prop_map(|dtxns| CoordinatorCommand::Finish { dtxns }),
    ]
}

#[derive(Clone, Debug)]
enum Event {
    Submit(CompactTransaction),
    /// A real request reaches its real shard (sometimes twice); the answer goes back at once or
    /// is held back to be delivered later, out of order.
    Deliver {
        pick: prop::sample::Index,
        duplicate: bool,
        hold: bool,
    },
    /// A held-back real answer arrives (possibly again).
    Release {
        pick: prop::sample::Index,
        keep: bool,
    },
    /// An answer nobody asked for, from any shard index.
    Forged {
        shard: usize,
        response: ShardResponse,
    },
    Tick(u64),
    /// A command another leader put in the log, applied here.
    Foreign(CoordinatorCommand),
    Reelect,
}

fn event() -> impl Strategy<Value = Event> {
    let shard = prop_oneof![6 => 0..SHARDS + 2, 1 => Just(usize::MAX)];
    prop_oneof![
        3 => tx().prop_map(Event::Submit),
        6 => (any::<prop::sample::Index>(), prop::bool::weighted(0.1), prop::bool::weighted(0.3))
            .prop_map(|(pick, duplicate, hold)| Event::Deliver { pick, duplicate, hold }),
        2 => (any::<prop::sample::Index>(), any::<bool>()).prop_map(|(pick, keep)| Event::Release { pick, keep }),
        3 => (shard, response()).prop_map(|(shard, response)| Event::Forged { shard, response }),
        2 => (0u64..300).prop_map(Event::Tick),
        1 => command().prop_map(Event::Foreign),
        1 => Just(Event::Reelect),
    ]
}

struct World {
    coordinator: Coordinator,
    shards: Vec<ShardState>,
    to_shards: Vec<(usize, ShardRequest)>,
    held: Vec<(usize, ShardResponse)>,
    outcomes: HashMap<u64, TxResult>,
    next_tag: u64,
    now_ms: u64,
}

impl World {
    fn new() -> Self {
        let ranges = ShardRange::partition(SHARDS).unwrap();
        let mut config = CoordinatorConfig::with_shards(ranges.clone());
        config.batch_transactions_max = 3;
        config.queue_transactions_max = 6;
        config.dtxns_in_flight_max = 2;
        config.retry_timeout_ms = 50;
        let mut coordinator = Coordinator::new(config, CoordinatorState::default());
        coordinator.become_leader(0);
        let shards: Vec<ShardState> = ranges
            .into_iter()
            .map(|range| ShardState::with_unspent(range, (0..4).map(id).filter(|id| range.contains(id))))
            .collect();
        World {
            coordinator,
            shards,
            to_shards: vec![],
            held: vec![],
            outcomes: HashMap::new(),
            next_tag: 0,
            now_ms: 0,
        }
    }

    fn drain(&mut self) -> Result<(), TestCaseError> {
        while let Some(output) = self.coordinator.poll() {
            match output {
                CoordinatorOutput::Propose(command) => self.coordinator.apply(&command, self.now_ms),
                CoordinatorOutput::Send { shard, request } => {
                    prop_assert!(shard < SHARDS, "sent to shard {}", shard);
                    self.to_shards.push((shard, request));
                }
                CoordinatorOutput::Outcome { tag, .. } => {
                    if let Some(tag) = tag {
                        prop_assert!(self.outcomes.insert(tag, TxResult::Dropped).is_none(), "two outcomes");
                    }
                }
                CoordinatorOutput::ShardRefused { .. } | CoordinatorOutput::Finished(_) => {}
            }
        }
        Ok(())
    }

    fn step(&mut self, event: Event) -> Result<(), TestCaseError> {
        match event {
            Event::Submit(tx) => {
                let tag = self.next_tag;
                self.next_tag += 1;
                let _ = self.coordinator.submit(tag, tx, self.now_ms);
            }
            Event::Deliver { pick, duplicate, hold } => {
                if !self.to_shards.is_empty() {
                    let (shard, request) = self.to_shards.swap_remove(pick.index(self.to_shards.len()));
                    if duplicate {
                        self.to_shards.push((shard, request.clone()));
                    }
                    let response = self.shards[shard].apply(0, &request);
                    if let Err(error) = self.shards[shard].check_invariants() {
                        return Err(TestCaseError::fail(format!("shard {shard}: {error}")));
                    }
                    if hold {
                        self.held.push((shard, response));
                    } else {
                        self.coordinator.on_shard_response(shard, response, self.now_ms);
                    }
                }
            }
            Event::Release { pick, keep } => {
                if !self.held.is_empty() {
                    let at = pick.index(self.held.len());
                    let (shard, response) = if keep {
                        self.held[at].clone()
                    } else {
                        self.held.swap_remove(at)
                    };
                    self.coordinator.on_shard_response(shard, response, self.now_ms);
                }
            }
            Event::Forged { shard, response } => self.coordinator.on_shard_response(shard, response, self.now_ms),
            Event::Tick(ms) => {
                self.now_ms += ms;
                self.coordinator.tick(self.now_ms);
            }
            Event::Foreign(command) => self.coordinator.apply(&command, self.now_ms),
            Event::Reelect => {
                self.coordinator.step_down();
                self.drain()?;
                self.coordinator.become_leader(self.now_ms);
            }
        }
        self.drain()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_answers_ticks_and_commands_never_panic(
        submissions in prop::collection::vec(tx(), 1..6),
        events in prop::collection::vec(event(), 0..80),
    ) {
        let mut world = World::new();
        for tx in submissions {
            world.step(Event::Submit(tx))?;
        }
        world.step(Event::Tick(0))?;
        for event in events {
            world.step(event)?;
        }
        // The state it ends with is one its own snapshot format accepts.
        let state = world.coordinator.state();
        let decoded = CoordinatorState::decode_snapshot(&state.encode_snapshot(), &Default::default());
        prop_assert_eq!(decoded.as_ref(), Ok(state));
    }
}
