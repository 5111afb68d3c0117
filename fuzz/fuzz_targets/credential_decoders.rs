//! Feeds arbitrary bytes to every decoder of `specie_credential` (the format of
//! `docs/credential-format.md`) through `decode_exact`.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (one encoding per
//! value); and what a verifier and an auditor then do with it (`verify` of a spend proof or owner
//! audit for the vectors' owner commitment and message, the RA's check
//! of a request's proof of possession, an auditor's `decrypt`) must not panic. Inputs grown from the
//! vectors (`docs/credential-vectors.json`) reach the proofs' checks.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_codec::{Decode, Encode};
use specie_credential::{
    AuditorKey, AuditorSecret, Credential, EnrolmentChallenge, EnrolmentRequest, OwnerAudit, OwnerCiphertext,
    OwnerCommitment, OwnerOpening, RaPublicKey, RegistrationAuthority, SpendProof,
};

/// The vectors' message, RA seed and owner commitment (`docs/credential-vectors.json`), so that the
/// vectors' proofs, grown by the fuzzer, verify until a byte changes.
const MESSAGE: [u8; 32] = [0xc0; 32];
const RA_SEED: [u8; 32] = [0x0a; 32];
const OWNER_COMMITMENT_HEX: &str =
    "0105b72f713c5709e006bab7967f02a7d27d135380305bc931e59cde304571fd26a9769ba4c3a990a88223a235ce4a37c5ce";

fn round_trip<T: Decode<Limits = ()> + Encode>(data: &[u8]) -> Option<T> {
    let value = T::decode_exact(data).ok()?;
    assert_eq!(value.encode(), data, "what decodes re-encodes to its input");
    Some(value)
}

fuzz_target!(|data: &[u8]| {
    let authority = RegistrationAuthority::from_seed(&RA_SEED).public_key();
    let auditor = AuditorSecret::from_seed(&[0xa1; 32]);
    round_trip::<RaPublicKey>(data);
    round_trip::<EnrolmentChallenge>(data);
    round_trip::<Credential>(data);
    round_trip::<AuditorKey>(data);
    if let Some(request) = round_trip::<EnrolmentRequest>(data) {
        let _ = request.possession_holds(&authority);
    }
    if let Some(opening) = round_trip::<OwnerOpening>(data) {
        let _ = opening.commitment();
    }
    if let Some(owner) = round_trip::<OwnerCommitment>(data) {
        let _ = owner.to_bytes();
    }
    if let Some(ciphertext) = round_trip::<OwnerCiphertext>(data) {
        let _ = auditor.decrypt(&ciphertext);
    }
    let owner = OwnerCommitment::decode_exact(&hex::decode(OWNER_COMMITMENT_HEX).unwrap()).unwrap();
    if let Some(audit) = round_trip::<OwnerAudit>(data) {
        let _ = audit.verify(&owner, &MESSAGE);
        let _ = auditor.decrypt(audit.ciphertext());
    }
    if let Some(proof) = round_trip::<SpendProof>(data) {
        let _ = proof.verify(&authority, &owner, &MESSAGE);
        for ciphertext in proof.auditor_ciphertexts() {
            let _ = auditor.decrypt(&ciphertext);
        }
    }
});
