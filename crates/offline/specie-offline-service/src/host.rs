//! The authority on its own thread, on the embedded host over its log; callers hand it inputs
//! and await the reply. Calls that arrive together are taken in one turn, so their deposits are
//! checked in one batch and made durable with one fsync.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ed25519_dalek::SigningKey;
use specie_host::{RecoverError, RoleCall, RoleThread, RoleThreadError};
use specie_log::LogOptions;
use specie_offline_authority::{Input, OfflineAuthority, Reply, Report, StateError};
use specie_role::Ticket;

/// One call to the authority: its input, once the host gives it a ticket.
pub type AuthorityCall = RoleCall<OfflineAuthority>;

/// Why the authority could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not 64 hexadecimal digits (a 32-byte secret); remove it only if nothing was issued with it")]
    BadSecret { path: PathBuf },
    #[error("cannot recover the authority: {0}")]
    Recover(#[source] Box<RecoverError<StateError>>),
    #[error("cannot start the authority: {0}")]
    Start(String),
}

/// Logs what the authority reports (a double spend: whose, and where its evidence is), however
/// it is hosted.
pub fn log_report(report: &Report) {
    let Report::DoubleSpend(evidence) = report;
    tracing::warn!(
        serial = hex::encode(evidence.token.issuance.serial),
        identity = hex::encode(evidence.binding.identity),
        "double spend: the owner signed twice; evidence at GET /v1/offline/evidence/<identity>"
    );
}

/// The running authority: send it calls, read its key ring and operator token.
#[derive(Clone)]
pub struct AuthorityHandle {
    role: RoleThread<OfflineAuthority>,
    /// The bridge key: its public half is what the core banks for; it signs the payouts the API
    /// answers with.
    bridge: Arc<SigningKey>,
    operator_token: Arc<String>,
}

impl AuthorityHandle {
    /// Opens (or creates) the authority in `data_dir`: its secret seed and operator token, then
    /// its log, replayed into the state it had.
    pub fn open(data_dir: &Path, snapshot_log_bytes: u64) -> Result<AuthorityHandle, OpenError> {
        create_private_dir(data_dir)?;
        let keys = crate::authority_keys(data_dir)?;
        let operator_token = hex::encode(secret_file(&data_dir.join("operator.token"))?);
        let bridge = Arc::new(keys.bridge.clone());
        let role = RoleThread::start(
            "offline-authority",
            OfflineAuthority::new(keys),
            &data_dir.join("log"),
            LogOptions::default(),
            snapshot_log_bytes,
            |report| log_report(&report),
        )
        .map_err(|error| match error {
            RoleThreadError::Recover(error) => OpenError::Recover(error),
            other => OpenError::Start(other.to_string()),
        })?;
        Ok(AuthorityHandle {
            role,
            bridge,
            operator_token: Arc::new(operator_token),
        })
    }

    /// The authority's answer to `input`, once it is durable; none if the authority stopped.
    pub async fn call(&self, input: impl FnOnce(Ticket) -> Input + Send + 'static) -> Option<Reply> {
        self.role.call(input).await
    }

    /// The answers to `calls`, handed over together so the host takes them in one turn (their
    /// deposits checked in one batch, made durable with one fsync), waited for on this thread
    /// (not from an async task). `None` where the authority stopped first.
    pub fn call_together(&self, calls: Vec<AuthorityCall>) -> Vec<Option<Reply>> {
        self.role.call_together(calls)
    }

    /// The public key the core must bank for (`specie node --offline-authority`).
    pub fn bridge(&self) -> [u8; 32] {
        self.bridge.verifying_key().to_bytes()
    }

    /// The bridge key, which signs the payouts for the core that the API answers with.
    pub fn bridge_key(&self) -> &SigningKey {
        &self.bridge
    }

    /// Whether `token` is the operator's, compared in constant time.
    pub fn is_operator(&self, token: &str) -> bool {
        crate::service::token_matches(&self.operator_token, token)
    }

    /// Finishes the turn in progress and stops the authority's thread.
    pub fn stop(&self) {
        self.role.stop();
    }
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), OpenError> {
    let io = |source| OpenError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

/// A 32-byte secret kept as hex in `path` ([`specie_log::secret`]).
pub(crate) fn secret_file(path: &Path) -> Result<[u8; 32], OpenError> {
    specie_log::secret::read_or_create(path).map_err(|error| match error {
        specie_log::secret::SecretFileError::Io { path, source } => OpenError::Io { path, source },
        specie_log::secret::SecretFileError::Bad { path } => OpenError::BadSecret { path },
        // Another process made the file between this read and write; opening again reads it.
        specie_log::secret::SecretFileError::Exists { path } => OpenError::Io {
            path,
            source: std::io::ErrorKind::AlreadyExists.into(),
        },
    })
}
