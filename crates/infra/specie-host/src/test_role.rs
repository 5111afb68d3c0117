//! A minimal durable role for the hosts' tests: it adds each call's amount to a durable total,
//! and holds the role contract's rules (inputs only while leading, restores only while following)
//! as assertions.

use std::collections::VecDeque;
use std::convert::Infallible;

use specie_role::{Durable, Output, Role, Ticket};

/// A role that adds each call's amount to a durable total and replies with the new total.
#[derive(Default)]
pub struct Counter {
    pub total: u64,
    pub leading: bool,
    proposed: VecDeque<Ticket>,
    outputs: VecDeque<Output<Counter>>,
}

impl Role for Counter {
    type Command = u64;
    type Input = (Ticket, u64);
    type Peer = Infallible;
    type Message = Infallible;
    type Reply = u64;
    type Report = Infallible;
    fn lead(&mut self, _now_ms: u64) {
        self.leading = true;
    }
    fn follow(&mut self) {
        self.leading = false;
    }
    fn handle(&mut self, _now_ms: u64, (ticket, amount): (Ticket, u64)) {
        assert!(self.leading, "takes inputs only while leading");
        self.proposed.push_back(ticket);
        self.outputs.push_back(Output::Propose(amount));
    }
    fn apply(&mut self, _now_ms: u64, amount: &u64) {
        self.total += amount;
        if self.leading {
            let ticket = self.proposed.pop_front().expect("proposed");
            self.outputs.push_back(Output::Reply {
                ticket,
                reply: self.total,
            });
        }
    }
    fn handle_timeout(&mut self, _now_ms: u64) {}
    fn poll_output(&mut self) -> Option<Output<Counter>> {
        self.outputs.pop_front()
    }
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
}

#[derive(Debug, thiserror::Error)]
#[error("bad counter bytes")]
pub struct BadBytes;

impl Durable for Counter {
    type StateError = BadBytes;
    fn encode_command(amount: &u64) -> Vec<u8> {
        amount.to_le_bytes().to_vec()
    }
    fn decode_command(&self, bytes: &[u8]) -> Result<u64, BadBytes> {
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| BadBytes)?))
    }
    fn snapshot(&self) -> Vec<u8> {
        self.total.to_le_bytes().to_vec()
    }
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), BadBytes> {
        assert!(!self.leading, "restored only while following");
        self.total = self.decode_command(snapshot)?;
        Ok(())
    }
    fn check_invariants(&self) -> Result<(), BadBytes> {
        Ok(())
    }
}
