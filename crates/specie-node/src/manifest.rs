use std::path::Path;

use serde::{Deserialize, Serialize};

/// What a data directory was created with. Fixed for its life: changing the shard count would
/// move UHS ids between shards, which needs a migration, not a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeManifest {
    pub format_version: u32,
    pub shards: usize,
    pub hrp: String,
    /// x-only issuer public keys, hex: only these may sign mints and redeems.
    pub issuers: Vec<String>,
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
}

pub const MANIFEST_FILE: &str = "node.toml";
const FORMAT_VERSION: u32 = 1;

impl NodeManifest {
    /// Loads the manifest of `dir`, or creates it from the request if the directory is new.
    /// Issuers named in the request are added to those already trusted.
    pub fn load_or_create(
        dir: &Path,
        shards: Option<usize>,
        hrp: Option<&str>,
        issuers: &[String],
    ) -> Result<NodeManifest, NodeManifestError> {
        let path = dir.join(MANIFEST_FILE);
        let shown = path.display().to_string();
        let mut manifest = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let manifest: NodeManifest = toml::from_str(&text).map_err(|e| NodeManifestError::Invalid {
                    path: shown.clone(),
                    reason: e.to_string(),
                })?;
                if manifest.format_version != FORMAT_VERSION {
                    let reason = format!(
                        "format_version {} is not supported (expected {FORMAT_VERSION})",
                        manifest.format_version
                    );
                    return Err(NodeManifestError::Invalid { path: shown, reason });
                }
                if let Some(requested) = shards.filter(|s| *s != manifest.shards) {
                    return Err(NodeManifestError::ShardsChanged {
                        path: shown,
                        existing: manifest.shards,
                        requested,
                    });
                }
                if let Some(requested) = hrp.filter(|h| *h != manifest.hrp) {
                    return Err(NodeManifestError::HrpChanged {
                        path: shown,
                        existing: manifest.hrp,
                        requested: requested.to_string(),
                    });
                }
                manifest
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => NodeManifest {
                format_version: FORMAT_VERSION,
                shards: shards.unwrap_or(2),
                hrp: hrp.unwrap_or("usd").to_string(),
                issuers: vec![],
            },
            Err(source) => return Err(NodeManifestError::Read { path: shown, source }),
        };
        let before = manifest.clone();
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
