//! The world catches a planted bug: an authority shard that applies its votes without making
//! them durable, so a restart forgets what it voted for and it may vote again, for another order.

use specie_authority::{
    AuthorityConfig, AuthorityShard, Command, Input, Message, Reply, Report, ShardIndex, StateError,
};
use specie_fastpay::SigningKey;
use specie_role::{Durable, Output, Role};

use super::checks::Checks;
use super::shard::ShardRole;
use super::{AuthorityBehaviour, ByzantineOptions, World};
use crate::world::Violation;

/// The authority role with the bug: a `Vote` it proposes is applied at once and never reaches
/// the host, so the log has no record of it (a snapshot taken later still does).
struct ForgetsVotes {
    inner: AuthorityShard,
    now_ms: u64,
}

impl ForgetsVotes {
    fn new(config: AuthorityConfig, key: SigningKey) -> ForgetsVotes {
        ForgetsVotes {
            inner: AuthorityShard::new(config, key),
            now_ms: 0,
        }
    }
}

impl Role for ForgetsVotes {
    type Command = Command;
    type Input = Input;
    type Peer = ShardIndex;
    type Message = Message;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.inner.lead(now_ms);
    }

    fn follow(&mut self) {
        self.inner.follow();
    }

    fn handle(&mut self, now_ms: u64, input: Input) {
        self.now_ms = now_ms;
        self.inner.handle(now_ms, input);
    }

    fn apply(&mut self, now_ms: u64, command: &Command) {
        self.inner.apply(now_ms, command);
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
        self.inner.handle_timeout(now_ms);
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        loop {
            return Some(match self.inner.poll_output()? {
                Output::Propose(vote @ Command::Vote { .. }) => {
                    self.inner.apply(self.now_ms, &vote);
                    continue;
                }
                Output::Propose(command) => Output::Propose(command),
                Output::Send { to, message } => Output::Send { to, message },
                Output::Reply { ticket, reply } => Output::Reply { ticket, reply },
                Output::Report(report) => Output::Report(report),
            });
        }
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.inner.poll_timeout()
    }
}

impl Durable for ForgetsVotes {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        AuthorityShard::encode_command(command)
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

impl ShardRole for ForgetsVotes {
    fn shard(&self) -> &AuthorityShard {
        &self.inner
    }
}

/// Seeds with equivocating users and frequent crashes, where a forgotten vote matters.
fn options(seed: u64) -> ByzantineOptions {
    let mut options = ByzantineOptions::from_seed(seed);
    options.byzantine_users = 2;
    options.faults.crash_per_mille = 20;
    if let Some((_, behaviour)) = &mut options.byzantine_authority {
        *behaviour = AuthorityBehaviour::Equivocates;
    }
    options
}

/// The first seed below `seeds` on which the world with the planted bug breaks an invariant.
fn first_violation(seeds: u64, checks: Checks) -> Option<Violation> {
    (0..seeds).find_map(|seed| World::new(options(seed), ForgetsVotes::new, checks).run().err())
}

#[test]
fn the_world_catches_a_shard_that_forgets_its_votes_on_restart() {
    // Every check on: the restarted shard is not the one that crashed.
    let violation = first_violation(50, Checks::ALL).expect("the planted bug is caught");
    assert!(violation.message.contains("not the shard that crashed"), "{violation}");

    // Without the two checks that look inside honest authorities (the restart comparison and
    // the record of their votes), the protocol-level ones still catch it: a forgetful
    // authority votes for a second order, and the conflicting certificates or double votes
    // convict it although it is honest, or honest authorities confirm different orders.
    let protocol_only = Checks {
        restart_is_lossless: false,
        honest_votes_once: false,
    };
    let violation = first_violation(300, protocol_only).expect("the planted bug is caught by the protocol checks");
    assert!(
        violation.message.contains("convicts honest authority")
            || violation.message.contains("confirmed different orders"),
        "{violation}"
    );
}

#[test]
fn the_same_seeds_pass_without_the_planted_bug() {
    for seed in 0..20 {
        World::new(options(seed), AuthorityShard::new, Checks::ALL)
            .run()
            .unwrap_or_else(|violation| panic!("{violation}"));
    }
}
