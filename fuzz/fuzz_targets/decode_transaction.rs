//! Decodes arbitrary bytes as a `SpecieTransaction` (every kind: transfer, mint, redeem, FastPay
//! funding and redeem (installed, as a deployment installs them), bridge funding and payout,
//! confidential, anonymous) and as a `CompactTransaction`. Decoding must never panic or allocate
//! beyond the limits, and whatever decodes must re-encode to exactly the input bytes: specie has
//! one encoding per value (docs/transaction-format.md).

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_transaction::{CompactTransaction, SpecieTransaction};
use specie_codec::{Decode, Encode};

fuzz_target!(|bytes: &[u8]| {
    specie_fastpay_primary::install();
    specie_private_transactions::install();
    if let Ok(tx) = SpecieTransaction::decode_exact(bytes) {
        assert_eq!(
            tx.encode(),
            bytes,
            "SpecieTransaction re-encoding differs from its input"
        );
        // Derived values must be computable for anything that decodes: every input spent, every
        // output created, then the kind's marker (mint, FastPay funding and redeem), last.
        // A confidential or anonymous transaction also spends and creates confidential or
        // anonymous outputs, after the transparent ones.
        let confidential = tx.capability::<specie_private_transactions::ConfidentialTransaction>();
        let anonymous = tx.capability::<specie_private_transactions::AnonymousTransaction>();
        let (private_spent, private_created) = match (confidential, anonymous) {
            (Some(c), _) => (c.confidential_inputs.len(), c.created_confidential_outputs().len()),
            (_, Some(a)) => (a.anonymous_inputs.len(), a.created_anonymous_outputs().len()),
            _ => (0, 0),
        };
        let compact = tx.compact();
        assert_eq!(compact.spent.len(), tx.inputs().len() + private_spent);
        assert_eq!(
            compact.created.len(),
            tx.outputs().len() + private_created + usize::from(tx.marker().is_some())
        );
        if let Some(marker) = tx.marker() {
            assert_eq!(compact.created.last(), Some(&marker));
        }
    }
    if let Ok(compact) = CompactTransaction::decode_exact(bytes) {
        assert_eq!(
            compact.encode(),
            bytes,
            "CompactTransaction re-encoding differs from its input"
        );
    }
});
