//! The integration tests of `specie-fastpay-primary`, one module per area, linked as one test
//! binary (a test binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-fastpay-primary --test specie-fastpay-primary MODULE::`.

mod common;

mod batch;
mod codec;
mod rules;
mod vectors;
