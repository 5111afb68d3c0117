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
//! people reading the file; loading recomputes them. A capability's part (`crate::part`: the
//! privacy levels' notes, Byzantine-mode accounts) is loaded and checked by its installed kind,
//! after the core's fields; top-level fields no installed part owns are carried unread.
//!
//! A wallet file may be encrypted under a passphrase (`crate::envelope`): [`WalletFile::load`]
//! and [`WalletFile::save`] handle both kinds. What a file is, and the key that opens it, are
//! recorded when a command loads (or creates) it, per path, and a save writes the same kind
//! again: a wallet that was encrypted stays encrypted, without deriving its key a second time.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use secp256k1::XOnlyPublicKey;
use serde::{Deserialize, Serialize};
use specie_codec::{Decode, DecodeError, Encode};
use specie_log::secret::SecretFileError;
use specie_log::WaitLockError;
use specie_transaction::{Address, OutPoint, Output, SpecieTransaction, Txid};
use thiserror::Error;

use crate::client::NodeAccess;
use crate::envelope::{self, KdfCost, OpenError, Passphrase, Seal, PASSPHRASE_ENV};
use crate::exchange::ExchangeRecord;
use crate::signer::IssuerSigner;
use crate::wallet::{Coin, CoinState, PendingKind, PendingTx, Wallet, WalletKey};
use crate::WalletError;

/// The `format` field of every wallet file.
pub const WALLET_FORMAT: &str = "specie-wallet";
/// What to do with a wallet file that does not load. Saves replace the file atomically, so a
/// damaged one was damaged outside specie (a copy cut short, a full disk, an editor).
const DAMAGED_ADVICE: &str = "nothing was changed. If it was cut short or edited, restore it from your backup: \
     the node keeps only hashes, so your coins' data is only in wallet files";

/// The version this code writes. 2 added Byzantine-mode accounts (`fastpay`, absent when the
/// wallet has none) and the pending kinds `fastpay_funding` and `fastpay_redeem`; 3 added
/// confidential notes (`notes`, `sent_confidential`, absent when empty) and the pending kinds
/// `shield`, `confidential_payment` and `unshield`; 4 added the anonymous level (`identity`,
/// `enrolling`, `anonymous_notes`, `sent_anonymous`, absent when empty) and the pending kinds
/// `anonymise` and `anonymous_payment`; 5 added the wallet's network (`network_id`) and the
/// coin and note state `missing`.
pub const WALLET_FORMAT_VERSION: u32 = 5;
/// The oldest version this code reads: each version only added optional sections and pending
/// kinds, so an older file loads as it is (with no notes) and is written back as the newest.
pub const WALLET_FORMAT_VERSION_OLDEST: u32 = 1;
/// A wallet file larger than this is refused before parsing (a million coins is ~400 MB of
/// JSON; no real wallet is near this, and a damaged file must not exhaust memory).
pub const WALLET_FILE_BYTES_MAX: u64 = 512 * 1024 * 1024;
/// An encrypted wallet file larger than this is refused before reading: its ciphertext is the
/// largest wallet, in hex, and the header is a few hundred bytes.
pub const ENCRYPTED_WALLET_FILE_BYTES_MAX: u64 = 2 * WALLET_FILE_BYTES_MAX + 64 * 1024;

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
    #[error("{path} is not a usable specie wallet file ({reason}); {DAMAGED_ADVICE}")]
    Invalid { path: PathBuf, reason: String },
    /// The file parses, but what it holds does not add up.
    #[error("{path} is not a usable specie wallet file ({problem}); {DAMAGED_ADVICE}")]
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
        "{path} is an encrypted wallet file and no passphrase was given: pass --passphrase-file FILE (a file \
         holding the passphrase) or set the environment variable {PASSPHRASE_ENV}"
    )]
    PassphraseNeeded { path: PathBuf },
    /// Wrong passphrase, or an altered file: authenticated encryption cannot tell which.
    #[error(
        "the passphrase does not open {path}: it is not this wallet's passphrase, or the file was altered; \
         nothing was changed"
    )]
    WrongPassphrase { path: PathBuf },
    #[error("{path} is already encrypted; nothing was changed")]
    AlreadyEncrypted { path: PathBuf },
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
    #[error(
        "its issuer section does not add up: a secret key that is not the public key's, or both a secret \
         key and an external signer, or a signer command that is empty or too long"
    )]
    BadIssuer,
    #[error("the payment string kept for payment {txid} does not decode")]
    BadSentPayment { txid: Txid },
    /// Something in the exchange account's section (`exchange`) does not decode.
    #[error("exchange: {what}: {problem}")]
    Exchange { what: String, problem: String },
    /// Something in a capability's part (`crate::part`) does not add up, as its kind says.
    #[error("{0}")]
    Part(Box<dyn std::error::Error + Send + Sync>),
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

/// How long a command waits for another one on the same wallet: longer than any one command
/// takes (its node time-out is at most 120 s).
pub const WALLET_LOCK_WAIT_MS: u64 = 150_000;

/// Whether two paths name the same file (one wallet, however spelt), so that a command never
/// waits for a lock it holds itself.
pub fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

impl WalletLock {
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
        match specie_log::wait_lock(&lock, wait_ms, on_wait) {
            Ok(file) => Ok(WalletLock { _file: file }),
            Err(WaitLockError::Open { path, source }) => Err(FileError::Io {
                action: "open the lock file",
                path,
                source,
            }),
            Err(WaitLockError::Lock { path, source }) => Err(FileError::Io {
                action: "lock",
                path,
                source,
            }),
            Err(WaitLockError::Busy { waited_ms, .. }) => Err(FileError::Busy {
                path: path.to_owned(),
                lock,
                waited_ms,
            }),
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
    /// A PEM file of the CA certificates to trust for an `https://` `node_url` instead of the
    /// public roots (`create --ca-cert`). Absent when not given; older programs ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ca_cert: Option<PathBuf>,
    /// A file whose contents are the `Authorization` header of every request to `node_url`
    /// (`create --node-auth-file`): the path, never the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_auth_file: Option<PathBuf>,
    /// The network the wallet's money is on (`network_id` at `/v1/info`, version 5): the wallet
    /// refuses any node of another. Absent until the wallet holds something.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_id: Option<String>,
    /// Present only in an issuer wallet: the key that signs mints and redeems.
    pub issuer: Option<IssuerRecord>,
    pub keys: Vec<KeyRecord>,
    pub coins: Vec<CoinRecord>,
    pub pending: Vec<PendingRecord>,
    /// An offline-cash device (hex of its canonical encoding); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offline_device: Option<String>,
    /// The trader's exchange account (`specie exchange …`); absent while the wallet has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exchange: Option<ExchangeRecord>,
    /// The top-level fields of capabilities' parts (`crate::part`): confidential notes and
    /// the strings of pending confidential payments (version 3: `notes`, `sent_confidential`),
    /// the anonymous level (version 4: `identity`, `enrolling`, `anonymous_notes`,
    /// `sent_anonymous`), each absent while empty; and any other field this program does not
    /// know, carried unchanged.
    #[serde(flatten)]
    pub other: serde_json::Map<String, serde_json::Value>,
    /// The payee's strings of confirmed payments, oldest first (version 5), so that a string
    /// the terminal lost can be shown again (`specie wallet sent`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sent: Vec<SentRecord>,
}

/// A confirmed payment's string for its payee.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SentRecord {
    pub txid: String,
    pub confirmed_at_unix_s: u64,
    /// `specie-pay1…`, `specie-cpay1…` or `specie-apay1…`: as secret as the payment.
    pub payment_string: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IssuerRecord {
    /// Absent when an external signer holds the key (`signer`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret_key: String,
    /// What `specie node --issuer` needs; checked against the secret on load, and the key an
    /// external signer's signatures must verify under.
    pub public_key: String,
    /// The external signer (program and arguments) that signs as the issuer (version 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<Vec<String>>,
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

/// Where a coin (or a capability's note) is in its life cycle ([`CoinState`]), as the file
/// records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StateRecord {
    Spendable,
    PendingSpend {
        txid: String,
    },
    PendingReceive {
        txid: String,
    },
    /// Not at the node at the last sync (version 5): kept, not spendable.
    Missing,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KindRecord {
    Payment {
        to: String,
        amount: u64,
    },
    Mint {
        total: u64,
    },
    Redeem {
        amount: u64,
    },
    FastpayFunding {
        amount: u64,
    },
    FastpayRedeem {
        amount: u64,
    },
    /// Named as before the kind was called a bridge funding: wallet files keep their format.
    #[serde(rename = "offline_funding")]
    BridgeFunding {
        amount: u64,
    },
    Shield {
        amount: u64,
    },
    ConfidentialPayment {
        to: String,
        amount: u64,
    },
    Unshield {
        amount: u64,
    },
    Anonymise {
        amount: u64,
    },
    AnonymousPayment {
        to: u64,
        amount: u64,
    },
    LeaveAnonymous {
        amount: u64,
    },
    EnterUnlinkable {
        amount: u64,
    },
    UnlinkablePayment {
        to: u64,
        amount: u64,
    },
    LeaveUnlinkable {
        amount: u64,
    },
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
    /// Abandoned (version 5): a payment of its coins back to this wallet is pending too, and
    /// `sync` never sends this one again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub abandoned: bool,
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

/// The 32 bytes whose hex is `text`, field `what` of a wallet file (for a part's loader too).
pub fn hex32(text: &str, what: &str) -> Result<[u8; 32], WalletFileError> {
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

/// The txid whose hex is `text`, field `what` of a wallet file (for a part's loader too).
pub fn txid_from(text: &str, what: &str) -> Result<Txid, WalletFileError> {
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
            PendingKind::BridgeFunding { amount } => KindRecord::BridgeFunding { amount },
            PendingKind::Shield { amount } => KindRecord::Shield { amount },
            PendingKind::ConfidentialPayment { to, amount } => KindRecord::ConfidentialPayment {
                to: wallet.format_address(&to),
                amount,
            },
            PendingKind::Unshield { amount } => KindRecord::Unshield { amount },
            PendingKind::Anonymise { amount } => KindRecord::Anonymise { amount },
            PendingKind::AnonymousPayment { to, amount } => KindRecord::AnonymousPayment { to, amount },
            PendingKind::LeaveAnonymous { amount } => KindRecord::LeaveAnonymous { amount },
            PendingKind::EnterUnlinkable { amount } => KindRecord::EnterUnlinkable { amount },
            PendingKind::UnlinkablePayment { to, amount } => KindRecord::UnlinkablePayment { to, amount },
            PendingKind::LeaveUnlinkable { amount } => KindRecord::LeaveUnlinkable { amount },
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
            node_ca_cert: wallet.node_access().ca_cert.clone(),
            node_auth_file: wallet.node_access().auth_file.clone(),
            network_id: wallet.network_id().map(str::to_owned),
            issuer: wallet.issuer.as_ref().map(|issuer| IssuerRecord {
                secret_key: wallet.issuer_secret().map(hex::encode).unwrap_or_default(),
                public_key: wallet.issuer_pubkey_hex().unwrap_or_default(),
                signer: match issuer {
                    IssuerSigner::External(signer) => Some(signer.command.clone()),
                    IssuerSigner::Key(_) => None,
                },
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
                    abandoned: pending.abandoned,
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
            offline_device: wallet.offline_device().map(hex::encode),
            exchange: wallet.exchange().map(ExchangeRecord::from_account),
            other: Self::other_fields(wallet),
            sent: (wallet.sent())
                .map(|sent| SentRecord {
                    txid: sent.txid.to_string(),
                    confirmed_at_unix_s: sent.confirmed_at_unix_s,
                    payment_string: sent.payment_string.clone(),
                })
                .collect(),
        }
    }

    /// The fields no installed part owned when the wallet was loaded, and every part's own.
    fn other_fields(wallet: &Wallet) -> serde_json::Map<String, serde_json::Value> {
        let mut other = wallet.unread.0.clone();
        for part in wallet.parts.values() {
            other.extend(part.to_fields());
        }
        other
    }

    /// Rebuilds the wallet, checking everything (see the module docs). Errors are reasons
    /// without the path; [`WalletFile::load`] adds it.
    pub fn into_wallet(self) -> Result<Wallet, WalletFileError> {
        if self.format != WALLET_FORMAT {
            return Err(WalletFileError::Format { found: self.format });
        }
        let mut wallet = Wallet::empty(&self.hrp)?;
        wallet.set_node_url(&self.node_url);
        wallet.set_node_access(NodeAccess {
            ca_cert: self.node_ca_cert.clone(),
            auth_file: self.node_auth_file.clone(),
        });
        wallet.network_id = self.network_id.clone();
        self.restore_keys(&mut wallet)?;
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
        self.restore_sent(&mut wallet)?;
        self.restore_parts(&mut wallet)?;
        Ok(wallet)
    }

    /// The strings of confirmed payments: each the core's, or an installed part's.
    fn restore_sent(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        let kinds = crate::part::installed_parts();
        for record in self.sent.iter().rev().take(crate::SENT_KEPT_MAX).rev() {
            let txid = txid_from(&record.txid, "sent payment txid")?;
            let text = record.payment_string.as_str();
            let decodes =
                crate::PaymentString::parse(text).is_ok() || kinds.iter().any(|kind| kind.payment_string_decodes(text));
            if !decodes {
                return Err(WalletFileError::BadSentPayment { txid });
            }
            wallet.keep_sent(crate::SentPayment {
                txid,
                confirmed_at_unix_s: record.confirmed_at_unix_s,
                payment_string: record.payment_string.clone(),
            });
        }
        Ok(())
    }

    /// The parts of the installed kinds whose fields the file has, each loaded and checked by
    /// its kind; the fields of no installed kind are kept unread.
    fn restore_parts(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        let mut unread = self.other.clone();
        for kind in crate::part::installed_parts() {
            let fields: serde_json::Map<String, serde_json::Value> = (kind.fields().iter())
                .filter_map(|field| unread.remove(*field).map(|value| ((*field).to_owned(), value)))
                .collect();
            if !fields.is_empty() {
                let part = kind.load(&fields, wallet)?;
                wallet.insert_part(part);
            }
        }
        wallet.unread = crate::wallet::Unread(unread);
        Ok(())
    }

    /// The issuer key and the wallet's keys, each at most once.
    fn restore_keys(&self, wallet: &mut Wallet) -> Result<(), WalletFileError> {
        if let Some(issuer) = &self.issuer {
            wallet.issuer = Some(issuer.to_signer()?);
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

    /// Reads and checks the wallet at `path`, opening it with the process's passphrase
    /// ([`Passphrase::process`]) if it is encrypted.
    pub fn load(path: &Path) -> Result<Wallet, FileError> {
        Self::load_with(path, Passphrase::process())
    }

    /// Reads and checks the wallet at `path`, opening it with `passphrase` if it is encrypted
    /// (and refusing it, if none is given). Records what the file is for later saves.
    pub fn load_with(path: &Path, passphrase: Option<&Passphrase>) -> Result<Wallet, FileError> {
        let (wallet, state) = Self::open(path, &read_bounded(path)?, passphrase)?;
        remember(path, state);
        Ok(wallet)
    }

    /// The wallet in `bytes` (the file at `path`), checked, and what the file is.
    fn open(path: &Path, bytes: &[u8], passphrase: Option<&Passphrase>) -> Result<(Wallet, FileState), FileError> {
        let invalid = |reason: String| FileError::Invalid {
            path: path.to_owned(),
            reason,
        };
        let decrypted;
        let (plaintext, seal) = if envelope::is_envelope(bytes) {
            let passphrase = passphrase.ok_or_else(|| FileError::PassphraseNeeded { path: path.to_owned() })?;
            let (seal, opened) = Seal::open(bytes, passphrase).map_err(|error| open_error(path, error))?;
            decrypted = opened;
            (&decrypted[..], Some(seal))
        } else {
            (bytes, None)
        };
        if plaintext.len() as u64 > WALLET_FILE_BYTES_MAX {
            return Err(invalid(format!(
                "it is {} bytes, more than the {WALLET_FILE_BYTES_MAX} a wallet may be",
                plaintext.len()
            )));
        }
        // Check the version before the full shape, so that a future format gets a clear message.
        #[derive(Deserialize)]
        struct Header {
            version: u32,
        }
        let header: Header = serde_json::from_slice(plaintext).map_err(|error| invalid(error.to_string()))?;
        if !(WALLET_FORMAT_VERSION_OLDEST..=WALLET_FORMAT_VERSION).contains(&header.version) {
            return Err(FileError::UnsupportedVersion {
                path: path.to_owned(),
                version: header.version,
                supported: WALLET_FORMAT_VERSION,
            });
        }
        let document: WalletFile = serde_json::from_slice(plaintext).map_err(|error| invalid(error.to_string()))?;
        let state = FileState { seal };
        let wallet = document.into_wallet().map_err(|problem| FileError::Inconsistent {
            path: path.to_owned(),
            problem: Box::new(problem),
        })?;
        Ok((wallet, state))
    }

    /// Writes a new wallet file; fails if `path` exists (even if it appears between the check
    /// and the write: the final step is an atomic no-clobber rename).
    pub fn create(path: &Path, wallet: &Wallet) -> Result<(), FileError> {
        Self::create_with(path, wallet, None)
    }

    /// [`WalletFile::create`], encrypting the file under `passphrase` if one is given.
    pub fn create_with(path: &Path, wallet: &Wallet, passphrase: Option<&Passphrase>) -> Result<(), FileError> {
        Self::create_at_cost(path, wallet, passphrase, KdfCost::DEFAULT)
    }

    fn create_at_cost(
        path: &Path,
        wallet: &Wallet,
        passphrase: Option<&Passphrase>,
        cost: KdfCost,
    ) -> Result<(), FileError> {
        if path.exists() {
            return Err(FileError::Exists { path: path.to_owned() });
        }
        let seal = passphrase
            .map(|passphrase| Seal::new(passphrase, cost))
            .transpose()
            .map_err(|error| open_error(path, error))?;
        let state = FileState { seal };
        write_state(path, wallet, &state, false)?;
        remember(path, state);
        Ok(())
    }

    /// Replaces the wallet file at `path` with `wallet`, atomically, as the same kind of file it
    /// was when loaded: encrypted under the same key, or in clear. For a path this process has
    /// not loaded, the file there decides (opened with the process's passphrase if encrypted).
    pub fn save(path: &Path, wallet: &Wallet) -> Result<(), FileError> {
        let state = match remembered(path) {
            Some(state) => state,
            None => Self::state_on_disk(path, Passphrase::process())?,
        };
        write_state(path, wallet, &state, true)
    }

    /// What the file at `path` is, for a save: nothing there, or a damaged file in clear, is
    /// overwritten in clear; an encrypted one must open with `passphrase`.
    fn state_on_disk(path: &Path, passphrase: Option<&Passphrase>) -> Result<FileState, FileError> {
        let bytes = match read_bounded(path) {
            Ok(bytes) => bytes,
            Err(FileError::NotFound { .. }) => return Ok(FileState::default()),
            Err(error) => return Err(error),
        };
        match Self::open(path, &bytes, passphrase) {
            Ok((_, state)) => Ok(state),
            Err(error) if envelope::is_envelope(&bytes) => Err(error),
            Err(_) => Ok(FileState::default()),
        }
    }

    /// Encrypts the wallet file at `path` (in clear) under `passphrase`, atomically: it is
    /// checked as [`WalletFile::load`] checks it, then its exact contents are sealed into a file
    /// beside it that is renamed over it, so a crash leaves one or the other, whole.
    pub fn encrypt(path: &Path, passphrase: &Passphrase) -> Result<(), FileError> {
        Self::encrypt_at_cost(path, passphrase, KdfCost::DEFAULT)
    }

    fn encrypt_at_cost(path: &Path, passphrase: &Passphrase, cost: KdfCost) -> Result<(), FileError> {
        let bytes = read_bounded(path)?;
        if envelope::is_envelope(&bytes) {
            return Err(FileError::AlreadyEncrypted { path: path.to_owned() });
        }
        let (_, mut state) = Self::open(path, &bytes, None)?;
        let seal = Seal::new(passphrase, cost).map_err(|error| open_error(path, error))?;
        let sealed = seal.seal(&bytes).map_err(|error| open_error(path, error))?;
        write_file_atomically(path, &sealed, true)?;
        state.seal = Some(seal);
        remember(path, state);
        Ok(())
    }

    /// Whether the wallet file at `path` is encrypted (false if there is none).
    pub fn is_encrypted(path: &Path) -> Result<bool, FileError> {
        match read_bounded(path) {
            Ok(bytes) => Ok(envelope::is_envelope(&bytes)),
            Err(FileError::NotFound { .. }) => Ok(false),
            Err(error) => Err(error),
        }
    }
}

/// What a wallet file is, beyond the wallet: whether (and under which key) it is encrypted.
#[derive(Clone, Debug, Default)]
struct FileState {
    seal: Option<Seal>,
}

/// What each wallet file this process loaded or created is, by absolute path.
static FILE_STATES: Mutex<BTreeMap<PathBuf, FileState>> = Mutex::new(BTreeMap::new());

fn state_key(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

fn remember(path: &Path, state: FileState) {
    let mut states = FILE_STATES.lock().unwrap_or_else(PoisonError::into_inner);
    states.insert(state_key(path), state);
}

fn remembered(path: &Path) -> Option<FileState> {
    let states = FILE_STATES.lock().unwrap_or_else(PoisonError::into_inner);
    states.get(&state_key(path)).cloned()
}

/// The file at `path`, refused unread if it is larger than any wallet file may be.
fn read_bounded(path: &Path) -> Result<Vec<u8>, FileError> {
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
    let too_large = |bytes: u64| FileError::Invalid {
        path: path.to_owned(),
        reason: format!(
            "it is {bytes} bytes or more, more than the {ENCRYPTED_WALLET_FILE_BYTES_MAX} a wallet file may be"
        ),
    };
    let bytes = file.metadata().map_err(io("inspect"))?.len();
    if bytes > ENCRYPTED_WALLET_FILE_BYTES_MAX {
        return Err(too_large(bytes));
    }
    let mut contents = Vec::with_capacity(bytes as usize);
    // The length may have changed since: read no more than allowed whatever it says now.
    file.take(ENCRYPTED_WALLET_FILE_BYTES_MAX + 1)
        .read_to_end(&mut contents)
        .map_err(io("read"))?;
    if contents.len() as u64 > ENCRYPTED_WALLET_FILE_BYTES_MAX {
        return Err(too_large(contents.len() as u64));
    }
    Ok(contents)
}

fn open_error(path: &Path, error: OpenError) -> FileError {
    match error {
        OpenError::NotOpened => FileError::WrongPassphrase { path: path.to_owned() },
        OpenError::UnsupportedVersion(_) | OpenError::Invalid(_) => FileError::Invalid {
            path: path.to_owned(),
            reason: format!("its encryption envelope is not usable: {error}"),
        },
    }
}

/// Writes `wallet` to `path` as the kind of file `state` says.
fn write_state(path: &Path, wallet: &Wallet, state: &FileState, replace: bool) -> Result<(), FileError> {
    let document = WalletFile::from_wallet(wallet);
    let Some(seal) = &state.seal else {
        return write_atomically(path, &document, replace);
    };
    let json = zeroize::Zeroizing::new(document_json(path, &document)?);
    let sealed = seal.seal(&json).map_err(|error| open_error(path, error))?;
    write_file_atomically(path, &sealed, replace)
}

impl IssuerRecord {
    /// The issuer's signing: the secret key, which must match the public key; or the external
    /// signer, for the public key.
    fn to_signer(&self) -> Result<IssuerSigner, WalletFileError> {
        let bad = || WalletFileError::BadIssuer;
        match &self.signer {
            None => {
                let key = key_from(&self.secret_key, "the issuer secret key")?;
                if !self.public_key.is_empty()
                    && !self
                        .public_key
                        .eq_ignore_ascii_case(&hex::encode(key.pubkey.serialize()))
                {
                    return Err(bad());
                }
                Ok(IssuerSigner::Key(key))
            }
            Some(command) => {
                let pubkey = hex32(&self.public_key, "the issuer public key")?;
                let pubkey = specie_transaction::signing::parse_xonly(&pubkey).ok_or_else(bad)?;
                if !self.secret_key.is_empty() {
                    return Err(bad());
                }
                let signer = crate::ExternalSigner::new(pubkey, command.clone()).map_err(|_| bad())?;
                Ok(IssuerSigner::External(signer))
            }
        }
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
            KindRecord::BridgeFunding { amount } => PendingKind::BridgeFunding { amount: *amount },
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
            KindRecord::EnterUnlinkable { amount } => PendingKind::EnterUnlinkable { amount: *amount },
            KindRecord::UnlinkablePayment { to, amount } => PendingKind::UnlinkablePayment {
                to: *to,
                amount: *amount,
            },
            KindRecord::LeaveUnlinkable { amount } => PendingKind::LeaveUnlinkable { amount: *amount },
        };
        Ok(PendingTx {
            txid,
            tx,
            created_at_unix_s: self.created_at_unix_s,
            kind,
            abandoned: self.abandoned,
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
            StateRecord::Missing => CoinState::Missing,
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
    StateRecord::from(state)
}

impl From<CoinState> for StateRecord {
    fn from(state: CoinState) -> Self {
        match state {
            CoinState::Spendable => StateRecord::Spendable,
            CoinState::PendingSpend { txid } => StateRecord::PendingSpend { txid: txid.to_string() },
            CoinState::PendingReceive { txid } => StateRecord::PendingReceive { txid: txid.to_string() },
            CoinState::Missing => StateRecord::Missing,
        }
    }
}

fn write_atomically(path: &Path, document: &WalletFile, replace: bool) -> Result<(), FileError> {
    write_file_atomically(path, &document_json(path, document)?, replace)
}

/// The file's text for `document`: pretty JSON and a final line break.
fn document_json(path: &Path, document: &WalletFile) -> Result<Vec<u8>, FileError> {
    let mut json = serde_json::to_vec_pretty(document).map_err(|error| FileError::Io {
        action: "serialize",
        path: path.to_owned(),
        source: std::io::Error::other(error),
    })?;
    json.push(b'\n');
    Ok(json)
}

/// Writes `bytes` to `path` so that a crash leaves either the old file or the new one, whole
/// (0600; unless `replace`, only where no file is): [`specie_log::secret::write_atomically`]. For
/// every file a wallet or device keeps.
pub fn write_file_atomically(path: &Path, bytes: &[u8], replace: bool) -> Result<(), FileError> {
    specie_log::secret::write_atomically(path, bytes, replace).map_err(|error| match error {
        SecretFileError::Exists { path } => FileError::Exists { path },
        SecretFileError::Io { path, source } => FileError::Io {
            action: "write",
            path,
            source,
        },
        SecretFileError::Bad { path } => unreachable!("{}: nothing is read", path.display()),
    })
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

    /// Top-level fields no installed part owns (a capability this program is built without, a
    /// newer program's) load and save unchanged; the string of a confirmed payment of such a
    /// capability does not load without its part.
    #[test]
    fn fields_of_parts_not_installed_are_carried_unread() {
        let mut rng = rng(22);
        let wallet = funded_wallet(&[3], &mut rng);
        let mut document = serde_json::to_value(WalletFile::from_wallet(&wallet)).unwrap();
        let notes = serde_json::json!([{"txid": "zz", "anything": [1, 2]}]);
        document["notes"] = notes.clone();
        document["identity"] = serde_json::json!({"secret_seed": "not even hex"});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let loaded = WalletFile::load(&path).unwrap();
        assert_eq!(loaded.parts().count(), 0, "no part is installed in these tests");
        WalletFile::save(&path, &loaded).unwrap();
        let saved: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(saved, document);
        assert!(
            !format!("{loaded:?}").contains("not even hex"),
            "Debug names unread fields only"
        );

        let mut with_sent = document.clone();
        with_sent["sent"] = serde_json::json!([{
            "txid": "07".repeat(32), "confirmed_at_unix_s": 1, "payment_string": "specie-cpay1abcd"
        }]);
        let file: WalletFile = serde_json::from_value(with_sent).unwrap();
        assert!(matches!(
            file.into_wallet(),
            Err(WalletFileError::BadSentPayment { .. })
        ));
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
        assert!(
            error.to_string().contains("appears twice); nothing was changed"),
            "{error}"
        );

        let mut document = WalletFile::from_wallet(&wallet);
        document.keys[0].secret_key = "zz".into();
        fs::write(&path, serde_json::to_vec(&document).unwrap()).unwrap();
        let message = WalletFile::load(&path).unwrap_err().to_string();
        assert!(
            message.contains("secret key 0 \"zz\" is not hex); nothing was changed"),
            "{message}"
        );
    }

    fn passphrase(text: &str) -> Passphrase {
        Passphrase::new(text.as_bytes().to_vec(), "a test").unwrap()
    }

    /// The secret keys of `wallet`, as the file in clear spells them.
    fn secrets(wallet: &Wallet) -> Vec<String> {
        let document = WalletFile::from_wallet(wallet);
        let mut secrets: Vec<String> = document.keys.iter().map(|key| key.secret_key.clone()).collect();
        secrets.extend(document.issuer.map(|issuer| issuer.secret_key));
        secrets
    }

    #[test]
    fn encrypted_wallets_round_trip_and_stay_encrypted() {
        let mut rng = rng(23);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let mut wallet = funded_wallet(&[40, 2], &mut rng);
        let pass = passphrase("correct horse battery staple");
        let cost = crate::envelope::tests::TEST_COST;
        WalletFile::create_at_cost(&path, &wallet, Some(&pass), cost).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(crate::ENCRYPTED_WALLET_FORMAT), "{text}");
        for secret in secrets(&wallet) {
            assert!(!text.contains(&secret), "a secret key is in clear");
        }
        assert!(WalletFile::is_encrypted(&path).unwrap());

        let loaded = WalletFile::load_with(&path, Some(&pass)).unwrap();
        assert_eq!(loaded.balance(), wallet.balance());
        assert_eq!(loaded.addresses(), wallet.addresses());
        // A save keeps it encrypted, under the same salt, with a new nonce.
        wallet.new_address(&mut rng).unwrap();
        WalletFile::save(&path, &wallet).unwrap();
        let saved = fs::read_to_string(&path).unwrap();
        let header = |text: &str| serde_json::from_str::<serde_json::Value>(text).unwrap();
        assert_eq!(header(&saved)["kdf"], header(&text)["kdf"]);
        assert_ne!(header(&saved)["nonce"], header(&text)["nonce"]);
        let reloaded = WalletFile::load_with(&path, Some(&pass)).unwrap();
        assert_eq!(reloaded.addresses(), wallet.addresses());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn encrypted_wallets_do_not_open_without_their_passphrase() {
        let mut rng = rng(24);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let wallet = funded_wallet(&[7], &mut rng);
        let cost = crate::envelope::tests::TEST_COST;
        WalletFile::create_at_cost(&path, &wallet, Some(&passphrase("right")), cost).unwrap();
        let before = fs::read(&path).unwrap();

        let error = WalletFile::load_with(&path, None).unwrap_err();
        assert!(matches!(error, FileError::PassphraseNeeded { .. }), "{error:?}");
        let message = error.to_string();
        assert!(
            message.contains("--passphrase-file") && message.contains(PASSPHRASE_ENV),
            "{message}"
        );

        let error = WalletFile::load_with(&path, Some(&passphrase("wrong"))).unwrap_err();
        assert!(matches!(error, FileError::WrongPassphrase { .. }), "{error:?}");
        assert!(error.to_string().contains("nothing was changed"), "{error}");

        // An altered ciphertext reads as a wrong passphrase: the cipher cannot tell them apart.
        let mut envelope: serde_json::Value = serde_json::from_slice(&before).unwrap();
        let mut ciphertext = hex::decode(envelope["ciphertext"].as_str().unwrap()).unwrap();
        ciphertext[10] ^= 0x40;
        envelope["ciphertext"] = hex::encode(ciphertext).into();
        let altered = dir.path().join("altered.json");
        fs::write(&altered, serde_json::to_vec(&envelope).unwrap()).unwrap();
        assert!(matches!(
            WalletFile::load_with(&altered, Some(&passphrase("right"))),
            Err(FileError::WrongPassphrase { .. })
        ));
        // A header asking for too much memory is refused before anything is allocated.
        envelope["kdf"]["memory_kib"] = (crate::envelope::MEMORY_KIB_MAX * 4).into();
        fs::write(&altered, serde_json::to_vec(&envelope).unwrap()).unwrap();
        let error = WalletFile::load_with(&altered, Some(&passphrase("right"))).unwrap_err();
        assert!(
            matches!(&error, FileError::Invalid { reason, .. } if reason.contains("KiB of memory")),
            "{error:?}"
        );

        // A process that did not load it cannot save over it without the passphrase.
        let other = dir.path().join("other.json");
        fs::copy(&path, &other).unwrap();
        assert!(matches!(
            WalletFile::save(&other, &wallet),
            Err(FileError::PassphraseNeeded { .. }) | Err(FileError::WrongPassphrase { .. })
        ));
        assert_eq!(fs::read(&other).unwrap(), before, "nothing changed");
        assert_eq!(fs::read(&path).unwrap(), before, "nothing changed");
    }

    #[test]
    fn encrypting_a_wallet_in_clear_keeps_its_contents() {
        let mut rng = rng(25);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let wallet = funded_wallet(&[3, 4], &mut rng);
        WalletFile::create(&path, &wallet).unwrap();
        assert!(!WalletFile::is_encrypted(&path).unwrap());
        let clear = fs::read(&path).unwrap();
        let pass = passphrase("p");
        let cost = crate::envelope::tests::TEST_COST;
        WalletFile::encrypt_at_cost(&path, &pass, cost).unwrap();
        assert!(WalletFile::is_encrypted(&path).unwrap());
        assert!(matches!(
            WalletFile::encrypt_at_cost(&path, &pass, cost),
            Err(FileError::AlreadyEncrypted { .. })
        ));
        let (_, opened) = Seal::open(&fs::read(&path).unwrap(), &pass).unwrap();
        assert_eq!(&opened[..], &clear[..], "the exact file, sealed");
        assert_eq!(
            WalletFile::load_with(&path, Some(&pass)).unwrap().balance(),
            wallet.balance()
        );
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        // Files that are not wallets are not encrypted.
        let junk = dir.path().join("junk.json");
        fs::write(&junk, "{not json").unwrap();
        assert!(matches!(
            WalletFile::encrypt_at_cost(&junk, &pass, cost),
            Err(FileError::Invalid { .. })
        ));
        assert_eq!(fs::read(&junk).unwrap(), b"{not json");
    }

    #[test]
    fn node_settings_are_kept_beside_the_node_url() {
        let mut rng = rng(26);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wallet.json");
        let mut wallet = Wallet::new("usd", false, &mut rng).unwrap();
        wallet.set_node_url("https://node.example:8443");
        let access = NodeAccess {
            ca_cert: Some(PathBuf::from("/etc/specie/proxy-ca.pem")),
            auth_file: Some(PathBuf::from("/etc/specie/node.token")),
        };
        wallet.set_node_access(access.clone());
        WalletFile::create_with(&path, &wallet, None).unwrap();
        let document: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(document["node_ca_cert"], "/etc/specie/proxy-ca.pem");
        assert_eq!(document["node_auth_file"], "/etc/specie/node.token");
        let mut loaded = WalletFile::load(&path).unwrap();
        assert_eq!(loaded.node_access(), &access);
        // A save writes them back.
        loaded.new_address(&mut rng).unwrap();
        WalletFile::save(&path, &loaded).unwrap();
        let again: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(again["node_ca_cert"], document["node_ca_cert"]);
        assert_eq!(again["node_auth_file"], document["node_auth_file"]);
        // Absent when not given.
        let plain = dir.path().join("plain.json");
        wallet.set_node_access(NodeAccess::default());
        WalletFile::create(&plain, &wallet).unwrap();
        let text = fs::read_to_string(&plain).unwrap();
        assert!(
            !text.contains("node_ca_cert") && !text.contains("node_auth_file"),
            "{text}"
        );
    }

    #[test]
    fn oversized_files_are_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.json");
        let file = fs::File::create(&path).unwrap();
        file.set_len(ENCRYPTED_WALLET_FILE_BYTES_MAX + 1).unwrap();
        let error = WalletFile::load(&path).unwrap_err();
        assert!(
            matches!(&error, FileError::Invalid { reason, .. } if reason.contains("more than")),
            "{error:?}"
        );
        // A file in clear may not be as large as an encrypted one.
        file.set_len(WALLET_FILE_BYTES_MAX + 1).unwrap();
        let error = WalletFile::load(&path).unwrap_err();
        assert!(matches!(&error, FileError::Invalid { .. }), "{error:?}");
    }
}
