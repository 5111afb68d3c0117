//! The integration tests of `specie-transaction`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-transaction --test specie-transaction MODULE::`.

mod common;

mod bip340;
mod capability;
mod extension_vectors;
mod proptests;
mod reference_vectors;
