//! The service template: what every specie HTTP service (the node and the sentinels, the FastPay
//! authorities, the offline authority, the exchange, the auditor's co-signing service) shares,
//! with one home each: the bounded HTTP/1.1 server in front of each service's routes
//! ([`server`]: connection, header, body and time limits, graceful stop), the one error answer
//! ([`error`]), the one client that follows a replicated service's leader ([`client`]), what a
//! call into a role may end in ([`call`]), what a capability's service needs of the online core's
//! transactions ([`core_link`]), and what every port answers besides its service's routes
//! ([`observe`]: `/metrics`, `/livez`, `/readyz`, each request counted and timed; readiness
//! from [`health`]). Each service keeps its request and answer bodies as types in its own
//! `http_api` module, shared by its server and its client: the seam where API descriptions attach.

pub mod announce;
pub mod call;
pub mod client;
pub mod core_link;
pub mod error;
pub mod health;
pub mod observe;
pub mod openapi;
pub mod server;

pub use call::{funding_confirmed, CoreApi, CoreCheckError, MarkerLookup, Pending, Unavailable};
pub use core_link::{BridgeFundingTerms, CoreTransactions, NotAFunding, PayTo};
pub use error::{ApiError, ErrorBody, ErrorDetail, NoMore};
pub use openapi::{ApiDoc, Param};
pub use server::HttpLimits;
