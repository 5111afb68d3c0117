//! Builders for signed test transactions (`specie_transaction::test_support`), and the keys a
//! sentinel trusts.

#![allow(dead_code)] // Each test module uses a different subset.

use specie_sentinel::{IssuerKeys, TrustedKeys};
pub use specie_transaction::test_support::*;

/// The issuer; no bridge, no capability kinds.
pub fn trusted() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
}
