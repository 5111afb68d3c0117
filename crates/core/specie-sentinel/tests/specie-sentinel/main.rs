//! The integration tests of `specie-sentinel`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-sentinel --test specie-sentinel MODULE::`.

mod common;

mod capability;
mod errors;
mod offline;
mod proptests;
mod sentinel;
