//! The integration tests of `specie-private-transactions`, one module per area, linked as one
//! test binary (a test binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-private-transactions --test specie-private-transactions MODULE::`.
//!
//! Moved from `specie-sentinel`'s and `specie-transaction`'s tests with the private kinds.

mod common;

mod anonymous;
mod codec;
mod confidential;
mod unlinkable;
mod vectors;
