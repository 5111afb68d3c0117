//! `specie bench postgres`: the PostgreSQL baseline of Hamilton §6.1, beside specie's own swap
//! throughput measured in the same run.
//!
//! PostgreSQL gets the workload of `specie bench swap`: compact 2-in/2-out swaps over a set of
//! 32-byte UHS ids, no signature checks, every commit durable (fsync, synchronous commit and full
//! page writes on). Each swap is one call of a stored function, one transaction, issued closed-loop
//! by C client connections that each spend only ids they own, so no two transactions conflict. The
//! server is a throwaway cluster in a temporary directory, stopped and deleted when the command
//! ends, fails or is interrupted. docs/bench-postgres.md describes the settings and the results.
//!
//! The PostgreSQL client (tokio-postgres and its dependencies) is built only with the `postgres`
//! feature (`cargo build --release --features postgres`): without it the release binary carries
//! none of it, and the command says how to get it.

#[cfg(feature = "postgres")]
mod baseline;

use std::path::PathBuf;
use std::process::ExitCode;

#[cfg(not(feature = "postgres"))]
use crate::error::BenchError;
use crate::error::BenchResult;

/// Most client connections one level may open.
pub(crate) const MAX_CLIENTS: usize = 1000;

/// Client connection counts to try, ascending, without repeats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientLevels(pub Vec<usize>);

#[derive(Clone, Debug)]
pub struct PostgresOptions {
    /// Seconds to measure specie, and PostgreSQL at each client count (after a short warm-up).
    pub seconds: f64,
    /// UHS ids preloaded into each system before measuring.
    pub preload: usize,
    /// PostgreSQL client connections to try, comma-separated; the best level is the figure.
    pub clients: ClientLevels,
    /// Seconds of uncounted swaps at the largest client count before the first level: they
    /// absorb the full-page images PostgreSQL logs on each page's first change after the
    /// preload's checkpoint, which would otherwise all be charged to the first level.
    pub warmup: f64,
    /// Directory holding initdb, pg_ctl and postgres [default: the one on PATH, else the newest
    /// /usr/lib/postgresql/*/bin].
    pub pg_bin: Option<PathBuf>,
    /// System user the throwaway server runs as when this command runs as root (PostgreSQL
    /// refuses to run as root).
    pub pg_user: String,
    /// PostgreSQL commit_delay in microseconds (group commit: durability unchanged).
    pub commit_delay: u32,
    /// Shards of specie's embedded node (as `bench swap --shards`), and shard groups of the
    /// replicated cluster.
    pub shards: usize,
    /// Replicas per group of the replicated cluster (3 = three-way replication, as Hamilton's
    /// comparison); 0 measures the embedded node only.
    pub replicas: usize,
    /// specie compact transactions in flight, as `bench swap --window` and `bench cluster --window`.
    pub window: usize,
    pub json: bool,
}

/// Why a `--clients` list was not understood.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClientLevelsError(String);

impl std::str::FromStr for ClientLevels {
    type Err = ClientLevelsError;

    /// A comma-separated list of connection counts, each 1..=MAX_CLIENTS.
    fn from_str(text: &str) -> Result<ClientLevels, ClientLevelsError> {
        let mut levels = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let count: usize = part
                .parse()
                .map_err(|_| ClientLevelsError(format!("`{part}` is not a client count (expected e.g. 8,16,32,64)")))?;
            if count == 0 || count > MAX_CLIENTS {
                return Err(ClientLevelsError(format!(
                    "client counts must be between 1 and {MAX_CLIENTS}, not {count}"
                )));
            }
            levels.push(count);
        }
        levels.sort_unstable();
        levels.dedup();
        Ok(ClientLevels(levels))
    }
}

/// Runs the baseline; see the module documentation.
#[cfg(feature = "postgres")]
pub fn run(args: PostgresOptions) -> BenchResult<ExitCode> {
    baseline::run(args)
}

/// Says how to build a specie that has the baseline: this one was built without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
pub fn run(_args: PostgresOptions) -> BenchResult<ExitCode> {
    Err(BenchError::InvalidOptions(WITHOUT_POSTGRES.to_string()))
}

/// What `specie bench postgres` says in a binary built without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
const WITHOUT_POSTGRES: &str = "this specie was built without the PostgreSQL baseline (the `postgres` \
     feature, off by default to keep a PostgreSQL client out of the release binary); rebuild with \
     `cargo build --release --features postgres` (or `cargo run --release --features postgres -- bench postgres`)";

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn clients_list_is_parsed_sorted_and_bounded() {
        assert_eq!(
            ClientLevels::from_str("8,16,32,64"),
            Ok(ClientLevels(vec![8, 16, 32, 64]))
        );
        assert_eq!(ClientLevels::from_str(" 32, 8 ,32"), Ok(ClientLevels(vec![8, 32])));
        assert_eq!(ClientLevels::from_str("1"), Ok(ClientLevels(vec![1])));
        for bad in ["", "8,", "0", "x", "-4", "8;16", "1001"] {
            assert!(ClientLevels::from_str(bad).is_err(), "{bad:?} accepted");
        }
    }
}
