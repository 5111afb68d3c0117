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
    /// Run a whole FastPay committee in this process beside a node, its Primary: every shard of
    /// every authority on its own durable host, each serving the FastPay clients' API under
    /// /fastpay/AUTHORITY/SHARD of one port; GET /v1/fastpay/committee tells wallets the committee
    /// and those paths. A funding is credited only once each authority finds it in the node's
    /// UHS itself (--core).
    ///
    /// One process holds every authority's key, so it tolerates no Byzantine authority: it is for
    /// trying the mode on one machine (a committee operated apart runs in a cluster: `specie
    /// cluster up --authorities`). The keys come from one secret seed, DATA_DIR/committee.seed
    /// (0600, made on first start): the same directory always gives the same committee.
    ///
    /// First start, with a node that is the committee's Primary:
    ///   specie byzantine committee --data-dir committee --show-committee       # makes the seed
    ///   specie node --data-dir core --issuer <KEY> --fastpay-committee <COMMITTEE>
    ///   specie byzantine committee --data-dir committee --core http://127.0.0.1:8470
    ///   specie wallet --wallet alice.json fastpay --committee-url http://127.0.0.1:8495 fund 500
    #[command(verbatim_doc_comment)]
    Committee {
        /// Where the committee keeps its seed and every shard's log and snapshots.
        #[arg(long)]
        data_dir: PathBuf,
        /// Address of the HTTP API (loopback by default: put a TLS proxy in front to expose it).
        #[arg(long, default_value = "127.0.0.1:8495")]
        listen: std::net::SocketAddr,
        /// The node's HTTP API, asked whether a funding is confirmed.
        #[arg(long, required_unless_present = "show_committee")]
        core: Option<String>,
        /// Authorities in the committee (3f + 1 tolerates f).
        #[arg(long, default_value_t = 4)]
        authorities: usize,
        /// Shards per authority.
        #[arg(long, default_value_t = 1)]
        shards: u32,
        /// Print the committee (what `specie node --fastpay-committee` takes), making the seed if
        /// needed, and exit.
        #[arg(long)]
        show_committee: bool,
    },
}

impl ByzantineArgs {
    /// Whether the command only reads files and prints (not a server, which must ignore SIGPIPE).
    pub fn prints_only(&self) -> bool {
        match &self.command {
            ByzantineCommand::CheckEvidence { .. } => true,
            ByzantineCommand::Committee { show_committee, .. } => *show_committee,
        }
    }
}

pub fn run(args: ByzantineArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        ByzantineCommand::CheckEvidence { file } => check_evidence(&file),
        ByzantineCommand::Committee {
            data_dir,
            listen,
            core,
            authorities,
            shards,
            show_committee,
        } => {
            use specie_committee::standalone;
            if show_committee {
                println!(
                    "{}",
                    standalone::committee_hex(&standalone::committee_keys(&data_dir, authorities)?)
                );
                return Ok(ExitCode::SUCCESS);
            }
            standalone::serve(&standalone::CommitteeServeOptions {
                data_dir,
                listen,
                limits: specie_service::HttpLimits::default(),
                core: specie_wallet::core_api(&core.expect("clap requires --core unless --show-committee")),
                authorities,
                shards,
            })?;
            Ok(ExitCode::SUCCESS)
        }
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
