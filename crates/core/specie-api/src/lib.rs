//! specie's HTTP/JSON API (`docs/api.md`), served the same way by an embedded node and by a
//! cluster's sentinels: the routes, the [`api::Backend`] trait each of them implements, and the
//! transaction status types callers see. The bounded server in front is `specie_service::server`.

pub mod api;
pub mod cosign_api;
mod status;
mod watchtower;

pub use api::{Backend, BackendError};
pub use status::{Completion, CompletionSender, NodeInfo, TxStatus};
pub use watchtower::{Watchtower, WATCHTOWER_CAPACITY_DEFAULT};
