//! The world catches a planted bug, the prototype's own (seed 001, §IV-G): an authority that
//! blames the owner who deposited a refused copy (the token's last owner) instead of the owner
//! who signed twice.

use std::collections::HashMap;
use std::convert::Infallible;

use specie_offline::PublicKey;
use specie_offline_authority::{Command, DepositOutcome, Input, OfflineAuthority, Reply, Report, StateError};
use specie_role::{Durable, Output, Role, Ticket};

use super::{authority_keys, run_offline_with, OfflineOptions};

/// The real authority, except that a `DoubleSpent` answer names the depositor's identity.
struct BlamesTheDepositor {
    inner: OfflineAuthority,
    identities: HashMap<PublicKey, PublicKey>,
    depositors: HashMap<Ticket, PublicKey>,
}

impl Role for BlamesTheDepositor {
    type Command = Command;
    type Input = Input;
    type Peer = Infallible;
    type Message = Infallible;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, now_ms: u64) {
        self.inner.lead(now_ms);
    }

    fn follow(&mut self) {
        self.inner.follow();
    }

    fn handle(&mut self, now_ms: u64, input: Input) {
        match &input {
            Input::Certify { bindings, .. } => {
                self.identities
                    .extend(bindings.iter().map(|binding| (binding.key, binding.identity)));
            }
            Input::Deposit { ticket, token, .. } => {
                self.depositors.insert(*ticket, *token.owner());
            }
            _ => {}
        }
        self.inner.handle(now_ms, input);
    }

    fn apply(&mut self, now_ms: u64, command: &Command) {
        self.inner.apply(now_ms, command);
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.inner.handle_timeout(now_ms);
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        Some(match self.inner.poll_output()? {
            Output::Reply {
                ticket,
                reply: Reply::Deposited(DepositOutcome::DoubleSpent { serial, debtor, value }),
            } => {
                let depositor = self.depositors.get(&ticket).and_then(|key| self.identities.get(key));
                let debtor = depositor.copied().unwrap_or(debtor);
                Output::Reply {
                    ticket,
                    reply: Reply::Deposited(DepositOutcome::DoubleSpent { serial, debtor, value }),
                }
            }
            Output::Propose(command) => Output::Propose(command),
            Output::Reply { ticket, reply } => Output::Reply { ticket, reply },
            Output::Report(report) => Output::Report(report),
            Output::Send { to, .. } => match to {},
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }
}

impl Durable for BlamesTheDepositor {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        OfflineAuthority::encode_command(command)
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Command, StateError> {
        self.inner.decode_command(bytes)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.inner.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), StateError> {
        self.inner.restore(snapshot)
    }

    fn check_invariants(&self) -> Result<(), StateError> {
        self.inner.check_invariants()
    }
}

#[test]
fn the_world_catches_an_authority_that_blames_the_depositor() {
    let caught = (0..40).find_map(|seed| {
        let planted = || BlamesTheDepositor {
            inner: OfflineAuthority::new(authority_keys()),
            identities: HashMap::new(),
            depositors: HashMap::new(),
        };
        run_offline_with(OfflineOptions::from_seed(seed), planted).err()
    });
    let violation = caught.expect("some seed catches the planted bug");
    assert!(
        violation.message.contains("names someone who signed once"),
        "{violation}"
    );
}
