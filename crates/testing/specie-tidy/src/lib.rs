//! `specie-tidy` is a test-only crate: it has no API and nothing depends on it.
//!
//! Its one integration test, `tests/tidy.rs`, reads the workspace's source tree (the `Cargo.toml`
//! files and the Rust sources under `crates/**/src`) and enforces the workspace's layering and
//! hygiene rules: which crate folders may depend on which, that the pure protocol-role crates do no
//! I/O and read no clocks, a limit on function length, typed errors in library APIs, and no
//! `anyhow` in library crates. Violations that predate a rule are recorded in `allowlist.txt`,
//! which may only shrink. Run it with `cargo test -p specie-tidy`.
