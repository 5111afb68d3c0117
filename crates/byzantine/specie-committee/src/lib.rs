//! A FastPay committee as specie runs it: the client's side of a payment as a pure state machine
//! ([`Payment`]), a whole committee of authority shards embedded in one process on durable hosts
//! ([`EmbeddedCommittee`]), and a pipeline that keeps many payments in flight against it
//! ([`Pipeline`]). The demo, the benchmark and the tests drive the Byzantine mode through these.

mod call;
mod embedded;
pub mod http_api;
pub mod http_client;
pub mod http_server;
mod payment;
mod pipeline;
pub mod standalone;

pub use call::{Call, Heard};
pub use embedded::{Answer, Behaviour, EmbeddedCommittee, EmbeddedCommitteeOptions, StartError};
pub use http_client::{
    AuthorityAddresses, AuthorityReply, FundWait, HttpCommittee, HttpCommitteeError, HttpCommitteeOptions,
    HttpSettlement, Observed, PayError,
};
pub use payment::{Payment, PaymentError, PaymentOptions, Step};
pub use pipeline::{Outcome, Pipeline, Settlement};

use specie_authority::AuthorityShard;

/// Credits between an authority's shards that the receiving shard has not applied yet. (Not
/// merely unacknowledged ones: a credit applied but not yet acknowledged is in a balance already.)
fn in_flight(shards: &[AuthorityShard]) -> u128 {
    let mut value = 0;
    for (from, sender) in shards.iter().enumerate() {
        for (to, receiver) in shards.iter().enumerate() {
            let applied = receiver.credits_applied_from(from as u32);
            value += sender.credits_sent_to(to as u32, applied);
        }
    }
    value
}

/// One authority's books, summed over its shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthorityBooks {
    pub balances: i128,
    /// Value sent between its shards and not yet applied by the receiving shard.
    pub in_flight: u128,
    pub funded: u128,
    pub redeemed: u128,
}

impl AuthorityBooks {
    pub fn of(shards: &[AuthorityShard]) -> AuthorityBooks {
        AuthorityBooks {
            balances: shards.iter().map(AuthorityShard::balances).sum(),
            in_flight: in_flight(shards),
            funded: shards.iter().map(AuthorityShard::funded).sum(),
            redeemed: shards.iter().map(AuthorityShard::redeemed).sum(),
        }
    }

    /// Whether the books balance: what is held or moving equals what came in minus what left.
    /// Exact at any moment the shards are stopped: a credit counts as moving until the receiving
    /// shard has applied it, whether or not its acknowledgement reached the sender.
    pub fn balanced(&self) -> bool {
        self.balances + self.in_flight as i128 == self.funded as i128 - self.redeemed as i128
    }
}
