//! `specie offline authority`: the offline authority as a process. The role runs on the embedded
//! host over its own durable log (every change made durable before it is answered, so `kill -9`
//! loses nothing that was answered), and an HTTP/JSON API serves devices and the operator.
//!
//! Who may do what: devices certify keys, deposit, and read the revocation list, evidence, books
//! and key ring; anyone may hand in an offline funding the online core confirmed (the authority
//! checks the core itself); only the operator (the registrar) registers identities, with the
//! bearer token in `DATA_DIR/operator.token` (created 0600 on first start; compared in constant
//! time), and funds devices on its word only if started so, for trials without a core. Values
//! travel as hex of their canonical encodings (docs/offline-format.md; the bodies in
//! [`http_api`]); every decoder is bounded.

mod api;
mod host;
pub mod http_api;
pub mod service;

pub use api::{books_body, deposit_body, router, service_router, CoreLink};
pub use host::{log_report, AuthorityCall, AuthorityHandle, OpenError};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use specie_offline::{Denominations, Lifecycle};
use specie_offline_authority::AuthorityKeys;
use specie_service::server::ServeUntilError;
use specie_service::HttpLimits;

/// Why the authority could not serve, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("{0}")]
    Open(#[from] OpenError),
    /// Another process serves this data directory.
    #[error(transparent)]
    Locked(#[from] specie_log::DirLockError),
    #[error(transparent)]
    Http(#[from] ServeUntilError),
}

/// What `specie offline authority` runs with.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub limits: HttpLimits,
    /// The log's size after which the authority writes a snapshot.
    pub snapshot_log_bytes: u64,
    pub core_link: CoreLink,
}

/// The authority's keys, from the secret seed in `data_dir` (created on first start, 0600).
pub fn authority_keys(data_dir: &Path) -> Result<AuthorityKeys, OpenError> {
    host::create_private_dir(data_dir)?;
    let seed = host::secret_file(&data_dir.join("authority.seed"))?;
    Ok(keys_from_seed(&seed))
}

/// The authority's keys from its secret seed, wherever it is hosted: it starts in period 1 with
/// the default denominations and windows; later periods come from its log (rotations).
pub fn keys_from_seed(seed: &[u8; 32]) -> AuthorityKeys {
    let lifecycle = Lifecycle {
        current_period: 1,
        ..Lifecycle::default()
    };
    AuthorityKeys::from_seed(seed, Denominations::default(), lifecycle)
}

/// Binds the API's port, locks the data directory (held until the authority has stopped), opens
/// the authority and serves its API until Ctrl-C. A busy port fails before the data directory is
/// created or locked; a directory another process serves is refused.
pub fn serve(options: ServeOptions) -> Result<(), ServeError> {
    let listening = specie_service::server::Listening::bind(options.listen)?;
    let _lock = specie_log::DirLock::acquire(&options.data_dir, specie_log::dir_lock::RESTART_WAIT_MS)?;
    let authority = AuthorityHandle::open(&options.data_dir, options.snapshot_log_bytes)?;
    let data_dir = options.data_dir.clone();
    let served = listening.serve_until_ctrl_c(
        router(authority.clone(), options.core_link.clone()),
        options.limits,
        |local| {
            specie_service::announce::announce(format_args!(
                "specie offline authority: data in {}, API on http://{local}, operator token in {} (Ctrl-C to stop)",
                data_dir.display(),
                data_dir.join("operator.token").display()
            ));
        },
    );
    authority.stop();
    served?;
    specie_service::announce::announce(format_args!("specie offline authority: stopped"));
    Ok(())
}
