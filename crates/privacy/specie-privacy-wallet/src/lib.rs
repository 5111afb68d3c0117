//! The privacy levels' wallet driver (docs/privacy.md): a specie wallet's confidential notes and
//! its anonymous identity and notes, kept in the core wallet as a part ([`PrivacyPart`], its
//! fields of the wallet file loaded and checked by [`PrivacyKind`]), and the transactions that
//! move value into, within and out of the levels.
//!
//! * Confidential notes ([`Note`], [`ConfidentialWallet`]): shield coins into notes, pay from
//!   notes with a [`ConfidentialPaymentString`] (`specie-cpay1…`) for the payee, unshield;
//!   [`receive_confidential`] keeps a payee's note once the node holds it.
//! * The anonymous level ([`AnonymousNote`], [`AnonymousWallet`]): enrol with the registration
//!   authority, anonymise coins, pay an enrolment id with an [`AnonymousPaymentString`]
//!   (`specie-apay1…`), leave the level; [`receive_anonymous`].
//! * The unlinkable level ([`UnlinkableToken`], [`UnlinkableWallet`]), with the same identity:
//!   enter with coins, have tokens certified, pay an enrolment id with an
//!   [`UnlinkablePaymentString`] (`specie-upay1…`), leave the level; [`receive_unlinkable`].
//! * [`session`]: what the command line does around a wallet file for them (the node's
//!   auditors and RA, receiving, enrolling, the active auditors' co-signatures).
//!
//! A program that reads wallet files holding private notes, or builds private transactions,
//! calls [`install`] once first: it installs the part's loader in the core wallet and the
//! private transaction kinds in the core's format.

mod anonymous;
mod anonymous_payment;
mod confidential_payment;
mod error;
mod file;
mod fixed_string;
mod notes;
mod part;
pub mod session;
mod unlinkable;
mod unlinkable_payment;

#[cfg(test)]
mod anonymous_tests;
#[cfg(test)]
mod confidential_tests;
#[cfg(test)]
mod testkit;

pub use anonymous::{
    receive_anonymous, AnonymousNote, AnonymousPayment, AnonymousPolicy, AnonymousWallet, EnrolledIdentity, Enrolling,
};
pub use anonymous_payment::{
    AnonymousPaymentString, AnonymousPaymentStringError, ANONYMOUS_PAYMENT_CHARS, ANONYMOUS_PAYMENT_PREFIX,
};
pub use confidential_payment::{
    ConfidentialPaymentString, ConfidentialPaymentStringError, CONFIDENTIAL_PAYMENT_CHARS, CONFIDENTIAL_PAYMENT_PREFIX,
};
pub use error::PrivacyError;
pub use file::{
    AnonymousNoteRecord, EnrollingRecord, IdentityRecord, NoteRecord, PrivacyFileError, PrivacyKind,
    SentConfidentialRecord,
};
pub use notes::{
    parse_auditors, receive_confidential, ConfidentialPayment, ConfidentialWallet, Note, ReceivedNote, Shielded,
    Unshielded, NOTE_INPUTS_MAX,
};
pub use part::{PrivacyPart, PRIVACY_PART};
pub use unlinkable::{receive_unlinkable, UnlinkablePayment, UnlinkablePolicy, UnlinkableToken, UnlinkableWallet};
pub use unlinkable_payment::{
    UnlinkablePaymentString, UnlinkablePaymentStringError, UNLINKABLE_PAYMENT_CHARS, UNLINKABLE_PAYMENT_PREFIX,
};

/// Makes this process read and write the privacy levels' part of wallet files and decode their
/// transactions (`specie_private_transactions::install`). Idempotent; call it before loading a
/// wallet file.
pub fn install() {
    specie_private_transactions::install();
    specie_wallet::install_part(&PrivacyKind);
}
