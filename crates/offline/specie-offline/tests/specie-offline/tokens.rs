//! Tokens as a payee checks them, and their encoding: a chain verifies only as its owners signed
//! it, a replayed transfer is the same statement and a second transfer a different statement on
//! the same link, and the decoder takes any bytes without panicking or allocating what they ask.

use proptest::prelude::*;
use specie_codec::{DecodeError, Reader};
use specie_offline::{
    decode_exact, Issuance, KeyCertificate, KeyError, SigningKey, Token, TokenError, HOPS_MAX, HOP_BYTES,
    TOKEN_BYTES_MAX,
};

use crate::issuing_world;

use issuing_world::{key, World, PERIOD};

const DENOMINATION: u64 = 500;

/// A token issued to `owners[0]` and passed along `owners`, hop i at nonce `[i; 16]`.
fn token(w: &World, owners: &[SigningKey]) -> Token {
    let issuance = Issuance::sign(&w.issuing, [7; 16], owners[0].verifying_key().to_bytes());
    let mut token = Token::issued(issuance);
    for (i, pair) in owners.windows(2).enumerate() {
        token = token.transfer(&pair[0], w.certified(&pair[1]), [i as u8; 16]).unwrap();
    }
    token
}

fn encoded(token: &Token) -> Vec<u8> {
    let mut bytes = Vec::new();
    token.encode_to(&mut bytes);
    bytes
}

#[test]
fn a_chain_verifies_only_as_its_owners_signed_it() {
    let w = World::new(DENOMINATION);
    let owners = [key(1), key(2), key(3)];
    let token = token(&w, &owners);
    let verified = token.verify(&w.ring).unwrap();
    assert_eq!(verified.denomination, DENOMINATION);
    assert_eq!(verified.owner, owners[2].verifying_key().to_bytes());
    assert_eq!(Some(&verified.link), token.links().last());
    assert_eq!(encoded(&token).len(), 146 + 2 * HOP_BYTES);

    let mut unknown = token.clone();
    unknown.issuance = Issuance::sign(&key(9), [7; 16], owners[0].verifying_key().to_bytes());
    assert_eq!(unknown.verify(&w.ring), Err(TokenError::UnknownIssuingKey));
    let mut reissued = token.clone();
    reissued.issuance.serial[0] ^= 1;
    assert_eq!(reissued.verify(&w.ring), Err(TokenError::BadIssuance));
    let mut other_nonce = token.clone();
    other_nonce.hops[1].nonce[0] ^= 1;
    assert_eq!(other_nonce.verify(&w.ring), Err(TokenError::BadTransfer { hop: 2 }));
    let mut uncertified = token.clone();
    uncertified.hops[0].next_owner.period = PERIOD + 1;
    assert_eq!(
        uncertified.verify(&w.ring),
        Err(TokenError::Certificate {
            hop: 1,
            error: KeyError::UnknownPeriod { period: PERIOD + 1 }
        })
    );
    // A stranger cannot pass the token on, and a hop it signs anyway does not verify.
    assert_eq!(
        token.transfer(&key(9), w.certified(&key(4)), [0; 16]),
        Err(TokenError::NotTheOwner)
    );
    let mut forged = token.clone();
    let by_stranger = Token {
        issuance: Issuance::sign(&w.issuing, [7; 16], key(9).verifying_key().to_bytes()),
        hops: Vec::new(),
    }
    .transfer(&key(9), w.certified(&owners[2]), [1; 16])
    .unwrap();
    forged.hops[1].signature = by_stranger.hops[0].signature;
    assert_eq!(forged.verify(&w.ring), Err(TokenError::BadTransfer { hop: 2 }));
}

/// The replay defence the prototype only described (§IV-G): the same transfer to the same payee
/// nonce is byte for byte the same statement; a second transfer of the token, to anyone or at
/// another nonce, is a different statement on the same link, signed by the same owner.
#[test]
fn a_replay_is_the_same_statement_and_a_second_transfer_branches_at_the_owner() {
    let w = World::new(DENOMINATION);
    let (alice, bob, carol) = (key(1), key(2), key(3));
    let to_alice = token(&w, std::slice::from_ref(&alice));
    let paid = to_alice.transfer(&alice, w.certified(&bob), [5; 16]).unwrap();
    let replayed = to_alice.transfer(&alice, w.certified(&bob), [5; 16]).unwrap();
    assert_eq!(encoded(&paid), encoded(&replayed));
    for second in [
        to_alice.transfer(&alice, w.certified(&bob), [6; 16]).unwrap(),
        to_alice.transfer(&alice, w.certified(&carol), [5; 16]).unwrap(),
    ] {
        let (first_links, second_links) = (paid.links(), second.links());
        assert_eq!(first_links[0], second_links[0], "the branch starts at Alice's node");
        assert_ne!(first_links[1], second_links[1]);
        assert!(second.verify(&w.ring).is_ok(), "each branch alone looks valid offline");
    }
}

#[test]
fn a_token_takes_at_most_hops_max_hops() {
    let w = World::new(DENOMINATION);
    let owners: Vec<SigningKey> = (1..=HOPS_MAX as u8 + 1).map(key).collect();
    let full = token(&w, &owners);
    assert_eq!(full.hops.len(), HOPS_MAX);
    assert_eq!(encoded(&full).len(), TOKEN_BYTES_MAX);
    assert!(full.verify(&w.ring).is_ok());
    assert_eq!(
        full.transfer(&owners[HOPS_MAX], w.certified(&key(99)), [0; 16]),
        Err(TokenError::TooManyHops {
            hops: HOPS_MAX + 1,
            hops_max: HOPS_MAX
        })
    );
    let mut bytes = encoded(&full);
    bytes[1 + 144] = HOPS_MAX as u8 + 1;
    assert!(matches!(
        decode_exact("token", &bytes, TOKEN_BYTES_MAX + HOP_BYTES, Token::decode_from),
        Err(DecodeError::CountTooLarge { .. })
    ));
}

fn arbitrary_token() -> impl Strategy<Value = Token> {
    let hop = (any::<[u8; 32]>(), any::<u32>(), any::<[u8; 16]>(), any::<[u8; 32]>()).prop_map(
        |(key, period, nonce, half)| specie_offline::Hop {
            next_owner: KeyCertificate {
                key,
                period,
                signature: [half, half].concat().try_into().unwrap(),
            },
            nonce,
            signature: [half, key].concat().try_into().unwrap(),
        },
    );
    (
        any::<[u8; 32]>(),
        any::<[u8; 16]>(),
        any::<[u8; 32]>(),
        proptest::collection::vec(hop, 0..=4),
    )
        .prop_map(|(issuing_key, serial, first_owner, hops)| Token {
            issuance: Issuance {
                issuing_key,
                serial,
                first_owner,
                signature: [issuing_key, first_owner].concat().try_into().unwrap(),
            },
            hops,
        })
}

proptest! {
    #[test]
    fn tokens_round_trip_and_every_strict_prefix_is_refused(token in arbitrary_token()) {
        let bytes = encoded(&token);
        prop_assert_eq!(bytes.len(), 146 + token.hops.len() * HOP_BYTES);
        prop_assert_eq!(decode_exact("token", &bytes, TOKEN_BYTES_MAX, Token::decode_from), Ok(token));
        for cut in 0..bytes.len() {
            let mut reader = Reader::new(&bytes[..cut]);
            prop_assert!(Token::decode_from(&mut reader).is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder_and_what_decodes_re_encodes(
        bytes in proptest::collection::vec(any::<u8>(), 0..1200),
        versioned in any::<bool>(),
    ) {
        let mut bytes = bytes;
        if versioned && !bytes.is_empty() {
            bytes[0] = specie_offline::ENCODING_VERSION;
        }
        if let Ok(token) = decode_exact("token", &bytes, TOKEN_BYTES_MAX, Token::decode_from) {
            prop_assert_eq!(encoded(&token), bytes);
            let _ = token.verify(&World::new(DENOMINATION).ring);
        }
    }
}
