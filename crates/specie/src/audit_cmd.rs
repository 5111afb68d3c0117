//! `specie audit …`: a passive auditor's tools. See docs/privacy.md, "The auditor's guide".

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_api::supply::SupplyReport;
use specie_archiver::{Block, BlockLimits, DisputeProof};
use specie_auditor::{Audited, Owner, OwnerView, PassiveAuditor};
use specie_codec::{Decode, Encode};
use specie_confidential::AuditorSecret;
use specie_credential::{AuditDirectory, EnrolmentId};
use specie_endorsement::GroupKey;
use specie_fastpay_wallet::supply::CommitteeTotals;
use specie_transaction::{SpecieTransaction, Txid, Witness};
use specie_wallet::NodeClient;

#[derive(Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Make an auditor's key: a 32-byte secret seed written to FILE (readable by you alone), and
    /// its two public keys printed, to give the node operator and the wallets. The first line is
    /// the value key (`specie node --auditor HEX`): wallets encrypt every confidential value to
    /// it. The second, `owner auditor key: HEX`, is the owner key (`specie node --owner-auditor
    /// HEX`): every anonymous transaction encrypts every owner it names to it.
    Keygen {
        /// Where to write the secret seed (hex). Refuses to overwrite an existing file.
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the public keys of the auditor whose seed is in FILE: the value key (first line, for
    /// `specie node --auditor`), the owner key (second line, for `specie node --owner-auditor`)
    /// and the co-signing key (third line, for `specie node --active-auditor`).
    Key {
        #[arg(long)]
        key: PathBuf,
    },
    /// Read the node's ledger of record from genesis as a passive auditor: every transaction,
    /// with its payers and payees and the values this auditor can read (all transparent values,
    /// and the confidential values of its jurisdiction), flagging any payment over the
    /// threshold. The node is not trusted: the blocks must chain, every confidential proof is
    /// verified again, and, if the node has an endorsement group (or --group-key is given),
    /// every record's threshold endorsement is verified under the group key. Exits 1 if one
    /// fails.
    Show {
        /// The node's API.
        #[arg(long, default_value = "http://127.0.0.1:8470")]
        node: String,
        /// The auditor's secret seed file (from `specie audit keygen`).
        #[arg(long)]
        key: PathBuf,
        /// Flag a transaction with an output over this value (smallest units).
        #[arg(long, default_value_t = 1_000_000)]
        flag_over: u64,
        /// Print only the flagged transactions (the summary counts them all).
        #[arg(long)]
        flagged_only: bool,
        /// One JSON object per transaction, then a summary object.
        #[arg(long)]
        json: bool,
        /// The endorsement group key (x-only, hex) every record must carry an endorsement under
        /// (exit 1 if one does not). Default: the node's own (`/v1/info`), if it has a group;
        /// give it to trust the node for less.
        #[arg(long)]
        group_key: Option<String>,
        /// The enrolment ids this auditor oversees, one per line (what `specie ra list
        /// --jurisdiction J` prints): the owners of anonymous transactions among them are named
        /// `id:N`, with the owner key of the same seed file. Without it, or for an owner not in
        /// it, an anonymous owner shows as `unknown`.
        #[arg(long, value_name = "FILE")]
        directory: Option<PathBuf>,
        /// The registration authority's public key (hex, as `specie ra key` prints it) that
        /// every anonymous spend proof must verify under (exit 1 if one does not); repeat it for
        /// each of the RA's keys since genesis (`specie ra rotate` moves to a new one). Default:
        /// the node's own and the former ones it lists (`/v1/info`); give them to trust the node
        /// for less.
        #[arg(long, value_name = "HEX")]
        registration_authority: Vec<String>,
        /// The certifier group (hex, as `specie certifier deal` writes it to group.hex) every
        /// unlinkable transfer proof must verify under (exit 1 if one does not). Default: the
        /// node's own (`/v1/info`); give it to trust the node for less.
        #[arg(long, value_name = "HEX")]
        certifiers: Option<String>,
    },
    /// Serve as an active auditor: review every private transaction a wallet sends before it
    /// is submitted (`specie wallet … --cosigner URL`), and co-sign it if this auditor can read
    /// every value (and, with --directory, name every payer and payee), its proofs hold, and no
    /// output is over --refuse-over. The node (`specie node --active-auditor KEY`, KEY the
    /// `co-signing key:` line of `specie audit key`) refuses a private transaction without the
    /// co-signature (`active_auditor_missing`). Serves until Ctrl-C; anyone who can reach the
    /// port can ask, so keep it where only your wallets' users can.
    Serve {
        /// The auditor's secret seed file (from `specie audit keygen`).
        #[arg(long)]
        key: PathBuf,
        /// Where to serve the co-signing API.
        #[arg(long, default_value = "127.0.0.1:8475")]
        listen: std::net::SocketAddr,
        /// The enrolment ids this auditor oversees (as for `show`): with it, an anonymous
        /// transaction is co-signed only if every payer and payee is among them.
        #[arg(long, value_name = "FILE")]
        directory: Option<PathBuf>,
        /// Refuse a transaction with an output over this value (smallest units).
        #[arg(long, value_name = "N")]
        refuse_over: Option<u64>,
    },
    /// Dispute resolution: fetch from the node the proof that a transaction is, or is not, in
    /// its ledger of record up to a height, and check it here without trusting the node (the
    /// headers must chain from genesis; the record's Merkle path, or for every block the two
    /// neighbouring txids of its ascending txids tree, must lead to the headers). Exits 1 if the
    /// proof fails, or ends at another head than --head.
    Prove {
        #[arg(long, default_value = "http://127.0.0.1:8470")]
        node: String,
        /// The transaction's id (hex).
        #[arg(long)]
        txid: String,
        /// Up to this height (default: the node's head).
        #[arg(long)]
        height: Option<u64>,
        /// The header hash you trust at that height (from your own replay, or published): the
        /// proof must end there.
        #[arg(long)]
        head: Option<String>,
        /// Also write the proof's bytes here, for anyone to check with `specie audit check-proof`.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// The platform's supply report: per issuer, minted − redeemed, set against where the value
    /// is, at one cut: the node's ledger of record at its head (with the UHS digest its blocks
    /// replay to). The core's own tallies must agree (issued = unspent transparent outputs +
    /// confidential and anonymous notes, counted through their public inputs and outputs + what
    /// each mode was funded and did not return). Each mode's books named here must balance and
    /// hold exactly what the ledger says it was funded and did not return; a difference is value
    /// in flight while the platform is busy (read again for --settle-ms), a loss once it is quiet.
    /// Exits 1 if any of it fails. Example, a cluster with every mode:
    /// specie audit supply --node http://127.0.0.1:8470 --offline http://127.0.0.1:8490
    /// --exchange http://127.0.0.1:8480 --fastpay-shard http://127.0.0.1:8500
    Supply {
        /// The node's (or a cluster sentinel's) API.
        #[arg(long, default_value = "http://127.0.0.1:8470")]
        node: String,
        /// The offline authority's API (its replicas, comma-separated): its books are checked.
        #[arg(long, value_name = "URL")]
        offline: Option<String>,
        /// The exchange's API (its replicas, comma-separated): its books for this core's
        /// currency are checked.
        #[arg(long, value_name = "URL")]
        exchange: Option<String>,
        /// The exchange's name for this core's currency. Default: the node's address prefix
        /// (`hrp` in `GET /v1/info`), if the exchange trades an asset of that name.
        #[arg(long, value_name = "NAME", requires = "exchange")]
        asset: Option<String>,
        /// One shard of one FastPay authority (its replicas' APIs, comma-separated); give it once
        /// per shard of that authority: the committee's books are that authority's, summed.
        /// Served by a cluster's authority replicas (`GET /v1/fastpay/books`).
        #[arg(long = "fastpay-shard", value_name = "URL")]
        fastpay_shards: Vec<String>,
        /// While a mode's books differ from the ledger, read everything again for up to this
        /// long (value in flight settles within a block or two when the platform is quiet).
        #[arg(long, default_value_t = 5000)]
        settle_ms: u64,
        /// Print the report as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Check a proof written by `specie audit prove --out`, offline. Exits 1 if it fails, or
    /// ends at another head than --head.
    CheckProof {
        /// The proof file.
        file: PathBuf,
        /// The header hash you trust at the proof's height.
        #[arg(long)]
        head: Option<String>,
    },
}

impl AuditArgs {
    /// Whether this runs until stopped (the active auditor's API), rather than printing.
    pub fn serves(&self) -> bool {
        matches!(self.command, AuditCommand::Serve { .. })
    }
}

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Keygen { out } => keygen(&out),
        AuditCommand::Serve {
            key,
            listen,
            directory,
            refuse_over,
        } => serve(&key, listen, directory.as_deref(), refuse_over),
        AuditCommand::Key { key } => {
            print_keys(&read_seed(&key)?);
            Ok(ExitCode::SUCCESS)
        }
        AuditCommand::Show {
            node,
            key,
            flag_over,
            flagged_only,
            json,
            group_key,
            directory,
            registration_authority,
            certifiers,
        } => {
            let options = ShowOptions {
                flag_over,
                flagged_only,
                json,
                group_key,
                directory,
                registration_authority,
                certifiers,
            };
            show(&node, &key, &options)
        }
        AuditCommand::Prove {
            node,
            txid,
            height,
            head,
            out,
        } => {
            let txid = Txid(parse_hash(&txid, "--txid")?);
            let bytes = NodeClient::new(&node)?.ledger_dispute_bytes(&txid, height)?;
            if let Some(out) = &out {
                std::fs::write(out, &bytes).with_context(|| format!("cannot write {}", out.display()))?;
            }
            check_proof(&bytes, head.as_deref())
        }
        AuditCommand::Supply {
            node,
            offline,
            exchange,
            asset,
            fastpay_shards,
            settle_ms,
            json,
        } => {
            let sources = SupplySources {
                node,
                offline,
                exchange,
                asset,
                fastpay_shards,
            };
            supply(&sources, settle_ms, json)
        }
        AuditCommand::CheckProof { file, head } => {
            let bytes = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            check_proof(&bytes, head.as_deref())
        }
    }
}

/// Where `specie audit supply` reads the cut and the modes' books.
struct SupplySources {
    node: String,
    offline: Option<String>,
    exchange: Option<String>,
    asset: Option<String>,
    fastpay_shards: Vec<String>,
}

impl SupplySources {
    fn read(&self) -> anyhow::Result<SupplyReport> {
        let node = NodeClient::new(&self.node)?;
        let mut books = Vec::new();
        if let Some(url) = &self.offline {
            let client = specie_offline_bridge::device::AuthorityClient::new(url, None);
            books.push(
                client
                    .mode_books()
                    .with_context(|| format!("cannot read the offline authority's books at {url}"))?,
            );
        }
        if let Some(url) = &self.exchange {
            let held = specie_exchange_service::client::ExchangeClient::new(url)
                .supply()
                .with_context(|| format!("cannot read the exchange's supply at {url}"))?;
            let asset = match &self.asset {
                Some(asset) => asset.clone(),
                None => node.info()?.hrp,
            };
            let Some(exchange_books) = specie_exchange_bridge::supply::mode_books(&held, &asset) else {
                let names: Vec<&str> = held.assets.iter().map(|each| each.name.as_str()).collect();
                anyhow::bail!(
                    "the exchange at {url} trades no asset '{asset}' (it trades {}): name this core's with --asset",
                    names.join(", ")
                );
            };
            books.push(exchange_books);
        }
        let shards = self.fastpay_books()?;
        // The cut last: a mode credits a funding only once the core confirmed it, so what the
        // modes hold was read no later than the ledger that must account for it.
        let cut = node
            .supply()
            .with_context(|| format!("cannot read the supply at {}", self.node))?;
        if let Some(shards) = shards {
            let name = format!("FastPay authority {}", shards.authority);
            books.push(specie_fastpay_wallet::supply::mode_books(
                name,
                shards.committee_id,
                shards.later_ids,
                &shards.totals,
                &cut,
            ));
        }
        Ok(SupplyReport::reconcile(cut, books))
    }

    /// One authority's books over every shard named.
    fn fastpay_books(&self) -> anyhow::Result<Option<FastpayShards>> {
        let Some(first_url) = self.fastpay_shards.first() else {
            return Ok(None);
        };
        let mut shards = Vec::new();
        for url in &self.fastpay_shards {
            let books = specie_fastpay_wallet::supply::read_shard_books(url)
                .with_context(|| format!("cannot read the FastPay shard's books at {url}"))?;
            shards.push(books);
        }
        let first = &shards[0];
        let mut seen: Vec<u32> = shards.iter().map(|books| books.shard).collect();
        seen.sort_unstable();
        let every_shard = seen == (0..first.shards).collect::<Vec<_>>();
        let one_authority =
            (shards.iter()).all(|b| b.authority == first.authority && b.committee_id == first.committee_id);
        if !(every_shard && one_authority) {
            anyhow::bail!(
                "--fastpay-shard must name each of one authority's {} shards once (from {first_url}: authority {}); \
                 got shards {seen:?} of authorities {:?}",
                first.shards,
                first.authority,
                shards.iter().map(|b| b.authority).collect::<Vec<_>>()
            );
        }
        let totals = CommitteeTotals::of_shards(&shards)
            .with_context(|| format!("the FastPay books at {first_url} hold a figure that is not a number"))?;
        let later_ids = specie_fastpay_wallet::supply::later_committee_ids(first_url, &first.committee_id)
            .with_context(|| format!("cannot read the FastPay committee's epochs at {first_url}"))?;
        Ok(Some(FastpayShards {
            authority: first.authority,
            committee_id: first.committee_id.clone(),
            later_ids,
            totals,
        }))
    }
}

/// One FastPay authority's books over its shards, as `--fastpay-shard` reads them.
struct FastpayShards {
    authority: u16,
    /// The committee's id (its first epoch's, hex).
    committee_id: String,
    /// The committee ids of its later epochs (hex).
    later_ids: Vec<String>,
    totals: CommitteeTotals,
}

/// Reads the report, again while it fails and --settle-ms lasts, and prints it.
fn supply(sources: &SupplySources, settle_ms: u64, json: bool) -> anyhow::Result<ExitCode> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(settle_ms);
    let mut report = sources.read()?;
    while !report.ok && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(250));
        report = sources.read()?;
    }
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        for line in report.lines() {
            println!("{line}");
        }
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn parse_hash(text: &str, what: &str) -> anyhow::Result<[u8; 32]> {
    let bytes = hex::decode(text.trim()).with_context(|| format!("{what} is not hex"))?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| anyhow::anyhow!("{what} is {} bytes, not 32", bytes.len()))
}

/// Checks a dispute proof and prints what it establishes.
fn check_proof(bytes: &[u8], trusted_head: Option<&str>) -> anyhow::Result<ExitCode> {
    let proof = DisputeProof::decode_exact(bytes).context("the proof does not decode")?;
    let verdict = match proof.check() {
        Ok(verdict) => verdict,
        Err(error) => {
            println!(
                "INVALID: the proof for {} does not hold: {error}",
                hex::encode(proof.txid.0)
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    let txid = hex::encode(proof.txid.0);
    match verdict.located {
        Some(at) => println!(
            "transaction {txid} IS in the ledger of record: block {}, position {}",
            at.height, at.position
        ),
        None => println!(
            "transaction {txid} is NOT in any block of the ledger of record up to height {}",
            verdict.height
        ),
    }
    println!(
        "  checked against {} headers chained from genesis; head at height {}: {}",
        verdict.height,
        verdict.height,
        hex::encode(verdict.head)
    );
    if let Some(trusted) = trusted_head {
        if parse_hash(trusted, "--head")? != verdict.head {
            println!("INVALID: the proof ends at another head than the one you trust ({trusted})");
            return Ok(ExitCode::FAILURE);
        }
        println!("  the head is the one you trust");
    }
    Ok(ExitCode::SUCCESS)
}

fn keygen(out: &Path) -> anyhow::Result<ExitCode> {
    let seed: [u8; 32] = rand::random();
    specie_log::secret::write_new(out, format!("{}\n", hex::encode(seed)).as_bytes())?;
    print_keys(&seed);
    eprintln!(
        "secret seed written to {}; the first line above is the public key for `specie node \
         --auditor`, the second the owner key for `specie node --owner-auditor`",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The auditor's value key (hex), then its owner key (hex of its encoding) and its co-signing
/// key (x-only, hex), labelled.
fn print_keys(seed: &[u8; 32]) {
    println!("{}", hex::encode(AuditorSecret::from_seed(seed).public().to_bytes()));
    let owner = specie_credential::AuditorSecret::from_seed(seed).public();
    println!("owner auditor key: {}", hex::encode(owner.encode()));
    let cosigning = specie_auditor::ActiveAuditor::new(seed, None, None).public_key();
    println!("co-signing key: {}", hex::encode(cosigning));
}

fn serve(
    key: &Path,
    listen: std::net::SocketAddr,
    directory: Option<&Path>,
    refuse_over: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let seed = read_seed(key)?;
    let owners = directory
        .map(|directory| -> anyhow::Result<OwnerView> {
            Ok(OwnerView {
                secret: specie_credential::AuditorSecret::from_seed(&seed),
                directory: read_directory(directory)?,
            })
        })
        .transpose()?;
    let auditor = specie_auditor::ActiveAuditor::new(&seed, owners, refuse_over);
    let cosigning = hex::encode(auditor.public_key());
    let router = specie_api::cosign_api::router(std::sync::Arc::new(Cosigning(auditor)));
    specie_service::server::serve_until_ctrl_c(listen, router, specie_service::HttpLimits::default(), |address| {
        specie_service::announce::announce(format_args!(
            "active auditor {cosigning}: serving the co-signing API on http://{address}"
        ));
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The privacy capability's active auditor, as the core's co-signing API reaches it.
struct Cosigning(specie_auditor::ActiveAuditor);

impl specie_api::cosign_api::Cosigner for Cosigning {
    fn public_key(&self) -> [u8; 32] {
        self.0.public_key()
    }

    fn review(&self, tx: &SpecieTransaction) -> Result<Witness, specie_api::cosign_api::CosignRefused> {
        self.0
            .review(tx)
            .map_err(|refusal| specie_api::cosign_api::CosignRefused {
                code: refusal.code(),
                message: refusal.to_string(),
            })
    }
}

fn read_seed(path: &Path) -> anyhow::Result<[u8; 32]> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    hex::decode(text.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .with_context(|| format!("{} does not hold a 32-byte hex seed", path.display()))
}

/// The most bytes of a directory file read (about 3 million ids).
const DIRECTORY_BYTES_MAX: u64 = 64 << 20;

/// The enrolment ids in `path`, one per line (blank lines and `#` comments skipped).
fn read_directory(path: &Path) -> anyhow::Result<AuditDirectory> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(DIRECTORY_BYTES_MAX + 1).read_to_end(&mut bytes))
        .with_context(|| format!("cannot read the directory {}", path.display()))?;
    anyhow::ensure!(
        bytes.len() as u64 <= DIRECTORY_BYTES_MAX,
        "the directory {} is larger than {} MiB",
        path.display(),
        DIRECTORY_BYTES_MAX >> 20
    );
    let text = String::from_utf8(bytes).with_context(|| format!("the directory {} is not text", path.display()))?;
    let mut ids = Vec::new();
    for (at, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let id = line.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "{} line {}: {line:?} is not an enrolment id (one whole number per line, as `specie ra \
                 list` prints)",
                path.display(),
                at + 1
            )
        })?;
        ids.push(EnrolmentId(id));
    }
    Ok(AuditDirectory::new(ids))
}

/// What the auditor counted over the whole ledger.
#[derive(Default)]
struct Summary {
    transactions: u64,
    /// Confidential transactions in the ledger whose proofs do not verify: the ledger holds
    /// something no honest sentinel accepted.
    invalid_proofs: u64,
    confidential: u64,
    /// Anonymous and unlinkable transactions, and those with an owner this auditor cannot name.
    anonymous: u64,
    unlinkable: u64,
    unnamed: u64,
    /// The value inside the unlinkable level: what entered it in clear less what left.
    unlinkable_pool: u64,
    unreadable: u64,
    flagged: u64,
    minted: u64,
    taken_out: u64,
    /// Records whose threshold endorsement verifies under the group key, and those without one
    /// that does (when a group key is known).
    endorsed: u64,
    unendorsed: u64,
}

struct ShowOptions {
    flag_over: u64,
    flagged_only: bool,
    json: bool,
    group_key: Option<String>,
    directory: Option<PathBuf>,
    registration_authority: Vec<String>,
    certifiers: Option<String>,
}

/// The registration authority's keys anonymous and unlinkable proofs are checked against: those
/// given, or the node's current and former ones; without any they cannot be checked.
fn registration_authorities(
    client: &NodeClient,
    given: &[String],
) -> anyhow::Result<Vec<specie_credential::RaPublicKey>> {
    let parse = |text: &str| {
        let bytes = hex::decode(text.trim()).ok()?;
        specie_credential::RaPublicKey::decode_exact(&bytes).ok()
    };
    if !given.is_empty() {
        return given
            .iter()
            .map(|text| {
                parse(text).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--registration-authority is not an RA public key in hex (`specie ra key` prints it)"
                    )
                })
            })
            .collect();
    }
    let info = client.info()?;
    let keys = info
        .registration_authority
        .iter()
        .chain(&info.former_registration_authorities);
    Ok(keys.filter_map(|text| parse(text)).collect())
}

/// The endorsement group key records are checked against: the one given, or the node's.
fn group_key(client: &NodeClient, given: Option<&str>) -> anyhow::Result<Option<GroupKey>> {
    let hex = match given {
        Some(given) => Some(given.to_string()),
        None => client.info()?.endorsement_group_key,
    };
    hex.map(|hex| Ok(GroupKey(parse_hash(&hex, "the endorsement group key")?)))
        .transpose()
}

/// Counts `block`'s records endorsed under `key`, and those not.
fn check_endorsements(block: &Block, key: &GroupKey, summary: &mut Summary) {
    for record in &block.records {
        let digest = record.compact().attestation_message();
        match record.endorsement().map(|endorsement| endorsement.verify(key, &digest)) {
            Some(Ok(())) => summary.endorsed += 1,
            _ => summary.unendorsed += 1,
        }
    }
}

fn show(node: &str, key: &Path, options: &ShowOptions) -> anyhow::Result<ExitCode> {
    let (flag_over, flagged_only, json) = (options.flag_over, options.flagged_only, options.json);
    let client = NodeClient::new(node)?;
    let group_key = group_key(&client, options.group_key.as_deref())?;
    let seed = read_seed(key)?;
    // The owner key reads unlinkable values with or without a directory; only naming owners
    // needs the ids.
    let directory = match &options.directory {
        Some(directory) => read_directory(directory)?,
        None => AuditDirectory::default(),
    };
    let mut auditor = PassiveAuditor::new(AuditorSecret::from_seed(&seed), flag_over).with_owner_view(OwnerView {
        secret: specie_credential::AuditorSecret::from_seed(&seed),
        directory,
    });
    let authorities = registration_authorities(&client, &options.registration_authority)?;
    let certifiers = certifier_group(&client, options.certifiers.as_deref())?;
    let height = client.ledger_height()?;
    let limits = BlockLimits::default();
    let mut summary = Summary::default();
    let mut previous = [0u8; 32];
    for h in 1..=height {
        let bytes = client.ledger_block_bytes(h)?;
        let block = Block::decode_exact_with(&bytes, &limits).with_context(|| format!("block {h} does not decode"))?;
        // The node is not trusted: the chain must link, and every confidential proof must hold.
        anyhow::ensure!(
            block.header.height == h && block.header.previous == previous,
            "block {h} does not follow block {} of the chain the node served",
            h - 1
        );
        anyhow::ensure!(
            block.commits_to_records(),
            "block {h}'s header does not commit to its records"
        );
        summary.invalid_proofs += invalid_proofs(&block)
            + invalid_anonymous(&block, &authorities)
            + invalid_unlinkable(&block, &authorities, certifiers.as_ref());
        if let Some(key) = &group_key {
            check_endorsements(&block, key, &mut summary);
        }
        previous = block.header.hash();
        for audited in auditor.read(block.header.height, block.records.iter().map(|r| r.transaction()))? {
            summary.transactions += 1;
            summary.confidential += u64::from(audited.confidential);
            summary.anonymous += u64::from(audited.anonymous);
            summary.unlinkable += u64::from(audited.unlinkable);
            let unknown = |parties: &[specie_auditor::Party]| parties.iter().any(|p| p.owner == Owner::Unknown);
            let unnamed = (audited.anonymous && unknown(&audited.outputs))
                || (audited.unlinkable && (unknown(&audited.inputs) || unknown(&audited.outputs)));
            summary.unnamed += u64::from(unnamed);
            // An unlinkable transaction never names what its spent tokens held (the level's total
            // is counted below): that is not another jurisdiction's value.
            summary.unreadable += u64::from(!audited.readable() && !audited.unlinkable);
            summary.flagged += u64::from(audited.flagged);
            summary.minted += audited.clear_in;
            summary.taken_out += audited.clear_out;
            if !flagged_only || audited.flagged {
                print_audited(&audited, json);
            }
        }
    }
    summary.unlinkable_pool = auditor.unlinkable_pool();
    print_summary(&summary, height, json);
    Ok(if summary.invalid_proofs == 0 && summary.unendorsed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Confidential transactions of `block` whose proofs fail, verified together (one by one only
/// if the batch fails), each reported.
/// Anonymous transactions of `block` whose proofs fail: the values' transfer (hidden values),
/// every owner audit, and (if an RA key is known) every spend proof, under one of `authorities`.
fn invalid_anonymous(block: &Block, authorities: &[specie_credential::RaPublicKey]) -> u64 {
    let mut invalid = 0;
    for record in &block.records {
        let Some(tx) = record
            .transaction()
            .capability::<specie_private_transactions::AnonymousTransaction>()
        else {
            continue;
        };
        let context = tx.context();
        let values_hold = match &tx.values {
            specie_private_transactions::AnonymousValues::Hidden(proof) => proof.verify(&context).is_ok(),
            specie_private_transactions::AnonymousValues::Clear(_) => true,
        };
        // The node is not trusted to keep the audits' shape either: checked with them.
        let audits_hold = tx.owner_audits_hold(&context);
        let txid = tx.txid();
        let items: Vec<specie_credential::SpendItem<'_>> = tx
            .spend_proofs
            .iter()
            .zip(&tx.anonymous_inputs)
            .map(|(proof, input)| (proof, &input.owner, &txid.0))
            .collect();
        let spends_hold = authorities.is_empty()
            || (authorities.iter()).any(|authority| specie_credential::verify_batch(authority, &items).is_ok());
        if !(values_hold && audits_hold && spends_hold) {
            eprintln!(
                "INVALID PROOF in block {}: anonymous transaction {txid}",
                block.header.height
            );
            invalid += 1;
        }
    }
    invalid
}

/// The certifier group unlinkable proofs are checked against: the one given, or the node's.
fn certifier_group(
    client: &NodeClient,
    given: Option<&str>,
) -> anyhow::Result<Option<specie_credential::unlinkable::CertifierGroup>> {
    let parse = |text: &str| {
        let bytes = hex::decode(text.trim()).ok()?;
        specie_credential::unlinkable::CertifierGroup::decode_exact(&bytes).ok()
    };
    match given {
        Some(text) => parse(text).map(Some).ok_or_else(|| {
            anyhow::anyhow!("--certifiers is not a certifier group in hex (`specie certifier deal` writes group.hex)")
        }),
        None => Ok(client.info()?.certifiers.as_deref().and_then(parse)),
    }
}

/// Unlinkable transactions of `block` whose transfer proofs fail under every RA key of
/// `authorities` with `certifiers`, verified together under the first key (one by one only if the
/// batch fails). Without an RA key and the certifier group none can be checked: each counts as
/// invalid.
fn invalid_unlinkable(
    block: &Block,
    authorities: &[specie_credential::RaPublicKey],
    certifiers: Option<&specie_credential::unlinkable::CertifierGroup>,
) -> u64 {
    use specie_credential::unlinkable::{verify_unlinkable_batch, UnlinkableKeys};
    use specie_private_transactions::UnlinkableTransaction;
    let txs: Vec<(&UnlinkableTransaction, [u8; 32])> = (block.records.iter())
        .filter_map(|record| record.transaction().capability::<UnlinkableTransaction>())
        .map(|tx| (tx, tx.context()))
        .collect();
    let keys: Vec<UnlinkableKeys<'_>> = match certifiers {
        Some(certifiers) => (authorities.iter())
            .map(|authority| UnlinkableKeys { authority, certifiers })
            .collect(),
        None => vec![],
    };
    let batch: Vec<_> = txs.iter().map(|(tx, context)| (&tx.proof, context)).collect();
    if batch.is_empty()
        || keys
            .first()
            .is_some_and(|keys| verify_unlinkable_batch(keys, &batch).is_ok())
    {
        return 0;
    }
    let mut invalid = 0;
    for (tx, context) in &txs {
        if !keys.iter().any(|keys| tx.proof.verify(keys, context).is_ok()) {
            eprintln!(
                "INVALID PROOF in block {}: unlinkable transaction {}",
                block.header.height,
                tx.txid()
            );
            invalid += 1;
        }
    }
    invalid
}

fn invalid_proofs(block: &Block) -> u64 {
    let confidential: Vec<(&specie_private_transactions::ConfidentialTransaction, [u8; 32])> = block
        .records
        .iter()
        .filter_map(|record| {
            (record.transaction())
                .capability::<specie_private_transactions::ConfidentialTransaction>()
                .map(|tx| (tx, tx.context()))
        })
        .collect();
    let batch: Vec<_> = confidential.iter().map(|(tx, context)| (&tx.proof, *context)).collect();
    if batch.is_empty() || specie_confidential::verify_batch(&batch).is_ok() {
        return 0;
    }
    let mut invalid = 0;
    for (tx, context) in confidential {
        if tx.proof.verify(&context).is_err() {
            eprintln!(
                "INVALID PROOF in block {}: transaction {}",
                block.header.height,
                tx.txid()
            );
            invalid += 1;
        }
    }
    invalid
}

/// An owner in a line of text: a key's first 6 bytes, an enrolment id, or `unknown`.
fn short(owner: &Owner) -> String {
    match owner {
        Owner::Key(key) => hex::encode(&key[..6]),
        other => other.to_string(),
    }
}

fn print_audited(audited: &Audited, json: bool) {
    let value = |v: Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
    if json {
        let parties = |parties: &[specie_auditor::Party]| {
            parties
                .iter()
                .map(|p| serde_json::json!({"owner": p.owner.to_string(), "value": p.value}))
                .collect::<Vec<_>>()
        };
        let line = serde_json::json!({
            "height": audited.height,
            "position": audited.position,
            "txid": audited.txid.to_string(),
            "kind": audited.kind,
            "confidential": audited.confidential,
            "anonymous": audited.anonymous,
            "unlinkable": audited.unlinkable,
            "inputs": parties(&audited.inputs),
            "outputs": parties(&audited.outputs),
            "clear_in": audited.clear_in,
            "clear_out": audited.clear_out,
            "readable": audited.readable(),
            "flagged": audited.flagged,
            "cosigned_by": audited.cosigned_by.iter().map(hex::encode).collect::<Vec<_>>(),
        });
        println!("{line}");
        return;
    }
    let side = |parties: &[specie_auditor::Party]| {
        parties
            .iter()
            .map(|p| format!("{}:{}", short(&p.owner), value(p.value)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let cosigned: String = audited
        .cosigned_by
        .iter()
        .map(|key| format!("  co-signed:{}", &hex::encode(key)[..8]))
        .collect();
    println!(
        "{:>6}:{:<5} {} {:<15} {} -> {}{}{}",
        audited.height,
        audited.position,
        &audited.txid.to_string()[..16],
        audited.kind,
        side(&audited.inputs),
        side(&audited.outputs),
        cosigned,
        if audited.flagged { "  FLAGGED" } else { "" }
    );
}

fn print_summary(summary: &Summary, height: u64, json: bool) {
    if json {
        let line = serde_json::json!({
            "summary": {
                "blocks": height,
                "transactions": summary.transactions,
                "confidential": summary.confidential,
                "anonymous": summary.anonymous,
                "unlinkable": summary.unlinkable,
                "unlinkable_pool": summary.unlinkable_pool,
                "unnamed": summary.unnamed,
                "unreadable": summary.unreadable,
                "flagged": summary.flagged,
                "invalid_proofs": summary.invalid_proofs,
                "minted_in_clear": summary.minted,
                "taken_out_in_clear": summary.taken_out,
                "endorsed": summary.endorsed,
                "unendorsed": summary.unendorsed,
            }
        });
        println!("{line}");
        return;
    }
    println!(
        "{} blocks, {} transactions ({} confidential, {} anonymous, {} unlinkable holding {} in all, {} with owners not \
         in the directory, {} with values of another jurisdiction, {} with invalid proofs), {} flagged; {} came in and {} \
         went out in clear; {} records endorsed under the group key, {} not",
        height,
        summary.transactions,
        summary.confidential,
        summary.anonymous,
        summary.unlinkable,
        summary.unlinkable_pool,
        summary.unnamed,
        summary.unreadable,
        summary.invalid_proofs,
        summary.flagged,
        summary.minted,
        summary.taken_out,
        summary.endorsed,
        summary.unendorsed
    );
}
