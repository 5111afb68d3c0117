//! openraft's own storage test suite against the log store and the state-machine store.

use std::sync::Arc;

use openraft::testing::{StoreBuilder, Suite};
use tempfile::TempDir;

use specie_log::{DirLock, SyncMode};

use crate::log_store::{LogOptions, LogStore};
use crate::state_machine::{ReplicatedStateMachine, SnapshotRefused, StateMachineStore};
use crate::types::{StorageError, TypeConfig};

/// Counts applied commands; its snapshot is the count.
#[derive(Default)]
struct Counter(u64);

impl ReplicatedStateMachine for Counter {
    fn apply(&mut self, _proposer: crate::Proposer, _command: &[u8]) -> Vec<u8> {
        self.0 += 1;
        self.0.to_le_bytes().to_vec()
    }

    fn snapshot(&self) -> Vec<u8> {
        self.0.to_le_bytes().to_vec()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotRefused> {
        self.0 = u64::from_le_bytes(
            snapshot
                .try_into()
                .map_err(|_| SnapshotRefused::new("snapshot is not 8 bytes"))?,
        );
        Ok(())
    }
}

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore<Counter>, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachineStore<Counter>), StorageError> {
        let io =
            |e: std::io::Error| StorageError::from(openraft::StorageIOError::write_logs(openraft::AnyError::new(&e)));
        let dir = tempfile::tempdir().map_err(io)?;
        let lock = Arc::new(DirLock::acquire(dir.path(), 0).map_err(|e| io(std::io::Error::other(e)))?);
        let options = LogOptions {
            // Small segments, so the suite's purges and truncations cross segment boundaries.
            segment_bytes_max: 200,
            entry_bytes_max: 1 << 20,
            sync: SyncMode::Fsync,
        };
        let (log, _) = LogStore::open(lock.clone(), options).map_err(io)?;
        let sm = StateMachineStore::open(lock, SyncMode::Fsync, Counter::default()).map_err(io)?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).expect("openraft's storage suite passes");
}
