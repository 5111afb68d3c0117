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
//! * A capability's state in the wallet (the privacy levels' notes and identity,
//!   `specie-privacy-wallet`; Byzantine-mode accounts, `specie-fastpay-wallet`) is a
//!   [`WalletPart`]: the core calls its hooks when a pending transaction is resolved, at `sync`
//!   and when missing outputs are forgotten, and its [`WalletPartKind`], installed per process
//!   ([`install_part`]), loads and checks its fields of the wallet file; fields of no installed
//!   part are carried unread. A capability spends this wallet's coins with [`Wallet::spend`] (or
//!   [`Wallet::build_spend`]), keeps keys of its own with [`WalletKey`], and records core
//!   transactions built elsewhere with [`Wallet::record_pending`].
//! * [`NodeClient`] speaks the node's HTTP API (`docs/api.md`), over HTTPS too, with the
//!   [`NodeAccess`] a wallet keeps (a private CA, an `Authorization` header); [`sync()`]
//!   resolves pending transactions by asking which UHS ids exist, resubmitting where that is
//!   safe.

mod client;
mod core_format;
mod envelope;
mod error;
pub mod exchange;
mod file;
mod offline;
pub mod part;
mod payment;
mod select;
pub mod session;
mod signer;
mod sync;
mod wallet;

#[cfg(test)]
mod scenario_tests;
#[cfg(any(test, feature = "testing"))]
pub mod testkit;

pub use client::{
    core_api, marker_in_core, BadSubmitResult, ClientError, Ledger, NodeAccess, NodeClient, NodeInfo, SubmitResult,
    SubmitStatus, AUTH_FILE_BYTES_MAX, CA_FILE_BYTES_MAX,
};
pub use core_format::{CoreFormat, CORE_FORMAT};
pub use envelope::{
    Passphrase, PassphraseError, ENCRYPTED_WALLET_FORMAT, ENCRYPTED_WALLET_VERSION, PASSPHRASE_ENV,
    PASSPHRASE_FILE_BYTES_MAX,
};
pub use error::WalletError;
pub use file::{
    hex32 as file_hex32, same_file, txid_from as file_txid, write_file_atomically, FileError, StateRecord, WalletFile,
    WalletFileError, WalletLock, ENCRYPTED_WALLET_FILE_BYTES_MAX, WALLET_FORMAT, WALLET_FORMAT_VERSION,
    WALLET_LOCK_WAIT_MS,
};
pub use part::{install_part, installed_parts, WalletPart, WalletPartKind};
pub use payment::{
    checksum_with, strip_prefix_ignore_case, PaidOutput, PaymentString, PaymentStringError, CHECKSUM_BYTES,
    PAYMENT_STRING_PREFIX,
};
pub use select::{select_coins, Selection, SelectionError};
pub use signer::{ExternalSigner, SIGNER_TIMEOUT_MS};
pub use sync::{resolve_by_presence, settle, sync, Outcome, SyncError, SyncReport};
pub use wallet::{
    Balance, Coin, CoinState, Imported, Minted, Payment, PendingKind, PendingTx, Redeemed, SentPayment, Settled,
    Spending, Wallet, WalletKey, DEFAULT_NODE_URL, PENDING_TRANSACTIONS_MAX, SENT_KEPT_MAX,
};
