//! Feeds arbitrary bytes to every decoder of `specie_credential::unlinkable` (the format of
//! `docs/unlinkable-format.md`) through `decode_exact`.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (one encoding per
//! value); and what a verifier, a certifier or an owner then does with it (verifying a transfer
//! under fixed keys, certifying a token, assembling a certificate from a share, checking a
//! certificate) must not panic. The library proofs inside a transfer (Coconut's and
//! Bulletproofs++'s) reach their verifiers only after their fixed shapes were checked.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::{
    deal_certifiers, Certificate, CertificateShare, CertifierGroup, CertifierSecret, SerialNumber, Token, TokenOpening,
    UnlinkableKeys, UnlinkableTransfer,
};
use specie_credential::{RaPublicKey, RegistrationAuthority};

const MESSAGE: [u8; 32] = [0x3c; 32];

/// The fixed keys, dealt once: dealing per input made the target run a few inputs a second.
fn fixture() -> &'static (RaPublicKey, CertifierGroup, Vec<CertifierSecret>) {
    static FIXTURE: OnceLock<(RaPublicKey, CertifierGroup, Vec<CertifierSecret>)> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let authority = RegistrationAuthority::from_seed(&[0x0a; 32]).public_key();
        let (group, certifiers) = deal_certifiers(2, 3, &mut StdRng::seed_from_u64(7)).unwrap();
        (authority, group, certifiers)
    })
}

fn round_trip<T: Decode<Limits = ()> + Encode>(data: &[u8]) -> Option<T> {
    let value = T::decode_exact(data).ok()?;
    assert_eq!(value.encode(), data, "what decodes re-encodes to its input");
    Some(value)
}

fuzz_target!(|data: &[u8]| {
    let (authority, group, certifiers) = fixture();
    let keys = UnlinkableKeys {
        authority,
        certifiers: group,
    };
    let opening = round_trip::<TokenOpening>(data);
    if let Some(opening) = &opening {
        let token = opening.token();
        let _ = opening.certificate(group, &[certifiers[0].certify(&token)]);
    }
    if let Some(token) = round_trip::<Token>(data) {
        let _ = certifiers[1].certify(&token);
    }
    if let Some(share) = round_trip::<CertificateShare>(data) {
        let probe = TokenOpening::random(specie_credential::EnrolmentId(1), 5, &mut StdRng::seed_from_u64(1));
        let _ = probe.certificate(group, &[share]);
    }
    if let Some(certificate) = round_trip::<Certificate>(data) {
        let probe = TokenOpening::random(specie_credential::EnrolmentId(1), 5, &mut StdRng::seed_from_u64(1));
        let _ = certificate.check(&probe, group);
    }
    round_trip::<SerialNumber>(data);
    round_trip::<CertifierGroup>(data);
    round_trip::<CertifierSecret>(data);
    if let Some(transfer) = round_trip::<UnlinkableTransfer>(data) {
        let _ = transfer.verify(&keys, &MESSAGE);
    }
});
