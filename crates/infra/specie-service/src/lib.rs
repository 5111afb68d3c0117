//! The service template: what every specie HTTP service (the node and the sentinels, the FastPay
//! authorities, the offline authority, the exchange, the auditor's co-signing service) shares,
//! with one home each: the bounded HTTP/1.1 server in front of each service's routes
//! ([`server`]: connection, header, body and time limits, graceful stop), the one error answer
//! ([`error`]), and what a call into a role may end in ([`call`]).

pub mod call;
pub mod error;
pub mod server;

pub use call::{funding_confirmed, CoreCheckError, Pending, Unavailable};
pub use error::{ApiError, ErrorBody, ErrorDetail, NoMore};
pub use server::HttpLimits;
