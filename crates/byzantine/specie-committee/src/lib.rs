//! A FastPay committee as specie runs it: the client's side of a payment as a pure state machine
//! ([`Payment`]), a whole committee of authority shards embedded in one process on durable hosts
//! ([`EmbeddedCommittee`]), and a pipeline that keeps many payments in flight against it
//! ([`Pipeline`]). The demo, the benchmark and the tests drive the Byzantine mode through these.

mod embedded;
mod payment;
mod pipeline;

pub use embedded::{Answer, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions, StartError};
pub use payment::{Payment, PaymentError, Step};
pub use pipeline::{Outcome, Pipeline, Settlement};

use specie_authority::AuthorityShard;

/// One authority's books, summed over its shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthorityBooks {
    pub balances: i128,
    /// Value sent between its shards and not yet acknowledged.
    pub in_flight: u128,
    pub funded: u128,
    pub redeemed: u128,
}

impl AuthorityBooks {
    pub fn of(shards: &[AuthorityShard]) -> AuthorityBooks {
        AuthorityBooks {
            balances: shards.iter().map(AuthorityShard::balances).sum(),
            in_flight: shards.iter().map(AuthorityShard::credits_unacked).sum(),
            funded: shards.iter().map(AuthorityShard::funded).sum(),
            redeemed: shards.iter().map(AuthorityShard::redeemed).sum(),
        }
    }

    /// Whether the books balance: what is held or moving equals what came in minus what left.
    ///
    /// Exact only once the channels between shards are quiet: a credit the receiving shard has
    /// applied stays unacknowledged at the sender until the acknowledgement arrives, and until
    /// then it is counted both in a balance and in `in_flight`. Audit a committee stopped under
    /// load with `balances <= funded - redeemed <= balances + in_flight` instead.
    pub fn balanced(&self) -> bool {
        self.balances + self.in_flight as i128 == self.funded as i128 - self.redeemed as i128
    }
}
