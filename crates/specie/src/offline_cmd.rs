//! `specie offline …`: tools for offline cash.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_offline::{EvidenceBundle, EVIDENCE_BUNDLE_BYTES_MAX};

#[derive(Args)]
pub struct OfflineArgs {
    #[command(subcommand)]
    command: OfflineCommand,
}

#[derive(Subcommand)]
enum OfflineCommand {
    /// Check evidence of double spending, trusting no one: print whom it convicts.
    ///
    /// FILE holds the authority's key ring (issuing keys with their denominations, certifying
    /// keys by period) and one or more double spends. Each is a token as the accused held it, two
    /// different statements the accused's one-time key signed on it (at least one a payment to a
    /// peer), and the accused's own signature binding that one-time key to its registered
    /// identity. An honest owner signs one statement per token it holds, so each double spend
    /// whose signatures verify convicts that identity; the authority holds none of those keys and
    /// cannot forge it. Compare the printed key-ring fingerprint with the key set the authority
    /// publishes: the evidence holds only under that ring (docs/offline-mode.md).
    /// Exits 0 when every double spend in the file convicts, 1 when any does not hold up.
    CheckEvidence {
        /// The evidence bundle, in its canonical encoding (docs/offline-format.md §13a).
        file: PathBuf,
    },
}

pub fn run(args: OfflineArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        OfflineCommand::CheckEvidence { file } => check_evidence(&file),
    }
}

fn check_evidence(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let bundle = specie_offline::decode_exact(
        "evidence bundle",
        &bytes,
        EVIDENCE_BUNDLE_BYTES_MAX,
        EvidenceBundle::decode_from,
    )
    .with_context(|| format!("{} is not offline evidence", file.display()))?;
    println!("key ring fingerprint: {}", hex::encode(bundle.ring.fingerprint()));
    let mut holding = 0;
    for (i, double_spend) in bundle.double_spends.iter().enumerate() {
        match double_spend.check(&bundle.ring) {
            Ok(convicted) => {
                holding += 1;
                println!(
                    "convicted: identity {} (one-time key {}) spent a token of {} twice (serial {})",
                    hex::encode(convicted.identity),
                    hex::encode(convicted.one_time_key),
                    convicted.denomination,
                    hex::encode(double_spend.token.issuance.serial)
                );
            }
            Err(error) => println!("double spend {i} convicts no one: {error}"),
        }
    }
    let total = bundle.double_spends.len();
    println!("{holding} of {total} double spends hold up");
    Ok(match holding == total && total > 0 {
        true => ExitCode::SUCCESS,
        false => ExitCode::from(1),
    })
}
