//! An authority shard on the embedded host: its vote is durable before it leaves, so a restarted
//! shard answers exactly as before and never votes for a second order at a sequence number, nor
//! for a second order in a recovery round, nor in a round it left.

use std::path::Path;

use crossbeam_channel::{Receiver, Sender};
use specie_authority::{shard_of, AuthorityConfig, AuthorityShard, Funding, Input, Refusal, Reply, Report};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Justification, JustificationError, Recipient, RoundChange, SignedOrder,
    SignedRoundRequest, TransferOrder, VoteKind,
};
use specie_host::{call_in_turn, EmbeddedHost, Wiring};
use specie_log::LogOptions;
use specie_role::Ticket;

/// A caller's request without its ticket.
enum Call {
    Transfer(SignedOrder),
    Fund(Funding),
    RoundChange(SignedRoundRequest),
    Propose(SignedOrder, u32, Justification),
    Lock(Certificate),
}

struct Replies(Sender<Reply>);

impl Wiring<AuthorityShard> for Replies {
    type Call = Call;
    type ReplyTo = ();
    fn input(call: Call, ticket: Ticket) -> Input {
        match call {
            Call::Transfer(order) => Input::Transfer { ticket, order },
            Call::Fund(funding) => Input::Fund { ticket, funding },
            Call::RoundChange(request) => Input::RoundChange { ticket, request },
            Call::Propose(order, round, justification) => Input::Propose {
                ticket,
                order,
                round,
                justification: Box::new(justification),
            },
            Call::Lock(certificate) => Input::Lock { ticket, certificate },
        }
    }
    fn send(&mut self, _to: u32, _message: specie_authority::Message) {}
    fn reply(&mut self, (): (), reply: Reply) {
        self.0.send(reply).unwrap();
    }
    fn report(&mut self, report: Report) {
        panic!("unexpected report {report:?}");
    }
}

/// The shard's authority in the committee of [`SigningCommittee::deterministic`]`(4, 1)`.
const AUTHORITY: u16 = 2;

fn shard() -> AuthorityShard {
    let signing = SigningCommittee::deterministic(4, 1);
    let config = AuthorityConfig {
        committee: signing.committee,
        authority: AUTHORITY,
        shard: 0,
        shards: 1,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    };
    AuthorityShard::new(config, signing.keys[usize::from(AUTHORITY)].clone())
}

/// Starts a host over `dir` (recovering what is there) and makes the calls in order.
fn run(dir: &Path, snapshot_log_bytes: u64, calls: Vec<Call>) -> Vec<Reply> {
    let (replies_tx, replies): (Sender<Reply>, Receiver<Reply>) = crossbeam_channel::unbounded();
    let host = EmbeddedHost::recover(
        "authority",
        shard(),
        Replies(replies_tx),
        dir,
        LogOptions::default(),
        snapshot_log_bytes,
    )
    .unwrap();
    call_in_turn(host, calls, &replies)
}

/// Account 1's orders for its sequence number 0, each of all of its 10 to account `to`.
fn order(to: u64) -> SignedOrder {
    let owner = deterministic_key("account", 1);
    let sender = AccountKey(owner.verifying_key().to_bytes());
    assert_eq!(shard_of(&sender, 1), 0);
    TransferOrder {
        sender,
        recipient: Recipient::Account(AccountKey(deterministic_key("account", to).verifying_key().to_bytes())),
        amount: 10,
        sequence: 0,
        memo: Vec::new(),
    }
    .sign(&owner)
}

#[test]
fn a_restarted_shard_gives_the_same_vote_and_refuses_a_second_order_for_the_sequence_number() {
    let sender = order(2).order.sender;
    let funding = Funding {
        id: [5; 32],
        account: sender,
        amount: 10,
    };
    for snapshot_log_bytes in [u64::MAX, 0] {
        let dir = tempfile::tempdir().unwrap();
        let before = run(
            dir.path(),
            snapshot_log_bytes,
            vec![Call::Fund(funding), Call::Transfer(order(2))],
        );
        assert!(matches!(before[1], Reply::Voted(_)), "{before:?}");
        let after = run(
            dir.path(),
            snapshot_log_bytes,
            vec![Call::Transfer(order(3)), Call::Transfer(order(2)), Call::Fund(funding)],
        );
        assert_eq!(after[0], Reply::Refused(Refusal::OtherOrderPending { sequence: 0 }));
        assert_eq!(after[1], before[1], "the same vote, byte for byte");
        assert_eq!(after[2], Reply::Funded { id: [5; 32] }, "credited once, answered again");
    }
}

#[test]
fn a_restarted_shard_keeps_its_round_its_prepare_vote_and_its_lock() {
    let signing = SigningCommittee::deterministic(4, 1);
    let committee = &signing.committee;
    let (a, b) = (order(2), order(3));
    let sender = a.order.sender;
    let funding = Funding {
        id: [5; 32],
        account: sender,
        amount: 10,
    };
    let enter = |round: u32| signing.round_request(&deterministic_key("account", 1), 0, round);
    // Round changes of the other authorities, reporting no round-0 vote or, for `only`, `a`'s.
    let others = |round: u32, authorities: &[u16], prepared_first: Option<[u8; 32]>| {
        let change = RoundChange {
            committee_id: committee.id(),
            account: sender,
            sequence: 0,
            round,
            prepared_first,
            lock: None,
        };
        let changes = authorities
            .iter()
            .map(|&authority| signing.round_change(authority, change, None));
        changes.collect::<Vec<_>>()
    };
    let only_a = signing.justification(others(1, &[0, 1, 3], Some(a.order.digest())));
    let round_change = |reply: &Reply| match reply {
        Reply::RoundChanged(signed) => (**signed).clone(),
        other => panic!("not a round change: {other:?}"),
    };
    for snapshot_log_bytes in [u64::MAX, 0] {
        let dir = tempfile::tempdir().unwrap();
        let run = |calls| run(dir.path(), snapshot_log_bytes, calls);
        let first = run(vec![
            Call::Fund(funding),
            Call::RoundChange(enter(1)),
            Call::Transfer(a.clone()),
        ]);
        let entered = round_change(&first[1]);
        assert_eq!((entered.change.round, entered.change.prepared_first), (1, None));
        assert_eq!(
            first[2],
            Reply::Refused(Refusal::RoundPassed { round: 1 }),
            "round 0 is over here"
        );
        let mut changes = others(1, &[0, 1], None);
        changes.push(entered);
        let justification = signing.justification(changes);

        let second = run(vec![
            Call::RoundChange(enter(1)),
            Call::Transfer(a.clone()),
            Call::Propose(a.clone(), 2, justification.clone()),
            Call::Propose(b.clone(), 1, only_a.clone()),
            Call::Propose(a.clone(), 1, justification.clone()),
        ]);
        assert_eq!(second[0], first[1], "the same round change, byte for byte");
        assert_eq!(second[1], first[2]);
        assert_eq!(
            second[2],
            Reply::Refused(Refusal::Justification(JustificationError::OtherSlot { authority: 0 })),
            "a justification of round 1 is none for round 2"
        );
        assert_eq!(second[3], Reply::Refused(Refusal::NotAllowed));
        assert_eq!(
            second[4],
            Reply::Voted(signing.vote(AUTHORITY, VoteKind::Prepare, 1, &a))
        );

        let lock = signing.lock_certificate(1, &a, &[0, 1, AUTHORITY]);
        let third = run(vec![
            Call::Propose(b.clone(), 1, justification.clone()),
            Call::Propose(a.clone(), 1, justification.clone()),
            Call::RoundChange(enter(1)),
            Call::Lock(lock.clone()),
            Call::Lock(signing.lock_certificate(1, &b, &[0, 1, 3])),
            Call::RoundChange(enter(2)),
        ]);
        assert_eq!(third[0], Reply::Refused(Refusal::OtherOrderPending { sequence: 0 }));
        assert_eq!(third[1], second[4], "the same prepare vote, byte for byte");
        assert_eq!(third[2], Reply::Refused(Refusal::RoundPassed { round: 1 }));
        assert_eq!(third[3], Reply::Voted(signing.vote(AUTHORITY, VoteKind::Commit, 1, &a)));
        assert_eq!(third[4], Reply::Refused(Refusal::LockedOnOther { lock_round: 1 }));
        let reported = round_change(&third[5]);
        assert_eq!(reported.change.lock, Some((1, a.order.digest())));
        assert_eq!(reported.lock_certificate.as_ref(), Some(&lock));

        // Round 2 without this shard's report allows any order, but its lock on `a` holds.
        let any = signing.justification(others(2, &[0, 1, 3], None));
        let fourth = run(vec![
            Call::RoundChange(enter(2)),
            Call::Lock(lock),
            Call::Propose(b.clone(), 2, any),
        ]);
        assert_eq!(fourth[0], third[5], "the same round change with its lock");
        assert_eq!(
            fourth[1],
            Reply::Refused(Refusal::RoundPassed { round: 2 }),
            "round 1 is left"
        );
        assert_eq!(fourth[2], Reply::Refused(Refusal::LockedOnOther { lock_round: 1 }));
    }
}
