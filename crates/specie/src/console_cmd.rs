//! `specie console`: the console in the browser (crates/deployment/specie-console): the
//! operator's view of a cluster or a node, and a wallet for every mode.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use specie_console::{ConsoleConfig, Source, OPERATOR_TOKEN_FILE};

/// `specie console`'s options (its help is the command's, in main.rs).
#[derive(Args, Debug)]
pub struct ConsoleArgs {
    /// The cluster's directory (`specie cluster up --dir`): the console reads its topology and
    /// asks its replicas with the operator's credentials.
    #[arg(long, conflicts_with = "node", required_unless_present = "node")]
    dir: Option<PathBuf>,
    /// Or one embedded node's API, e.g. http://127.0.0.1:8470.
    #[arg(long)]
    node: Option<String>,
    /// Where to serve the console. Only a loopback address, unless --remote: the login token
    /// would otherwise cross the network in clear (put a TLS proxy in front instead).
    #[arg(long, default_value = "127.0.0.1:8495")]
    listen: SocketAddr,
    /// Serve on a non-loopback --listen address (behind a TLS-terminating proxy only; give
    /// --origin).
    #[arg(long, requires = "origin")]
    remote: bool,
    /// The origin browsers reach the console at through a proxy, e.g.
    /// https://console.bank.example: forms from it are accepted, requests naming it answered,
    /// and with https:// the session cookie is sent over HTTPS only.
    #[arg(long, value_name = "URL")]
    origin: Option<String>,
    /// Where the browser's wallets are kept [default: DIR/console-wallets with --dir, else
    /// ./console-wallets].
    #[arg(long)]
    wallets_dir: Option<PathBuf>,
    /// An auditor's secret seed file (from `specie audit keygen`): the Auditors view shows the
    /// transactions it flags.
    #[arg(long)]
    auditor_key: Option<PathBuf>,
    /// With --auditor-key: flag a transaction with an output over this value (smallest units).
    #[arg(long, default_value_t = 1_000_000)]
    flag_over: u64,
    /// How often the charts sample the sentinels' metrics, in milliseconds.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(200..=60_000))]
    sample_interval_ms: u64,
}

pub fn run(args: ConsoleArgs) -> anyhow::Result<ExitCode> {
    if !args.listen.ip().is_loopback() && !args.remote {
        anyhow::bail!(
            "--listen {} is not a loopback address: the operator's token would cross the network in clear. \
             Serve on 127.0.0.1 behind a TLS-terminating proxy, and add --remote if the proxy must reach another address",
            args.listen
        );
    }
    if let Some(origin) = &args.origin {
        let host = (origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://")))
        .unwrap_or("");
        anyhow::ensure!(
            !host.is_empty() && !host.contains(['/', '?', '#', ' ']),
            "--origin {origin}: give a scheme and a host only, like https://console.bank.example"
        );
    }
    let (source, token_dir, wallets_default) = match (&args.dir, &args.node) {
        (Some(dir), _) => {
            let (_, topology) = specie_cluster::supervisor::load(dir)?;
            // Absolute: the wallets remember the cluster file's path.
            let dir = std::fs::canonicalize(dir).with_context(|| format!("cannot resolve {}", dir.display()))?;
            let source = Source::Cluster { dir: dir.clone() };
            (source, topology.pki_dir.clone(), dir.join("console-wallets"))
        }
        (None, Some(url)) => {
            specie_wallet::NodeClient::new(url)?;
            let wallets = PathBuf::from("console-wallets");
            std::fs::create_dir_all(&wallets).with_context(|| format!("cannot make {}", wallets.display()))?;
            (Source::Node { url: url.clone() }, wallets.clone(), wallets)
        }
        (None, None) => anyhow::bail!("give --dir (a cluster's directory) or --node (a node's URL)"),
    };
    let listening = specie_service::server::Listening::bind(args.listen)?;
    let operator_token = specie_console::operator_token(&token_dir)?;
    let token_file = token_dir.join(OPERATOR_TOKEN_FILE);
    let program = std::env::current_exe().context("cannot find the specie program to run the wallets' commands")?;
    let router = specie_console::router(ConsoleConfig {
        source,
        wallets_dir: args.wallets_dir.unwrap_or(wallets_default),
        program,
        operator_token,
        sample_interval_ms: args.sample_interval_ms,
        auditor_key: args.auditor_key,
        flag_over: args.flag_over,
        listen: listening.local_addr(),
        origin: args.origin,
    });
    listening.serve_until_ctrl_c(router, specie_service::HttpLimits::default(), |address| {
        specie_service::announce::announce(format_args!(
            "serving the console on http://{address} (the operator logs in with the token in {})",
            token_file.display()
        ));
    })?;
    Ok(ExitCode::SUCCESS)
}
