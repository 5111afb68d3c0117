//! A FastPay authority shard (seed 002, §4 and Figure 2), as one role of specie's Byzantine mode.
//!
//! Each authority splits its accounts over `shards` shards ([`shard_of`]). A shard votes on
//! transfer orders (at most one order per account and sequence number, durable before the vote
//! leaves), settles certificates, and credits recipients on other shards of its authority
//! through one sequenced channel per pair of shards: credits are numbered, made durable on both
//! sides, resent until acknowledged and applied exactly once. The reference sends them once and
//! forgets them.
//!
//! The role is pure (`specie_role::Role` + `Durable`): the hosts of `specie-host` run it
//! embedded over the local log, replicated over Raft, or under the simulator.

mod messages;
mod role;
mod state;

pub use messages::{
    AccountState, Command, Credit, Funding, Input, Message, Refusal, Reply, Report, ShardBooks, ShardIndex,
    CERTIFICATES_PER_ANSWER_MAX, CREDITS_PER_MESSAGE_MAX, RECORDS_PER_ANSWER_MAX,
};
pub use role::{shard_of, AuthorityConfig, AuthorityShard};
pub use state::StateError;
