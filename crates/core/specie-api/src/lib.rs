//! specie's HTTP/JSON API (`docs/api.md`), served the same way by an embedded node and by a
//! cluster's sentinels: the routes, the [`api::Backend`] trait each of them implements, the
//! bounded HTTP/1.1 server in front, and the transaction status types callers see.

pub mod api;
pub mod cosign_api;
pub mod http_server;
mod status;
mod watchtower;

pub use api::{Backend, BackendError};
pub use http_server::HttpLimits;
pub use status::{Completion, CompletionSender, NodeInfo, TxStatus};
pub use watchtower::{Watchtower, WATCHTOWER_CAPACITY_DEFAULT};
