//! A passive auditor reads a ledger from genesis: a mint, a shielding, a confidential payment
//! with an unshielded part, and a payment addressed to another jurisdiction's auditor. It must
//! reconstruct every value it has jurisdiction over (inputs from the outputs it read before),
//! see nothing of the other jurisdiction's values, and flag what is over its threshold.

use rand::rngs::StdRng;
use rand::SeedableRng;
use secp256k1::Keypair;
use specie_archiver::{Block, LedgerLimits, LedgerOfRecord, Offered, Record};
use specie_auditor::{AuditReadError, Audited, Owner, OwnerView, PassiveAuditor};
use specie_confidential::AuditorSecret;
use specie_credential::{
    AuditDirectory, AuditorSecret as OwnerAuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerOpening,
    RegistrationAuthority, UserSecret,
};
use specie_private_transactions::{AnonymousPlan, AnonymousSpend, ConfidentialPlan};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction};

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

/// What a reader of the ledger hands the auditor: a block's height and its transactions.
fn read_block(auditor: &mut PassiveAuditor, block: &Block) -> Result<Vec<Audited>, AuditReadError> {
    auditor.read(
        block.header.height,
        block.records.iter().map(|record| record.transaction()),
    )
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
        read_block(&mut auditor, &second),
        Err(AuditReadError::OutOfOrder { read: 0, got: 2 })
    );
    let mut seen: Vec<Audited> = vec![];
    for block in [&first, &second, &third] {
        seen.extend(read_block(&mut auditor, block).unwrap());
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
    assert_eq!(shield.outputs[0].owner, Owner::Key(owner(&bob)));
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
        Owner::Key(owner(&bob)),
        "the payer, from the output read before"
    );
    assert_eq!(values(&pay.inputs), vec![Some(120)]);
    assert_eq!(values(&pay.outputs), vec![Some(50), Some(70)]);
    assert_eq!(pay.outputs[1].owner, Owner::Key(owner(&carol)));
    assert_eq!(pay.paid(), Some(120));
    assert!(!pay.flagged);
}

/// A mint of one coin of 100 to `to`, by issuer key 8.
fn mint_100(to: &Keypair) -> SpecieTransaction {
    SpecieTransaction::Mint(MintTransaction::new_signed(
        [9; 32],
        vec![Output {
            witness_program_commitment: owner(to),
            value: 100,
        }],
        &key(8),
        NonceMode::Deterministic,
    ))
}

fn enrol(ra: &mut RegistrationAuthority, id: u64, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::from_seed(&[id as u8; 32]);
    let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(1), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).unwrap();
    Identity::new(secret, credential, &ra.public_key()).unwrap()
}

/// Alice's coin enters as an anonymous output with its value in clear, then she pays bob
/// anonymously with the values hidden. The auditor with the owner key and a directory names
/// both and reads every value; one without the owner key sees the values but no owner.
#[test]
fn a_passive_auditor_names_anonymous_owners_in_its_directory() {
    let mut rng = StdRng::seed_from_u64(9);
    let mut ra = RegistrationAuthority::from_seed(&[0x51; 32]);
    let alice = enrol(&mut ra, 21, &mut rng);
    enrol(&mut ra, 22, &mut rng);
    let values = AuditorSecret::from_seed(&[0xa1; 32]);
    let owners = OwnerAuditorSecret::from_seed(&[0xa1; 32]);
    let alice_key = key(1);
    let mint = mint_100(&alice_key);
    let base = AnonymousPlan {
        transparent_inputs: vec![],
        anonymous_inputs: vec![],
        outputs: vec![],
        transparent_outputs: vec![],
        hide_values: false,
        value_auditors: vec![values.public()],
        owner_auditors: vec![owners.public()],
    };
    let alice_owner = OwnerOpening::random(EnrolmentId(21), &mut rng);
    let (enter, _) = AnonymousPlan {
        transparent_inputs: vec![mint.created_outputs()[0].to_input()],
        outputs: vec![(alice_owner, 100)],
        ..base.clone()
    }
    .prove_and_sign(&[alice_key], None, &ra.public_key(), NonceMode::Deterministic, &mut rng)
    .unwrap();
    let (pay, _) = AnonymousPlan {
        anonymous_inputs: vec![AnonymousSpend {
            input: enter.created_anonymous_outputs()[0].to_input(),
            owner: alice_owner,
            value: None,
        }],
        outputs: vec![
            (OwnerOpening::random(EnrolmentId(22), &mut rng), 60),
            (OwnerOpening::random(EnrolmentId(21), &mut rng), 40),
        ],
        hide_values: true,
        ..base
    }
    .prove_and_sign(&[], Some(&alice), &ra.public_key(), NonceMode::Deterministic, &mut rng)
    .unwrap();

    let mut ledger = LedgerOfRecord::new(LedgerLimits::default());
    let blocks = [
        seal(&mut ledger, &[mint]),
        seal(&mut ledger, &[SpecieTransaction::from(enter)]),
        seal(&mut ledger, &[SpecieTransaction::from(pay)]),
    ];
    let view = OwnerView {
        secret: owners,
        directory: AuditDirectory::new(ra.enrolled().map(|(id, _)| id)),
    };
    let mut named = PassiveAuditor::new(values.clone(), 1_000).with_owner_view(view);
    let mut blind = PassiveAuditor::new(values, 1_000);
    let read = |auditor: &mut PassiveAuditor| -> Vec<Audited> {
        blocks.iter().flat_map(|b| read_block(auditor, b).unwrap()).collect()
    };
    let (seen, unnamed) = (read(&mut named), read(&mut blind));
    let enter = &seen[1];
    assert!(enter.anonymous && !enter.confidential && enter.readable());
    assert_eq!(enter.inputs[0].owner, Owner::Key(owner(&alice_key)));
    assert_eq!(enter.outputs[0].owner, Owner::Enrolled(EnrolmentId(21)));
    let pay = &seen[2];
    assert!(pay.anonymous && pay.confidential && pay.readable());
    assert_eq!(
        pay.inputs[0].owner,
        Owner::Enrolled(EnrolmentId(21)),
        "the payer, from the output read before"
    );
    let outputs: Vec<(Owner, Option<u64>)> = pay.outputs.iter().map(|p| (p.owner, p.value)).collect();
    assert_eq!(
        outputs,
        vec![
            (Owner::Enrolled(EnrolmentId(22)), Some(60)),
            (Owner::Enrolled(EnrolmentId(21)), Some(40))
        ]
    );
    assert_eq!(
        unnamed[2].outputs[0],
        specie_auditor::Party {
            owner: Owner::Unknown,
            value: Some(60)
        }
    );
    assert_eq!(named.holdings(), (100, 0));
}

/// Alice's coin of 100 enters the unlinkable level as a token, she pays bob 60 unlinkably, and
/// bob leaves the level with 25 to an ordinary output. The auditor with the owner key names every
/// spender and payee and reads every new token's value (a spent token's is not repeated); every
/// auditor knows the level's total.
#[test]
fn a_passive_auditor_names_unlinkable_parties_reads_their_values_and_knows_the_levels_total() {
    use specie_credential::unlinkable::{deal_certifiers, CertificateShare, SpentToken, TokenOpening, UnlinkableKeys};
    use specie_private_transactions::UnlinkableBuild;

    let mut rng = StdRng::seed_from_u64(11);
    let mut ra = RegistrationAuthority::from_seed(&[0x53; 32]);
    let alice = enrol(&mut ra, 31, &mut rng);
    let bob = enrol(&mut ra, 32, &mut rng);
    let owners = OwnerAuditorSecret::from_seed(&[0xa3; 32]);
    let (group, certifiers) = deal_certifiers(2, 3, &mut rng).unwrap();
    let authority = ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &group,
    };
    let alice_key = key(1);
    let mint = mint_100(&alice_key);
    let certify = |opening: &TokenOpening| {
        let shares: Vec<CertificateShare> = certifiers[..2].iter().map(|c| c.certify(&opening.token())).collect();
        opening.certificate(&group, &shares).unwrap()
    };
    let base = |spent, outputs| UnlinkableBuild {
        transparent_inputs: vec![],
        spent,
        outputs,
        transparent_outputs: vec![],
        owner_auditors: vec![owners.public()],
    };
    let token = TokenOpening::random(EnrolmentId(31), 100, &mut rng);
    let enter = UnlinkableBuild {
        transparent_inputs: vec![mint.created_outputs()[0].to_input()],
        ..base(vec![], vec![token.clone()])
    }
    .prove_and_sign(&[alice_key], &alice, &keys, NonceMode::Deterministic, &mut rng)
    .unwrap();
    let certificate = certify(&token);
    let to_bob = TokenOpening::random(EnrolmentId(32), 60, &mut rng);
    let pay = base(
        vec![SpentToken {
            opening: &token,
            certificate: &certificate,
        }],
        vec![to_bob.clone(), TokenOpening::random(EnrolmentId(31), 40, &mut rng)],
    )
    .prove_and_sign(&[], &alice, &keys, NonceMode::Deterministic, &mut rng)
    .unwrap();
    let bobs = certify(&to_bob);
    let leave = UnlinkableBuild {
        transparent_outputs: vec![Output {
            witness_program_commitment: owner(&key(2)),
            value: 25,
        }],
        ..base(
            vec![SpentToken {
                opening: &to_bob,
                certificate: &bobs,
            }],
            vec![TokenOpening::random(EnrolmentId(32), 35, &mut rng)],
        )
    }
    .prove_and_sign(&[], &bob, &keys, NonceMode::Deterministic, &mut rng)
    .unwrap();

    let mut ledger = LedgerOfRecord::new(LedgerLimits::default());
    let blocks = [
        seal(&mut ledger, &[mint]),
        seal(&mut ledger, &[SpecieTransaction::from(enter)]),
        seal(
            &mut ledger,
            &[SpecieTransaction::from(pay), SpecieTransaction::from(leave)],
        ),
    ];
    let view = OwnerView {
        secret: owners,
        directory: AuditDirectory::new(ra.enrolled().map(|(id, _)| id)),
    };
    let mut auditor = PassiveAuditor::new(AuditorSecret::from_seed(&[0xa1; 32]), 1_000).with_owner_view(view);
    let seen: Vec<Audited> = blocks
        .iter()
        .flat_map(|b| read_block(&mut auditor, b).unwrap())
        .collect();
    let (enter, pay, leave) = (&seen[1], &seen[2], &seen[3]);
    assert!(enter.unlinkable && !enter.anonymous && enter.readable());
    assert_eq!(enter.inputs[0].owner, Owner::Key(owner(&alice_key)));
    assert_eq!(enter.outputs[0].owner, Owner::Enrolled(EnrolmentId(31)));
    assert_eq!(enter.outputs[0].value, Some(100), "the owner key reads a token's value");
    let parties = |parties: &[specie_auditor::Party]| parties.iter().map(|p| (p.owner, p.value)).collect::<Vec<_>>();
    assert_eq!(parties(&pay.inputs), vec![(Owner::Enrolled(EnrolmentId(31)), None)]);
    assert_eq!(
        parties(&pay.outputs),
        vec![
            (Owner::Enrolled(EnrolmentId(32)), Some(60)),
            (Owner::Enrolled(EnrolmentId(31)), Some(40))
        ]
    );
    assert_eq!(parties(&leave.inputs), vec![(Owner::Enrolled(EnrolmentId(32)), None)]);
    assert_eq!(leave.outputs[1].value, Some(35), "bob's change");
    assert_eq!(
        leave.outputs[0],
        specie_auditor::Party {
            owner: Owner::Key(owner(&key(2))),
            value: Some(25)
        }
    );
    // 100 entered, 25 left: 75 in the level; with the 25 coin, all 100 minted are accounted for.
    assert_eq!(auditor.unlinkable_pool(), 75);
    assert_eq!(auditor.holdings(), (100, 0));
}
