//! The integration tests of `specie-fastpay`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-fastpay --test specie-fastpay MODULE::`.

mod accountability;
mod certificates;
mod decoders;
mod vectors;
