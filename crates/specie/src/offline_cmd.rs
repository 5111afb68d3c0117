//! `specie offline …`: tools for offline cash.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_offline::{EvidenceBundle, EVIDENCE_BUNDLE_BYTES_MAX};
use specie_offline_bridge::device::{AuthorityClient, DeviceCommandError};
use specie_offline_service::http_api::{KeyBooksBody, KeysBody};

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
    /// Audit the authority's books: value funded from the core, paid back, outstanding; per
    /// issuing key, value paid back never above value issued; refused double-spent value and
    /// who owes it. Exits 0 when the books hold, 1 when they do not.
    Audit {
        /// The offline authority's API.
        #[arg(long, default_value = "http://127.0.0.1:8490")]
        authority: String,
        /// Print the books and the verdict as one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// (Operator) begin the next key period: the authority issues and certifies with the new
    /// period's keys from now on; tokens of older keys stay spendable through their spend window
    /// and depositable through their deposit window. Devices learn it when they sync. Run it on a
    /// schedule (monthly, say): the windows are counted in periods.
    Rotate {
        #[arg(long, default_value = "http://127.0.0.1:8490")]
        authority: String,
        /// The operator's bearer token (DATA_DIR/operator.token of the authority).
        #[arg(long)]
        operator_token_file: PathBuf,
    },
    /// (Operator) revoke an issuing key (hex), for instance one that leaked: devices refuse its
    /// tokens from their next sync, and holders deposit them, the authority paying those it
    /// issued (recoup) and nothing forged. Revoking a key of the current period begins the next.
    RevokeKey {
        #[arg(long, default_value = "http://127.0.0.1:8490")]
        authority: String,
        #[arg(long)]
        operator_token_file: PathBuf,
        key: String,
    },
    /// A device wallet: create, enrol and fund it, pay and receive offline, deposit and sync
    /// online (`specie offline device --help`).
    Device(crate::offline_device_cmd::DeviceArgs),
    /// Run the offline authority: its durable log in --data-dir and an HTTP/JSON API for devices
    /// and the operator, until Ctrl-C.
    ///
    /// Devices certify one-time keys, deposit tokens (re-issued, or paid out to the core) and
    /// fetch the revocation list; anyone reads the key ring, the books and the evidence against
    /// an identity. Value comes in from the online core: a device's offline funding, once the
    /// core at --core confirms it, is issued as tokens (the authority asks the core itself).
    /// Registering identities takes the operator's bearer token, which the first start writes to
    /// DATA_DIR/operator.token (0600) beside the authority's secret seed (DATA_DIR/authority.seed).
    /// Every answer is durable first: `kill -9` loses nothing that was answered
    /// (docs/offline-mode.md).
    ///
    /// First start, with a node that banks for this authority:
    ///   specie offline authority --data-dir auth --show-bridge-key        # creates the seed
    ///   specie node --data-dir core --issuer <KEY> --offline-authority <BRIDGE-KEY>
    ///   specie offline authority --data-dir auth --core http://127.0.0.1:8470
    Authority {
        /// Where the authority keeps its log, snapshots, seed and operator token.
        #[arg(long)]
        data_dir: PathBuf,
        /// Address of the HTTP API (loopback by default: put a TLS proxy in front to expose it).
        #[arg(long, default_value = "127.0.0.1:8490")]
        listen: std::net::SocketAddr,
        /// Log bytes after which a snapshot is written and the log behind it dropped.
        #[arg(long, default_value_t = 64 << 20)]
        snapshot_log_bytes: u64,
        /// The online core's HTTP API, asked whether a funding is confirmed.
        #[arg(long)]
        core: Option<String>,
        /// Let the operator fund devices on its word, value from nowhere that no core backs: only
        /// for a trial without a core (the platform's supply audit cannot cover it).
        #[arg(long)]
        allow_operator_funding: bool,
        /// Print the bridge key (what `specie node --offline-authority` takes), creating the
        /// authority's seed if needed, and exit.
        #[arg(long)]
        show_bridge_key: bool,
    },
}

impl OfflineArgs {
    /// Whether the command only reads files and prints (not a server, which must ignore SIGPIPE).
    pub fn prints_only(&self) -> bool {
        matches!(
            self.command,
            OfflineCommand::CheckEvidence { .. }
                | OfflineCommand::Device(_)
                | OfflineCommand::Audit { .. }
                | OfflineCommand::Rotate { .. }
                | OfflineCommand::RevokeKey { .. }
        )
    }
}

pub fn run(args: OfflineArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        OfflineCommand::CheckEvidence { file } => check_evidence(&file),
        OfflineCommand::Device(args) => crate::offline_device_cmd::run(args),
        OfflineCommand::Audit { authority, json } => audit(&authority, json),
        OfflineCommand::Rotate {
            authority,
            operator_token_file,
        } => key_change(&authority, &operator_token_file, |client| client.rotate()),
        OfflineCommand::RevokeKey {
            authority,
            operator_token_file,
            key,
        } => key_change(&authority, &operator_token_file, |client| client.revoke_key(&key)),
        OfflineCommand::Authority {
            data_dir,
            listen,
            snapshot_log_bytes,
            core,
            allow_operator_funding,
            show_bridge_key,
        } => {
            if show_bridge_key {
                let keys = specie_offline_service::authority_keys(&data_dir)?;
                println!("{}", hex::encode(keys.bridge.verifying_key().to_bytes()));
                return Ok(ExitCode::SUCCESS);
            }
            specie_offline_service::serve(specie_offline_service::ServeOptions {
                data_dir,
                listen,
                limits: specie_service::HttpLimits::default(),
                snapshot_log_bytes,
                core_link: specie_offline_service::CoreLink {
                    format: &specie_wallet::CORE_FORMAT,
                    core: core.as_deref().map(specie_wallet::core_api),
                    operator_funding: allow_operator_funding,
                },
            })?;
            Ok(ExitCode::SUCCESS)
        }
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

/// Reads the books and checks them: funded − paid back = outstanding, and per key paid back ≤
/// issued (value out never exceeds value in, key by key).
fn audit(authority: &str, json: bool) -> anyhow::Result<ExitCode> {
    let books = AuthorityClient::new(authority, None).books()?;
    let number = |text: &str| text.parse::<u128>().ok();
    let (Some(funded), Some(defunded), Some(outstanding)) = (
        number(&books.funded),
        number(&books.defunded),
        number(&books.outstanding),
    ) else {
        anyhow::bail!("{authority} answered books whose funded, defunded or outstanding is not a number: {books:?}");
    };
    let over: Vec<&KeyBooksBody> = books
        .by_key
        .iter()
        .filter(|key| number(&key.paid) > number(&key.issued))
        .collect();
    let owed: u128 = books.debts.iter().filter_map(|debt| number(&debt.value)).sum();
    let balanced = funded.checked_sub(defunded) == Some(outstanding);
    let ok = balanced && over.is_empty();
    if json {
        println!(
            "{}",
            serde_json::json!({"books": books, "double_spent_value": owed.to_string(), "balanced": balanced, "keys_over_issued": over.len(), "ok": ok})
        );
    } else {
        println!("funded from the core   {funded}");
        println!("paid back to the core  {defunded}");
        println!(
            "outstanding in tokens  {outstanding}  (funded − paid back: {})",
            if balanced { "holds" } else { "DOES NOT HOLD" }
        );
        for key in &books.by_key {
            println!(
                "  denomination {:>6}: issued {}, paid back {} (key {})",
                key.denomination, key.issued, key.paid, key.issuing_key
            );
        }
        if !over.is_empty() {
            println!("{} keys paid back more than they issued", over.len());
        }
        println!(
            "double-spent value refused: {owed}, owed by {} identities",
            books.debts.len()
        );
        for debt in &books.debts {
            println!(
                "  {} owes {} ({} double spends; evidence: GET /v1/offline/evidence/{})",
                debt.identity, debt.value, debt.double_spends, debt.identity
            );
        }
        println!("audit {}", if ok { "OK" } else { "FAILED" });
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// An operator's key change (rotation or revocation); prints the period the authority is in.
fn key_change(
    authority: &str,
    token_file: &std::path::Path,
    change: impl FnOnce(&AuthorityClient) -> Result<KeysBody, DeviceCommandError>,
) -> anyhow::Result<ExitCode> {
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("cannot read the operator token {}", token_file.display()))?;
    let client = AuthorityClient::new(authority, Some(token.trim().to_string()));
    let answer = change(&client)?;
    println!(
        "the authority is in period {} (tokens spendable {} periods after their key's, depositable {})",
        answer.current_period, answer.spend_periods, answer.deposit_periods
    );
    Ok(ExitCode::SUCCESS)
}
