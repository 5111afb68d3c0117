//! `specie exchange deposit|withdraw|forget-refused`: value between a currency's core wallet and
//! the trader's exchange account. The crash-safe steps, recorded in the wallet and finished by the
//! next command, are `specie_exchange_bridge`'s; this checks the arguments and prints the result.

use std::path::Path;

use anyhow::bail;

use crate::exchange_trader_cmd::{open_trader, tell, TraderArgs};

/// `specie exchange deposit`: see [`specie_exchange_bridge::deposit`].
pub fn deposit(args: &TraderArgs, core_wallet: Option<&Path>, asset: &str, amount: u64) -> anyhow::Result<()> {
    if amount == 0 {
        bail!("--amount: a deposit is more than 0");
    }
    let mut trader = open_trader(args, true)?;
    let deposited = specie_exchange_bridge::deposit(&mut trader, core_wallet, asset, amount)?;
    println!(
        "deposited {amount} {asset} into account {} (core txid {})",
        deposited.account, deposited.txid
    );
    Ok(())
}

/// `specie exchange withdraw`: see [`specie_exchange_bridge::withdraw`].
pub fn withdraw(args: &TraderArgs, core_wallet: Option<&Path>, asset: &str, amount: u64) -> anyhow::Result<()> {
    if amount == 0 {
        bail!("--amount: a withdrawal is more than 0");
    }
    let mut trader = open_trader(args, false)?;
    let withdrawn = specie_exchange_bridge::withdraw(&mut trader, core_wallet, asset, amount)?;
    println!(
        "withdrew {amount} {asset}: {} now spendable in {}",
        withdrawn.paid,
        withdrawn.core_wallet.display()
    );
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
    let forgotten = specie_exchange_bridge::forget_refused(&args.wallet, tell)?;
    println!("forgot {forgotten} refused deposits");
    Ok(())
}
