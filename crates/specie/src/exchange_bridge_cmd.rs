//! `specie exchange deposit|withdraw`: value between a currency's core wallet and the trader's
//! exchange account, through that currency's core.
//!
//! A deposit is a core funding to the exchange's bridge key committing to the account and its
//! key; it is recorded in the wallet's exchange section before it is sent, sent and made final on
//! the core, then handed to the exchange, which credits each funding once. A withdrawal is a
//! `Withdraw` transaction to a fresh address of the core wallet; recorded before it is sent, then
//! its payout (signed by the exchange's bridge key) is fetched, presented to the core (which pays
//! it once) and imported into the core wallet. Whatever a crash or a lost connection interrupts
//! stays recorded and is finished by the next `specie exchange` command on that wallet
//! ([`finish_under_way`]): never lost, never credited or paid twice.
//!
//! Nothing is dropped on a remote's word. The exchange's bridge key is pinned in the wallet
//! (`Trader::open` checks it), and a payout, a withdrawal's or a refund's, is checked against it
//! and against what is owed (serial, address, amount) before it is presented or the withdrawal
//! or deposit is taken as paid. A funding its core refused is kept, marked refused, once the core
//! does not hold its marker either: every later command asks that core again and hands it in if
//! it does; only `specie exchange forget-refused --yes` drops it.
//!
//! Before paying anything, a deposit checks that the exchange could credit it: the account must
//! be free or this wallet's key's (a funding committing to an account another key holds could
//! never be credited). That check is the wallet's courtesy, not the guarantee: a funding the
//! exchange can never credit is refunded by the exchange to the owner of its first input (the
//! core wallet that paid it), and the refund's payout is presented to the core and imported here
//! like a withdrawal's.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use specie_exchange::{deposit_commitment, Operation};
use specie_exchange_service::client::{
    check_payout, owed_by_refund, owed_by_withdrawal, DepositAnswer, Refund, TxFate,
};
use specie_wallet::exchange::{ExchangeDeposit, ExchangeWithdrawal};
use specie_wallet::session::{self, Submitted};
use specie_wallet::{NodeClient, Outcome, PaidOutput, PaymentString, SubmitStatus, Wallet, WalletFile, WalletLock};

use crate::exchange_trader_cmd::{same_file, Trader, TraderArgs};
use crate::wallet_cmd::WALLET_LOCK_WAIT_MS;

/// How long a core may take to make a funding or a payout final.
const CORE_SUBMIT_TIMEOUT_MS: u64 = 10_000;

/// A core wallet other than the trader's, locked for the command.
struct OtherWallet {
    path: PathBuf,
    wallet: Wallet,
    _lock: WalletLock,
}

/// The core wallet at `path`, unless it is the trader's own (then `None`: use the trader's).
fn open_other(trader: &Trader, path: Option<&Path>) -> anyhow::Result<Option<OtherWallet>> {
    let Some(path) = path.filter(|path| !same_file(path, &trader.path)) else {
        return Ok(None);
    };
    let lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        eprintln!("waiting for another command using {} to finish…", path.display())
    })?;
    Ok(Some(OtherWallet {
        path: path.to_path_buf(),
        wallet: WalletFile::load(path)?,
        _lock: lock,
    }))
}

/// The core wallet to use: the other one if open, else the trader's.
fn core<'a>(trader: &'a mut Trader, other: &'a mut Option<OtherWallet>) -> (&'a Path, &'a mut Wallet) {
    match other {
        Some(other) => (&other.path, &mut other.wallet),
        None => (&trader.path, &mut trader.wallet),
    }
}

/// Checks that the core wallet holds the currency `asset`.
fn check_currency(path: &Path, wallet: &Wallet, asset: &str) -> anyhow::Result<()> {
    if wallet.hrp() != asset {
        bail!(
            "{} is a {} wallet, not a {asset} one: pass the {asset} wallet with --core-wallet",
            path.display(),
            wallet.hrp()
        );
    }
    Ok(())
}

/// `specie exchange deposit`: core coins of `asset` into the exchange account (opened by the
/// first deposit).
pub fn deposit(args: &TraderArgs, core_wallet: Option<&Path>, asset: &str, amount: u64) -> anyhow::Result<()> {
    if amount == 0 {
        bail!("--amount: a deposit is more than 0");
    }
    let mut trader = Trader::open(args, true)?;
    trader.info.asset(asset)?;
    check_room(&trader)?;
    let mut other = open_other(&trader, core_wallet)?;
    let (bridge, id, key) = (trader.bridge(), trader.id(), trader.key().verifying_key().to_bytes());
    check_creditable(&trader, id, &key)?;
    let (tx, node_url) = {
        let (path, wallet) = core(&mut trader, &mut other);
        check_currency(path, wallet, asset)?;
        let tx = wallet.build_offline_funding(bridge, deposit_commitment(id, &key), amount, &mut rand::thread_rng())?;
        (tx, wallet.node_url().to_string())
    };
    trader.account_mut().deposits.push(ExchangeDeposit {
        asset: asset.to_string(),
        node_url,
        transaction: tx.clone(),
        refused: false,
    });
    // Recorded before the funding can leave the process (with it, if one wallet holds both).
    trader.save()?;
    let (path, wallet) = core(&mut trader, &mut other);
    let client = session::client_for(wallet, None).context(
        "the funding was not sent; it is kept: run any `specie exchange` command on this wallet later to finish it",
    )?;
    match session::submit(path, wallet, &client, &tx, CORE_SUBMIT_TIMEOUT_MS)? {
        Submitted::Settled(Outcome::Confirmed(_)) => {}
        Submitted::Settled(Outcome::StillPending { reason }) => {
            bail!("the core has not made the funding final yet ({reason}); it is kept: run any `specie exchange` command on this wallet later to finish it")
        }
        Submitted::Unknown(error) => {
            bail!("whether the core received the funding is unknown ({error}); it is kept: run any `specie exchange` command on this wallet later to finish it")
        }
        Submitted::Settled(refused) => {
            // The core wallet double-checked the refusal against the UHS; kept all the same,
            // marked (module docs): if the node was wrong, these bytes are what the exchange
            // credits.
            let txid = tx.txid();
            for deposit in &mut trader.account_mut().deposits {
                deposit.refused |= deposit.transaction.txid() == txid;
            }
            trader.save()?;
            bail!("the core did not take the funding: {refused}; its coins are released in the core wallet. {KEPT_REFUSED}")
        }
    }
    let index = trader.account().deposits.len() - 1;
    if let DepositAnswer::Refunded(refund) = hand_in(&mut trader, index)? {
        check_refund(&trader, index, &refund)?;
        let (path, wallet) = core(&mut trader, &mut other);
        let shown = path.display().to_string();
        let back = take_refund(path, wallet, &refund)?;
        trader.account_mut().deposits.remove(index);
        trader.save()?;
        bail!(
            "the exchange could not credit the deposit ({}) and refunded the funding: {back} {asset} spendable again in {shown}",
            refund.reason
        );
    }
    println!("deposited {amount} {asset} into account {id} (core txid {})", tx.txid());
    Ok(())
}

/// What a refused deposit's message says of it.
const KEPT_REFUSED: &str =
    "The deposit is kept, marked refused (a wrong node may have said so): every `specie exchange` command \
     asks its core again and hands it in if the core holds it; `specie exchange forget-refused --yes` drops it";

/// Refuses a new deposit or withdrawal when the wallet keeps the most it may under way.
fn check_room(trader: &Trader) -> anyhow::Result<()> {
    if !trader.account().has_room() {
        bail!(
            "{} keeps {} deposits and withdrawals under way, the most it may: finish them first (any `specie exchange` \
             command tries), or drop refused deposits with `specie exchange forget-refused --yes`",
            trader.path.display(),
            specie_wallet::exchange::EXCHANGE_PENDING_MAX
        );
    }
    Ok(())
}

/// Checks that `refund` is the refund of deposit `index`: the pinned bridge key's payout of the
/// funding's amount to its first input's owner, under the refund's id. Anything else is not
/// taken back, and the deposit is kept.
fn check_refund(trader: &Trader, index: usize, refund: &Refund) -> anyhow::Result<()> {
    let deposit = &trader.account().deposits[index];
    let owed = owed_by_refund(trader.info.asset(&deposit.asset)?, &deposit.transaction)?;
    check_payout(&refund.payout, &trader.bridge(), &owed).with_context(|| {
        format!(
            "the exchange answered the deposit of {} (funding {}) with a refund that is not its refund; the deposit is kept",
            deposit.asset,
            deposit.transaction.txid()
        )
    })
}

/// Refuses, before anything is paid, a deposit the exchange could never credit: one to an
/// account the exchange holds under another key.
fn check_creditable(trader: &Trader, id: u64, key: &[u8; 32]) -> anyhow::Result<()> {
    match trader.client.account(id)? {
        Some(state) if state.key != *key => bail!(
            "the exchange at {} holds account {id} under another key than this wallet's, so it could never credit a deposit to it; nothing was paid (this wallet's exchange account is not the one on the exchange: use the wallet that holds it)",
            trader.client.urls()
        ),
        _ => Ok(()),
    }
}

/// Hands deposit `index` (confirmed by its core) to the exchange; removed once credited (a
/// refunded one is removed by the caller, once the refund is taken back).
fn hand_in(trader: &mut Trader, index: usize) -> anyhow::Result<DepositAnswer> {
    let deposit = trader.account().deposits[index].clone();
    let key = trader.key().verifying_key().to_bytes();
    let answer = trader
        .client
        .deposit(&deposit.asset, &deposit.transaction, trader.id(), &key)
        .context("the core has the funding but the exchange did not credit it; it is kept: run any `specie exchange` command on this wallet to hand it in again")?;
    if matches!(answer, DepositAnswer::Credited | DepositAnswer::CreditedBefore) {
        trader.account_mut().deposits.remove(index);
        trader.save()?;
    }
    Ok(answer)
}

/// The payment string of a payout's one output.
fn payout_payment(payout: &specie_transaction::SpecieTransaction) -> PaymentString {
    PaymentString::new(
        payout.txid(),
        vec![PaidOutput {
            index: 0,
            output: payout.outputs()[0],
        }],
    )
}

/// Takes a refunded funding back into `wallet` (the core wallet that paid it): the refund's
/// payout presented to the core (which pays it once, however often presented), then its coin
/// imported. Returns the value made spendable.
fn take_refund(path: &Path, wallet: &mut Wallet, refund: &Refund) -> anyhow::Result<u64> {
    let kept = "the deposit is kept: run any `specie exchange` command on this wallet later to take the refund back";
    let node = session::client_for(wallet, None).with_context(|| format!("the core was not reached; {kept}"))?;
    let status = node
        .submit(std::slice::from_ref(&refund.payout), CORE_SUBMIT_TIMEOUT_MS)
        .with_context(|| format!("the core did not take the exchange's refund; {kept}"))?
        .remove(0)
        .status;
    let report = session::import(path, wallet, &node, &payout_payment(&refund.payout).to_string())?;
    if report.imported.spendable == 0 && report.imported.already_known == 0 {
        bail!(
            "the core has not paid the exchange's refund yet ({}); {kept}",
            status.reason()
        );
    }
    Ok(report.imported.spendable)
}

/// A refund an earlier deposit left: taken back into the trader's wallet if that wallet paid
/// the funding; otherwise presented to the core, with the payment string the paying wallet
/// imports (`specie wallet import`).
fn finish_refund(trader: &mut Trader, index: usize, refund: &Refund) -> anyhow::Result<()> {
    check_refund(trader, index, refund)?;
    let deposit = trader.account().deposits[index].clone();
    let payment = payout_payment(&refund.payout);
    if trader.wallet.hrp() == deposit.asset && trader.wallet.receivable_outputs(&payment).is_ok() {
        let back = take_refund(&trader.path.clone(), &mut trader.wallet, refund)?;
        eprintln!(
            "an earlier deposit of {} {} could not be credited by the exchange ({}) and was refunded: {back} spendable again",
            refund.amount, deposit.asset, refund.reason
        );
    } else {
        let node = deposit_node(trader, &deposit)?;
        let status = node
            .submit(std::slice::from_ref(&refund.payout), CORE_SUBMIT_TIMEOUT_MS)?
            .remove(0)
            .status;
        let created: Vec<_> = payment.created_outputs().iter().map(|created| created.uhs_id).collect();
        if !node.query_uhs(&created)?.iter().all(|present| *present) {
            bail!(
                "the core has not paid the exchange's refund of an earlier deposit yet ({}); it is kept: run this again later",
                status.reason()
            );
        }
        eprintln!(
            "an earlier deposit of {} {} could not be credited by the exchange ({}) and was refunded to the {} wallet that paid it: import it there with `specie wallet --wallet <that wallet> import {payment}`",
            refund.amount, deposit.asset, refund.reason, deposit.asset
        );
    }
    trader.account_mut().deposits.remove(index);
    trader.save()
}

/// The core an earlier deposit's funding went to: checked to be the trader's wallet's network
/// when that wallet holds the deposit's currency (a node of another network would refuse the
/// funding, and the deposit would be dropped on its word).
fn deposit_node(trader: &mut Trader, deposit: &ExchangeDeposit) -> anyhow::Result<NodeClient> {
    if trader.wallet.hrp() == deposit.asset {
        return Ok(session::client_for(&mut trader.wallet, Some(&deposit.node_url))?);
    }
    Ok(NodeClient::new(&deposit.node_url)?)
}

/// Whether the core at `node` holds the marker of `funding`: it was applied.
fn core_holds(node: &NodeClient, funding: &specie_transaction::SpecieTransaction) -> anyhow::Result<bool> {
    let marker = funding.marker().context("a funding has a marker")?;
    Ok(node.query_uhs(&[marker])?.first().copied().unwrap_or(false))
}

/// Finishes a deposit an earlier command left: handed in if its core has it; sent to its core
/// again if not (the same signed funding: it is made final or refused, never paid twice); if the
/// core refuses it and does not hold its marker, kept and marked refused (module docs).
fn finish_deposit(trader: &mut Trader, index: usize) -> anyhow::Result<()> {
    match hand_in(trader, index)? {
        DepositAnswer::Unconfirmed => {}
        DepositAnswer::Refunded(refund) => return finish_refund(trader, index, &refund),
        _ => {
            eprintln!("an earlier deposit was credited");
            return Ok(());
        }
    }
    let deposit = trader.account().deposits[index].clone();
    let node = deposit_node(trader, &deposit)?;
    let status = node
        .submit(std::slice::from_ref(&deposit.transaction), CORE_SUBMIT_TIMEOUT_MS)?
        .remove(0)
        .status;
    match status {
        SubmitStatus::Confirmed => match hand_in(trader, index)? {
            DepositAnswer::Unconfirmed => {
                bail!("the core confirmed an earlier deposit's funding but the exchange does not see it yet: run this again")
            }
            DepositAnswer::Refunded(refund) => return finish_refund(trader, index, &refund),
            _ => eprintln!("an earlier deposit was sent to its core again and credited"),
        },
        SubmitStatus::Invalid { .. } | SubmitStatus::Rejected { .. } | SubmitStatus::Malformed { .. } => {
            // "Refused" may mean "applied already" (its inputs are gone because it spent them).
            if core_holds(&node, &deposit.transaction)? {
                bail!(
                    "the core holds an earlier deposit's funding but the exchange does not see it yet: run this again"
                )
            }
            eprintln!(
                "an earlier deposit's funding ({}) was refused by its core ({}): nothing was spent as far as it says \
                 (`specie wallet sync` releases the coins). {KEPT_REFUSED}",
                deposit.transaction.txid(),
                status.reason()
            );
            trader.account_mut().deposits[index].refused = true;
            trader.save()?;
        }
        other => bail!(
            "an earlier deposit is not final on its core yet ({}): run this again later",
            other.reason()
        ),
    }
    Ok(())
}

/// `specie exchange withdraw`: `amount` of `asset` out of the exchange into the core wallet.
pub fn withdraw(args: &TraderArgs, core_wallet: Option<&Path>, asset: &str, amount: u64) -> anyhow::Result<()> {
    if amount == 0 {
        bail!("--amount: a withdrawal is more than 0");
    }
    let mut trader = Trader::open(args, false)?;
    let asset_id = trader.info.asset(asset)?;
    check_room(&trader)?;
    let mut other = open_other(&trader, core_wallet)?;
    let (core_path, address) = {
        let (path, wallet) = core(&mut trader, &mut other);
        check_currency(path, wallet, asset)?;
        let address = wallet.new_address(&mut rand::thread_rng())?;
        // The address's key is kept before anything pays it.
        WalletFile::save(path, wallet)?;
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        // What the payout's one output pays (the exchange's `address` is the core's witness
        // program commitment, as the bridge signs it).
        (path, address.witness_program_commitment())
    };
    let operation = Operation::Withdraw {
        asset: asset_id,
        amount,
        address,
    };
    let (sequence, fate) = trader.sign_and_submit(operation, |account, sequence, bytes| {
        account.withdrawals.push(ExchangeWithdrawal {
            asset: asset.to_string(),
            sequence,
            amount,
            transaction: bytes.to_vec(),
            core_wallet: core_path.display().to_string(),
        })
    })?;
    // A refusal is taken only if the exchange executed no such withdrawal either (a replica's
    // answer may be behind): otherwise it is paid out like any other.
    let executed =
        matches!(fate, TxFate::Refused(_)) && trader.client.withdrawal(trader.id(), sequence).ok().flatten().is_some();
    if let (TxFate::Refused(reason), false) = (&fate, executed) {
        trader.account_mut().withdrawals.retain(|w| w.sequence != sequence);
        trader.save()?;
        bail!(
            "withdrawal of {amount} {asset}: refused by the exchange: {}",
            trader.in_words(reason)
        );
    }
    let index = trader.account().withdrawals.len() - 1;
    let paid = pay_out(&mut trader, &mut other, index)?;
    println!(
        "withdrew {amount} {asset}: {paid} now spendable in {}",
        core_path.display()
    );
    Ok(())
}

/// Presents withdrawal `index`'s payout to its core and imports it into the core wallet
/// (`other`, or the trader's own); removed once the wallet holds the coin. Returns the value
/// made spendable.
fn pay_out(trader: &mut Trader, other: &mut Option<OtherWallet>, index: usize) -> anyhow::Result<u64> {
    let withdrawal = trader.account().withdrawals[index].clone();
    let kept = "the withdrawal is kept: run any `specie exchange` command on this wallet later to finish it";
    let payout = trader
        .client
        .withdrawal(trader.id(), withdrawal.sequence)?
        .context("the exchange executed no such withdrawal")?;
    // Only the payout of this very withdrawal, by the pinned bridge key, pays it (an older one
    // of this wallet's would be "already known" to the import below).
    let owed = owed_by_withdrawal(&withdrawal.transaction)?;
    check_payout(&payout, &trader.bridge(), &owed)
        .with_context(|| format!("the exchange served a payout that does not pay this withdrawal; {kept}"))?;
    let (path, wallet) = core(trader, other);
    let node = session::client_for(wallet, None).with_context(|| format!("the core was not reached; {kept}"))?;
    // Presented before (a crash after it): refused as paid, and the import below finds it.
    let status = node
        .submit(std::slice::from_ref(&payout), CORE_SUBMIT_TIMEOUT_MS)
        .with_context(|| format!("the core did not take the payout; {kept}"))?
        .remove(0)
        .status;
    let report = session::import(path, wallet, &node, &payout_payment(&payout).to_string())?;
    if report.imported.spendable == 0 && report.imported.already_known == 0 {
        bail!("the core has not paid the payout yet ({}); {kept}", status.reason());
    }
    trader.account_mut().withdrawals.remove(index);
    trader.save()?;
    Ok(report.imported.spendable)
}

/// Finishes a withdrawal an earlier command left: its transaction sent again if the exchange
/// has no such withdrawal (refused then if it was used: then it was never executed, and it is
/// dropped), then paid out.
fn finish_withdrawal(trader: &mut Trader, index: usize) -> anyhow::Result<()> {
    let withdrawal = trader.account().withdrawals[index].clone();
    if trader.client.withdrawal(trader.id(), withdrawal.sequence)?.is_none() {
        let signed = specie_codec::decode_bounded(
            "exchange transaction",
            &withdrawal.transaction,
            specie_exchange::SIGNED_TRANSACTION_BYTES_MAX,
            specie_exchange::SignedTransaction::decode_from,
        )?;
        if let TxFate::Refused(reason) = trader.client.submit(&[signed])?.remove(0) {
            if trader.client.withdrawal(trader.id(), withdrawal.sequence)?.is_none() {
                eprintln!(
                    "an earlier withdrawal of {} {} was refused by the exchange ({}): dropped",
                    withdrawal.amount,
                    withdrawal.asset,
                    trader.in_words(&reason)
                );
                trader.account_mut().withdrawals.remove(index);
                return trader.save();
            }
        }
    }
    let path = PathBuf::from(&withdrawal.core_wallet);
    let mut other = open_other(trader, Some(&path))?;
    let paid = pay_out(trader, &mut other, index)?;
    eprintln!(
        "an earlier withdrawal of {} {} was paid: {paid} now spendable in {}",
        withdrawal.amount,
        withdrawal.asset,
        path.display()
    );
    Ok(())
}

/// Asks the core of refused deposit `index` again: true (and no longer marked) if it holds the
/// funding after all. A core that cannot be asked leaves it as it is, said on stderr.
fn core_took_refused(trader: &mut Trader, index: usize) -> bool {
    let deposit = trader.account().deposits[index].clone();
    let held = deposit_node(trader, &deposit).and_then(|node| core_holds(&node, &deposit.transaction));
    match held {
        Ok(true) => {
            eprintln!(
                "an earlier deposit's funding ({}) that its core had refused is held by the core: handing it in",
                deposit.transaction.txid()
            );
            trader.account_mut().deposits[index].refused = false;
            true
        }
        Ok(false) => false,
        Err(error) => {
            eprintln!(
                "warning: an earlier deposit's refused funding ({}) was not checked again: {error:#}",
                deposit.transaction.txid()
            );
            false
        }
    }
}

/// Finishes every deposit and withdrawal earlier commands left under way, oldest first; a
/// refused deposit only if its core holds it after all.
pub fn finish_under_way(trader: &mut Trader) -> anyhow::Result<()> {
    let mut index = 0;
    while index < trader.account().deposits.len() {
        if trader.account().deposits[index].refused && !core_took_refused(trader, index) {
            index += 1;
            continue;
        }
        let before = trader.account().deposits.len();
        finish_deposit(trader, index)?;
        if trader.account().deposits.len() == before {
            index += 1; // kept, marked refused
        }
    }
    while !trader.account().withdrawals.is_empty() {
        finish_withdrawal(trader, 0)?;
    }
    Ok(())
}

/// `specie exchange forget-refused`: drops the deposits marked refused, for good.
pub fn forget_refused(args: &TraderArgs, yes: bool) -> anyhow::Result<()> {
    if !yes {
        bail!(
            "this drops every deposit marked refused for good; if a core took one after all, its value is lost: \
             run any `specie exchange` command first (it asks the cores again), then add --yes"
        );
    }
    let path = &args.wallet;
    let _lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        eprintln!("waiting for another command using {} to finish…", path.display())
    })?;
    let mut wallet = WalletFile::load(path)?;
    let forgotten = wallet.exchange_mut().map_or(0, |account| account.forget_refused());
    WalletFile::save(path, &wallet)?;
    println!("forgot {forgotten} refused deposits");
    Ok(())
}
