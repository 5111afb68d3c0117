//! The integration tests of `specie-log`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-log --test specie-log MODULE::`.

mod log;
mod model;
