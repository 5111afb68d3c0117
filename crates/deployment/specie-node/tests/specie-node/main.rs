//! The integration tests of `specie-node`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-node --test specie-node MODULE::`.

mod api;
mod atomizer_shape;
mod endorsement;
mod fastpay;
mod http_limits;
