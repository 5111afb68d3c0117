//! Every decoder takes untrusted bytes: fed arbitrary bytes, or valid encodings (the stored
//! vectors of `docs/byzantine-vectors.json`) with a few mutations, none panics, whatever decodes
//! re-encodes to exactly its input (one encoding per value), and the checks a verifier makes on
//! a decoded value (`check`, `convicted`) do not panic either.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;
use specie_fastpay::{
    decode_exact, Certificate, Committee, CommitteeRecord, Evidence, Justification, RoundRequest, SignedOrder,
    SignedRoundChange, SignedRoundRequest, Vote, ENCODING_VERSION,
};
use specie_vectors::{decode_canonical, mutate, single_byte_changes, Mutation};

/// Above every valid encoding these tests make, so that only the decoders refuse.
const INPUT_BYTES_MAX: usize = 1 << 16;

/// The stored vectors that are whole encodings, each a seed for mutation, with the decoder
/// that accepts it.
const SEEDS: [(&str, Decoder); 15] = [
    ("committee", Decoder::Committee),
    ("transfer_signed_order", Decoder::SignedOrder),
    ("redeem_signed_order", Decoder::SignedOrder),
    ("vote[0]", Decoder::Vote),
    ("vote[3]", Decoder::Vote),
    ("certificate", Decoder::Certificate),
    ("conflicting_certificate", Decoder::Certificate),
    ("evidence", Decoder::Evidence),
    ("lock_certificate", Decoder::Certificate),
    ("signed_round_request", Decoder::SignedRoundRequest),
    ("signed_round_change[0]", Decoder::SignedRoundChange),
    ("signed_round_change[2]", Decoder::SignedRoundChange),
    ("justification", Decoder::Justification),
    ("committee_record", Decoder::CommitteeRecord),
    ("transfer_order", Decoder::None),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decoder {
    Committee,
    SignedOrder,
    Vote,
    Certificate,
    Evidence,
    SignedRoundRequest,
    SignedRoundChange,
    Justification,
    CommitteeRecord,
    /// An unsigned transfer order: no decoder here takes it whole.
    None,
}

fn seed_bytes() -> &'static Vec<Vec<u8>> {
    static SEEDS_BYTES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS_BYTES.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../docs/byzantine-vectors.json");
        let stored: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let vectors = stored["vectors"].as_array().unwrap();
        SEEDS
            .iter()
            .map(|(name, _)| {
                let vector = vectors.iter().find(|v| v["name"] == *name).unwrap();
                hex::decode(vector["hex"].as_str().unwrap()).unwrap()
            })
            .collect()
    })
}

/// The vectors' committee, against which decoded votes and certificates are checked.
fn committee() -> &'static Committee {
    static COMMITTEE: OnceLock<Committee> = OnceLock::new();
    COMMITTEE
        .get_or_init(|| decode_exact("committee", &seed_bytes()[0], INPUT_BYTES_MAX, Committee::decode_from).unwrap())
}

/// Feeds `bytes` to every decoder and runs a verifier's checks on what decodes; returns the
/// decoders that accepted it.
fn feed_every_decoder(bytes: &[u8]) -> Result<Vec<Decoder>, TestCaseError> {
    let mut accepted = Vec::new();
    if decode_canonical(bytes, INPUT_BYTES_MAX, Committee::decode_from, Committee::encode_to)?.is_some() {
        accepted.push(Decoder::Committee);
    }
    if let Some(order) = decode_canonical(bytes, INPUT_BYTES_MAX, SignedOrder::decode_from, SignedOrder::encode_to)? {
        let _ = order.check();
        accepted.push(Decoder::SignedOrder);
    }
    if let Some(vote) = decode_canonical(bytes, INPUT_BYTES_MAX, Vote::decode_from, Vote::encode_to)? {
        let _ = vote.check(committee(), &vote.statement);
        accepted.push(Decoder::Vote);
    }
    if let Some(certificate) =
        decode_canonical(bytes, INPUT_BYTES_MAX, Certificate::decode_from, Certificate::encode_to)?
    {
        let _ = certificate.check(committee());
        let _ = certificate.check_lock(committee());
        accepted.push(Decoder::Certificate);
    }
    if let Some(evidence) = decode_canonical(bytes, INPUT_BYTES_MAX, Evidence::decode_from, Evidence::encode_to)? {
        if let Ok(convicted) = evidence.convicted() {
            prop_assert!(convicted.windows(2).all(|pair| pair[0] < pair[1]));
        }
        accepted.push(Decoder::Evidence);
    }
    let decoded = decode_canonical(
        bytes,
        INPUT_BYTES_MAX,
        SignedRoundRequest::decode_from,
        SignedRoundRequest::encode_to,
    )?;
    if let Some(request) = decoded {
        let _ = request.check(committee());
        accepted.push(Decoder::SignedRoundRequest);
    }
    let decoded = decode_canonical(
        bytes,
        INPUT_BYTES_MAX,
        SignedRoundChange::decode_from,
        SignedRoundChange::encode_to,
    )?;
    if let Some(signed) = decoded {
        if let Some(lock) = &signed.lock_certificate {
            let _ = lock.check_lock(committee());
        }
        accepted.push(Decoder::SignedRoundChange);
    }
    if let Some(justification) = decode_canonical(
        bytes,
        INPUT_BYTES_MAX,
        Justification::decode_from,
        Justification::encode_to,
    )? {
        // Checked for the slot and round of its first change, so that a valid one gets that far.
        if let Some(first) = justification.changes.first() {
            let change = first.change;
            let _ = justification.check(committee(), &change.account, change.sequence, change.round);
        }
        accepted.push(Decoder::Justification);
    }
    if let Some(record) = decode_canonical(
        bytes,
        INPUT_BYTES_MAX,
        CommitteeRecord::decode_from,
        CommitteeRecord::encode_to,
    )? {
        let _ = record.check(committee());
        accepted.push(Decoder::CommitteeRecord);
    }
    Ok(accepted)
}

fn mutation() -> impl Strategy<Value = Mutation> {
    specie_vectors::mutation(prop_oneof![0u32..=300, Just(u32::MAX), any::<u32>()])
}

/// Any bytes, often starting with the version byte and often of a vote's exact length (136
/// bytes, the version first and a kind byte of 0 or 1, decode as a vote), so that some decode.
fn arbitrary_input() -> impl Strategy<Value = Vec<u8>> {
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..1024),
        proptest::collection::vec(any::<u8>(), 136),
        proptest::collection::vec(any::<u8>(), 86..=300),
    ];
    (bytes, any::<bool>()).prop_map(|(mut bytes, versioned)| {
        if versioned && !bytes.is_empty() {
            bytes[0] = ENCODING_VERSION;
        }
        bytes
    })
}

/// Each seed is accepted by its own decoder, and by no other but the signed round request's:
/// that one has no counts or flags, so any input of its fixed length that starts with the
/// version byte decodes (the 4-member committee happens to be that long). Values are never
/// read without knowing their type, so this takes nothing from one-encoding-per-value.
#[test]
fn each_seed_is_accepted_by_its_decoder_alone() {
    for ((name, decoder), bytes) in SEEDS.iter().zip(seed_bytes()) {
        let mut accepted = feed_every_decoder(bytes).unwrap();
        if *decoder != Decoder::SignedRoundRequest && bytes.len() == RoundRequest::SIGNED_BYTES {
            assert_eq!(accepted.pop(), Some(Decoder::SignedRoundRequest), "seed {name}");
        }
        let expected: Vec<Decoder> = [*decoder].into_iter().filter(|d| *d != Decoder::None).collect();
        assert_eq!(accepted, expected, "seed {name}");
    }
}

/// Byte values that mean something somewhere: versions, kinds, small counts, the top of a
/// count's byte.
const TELLING_BYTES: [u8; 6] = [0, 1, 2, 3, 0x80, 0xff];

#[test]
fn every_single_byte_change_of_every_seed_is_refused_or_canonical() {
    for bytes in seed_bytes() {
        for (at, value, changed) in single_byte_changes(bytes, &TELLING_BYTES) {
            feed_every_decoder(&changed).unwrap_or_else(|e| panic!("byte {at} set to {value:#04x}: {e}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn arbitrary_bytes_never_panic_and_what_decodes_is_canonical(bytes in arbitrary_input()) {
        feed_every_decoder(&bytes)?;
    }

    #[test]
    fn mutated_encodings_never_panic_and_what_decodes_is_canonical(
        seed in 0..SEEDS.len(),
        mutations in proptest::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = seed_bytes()[seed].clone();
        for mutation in &mutations {
            mutate(&mut bytes, mutation);
        }
        feed_every_decoder(&bytes)?;
    }
}
