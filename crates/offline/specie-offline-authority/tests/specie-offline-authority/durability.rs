//! The offline authority on the embedded host, over a real log with fsync: every verified history
//! and every outcome is durable before it is answered, so a restarted authority answers a deposit
//! exactly as before, still refuses the double spend, and still holds the evidence. Stopped with
//! no snapshot or farewell, as `kill -9` would leave it; and again with a snapshot every round.

use crate::world;

use std::path::Path;

use crossbeam_channel::Sender;
use specie_host::{call_in_turn, EmbeddedHost, Wiring};
use specie_log::LogOptions;
use specie_offline::{deterministic_key, Instruction, KeyBinding, KeyCertificate, Move, SigningKey, Token};
use specie_offline_authority::{DepositOutcome, Funding, Input, OfflineAuthority, Reply, Report};
use specie_role::Ticket;
use world::{authority_keys, PERIOD};

type Call = Box<dyn FnOnce(Ticket) -> Input + Send>;

struct Replies(Sender<Reply>);

impl Wiring<OfflineAuthority> for Replies {
    type Call = Call;
    type ReplyTo = ();
    fn input(call: Call, ticket: Ticket) -> Input {
        call(ticket)
    }
    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }
    fn reply(&mut self, (): (), reply: Reply) {
        self.0.send(reply).unwrap();
    }
    fn report(&mut self, _report: Report) {}
}

/// Starts a host over `dir` (recovering what is there), makes the calls one at a time, stops.
fn run(dir: &Path, snapshot_log_bytes: u64, calls: Vec<Call>) -> Vec<Reply> {
    let (replies_tx, replies) = crossbeam_channel::unbounded();
    let authority = OfflineAuthority::new(authority_keys());
    let host = EmbeddedHost::recover(
        "offline-authority",
        authority,
        Replies(replies_tx),
        dir,
        LogOptions::default(),
        snapshot_log_bytes,
    )
    .unwrap();
    call_in_turn(host, calls, &replies)
}

fn deposit(token: &Token, owner: &SigningKey, to: [u8; 32]) -> Call {
    let instruction = Instruction::Reissue {
        outputs: vec![(100, to)],
    };
    let statement = Move::Deposit {
        instruction: instruction.hash(),
        nonce: [0; 16],
    }
    .sign(token, owner);
    let token = Box::new(token.clone());
    Box::new(move |ticket| Input::Deposit {
        ticket,
        token,
        statement,
        instruction,
    })
}

#[test]
fn a_restarted_authority_answers_deposits_as_before_and_keeps_the_evidence() {
    let keys = authority_keys();
    let ring = keys.ring();
    // Devices 1 (Alice), 2 (Bob), 3 (Carol), each with two one-time keys.
    let identity = |n: u64| deterministic_key("identity", n);
    let one_time = |n: u64, i: u64| deterministic_key("one-time", n * 1_000 + i);
    let public = |key: SigningKey| key.verifying_key().to_bytes();
    let certificate = |n: u64, i: u64| KeyCertificate::sign(public(one_time(n, i)), PERIOD, &keys.certifying(PERIOD));
    for snapshot_log_bytes in [u64::MAX, 0] {
        let dir = tempfile::tempdir().unwrap();
        let mut enrol: Vec<Call> = Vec::new();
        for n in 1..=3 {
            let identity_key = public(identity(n));
            enrol.push(Box::new(move |ticket| Input::Register {
                ticket,
                identity: identity_key,
            }));
            let bindings: Vec<_> = (0..2)
                .map(|i| KeyBinding::sign(&identity(n), public(one_time(n, i))))
                .collect();
            enrol.push(Box::new(move |ticket| Input::Certify { ticket, bindings }));
        }
        let funding = Funding {
            id: [1; 32],
            amount: 100,
            owners: vec![public(one_time(1, 0))],
        };
        enrol.push(Box::new(move |ticket| Input::Fund { ticket, funding }));
        let enrolled = run(dir.path(), snapshot_log_bytes, enrol);
        let Some(Reply::Funded { issuances }) = enrolled.last() else {
            panic!("{enrolled:?}");
        };
        let token = Token::issued(issuances[0]);
        let to_bob = token.transfer(&one_time(1, 0), certificate(2, 0), [1; 16]).unwrap();
        let to_carol = token.transfer(&one_time(1, 0), certificate(3, 0), [2; 16]).unwrap();

        let deposits = || {
            vec![
                deposit(&to_bob, &one_time(2, 0), public(one_time(2, 1))),
                deposit(&to_carol, &one_time(3, 0), public(one_time(3, 1))),
            ]
        };
        let first = run(dir.path(), snapshot_log_bytes, deposits());
        assert!(
            matches!(first[0], Reply::Deposited(DepositOutcome::Reissued { .. })),
            "{first:?}"
        );
        let alice = public(identity(1));
        assert_eq!(
            first[1],
            Reply::Deposited(DepositOutcome::DoubleSpent {
                serial: token.issuance.serial,
                debtor: alice,
                value: 100
            })
        );

        let mut again = deposits();
        again.push(Box::new(move |ticket| Input::Evidence {
            ticket,
            identity: alice,
        }));
        again.push(Box::new(|ticket| Input::Books { ticket }));
        let after = run(dir.path(), snapshot_log_bytes, again);
        assert_eq!(after[..2], first[..], "answered exactly as before the restart");
        let Reply::Evidence(evidence) = &after[2] else {
            panic!("{:?}", after[2]);
        };
        assert_eq!(evidence.len(), 1);
        assert_eq!(evidence[0].check(&ring).unwrap().identity, alice);
        let Reply::Books(books) = &after[3] else {
            panic!("{:?}", after[3]);
        };
        assert_eq!((books.funded, books.outstanding, books.debts.len()), (100, 100, 1));
    }
}
