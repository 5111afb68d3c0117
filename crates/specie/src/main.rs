//! `specie`: one binary for every role and tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod ceiling;
mod demo;
mod inspect;
mod node_cmd;
mod wallet_cmd;

/// specie: a transaction platform for central bank digital currency.
///
/// Start here: `specie demo` runs a node in a temporary directory, mints money to a set of
/// wallets, streams payments (with double spends and forged signatures mixed in) and audits
/// that no money was created or destroyed.
#[derive(Parser)]
#[command(name = "specie", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole system on this machine with a mixed workload and audit it.
    Demo(demo::DemoArgs),
    /// Run an embedded node (all roles, durable) serving the HTTP API.
    Node(node_cmd::NodeArgs),
    /// Manage a wallet: keys, addresses, balance, payments, and (issuer) mint and redeem.
    Wallet(wallet_cmd::WalletArgs),
    /// Work with serialized transactions.
    Tx(inspect::TxArgs),
    /// Measure throughput against the ceilings that bound it (not run by the tests).
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(args) => demo::run(args),
        Command::Node(args) => node_cmd::run(args),
        Command::Wallet(args) => wallet_cmd::run(args),
        Command::Tx(args) => inspect::run(args),
        Command::Bench(args) => bench::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
