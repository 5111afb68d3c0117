//! Committee epochs at one authority shard: a record of the next epoch is entered only when a
//! quorum of the current seats signed it; open slots (a round-0 vote, a recovery round's lock)
//! carry over, signed again in the new committee's name; certificates of the old epoch stay
//! final; a replaced authority votes no more; and the authority that takes over its seat does so
//! from its predecessor's state, checked, and keeps every promise that seat made.

use specie_authority::{shard_of, AuthorityConfig, AuthorityShard, Command, Funding, Input, Refusal, Reply};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, CommitteeRecord, Recipient, RecordError, RoundChange, SignedOrder, SigningKey,
    TransferOrder, VoteKind,
};
use specie_role::{Durable, Output, Role};

/// A shard driven directly: every proposal is applied at once, and kept, as the log would.
struct Driven {
    shard: AuthorityShard,
    log: Vec<Vec<u8>>,
    next_ticket: u64,
}

impl Driven {
    fn new(shard: AuthorityShard) -> Driven {
        let mut shard = shard;
        shard.lead(0);
        Driven {
            shard,
            log: Vec::new(),
            next_ticket: 0,
        }
    }

    /// Hands the shard one input and returns its reply.
    fn call(&mut self, input: impl FnOnce(u64) -> Input) -> Reply {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.shard.handle(0, input(ticket));
        let mut reply = None;
        while let Some(output) = self.shard.poll_output() {
            match output {
                Output::Propose(command) => {
                    self.log.push(AuthorityShard::encode_command(&command));
                    self.shard.apply(0, &command);
                }
                Output::Reply { ticket: t, reply: r } if t == ticket => reply = Some(r),
                _ => {}
            }
        }
        reply.expect("answered")
    }

    /// Hands the shard every input before any of its proposals is applied (as a leader whose
    /// log is slow to commit), then applies them in order; returns the replies in input order.
    fn call_together(&mut self, inputs: Vec<Box<dyn FnOnce(u64) -> Input>>) -> Vec<Reply> {
        let mut tickets = Vec::new();
        for input in inputs {
            self.next_ticket += 1;
            tickets.push(self.next_ticket);
            self.shard.handle(0, input(self.next_ticket));
        }
        let mut proposals = std::collections::VecDeque::new();
        let mut replies = std::collections::BTreeMap::new();
        let mut drain = |shard: &mut AuthorityShard, proposals: &mut std::collections::VecDeque<Command>| {
            while let Some(output) = shard.poll_output() {
                match output {
                    Output::Propose(command) => proposals.push_back(command),
                    Output::Reply { ticket, reply } => drop(replies.insert(ticket, reply)),
                    _ => {}
                }
            }
        };
        drain(&mut self.shard, &mut proposals);
        // Applied in order, with what applying them proposes in turn (a hand-over).
        while let Some(command) = proposals.pop_front() {
            self.log.push(AuthorityShard::encode_command(&command));
            self.shard.apply(0, &command);
            drain(&mut self.shard, &mut proposals);
        }
        tickets.iter().map(|t| replies.remove(t).expect("answered")).collect()
    }

    /// A fresh shard of the same seat and key that replays this one's log: a restart.
    fn replayed(&self, config: AuthorityConfig, key: SigningKey) -> AuthorityShard {
        let mut replayed = AuthorityShard::new(config, key);
        for bytes in &self.log {
            let command: Command = replayed.decode_command(bytes).expect("the log reads back");
            replayed.apply(0, &command);
        }
        replayed
    }
}

fn config(committee: &SigningCommittee, seat: u16) -> AuthorityConfig {
    AuthorityConfig {
        committee: committee.committee.clone(),
        authority: seat,
        shard: 0,
        shards: 1,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    }
}

/// Account 1's order at `sequence` paying 10 to account `to`.
fn order(sequence: u64, to: u64) -> SignedOrder {
    let owner = deterministic_key("account", 1);
    let sender = AccountKey(owner.verifying_key().to_bytes());
    assert_eq!(shard_of(&sender, 1), 0);
    TransferOrder {
        sender,
        recipient: Recipient::Account(AccountKey(deterministic_key("account", to).verifying_key().to_bytes())),
        amount: 10,
        sequence,
        memo: Vec::new(),
    }
    .sign(&owner)
}

fn funding() -> Funding {
    Funding {
        id: [5; 32],
        account: order(0, 2).order.sender,
        amount: 100,
    }
}

/// Epoch 2 of `first`: seat 3 goes to `deterministic_key("authority", 4)`, endorsed by `seats`.
fn epoch_two(first: &SigningCommittee, seats: &[u16]) -> (CommitteeRecord, SigningCommittee) {
    let mut keys = first.keys.clone();
    keys[3] = deterministic_key("authority", 4);
    let second = SigningCommittee::new(2, keys);
    let mut record = CommitteeRecord::propose(&first.committee, second.committee.members().to_vec()).unwrap();
    for &seat in seats {
        record.endorse(seat, &first.keys[usize::from(seat)]);
    }
    (record, second)
}

fn enter(record: &CommitteeRecord) -> impl FnOnce(u64) -> Input + '_ {
    |ticket| Input::EnterEpoch {
        ticket,
        record: Box::new(record.clone()),
    }
}

#[test]
fn an_open_slot_carries_over_an_epoch_and_old_certificates_stay_final() {
    let first = SigningCommittee::deterministic(4, 1);
    let (record, second) = epoch_two(&first, &[0, 1, 2]);
    let mut shard = Driven::new(AuthorityShard::new(config(&first, 2), first.keys[2].clone()));
    shard.call(|ticket| Input::Fund {
        ticket,
        funding: funding(),
    });
    let (paid, open) = (order(0, 2), order(1, 3));
    shard.call(|ticket| Input::Transfer {
        ticket,
        order: paid.clone(),
    });
    let certificate = first.final_certificate(&paid);
    let confirm = |certificate: specie_fastpay::Certificate| move |ticket| Input::Confirm { ticket, certificate };
    assert!(matches!(
        shard.call(confirm(certificate.clone())),
        Reply::Confirmed { .. }
    ));
    let transfer = |order: SignedOrder| move |ticket| Input::Transfer { ticket, order };
    assert_eq!(
        shard.call(transfer(open.clone())),
        Reply::Voted(first.vote(2, VoteKind::Prepare, 0, &open))
    );

    // A record below the quorum, or not following the current epoch, is refused.
    let (short, _) = epoch_two(&first, &[0, 1]);
    assert_eq!(
        shard.call(enter(&short)),
        Reply::Refused(Refusal::Record(RecordError::BelowQuorum { signers: 2, quorum: 3 }))
    );
    let (mut three, _) = epoch_two(&first, &[]);
    three.previous_id = [9; 32];
    assert!(matches!(
        shard.call(enter(&three)),
        Reply::Refused(Refusal::Record(RecordError::OtherPrevious { .. }))
    ));
    assert_eq!(shard.call(enter(&record)), Reply::Epoch { epoch: 2 });
    assert_eq!(shard.call(enter(&record)), Reply::Epoch { epoch: 2 }, "idempotent");
    assert_eq!(
        shard.call(|ticket| Input::Epochs { ticket, after: 1 }),
        Reply::Epochs(vec![record.clone()])
    );

    // The open slot's vote carries over, now in epoch 2's name; the other order is refused.
    let carried = Reply::Voted(second.vote(2, VoteKind::Prepare, 0, &open));
    assert_eq!(shard.call(transfer(open.clone())), carried);
    assert_eq!(
        shard.call(transfer(order(1, 4))),
        Reply::Refused(Refusal::OtherOrderPending { sequence: 1 })
    );
    // A certificate of epoch 1 is still final: already confirmed, and a new one settles.
    assert!(matches!(shard.call(confirm(certificate)), Reply::Confirmed { .. }));
    assert!(matches!(
        shard.call(confirm(first.final_certificate(&open))),
        Reply::Confirmed { sequence: 1, .. }
    ));
    // A fast certificate of epoch 1 is no vote of epoch 2: an order confirmed in epoch 1 is
    // answered with its certificate, not with a vote signed for it then.
    assert_eq!(
        shard.call(transfer(paid.clone())),
        Reply::Final(Box::new(first.final_certificate(&paid)))
    );

    // A restart, from the log or from a snapshot, is in epoch 2 with the same state.
    let replayed = shard.replayed(config(&first, 2), first.keys[2].clone());
    assert_eq!(replayed.committee(), &second.committee);
    assert_eq!(replayed.snapshot(), shard.shard.snapshot());
    let mut restored = AuthorityShard::new(config(&first, 2), first.keys[2].clone());
    restored.restore(&shard.shard.snapshot()).unwrap();
    assert_eq!(restored.committee(), &second.committee);
    assert_eq!(restored.snapshot(), shard.shard.snapshot());
}

#[test]
fn a_replaced_authority_stops_voting_and_its_successor_keeps_its_promises() {
    let first = SigningCommittee::deterministic(4, 1);
    let (record, second) = epoch_two(&first, &[0, 1, 2]);
    let mut leaver = Driven::new(AuthorityShard::new(config(&first, 3), first.keys[3].clone()));
    leaver.call(|ticket| Input::Fund {
        ticket,
        funding: funding(),
    });
    let (open, other) = (order(0, 2), order(0, 3));
    let transfer = |order: SignedOrder| move |ticket| Input::Transfer { ticket, order };
    assert!(matches!(leaver.call(transfer(open.clone())), Reply::Voted(_)));

    // The successor cannot take a seat it does not hold yet: not from the state before the
    // epoch that appoints it, nor another seat's.
    let successor_key = deterministic_key("authority", 4);
    let early = AuthorityShard::take_over(config(&first, 3), successor_key.clone(), &leaver.shard.snapshot());
    assert!(early.is_err(), "the hand-over predates epoch 2");

    assert_eq!(leaver.call(enter(&record)), Reply::Epoch { epoch: 2 });
    assert!(!leaver.shard.seated());
    assert_eq!(
        leaver.call(transfer(open.clone())),
        Reply::Refused(Refusal::NotSeated { epoch: 2 }),
        "a replaced authority votes no more"
    );
    let hand_over = leaver.shard.snapshot();
    assert!(AuthorityShard::take_over(config(&first, 2), successor_key.clone(), &hand_over).is_err());

    // Its leader handed the log over as soon as it applied the epoch. The same log run with the
    // new key (the seat's replicas restarted with it) votes, with the seat's promises; so does
    // the log's snapshot. The log cut before the hand-over does not.
    let handed = leaver
        .log
        .last()
        .map(|bytes| leaver.shard.decode_command(bytes).unwrap());
    assert_eq!(handed, Some(Command::HandOver { epoch: 2 }));
    let mut rekeyed = Driven::new(leaver.replayed(config(&first, 3), successor_key.clone()));
    assert!(rekeyed.shard.seated());
    assert_eq!(
        rekeyed.call(transfer(open.clone())),
        Reply::Voted(second.vote(3, VoteKind::Prepare, 0, &open))
    );
    assert_eq!(
        rekeyed.call(transfer(other.clone())),
        Reply::Refused(Refusal::OtherOrderPending { sequence: 0 })
    );
    let mut restored = Driven::new(AuthorityShard::new(config(&first, 3), successor_key.clone()));
    restored.shard.restore(&hand_over).unwrap();
    assert_eq!(
        restored.call(transfer(open.clone())),
        Reply::Voted(second.vote(3, VoteKind::Prepare, 0, &open))
    );
    let cut = Driven {
        shard: AuthorityShard::new(config(&first, 3), first.keys[3].clone()),
        log: leaver.log[..leaver.log.len() - 1].to_vec(),
        next_ticket: 0,
    };
    assert!(!cut.replayed(config(&first, 3), successor_key.clone()).seated());
    // A shard of the new key that was not handed the seat's state does not vote either, not
    // even once someone brings it the record of the epoch that appoints its key: it would vote
    // without the seat's promises.
    let mut empty = Driven::new(AuthorityShard::new(config(&first, 3), successor_key.clone()));
    assert_eq!(
        empty.call(transfer(open.clone())),
        Reply::Refused(Refusal::NotSeated { epoch: 1 })
    );
    assert_eq!(empty.call(enter(&record)), Reply::Epoch { epoch: 2 });
    assert!(!empty.shard.seated());
    assert_eq!(
        empty.call(transfer(other.clone())),
        Reply::Refused(Refusal::NotSeated { epoch: 2 })
    );

    let mut successor = Driven::new(AuthorityShard::take_over(config(&first, 3), successor_key, &hand_over).unwrap());
    assert!(successor.shard.seated());
    assert_eq!(successor.shard.committee(), &second.committee);
    // The seat's round-0 vote is kept: the same order gets its vote in the successor's key,
    // the other order of the slot is refused.
    assert_eq!(
        successor.call(transfer(open.clone())),
        Reply::Voted(second.vote(3, VoteKind::Prepare, 0, &open))
    );
    assert_eq!(
        successor.call(transfer(other)),
        Reply::Refused(Refusal::OtherOrderPending { sequence: 0 })
    );
    // Its own snapshot, as its data directory keeps it, restarts it seated (the hand-over is
    // recorded in it); the same snapshot under the old key is not seated.
    let own = successor.shard.snapshot();
    let mut restarted = AuthorityShard::new(config(&first, 3), deterministic_key("authority", 4));
    restarted.restore(&own).unwrap();
    assert!(restarted.seated());
    let mut old_key = AuthorityShard::new(config(&first, 3), first.keys[3].clone());
    old_key.restore(&own).unwrap();
    assert!(!old_key.seated());
    // Its books are the seat's: the funding is known, answered again, not credited twice.
    assert_eq!(
        successor.call(|ticket| Input::Fund {
            ticket,
            funding: funding(),
        }),
        Reply::Funded { id: [5; 32] }
    );
    assert_eq!(successor.shard.funded(), 100);
}

#[test]
fn a_lock_of_the_old_epoch_binds_the_recovery_rounds_of_the_new_one() {
    let first = SigningCommittee::deterministic(4, 1);
    let (record, second) = epoch_two(&first, &[0, 1, 3]);
    let mut shard = Driven::new(AuthorityShard::new(config(&first, 2), first.keys[2].clone()));
    shard.call(|ticket| Input::Fund {
        ticket,
        funding: funding(),
    });
    let (a, b) = (order(0, 2), order(0, 3));
    let owner = deterministic_key("account", 1);
    // Round 1 of epoch 1: this shard prepares `a` and locks it.
    let round_change = |signing: &SigningCommittee, round: u32| {
        let request = signing.round_request(&owner, 0, round);
        move |ticket| Input::RoundChange { ticket, request }
    };
    let changed = match shard.call(round_change(&first, 1)) {
        Reply::RoundChanged(signed) => *signed,
        other => panic!("{other:?}"),
    };
    let others = |signing: &SigningCommittee, round: u32, seats: &[u16]| {
        let change = RoundChange {
            committee_id: signing.committee.id(),
            account: a.order.sender,
            sequence: 0,
            round,
            prepared_first: None,
            lock: None,
        };
        seats
            .iter()
            .map(|&seat| signing.round_change(seat, change, None))
            .collect::<Vec<_>>()
    };
    let mut changes = others(&first, 1, &[0, 1]);
    changes.push(changed);
    let justification = Box::new(first.justification(changes));
    let propose = |order: SignedOrder, round: u32, justification: Box<specie_fastpay::Justification>| {
        move |ticket| Input::Propose {
            ticket,
            order,
            round,
            justification,
        }
    };
    assert!(matches!(
        shard.call(propose(a.clone(), 1, justification)),
        Reply::Voted(_)
    ));
    let lock = first.lock_certificate(1, &a, &[0, 1, 2]);
    let lock_input = |certificate: specie_fastpay::Certificate| move |ticket| Input::Lock { ticket, certificate };
    assert_eq!(
        shard.call(lock_input(lock.clone())),
        Reply::Voted(first.vote(2, VoteKind::Commit, 1, &a))
    );

    assert_eq!(shard.call(enter(&record)), Reply::Epoch { epoch: 2 });
    // The commit vote on the lock carries over in epoch 2's name.
    assert_eq!(
        shard.call(lock_input(lock.clone())),
        Reply::Voted(second.vote(2, VoteKind::Commit, 1, &a))
    );
    // Round 2 in epoch 2: this shard reports its lock of epoch 1, which decides the round.
    assert!(matches!(
        shard.call(round_change(&first, 2)),
        Reply::Refused(Refusal::RoundRequest(_))
    ));
    let reported = match shard.call(round_change(&second, 2)) {
        Reply::RoundChanged(signed) => *signed,
        other => panic!("{other:?}"),
    };
    assert_eq!(reported.change.lock, Some((1, a.order.digest())));
    assert_eq!(reported.lock_certificate.as_ref(), Some(&lock));
    let mut changes = others(&second, 2, &[0, 1]);
    changes.push(reported);
    let justification = Box::new(second.justification(changes));
    assert_eq!(
        shard.call(propose(b, 2, justification.clone())),
        Reply::Refused(Refusal::NotAllowed)
    );
    assert_eq!(
        shard.call(propose(a.clone(), 2, justification)),
        Reply::Voted(second.vote(2, VoteKind::Prepare, 2, &a))
    );
}

#[test]
fn a_vote_signed_before_an_epoch_applied_first_is_kept_in_the_new_epoch_or_not_at_all() {
    let first = SigningCommittee::deterministic(4, 1);
    let (record, second) = epoch_two(&first, &[0, 1, 2]);
    let open = order(0, 2);
    let funded = |seat: u16, key: SigningKey| {
        let mut shard = Driven::new(AuthorityShard::new(config(&first, seat), key));
        shard.call(|ticket| Input::Fund {
            ticket,
            funding: funding(),
        });
        shard
    };
    let together = |record: &CommitteeRecord, order: &SignedOrder| -> Vec<Box<dyn FnOnce(u64) -> Input>> {
        let (record, order) = (Box::new(record.clone()), order.clone());
        vec![
            Box::new(move |ticket| Input::EnterEpoch { ticket, record }),
            Box::new(move |ticket| Input::Transfer { ticket, order }),
        ]
    };

    // A continuing seat: the vote, signed in epoch 1 and applied after epoch 2, is kept signed
    // again in epoch 2's name, on every replica alike (a replay of the log gives the same state).
    let mut shard = funded(2, first.keys[2].clone());
    let replies = shard.call_together(together(&record, &open));
    assert_eq!(replies[0], Reply::Epoch { epoch: 2 });
    assert_eq!(replies[1], Reply::Voted(second.vote(2, VoteKind::Prepare, 0, &open)));
    let transfer = |order: SignedOrder| move |ticket| Input::Transfer { ticket, order };
    assert_eq!(
        shard.call(transfer(open.clone())),
        Reply::Voted(second.vote(2, VoteKind::Prepare, 0, &open))
    );
    let replayed = shard.replayed(config(&first, 2), first.keys[2].clone());
    assert_eq!(replayed.snapshot(), shard.shard.snapshot());

    // The replaced seat: the vote is neither kept nor answered, so its successor need not know
    // of it and may vote for another order.
    let mut leaver = funded(3, first.keys[3].clone());
    let replies = leaver.call_together(together(&record, &open));
    assert_eq!(replies[0], Reply::Epoch { epoch: 2 });
    assert_eq!(replies[1], Reply::Refused(Refusal::NotSeated { epoch: 2 }));
    let successor_key = deterministic_key("authority", 4);
    let mut successor =
        Driven::new(AuthorityShard::take_over(config(&first, 3), successor_key, &leaver.shard.snapshot()).unwrap());
    let other = order(0, 3);
    assert_eq!(
        successor.call(transfer(other.clone())),
        Reply::Voted(second.vote(3, VoteKind::Prepare, 0, &other))
    );
}
