//! The vectors of `docs/offline-format.md`: a fixed scenario built from `deterministic_key`
//! (Ed25519 signatures are deterministic, so every byte is reproducible), encoded, and compared
//! with `docs/offline-vectors.json`. Any change to an encoding, a domain string, a link or the key
//! derivation fails this test. The stored bytes are also decoded back, re-encoded, and checked as
//! a payee would (`Token::verify` with a key ring made of the stored public keys).
//!
//! To regenerate the file after a deliberate format change (which also needs a new version
//! byte): `SPECIE_WRITE_VECTORS=1 cargo test -p specie-offline --test specie-offline vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::Value;
use sha2::{Digest, Sha256};
use specie_codec::{DecodeError, Reader};
use specie_offline::{
    decode_exact, deterministic_key, Conflict, DoubleSpend, EvidenceBundle, History, Hop, Instruction, Issuance,
    KeyBinding, KeyCertificate, KeyRing, Move, Recorded, SignedKeyRing, SignedMove, SigningKey, Token, Verified,
    VerifyingKey, CERTIFIED_KEY_BYTES, EVIDENCE_BUNDLE_BYTES_MAX, INSTRUCTION_BYTES_MAX, SIGNED_KEY_RING_BYTES_MAX,
    TOKEN_BYTES_MAX,
};
use specie_vectors::{assert_file_matches, encoded, read_or_write, stored_bytes, vectors_text, Vector};

/// The denomination of the issuing key's tokens, and the period its certifying key certifies.
const DENOMINATION: u64 = 100;
const PERIOD: u32 = 7;
const SERIAL: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
/// The payees' handshake nonces: owner 1's (hop 1), owner 2's (hop 2), and owner 2's for the
/// second transfer by owner 0 (the double-spend branch).
const NONCE_A: [u8; 16] = [0xaa; 16];
const NONCE_B: [u8; 16] = [0xbb; 16];
const NONCE_C: [u8; 16] = [0xcc; 16];
/// Owner 2's deposit of the 2-hop token: its instruction's hash (what the instruction says is not
/// part of this format yet) and its own nonce.
const INSTRUCTION: [u8; 32] = [0x11; 32];
const NONCE_D: [u8; 16] = [0xdd; 16];

fn vectors_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../docs/offline-vectors.json")
}

/// Every value of the scenario.
struct Scenario {
    issuing: SigningKey,
    certifying: SigningKey,
    /// The devices' one-time keys: owner 0 (the token's first owner, then the double spender),
    /// owner 1 and owner 2.
    one_time: Vec<SigningKey>,
    /// Owner 0's device identity key, which binds owner 0's one-time key.
    identity: SigningKey,
    /// The certificates of one-time keys 1 and 2, in that order.
    certificates: Vec<KeyCertificate>,
    binding: KeyBinding,
    /// The token after 0, 1 and 2 hops: owner 0, then owner 1 at nonce A, then owner 2 at nonce B.
    tokens: Vec<Token>,
    /// Owner 0's second transfer of the issued token, to owner 2 at nonce C.
    branch: Token,
    /// Owner 2's deposit statement on the 2-hop token, signed.
    deposit: SignedMove,
}

fn scenario() -> Scenario {
    let issuing = deterministic_key("issuing", 0);
    let certifying = deterministic_key("certifying", 0);
    let one_time: Vec<SigningKey> = (0..3).map(|i| deterministic_key("one-time", i)).collect();
    let identity = deterministic_key("identity", 0);
    let public = |key: &SigningKey| key.verifying_key().to_bytes();
    let certificates: Vec<KeyCertificate> = one_time[1..]
        .iter()
        .map(|key| KeyCertificate::sign(public(key), PERIOD, &certifying))
        .collect();
    let binding = KeyBinding::sign(&identity, public(&one_time[0]));
    let issued = Token::issued(Issuance::sign(&issuing, SERIAL, public(&one_time[0])));
    let once = issued.transfer(&one_time[0], certificates[0], NONCE_A).unwrap();
    let twice = once.transfer(&one_time[1], certificates[1], NONCE_B).unwrap();
    let branch = issued.transfer(&one_time[0], certificates[1], NONCE_C).unwrap();
    let deposit = Move::Deposit {
        instruction: INSTRUCTION,
        nonce: NONCE_D,
    }
    .sign(&twice, &one_time[2]);
    Scenario {
        issuing,
        certifying,
        one_time,
        identity,
        certificates,
        binding,
        tokens: vec![issued, once, twice],
        branch,
        deposit,
    }
}

/// What hop `index` (from 1) of `token` signs.
fn hop_signing_bytes(token: &Token, index: usize) -> Vec<u8> {
    let hop = &token.hops[index - 1];
    Hop::signing_bytes(&token.links()[index - 1], index as u8, &hop.next_owner, &hop.nonce)
}

/// Every vector, in the order the format document reads.
fn vectors(s: &Scenario) -> Vec<Vector> {
    let mut vectors = Vec::new();
    let mut put = |name: String, description: String, bytes: &[u8]| {
        vectors.push(Vector {
            name,
            description,
            bytes: bytes.to_vec(),
        });
    };
    let mut put_key = |name: &str, label: &str, n: u64, role: &str, key: &SigningKey| {
        put(
            format!("{name}_seed"),
            format!("Ed25519 secret key (seed) of deterministic_key(\"{label}\", {n}): {role}"),
            &key.to_bytes(),
        );
        put(
            format!("{name}_public_key"),
            format!("{role}: public key"),
            key.verifying_key().as_bytes(),
        );
    };
    put_key(
        "issuing",
        "issuing",
        0,
        &format!("the issuing key, denomination {DENOMINATION}"),
        &s.issuing,
    );
    put_key(
        "certifying",
        "certifying",
        0,
        &format!("the certifying key of period {PERIOD}"),
        &s.certifying,
    );
    for (i, key) in s.one_time.iter().enumerate() {
        put_key(
            &format!("one_time[{i}]"),
            "one-time",
            i as u64,
            &format!("owner {i}'s one-time key"),
            key,
        );
    }
    put_key("identity", "identity", 0, "owner 0's device identity key", &s.identity);
    put_certificates_and_binding(&mut put, s);
    put_statements(&mut put, s);
    let held = [
        "the issued token, no hops: owner 0's",
        "the token after hop 1: owner 1's",
        "the token after hops 1 and 2: owner 2's",
    ];
    for (hops, (token, held)) in s.tokens.iter().zip(held).enumerate() {
        put(format!("token[{hops}]"), held.into(), &encoded(|o| token.encode_to(o)));
    }
    put(
        "branch_token".into(),
        "the token after owner 0's second transfer, to owner 2 at nonce cc..cc: one hop".into(),
        &encoded(|o| s.branch.encode_to(o)),
    );
    put_ring_instruction_and_evidence(&mut put, s);
    vectors
}

/// The payee's key ring, from the scenario's public keys.
fn scenario_ring(s: &Scenario) -> KeyRing {
    let mut ring = KeyRing::default();
    ring.add_issuing_key(s.issuing.verifying_key().to_bytes(), DENOMINATION)
        .unwrap();
    ring.add_certifying_key(PERIOD, s.certifying.verifying_key().to_bytes())
        .unwrap();
    ring
}

/// Owner 0's double spend of the issued token (to owner 1 at nonce A, and to owner 2 at nonce C)
/// as evidence: the issued token, the two transfers, owner 0's binding.
fn scenario_evidence(s: &Scenario) -> EvidenceBundle {
    let as_move = |hop: &Hop| SignedMove {
        statement: Move::Transfer {
            next_owner: hop.next_owner,
            nonce: hop.nonce,
        },
        signature: hop.signature,
    };
    EvidenceBundle {
        ring: scenario_ring(s),
        double_spends: vec![DoubleSpend {
            token: s.tokens[0].clone(),
            first: as_move(&s.tokens[1].hops[0]),
            second: as_move(&s.branch.hops[0]),
            binding: s.binding,
        }],
    }
}

/// A re-issue of the 100 to owner 2's key.
fn scenario_instruction(s: &Scenario) -> Instruction {
    Instruction::Reissue {
        outputs: vec![(DENOMINATION, s.one_time[2].verifying_key().to_bytes())],
    }
}

fn put_ring_instruction_and_evidence(put: &mut impl FnMut(String, String, &[u8]), s: &Scenario) {
    let ring = scenario_ring(s);
    put(
        "key_ring".into(),
        "the payee's key ring: 01 || 01 issuing key || issuing_public_key || denomination 100 (u64) || 01 certifying key \
         || period 7 (u32) || certifying_public_key"
            .into(),
        &encoded(|o| ring.encode_to(o)),
    );
    put(
        "key_ring_fingerprint".into(),
        "SHA-256(\"specie/offline/key-ring/v2\" || key_ring)".into(),
        &ring.fingerprint(),
    );
    let bridge = deterministic_key("bridge", 0);
    put(
        "bridge_seed".into(),
        "Ed25519 secret key (seed) of deterministic_key(\"bridge\", 0): the authority's bridge key, which signs its key ring"
            .into(),
        &bridge.to_bytes(),
    );
    put(
        "bridge_public_key".into(),
        "the authority's bridge key: public key".into(),
        bridge.verifying_key().as_bytes(),
    );
    let signed = SignedKeyRing::sign(ring.clone(), &bridge);
    put(
        "signed_key_ring_signing_bytes".into(),
        "\"specie/offline/signed-key-ring/v1\" || 01 || bridge_public_key || key_ring_fingerprint".into(),
        &SignedKeyRing::signing_bytes(&signed.authority, &ring),
    );
    put(
        "signed_key_ring".into(),
        "the key ring as the authority publishes it: bridge_public_key || signature || key_ring".into(),
        &encoded(|o| signed.encode_to(o)),
    );
    let instruction = scenario_instruction(s);
    put(
        "instruction_reissue".into(),
        "a deposit's instruction: 01 || 00 re-issue || 01 output || value 100 (u64) || one_time[2]".into(),
        &instruction.encode(),
    );
    put(
        "instruction_reissue_hash".into(),
        "SHA-256(\"specie/offline/instruction/v1\" || instruction_reissue): what a deposit statement signs".into(),
        &instruction.hash(),
    );
    put(
        "evidence_bundle".into(),
        "evidence of owner 0's double spend: 01 || key_ring || 01 (count) || double spend (01 || token[0] || 00 \
         transfer to one_time[1] at aa..aa || 00 transfer to one_time[2] at cc..cc || owner 0's binding)"
            .into(),
        &encoded(|o| scenario_evidence(s).encode_to(o)),
    );
}

fn put_certificates_and_binding(put: &mut impl FnMut(String, String, &[u8]), s: &Scenario) {
    let certifying = s.certifying.verifying_key().to_bytes();
    for (i, certificate) in [1, 2].into_iter().zip(&s.certificates) {
        put(
            format!("key_certificate_signing_bytes[{i}]"),
            format!(
                "what the certifying key signs to certify one_time[{i}] for period {PERIOD}: \
                 \"specie/offline/key-certificate/v1\" || 01 || certifying key || key || period"
            ),
            &KeyCertificate::signing_bytes(&certifying, &certificate.key, certificate.period),
        );
        put(
            format!("key_certificate[{i}]"),
            format!("one_time[{i}]'s key certificate: key || period || signature"),
            &encoded(|o| certificate.encode_to(o)),
        );
    }
    put(
        "key_binding_signing_bytes".into(),
        "what the identity key signs to bind one_time[0]: \"specie/offline/key-binding/v1\" || 01 || identity || key"
            .into(),
        &KeyBinding::signing_bytes(&s.binding.identity, &s.binding.key),
    );
    put(
        "key_binding_signature".into(),
        "the identity key's signature of key_binding_signing_bytes".into(),
        &s.binding.signature,
    );
}

fn put_statements(put: &mut impl FnMut(String, String, &[u8]), s: &Scenario) {
    let twice = &s.tokens[2];
    put(
        "issuance_signing_bytes".into(),
        "what the issuing key signs: \"specie/offline/issue/v1\" || 01 || issuing key || serial 00..0f || one_time[0]"
            .into(),
        &twice.issuance.signing_bytes(),
    );
    let links = twice.links();
    put(
        "link[0]".into(),
        "SHA-256 of issuance_signing_bytes: the token's first link".into(),
        &links[0],
    );
    let hops = [(1, 0, "aa..aa"), (2, 1, "bb..bb")];
    for (index, owner, nonce) in hops {
        put(
            format!("transfer_signing_bytes[{index}]"),
            format!(
                "what owner {owner} signs to pass the token on as hop {index}: \"specie/offline/transfer/v1\" || 01 || \
                 link[{owner}] || {index:02x} || one_time[{index}] || period || nonce {nonce}"
            ),
            &hop_signing_bytes(twice, index),
        );
        put(
            format!("link[{index}]"),
            format!("SHA-256 of transfer_signing_bytes[{index}]"),
            &links[index],
        );
    }
    put(
        "branch_signing_bytes".into(),
        "what owner 0 signs to pass the token on a second time, to one_time[2] at nonce cc..cc: another child of link[0]"
            .into(),
        &hop_signing_bytes(&s.branch, 1),
    );
    put(
        "branch_link".into(),
        "SHA-256 of branch_signing_bytes".into(),
        &s.branch.links()[1],
    );
    put(
        "deposit_signing_bytes".into(),
        "what owner 2 signs to deposit the token: \"specie/offline/deposit/v1\" || 01 || link[2] || 03 || \
         instruction hash 11..11 || nonce dd..dd"
            .into(),
        &s.deposit.statement.signing_bytes(&links[2], 3),
    );
    put(
        "deposit_link".into(),
        "SHA-256 of deposit_signing_bytes".into(),
        &Sha256::digest(s.deposit.statement.signing_bytes(&links[2], 3)),
    );
    put(
        "deposit_signature".into(),
        "owner 2's signature of deposit_signing_bytes".into(),
        &s.deposit.signature,
    );
}

const FILE_DESCRIPTION: &str = "Test vectors of docs/offline-format.md, generated and checked by \
     crates/offline/specie-offline/tests/specie-offline/vectors.rs; keys from deterministic_key, Ed25519 signatures (deterministic)";

fn stored_array<const N: usize>(stored: &Value, name: &str) -> [u8; N] {
    stored_bytes(stored, name)
        .try_into()
        .unwrap_or_else(|_| panic!("{name} is {N} bytes"))
}

/// The stored file's text, read once; written first from the code if `SPECIE_WRITE_VECTORS=1`
/// (once, so that the tests, which run in parallel, all read the new file).
fn stored_text() -> &'static str {
    static STORED: OnceLock<String> = OnceLock::new();
    STORED.get_or_init(|| {
        read_or_write(&vectors_path(), || {
            vectors_text(FILE_DESCRIPTION, &vectors(&scenario()))
        })
    })
}

fn stored() -> Value {
    serde_json::from_str(stored_text()).expect("the vectors file is JSON")
}

#[test]
fn the_encodings_match_the_stored_vectors() {
    assert_file_matches(
        stored_text(),
        "docs/offline-vectors.json",
        FILE_DESCRIPTION,
        &vectors(&scenario()),
    );
}

/// Decodes exactly and checks that re-encoding gives the stored bytes back.
fn round_trip<T>(
    stored: &Value,
    name: &str,
    bytes_max: usize,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
) -> T {
    let bytes = stored_bytes(stored, name);
    let value = decode_exact("vector", &bytes, bytes_max, decode).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(encoded(|o| encode(&value, o)), bytes, "{name} re-encodes to its bytes");
    value
}

/// A payee's key ring, from the stored public keys only.
fn stored_ring(stored: &Value) -> KeyRing {
    let mut ring = KeyRing::default();
    ring.add_issuing_key(stored_array(stored, "issuing_public_key"), DENOMINATION)
        .unwrap();
    ring.add_certifying_key(PERIOD, stored_array(stored, "certifying_public_key"))
        .unwrap();
    ring
}

#[test]
fn the_stored_keys_certificates_and_binding_decode_and_check() {
    let stored = &stored();
    let ring = stored_ring(stored);
    let certifying = stored_array(stored, "certifying_public_key");
    for i in [1, 2] {
        let certificate = round_trip(
            stored,
            &format!("key_certificate[{i}]"),
            CERTIFIED_KEY_BYTES,
            KeyCertificate::decode_from,
            KeyCertificate::encode_to,
        );
        let key: [u8; 32] = stored_array(stored, &format!("one_time[{i}]_public_key"));
        assert_eq!((certificate.key, certificate.period), (key, PERIOD));
        assert_eq!(
            KeyCertificate::signing_bytes(&certifying, &certificate.key, certificate.period),
            stored_bytes(stored, &format!("key_certificate_signing_bytes[{i}]"))
        );
        assert_eq!(certificate.check(&ring).map(|k| k.to_bytes()), Ok(key));
    }
    let binding = KeyBinding {
        identity: stored_array(stored, "identity_public_key"),
        key: stored_array(stored, "one_time[0]_public_key"),
        signature: stored_array(stored, "key_binding_signature"),
    };
    assert_eq!(
        KeyBinding::signing_bytes(&binding.identity, &binding.key),
        stored_bytes(stored, "key_binding_signing_bytes")
    );
    assert_eq!(binding.check(), Ok(()), "the identity key bound owner 0's one-time key");
    for name in [
        "issuing",
        "certifying",
        "one_time[0]",
        "one_time[1]",
        "one_time[2]",
        "identity",
    ] {
        let seed: [u8; 32] = stored_array(stored, &format!("{name}_seed"));
        assert_eq!(
            SigningKey::from_bytes(&seed).verifying_key().to_bytes(),
            stored_array(stored, &format!("{name}_public_key")),
            "{name}: the public key is the seed's"
        );
    }
}

#[test]
fn the_stored_signed_key_ring_verifies_under_the_bridge_key_only() {
    let stored = &stored();
    let signed = round_trip(
        stored,
        "signed_key_ring",
        SIGNED_KEY_RING_BYTES_MAX,
        SignedKeyRing::decode_from,
        SignedKeyRing::encode_to,
    );
    let bridge: [u8; 32] = stored_array(stored, "bridge_public_key");
    assert_eq!(signed.authority, bridge);
    assert_eq!(signed.ring, stored_ring(stored));
    assert_eq!(
        SignedKeyRing::signing_bytes(&bridge, &signed.ring),
        stored_bytes(stored, "signed_key_ring_signing_bytes")
    );
    assert_eq!(signed.check(Some(&bridge)), Ok(()));
    let issuing: [u8; 32] = stored_array(stored, "issuing_public_key");
    assert!(signed.check(Some(&issuing)).is_err(), "pinned to another key");
    let mut bytes = stored_bytes(stored, "signed_key_ring");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    if let Ok(tampered) = decode_exact(
        "tampered",
        &bytes,
        SIGNED_KEY_RING_BYTES_MAX,
        SignedKeyRing::decode_from,
    ) {
        assert!(tampered.check(None).is_err(), "a changed ring no longer verifies");
    }
}

#[test]
fn the_stored_tokens_decode_re_encode_and_verify_as_a_payee_verifies_them() {
    let stored = &stored();
    let s = scenario();
    let ring = stored_ring(stored);
    let stored_links: Vec<[u8; 32]> = (0..3).map(|i| stored_array(stored, &format!("link[{i}]"))).collect();
    let mut signing_bytes = vec![stored_bytes(stored, "issuance_signing_bytes")];
    signing_bytes.extend((1..3).map(|i| stored_bytes(stored, &format!("transfer_signing_bytes[{i}]"))));
    for (statement, link) in signing_bytes.iter().zip(&stored_links) {
        assert_eq!(
            Sha256::digest(statement).as_slice(),
            link,
            "a link is SHA-256 of the signing bytes"
        );
    }
    for hops in 0..3 {
        let name = format!("token[{hops}]");
        let token = round_trip(stored, &name, TOKEN_BYTES_MAX, Token::decode_from, Token::encode_to);
        assert_eq!(token, s.tokens[hops]);
        assert_eq!(token.hops.len(), hops);
        assert_eq!(token.issuance.signing_bytes(), signing_bytes[0]);
        assert_eq!(token.links(), stored_links[..=hops]);
        for (index, statement) in signing_bytes.iter().enumerate().take(hops + 1).skip(1) {
            assert_eq!(&hop_signing_bytes(&token, index), statement, "{name} hop {index}");
        }
        assert_eq!(
            token.verify(&ring),
            Ok(Verified {
                denomination: DENOMINATION,
                owner: stored_array(stored, &format!("one_time[{hops}]_public_key")),
                link: stored_links[hops],
            }),
            "{name}"
        );
    }
    let token = round_trip(
        stored,
        "token[2]",
        TOKEN_BYTES_MAX,
        Token::decode_from,
        Token::encode_to,
    );
    for (hop, i) in token.hops.iter().zip([1, 2]) {
        let certificate = stored_bytes(stored, &format!("key_certificate[{i}]"));
        assert_eq!(
            encoded(|o| hop.next_owner.encode_to(o)),
            certificate,
            "hop {i} carries it"
        );
    }
    assert_eq!((token.hops[0].nonce, token.hops[1].nonce), (NONCE_A, NONCE_B));
}

/// The double spend: owner 0 signed two different children of `link[0]`, the transfer to owner 1
/// and the branch to owner 2; each token alone verifies offline.
#[test]
fn the_stored_branch_is_a_second_child_of_the_issuance_signed_by_owner_0() {
    let stored = &stored();
    let ring = stored_ring(stored);
    let branch = round_trip(
        stored,
        "branch_token",
        TOKEN_BYTES_MAX,
        Token::decode_from,
        Token::encode_to,
    );
    assert_eq!(branch, scenario().branch);
    let branch_link: [u8; 32] = stored_array(stored, "branch_link");
    let branch_bytes = stored_bytes(stored, "branch_signing_bytes");
    assert_eq!(hop_signing_bytes(&branch, 1), branch_bytes);
    assert_eq!(Sha256::digest(&branch_bytes).as_slice(), branch_link);
    assert_eq!(
        branch.links(),
        [stored_array(stored, "link[0]"), branch_link],
        "the branch starts at the issuance"
    );
    assert_ne!(branch_link, stored_array::<32>(stored, "link[1]"));
    assert_eq!(branch.hops[0].nonce, NONCE_C);
    assert_eq!(
        branch.verify(&ring),
        Ok(Verified {
            denomination: DENOMINATION,
            owner: stored_array(stored, "one_time[2]_public_key"),
            link: branch_link,
        })
    );
    let first_transfer = stored_bytes(stored, "transfer_signing_bytes[1]");
    // Both children sign the same previous link, at the same index: byte 26 is the version, then
    // the link (27..59) and the index (59).
    assert_eq!(first_transfer[..60], branch_bytes[..60]);
    assert_ne!(first_transfer, branch_bytes);
}

/// Owner 2's stored deposit statement is on `link[2]`, signed by owner 2; the authority's tree,
/// given the 2-hop token with it and then the branch, names owner 0 alone, on `link[0]`, with the
/// stored first hop and branch hop as its two statements.
#[test]
fn the_stored_deposit_verifies_and_the_history_names_owner_0_on_the_stored_branch() {
    let stored = &stored();
    let deposit = SignedMove {
        statement: Move::Deposit {
            instruction: INSTRUCTION,
            nonce: NONCE_D,
        },
        signature: stored_array(stored, "deposit_signature"),
    };
    let link: [u8; 32] = stored_array(stored, "link[2]");
    let signing_bytes = stored_bytes(stored, "deposit_signing_bytes");
    assert_eq!(deposit.statement.signing_bytes(&link, 3), signing_bytes);
    assert_eq!(
        Sha256::digest(&signing_bytes).as_slice(),
        stored_array::<32>(stored, "deposit_link")
    );
    let owner = VerifyingKey::from_bytes(&stored_array(stored, "one_time[2]_public_key")).unwrap();
    let signature = ed25519_dalek::Signature::from_bytes(&deposit.signature);
    assert!(
        owner.verify_strict(&signing_bytes, &signature).is_ok(),
        "owner 2 signed it"
    );

    let token = |name: &str| {
        decode_exact(
            "token",
            &stored_bytes(stored, name),
            TOKEN_BYTES_MAX,
            Token::decode_from,
        )
        .unwrap()
    };
    let (chain, branch) = (token("token[2]"), token("branch_token"));
    let mut history = History::new(&chain.issuance);
    assert_eq!(
        history.record(&chain, Some(deposit)),
        Ok(Recorded::New { conflicts: Vec::new() })
    );
    assert_eq!(history.record(&chain, Some(deposit)), Ok(Recorded::Known), "a replay");
    let signed = |hop: &Hop| SignedMove {
        statement: Move::Transfer {
            next_owner: hop.next_owner,
            nonce: hop.nonce,
        },
        signature: hop.signature,
    };
    assert_eq!(
        history.record(&branch, None),
        Ok(Recorded::New {
            conflicts: vec![Conflict {
                node: stored_array(stored, "link[0]"),
                owner: stored_array(stored, "one_time[0]_public_key"),
                index: 0,
                first: signed(&chain.hops[0]),
                second: signed(&branch.hops[0]),
            }]
        })
    );
}

#[test]
fn the_stored_evidence_convicts_owner_0s_identity_under_the_stored_ring() {
    let stored = &stored();
    let bundle = round_trip(
        stored,
        "evidence_bundle",
        EVIDENCE_BUNDLE_BYTES_MAX,
        EvidenceBundle::decode_from,
        EvidenceBundle::encode_to,
    );
    let ring = stored_ring(stored);
    assert_eq!(
        bundle.ring.fingerprint(),
        ring.fingerprint(),
        "the bundle's ring is the payee's"
    );
    assert_eq!(bundle.ring.fingerprint(), stored_array(stored, "key_ring_fingerprint"));
    assert_eq!(encoded(|o| ring.encode_to(o)), stored_bytes(stored, "key_ring"));
    let convicted = bundle.double_spends[0].check(&ring).unwrap();
    assert_eq!(convicted.identity, stored_array::<32>(stored, "identity_public_key"));
    assert_eq!(
        convicted.one_time_key,
        stored_array::<32>(stored, "one_time[0]_public_key")
    );
    assert_eq!(convicted.denomination, DENOMINATION);
    let instruction = round_trip(
        stored,
        "instruction_reissue",
        INSTRUCTION_BYTES_MAX,
        Instruction::decode_from,
        Instruction::encode_to,
    );
    assert_eq!(instruction.hash(), stored_array(stored, "instruction_reissue_hash"));
}
