//! The integration tests of `specie-endorsement`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-endorsement --test specie-endorsement MODULE::`.

mod common;

mod ceremony_wire;
mod doc_vectors;
mod keys_and_ceremonies;
mod properties;
mod roles;
mod wire;
