//! The integration tests of `specie-archiver`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-archiver --test specie-archiver MODULE::`.

mod ledger;
mod vectors;
