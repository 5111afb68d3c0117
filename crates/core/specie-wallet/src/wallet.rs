//! The wallet's bookkeeping: keys, coins, pending transactions. No I/O happens here; the CLI
//! reads and writes the file ([`crate::WalletFile`]) and talks to the node ([`crate::NodeClient`]).
//!
//! Coin life cycle (Hamilton §3.5: a transfer either happens completely or not at all):
//!
//! ```text
//!   build_* ──▶ inputs: Spendable → PendingSpend{txid}    outputs we own: new PendingReceive{txid}
//!   on_confirmed(txid) ──▶ PendingSpend coins removed       PendingReceive → Spendable
//!   on_rejected(txid)  ──▶ PendingSpend → Spendable         PendingReceive coins removed
//! ```
//!
//! A coin in `PendingSpend` is never selected again, so the wallet cannot double-spend itself;
//! a coin in `PendingReceive` is not spendable yet because the node may still refuse the
//! transaction that creates it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::{CryptoRng, Rng, RngCore};
use secp256k1::{Keypair, XOnlyPublicKey};
use specie_transaction::signing::keypair_from_secret;
use specie_transaction::{
    Address, CreatedOutput, DecodeLimits, Hash32, Input, MintTransaction, NonceMode, OutPoint, Output,
    RedeemTransaction, SpecieTransaction, Transaction, Txid, UhsId,
};

use crate::error::WalletError;
use crate::payment::{PaidOutput, PaymentString};
use crate::select::select_coins;

/// Where `specie node` listens unless told otherwise.
pub const DEFAULT_NODE_URL: &str = "http://127.0.0.1:8470";
/// Transactions that may wait for the node at once. Each pins its inputs; past this many the
/// wallet asks for a `sync` rather than pin ever more coins behind unanswered transactions.
pub const PENDING_TRANSACTIONS_MAX: usize = 1000;
/// Inputs one payment or redeem may spend: the sentinel's decoding limit.
pub const INPUTS_MAX: usize = DecodeLimits::INPUTS_MAX_DEFAULT as usize;
/// Outputs one mint may create: the sentinel's decoding limit.
pub const OUTPUTS_MAX: usize = DecodeLimits::OUTPUTS_MAX_DEFAULT as usize;
/// Attempts at drawing a valid secret key. A random 32-byte string is invalid with probability
/// about 2^-128, so needing more than a few means the RNG is broken (e.g. returns zeros).
const KEY_DRAW_ATTEMPTS: usize = 8;

/// One signing key and the address it receives at. A capability's driver draws one
/// ([`WalletKey::random`]) for an output of its own and keeps it ([`Wallet::add_key`]) once the
/// transaction paying it is built; its secret never leaves the wallet.
#[derive(Clone)]
pub struct WalletKey {
    pub(crate) secret: [u8; 32],
    pub(crate) keypair: Keypair,
    pub(crate) pubkey: XOnlyPublicKey,
    pub(crate) commitment: Hash32,
}

impl WalletKey {
    pub(crate) fn from_secret(secret: [u8; 32]) -> Option<Self> {
        let keypair = keypair_from_secret(&secret)?;
        let pubkey = keypair.x_only_public_key().0;
        Some(WalletKey {
            secret,
            keypair,
            pubkey,
            commitment: Address::from_pubkey(pubkey).witness_program_commitment(),
        })
    }

    /// A fresh key from `rng`.
    pub fn random(rng: &mut (impl RngCore + CryptoRng)) -> Result<Self, WalletError> {
        for _ in 0..KEY_DRAW_ATTEMPTS {
            let mut secret = [0u8; 32];
            rng.fill_bytes(&mut secret);
            if let Some(key) = WalletKey::from_secret(secret) {
                return Ok(key);
            }
        }
        Err(WalletError::BrokenRng {
            attempts: KEY_DRAW_ATTEMPTS,
        })
    }
}

impl WalletKey {
    /// The witness program commitment that outputs to this key carry.
    pub fn commitment(&self) -> Hash32 {
        self.commitment
    }
}

impl fmt::Debug for WalletKey {
    /// Never prints the secret: wallets end up in logs and bug reports.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WalletKey")
            .field("pubkey", &hex::encode(self.pubkey.serialize()))
            .finish_non_exhaustive()
    }
}

/// Where a coin is in its life cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CoinState {
    /// In the UHS as far as this wallet knows; may be selected for a payment.
    Spendable,
    /// An input of pending transaction `txid`; not selectable until that is resolved.
    PendingSpend { txid: Txid },
    /// Created by transaction `txid`, which the node has not confirmed yet.
    PendingReceive { txid: Txid },
    /// The node did not hold it at the last `sync` (spent from another copy of this wallet, or
    /// the wrong node asked): kept with its preimage but never selected, until a `sync` finds it
    /// at the node again (spendable once more) or the user drops it (`forget-missing`).
    Missing,
}

/// An output this wallet can spend (or will, once confirmed): its full preimage and its owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coin {
    pub outpoint: OutPoint,
    pub output: Output,
    /// The x-only key whose commitment the output carries.
    pub owner: XOnlyPublicKey,
    pub state: CoinState,
}

impl Coin {
    pub fn uhs_id(&self) -> UhsId {
        self.to_input().uhs_id()
    }

    pub fn to_input(&self) -> Input {
        Input {
            prevout: self.outpoint,
            data: self.output,
        }
    }

    pub fn value(&self) -> u64 {
        self.output.value
    }
}

/// What a pending transaction was for, for reports and `list-coins`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingKind {
    Payment {
        to: Address,
        amount: u64,
    },
    Mint {
        total: u64,
    },
    Redeem {
        amount: u64,
    },
    /// Coins moved into a Byzantine-mode account (`specie-fastpay-wallet`).
    FastpayFunding {
        amount: u64,
    },
    /// A certified transfer of a Byzantine-mode account back to this wallet's core address.
    FastpayRedeem {
        amount: u64,
    },
    /// Coins moved to a bridge: into offline cash or to the exchange (`crate::offline`).
    BridgeFunding {
        amount: u64,
    },
    /// Coins turned into a confidential note of this wallet (`specie-privacy-wallet`).
    Shield {
        amount: u64,
    },
    /// Notes paid confidentially to `to`.
    ConfidentialPayment {
        to: Address,
        amount: u64,
    },
    /// Notes turned back into a transparent coin.
    Unshield {
        amount: u64,
    },
    /// Coins turned into an anonymous note of this wallet (`specie-privacy-wallet`).
    Anonymise {
        amount: u64,
    },
    /// Anonymous notes paid to enrolment id `to`.
    AnonymousPayment {
        to: u64,
        amount: u64,
    },
    /// Anonymous notes turned back into a transparent coin of this wallet.
    LeaveAnonymous {
        amount: u64,
    },
    /// Coins turned into an unlinkable token of this wallet (`specie-privacy-wallet`).
    EnterUnlinkable {
        amount: u64,
    },
    /// Unlinkable tokens paid to enrolment id `to`.
    UnlinkablePayment {
        to: u64,
        amount: u64,
    },
    /// Unlinkable tokens turned back into a transparent coin of this wallet.
    LeaveUnlinkable {
        amount: u64,
    },
}

/// A transaction this wallet built and has not seen resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingTx {
    pub txid: Txid,
    /// Kept whole so that `sync` can resubmit exactly the same bytes (same txid, so the node
    /// applies it at most once).
    pub tx: SpecieTransaction,
    /// Seconds since the Unix epoch when the wallet built it; informational only.
    pub created_at_unix_s: u64,
    pub kind: PendingKind,
    /// The user abandoned it (`specie wallet abandon`): a payment of its coins back to this
    /// wallet is pending beside it, and `sync` never sends it again; whichever the node applies
    /// decides, and the other is resolved as never applied.
    pub abandoned: bool,
}

impl PendingTx {
    /// The inputs it spends (all of them this wallet's coins).
    pub fn spends(&self) -> &[Input] {
        self.tx.inputs()
    }

    /// The outputs it creates, with UHS ids.
    pub fn creates(&self) -> Vec<CreatedOutput> {
        self.tx.created_outputs()
    }

    /// UHS ids whose presence proves the transaction was applied: its outputs, and its kind's
    /// marker if it has one (a mint's, a funding's, a FastPay redeem's), which stays even after
    /// every output has been spent (and is a funding's only proof when it has no change).
    pub fn proof_ids(&self) -> Vec<UhsId> {
        // The compact form lists the outputs, then the marker; for a confidential transaction
        // also its confidential outputs, which may be all it creates.
        self.tx.compact().created
    }
}

/// Sums over the coins by state, in the currency's smallest unit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Balance {
    /// Coins that can pay right now.
    pub spendable: u64,
    /// Coins waiting for the node to confirm the transaction creating them (incoming payments,
    /// change, minted money).
    pub pending_in: u64,
    /// Coins locked as inputs of transactions waiting for the node.
    pub pending_out: u64,
    /// Coins the node did not hold at the last `sync` ([`CoinState::Missing`]): not spendable.
    pub missing: u64,
}

/// A payment built by [`Wallet::build_payment`], ready to submit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Payment {
    pub txid: Txid,
    pub to: Address,
    pub amount: u64,
    /// Value returned to a fresh address of this wallet; 0 when the coins matched exactly.
    pub change: u64,
    pub inputs: usize,
    /// What the recipient needs (Hamilton §3.7); hand it over once the payment is confirmed.
    pub payment_string: PaymentString,
}

/// A mint built by [`Wallet::build_mint`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Minted {
    pub txid: Txid,
    pub total: u64,
    /// Value minted to this wallet's own addresses.
    pub to_self: u64,
    /// The outputs paid to other wallets, if any; they need this to find their money.
    pub payment_string: Option<PaymentString>,
}

/// A redeem built by [`Wallet::build_redeem`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redeemed {
    pub txid: Txid,
    pub amount: u64,
    pub change: u64,
    pub inputs: usize,
}

/// What resolving one pending transaction did to the wallet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settled {
    /// Value of this wallet's coins that left (confirmed) or were found gone.
    pub spent: u64,
    /// Value of this wallet's coins that became spendable.
    pub received: u64,
    /// Value of this wallet's coins released back to spendable (rejected).
    pub released: u64,
    /// Value of expected coins dropped because their transaction will not happen.
    pub dropped: u64,
}

/// What [`Wallet::import_payment`] added.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Imported {
    /// Value added as spendable (the caller confirmed the outputs exist).
    pub spendable: u64,
    /// Value added as pending until a `sync` sees the outputs.
    pub pending: u64,
    /// Outputs this wallet already had.
    pub already_known: usize,
    /// Outputs in the payment string that pay other wallets.
    pub not_ours: usize,
}

/// What a transaction taking an amount out of the wallet's coins spends ([`Wallet::spend`]).
pub struct Spending {
    /// The coins chosen, as inputs.
    pub inputs: Vec<Input>,
    /// Their owners' keypairs: `owners[i]` signs input `i`.
    pub owners: Vec<Keypair>,
    /// The excess over the amount, returned to this wallet.
    pub change: u64,
    /// No output, or the change's.
    pub change_output: Vec<Output>,
    /// The change output's key: keep it ([`Wallet::add_key`]) once the transaction is built.
    pub change_key: Option<WalletKey>,
}

/// An in-memory wallet. See the module docs for the coin life cycle.
#[derive(Clone, Debug)]
pub struct Wallet {
    pub(crate) hrp: String,
    pub(crate) node_url: String,
    /// How to reach `node_url`: a private CA, an `Authorization` header file.
    pub(crate) node_access: crate::NodeAccess,
    pub(crate) keys: Vec<WalletKey>,
    pub(crate) key_by_commitment: HashMap<Hash32, usize>,
    /// An issuer wallet's signing as the issuer: its key, or an external signer.
    pub(crate) issuer: Option<crate::signer::IssuerSigner>,
    pub(crate) coins: BTreeMap<OutPoint, Coin>,
    pub(crate) pending: BTreeMap<Txid, PendingTx>,
    /// The network this wallet's money is on (`network_id` of `/v1/info`), once it holds any.
    pub(crate) network_id: Option<String>,
    /// The network of the node this command talked to, not yet remembered (the wallet held
    /// nothing): remembered when the wallet is saved holding something.
    pub(crate) network_seen: Option<String>,
    /// The user vouched for this command's node (`sync --accept-node`); not saved.
    pub(crate) node_accepted: bool,
    /// The capabilities' parts of the wallet, by name (`crate::part`).
    pub(crate) parts: BTreeMap<&'static str, Box<dyn crate::part::WalletPart>>,
    /// Top-level fields of the wallet file that no installed part owns: written back unchanged.
    pub(crate) unread: Unread,
    /// An offline-cash device kept in this wallet: its canonical encoding, which the offline
    /// crates read and write (docs/offline-format.md); the wallet only keeps it.
    pub(crate) offline_device: Option<Vec<u8>>,
    /// The trader's exchange account, once it has one.
    pub(crate) exchange: Option<crate::exchange::ExchangeAccount>,
    /// The payee's strings of confirmed payments, newest last, at most [`SENT_KEPT_MAX`]: the
    /// payee cannot receive without one, so a string the terminal lost (a closed pipe, a closed
    /// window) can be shown again (`specie wallet sent`).
    pub(crate) sent: std::collections::VecDeque<SentPayment>,
}

/// A wallet file's fields that no installed part owns, carried unread. Its `Debug` names the
/// fields only: they may hold a capability's secrets (a seed, an opening).
#[derive(Clone, Default)]
pub(crate) struct Unread(pub(crate) serde_json::Map<String, serde_json::Value>);

impl fmt::Debug for Unread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

/// How many confirmed payments' strings a wallet keeps (the oldest go first): enough for any
/// payee to have received long before, small enough to keep the file well under its size limit.
pub const SENT_KEPT_MAX: usize = 10_000;

/// A confirmed payment's string for its payee (`specie-pay1…`, `specie-cpay1…` or `specie-apay1…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentPayment {
    pub txid: Txid,
    pub confirmed_at_unix_s: u64,
    pub payment_string: String,
}

fn unix_now_s() -> u64 {
    // A clock before 1970 only makes the informational timestamp 0.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

impl Wallet {
    /// A new wallet for currency `hrp` with one receiving key, and an issuer key if `issuer`.
    pub fn new(hrp: &str, issuer: bool, rng: &mut (impl RngCore + CryptoRng)) -> Result<Self, WalletError> {
        let hrp = hrp.to_ascii_lowercase();
        let mut wallet = Wallet::empty(&hrp)?;
        wallet.new_address(rng)?;
        if issuer {
            wallet.issuer = Some(crate::signer::IssuerSigner::Key(WalletKey::random(rng)?));
        }
        Ok(wallet)
    }

    /// A new issuer wallet whose issuer signatures come from `signer` (`specie wallet create
    /// --issuer-signer`): the issuer key is not in the wallet.
    pub fn with_issuer_signer(
        hrp: &str,
        signer: crate::ExternalSigner,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<Self, WalletError> {
        let mut wallet = Wallet::new(hrp, false, rng)?;
        wallet.issuer = Some(crate::signer::IssuerSigner::External(signer));
        Ok(wallet)
    }

    /// A wallet with no keys, used by the file loader before it adds the stored ones.
    pub(crate) fn empty(hrp: &str) -> Result<Self, WalletError> {
        // Encoding any key checks that the HRP is usable for addresses.
        let probe = Address::from_pubkey(
            WalletKey::from_secret([1; 32])
                .map(|key| key.pubkey)
                .expect("[1; 32] is a valid secret key"),
        );
        probe.encode(hrp).map_err(|source| WalletError::InvalidHrp {
            hrp: hrp.to_owned(),
            source,
        })?;
        Ok(Wallet {
            hrp: hrp.to_owned(),
            node_url: DEFAULT_NODE_URL.to_owned(),
            node_access: crate::NodeAccess::default(),
            keys: Vec::new(),
            key_by_commitment: HashMap::new(),
            issuer: None,
            coins: BTreeMap::new(),
            pending: BTreeMap::new(),
            network_id: None,
            network_seen: None,
            node_accepted: false,
            offline_device: None,
            exchange: None,
            parts: BTreeMap::new(),
            unread: Unread::default(),
            sent: std::collections::VecDeque::new(),
        })
    }

    /// The offline device kept in this wallet, as its encoding, if it has one.
    pub fn offline_device(&self) -> Option<&[u8]> {
        self.offline_device.as_deref()
    }

    /// Keeps `device` (an offline device's encoding) in this wallet, replacing any before it.
    pub fn set_offline_device(&mut self, device: Vec<u8>) {
        self.offline_device = Some(device);
    }

    /// The trader's exchange account kept in this wallet, if any.
    pub fn exchange(&self) -> Option<&crate::exchange::ExchangeAccount> {
        self.exchange.as_ref()
    }

    /// The exchange account, to change (its sequence, deposits and withdrawals under way).
    pub fn exchange_mut(&mut self) -> Option<&mut crate::exchange::ExchangeAccount> {
        self.exchange.as_mut()
    }

    /// Keeps `account` in this wallet, replacing any before it.
    pub fn set_exchange(&mut self, account: crate::exchange::ExchangeAccount) {
        self.exchange = Some(account);
    }

    /// Keeps `key` (drawn with [`WalletKey::random`]): outputs to it are this wallet's.
    pub fn add_key(&mut self, key: WalletKey) {
        self.key_by_commitment.insert(key.commitment, self.keys.len());
        self.keys.push(key);
    }

    /// The currency's human-readable part (`usd`), used in addresses and as the unit in messages.
    pub fn hrp(&self) -> &str {
        &self.hrp
    }

    pub fn node_url(&self) -> &str {
        &self.node_url
    }

    pub fn set_node_url(&mut self, url: &str) {
        url.clone_into(&mut self.node_url);
    }

    /// How to reach the wallet's own node (`node_url`): kept in the file beside it.
    pub fn node_access(&self) -> &crate::NodeAccess {
        &self.node_access
    }

    pub fn set_node_access(&mut self, access: crate::NodeAccess) {
        self.node_access = access;
    }

    pub fn is_issuer(&self) -> bool {
        self.issuer.is_some()
    }

    /// The issuer's x-only public key: what `specie node --issuer` must be given.
    pub fn issuer_pubkey(&self) -> Option<XOnlyPublicKey> {
        self.issuer.as_ref().map(|signer| signer.pubkey())
    }

    /// Every address of this wallet, oldest first.
    pub fn addresses(&self) -> Vec<Address> {
        self.keys.iter().map(|key| Address::from_pubkey(key.pubkey)).collect()
    }

    /// The most recently created address (the one `create` printed, until `address` is run).
    pub fn latest_address(&self) -> Option<Address> {
        self.keys.last().map(|key| Address::from_pubkey(key.pubkey))
    }

    /// Generates a key and returns its address. Each address is used for one payment ideally,
    /// so that payments to this wallet cannot be linked by their commitment.
    pub fn new_address(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<Address, WalletError> {
        let key = WalletKey::random(rng)?;
        let address = Address::from_pubkey(key.pubkey);
        self.add_key(key);
        Ok(address)
    }

    /// `address` as text in this wallet's currency.
    pub fn format_address(&self, address: &Address) -> String {
        // The HRP was checked when the wallet was made, so encoding cannot fail; fall back to
        // the key's hex rather than panic.
        address
            .encode(&self.hrp)
            .unwrap_or_else(|_| hex::encode(address.pubkey().serialize()))
    }

    /// Parses an address of this wallet's currency.
    pub fn parse_address(&self, text: &str) -> Result<Address, WalletError> {
        Address::parse(text.trim(), &self.hrp).map_err(|error| WalletError::BadAddress(text.to_owned(), error))
    }

    /// True if outputs with this commitment belong to this wallet.
    pub fn owns(&self, commitment: &Hash32) -> bool {
        self.key_by_commitment.contains_key(commitment)
    }

    pub fn coins(&self) -> impl Iterator<Item = &Coin> {
        self.coins.values()
    }

    pub fn pending(&self) -> impl Iterator<Item = &PendingTx> {
        self.pending.values()
    }

    pub fn pending_tx(&self, txid: &Txid) -> Option<&PendingTx> {
        self.pending.get(txid)
    }

    pub fn balance(&self) -> Balance {
        let mut balance = Balance::default();
        for coin in self.coins.values() {
            let bucket = match coin.state {
                CoinState::Spendable => &mut balance.spendable,
                CoinState::PendingSpend { .. } => &mut balance.pending_out,
                CoinState::PendingReceive { .. } => &mut balance.pending_in,
                CoinState::Missing => &mut balance.missing,
            };
            // Saturating: an unconfirmed import may claim any value; confirmed coins cannot
            // exceed the money supply, which fits in u64.
            *bucket = bucket.saturating_add(coin.value());
        }
        balance
    }

    fn key_for(&self, owner: &XOnlyPublicKey) -> Option<&WalletKey> {
        let commitment = Address::from_pubkey(*owner).witness_program_commitment();
        self.key_by_commitment.get(&commitment).map(|&index| &self.keys[index])
    }

    /// The keypair of this wallet's key whose outputs carry `commitment`, if it has one: what
    /// signs for an output of a capability's (a note) that this wallet owns.
    pub fn keypair_for_commitment(&self, commitment: &Hash32) -> Option<Keypair> {
        self.key_by_commitment
            .get(commitment)
            .map(|&index| self.keys[index].keypair)
    }

    /// Refuses another transaction while [`PENDING_TRANSACTIONS_MAX`] wait for the node.
    pub fn check_pending_room(&self) -> Result<(), WalletError> {
        if self.pending.len() >= PENDING_TRANSACTIONS_MAX {
            return Err(WalletError::TooManyPending {
                pending: self.pending.len(),
            });
        }
        Ok(())
    }

    /// Picks spendable coins worth at least `amount`, with errors phrased for a person.
    pub(crate) fn select(&self, amount: u64) -> Result<(Vec<Coin>, u64), WalletError> {
        if amount == 0 {
            return Err(WalletError::ZeroAmount);
        }
        let candidates: Vec<Coin> = self
            .coins
            .values()
            .filter(|coin| coin.state == CoinState::Spendable)
            .copied()
            .collect();
        let values: Vec<u64> = candidates.iter().map(Coin::value).collect();
        let unit = self.hrp.clone();
        let selection = select_coins(&values, amount, INPUTS_MAX)
            .map_err(|error| WalletError::from_selection(error, unit, || self.insufficient(amount)))?;
        let chosen = selection.chosen.iter().map(|&index| candidates[index]).collect();
        Ok((chosen, selection.total))
    }

    /// Refuses `amount` if it is more than the coins that can pay right now, before anything is
    /// built or saved for it (a command that would make an account or a key first).
    pub fn ensure_spendable(&self, amount: u64) -> Result<(), WalletError> {
        match amount > self.balance().spendable {
            true => Err(self.insufficient(amount)),
            false => Ok(()),
        }
    }

    fn insufficient(&self, needed: u64) -> WalletError {
        let balance = self.balance();
        WalletError::InsufficientFunds {
            spendable: balance.spendable,
            pending_in: balance.pending_in,
            needed,
            unit: self.hrp.clone(),
        }
    }

    /// What a transaction that takes exactly `amount` out of this wallet's coins spends: coins
    /// covering it, their owners' keys, and any excess as change to a fresh key (add it with
    /// [`Wallet::add_key`] once the transaction is signed). Nothing changes in the wallet;
    /// record the built transaction with [`Wallet::record_pending`].
    pub fn spend(&self, amount: u64, rng: &mut (impl RngCore + CryptoRng)) -> Result<Spending, WalletError> {
        self.check_pending_room()?;
        let (coins, total) = self.select(amount)?;
        let owners = self.keypairs_for(&coins)?;
        let change = total - amount;
        let mut change_output = Vec::new();
        let mut change_key = None;
        if change > 0 {
            let key = WalletKey::random(rng)?;
            change_output.push(Output {
                witness_program_commitment: key.commitment,
                value: change,
            });
            change_key = Some(key);
        }
        Ok(Spending {
            inputs: coins.iter().map(Coin::to_input).collect(),
            owners,
            change,
            change_output,
            change_key,
        })
    }

    pub(crate) fn keypairs_for(&self, coins: &[Coin]) -> Result<Vec<Keypair>, WalletError> {
        coins
            .iter()
            .enumerate()
            .map(|(index, coin)| {
                self.key_for(&coin.owner)
                    .map(|key| key.keypair)
                    .ok_or(WalletError::Sign(specie_transaction::SignError::KeyMismatch { index }))
            })
            .collect()
    }

    /// Replaces pending transaction `tx.txid()` with `tx`: the same transaction with more
    /// witnesses (an active auditor's co-signature), so that a resubmission sends it whole.
    pub fn replace_pending_transaction(&mut self, tx: SpecieTransaction) -> Result<(), WalletError> {
        let txid = tx.txid();
        let pending = self
            .pending
            .get_mut(&txid)
            .ok_or(WalletError::UnknownTransaction(txid))?;
        pending.tx = tx;
        Ok(())
    }

    /// Builds a transaction that takes exactly `amount` out of this wallet's coins, for a kind the
    /// wallet does not know (a capability's funding): `build` gets the inputs chosen, the change
    /// output (none, or one to a fresh key of this wallet) and the inputs' owners' keypairs
    /// (`owners[i]` signs input `i`), and returns the signed transaction. The wallet then keeps
    /// the change key and records the transaction as pending of `kind` (its inputs
    /// `PendingSpend`, its change `PendingReceive`), like its own transfers, and returns it.
    /// Nothing changes if `build` fails.
    pub fn build_spend<T>(
        &mut self,
        amount: u64,
        kind: PendingKind,
        rng: &mut (impl RngCore + CryptoRng),
        build: impl FnOnce(Vec<Input>, Vec<Output>, &[Keypair]) -> Result<T, specie_transaction::SignError>,
    ) -> Result<T, WalletError>
    where
        T: Into<SpecieTransaction> + Clone,
    {
        let Spending {
            inputs,
            owners,
            change_output,
            change_key,
            ..
        } = self.spend(amount, rng)?;
        let built = build(inputs, change_output, &owners).map_err(WalletError::Sign)?;
        if let Some(key) = change_key {
            self.add_key(key);
        }
        self.record(built.clone().into(), kind);
        Ok(built)
    }

    /// Records `tx`, built elsewhere (a capability's redeem paying this wallet), as pending of
    /// `kind`: whatever it spends of this wallet's coins becomes `PendingSpend`, its outputs to
    /// this wallet's keys `PendingReceive`, until [`Wallet::on_confirmed`] or
    /// [`Wallet::on_rejected`]. Refused when the wallet already waits for
    /// [`PENDING_TRANSACTIONS_MAX`] transactions.
    pub fn record_pending(&mut self, tx: SpecieTransaction, kind: PendingKind) -> Result<Txid, WalletError> {
        self.check_pending_room()?;
        Ok(self.record(tx, kind))
    }

    /// Records a built transaction: its inputs become `PendingSpend`, its outputs that pay this
    /// wallet become `PendingReceive`, and it joins the pending list.
    pub(crate) fn record(&mut self, tx: SpecieTransaction, kind: PendingKind) -> Txid {
        let txid = tx.txid();
        for input in tx.inputs() {
            if let Some(coin) = self.coins.get_mut(&input.prevout) {
                debug_assert_eq!(coin.state, CoinState::Spendable, "only spendable coins are selected");
                coin.state = CoinState::PendingSpend { txid };
            }
        }
        for created in tx.created_outputs() {
            if let Some(&key_index) = self.key_by_commitment.get(&created.output.witness_program_commitment) {
                self.coins.insert(
                    created.outpoint,
                    Coin {
                        outpoint: created.outpoint,
                        output: created.output,
                        owner: self.keys[key_index].pubkey,
                        state: CoinState::PendingReceive { txid },
                    },
                );
            }
        }
        self.pending.insert(
            txid,
            PendingTx {
                txid,
                tx,
                created_at_unix_s: unix_now_s(),
                kind,
                abandoned: false,
            },
        );
        txid
    }

    /// Builds and signs a transfer of `amount` to `to`, choosing the fewest coins and sending
    /// any excess to a fresh address of this wallet. The inputs become `PendingSpend` and the
    /// change `PendingReceive` until [`Wallet::on_confirmed`] or [`Wallet::on_rejected`].
    ///
    /// `rng` draws the change key and the position of the change output (so an observer of the
    /// transaction cannot tell payment from change by position).
    pub fn build_payment(
        &mut self,
        to: &Address,
        amount: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Payment), WalletError> {
        self.check_pending_room()?;
        let (coins, total) = self.select(amount)?;
        let change = total - amount;
        let keypairs = self.keypairs_for(&coins)?;
        let payee = Output {
            witness_program_commitment: to.witness_program_commitment(),
            value: amount,
        };
        let mut outputs = vec![payee];
        let mut change_key = None;
        if change > 0 {
            let key = WalletKey::random(rng)?;
            outputs.push(Output {
                witness_program_commitment: key.commitment,
                value: change,
            });
            if rng.gen_bool(0.5) {
                outputs.swap(0, 1);
            }
            change_key = Some(key);
        }
        let payee_index = if outputs[0] == payee { 0 } else { 1 };
        let mut tx = Transaction {
            inputs: coins.iter().map(Coin::to_input).collect(),
            outputs,
            witnesses: Vec::new(),
        };
        tx.sign(&keypairs, NonceMode::Randomized)?;
        // Conservation of value protects money: checked in release builds too.
        assert_eq!(
            tx.input_value_total(),
            tx.output_value_total(),
            "a payment must spend exactly what it creates"
        );
        if let Some(key) = change_key {
            self.add_key(key);
        }
        let inputs = tx.inputs.len();
        let tx = SpecieTransaction::Transfer(tx);
        let txid = self.record(tx.clone(), PendingKind::Payment { to: *to, amount });
        let payment_string = PaymentString::new(
            txid,
            vec![PaidOutput {
                index: payee_index,
                output: payee,
            }],
        );
        Ok((
            tx,
            Payment {
                txid,
                to: *to,
                amount,
                change,
                inputs,
                payment_string,
            },
        ))
    }

    /// Builds a payment of pending payment `txid`'s coins back to a fresh address of this
    /// wallet, so that `txid` can never be applied once this one is (`specie wallet abandon`):
    /// both spend the same coins, and the node applies at most one. `txid` stays pending, marked
    /// abandoned, until the node shows which of the two it applied. Returns the new transaction
    /// and its txid.
    pub fn build_abandon(
        &mut self,
        txid: &Txid,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Txid), WalletError> {
        let refuse = |reason: &str| WalletError::CannotAbandon {
            txid: *txid,
            reason: reason.to_owned(),
        };
        let pending = self.pending.get(txid).ok_or(WalletError::UnknownTransaction(*txid))?;
        if pending.abandoned {
            return Err(refuse("it is abandoned already; `specie wallet sync` resolves it"));
        }
        if !matches!(pending.kind, PendingKind::Payment { .. }) {
            return Err(refuse(
                "only a payment can be abandoned; `specie wallet sync` resolves the others",
            ));
        }
        self.check_pending_room()?;
        let coins: Vec<Coin> = (pending.spends().iter())
            .map(|input| {
                (self.coins.get(&input.prevout).copied())
                    .filter(|coin| coin.state == CoinState::PendingSpend { txid: *txid })
            })
            .collect::<Option<_>>()
            .ok_or_else(|| refuse("its coins are not this wallet's pending coins"))?;
        let total = (coins.iter())
            .try_fold(0u64, |total, coin| total.checked_add(coin.value()))
            .ok_or(WalletError::AmountsOverflow)?;
        let keypairs = self.keypairs_for(&coins)?;
        let key = WalletKey::random(rng)?;
        let mut tx = Transaction {
            inputs: coins.iter().map(Coin::to_input).collect(),
            outputs: vec![Output {
                witness_program_commitment: key.commitment,
                value: total,
            }],
            witnesses: Vec::new(),
        };
        tx.sign(&keypairs, NonceMode::Randomized)?;
        assert_eq!(
            tx.input_value_total(),
            tx.output_value_total(),
            "an abandon spends exactly what it creates"
        );
        let to = Address::from_pubkey(key.pubkey);
        self.add_key(key);
        for coin in &coins {
            self.coins.get_mut(&coin.outpoint).expect("checked above").state = CoinState::Spendable;
        }
        let tx = SpecieTransaction::Transfer(tx);
        let replacement = self.record(tx.clone(), PendingKind::Payment { to, amount: total });
        self.pending.get_mut(txid).expect("checked above").abandoned = true;
        Ok((tx, replacement))
    }

    /// Builds and signs a mint (issuer wallets only): new money for each `(address, amount)`,
    /// with a random 32-byte nonce so that the txid, and so every output's serial number, is
    /// unique (Hamilton §3.4). Outputs to this wallet become `PendingReceive` coins.
    pub fn build_mint(
        &mut self,
        outputs: &[(Address, u64)],
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Minted), WalletError> {
        let issuer = self.issuer.as_ref().ok_or(WalletError::NotIssuer)?;
        self.check_pending_room()?;
        if outputs.is_empty() {
            return Err(WalletError::NoOutputs);
        }
        if outputs.len() > OUTPUTS_MAX {
            return Err(WalletError::TooManyOutputs {
                outputs: outputs.len(),
                outputs_max: OUTPUTS_MAX,
            });
        }
        if outputs.iter().any(|(_, amount)| *amount == 0) {
            return Err(WalletError::ZeroAmount);
        }
        let total = outputs
            .iter()
            .try_fold(0u64, |total, (_, amount)| total.checked_add(*amount))
            .ok_or(WalletError::AmountsOverflow)?;
        let outputs: Vec<Output> = outputs
            .iter()
            .map(|(address, value)| Output {
                witness_program_commitment: address.witness_program_commitment(),
                value: *value,
            })
            .collect();
        let mut nonce = [0u8; 32];
        rng.fill_bytes(&mut nonce);
        let mut mint = MintTransaction {
            nonce,
            outputs,
            issuer_pubkey: issuer.pubkey().serialize(),
            issuer_signature: [0; 64],
        };
        mint.issuer_signature = issuer.sign(&mint.txid().0)?;
        let tx = SpecieTransaction::Mint(mint);
        let txid = self.record(tx.clone(), PendingKind::Mint { total });
        let mut to_self = 0u64;
        let mut others = Vec::new();
        for created in tx.created_outputs() {
            if self.owns(&created.output.witness_program_commitment) {
                to_self += created.output.value;
            } else {
                others.push(PaidOutput {
                    index: created.outpoint.index,
                    output: created.output,
                });
            }
        }
        let payment_string = (!others.is_empty()).then(|| PaymentString::new(txid, others));
        Ok((
            tx,
            Minted {
                txid,
                total,
                to_self,
                payment_string,
            },
        ))
    }

    /// Builds a redeem (issuer wallets only): `amount` of this wallet's own coins leaves
    /// circulation, any excess returns as change to a fresh address. Signed by each input's
    /// owner key and by the issuer key.
    pub fn build_redeem(
        &mut self,
        amount: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<(SpecieTransaction, Redeemed), WalletError> {
        let issuer = self.issuer.clone().ok_or(WalletError::NotIssuer)?;
        let Spending {
            inputs,
            owners,
            change,
            change_output,
            change_key,
        } = self.spend(amount, rng)?;
        let mut redeem = RedeemTransaction {
            amount,
            inputs,
            outputs: change_output,
            witnesses: vec![],
            issuer_pubkey: issuer.pubkey().serialize(),
            issuer_signature: [0; 64],
        };
        let txid = redeem.txid();
        redeem.witnesses =
            specie_transaction::signing::sign_inputs(&redeem.inputs, &txid.0, &owners, NonceMode::Randomized)?;
        redeem.issuer_signature = issuer.sign(&txid.0)?;
        assert_eq!(
            redeem
                .inputs
                .iter()
                .map(|input| u128::from(input.data.value))
                .sum::<u128>(),
            u128::from(amount)
                + redeem
                    .outputs
                    .iter()
                    .map(|output| u128::from(output.value))
                    .sum::<u128>(),
            "a redeem must spend exactly its amount plus its change"
        );
        if let Some(key) = change_key {
            self.add_key(key);
        }
        let input_count = redeem.inputs.len();
        let tx = SpecieTransaction::Redeem(redeem);
        let txid = self.record(tx.clone(), PendingKind::Redeem { amount });
        Ok((
            tx,
            Redeemed {
                txid,
                amount,
                change,
                inputs: input_count,
            },
        ))
    }

    /// The node applied `txid`: its inputs are gone for good and its outputs exist.
    pub fn on_confirmed(&mut self, txid: &Txid) -> Result<Settled, WalletError> {
        let mut strings = vec![self.payment_string_for(txid).map(|payment| payment.encode())];
        strings.extend(self.parts.values().map(|part| part.payment_string_for(txid)));
        let pending = self
            .pending
            .remove(txid)
            .ok_or(WalletError::UnknownTransaction(*txid))?;
        for payment_string in strings.into_iter().flatten() {
            self.keep_sent(SentPayment {
                txid: *txid,
                confirmed_at_unix_s: unix_now_s(),
                payment_string,
            });
        }
        // Its inputs are spent for good, whatever another pending transaction (an abandon's
        // replacement that lost the race) or a missing mark says of them.
        let spent: std::collections::BTreeSet<OutPoint> = pending.spends().iter().map(|input| input.prevout).collect();
        let mut settled = Settled::default();
        self.coins.retain(|outpoint, coin| match coin.state {
            CoinState::PendingSpend { txid: spender } if spender == *txid => {
                settled.spent += coin.value();
                false
            }
            _ if spent.contains(outpoint) => {
                settled.spent += coin.value();
                false
            }
            CoinState::PendingReceive { txid: creator } if creator == *txid => {
                coin.state = CoinState::Spendable;
                settled.received += coin.value();
                true
            }
            _ => true,
        });
        for part in self.parts.values_mut() {
            part.settle(txid, true, &mut settled);
        }
        Ok(settled)
    }

    /// The node refused `txid` and never will apply it: its inputs are spendable again and the
    /// outputs it would have created are forgotten.
    pub fn on_rejected(&mut self, txid: &Txid) -> Result<Settled, WalletError> {
        self.pending
            .remove(txid)
            .ok_or(WalletError::UnknownTransaction(*txid))?;
        let mut settled = Settled::default();
        self.coins.retain(|_, coin| match coin.state {
            CoinState::PendingSpend { txid: spender } if spender == *txid => {
                coin.state = CoinState::Spendable;
                settled.released += coin.value();
                true
            }
            CoinState::PendingReceive { txid: creator } if creator == *txid => {
                settled.dropped += coin.value();
                false
            }
            _ => true,
        });
        for part in self.parts.values_mut() {
            part.settle(txid, false, &mut settled);
        }
        Ok(settled)
    }

    /// `txid` can never be applied because some of its inputs were spent by another
    /// transaction (for instance from a copy of this wallet): those inputs are marked missing
    /// (kept, never selected, see [`CoinState::Missing`]), the others are spendable again, and
    /// its outputs are forgotten.
    pub fn on_conflicted(&mut self, txid: &Txid, spent_elsewhere: &[OutPoint]) -> Result<Settled, WalletError> {
        let mut settled = self.on_rejected(txid)?;
        let gone = self.mark_missing_coins(spent_elsewhere);
        settled.released -= gone;
        settled.spent += gone;
        Ok(settled)
    }

    /// Marks missing the spendable coins that the node no longer holds (spent by another copy of
    /// this wallet, or the node is not the one the wallet thinks): they keep their preimages, so
    /// a later `sync` can restore them. Returns the value marked.
    pub fn mark_missing_coins(&mut self, outpoints: &[OutPoint]) -> u64 {
        let mut marked = 0u64;
        for outpoint in outpoints {
            if let Some(coin) = (self.coins.get_mut(outpoint)).filter(|coin| coin.state == CoinState::Spendable) {
                coin.state = CoinState::Missing;
                marked = marked.saturating_add(coin.value());
            }
        }
        marked
    }

    /// Marks missing the spendable outputs of the wallet's parts at `outpoints` (the node no
    /// longer holds them). Returns the value marked.
    pub fn mark_missing_in_parts(&mut self, outpoints: &[OutPoint]) -> u64 {
        (self.parts.values_mut()).fold(0u64, |marked, part| marked.saturating_add(part.mark_missing(outpoints)))
    }

    /// The spendable outputs of the wallet's parts (outpoint, UHS id, value), for `sync` to ask
    /// the node about.
    pub fn spendable_in_parts(&self) -> Vec<(OutPoint, UhsId, u64)> {
        self.parts.values().flat_map(|part| part.spendable()).collect()
    }

    /// The parts' spendable outputs spent by a marker instead of their id, each with its marker
    /// ([`WalletPart::spent_markers`]).
    pub fn spent_markers_in_parts(&self) -> Vec<(OutPoint, UhsId, u64)> {
        self.parts.values().flat_map(|part| part.spent_markers()).collect()
    }

    /// Every missing coin and note (of any level): outpoint, UHS id and value, for `sync` to ask
    /// the node about.
    pub fn missing(&self) -> Vec<(OutPoint, UhsId, u64)> {
        let coins = (self.coins.values())
            .filter(|coin| coin.state == CoinState::Missing)
            .map(|coin| (coin.outpoint, coin.uhs_id(), coin.value()));
        let parts = self.parts.values().flat_map(|part| part.missing());
        coins.chain(parts).collect()
    }

    /// Makes the missing coins and notes at `outpoints` spendable again (the node holds them
    /// after all). Returns the value restored.
    pub fn restore_missing(&mut self, outpoints: &[OutPoint]) -> u64 {
        let mut restored = 0u64;
        for outpoint in outpoints {
            if let Some(coin) = (self.coins.get_mut(outpoint)).filter(|coin| coin.state == CoinState::Missing) {
                coin.state = CoinState::Spendable;
                restored = restored.saturating_add(coin.value());
            }
        }
        for part in self.parts.values_mut() {
            restored = restored.saturating_add(part.restore_missing(outpoints));
        }
        restored
    }

    /// Drops every missing coin and note for good (`specie wallet forget-missing`): the user
    /// says they are spent. Returns how many, and their value.
    pub fn forget_missing(&mut self) -> (usize, u64) {
        let mut forgotten = (0usize, 0u64);
        let mut count = |value: u64| {
            forgotten.0 += 1;
            forgotten.1 = forgotten.1.saturating_add(value);
        };
        self.coins.retain(|_, coin| {
            coin.state != CoinState::Missing || {
                count(coin.value());
                false
            }
        });
        for part in self.parts.values_mut() {
            let (count, value) = part.forget_missing();
            forgotten.0 += count;
            forgotten.1 = forgotten.1.saturating_add(value);
        }
        forgotten
    }

    /// Keeps a confirmed payment's string, dropping the oldest beyond [`SENT_KEPT_MAX`].
    pub(crate) fn keep_sent(&mut self, sent: SentPayment) {
        if self.sent.len() == SENT_KEPT_MAX {
            self.sent.pop_front();
        }
        self.sent.push_back(sent);
    }

    /// The payee's strings of confirmed payments, oldest first.
    pub fn sent(&self) -> impl Iterator<Item = &SentPayment> {
        self.sent.iter()
    }

    /// The network this wallet's money is on, once known (`network_id` at `/v1/info`).
    pub fn network_id(&self) -> Option<&str> {
        self.network_id
            .as_deref()
            .or(self.network_seen.as_deref().filter(|_| self.holds_anything()))
    }

    /// Whether this command may conclude from the node's answers that coins are missing: the
    /// wallet's file records its network (checked against the node), or the user vouched for
    /// the node ([`Wallet::accept_node`]).
    pub(crate) fn node_vouched(&self) -> bool {
        self.network_id.is_some() || self.node_accepted
    }

    /// The user says this command's node is the wallet's own (`sync --accept-node`): for a
    /// wallet from before network ids whose every coin is gone. Its network is remembered.
    pub fn accept_node(&mut self) {
        self.node_accepted = true;
        if self.network_id.is_none() {
            self.network_id = self.network_seen.take();
        }
    }

    /// Whether the wallet holds any coin, note or pending transaction of the core: then the
    /// network it talks to is the one it must keep talking to. A payment imported that no node
    /// has confirmed yet does not count: the node it was imported at may be a mistyped one that
    /// holds none of it, and the wallet must still take it from its own.
    fn holds_anything(&self) -> bool {
        // With no pending transaction of its own, a coin or note waiting is an import.
        let held = |state: &CoinState| !matches!(state, CoinState::PendingReceive { .. });
        !self.pending.is_empty()
            || self.coins.values().any(|coin| held(&coin.state))
            || self.parts.values().any(|part| part.holds_any())
    }

    /// Checks that the node at `url`, which serves currency `hrp` on network `network_id`, is
    /// one this wallet may use, and remembers the network if the wallet knew none. Nothing is
    /// sent to a node of another currency or network, so nothing is ever marked missing or
    /// resolved on its word.
    pub fn check_network(&mut self, url: &str, hrp: &str, network_id: Option<&str>) -> Result<(), WalletError> {
        if !hrp.eq_ignore_ascii_case(&self.hrp) {
            return Err(WalletError::WrongCurrency {
                url: url.to_owned(),
                node_hrp: hrp.to_owned(),
                wallet_hrp: self.hrp.clone(),
            });
        }
        let Some(seen) = network_id else {
            // A cluster file from before network ids: only the currency can be checked.
            return Ok(());
        };
        match self.network_id() {
            Some(ours) if !ours.eq_ignore_ascii_case(seen) => Err(WalletError::WrongNetwork {
                url: url.to_owned(),
                node_network: seen.to_owned(),
                wallet_network: ours.to_owned(),
            }),
            Some(_) => Ok(()),
            None => {
                self.network_seen = Some(seen.to_ascii_lowercase());
                Ok(())
            }
        }
    }

    /// Coins received by import that no pending transaction of this wallet will confirm: their
    /// outpoints and UHS ids, for `sync` to look up.
    pub fn unconfirmed_imports(&self) -> Vec<(OutPoint, UhsId)> {
        self.coins
            .values()
            .filter(|coin| match coin.state {
                CoinState::PendingReceive { txid } => !self.pending.contains_key(&txid),
                _ => false,
            })
            .map(|coin| (coin.outpoint, coin.uhs_id()))
            .collect()
    }

    /// Marks imported coins spendable once the node has shown their UHS ids exist. Coins that
    /// belong to a pending transaction of this wallet are left to [`Wallet::on_confirmed`].
    pub fn confirm_imported(&mut self, outpoints: &[OutPoint]) -> u64 {
        let mut confirmed = 0u64;
        for outpoint in outpoints {
            if let Some(coin) = self.coins.get_mut(outpoint) {
                if let CoinState::PendingReceive { txid } = coin.state {
                    if !self.pending.contains_key(&txid) {
                        coin.state = CoinState::Spendable;
                        confirmed = confirmed.saturating_add(coin.output.value);
                    }
                }
            }
        }
        confirmed
    }

    /// A payment string for the outputs of pending transaction `txid` that pay other wallets
    /// (the payee of a payment, the recipients of a mint); `None` if every output is ours.
    /// Lets the CLI hand the string over once `sync` learns the transaction was confirmed.
    pub fn payment_string_for(&self, txid: &Txid) -> Option<PaymentString> {
        let pending = self.pending.get(txid)?;
        let theirs: Vec<PaidOutput> = pending
            .creates()
            .into_iter()
            .filter(|created| !self.owns(&created.output.witness_program_commitment))
            .map(|created| PaidOutput {
                index: created.outpoint.index,
                output: created.output,
            })
            .collect();
        (!theirs.is_empty()).then(|| PaymentString::new(*txid, theirs))
    }

    /// The outputs of `payment` that pay this wallet; an error if there are none.
    pub fn receivable_outputs(&self, payment: &PaymentString) -> Result<Vec<CreatedOutput>, WalletError> {
        let ours: Vec<CreatedOutput> = payment
            .created_outputs()
            .into_iter()
            .filter(|created| self.owns(&created.output.witness_program_commitment))
            .collect();
        if ours.is_empty() {
            return Err(WalletError::NotAddressedToThisWallet {
                outputs: payment.outputs.len(),
                addresses: self.keys.len(),
            });
        }
        Ok(ours)
    }

    /// Adds the outputs of `payment` that pay this wallet. Those whose UHS id is in
    /// `confirmed` (the caller asked the node) become spendable; the rest wait as
    /// `PendingReceive` until a `sync` sees them. Importing twice changes nothing.
    pub fn import_payment(&mut self, payment: &PaymentString, confirmed: &[UhsId]) -> Result<Imported, WalletError> {
        let ours = self.receivable_outputs(payment)?;
        let confirmed: BTreeSet<UhsId> = confirmed.iter().copied().collect();
        let mut imported = Imported {
            not_ours: payment.outputs.len() - ours.len(),
            ..Imported::default()
        };
        for created in ours {
            if self.coins.contains_key(&created.outpoint) {
                imported.already_known += 1;
                continue;
            }
            let key_index = self.key_by_commitment[&created.output.witness_program_commitment];
            let state = if confirmed.contains(&created.uhs_id) {
                imported.spendable = imported.spendable.saturating_add(created.output.value);
                CoinState::Spendable
            } else {
                imported.pending = imported.pending.saturating_add(created.output.value);
                CoinState::PendingReceive { txid: payment.txid }
            };
            self.coins.insert(
                created.outpoint,
                Coin {
                    outpoint: created.outpoint,
                    output: created.output,
                    owner: self.keys[key_index].pubkey,
                    state,
                },
            );
        }
        Ok(imported)
    }

    /// The secret of the issuer key, for the file.
    pub(crate) fn issuer_secret(&self) -> Option<[u8; 32]> {
        match self.issuer.as_ref()? {
            crate::signer::IssuerSigner::Key(key) => Some(key.secret),
            crate::signer::IssuerSigner::External(_) => None,
        }
    }

    /// The x-only bytes of the issuer key, as the node's `/v1/info` lists issuers.
    pub fn issuer_pubkey_hex(&self) -> Option<String> {
        self.issuer
            .as_ref()
            .map(|signer| hex::encode(signer.pubkey().serialize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{check_valid, funded_wallet, rng};

    /// A capability's spend changes nothing while its transaction fails to build; built, it is
    /// pending like the wallet's own, its change this wallet's. A transaction built elsewhere is
    /// recorded the same way, while there is room.
    #[test]
    fn a_capabilitys_spend_is_recorded_only_once_built() {
        let mut rng = rng(30);
        let mut wallet = funded_wallet(&[70, 50], &mut rng);
        let before = (wallet.balance(), wallet.addresses().len());
        let kind = PendingKind::BridgeFunding { amount: 100 };
        let failed = wallet.build_spend(100, kind, &mut rng, |_, _, _| {
            Err::<SpecieTransaction, _>(specie_transaction::SignError::KeyMismatch { index: 0 })
        });
        assert!(matches!(failed, Err(WalletError::Sign(_))), "{failed:?}");
        assert_eq!((wallet.balance(), wallet.addresses().len()), before);
        assert_eq!(wallet.pending().count(), 0);

        let tx = wallet.build_bridge_funding([5; 32], [6; 32], 100, &mut rng).unwrap();
        assert_eq!(wallet.pending_tx(&tx.txid()).map(|pending| pending.kind), Some(kind));
        assert_eq!(wallet.addresses().len(), before.1 + 1, "the change key is kept");
        assert_eq!((wallet.balance().spendable, wallet.balance().pending_in), (0, 20));

        let mut other = funded_wallet(&[10], &mut rng);
        let txid = other.record_pending(tx.clone(), kind).unwrap();
        assert_eq!(txid, tx.txid());
        assert!(other.pending_tx(&txid).is_some());
    }

    #[test]
    fn exact_payment_has_no_change() {
        let mut rng = rng(1);
        let mut alice = funded_wallet(&[100, 50], &mut rng);
        let bob = Wallet::new("usd", false, &mut rng).unwrap();
        let to = bob.latest_address().unwrap();
        let (tx, payment) = alice.build_payment(&to, 50, &mut rng).unwrap();
        assert_eq!(payment.change, 0);
        assert_eq!(payment.inputs, 1);
        assert_eq!(tx.outputs().len(), 1);
        check_valid(&tx, &[]).unwrap();
        assert_eq!(
            alice.balance(),
            Balance {
                spendable: 100,
                pending_in: 0,
                pending_out: 50,
                missing: 0
            }
        );
    }

    #[test]
    fn payment_with_change_goes_to_a_fresh_address() {
        let mut rng = rng(2);
        let mut alice = funded_wallet(&[100, 50], &mut rng);
        let keys_before = alice.addresses().len();
        let bob = Wallet::new("usd", false, &mut rng).unwrap();
        let (tx, payment) = alice
            .build_payment(&bob.latest_address().unwrap(), 120, &mut rng)
            .unwrap();
        check_valid(&tx, &[]).unwrap();
        assert_eq!(payment.change, 30);
        assert_eq!(payment.inputs, 2);
        assert_eq!(alice.addresses().len(), keys_before + 1, "change uses a new key");
        let change_address = alice.latest_address().unwrap();
        let change_output = tx
            .outputs()
            .iter()
            .find(|output| output.witness_program_commitment == change_address.witness_program_commitment())
            .unwrap();
        assert_eq!(change_output.value, 30);
        assert_eq!(
            alice.balance(),
            Balance {
                spendable: 0,
                pending_in: 30,
                pending_out: 150,
                missing: 0
            }
        );
        // The payment string names the payee's output, not the change.
        assert_eq!(payment.payment_string.outputs.len(), 1);
        assert_eq!(payment.payment_string.outputs[0].output.value, 120);
        assert_eq!(
            alice.payment_string_for(&payment.txid),
            Some(payment.payment_string.clone())
        );
        let settled = alice.on_confirmed(&payment.txid).unwrap();
        assert_eq!((settled.spent, settled.received), (150, 30));
        assert_eq!(alice.balance().spendable, 30);
    }

    #[test]
    fn insufficient_funds_is_a_sentence_and_changes_nothing() {
        let mut rng = rng(3);
        let mut alice = funded_wallet(&[100, 20], &mut rng);
        let to = alice.latest_address().unwrap();
        let error = alice.build_payment(&to, 150, &mut rng).unwrap_err();
        assert_eq!(
            error.to_string(),
            "this wallet holds 120 usd spendable but the payment needs 150 usd"
        );
        assert_eq!(alice.balance().spendable, 120);
        assert!(alice.pending().next().is_none());
        assert!(matches!(
            alice.build_payment(&to, 0, &mut rng),
            Err(WalletError::ZeroAmount)
        ));
    }

    #[test]
    fn many_small_coins_pay_a_large_amount() {
        let mut rng = rng(4);
        let mut alice = funded_wallet(&[1; 300], &mut rng);
        let bob = Wallet::new("usd", false, &mut rng).unwrap();
        let (tx, payment) = alice
            .build_payment(&bob.latest_address().unwrap(), 250, &mut rng)
            .unwrap();
        assert_eq!(payment.inputs, 250);
        assert_eq!(payment.change, 0);
        check_valid(&tx, &[]).unwrap();
    }

    #[test]
    fn pending_coins_are_not_spent_twice() {
        let mut rng = rng(5);
        let mut alice = funded_wallet(&[100], &mut rng);
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        alice.build_payment(&to, 60, &mut rng).unwrap();
        let error = alice.build_payment(&to, 30, &mut rng).unwrap_err();
        // The 40 change is pending: the message points at sync.
        assert!(error.to_string().starts_with("this wallet holds 0 usd spendable"));
        assert!(error.to_string().contains("40 usd more is waiting"));
    }

    #[test]
    fn rejected_payment_rolls_back() {
        let mut rng = rng(6);
        let mut alice = funded_wallet(&[70, 50], &mut rng);
        let before = alice.balance();
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let (_, payment) = alice.build_payment(&to, 100, &mut rng).unwrap();
        let settled = alice.on_rejected(&payment.txid).unwrap();
        assert_eq!((settled.released, settled.dropped), (120, 20));
        assert_eq!(alice.balance(), before);
        assert!(alice.coins().all(|coin| coin.state == CoinState::Spendable));
        assert!(matches!(
            alice.on_rejected(&payment.txid),
            Err(WalletError::UnknownTransaction(_))
        ));
        // The coins can pay again.
        alice.build_payment(&to, 100, &mut rng).unwrap();
    }

    #[test]
    fn conflicted_payment_forgets_the_spent_inputs() {
        let mut rng = rng(7);
        let mut alice = funded_wallet(&[70, 50], &mut rng);
        let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let (tx, payment) = alice.build_payment(&to, 100, &mut rng).unwrap();
        let gone = tx.inputs()[0].prevout;
        let gone_value = tx.inputs()[0].data.value;
        let settled = alice.on_conflicted(&payment.txid, &[gone]).unwrap();
        assert_eq!(settled.spent, gone_value);
        assert_eq!(alice.balance().spendable, 120 - gone_value);
    }

    #[test]
    fn issuer_mint_and_redeem_are_valid() {
        let mut rng = rng(8);
        let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
        let issuer_key = issuer.issuer_pubkey().unwrap().serialize();
        let own = issuer.latest_address().unwrap();
        let bob = Wallet::new("usd", false, &mut rng).unwrap();
        let (mint, minted) = issuer
            .build_mint(&[(own, 500), (bob.latest_address().unwrap(), 70)], &mut rng)
            .unwrap();
        check_valid(&mint, &[issuer_key]).unwrap();
        assert_eq!((minted.total, minted.to_self), (570, 500));
        let payment_string = minted.payment_string.clone().unwrap();
        assert_eq!(payment_string.outputs.len(), 1);
        assert_eq!(payment_string.outputs[0].output.value, 70);
        assert_eq!(issuer.balance().pending_in, 500);
        issuer.on_confirmed(&minted.txid).unwrap();
        assert_eq!(issuer.balance().spendable, 500);

        let (redeem, redeemed) = issuer.build_redeem(120, &mut rng).unwrap();
        check_valid(&redeem, &[issuer_key]).unwrap();
        assert_eq!((redeemed.amount, redeemed.change), (120, 380));
        assert_eq!(
            issuer.balance(),
            Balance {
                spendable: 0,
                pending_in: 380,
                pending_out: 500,
                missing: 0
            }
        );
        issuer.on_confirmed(&redeemed.txid).unwrap();
        assert_eq!(issuer.balance().spendable, 380);
        // Mints get distinct txids even for identical outputs: the nonce.
        let (a, _) = issuer.build_mint(&[(own, 1)], &mut rng).unwrap();
        let (b, _) = issuer.build_mint(&[(own, 1)], &mut rng).unwrap();
        assert_ne!(a.txid(), b.txid());
    }

    #[test]
    fn plain_wallets_cannot_mint_or_redeem() {
        let mut rng = rng(9);
        let mut alice = funded_wallet(&[10], &mut rng);
        let own = alice.latest_address().unwrap();
        assert!(matches!(
            alice.build_mint(&[(own, 5)], &mut rng),
            Err(WalletError::NotIssuer)
        ));
        assert!(matches!(alice.build_redeem(5, &mut rng), Err(WalletError::NotIssuer)));
        let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
        assert!(matches!(issuer.build_mint(&[], &mut rng), Err(WalletError::NoOutputs)));
        assert!(matches!(
            issuer.build_mint(&[(own, u64::MAX), (own, 1)], &mut rng),
            Err(WalletError::AmountsOverflow)
        ));
    }

    #[test]
    fn import_checks_the_recipient() {
        let mut rng = rng(10);
        let mut alice = funded_wallet(&[100], &mut rng);
        let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
        let mut carol = Wallet::new("usd", false, &mut rng).unwrap();
        let (_, payment) = alice
            .build_payment(&bob.latest_address().unwrap(), 40, &mut rng)
            .unwrap();
        let error = carol.import_payment(&payment.payment_string, &[]).unwrap_err();
        assert!(error
            .to_string()
            .starts_with("this payment is not addressed to this wallet"));
        // Unconfirmed first, then confirmed by a later look-up.
        let imported = bob.import_payment(&payment.payment_string, &[]).unwrap();
        assert_eq!((imported.spendable, imported.pending), (0, 40));
        assert_eq!(bob.balance().pending_in, 40);
        let waiting = bob.unconfirmed_imports();
        assert_eq!(waiting.len(), 1);
        assert_eq!(waiting[0].1, payment.payment_string.uhs_ids()[0]);
        assert_eq!(bob.confirm_imported(&[waiting[0].0]), 40);
        assert_eq!(bob.balance().spendable, 40);
        // Importing again is harmless.
        let again = bob
            .import_payment(&payment.payment_string, &payment.payment_string.uhs_ids())
            .unwrap();
        assert_eq!(again.already_known, 1);
        assert_eq!(bob.balance().spendable, 40);
    }

    #[test]
    fn confirmed_import_is_spendable_at_once() {
        let mut rng = rng(11);
        let mut alice = funded_wallet(&[100], &mut rng);
        let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
        let (_, payment) = alice
            .build_payment(&bob.latest_address().unwrap(), 40, &mut rng)
            .unwrap();
        let imported = bob
            .import_payment(&payment.payment_string, &payment.payment_string.uhs_ids())
            .unwrap();
        assert_eq!(imported.spendable, 40);
        let (tx, _) = bob
            .build_payment(&alice.latest_address().unwrap(), 40, &mut rng)
            .unwrap();
        check_valid(&tx, &[]).unwrap();
    }

    #[test]
    fn invalid_hrp_is_refused() {
        let mut rng = rng(12);
        assert!(matches!(
            Wallet::new("", false, &mut rng),
            Err(WalletError::InvalidHrp { .. })
        ));
        let eur = Wallet::new("eur", false, &mut rng).unwrap();
        let usd_address = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
        let text = usd_address.encode("usd").unwrap();
        assert!(eur.parse_address(&text).is_err());
    }

    #[test]
    fn debug_output_hides_secrets() {
        let mut rng = rng(13);
        let wallet = Wallet::new("usd", true, &mut rng).unwrap();
        let secret = hex::encode(wallet.keys[0].secret);
        assert!(!format!("{wallet:?}").contains(&secret));
    }
}
