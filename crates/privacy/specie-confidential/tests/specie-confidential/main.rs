//! The integration tests of `specie-confidential`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-confidential --test specie-confidential MODULE::`.

mod transfer;
mod vectors;
