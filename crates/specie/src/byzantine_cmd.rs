//! `specie byzantine …`: tools for the Byzantine mode (FastPay authorities).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_fastpay::Evidence;

/// Largest evidence file read: a committee of the largest size with a double vote and a broken
/// promise per member fits several times over.
const EVIDENCE_BYTES_MAX: usize = 1 << 20;

#[derive(Args)]
pub struct ByzantineArgs {
    #[command(subcommand)]
    command: ByzantineCommand,
}

#[derive(Subcommand)]
enum ByzantineCommand {
    /// Check evidence of equivocation, trusting no one: print the authorities it convicts.
    ///
    /// FILE holds a committee (its epoch and every authority's key) and pairs of signatures,
    /// each pair by one authority, of two kinds: two votes in one phase of one round on two
    /// different transfer orders for the same account and sequence number; or a round change
    /// and a vote of a lower round that contradicts what the round change reports (a hidden
    /// lock or round-0 vote). An honest authority never signs such a pair, so every pair whose
    /// signatures verify convicts its signer. Authorities keep such evidence in their
    /// `evidence/` directory when they see two conflicting certificates or a justification
    /// their locks contradict (see docs/byzantine-mode.md, "Accountable safety").
    /// Exits 0 when the evidence convicts, 1 when it does not hold up.
    CheckEvidence {
        /// The evidence, in its canonical encoding (docs/byzantine-format.md).
        file: PathBuf,
    },
}

pub fn run(args: ByzantineArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ByzantineCommand::CheckEvidence { file } => check_evidence(&file),
    }
}

fn check_evidence(file: &std::path::Path) -> anyhow::Result<ExitCode> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let evidence = specie_fastpay::decode_exact("evidence", &bytes, EVIDENCE_BYTES_MAX, Evidence::decode_from)
        .with_context(|| format!("{} is not evidence", file.display()))?;
    let committee = &evidence.committee;
    println!(
        "committee: epoch {}, {} authorities (f = {}), id {}",
        committee.epoch(),
        committee.size(),
        committee.fault_tolerance(),
        hex::encode(committee.id())
    );
    match evidence.convicted() {
        Ok(convicted) => {
            for authority in &convicted {
                let key = committee.members()[usize::from(*authority)];
                println!("convicted: authority {authority} (key {})", hex::encode(key));
            }
            println!(
                "{} of {} authorities signed what an honest authority never signs",
                convicted.len(),
                committee.size()
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            println!("the evidence convicts no one: {error}");
            Ok(ExitCode::from(1))
        }
    }
}
