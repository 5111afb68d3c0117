//! `fund-from-core`: core coins into an offline funding, then tokens on the device.

use std::path::{Path, PathBuf};

use crate::device::{check_refund_payout, AuthorityClient, CoreFunded, DeviceCommandError, DeviceFile};
use serde_json::json;
use specie_codec::Encode;
use specie_offline::funding_owners_digest;
use specie_transaction::Txid;
use specie_wallet::session::{self, Submitted};
use specie_wallet::{NodeClient, Outcome, PaidOutput, PaymentString, WalletFile};

use crate::SUBMIT_TIMEOUT_MS as TIMEOUT_MS;
use crate::{funding_path, lock_wallet, read_kept_funding, remove, Notice, OfflineBridgeError, RefundedTo};

/// What [`fund_from_core`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FundedFromCore {
    /// A funding an earlier run left (confirmed, not yet credited) was handed in instead of
    /// paying anew: `funded` received; run again to fund the amount asked.
    Earlier { funded: u64, balance: u64 },
    /// A new funding `txid`, confirmed by the core, issued as `funded` of tokens.
    New { funded: u64, txid: Txid, balance: u64 },
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
    notify: &mut dyn FnMut(Notice),
) -> Result<FundedFromCore, OfflineBridgeError> {
    let kept_path = funding_path(file.path());
    if let Some((transaction, owners)) = read_kept_funding(&kept_path)? {
        // Held in case the funding is refunded into the wallet.
        let _lock = lock_wallet(file, wallet_path, notify)?;
        let funded = authority.fund_from_core(&mut file.device, &transaction, &owners)?;
        let funded = received(file, wallet_path, node, &kept_path, funded)?;
        let balance = file.device.balance();
        return Ok(FundedFromCore::Earlier { funded, balance });
    }
    let _lock = lock_wallet(file, wallet_path, notify)?;
    // Refused here, before anything is paid, if the authority could never issue it.
    let split = authority.funding_split(amount)?;
    let owners = file.device.funding_owners(split).map_err(DeviceCommandError::from)?;
    file.save()?;
    // Read after the device is saved: a wallet that keeps the device must keep its latest state.
    let mut wallet = WalletFile::load(wallet_path)?;
    let client = session::client_for(&mut wallet, node)?;
    let tx = wallet.build_bridge_funding(
        authority.bridge()?,
        funding_owners_digest(&owners),
        amount,
        &mut rand::thread_rng(),
    )?;
    let transaction = hex::encode(tx.encode());
    let owners_hex: Vec<String> = owners.iter().map(hex::encode).collect();
    let kept = json!({"transaction": transaction, "owners": owners_hex}).to_string();
    // Durable before the funding can leave the process: a later run hands it in.
    specie_wallet::write_file_atomically(&kept_path, kept.as_bytes(), true)?;
    let submitted = session::submit(wallet_path, &mut wallet, &client, &tx, TIMEOUT_MS)?;
    settled(submitted, &kept_path, tx.txid())?;
    let funded = authority
        .fund_from_core(&mut file.device, &transaction, &owners)
        .map_err(OfflineBridgeError::NotCredited)?;
    let funded = received(file, wallet_path, node, &kept_path, funded)?;
    Ok(FundedFromCore::New {
        funded,
        txid: tx.txid(),
        balance: file.device.balance(),
    })
}

/// Goes on only with a funding the core confirmed. One it refused is kept under another name
/// (so that the next run funds anew): if the node was wrong, these bytes are what the authority
/// issues tokens for.
pub(crate) fn settled(submitted: Submitted, kept_path: &Path, txid: Txid) -> Result<(), OfflineBridgeError> {
    match submitted {
        Submitted::Settled(Outcome::Confirmed(_)) => Ok(()),
        Submitted::Settled(Outcome::StillPending { reason }) => Err(OfflineBridgeError::NotFinal { reason }),
        Submitted::Unknown(error) => Err(OfflineBridgeError::Unknown(error)),
        Submitted::Settled(refused) => {
            let archived = refused_path(kept_path, &txid);
            std::fs::rename(kept_path, &archived).map_err(|source| OfflineBridgeError::Io {
                action: "rename the refused funding",
                path: kept_path.to_path_buf(),
                source,
            })?;
            Err(OfflineBridgeError::FundingRefused {
                refused: refused.to_string(),
                archived,
                kept: kept_path.to_path_buf(),
            })
        }
    }
}

/// Where a funding the core refused is kept: `DEVICE.funding.refused-TXID`.
pub fn refused_path(kept_path: &Path, txid: &Txid) -> PathBuf {
    let mut archived = kept_path.as_os_str().to_owned();
    archived.push(format!(".refused-{txid}"));
    PathBuf::from(archived)
}

/// What the authority made of a funding handed in: tokens (the device saved, the kept funding
/// removed; their value returned), or a refund (an error, once the refund's payout is presented
/// to the core and its coin imported into the wallet, or its payment string given if the wallet
/// does not hold the key it pays).
fn received(
    file: &mut DeviceFile,
    wallet_path: &Path,
    node: Option<&str>,
    kept_path: &Path,
    funded: CoreFunded,
) -> Result<u64, OfflineBridgeError> {
    let (reason, payout) = match funded {
        CoreFunded::Funded(value) => {
            file.save()?;
            remove(kept_path)?;
            return Ok(value);
        }
        CoreFunded::Refunded { reason, payout } => (reason, *payout),
    };
    // Only the funding's own refund ends it (a payout of anything else would be "already known").
    let (funding, _) = read_kept_funding(kept_path)?.ok_or(OfflineBridgeError::KeptGone)?;
    check_refund_payout(&payout, &funding)?;
    let mut wallet = WalletFile::load(wallet_path)?;
    let client = session::client_for(&mut wallet, node).map_err(OfflineBridgeError::CoreNotReached)?;
    client
        .submit(std::slice::from_ref(&payout), TIMEOUT_MS)
        .map_err(OfflineBridgeError::RefundNotTaken)?;
    let payment = PaymentString::new(
        payout.txid(),
        vec![PaidOutput {
            index: 0,
            output: payout.outputs()[0],
        }],
    );
    let value = payout.outputs()[0].value;
    let back = match wallet.receivable_outputs(&payment) {
        Ok(_) => {
            let report = session::import(wallet_path, &mut wallet, &client, &payment.to_string())?;
            if report.imported.spendable == 0 && report.imported.already_known == 0 {
                return Err(OfflineBridgeError::RefundNotPaid);
            }
            RefundedTo::Wallet {
                value,
                path: wallet_path.to_path_buf(),
            }
        }
        Err(_) => {
            check_paid(&client, &payment)?;
            RefundedTo::Elsewhere { value, payment }
        }
    };
    remove(kept_path)?;
    Err(OfflineBridgeError::Refunded { reason, back })
}

/// Refuses to go on before the core holds every output `payment` creates.
fn check_paid(client: &NodeClient, payment: &PaymentString) -> Result<(), OfflineBridgeError> {
    let created: Vec<_> = payment.created_outputs().iter().map(|created| created.uhs_id).collect();
    match client.query_uhs(&created)?.iter().all(|present| *present) {
        true => Ok(()),
        false => Err(OfflineBridgeError::RefundNotPaid),
    }
}
