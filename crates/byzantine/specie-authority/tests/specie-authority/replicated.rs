//! An authority shard replicated by Raft inside one authority (three replicas, one trust
//! domain): a vote is committed before it leaves, so after the leader crashes the new leader
//! gives the same vote for the same order and refuses a conflicting one.

use specie_authority::{AuthorityConfig, AuthorityShard, Funding, Input, Message, Refusal, Reply, Report};
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{deterministic_key, AccountKey, Recipient, SignedOrder, TransferOrder};
use specie_faultnet::RoleGroup;
use specie_host::{Slot, Wiring};
use specie_role::Ticket;

enum Call {
    Transfer(SignedOrder),
    Fund(Funding),
}

struct SlotWiring;

impl Wiring<AuthorityShard> for SlotWiring {
    type Call = Call;
    type ReplyTo = Slot<Reply>;
    fn input(call: Call, ticket: Ticket) -> Input {
        match call {
            Call::Transfer(order) => Input::Transfer { ticket, order },
            Call::Fund(funding) => Input::Fund { ticket, funding },
        }
    }
    fn send(&mut self, _to: u32, _message: Message) {}
    fn reply(&mut self, slot: Slot<Reply>, reply: Reply) {
        slot.fill(reply);
    }
    fn report(&mut self, report: Report) {
        panic!("unexpected report {report:?}");
    }
}

fn shard() -> AuthorityShard {
    let signing = SigningCommittee::deterministic(4, 1);
    let config = AuthorityConfig {
        committee: signing.committee,
        authority: 1,
        shard: 0,
        shards: 1,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    };
    AuthorityShard::new(config, signing.keys[1].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_crash_the_new_leader_gives_the_same_vote_and_refuses_a_conflicting_order() {
    let mut group = RoleGroup::start("authority-1/shard-0", 3, shard, || SlotWiring).await;
    let owner = deterministic_key("account", 1);
    let sender = AccountKey(owner.verifying_key().to_bytes());
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
        id: [9; 32],
        account: sender,
        amount: 10,
    };
    assert_eq!(group.call(|| Call::Fund(funding)).await, Reply::Funded { id: [9; 32] });
    let vote = group.call(|| Call::Transfer(order(2))).await;
    assert!(matches!(vote, Reply::Voted(_)), "{vote:?}");

    let old = group.leader().await;
    group.crash(old).await;
    let new = group.leader().await;
    assert_ne!(new, old);
    assert_eq!(
        group.call(|| Call::Transfer(order(3))).await,
        Reply::Refused(Refusal::OtherOrderPending { sequence: 0 })
    );
    assert_eq!(
        group.call(|| Call::Transfer(order(2))).await,
        vote,
        "the same vote, byte for byte"
    );
    assert_eq!(group.call(|| Call::Fund(funding)).await, Reply::Funded { id: [9; 32] });
}
