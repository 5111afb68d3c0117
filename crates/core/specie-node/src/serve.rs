//! `specie node`: an embedded node serving the HTTP API until Ctrl-C.

use std::net::SocketAddr;

use specie_api::http_server::{HttpLimitError, ServeUntilError};
use specie_api::HttpLimits;

use crate::{EmbeddedNode, NodeOptions, OpenError};

/// Why `specie node` could not serve, or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("invalid HTTP limits: {0}")]
    Limits(#[from] HttpLimitError),
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

/// Opens the node in `options.data_dir` and serves the API on `listen` with `limits` until
/// Ctrl-C, then shuts the node down.
pub fn serve(options: NodeOptions, listen: SocketAddr, limits: HttpLimits) -> Result<(), ServeError> {
    limits.validate()?;
    let data_dir = options.data_dir.clone();
    let node = EmbeddedNode::open(options).map_err(|source| ServeError::Open {
        data_dir: data_dir.display().to_string(),
        source: Box::new(source),
    })?;
    let handle = node.handle();
    let manifest = handle.manifest().clone();
    if manifest.issuers.is_empty() {
        eprintln!("warning: no issuer key configured, so nothing can be minted; restart with --issuer <HEX>");
    }
    let router = specie_api::api::router(handle);
    specie_api::http_server::serve_until_ctrl_c(listen, router, limits, |local| {
        eprintln!(
            "specie node: {} shards, data in {}, API on http://{local} (Ctrl-C to stop)",
            manifest.shards,
            data_dir.display(),
        );
    })?;
    node.shutdown();
    eprintln!("specie node: stopped");
    Ok(())
}
