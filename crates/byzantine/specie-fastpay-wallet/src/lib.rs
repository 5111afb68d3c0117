//! A wallet's Byzantine-mode (FastPay) accounts, driven against the online core and the
//! committee's authorities (`docs/byzantine-mode.md`). The bookkeeping ([`FastpayBook`], the
//! `fastpay_*` operations of [`FastpayWallet`]) and its part of the wallet ([`FastpayPart`], a
//! `specie_wallet::WalletPart` kept in the file's `fastpay` section, [`section`], loaded and
//! checked once [`install`] installed it) are this crate's; so is the order of saving and talking that keeps money safe, as
//! `specie_wallet::session` does for core transactions:
//!
//! * **An order is saved before it is sent**, and until it is certified every attempt sends that
//!   same order, never a new one for its sequence number ([`pay`] finishes a pending order
//!   before signing the next). A crash after saving and before sending therefore re-sends the
//!   same bytes, which every authority answers with the same vote.
//! * **A restored (or older) copy of the wallet asks the authorities first** ([`recover`]):
//!   their certificates of this account from its next sequence number on are adopted (each
//!   checked against the committee), and an order they report pending at the account's next
//!   sequence number, signed by its owner, is finished rather than contradicted (FastPay §4.4).
//! * **A funding reaches the authorities only once the core confirmed it**, and stays in the
//!   wallet until a quorum credited it ([`announce_fundings`]), so a crash in between loses
//!   nothing; a transfer back to the core becomes a FastPay redeem recorded as a pending core
//!   transaction, whose fate `specie wallet sync` resolves like any other ([`present_redeems`]).
//! * **Nothing is dropped on a remote's word.** A funding the core refused, or whose marker a
//!   node does not hold, is marked refused and asked about again at every sync (announced if
//!   the core holds it after all); only `specie wallet fastpay forget-refused` drops it. A
//!   redeem the core's pending machinery dropped is presented again until the core holds its
//!   marker ([`check_redeems`]). An authority's `funded` counts only if it names the funding's
//!   marker. Certificates and pending orders are checked against the committee and the owner's
//!   key before they change anything.
//!
//! The authorities are behind the [`Authorities`] trait: [`HttpCommittee`] for processes, a
//! fake in the tests. The caller holds the wallet's lock throughout.

mod book;
pub mod section;
pub mod supply;
#[cfg(test)]
mod testkit;

use std::path::Path;

use specie_authority::AccountState;
use specie_codec::{Decode, Encode};
use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, FundWait, HttpCommittee, PayError, PaymentError};
use specie_fastpay::{
    AccountKey, AuthorityIndex, Certificate, Committee, CommitteeChain, Recipient, SignedOrder, SigningKey,
};
use specie_transaction::{SpecieTransaction, Txid, UhsId};
use specie_wallet::session::{self, SessionError as CoreSessionError, Submitted};
use specie_wallet::{
    ClientError, FileError, Ledger, NodeClient, Outcome, PaidOutput, PaymentString, Wallet, WalletError, WalletFile,
};
use thiserror::Error;

pub use book::{
    verify_certificate, CommitteeSource, FastpayAccount, FastpayBook, FastpayError, FastpayWallet, FundingRecord,
    SentTransfer, VerifiedTransfer, FASTPAY_ACCOUNTS_MAX,
};
pub use section::{FastpayPart, FASTPAY_PART};

/// Makes this process read and write the Byzantine-mode part of wallet files ([`FastpayPart`])
/// and decode FastPay's core transactions (`specie_fastpay_primary::install`). Idempotent; call
/// it before loading a wallet file.
pub fn install() {
    specie_fastpay_primary::install();
    specie_wallet::install_part(&FastpayPart);
}

/// How a payment to the authorities ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayOutcome {
    /// Final, and a quorum of authorities settled it.
    Settled(Certificate),
    /// Final (it cannot be undone), but too few authorities settled it yet; the next payment's
    /// catch-ups, or sending it again, settle it where it is missing.
    Certified { certificate: Certificate, why: String },
    /// Not final: the order stays pending, to be sent again as it is.
    NotFinal(String),
}

/// The committee's authorities as this crate needs them.
pub trait Authorities {
    /// The committee's first epoch's (its identity).
    fn committee(&self) -> &Committee;
    /// Every epoch of the committee the client knows now (it learns later ones from the
    /// authorities as it pays).
    fn chain(&self) -> CommitteeChain;
    /// Settles one of `orders`, all signed by one owner for one sequence number (normally one).
    fn pay_orders(&self, owner: &SigningKey, orders: Vec<SignedOrder>) -> PayOutcome;
    /// What each authority that answers says about `account`, certificates from `from_sequence`.
    fn account_states(&self, account: AccountKey, from_sequence: u64) -> Vec<(AuthorityIndex, AccountState)>;
    /// Sends a confirmed funding to every authority; how many credited it.
    fn fund(&self, account: AccountKey, transaction: Vec<u8>) -> usize;
}

impl Authorities for HttpCommittee {
    fn committee(&self) -> &Committee {
        HttpCommittee::committee(self)
    }

    fn chain(&self) -> CommitteeChain {
        HttpCommittee::chain(self)
    }

    fn pay_orders(&self, owner: &SigningKey, orders: Vec<SignedOrder>) -> PayOutcome {
        match HttpCommittee::pay_orders(self, owner, orders) {
            Ok(settlement) => PayOutcome::Settled(settlement.certificate),
            Err(PayError::Payment(PaymentError::NotSettled { certificate, refusals })) => PayOutcome::Certified {
                certificate: *certificate,
                why: format!("{refusals:?}"),
            },
            Err(PayError::TimedOut {
                certificate: Some(certificate),
                timeout_ms,
            }) => PayOutcome::Certified {
                certificate: *certificate,
                why: format!("not settled within {timeout_ms} ms"),
            },
            Err(error) => PayOutcome::NotFinal(error.to_string()),
        }
    }

    fn account_states(&self, account: AccountKey, from_sequence: u64) -> Vec<(AuthorityIndex, AccountState)> {
        let size = HttpCommittee::committee(self).size() as AuthorityIndex;
        std::thread::scope(|scope| {
            let asks: Vec<_> = (0..size)
                .map(|authority| {
                    scope.spawn(move || {
                        (
                            authority,
                            self.ask(authority, Request::Account { account, from_sequence }),
                        )
                    })
                })
                .collect();
            asks.into_iter()
                .filter_map(|ask| match ask.join() {
                    Ok((authority, AuthorityReply::Account(state))) => Some((authority, *state)),
                    _ => None,
                })
                .collect()
        })
    }

    fn fund(&self, account: AccountKey, transaction: Vec<u8>) -> usize {
        let marker = SpecieTransaction::decode_exact(&transaction)
            .ok()
            .and_then(|tx| tx.marker());
        let replies = HttpCommittee::fund(self, account, transaction, FundWait::All);
        marker.map_or(0, |marker| credited_by(replies.values(), &marker))
    }
}

/// How many of `replies` say the funding whose marker is `marker` was credited: a `funded`
/// naming another id (another funding, a confused or lying authority) does not count.
pub fn credited_by<'a>(replies: impl IntoIterator<Item = &'a AuthorityReply>, marker: &UhsId) -> usize {
    replies
        .into_iter()
        .filter(|reply| matches!(reply, AuthorityReply::Funded { id } if *id == marker.0))
        .count()
}

/// Why a Byzantine-mode command could not do its work.
#[derive(Debug, Error)]
pub enum SessionError {
    #[error(transparent)]
    Fastpay(#[from] FastpayError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Core(#[from] CoreSessionError),
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Saving the signed order failed, so it was not sent (and can still be replaced).
    #[error("the order was not sent: {0}")]
    NotSent(#[source] FileError),
    #[error(
        "account {account}'s order for sequence number {sequence} is not final yet ({why}); it is saved and will \
         be sent again, as it is, by `specie wallet fastpay sync`"
    )]
    StillPending {
        account: String,
        sequence: u64,
        why: String,
    },
    #[error(
        "the core has not confirmed funding {txid} ({why}); `specie wallet sync` resolves it, then \
         `specie wallet fastpay sync` tells the authorities (a funding the core refused is kept, marked \
         refused, and asked about again)"
    )]
    FundingNotConfirmed { txid: Txid, why: String },
    #[error(transparent)]
    Wallet(#[from] WalletError),
    #[error(
        "account {account} holds {balance} {unit} at the authorities (the most that f+1 of them agree on), so \
         no quorum would certify paying {amount} {unit}, and a signed order would block the account until its \
         balance reached that: nothing was signed. Pay at most {balance} {unit}, or wait for incoming credits \
         (`specie wallet fastpay balance`)"
    )]
    Overspend {
        account: String,
        amount: u64,
        balance: i128,
        unit: String,
    },
    #[error(
        "only {answered} authorities answered about account {account}, and checking that it can pay needs {needed}: \
         nothing was signed; try again when more of the committee is reachable"
    )]
    TooFewAnswers {
        account: String,
        answered: usize,
        needed: usize,
    },
}

/// What [`recover`] learned from the authorities.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Certificates of this account's transfers this wallet did not have.
    pub certificates: usize,
    /// Orders of this account's owner pending at the authorities that this wallet did not have.
    pub orders: usize,
}

/// Learns from the authorities what this copy of the wallet may have missed (module docs) and
/// saves what changed.
pub fn recover(
    path: &Path,
    wallet: &mut Wallet,
    authorities: &impl Authorities,
    account: &AccountKey,
) -> Result<Recovered, SessionError> {
    let mut recovered = Recovered::default();
    wallet.fastpay_learn_epochs(&authorities.chain())?;
    loop {
        let next = next_sequence(wallet, account)?;
        let states = authorities.account_states(*account, next);
        let mut progressed = false;
        let certificates = states.iter().flat_map(|(_, state)| state.confirmed.iter());
        for certificate in certificates.filter(|c| c.order.order.sequence == next) {
            // Checked against the committee inside; one authority's forgery is skipped.
            if wallet.fastpay_on_certified(certificate.clone()).unwrap_or(false) {
                recovered.certificates += 1;
                progressed = true;
                break;
            }
        }
        if !progressed {
            let orders: Vec<SignedOrder> = states
                .iter()
                .filter_map(|(_, state)| state.pending.as_ref().map(|(order, _)| order.clone()))
                .collect();
            recovered.orders += wallet.fastpay_adopt_pending(account, &orders)?;
            break;
        }
    }
    if recovered != Recovered::default() {
        WalletFile::save(path, wallet)?;
    }
    Ok(recovered)
}

fn next_sequence(wallet: &Wallet, account: &AccountKey) -> Result<u64, FastpayError> {
    let book = wallet.fastpay_book()?;
    let state = book
        .account(account)
        .ok_or_else(|| FastpayError::UnknownAccount(hex(account)))?;
    Ok(state.next_sequence())
}

fn hex(account: &AccountKey) -> String {
    hex::encode(account.0)
}

/// Sends the account's pending orders (if any) until they are certified; records and saves the
/// certificate. `None` when nothing was pending.
pub fn finish_pending(
    path: &Path,
    wallet: &mut Wallet,
    authorities: &impl Authorities,
    account: &AccountKey,
) -> Result<Option<PayOutcome>, SessionError> {
    let Some(book) = wallet.fastpay() else {
        return Ok(None);
    };
    let Some(state) = book.account(account) else {
        return Ok(None);
    };
    if state.pending().is_empty() {
        return Ok(None);
    }
    let outcome = authorities.pay_orders(state.owner(), state.pending().to_vec());
    match &outcome {
        PayOutcome::Settled(certificate) | PayOutcome::Certified { certificate, .. } => {
            wallet.fastpay_learn_epochs(&authorities.chain())?;
            wallet.fastpay_on_certified(certificate.clone())?;
            WalletFile::save(path, wallet)?;
        }
        PayOutcome::NotFinal(_) => {}
    }
    Ok(Some(outcome))
}

/// Pays `amount` from `account` to `recipient`: learns what the authorities know first, finishes
/// an order still pending, then signs the next order, saves it, and only then sends it.
pub fn pay(
    path: &Path,
    wallet: &mut Wallet,
    authorities: &impl Authorities,
    account: &AccountKey,
    recipient: Recipient,
    amount: u64,
    memo: Vec<u8>,
) -> Result<PayOutcome, SessionError> {
    recover(path, wallet, authorities, account)?;
    if let Some(PayOutcome::NotFinal(why)) = finish_pending(path, wallet, authorities, account)? {
        return Err(SessionError::StillPending {
            account: hex(account),
            sequence: next_sequence(wallet, account)?,
            why,
        });
    }
    check_affordable(wallet, authorities, account, amount)?;
    let order = wallet.fastpay_sign_order(account, recipient, amount, memo)?;
    // Durable before any authority can vote on it (module docs).
    WalletFile::save(path, wallet).map_err(SessionError::NotSent)?;
    let book = wallet.fastpay_book()?;
    let owner = book.account(account).map(|state| state.owner());
    let outcome = authorities.pay_orders(owner.expect("the account just signed an order"), vec![order]);
    if let PayOutcome::Settled(certificate) | PayOutcome::Certified { certificate, .. } = &outcome {
        // The certificate is of the epoch the client paid in, which it may have learned now.
        wallet.fastpay_learn_epochs(&authorities.chain())?;
        wallet.fastpay_on_certified(certificate.clone())?;
        WalletFile::save(path, wallet)?;
    }
    Ok(outcome)
}

/// Refuses, before anything is signed, an order of `amount` that no quorum could certify now:
/// more than the balance f+1 answering authorities agree on (so at least one honest one holds
/// it). A signed order cannot be replaced (FastPay §4.4), so an overspend would block the account.
fn check_affordable(
    wallet: &Wallet,
    authorities: &impl Authorities,
    account: &AccountKey,
    amount: u64,
) -> Result<(), SessionError> {
    let states = balances(authorities, account);
    let committee = authorities.committee();
    match agreed_balance(committee, &states) {
        Some(balance) if i128::from(amount) <= balance => Ok(()),
        Some(balance) => Err(SessionError::Overspend {
            account: hex(account),
            amount,
            balance,
            unit: wallet.hrp().to_owned(),
        }),
        None => Err(SessionError::TooFewAnswers {
            account: hex(account),
            answered: states.len(),
            needed: committee.fault_tolerance() + 1,
        }),
    }
}

/// What funding did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Funded {
    pub txid: Txid,
    /// Authorities that credited the account.
    pub credited_by: usize,
}

/// Moves `amount` of this wallet's coins into `account`: a funding the core must confirm
/// (saved as pending before it is sent), then sent to every authority.
pub fn fund(
    path: &Path,
    wallet: &mut Wallet,
    node: &NodeClient,
    authorities: &impl Authorities,
    account: &AccountKey,
    amount: u64,
    timeout_ms: u64,
) -> Result<Funded, SessionError> {
    let tx = wallet.build_fastpay_funding(account, amount, &mut rand::thread_rng())?;
    let txid = tx.txid();
    let why = match session::submit(path, wallet, node, &tx, timeout_ms)? {
        Submitted::Settled(Outcome::Confirmed(_)) => None,
        Submitted::Settled(Outcome::StillPending { reason }) => Some(reason),
        Submitted::Settled(Outcome::Rejected { reason, .. }) => Some(format!("refused: {reason}")),
        Submitted::Settled(Outcome::Conflicted { .. }) => Some("its coins were spent elsewhere".into()),
        Submitted::Unknown(error) => Some(error.to_string()),
    };
    if let Some(why) = why {
        if wallet.pending_tx(&txid).is_none() {
            // Refused: the coins are back. Kept, marked (module docs): if the node was wrong,
            // these bytes are what the authorities credit.
            wallet.fastpay_mark_refused(account, &txid)?;
            WalletFile::save(path, wallet)?;
        }
        return Err(SessionError::FundingNotConfirmed { txid, why });
    }
    let credited_by = authorities.fund(*account, tx.encode());
    if credited_by >= authorities.committee().quorum() {
        wallet.fastpay_on_credited(account, &txid)?;
        WalletFile::save(path, wallet)?;
    }
    Ok(Funded { txid, credited_by })
}

/// What became of one funding the authorities had not credited.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Announced {
    /// Sent to every authority; this many credited it (a quorum makes it spendable).
    Sent { credited_by: usize },
    /// Its core transaction is still pending in the wallet: `specie wallet sync` first.
    CoreUndecided,
    /// The core does not hold its marker and the wallet no longer waits for it: refused, kept
    /// and marked (asked about again at the next sync; `forget-refused` drops it).
    Refused,
}

/// Sends every funding the core confirmed and a quorum has not credited yet to the authorities;
/// one the core does not hold is marked refused (a refused one it holds after all is announced).
pub fn announce_fundings<L: Ledger + ?Sized>(
    path: &Path,
    wallet: &mut Wallet,
    node: &L,
    authorities: &impl Authorities,
) -> Result<Vec<(AccountKey, Txid, Announced)>, SessionError> {
    let waiting: Vec<(AccountKey, SpecieTransaction)> = wallet
        .fastpay()
        .map(|book| {
            book.accounts()
                .iter()
                .flat_map(|account| {
                    account
                        .fundings()
                        .iter()
                        .filter(|record| !record.credited)
                        .map(|record| (account.key(), SpecieTransaction::from(record.funding.clone())))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut report = vec![];
    for (account, tx) in waiting {
        let txid = tx.txid();
        if wallet.pending_tx(&txid).is_some() {
            report.push((account, txid, Announced::CoreUndecided));
            continue;
        }
        let marker = tx.marker().expect("a funding has a marker");
        if !node.query_uhs(&[marker])?.first().copied().unwrap_or(false) {
            wallet.fastpay_mark_refused(&account, &txid)?;
            report.push((account, txid, Announced::Refused));
            continue;
        }
        wallet.fastpay_restore_refused(&account, &txid)?;
        let credited_by = authorities.fund(account, tx.encode());
        if credited_by >= authorities.committee().quorum() {
            wallet.fastpay_on_credited(&account, &txid)?;
        }
        report.push((account, txid, Announced::Sent { credited_by }));
    }
    WalletFile::save(path, wallet)?;
    Ok(report)
}

/// A FastPay redeem sent to the core: its txid, its amount, and how the submission ended.
pub type Presented = (Txid, u64, Submitted);

/// Builds and submits the FastPay redeem of every certified transfer back to the core that has
/// none yet (each saved as a pending core transaction before it is sent).
pub fn present_redeems(
    path: &Path,
    wallet: &mut Wallet,
    node: &NodeClient,
    timeout_ms: u64,
) -> Result<Vec<Presented>, SessionError> {
    let due: Vec<(AccountKey, u64, u64)> = wallet
        .fastpay()
        .map(|book| {
            book.accounts()
                .iter()
                .flat_map(|account| {
                    account
                        .sent()
                        .iter()
                        .filter(|sent| sent.redeem_due().is_some())
                        .map(|sent| {
                            let order = &sent.certificate.order.order;
                            (account.key(), order.sequence, order.amount)
                        })
                })
                .collect()
        })
        .unwrap_or_default();
    let mut presented = vec![];
    for (account, sequence, amount) in due {
        let tx = wallet.build_fastpay_redeem(&account, sequence)?;
        let submitted = session::submit(path, wallet, node, &tx, timeout_ms)?;
        if let Submitted::Settled(Outcome::Confirmed(_)) = submitted {
            wallet.fastpay_on_redeemed(&account, sequence)?;
            WalletFile::save(path, wallet)?;
        }
        presented.push((tx.txid(), amount, submitted));
    }
    Ok(presented)
}

/// What [`check_redeems`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RedeemsChecked {
    /// Redeems the core holds: done.
    pub held: usize,
    /// Redeems the core does not hold and the wallet no longer waited for: due again, for
    /// [`present_redeems`] to present (the same bytes).
    pub again: Vec<(AccountKey, u64)>,
    /// Value of redeem outputs the core holds that the wallet had dropped (a node had called the
    /// redeem refused), imported again.
    pub restored: u64,
}

/// Asks the core about every redeem built that the wallet's pending machinery no longer waits
/// for and that is not known to be held: held (its marker in the UHS) is done, and its output
/// imported if the core holds it and the wallet had dropped it; not held is due again. Saves.
pub fn check_redeems<L: Ledger + ?Sized>(
    path: &Path,
    wallet: &mut Wallet,
    node: &L,
) -> Result<RedeemsChecked, SessionError> {
    let to_check = wallet.fastpay_redeems_to_check()?;
    let mut checked = RedeemsChecked::default();
    if to_check.is_empty() {
        return Ok(checked);
    }
    let markers: Vec<UhsId> = to_check
        .iter()
        .map(|(_, _, tx)| tx.marker().expect("a redeem has a marker"))
        .collect();
    let held = node.query_uhs(&markers)?;
    for ((account, sequence, tx), held) in to_check.into_iter().zip(held) {
        if !held {
            if wallet.fastpay_redeem_again(&account, sequence)? {
                checked.again.push((account, sequence));
            }
            continue;
        }
        wallet.fastpay_on_redeemed(&account, sequence)?;
        checked.held += 1;
        checked.restored += restore_redeem_output(wallet, node, &tx)?;
    }
    WalletFile::save(path, wallet)?;
    Ok(checked)
}

/// Imports the output of the applied redeem `tx` if the core holds it and the wallet does not
/// know it (only this wallet's key can spend it, so an output the core no longer holds was spent
/// by this wallet). Returns the value imported.
fn restore_redeem_output<L: Ledger + ?Sized>(
    wallet: &mut Wallet,
    node: &L,
    tx: &SpecieTransaction,
) -> Result<u64, SessionError> {
    let txid = tx.txid();
    if wallet.coins().any(|coin| coin.outpoint.txid == txid) {
        return Ok(0);
    }
    let created = tx.created_outputs();
    let ids: Vec<UhsId> = created.iter().map(|created| created.uhs_id).collect();
    let present = node.query_uhs(&ids)?;
    let outputs: Vec<PaidOutput> = created
        .iter()
        .zip(&present)
        .filter(|(created, present)| **present && wallet.owns(&created.output.witness_program_commitment))
        .map(|(created, _)| PaidOutput {
            index: created.outpoint.index,
            output: created.output,
        })
        .collect();
    if outputs.is_empty() {
        return Ok(0);
    }
    let payment = PaymentString::new(txid, outputs);
    Ok(wallet.import_payment(&payment, &ids)?.spendable)
}

/// Pays `amount` from `account` back to a new core address of this wallet ([`pay`]), then
/// presents the certificate to the core ([`present_redeems`]).
pub fn redeem(
    path: &Path,
    wallet: &mut Wallet,
    node: &NodeClient,
    authorities: &impl Authorities,
    account: &AccountKey,
    amount: u64,
    timeout_ms: u64,
) -> Result<(PayOutcome, Vec<Presented>), SessionError> {
    let recipient = wallet.fastpay_redeem_recipient(&mut rand::thread_rng())?;
    let outcome = pay(path, wallet, authorities, account, recipient, amount, Vec::new())?;
    let presented = match outcome {
        PayOutcome::NotFinal(_) => vec![],
        _ => present_redeems(path, wallet, node, timeout_ms)?,
    };
    Ok((outcome, presented))
}

/// Each answering authority's view of `account`: (authority, balance, next sequence number).
pub fn balances(authorities: &impl Authorities, account: &AccountKey) -> Vec<(AuthorityIndex, i128, u64)> {
    let mut states: Vec<_> = authorities
        .account_states(*account, u64::MAX)
        .into_iter()
        .map(|(authority, state)| (authority, state.balance, state.next_sequence))
        .collect();
    states.sort_unstable();
    states
}

/// The balance at least f+1 answering authorities report at least (so at least one honest
/// authority does, whatever f liars say); `None` if fewer than f+1 answered.
pub fn agreed_balance(committee: &Committee, balances: &[(AuthorityIndex, i128, u64)]) -> Option<i128> {
    let mut values: Vec<i128> = balances.iter().map(|(_, balance, _)| *balance).collect();
    values.sort_unstable_by(|a, b| b.cmp(a));
    values.get(committee.fault_tolerance()).copied()
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use specie_fastpay::test_support::SigningCommittee;
    use specie_fastpay::Vote;
    use specie_wallet::PaymentString;

    use super::*;

    /// A core that holds the UHS ids it is given, and takes no transaction.
    #[derive(Default)]
    struct FakeCore {
        held: RefCell<std::collections::BTreeSet<UhsId>>,
    }

    impl Ledger for FakeCore {
        fn submit(&self, _: &[SpecieTransaction], _: u64) -> Result<Vec<specie_wallet::SubmitResult>, ClientError> {
            unreachable!("these tests submit nothing")
        }

        fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError> {
            Ok(ids.iter().map(|id| self.held.borrow().contains(id)).collect())
        }
    }

    /// Authorities that certify every order sent unless told to fail, and remember every order
    /// they were sent and what they hold.
    struct FakeAuthorities {
        signing: SigningCommittee,
        failing: RefCell<bool>,
        sent: RefCell<Vec<Vec<SignedOrder>>>,
        /// What they report for any account: a pending order, and confirmed certificates.
        pending: RefCell<Option<SignedOrder>>,
        confirmed: RefCell<Vec<Certificate>>,
        /// The balance every authority reports for any account.
        balance: RefCell<i128>,
    }

    impl FakeAuthorities {
        fn new() -> FakeAuthorities {
            FakeAuthorities {
                signing: SigningCommittee::deterministic(4, 1),
                failing: RefCell::new(false),
                sent: RefCell::new(vec![]),
                pending: RefCell::new(None),
                confirmed: RefCell::new(vec![]),
                balance: RefCell::new(1000),
            }
        }
    }

    impl Authorities for FakeAuthorities {
        fn committee(&self) -> &Committee {
            &self.signing.committee
        }

        fn chain(&self) -> CommitteeChain {
            CommitteeChain::new(self.signing.committee.clone())
        }

        fn pay_orders(&self, _owner: &SigningKey, orders: Vec<SignedOrder>) -> PayOutcome {
            self.sent.borrow_mut().push(orders.clone());
            if *self.failing.borrow() {
                return PayOutcome::NotFinal("every authority is down".into());
            }
            let certificate = self.signing.final_certificate(&orders[0]);
            self.confirmed.borrow_mut().push(certificate.clone());
            PayOutcome::Settled(certificate)
        }

        fn account_states(&self, account: AccountKey, from_sequence: u64) -> Vec<(AuthorityIndex, AccountState)> {
            let confirmed: Vec<Certificate> = self
                .confirmed
                .borrow()
                .iter()
                .filter(|c| c.order.order.sender == account && c.order.order.sequence >= from_sequence)
                .cloned()
                .collect();
            let pending = self.pending.borrow().clone().map(|order| {
                let vote: Vote = self.signing.vote(0, specie_fastpay::VoteKind::Prepare, 0, &order);
                (order, vote)
            });
            (0..4)
                .map(|authority| {
                    let state = AccountState {
                        balance: *self.balance.borrow(),
                        next_sequence: from_sequence,
                        pending: pending.clone(),
                        confirmed: confirmed.clone(),
                    };
                    (authority, state)
                })
                .collect()
        }

        fn fund(&self, _: AccountKey, _: Vec<u8>) -> usize {
            4
        }
    }

    /// A wallet file with one Byzantine-mode account of the fake committee.
    fn wallet_file(dir: &Path, authorities: &FakeAuthorities) -> (std::path::PathBuf, Wallet, AccountKey) {
        // The wallet's pending fundings and redeems are FastPay's kinds.
        crate::install();
        let mut rng = rand::thread_rng();
        let mut wallet = Wallet::new("usd", false, &mut rng).unwrap();
        let address = wallet.latest_address().unwrap();
        let output = specie_transaction::Output {
            witness_program_commitment: address.witness_program_commitment(),
            value: 100,
        };
        let payment = PaymentString::new(Txid([3; 32]), vec![specie_wallet::PaidOutput { index: 0, output }]);
        wallet.import_payment(&payment, &[]).unwrap();
        wallet.fastpay_use_committee(authorities.committee(), None).unwrap();
        let account = wallet.fastpay_new_account(&mut rng).unwrap();
        let path = dir.join("wallet.json");
        WalletFile::create(&path, &wallet).unwrap();
        (path, wallet, account)
    }

    fn pending_of(wallet: &Wallet, account: &AccountKey) -> Vec<SignedOrder> {
        state_of(wallet, account).pending().to_vec()
    }

    /// The account as the wallet's section holds it.
    fn state_of(wallet: &Wallet, account: &AccountKey) -> FastpayAccount {
        let book = wallet.fastpay_book().unwrap();
        book.account(account).expect("one of the wallet's accounts").clone()
    }

    #[test]
    fn an_order_is_saved_before_it_is_sent_and_sent_again_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        let payee = Recipient::Account(AccountKey([5; 32]));
        *authorities.failing.borrow_mut() = true;
        let outcome = pay(&path, &mut wallet, &authorities, &account, payee, 10, vec![]).unwrap();
        assert!(matches!(outcome, PayOutcome::NotFinal(_)));
        let first = authorities.sent.borrow()[0][0].clone();
        // What is on disk is what was sent.
        let mut restarted = WalletFile::load(&path).unwrap();
        assert_eq!(pending_of(&restarted, &account), vec![first.clone()]);
        // A new payment while it is pending sends the pending order first, never a new one.
        let error = pay(&path, &mut restarted, &authorities, &account, payee, 99, vec![]).unwrap_err();
        assert!(
            matches!(error, SessionError::StillPending { sequence: 0, .. }),
            "{error}"
        );
        assert_eq!(authorities.sent.borrow()[1], vec![first.clone()]);
        *authorities.failing.borrow_mut() = false;
        let outcome = finish_pending(&path, &mut restarted, &authorities, &account).unwrap();
        assert_eq!(
            outcome,
            Some(PayOutcome::Settled(authorities.signing.final_certificate(&first)))
        );
        assert_eq!(authorities.sent.borrow()[2], vec![first]);
        let reloaded = WalletFile::load(&path).unwrap();
        let state = state_of(&reloaded, &account);
        assert_eq!((state.next_sequence(), state.pending().len()), (1, 0));
    }

    #[test]
    fn a_crash_between_saving_and_sending_resends_the_same_order() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        // What `pay` does up to the crash: sign, save; the process dies before sending.
        let signed = wallet
            .fastpay_sign_order(&account, Recipient::Account(AccountKey([5; 32])), 10, vec![])
            .unwrap();
        WalletFile::save(&path, &wallet).unwrap();
        drop(wallet);
        let mut restarted = WalletFile::load(&path).unwrap();
        let outcome = pay(
            &path,
            &mut restarted,
            &authorities,
            &account,
            Recipient::Account(AccountKey([6; 32])),
            20,
            vec![],
        )
        .unwrap();
        let sent = authorities.sent.borrow().clone();
        assert_eq!(
            sent,
            vec![vec![signed], sent[1].clone()],
            "the saved order first, as it is"
        );
        assert_eq!(sent[1][0].order.sequence, 1);
        assert_eq!(sent[1][0].order.amount, 20);
        assert!(matches!(outcome, PayOutcome::Settled(_)));
    }

    #[test]
    fn a_restored_wallet_learns_its_pending_order_and_certificates_from_the_authorities() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        let backup = wallet.clone();
        let payee = Recipient::Account(AccountKey([5; 32]));
        pay(&path, &mut wallet, &authorities, &account, payee, 10, vec![]).unwrap();
        let in_flight = wallet.fastpay_sign_order(&account, payee, 11, vec![]).unwrap();
        *authorities.pending.borrow_mut() = Some(in_flight.clone());
        // The wallet is lost; the backup from before both orders is restored.
        let mut restored = backup;
        WalletFile::save(&path, &restored).unwrap();
        let recovered = recover(&path, &mut restored, &authorities, &account).unwrap();
        assert_eq!(
            recovered,
            Recovered {
                certificates: 1,
                orders: 1
            }
        );
        assert_eq!(pending_of(&restored, &account), vec![in_flight.clone()]);
        // Paying again finishes that order first: no second order for sequence number 1.
        pay(&path, &mut restored, &authorities, &account, payee, 12, vec![]).unwrap();
        let sent = authorities.sent.borrow();
        assert_eq!(sent[1], vec![in_flight]);
        assert_eq!(sent[2][0].order.sequence, 2);
    }

    /// An order over the balance the authorities agree on is refused before it is signed: it
    /// would block the account (FastPay §4.4). Nothing is saved, nothing sent, and the account
    /// pays as before.
    #[test]
    fn an_order_over_the_balance_is_never_signed() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        let payee = Recipient::Account(AccountKey([5; 32]));
        *authorities.balance.borrow_mut() = 380;
        let error = pay(&path, &mut wallet, &authorities, &account, payee, 100_000, vec![]).unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, SessionError::Overspend { balance: 380, .. }),
            "{message}"
        );
        assert!(
            message.contains("nothing was signed") && message.contains("380 usd"),
            "{message}"
        );
        assert!(authorities.sent.borrow().is_empty());
        let on_disk = WalletFile::load(&path).unwrap();
        assert!(pending_of(&on_disk, &account).is_empty() && pending_of(&wallet, &account).is_empty());
        let outcome = pay(&path, &mut wallet, &authorities, &account, payee, 380, vec![]).unwrap();
        assert!(
            matches!(outcome, PayOutcome::Settled(ref c) if c.order.order.sequence == 0),
            "{outcome:?}"
        );
    }

    #[test]
    fn only_a_funded_answer_naming_the_fundings_marker_counts() {
        let marker = UhsId([7; 32]);
        let replies = [
            AuthorityReply::Funded { id: [7; 32] },
            AuthorityReply::Funded { id: [8; 32] },
            AuthorityReply::Funded { id: [7; 32] },
        ];
        assert_eq!(credited_by(&replies, &marker), 2);
    }

    /// A funding whose marker the core does not hold is kept, marked refused (a node may be
    /// wrong; its bytes are what the authorities credit), and announced once the core holds it.
    #[test]
    fn a_funding_the_core_does_not_hold_is_kept_and_announced_once_it_does() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        let imported: Vec<_> = wallet
            .unconfirmed_imports()
            .iter()
            .map(|(outpoint, _)| *outpoint)
            .collect();
        wallet.confirm_imported(&imported);
        let tx = wallet
            .build_fastpay_funding(&account, 60, &mut rand::thread_rng())
            .unwrap();
        wallet.on_confirmed(&tx.txid()).unwrap();
        let core = FakeCore::default();
        let report = announce_fundings(&path, &mut wallet, &core, &authorities).unwrap();
        assert_eq!(report, vec![(account, tx.txid(), Announced::Refused)]);
        let on_disk = WalletFile::load(&path).unwrap();
        let record = &state_of(&on_disk, &account).fundings()[0].clone();
        assert!(record.refused && !record.credited && record.funding.txid() == tx.txid());

        core.held.borrow_mut().insert(tx.marker().unwrap());
        let report = announce_fundings(&path, &mut wallet, &core, &authorities).unwrap();
        assert_eq!(report, vec![(account, tx.txid(), Announced::Sent { credited_by: 4 })]);
        let on_disk = WalletFile::load(&path).unwrap();
        let record = &state_of(&on_disk, &account).fundings()[0].clone();
        assert!(record.credited && !record.refused);
    }

    /// A redeem a node called refused (the core wallet dropped it and its output) is presented
    /// again while the core does not hold it; once it does, it is done and its output is back.
    #[test]
    fn a_redeem_dropped_on_a_nodes_word_is_due_again_or_restored() {
        let dir = tempfile::tempdir().unwrap();
        let authorities = FakeAuthorities::new();
        let (path, mut wallet, account) = wallet_file(dir.path(), &authorities);
        let recipient = wallet.fastpay_redeem_recipient(&mut rand::thread_rng()).unwrap();
        pay(&path, &mut wallet, &authorities, &account, recipient, 30, vec![]).unwrap();
        let redeem = wallet.build_fastpay_redeem(&account, 0).unwrap();
        wallet.on_rejected(&redeem.txid()).unwrap(); // a node's word
        let core = FakeCore::default();
        let checked = check_redeems(&path, &mut wallet, &core).unwrap();
        assert_eq!(checked.again, vec![(account, 0)]);
        let sent = &state_of(&wallet, &account).sent()[0].clone();
        assert!(sent.redeem_due().is_some(), "presented again by present_redeems");
        assert_eq!(wallet.build_fastpay_redeem(&account, 0).unwrap(), redeem);
        wallet.on_rejected(&redeem.txid()).unwrap(); // refused once more, wrongly
        core.held.borrow_mut().insert(redeem.marker().unwrap());
        core.held
            .borrow_mut()
            .extend(redeem.created_outputs().iter().map(|created| created.uhs_id));
        let checked = check_redeems(&path, &mut wallet, &core).unwrap();
        assert_eq!((checked.held, checked.restored, checked.again.len()), (1, 30, 0));
        let on_disk = WalletFile::load(&path).unwrap();
        assert!(state_of(&on_disk, &account).sent()[0].redeemed);
        assert_eq!(on_disk.balance().spendable, 30);
        assert_eq!(
            check_redeems(&path, &mut wallet, &core).unwrap(),
            RedeemsChecked::default()
        );
    }
}
