//! [`Replica`]: one member of a replicated group, the handle a role's driver holds.

use std::collections::BTreeSet;
use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use openraft::error::{ChangeMembershipError, ClientWriteError, InitializeError, RaftError};
use openraft::{ChangeMembers, Config, EmptyNode, Raft, RaftMetrics, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use tokio::sync::watch;

use specie_log::{DirLock, DirLockError, SyncMode};

use crate::fsio;
use crate::log_store::{LogCounters, LogOptions, LogStore};
use crate::network::{NetworkFactory, PeerLinks, RaftTransport, RpcHandler, SnapshotStream};
use crate::state_machine::{ReplicatedStateMachine, StateMachineStore};
use crate::types::{Batch, NodeId, TypeConfig};

const IDENTITY_MAGIC: &[u8; 8] = b"SPRAIDNT";
/// Encoding overhead of one entry beyond its commands' bytes: log id, kind, count, and a length
/// per command.
const ENTRY_OVERHEAD_BYTES: usize = 64;
/// Room in an RPC beyond one entry (vote, log ids, counts) or one snapshot chunk (metadata).
const REQUEST_OVERHEAD_BYTES: usize = 64 * 1024;

/// Tuning and limits for one replica. Every replica of a group should use the same values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// How often the leader sends heartbeats. Also openraft's time-out for one append-entries
    /// RPC, so it must exceed a round trip plus a follower's fsync.
    pub heartbeat_interval_ms: u64,
    /// A follower that hears no leader for a random time in `[min, max)` stands for election.
    pub election_timeout_min_ms: u64,
    pub election_timeout_max_ms: u64,
    /// Build a snapshot (and then compact the log) every this many applied entries. 0 turns
    /// automatic snapshots off, and the log then grows until `trigger_snapshot` is called.
    pub snapshot_every_entries: u64,
    /// Entries kept in the log behind a snapshot, so a briefly lagging follower catches up from
    /// the log instead of needing the whole snapshot.
    pub entries_kept_after_snapshot: u64,
    /// A log segment file is closed once it would grow past this; compaction deletes whole
    /// segments, so this is also the granularity at which disk space comes back.
    pub segment_bytes_max: u64,
    /// Most commands in one proposed batch.
    pub batch_commands_max: usize,
    /// Most bytes (sum of command lengths) in one proposed batch.
    pub batch_bytes_max: usize,
    /// Most entries the leader sends in one append-entries RPC.
    pub append_entries_max: u64,
    /// Largest request handed to the transport; larger append-entries requests are split.
    /// Must exceed one maximal batch and one snapshot chunk.
    pub request_bytes_max: usize,
    /// An append-entries request of several entries that encodes to more than this is split
    /// (a single entry goes alone, up to `request_bytes_max`). openraft gives an append up
    /// after `heartbeat_interval_ms`, so a lagging follower catches up only if a request
    /// crosses the link, and is written by the follower, within it: after an append answered
    /// late, the appends to that peer are halved (down to one entry), and grow back to this
    /// bound as they are answered in time.
    pub append_bytes_max: usize,
    /// Bytes of append-entries and snapshot requests sent to one peer and not yet answered,
    /// at most (a larger request goes alone). A request openraft gave up on still counts until
    /// answered or `request_answer_wait_ms_max` passes, since the network may still deliver it:
    /// this bounds what a slow follower can be sent at once.
    pub peer_bytes_in_flight_max: usize,
    /// A request is forgotten after this long without an answer, freeing its share of
    /// `peer_bytes_in_flight_max`. At least `install_snapshot_timeout_ms`.
    pub request_answer_wait_ms_max: u64,
    /// Snapshots are sent in chunks of this size.
    pub snapshot_chunk_bytes: u64,
    /// Time-out for one snapshot chunk RPC.
    pub install_snapshot_timeout_ms: u64,
    /// How long `propose` waits for its batch to be applied before giving up (outcome unknown).
    pub propose_timeout_ms: u64,
    /// Pause before retrying an unreachable peer.
    pub unreachable_backoff_ms: u64,
    /// How long `start` waits for the directory lock, held by an instance still shutting down.
    pub lock_wait_ms: u64,
    pub sync: SyncMode,
}

impl Default for ReplicaConfig {
    fn default() -> Self {
        ReplicaConfig {
            heartbeat_interval_ms: 100,
            election_timeout_min_ms: 500,
            election_timeout_max_ms: 1000,
            snapshot_every_entries: 10_000,
            entries_kept_after_snapshot: 1_000,
            segment_bytes_max: 64 * 1024 * 1024,
            batch_commands_max: 16 * 1024,
            batch_bytes_max: 16 * 1024 * 1024,
            append_entries_max: 64,
            request_bytes_max: 32 * 1024 * 1024,
            append_bytes_max: 4 * 1024 * 1024,
            peer_bytes_in_flight_max: 16 * 1024 * 1024,
            request_answer_wait_ms_max: 5_000,
            snapshot_chunk_bytes: 4 * 1024 * 1024,
            install_snapshot_timeout_ms: 5_000,
            propose_timeout_ms: 10_000,
            unreachable_backoff_ms: 200,
            lock_wait_ms: 5_000,
            sync: SyncMode::Fsync,
        }
    }
}

impl ReplicaConfig {
    /// The largest encoded entry a batch within the limits can produce.
    fn entry_bytes_max(&self) -> usize {
        self.batch_bytes_max + 4 * self.batch_commands_max + ENTRY_OVERHEAD_BYTES
    }

    fn validate(&self) -> Result<Config, StartError> {
        let invalid = |reason: &str| Err(StartError::InvalidConfig(reason.to_string()));
        if self.batch_commands_max == 0 || self.batch_bytes_max == 0 || self.append_entries_max == 0 {
            return invalid("batch and append limits must be positive");
        }
        let entry_bytes_max = self.entry_bytes_max();
        if u32::try_from(entry_bytes_max).is_err() {
            return invalid("batch_bytes_max and batch_commands_max make entries over 4 GiB");
        }
        if self.request_bytes_max < entry_bytes_max + REQUEST_OVERHEAD_BYTES {
            return invalid("request_bytes_max must hold one maximal batch");
        }
        if self.snapshot_chunk_bytes == 0
            || self.snapshot_chunk_bytes as usize + REQUEST_OVERHEAD_BYTES > self.request_bytes_max
        {
            return invalid("request_bytes_max must hold one snapshot chunk");
        }
        if self.append_bytes_max == 0 || self.append_bytes_max > self.request_bytes_max {
            return invalid("append_bytes_max must be positive and at most request_bytes_max");
        }
        if self.peer_bytes_in_flight_max == 0 || u32::try_from(self.peer_bytes_in_flight_max).is_err() {
            return invalid("peer_bytes_in_flight_max must be positive and under 4 GiB");
        }
        if self.request_answer_wait_ms_max < self.install_snapshot_timeout_ms.max(self.heartbeat_interval_ms) {
            return invalid(
                "request_answer_wait_ms_max must cover install_snapshot_timeout_ms and heartbeat_interval_ms",
            );
        }
        if self.segment_bytes_max == 0 || self.propose_timeout_ms == 0 {
            return invalid("segment_bytes_max and propose_timeout_ms must be positive");
        }
        let config = Config {
            cluster_name: "specie".into(),
            heartbeat_interval: self.heartbeat_interval_ms,
            election_timeout_min: self.election_timeout_min_ms,
            election_timeout_max: self.election_timeout_max_ms,
            install_snapshot_timeout: self.install_snapshot_timeout_ms,
            max_payload_entries: self.append_entries_max,
            snapshot_policy: match self.snapshot_every_entries {
                0 => SnapshotPolicy::Never,
                n => SnapshotPolicy::LogsSinceLast(n),
            },
            snapshot_max_chunk_size: self.snapshot_chunk_bytes,
            max_in_snapshot_log_to_keep: self.entries_kept_after_snapshot,
            ..Config::default()
        };
        // openraft checks the timing relations (heartbeat < election time-out, min < max).
        config.validate().map_err(|e| StartError::InvalidConfig(e.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid replica config: {0}")]
    InvalidConfig(String),
    #[error("node {id} is not among the group's members {members:?}")]
    NotAMember { id: NodeId, members: BTreeSet<NodeId> },
    /// [`Start::Prepared`] found no replica in the directory.
    #[error(
        "{dir} holds no replica (node {id}): it was wiped, or never prepared. A replica that lost its \
         log and votes must not vote again under its old id (it could elect a leader that lacks \
         committed entries); rebuild it under a new id instead (docs/operator-guide.md, \
         \"Replacing a replica\")"
    )]
    Wiped { dir: String, id: NodeId },
    /// Another replica (another process, or an instance of this one that has not let go within
    /// `lock_wait_ms`) holds the directory.
    #[error(transparent)]
    Locked(#[from] DirLockError),
    #[error("opening the replica directory: {0}")]
    Io(#[from] io::Error),
    #[error("starting raft: {0}")]
    Raft(String),
}

/// Why a proposal did not return the state machine's answers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProposeError {
    /// This replica is not the leader, or lost the lead and its entry was overwritten: the batch
    /// was not committed. `leader` is where to send it, if known.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    /// No answer within `propose_timeout_ms`: the batch may or may not commit later.
    #[error("no outcome within the propose time-out; the batch may still commit")]
    Timeout,
    #[error("batch is empty")]
    EmptyBatch,
    #[error("batch of {commands} commands, {bytes} bytes exceeds batch_commands_max or batch_bytes_max")]
    BatchTooLarge { commands: usize, bytes: usize },
    /// The replica has stopped (shut down, or a fatal storage error); the outcome is unknown.
    #[error("replica stopped: {0}")]
    Stopped(String),
}

/// Who belongs to a group, as one replica knows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    pub voters: BTreeSet<NodeId>,
    /// Members that receive the log but do not vote: replicas being added.
    pub learners: BTreeSet<NodeId>,
    /// A change is under way: the group is in a joint configuration, or its newest membership
    /// is not committed yet.
    pub changing: bool,
}

/// Why a membership change was not made.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    #[error("not the leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    /// One change at a time: another is under way (or a learner waits to be promoted).
    #[error("another membership change is under way: {0}")]
    InProgress(String),
    #[error("{0}")]
    Refused(String),
    /// No outcome within the propose time-out: the change may still complete.
    #[error("no outcome within the propose time-out; the change may still complete")]
    Timeout,
    #[error("replica stopped: {0}")]
    Stopped(String),
}

/// Whether this replica may act as its group's leader, as a watch channel reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// Leads `term`, a quorum has confirmed it, and it has applied every entry committed before
    /// it took the lead, so its state machine is complete: a coordinator may now `become_leader`
    /// and resume in-flight work.
    Leader {
        term: u64,
    },
    /// Someone else leads `term` (`leader`, if known), an election is on, or this replica was
    /// just elected and is still applying earlier entries.
    NotLeader {
        term: u64,
        leader: Option<NodeId>,
    },
    Stopped,
}

impl Leadership {
    /// What the metrics alone say. A replica openraft calls leader is reported `NotLeader` (with
    /// itself as leader) until [`watch_leadership`] has confirmed it caught up.
    fn from_metrics(metrics: &RaftMetrics<NodeId, EmptyNode>) -> Leadership {
        if metrics.running_state.is_err() || metrics.state == ServerState::Shutdown {
            return Leadership::Stopped;
        }
        Leadership::NotLeader {
            term: metrics.current_term,
            leader: metrics.current_leader,
        }
    }
}

/// Keeps `leadership` up to date with the replica's metrics. When openraft makes this replica
/// leader of a term, it is reported `Leader` only once a quorum still follows it
/// (`ensure_linearizable`) *and* every entry that was in its log when it took the lead is
/// applied. A leader never drops entries from its own log, so all of them commit under it; and
/// `ensure_linearizable` alone is not enough: openraft restarts a replica that was leader as
/// leader of the same term, with its commit point reset to its snapshot (openraft 0.9 reads
/// "the first entry of this leader's term, or the commit point", both of which can lie at or
/// before the snapshot), so it would report a state missing the entries after the snapshot.
async fn watch_leadership(
    raft: Raft<TypeConfig>,
    leadership: watch::Sender<Leadership>,
    confirm_timeout: Duration,
    retry_after: Duration,
) {
    let mut metrics = raft.metrics();
    loop {
        let (state, term, last_log_index) = {
            let m = metrics.borrow_and_update();
            leadership.send_if_modified(|current| {
                let now = Leadership::from_metrics(&m);
                let keep = matches!(now, Leadership::NotLeader { .. })
                    && m.state == ServerState::Leader
                    && *current == Leadership::Leader { term: m.current_term };
                !keep && std::mem::replace(current, now) != now
            });
            (m.state, m.current_term, m.last_log_index)
        };
        let mut retry = false;
        if state == ServerState::Leader && *leadership.borrow() != (Leadership::Leader { term }) {
            let caught_up = async {
                raft.ensure_linearizable().await.map_err(|e| e.to_string())?;
                if let Some(index) = last_log_index {
                    raft.wait(None)
                        .applied_index_at_least(Some(index), "leader applies its whole log")
                        .await
                        .map_err(|e| e.to_string())?;
                }
                Ok::<(), String>(())
            };
            let confirmed = matches!(tokio::time::timeout(confirm_timeout, caught_up).await, Ok(Ok(())));
            let still = {
                let m = raft.metrics();
                let m = m.borrow();
                m.state == ServerState::Leader && m.current_term == term
            };
            if confirmed && still {
                leadership.send_replace(Leadership::Leader { term });
            } else {
                retry = still;
            }
        }
        let changed = if retry {
            tokio::select! {
                changed = metrics.changed() => changed,
                () = tokio::time::sleep(retry_after) => Ok(()),
            }
        } else {
            metrics.changed().await
        };
        if changed.is_err() {
            leadership.send_replace(Leadership::Stopped);
            return;
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    Candidate,
    Follower,
    Learner,
    Stopped,
}

/// A point-in-time view of a replica. Indexes are Raft log indexes (the group's first entry is
/// index 0); `None` means nothing yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaMetrics {
    pub id: NodeId,
    pub role: Role,
    pub term: u64,
    pub leader: Option<NodeId>,
    /// Newest entry known committed by this replica.
    pub commit_index: Option<u64>,
    pub applied_index: Option<u64>,
    pub last_log_index: Option<u64>,
    /// Newest entry covered by this replica's snapshot.
    pub snapshot_index: Option<u64>,
    /// Newest entry removed from this replica's log by compaction.
    pub purged_index: Option<u64>,
    /// Batches of entries this replica's log has written since it started (one `pwrite` each).
    pub log_appends: u64,
    /// `fdatasync`s those appends took: at most one per batch, fewer when batches queue up.
    pub log_syncs: u64,
}

/// One member of a replicated group: a Raft node over a durable log in its own directory,
/// applying committed batches to the role's [`ReplicatedStateMachine`].
///
/// Only the leader accepts proposals (Hamilton §4.2: followers replicate and stand by). Dropping
/// a replica without [`Replica::shutdown`] stops it in the background.
pub struct Replica<S> {
    id: NodeId,
    config: ReplicaConfig,
    raft: Raft<TypeConfig>,
    state: Arc<Mutex<S>>,
    committed: Arc<AtomicU64>,
    log_counters: Arc<LogCounters>,
    leadership: watch::Receiver<Leadership>,
    leadership_task: tokio::task::JoinHandle<()>,
    /// How far the snapshot being received has arrived, shared by every RPC handler.
    snapshot_stream: Arc<parking_lot::Mutex<SnapshotStream>>,
    /// Alive while any store still holds the directory.
    dir_lock: Weak<DirLock>,
    shut_down: AtomicBool,
}

/// The stores a replica opened in its directory, the lock that keeps it theirs, and how the
/// replica came to be.
type OpenedStores<S> = (LogStore, StateMachineStore<S>, Weak<DirLock>, Origin);

/// How [`Replica::start`] treats its directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// A pristine directory founds a group of these members (the same set on every founding
    /// replica); a directory that holds the replica restarts it. For hosts that make their
    /// directories as they start them: tests, simulations, benchmarks, one-process nodes.
    Found(BTreeSet<NodeId>),
    /// The directory must hold the replica [`prepare`] made there (or one that ran since). A
    /// directory without it is refused with [`StartError::Wiped`]: a replica that lost its log
    /// and its votes must never vote again under its old id.
    Prepared,
}

/// How a replica came to be, as its directory records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// One of the members a group was founded with (empty in directories from before origins
    /// were recorded: those replicas have run, so they never found again).
    Founding(BTreeSet<NodeId>),
    /// Added to a group that runs: it waits, as a learner, for the leader to add it, and votes
    /// only once promoted.
    Joining,
}

const ORIGIN_FOUNDING: u8 = 0;
const ORIGIN_JOINING: u8 = 1;
/// The most members a founding record lists (far above any group's size).
const FOUNDING_MEMBERS_MAX: usize = 1024;

fn encode_identity(id: NodeId, origin: &Origin) -> Vec<u8> {
    let mut body = id.to_le_bytes().to_vec();
    match origin {
        Origin::Founding(members) => {
            body.push(ORIGIN_FOUNDING);
            body.extend_from_slice(&(members.len() as u32).to_le_bytes());
            members.iter().for_each(|m| body.extend_from_slice(&m.to_le_bytes()));
        }
        Origin::Joining => body.push(ORIGIN_JOINING),
    }
    body
}

fn decode_identity(body: &[u8]) -> Option<(NodeId, Origin)> {
    let id = NodeId::from_le_bytes(body.get(..8)?.try_into().ok()?);
    let rest = &body[8..];
    let origin = match rest.split_first() {
        // Written before origins were recorded.
        None => Origin::Founding(BTreeSet::new()),
        Some((&ORIGIN_JOINING, [])) => Origin::Joining,
        Some((&ORIGIN_FOUNDING, rest)) => {
            let count = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            let ids = &rest[4..];
            if count > FOUNDING_MEMBERS_MAX || ids.len() != count * 8 {
                return None;
            }
            Origin::Founding(
                ids.chunks_exact(8)
                    .map(|c| NodeId::from_le_bytes(c.try_into().expect("8")))
                    .collect(),
            )
        }
        Some(_) => return None,
    };
    Some((id, origin))
}

/// Why [`prepare`] did not make the replica.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{dir} already holds node {held}, not node {id}")]
    OtherReplica { dir: String, held: NodeId, id: NodeId },
    #[error("a founding replica must be among the members it founds with")]
    NotAMember,
    #[error(transparent)]
    Locked(#[from] DirLockError),
    #[error("preparing the replica directory: {0}")]
    Io(#[from] io::Error),
}

/// Makes `dir` replica `id`'s directory, to be started with [`Start::Prepared`]: a founding
/// member of a new group, or one joining a group that runs. Returns false, changing nothing, if
/// `dir` already holds replica `id` (a cluster made before); refuses a directory of another
/// replica, or one a running replica holds.
pub fn prepare(dir: &Path, id: NodeId, origin: &Origin, sync: SyncMode) -> Result<bool, PrepareError> {
    if let Origin::Founding(members) = origin {
        if !members.contains(&id) {
            return Err(PrepareError::NotAMember);
        }
    }
    let _lock = DirLock::acquire(dir, 0)?;
    match read_identity(dir)? {
        Some((held, _)) if held != id => Err(PrepareError::OtherReplica {
            dir: dir.display().to_string(),
            held,
            id,
        }),
        Some(_) => Ok(false),
        None => {
            fsio::write_record(dir, "identity", IDENTITY_MAGIC, &encode_identity(id, origin), sync)?;
            Ok(true)
        }
    }
}

fn read_identity(dir: &Path) -> io::Result<Option<(NodeId, Origin)>> {
    let Some(body) = fsio::read_record(dir, "identity", IDENTITY_MAGIC)? else {
        return Ok(None);
    };
    decode_identity(&body)
        .map(Some)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "identity: malformed record"))
}

/// Locks `dir` for replica `id` (waiting up to `lock_wait_ms`), checks that it is `id`'s (or makes
/// it so), and recovers the log and the state machine from it. Blocking: it may wait for the
/// lock, and recovery reads the whole log.
fn open_stores<S: ReplicatedStateMachine>(
    dir: &Path,
    id: NodeId,
    start: Start,
    lock_wait_ms: u64,
    log_options: LogOptions,
    sync: SyncMode,
    state_machine: S,
) -> Result<OpenedStores<S>, StartError> {
    let lock = Arc::new(DirLock::acquire(dir, lock_wait_ms)?);
    // A directory holds one replica's log and votes for good: reusing it under another id
    // would let one vote count twice, and a replica whose directory is gone must not vote again.
    let origin = match (read_identity(dir)?, start) {
        (Some((stored, _)), _) if stored != id => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} belongs to node {stored}, not node {id}", dir.display()),
            )
            .into())
        }
        (Some((_, origin)), _) => origin,
        (None, Start::Prepared) => {
            return Err(StartError::Wiped {
                dir: dir.display().to_string(),
                id,
            })
        }
        (None, Start::Found(members)) => {
            let origin = Origin::Founding(members);
            fsio::write_record(dir, "identity", IDENTITY_MAGIC, &encode_identity(id, &origin), sync)?;
            origin
        }
    };
    let (log_store, recovered) = LogStore::open(lock.clone(), log_options)?;
    if recovered.torn_tail_bytes > 0 || recovered.segments_deleted > 0 {
        tracing::warn!(
            dir = %dir.display(),
            torn_tail_bytes = recovered.torn_tail_bytes,
            segments_deleted = recovered.segments_deleted,
            "log recovery repaired a crash"
        );
    }
    let sm_store = StateMachineStore::open(lock.clone(), sync, state_machine)?;
    Ok((log_store, sm_store, Arc::downgrade(&lock), origin))
}

impl<S: ReplicatedStateMachine> Replica<S> {
    /// Opens the replica in `dir` (see [`Start`]) and starts it. A founding member proposes the
    /// group's first membership and a fresh group elects a leader among its founders by itself;
    /// a joining one waits for the leader to add it. `state_machine` must be the role's initial
    /// state: the replica restores its snapshot into it, if there is one, and replays the log
    /// after it. Must be called within a tokio runtime.
    pub async fn start(
        config: ReplicaConfig,
        dir: &Path,
        id: NodeId,
        start: Start,
        transport: Arc<dyn RaftTransport>,
        state_machine: S,
    ) -> Result<Replica<S>, StartError> {
        let raft_config = config.validate()?;
        if let Start::Found(members) = &start {
            if !members.contains(&id) {
                return Err(StartError::NotAMember {
                    id,
                    members: members.clone(),
                });
            }
        }
        let log_options = LogOptions {
            segment_bytes_max: config.segment_bytes_max,
            entry_bytes_max: u32::try_from(config.entry_bytes_max()).expect("validated"),
            sync: config.sync,
        };
        let dir = dir.to_path_buf();
        let lock_wait_ms = config.lock_wait_ms;
        let sync = config.sync;
        let open = move || open_stores(&dir, id, start, lock_wait_ms, log_options, sync, state_machine);
        // Taking the lock may wait, and recovery reads the whole log: off the async workers,
        // except without syncs (benchmarks, and simulations that need no I/O beside the tasks).
        let (log_store, sm_store, dir_lock, origin) = match sync {
            SyncMode::None => open()?,
            SyncMode::Fsync => tokio::task::spawn_blocking(open)
                .await
                .map_err(|e| StartError::Io(io::Error::other(e)))??,
        };

        let committed = log_store.committed_handle();
        let log_counters = log_store.counters();
        let state = sm_store.state();
        let network = NetworkFactory {
            transport,
            local: id,
            backoff: Duration::from_millis(config.unreachable_backoff_ms),
            // `validate` checked that it fits.
            links: PeerLinks::new(config.peer_bytes_in_flight_max as u32, config.append_bytes_max),
            request_answer_wait: Duration::from_millis(config.request_answer_wait_ms_max),
        };
        let raft = Raft::new(id, Arc::new(raft_config), network, log_store, sm_store)
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?;
        // Every founder of a fresh group proposes the same initial membership; openraft accepts
        // it only on a pristine replica, so on a restart the refusal is expected. A joining
        // replica proposes nothing: the leader's log tells it the membership.
        if let Origin::Founding(members) = origin {
            if !members.is_empty() {
                match raft.initialize(members).await {
                    Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                    Err(error) => {
                        let _ = raft.shutdown().await;
                        return Err(StartError::Raft(error.to_string()));
                    }
                }
            }
        }

        let (leadership_tx, leadership) = watch::channel(Leadership::from_metrics(&raft.metrics().borrow()));
        let leadership_task = tokio::spawn(watch_leadership(
            raft.clone(),
            leadership_tx,
            Duration::from_millis(config.election_timeout_max_ms),
            Duration::from_millis(config.heartbeat_interval_ms),
        ));

        Ok(Replica {
            id,
            config,
            raft,
            state,
            committed,
            log_counters,
            leadership,
            leadership_task,
            snapshot_stream: Arc::default(),
            dir_lock,
            shut_down: AtomicBool::new(false),
        })
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Proposes `batch` as one Raft entry (one append, one fsync per replica) and returns the
    /// state machine's answers, one per command, once the entry is committed and applied here.
    pub async fn propose(&self, batch: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, ProposeError> {
        self.submit(batch).await?.await
    }

    /// Hands `batch` to Raft as one entry now and returns what waits for its answers. Entries
    /// are appended in the order `submit` is called (awaiting it only queues the entry), so a
    /// host can keep several rounds of proposals in flight and still have them applied in the
    /// order its role proposed them.
    pub async fn submit(
        &self,
        batch: Vec<Vec<u8>>,
    ) -> Result<impl Future<Output = Result<Vec<Vec<u8>>, ProposeError>> + Send + 'static, ProposeError> {
        if batch.is_empty() {
            return Err(ProposeError::EmptyBatch);
        }
        let bytes: usize = batch.iter().map(Vec::len).sum();
        if batch.len() > self.config.batch_commands_max || bytes > self.config.batch_bytes_max {
            return Err(ProposeError::BatchTooLarge {
                commands: batch.len(),
                bytes,
            });
        }
        let timeout = Duration::from_millis(self.config.propose_timeout_ms);
        let answer = self
            .raft
            .client_write_ff(Batch(batch))
            .await
            .map_err(|fatal| ProposeError::Stopped(fatal.to_string()))?;
        Ok(async move {
            match tokio::time::timeout(timeout, answer).await {
                Err(_) => Err(ProposeError::Timeout),
                Ok(Err(_)) => Err(ProposeError::Stopped(
                    "the replica stopped before answering".to_string(),
                )),
                Ok(Ok(Ok(response))) => Ok(response.data.0),
                Ok(Ok(Err(ClientWriteError::ForwardToLeader(forward)))) => Err(ProposeError::NotLeader {
                    leader: forward.leader_id,
                }),
                // Only membership changes fail this way, and `submit` never makes one.
                Ok(Ok(Err(ClientWriteError::ChangeMembershipError(error)))) => {
                    Err(ProposeError::Stopped(error.to_string()))
                }
            }
        })
    }

    /// The most commands and bytes one proposed batch may hold.
    pub fn batch_limits(&self) -> (usize, usize) {
        (self.config.batch_commands_max, self.config.batch_bytes_max)
    }

    /// Whether this replica leads and has applied everything committed before its term (see
    /// [`Leadership::Leader`]).
    pub fn is_leader(&self) -> bool {
        matches!(*self.leadership.borrow(), Leadership::Leader { .. })
    }

    /// The leader of the current term as far as this replica knows.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// A receiver that sees every change of [`Leadership`]; a coordinator's driver waits on it
    /// to call `become_leader` / `step_down`.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    pub fn metrics(&self) -> ReplicaMetrics {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let role = match m.state {
            ServerState::Leader => Role::Leader,
            ServerState::Candidate => Role::Candidate,
            ServerState::Follower => Role::Follower,
            ServerState::Learner => Role::Learner,
            ServerState::Shutdown => Role::Stopped,
        };
        ReplicaMetrics {
            id: self.id,
            role,
            term: m.current_term,
            leader: m.current_leader,
            commit_index: self.committed.load(Ordering::Acquire).checked_sub(1),
            applied_index: m.last_applied.map(|l| l.index),
            last_log_index: m.last_log_index,
            snapshot_index: m.snapshot.map(|l| l.index),
            purged_index: m.purged.map(|l| l.index),
            log_appends: self.log_counters.appends.load(Ordering::Relaxed),
            log_syncs: self.log_counters.syncs.load(Ordering::Relaxed),
        }
    }

    /// On the leader: for each follower, how many entries of the leader's log it has not
    /// acknowledged (its whole log if it acknowledged none). Empty on a follower.
    pub fn replication_lag(&self) -> Vec<(NodeId, u64)> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let Some(replication) = &m.replication else {
            return vec![];
        };
        let last = m.last_log_index.map_or(0, |index| index + 1);
        (replication.iter())
            .filter(|(follower, _)| **follower != self.id)
            .map(|(follower, matched)| {
                let acknowledged = matched.map_or(0, |log_id| log_id.index + 1);
                (*follower, last.saturating_sub(acknowledged))
            })
            .collect()
    }

    /// Waits until this replica has applied the entry at `index`; false on time-out.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> bool {
        let mut metrics = self.raft.metrics();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if metrics
                .borrow_and_update()
                .last_applied
                .is_some_and(|l| l.index >= index)
            {
                return true;
            }
            match tokio::time::timeout_at(deadline, metrics.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// Reads the role state. The closure runs under the lock the apply path takes: keep it short.
    pub fn with_state<R>(&self, read: impl FnOnce(&S) -> R) -> R {
        read(&self.state.lock())
    }

    /// Lets the replica's host drive the state machine between applies, under the lock the
    /// apply path takes (keep it short). Only a host whose state machine keeps its replicated
    /// state out of reach of anything but `apply` should use it: `specie-host`'s role machine
    /// exposes a role's inputs and outputs here, and the role contract lets only `apply` change
    /// what is replicated.
    pub fn with_machine<R>(&self, drive: impl FnOnce(&mut S) -> R) -> R {
        drive(&mut self.state.lock())
    }

    /// Answers Raft requests from peers; register it with the transport.
    pub fn rpc_handler(&self) -> RpcHandler {
        RpcHandler::new(self.raft.clone(), self.snapshot_stream.clone())
    }

    /// Builds a snapshot now (and compacts the log behind it), whatever the snapshot policy.
    pub async fn trigger_snapshot(&self) -> Result<(), ProposeError> {
        self.raft
            .trigger()
            .snapshot()
            .await
            .map_err(|e| ProposeError::Stopped(e.to_string()))
    }

    /// The group's membership as this replica knows it.
    pub fn membership(&self) -> Membership {
        self.membership_view().0
    }

    /// The membership, whether its newest entry is committed, and whether the group is between
    /// two configurations (a change left half done when its leader went: asking for the same
    /// change again completes it).
    fn membership_view(&self) -> (Membership, bool, bool) {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let stored = &m.membership_config;
        let membership = stored.membership();
        let committed = self.committed.load(Ordering::Acquire);
        let uncommitted = stored.log_id().is_some_and(|log_id| log_id.index >= committed);
        let configs = membership.get_joint_config();
        let joint = configs.len() > 1;
        let view = Membership {
            voters: configs.last().cloned().unwrap_or_default(),
            learners: membership.learner_ids().collect(),
            changing: joint || uncommitted,
        };
        (view, uncommitted, joint)
    }

    /// On the leader: adds replica `id` as a learner. It receives the log (the transport must
    /// reach it) but does not vote until [`Replica::promote`]. Refused while another change is
    /// under way, including an earlier learner not yet promoted, and for an id the group knows.
    /// Adding a learner the group already has changes nothing, so a lost answer can be asked
    /// again; like [`Replica::promote`] of a voter and [`Replica::remove`] of a stranger.
    pub async fn add_learner(&self, id: NodeId) -> Result<Membership, MembershipError> {
        let (now, uncommitted, joint) = self.membership_view();
        self.leading()?;
        if now.learners.contains(&id) {
            return Ok(now);
        }
        if uncommitted || joint {
            return Err(MembershipError::InProgress(
                "another change is under way, or was left half done: ask for it again to complete it".into(),
            ));
        }
        if let Some(learner) = now.learners.first() {
            return Err(MembershipError::InProgress(format!(
                "learner {learner} waits to be promoted or removed"
            )));
        }
        if now.voters.contains(&id) {
            return Err(MembershipError::Refused(format!("node {id} is already a voter")));
        }
        let change = self.raft.add_learner(id, EmptyNode {}, false);
        self.change(change).await
    }

    /// On the leader: makes learner `id` a voter, once it is within `lag_max` entries of the
    /// leader's log (a learner far behind would stall commits the moment it counts). Completes
    /// a promotion left half done.
    pub async fn promote(&self, id: NodeId, lag_max: u64) -> Result<Membership, MembershipError> {
        let (now, uncommitted, joint) = self.membership_view();
        self.leading()?;
        if uncommitted {
            return Err(MembershipError::InProgress(
                "the newest membership is not committed yet".into(),
            ));
        }
        if now.voters.contains(&id) && !joint {
            return Ok(now);
        }
        if !now.learners.contains(&id) && !now.voters.contains(&id) {
            return Err(MembershipError::Refused(format!(
                "node {id} is not a learner of this group"
            )));
        }
        if !joint {
            let lag = (self.replication_lag().into_iter())
                .find(|(node, _)| *node == id)
                .map(|(_, lag)| lag);
            match lag {
                Some(lag) if lag <= lag_max => {}
                lag => {
                    return Err(MembershipError::Refused(format!(
                        "learner {id} is {} entries behind the leader; it is promoted within {lag_max}",
                        lag.map_or("an unknown number of".to_string(), |l| l.to_string())
                    )))
                }
            }
        }
        let change = self
            .raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false);
        self.change(change).await
    }

    /// On the leader: removes voter or learner `id` from the group for good (ids are never
    /// reused). Removing the leader itself is allowed: it steps down once the change commits.
    /// Refused if it would leave no voter, or while another change is under way; a stranger is
    /// removed already; a removal left half done is completed.
    pub async fn remove(&self, id: NodeId) -> Result<Membership, MembershipError> {
        let (now, uncommitted, joint) = self.membership_view();
        self.leading()?;
        if uncommitted {
            return Err(MembershipError::InProgress(
                "the newest membership is not committed yet".into(),
            ));
        }
        let changes = if now.learners.contains(&id) {
            ChangeMembers::RemoveNodes(BTreeSet::from([id]))
        } else if now.voters.contains(&id) {
            if now.voters.len() == 1 {
                return Err(MembershipError::Refused(format!("node {id} is the group's last voter")));
            }
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else if joint {
            // Already out of the newest configuration: the same change again leaves the joint one.
            ChangeMembers::RemoveVoters(BTreeSet::from([id]))
        } else {
            return Ok(now);
        };
        let change = self.raft.change_membership(changes, false);
        self.change(change).await
    }

    fn leading(&self) -> Result<(), MembershipError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(MembershipError::NotLeader { leader: self.leader() })
        }
    }

    async fn change(
        &self,
        change: impl Future<
            Output = Result<
                openraft::raft::ClientWriteResponse<TypeConfig>,
                RaftError<NodeId, ClientWriteError<NodeId, EmptyNode>>,
            >,
        >,
    ) -> Result<Membership, MembershipError> {
        let timeout = Duration::from_millis(self.config.propose_timeout_ms);
        match tokio::time::timeout(timeout, change).await {
            Err(_) => Err(MembershipError::Timeout),
            Ok(Ok(_)) => Ok(self.membership()),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(forward)))) => {
                Err(MembershipError::NotLeader {
                    leader: forward.leader_id,
                })
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(error)))) => match error {
                ChangeMembershipError::InProgress(in_progress) => {
                    Err(MembershipError::InProgress(in_progress.to_string()))
                }
                other => Err(MembershipError::Refused(other.to_string())),
            },
            Ok(Err(RaftError::Fatal(fatal))) => Err(MembershipError::Stopped(fatal.to_string())),
        }
    }

    /// Stops the replica and waits until its directory is released, so it can be reopened at
    /// once. Committed entries are durable; a batch still being proposed may or may not be, and
    /// its `propose` fails. Takes `&self` so that a shared replica can be stopped while others
    /// still hold it (their calls then fail with `Stopped`).
    pub async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        let _ = self.raft.shutdown().await;
        self.leadership_task.abort();
        // openraft stops its state-machine task after the core; the stores (and the directory
        // lock) go when it has.
        let deadline = Instant::now() + Duration::from_millis(self.config.lock_wait_ms);
        while self.dir_lock.strong_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

impl<S> Drop for Replica<S> {
    fn drop(&mut self) {
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        self.leadership_task.abort();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let raft = self.raft.clone();
            runtime.spawn(async move {
                let _ = raft.shutdown().await;
            });
        }
    }
}
