//! Fabric CBDC's fourth privacy level, **unlinkable** (§5.2, Appendix B.3, Figure 5 steps 5–6): a
//! spend reveals each input's serial number instead of the token it spends, so nobody but the
//! auditors can link a payment to the one that created its inputs.
//!
//! * A token is a hiding commitment to `(eid, v, r)` ([`Token`]); its owner keeps the opening
//!   ([`TokenOpening`]).
//! * The certifiers (a `k`-of-`n` group, [`deal_certifiers`]) blind-sign tokens that exist in the
//!   ledger ([`CertifierSecret::certify`]); the owner unblinds and combines `k` shares into a
//!   [`Certificate`], a Pointcheval–Sanders signature (Coconut) on the token's messages.
//! * A spend ([`Identity::prove_unlinkable`]) proves Π_Exist, Π_sn, Π_Bal and the owner's
//!   credential in one Fiat–Shamir proof bound to the transaction ([`UnlinkableTransfer`]); the
//!   serial number `G_sn / (sk + r)` is keyed with the credential's secret (the paper's PRF key
//!   `K`), so it is fixed by the token and the owner, and a second spend reveals it again.
//!
//! The level reuses the anonymous level's credential (the RA's BBS signature on `(sk, eid,
//! jurisdiction)`), groups, transcript and encodings, which is why it lives in this crate.
//! Format and protocols: `docs/unlinkable-format.md`.

mod audit;
mod codec;
mod error;
mod group;
mod token;
mod transfer;
mod verify;

#[cfg(test)]
mod tests;

pub use audit::ValueCiphertext;
pub use codec::*;
pub use error::{CertifyError, UnlinkableProveError, UnlinkableVerifyError};
pub use group::{
    DOMAIN_RANGE_GENERATORS, DOMAIN_SERIAL_GENERATOR, DOMAIN_TOKEN_BASE, DOMAIN_TOKEN_PARAMS, TOKEN_MESSAGES,
};
pub use token::{
    deal_certifiers, Certificate, CertificateShare, CertifierGroup, CertifierSecret, SerialNumber, Token, TokenOpening,
};
pub use transfer::{
    PublicAmounts, SpentToken, TransferPlan, UnlinkableKeys, UnlinkableTransfer, DOMAIN_UNLINKABLE,
    DOMAIN_UNLINKABLE_BATCH,
};
pub use verify::verify_unlinkable_batch;

/// Inputs one unlinkable transfer may spend.
pub const INPUTS_MAX: usize = 4;
/// Outputs one unlinkable transfer may create (at least one).
pub const OUTPUTS_MAX: usize = 4;
/// Members of a certifier group.
pub const CERTIFIERS_MAX: usize = 64;
