//! Offline cash's authority (docs/offline-mode.md, "The authority"; seed 001, §IV-E and §IV-F),
//! as one role of specie's offline mode.
//!
//! It enrols device identities (from the registrar), certifies the one-time keys devices bind to
//! them, issues denominated tokens against value moved out of the online core (a funding, credited
//! once), and takes tokens back: it re-validates each deposit, records its chain in the token's
//! tree of statements, pays the first deposit of a token (fresh tokens, or value back to the
//! core), and refuses every later branch, naming the owner who signed two statements on one node.
//! That owner's registered identity owes the refused value, the token's serial goes on the
//! revocation list, and the evidence convicts it without trusting the authority.
//!
//! The role is pure (`specie_role::Role` + `Durable`): every signature it makes is made by the
//! leader in `handle` and travels in the command, so replaying the log signs nothing, and the
//! hosts of `specie-host` run it embedded over the local log, replicated over Raft, or under the
//! simulator.
//!
//! It never reads or writes the online core's transactions: a core funding reaches it as its
//! terms ([`Funding::from_core`]), and value paid back to the core (a defund, a refund) is
//! answered as the payout's terms, which the authority's service signs with the bridge key
//! through the core's format (`specie_service::CoreTransactions`).

mod messages;
mod role;
mod state;

pub use messages::{
    refund_serial, Books, Command, Debt, Deposit, DepositOutcome, Funding, Input, KeyBooks, Refusal, Reply, Report,
    AUTHORITY_ENCODING_VERSION, BINDINGS_PER_CALL_MAX, EVIDENCE_PER_ANSWER_MAX, KEYS_PER_IDENTITY_MAX,
    REVOCATIONS_PER_ANSWER_MAX, TOKENS_PER_FUNDING_MAX,
};
pub use role::{deposit_batches, AuthorityKeys, OfflineAuthority, DEPOSITS_PER_BATCH, DEPOSITS_PER_BATCH_MIN};
pub use state::StateError;
