//! The integration tests of `specie-wire`, one module per area, linked as one test binary (a test
//! binary per file made linking dominate the build). Run one area with
//! `cargo test -p specie-wire --test specie-wire MODULE::`.

#[path = "../doc_vectors/mod.rs"]
mod doc_vectors;

mod client_server;
mod frame_codec;
mod mutual_tls;
