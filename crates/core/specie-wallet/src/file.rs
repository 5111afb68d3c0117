//! The wallet file: JSON, written atomically, readable only by its owner.
//!
//! The file is the money: it holds the only copy of the secret keys and of the output preimages
//! (the ledger stores only hashes). So it is never left half-written (write a temp file in the
//! same directory, fsync it, rename it over the old one, fsync the directory), it is created with
//! mode 0600, and `create` refuses to replace an existing wallet.
//!
//! Everything in the file is checked on load: keys must be valid, every coin must belong to one
//! of the keys, every stored transaction must decode and hash to its txid, and every pending
//! coin must point at a stored transaction (or be an import waiting for `sync`). The `spends`
//! and `creates` lists of a pending transaction are derived from its bytes and written only for
//! people reading the file; loading recomputes them.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use secp256k1::XOnlyPublicKey;
use serde::{Deserialize, Serialize};
use specie_codec::{Decode, DecodeError, Encode};
use specie_confidential::{Opening, Scalar};
use specie_transaction::{Address, ConfidentialInput, OutPoint, Output, SpecieTransaction, Txid};
use thiserror::Error;

use crate::anonymous_payment::AnonymousPaymentString;
use crate::confidential_payment::ConfidentialPaymentString;
use crate::exchange::ExchangeRecord;
use crate::fastpay_file::FastpayRecord;
use crate::notes::Note;
use crate::wallet::{Coin, CoinState, PendingKind, PendingTx, Wallet, WalletKey};
use crate::WalletError;
use specie_credential::{Credential, EnrolmentChallenge, Identity, RaPublicKey, Textual, UserSecret};

/// The `format` field of every wallet file.
pub const WALLET_FORMAT: &str = "specie-wallet";
/// The version this code writes. 2 added Byzantine-mode accounts (`fastpay`, absent when the
/// wallet has none) and the pending kinds `fastpay_funding` and `fastpay_redeem`; 3 added
/// confidential notes (`notes`, `sent_confidential`, absent when empty) and the pending kinds
/// `shield`, `confidential_payment` and `unshield`; 4 added the anonymous level (`identity`,
/// `enrolling`, `anonymous_notes`, `sent_anonymous`, absent when empty) and the pending kinds
/// `anonymise` and `anonymous_payment`.
pub const WALLET_FORMAT_VERSION: u32 = 4;
/// The oldest version this code reads: each version only added optional sections and pending
/// kinds, so an older file loads as it is (with no notes) and is written back as the newest.
pub const WALLET_FORMAT_VERSION_OLDEST: u32 = 1;
/// A wallet file larger than this is refused before parsing (a million coins is ~400 MB of
/// JSON; no real wallet is near this, and a damaged file must not exhaust memory).
pub const WALLET_FILE_BYTES_MAX: u64 = 512 * 1024 * 1024;

/// Why a wallet file could not be read or written.
#[derive(Debug, Error)]
pub enum FileError {
    #[error(
        "{path} already exists; refusing to overwrite it because a wallet file may hold the only copy of \
         its keys. Choose another path with --wallet"
    )]
    Exists { path: PathBuf },
    #[error("there is no wallet at {path}; create one with `specie wallet create` or pass --wallet PATH")]
    NotFound { path: PathBuf },
    #[error("could not {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a usable specie wallet file: {reason}")]
    Invalid { path: PathBuf, reason: String },
    /// The file parses, but what it holds does not add up.
    #[error("{path} is not a usable specie wallet file: {problem}")]
    Inconsistent {
        path: PathBuf,
        /// Boxed: the coin and transaction ids it names would make every `FileError` large.
        #[source]
        problem: Box<WalletFileError>,
    },
    #[error(
        "{path} is a wallet file of format version {version}; this program reads versions {} to {supported} \
         (a newer specie wrote it?)",
        WALLET_FORMAT_VERSION_OLDEST
    )]
    UnsupportedVersion {
        path: PathBuf,
        version: u32,
        supported: u32,
    },
    #[error(
        "another command has been using the wallet {path} for {waited_ms} ms (it holds {lock}); \
         try again once it has finished"
    )]
    Busy {
        path: PathBuf,
        lock: PathBuf,
        waited_ms: u64,
    },
}

/// What is wrong inside a wallet file; [`FileError::Inconsistent`] adds its path.
#[derive(Debug, Error)]
pub enum WalletFileError {
    #[error("its format is {found:?}, not {:?}", WALLET_FORMAT)]
    Format { found: String },
    /// The currency's address prefix cannot be used.
    #[error(transparent)]
    Hrp(#[from] WalletError),
    #[error("{what} {text:?} is not hex")]
    NotHex { what: String, text: String },
    #[error("{what} {text:?} is not 32 bytes")]
    Not32Bytes { what: String, text: String },
    #[error("{what} is not a valid secp256k1 secret key")]
    BadSecretKey { what: String },
    #[error("secret key {position} appears twice")]
    DuplicateKey { position: usize },
    #[error("the transaction of pending {txid} is not hex")]
    PendingNotHex { txid: Txid },
    #[error("the transaction of pending {txid} does not decode: {source}")]
    PendingUndecodable {
        txid: Txid,
        #[source]
        source: DecodeError,
    },
    #[error("the transaction stored for pending {txid} has txid {found}")]
    PendingTxidMismatch { txid: Txid, found: Txid },
    #[error("pending {txid}: {source}")]
    PendingAddress {
        txid: Txid,
        #[source]
        source: WalletError,
    },
    #[error("coin {txid}:{index} has an owner that is not a public key")]
    OwnerNotAKey { txid: Txid, index: u64 },
    #[error("coin {txid}:{index} is not owned by any key of this wallet")]
    NotOwned { txid: Txid, index: u64 },
    #[error("coin {txid}:{index} is marked as spent by {spender}, which is not a pending transaction spending it")]
    SpentByUnknown { txid: Txid, index: u64, spender: Txid },
    #[error("coin {txid}:{index} appears twice")]
    DuplicateCoin { txid: Txid, index: u64 },
    /// Something in the Byzantine-mode section (`fastpay`) does not decode or add up.
    #[error("fastpay: {what}: {problem}")]
    Fastpay { what: String, problem: String },
    /// A note's opening does not decode or does not open its commitment. Names the note only:
    /// the opening is secret.
    #[error("note {txid}:{index} has an opening that does not decode or does not match its commitment")]
    BadNote { txid: Txid, index: u64 },
    #[error("the payment string kept for confidential payment {txid} does not decode")]
    BadSentPayment { txid: Txid },
    /// The identity section: the error never carries the secret.
    #[error("its {what} does not decode or does not check out against the registration authority's key")]
    BadIdentity { what: &'static str },
    #[error("anonymous note {txid}:{index} does not decode, or does not pay this wallet's enrolment id")]
    BadAnonymousNote { txid: Txid, index: u64 },
    /// Something in the exchange account's section (`exchange`) does not decode.
    #[error("exchange: {what}: {problem}")]
    Exchange { what: String, problem: String },
}

/// Exclusive use of one wallet file, for one command's whole load–change–save: two commands on
/// the same wallet at once would otherwise each save their own copy and one change would be
/// lost. An advisory lock (`flock`) on a sidecar file `<wallet>.lock`, because the wallet file
/// itself is replaced by a rename on every save. Released when dropped, or when the process
/// dies.
#[derive(Debug)]
pub struct WalletLock {
    _file: fs::File,
}

impl WalletLock {
    /// Pause between attempts while another command holds the lock.
    const RETRY_MS: u64 = 20;

    /// The sidecar lock file of the wallet at `path`.
    pub fn lock_path(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock, waiting up to `wait_ms` for another command to finish; `on_wait` runs
    /// once if it has to wait (to tell the user why nothing happens).
    pub fn acquire(path: &Path, wait_ms: u64, on_wait: impl FnOnce()) -> Result<WalletLock, FileError> {
        let lock = Self::lock_path(path);
        let mut options = fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(&lock).map_err(|source| FileError::Io {
            action: "open the lock file",
            path: lock.clone(),
            source,
        })?;
        let started = std::time::Instant::now();
        let mut on_wait = Some(on_wait);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(WalletLock { _file: file }),
                Err(fs::TryLockError::WouldBlock) => {}
                Err(fs::TryLockError::Error(source)) => {
                    return Err(FileError::Io {
                        action: "lock",
                        path: lock,
                        source,
                    })
                }
            }
            let waited_ms = started.elapsed().as_millis() as u64;
            if waited_ms >= wait_ms {
                return Err(FileError::Busy {
                    path: path.to_owned(),
                    lock,
                    waited_ms,
                });
            }
            if let Some(on_wait) = on_wait.take() {
                on_wait();
            }
            std::thread::sleep(std::time::Duration::from_millis(
                Self::RETRY_MS.min(wait_ms - waited_ms),
            ));
        }
    }
}

/// The JSON document. Hex for every key, hash and transaction, as in the node's API.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WalletFile {
    pub format: String,
    pub version: u32,
    /// The currency's bech32 human-readable part, e.g. `usd`.
    pub hrp: String,
    pub node_url: String,
    /// Present only in an issuer wallet: the key that signs mints and redeems.
    pub issuer: Option<IssuerRecord>,
    pub keys: Vec<KeyRecord>,
    pub coins: Vec<CoinRecord>,
    pub pending: Vec<PendingRecord>,
    /// Byzantine-mode accounts (version 2); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastpay: Option<FastpayRecord>,
    /// An offline-cash device (hex of its canonical encoding); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_device: Option<String>,
    /// The trader's exchange account (`specie exchange …`); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeRecord>,
    /// Confidential notes (version 3); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<NoteRecord>,
    /// The payee's string of each pending confidential payment (version 3).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_confidential: Vec<SentConfidentialRecord>,
    /// The enrolled identity (version 4); absent until enrolled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<IdentityRecord>,
    /// An enrolment answered and waiting for its credential (version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enrolling: Option<EnrollingRecord>,
    /// Anonymous notes (version 4), each its `specie-apay1…` string and state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub anonymous_notes: Vec<AnonymousNoteRecord>,
    /// The payee's string of each pending anonymous payment (version 4).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent_anonymous: Vec<SentConfidentialRecord>,
}

/// The wallet's enrolled identity. `secret_seed` is as secret as a key: with it and the
/// credential anyone spends this wallet's anonymous notes.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IdentityRecord {
    pub secret_seed: String,
    /// The RA's `specie-credential1…` text.
    pub credential: String,
    /// The RA's key, hex of its encoding.
    pub registration_authority: String,
    /// For reading only.
    pub enrolment_id: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EnrollingRecord {
    pub secret_seed: String,
    /// The RA's `specie-enrol-challenge1…` text this wallet answered.
    pub challenge: String,
    pub registration_authority: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AnonymousNoteRecord {
    /// The note's `specie-apay1…` string: as secret as the note's value.
    pub payment_string: String,
    pub state: StateRecord,
}

/// A confidential note. The opening (`value`, `blinding`) is as secret as a key: without it the
/// note cannot be spent, and with it anyone learns the value.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NoteRecord {
    pub txid: String,
    pub index: u64,
    /// Witness program commitment of the owning key.
    pub owner: String,
    /// The Pedersen commitment, compressed; checked on load to be the opening's.
    pub commitment: String,
    pub value: u64,
    pub blinding: String,
    /// For reading only: the id to look up at the node.
    pub uhs_id: String,
    pub state: StateRecord,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SentConfidentialRecord {
    pub txid: String,
    /// The `specie-cpay1…` string for the payee.
    pub payment_string: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssuerRecord {
    pub secret_key: String,
    /// For reading only: what `specie node --issuer` needs.
    pub public_key: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct KeyRecord {
    pub secret_key: String,
    /// For reading only; recomputed from the secret on load and checked.
    pub address: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CoinRecord {
    pub txid: String,
    pub index: u64,
    pub witness_program_commitment: String,
    pub value: u64,
    /// x-only public key (hex) of the owning key.
    pub owner: String,
    /// For reading only: the id to look up at the node.
    pub uhs_id: String,
    pub state: StateRecord,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StateRecord {
    Spendable,
    PendingSpend { txid: String },
    PendingReceive { txid: String },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KindRecord {
    Payment { to: String, amount: u64 },
    Mint { total: u64 },
    Redeem { amount: u64 },
    FastpayFunding { amount: u64 },
    FastpayRedeem { amount: u64 },
    OfflineFunding { amount: u64 },
    Shield { amount: u64 },
    ConfidentialPayment { to: String, amount: u64 },
    Unshield { amount: u64 },
    Anonymise { amount: u64 },
    AnonymousPayment { to: u64, amount: u64 },
    LeaveAnonymous { amount: u64 },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PendingRecord {
    pub txid: String,
    pub created_at_unix_s: u64,
    #[serde(flatten)]
    pub kind: KindRecord,
    /// The serialized transaction, exactly as submitted.
    pub transaction: String,
    pub spends: Vec<SpendRecord>,
    pub creates: Vec<CreateRecord>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpendRecord {
    pub txid: String,
    pub index: u64,
    pub value: u64,
    pub uhs_id: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CreateRecord {
    pub index: u64,
    pub value: u64,
    pub uhs_id: String,
    pub ours: bool,
}

fn hex32(text: &str, what: &str) -> Result<[u8; 32], WalletFileError> {
    let field = || (what.to_owned(), text.to_owned());
    let bytes = hex::decode(text).map_err(|_| {
        let (what, text) = field();
        WalletFileError::NotHex { what, text }
    })?;
    bytes.try_into().map_err(|_| {
        let (what, text) = field();
        WalletFileError::Not32Bytes { what, text }
    })
}

fn txid_from(text: &str, what: &str) -> Result<Txid, WalletFileError> {
    hex32(text, what).map(Txid)
}

fn key_from(text: &str, what: &str) -> Result<WalletKey, WalletFileError> {
    let secret = hex32(text, what)?;
    WalletKey::from_secret(secret).ok_or_else(|| WalletFileError::BadSecretKey { what: what.to_owned() })
}

impl KindRecord {
    /// How the wallet file records a pending transaction's kind (addresses in `wallet`'s format).
    fn of(kind: PendingKind, wallet: &Wallet) -> KindRecord {
        match kind {
            PendingKind::Payment { to, amount } => KindRecord::Payment {
                to: wallet.format_address(&to),
                amount,
            },
            PendingKind::Mint { total } => KindRecord::Mint { total },
            PendingKind::Redeem { amount } => KindRecord::Redeem { amount },
            PendingKind::FastpayFunding { amount } => KindRecord::FastpayFunding { amount },
            PendingKind::FastpayRedeem { amount } => KindRecord::FastpayRedeem { amount },
            PendingKind::OfflineFunding { amount } => KindRecord::OfflineFunding { amount },
            PendingKind::Shield { amount } => KindRecord::Shield { amount },
            PendingKind::ConfidentialPayment { to, amount } => KindRecord::ConfidentialPayment {
                to: wallet.format_address(&to),
                amount,
            },
            PendingKind::Unshield { amount } => KindRecord::Unshield { amount },
            PendingKind::Anonymise { amount } => KindRecord::Anonymise { amount },
            PendingKind::AnonymousPayment { to, amount } => KindRecord::AnonymousPayment { to, amount },
            PendingKind::LeaveAnonymous { amount } => KindRecord::LeaveAnonymous { amount },
        }
    }
}

impl WalletFile {
    /// The document for `wallet`.
    pub fn from_wallet(wallet: &Wallet) -> Self {
        let address = |pubkey: XOnlyPublicKey| wallet.format_address(&Address::from_pubkey(pubkey));
        WalletFile {
            format: WALLET_FORMAT.to_owned(),
            version: WALLET_FORMAT_VERSION,
            hrp: wallet.hrp().to_owned(),
            node_url: wallet.node_url().to_owned(),
            issuer: wallet.issuer_secret().map(|secret| IssuerRecord {
                secret_key: hex::encode(secret),
                public_key: wallet.issuer_pubkey_hex().unwrap_or_default(),
            }),
            keys: wallet
                .keys
                .iter()
                .map(|key| KeyRecord {
                    secret_key: hex::encode(key.secret),
                    address: address(key.pubkey),
                })
                .collect(),
            coins: wallet
                .coins()
                .map(|coin| CoinRecord {
                    txid: coin.outpoint.txid.to_string(),
                    index: coin.outpoint.index,
                    witness_program_commitment: hex::encode(coin.output.witness_program_commitment),
                    value: coin.output.value,
                    owner: hex::encode(coin.owner.serialize()),
                    uhs_id: coin.uhs_id().to_string(),
                    state: state_record(coin.state),
                })
                .collect(),
            pending: wallet
                .pending()
                .map(|pending| PendingRecord {
                    txid: pending.txid.to_string(),
                    created_at_unix_s: pending.created_at_unix_s,
                    kind: KindRecord::of(pending.kind, wallet),
                    transaction: hex::encode(pending.tx.encode()),
                    spends: pending
                        .spends()
                        .iter()
                        .map(|input| SpendRecord {
                            txid: input.prevout.txid.to_string(),
                            index: input.prevout.index,
                            value: input.data.value,
                            uhs_id: input.uhs_id().to_string(),
                        })
                        .collect(),
                    creates: pending
                        .creates()
                        .iter()
                        .map(|created| CreateRecord {
                            index: created.outpoint.index,
                            value: created.output.value,
                            uhs_id: created.uhs_id.to_string(),
                            ours: wallet.owns(&created.output.witness_program_commitment),
                        })
                        .collect(),
                })
                .collect(),
            fastpay: wallet.fastpay().map(FastpayRecord::from_book),
            offline_device: wallet.offline_device().map(hex::encode),
            exchange: wallet.exchange().map(ExchangeRecord::from_account),
            notes: wallet
                .notes()
                .map(|note| NoteRecord::from_note(note, state_record))
                .collect(),
            identity: None,
            enrolling: None,
            anonymous_notes: vec![],
            sent_anonymous: vec![],
            sent_confidential: wallet
                .sent_confidential
                .iter()
                .map(|(txid, payment)| SentConfidentialRecord {
                    txid: txid.to_string(),
                    payment_string: payment.encode(),
                })
                .collect(),
        }
        .with_anonymous(wallet)
    }

    /// This document with `wallet`'s anonymous level: its identity, an enrolment under way, its
    /// notes and the strings of its pending anonymous payments.
    fn with_anonymous(self, wallet: &Wallet) -> Self {
        WalletFile {
            identity: wallet.identity.as_ref().map(|enrolled| IdentityRecord {
                secret_seed: hex::encode(enrolled.seed),
                credential: enrolled.identity.credential().to_text(),
                registration_authority: hex::encode(enrolled.authority.encode()),
                enrolment_id: enrolled.identity.enrolment_id().0,
            }),
            enrolling: wallet.enrolling.as_ref().map(|enrolling| EnrollingRecord {
                secret_seed: hex::encode(enrolling.seed),
                challenge: enrolling.challenge.to_text(),
                registration_authority: hex::encode(enrolling.authority.encode()),
            }),
            anonymous_notes: wallet
                .anonymous_notes()
                .map(|note| AnonymousNoteRecord {
                    payment_string: note.payment.encode(),
                    state: state_record(note.state),
                })
                .collect(),
            sent_anonymous: wallet
                .sent_anonymous
                .iter()
                .map(|(txid, payment)| SentConfidentialRecord {
                    txid: txid.to_string(),
                    payment_string: payment.encode(),
                })
                .collect(),
            ..self
        }
    }

    /// Rebuilds the wallet, checking everything (see the module docs). Errors are reasons
    /// without the path; [`WalletFile::load`] adds it.
    pub fn into_wallet(self) -> Result<Wallet, WalletFileError> {
        if self.format != WALLET_FORMAT {
            return Err(WalletFileError::Format { found: self.format });
        }
        let mut wallet = Wallet::empty(&self.hrp)?;
        wallet.set_node_url(&self.node_url);
        self.restore_keys(&mut wallet)?;
        if let Some(record) = &self.fastpay {
            wallet.fastpay = Some(record.to_book()?);
        }
        if let Some(text) = &self.offline_device {
            let bytes = hex::decode(text).map_err(|_| WalletFileError::NotHex {
                what: "offline device".into(),
                text: text.chars().take(16).collect(),
            })?;
            wallet.offline_device = Some(bytes);
        }
        if let Some(record) = &self.exchange {
            wallet.exchange = Some(record.to_account()?);
        }
        for record in &self.pending {
            let pending = record.to_pending(&wallet)?;
            wallet.pending.insert(pending.txid, pending);
        }
        self.restore_notes(&mut wallet)?;
        self.restore_anonymous(&mut wallet)?;
        for record in &self.coins {
            let coin = record.to_coin(&wallet)?;
            let outpoint = coin.outpoint;
            if wallet.coins.insert(outpoint, coin).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: outpoint.txid,
                    index: outpoint.index,
                });
            }
        }
        Ok(wallet)
    }

    /// The notes and the strings of pending confidential payments.
    fn restore_notes(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        for record in &self.notes {
            let note = record.to_note(wallet)?;
            let outpoint = note.outpoint();
            if wallet.notes.insert(outpoint, note).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: outpoint.txid,
                    index: outpoint.index,
                });
            }
        }
        for record in &self.sent_confidential {
            let txid = txid_from(&record.txid, "sent confidential payment txid")?;
            // The error names the transaction only: the string holds the payee's opening.
            let payment = ConfidentialPaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadSentPayment { txid })?;
            wallet.sent_confidential.insert(txid, payment);
        }
        Ok(())
    }

    /// The identity, an enrolment under way, the anonymous notes (each paying the wallet's id, and
    /// if being spent, by one of its pending transactions) and the strings of pending payments.
    fn restore_anonymous(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        if let Some(record) = &self.identity {
            wallet.identity = Some(record.to_identity()?);
        }
        if let Some(record) = &self.enrolling {
            let bad = |what| move |_| WalletFileError::BadIdentity { what };
            wallet.enrolling = Some(crate::anonymous::Enrolling {
                seed: hex32(&record.secret_seed, "enrolment secret seed")?,
                challenge: EnrolmentChallenge::from_text(&record.challenge).map_err(bad("enrolment challenge"))?,
                authority: ra_key_from(&record.registration_authority)?,
            });
        }
        for record in &self.anonymous_notes {
            let payment = AnonymousPaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadIdentity { what: "anonymous note" })?;
            let bad = || WalletFileError::BadAnonymousNote {
                txid: payment.txid,
                index: payment.index,
            };
            if wallet.enrolment_id() != Some(payment.payee()) {
                return Err(bad());
            }
            let state = match &record.state {
                StateRecord::Spendable => CoinState::Spendable,
                StateRecord::PendingSpend { txid } => {
                    let txid = txid_from(txid, "anonymous note state txid")?;
                    let input = payment.to_input();
                    let spends = wallet.pending.get(&txid).is_some_and(|pending| match &pending.tx {
                        SpecieTransaction::Anonymous(tx) => tx.anonymous_inputs.contains(&input),
                        _ => false,
                    });
                    if !spends {
                        return Err(bad());
                    }
                    CoinState::PendingSpend { txid }
                }
                StateRecord::PendingReceive { txid } => CoinState::PendingReceive {
                    txid: txid_from(txid, "anonymous note state txid")?,
                },
            };
            let note = crate::anonymous::AnonymousNote { payment, state };
            if wallet.anonymous_notes.insert(payment.outpoint(), note).is_some() {
                return Err(WalletFileError::DuplicateCoin {
                    txid: payment.txid,
                    index: payment.index,
                });
            }
        }
        for record in &self.sent_anonymous {
            let txid = txid_from(&record.txid, "sent anonymous payment txid")?;
            let payment = AnonymousPaymentString::parse(&record.payment_string)
                .map_err(|_| WalletFileError::BadSentPayment { txid })?;
            wallet.sent_anonymous.insert(txid, payment);
        }
        Ok(())
    }

    /// The issuer key and the wallet's keys, each at most once.
    fn restore_keys(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        if let Some(issuer) = &self.issuer {
            wallet.issuer = Some(key_from(&issuer.secret_key, "the issuer secret key")?);
        }
        for (position, record) in self.keys.iter().enumerate() {
            let key = key_from(&record.secret_key, &format!("secret key {position}"))?;
            if wallet.owns(&key.commitment) {
                return Err(WalletFileError::DuplicateKey { position });
            }
            wallet.add_key(key);
        }
        Ok(())
    }

    /// Reads and checks the wallet at `path`.
    pub fn load(path: &Path) -> Result<Wallet, FileError> {
        let io = |action: &'static str| {
            move |source: std::io::Error| FileError::Io {
                action,
                path: path.to_owned(),
                source,
            }
        };
        let file = match fs::File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(FileError::NotFound { path: path.to_owned() })
            }
            Err(error) => return Err(io("open")(error)),
        };
        let bytes = file.metadata().map_err(io("inspect"))?.len();
        if bytes > WALLET_FILE_BYTES_MAX {
            return Err(FileError::Invalid {
                path: path.to_owned(),
                reason: format!("it is {bytes} bytes, more than the {WALLET_FILE_BYTES_MAX} a wallet may be"),
            });
        }
        let text = fs::read(path).map_err(io("read"))?;
        let invalid = |reason: String| FileError::Invalid {
            path: path.to_owned(),
            reason,
        };
        // Check the version before the full shape, so that a future format gets a clear message.
        #[derive(Deserialize)]
        struct Header {
            version: u32,
        }
        let header: Header = serde_json::from_slice(&text).map_err(|error| invalid(error.to_string()))?;
        if !(WALLET_FORMAT_VERSION_OLDEST..=WALLET_FORMAT_VERSION).contains(&header.version) {
            return Err(FileError::UnsupportedVersion {
                path: path.to_owned(),
                version: header.version,
                supported: WALLET_FORMAT_VERSION,
            });
        }
        let document: WalletFile = serde_json::from_slice(&text).map_err(|error| invalid(error.to_string()))?;
        document.into_wallet().map_err(|problem| FileError::Inconsistent {
            path: path.to_owned(),
            problem: Box::new(problem),
        })
    }

    /// Writes a new wallet file; fails if `path` exists (even if it appears between the check
    /// and the write: the final step is an atomic no-clobber rename).
    pub fn create(path: &Path, wallet: &Wallet) -> Result<(), FileError> {
        if path.exists() {
            return Err(FileError::Exists { path: path.to_owned() });
        }
        write_atomically(path, &WalletFile::from_wallet(wallet), false)
    }

    /// Replaces the wallet file at `path` with `wallet`, atomically.
    pub fn save(path: &Path, wallet: &Wallet) -> Result<(), FileError> {
        write_atomically(path, &WalletFile::from_wallet(wallet), true)
    }
}

impl PendingRecord {
    /// The pending transaction, checked to decode and to hash to its txid.
    fn to_pending(&self, wallet: &Wallet) -> Result<PendingTx, WalletFileError> {
        let txid = txid_from(&self.txid, "pending txid")?;
        let bytes = hex::decode(&self.transaction).map_err(|_| WalletFileError::PendingNotHex { txid })?;
        let tx = SpecieTransaction::decode_exact(&bytes)
            .map_err(|source| WalletFileError::PendingUndecodable { txid, source })?;
        if tx.txid() != txid {
            return Err(WalletFileError::PendingTxidMismatch { txid, found: tx.txid() });
        }
        let kind = match &self.kind {
            KindRecord::Payment { to, amount } => PendingKind::Payment {
                to: wallet
                    .parse_address(to)
                    .map_err(|source| WalletFileError::PendingAddress { txid, source })?,
                amount: *amount,
            },
            KindRecord::Mint { total } => PendingKind::Mint { total: *total },
            KindRecord::Redeem { amount } => PendingKind::Redeem { amount: *amount },
            KindRecord::FastpayFunding { amount } => PendingKind::FastpayFunding { amount: *amount },
            KindRecord::FastpayRedeem { amount } => PendingKind::FastpayRedeem { amount: *amount },
            KindRecord::OfflineFunding { amount } => PendingKind::OfflineFunding { amount: *amount },
            KindRecord::Shield { amount } => PendingKind::Shield { amount: *amount },
            KindRecord::ConfidentialPayment { to, amount } => PendingKind::ConfidentialPayment {
                to: wallet
                    .parse_address(to)
                    .map_err(|source| WalletFileError::PendingAddress { txid, source })?,
                amount: *amount,
            },
            KindRecord::Unshield { amount } => PendingKind::Unshield { amount: *amount },
            KindRecord::Anonymise { amount } => PendingKind::Anonymise { amount: *amount },
            KindRecord::LeaveAnonymous { amount } => PendingKind::LeaveAnonymous { amount: *amount },
            KindRecord::AnonymousPayment { to, amount } => PendingKind::AnonymousPayment {
                to: *to,
                amount: *amount,
            },
        };
        Ok(PendingTx {
            txid,
            tx,
            created_at_unix_s: self.created_at_unix_s,
            kind,
        })
    }
}

impl CoinRecord {
    /// The coin, checked to belong to a key of `wallet` and, if marked as being spent, to be
    /// spent by one of `wallet`'s pending transactions.
    fn to_coin(&self, wallet: &Wallet) -> Result<Coin, WalletFileError> {
        let outpoint = OutPoint {
            txid: txid_from(&self.txid, "coin txid")?,
            index: self.index,
        };
        let output = Output {
            witness_program_commitment: hex32(&self.witness_program_commitment, "coin commitment")?,
            value: self.value,
        };
        let owner_bytes = hex32(&self.owner, "coin owner")?;
        let owner = XOnlyPublicKey::from_byte_array(&owner_bytes).map_err(|_| WalletFileError::OwnerNotAKey {
            txid: outpoint.txid,
            index: outpoint.index,
        })?;
        if Address::from_pubkey(owner).witness_program_commitment() != output.witness_program_commitment
            || !wallet.owns(&output.witness_program_commitment)
        {
            return Err(WalletFileError::NotOwned {
                txid: outpoint.txid,
                index: outpoint.index,
            });
        }
        let state = match &self.state {
            StateRecord::Spendable => CoinState::Spendable,
            StateRecord::PendingSpend { txid } => {
                let txid = txid_from(txid, "coin state txid")?;
                // A coin locked by a transaction the file does not hold could never be
                // released: refuse rather than strand it.
                let spends = wallet
                    .pending
                    .get(&txid)
                    .is_some_and(|pending| pending.spends().iter().any(|input| input.prevout == outpoint));
                if !spends {
                    return Err(WalletFileError::SpentByUnknown {
                        txid: outpoint.txid,
                        index: outpoint.index,
                        spender: txid,
                    });
                }
                CoinState::PendingSpend { txid }
            }
            StateRecord::PendingReceive { txid } => CoinState::PendingReceive {
                txid: txid_from(txid, "coin state txid")?,
            },
        };
        Ok(Coin {
            outpoint,
            output,
            owner,
            state,
        })
    }
}

fn state_record(state: CoinState) -> StateRecord {
    match state {
        CoinState::Spendable => StateRecord::Spendable,
        CoinState::PendingSpend { txid } => StateRecord::PendingSpend { txid: txid.to_string() },
        CoinState::PendingReceive { txid } => StateRecord::PendingReceive { txid: txid.to_string() },
    }
}

fn ra_key_from(text: &str) -> Result<RaPublicKey, WalletFileError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| RaPublicKey::decode_exact(&bytes).ok())
        .ok_or(WalletFileError::BadIdentity {
            what: "registration authority key",
        })
}

impl IdentityRecord {
    fn to_identity(&self) -> Result<crate::anonymous::EnrolledIdentity, WalletFileError> {
        let seed = hex32(&self.secret_seed, "identity secret seed")?;
        let authority = ra_key_from(&self.registration_authority)?;
        let credential =
            Credential::from_text(&self.credential).map_err(|_| WalletFileError::BadIdentity { what: "credential" })?;
        let identity = Identity::new(UserSecret::from_seed(&seed), credential, &authority)
            .map_err(|_| WalletFileError::BadIdentity { what: "credential" })?;
        Ok(crate::anonymous::EnrolledIdentity {
            seed,
            identity,
            authority,
        })
    }
}

impl NoteRecord {
    fn from_note(note: &Note, state: impl Fn(CoinState) -> StateRecord) -> Self {
        NoteRecord {
            txid: note.input.prevout.txid.to_string(),
            index: note.input.prevout.index,
            owner: hex::encode(note.input.owner),
            commitment: hex::encode(note.input.commitment),
            value: note.opening.value,
            blinding: hex::encode(note.opening.blinding.as_bytes()),
            uhs_id: note.uhs_id().to_string(),
            state: state(note.state),
        }
    }

    /// The note, checked to open its commitment, to belong to a key of `wallet` and, if marked
    /// as being spent, to be spent by one of `wallet`'s pending transactions.
    fn to_note(&self, wallet: &Wallet) -> Result<Note, WalletFileError> {
        let prevout = OutPoint {
            txid: txid_from(&self.txid, "note txid")?,
            index: self.index,
        };
        let bad = || WalletFileError::BadNote {
            txid: prevout.txid,
            index: prevout.index,
        };
        let blinding: Option<[u8; 32]> = hex::decode(&self.blinding).ok().and_then(|bytes| bytes.try_into().ok());
        let blinding = blinding
            .and_then(|bytes| Option::<Scalar>::from(Scalar::from_canonical_bytes(bytes)))
            .ok_or_else(bad)?;
        let opening = Opening {
            value: self.value,
            blinding,
        };
        let input = ConfidentialInput {
            prevout,
            owner: hex32(&self.owner, "note owner")?,
            commitment: hex32(&self.commitment, "note commitment")?,
        };
        if opening.commitment().to_bytes() != input.commitment {
            return Err(bad());
        }
        if !wallet.owns(&input.owner) {
            return Err(WalletFileError::NotOwned {
                txid: prevout.txid,
                index: prevout.index,
            });
        }
        let state = match &self.state {
            StateRecord::Spendable => CoinState::Spendable,
            StateRecord::PendingSpend { txid } => {
                let txid = txid_from(txid, "note state txid")?;
                let spends = wallet.pending.get(&txid).is_some_and(|pending| match &pending.tx {
                    SpecieTransaction::Confidential(tx) => tx.confidential_inputs.contains(&input),
                    _ => false,
                });
                if !spends {
                    return Err(WalletFileError::SpentByUnknown {
                        txid: prevout.txid,
                        index: prevout.index,
                        spender: txid,
                    });
                }
                CoinState::PendingSpend { txid }
            }
            StateRecord::PendingReceive { txid } => CoinState::PendingReceive {
                txid: txid_from(txid, "note state txid")?,
            },
        };
        Ok(Note { input, opening, state })
    }
}

fn write_atomically(path: &Path, document: &WalletFile, replace: bool) -> Result<(), FileError> {
    let mut json = serde_json::to_vec_pretty(document).map_err(|error| FileError::Io {
        action: "serialize",
        path: path.to_owned(),
        source: std::io::Error::other(error),
    })?;
    json.push(b'\n');
    write_file_atomically(path, &json, replace)
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one, whole:
/// a temporary file (0600) beside it, flushed, renamed over it (or, unless `replace`, only where
/// no file is), and the directory flushed. For every file a wallet or device keeps.
pub fn write_file_atomically(path: &Path, bytes: &[u8], replace: bool) -> Result<(), FileError> {
    let io = |action: &'static str| {
        move |source: std::io::Error| FileError::Io {
            action,
            path: path.to_owned(),
            source,
        }
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_owned(),
        _ => PathBuf::from("."),
    };
    let contents = bytes;
    // Same directory, so the rename cannot cross file systems and is atomic.
    let mut builder = tempfile::Builder::new();
    builder.prefix(".specie-wallet-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(fs::Permissions::from_mode(0o600));
    }
    let mut temp = builder
        .tempfile_in(&directory)
        .map_err(io("create a temporary file beside"))?;
    temp.write_all(contents).map_err(io("write a temporary file beside"))?;
    temp.as_file().sync_all().map_err(io("flush a temporary file beside"))?;
    if replace {
        temp.persist(path).map_err(|error| io("replace")(error.error))?;
    } else {
        temp.persist_noclobber(path).map_err(|error| {
            if error.error.kind() == std::io::ErrorKind::AlreadyExists {
                FileError::Exists { path: path.to_owned() }
            } else {
                io("create")(error.error)
            }
        })?;
    }
    // The rename is durable only once the directory entry is.
    #[cfg(unix)]
    fs::File::open(&directory)
        .and_then(|dir| dir.sync_all())
        .map_err(io("flush the directory of"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{funded_wallet, rng};

    #[test]
    fn round_trip_keeps_everything() {
        let mut rng = rng(20);
        let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
        let own = issuer.latest_address().unwrap();
        let (_, minted) = issuer.build_mint(&[(own, 500)], &mut rng).unwrap();
        issuer.on_confirmed(&minted.txid).unwrap();
        let bob = funded_wallet(&[1], &mut rng);
        issuer
            .build_payment(&bob.latest_address().unwrap(), 120, &mut rng)
            .unwrap();
        issuer.build_mint(&[(own, 9)], &mut rng).unwrap();
        issuer.set_node_url("http://10.0.0.1:9000");

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        WalletFile::create(&path, &issuer).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        assert_eq!(loaded.balance(), issuer.balance());
        assert_eq!(loaded.addresses(), issuer.addresses());
        assert_eq!(loaded.issuer_pubkey(), issuer.issuer_pubkey());
        assert_eq!(loaded.node_url(), "http://10.0.0.1:9000");
        assert_eq!(loaded.coins().collect::<Vec<_>>(), issuer.coins().collect::<Vec<_>>());
        assert_eq!(
            loaded.pending().collect::<Vec<_>>(),
            issuer.pending().collect::<Vec<_>>()
        );
        // Saving what was loaded reproduces the file byte for byte.
        let first = fs::read(&path).unwrap();
        WalletFile::save(&path, &loaded).unwrap();
        assert_eq!(fs::read(&path).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn one_command_at_a_time_holds_a_wallet() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.json");
        let held = WalletLock::acquire(&path, 0, || {}).unwrap();
        let mut told = false;
        match WalletLock::acquire(&path, 50, || told = true) {
            Err(FileError::Busy { lock, waited_ms, .. }) => {
                assert_eq!(lock, dir.path().join("w.json.lock"));
                assert!(waited_ms >= 50);
            }
            other => panic!("expected Busy, got {other:?}"),
        }
        assert!(told, "the waiting caller is told why");
        drop(held);
        WalletLock::acquire(&path, 0, || panic!("free now: no wait")).unwrap();
    }

    #[test]
    fn create_refuses_to_overwrite() {
        let mut rng = rng(21);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let first = Wallet::new("usd", false, &mut rng).unwrap();
        WalletFile::create(&path, &first).unwrap();
        let second = Wallet::new("usd", false, &mut rng).unwrap();
        let error = WalletFile::create(&path, &second).unwrap_err();
        assert!(matches!(error, FileError::Exists { .. }));
        assert!(error.to_string().contains("refusing to overwrite"));
        assert_eq!(WalletFile::load(&path).unwrap().addresses(), first.addresses());
        // The atomic no-clobber path refuses too (the race the pre-check cannot close).
        assert!(matches!(
            write_atomically(&path, &WalletFile::from_wallet(&second), false),
            Err(FileError::Exists { .. })
        ));
        assert_eq!(WalletFile::load(&path).unwrap().addresses(), first.addresses());
    }

    #[test]
    fn damaged_files_are_explained() {
        let mut rng = rng(22);
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.json");
        assert!(matches!(WalletFile::load(&missing), Err(FileError::NotFound { .. })));

        let path = dir.path().join("wallet.json");
        fs::write(&path, "{not json").unwrap();
        assert!(matches!(WalletFile::load(&path), Err(FileError::Invalid { .. })));

        let wallet = funded_wallet(&[5], &mut rng);
        let mut document = WalletFile::from_wallet(&wallet);
        document.version = 99;
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        assert!(matches!(
            WalletFile::load(&path),
            Err(FileError::UnsupportedVersion { version: 99, .. })
        ));

        let mut document = WalletFile::from_wallet(&wallet);
        document.coins[0].value += 1;
        document.coins[0].owner = hex::encode([2u8; 32]);
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let error = WalletFile::load(&path).unwrap_err();
        assert!(
            matches!(&error, FileError::Inconsistent { problem, .. } if matches!(**problem, WalletFileError::NotOwned { index: 0, .. })),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("not owned by any key"), "{message}");

        let mut document = WalletFile::from_wallet(&wallet);
        document.coins[0].state = StateRecord::PendingSpend { txid: "11".repeat(32) };
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let message = WalletFile::load(&path).unwrap_err().to_string();
        assert!(message.contains("not a pending transaction spending it"), "{message}");

        let mut document = WalletFile::from_wallet(&wallet);
        let duplicate = document.coins[0].clone();
        document.coins.push(duplicate);
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let error = WalletFile::load(&path).unwrap_err();
        assert!(
            matches!(&error, FileError::Inconsistent { problem, .. } if matches!(**problem, WalletFileError::DuplicateCoin { .. })),
            "{error:?}"
        );
        assert!(error.to_string().ends_with("appears twice"), "{error}");

        let mut document = WalletFile::from_wallet(&wallet);
        document.keys[0].secret_key = "zz".into();
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let message = WalletFile::load(&path).unwrap_err().to_string();
        assert!(message.ends_with("secret key 0 \"zz\" is not hex"), "{message}");
    }
}
