//! The unlinkable level end to end in one process, and the forgeries its verifier must refuse: a
//! wrong serial number, a token never certified, a replayed serial number, a balance that does not
//! hold, a proof lifted from another transaction, another range proof, any changed byte.

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};

use ark_ec::AffineRepr;

use crate::group::G1;
use crate::soundness::enrol;
use crate::unlinkable::*;
use crate::*;

const MESSAGE: [u8; 32] = [0x3c; 32];
const OTHER_MESSAGE: [u8; 32] = [0x3d; 32];

struct World {
    rng: StdRng,
    ra: RegistrationAuthority,
    group: CertifierGroup,
    certifiers: Vec<CertifierSecret>,
    alice: Identity,
    bob: Identity,
}

fn world(seed: u64) -> World {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let alice = enrol(&mut ra, 1, &mut rng);
    let bob = enrol(&mut ra, 2, &mut rng);
    let (group, certifiers) = deal_certifiers(3, 4, &mut rng).expect("3 of 4");
    World {
        rng,
        ra,
        group,
        certifiers,
        alice,
        bob,
    }
}

/// A spendable token: its opening and certificate.
type Held = (TokenOpening, Certificate);

impl World {
    fn certify(&self, opening: &TokenOpening) -> Certificate {
        let token = opening.token();
        let shares: Vec<CertificateShare> = self.certifiers[1..].iter().map(|c| c.certify(&token)).collect();
        opening.certificate(&self.group, &shares).expect("three honest shares")
    }

    /// Issues `value` to `owner` (no inputs, the value public) and certifies it.
    fn issue(&mut self, owner: EnrolmentId, value: u64) -> Held {
        let opening = TokenOpening::random(owner, value, &mut self.rng);
        let issuer = self.alice.clone();
        let keys = UnlinkableKeys {
            authority: &self.ra.public_key(),
            certifiers: &self.group,
        };
        let amounts = PublicAmounts {
            issued: value,
            redeemed: 0,
        };
        let proof = issuer
            .prove_unlinkable(
                &keys,
                &TransferPlan {
                    inputs: &[],
                    outputs: std::slice::from_ref(&opening),
                    amounts,
                    auditors: &[],
                },
                &MESSAGE,
                &mut self.rng,
            )
            .expect("an issue proof");
        assert_eq!(proof.verify(&keys, &MESSAGE), Ok(()));
        let certificate = self.certify(&opening);
        (opening, certificate)
    }

    fn pay(
        &mut self,
        from: &Identity,
        inputs: &[Held],
        outputs: &[TokenOpening],
        message: &[u8; 32],
    ) -> UnlinkableTransfer {
        let authority = self.ra.public_key();
        let keys = UnlinkableKeys {
            authority: &authority,
            certifiers: &self.group,
        };
        let spent: Vec<SpentToken<'_>> = inputs
            .iter()
            .map(|(opening, certificate)| SpentToken { opening, certificate })
            .collect();
        from.prove_unlinkable(
            &keys,
            &TransferPlan {
                inputs: &spent,
                outputs,
                amounts: PublicAmounts::default(),
                auditors: &[],
            },
            message,
            &mut self.rng,
        )
        .expect("an honest transfer")
    }

    fn verify(&self, proof: &UnlinkableTransfer, message: &[u8; 32]) -> Result<(), UnlinkableVerifyError> {
        let authority = self.ra.public_key();
        proof.verify(
            &UnlinkableKeys {
                authority: &authority,
                certifiers: &self.group,
            },
            message,
        )
    }
}

#[test]
fn issue_certify_transfer_and_spend_again() {
    let mut w = world(1);
    let a = w.issue(w.alice.enrolment_id(), 70);
    let b = w.issue(w.alice.enrolment_id(), 30);
    let to_bob = TokenOpening::random(w.bob.enrolment_id(), 60, &mut w.rng);
    let change = TokenOpening::random(w.alice.enrolment_id(), 40, &mut w.rng);
    // Three outputs (a padded range proof) and four.
    let alice = w.alice.clone();
    for values in [[50u64, 30, 20].as_slice(), &[25, 25, 25, 25]] {
        let outputs: Vec<TokenOpening> = values
            .iter()
            .map(|v| TokenOpening::random(w.bob.enrolment_id(), *v, &mut w.rng))
            .collect();
        let proof = w.pay(&alice, &[a.clone(), b.clone()], &outputs, &MESSAGE);
        assert_eq!(w.verify(&proof, &MESSAGE), Ok(()));
    }
    let alice = w.alice.clone();
    let proof = w.pay(&alice, &[a.clone(), b.clone()], &[to_bob.clone(), change], &MESSAGE);
    assert_eq!(w.verify(&proof, &MESSAGE), Ok(()));
    let serials: Vec<SerialNumber> = proof.serial_numbers().copied().collect();
    assert_eq!(
        serials,
        vec![a.0.serial_number(&alice).unwrap(), b.0.serial_number(&alice).unwrap()]
    );
    assert_eq!(proof.output_tokens().next(), Some(&to_bob.token()));

    // Bob certifies what he received (from any three certifiers) and spends it on.
    let held = (to_bob.clone(), w.certify(&to_bob));
    let bob = w.bob.clone();
    let onward = TokenOpening::random(w.alice.enrolment_id(), 60, &mut w.rng);
    let second = w.pay(&bob, std::slice::from_ref(&held), &[onward], &OTHER_MESSAGE);
    assert_eq!(w.verify(&second, &OTHER_MESSAGE), Ok(()));

    // Spending it again reveals the same serial number: the shards' second-spend refusal.
    let again = TokenOpening::random(w.bob.enrolment_id(), 60, &mut w.rng);
    let replay = w.pay(&bob, &[held], &[again], &MESSAGE);
    assert_eq!(w.verify(&replay, &MESSAGE), Ok(()));
    assert_eq!(replay.serial_numbers().next(), second.serial_numbers().next());
}

#[test]
fn forgeries_are_refused() {
    let mut w = world(2);
    let a = w.issue(w.alice.enrolment_id(), 50);
    let alice = w.alice.clone();
    let out = TokenOpening::random(w.bob.enrolment_id(), 50, &mut w.rng);
    let proof = w.pay(&alice, std::slice::from_ref(&a), std::slice::from_ref(&out), &MESSAGE);
    assert_eq!(w.verify(&proof, &MESSAGE), Ok(()));

    // A proof lifted into another transaction: its range proof is bound to the message (and so
    // is its challenge, which the wrong serial number below shows).
    assert_eq!(w.verify(&proof, &OTHER_MESSAGE), Err(UnlinkableVerifyError::Range));

    // A wrong serial number (another token's).
    let other = w.issue(w.alice.enrolment_id(), 5);
    let mut wrong_serial = proof.clone();
    wrong_serial.inputs[0].serial = other.0.serial_number(&alice).unwrap();
    assert_eq!(w.verify(&wrong_serial, &MESSAGE), Err(UnlinkableVerifyError::Equations));

    // A degenerate randomised certificate (the identity makes the pairing equation trivial).
    let mut degenerate = proof.clone();
    degenerate.inputs[0].token.randomized = [G1::zero(); 2];
    assert_eq!(
        w.verify(&degenerate, &MESSAGE),
        Err(UnlinkableVerifyError::Token { index: 0 })
    );

    // A balance that does not hold: more redeemed (or issued) than the proof balances.
    let mut unbalanced = proof.clone();
    unbalanced.amounts.issued = 1;
    assert_eq!(w.verify(&unbalanced, &MESSAGE), Err(UnlinkableVerifyError::Unbalanced));

    // Another transfer's range proof.
    let out2 = TokenOpening::random(w.bob.enrolment_id(), 5, &mut w.rng);
    let second = w.pay(&alice, &[other], &[out2], &MESSAGE);
    let mut lifted_range = proof.clone();
    lifted_range.range = second.range.clone();
    assert_eq!(w.verify(&lifted_range, &MESSAGE), Err(UnlinkableVerifyError::Range));

    // The same token twice in one transfer.
    let out3 = TokenOpening::random(w.bob.enrolment_id(), 100, &mut w.rng);
    let twice = w.pay(&alice, &[a.clone(), a.clone()], &[out3], &MESSAGE);
    assert_eq!(
        w.verify(&twice, &MESSAGE),
        Err(UnlinkableVerifyError::RepeatedSerialNumber)
    );

    // Someone else's token: the prover refuses, and Bob's credential cannot stand in for Alice's.
    let bob = w.bob.clone();
    let authority = w.ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &w.group,
    };
    let spent = [SpentToken {
        opening: &a.0,
        certificate: &a.1,
    }];
    let refused = bob.prove_unlinkable(
        &keys,
        &TransferPlan {
            inputs: &spent,
            outputs: std::slice::from_ref(&out),
            amounts: PublicAmounts::default(),
            auditors: &[],
        },
        &MESSAGE,
        &mut w.rng,
    );
    assert_eq!(refused.unwrap_err(), UnlinkableProveError::NotTheOwner { index: 0 });
    let mut swapped = proof.clone();
    let bobs_token = w.issue(w.bob.enrolment_id(), 50);
    let bobs = w.pay(&bob, &[bobs_token], std::slice::from_ref(&out), &MESSAGE);
    swapped.inputs[0].credential = bobs.inputs[0].credential.clone();
    assert!(w.verify(&swapped, &MESSAGE).is_err());
}

#[test]
fn a_token_never_certified_cannot_be_spent() {
    let mut w = world(3);
    // A rogue group certifies a token the real certifiers never saw; its proof is made under the
    // rogue key and fails under the real one.
    let (rogue, rogue_certifiers) = deal_certifiers(1, 1, &mut w.rng).unwrap();
    let forged = TokenOpening::random(w.alice.enrolment_id(), 1_000_000, &mut w.rng);
    let share = rogue_certifiers[0].certify(&forged.token());
    let certificate = forged.certificate(&rogue, &[share]).unwrap();
    let authority = w.ra.public_key();
    let rogue_keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &rogue,
    };
    let out = TokenOpening::random(w.bob.enrolment_id(), 1_000_000, &mut w.rng);
    let spent = [SpentToken {
        opening: &forged,
        certificate: &certificate,
    }];
    let proof = w
        .alice
        .prove_unlinkable(
            &rogue_keys,
            &TransferPlan {
                inputs: &spent,
                outputs: &[out],
                amounts: PublicAmounts::default(),
                auditors: &[],
            },
            &MESSAGE,
            &mut w.rng,
        )
        .unwrap();
    assert_eq!(proof.verify(&rogue_keys, &MESSAGE), Ok(()));
    assert!(w.verify(&proof, &MESSAGE).is_err());
    // And with the real key the prover refuses outright.
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &w.group,
    };
    let refused = w.alice.prove_unlinkable(
        &keys,
        &TransferPlan {
            inputs: &spent,
            outputs: std::slice::from_ref(&forged),
            amounts: PublicAmounts::default(),
            auditors: &[],
        },
        &MESSAGE,
        &mut w.rng,
    );
    assert_eq!(refused.unwrap_err(), UnlinkableProveError::Uncertified { index: 0 });
}

#[test]
fn certificates_need_threshold_valid_shares() {
    let mut w = world(4);
    let opening = TokenOpening::random(w.alice.enrolment_id(), 9, &mut w.rng);
    let other = TokenOpening::random(w.alice.enrolment_id(), 9, &mut w.rng);
    let token = opening.token();
    let mut shares: Vec<CertificateShare> = w.certifiers[..2].iter().map(|c| c.certify(&token)).collect();
    // A share for another token, and a duplicate, do not count.
    shares.push(w.certifiers[2].certify(&other.token()));
    shares.push(shares[0].clone());
    assert_eq!(
        opening.certificate(&w.group, &shares),
        Err(CertifyError::TooFewShares { valid: 2, threshold: 3 })
    );
    shares.push(w.certifiers[3].certify(&token));
    let certificate = opening.certificate(&w.group, &shares).expect("three valid shares");
    assert_eq!(certificate.check(&opening, &w.group), Ok(()));
    assert_eq!(
        certificate.check(&other, &w.group),
        Err(CertifyError::InvalidCertificate)
    );
    assert_eq!(
        deal_certifiers(5, 4, &mut w.rng).unwrap_err(),
        CertifyError::BadThreshold {
            threshold: 5,
            members: 4
        }
    );
}

#[test]
fn auditors_read_every_party_and_every_output_value() {
    let mut w = world(5);
    let auditor = AuditorSecret::random(&mut w.rng);
    let (to_bob, change) = ((1u64 << 33) + 7, u64::MAX - (1 << 33) - 7);
    let a = w.issue(w.alice.enrolment_id(), u64::MAX);
    let authority = w.ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &w.group,
    };
    let outputs = [
        TokenOpening::random(w.bob.enrolment_id(), to_bob, &mut w.rng),
        TokenOpening::random(w.alice.enrolment_id(), change, &mut w.rng),
    ];
    let spent = [SpentToken {
        opening: &a.0,
        certificate: &a.1,
    }];
    let proof = w
        .alice
        .prove_unlinkable(
            &keys,
            &TransferPlan {
                inputs: &spent,
                outputs: &outputs,
                amounts: PublicAmounts::default(),
                auditors: &[auditor.public()],
            },
            &MESSAGE,
            &mut w.rng,
        )
        .unwrap();
    assert_eq!(proof.verify(&keys, &MESSAGE), Ok(()));
    let directory = AuditDirectory::new([w.alice.enrolment_id(), w.bob.enrolment_id()]);
    let (spenders, payees) = proof.party_ciphertexts(&auditor.public());
    assert_eq!(directory.identify(&auditor, &spenders[0]), Ok(w.alice.enrolment_id()));
    assert_eq!(directory.identify(&auditor, &payees[0]), Ok(w.bob.enrolment_id()));
    let values: Vec<_> = (proof.value_ciphertexts(&auditor.public()).iter())
        .map(|ciphertext| auditor.read_value(ciphertext))
        .collect();
    assert_eq!(values, [Ok(to_bob), Ok(change)]);
    let stranger = AuditorSecret::random(&mut w.rng);
    assert!(proof.value_ciphertexts(&stranger.public()).is_empty());
    // A ciphertext swapped between parties, halves swapped, or values swapped between outputs no
    // longer match the proof.
    let mut swapped = proof.clone();
    std::mem::swap(&mut swapped.inputs[0].auditors[0], &mut swapped.outputs[0].auditors[0]);
    let mut halves = proof.clone();
    halves.outputs[0].values[0].swap(0, 1);
    let mut values = proof.clone();
    let first = values.outputs[0].values[0].clone();
    values.outputs[0].values[0] = std::mem::replace(&mut values.outputs[1].values[0], first);
    assert!(proof.verify(&keys, &MESSAGE).is_ok());
    for forged in [swapped, halves, values] {
        assert!(forged.verify(&keys, &MESSAGE).is_err());
    }
    // Halves that are not 32-bit numbers (a dishonest payer's) are unreadable, never misread.
    let too_big = crate::owner::CiphertextLinkProver::for_scalar(
        auditor.public(),
        crate::group::Scalar::from(1u64 << 40),
        crate::group::Scalar::from(1u8),
        &mut w.rng,
    );
    let mut unreadable = proof.value_ciphertexts(&auditor.public())[0];
    unreadable.halves[1] = too_big.ciphertext;
    assert_eq!(auditor.read_value(&unreadable), Err(AuditError::UnreadableValue));
}

#[test]
fn a_batch_names_the_failing_transfer() {
    let mut w = world(6);
    let alice = w.alice.clone();
    let mut proofs = Vec::new();
    for value in [3, 4, 5] {
        let held = w.issue(w.alice.enrolment_id(), value);
        let out = TokenOpening::random(w.bob.enrolment_id(), value, &mut w.rng);
        proofs.push(w.pay(&alice, &[held], &[out], &MESSAGE));
    }
    let authority = w.ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &w.group,
    };
    let items: Vec<(&UnlinkableTransfer, &[u8; 32])> = proofs.iter().map(|p| (p, &MESSAGE)).collect();
    assert_eq!(verify_unlinkable_batch(&keys, &items), Ok(()));
    let mut bad = proofs[1].clone();
    bad.inputs[0].token = proofs[2].inputs[0].token;
    let items = [(&proofs[0], &MESSAGE), (&bad, &MESSAGE), (&proofs[2], &MESSAGE)];
    assert_eq!(verify_unlinkable_batch(&keys, &items).unwrap_err().0, 1);
}

#[test]
fn encodings_round_trip_with_the_documented_sizes() {
    let mut w = world(7);
    let auditor = AuditorSecret::random(&mut w.rng).public();
    let a = w.issue(w.alice.enrolment_id(), 12);
    let authority = w.ra.public_key();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &w.group,
    };
    for outputs in 1..=OUTPUTS_MAX {
        let openings: Vec<TokenOpening> = (0..outputs)
            .map(|i| TokenOpening::random(w.bob.enrolment_id(), if i == 0 { 12 } else { 0 }, &mut w.rng))
            .collect();
        let spent = [SpentToken {
            opening: &a.0,
            certificate: &a.1,
        }];
        let proof = w
            .alice
            .prove_unlinkable(
                &keys,
                &TransferPlan {
                    inputs: &spent,
                    outputs: &openings,
                    amounts: PublicAmounts::default(),
                    auditors: &[auditor],
                },
                &MESSAGE,
                &mut w.rng,
            )
            .unwrap();
        let bytes = proof.encode();
        assert_eq!(bytes.len(), unlinkable_transfer_bytes(1, outputs, 1));
        let decoded = UnlinkableTransfer::decode_exact(&bytes).expect("an honest encoding decodes");
        assert_eq!(decoded, proof);
        assert_eq!(decoded.verify(&keys, &MESSAGE), Ok(()));
        assert!(UnlinkableTransfer::decode_exact(&bytes[..bytes.len() - 1]).is_err());
    }
    let token = a.0.token();
    assert_eq!(Token::decode_exact(&token.encode()), Ok(token));
    assert_eq!(token.encode().len(), TOKEN_BYTES);
    assert_eq!(TokenOpening::decode_exact(&a.0.encode()), Ok(a.0.clone()));
    assert_eq!(Certificate::decode_exact(&a.1.encode()), Ok(a.1.clone()));
    let share = w.certifiers[0].certify(&token);
    assert_eq!(CertificateShare::decode_exact(&share.encode()), Ok(share));
    assert_eq!(
        CertifierSecret::decode_exact(&w.certifiers[2].encode()),
        Ok(w.certifiers[2].clone())
    );
    let group_bytes = w.group.encode();
    assert_eq!(group_bytes.len(), certifier_group_bytes(4));
    assert_eq!(CertifierGroup::decode_exact(&group_bytes), Ok(w.group.clone()));
    let serial = a.0.serial_number(&w.alice).unwrap();
    assert_eq!(SerialNumber::decode_exact(&serial.encode()), Ok(serial));
}

#[test]
fn every_changed_byte_is_refused() {
    let mut w = world(8);
    let a = w.issue(w.alice.enrolment_id(), 21);
    let alice = w.alice.clone();
    let outputs = [
        TokenOpening::random(w.bob.enrolment_id(), 20, &mut w.rng),
        TokenOpening::random(w.alice.enrolment_id(), 1, &mut w.rng),
    ];
    let proof = w.pay(&alice, &[a], &outputs, &MESSAGE);
    let bytes = proof.encode();
    // Every byte of the header and counts, and a spread of the rest (each check verifies a proof).
    let positions: Vec<usize> = (0..24).chain((24..bytes.len()).step_by(61)).collect();
    for position in positions {
        let mut changed = bytes.clone();
        changed[position] ^= 0x01;
        if let Ok(decoded) = UnlinkableTransfer::decode_exact(&changed) {
            assert!(
                w.verify(&decoded, &MESSAGE).is_err(),
                "byte {position} changed, and the proof still verifies"
            );
        }
    }
}

#[test]
fn a_certifier_secret_belongs_to_its_group_at_its_index_only() {
    let w = world(9);
    for certifier in &w.certifiers {
        assert!(certifier.belongs_to(&w.group));
    }
    let (other, _) = deal_certifiers(3, 4, &mut StdRng::seed_from_u64(10)).unwrap();
    assert!(!w.certifiers[0].belongs_to(&other), "another group's member");
    let mut moved = w.certifiers[0].clone();
    moved.index = 2;
    assert!(!moved.belongs_to(&w.group), "another member's place");
}
