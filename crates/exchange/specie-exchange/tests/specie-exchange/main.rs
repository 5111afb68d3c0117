//! The integration tests of `specie-exchange`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-exchange --test specie-exchange MODULE::`.

mod blocks;
mod role;
