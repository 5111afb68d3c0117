//! The integration tests of `specie-authority`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-authority --test specie-authority MODULE::`.

mod committee;
mod durability;
mod encodings;
mod epochs;
mod replicated;
