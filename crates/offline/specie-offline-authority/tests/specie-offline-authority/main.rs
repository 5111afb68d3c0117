//! The integration tests of `specie-offline-authority`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-offline-authority --test specie-offline-authority MODULE::`.

mod world;

mod decoders;
mod deposits;
mod durability;
mod lifecycle;
mod model;
mod replicated;
