//! Byzantine-mode (FastPay) accounts in the wallet: the bookkeeping only, no I/O
//! (`docs/byzantine-mode.md`; the driver that talks to the core and the authorities is this
//! crate's root). The book is the wallet's Byzantine-mode part (a `specie_wallet::WalletPart`,
//! the file's `fastpay` section, checked on load by `crate::section`); [`FastpayWallet`] reads
//! and changes it.
//!
//! An account is an Ed25519 key whose public half is its address at every authority. What the
//! wallet must never lose or get wrong:
//!
//! * **The order it signed and has not seen certified** ([`FastpayAccount::pending`]). An owner
//!   who signs a second, different order for the same sequence number can split the committee
//!   (FastPay then needs recovery rounds), so a signed order is saved before it is sent, and
//!   until it is certified every attempt sends *that* order again, never a new one. A wallet
//!   restored from an older copy learns it back from the authorities (FastPay §4.4,
//!   [`FastpayWallet::fastpay_adopt_pending`]).
//! * **Its certificates**: the proof of every payment it made, and for a transfer back to the
//!   core what the core needs to create the output ([`FastpayWallet::build_fastpay_redeem`]).
//! * **Fundings the core confirmed that the authorities have not credited yet**: the core took
//!   the coins; the funding's bytes are what makes the authorities credit the account. A funding
//!   the core refused, or whose marker it did not hold when asked, is *marked* refused, never
//!   dropped on its word ([`FundingRecord::refused`]): the next `fastpay sync` asks again and
//!   announces it if the core holds it after all; only the user drops it
//!   ([`FastpayWallet::fastpay_forget_refused`]), as with the core's missing coins.
//! * **Redeems until the core holds them**: a certified transfer back to the core whose redeem
//!   the core refused (or a node said so) is presented again, the same bytes, until the core
//!   holds the redeem's marker ([`SentTransfer::redeemed`]); the core pays a certificate once.

use rand::{CryptoRng, RngCore};
use specie_fastpay::{
    AccountKey, Certificate, CertificateError, Committee, CommitteeChain, CoreAddress, Recipient, RecordError,
    SignedOrder, SigningKey, TransferOrder, MEMO_BYTES_MAX,
};
use specie_fastpay_primary::{FastpayFunding, FastpayRedeem};
use specie_transaction::{Address, NonceMode, SpecieTransaction, Txid};
use specie_wallet::{PendingKind, Wallet, WalletError};
use thiserror::Error;

/// Byzantine-mode accounts a wallet may hold: each is checked and listed by every command, and a
/// handful is what a person uses.
pub const FASTPAY_ACCOUNTS_MAX: usize = 1000;

/// What goes wrong with Byzantine-mode accounts, said for the person at the terminal.
#[derive(Debug, Error)]
pub enum FastpayError {
    #[error(
        "this wallet has no Byzantine-mode accounts yet; give the cluster file once with \
         `specie wallet fastpay --cluster-file DIR/cluster.toml …` (it names the committee)"
    )]
    NoCommittee,
    #[error(
        "the cluster file's committee (epoch {found_epoch}, id {found}) is not the one this wallet's accounts \
         belong to (epoch {epoch}, id {expected}); a certificate of one committee means nothing to another"
    )]
    CommitteeMismatch {
        epoch: u64,
        expected: String,
        found_epoch: u64,
        found: String,
    },
    #[error(
        "account {0} is not one of this wallet's Byzantine-mode accounts (`specie wallet fastpay accounts` lists them)"
    )]
    UnknownAccount(String),
    #[error("this wallet holds {FASTPAY_ACCOUNTS_MAX} Byzantine-mode accounts, the most it may")]
    TooManyAccounts,
    #[error(
        "account {account} has an order for sequence number {sequence} that is not certified yet; it is \
         finished first (`specie wallet fastpay sync`), never replaced: a second order for the same \
         number would make this wallet equivocate"
    )]
    OrderPending { account: String, sequence: u64 },
    #[error("the memo is {bytes} bytes; an order carries at most {MEMO_BYTES_MAX}")]
    MemoTooLong { bytes: usize },
    #[error("the certificate is not valid for this wallet's committee: {0}")]
    Certificate(#[from] CertificateError),
    #[error(
        "a record of the committee's epochs does not follow the epochs this wallet knows: {0} (the cluster file \
         or an authority gave a record no quorum of the committee signed; nothing was changed)"
    )]
    Epochs(#[from] RecordError),
    #[error("the certificate is for account {sender}'s transfer {sequence}, which this wallet {why}")]
    NotOurs {
        sender: String,
        sequence: u64,
        why: &'static str,
    },
    #[error("account {account} has no certified transfer {sequence} back to the core to redeem")]
    NoRedeem { account: String, sequence: u64 },
    #[error(transparent)]
    Wallet(#[from] WalletError),
    /// The wallet file's Byzantine-mode section (`fastpay`) does not decode or add up: the file
    /// is refused when it loads, changing nothing (the file's error says what to do).
    #[error("fastpay: {what}: {problem}")]
    Section { what: String, problem: String },
}

/// A certified transfer this wallet made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SentTransfer {
    pub certificate: Certificate,
    /// For a transfer to the core: the FastPay redeem transaction built from it, once built (its
    /// fate is then the core's pending machinery's, like any transaction of this wallet).
    pub redeem_txid: Option<Txid>,
    /// The core holds the redeem's marker: the value is back in the core, nothing is left to do.
    /// Until then a redeem the core's pending machinery dropped (refused, or a node's word) is
    /// built and presented again (the same bytes; the core pays a certificate once).
    pub redeemed: bool,
}

impl SentTransfer {
    /// The core address of a transfer back to the core whose redeem has not been built yet.
    pub fn redeem_due(&self) -> Option<CoreAddress> {
        match self.certificate.order.order.recipient {
            Recipient::Core(address) if self.redeem_txid.is_none() => Some(address),
            _ => None,
        }
    }
}

/// A funding this wallet built: the core's transaction and whether a quorum credited it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FundingRecord {
    pub funding: FastpayFunding,
    /// A quorum of authorities answered `funded`: the account can pay from it.
    pub credited: bool,
    /// The core refused it, or did not hold its marker when last asked: kept (a wrong or lying
    /// node may have said so, and its bytes are what the authorities credit), not announced;
    /// `fastpay sync` asks the core again and clears this if the core holds it after all.
    pub refused: bool,
}

/// One Byzantine-mode account.
#[derive(Clone)]
pub struct FastpayAccount {
    pub(crate) owner: SigningKey,
    pub(crate) key: AccountKey,
    pub(crate) next_sequence: u64,
    pub(crate) pending: Vec<SignedOrder>,
    pub(crate) sent: Vec<SentTransfer>,
    pub(crate) fundings: Vec<FundingRecord>,
}

impl std::fmt::Debug for FastpayAccount {
    /// Never prints the secret key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastpayAccount")
            .field("key", &hex::encode(self.key.0))
            .field("next_sequence", &self.next_sequence)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl FastpayAccount {
    pub(crate) fn from_owner(owner: SigningKey) -> FastpayAccount {
        FastpayAccount {
            key: AccountKey(owner.verifying_key().to_bytes()),
            owner,
            next_sequence: 0,
            pending: Vec::new(),
            sent: Vec::new(),
            fundings: Vec::new(),
        }
    }

    /// The account's address at every authority: its owner's public key.
    pub fn key(&self) -> AccountKey {
        self.key
    }

    /// The owner's signing key: a payment needs it to ask for recovery rounds, which only the
    /// owner may (specie_fastpay's `RoundRequest`).
    pub fn owner(&self) -> &SigningKey {
        &self.owner
    }

    /// The sequence number of the next order: one above the last certified one.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    /// The orders signed for `next_sequence` and not certified yet: normally none or one; more
    /// only when the authorities reported another one this owner signed (from another copy of
    /// the wallet), which the recovery rounds then settle.
    pub fn pending(&self) -> &[SignedOrder] {
        &self.pending
    }

    /// The account's certified transfers, sequence number 0 first.
    pub fn sent(&self) -> &[SentTransfer] {
        &self.sent
    }

    /// The fundings this wallet built into the account and still keeps.
    pub fn fundings(&self) -> &[FundingRecord] {
        &self.fundings
    }

    /// What this wallet alone knows the account should hold: credited fundings minus certified
    /// transfers. Payments received from other accounts are known only to the authorities.
    pub fn local_balance(&self) -> i128 {
        let funded: i128 = self
            .fundings
            .iter()
            .filter(|f| f.credited)
            .map(|f| i128::from(f.funding.amount))
            .sum();
        let sent: i128 = self
            .sent
            .iter()
            .map(|s| i128::from(s.certificate.order.order.amount))
            .sum();
        funded - sent
    }
}

/// Where a wallet learns its committee's authorities' addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommitteeSource<'a> {
    /// A cluster's file (`specie cluster up --authorities`), by path.
    ClusterFile(&'a str),
    /// A standalone committee's API (`specie byzantine committee`), by URL.
    Url(&'a str),
}

/// The Byzantine-mode part of a wallet: one committee, the epochs it knows of it, and its
/// accounts.
#[derive(Clone, Debug)]
pub struct FastpayBook {
    /// The committee's epochs from its first (its identity: what the accounts belong to, what
    /// fundings name); a certificate is checked against the committee of the epoch it names.
    pub(crate) chain: CommitteeChain,
    /// The cluster file that names the authorities' addresses, saved like the node's URL.
    pub(crate) cluster_file: Option<String>,
    /// Or the standalone committee's API that names them (one of the two at most).
    pub(crate) committee_url: Option<String>,
    pub(crate) accounts: Vec<FastpayAccount>,
}

impl FastpayBook {
    /// The committee every account of this wallet belongs to (its first epoch's).
    pub fn committee(&self) -> &Committee {
        self.chain.first()
    }

    /// Every epoch of the committee this wallet knows, from the first.
    pub fn chain(&self) -> &CommitteeChain {
        &self.chain
    }

    /// The cluster file that named the authorities' addresses, if that is where they came from.
    pub fn cluster_file(&self) -> Option<&str> {
        self.cluster_file.as_deref()
    }

    /// The standalone committee's API that named them, if that is where they came from.
    pub fn committee_url(&self) -> Option<&str> {
        self.committee_url.as_deref()
    }

    /// Where the authorities' addresses were last learnt, if anywhere.
    pub fn source(&self) -> Option<CommitteeSource<'_>> {
        (self.cluster_file.as_deref().map(CommitteeSource::ClusterFile))
            .or_else(|| self.committee_url.as_deref().map(CommitteeSource::Url))
    }

    fn remember(&mut self, source: CommitteeSource<'_>) {
        let (file, url) = match source {
            CommitteeSource::ClusterFile(file) => (Some(file.to_owned()), None),
            CommitteeSource::Url(url) => (None, Some(url.to_owned())),
        };
        self.cluster_file = file;
        self.committee_url = url;
    }

    /// The accounts, in the order they were made.
    pub fn accounts(&self) -> &[FastpayAccount] {
        &self.accounts
    }

    /// The account `key`, if it is one of this wallet's.
    pub fn account(&self, key: &AccountKey) -> Option<&FastpayAccount> {
        self.accounts.iter().find(|a| a.key == *key)
    }

    fn account_mut(&mut self, key: &AccountKey) -> Result<&mut FastpayAccount, FastpayError> {
        self.accounts
            .iter_mut()
            .find(|a| a.key == *key)
            .ok_or_else(|| FastpayError::UnknownAccount(hex_key(key)))
    }
}

/// Whether `certificate` is final under the committee of its own epoch, of `chain`.
pub(crate) fn check_in(chain: &CommitteeChain, certificate: &Certificate) -> Result<(), CertificateError> {
    let committee = chain
        .committee(&certificate.committee_id)
        .ok_or(CertificateError::WrongCommittee)?;
    certificate.check(committee)
}

/// What a payee learns from a certificate it was handed, checked offline against the committee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifiedTransfer {
    /// The epoch whose committee certified it.
    pub epoch: u64,
    pub sender: AccountKey,
    pub recipient: Recipient,
    pub amount: u64,
    pub sequence: u64,
}

/// Checks `certificate` against the committee of the epoch it names, of `chain`, with no one else
/// asked: final (every member's prepare in round 0, or a quorum's commits), every signature valid,
/// the order well formed and signed by its sender. A valid certificate is a payment that settles
/// (it cannot be undone).
pub fn verify_certificate(
    chain: &CommitteeChain,
    certificate: &Certificate,
) -> Result<VerifiedTransfer, CertificateError> {
    check_in(chain, certificate)?;
    let order = &certificate.order.order;
    Ok(VerifiedTransfer {
        epoch: chain.committee(&certificate.committee_id).map_or(0, Committee::epoch),
        sender: order.sender,
        recipient: order.recipient,
        amount: order.amount,
        sequence: order.sequence,
    })
}

fn hex_key(key: &AccountKey) -> String {
    hex::encode(key.0)
}

fn mismatch(expected: &Committee, found: &Committee) -> FastpayError {
    FastpayError::CommitteeMismatch {
        epoch: expected.epoch(),
        expected: hex::encode(expected.id()),
        found_epoch: found.epoch(),
        found: hex::encode(found.id()),
    }
}

/// The book `wallet` holds ([`FastpayBook`] is its Byzantine-mode part), as a copy to change;
/// `None` while the wallet has no committee.
fn read(wallet: &Wallet) -> Option<FastpayBook> {
    wallet.part::<FastpayBook>().cloned()
}

/// Keeps `book` as `wallet`'s Byzantine-mode part.
fn write(wallet: &mut Wallet, book: FastpayBook) {
    wallet.insert_part(Box::new(book));
}

/// Copies the book (none yet: [`FastpayError::NoCommittee`]), lets `change` change it and the
/// wallet, and keeps it; on an error the book is left as it was.
fn change<T>(
    wallet: &mut Wallet,
    change: impl FnOnce(&mut FastpayBook, &mut Wallet) -> Result<T, FastpayError>,
) -> Result<T, FastpayError> {
    let mut book = read(wallet).ok_or(FastpayError::NoCommittee)?;
    let result = change(&mut book, wallet)?;
    write(wallet, book);
    Ok(result)
}

/// A wallet's Byzantine-mode accounts (module docs), kept in its [`FastpayBook`] part, which
/// was checked when the wallet file was loaded (`crate::section`). Implemented for [`Wallet`].
pub trait FastpayWallet {
    /// The wallet's Byzantine-mode accounts; `None` while it has no committee.
    fn fastpay(&self) -> Option<&FastpayBook>;

    /// The wallet's Byzantine-mode accounts; [`FastpayError::NoCommittee`] while it has no
    /// committee.
    fn fastpay_book(&self) -> Result<&FastpayBook, FastpayError> {
        self.fastpay().ok_or(FastpayError::NoCommittee)
    }

    /// Makes `committee` this wallet's (first use), or checks that it is already; remembers
    /// where its authorities' addresses came from when given.
    fn fastpay_use_committee(
        &mut self,
        committee: &Committee,
        source: Option<CommitteeSource<'_>>,
    ) -> Result<(), FastpayError>;

    /// Takes in the later epochs of `chain` (the same committee's: the same first epoch), each
    /// record checked against the epoch before. Returns whether the wallet learned one.
    fn fastpay_learn_epochs(&mut self, chain: &CommitteeChain) -> Result<bool, FastpayError>;

    /// A new Byzantine-mode account.
    fn fastpay_new_account(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<AccountKey, FastpayError>;

    /// Builds and signs a funding of `amount` from this wallet's coins into `account`, recorded
    /// both as a pending core transaction and in the account (so that the authorities can be
    /// told of it once the core confirms it, even after a crash).
    fn build_fastpay_funding(
        &mut self,
        account: &AccountKey,
        amount: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SpecieTransaction, FastpayError>;

    /// A quorum of authorities credited the funding `txid`.
    fn fastpay_on_credited(&mut self, account: &AccountKey, txid: &Txid) -> Result<(), FastpayError>;

    /// The core refused the funding `txid`, or does not hold its marker: marked refused, kept
    /// (module docs). Returns whether it was not marked before.
    fn fastpay_mark_refused(&mut self, account: &AccountKey, txid: &Txid) -> Result<bool, FastpayError>;

    /// The core holds the marker of the refused funding `txid` after all: announced again.
    /// Returns whether it was marked refused.
    fn fastpay_restore_refused(&mut self, account: &AccountKey, txid: &Txid) -> Result<bool, FastpayError>;

    /// Drops every funding marked refused, for good (`specie wallet fastpay forget-refused`):
    /// the user says the core never took them. Returns how many, and their value.
    fn fastpay_forget_refused(&mut self) -> Result<(usize, u64), FastpayError>;

    /// Signs the account's next order and records it as pending. The caller saves the wallet
    /// *before* sending it (module docs). Refused while another order is pending.
    fn fastpay_sign_order(
        &mut self,
        account: &AccountKey,
        recipient: Recipient,
        amount: u64,
        memo: Vec<u8>,
    ) -> Result<SignedOrder, FastpayError>;

    /// Orders signed by this account's owner that an authority reports pending at the account's
    /// next sequence number (a wallet restored from an older copy, or another copy of it, signed
    /// them): kept, so that they are finished rather than contradicted. Returns how many were
    /// new; anything else (another sequence number, another signer) is ignored.
    fn fastpay_adopt_pending(&mut self, account: &AccountKey, orders: &[SignedOrder]) -> Result<usize, FastpayError>;

    /// A final certificate of this account's transfer at its next sequence number (one this
    /// wallet sent, or learned from the authorities): the sequence moves on and the pending
    /// orders are done. A certificate for an earlier number is already known and changes nothing.
    fn fastpay_on_certified(&mut self, certificate: Certificate) -> Result<bool, FastpayError>;

    /// A fresh core address of this wallet, as the recipient of a transfer back to the core.
    fn fastpay_redeem_recipient(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<Recipient, FastpayError>;

    /// Builds the FastPay redeem of the account's certified transfer `sequence` back to the core
    /// and records it as a pending core transaction creating this wallet's output.
    fn build_fastpay_redeem(&mut self, account: &AccountKey, sequence: u64) -> Result<SpecieTransaction, FastpayError>;

    /// The redeems built and not known to be held by the core, that the core's pending
    /// machinery no longer waits for (confirmed since, or dropped as refused): (account,
    /// sequence, the redeem), for `fastpay sync` to ask the core about.
    fn fastpay_redeems_to_check(&self) -> Result<Vec<(AccountKey, u64, SpecieTransaction)>, FastpayError>;

    /// The core holds the marker of the redeem of the account's transfer `sequence`: done.
    fn fastpay_on_redeemed(&mut self, account: &AccountKey, sequence: u64) -> Result<(), FastpayError>;

    /// The core does not hold the redeem of the account's transfer `sequence`, and this wallet no
    /// longer waits for it (its pending transaction was dropped as refused): due again, so that
    /// the next [`FastpayWallet::build_fastpay_redeem`] presents it once more. Returns whether
    /// it was.
    fn fastpay_redeem_again(&mut self, account: &AccountKey, sequence: u64) -> Result<bool, FastpayError>;
}

impl FastpayWallet for Wallet {
    fn fastpay(&self) -> Option<&FastpayBook> {
        self.part::<FastpayBook>()
    }

    fn fastpay_use_committee(
        &mut self,
        committee: &Committee,
        source: Option<CommitteeSource<'_>>,
    ) -> Result<(), FastpayError> {
        let mut book = match read(self) {
            Some(book) if book.committee() != committee => return Err(mismatch(book.committee(), committee)),
            Some(book) => book,
            None => FastpayBook {
                chain: CommitteeChain::new(committee.clone()),
                cluster_file: None,
                committee_url: None,
                accounts: Vec::new(),
            },
        };
        if let Some(source) = source {
            book.remember(source);
        }
        write(self, book);
        Ok(())
    }

    fn fastpay_learn_epochs(&mut self, chain: &CommitteeChain) -> Result<bool, FastpayError> {
        change(self, |book, _| {
            if book.committee() != chain.first() {
                return Err(mismatch(book.committee(), chain.first()));
            }
            Ok(book.chain.learn(chain.records().iter().cloned())?)
        })
    }

    fn fastpay_new_account(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<AccountKey, FastpayError> {
        change(self, |book, _| {
            if book.accounts.len() >= FASTPAY_ACCOUNTS_MAX {
                return Err(FastpayError::TooManyAccounts);
            }
            let mut secret = [0u8; 32];
            rng.fill_bytes(&mut secret);
            let account = FastpayAccount::from_owner(SigningKey::from_bytes(&secret));
            let key = account.key;
            book.accounts.push(account);
            Ok(key)
        })
    }

    fn build_fastpay_funding(
        &mut self,
        account: &AccountKey,
        amount: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SpecieTransaction, FastpayError> {
        change(self, |book, wallet| {
            let committee_id = book.committee().id();
            let state = book.account_mut(account)?;
            let kind = PendingKind::FastpayFunding { amount };
            let funding = wallet.build_spend(amount, kind, rng, |inputs, change, owners| {
                FastpayFunding::new_signed(
                    committee_id,
                    *account,
                    amount,
                    inputs,
                    change,
                    owners,
                    NonceMode::Randomized,
                )
            })?;
            state.fundings.push(FundingRecord {
                funding: funding.clone(),
                credited: false,
                refused: false,
            });
            Ok(SpecieTransaction::from(funding))
        })
    }

    fn fastpay_on_credited(&mut self, account: &AccountKey, txid: &Txid) -> Result<(), FastpayError> {
        change(self, |book, _| {
            for record in &mut book.account_mut(account)?.fundings {
                if record.funding.txid() == *txid {
                    record.credited = true;
                    record.refused = false;
                }
            }
            Ok(())
        })
    }

    fn fastpay_mark_refused(&mut self, account: &AccountKey, txid: &Txid) -> Result<bool, FastpayError> {
        change(self, |book, _| {
            let mut newly = false;
            for record in &mut book.account_mut(account)?.fundings {
                if record.funding.txid() == *txid && !record.credited && !record.refused {
                    record.refused = true;
                    newly = true;
                }
            }
            Ok(newly)
        })
    }

    fn fastpay_restore_refused(&mut self, account: &AccountKey, txid: &Txid) -> Result<bool, FastpayError> {
        change(self, |book, _| {
            let mut restored = false;
            for record in &mut book.account_mut(account)?.fundings {
                if record.funding.txid() == *txid && record.refused {
                    record.refused = false;
                    restored = true;
                }
            }
            Ok(restored)
        })
    }

    fn fastpay_forget_refused(&mut self) -> Result<(usize, u64), FastpayError> {
        let Some(mut book) = read(self) else {
            return Ok((0, 0));
        };
        let mut forgotten = (0usize, 0u64);
        for account in &mut book.accounts {
            account.fundings.retain(|record| {
                !record.refused || {
                    forgotten.0 += 1;
                    forgotten.1 = forgotten.1.saturating_add(record.funding.amount);
                    false
                }
            });
        }
        write(self, book);
        Ok(forgotten)
    }

    fn fastpay_sign_order(
        &mut self,
        account: &AccountKey,
        recipient: Recipient,
        amount: u64,
        memo: Vec<u8>,
    ) -> Result<SignedOrder, FastpayError> {
        if amount == 0 {
            return Err(WalletError::ZeroAmount.into());
        }
        if memo.len() > MEMO_BYTES_MAX {
            return Err(FastpayError::MemoTooLong { bytes: memo.len() });
        }
        change(self, |book, _| {
            let state = book.account_mut(account)?;
            if !state.pending.is_empty() {
                return Err(FastpayError::OrderPending {
                    account: hex_key(account),
                    sequence: state.next_sequence,
                });
            }
            let order = TransferOrder {
                sender: *account,
                recipient,
                amount,
                sequence: state.next_sequence,
                memo,
            }
            .sign(&state.owner);
            state.pending.push(order.clone());
            Ok(order)
        })
    }

    fn fastpay_adopt_pending(&mut self, account: &AccountKey, orders: &[SignedOrder]) -> Result<usize, FastpayError> {
        change(self, |book, _| {
            let state = book.account_mut(account)?;
            let mut adopted = 0;
            for order in orders {
                let fits = order.order.sender == *account && order.order.sequence == state.next_sequence;
                if fits && order.check().is_ok() && !state.pending.contains(order) {
                    state.pending.push(order.clone());
                    adopted += 1;
                }
            }
            Ok(adopted)
        })
    }

    fn fastpay_on_certified(&mut self, certificate: Certificate) -> Result<bool, FastpayError> {
        change(self, |book, _| {
            check_in(&book.chain, &certificate)?;
            let order = &certificate.order.order;
            let (sender, sequence) = (order.sender, order.sequence);
            let not_ours = |why| FastpayError::NotOurs {
                sender: hex_key(&sender),
                sequence,
                why,
            };
            let state = book.account_mut(&sender).map_err(|_| not_ours("holds no key for"))?;
            if sequence < state.next_sequence {
                return Ok(false);
            }
            if sequence > state.next_sequence {
                return Err(not_ours("has not seen the earlier transfers of; sync first"));
            }
            state.next_sequence += 1;
            state.pending.clear();
            state.sent.push(SentTransfer {
                certificate,
                redeem_txid: None,
                redeemed: false,
            });
            Ok(true)
        })
    }

    fn fastpay_redeem_recipient(&mut self, rng: &mut (impl RngCore + CryptoRng)) -> Result<Recipient, FastpayError> {
        let address: Address = self.new_address(rng)?;
        Ok(Recipient::Core(CoreAddress(address.witness_program_commitment())))
    }

    fn build_fastpay_redeem(&mut self, account: &AccountKey, sequence: u64) -> Result<SpecieTransaction, FastpayError> {
        change(self, |book, wallet| {
            let no_redeem = || FastpayError::NoRedeem {
                account: hex_key(account),
                sequence,
            };
            let sent = (book.account_mut(account)?.sent.iter_mut())
                .find(|s| s.certificate.order.order.sequence == sequence && s.redeem_due().is_some())
                .ok_or_else(no_redeem)?;
            let amount = sent.certificate.order.order.amount;
            let tx = SpecieTransaction::from(FastpayRedeem::new(sent.certificate.clone()));
            let txid = wallet.record_pending(tx.clone(), PendingKind::FastpayRedeem { amount })?;
            sent.redeem_txid = Some(txid);
            Ok(tx)
        })
    }

    fn fastpay_redeems_to_check(&self) -> Result<Vec<(AccountKey, u64, SpecieTransaction)>, FastpayError> {
        let Some(book) = self.part::<FastpayBook>() else {
            return Ok(Vec::new());
        };
        let mut found = Vec::new();
        for account in &book.accounts {
            for sent in &account.sent {
                let Some(txid) = sent.redeem_txid else { continue };
                if sent.redeemed || self.pending_tx(&txid).is_some() {
                    continue;
                }
                let redeem = SpecieTransaction::from(FastpayRedeem::new(sent.certificate.clone()));
                found.push((account.key, sent.certificate.order.order.sequence, redeem));
            }
        }
        Ok(found)
    }

    fn fastpay_on_redeemed(&mut self, account: &AccountKey, sequence: u64) -> Result<(), FastpayError> {
        change(self, |book, _| {
            for sent in &mut book.account_mut(account)?.sent {
                if sent.certificate.order.order.sequence == sequence && sent.redeem_txid.is_some() {
                    sent.redeemed = true;
                }
            }
            Ok(())
        })
    }

    fn fastpay_redeem_again(&mut self, account: &AccountKey, sequence: u64) -> Result<bool, FastpayError> {
        let unknown = || FastpayError::UnknownAccount(hex_key(account));
        let mut book = read(self).ok_or_else(unknown)?;
        let waiting = |txid: &Txid| self.pending_tx(txid).is_some();
        let state = book.account_mut(account)?;
        let due = state.sent.iter().any(|sent| {
            sent.certificate.order.order.sequence == sequence
                && !sent.redeemed
                && sent.redeem_txid.is_some_and(|txid| !waiting(&txid))
        });
        if due {
            for sent in &mut state.sent {
                if sent.certificate.order.order.sequence == sequence {
                    sent.redeem_txid = None;
                }
            }
            write(self, book);
        }
        Ok(due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{funded_wallet, rng};
    use specie_fastpay::deterministic_key;
    use specie_fastpay::test_support::SigningCommittee;
    use specie_wallet::Wallet;

    fn book(wallet: &Wallet) -> FastpayBook {
        wallet.fastpay().unwrap().clone()
    }

    fn committee() -> (Committee, SigningCommittee) {
        let signing = SigningCommittee::deterministic(4, 1);
        (signing.committee.clone(), signing)
    }

    fn certify(_: &Committee, signing: &SigningCommittee, order: SignedOrder) -> Certificate {
        signing.final_certificate(&order)
    }

    #[test]
    fn one_order_per_sequence_until_it_is_certified() {
        let mut rng = rng(40);
        let (committee, keys) = committee();
        let mut wallet = funded_wallet(&[100], &mut rng);
        wallet
            .fastpay_use_committee(&committee, Some(CommitteeSource::ClusterFile("c.toml")))
            .unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let payee = AccountKey(deterministic_key("payee", 0).verifying_key().to_bytes());
        let order = wallet
            .fastpay_sign_order(&account, Recipient::Account(payee), 5, vec![])
            .unwrap();
        assert_eq!(order.order.sequence, 0);
        // A second order while the first is pending would equivocate: refused.
        let error = wallet
            .fastpay_sign_order(&account, Recipient::Account(payee), 6, vec![])
            .unwrap_err();
        assert!(
            matches!(error, FastpayError::OrderPending { sequence: 0, .. }),
            "{error}"
        );
        assert_eq!(book(&wallet).accounts()[0].pending(), std::slice::from_ref(&order));

        let certificate = certify(&committee, &keys, order);
        assert!(wallet.fastpay_on_certified(certificate.clone()).unwrap());
        assert!(!wallet.fastpay_on_certified(certificate).unwrap(), "known already");
        let snapshot = book(&wallet);
        let state = &snapshot.accounts()[0];
        assert_eq!((state.next_sequence(), state.pending().len()), (1, 0));
        assert_eq!(state.local_balance(), -5);
        let next = wallet
            .fastpay_sign_order(&account, Recipient::Account(payee), 6, vec![])
            .unwrap();
        assert_eq!(next.order.sequence, 1);
    }

    #[test]
    fn another_committee_is_refused_and_certificates_are_checked() {
        let mut rng = rng(41);
        let (committee, keys) = committee();
        let mut wallet = funded_wallet(&[100], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let other_keys = SigningCommittee::new(1, (0..4).map(|n| deterministic_key("other", n)).collect());
        let other = other_keys.committee.clone();
        assert!(matches!(
            wallet.fastpay_use_committee(&other, None),
            Err(FastpayError::CommitteeMismatch { .. })
        ));
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let order = wallet
            .fastpay_sign_order(&account, Recipient::Account(account), 1, vec![])
            .unwrap();
        let forged = certify(&other, &other_keys, order.clone());
        assert!(matches!(
            verify_certificate(&CommitteeChain::new(committee.clone()), &forged),
            Err(CertificateError::WrongCommittee)
        ));
        let mut short = certify(&committee, &keys, order);
        short.signatures.pop();
        assert!(
            verify_certificate(&CommitteeChain::new(committee.clone()), &short).is_err(),
            "3 of 4 prepares are a lock, not final"
        );
        assert!(wallet.fastpay_on_certified(short).is_err());
        assert_eq!(book(&wallet).accounts()[0].next_sequence(), 0);
    }

    #[test]
    fn certificates_of_a_later_epoch_count_once_the_wallet_learns_its_record_and_survive_a_reload() {
        let mut rng = rng(44);
        let (committee, keys) = committee();
        let mut wallet = funded_wallet(&[100], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        // Epoch 2: seat 3 gets a new key, signed by seats 0 to 2.
        let mut next_keys = keys.keys.clone();
        next_keys[3] = deterministic_key("authority", 9);
        let next = SigningCommittee::new(2, next_keys);
        let mut record =
            specie_fastpay::CommitteeRecord::propose(&committee, next.committee.members().to_vec()).unwrap();
        for seat in 0..3 {
            record.endorse(seat, &keys.keys[usize::from(seat)]);
        }
        let first = wallet
            .fastpay_sign_order(&account, Recipient::Account(account), 1, vec![])
            .unwrap();
        assert!(wallet.fastpay_on_certified(certify(&committee, &keys, first)).unwrap());
        let order = wallet
            .fastpay_sign_order(&account, Recipient::Account(account), 2, vec![])
            .unwrap();
        let in_epoch_two = next.final_certificate(&order);
        assert!(
            wallet.fastpay_on_certified(in_epoch_two.clone()).is_err(),
            "an epoch the wallet does not know"
        );
        // Another committee's epochs teach nothing.
        let other = SigningCommittee::new(1, (0..4).map(|n| deterministic_key("other", n)).collect());
        assert!(matches!(
            wallet.fastpay_learn_epochs(&CommitteeChain::new(other.committee.clone())),
            Err(FastpayError::CommitteeMismatch { .. })
        ));
        let mut chain = CommitteeChain::new(committee.clone());
        chain.extend(record).unwrap();
        assert!(wallet.fastpay_learn_epochs(&chain).unwrap());
        assert!(!wallet.fastpay_learn_epochs(&chain).unwrap(), "known already");
        assert!(wallet.fastpay_on_certified(in_epoch_two.clone()).unwrap());
        assert_eq!(
            verify_certificate(book(&wallet).chain(), &in_epoch_two).map(|v| v.epoch),
            Ok(2)
        );
        // The wallet file keeps the epochs: both certificates load back, checked.
        let reloaded = FastpayBook::from_section(&book(&wallet).to_section()).unwrap();
        assert_eq!(reloaded.chain(), book(&wallet).chain());
        assert_eq!(reloaded.accounts()[0].sent().len(), 2);
        assert_eq!(
            reloaded.committee(),
            &committee,
            "the first epoch's stays the wallet's committee"
        );
    }

    #[test]
    fn adopted_orders_are_only_the_owners_at_the_next_sequence() {
        let mut rng = rng(42);
        let (committee, _) = committee();
        let mut wallet = funded_wallet(&[100], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let owner = book(&wallet).accounts()[0].owner.clone();
        let mine = |sequence, amount| {
            TransferOrder {
                sender: account,
                recipient: Recipient::Account(account),
                amount,
                sequence,
                memo: vec![],
            }
            .sign(&owner)
        };
        let mut forged = mine(0, 9);
        forged.order.amount = 10;
        let adopted = wallet
            .fastpay_adopt_pending(&account, &[mine(0, 3), mine(0, 3), mine(1, 4), forged])
            .unwrap();
        assert_eq!(adopted, 1);
        assert_eq!(book(&wallet).accounts()[0].pending(), &[mine(0, 3)]);
    }

    /// A funding the core refused (or a node said it does not hold) is marked, never dropped:
    /// its bytes are what the authorities credit if the core took it after all. Only the user
    /// drops it.
    #[test]
    fn a_refused_funding_is_kept_until_the_user_forgets_it() {
        let mut rng = rng(44);
        let (committee, _) = committee();
        let mut wallet = funded_wallet(&[70, 50], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let tx = wallet.build_fastpay_funding(&account, 60, &mut rng).unwrap();
        wallet.on_rejected(&tx.txid()).unwrap();
        assert!(wallet.fastpay_mark_refused(&account, &tx.txid()).unwrap());
        assert!(!wallet.fastpay_mark_refused(&account, &tx.txid()).unwrap(), "once");
        let snapshot = book(&wallet);
        let record = &snapshot.accounts()[0].fundings()[0];
        assert!(record.refused && !record.credited);
        assert_eq!(record.funding.txid(), tx.txid(), "the signed funding is kept");
        // The core holds it after all: announced and credited like any other.
        assert!(wallet.fastpay_restore_refused(&account, &tx.txid()).unwrap());
        wallet.fastpay_on_credited(&account, &tx.txid()).unwrap();
        assert!(
            !wallet.fastpay_mark_refused(&account, &tx.txid()).unwrap(),
            "credited stays credited"
        );
        assert_eq!(wallet.fastpay_forget_refused().unwrap(), (0, 0));
        assert_eq!(book(&wallet).accounts()[0].local_balance(), 60);

        let second = wallet.build_fastpay_funding(&account, 40, &mut rng).unwrap();
        wallet.on_rejected(&second.txid()).unwrap();
        wallet.fastpay_mark_refused(&account, &second.txid()).unwrap();
        assert_eq!(wallet.fastpay_forget_refused().unwrap(), (1, 40));
        assert_eq!(book(&wallet).accounts()[0].fundings().len(), 1);
    }

    /// A redeem whose pending transaction the core's machinery dropped (refused, on a node's
    /// word) is due again, the same transaction; one the core holds is done.
    #[test]
    fn a_dropped_redeem_is_presented_again_until_the_core_holds_it() {
        let mut rng = rng(45);
        let (committee, keys) = committee();
        let mut wallet = funded_wallet(&[100], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let recipient = wallet.fastpay_redeem_recipient(&mut rng).unwrap();
        let order = wallet.fastpay_sign_order(&account, recipient, 30, vec![]).unwrap();
        wallet.fastpay_on_certified(certify(&committee, &keys, order)).unwrap();
        let redeem = wallet.build_fastpay_redeem(&account, 0).unwrap();
        assert!(
            wallet.fastpay_redeems_to_check().unwrap().is_empty(),
            "still pending in the core wallet"
        );
        assert!(!wallet.fastpay_redeem_again(&account, 0).unwrap(), "pending: not due");
        wallet.on_rejected(&redeem.txid()).unwrap();
        let to_check = wallet.fastpay_redeems_to_check().unwrap();
        assert_eq!(to_check.len(), 1);
        assert_eq!((to_check[0].0, to_check[0].1), (account, 0));
        assert_eq!(to_check[0].2, redeem, "the same redeem");
        assert!(wallet.fastpay_redeem_again(&account, 0).unwrap());
        let again = wallet.build_fastpay_redeem(&account, 0).unwrap();
        assert_eq!(again, redeem, "the same bytes, paid once by the core");
        wallet.on_confirmed(&again.txid()).unwrap();
        assert_eq!(wallet.balance().spendable, 130);
        assert_eq!(
            wallet.fastpay_redeems_to_check().unwrap().len(),
            1,
            "confirmed: the core is asked once"
        );
        wallet.fastpay_on_redeemed(&account, 0).unwrap();
        assert!(wallet.fastpay_redeems_to_check().unwrap().is_empty());
        assert!(
            !wallet.fastpay_redeem_again(&account, 0).unwrap(),
            "redeemed: never again"
        );
        assert!(book(&wallet).accounts()[0].sent()[0].redeemed);
    }

    #[test]
    fn funding_and_redeem_are_core_transactions_of_the_wallet() {
        let mut rng = rng(43);
        let (committee, keys) = committee();
        let mut wallet = funded_wallet(&[70, 50], &mut rng);
        wallet.fastpay_use_committee(&committee, None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let tx = wallet.build_fastpay_funding(&account, 100, &mut rng).unwrap();
        let funding = tx.capability::<FastpayFunding>().expect("a FastPay funding");
        assert_eq!(
            (funding.amount, funding.account, funding.committee_id),
            (100, account, committee.id())
        );
        assert_eq!(wallet.balance().pending_in, 20, "change");
        assert!(wallet
            .pending_tx(&tx.txid())
            .unwrap()
            .proof_ids()
            .contains(&funding.marker()));
        wallet.on_confirmed(&tx.txid()).unwrap();
        wallet.fastpay_on_credited(&account, &tx.txid()).unwrap();
        assert_eq!(book(&wallet).accounts()[0].local_balance(), 100);

        let recipient = wallet.fastpay_redeem_recipient(&mut rng).unwrap();
        let order = wallet.fastpay_sign_order(&account, recipient, 30, vec![]).unwrap();
        assert!(wallet.fastpay_on_certified(certify(&committee, &keys, order)).unwrap());
        let redeem = wallet.build_fastpay_redeem(&account, 0).unwrap();
        assert_eq!(wallet.balance().pending_in, 30);
        assert!(wallet.build_fastpay_redeem(&account, 0).is_err(), "built once");
        wallet.on_confirmed(&redeem.txid()).unwrap();
        assert_eq!(wallet.balance().spendable, 50);
    }
}
