//! Evidence of a double spend, checked with nothing but the key ring: the authority's tree gives
//! the chain to the node where a token branched, and the two statements there convict that
//! node's owner and name its registered identity. Evidence against an honest owner cannot be
//! made: a replay is the same statement, and a second statement needs the owner's signature.

use specie_codec::Reader;
use specie_offline::{
    decode_exact, DoubleSpend, EvidenceError, History, KeyBinding, KeyCertificate, Move, Recorded, Token, TokenError,
    DOUBLE_SPEND_BYTES_MAX,
};

use crate::issuing_world;

use issuing_world::{key, public, World, PERIOD};

/// One-time key `n` belongs to identity `100 + n`.
fn binding(n: u8) -> KeyBinding {
    KeyBinding::sign(&key(100 + n), public(n))
}

fn deposit_of(token: &Token, owner: u8) -> specie_offline::SignedMove {
    Move::Deposit {
        instruction: [3; 32],
        nonce: [4; 16],
    }
    .sign(token, &key(owner))
}

/// Alice (1) pays Bob (2) and Carol (3); Carol pays Dan (4) and Erin (5): the evidence of each
/// conflict the tree finds convicts Alice and Carol, names their identities, and survives its
/// encoding.
#[test]
fn each_conflict_the_tree_finds_is_evidence_that_convicts_its_owner_alone() {
    let w = World::new(20);
    let alice = w.issue(8, 1);
    let carol = w.pay(&alice, 1, 3, 11);
    let paths = [
        (w.pay(&alice, 1, 2, 10), 2),
        (w.pay(&carol, 3, 4, 12), 4),
        (w.pay(&carol, 3, 5, 13), 5),
    ];
    let mut history = History::new(&alice.issuance);
    let mut convicted = Vec::new();
    for (token, owner) in &paths {
        let Ok(Recorded::New { conflicts }) = history.record(token, Some(deposit_of(token, *owner))) else {
            panic!("a new path")
        };
        for conflict in conflicts {
            let accused = [1u8, 3].into_iter().find(|n| public(*n) == conflict.owner).unwrap();
            let evidence = DoubleSpend {
                token: history.chain_to(&conflict.node).expect("the tree holds the node"),
                first: conflict.first,
                second: conflict.second,
                binding: binding(accused),
            };
            let found = evidence.check(&w.ring).unwrap();
            assert_eq!(
                (found.one_time_key, found.identity, found.denomination),
                (public(accused), binding(accused).identity, 20)
            );
            let mut bytes = Vec::new();
            evidence.encode_to(&mut bytes);
            let decoded =
                decode_exact("double spend", &bytes, DOUBLE_SPEND_BYTES_MAX, DoubleSpend::decode_from).unwrap();
            assert_eq!(decoded, evidence);
            for cut in 0..bytes.len() {
                assert!(DoubleSpend::decode_from(&mut Reader::new(&bytes[..cut])).is_err());
            }
            convicted.push(accused);
        }
    }
    convicted.sort_unstable();
    assert_eq!(convicted, [1, 3]);
}

/// Bob received Alice's token once, honestly, and spent it once. Nothing anyone holds makes
/// evidence against him: the replayed transfer is the same statement, a second statement needs
/// his signature, and a binding of another key or a forged chain refuses to check.
#[test]
fn evidence_against_an_honest_owner_cannot_be_made() {
    let w = World::new(20);
    let alice = w.issue(8, 1);
    let bob = w.pay(&alice, 1, 2, 10);
    let bob_pays = Move::Transfer {
        next_owner: KeyCertificate::sign(public(3), PERIOD, &w.certifying),
        nonce: [20; 16],
    };
    let honest = bob_pays.sign(&bob, &key(2));
    let replay = DoubleSpend {
        token: bob.clone(),
        first: honest,
        second: honest,
        binding: binding(2),
    };
    assert_eq!(replay.check(&w.ring), Err(EvidenceError::SameStatement));

    let forged_second = Move::Transfer {
        next_owner: KeyCertificate::sign(public(4), PERIOD, &w.certifying),
        nonce: [21; 16],
    }
    .sign(&bob, &key(9));
    let framed = DoubleSpend {
        second: forged_second,
        ..replay.clone()
    };
    assert_eq!(framed.check(&w.ring), Err(EvidenceError::BadSignature));

    let bob_second = Move::Transfer {
        next_owner: KeyCertificate::sign(public(4), PERIOD, &w.certifying),
        nonce: [21; 16],
    }
    .sign(&bob, &key(2));
    let real = DoubleSpend {
        second: bob_second,
        ..replay.clone()
    };
    assert!(
        real.check(&w.ring).is_ok(),
        "had Bob signed twice, it would convict him"
    );
    let other_binding = DoubleSpend {
        binding: binding(3),
        ..real.clone()
    };
    assert_eq!(other_binding.check(&w.ring), Err(EvidenceError::BadBinding));
    let mut forged_chain = real.clone();
    forged_chain.token.hops[0].nonce[0] ^= 1;
    assert_eq!(
        forged_chain.check(&w.ring),
        Err(EvidenceError::Token(TokenError::BadTransfer { hop: 1 }))
    );
    let two_deposits = DoubleSpend {
        first: deposit_of(&bob, 2),
        second: Move::Deposit {
            instruction: [9; 32],
            nonce: [4; 16],
        }
        .sign(&bob, &key(2)),
        ..real
    };
    assert_eq!(two_deposits.check(&w.ring), Err(EvidenceError::BothDeposits));
}
