//! The integration tests of `specie-atomizer`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-atomizer --test specie-atomizer MODULE::`.

mod replicated;
mod vectors;
