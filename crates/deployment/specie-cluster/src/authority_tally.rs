//! An authority shard with the counts an operator reads in `specie cluster status`: accounts,
//! votes and confirmations. The role itself keeps no such counters, so they are kept here, beside
//! it, from the commands it applies, and written into its snapshots: every replica of the group
//! counts the same, and a restart loses nothing.

use specie_authority::{AuthorityShard, Command, Input, Message, Reply, Report, ShardIndex, StateError};
use specie_codec::{put_u64, DecodeError, Reader};
use specie_fastpay::{AccountKey, Recipient};
use specie_role::{Durable, Output, Role};

/// Bytes the counts add after the role's own snapshot.
const COUNTS_BYTES: usize = 3 * 8;

/// What an authority shard has done, from its durable commands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShardCounts {
    /// Accounts this shard knows (funded, credited or paid into).
    pub accounts: u64,
    /// Round-0 votes this shard signed and made durable (one per account and sequence number;
    /// the votes of recovery rounds are not counted).
    pub votes: u64,
    /// Certificates this shard settled.
    pub confirmed: u64,
}

/// [`AuthorityShard`] and its [`ShardCounts`]: the same role to its host, one more thing to read.
pub struct TalliedShard {
    shard: AuthorityShard,
    counts: ShardCounts,
}

impl TalliedShard {
    pub fn new(shard: AuthorityShard) -> TalliedShard {
        TalliedShard {
            shard,
            counts: ShardCounts::default(),
        }
    }

    pub fn shard(&self) -> &AuthorityShard {
        &self.shard
    }

    pub fn counts(&self) -> ShardCounts {
        self.counts
    }

    fn known(&self, account: &AccountKey) -> bool {
        self.shard.account(account, u64::MAX).is_some()
    }

    /// The accounts `command` could bring into being on this shard.
    fn touched(&self, command: &Command) -> Vec<AccountKey> {
        let mine = |account: &AccountKey| self.shard.config().shard_of(account) == self.shard.config().shard;
        match command {
            Command::Fund { funding } => vec![funding.account],
            Command::Confirm { certificate } => {
                let order = &certificate.order.order;
                let mut accounts = vec![order.sender];
                if let Recipient::Account(recipient) = order.recipient {
                    if mine(&recipient) {
                        accounts.push(recipient);
                    }
                }
                accounts
            }
            Command::Credit { credits, .. } => credits.iter().map(|c| c.recipient).collect(),
            Command::Vote { .. }
            | Command::Acked { .. }
            | Command::Prepare { .. }
            | Command::Lock { .. }
            | Command::EnterRound { .. }
            | Command::EnterEpoch { .. }
            | Command::HandOver { .. } => vec![],
        }
    }
}

fn convert(output: Output<AuthorityShard>) -> Output<TalliedShard> {
    match output {
        Output::Propose(command) => Output::Propose(command),
        Output::Send { to, message } => Output::Send { to, message },
        Output::Reply { ticket, reply } => Output::Reply { ticket, reply },
        Output::Report(report) => Output::Report(report),
    }
}

impl Role for TalliedShard {
    type Command = Command;
    type Input = Input;
    type Peer = ShardIndex;
    type Message = Message;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, now_ms: u64) {
        self.shard.lead(now_ms);
    }

    fn follow(&mut self) {
        self.shard.follow();
    }

    fn handle(&mut self, now_ms: u64, input: Input) {
        self.shard.handle(now_ms, input);
    }

    fn apply(&mut self, now_ms: u64, command: &Command) {
        let touched = self.touched(command);
        let new: Vec<AccountKey> = touched.into_iter().filter(|a| !self.known(a)).collect();
        let progress = |shard: &AuthorityShard| match command {
            Command::Vote { order, .. } => shard
                .account(&order.order.sender, u64::MAX)
                .is_some_and(|a| a.pending.is_some()),
            Command::Confirm { certificate } => {
                let order = &certificate.order.order;
                shard
                    .account(&order.sender, u64::MAX)
                    .is_some_and(|a| a.next_sequence > order.sequence)
            }
            _ => false,
        };
        let before = progress(&self.shard);
        self.shard.apply(now_ms, command);
        let after = progress(&self.shard);
        self.counts.accounts += new.iter().filter(|a| self.known(a)).count() as u64;
        if after && !before {
            match command {
                Command::Vote { .. } => self.counts.votes += 1,
                Command::Confirm { .. } => self.counts.confirmed += 1,
                _ => {}
            }
        }
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        self.shard.handle_timeout(now_ms);
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.shard.poll_output().map(convert)
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.shard.poll_timeout()
    }
}

impl Durable for TalliedShard {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        AuthorityShard::encode_command(command)
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Command, StateError> {
        self.shard.decode_command(bytes)
    }

    /// The role's snapshot, then the counts.
    fn snapshot(&self) -> Vec<u8> {
        let mut out = self.shard.snapshot();
        for count in [self.counts.accounts, self.counts.votes, self.counts.confirmed] {
            put_u64(&mut out, count);
        }
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), StateError> {
        let Some(split) = snapshot.len().checked_sub(COUNTS_BYTES) else {
            return Err(StateError::Decode(DecodeError::NonCanonical {
                what: "authority snapshot",
                reason: "shorter than its counts",
            }));
        };
        let (role, counts) = snapshot.split_at(split);
        let mut reader = Reader::new(counts);
        let counts = ShardCounts {
            accounts: reader.read_u64("snapshot accounts count")?,
            votes: reader.read_u64("snapshot votes count")?,
            confirmed: reader.read_u64("snapshot confirmed count")?,
        };
        reader.finish()?;
        self.shard.restore(role)?;
        self.counts = counts;
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), StateError> {
        self.shard.check_invariants()
    }
}

#[cfg(test)]
mod tests {
    use specie_authority::{AuthorityConfig, Funding};
    use specie_fastpay::{deterministic_key, Committee, TransferOrder, Vote};
    use specie_role::Round;

    use super::*;

    fn new_shard() -> (TalliedShard, Vec<specie_fastpay::SigningKey>) {
        let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
        let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
        let config = AuthorityConfig {
            committee,
            authority: 0,
            shard: 0,
            shards: 1,
            credit_retransmit_ms: 100,
            channel_credits_max: 100,
        };
        let mut shard = TalliedShard::new(AuthorityShard::new(config, keys[0].clone()));
        shard.lead(0);
        (shard, keys)
    }

    /// Runs rounds until the role proposes nothing more, applying what it proposes.
    fn settle(shard: &mut TalliedShard) -> Vec<Reply> {
        let mut replies = vec![];
        loop {
            let round = Round::take(shard);
            replies.extend(round.replies.into_iter().map(|(_, reply)| reply));
            if round.proposals.is_empty() {
                return replies;
            }
            for command in &round.proposals {
                shard.apply(0, command);
            }
        }
    }

    #[test]
    fn counts_follow_the_applied_commands_and_survive_a_snapshot() {
        let (mut shard, keys) = new_shard();
        let owner = deterministic_key("account", 1);
        let sender = AccountKey(owner.verifying_key().to_bytes());
        let recipient = AccountKey(deterministic_key("account", 2).verifying_key().to_bytes());
        let funding = Funding {
            id: [1; 32],
            account: sender,
            amount: 10,
        };
        shard.handle(0, Input::Fund { ticket: 1, funding });
        shard.handle(0, Input::Fund { ticket: 2, funding });
        settle(&mut shard);
        assert_eq!(
            shard.counts(),
            ShardCounts {
                accounts: 1,
                votes: 0,
                confirmed: 0
            }
        );

        let order = TransferOrder {
            sender,
            recipient: Recipient::Account(recipient),
            amount: 4,
            sequence: 0,
            memo: vec![],
        }
        .sign(&owner);
        shard.handle(
            0,
            Input::Transfer {
                ticket: 3,
                order: order.clone(),
            },
        );
        let [Reply::Voted(own)] = &settle(&mut shard)[..] else {
            panic!("one vote")
        };
        // The same order again: the same vote, nothing new to count.
        shard.handle(
            0,
            Input::Transfer {
                ticket: 4,
                order: order.clone(),
            },
        );
        settle(&mut shard);
        assert_eq!(shard.counts().votes, 1);

        // Every authority's round-0 vote: the fast path's final certificate.
        let statement = own.statement;
        let votes: Vec<Vote> = (0..4u16)
            .map(|a| Vote {
                authority: a,
                statement,
                signature: statement.sign(&keys[usize::from(a)]),
            })
            .collect();
        let certificate = specie_fastpay::Certificate::from_votes(order, &votes);
        shard.handle(
            0,
            Input::Confirm {
                ticket: 5,
                certificate: certificate.clone(),
            },
        );
        shard.handle(0, Input::Confirm { ticket: 6, certificate });
        settle(&mut shard);
        let counts = ShardCounts {
            accounts: 2,
            votes: 1,
            confirmed: 1,
        };
        assert_eq!(shard.counts(), counts);

        let snapshot = shard.snapshot();
        let (mut restored, _) = new_shard();
        restored.follow();
        restored.restore(&snapshot).unwrap();
        assert_eq!(restored.counts(), counts);
        assert_eq!(restored.shard().balances(), 10);
        assert!(restored.restore(&snapshot[..COUNTS_BYTES - 1]).is_err());
    }
}
