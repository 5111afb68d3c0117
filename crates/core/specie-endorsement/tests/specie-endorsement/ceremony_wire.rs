//! The wire encoding of the key-generation and refresh ceremony's messages: round trips of
//! every message real ceremonies send, the sizes the caps assume, canonicity under single-byte
//! changes, truncation, caps checked before allocation, and confirmations' group keys.

use crate::common;

use std::sync::OnceLock;

use common::ceremony_run::{generate, is_confirm, is_round1, is_round2, refresh, CeremonyRun};
use proptest::prelude::*;
use specie_codec::{Decode, DecodeError, Encode, Reader};
use specie_endorsement::frost;
use specie_endorsement::frost::keys::dkg::round1;
use specie_endorsement::frost::keys::VerifiableSecretSharingCommitment;
use specie_endorsement::{
    round1_package_bytes_max, CeremonyMessage, Confirmation, EndorserId, GroupKey, Threshold, CONFIRMATION_BYTES,
    ENDORSERS_MAX, ROUND1_PACKAGE_BYTES_MAX, ROUND2_PACKAGE_BYTES,
};

/// A 2-of-3 and a 3-of-5 key generation, and a refresh of each.
fn runs() -> &'static Vec<(Threshold, bool, CeremonyRun)> {
    static RUNS: OnceLock<Vec<(Threshold, bool, CeremonyRun)>> = OnceLock::new();
    RUNS.get_or_init(|| {
        let mut out = Vec::new();
        for (k, n) in [(2, 3), (3, 5)] {
            let threshold = Threshold::new(k, n).unwrap();
            let dkg = generate(threshold, 0);
            let refreshed = refresh(threshold, &dkg.keys, 100);
            out.push((threshold, false, dkg));
            out.push((threshold, true, refreshed));
        }
        out
    })
}

/// Every message of every run, encoded.
fn corpus() -> &'static Vec<Vec<u8>> {
    static CORPUS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let messages = runs().iter().flat_map(|(_, _, run)| run.sent.iter());
        messages.map(|(_, _, message)| message.encode()).collect()
    })
}

fn decode_and_reencode(bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    CeremonyMessage::decode_exact(bytes).map(|message| {
        assert!(bytes.len() <= CeremonyMessage::encoded_bytes_max(&()));
        message.encode()
    })
}

#[test]
fn every_message_of_real_ceremonies_round_trips() {
    for (threshold, is_refresh, run) in runs() {
        let (k, n) = (usize::from(threshold.k), usize::from(threshold.n));
        let count = |kind: fn(&CeremonyMessage) -> bool| run.sent.iter().filter(|(_, _, m)| kind(m)).count();
        // Each participant broadcasts round 1, sends each peer a share, broadcasts its view.
        for kind in [is_round1, is_round2, is_confirm] {
            assert_eq!(count(kind), n * (n - 1), "{threshold:?}");
        }
        let coefficients = if *is_refresh { k - 1 } else { k };
        for (_, _, message) in &run.sent {
            let bytes = message.encode();
            assert_eq!(&CeremonyMessage::decode_exact(&bytes).unwrap(), message);
            assert!(bytes.len() <= CeremonyMessage::encoded_bytes_max(&()));
            let expected_bytes = match message {
                CeremonyMessage::Round1(_) => 2 + 8 + round1_package_bytes_max(coefficients as u16),
                CeremonyMessage::Round2(_) => 2 + 8 + ROUND2_PACKAGE_BYTES,
                CeremonyMessage::Confirm(_) => 2 + CONFIRMATION_BYTES,
            };
            assert_eq!(bytes.len(), expected_bytes, "{threshold:?}, refresh {is_refresh}");
        }
    }
}

fn round1_package(message: &CeremonyMessage) -> round1::Package {
    match message {
        CeremonyMessage::Round1(package) => (**package).clone(),
        other => panic!("expected a round-1 package, got {other:?}"),
    }
}

/// `package`'s proof with a commitment of `coefficients` points (copies of its first).
fn with_coefficients(package: &round1::Package, coefficients: usize) -> round1::Package {
    let first = package.commitment().serialize().unwrap()[0].clone();
    let commitment = VerifiableSecretSharingCommitment::deserialize(vec![first; coefficients]).unwrap();
    round1::Package::new(commitment, *package.proof_of_knowledge())
}

#[test]
fn frost_sizes_are_what_the_caps_assume() {
    let mut rng = rand::thread_rng();
    let id = EndorserId(1).identifier();
    // Thresholds 2 and 64 from FROST's DKG, 1 coefficient from a 2-of-3 refresh.
    let (_, two) = frost::keys::dkg::part1(id, 3, 2, &mut rng).unwrap();
    let (_, sixty_four) = frost::keys::dkg::part1(id, 64, 64, &mut rng).unwrap();
    let (_, one) = frost::keys::refresh::refresh_dkg_part1(id, 3, 2, &mut rng).unwrap();
    for (coefficients, package) in [(1u16, &one), (2, &two), (64, &sixty_four)] {
        let bytes = package.serialize().unwrap();
        assert_eq!(bytes.len(), round1_package_bytes_max(coefficients));
        assert_eq!(bytes.len(), 71 + 33 * usize::from(coefficients));
        assert_eq!(bytes[5], coefficients as u8, "the count follows the 5-byte header");
        let message = CeremonyMessage::Round1(Box::new(package.clone()));
        assert_eq!(CeremonyMessage::decode_exact(&message.encode()).unwrap(), message);
    }
    assert_eq!(sixty_four.serialize().unwrap().len(), ROUND1_PACKAGE_BYTES_MAX);
    let round2 = runs()[0].2.message(1, 2, is_round2);
    let CeremonyMessage::Round2(package) = &round2 else {
        unreachable!()
    };
    assert_eq!(package.serialize().unwrap().len(), ROUND2_PACKAGE_BYTES);
    assert_eq!(
        CeremonyMessage::encoded_bytes_max(&()),
        2 + 8 + ROUND1_PACKAGE_BYTES_MAX
    );
}

#[test]
fn the_documented_bounds_are_the_code_s() {
    assert_eq!(round1_package_bytes_max(1), 104);
    assert_eq!(round1_package_bytes_max(2), 137);
    assert_eq!(round1_package_bytes_max(64), 2_183);
    assert_eq!(round1_package_bytes_max(u16::MAX), 2_183, "clamped to ENDORSERS_MAX");
    assert_eq!(ROUND1_PACKAGE_BYTES_MAX, 2_183);
    assert_eq!(ROUND2_PACKAGE_BYTES, 37);
    assert_eq!(CONFIRMATION_BYTES, 96);
    assert_eq!(CeremonyMessage::encoded_bytes_max(&()), 2_193);
}

#[test]
fn commitments_of_no_or_too_many_coefficients_are_refused() {
    let package = round1_package(&runs()[0].2.message(1, 2, is_round1));
    let too_many = usize::from(ENDORSERS_MAX) + 1;
    for coefficients in [0, too_many] {
        let message = CeremonyMessage::Round1(Box::new(with_coefficients(&package, coefficients)));
        let bytes = message.encode();
        let error = CeremonyMessage::decode_exact(&bytes).unwrap_err();
        match coefficients {
            0 => assert!(matches!(error, DecodeError::Invalid { .. }), "{error:?}"),
            // Over the whole message's bound; read on its own, over the package's cap.
            _ => {
                assert!(matches!(error, DecodeError::TooLarge { .. }), "{error:?}");
                let error = CeremonyMessage::decode_from(&mut Reader::new(&bytes), &()).unwrap_err();
                assert!(matches!(error, DecodeError::CountTooLarge { .. }), "{error:?}");
            }
        }
    }
    // 65 to 127 coefficients in a blob of the largest size: refused by count, not length.
    let mut bytes = CeremonyMessage::Round1(Box::new(with_coefficients(&package, 64))).encode();
    bytes[2 + 8 + 5] = 65;
    let error = CeremonyMessage::decode_exact(&bytes).unwrap_err();
    assert!(matches!(error, DecodeError::Invalid { .. }), "{error:?}");
    // 64 coefficients, all the same point, still decode: the wire checks shape, FROST the rest.
    let message = CeremonyMessage::Round1(Box::new(with_coefficients(&package, 64)));
    assert_eq!(CeremonyMessage::decode_exact(&message.encode()).unwrap(), message);
}

#[test]
fn every_truncation_fails() {
    for bytes in corpus() {
        for len in 0..bytes.len() {
            assert!(decode_and_reencode(&bytes[..len]).is_err(), "cut at {len}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            CeremonyMessage::decode_exact(&longer),
            Err(DecodeError::TrailingBytes { .. })
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_changed_byte_is_refused_or_is_the_encoding_of_what_it_decodes_to(
        which in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        delta in 1u8..=255,
    ) {
        let bytes = &corpus()[which.index(corpus().len())];
        let mut changed = bytes.clone();
        let at = at.index(changed.len());
        changed[at] ^= delta;
        if let Ok(again) = decode_and_reencode(&changed) {
            prop_assert_eq!(again, changed);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(again) = decode_and_reencode(&bytes) {
            prop_assert_eq!(&again, &bytes);
        }
    }
}

fn with_length(kind: u8, len: u64, following_bytes: usize) -> Vec<u8> {
    let mut bytes = vec![1, kind];
    bytes.extend_from_slice(&len.to_le_bytes());
    bytes.extend(std::iter::repeat_n(0u8, following_bytes));
    bytes
}

#[test]
fn oversize_lengths_are_refused_before_allocation() {
    let round1_over = ROUND1_PACKAGE_BYTES_MAX as u64 + 1;
    let round2_over = ROUND2_PACKAGE_BYTES as u64 + 1;
    for (kind, len) in [(1, round1_over), (1, u64::MAX), (2, round2_over), (2, u64::MAX)] {
        let error = CeremonyMessage::decode_exact(&with_length(kind, len, 64)).unwrap_err();
        assert!(matches!(error, DecodeError::CountTooLarge { .. }), "{error:?}");
    }
    // Within the cap, longer than the bytes left.
    for (kind, len) in [(1, 2_000), (2, 37)] {
        let error = CeremonyMessage::decode_exact(&with_length(kind, len, 16)).unwrap_err();
        assert!(
            matches!(
                error,
                DecodeError::CountExceedsInput { .. } | DecodeError::UnexpectedEnd { .. }
            ),
            "{error:?}"
        );
    }
    let huge = vec![1u8; CeremonyMessage::encoded_bytes_max(&()) + 1];
    assert!(matches!(
        CeremonyMessage::decode_exact(&huge),
        Err(DecodeError::TooLarge { .. })
    ));
}

fn confirmation() -> Confirmation {
    match runs()[0].2.message(1, 2, is_confirm) {
        CeremonyMessage::Confirm(confirmation) => confirmation,
        other => panic!("expected a confirmation, got {other:?}"),
    }
}

#[test]
fn a_confirmation_with_an_invalid_group_key_is_refused() {
    let good = confirmation();
    let bytes = CeremonyMessage::Confirm(good).encode();
    assert_eq!(&bytes[34..66], &good.group_key.0);
    // Above the field's prime, and the first small x that is no point's.
    let off_curve = (1..=255u8)
        .map(|x| {
            let mut key = [0u8; 32];
            key[31] = x;
            key
        })
        .find(|key| GroupKey(*key).xonly().is_none())
        .expect("about half of all x are no point's");
    for key in [[0xff; 32], off_curve] {
        let mut changed = bytes.clone();
        changed[34..66].copy_from_slice(&key);
        let error = CeremonyMessage::decode_exact(&changed).unwrap_err();
        assert!(matches!(error, DecodeError::Invalid { .. }), "{key:?}: {error:?}");
    }
}

#[test]
fn versions_and_kinds_are_checked() {
    let mut bytes = CeremonyMessage::Confirm(confirmation()).encode();
    assert_eq!(bytes.len(), 98);
    assert_eq!(bytes[..2], [1, 3]);
    bytes[0] = 2;
    assert!(matches!(
        CeremonyMessage::decode_exact(&bytes),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
    for kind in [0, 4, 0xff] {
        bytes[0] = 1;
        bytes[1] = kind;
        assert!(matches!(
            CeremonyMessage::decode_exact(&bytes),
            Err(DecodeError::UnknownKind { .. })
        ));
    }
}
