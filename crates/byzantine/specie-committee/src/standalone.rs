//! `specie byzantine committee`: a whole FastPay committee in one process beside an embedded node
//! (`specie node`), which is its Primary: every shard of every authority on its own durable host
//! ([`EmbeddedCommittee`]), each serving the FastPay clients' API ([`crate::http_server`]) under
//! its own path of one port, `/fastpay/{authority}/{shard}`. A funding is credited only once the
//! shard has found its marker in the node's UHS itself (`--core`). `GET /v1/fastpay/committee`
//! tells a wallet the committee and where each authority shard answers.
//!
//! One process holds every authority's key, so it adds no Byzantine fault tolerance: it is for
//! trying the mode on one machine, as the node is for the online core. A committee whose
//! authorities are operated apart runs in a cluster (`specie cluster up --authorities`).
//!
//! The authorities' keys come from one secret seed in the data directory (created 0600 on first
//! start): authority `i`'s key is SHA-256 of a domain tag, the seed and `i`. The same directory
//! always gives the same committee; another directory gives another.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use specie_authority::{Reply, ShardIndex};
use specie_fastpay::{AuthorityIndex, Committee, SigningKey};
use specie_log::LogOptions;
use specie_service::server::{Listening, ServeUntilError};
use specie_service::ApiDoc;
use specie_service::{ApiError, CoreApi, CoreCheckError, HttpLimits, Pending};

use crate::http_server::{self, AuthorityService, ShardPlace, Unavailable};
use crate::{AuthorityAddresses, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions, StartError};

/// Where a wallet learns the committee and the authority shards' paths.
pub const COMMITTEE_PATH: &str = "/v1/fastpay/committee";
/// The most authorities and shards per authority a standalone committee runs.
pub const AUTHORITIES_MAX: usize = 16;
pub const SHARDS_MAX: u32 = 16;
/// How long a call waits for its shard's answer before the caller is told to ask again.
const CALL_TIMEOUT_MS: u64 = 30_000;
const SEED_FILE: &str = "committee.seed";
const KEY_DOMAIN: &[u8] = b"specie/fastpay/standalone-authority-key/v1\0";

/// What `specie byzantine committee` runs with.
#[derive(Clone, Debug)]
pub struct CommitteeServeOptions {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    pub limits: HttpLimits,
    /// The node whose UHS fundings are checked in.
    pub core: CoreApi,
    pub authorities: usize,
    pub shards: u32,
}

/// Why the committee could not serve, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum CommitteeServeError {
    #[error("{0}")]
    Options(String),
    #[error(transparent)]
    Locked(#[from] specie_log::DirLockError),
    #[error(transparent)]
    Secret(#[from] specie_log::secret::SecretFileError),
    #[error("cannot start the committee: {0}")]
    Start(#[from] StartError),
    #[error(transparent)]
    Http(#[from] ServeUntilError),
}

/// `GET /v1/fastpay/committee`: the committee, and each authority's shards' paths on this port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitteeBody {
    /// The committee's canonical encoding, hex (what `specie node --fastpay-committee` takes).
    pub committee: String,
    /// `authorities[i][s]`: the path under which shard `s` of authority `i` serves its API.
    pub authorities: Vec<Vec<String>>,
}

/// Checks the shape asked for before anything is created.
fn check(options: &CommitteeServeOptions) -> Result<(), CommitteeServeError> {
    if !(4..=AUTHORITIES_MAX).contains(&options.authorities) {
        return Err(CommitteeServeError::Options(format!(
            "--authorities {}: a committee needs 4 to {AUTHORITIES_MAX} (3f + 1 tolerates f)",
            options.authorities
        )));
    }
    if !(1..=SHARDS_MAX).contains(&options.shards) {
        return Err(CommitteeServeError::Options(format!(
            "--shards {}: use 1 to {SHARDS_MAX}",
            options.shards
        )));
    }
    Ok(())
}

/// The authorities' keys from the seed in `data_dir` (made on first use).
pub fn committee_keys(data_dir: &Path, authorities: usize) -> Result<Vec<SigningKey>, CommitteeServeError> {
    std::fs::create_dir_all(data_dir).map_err(|source| specie_log::secret::SecretFileError::Io {
        path: data_dir.to_path_buf(),
        source,
    })?;
    let seed = specie_log::secret::read_or_create(&data_dir.join(SEED_FILE))?;
    Ok((0..authorities as u32)
        .map(|index| {
            let digest: [u8; 32] = Sha256::new()
                .chain_update(KEY_DOMAIN)
                .chain_update(seed)
                .chain_update(index.to_le_bytes())
                .finalize()
                .into();
            SigningKey::from_bytes(&digest)
        })
        .collect())
}

/// The committee (epoch 0) of `keys`, hex of its canonical encoding.
pub fn committee_hex(keys: &[SigningKey]) -> String {
    Committee::new(0, keys.iter().map(|k| k.verifying_key().to_bytes()).collect())
        .expect("distinct keys derived from one seed")
        .to_hex()
}

/// Binds the port, locks the data directory, starts every authority shard and serves their API
/// until Ctrl-C. A busy port fails before the data directory is created or locked.
pub fn serve(options: &CommitteeServeOptions) -> Result<(), CommitteeServeError> {
    check(options)?;
    let listening = Listening::bind(options.listen)?;
    let _lock = specie_log::DirLock::acquire(&options.data_dir, specie_log::dir_lock::RESTART_WAIT_MS)?;
    let keys = committee_keys(&options.data_dir, options.authorities)?;
    let committee_options = EmbeddedCommitteeOptions {
        data_dir: options.data_dir.join("authorities"),
        shards: options.shards,
        behaviours: vec![Behaviour::Honest; options.authorities],
        log: LogOptions::default(),
        snapshot_log_bytes: 64 << 20,
        credit_retransmit_ms: 100,
        channel_credits_max: 100_000,
    };
    let committee = Arc::new(EmbeddedCommittee::start(&committee_options, &keys, 0)?);
    let router = committee_router(&committee, options, committee_hex(&keys));
    let data_dir = options.data_dir.clone();
    let served = listening.serve_until_ctrl_c(router, options.limits, |local| {
        specie_service::announce::announce(format_args!(
            "specie byzantine committee: {} authorities × {} shard(s), committee {}, data in {}, API on http://{local} (Ctrl-C to stop)",
            options.authorities,
            options.shards,
            hex::encode(committee.committee().id()),
            data_dir.display()
        ));
    });
    if let Ok(committee) = Arc::try_unwrap(committee) {
        committee.stop();
    }
    served?;
    specie_service::announce::announce(format_args!("specie byzantine committee: stopped"));
    Ok(())
}

/// Every authority shard's API under its path, and the committee's description.
fn committee_router(committee: &Arc<EmbeddedCommittee>, options: &CommitteeServeOptions, encoded: String) -> Router {
    let mut router = Router::new();
    let mut doc = ApiDoc::new(
        "specie FastPay committee",
        "A standalone FastPay committee (`specie byzantine committee`): the committee, then each authority \
         shard's API under /fastpay/AUTHORITY/SHARD (docs/byzantine-mode.md, docs/api.md).",
    )
    .get::<CommitteeBody>(COMMITTEE_PATH, "The committee and where each authority shard answers");
    let mut paths = vec![];
    for authority in 0..committee.committee().size() {
        let mut shards = vec![];
        for shard in 0..committee.shards() {
            let path = format!("/fastpay/{authority}/{shard}");
            let service: Arc<dyn AuthorityService> = Arc::new(EmbeddedShard {
                committee: committee.clone(),
                authority: authority as AuthorityIndex,
                shard,
                core: options.core.clone(),
            });
            router = router.nest(&path, http_server::router(service));
            doc = http_server::describe(doc, &path);
            shards.push(path);
        }
        paths.push(shards);
    }
    let body = CommitteeBody {
        committee: encoded,
        authorities: paths,
    };
    router
        .route(COMMITTEE_PATH, get(move || async move { Json(body.clone()) }))
        .merge(doc.router())
        .fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint: authority shards answer under /fastpay/AUTHORITY/SHARD (see GET \
                 /v1/fastpay/committee and docs/api.md)",
            )
        })
}

/// Why a wallet could not learn a standalone committee from its API.
#[derive(Debug, thiserror::Error)]
pub enum ReadCommitteeError {
    #[error("cannot read the committee at {url} (is `specie byzantine committee` running there?): {reason}")]
    Unreachable { url: String, reason: String },
    #[error("{url} did not answer with a committee: {reason}")]
    Malformed { url: String, reason: String },
}

/// The committee a standalone committee's API at `url` describes, and each authority shard's
/// address there (one replica each).
pub fn read_committee(url: &str) -> Result<(Committee, Vec<AuthorityAddresses>), ReadCommitteeError> {
    let url = url.trim_end_matches('/');
    let asked = format!("{url}{COMMITTEE_PATH}");
    let response =
        ureq::get(&asked)
            .timeout(Duration::from_secs(10))
            .call()
            .map_err(|e| ReadCommitteeError::Unreachable {
                url: asked.clone(),
                reason: e.to_string(),
            })?;
    let body: CommitteeBody =
        specie_service::client::json_limited(response).map_err(|e| ReadCommitteeError::Malformed {
            url: asked.clone(),
            reason: e.to_string(),
        })?;
    committee_at(url, &body)
}

/// The committee `body` (the answer at `url`) describes, and its authority shards' addresses
/// under `url`.
fn committee_at(url: &str, body: &CommitteeBody) -> Result<(Committee, Vec<AuthorityAddresses>), ReadCommitteeError> {
    let malformed = |reason: String| ReadCommitteeError::Malformed {
        url: format!("{url}{COMMITTEE_PATH}"),
        reason,
    };
    let committee = Committee::from_hex(&body.committee).map_err(|e| malformed(e.to_string()))?;
    // A path goes after the URL the user gave: only `/` and plain characters, so that an answer
    // cannot move the calls to another host (`@elsewhere`) or scheme.
    let plain = |path: &String| {
        path.starts_with('/')
            && path.len() <= 64
            && path
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'/' || b == b'-' || b == b'_')
    };
    let shapes_fit = body.authorities.len() == committee.size()
        && body
            .authorities
            .iter()
            .all(|shards| (1..=SHARDS_MAX as usize).contains(&shards.len()) && shards.iter().all(plain));
    if !shapes_fit {
        return Err(malformed(format!(
            "{} authorities (with 1 to {SHARDS_MAX} plain paths each) named for a committee of {}",
            body.authorities.len(),
            committee.size()
        )));
    }
    let addresses = (body.authorities.iter())
        .map(|shards| AuthorityAddresses {
            shards: shards.iter().map(|path| vec![format!("{url}{path}")]).collect(),
        })
        .collect();
    Ok((committee, addresses))
}

/// One shard of one authority of an [`EmbeddedCommittee`], as the API reaches it.
struct EmbeddedShard {
    committee: Arc<EmbeddedCommittee>,
    authority: AuthorityIndex,
    shard: ShardIndex,
    core: CoreApi,
}

impl AuthorityService for EmbeddedShard {
    fn committee(&self) -> &Committee {
        self.committee.committee()
    }

    fn place(&self) -> ShardPlace {
        ShardPlace {
            authority: self.authority,
            shard: self.shard,
            shards: self.committee.shards(),
            replica: 1,
        }
    }

    fn ready(&self) -> Result<(), Unavailable> {
        Ok(())
    }

    fn call(&self, call: Call) -> Pending<'_, Result<Reply, Unavailable>> {
        let (committee, authority) = (self.committee.clone(), self.authority);
        Box::pin(async move {
            let waited = tokio::task::spawn_blocking(move || {
                let (answers, answer) = crossbeam_channel::bounded(1);
                committee.call(authority, call, 0, &answers);
                answer.recv_timeout(Duration::from_millis(CALL_TIMEOUT_MS))
            });
            match waited.await {
                Ok(Ok(answer)) => Ok(answer.reply),
                // No answer in time: the shard may still make it durable; the call is idempotent.
                Ok(Err(_)) => Err(Unavailable::OutcomeUnknown),
                Err(_) => Err(Unavailable::Stopping),
            }
        })
    }

    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>> {
        Box::pin(self.core.holds(marker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_gives_one_committee_and_another_seed_another() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = committee_hex(&committee_keys(a.path(), 4).unwrap());
        assert_eq!(committee_hex(&committee_keys(a.path(), 4).unwrap()), first);
        assert_ne!(committee_hex(&committee_keys(b.path(), 4).unwrap()), first);
        let keys = committee_keys(a.path(), 7).unwrap();
        assert_eq!(keys.len(), 7);
        assert_eq!(
            keys[..4].iter().map(|k| k.to_bytes()).collect::<Vec<_>>(),
            committee_keys(a.path(), 4)
                .unwrap()
                .iter()
                .map(|k| k.to_bytes())
                .collect::<Vec<_>>(),
            "more authorities keep the first ones' keys"
        );
    }

    #[test]
    fn a_committee_too_small_or_too_sharded_is_refused_before_anything_is_made() {
        let dir = tempfile::tempdir().unwrap();
        let options = |authorities, shards| CommitteeServeOptions {
            data_dir: dir.path().join("committee"),
            listen: "127.0.0.1:0".parse().unwrap(),
            limits: HttpLimits::default(),
            core: CoreApi {
                url: "http://127.0.0.1:1".into(),
                lookup: |_, _| Ok(false),
            },
            authorities,
            shards,
        };
        for (authorities, shards) in [(3, 1), (17, 1), (4, 0), (4, 17)] {
            assert!(matches!(
                serve(&options(authorities, shards)),
                Err(CommitteeServeError::Options(_))
            ));
        }
        assert!(!dir.path().join("committee").exists());
    }

    #[test]
    fn a_committee_answer_cannot_send_the_wallet_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let body = |paths: Vec<Vec<&str>>| CommitteeBody {
            committee: committee_hex(&committee_keys(dir.path(), 4).unwrap()),
            authorities: paths
                .into_iter()
                .map(|shards| shards.into_iter().map(str::to_string).collect())
                .collect(),
        };
        let good = body((0..4).map(|_| vec!["/fastpay/0/0"]).collect());
        let (committee, addresses) = committee_at("http://127.0.0.1:8495", &good).unwrap();
        assert_eq!(committee.size(), 4);
        assert_eq!(addresses[3].shards, [["http://127.0.0.1:8495/fastpay/0/0"]]);
        for hostile in ["@evil.example/x", "//evil.example", "/a?b", "/a#b", "/a b", "/%2e"] {
            let paths = (0..4).map(|_| vec![hostile]).collect();
            assert!(
                committee_at("http://127.0.0.1:8495", &body(paths)).is_err(),
                "{hostile}"
            );
        }
        assert!(
            committee_at("http://x", &body(vec![vec!["/a"]; 3])).is_err(),
            "3 authorities of 4"
        );
        assert!(
            committee_at("http://x", &body(vec![vec![]; 4])).is_err(),
            "an authority without shards"
        );
        let mut not_hex = good.clone();
        not_hex.committee = "zz".into();
        assert!(committee_at("http://x", &not_hex).is_err());
    }
}
