//! `deposit --wallet`: every token held, paid out to the core wallet.

use std::path::Path;

use crate::device::{AuthorityClient, DeviceFile, PaidOut};
use specie_transaction::SpecieTransaction;
use specie_wallet::session;
use specie_wallet::{PaidOutput, PaymentString, WalletFile};

use crate::{lock_wallet, Notice, OfflineBridgeError, SUBMIT_TIMEOUT_MS};

/// What [`deposit_to_wallet`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepositedToWallet {
    /// The value the authority paid for the deposits.
    pub paid: u64,
    /// The value of the payouts to this wallet's keys, presented to the core.
    pub back_to_core: u64,
    /// The value now spendable in the wallet.
    pub credited: u64,
    /// The value refused (spent twice by an earlier owner).
    pub refused: u64,
    /// The device's balance after.
    pub balance: u64,
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
    notify: &mut dyn FnMut(Notice),
) -> Result<DepositedToWallet, OfflineBridgeError> {
    let _lock = lock_wallet(file, wallet_path, notify)?;
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
        .map(|paid| SpecieTransaction::BridgePayout(paid.payout.clone()))
        .collect();
    let results = match txs.is_empty() {
        true => Vec::new(),
        false => client
            .submit(&txs, SUBMIT_TIMEOUT_MS)
            .map_err(OfflineBridgeError::PayoutsNotTaken)?,
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
            notify(Notice::PayoutNotCredited {
                txid: tx.txid(),
                reason: result.status.reason().to_string(),
            });
        } else if file.device.paid_out(&paid.link) {
            file.save()?;
        }
    }
    // Once more at the end: in a wallet, each import above saved the wallet with the device as
    // it was read.
    file.save()?;
    if !elsewhere.is_empty() {
        notify(Notice::PaidOutElsewhere(elsewhere.len()));
    }
    Ok(DepositedToWallet {
        paid: deposited.paid,
        back_to_core: ours.iter().map(|paid| paid.payout.amount()).sum::<u64>(),
        credited,
        refused: deposited.refused,
        balance: file.device.balance(),
    })
}
