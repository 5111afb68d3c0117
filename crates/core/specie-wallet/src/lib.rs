//! specie's wallet: what a person (or the central bank, for an issuer wallet) runs to hold and
//! move money on the online core.
//!
//! In Hamilton's UHS model (§3.4–3.7 of the paper) the ledger stores only 32-byte hashes of
//! unspent outputs, so *the wallet is the only place the spendable data lives*: every output's
//! preimage (outpoint, commitment, value) and the key that signs for it. Losing the wallet file
//! loses the money; a payment the recipient never hears about is money destroyed. Hence:
//!
//! * [`Wallet`] is pure bookkeeping: keys, coins and pending transactions, no I/O, no clock
//!   beyond stamping a creation time. It builds and signs transfers ([`Wallet::build_payment`]),
//!   issuer mints and redeems, and applies outcomes ([`Wallet::on_confirmed`],
//!   [`Wallet::on_rejected`]).
//! * [`WalletFile`] persists it as JSON, atomically (temp file, fsync, rename), mode 0600, and
//!   never overwrites an existing wallet on create; optionally encrypted under a [`Passphrase`]
//!   (Argon2id and XChaCha20-Poly1305, `envelope`).
//! * [`PaymentString`] (`specie-pay1…`) carries the output preimages from sender to recipient
//!   (§3.7: the recipient cannot discover them from the ledger).
//! * Confidential notes ([`Note`], docs/privacy.md): shield coins into notes, pay from notes
//!   with a [`ConfidentialPaymentString`] (`specie-cpay1…`) for the payee, unshield.
//! * A capability's part of the wallet (Byzantine-mode accounts, `specie-fastpay-wallet`) lives
//!   in the same file as a [`Section`]: JSON the core carries unread, which the capability's
//!   driver reads, checks and writes back ([`Wallet::section`], [`Wallet::set_section`]). A
//!   capability builds its own core transactions from this wallet's coins with
//!   [`Wallet::build_spend`] and records others with [`Wallet::record_pending`].
//! * [`NodeClient`] speaks the node's HTTP API (`docs/api.md`), over HTTPS too, with the
//!   [`NodeAccess`] a wallet keeps (a private CA, an `Authorization` header); [`sync()`]
//!   resolves pending transactions by asking which UHS ids exist, resubmitting where that is
//!   safe.

mod anonymous;
mod anonymous_payment;
mod client;
mod confidential_payment;
mod core_format;
mod envelope;
mod error;
pub mod exchange;
mod file;
mod notes;
mod offline;
mod payment;
mod select;
pub mod session;
mod signer;
mod sync;
mod wallet;

#[cfg(test)]
mod anonymous_tests;
#[cfg(test)]
mod confidential_tests;
#[cfg(test)]
mod scenario_tests;
#[cfg(test)]
mod testkit;

pub use anonymous::{receive_anonymous, AnonymousNote, AnonymousPayment, AnonymousPolicy};
pub use anonymous_payment::{
    AnonymousPaymentString, AnonymousPaymentStringError, ANONYMOUS_PAYMENT_CHARS, ANONYMOUS_PAYMENT_PREFIX,
};
pub use client::{
    core_api, marker_in_core, BadSubmitResult, ClientError, Ledger, NodeAccess, NodeClient, NodeInfo, SubmitResult,
    SubmitStatus, AUTH_FILE_BYTES_MAX, CA_FILE_BYTES_MAX,
};
pub use confidential_payment::{
    ConfidentialPaymentString, ConfidentialPaymentStringError, CONFIDENTIAL_PAYMENT_CHARS, CONFIDENTIAL_PAYMENT_PREFIX,
};
pub use core_format::{CoreFormat, CORE_FORMAT};
pub use envelope::{
    Passphrase, PassphraseError, ENCRYPTED_WALLET_FORMAT, ENCRYPTED_WALLET_VERSION, PASSPHRASE_ENV,
    PASSPHRASE_FILE_BYTES_MAX,
};
pub use error::WalletError;
pub use file::{
    same_file, write_file_atomically, FileError, WalletFile, WalletFileError, WalletLock,
    ENCRYPTED_WALLET_FILE_BYTES_MAX, WALLET_FORMAT, WALLET_FORMAT_VERSION, WALLET_LOCK_WAIT_MS,
};
pub use notes::{
    parse_auditors, receive_confidential, ConfidentialPayment, Note, ReceivedNote, Shielded, Unshielded,
    NOTE_INPUTS_MAX,
};
pub use payment::{PaidOutput, PaymentString, PaymentStringError, PAYMENT_STRING_PREFIX};
pub use select::{select_coins, Selection, SelectionError};
pub use signer::{ExternalSigner, SIGNER_TIMEOUT_MS};
pub use sync::{resolve_by_presence, settle, sync, Outcome, SyncError, SyncReport};
pub use wallet::{
    Balance, Coin, CoinState, Imported, Minted, Payment, PendingKind, PendingTx, Redeemed, Section, SentPayment,
    Settled, Wallet, DEFAULT_NODE_URL, PENDING_TRANSACTIONS_MAX, SENT_KEPT_MAX,
};
