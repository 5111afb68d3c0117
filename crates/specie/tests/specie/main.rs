//! The integration tests of `specie`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie --test specie MODULE::`.

mod cluster_harness;

mod api_fuzz;
mod authorities;
mod backup;
mod byzantine_authorities;
mod cli;
mod cluster;
mod console;
mod containers;
mod crash;
mod exchange_cli;
mod exchange_cluster;
mod exchange_process;
mod hostile;
mod hosts;
mod membership;
mod netns;
mod observability;
mod offline_authority;
mod offline_cluster;
mod packaging;
mod ra;
mod unlinkable;
mod upgrade;
mod wallet_confidential;
mod wallet_fastpay;
