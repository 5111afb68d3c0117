use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use specie_codec::Decode;
use specie_node::endorsement::EndorsementOptions;
use specie_node::settings::{KeptSetting, SettingsChange};
use specie_node::{CoreShape, NodeOptions};
use specie_service::HttpLimits;

/// How the core orders transactions (docs/atomizer-shape.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShapeArg {
    /// Two-phase commit across the shards (Hamilton §4): no global order, the most throughput.
    #[value(name = "2pc")]
    TwoPhaseCommit,
    /// An atomizer orders every transaction into blocks the shards apply (Hamilton §5): one
    /// global order.
    Atomizer,
}

impl From<ShapeArg> for CoreShape {
    fn from(shape: ShapeArg) -> CoreShape {
        match shape {
            ShapeArg::TwoPhaseCommit => CoreShape::TwoPhaseCommit,
            ShapeArg::Atomizer => CoreShape::Atomizer,
        }
    }
}

/// Run every role (sentinel, coordinator, shards) in one process with a durable data directory,
/// serving the HTTP/JSON API of docs/api.md.
///
/// A transaction reported confirmed is on disk: it survives `kill -9` and a restart.
/// Example, with an issuer wallet made by `specie wallet --wallet issuer.json create --issuer`:
///   specie node --data-dir ./node-data --issuer <ISSUER-PUBLIC-KEY>
#[derive(Args, Debug)]
pub struct NodeArgs {
    /// Data directory (created if missing). Holds node.toml and one log per role; locked (LOCK)
    /// while the node runs, so a second process on it is refused.
    #[arg(long, default_value = "./specie-data")]
    pub data_dir: PathBuf,
    /// Address to serve the API on. Keep it on loopback unless a proxy adds TLS and auth.
    #[arg(long, default_value = "127.0.0.1:8470")]
    pub listen: SocketAddr,
    /// Number of shards the UHS is split into. Only for a new data directory.
    #[arg(long)]
    pub shards: Option<usize>,
    /// Coordinators (2PC shape), each on its own thread and log; batches go to them in turn.
    /// May grow between starts, never shrink (a coordinator may hold transactions in flight
    /// only it can finish). Kept in node.toml [default: what DIR has; for a new one, one per 8
    /// cores, at most one per shard].
    #[arg(long)]
    pub coordinators: Option<usize>,
    /// Issuer x-only public key (hex) allowed to mint and redeem; repeat for several. Remembered
    /// in node.toml.
    #[arg(long = "issuer", value_name = "HEX")]
    pub issuers: Vec<String>,
    /// The offline authority's bridge key (hex, 32 bytes; `GET /v1/offline/keys` of the authority
    /// shows it as `bridge`) this node banks for: bridge fundings to it and payouts it signed
    /// are valid. Without it, both are refused (`no_offline_authority`). Kept in node.toml.
    #[arg(long, value_name = "HEX", value_parser = parse_key_hex)]
    pub offline_authority: Option<[u8; 32]>,
    /// The exchange's bridge key (hex, 32 bytes) this node banks for: deposits to the exchange
    /// and the withdrawals it signed are valid. Without it (and without --offline-authority),
    /// both are refused. Kept in node.toml.
    #[arg(long, value_name = "HEX", value_parser = parse_key_hex)]
    pub exchange: Option<[u8; 32]>,
    /// An auditor with jurisdiction (its public key, hex, as `specie audit keygen` prints it);
    /// repeat for several. Every confidential transaction must encrypt its values to each, or
    /// it is refused (`auditor_missing`). Kept in node.toml.
    #[arg(long = "auditor", value_name = "HEX", value_parser = parse_auditor_key)]
    pub auditors: Vec<[u8; 32]>,
    /// The registration authority whose credentials authorise anonymous spends (its public key,
    /// hex, as `specie ra init` and `specie ra key` print it). Without it the node refuses every
    /// anonymous transaction (`no_registration_authority`). Kept in node.toml.
    #[arg(long, value_name = "HEX", value_parser = parse_ra_key)]
    pub registration_authority: Option<Box<specie_credential::RaPublicKey>>,
    /// An owner auditor with jurisdiction (its owner key, hex: what follows `owner auditor key:`
    /// on the second line `specie audit keygen` prints); repeat for several, at most 4. Every
    /// anonymous transaction must encrypt every owner it names to each of them, or it is refused
    /// (`owner_auditor_missing`). Kept in node.toml.
    #[arg(
        long = "owner-auditor",
        value_name = "HEX",
        value_parser = parse_owner_auditor_key,
        requires = "registration_authority"
    )]
    pub owner_auditors: Vec<specie_credential::AuditorKey>,
    /// The certifier group of the unlinkable level (hex, as `specie certifier deal` prints it
    /// and writes to group.hex): unlinkable transactions must prove certificates of k of its
    /// members. Without it the node refuses every unlinkable transaction (`no_certifiers`).
    /// Kept in node.toml.
    #[arg(
        long,
        value_name = "HEX",
        value_parser = parse_certifier_group,
        requires = "registration_authority"
    )]
    pub certifiers: Option<Box<specie_credential::unlinkable::CertifierGroup>>,
    /// An active auditor (its co-signing key, hex: what follows `co-signing key:` in `specie
    /// audit keygen`'s output); repeat for several, in order. Every confidential or anonymous
    /// transaction must carry each one's co-signature after its own witnesses (the auditor's
    /// `specie audit serve` gives it, `specie wallet … --cosigner URL` asks for it), or it is
    /// refused (`active_auditor_missing`). Kept in node.toml.
    #[arg(long = "active-auditor", value_name = "HEX", value_parser = parse_xonly_key)]
    pub active_auditors: Vec<[u8; 32]>,
    /// The FastPay committee this node is the Primary of (hex of its canonical encoding, as
    /// `specie byzantine committee --show-committee` prints it): fundings of its accounts and
    /// redeems of its certificates are valid. Without it, both are refused
    /// (`no_fastpay_committee`). Kept in node.toml.
    #[arg(long, value_name = "HEX", value_parser = parse_fastpay_committee)]
    pub fastpay_committee: Option<specie_fastpay::Committee>,
    /// Replace the keys node.toml keeps with those given here (--offline-authority, --exchange,
    /// --auditor, --registration-authority, --owner-auditor, --certifiers, --active-auditor,
    /// --endorsement, --fastpay-committee).
    /// Without it a key other than the kept one is refused, and a key not given is kept: a
    /// restart without a flag never changes what the node accepts.
    #[arg(long)]
    pub reconfigure: bool,
    /// Drop a kept setting before this start's flags apply (repeat for several); `issuers`
    /// drops every issuer but those given with --issuer.
    #[arg(long, value_name = "SETTING", value_parser = parse_setting)]
    pub forget: Vec<KeptSetting>,
    /// Bech32 address prefix. Only for a new data directory.
    #[arg(long)]
    pub hrp: Option<String>,
    /// Create the data directory without the ledger of record (blocks of every confirmed
    /// transaction under <data-dir>/ledger, served at /v1/ledger). Only for a new data
    /// directory: a ledger must hold every transaction from genesis, so it cannot be added or
    /// dropped later.
    #[arg(long)]
    pub no_ledger_of_record: bool,
    /// Threshold endorsement: every transaction is validated and endorsed by K of N endorsers
    /// (FROST; docs/privacy.md) before the core takes it, and the ledger of record keeps each
    /// endorsement, which `specie audit show` verifies. Given as `K-of-N`, e.g. `3-of-4`. The
    /// endorsers are threads of this process: the protocol runs for real, but they add no
    /// security until they run apart (not built yet). Kept in node.toml.
    #[arg(long, value_name = "K-of-N", value_parser = parse_threshold)]
    pub endorsement: Option<(u16, u16)>,
    /// (--endorsement) Seed of the dealt key shares: the same seed gives the same group key
    /// after a restart, so the ledger's endorsements keep verifying.
    #[arg(long, default_value_t = 0, requires = "endorsement")]
    pub endorsement_seed: u64,
    /// How the core orders transactions. Only for a new data directory (node.toml keeps it):
    /// the two shapes keep different logs. Default for a new directory: 2pc.
    #[arg(long, value_enum)]
    pub shape: Option<ShapeArg>,
    /// Most compact transactions per dtxn (Hamilton used 2000).
    #[arg(long, default_value_t = 2000)]
    pub batch_transactions_max: usize,
    /// Most HTTP connections served at once. One more is answered at once with 503
    /// too_many_connections and closed, so a flood of idle or slow clients cannot use up the
    /// process's file descriptors. Keep it well under the open-file limit (`ulimit -n`).
    #[arg(
        long,
        default_value_t = HttpLimits::default().connections_max,
        value_parser = at_least_one,
        help_heading = "HTTP limits"
    )]
    pub http_connections_max: usize,
    /// Milliseconds a client has to send a request's complete header, counted from its first
    /// byte. A client that drips its header (slow-loris) is disconnected without an answer.
    #[arg(
        long,
        default_value_t = HttpLimits::default().header_timeout_ms,
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "HTTP limits"
    )]
    pub http_header_timeout_ms: u64,
    /// Milliseconds a client has to send a request's complete body once its header is in. A
    /// client that withholds or drips its body is answered 408 body_timeout and disconnected.
    /// At 4 MiB, the largest body, the default allows a client about 400 KiB/s.
    #[arg(
        long,
        default_value_t = HttpLimits::default().body_timeout_ms,
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "HTTP limits"
    )]
    pub http_body_timeout_ms: u64,
    /// Milliseconds a connection may stay open with no request in progress and no byte moving
    /// (a keep-alive connection between requests, a client that connects and sends nothing, one
    /// that stops reading its answer) before it is closed, freeing its slot for another client.
    #[arg(
        long,
        default_value_t = HttpLimits::default().idle_timeout_ms,
        value_parser = clap::value_parser!(u64).range(1..),
        help_heading = "HTTP limits"
    )]
    pub http_idle_timeout_ms: u64,
}

/// A FastPay committee, hex of its canonical encoding.
fn parse_fastpay_committee(text: &str) -> Result<specie_fastpay::Committee, String> {
    specie_node::settings::fastpay_committee(specie_node::settings::KeptSetting::FastpayCommittee, text.trim()).map_err(
        |_| "not a FastPay committee: expected the hex `specie byzantine committee --show-committee` prints".into(),
    )
}

/// A setting node.toml keeps, by its name (`--forget exchange`).
fn parse_setting(text: &str) -> Result<KeptSetting, String> {
    KeptSetting::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = KeptSetting::ALL.iter().map(|setting| setting.name()).collect();
        format!("not a kept setting; one of: {}", names.join(", "))
    })
}

/// `K-of-N`, with 2 ≤ K ≤ N ≤ 64 (a group of one is no threshold).
pub(crate) fn parse_threshold(text: &str) -> Result<(u16, u16), String> {
    let (k, n) = text
        .split_once("-of-")
        .ok_or_else(|| format!("'{text}' is not K-of-N (e.g. 3-of-4)"))?;
    let number = |part: &str| {
        part.parse::<u16>()
            .map_err(|_| format!("'{part}' is not a whole number"))
    };
    let (k, n) = (number(k)?, number(n)?);
    if k < 2 || k > n || n > specie_endorsement::ENDORSERS_MAX {
        return Err(format!(
            "{k}-of-{n}: need 2 <= K <= N <= {}",
            specie_endorsement::ENDORSERS_MAX
        ));
    }
    Ok((k, n))
}

fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

pub fn run(args: NodeArgs) -> anyhow::Result<ExitCode> {
    let limits = HttpLimits {
        connections_max: args.http_connections_max,
        header_timeout_ms: args.http_header_timeout_ms,
        body_timeout_ms: args.http_body_timeout_ms,
        idle_timeout_ms: args.http_idle_timeout_ms,
    };
    let mut options = NodeOptions::new(&args.data_dir);
    options.shards = args.shards;
    options.coordinators = args.coordinators;
    options.hrp = args.hrp;
    options.issuers = args.issuers;
    options.offline_authority = args.offline_authority;
    options.exchange = args.exchange;
    options.auditors = args.auditors;
    let mut owner_auditors = args.owner_auditors;
    owner_auditors.sort();
    owner_auditors.dedup();
    anyhow::ensure!(
        owner_auditors.len() <= specie_credential::AUDITORS_MAX,
        "{} owner auditors: a spend proof names at most {}, so every anonymous transaction would be refused",
        owner_auditors.len(),
        specie_credential::AUDITORS_MAX
    );
    options.registration_authority = args.registration_authority.map(|key| *key);
    options.owner_auditors = owner_auditors;
    options.certifiers = args.certifiers.map(|group| *group);
    options.active_auditors = args.active_auditors;
    options.fastpay_committee = args.fastpay_committee;
    options.batch_transactions_max = args.batch_transactions_max;
    options.ledger_of_record = args.no_ledger_of_record.then_some(false);
    options.shape = args.shape.map(CoreShape::from);
    options.settings_change = SettingsChange {
        reconfigure: args.reconfigure,
        forget: args.forget,
    };
    options.endorsement = args.endorsement.map(|(k, n)| EndorsementOptions {
        k,
        n,
        seed: args.endorsement_seed,
        compromised: vec![],
    });
    specie_node::serve::serve(options, args.listen, limits)?;
    Ok(ExitCode::SUCCESS)
}

fn parse_key_hex(text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    let key = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| format!("{} bytes, a key has 32", bytes.len()))?;
    // A small-order key would let anyone forge payouts.
    specie_ed25519::check_public_key(&key).map_err(|error| error.to_string())?;
    Ok(key)
}

/// A BIP-340 x-only public key: 32 bytes of hex on the curve.
fn parse_xonly_key(text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    let key = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| format!("{} bytes, a key has 32", bytes.len()))?;
    specie_transaction::signing::parse_xonly(&key).ok_or("not a BIP-340 public key (no curve point)")?;
    Ok(key)
}

/// An auditor's public key: 32 bytes of hex that decode to a Ristretto point.
pub fn parse_auditor_key(text: &str) -> Result<[u8; 32], String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    let key = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| format!("{} bytes, a key has 32", bytes.len()))?;
    specie_confidential::AuditorKey::from_bytes(key).ok_or("not an auditor key (no Ristretto point)")?;
    Ok(key)
}

/// The registration authority's public key: hex of its canonical encoding (`specie ra key`).
/// Boxed: a G2 point is large, and the arguments are one variant of the command enum.
fn parse_ra_key(text: &str) -> Result<Box<specie_credential::RaPublicKey>, String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    specie_credential::RaPublicKey::decode_exact(&bytes)
        .map(Box::new)
        .map_err(|error| format!("not a registration authority's public key (`specie ra key` prints it): {error}"))
}

/// A certifier group: hex of its canonical encoding (`specie certifier deal`'s group.hex).
fn parse_certifier_group(text: &str) -> Result<Box<specie_credential::unlinkable::CertifierGroup>, String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    specie_credential::unlinkable::CertifierGroup::decode_exact(&bytes)
        .map(Box::new)
        .map_err(|error| format!("not a certifier group (`specie certifier deal` writes one to group.hex): {error}"))
}

/// An owner auditor's key: hex of its canonical encoding (on the second line of `specie audit key`).
fn parse_owner_auditor_key(text: &str) -> Result<specie_credential::AuditorKey, String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    specie_credential::AuditorKey::decode_exact(&bytes).map_err(|error| {
        format!("not an owner auditor's key (`specie audit key` prints one after `owner auditor key:`): {error}")
    })
}
