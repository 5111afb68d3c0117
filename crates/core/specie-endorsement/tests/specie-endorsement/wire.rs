//! The wire encodings of the protocol messages and of an endorser's key material: round trips
//! of every message the real roles produce, canonicity under single-byte changes, truncation,
//! caps checked before allocation, and key files that must belong together.

use crate::common;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use common::wire_run::{ask, wire_digest, wire_run, WireRun, AGGREGATOR};
use proptest::prelude::*;
use specie_codec::{Decode, DecodeError, Encode};
use specie_endorsement::frost;
use specie_endorsement::{
    deal, refusal_text, signing_package_bytes_max, AggregatorMessage, EndorserId, EndorserKeys, EndorserMessage, Hash,
    MerkleTree, MessageLimits, Refusal, RefusalCode, ReplyLimits, Threshold, COMMITMENTS_BYTES, KEY_PACKAGE_BYTES_MAX,
    PUBLIC_KEY_PACKAGE_BYTES_MAX, REFUSAL_TEXT_BYTES_MAX, SHARE_BYTES,
};

type Request = AggregatorMessage<Hash>;
type Answer = EndorserMessage<RefusalCode>;

fn run() -> &'static WireRun {
    static RUN: OnceLock<WireRun> = OnceLock::new();
    RUN.get_or_init(|| wire_run(2024))
}

fn is_sign(message: &Request) -> bool {
    matches!(message, AggregatorMessage::Sign { .. })
}

fn commitments_of(message: &Answer) -> frost::round1::SigningCommitments {
    match message {
        EndorserMessage::Commitments { commitments, .. } => **commitments,
        other => panic!("expected commitments, got {other:?}"),
    }
}

/// Every refusal an endorser makes, each produced by a real endorser of the run's group.
fn refusals() -> Vec<Answer> {
    let run = wire_run(2024);
    let sign = run.sent_to(1, is_sign);
    let first = run.answered_by(2, |m| matches!(m, EndorserMessage::Refused { .. }));
    let mut endorsers = run.endorsers;
    let batch = [wire_digest(0), wire_digest(1)];
    let message = MerkleTree::new(&batch).message();
    // Endorser 3 was never asked: the run's Sign is an unknown session to it.
    let unknown = ask(endorsers.get_mut(&EndorserId(3)).unwrap(), sign);
    let mut out = vec![first, unknown];
    let mut commit = |id: u16, session| {
        let e = endorsers.get_mut(&EndorserId(id)).unwrap();
        commitments_of(&ask(e, AggregatorMessage::Commit { session }))
    };
    let (c1, c2) = (commit(1, 50), commit(2, 50));
    let c3s: Vec<_> = (50..55).map(|session| commit(3, session)).collect();
    let package = |map: Vec<(u16, frost::round1::SigningCommitments)>, message: &[u8]| {
        let map = map
            .into_iter()
            .map(|(id, c)| (EndorserId(id).identifier(), c))
            .collect();
        frost::SigningPackage::new(map, message)
    };
    let sign_as = |session, items: Vec<Hash>, package| AggregatorMessage::Sign {
        session,
        items,
        package,
    };
    let requests = [
        // Endorser 1 signed session 1: another package there is a reused session.
        (
            1,
            sign_as(1, batch[..1].to_vec(), package(vec![(1, c1), (3, c3s[0])], &message)),
        ),
        (
            3,
            sign_as(50, batch[..1].to_vec(), package(vec![(1, c1), (3, c3s[0])], &message)),
        ),
        (
            3,
            sign_as(51, batch.to_vec(), package(vec![(1, c1), (2, c2)], &message)),
        ),
        (
            3,
            sign_as(52, Vec::new(), package(vec![(1, c1), (3, c3s[2])], &message)),
        ),
        (3, sign_as(53, batch.to_vec(), package(vec![(3, c3s[3])], &message))),
    ];
    for (id, request) in requests {
        out.push(ask(endorsers.get_mut(&EndorserId(id)).unwrap(), request));
    }
    out
}

#[test]
fn every_refusal_kind_comes_from_a_real_endorser() {
    let kinds: Vec<_> = refusals()
        .into_iter()
        .map(|m| match m {
            EndorserMessage::Refused { refusal, .. } => refusal,
            other => panic!("expected a refusal, got {other:?}"),
        })
        .collect();
    let code = RefusalCode::new("double_spend").unwrap();
    assert_eq!(kinds[0], Refusal::Invalid { items: vec![(1, code)] });
    assert_eq!(kinds[1], Refusal::UnknownSession);
    assert_eq!(kinds[2], Refusal::SessionReused);
    assert_eq!(kinds[3], Refusal::WrongMessage);
    assert_eq!(kinds[4], Refusal::WrongCommitments);
    assert_eq!(
        kinds[5],
        Refusal::BadBatchSize {
            items: 0,
            items_max: 4096
        }
    );
    assert!(
        matches!(&kinds[6], Refusal::Frost(text) if !text.is_empty()),
        "{:?}",
        kinds[6]
    );
}

/// Every message of the run and every refusal, encoded, with which decoder reads it.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Request,
    Answer,
    Keys,
}

fn corpus() -> &'static Vec<(Kind, Vec<u8>)> {
    static CORPUS: OnceLock<Vec<(Kind, Vec<u8>)>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let run = run();
        let requests = run.sent.iter().map(|(_, m)| (Kind::Request, m.encode()));
        let answers = run.answered.iter().map(|(_, m)| m.clone());
        let answers = answers.chain(refusals()).map(|m| (Kind::Answer, m.encode()));
        let keys = run.keys.values().map(|k| (Kind::Keys, k.encode()));
        requests.chain(answers).chain(keys).collect()
    })
}

/// Decodes `bytes` as `kind`; on success, re-encodes and checks the bound.
fn decode_and_reencode(kind: Kind, bytes: &[u8]) -> Result<Vec<u8>, DecodeError> {
    match kind {
        Kind::Request => Request::decode_exact(bytes).map(|m| {
            assert!(bytes.len() <= Request::encoded_bytes_max(&MessageLimits::default()));
            m.encode()
        }),
        Kind::Answer => Answer::decode_exact(bytes).map(|m| {
            assert!(bytes.len() <= Answer::encoded_bytes_max(&ReplyLimits::default()));
            m.encode()
        }),
        Kind::Keys => EndorserKeys::decode_exact(bytes).map(|k| k.encode()),
    }
}

#[test]
fn every_message_of_a_real_run_round_trips() {
    let run = run();
    assert_eq!(run.sent.len(), 4, "commit and sign to endorsers 1 and 2");
    assert_eq!(run.answered.len(), 4);
    for (_, message) in &run.sent {
        let bytes = message.encode();
        assert_eq!(&Request::decode_exact(&bytes).unwrap(), message);
        assert!(bytes.len() <= Request::encoded_bytes_max(&MessageLimits::default()));
    }
    for message in run.answered.iter().map(|(_, m)| m.clone()).chain(refusals()) {
        let bytes = message.encode();
        assert_eq!(Answer::decode_exact(&bytes).unwrap(), message);
        assert!(bytes.len() <= Answer::encoded_bytes_max(&ReplyLimits::default()));
    }
    assert!(matches!(
        run.answered_by(1, |m| matches!(m, EndorserMessage::Share { .. })),
        EndorserMessage::Share { .. }
    ));
}

#[test]
fn frost_sizes_are_what_the_caps_assume() {
    let run = run();
    let commitments = commitments_of(&run.answered_by(1, |m| matches!(m, EndorserMessage::Commitments { .. })));
    assert_eq!(commitments.serialize().unwrap().len(), COMMITMENTS_BYTES);
    let EndorserMessage::Share { share, .. } = run.answered_by(1, |m| matches!(m, EndorserMessage::Share { .. }))
    else {
        unreachable!()
    };
    assert_eq!(share.serialize().len(), SHARE_BYTES);
    let AggregatorMessage::Sign { package, .. } = run.sent_to(1, is_sign) else {
        unreachable!()
    };
    assert_eq!(package.serialize().unwrap().len(), signing_package_bytes_max(2));
    for keys in run.keys.values() {
        assert!(keys.share.serialize().unwrap().len() <= KEY_PACKAGE_BYTES_MAX);
    }
    // The largest group: 64 endorsers, all of them signing (one share's nonces stand in for
    // each, which changes no size).
    let (keys, public) = deal(Threshold::new(64, 64).unwrap(), 5).unwrap();
    let public_bytes = public.serialize().unwrap().len();
    assert!(public_bytes <= PUBLIC_KEY_PACKAGE_BYTES_MAX && PUBLIC_KEY_PACKAGE_BYTES_MAX - public_bytes <= 2);
    let mut rng = rand::thread_rng();
    let share = keys[&EndorserId(1)].share.signing_share();
    let map: BTreeMap<_, _> = (1..=64)
        .map(|id| (EndorserId(id).identifier(), frost::round1::commit(share, &mut rng).1))
        .collect();
    let package = frost::SigningPackage::new(map, &[9u8; 32]);
    assert_eq!(package.serialize().unwrap().len(), signing_package_bytes_max(64));
    let sign = AggregatorMessage::Sign {
        session: 1,
        items: vec![[1u8; 32]],
        package,
    };
    assert_eq!(Request::decode_exact(&sign.encode()).unwrap(), sign);
    let tight = MessageLimits {
        signers_max: 63,
        ..MessageLimits::default()
    };
    assert!(Request::decode_exact_with(&sign.encode(), &tight).is_err());
    let keys = &keys[&EndorserId(64)];
    assert_eq!(&EndorserKeys::decode_exact(&keys.encode()).unwrap(), keys);
}

#[test]
fn every_truncation_fails() {
    for (kind, bytes) in corpus() {
        for len in 0..bytes.len() {
            assert!(
                decode_and_reencode(*kind, &bytes[..len]).is_err(),
                "{kind:?} cut at {len}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(
            decode_and_reencode(*kind, &longer).is_err(),
            "{kind:?} with a trailing byte"
        );
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
        let (kind, bytes) = &corpus()[which.index(corpus().len())];
        let mut changed = bytes.clone();
        let at = at.index(changed.len());
        changed[at] ^= delta;
        if let Ok(again) = decode_and_reencode(*kind, &changed) {
            prop_assert_eq!(again, changed);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        for kind in [Kind::Request, Kind::Answer, Kind::Keys] {
            if let Ok(again) = decode_and_reencode(kind, &bytes) {
                prop_assert_eq!(&again, &bytes);
            }
        }
    }
}

fn head(version: u8, tag: u8) -> Vec<u8> {
    let mut out = vec![version, tag];
    out.extend_from_slice(&9u64.to_le_bytes());
    out
}

#[test]
fn oversize_counts_and_lengths_are_refused_before_allocation() {
    // A Sign claiming u64::MAX items, then 65,537, then 1,000 with 8 bytes left.
    for (count, limit_error) in [(u64::MAX, true), (65_537, true), (1_000, false)] {
        let mut bytes = head(1, 2);
        bytes.extend_from_slice(&count.to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
        let error = Request::decode_exact(&bytes).unwrap_err();
        match limit_error {
            true => assert!(matches!(error, DecodeError::CountTooLarge { .. }), "{error:?}"),
            false => assert!(matches!(error, DecodeError::CountExceedsInput { .. }), "{error:?}"),
        }
    }
    // A signing package longer than 64 signers' worth, and one longer than the input.
    for len in [signing_package_bytes_max(64) as u64 + 1, u64::MAX, 6_000] {
        let mut bytes = head(1, 2);
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&len.to_le_bytes());
        bytes.extend_from_slice(&[0; 16]);
        assert!(Request::decode_exact(&bytes).is_err());
    }
    // Commitments and shares longer than theirs; an invalid-items refusal of u64::MAX items; a
    // refusal code of 65 bytes; FROST text of 257 bytes.
    let cases: [(u8, Vec<u8>); 5] = [
        (1, (COMMITMENTS_BYTES as u64 + 1).to_le_bytes().to_vec()),
        (2, (SHARE_BYTES as u64 + 1).to_le_bytes().to_vec()),
        (3, [vec![1], u64::MAX.to_le_bytes().to_vec()].concat()),
        (
            3,
            [
                vec![1],
                1u64.to_le_bytes().to_vec(),
                vec![0; 4],
                65u64.to_le_bytes().to_vec(),
            ]
            .concat(),
        ),
        (3, [vec![7], 257u64.to_le_bytes().to_vec()].concat()),
    ];
    for (tag, rest) in cases {
        let mut bytes = head(1, tag);
        bytes.extend_from_slice(&rest);
        bytes.extend_from_slice(&[b'a'; 300]);
        let error = Answer::decode_exact(&bytes).unwrap_err();
        assert!(
            matches!(error, DecodeError::CountTooLarge { .. }),
            "tag {tag}: {error:?}"
        );
    }
    // A whole message over the bound is refused before a byte is read.
    let huge = vec![0u8; Answer::encoded_bytes_max(&ReplyLimits::default()) + 1];
    assert!(matches!(Answer::decode_exact(&huge), Err(DecodeError::TooLarge { .. })));
    let huge = vec![0u8; EndorserKeys::encoded_bytes_max(&()) + 1];
    assert!(matches!(
        EndorserKeys::decode_exact(&huge),
        Err(DecodeError::TooLarge { .. })
    ));
}

#[test]
fn versions_kinds_and_refusal_contents_are_checked() {
    let commit = AggregatorMessage::<Hash>::Commit { session: 9 };
    assert_eq!(commit.encode(), head(1, 1));
    assert!(matches!(
        Request::decode_exact(&head(2, 1)),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
    assert!(matches!(
        Request::decode_exact(&head(1, 3)),
        Err(DecodeError::UnknownKind { .. })
    ));
    assert!(matches!(
        Answer::decode_exact(&head(1, 4)),
        Err(DecodeError::UnknownKind { .. })
    ));
    let refused = |refusal: &[u8]| [head(1, 3), refusal.to_vec()].concat();
    let code = |s: &[u8]| [(s.len() as u64).to_le_bytes().to_vec(), s.to_vec()].concat();
    let invalid = |items: &[(u32, &[u8])]| {
        let mut out = vec![1];
        out.extend_from_slice(&(items.len() as u64).to_le_bytes());
        for (index, c) in items {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&code(c));
        }
        out
    };
    assert!(Answer::decode_exact(&refused(&invalid(&[(0, b"a"), (3, b"b_2")]))).is_ok());
    for bad in [
        invalid(&[]),
        invalid(&[(3, b"a"), (3, b"b")]),
        invalid(&[(3, b"a"), (2, b"b")]),
        invalid(&[(0, b"")]),
        invalid(&[(0, b"Upper")]),
        invalid(&[(0, b"sp ace")]),
        vec![8],
        [vec![7], code(&[0xff, 0xfe])].concat(),
    ] {
        assert!(Answer::decode_exact(&refused(&bad)).is_err(), "{bad:?}");
    }
    let limits = ReplyLimits {
        refused_items_max: 1,
        ..ReplyLimits::default()
    };
    let two = refused(&invalid(&[(0, b"a"), (1, b"b")]));
    assert!(matches!(
        Answer::decode_exact_with(&two, &limits),
        Err(DecodeError::CountTooLarge { .. })
    ));
}

#[test]
fn refusal_codes_and_texts_are_bounded() {
    assert_eq!(RefusalCode::new("double_spend").unwrap().as_str(), "double_spend");
    assert_eq!(RefusalCode::new("bad_sig_2").unwrap().to_string(), "bad_sig_2");
    assert!(RefusalCode::new(&"a".repeat(64)).is_some());
    for bad in ["", "Double", "a-b", "é", &"a".repeat(65)] {
        assert!(RefusalCode::new(bad).is_none(), "{bad:?}");
    }
    let long = "é".repeat(200);
    let cut = refusal_text(&long);
    assert!(cut.len() <= REFUSAL_TEXT_BYTES_MAX && cut.len() >= REFUSAL_TEXT_BYTES_MAX - 1);
    assert!(long.starts_with(&cut));
    assert_eq!(refusal_text("short"), "short");
    // An over-long text built by hand still encodes to bytes that decode (to the cut text).
    let message: Answer = EndorserMessage::Refused {
        session: 1,
        refusal: Refusal::Frost(long),
    };
    let decoded = Answer::decode_exact(&message.encode()).unwrap();
    assert_eq!(
        decoded,
        EndorserMessage::Refused {
            session: 1,
            refusal: Refusal::Frost(cut)
        }
    );
}

#[test]
fn every_dealt_share_round_trips_and_mismatched_key_files_are_refused() {
    let (keys, _) = deal(Threshold::new(2, 3).unwrap(), 2024).unwrap();
    let (other, _) = deal(Threshold::new(2, 3).unwrap(), 2025).unwrap();
    for (id, k) in &keys {
        let bytes = k.encode();
        assert!(bytes.len() <= EndorserKeys::encoded_bytes_max(&()));
        assert_eq!(&EndorserKeys::decode_exact(&bytes).unwrap(), k);
        let foreign = EndorserKeys {
            public: other[id].public.clone(),
            ..k.clone()
        };
        assert!(matches!(
            EndorserKeys::decode_exact(&foreign.encode()),
            Err(DecodeError::Invalid { .. })
        ));
        let misnamed = EndorserKeys {
            id: EndorserId(id.0 % 3 + 1),
            ..k.clone()
        };
        assert!(matches!(
            EndorserKeys::decode_exact(&misnamed.encode()),
            Err(DecodeError::Invalid { .. })
        ));
        let mut id_zero = bytes.clone();
        id_zero[1..3].copy_from_slice(&[0, 0]);
        assert!(EndorserKeys::decode_exact(&id_zero).is_err());
    }
    let _ = AGGREGATOR;
}

#[test]
fn the_documented_bounds_are_the_code_s() {
    assert_eq!(signing_package_bytes_max(2), 245);
    assert_eq!(signing_package_bytes_max(64), 6_631);
    assert_eq!(signing_package_bytes_max(u16::MAX), 6_631, "clamped to ENDORSERS_MAX");
    assert_eq!(KEY_PACKAGE_BYTES_MAX, 138);
    assert_eq!(PUBLIC_KEY_PACKAGE_BYTES_MAX, 4_203);
    assert_eq!(Request::encoded_bytes_max(&MessageLimits::default()), 2_103_809);
    assert_eq!(Answer::encoded_bytes_max(&ReplyLimits::default()), 4_980_755);
    assert_eq!(EndorserKeys::encoded_bytes_max(&()), 4_360);
    assert_eq!(RefusalCode::encoded_bytes_max(&()), 72);
    let small = ReplyLimits {
        refused_items_max: 0,
        ..ReplyLimits::default()
    };
    // The largest of the other answers: a FROST text of 256 bytes.
    assert_eq!(Answer::encoded_bytes_max(&small), 10 + 1 + 8 + REFUSAL_TEXT_BYTES_MAX);
}
