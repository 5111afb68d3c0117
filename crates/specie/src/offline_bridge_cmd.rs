//! Value between a core wallet and a device, through the online core: `specie offline device
//! fund-from-core` (an offline funding, then tokens) and `deposit --wallet` (payouts, then core
//! coins in the wallet).
//!
//! Before paying, `fund-from-core` checks that the authority could issue the funding (its amount
//! makes at most `TOKENS_PER_FUNDING_MAX` tokens of the ring's denominations; the owners are the
//! device's keys the authority certified). A funding the authority can never issue anyway (built
//! elsewhere, say) is refunded by the authority to the funding's first input's owner: its payout
//! is presented to the core and imported into the wallet.
//!
//! Nothing is dropped on a remote's word: a refund is taken only if it is the funding's refund
//! (`check_refund_payout`), a funding the core refused is kept beside the device
//! (`DEVICE.funding.refused-TXID`), and a deposit paid out to the core stays pending on the
//! device until the wallet holds its coin (the authority answers it again with the same payout).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde_json::json;
use specie_codec::Encode;
use specie_offline::PublicKey;
use specie_offline_service::device::{check_refund_payout, AuthorityClient, CoreFunded, DeviceFile, PaidOut};
use specie_transaction::{offline_owners_digest, SpecieTransaction};
use specie_wallet::session::{self, Submitted};
use specie_wallet::{Outcome, PaidOutput, PaymentString, WalletFile, WalletLock};

use crate::wallet_cmd::WALLET_LOCK_WAIT_MS;

/// How long the node may take to make a funding or payout final.
const SUBMIT_TIMEOUT_MS: u64 = 10_000;

/// The funding the core may have confirmed and the authority not yet credited, beside the
/// device file: `{"transaction": hex, "owners": [hex]}`.
fn funding_path(device: &Path) -> PathBuf {
    let mut name = device.as_os_str().to_owned();
    name.push(".funding");
    PathBuf::from(name)
}

/// Locks the core wallet at `path`, unless it is the one the device is kept in (locked already,
/// by this very command).
fn lock_wallet(file: &DeviceFile, path: &Path) -> anyhow::Result<Option<WalletLock>> {
    let same = |kept: &Path| match (std::fs::canonicalize(kept), std::fs::canonicalize(path)) {
        (Ok(kept), Ok(path)) => kept == path,
        _ => kept == path,
    };
    if file.wallet().is_some_and(same) {
        return Ok(None);
    }
    Ok(Some(WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        eprintln!("waiting for another command using {} to finish…", path.display())
    })?))
}

/// A funding kept beside the device: the core transaction (hex) and the owners it commits to.
fn read_kept_funding(path: &Path) -> anyhow::Result<Option<(String, Vec<PublicKey>)>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let kept: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is damaged", path.display()))?;
    let transaction = kept["transaction"].as_str().context("no transaction")?.to_string();
    let owners = kept["owners"]
        .as_array()
        .context("no owners")?
        .iter()
        .map(|owner| {
            let bytes = hex::decode(owner.as_str().unwrap_or_default())?;
            <[u8; 32]>::try_from(bytes).map_err(|_| anyhow::anyhow!("an owner is not 32 bytes"))
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .with_context(|| format!("{} is damaged", path.display()))?;
    Ok(Some((transaction, owners)))
}

/// Pays `amount` from the core wallet into an offline funding for fresh keys of the device,
/// waits for the core to confirm it, then has the authority issue the tokens. A funding kept
/// from an earlier run (confirmed, not yet credited) is handed in first, instead.
pub fn fund_from_core(
    file: &mut DeviceFile,
    authority: &AuthorityClient,
    wallet_path: &Path,
    node: Option<&str>,
    amount: u64,
) -> anyhow::Result<()> {
    let kept_path = funding_path(file.path());
    if let Some((transaction, owners)) = read_kept_funding(&kept_path)? {
        // Held in case the funding is refunded into the wallet.
        let _lock = lock_wallet(file, wallet_path)?;
        let funded = authority.fund_from_core(&mut file.device, &transaction, &owners)?;
        let funded = received(file, wallet_path, node, &kept_path, funded)?;
        println!(
            "an earlier funding was handed in: {funded} received; balance {} (run again to fund {amount})",
            file.device.balance()
        );
        return Ok(());
    }
    let _lock = lock_wallet(file, wallet_path)?;
    // Refused here, before anything is paid, if the authority could never issue it.
    let split = authority.funding_split(amount)?;
    let owners = file.device.funding_owners(split)?;
    file.save()?;
    // Read after the device is saved: a wallet that keeps the device must keep its latest state.
    let mut wallet = WalletFile::load(wallet_path)?;
    let client = session::client_for(&mut wallet, node)?;
    let tx = wallet.build_offline_funding(
        authority.bridge()?,
        offline_owners_digest(&owners),
        amount,
        &mut rand::thread_rng(),
    )?;
    let transaction = hex::encode(tx.encode());
    let owners_hex: Vec<String> = owners.iter().map(hex::encode).collect();
    let kept = json!({"transaction": transaction, "owners": owners_hex}).to_string();
    specie_wallet::write_file_atomically(&kept_path, kept.as_bytes(), true)?;
    match session::submit(wallet_path, &mut wallet, &client, &tx, SUBMIT_TIMEOUT_MS)? {
        Submitted::Settled(Outcome::Confirmed(_)) => {}
        Submitted::Settled(Outcome::StillPending { reason }) => {
            bail!("the core has not made the funding final yet ({reason}): run this again later")
        }
        Submitted::Unknown(error) => {
            bail!(
                "whether the core received the funding is unknown ({error}): run `specie wallet sync`, then this again"
            )
        }
        Submitted::Settled(refused) => {
            // Kept, under another name (so that the next run funds anew): if the node was
            // wrong, these bytes are what the authority issues tokens for.
            let mut archived = kept_path.as_os_str().to_owned();
            archived.push(format!(".refused-{}", tx.txid()));
            std::fs::rename(&kept_path, &archived)?;
            bail!(
                "the core did not take the funding: {refused}; the wallet's coins are released. The funding is kept \
                 as {}: should the core hold it after all, rename it back to {} and run this again to hand it in",
                PathBuf::from(&archived).display(),
                kept_path.display()
            )
        }
    }
    let funded = authority
        .fund_from_core(&mut file.device, &transaction, &owners)
        .context("the core confirmed the funding but the authority did not credit it: run this again to hand it in")?;
    let funded = received(file, wallet_path, node, &kept_path, funded)?;
    println!(
        "funded {funded} from the core (txid {}); balance {}",
        tx.txid(),
        file.device.balance()
    );
    Ok(())
}

/// What the authority made of a funding handed in: tokens (the device saved, the kept funding
/// removed; their value returned), or a refund (an error, once the refund's payout is presented
/// to the core and its coin imported into the wallet, or its payment string printed if the
/// wallet does not hold the key it pays).
fn received(
    file: &mut DeviceFile,
    wallet_path: &Path,
    node: Option<&str>,
    kept_path: &Path,
    funded: CoreFunded,
) -> anyhow::Result<u64> {
    let (reason, payout) = match funded {
        CoreFunded::Funded(value) => {
            file.save()?;
            std::fs::remove_file(kept_path)?;
            return Ok(value);
        }
        CoreFunded::Refunded { reason, payout } => (reason, *payout),
    };
    // Only the funding's own refund ends it (a payout of anything else would be "already known").
    let (funding, _) = read_kept_funding(kept_path)?.context("the funding kept beside the device is gone")?;
    check_refund_payout(&payout, &funding)?;
    let mut wallet = WalletFile::load(wallet_path)?;
    let kept = "the funding is kept beside the device: run this again to take the refund back";
    let client = session::client_for(&mut wallet, node).with_context(|| format!("the core was not reached; {kept}"))?;
    client
        .submit(std::slice::from_ref(&payout), SUBMIT_TIMEOUT_MS)
        .with_context(|| format!("the core did not take the offline authority's refund; {kept}"))?;
    let payment = PaymentString::new(
        payout.txid(),
        vec![PaidOutput {
            index: 0,
            output: payout.outputs()[0],
        }],
    );
    let back = match wallet.receivable_outputs(&payment) {
        Ok(_) => {
            let report = session::import(wallet_path, &mut wallet, &client, &payment.to_string())?;
            if report.imported.spendable == 0 && report.imported.already_known == 0 {
                bail!("the core has not paid the offline authority's refund yet; {kept}");
            }
            format!(
                "{} spendable again in {}",
                payout.outputs()[0].value,
                wallet_path.display()
            )
        }
        Err(_) => {
            let created: Vec<_> = payment.created_outputs().iter().map(|created| created.uhs_id).collect();
            if !client.query_uhs(&created)?.iter().all(|present| *present) {
                bail!("the core has not paid the offline authority's refund yet; {kept}");
            }
            let value = payout.outputs()[0].value;
            format!("{value} paid back to the wallet that paid the funding: import it there with `specie wallet --wallet <that wallet> import {payment}`")
        }
    };
    std::fs::remove_file(kept_path)?;
    bail!("the offline authority could not issue tokens for the funding ({reason}) and refunded it: {back}")
}

/// Deposits every token held, paid out to a new address of the core wallet; submits the payouts
/// to the node and credits them to the wallet. A deposit stays pending on the device until the
/// wallet holds its coin; one paid out elsewhere (an earlier `deposit --defund-to`) is left for
/// that command.
pub fn deposit_to_wallet(
    file: &mut DeviceFile,
    authority: &AuthorityClient,
    wallet_path: &Path,
    node: Option<&str>,
) -> anyhow::Result<()> {
    let _lock = lock_wallet(file, wallet_path)?;
    let mut wallet = WalletFile::load(wallet_path)?;
    let client = session::client_for(&mut wallet, node)?;
    let address = wallet.new_address(&mut rand::thread_rng())?;
    WalletFile::save(wallet_path, &wallet)?;
    file.device.deposit_all(address.pubkey().serialize(), true);
    file.save()?;
    let deposited = authority.deposit_pending(&mut file.device)?;
    file.save()?;
    // Read again after the device is saved (see fund_from_core).
    let mut wallet = WalletFile::load(wallet_path)?;
    let (ours, elsewhere): (Vec<&PaidOut>, Vec<&PaidOut>) = deposited
        .payouts
        .iter()
        .partition(|paid| wallet.owns(&paid.payout.address()));
    let txs: Vec<SpecieTransaction> = ours
        .iter()
        .map(|paid| SpecieTransaction::OfflinePayout(paid.payout.clone()))
        .collect();
    let results = match txs.is_empty() {
        true => Vec::new(),
        false => client
            .submit(&txs, SUBMIT_TIMEOUT_MS)
            .context("the core did not take the payouts; the deposits stay pending on the device: run this again")?,
    };
    let mut credited = 0;
    for ((paid, tx), result) in ours.iter().zip(&txs).zip(results) {
        // A payout presented before (a repeated deposit) is refused as a replay: its output is
        // in the core already, and the import below finds it.
        let payment = PaymentString::new(
            tx.txid(),
            vec![PaidOutput {
                index: 0,
                output: tx.outputs()[0],
            }],
        );
        let report = session::import(wallet_path, &mut wallet, &client, &payment.to_string())?;
        credited += report.imported.spendable;
        if report.imported.spendable == 0 && report.imported.already_known == 0 {
            eprintln!(
                "payout {} not credited yet ({}): its deposit stays pending on the device; run this again",
                tx.txid(),
                result.status.reason()
            );
        } else if file.device.paid_out(&paid.link) {
            file.save()?;
        }
    }
    // Once more at the end: in a wallet, each import above saved the wallet with the device as
    // it was read.
    file.save()?;
    if !elsewhere.is_empty() {
        eprintln!(
            "{} earlier deposits are paid out to another key than this wallet's: run `deposit --defund-to` with \
             that key to print their payouts",
            elsewhere.len()
        );
    }
    println!(
        "deposited: {} paid ({} back to the core, {credited} now spendable in the wallet), {} refused (spent twice by an earlier owner); device balance {}",
        deposited.paid,
        ours.iter().map(|paid| paid.payout.amount()).sum::<u64>(),
        deposited.refused,
        file.device.balance()
    );
    Ok(())
}
