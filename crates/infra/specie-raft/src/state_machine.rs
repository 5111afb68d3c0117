//! The state-machine side of a replica (openraft's `RaftStateMachine`): applies committed batches
//! to the role's [`ReplicatedStateMachine`], builds snapshots from its `snapshot()` bytes, installs
//! snapshots received from the leader, and keeps the latest snapshot on disk.
//!
//! The role's state lives in memory only; the snapshot file is what survives a restart. On open
//! the state is restored from it and openraft replays the log entries after it. Snapshot file
//! `snapshot`: a [`write_record`](crate::fsio::write_record) whose body is
//! `u32 version ‖ u32 metadata length ‖ metadata ‖ state bytes`.

use std::io::{self, Cursor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, Snapshot, StorageIOError};
use parking_lot::Mutex;

use crate::codec::{self, Reader};
use specie_log::{DirLock, SyncMode};
use specie_metrics::raft::SnapshotStep;

use crate::fsio;
use crate::types::{Entry, LogId, NodeId, Responses, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

const SNAPSHOT_MAGIC: &[u8; 8] = b"SPRASNAP";
const SNAPSHOT_VERSION: u32 = 1;

/// A deterministic role state machine (shard, coordinator) as Raft replicates it.
///
/// Every replica applies the same commands in the same order, so `apply` must depend on nothing
/// but the state and the command: no clock, randomness, I/O, or iteration over hash maps with a
/// per-process seed. A command the state cannot use is answered (with an error response of the
/// role's own encoding), never a panic: it was committed and every replica will meet it.
pub trait ReplicatedStateMachine: Send + 'static {
    /// Applies one committed command and returns the answer for whoever proposed it (only the
    /// proposing replica sees it; the others drop it). `proposer` is the leader whose log entry
    /// carried it: a replica that still acts as leader learns from an entry of another leader
    /// that its lead is over, before its leadership watch says so.
    fn apply(&mut self, proposer: Proposer, command: &[u8]) -> Vec<u8>;

    /// The whole state, in the role's own encoding. Called on the apply path while it is paused,
    /// so it sees a consistent cut.
    fn snapshot(&self) -> Vec<u8>;

    /// Replaces the whole state with `snapshot` (bytes from `snapshot()` on some replica). It takes
    /// `&mut self` rather than building a new value so that a role can keep handles (say, to a
    /// shared engine) across the swap. On error the state must be left as it was.
    fn restore(&mut self, snapshot: &[u8]) -> Result<(), SnapshotRefused>;
}

/// The leader that appended a log entry: openraft orders leaders by term and then node id, so
/// both name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposer {
    pub term: u64,
    pub node: NodeId,
}

/// Why a role's state machine refused a snapshot's bytes (the role's own error inside).
#[derive(Debug, thiserror::Error)]
#[error("the snapshot is refused: {0}")]
pub struct SnapshotRefused(#[source] pub Box<dyn std::error::Error + Send + Sync>);

impl SnapshotRefused {
    pub fn new(reason: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SnapshotRefused {
        SnapshotRefused(reason.into())
    }
}

/// The newest snapshot, as held in memory and on disk.
#[derive(Clone)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: Arc<Vec<u8>>,
}

/// Shared by the state-machine store and its snapshot builders, which run on their own tasks.
struct SnapshotSlot {
    lock: Arc<DirLock>,
    sync: SyncMode,
    current: Mutex<Option<StoredSnapshot>>,
}

impl SnapshotSlot {
    /// Makes `snapshot` the current one, on disk first, unless a newer one is already current (a
    /// snapshot built from older state can finish after a newer one was installed).
    fn replace(&self, snapshot: StoredSnapshot) -> io::Result<()> {
        let mut current = self.current.lock();
        if current
            .as_ref()
            .is_some_and(|c| c.meta.last_log_id > snapshot.meta.last_log_id)
        {
            return Ok(());
        }
        let mut meta = Vec::new();
        codec::put_snapshot_meta(&mut meta, &snapshot.meta);
        let meta_len = u32::try_from(meta.len()).map_err(io::Error::other)?;
        let mut body = Vec::with_capacity(8 + meta.len() + snapshot.data.len());
        codec::put_u32(&mut body, SNAPSHOT_VERSION);
        codec::put_u32(&mut body, meta_len);
        body.extend_from_slice(&meta);
        body.extend_from_slice(&snapshot.data);
        fsio::write_record(self.lock.dir(), "snapshot", SNAPSHOT_MAGIC, &body, self.sync)?;
        *current = Some(snapshot);
        Ok(())
    }

    /// [`replace`](Self::replace) off the async workers when it syncs; inline when it does not
    /// (then it is a copy into the page cache, and a simulation's replicas do no I/O beside
    /// their tasks).
    async fn replace_off_runtime(self: Arc<Self>, snapshot: StoredSnapshot) -> io::Result<()> {
        if self.sync == SyncMode::None {
            return self.replace(snapshot);
        }
        tokio::task::spawn_blocking(move || self.replace(snapshot))
            .await
            .map_err(io::Error::other)?
    }

    fn load(lock: &DirLock) -> io::Result<Option<StoredSnapshot>> {
        let Some(body) = fsio::read_record(lock.dir(), "snapshot", SNAPSHOT_MAGIC)? else {
            return Ok(None);
        };
        let invalid = |reason: String| io::Error::new(io::ErrorKind::InvalidData, format!("snapshot: {reason}"));
        let mut r = Reader::new(&body, "snapshot");
        let version = r.u32().map_err(|e| invalid(e.to_string()))?;
        if version != SNAPSHOT_VERSION {
            return Err(invalid(format!("version {version}")));
        }
        let meta_bytes = r.byte_string().map_err(|e| invalid(e.to_string()))?;
        let mut meta_reader = Reader::new(meta_bytes, "snapshot metadata");
        let meta = meta_reader.snapshot_meta().map_err(|e| invalid(e.to_string()))?;
        meta_reader.finish().map_err(|e| invalid(e.to_string()))?;
        let data = body[8 + meta_bytes.len()..].to_vec();
        Ok(Some(StoredSnapshot {
            meta,
            data: Arc::new(data),
        }))
    }
}

pub(crate) struct StateMachineStore<S> {
    state: Arc<Mutex<S>>,
    applied: Option<LogId>,
    membership: StoredMembership,
    snapshots: Arc<SnapshotSlot>,
    /// Makes snapshot ids unique within this process, so two snapshots at the same log id are
    /// never mistaken for one stream.
    builds: Arc<AtomicU64>,
}

impl<S: ReplicatedStateMachine> StateMachineStore<S> {
    /// Opens the store in `lock`'s directory: restores `state` from the snapshot there, if any.
    /// `state` must be the initial state of the role, identical on every replica.
    pub(crate) fn open(lock: Arc<DirLock>, sync: SyncMode, state: S) -> io::Result<Self> {
        let mut state = state;
        let current = SnapshotSlot::load(&lock)?;
        let (applied, membership) = match &current {
            Some(snapshot) => {
                state
                    .restore(&snapshot.data)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("restoring snapshot: {e}")))?;
                (snapshot.meta.last_log_id, snapshot.meta.last_membership.clone())
            }
            None => (None, StoredMembership::default()),
        };
        Ok(StateMachineStore {
            state: Arc::new(Mutex::new(state)),
            applied,
            membership,
            snapshots: Arc::new(SnapshotSlot {
                lock,
                sync,
                current: Mutex::new(current),
            }),
            builds: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The role state, shared with the replica handle.
    pub(crate) fn state(&self) -> Arc<Mutex<S>> {
        self.state.clone()
    }
}

pub(crate) struct SnapshotBuilder {
    snapshot: StoredSnapshot,
    slot: Arc<SnapshotSlot>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let signature = self.snapshot.meta.signature();
        let started = Instant::now();
        self.slot
            .clone()
            .replace_off_runtime(self.snapshot.clone())
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(signature), AnyError::new(&e)))?;
        specie_metrics::raft::snapshot_step(SnapshotStep::Write, started.elapsed());
        Ok(Snapshot {
            meta: self.snapshot.meta.clone(),
            snapshot: Box::new(Cursor::new(self.snapshot.data.to_vec())),
        })
    }
}

impl<S: ReplicatedStateMachine> RaftStateMachine<TypeConfig> for StateMachineStore<S> {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Responses>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let mut state = self.state.lock();
        let mut responses = Vec::new();
        for entry in entries {
            self.applied = Some(entry.log_id);
            responses.push(match entry.payload {
                EntryPayload::Blank => Responses::default(),
                EntryPayload::Normal(batch) => {
                    let proposer = Proposer {
                        term: entry.log_id.leader_id.term,
                        node: entry.log_id.leader_id.node_id,
                    };
                    Responses(batch.0.iter().map(|c| state.apply(proposer, c)).collect())
                }
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership);
                    Responses::default()
                }
            });
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        // The state is encoded here, on the apply path, so the snapshot is the exact state as of
        // `applied`; writing it out happens later on the builder's own task.
        let started = Instant::now();
        let data = self.state.lock().snapshot();
        specie_metrics::raft::snapshot_step(SnapshotStep::Encode, started.elapsed());
        let build = self.builds.fetch_add(1, Ordering::Relaxed);
        let snapshot_id = match self.applied {
            Some(l) => format!("{}-{}-{}-{build}", l.leader_id.term, l.leader_id.node_id, l.index),
            None => format!("none-{build}"),
        };
        SnapshotBuilder {
            snapshot: StoredSnapshot {
                meta: SnapshotMeta {
                    last_log_id: self.applied,
                    last_membership: self.membership.clone(),
                    snapshot_id,
                },
                data: Arc::new(data),
            },
            slot: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let started = Instant::now();
        let data = Arc::new(snapshot.into_inner());
        let signature = meta.signature();
        self.state
            .lock()
            .restore(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(signature.clone()), AnyError::new(&e)))?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        self.snapshots
            .clone()
            .replace_off_runtime(stored)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(signature), AnyError::new(&e)))?;
        specie_metrics::raft::snapshot_step(SnapshotStep::Install, started.elapsed());
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.snapshots.current.lock().as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.to_vec())),
        }))
    }
}
