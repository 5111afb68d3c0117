use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_codec::Decode;
use specie_sentinel::IssuerKeys;
use specie_transaction::{mint_marker, SpecieTransaction};

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
    let bytes = match hex::decode(args.hex.trim()) {
        Ok(bytes) => bytes,
        Err(error) => return report_undecodable(args.json, &format!("the input is not hex: {error}")),
    };
    let tx = match SpecieTransaction::decode_exact(&bytes) {
        Ok(tx) => tx,
        Err(error) => return report_undecodable(args.json, &format!("the bytes are not a transaction: {error}")),
    };
    let txid = tx.txid();
    let kind = match &tx {
        SpecieTransaction::Transfer(_) => "transfer",
        SpecieTransaction::Mint(_) => "mint",
        SpecieTransaction::Redeem(_) => "redeem",
    };
    let inputs: Vec<String> = tx.inputs().iter().map(|input| hex::encode(input.uhs_id().0)).collect();
    let outputs: Vec<(u64, String)> = tx
        .created_outputs()
        .iter()
        .map(|c| (c.output.value, hex::encode(c.uhs_id.0)))
        .collect();
    let marker = matches!(tx, SpecieTransaction::Mint(_)).then(|| hex::encode(mint_marker(&txid).0));
    let verdict = specie_sentinel::validate(&tx, &issuers);
    if args.json {
        let verdict_json = match &verdict {
            Ok(()) => serde_json::json!({"valid": true}),
            Err(error) => {
                serde_json::json!({"valid": false, "code": error.code(), "index": error.index(), "message": error.to_string()})
            }
        };
        let outputs_json: Vec<_> = outputs
            .iter()
            .map(|(value, id)| serde_json::json!({"value": value, "uhs_id": id}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"kind": kind, "txid": txid.to_string(), "inputs": inputs, "outputs": outputs_json, "mint_marker": marker, "verdict": verdict_json})
        );
    } else {
        println!("kind      {kind}");
        println!("txid      {txid}");
        for (i, id) in inputs.iter().enumerate() {
            println!("input  {i:>3} uhs id {id}");
        }
        for (i, (value, id)) in outputs.iter().enumerate() {
            println!("output {i:>3} uhs id {id}  value {value}");
        }
        if let Some(marker) = &marker {
            println!("mint marker   {marker}");
        }
        match &verdict {
            Ok(()) => println!("verdict   valid"),
            Err(error) => println!("verdict   invalid: {} ({})", error, error.code()),
        }
    }
    Ok(if verdict.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
