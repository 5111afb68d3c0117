//! The offline authority replicated by Raft (three replicas in one trust domain): a deposit's
//! outcome is committed before it is answered, so after the leader crashes the new leader answers
//! the same deposit with the same tokens, byte for byte, and still refuses the other branch of a
//! token spent twice, naming the spender.

use crate::world;

use specie_faultnet::RoleGroup;
use specie_host::{Slot, Wiring};
use specie_offline::{deterministic_key, Instruction, KeyBinding, KeyCertificate, Move, SignedMove, Token};
use specie_offline_authority::{DepositOutcome, Funding, Input, OfflineAuthority, Reply, Report};
use specie_role::Ticket;
use world::{authority_keys, PERIOD};

#[derive(Clone)]
enum Call {
    Register([u8; 32]),
    Certify(Vec<KeyBinding>),
    Fund(Funding),
    Deposit(Box<Token>, SignedMove, Instruction),
}

struct SlotWiring;

impl Wiring<OfflineAuthority> for SlotWiring {
    type Call = Call;
    type ReplyTo = Slot<Reply>;
    fn input(call: Call, ticket: Ticket) -> Input {
        match call {
            Call::Register(identity) => Input::Register { ticket, identity },
            Call::Certify(bindings) => Input::Certify { ticket, bindings },
            Call::Fund(funding) => Input::Fund { ticket, funding },
            Call::Deposit(token, statement, instruction) => Input::Deposit {
                ticket,
                token,
                statement,
                instruction,
            },
        }
    }
    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }
    fn reply(&mut self, slot: Slot<Reply>, reply: Reply) {
        slot.fill(reply);
    }
    fn report(&mut self, _report: Report) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_crash_the_new_leader_answers_deposits_alike_and_still_names_the_spender() {
    let mut group = RoleGroup::start(
        "offline-authority",
        3,
        || OfflineAuthority::new(authority_keys()),
        || SlotWiring,
    )
    .await;
    let keys = authority_keys();
    let public = |key: &specie_offline::SigningKey| key.verifying_key().to_bytes();
    // Devices 1 (Alice), 2 (Bob), 3 (Carol): an identity and two one-time keys each.
    let identity = |n: u64| deterministic_key("replicated-identity", n);
    let one_time = |n: u64, i: u64| deterministic_key("replicated-one-time", n * 10 + i);
    for n in 1..=3 {
        let id = public(&identity(n));
        assert_eq!(group.call(|| Call::Register(id)).await, Reply::Registered);
        let bindings: Vec<KeyBinding> = (0..2)
            .map(|i| KeyBinding::sign(&identity(n), public(&one_time(n, i))))
            .collect();
        let reply = group.call(|| Call::Certify(bindings.clone())).await;
        assert!(matches!(reply, Reply::Certified { .. }), "{reply:?}");
    }
    let funding = Funding {
        id: [1; 32],
        amount: 100,
        owners: vec![public(&one_time(1, 0))],
    };
    let Reply::Funded { issuances } = group.call(|| Call::Fund(funding.clone())).await else {
        panic!("funding refused");
    };
    let token = Token::issued(issuances[0]);
    let certificate = |n: u64| KeyCertificate::sign(public(&one_time(n, 0)), PERIOD, &keys.certifying(PERIOD));
    let to_bob = token.transfer(&one_time(1, 0), certificate(2), [1; 16]).unwrap();
    let to_carol = token.transfer(&one_time(1, 0), certificate(3), [2; 16]).unwrap();
    let deposit = |paid: &Token, n: u64| {
        let instruction = Instruction::Reissue {
            outputs: vec![(100, public(&one_time(n, 1)))],
        };
        let statement = Move::Deposit {
            instruction: instruction.hash(),
            nonce: [0; 16],
        }
        .sign(paid, &one_time(n, 0));
        Call::Deposit(Box::new(paid.clone()), statement, instruction)
    };
    let bobs = deposit(&to_bob, 2);
    let paid = group.call(|| bobs.clone()).await;
    assert!(
        matches!(paid, Reply::Deposited(DepositOutcome::Reissued { .. })),
        "{paid:?}"
    );

    let old = group.leader().await;
    group.crash(old).await;
    assert_ne!(group.leader().await, old);
    assert_eq!(
        group.call(|| bobs.clone()).await,
        paid,
        "the same tokens, byte for byte"
    );
    let carols = deposit(&to_carol, 3);
    assert_eq!(
        group.call(|| carols.clone()).await,
        Reply::Deposited(DepositOutcome::DoubleSpent {
            serial: token.issuance.serial,
            debtor: public(&identity(1)),
            value: 100
        })
    );
    assert!(
        matches!(group.call(|| Call::Fund(funding.clone())).await, Reply::Funded { .. }),
        "credited once"
    );
}
