//! `specie tx inspect`: its arguments and what it prints (the decoding and the verdict are
//! `specie_sentinel::inspect`).

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_sentinel::inspect::{inspect, Inspection};
use specie_sentinel::{IssuerKeys, TrustedKeys};

#[derive(Args, Debug)]
pub struct TxArgs {
    #[command(subcommand)]
    pub command: TxCommand,
}

#[derive(Subcommand, Debug)]
pub enum TxCommand {
    /// Decode a serialized transaction (reference transfer, or specie mint/redeem) and print its
    /// txid, the UHS id of each input and created output, and the sentinel's verdict.
    ///
    /// Exit status: 0 valid, 1 invalid or undecodable.
    Inspect(InspectArgs),
}

#[derive(Args, Debug)]
pub struct InspectArgs {
    /// The transaction, hex-encoded.
    pub hex: String,
    /// Issuer x-only public key (hex) to trust when checking a mint or redeem; repeatable.
    #[arg(long = "issuer", value_name = "HEX")]
    pub issuers: Vec<String>,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: TxArgs) -> anyhow::Result<ExitCode> {
    let TxCommand::Inspect(args) = args.command;
    let issuers = IssuerKeys::from_hex(&args.issuers).context("an --issuer key is not a valid x-only public key")?;
    // No FastPay committee: a FastPay funding or redeem gets the verdict `no_fastpay_committee`;
    // no registration authority: an anonymous transaction gets `no_registration_authority`; no
    // auditor with jurisdiction: a confidential transaction is judged by its proofs alone.
    let no_committee = specie_fastpay_primary::FastpayRules::none();
    let no_privacy_keys = specie_private_transactions::PrivacyRules::default();
    let trusted = TrustedKeys::from(issuers)
        .with_capability(std::sync::Arc::new(no_committee))
        .with_capability(std::sync::Arc::new(no_privacy_keys));
    let inspection = match inspect(&args.hex, &trusted) {
        Ok(inspection) => inspection,
        Err(error) => return report_undecodable(args.json, &error.to_string()),
    };
    if args.json {
        print_json(&inspection);
    } else {
        print_text(&inspection);
    }
    Ok(if inspection.verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_json(inspection: &Inspection) {
    let verdict_json = match &inspection.verdict {
        Ok(()) => serde_json::json!({"valid": true}),
        Err(error) => {
            serde_json::json!({"valid": false, "code": error.code(), "index": error.index(), "message": error.to_string()})
        }
    };
    let inputs: Vec<String> = inspection.inputs.iter().map(|id| hex::encode(id.0)).collect();
    let outputs_json: Vec<_> = inspection
        .outputs
        .iter()
        .map(|(value, id)| serde_json::json!({"value": value, "uhs_id": hex::encode(id.0)}))
        .collect();
    let marker = inspection.mint_marker.map(|id| hex::encode(id.0));
    let redeem_marker = inspection.redeem_marker.map(|id| hex::encode(id.0));
    let fastpay_marker = inspection.capability_marker.map(|id| hex::encode(id.0));
    let bridge_marker = inspection.bridge_marker.map(|id| hex::encode(id.0));
    println!(
        "{}",
        serde_json::json!({"kind": inspection.kind, "txid": inspection.txid.to_string(), "inputs": inputs, "outputs": outputs_json, "mint_marker": marker, "redeem_marker": redeem_marker, "fastpay_marker": fastpay_marker, "offline_marker": bridge_marker, "verdict": verdict_json})
    );
}

fn print_text(inspection: &Inspection) {
    println!("kind      {}", inspection.kind);
    println!("txid      {}", inspection.txid);
    for (i, id) in inspection.inputs.iter().enumerate() {
        println!("input  {i:>3} uhs id {}", hex::encode(id.0));
    }
    for (i, (value, id)) in inspection.outputs.iter().enumerate() {
        println!("output {i:>3} uhs id {}  value {value}", hex::encode(id.0));
    }
    if let Some(marker) = &inspection.mint_marker {
        println!("mint marker   {}", hex::encode(marker.0));
    }
    if let Some(marker) = &inspection.redeem_marker {
        println!("redeem marker {}", hex::encode(marker.0));
    }
    if let Some(marker) = &inspection.capability_marker {
        println!("fastpay marker {}", hex::encode(marker.0));
    }
    if let Some(marker) = &inspection.bridge_marker {
        println!("offline marker {}", hex::encode(marker.0));
    }
    match &inspection.verdict {
        Ok(()) => println!("verdict   valid"),
        Err(error) => println!("verdict   invalid: {} ({})", error, error.code()),
    }
}

fn report_undecodable(json: bool, message: &str) -> anyhow::Result<ExitCode> {
    if json {
        println!(
            "{}",
            serde_json::json!({"verdict": {"valid": false, "code": "decode_error", "message": message}})
        );
    } else {
        eprintln!("error: {message}");
    }
    Ok(ExitCode::FAILURE)
}
