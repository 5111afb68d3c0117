//! The integration tests of `specie-sim`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-sim --test specie-sim MODULE::`.

mod atomizer_cluster_seeds;
mod atomizer_seeds;
mod byzantine_seeds;
mod cluster_seeds;
mod exchange_seeds;
mod offline_seeds;
mod privacy_seeds;
mod replication_seeds;
mod seeds;
