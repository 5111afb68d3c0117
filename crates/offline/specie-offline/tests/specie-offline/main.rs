//! The integration tests of `specie-offline`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-offline --test specie-offline MODULE::`.

mod issuing_world;

mod decoders;
mod evidence;
mod history;
mod tokens;
mod vectors;
