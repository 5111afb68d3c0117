//! specie's HTTP/JSON API (`docs/api.md`), served the same way by an embedded node and by a
//! cluster's sentinels: the routes, the [`api::Backend`] trait each of them implements, the
//! transaction status types callers see, and every request and answer body as a type the
//! server and the wallet's client share ([`http_api`]). The bounded server in front is `specie_service::server`.

pub mod api;
pub mod certify_api;
pub mod cosign_api;
pub mod http_api;
pub mod observe;
mod status;
pub mod supply;
mod watchtower;

pub use api::{Backend, BackendError};
pub use http_api::NodeInfo;
pub use status::{Completion, CompletionSender, TxStatus};
pub use watchtower::{Watchtower, WATCHTOWER_CAPACITY_DEFAULT};
