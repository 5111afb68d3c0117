//! The integration tests of `specie-credential`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-credential --test specie-credential MODULE::`.

mod codec;
mod credential;
mod unlinkable_vectors;
mod vectors;
