//! Builders for signed test transactions, the keys a sentinel trusts (the issuer, and the
//! privacy rules), and the vector block of `docs/transaction-format.md`.

#![allow(dead_code)] // Each test module uses a different subset.

use std::sync::Arc;

use specie_private_transactions::PrivacyRules;
use specie_sentinel::{IssuerKeys, TrustedKeys};
pub use specie_transaction::test_support::*;

/// The documented vectors, the private kinds installed first so that they decode.
pub fn vectors() -> Vectors {
    specie_private_transactions::install();
    Vectors::documented()
}

/// The issuer only: no rules for the private kinds, so they are not accepted at all.
pub fn issuers_only() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
}

/// The issuer, and the privacy rules `rules`. Installs the private kinds' decoders too, so that
/// the tests can decode what they validate.
pub fn trusted_with(rules: PrivacyRules) -> TrustedKeys {
    specie_private_transactions::install();
    issuers_only().with_capability(Arc::new(rules))
}

/// The issuer, and privacy rules with no keys: no auditor has jurisdiction, and no registration
/// authority is trusted (so no anonymous transaction is valid).
pub fn trusted() -> TrustedKeys {
    trusted_with(PrivacyRules::default())
}
