//! Deterministic simulation of specie, FoundationDB style, one world per protocol (`specie sim`
//! runs all nine):
//!
//! - [`run`] (`world`): the 2PC protocol (Hamilton §4). The shard and coordinator state machines
//!   run exactly as in a node, each role group modelled as its durable log plus a leader: a crash
//!   loses the leader's memory and everything in flight; a restart (or a new leader of the same
//!   group) rebuilds the state by replaying the log, which is what Raft gives the role.
//! - [`run_replication`] (`replication`): the replication layer itself. Real `specie-raft`
//!   replicas (openraft, the log store, snapshots, the leadership watch) on a single-threaded
//!   runtime with a paused clock, checked for exactly the properties the first world assumes:
//!   one order of commands everywhere, nothing acknowledged ever lost, a leader's state complete.
//! - [`run_cluster`] (`cluster`): both together, as deployed. Shard groups and a coordinator group
//!   of real replicas run `specie-cluster`'s roles (the coordinator's leader engine, the shards'
//!   request handling); only sockets are simulated. Checked: no id spent twice, nothing
//!   confirmed lost, every transaction all or nothing, value conserved, the UHS exactly what the
//!   applied transactions leave, and the cluster at rest (no dtxn active at the coordinator, no
//!   lock held, replicas equal) once faults stop. `atomizer-cluster` is the same world in the
//!   atomizer's shape ([`ClusterShape::Atomizer`]): an atomizer group over UHS shard groups,
//!   under the same faults and checks, at rest once nothing is admitted and every shard holds the
//!   last block.
//! - [`run_byzantine`] (`byzantine`): the Byzantine mode. A FastPay committee of 4 authorities,
//!   each 2–3 shards of the real `specie-authority` role on their own durable logs, with correct
//!   users, Byzantine users and up to one Byzantine authority. Checked: no honest authority signs
//!   two orders for one sequence number or confirms another order than the others, evidence
//!   convicts only the Byzantine authority, forgeries change nothing, each authority's books
//!   balance, and once the network heals every correct payment is settled everywhere.
//!
//! - [`run_exchange`] (`exchange`): the exchange. The real exchange role proposes blocks on the
//!   simulated host (crashing and restarting from its log); replica ledgers apply every durable
//!   block with its transactions shuffled, one on a single thread, some rebuilt from snapshots.
//!   Checked: every replica at the proposer's state hash, the per-asset audit, every submission
//!   answered with its transactions' fates, hostile transactions refused, deposits credited once.
//! - [`run_privacy`] (`privacy`): the privacy capability. Threshold endorsement: the real FROST
//!   aggregator and k of n endorsers, some compromised (they sign anything), endorsing
//!   authorised and forged transactions over a lossy network; checked: no forgery endorsed, every
//!   endorsement verifies for its own transaction only, every authorised transaction endorsed once
//!   the network stops dropping. The ledger of record: records written ahead, a model UHS that
//!   refuses conflicting spends, blocks sealed at random, crashes after which the node's recovery
//!   decides the written-ahead records by the UHS; checked: the blocks replay to the UHS, every
//!   committed transaction in exactly one block, nothing else in any. The replicated archiver:
//!   the real `Archiver` role on the simulated host (crashing, restarting as a new leader), fed
//!   by sentinels that die before reporting, report only some outcomes or report late, and by
//!   the leader's driver handing back evidence from the UHS; checked the same, at every step and
//!   once settled, and a replica restored from the role's snapshot has its head.
//!
//! - [`run_atomizer`] (`atomizer`): Hamilton's atomizer shape. The real atomizer and UHS shard
//!   roles on the simulated host, over a lossy, duplicating, reordering network, crashing and
//!   restarting from their logs, with double spends and replayed mints among valid spends.
//!   Checked: every durable block fits a model UHS replayed from genesis, a confirmed transaction
//!   is in exactly one block and any other in none, every shard holds the model at its height,
//!   and once healed every shard applies every block and every valid transaction is confirmed.
//!
//! In all of them, every source of nondeterminism (the network, the clock, crashes, the workload,
//! openraft's election time-outs) comes from the seed, so a seed replays the same run bit for
//! bit; the trace digest proves it. The network drops, duplicates, delays and reorders messages.
//!
//! The 2PC world checks after every step, and once faults stop, that every dtxn finishes and
//! value is conserved:
//! - no UHS id is ever spent twice, and no id is ever created twice (so a spent id never returns);
//! - every transaction reported confirmed is durable: its outputs exist (or were spent since);
//! - a restarted shard holds exactly the state it had when it crashed;
//! - every shard's locks match its prepared dtxns;
//! - at the end, no lock is held, no dtxn is active, and the values in the UHS equal what was minted.

mod atomizer;
mod byzantine;
mod cluster;
mod exchange;
mod offline;
mod privacy;
mod replication;
mod world;

pub use atomizer::{run_atomizer, AtomizerPlantedFault, AtomizerWorldOptions, AtomizerWorldReport};
pub use byzantine::{
    run_byzantine, AuthorityBehaviour, ByzantineFaults, ByzantineOptions, ByzantineReport,
    AUTHORITIES as BYZANTINE_AUTHORITIES,
};
pub use cluster::{run_cluster, AtomizerShape, ClusterOptions, ClusterReport, ClusterShape};
pub use exchange::{run_exchange, ExchangeOptions, ExchangeReport};
pub use offline::{run_offline, OfflineOptions, OfflineReport};
pub use privacy::{run_privacy, PrivacyOptions, PrivacyReport};
pub use replication::{run_replication, ReplicationFaults, ReplicationOptions, ReplicationReport};
pub use world::{run, Faults, SimOptions, SimReport, Violation};
