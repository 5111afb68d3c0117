//! Untrusted input (`docs/credential-format.md` §3): every encoding round-trips, random bytes and
//! mutated vectors never panic a decoder, and whatever decodes re-encodes to exactly its input.

use std::sync::OnceLock;

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, DecodeError, Encode, Reader};
use specie_credential::unlinkable::{
    deal_certifiers, Certificate, CertificateShare, CertifierGroup, CertifierSecret, PublicAmounts, SerialNumber,
    SpentToken, Token, TokenOpening, TransferPlan, UnlinkableKeys, UnlinkableTransfer,
};
use specie_credential::{
    AuditorKey, AuditorSecret, Credential, EnrolmentChallenge, EnrolmentId, EnrolmentRequest, Identity, Jurisdiction,
    OwnerAudit, OwnerCiphertext, OwnerCommitment, OwnerOpening, RaPublicKey, RegistrationAuthority, SpendProof,
    UserSecret, SPEND_PROOF_BYTES_MAX,
};
use specie_vectors::{decode_canonical, mutate, mutation};

/// One encoding of every kind, made from a seed.
fn encodings(seed: u64, auditors: usize) -> Vec<Vec<u8>> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let secret = UserSecret::random(&mut rng);
    let id = EnrolmentId(seed);
    let challenge = ra.challenge(id, Jurisdiction(seed as u32), &mut rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let identity = Identity::new(secret, credential.clone(), &ra.public_key()).unwrap();
    let opening = OwnerOpening::random(id, &mut rng);
    let mut keys: Vec<AuditorKey> = (0..auditors)
        .map(|_| AuditorSecret::random(&mut rng).public())
        .collect();
    keys.sort();
    let proof = identity
        .prove_spend(&ra.public_key(), &opening, &[seed as u8; 32], &keys, &mut rng)
        .unwrap();
    let mut out = vec![
        ra.public_key().encode(),
        challenge.encode(),
        request.encode(),
        credential.encode(),
        opening.encode(),
        opening.commitment().encode(),
        proof.encode(),
    ];
    if let Some(key) = keys.first() {
        out.push(key.encode());
        out.push(proof.auditor_ciphertexts()[0].encode());
        out.push(OwnerAudit::prove(&opening, *key, &[1; 32], &mut rng).encode());
    }
    out.extend(unlinkable_encodings(&identity, &ra.public_key(), &keys, &mut rng));
    out
}

/// One encoding of every kind of the unlinkable level (docs/unlinkable-format.md §3).
fn unlinkable_encodings(
    identity: &Identity,
    authority: &RaPublicKey,
    auditors: &[AuditorKey],
    rng: &mut StdRng,
) -> Vec<Vec<u8>> {
    let (group, certifiers) = deal_certifiers(2, 2, rng).unwrap();
    let keys = UnlinkableKeys {
        authority,
        certifiers: &group,
    };
    let opening = TokenOpening::random(identity.enrolment_id(), 7, rng);
    let token = opening.token();
    let shares: Vec<CertificateShare> = certifiers.iter().map(|c| c.certify(&token)).collect();
    let certificate = opening.certificate(&group, &shares).unwrap();
    let outputs = [TokenOpening::random(EnrolmentId(3), 7, rng)];
    let plan = TransferPlan {
        inputs: &[SpentToken {
            opening: &opening,
            certificate: &certificate,
        }],
        outputs: &outputs,
        amounts: PublicAmounts::default(),
        auditors,
    };
    let transfer = identity.prove_unlinkable(&keys, &plan, &[2; 32], rng).unwrap();
    vec![
        token.encode(),
        opening.encode(),
        opening.serial_number(identity).unwrap().encode(),
        group.encode(),
        certifiers[0].encode(),
        shares[0].encode(),
        certificate.encode(),
        transfer.encode(),
    ]
}

fn canonical<T: Decode<Limits = ()> + Encode>(bytes: &[u8]) -> Result<bool, TestCaseError> {
    let decoded = decode_canonical(
        bytes,
        T::encoded_bytes_max(&()),
        |reader: &mut Reader<'_>| T::decode_from(reader, &()),
        |value: &T, out: &mut Vec<u8>| value.encode_to(out),
    )?;
    Ok(decoded.is_some())
}

/// Feeds `bytes` to every decoder; returns how many accepted it.
fn decode_all(bytes: &[u8]) -> Result<usize, TestCaseError> {
    let accepted = [
        canonical::<RaPublicKey>(bytes)?,
        canonical::<EnrolmentChallenge>(bytes)?,
        canonical::<EnrolmentRequest>(bytes)?,
        canonical::<Credential>(bytes)?,
        canonical::<OwnerOpening>(bytes)?,
        canonical::<OwnerCommitment>(bytes)?,
        canonical::<AuditorKey>(bytes)?,
        canonical::<OwnerCiphertext>(bytes)?,
        canonical::<OwnerAudit>(bytes)?,
        canonical::<SpendProof>(bytes)?,
        canonical::<Token>(bytes)?,
        canonical::<TokenOpening>(bytes)?,
        canonical::<SerialNumber>(bytes)?,
        canonical::<CertifierGroup>(bytes)?,
        canonical::<CertifierSecret>(bytes)?,
        canonical::<CertificateShare>(bytes)?,
        canonical::<Certificate>(bytes)?,
        canonical::<UnlinkableTransfer>(bytes)?,
    ];
    Ok(accepted.iter().filter(|a| **a).count())
}

fn stored_encodings() -> &'static [Vec<u8>] {
    static ENCODINGS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    ENCODINGS.get_or_init(|| {
        let mut all = encodings(1, 2);
        all.extend(encodings(2, 0));
        all
    })
}

#[test]
fn every_encoding_decodes_as_exactly_one_kind() {
    for bytes in stored_encodings() {
        assert_eq!(decode_all(bytes).unwrap(), 1, "{}", hex::encode(bytes));
    }
}

#[test]
fn a_spend_proof_is_refused_beyond_its_limit_before_reading() {
    let too_long = vec![0u8; SPEND_PROOF_BYTES_MAX + 1];
    assert!(matches!(
        SpendProof::decode_exact(&too_long),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn non_canonical_elements_are_refused() {
    let bytes = &stored_encodings()[5]; // an owner commitment
                                        // The field modulus as x: not a canonical coordinate.
    let mut above_modulus = bytes.clone();
    above_modulus[2..].copy_from_slice(&[0xff; 48]);
    assert!(OwnerCommitment::decode_exact(&above_modulus).is_err());
    // The identity (compressed infinity flag).
    let mut identity = bytes.clone();
    identity[2] = 0xc0;
    identity[3..].fill(0);
    assert!(OwnerCommitment::decode_exact(&identity).is_err());
    // A scalar at least the group order, in an opening.
    let opening = &stored_encodings()[4];
    let mut big = opening.clone();
    let len = big.len();
    big[len - 32..].fill(0xff);
    assert!(OwnerOpening::decode_exact(&big).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn every_encoding_round_trips(seed in any::<u64>(), auditors in 0usize..=2) {
        for bytes in encodings(seed, auditors) {
            prop_assert_eq!(decode_all(&bytes)?, 1);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1600)) {
        decode_all(&bytes)?;
    }

    #[test]
    fn random_bytes_with_a_valid_header_never_panic(kind in 1u8..=0x12, mut bytes in prop::collection::vec(any::<u8>(), 0..4000)) {
        bytes.splice(0..0, [1, kind]);
        decode_all(&bytes)?;
    }

    #[test]
    fn mutated_encodings_never_panic(
        which in any::<prop::sample::Index>(),
        mutations in prop::collection::vec(mutation(prop_oneof![Just(0u32), Just(1), Just(4), Just(5), any::<u32>()]), 1..4),
    ) {
        let stored = stored_encodings();
        let mut bytes = stored[which.index(stored.len())].clone();
        for m in &mutations {
            mutate(&mut bytes, m);
        }
        decode_all(&bytes)?;
    }
}
