//! The console in the browser: `specie console` serves, from specie itself, the operator's view
//! of a cluster (or of one embedded node) and a wallet for every mode.
//!
//! ```text
//!  browser ──HTTP──▶ console (service template: limits, time-outs, /metrics, /livez)
//!                     │  pages rendered here (maud), one stylesheet, no script
//!                     ├─▶ replicas' own status        (operator.specie, mutual TLS)
//!                     ├─▶ sentinels' / node's API      (/v1/info, /v1/supply, /v1/ledger…, /metrics)
//!                     ├─▶ authorities, offline authority, exchange (their HTTP APIs)
//!                     └─▶ `specie wallet …` / `specie exchange …` on the wallet files of this host
//! ```
//!
//! Why server-rendered pages: the console must build on a fresh machine from the crate registry
//! alone and be served with no network access. A page is HTML from a compile-time template that
//! escapes every value it inserts; the one stylesheet is embedded in the binary; there is no
//! script at all, so the Content Security Policy forbids every script, and forms post to the
//! console itself (`form-action 'self'`) with a per-session CSRF token. Pages that show live data
//! refresh themselves (`<meta http-equiv="refresh">`).
//!
//! Read-only views are open to whoever reaches the port (bind it to loopback or put it behind
//! the operator's proxy); the wallets, which move money, need the operator's login: the token in
//! the cluster's PKI directory (`console.token`, 0600, made on first start), which only a holder
//! of the cluster's operator credentials can read.
//!
//! The wallet runs the `specie` program's own wallet commands on wallet files of this host, one
//! process per action, each taking the wallet file's lock: the keys never leave this machine, a
//! browser's action is exactly the command-line's (the same checks, the same crash safety), and
//! every error is the command's own sentence naming the fix.

mod auth;
mod chart;
mod fetch;
mod pages;
mod program;
mod routes;
mod sampler;
mod source;
mod views;
mod wallet;
mod wallet_views;

use std::path::PathBuf;
use std::sync::Arc;

pub use auth::{operator_token, TokenFileError, OPERATOR_TOKEN_FILE};
pub use routes::router;
pub use source::{Source, SourceError};

/// What the console serves, and from where.
pub struct ConsoleConfig {
    /// The cluster directory or the node the console shows.
    pub source: Source,
    /// Where the browser's wallets are kept (`NAME.json`, one per wallet).
    pub wallets_dir: PathBuf,
    /// The `specie` program the wallet's actions run.
    pub program: PathBuf,
    /// The operator's login token.
    pub operator_token: String,
    /// How often the sampler reads the sentinels' metrics for the charts, in milliseconds.
    pub sample_interval_ms: u64,
    /// An auditor's secret seed file: the auditors' view shows what it flags.
    pub auditor_key: Option<PathBuf>,
    /// The auditor flags a transaction with an output over this value (smallest units).
    pub flag_over: u64,
    /// The address the console listens on: requests must name it (or `origin`'s host), so that
    /// a page of another site rebinding its name to this address gets nothing.
    pub listen: std::net::SocketAddr,
    /// The origin browsers reach the console at through a proxy (`https://console.example`).
    pub origin: Option<String>,
}

/// The shared state of one console.
pub(crate) struct Console {
    pub config: ConsoleConfig,
    pub sessions: auth::Sessions,
    pub samples: sampler::Samples,
    /// The reads that cost the platform more than a status (every replica asked, the ledger's
    /// head, an audit run as a process), a few at a time whoever asks: a flood of page views
    /// waits here instead of multiplying the work upstream.
    pub heavy_reads: tokio::sync::Semaphore,
    /// The `Host` values the console answers (from `config`, made once).
    pub hosts: Vec<String>,
}

/// How many heavy reads run at once.
const HEAVY_READS_MAX: usize = 2;

impl Console {
    pub fn new(config: ConsoleConfig) -> Arc<Console> {
        Arc::new(Console {
            sessions: auth::Sessions::new(config.origin.clone()),
            hosts: routes::hosts(&config),
            config,
            samples: sampler::Samples::default(),
            heavy_reads: tokio::sync::Semaphore::new(HEAVY_READS_MAX),
        })
    }
}
