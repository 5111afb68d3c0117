//! An authority shard on the embedded host: its vote is durable before it leaves, so a restarted
//! shard answers exactly as before and never votes for a second order at a sequence number.

use std::path::Path;

use crossbeam_channel::{Receiver, Sender};
use specie_authority::{shard_of, AuthorityConfig, AuthorityShard, Funding, Input, Refusal, Reply, Report};
use specie_fastpay::{deterministic_key, AccountKey, Committee, Recipient, SignedOrder, TransferOrder};
use specie_host::{EmbeddedHost, HostMessage, Wiring};
use specie_log::LogOptions;
use specie_role::Ticket;

/// A caller's request without its ticket.
enum Call {
    Transfer(SignedOrder),
    Fund(Funding),
}

struct Replies(Sender<Reply>);

impl Wiring<AuthorityShard> for Replies {
    type Call = Call;
    type ReplyTo = ();
    fn input(call: Call, ticket: Ticket) -> Input {
        match call {
            Call::Transfer(order) => Input::Transfer { ticket, order },
            Call::Fund(funding) => Input::Fund { ticket, funding },
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

fn shard() -> AuthorityShard {
    let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
    let config = AuthorityConfig {
        committee,
        authority: 2,
        shard: 0,
        shards: 1,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    };
    AuthorityShard::new(config, keys[2].clone())
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
    let (calls_tx, calls_rx) = crossbeam_channel::unbounded();
    let thread = std::thread::spawn(move || host.run(calls_rx, crossbeam_channel::never()));
    // One at a time: a transfer handled in the same turn as its funding would find the
    // account not funded yet (the funding is not durable until the turn's fsync).
    let answered = calls
        .into_iter()
        .map(|call| {
            calls_tx.send(HostMessage::Calls(vec![(call, ())])).unwrap();
            replies.recv().unwrap()
        })
        .collect();
    // Stopped without a snapshot or any farewell: what a restart finds is only what the log has.
    calls_tx.send(HostMessage::Stop).unwrap();
    thread.join().unwrap();
    answered
}

#[test]
fn a_restarted_shard_gives_the_same_vote_and_refuses_a_second_order_for_the_sequence_number() {
    let owner = deterministic_key("account", 1);
    let sender = AccountKey(owner.verifying_key().to_bytes());
    assert_eq!(shard_of(&sender, 1), 0);
    let order = |to: u64| {
        TransferOrder {
            sender,
            recipient: Recipient::Account(AccountKey(deterministic_key("account", to).verifying_key().to_bytes())),
            amount: 10,
            sequence: 0,
            memo: Vec::new(),
        }
        .sign(&owner)
    };
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
