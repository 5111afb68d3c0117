//! Feeds arbitrary bytes to the threshold endorsement decoder (`specie_endorsement::Endorsement`,
//! docs/endorsement-format.md). Nothing may panic; whatever decodes must re-encode to exactly the
//! input and stay within `ENDORSEMENT_BYTES_MAX`; verifying it (alone and through the caching
//! verifier) against the vectors' group key must not panic, and must refuse it unless its
//! signature is the vectors' (nobody else holds that group's shares).

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use specie_codec::{Decode, Encode};
use specie_endorsement::{Endorsement, EndorsementVerifier, GroupKey, ENDORSEMENT_BYTES_MAX};

/// The group key of docs/endorsement-format.md's vectors.
fn vectors_key() -> &'static GroupKey {
    static KEY: OnceLock<GroupKey> = OnceLock::new();
    KEY.get_or_init(|| {
        let bytes = hex::decode("f4641cc6d368e09ee50b7493496c4fee63af7bc14de45403f1d5b4c5a7e1b85b").expect("hex");
        GroupKey(bytes.try_into().expect("32 bytes"))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(endorsement) = Endorsement::decode_exact(data) else { return };
    assert_eq!(endorsement.encode(), data, "one encoding per endorsement");
    assert!(data.len() <= ENDORSEMENT_BYTES_MAX);
    let digest = [0x5a; 32];
    let alone = endorsement.verify(vectors_key(), &digest);
    let mut verifier = EndorsementVerifier::new(vectors_key(), 2).expect("a valid key");
    let cached = verifier.verify(&endorsement, &digest);
    assert_eq!(alone.is_ok(), cached.is_ok(), "the cache agrees with a plain check");
    assert!(alone.is_err(), "no digest 5a5a… was ever endorsed by the vectors' group");
});
