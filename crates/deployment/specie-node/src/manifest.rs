use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::settings::{KeptSetting, KeptSettings, SettingsError};
use crate::NodeOptions;

/// What a data directory was created with. Fixed for its life: changing the shard count would
/// move UHS ids between shards, which needs a migration, not a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeManifest {
    pub format_version: u32,
    pub shards: usize,
    pub hrp: String,
    /// The network's identity: 16 random bytes (hex), made with the directory and served at
    /// `/v1/info`, so that a wallet can tell this node from another of the same currency.
    /// Directories from before it get one the next time they open.
    #[serde(default)]
    pub network_id: String,
    /// x-only issuer public keys, hex: only these may sign mints and redeems.
    pub issuers: Vec<String>,
    /// Whether the node keeps the ledger of record. Chosen at creation: a ledger started later
    /// could not replay to the UHS. Absent in directories from before the ledger: off.
    #[serde(default)]
    pub ledger_of_record: bool,
    /// How the core orders transactions. Chosen at creation: the two shapes keep different logs.
    /// Absent in directories from before the atomizer shape: two-phase commit.
    #[serde(default)]
    pub shape: CoreShape,
    /// Coordinators of the 2PC shape, each with its own log (`coordinator`, `coordinator-1`,
    /// …); the shards keep their dtxns apart. May grow, never shrink: a coordinator's log may
    /// hold dtxns in flight that only it can finish. Absent in directories from before: 1.
    #[serde(default = "one")]
    pub coordinators: usize,
    /// The keys the node banks and audits for (`[settings]`): kept from the start that first
    /// gave each, changed only by a start with `--reconfigure` or `--forget`.
    #[serde(default)]
    pub settings: KeptSettings,
}

fn one() -> usize {
    1
}

/// The online core's two deployment shapes (Hamilton §4 and §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoreShape {
    /// Shards commit each batch by two-phase commit: no global order, the highest throughput.
    #[default]
    #[serde(rename = "2pc")]
    TwoPhaseCommit,
    /// An atomizer orders every transaction into blocks that the shards apply: one global order.
    #[serde(rename = "atomizer")]
    Atomizer,
}

impl CoreShape {
    /// As in `node.toml` and `/v1/info`.
    pub fn name(self) -> &'static str {
        match self {
            CoreShape::TwoPhaseCommit => "2pc",
            CoreShape::Atomizer => "atomizer",
        }
    }
}

impl std::fmt::Display for CoreShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeManifestError {
    #[error("cannot read {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("cannot write {path}: {source}")]
    Write { path: String, source: std::io::Error },
    #[error("{path} is not a valid node manifest: {reason}")]
    Invalid { path: String, reason: String },
    #[error("{path} was created with {existing} shards; it cannot be reopened with {requested} (the UHS is partitioned by shard count)")]
    ShardsChanged {
        path: String,
        existing: usize,
        requested: usize,
    },
    #[error("{path} was created with address prefix '{existing}'; it cannot be reopened with '{requested}'")]
    HrpChanged {
        path: String,
        existing: String,
        requested: String,
    },
    #[error("{path} was created {}the ledger of record; it cannot be reopened {} it (the ledger must hold every transaction from genesis)", if *.existing { "with " } else { "without " }, if *.existing { "without" } else { "with" })]
    LedgerChanged { path: String, existing: bool },
    #[error("{path} runs {existing} coordinators; it cannot be reopened with {requested} (a coordinator's log may hold transactions in flight that only it can finish): start with --coordinators {existing} or more")]
    CoordinatorsReduced {
        path: String,
        existing: usize,
        requested: usize,
    },
    #[error("{path}: {requested} coordinators; {reason}")]
    CoordinatorsRefused {
        path: String,
        requested: usize,
        reason: String,
    },
    #[error("{path} was created in the {existing} shape; it cannot be reopened in the {requested} shape (their logs differ)")]
    ShapeChanged {
        path: String,
        existing: CoreShape,
        requested: CoreShape,
    },
}

pub const MANIFEST_FILE: &str = "node.toml";
/// Bytes of a network id.
const NETWORK_ID_BYTES: usize = 16;
const FORMAT_VERSION: u32 = 1;

/// Refuses a coordinator count no directory may have: before anything is written for a new
/// directory (`shape`: the one asked, or the directory's).
pub fn check_coordinators(dir: &Path, requested: usize, shape: CoreShape) -> Result<(), NodeManifestError> {
    let refused = |reason: String| NodeManifestError::CoordinatorsRefused {
        path: dir.join(MANIFEST_FILE).display().to_string(),
        requested,
        reason,
    };
    let max = specie_coordinator::COORDINATORS_MAX;
    if requested == 0 || requested > max {
        return Err(refused(format!("use 1 to {max}")));
    }
    if shape == CoreShape::Atomizer && requested > 1 {
        return Err(refused("the atomizer shape has one orderer, the atomizer".into()));
    }
    Ok(())
}

impl NodeManifest {
    /// Loads the manifest of `dir`, or creates it from the request if the directory is new.
    /// Issuers named in the request are added to those already trusted.
    pub fn load_or_create(
        dir: &Path,
        shards: Option<usize>,
        hrp: Option<&str>,
        issuers: &[String],
        ledger_of_record: Option<bool>,
        shape: Option<CoreShape>,
    ) -> Result<NodeManifest, NodeManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let shown = path.display().to_string();
        let mut manifest = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let manifest: NodeManifest = toml::from_str(&text).map_err(|e| NodeManifestError::Invalid {
                    path: shown.clone(),
                    reason: e.to_string(),
                })?;
                manifest.check_reopened(&shown, shards, hrp, ledger_of_record, shape)?;
                manifest
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => NodeManifest {
                format_version: FORMAT_VERSION,
                shards: shards.unwrap_or(2),
                hrp: hrp.unwrap_or("usd").to_string(),
                network_id: String::new(),
                settings: KeptSettings::default(),
                issuers: vec![],
                ledger_of_record: ledger_of_record.unwrap_or(true),
                shape: shape.unwrap_or_default(),
                coordinators: 1,
            },
            Err(source) => return Err(NodeManifestError::Read { path: shown, source }),
        };
        // Validate before anything is stored: a bad value written to node.toml would make every
        // later start fail, even with correct options.
        let shards_max = specie_shard::ShardRange::SHARDS_MAX;
        if manifest.shards == 0 || manifest.shards > shards_max {
            let reason = format!("shards must be between 1 and {shards_max}, got {}", manifest.shards);
            return Err(NodeManifestError::Invalid { path: shown, reason });
        }
        let hrp_ok = !manifest.hrp.is_empty()
            && manifest.hrp.len() <= 83
            && manifest
                .hrp
                .bytes()
                .all(|b| (33..=126).contains(&b) && !b.is_ascii_uppercase());
        if !hrp_ok {
            let reason = format!(
                "address prefix '{}' must be 1-83 lowercase printable ASCII characters",
                manifest.hrp
            );
            return Err(NodeManifestError::Invalid { path: shown, reason });
        }
        let id_ok = manifest.network_id.is_empty()
            || (manifest.network_id.len() == 2 * NETWORK_ID_BYTES
                && (manifest.network_id.bytes()).all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        if !id_ok {
            let reason = format!(
                "network_id '{}' is not {NETWORK_ID_BYTES} bytes of lowercase hex; restore the directory's own id from a backup of node.toml (wallets remember it)",
                manifest.network_id.chars().take(40).collect::<String>()
            );
            return Err(NodeManifestError::Invalid { path: shown, reason });
        }
        for issuer in issuers {
            let parsed = hex::decode(issuer)
                .ok()
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
            if parsed
                .and_then(|key| specie_transaction::signing::parse_xonly(&key))
                .is_none()
            {
                let reason = format!("issuer '{issuer}' is not a 32-byte x-only public key in hex");
                return Err(NodeManifestError::Invalid { path: shown, reason });
            }
        }
        let before = manifest.clone();
        if manifest.network_id.is_empty() {
            manifest.network_id = hex::encode(rand::random::<[u8; NETWORK_ID_BYTES]>());
        }
        for issuer in issuers {
            let issuer = issuer.to_ascii_lowercase();
            if !manifest.issuers.contains(&issuer) {
                manifest.issuers.push(issuer);
            }
        }
        if manifest != before || !path.exists() {
            manifest.store(dir)?;
        }
        Ok(manifest)
    }

    /// Settles the kept settings with what `options` gives and asks (`crate::settings`), stores
    /// them if they changed, and puts them into `options`.
    pub fn keep_settings(&mut self, dir: &Path, options: &mut NodeOptions) -> Result<(), SettingsError> {
        let settings = self.settings.merge(options, &options.settings_change)?;
        let mut issuers = self.issuers.clone();
        if options.settings_change.forget.contains(&KeptSetting::Issuers) {
            issuers = options
                .issuers
                .iter()
                .map(|issuer| issuer.to_ascii_lowercase())
                .collect();
        }
        settings.apply(options)?;
        if settings != self.settings || issuers != self.issuers {
            self.settings = settings;
            self.issuers = issuers;
            self.store(dir).map_err(|error| SettingsError::Store(Box::new(error)))?;
        }
        Ok(())
    }

    /// Settles how many coordinators run: `requested` if given (more than before is fine,
    /// fewer is refused), else what the directory has, or for a new one
    /// [`specie_coordinator::default_coordinators`] for this machine. Stores a change.
    pub fn settle_coordinators(
        &mut self,
        dir: &Path,
        requested: Option<usize>,
        created: bool,
    ) -> Result<usize, NodeManifestError> {
        let path = || dir.join(MANIFEST_FILE).display().to_string();
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let wanted = match (requested, self.shape) {
            (Some(requested), _) => requested,
            (None, CoreShape::TwoPhaseCommit) if created => {
                specie_coordinator::default_coordinators(self.shards, cores)
            }
            (None, _) => self.coordinators,
        };
        check_coordinators(dir, wanted, self.shape)?;
        if wanted < self.coordinators {
            return Err(NodeManifestError::CoordinatorsReduced {
                path: path(),
                existing: self.coordinators,
                requested: wanted,
            });
        }
        if wanted != self.coordinators {
            self.coordinators = wanted;
            self.store(dir)?;
        }
        Ok(wanted)
    }

    /// Refuses to reopen a directory with choices other than those it was created with.
    fn check_reopened(
        &self,
        shown: &str,
        shards: Option<usize>,
        hrp: Option<&str>,
        ledger_of_record: Option<bool>,
        shape: Option<CoreShape>,
    ) -> Result<(), NodeManifestError> {
        if self.format_version != FORMAT_VERSION {
            let reason = format!(
                "format_version {} is not supported (expected {FORMAT_VERSION})",
                self.format_version
            );
            return Err(NodeManifestError::Invalid {
                path: shown.to_string(),
                reason,
            });
        }
        if let Some(requested) = shards.filter(|s| *s != self.shards) {
            return Err(NodeManifestError::ShardsChanged {
                path: shown.to_string(),
                existing: self.shards,
                requested,
            });
        }
        if let Some(requested) = hrp.filter(|h| *h != self.hrp) {
            return Err(NodeManifestError::HrpChanged {
                path: shown.to_string(),
                existing: self.hrp.clone(),
                requested: requested.to_string(),
            });
        }
        if ledger_of_record.is_some_and(|requested| requested != self.ledger_of_record) {
            return Err(NodeManifestError::LedgerChanged {
                path: shown.to_string(),
                existing: self.ledger_of_record,
            });
        }
        if let Some(requested) = shape.filter(|s| *s != self.shape) {
            return Err(NodeManifestError::ShapeChanged {
                path: shown.to_string(),
                existing: self.shape,
                requested,
            });
        }
        Ok(())
    }

    fn store(&self, dir: &Path) -> Result<(), NodeManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let write = |source| NodeManifestError::Write {
            path: path.display().to_string(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(write)?;
        let text = toml::to_string_pretty(self).expect("manifest serializes");
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        std::fs::write(&tmp, text).map_err(write)?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(write)?;
        std::fs::rename(&tmp, &path).map_err(write)?;
        std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(write)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Coordinators may grow between starts and are kept; fewer is refused with the way out;
    /// the atomizer shape has one; a directory from before them has one.
    #[test]
    fn coordinators_grow_are_kept_and_never_shrink() {
        let dir = tempfile::tempdir().unwrap();
        let mut manifest = NodeManifest::load_or_create(dir.path(), Some(4), None, &[], None, None).unwrap();
        assert_eq!(manifest.settle_coordinators(dir.path(), Some(2), true).unwrap(), 2);
        let mut reopened = NodeManifest::load_or_create(dir.path(), None, None, &[], None, None).unwrap();
        assert_eq!(reopened.coordinators, 2, "kept in node.toml");
        assert_eq!(reopened.settle_coordinators(dir.path(), None, false).unwrap(), 2);
        let error = reopened.settle_coordinators(dir.path(), Some(1), false).unwrap_err();
        assert!(
            matches!(
                error,
                NodeManifestError::CoordinatorsReduced {
                    existing: 2,
                    requested: 1,
                    ..
                }
            ),
            "{error:?}"
        );
        assert!(error.to_string().contains("--coordinators 2 or more"), "{error}");
        assert_eq!(reopened.settle_coordinators(dir.path(), Some(3), false).unwrap(), 3);
        for refused in [0, specie_coordinator::COORDINATORS_MAX + 1] {
            assert!(matches!(
                reopened.settle_coordinators(dir.path(), Some(refused), false),
                Err(NodeManifestError::CoordinatorsRefused { .. })
            ));
        }
        let atomizer = tempfile::tempdir().unwrap();
        let mut manifest_a =
            NodeManifest::load_or_create(atomizer.path(), None, None, &[], None, Some(CoreShape::Atomizer)).unwrap();
        assert_eq!(manifest_a.settle_coordinators(atomizer.path(), None, true).unwrap(), 1);
        assert!(manifest_a.settle_coordinators(atomizer.path(), Some(2), false).is_err());
        let old = tempfile::tempdir().unwrap();
        std::fs::write(
            old.path().join(MANIFEST_FILE),
            "format_version = 1\nshards = 2\nhrp = \"usd\"\nissuers = []\n",
        )
        .unwrap();
        manifest = NodeManifest::load_or_create(old.path(), None, None, &[], None, None).unwrap();
        assert_eq!(manifest.settle_coordinators(old.path(), None, false).unwrap(), 1);
    }

    #[test]
    fn bad_options_are_refused_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        assert!(NodeManifest::load_or_create(dir.path(), Some(0), None, &[], None, None).is_err());
        assert!(NodeManifest::load_or_create(dir.path(), None, Some("USD"), &[], None, None).is_err());
        assert!(NodeManifest::load_or_create(dir.path(), None, None, &["zz".to_string()], None, None).is_err());
        assert!(
            !dir.path().join(MANIFEST_FILE).exists(),
            "nothing stored after refusals"
        );
        let created = NodeManifest::load_or_create(dir.path(), Some(3), None, &[], None, None).unwrap();
        assert_eq!(created.shards, 3);
        let reopened = NodeManifest::load_or_create(dir.path(), None, None, &[], None, None).unwrap();
        assert_eq!(reopened, created);
        assert!(matches!(
            NodeManifest::load_or_create(dir.path(), Some(4), None, &[], None, None),
            Err(NodeManifestError::ShardsChanged {
                existing: 3,
                requested: 4,
                ..
            })
        ));
        assert!(created.ledger_of_record, "on by default for a new directory");
        let error = NodeManifest::load_or_create(dir.path(), None, None, &[], Some(false), None).unwrap_err();
        assert!(
            matches!(error, NodeManifestError::LedgerChanged { existing: true, .. }),
            "{error:?}"
        );
        assert!(
            error.to_string().contains("created with the ledger of record"),
            "{error}"
        );
        // A directory from before the ledger has none, and keeps none.
        let old = tempfile::tempdir().unwrap();
        std::fs::write(
            old.path().join(MANIFEST_FILE),
            "format_version = 1\nshards = 2\nhrp = \"usd\"\nissuers = []\n",
        )
        .unwrap();
        let reopened = NodeManifest::load_or_create(old.path(), None, None, &[], None, None).unwrap();
        assert!(!reopened.ledger_of_record);
        assert_eq!(reopened.shape, CoreShape::TwoPhaseCommit);
        let error =
            NodeManifest::load_or_create(old.path(), None, None, &[], None, Some(CoreShape::Atomizer)).unwrap_err();
        assert!(error.to_string().contains("created in the 2pc shape"), "{error}");
        let error = NodeManifest::load_or_create(old.path(), None, None, &[], Some(true), None).unwrap_err();
        assert!(
            error.to_string().contains("created without the ledger of record"),
            "{error}"
        );
    }
}
