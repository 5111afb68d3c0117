//! The decoders take untrusted bytes: fed arbitrary bytes, or valid encodings (the stored vectors
//! of `docs/offline-vectors.json`) with a few mutations, none panics, whatever decodes re-encodes
//! to exactly its input (one encoding per value), and what a payee then checks (`Token::verify`,
//! `KeyCertificate::check`) does not panic and accepts nothing but the stored values themselves:
//! no mutation forges a token or a certificate.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::Value;
use specie_codec::Reader;
use specie_offline::{KeyCertificate, KeyRing, Token, ENCODING_VERSION, TOKEN_BYTES_MAX};
use specie_vectors::{decode_canonical, mutate, single_byte_changes, Mutation};

/// Above every valid encoding (a token of `HOPS_MAX` hops is `TOKEN_BYTES_MAX` bytes), so that
/// only the decoders refuse.
const INPUT_BYTES_MAX: usize = 1 << 16;

/// The vectors' denomination and certificate period (`tests/specie-offline/vectors.rs`).
const DENOMINATION: u64 = 100;
const PERIOD: u32 = 7;

/// The stored vectors that are whole encodings, each a seed for mutation, with the decoder that
/// accepts it.
const SEEDS: [(&str, Decoder); 7] = [
    ("token[0]", Decoder::Token),
    ("token[1]", Decoder::Token),
    ("token[2]", Decoder::Token),
    ("branch_token", Decoder::Token),
    ("key_certificate[1]", Decoder::KeyCertificate),
    ("key_certificate[2]", Decoder::KeyCertificate),
    ("transfer_signing_bytes[1]", Decoder::None),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decoder {
    Token,
    KeyCertificate,
    /// A statement's signing bytes: not an encoding any decoder takes.
    None,
}

fn stored() -> &'static Value {
    static STORED: OnceLock<Value> = OnceLock::new();
    STORED.get_or_init(|| {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../docs/offline-vectors.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    })
}

fn stored_bytes(name: &str) -> Vec<u8> {
    let vectors = stored()["vectors"].as_array().unwrap();
    let vector = vectors.iter().find(|v| v["name"] == name).unwrap();
    hex::decode(vector["hex"].as_str().unwrap()).unwrap()
}

fn seed_bytes() -> &'static Vec<Vec<u8>> {
    static SEEDS_BYTES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS_BYTES.get_or_init(|| SEEDS.iter().map(|(name, _)| stored_bytes(name)).collect())
}

/// The seeds a decoder accepts: the only values of its type that may pass a payee's checks.
fn valid_seeds(decoder: Decoder) -> impl Iterator<Item = &'static Vec<u8>> {
    SEEDS
        .iter()
        .zip(seed_bytes())
        .filter(move |((_, d), _)| *d == decoder)
        .map(|(_, bytes)| bytes)
}

/// The vectors' key ring: their issuing key and their certifying key of `PERIOD`.
fn ring() -> &'static KeyRing {
    static RING: OnceLock<KeyRing> = OnceLock::new();
    RING.get_or_init(|| {
        let key = |name: &str| stored_bytes(name).try_into().unwrap();
        let mut ring = KeyRing::default();
        ring.add_issuing_key(key("issuing_public_key"), DENOMINATION).unwrap();
        ring.add_certifying_key(PERIOD, key("certifying_public_key")).unwrap();
        ring
    })
}

/// Feeds `bytes` to both decoders and runs a payee's checks on what decodes; returns the decoders
/// that accepted it.
fn feed_every_decoder(bytes: &[u8]) -> Result<Vec<Decoder>, TestCaseError> {
    let mut accepted = Vec::new();
    if let Some(token) = decode_canonical(bytes, INPUT_BYTES_MAX, Token::decode_from, Token::encode_to)? {
        prop_assert!(bytes.len() <= TOKEN_BYTES_MAX);
        if let Ok(verified) = token.verify(ring()) {
            prop_assert!(
                valid_seeds(Decoder::Token).any(|seed| seed == bytes),
                "only the stored tokens verify"
            );
            prop_assert_eq!(verified.denomination, DENOMINATION);
            prop_assert_eq!(&verified.owner, token.owner());
            prop_assert_eq!(Some(verified.link), token.links().last().copied());
        }
        accepted.push(Decoder::Token);
    }
    if let Some(certificate) = decode_canonical(
        bytes,
        INPUT_BYTES_MAX,
        KeyCertificate::decode_from,
        KeyCertificate::encode_to,
    )? {
        if let Ok(key) = certificate.check(ring()) {
            prop_assert!(
                valid_seeds(Decoder::KeyCertificate).any(|seed| seed == bytes),
                "only the stored certificates check"
            );
            prop_assert_eq!(key.to_bytes(), certificate.key);
        }
        accepted.push(Decoder::KeyCertificate);
    }
    Ok(accepted)
}

fn mutation() -> impl Strategy<Value = Mutation> {
    specie_vectors::mutation(prop_oneof![Just(PERIOD), 0u32..=300, Just(u32::MAX), any::<u32>()])
}

/// Any bytes, often starting with the version byte, often of a certificate's exact length (any
/// 100 bytes decode as one) or a token's of a few hops, so that some decode.
fn arbitrary_input() -> impl Strategy<Value = Vec<u8>> {
    let bytes = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..1024),
        proptest::collection::vec(any::<u8>(), 100),
        (0usize..=3).prop_flat_map(|hops| proptest::collection::vec(any::<u8>(), 146 + 180 * hops)),
    ];
    (bytes, any::<bool>(), any::<u8>()).prop_map(|(mut bytes, versioned, hops)| {
        if versioned && bytes.len() > 145 {
            bytes[0] = ENCODING_VERSION;
            // The hop count that fits, mostly.
            bytes[145] = if hops < 200 {
                ((bytes.len() - 146) / 180) as u8
            } else {
                hops
            };
        }
        bytes
    })
}

/// Each seed is accepted by its own decoder alone (a certificate is 100 bytes, a token at least
/// 146, a transfer statement 112 beginning with its domain), and every stored token and
/// certificate passes a payee's checks.
#[test]
fn each_seed_is_accepted_by_its_decoder_alone_and_the_valid_ones_check() {
    for ((name, decoder), bytes) in SEEDS.iter().zip(seed_bytes()) {
        let accepted = feed_every_decoder(bytes).unwrap();
        let expected: Vec<Decoder> = [*decoder].into_iter().filter(|d| *d != Decoder::None).collect();
        assert_eq!(accepted, expected, "seed {name}");
        let mut reader = Reader::new(bytes);
        match decoder {
            Decoder::Token => assert!(
                Token::decode_from(&mut reader).unwrap().verify(ring()).is_ok(),
                "{name}"
            ),
            Decoder::KeyCertificate => {
                assert!(
                    KeyCertificate::decode_from(&mut reader).unwrap().check(ring()).is_ok(),
                    "{name}"
                )
            }
            Decoder::None => {}
        }
    }
}

/// Byte values that mean something somewhere: the version, small hop counts, the period's low
/// byte, the top of a byte.
const TELLING_BYTES: [u8; 6] = [0, 1, 2, 7, 0x80, 0xff];

/// A token or certificate with any one byte changed is refused by its decoder or fails the
/// payee's checks: every byte of it is signed or checked.
#[test]
fn every_single_byte_change_of_every_seed_is_refused_or_fails_its_checks() {
    for bytes in seed_bytes() {
        for (at, value, changed) in single_byte_changes(bytes, &TELLING_BYTES) {
            feed_every_decoder(&changed).unwrap_or_else(|e| panic!("byte {at} set to {value:#04x}: {e}"));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

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
