//! The integration tests of `specie-coordinator`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-coordinator --test specie-coordinator MODULE::`.

mod forged_answers;
mod two_phase_model;
