//! Feeds arbitrary bytes to the confidential transfer decoder (`specie_confidential`, the format of
//! `docs/privacy-format.md`) through `decode_exact`, under the default limits and under tight ones.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (one encoding per
//! transfer); a tight decode must be within its limits and equal the default decode; and what a
//! sentinel and an auditor then do with it (`verify` for the vectors' context, `output_commitments`,
//! `audit` with the vectors' auditor 0) must not panic. Inputs grown from the vectors' `transfer`
//! reach the proofs' checks.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_codec::{Decode, Encode};
use specie_confidential::{AuditorSecret, ConfidentialTransfer, TransferLimits};

/// The vectors' context (`docs/privacy-vectors.json`).
const CONTEXT: [u8; 32] = [0xc0; 32];

fuzz_target!(|data: &[u8]| {
    let Ok(transfer) = ConfidentialTransfer::decode_exact(data) else {
        return;
    };
    assert_eq!(transfer.encode(), data, "what decodes re-encodes to its input");
    let tight = TransferLimits { inputs_max: 2, outputs_max: 2, auditors_max: 1 };
    if let Ok(small) = ConfidentialTransfer::decode_exact_with(data, &tight) {
        assert_eq!(small, transfer);
        assert!(small.input_commitments().len() <= 2 && small.auditors().len() <= 1);
    }
    let verified = transfer.verify(&CONTEXT).is_ok();
    let outputs = transfer.output_commitments();
    let auditor = AuditorSecret::from_seed(&[0xa1; 32]);
    if let Ok(values) = transfer.audit(&auditor) {
        assert_eq!(values.len(), outputs.len());
    } else if verified && transfer.auditors().contains(&auditor.public()) {
        panic!("a verified transfer addressed to the auditor must decrypt");
    }
});
