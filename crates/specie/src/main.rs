//! `specie`: one binary for every role and tool.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit_cmd;
mod bench_cmd;
mod byzantine_cmd;
mod certifier_cmd;
mod cluster_cmd;
mod console_cmd;
mod demo_cmd;
mod exchange_bridge_cmd;
mod exchange_cmd;
mod exchange_trader_cmd;
mod inspect;
mod issuer_cmd;
mod node_cmd;
mod offline_bridge_cmd;
mod offline_cmd;
mod offline_device_cmd;
mod ra_cmd;
mod sim_cmd;
mod wallet_anonymous_cmd;
mod wallet_cmd;
mod wallet_fastpay_cmd;
mod wallet_unlinkable_cmd;

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
    /// How log lines are written to stderr: `text` for people, `json` (one object per event,
    /// with its fields) for a log pipeline. The processes `specie cluster up` starts inherit it.
    #[arg(long, global = true, env = LOG_FORMAT_VARIABLE, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

use specie_service::announce::LOG_FORMAT_VARIABLE;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole system on this machine with a mixed workload and audit it.
    Demo(demo_cmd::DemoArgs),
    /// Run an embedded node (all roles, durable) serving the HTTP API.
    Node(node_cmd::NodeArgs),
    /// Start, inspect and stop a local replicated cluster.
    Cluster(cluster_cmd::ClusterArgs),
    /// Run one shard group replica of a cluster (started for you by `specie cluster up`).
    Shard(cluster_cmd::ReplicaArgs),
    /// Run one coordinator group replica of a cluster (started by `specie cluster up`).
    Coordinator(cluster_cmd::ReplicaArgs),
    /// Run one sentinel of a cluster: the wallets' HTTP API (started by `specie cluster up`).
    Sentinel(cluster_cmd::SentinelArgs),
    /// Run one replica of a FastPay authority shard of a cluster (started by `specie cluster up
    /// --authorities`): votes and confirmations over its HTTP API, credits to its authority's
    /// other shards over mutual TLS.
    Authority(cluster_cmd::ReplicaArgs),
    /// Run one replica of the offline cash authority's group of a cluster (started by `specie
    /// cluster up --offline`): the devices' HTTP API, every answer committed by Raft first.
    OfflineAuthority(cluster_cmd::ReplicaArgs),
    /// Run one replica of the exchange's group of a cluster (started by `specie cluster up
    /// --exchange`): the traders' HTTP API, every block and deposit committed by Raft first.
    ExchangeReplica(cluster_cmd::ReplicaArgs),
    /// Run one replica of the archiver group of a cluster (started by `specie cluster up
    /// --ledger-of-record`): the ledger of record, every write-ahead and block committed by Raft.
    Archiver(cluster_cmd::ReplicaArgs),
    /// Run one replica of the atomizer group of a cluster (started by `specie cluster up --shape
    /// atomizer`): orders every transaction into blocks the shard groups apply.
    Atomizer(cluster_cmd::ReplicaArgs),
    /// Manage a wallet: keys, addresses, balance, payments, and (issuer) mint and redeem.
    Wallet(wallet_cmd::WalletArgs),
    /// Work with serialized transactions.
    Tx(inspect::TxArgs),
    /// Deterministic simulation of the 2PC protocol under faults (a soak over many seeds).
    Sim(sim_cmd::SimArgs),
    /// Measure throughput against the ceilings that bound it (not run by the tests).
    Bench(bench_cmd::BenchArgs),
    /// The Byzantine mode (FastPay authorities): check evidence of equivocation, and run a whole
    /// committee beside a node.
    Byzantine(byzantine_cmd::ByzantineArgs),
    /// The exchange between currencies (SPEEDEX batch auctions): run it, show its bridge key,
    /// and trade on it from a wallet (deposit, offer, cancel, pay, withdraw).
    Exchange(exchange_cmd::ExchangeArgs),
    /// Offline cash: a device wallet, the offline authority, checking evidence of double spending.
    Offline(offline_cmd::OfflineArgs),
    /// A passive auditor: make its key, and read the ledger of record with it (who paid whom
    /// what, confidential values of its jurisdiction included, flags over a threshold).
    Audit(audit_cmd::AuditArgs),
    /// The registration authority of the anonymous privacy level: after KYC, open an
    /// enrolment, check the wallet's answer, sign its credential; list the enrolled ids.
    Ra(ra_cmd::RaArgs),
    /// The certifiers of the unlinkable privacy level: deal a k-of-n group, and serve one
    /// member's certification of tokens the ledger holds.
    Certifier(certifier_cmd::CertifierArgs),
    /// The issuer key apart from any wallet: make one, show its public key, and sign as the
    /// issuer for a wallet created with `--issuer-signer` (the reference external signer).
    Issuer(issuer_cmd::IssuerArgs),
    /// The console in the browser: the operator's view of a cluster or a node (groups, charts,
    /// supply, ledger, committee, offline, exchange, auditors) and a wallet for every mode.
    /// Example: `specie console --dir ./c`, then open http://127.0.0.1:8495 and log in as the
    /// operator with the token in ./c/pki/console.token (docs/console.md). Serves until Ctrl-C
    Console(console_cmd::ConsoleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.log_format == LogFormat::Json {
        // Before any thread starts: the processes this one starts (a cluster's) log alike.
        std::env::set_var(LOG_FORMAT_VARIABLE, "json");
    }
    // The transaction kinds the capabilities add, which every command may read (a wallet's
    // pending FastPay funding, a block of the ledger of record, a transaction to inspect), and
    // their parts of wallet files (Byzantine-mode accounts; the privacy levels' notes and
    // identity), read and checked when a wallet loads.
    specie_fastpay_wallet::install();
    specie_privacy_wallet::install();
    // Everything that talks TLS must ignore SIGPIPE (Rust's default): rustls writes with
    // `writev`, which raises it on a connection the peer has reset, and its default action
    // would kill a replica, a sentinel, the demo or a benchmark in the middle of its work.
    // Commands that only print and read files get the default back, so that `specie tx inspect
    // … | head` ends quietly instead of panicking on a closed pipe.
    if matches!(
        cli.command,
        Command::Tx(_) | Command::Sim(_) | Command::Ra(_) | Command::Issuer(_)
    ) || matches!(&cli.command, Command::Audit(args) if !args.serves())
        || matches!(&cli.command, Command::Offline(args) if args.prints_only())
        || matches!(&cli.command, Command::Byzantine(args) if args.prints_only())
    {
        reset_sigpipe();
    }
    end_quietly_on_a_closed_stdout();
    // Named, so that per-thread CPU (`specie bench scale`, `top -H`) tells the shared pool's
    // workers from the main thread. Fails only if a pool was built already: then it has a name.
    let _ = rayon::ThreadPoolBuilder::new()
        .thread_name(|index| format!("rayon-{index}"))
        .build_global();
    init_logging(&cli.command, cli.log_format);
    let result = match cli.command {
        Command::Demo(args) => demo_cmd::run(args),
        Command::Node(args) => node_cmd::run(args),
        Command::Cluster(args) => cluster_cmd::run(args),
        Command::Shard(args) => cluster_cmd::run_shard(args),
        Command::Coordinator(args) => cluster_cmd::run_coordinator(args),
        Command::Sentinel(args) => cluster_cmd::run_sentinel(args),
        Command::Authority(args) => cluster_cmd::run_authority(args),
        Command::OfflineAuthority(args) => cluster_cmd::run_offline_authority(args),
        Command::ExchangeReplica(args) => cluster_cmd::run_exchange(args),
        Command::Archiver(args) => cluster_cmd::run_archiver(args),
        Command::Atomizer(args) => cluster_cmd::run_atomizer(args),
        Command::Exchange(args) => exchange_cmd::run(args),
        Command::Wallet(args) => wallet_cmd::run(args),
        Command::Issuer(args) => issuer_cmd::run(args),
        Command::Tx(args) => inspect::run(args),
        Command::Sim(args) => sim_cmd::run_sim(args),
        Command::Bench(args) => bench_cmd::run(args),
        Command::Byzantine(args) => byzantine_cmd::run(args),
        Command::Offline(args) => offline_cmd::run(args),
        Command::Audit(args) => audit_cmd::run(args),
        Command::Ra(args) => ra_cmd::run(args),
        Command::Certifier(args) => certifier_cmd::run(args),
        Command::Console(args) => console_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", describe(&error));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by `: `, like anyhow's `{:#}`, except that a cause is left
/// out when the message so far already holds it: the libraries' typed errors show their source
/// in their own message (at its end, or before advice) as well as through `source()`, which
/// `{:#}` would print twice.
fn describe(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    message
}

/// Logs go to stderr: as `RUST_LOG` says, or else warnings (refused peers and requests, lost
/// leaders, …) from the long-running roles, whose stderr is their log file.
fn init_logging(command: &Command, format: LogFormat) {
    use std::io::IsTerminal;
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) => tracing_subscriber::EnvFilter::new(directives),
        Err(_)
            if matches!(
                command,
                Command::Node(_)
                    | Command::Shard(_)
                    | Command::Coordinator(_)
                    | Command::Sentinel(_)
                    | Command::Authority(_)
                    | Command::OfflineAuthority(_)
                    | Command::ExchangeReplica(_)
                    | Command::Archiver(_)
                    | Command::Atomizer(_)
            ) || matches!(command, Command::Offline(args) if !args.prints_only())
                || matches!(command, Command::Byzantine(args) if !args.prints_only())
                || matches!(command, Command::Exchange(args) if args.serves())
                || matches!(command, Command::Audit(args) if args.serves())
                || matches!(command, Command::Certifier(args) if args.serves())
                || matches!(command, Command::Console(_)) =>
        {
            tracing_subscriber::EnvFilter::new(format!("warn,{}=info", specie_service::announce::START_LOG))
        }
        Err(_) => return,
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_current_span(true).init(),
    }
}

/// The commands that keep SIGPIPE ignored get `EPIPE` on a closed stdout instead, on which
/// `println!` panics: `specie wallet sent | head -n 1` would end in a panic and a backtrace. Such a
/// command ends quietly instead, at the same point and with the status SIGPIPE would give it
/// (128 + 13): what it did before it printed is kept, as after any crash.
fn end_quietly_on_a_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload_as_str().is_some_and(is_a_closed_stdout) {
            std::process::exit(128 + libc::SIGPIPE);
        }
        default_hook(info);
    }));
}

/// Whether a panic's message is `println!`'s on a closed pipe.
fn is_a_closed_stdout(message: &str) -> bool {
    message.starts_with("failed printing to stdout: ") && message.ends_with(&format!("(os error {})", libc::EPIPE))
}

fn reset_sigpipe() {
    // SAFETY: restoring the default disposition of SIGPIPE before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::{describe, is_a_closed_stdout};

    /// Shaped like the libraries' thiserror types: the source in the message and in `source()`.
    #[derive(Debug)]
    struct ReadFailed {
        source: std::io::Error,
    }

    impl std::fmt::Display for ReadFailed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read x: {}", self.source)
        }
    }

    impl std::error::Error for ReadFailed {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    /// The same, with advice after the source (`cannot listen on …: …; stop it, or …`).
    #[derive(Debug)]
    struct Advised {
        source: std::io::Error,
    }

    impl std::fmt::Display for Advised {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read x: {}; try another disk", self.source)
        }
    }

    impl std::error::Error for Advised {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_shown_once() {
        let io = || std::io::Error::other("disk on fire");
        let typed = anyhow::Error::new(ReadFailed { source: io() });
        assert_eq!(describe(&typed), "cannot read x: disk on fire");
        let context = anyhow::Error::new(io()).context("loading the wallet");
        assert_eq!(describe(&context), "loading the wallet: disk on fire");
        let both = typed.context("loading the wallet");
        assert_eq!(describe(&both), "loading the wallet: cannot read x: disk on fire");
        let advised = anyhow::Error::new(Advised { source: io() });
        assert_eq!(describe(&advised), "cannot read x: disk on fire; try another disk");
    }

    #[test]
    fn only_a_closed_stdout_ends_quietly() {
        let closed = std::io::Error::from_raw_os_error(libc::EPIPE);
        assert!(is_a_closed_stdout(&format!("failed printing to stdout: {closed}")));
        let full = std::io::Error::from_raw_os_error(libc::ENOSPC);
        assert!(!is_a_closed_stdout(&format!("failed printing to stdout: {full}")));
        assert!(!is_a_closed_stdout(&format!("failed printing to stderr: {closed}")));
    }
}
