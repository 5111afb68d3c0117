//! `specie node`: an embedded node serving the HTTP API until Ctrl-C.

use std::net::SocketAddr;

use specie_service::server::{HttpLimitError, Listening, ServeUntilError};
use specie_service::HttpLimits;

use crate::{EmbeddedNode, NodeOptions, OpenError};

/// Why `specie node` could not serve, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid HTTP limits: {0}")]
    Limits(#[from] HttpLimitError),
    /// Another process serves this data directory.
    #[error(transparent)]
    Locked(specie_log::DirLockError),
    #[error("cannot start a node on {data_dir}: {source}")]
    Open {
        data_dir: String,
        /// Boxed: a role's recovery error would make every `ServeError` large.
        #[source]
        source: Box<OpenError>,
    },
    #[error(transparent)]
    Http(#[from] ServeUntilError),
}

/// Binds `listen`, then opens (and locks) the node in `options.data_dir` and serves the API with
/// `limits` until Ctrl-C, then shuts the node down. A busy port fails before the data directory
/// is created or locked.
pub fn serve(options: NodeOptions, listen: SocketAddr, limits: HttpLimits) -> Result<(), ServeError> {
    limits.validate()?;
    let listening = Listening::bind(listen)?;
    let data_dir = options.data_dir.clone();
    let node = EmbeddedNode::open(options).map_err(|source| match source {
        OpenError::Locked(locked) => ServeError::Locked(locked),
        source => ServeError::Open {
            data_dir: data_dir.display().to_string(),
            source: Box::new(source),
        },
    })?;
    let handle = node.handle();
    let manifest = handle.manifest().clone();
    if manifest.issuers.is_empty() {
        specie_service::announce::announce(format_args!(
            "warning: no issuer key configured, so nothing can be minted; restart with --issuer <HEX>"
        ));
    }
    // Everything the node accepts follows from these: shown at every start (docs/operator-guide.md).
    if !manifest.issuers.is_empty() {
        specie_service::announce::announce(format_args!("specie node: issuers: {}", manifest.issuers.join(", ")));
    }
    for line in manifest.settings.describe() {
        specie_service::announce::announce(format_args!("specie node: {line}"));
    }
    // One node per process: its roles' families join every scrape of its `/metrics`.
    let gauges = handle.clone();
    specie_metrics::role::watch(move || gauges.role_gauges());
    let router = specie_api::api::router(handle);
    listening.serve_until_ctrl_c(router, limits, |local| {
        specie_service::announce::announce(format_args!(
            "specie node: currency {}, network {}, {} shards, data in {}, API on http://{local} (Ctrl-C to stop)",
            manifest.hrp,
            manifest.network_id,
            manifest.shards,
            data_dir.display(),
        ));
    })?;
    node.shutdown();
    specie_service::announce::announce(format_args!("specie node: stopped"));
    Ok(())
}
