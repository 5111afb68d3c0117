//! What can go wrong in the privacy levels' bookkeeping, said so that the person at the
//! terminal knows what happened and what to do next.

use specie_transaction::Txid;
use specie_wallet::{ClientError, WalletError};
use thiserror::Error;

/// Errors of the privacy levels' wallet operations ([`crate::ConfidentialWallet`],
/// [`crate::AnonymousWallet`]). None of them changes the wallet: an operation that fails leaves
/// every coin, note and pending transaction as it was.
#[derive(Debug, Error)]
pub enum PrivacyError {
    /// The core wallet's refusal (too many pending, not enough coins, a broken RNG, …).
    #[error(transparent)]
    Wallet(#[from] WalletError),

    /// The node could not be asked whether a received note exists.
    #[error(transparent)]
    Client(#[from] ClientError),

    #[error("{}", insufficient_notes_message(*confidential, *needed, unit))]
    InsufficientNotes {
        confidential: u64,
        needed: u64,
        unit: String,
    },

    #[error("cannot make the confidential transaction: {0}")]
    Confidential(#[from] specie_private_transactions::BuildError),

    #[error("{text:?} is not an auditor key (64 hex digits of a Ristretto point, as `GET /v1/info` lists them)")]
    BadAuditor { text: String },

    #[error(
        "this confidential payment is not addressed to this wallet: its output pays none of this wallet's \
         {addresses} addresses"
    )]
    ConfidentialNotOurs { addresses: usize },

    #[error(
        "the node does not hold output {txid}:{index} with the value and blinding this string states: the string \
         was altered or names another output, or the payment is not confirmed (yet); nothing was added"
    )]
    NoteNotAtNode { txid: Txid, index: u64 },

    #[error(
        "this wallet is not enrolled: `specie wallet enrol <CHALLENGE>` answers the registration authority's challenge"
    )]
    NotEnrolled,

    #[error("this wallet is already enrolled, as id {enrolment_id}; a wallet holds one identity")]
    AlreadyEnrolled { enrolment_id: u64 },

    #[error("this wallet answered no enrolment challenge: `specie wallet enrol <CHALLENGE>` first")]
    NotEnrolling,

    #[error(
        "the credential is not the registration authority's signature for this wallet's enrolment; nothing was kept"
    )]
    CredentialRefused,

    #[error(
        "the credential is not the registration authority's signature for this wallet's secret and id under the key \
         the node trusts; after `specie ra rotate` the node must take the new key first (`specie node --reconfigure \
         --registration-authority`); nothing was changed"
    )]
    RenewalRefused,

    #[error("this payment pays another enrolment id than this wallet's")]
    AnonymousNotOurs,

    #[error(
        "unlinkable token {txid}:{index} was spent already (the node holds its serial number): from another copy of \
         this wallet, or a string received before; nothing was added"
    )]
    TokenSpent { txid: Txid, index: u64 },

    #[error(
        "this wallet holds {available} {unit} spendable in anonymous notes that can pay this way, but this needs \
         {needed} {unit}; `specie wallet anonymise` turns coins into anonymous notes (notes with hidden values pay \
         only with --hide-values)"
    )]
    InsufficientAnonymousNotes { available: u64, needed: u64, unit: String },

    #[error("cannot make the anonymous transaction: {0}")]
    Anonymous(#[from] specie_private_transactions::AnonymousBuildError),

    #[error(
        "this wallet holds {available} {unit} in certified unlinkable tokens, but this needs {needed} {unit}{}; \
         `specie wallet enter-unlinkable` turns coins into tokens",
        uncertified_hint(*uncertified)
    )]
    InsufficientTokens {
        available: u64,
        needed: u64,
        unit: String,
        uncertified: usize,
    },

    #[error("this wallet holds no such unlinkable token")]
    NoSuchToken,

    #[error("the certificate does not certify this token under the node's certifier group; nothing was kept")]
    CertificateRefused,

    #[error("cannot make the unlinkable transaction: {0}")]
    Unlinkable(#[from] specie_private_transactions::UnlinkableBuildError),
}

fn uncertified_hint(uncertified: usize) -> String {
    match uncertified {
        0 => String::new(),
        n => format!(
            " ({n} confirmed token(s) still wait for their certificate: `specie wallet certify --certifier URL …` \
             asks the certifiers)"
        ),
    }
}

fn insufficient_notes_message(confidential: u64, needed: u64, unit: &str) -> String {
    format!(
        "this wallet holds {confidential} {unit} spendable in confidential notes but this needs {needed} {unit}; \
         `specie wallet shield` turns coins into notes, and `specie wallet sync` settles notes still pending"
    )
}

impl From<specie_transaction::SignError> for PrivacyError {
    fn from(error: specie_transaction::SignError) -> Self {
        PrivacyError::Wallet(WalletError::Sign(error))
    }
}
