//! Feeds arbitrary bytes to the decoders of offline cash's signed vocabulary (`specie_offline`,
//! the format of `docs/offline-format.md`): token, key certificate, double-spend evidence, evidence
//! bundle, key ring, signed key ring and deposit instruction, each through `decode_exact`, and to the offline
//! authority's log records (`specie_offline_authority::Command`). Every input goes to all of them.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (each format has one
//! encoding); and what a payee then checks (`Token::verify`, `KeyCertificate::check`, and a third
//! party `DoubleSpend::check`) must not
//! panic either, and what it accepts must be consistent with the token's own chain. The payee's
//! key ring is the vectors' (`docs/offline-vectors.json`: `deterministic_key("issuing", 0)` for
//! denomination 100, `deterministic_key("certifying", 0)` for period 7), so that inputs grown
//! from the vectors reach the signature checks.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use specie_codec::{DecodeError, Reader};
use specie_offline::{
    deterministic_key, DoubleSpend, EvidenceBundle, Instruction, KeyCertificate, KeyRing, PublicKey, SignedKeyRing,
    Token, HOPS_MAX, HOP_BYTES,
};
use specie_offline_authority::Command;

/// Above the largest token (`TOKEN_BYTES_MAX`, 5,906 bytes), so that the size check is not what
/// refuses a valid input: the decoder bounds the hop count before allocating anyway.
const INPUT_BYTES_MAX: usize = 1 << 16;
/// The vectors' denomination and certificate period.
const DENOMINATION: u64 = 100;
const PERIOD: u32 = 7;

fn vectors_ring() -> &'static KeyRing {
    static RING: OnceLock<KeyRing> = OnceLock::new();
    RING.get_or_init(|| {
        let mut ring = KeyRing::default();
        let issuing = deterministic_key("issuing", 0).verifying_key().to_bytes();
        ring.add_issuing_key(issuing, DENOMINATION).expect("a valid key");
        let certifying = deterministic_key("certifying", 0).verifying_key().to_bytes();
        ring.add_certifying_key(PERIOD, certifying).expect("a valid key");
        ring
    })
}

/// The vectors' bridge key (`deterministic_key("bridge", 0)`), which signs their key ring.
fn bridge() -> &'static PublicKey {
    static BRIDGE: OnceLock<PublicKey> = OnceLock::new();
    BRIDGE.get_or_init(|| deterministic_key("bridge", 0).verifying_key().to_bytes())
}

/// Decodes all of `data` as one `T`; if that succeeds, the encoding must be `data` again.
fn decode_canonical<T>(
    what: &'static str,
    data: &[u8],
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
    encode: impl FnOnce(&T, &mut Vec<u8>),
) -> Option<T> {
    specie_vectors::decode_canonical(data, INPUT_BYTES_MAX, decode, encode).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fuzz_target!(|data: &[u8]| {
    let ring = vectors_ring();

    if let Some(evidence) = decode_canonical("double spend", data, DoubleSpend::decode_from, DoubleSpend::encode_to) {
        let _ = evidence.check(&ring);
    }

    if let Some(bundle) = decode_canonical("evidence bundle", data, EvidenceBundle::decode_from, EvidenceBundle::encode_to) {
        for double_spend in &bundle.double_spends {
            let _ = double_spend.check(&bundle.ring);
        }
    }
    if let Some(ring) = decode_canonical("key ring", data, KeyRing::decode_from, KeyRing::encode_to) {
        let _ = ring.fingerprint();
    }
    if let Some(signed) = decode_canonical("signed key ring", data, SignedKeyRing::decode_from, SignedKeyRing::encode_to) {
        // Only the vectors' bridge key's ring may verify pinned to it, and only unchanged.
        if signed.check(Some(bridge())).is_ok() {
            assert_eq!(&signed.authority, bridge());
        }
    }
    if let Some(instruction) = decode_canonical("instruction", data, Instruction::decode_from, Instruction::encode_to) {
        let _ = instruction.hash();
    }
    if let Ok(command) = Command::decode(data) {
        assert_eq!(command.encode(), data, "an authority command has one encoding");
    }

    if let Some(token) = decode_canonical("token", data, Token::decode_from, Token::encode_to) {
        assert!(token.hops.len() <= HOPS_MAX);
        assert_eq!(data.len(), 146 + token.hops.len() * HOP_BYTES);
        let links = token.links();
        assert_eq!(links.len(), token.hops.len() + 1);
        if let Ok(verified) = token.verify(ring) {
            assert_eq!(verified.denomination, DENOMINATION);
            assert_eq!(&verified.owner, token.owner());
            assert_eq!(Some(&verified.link), links.last());
            // Every new owner's certificate checks on its own too.
            for hop in &token.hops {
                assert_eq!(
                    hop.next_owner.check(ring).map(|key| key.to_bytes()),
                    Ok(hop.next_owner.key)
                );
            }
        }
    }

    let certificate = decode_canonical(
        "key certificate",
        data,
        KeyCertificate::decode_from,
        KeyCertificate::encode_to,
    );
    if let Some(certificate) = certificate {
        if let Ok(key) = certificate.check(ring) {
            assert_eq!(key.to_bytes(), certificate.key);
            assert_eq!(certificate.period, PERIOD);
        }
    }
});
