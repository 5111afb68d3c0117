//! `specie exchange serve`: the exchange as a process. The role runs on the embedded host over
//! its own durable log (a block is one record and one fsync; answered only once durable, so
//! `kill -9` loses nothing answered), its bridge reaches each currency's online core over HTTP to
//! find a funding's marker before crediting it, and an HTTP/JSON API serves traders
//! (docs/exchange.md, "The exchange as a process").
//!
//! `DATA_DIR` (0700) holds `exchange.seed` (0600: the exchange's identity and its bridge key
//! derive from it), `assets` (the currencies' names, in asset order, fixed at creation) and
//! `log/`.

mod api;
pub mod client;
pub mod core_bridge;
pub mod http_api;
pub mod service;

pub use api::router;
pub use service::ExchangeService;

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use sha2::{Digest, Sha256};
use specie_exchange::{ExchangeConfig, ExchangeInput, ExchangeReply, ExchangeRole, Ledger, RoleLimits};
use specie_host::RoleThread;
use specie_log::secret::SecretFileError;
use specie_log::LogOptions;
use specie_service::{CoreApi, CoreTransactions, HttpLimits};

/// Why the exchange could not be opened or served.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeServiceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not 64 hexadecimal digits (a 32-byte secret)")]
    BadSeed { path: PathBuf },
    #[error(
        "the exchange in {dir} trades {existing:?}; asked to trade {given:?} (the assets are fixed when the exchange is created)"
    )]
    OtherAssets {
        dir: PathBuf,
        existing: Vec<String>,
        given: Vec<String>,
    },
    #[error("an exchange trades 2 to 64 assets, each once; got {0:?}")]
    BadAssets(Vec<String>),
    #[error("cannot start the exchange: {0}")]
    Start(String),
    /// Another process serves this data directory.
    #[error(transparent)]
    Locked(#[from] specie_log::DirLockError),
    #[error(transparent)]
    Http(#[from] specie_service::server::ServeUntilError),
}

/// A currency the exchange trades, and the online core that mints it.
#[derive(Clone, Debug)]
pub struct Asset {
    pub name: String,
    /// The core that mints it, where deposits are checked.
    pub core: Option<CoreApi>,
}

/// What `specie exchange serve` runs with.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub assets: Vec<Asset>,
    pub limits: HttpLimits,
    pub block_interval_ms: u64,
    /// The online core's transaction format, through which the exchange reads a deposit's core
    /// funding and signs the payouts it makes (`specie_wallet::CORE_FORMAT`).
    pub core_format: &'static dyn CoreTransactions,
}

/// The running exchange.
#[derive(Clone)]
pub struct ExchangeHandle {
    pub role: RoleThread<ExchangeRole>,
    pub id: [u8; 32],
    pub bridge: SigningKey,
    pub assets: Vec<Asset>,
    pub core_format: &'static dyn CoreTransactions,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExchangeServiceError + '_ {
    move |source| ExchangeServiceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The exchange's seed in `data_dir` (created 0600, synced, on first start:
/// [`specie_log::secret::read_or_create`]).
fn seed(data_dir: &Path) -> Result<[u8; 32], ExchangeServiceError> {
    specie_log::secret::read_or_create(&data_dir.join("exchange.seed")).map_err(|error| match error {
        SecretFileError::Bad { path } => ExchangeServiceError::BadSeed { path },
        SecretFileError::Io { path, source } => ExchangeServiceError::Io { path, source },
        SecretFileError::Exists { path } => ExchangeServiceError::Io {
            path,
            source: std::io::ErrorKind::AlreadyExists.into(),
        },
    })
}

/// The exchange's identity and bridge key, derived from its secret seed: the same for every
/// replica of a cluster's exchange group, and for `specie exchange serve` over its data directory.
pub fn keys_from_seed(seed: &[u8; 32]) -> ([u8; 32], SigningKey) {
    (
        derive(seed, "identity"),
        SigningKey::from_bytes(&derive(seed, "bridge")),
    )
}

/// A key derived from the seed: SHA-256 of a domain, the purpose and the seed.
fn derive(seed: &[u8; 32], purpose: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"specie/exchange/seed/v1/");
    hasher.update(purpose.as_bytes());
    hasher.update(seed);
    hasher.finalize().into()
}

/// The assets' names as the data directory fixed them (written on first start).
fn fixed_assets(data_dir: &Path, given: &[Asset]) -> Result<(), ExchangeServiceError> {
    let names: Vec<String> = given.iter().map(|a| a.name.clone()).collect();
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    if !(2..=specie_exchange::ASSETS_MAX).contains(&names.len())
        || unique.len() != names.len()
        || names
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_lowercase()))
    {
        return Err(ExchangeServiceError::BadAssets(names));
    }
    let path = data_dir.join("assets");
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let existing: Vec<String> = text.lines().map(str::to_string).collect();
            if existing != names {
                return Err(ExchangeServiceError::OtherAssets {
                    dir: data_dir.to_path_buf(),
                    existing,
                    given: names,
                });
            }
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            std::fs::write(&path, names.join("\n")).map_err(io(&path))
        }
        Err(error) => Err(io(&path)(error)),
    }
}

impl ExchangeHandle {
    /// Opens (or creates) the exchange in `data_dir` trading `assets`, replaying its log.
    pub fn open(
        data_dir: &Path,
        assets: Vec<Asset>,
        block_interval_ms: u64,
        core_format: &'static dyn CoreTransactions,
    ) -> Result<ExchangeHandle, ExchangeServiceError> {
        std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700)).map_err(io(data_dir))?;
        fixed_assets(data_dir, &assets)?;
        let (id, bridge) = keys_from_seed(&seed(data_dir)?);
        let config = ExchangeConfig::new(id, assets.len());
        let record_bytes_max = u32::try_from(config.command_bytes_max()).expect("a block's record fits the log");
        let log = LogOptions {
            record_bytes_max,
            segment_bytes_max: 4 * u64::from(record_bytes_max),
            ..LogOptions::default()
        };
        let ledger = Ledger::genesis(config, vec![]).map_err(|e| ExchangeServiceError::Start(e.to_string()))?;
        let limits = RoleLimits {
            block_interval_ms,
            ..RoleLimits::default()
        };
        let role = RoleThread::start(
            "exchange",
            ExchangeRole::new(ledger, limits),
            &data_dir.join("log"),
            log,
            256 << 20,
            |report| log_report(&report),
        )
        .map_err(|e| ExchangeServiceError::Start(e.to_string()))?;
        Ok(ExchangeHandle {
            role,
            id,
            bridge,
            assets,
            core_format,
        })
    }

    /// The height and state hash now.
    pub fn summary(&self) -> Option<(u64, [u8; 32])> {
        match self.role.call_blocking(|ticket| ExchangeInput::Summary { ticket })? {
            ExchangeReply::Summary { height, state_hash } => Some((height, state_hash)),
            _ => None,
        }
    }
}

/// The role's reports: a block cleared goes to the metrics; a committed block that does not
/// apply is logged as the error it is.
pub fn log_report(report: &specie_exchange::ExchangeReport) {
    match report {
        specie_exchange::ExchangeReport::Cleared(cleared) => specie_metrics::exchange::block_cleared(
            cleared.transactions,
            std::time::Duration::from_micros(cleared.clearing.took_us),
            cleared.trades.iter().map(|trade| (trade.sell, trade.amount)),
        ),
        specie_exchange::ExchangeReport::BlockRefused { height, error } => {
            tracing::error!(height, %error, "exchange: a committed block does not apply");
        }
    }
}

/// The bridge key of the exchange in `data_dir` (created with its seed if new): what each
/// currency's core must bank for (`specie node --exchange`).
pub fn bridge_key(data_dir: &Path) -> Result<[u8; 32], ExchangeServiceError> {
    std::fs::create_dir_all(data_dir).map_err(io(data_dir))?;
    Ok(keys_from_seed(&seed(data_dir)?).1.verifying_key().to_bytes())
}

/// Binds the API's port, locks the data directory (held until the exchange has stopped), opens
/// the exchange and serves its API until Ctrl-C. A busy port fails before the data directory is
/// created or locked; a directory another process serves is refused.
pub fn serve(options: ServeOptions) -> Result<(), ExchangeServiceError> {
    let listening = specie_service::server::Listening::bind(options.listen)?;
    let _lock = specie_log::DirLock::acquire(&options.data_dir, specie_log::dir_lock::RESTART_WAIT_MS)?;
    let exchange = ExchangeHandle::open(
        &options.data_dir,
        options.assets,
        options.block_interval_ms,
        options.core_format,
    )?;
    let data_dir = options.data_dir.clone();
    let served = listening.serve_until_ctrl_c(router(std::sync::Arc::new(exchange.clone())), options.limits, |local| {
        specie_service::announce::announce(format_args!(
            "specie exchange: data in {}, API on http://{local} (Ctrl-C to stop)",
            data_dir.display()
        ));
    });
    exchange.role.stop();
    served?;
    specie_service::announce::announce(format_args!("specie exchange: stopped"));
    Ok(())
}
