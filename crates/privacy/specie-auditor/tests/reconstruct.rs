//! A passive auditor reads a ledger from genesis: a mint, a shielding, a confidential payment
//! with an unshielded part, and a payment addressed to another jurisdiction's auditor. It must
//! reconstruct every value it has jurisdiction over (inputs from the outputs it read before),
//! see nothing of the other jurisdiction's values, and flag what is over its threshold.

use rand::rngs::StdRng;
use rand::SeedableRng;
use secp256k1::Keypair;
use specie_archiver::{Block, LedgerLimits, LedgerOfRecord, Offered, Record};
use specie_auditor::{AuditReadError, Audited, PassiveAuditor};
use specie_confidential::AuditorSecret;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, ConfidentialPlan, MintTransaction, NonceMode, Output, SpecieTransaction,
};

fn key(byte: u8) -> Keypair {
    keypair_from_secret(&[byte; 32]).unwrap()
}

fn owner(key: &Keypair) -> [u8; 32] {
    witness_program_commitment(&xonly_bytes(key))
}

fn seal(ledger: &mut LedgerOfRecord, txs: &[SpecieTransaction]) -> Block {
    for tx in txs {
        assert_eq!(
            ledger.offer(Record::new(tx.clone(), &tx.compact()).unwrap()),
            Offered::Waiting
        );
    }
    let block = ledger.seal().unwrap();
    ledger.apply(&block).unwrap();
    block
}

#[test]
fn a_passive_auditor_reconstructs_its_jurisdiction_and_only_it() {
    let mut rng = StdRng::seed_from_u64(7);
    let (alice, bob, carol, dave) = (key(1), key(2), key(3), key(4));
    let ours = AuditorSecret::from_seed(&[0xa1; 32]);
    let theirs = AuditorSecret::from_seed(&[0xb2; 32]);
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [9; 32],
        vec![
            Output {
                witness_program_commitment: owner(&alice),
                value: 100,
            },
            Output {
                witness_program_commitment: owner(&alice),
                value: 50,
            },
            Output {
                witness_program_commitment: owner(&dave),
                value: 500,
            },
        ],
        &key(8),
        NonceMode::Deterministic,
    ));
    let coins = mint.created_outputs();
    let (shield, openings) = ConfidentialPlan {
        transparent_inputs: vec![coins[0].to_input(), coins[1].to_input()],
        confidential_inputs: vec![],
        outputs: vec![(owner(&bob), 120), (owner(&alice), 30)],
        transparent_outputs: vec![],
        auditors: vec![ours.public()],
    }
    .prove_and_sign(&[alice, alice], NonceMode::Deterministic, &mut rng)
    .unwrap();
    let (pay, _) = ConfidentialPlan {
        transparent_inputs: vec![],
        confidential_inputs: vec![(shield.created_confidential_outputs()[0].to_input(), openings[0])],
        outputs: vec![(owner(&carol), 70)],
        transparent_outputs: vec![Output {
            witness_program_commitment: owner(&bob),
            value: 50,
        }],
        auditors: vec![ours.public()],
    }
    .prove_and_sign(&[bob], NonceMode::Deterministic, &mut rng)
    .unwrap();
    let (elsewhere, _) = ConfidentialPlan {
        transparent_inputs: vec![coins[2].to_input()],
        confidential_inputs: vec![],
        outputs: vec![(owner(&carol), 500)],
        transparent_outputs: vec![],
        auditors: vec![theirs.public()],
    }
    .prove_and_sign(&[dave], NonceMode::Deterministic, &mut rng)
    .unwrap();

    let mut ledger = LedgerOfRecord::new(LedgerLimits::default());
    let first = seal(&mut ledger, &[mint]);
    let second = seal(
        &mut ledger,
        &[SpecieTransaction::from(shield), SpecieTransaction::from(elsewhere)],
    );
    let third = seal(&mut ledger, &[SpecieTransaction::from(pay)]);

    let mut auditor = PassiveAuditor::new(ours, 100);
    assert_eq!(
        auditor.read(&second),
        Err(AuditReadError::OutOfOrder { read: 0, got: 2 })
    );
    let mut seen: Vec<Audited> = vec![];
    for block in [&first, &second, &third] {
        seen.extend(auditor.read(block).unwrap());
    }
    let values = |parties: &[specie_auditor::Party]| parties.iter().map(|p| p.value).collect::<Vec<_>>();
    assert_eq!(
        (seen[0].kind, seen[0].clear_in, seen[0].confidential),
        ("mint", 650, false)
    );
    let shield = &seen[1];
    assert!(shield.confidential && shield.readable() && shield.flagged);
    assert_eq!(values(&shield.inputs), vec![Some(100), Some(50)]);
    assert_eq!(values(&shield.outputs), vec![Some(120), Some(30)]);
    assert_eq!(shield.outputs[0].owner, owner(&bob));
    let elsewhere = &seen[2];
    assert_eq!(
        values(&elsewhere.inputs),
        vec![Some(500)],
        "the input was a transparent mint output"
    );
    assert_eq!(
        values(&elsewhere.outputs),
        vec![None],
        "another jurisdiction's value stays hidden"
    );
    assert!(!elsewhere.readable() && !elsewhere.flagged);
    let pay = &seen[3];
    assert_eq!(
        pay.inputs[0].owner,
        owner(&bob),
        "the payer, from the output read before"
    );
    assert_eq!(values(&pay.inputs), vec![Some(120)]);
    assert_eq!(values(&pay.outputs), vec![Some(50), Some(70)]);
    assert_eq!(pay.outputs[1].owner, owner(&carol));
    assert_eq!(pay.paid(), Some(120));
    assert!(!pay.flagged);
}
