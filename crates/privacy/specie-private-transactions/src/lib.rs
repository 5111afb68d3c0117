//! The privacy levels on the online core (Fabric CBDC's confidential, anonymous and unlinkable levels,
//! `docs/privacy.md`), privacy's bridge to the core: their core transactions and the rules a
//! sentinel judges them by.
//!
//! * [`confidential`]: [`ConfidentialTransaction`] (kind `0x07`), values in Pedersen
//!   commitments, proofs by `specie-confidential`.
//! * [`anonymous`]: [`AnonymousTransaction`] (kind `0x08`), owners behind commitments to their
//!   enrolment ids, spent with proofs of a registration authority's credential
//!   (`specie-credential`), values in clear or hidden.
//! * [`unlinkable`]: [`UnlinkableTransaction`] (kind `0x0a`), certified tokens spent by their
//!   serial numbers with one proof of the whole transfer (`specie_credential::unlinkable`).
//! * [`kinds`]: what the core carries of them (`specie_transaction::capability`).
//! * [`rules`]: [`PrivacyRules`], what a sentinel checks of them against the auditors and the
//!   registration authority with jurisdiction, the costly proofs verified in batches.
//!
//! A process decodes these kinds once it calls [`install`] (the deployments do, at start).

pub mod anonymous;
pub mod confidential;
pub mod kinds;
pub mod rules;
pub mod unlinkable;

pub use anonymous::{
    AnonymousBuildError, AnonymousInput, AnonymousPlan, AnonymousSpend, AnonymousTransaction, AnonymousValue,
    AnonymousValues, CreatedAnonymousOutput,
};
pub use confidential::{
    BuildError, ConfidentialInput, ConfidentialPlan, ConfidentialTransaction, CreatedConfidentialOutput,
};
pub use kinds::{AnonymousKind, ConfidentialKind, UnlinkableKind};
pub use rules::{AnonymousErrorCode, ConfidentialErrorCode, PrivacyRules, UnlinkableErrorCode};
pub use unlinkable::{
    certify_if_in_ledger, CertificationRefused, CreatedToken, UnlinkableBuild, UnlinkableBuildError,
    UnlinkableTransaction,
};

/// Kind byte of a confidential transaction.
pub const KIND_CONFIDENTIAL: u8 = 0x07;
/// Kind byte of an anonymous transaction.
pub const KIND_ANONYMOUS: u8 = 0x08;
/// Kind byte of an unlinkable transaction.
pub const KIND_UNLINKABLE: u8 = 0x0a;

/// Makes this process decode confidential, anonymous and unlinkable transactions (idempotent).
pub fn install() {
    specie_transaction::capability::install(&[&ConfidentialKind, &AnonymousKind, &UnlinkableKind]);
}
