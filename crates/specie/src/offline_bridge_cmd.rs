//! `specie offline device fund-from-core` and `deposit --wallet`: value between a core wallet and
//! a device, through the online core. The crash-safe steps are `specie_offline_bridge`'s; this
//! prints what they did, and tells of waits and of what is left for a later run on stderr.

use std::path::Path;

use specie_offline_bridge::device::{AuthorityClient, DeviceFile};
use specie_offline_bridge::{FundedFromCore, Notice};

fn tell(notice: Notice) {
    eprintln!("{notice}");
}

/// `fund-from-core`: see [`specie_offline_bridge::fund_from_core`].
pub fn fund_from_core(
    file: &mut DeviceFile,
    authority: &AuthorityClient,
    wallet_path: &Path,
    node: Option<&str>,
    amount: u64,
) -> anyhow::Result<()> {
    match specie_offline_bridge::fund_from_core(file, authority, wallet_path, node, amount, &mut tell)? {
        FundedFromCore::Earlier { funded, balance } => {
            println!(
                "an earlier funding was handed in: {funded} received; balance {balance} (run again to fund {amount})"
            )
        }
        FundedFromCore::New { funded, txid, balance } => {
            println!("funded {funded} from the core (txid {txid}); balance {balance}")
        }
    }
    Ok(())
}

/// `deposit --wallet` (or `--to-core`): see [`specie_offline_bridge::deposit_to_wallet`].
pub fn deposit_to_wallet(
    file: &mut DeviceFile,
    authority: &AuthorityClient,
    wallet_path: &Path,
    node: Option<&str>,
) -> anyhow::Result<()> {
    let deposited = specie_offline_bridge::deposit_to_wallet(file, authority, wallet_path, node, &mut tell)?;
    println!(
        "deposited: {} paid ({} back to the core, {} now spendable in the wallet), {} refused (spent twice by an earlier owner); device balance {}",
        deposited.paid, deposited.back_to_core, deposited.credited, deposited.refused, deposited.balance
    );
    Ok(())
}
