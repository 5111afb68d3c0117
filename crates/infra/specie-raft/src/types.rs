//! The openraft type configuration. Crate-private: nothing of openraft shows in the public API,
//! so the pinned version can be replaced without touching the roles.

use std::io::Cursor;

/// A replica's id within its group. Stable across restarts (it names the replica in the log).
pub type NodeId = u64;

/// The payload of one Raft entry: a batch of opaque role commands, applied in order. One entry
/// per proposed batch is what makes one append (and one fsync) per batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch(pub Vec<Vec<u8>>);

/// The state machine's answers to one [`Batch`], one per command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Responses(pub Vec<Vec<u8>>);

openraft::declare_raft_types!(
    pub TypeConfig:
        D = Batch,
        R = Responses,
        NodeId = NodeId,
        Node = openraft::EmptyNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = crate::runtime::SeededTokio,
);

pub(crate) type StorageError = openraft::StorageError<NodeId>;
pub(crate) type LogId = openraft::LogId<NodeId>;
pub(crate) type Vote = openraft::Vote<NodeId>;
pub(crate) type StoredMembership = openraft::StoredMembership<NodeId, openraft::EmptyNode>;
pub(crate) type SnapshotMeta = openraft::SnapshotMeta<NodeId, openraft::EmptyNode>;
pub(crate) type Entry = openraft::Entry<TypeConfig>;
