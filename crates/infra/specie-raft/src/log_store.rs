//! The durable Raft log (openraft's `RaftLogStorage`).
//!
//! Entries live in segment files in `log/`, written and read back with [`specie_log`]'s record
//! format and segment rules, the same as the embedded log's: files `log-<first index, 20
//! digits>.seg`, one [`specie_log::frame`] per entry (`u32 length ‖ u32 crc32(index ‖ payload) ‖
//! u64 index ‖ payload`), the frame index being the entry's log index and the payload the entry
//! in the [`crate::codec`] encoding (its log id, then its payload). What is Raft's own lives here:
//! that payload, the vote and purge point, and the group-commit syncer.
//!
//! - **append**: a batch of entries is encoded into one buffer and written with one `pwrite`; a
//!   background thread then `fdatasync`s and reports the batch durable. Batches that queue up
//!   behind a sync share the next one (group commit), so there is at most one fsync per batch.
//!   Rolling to a new segment first syncs the one rolled past, so every segment but the last is
//!   sealed (fully durable), as recovery assumes.
//! - **vote** and the **purge point** are small checksummed records replaced atomically
//!   (`write_record`): the vote must be durable before openraft acts on it.
//! - **truncate** (a follower dropping a conflicting suffix) deletes later segments newest first
//!   and then cuts the segment holding the first dropped entry, so a crash part-way leaves a prefix.
//! - **purge** (compaction after a snapshot) records the purge point first, then deletes every
//!   segment whose entries are all covered; a crash in between leaves segments that the next open
//!   deletes.
//! - **recovery** reads every segment with [`specie_log::segment::SegmentScan`]: a bad frame at
//!   the end of the last segment with no valid frame after it is a torn, never-acknowledged write
//!   and is cut off; any other bad frame, an index that breaks the sequence, a gap between
//!   segments, or a valid frame whose entry does not decode or names another index is corruption,
//!   and opening fails rather than silently losing entries.
//!
//! Only the log ids and file positions are held in memory (`Index`); readers (openraft's
//! replication tasks) `pread` entries back, usually from the page cache. After every append,
//! truncate and purge the store checks its invariants ([`invariants`]).

// The error types are openraft's, fixed by the traits implemented here; large as they are, they
// only travel on failure paths.
#![allow(clippy::result_large_err)]

mod invariants;

use std::collections::VecDeque;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::ops::{Bound, RangeBounds};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{AnyError, LogState, RaftLogReader, StorageIOError};
use parking_lot::RwLock;
use specie_log::frame::{self, Frame};
use specie_log::segment::{self, Scanned, SegmentEnd, SegmentScan};
use specie_log::{Corruption, DirLock, LogError, SyncMode};

use crate::codec::{self, Reader};
use crate::fsio;
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const VOTE_MAGIC: &[u8; 8] = b"SPRAVOTE";
const PURGED_MAGIC: &[u8; 8] = b"SPRAPURG";
/// Most queued flush requests one background sync covers; keeps a callback's wait bounded.
const GROUP_COMMIT_JOBS_MAX: usize = 4096;

/// Counts of log writes, so "one fsync per batch" can be checked rather than assumed.
#[derive(Debug, Default)]
pub(crate) struct LogCounters {
    /// Batches written (one `pwrite` each).
    pub appends: AtomicU64,
    /// `fdatasync`s of appended data by the group-commit syncer (not counting the one per
    /// segment roll that seals the segment rolled past).
    pub syncs: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct LogOptions {
    /// The log rolls to a new segment before a batch would take the active one past this.
    pub segment_bytes_max: u64,
    /// Largest encoded entry (frame payload) accepted on append and on recovery.
    pub entry_bytes_max: u32,
    pub sync: SyncMode,
}

#[derive(Debug)]
struct Segment {
    first_index: u64,
    path: PathBuf,
    file: File,
}

/// Where one entry sits on disk.
#[derive(Clone, Debug)]
struct Location {
    log_id: LogId,
    segment: Arc<Segment>,
    /// Offset of the frame header in the segment.
    offset: u64,
    payload_bytes: u32,
}

impl Location {
    /// Offset just past the entry's frame.
    fn end(&self) -> u64 {
        self.offset + frame::frame_bytes(self.payload_bytes as usize)
    }
}

#[derive(Clone, Debug, Default)]
struct Index {
    /// Present entries, consecutive indexes, oldest first.
    entries: VecDeque<Location>,
    purged: Option<LogId>,
}

impl Index {
    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|l| l.log_id.index)
    }

    fn last_log_id(&self) -> Option<LogId> {
        self.entries.back().map(|l| l.log_id).or(self.purged)
    }

    /// The index the next append must start at, if the log has ever held or purged anything.
    fn next_index(&self) -> Option<u64> {
        self.last_log_id().map(|l| l.index + 1)
    }

    fn position(&self, index: u64) -> Option<usize> {
        let first = self.first_index()?;
        let position = usize::try_from(index.checked_sub(first)?).ok()?;
        (position < self.entries.len()).then_some(position)
    }
}

fn write_error(error: impl Into<AnyError>) -> StorageError {
    StorageIOError::write_logs(error).into()
}

fn io_any(error: &io::Error) -> AnyError {
    AnyError::new(error)
}

fn corrupt(path: &Path, reason: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{}: {reason}", path.display()))
}

/// specie-log's error as the `io::Error` the store's open reports: corruption is `InvalidData`
/// (the message names file, offset and defect), an io failure keeps its kind.
fn log_error(error: LogError) -> io::Error {
    let kind = match &error {
        LogError::Io { source, .. } => source.kind(),
        _ => io::ErrorKind::InvalidData,
    };
    io::Error::new(kind, error)
}

/// The log id of the entry in a valid frame. A frame whose checksum holds but whose entry does
/// not decode, or names another index than the frame, was not written by this store.
fn entry_log_id(path: &Path, offset: u64, frame: Frame<'_>) -> io::Result<LogId> {
    let log_id = Reader::new(frame.payload, "log entry")
        .log_id()
        .map_err(|e| corrupt(path, format!("entry at byte offset {offset}: {e}")))?;
    if log_id.index != frame.index {
        return Err(corrupt(
            path,
            format!(
                "frame at byte offset {offset} has index {} but holds entry {}",
                frame.index, log_id.index
            ),
        ));
    }
    Ok(log_id)
}

/// Told whether an appended batch is durable. openraft's `LogFlushed` in production; tests
/// pass their own (openraft does not let anyone else build a `LogFlushed`).
pub(crate) type FlushCallback = Box<dyn FnOnce(io::Result<()>) + Send>;

enum Job {
    /// Make the segment's written bytes durable, then report the append.
    Flush {
        segment: Arc<Segment>,
        callback: FlushCallback,
    },
    /// Report once every earlier flush is done (orders votes, truncation and purges after appends).
    Barrier(tokio::sync::oneshot::Sender<Result<(), String>>),
}

/// The background thread that syncs appended batches, so `append` returns once the batch is
/// written and readable, and openraft keeps working while the disk syncs. With
/// [`SyncMode::None`] there is no disk to wait for and no thread: each job completes inline,
/// which also leaves a replica no I/O running beside its tasks (what a deterministic simulation
/// needs).
struct Syncer {
    sync: SyncMode,
    poisoned: Arc<AtomicBool>,
    counters: Arc<LogCounters>,
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Syncer {
    fn start(sync: SyncMode, poisoned: Arc<AtomicBool>, counters: Arc<LogCounters>) -> io::Result<Syncer> {
        let (jobs, thread) = match sync {
            SyncMode::None => (None, None),
            SyncMode::Fsync => {
                let (jobs, queue) = mpsc::channel();
                let (poisoned, counters) = (poisoned.clone(), counters.clone());
                let thread = std::thread::Builder::new()
                    .name("raft-log-sync".into())
                    .spawn(move || Syncer::run(&queue, sync, &poisoned, &counters))?;
                (Some(jobs), Some(thread))
            }
        };
        Ok(Syncer {
            sync,
            poisoned,
            counters,
            jobs,
            thread,
        })
    }

    fn run(queue: &mpsc::Receiver<Job>, sync: SyncMode, poisoned: &AtomicBool, counters: &LogCounters) {
        while let Ok(first) = queue.recv() {
            let mut jobs = vec![first];
            while jobs.len() < GROUP_COMMIT_JOBS_MAX {
                match queue.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            Syncer::complete(jobs, sync, poisoned, counters);
        }
    }

    /// Syncs every segment the jobs wrote to (once each), then reports them all.
    fn complete(jobs: Vec<Job>, sync: SyncMode, poisoned: &AtomicBool, counters: &LogCounters) {
        let mut result = Ok(());
        if poisoned.load(Ordering::Acquire) {
            result = Err("log poisoned by an earlier write failure".to_string());
        }
        let mut synced: Vec<u64> = Vec::new();
        for job in &jobs {
            let Job::Flush { segment, .. } = job else { continue };
            if result.is_err() || synced.contains(&segment.first_index) {
                continue;
            }
            if let Err(error) = sync.sync_data(&segment.file) {
                // fsyncgate: after a failed fsync the kernel may have dropped the dirty pages;
                // nothing written since the last good sync can be trusted.
                poisoned.store(true, Ordering::Release);
                result = Err(format!("fdatasync {}: {error}", segment.path.display()));
            }
            counters.syncs.fetch_add(1, Ordering::Relaxed);
            synced.push(segment.first_index);
        }
        for job in jobs {
            match job {
                Job::Flush { callback, .. } => callback(result.clone().map_err(io::Error::other)),
                Job::Barrier(done) => {
                    let _ = done.send(result.clone());
                }
            }
        }
    }

    fn send(&self, job: Job) -> Result<(), StorageError> {
        match &self.jobs {
            Some(jobs) => jobs
                .send(job)
                .map_err(|_| write_error(AnyError::error("log sync thread has stopped"))),
            None => {
                Syncer::complete(vec![job], self.sync, &self.poisoned, &self.counters);
                Ok(())
            }
        }
    }

    async fn barrier(&self) -> Result<(), StorageError> {
        let (done, wait) = tokio::sync::oneshot::channel();
        self.send(Job::Barrier(done))?;
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(write_error(AnyError::error(reason))),
            Err(_) => Err(write_error(AnyError::error("log sync thread has stopped"))),
        }
    }
}

impl Drop for Syncer {
    fn drop(&mut self) {
        // Closing the queue lets the thread finish the flushes already queued, then exit; joining
        // it means a store reopened after this one never races its syncs.
        self.jobs.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads entries for openraft's replication tasks, concurrently with appends.
#[derive(Clone)]
pub(crate) struct LogReader {
    index: Arc<RwLock<Index>>,
    entry_bytes_max: u32,
}

impl LogReader {
    fn read(&self, range: (Bound<&u64>, Bound<&u64>)) -> Result<Vec<Entry>, StorageError> {
        // Holding the read lock across the reads keeps a concurrent truncate from cutting a file
        // under them.
        let index = self.index.read();
        let (Some(first), Some(last)) = (index.first_index(), index.entries.back().map(|l| l.log_id.index)) else {
            return Ok(Vec::new());
        };
        let start = match range.0 {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .max(first);
        let end = match range.1 {
            Bound::Included(&i) => i.saturating_add(1),
            Bound::Excluded(&i) => i,
            Bound::Unbounded => u64::MAX,
        }
        .min(last + 1);
        let mut entries = Vec::with_capacity(end.saturating_sub(start).min(1024) as usize);
        for log_index in start..end {
            let location = &index.entries[index.position(log_index).expect("within first..=last")];
            entries.push(read_entry(location, self.entry_bytes_max)?);
        }
        Ok(entries)
    }
}

fn read_entry(location: &Location, entry_bytes_max: u32) -> Result<Entry, StorageError> {
    let index = location.log_id.index;
    let mut bytes = vec![0; (location.end() - location.offset) as usize];
    location
        .segment
        .file
        .read_exact_at(&mut bytes, location.offset)
        .map_err(|e| StorageError::from(StorageIOError::read_log_at_index(index, io_any(&e))))?;
    let damaged = |reason: &dyn std::fmt::Display| {
        StorageError::from(StorageIOError::read_log_at_index(
            index,
            AnyError::error(format!(
                "{} at byte offset {}: {reason}",
                location.segment.path.display(),
                location.offset
            )),
        ))
    };
    let frame = frame::decode(&bytes, entry_bytes_max).map_err(|defect| damaged(&defect))?;
    let mut reader = Reader::new(frame.payload, "log entry");
    let entry = reader.entry().map_err(|e| damaged(&e))?;
    reader.finish().map_err(|e| damaged(&e))?;
    if frame.index != index || frame.payload.len() != location.payload_bytes as usize || entry.log_id != location.log_id
    {
        return Err(damaged(&"frame no longer matches the index (disk corruption?)"));
    }
    Ok(entry)
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.read((range.start_bound(), range.end_bound()))
    }
}

/// What `LogStore::open` found, for the replica's start-up log line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Recovered {
    pub torn_tail_bytes: u64,
    pub segments_deleted: usize,
}

/// What recovery rebuilt from the segment files.
struct RecoveredLog {
    index: Index,
    segments: Vec<Arc<Segment>>,
    active_bytes: u64,
    recovered: Recovered,
}

/// Reads every segment in `log_dir` back into an index, finishing a purge that crashed before
/// deleting its segments and cutting a torn tail; refuses corruption (see the module docs).
fn recover(log_dir: &Path, purged: Option<LogId>, options: &LogOptions) -> io::Result<RecoveredLog> {
    let firsts = segment::list(log_dir).map_err(log_error)?;
    let mut recovered = Recovered::default();
    let mut index = Index {
        entries: VecDeque::new(),
        purged,
    };
    let mut segments = Vec::new();
    let mut active_bytes = 0;
    let mut next_index: Option<u64> = None;
    for (position, &first) in firsts.iter().enumerate() {
        let path = segment::path(log_dir, first);
        // Every entry of this segment precedes the next segment's first, so if that is within
        // the purged prefix this whole segment is: a purge that crashed before deleting it.
        if let (Some(&next_first), Some(purged)) = (firsts.get(position + 1), purged) {
            if next_first <= purged.index + 1 {
                fs::remove_file(&path)?;
                recovered.segments_deleted += 1;
                continue;
            }
        }
        if let Some(expected) = next_index.filter(|&expected| expected != first) {
            return Err(log_error(LogError::Corrupt {
                path,
                offset: 0,
                corruption: Corruption::SegmentGap { expected, found: first },
            }));
        }
        let sealed = position + 1 < firsts.len();
        let (segment, end) = recover_segment(path, first, sealed, purged, options, &mut index.entries)?;
        if end.bytes_torn > 0 {
            recovered.torn_tail_bytes = end.bytes_torn;
        }
        next_index = Some(end.index_next);
        active_bytes = end.bytes_valid;
        segments.push(segment);
    }
    if index.entries.is_empty() && purged.is_some() {
        // Whatever segments are left hold only purged entries (a purge of everything that
        // crashed before deleting them); appends must start a segment named for their index.
        for segment in segments.drain(..) {
            fs::remove_file(&segment.path)?;
            recovered.segments_deleted += 1;
        }
        active_bytes = 0;
    }
    if recovered.segments_deleted > 0 {
        options.sync.sync_dir(log_dir)?;
    }
    if let (Some(first), Some(purged)) = (index.first_index(), purged) {
        if first != purged.index + 1 {
            return Err(corrupt(
                log_dir,
                format!("log resumes at {first} after purging up to {}", purged.index),
            ));
        }
    }
    Ok(RecoveredLog {
        index,
        segments,
        active_bytes,
        recovered,
    })
}

/// Reads one segment's entries (those after the purge point) into `entries` with specie-log's
/// scan, and cuts its torn tail if it has one.
fn recover_segment(
    path: PathBuf,
    first_index: u64,
    sealed: bool,
    purged: Option<LogId>,
    options: &LogOptions,
    entries: &mut VecDeque<Location>,
) -> io::Result<(Arc<Segment>, SegmentEnd)> {
    let file = OpenOptions::new().read(true).write(true).open(&path)?;
    let bytes = fs::read(&path)?;
    let segment = Arc::new(Segment {
        first_index,
        path,
        file,
    });
    let mut scan = SegmentScan::new(&segment.path, &bytes, first_index, sealed, options.entry_bytes_max);
    let end = loop {
        match scan.step().map_err(log_error)? {
            Scanned::Frame { offset, frame } => {
                let log_id = entry_log_id(&segment.path, offset, frame)?;
                if purged.is_none_or(|p| log_id.index > p.index) {
                    entries.push_back(Location {
                        log_id,
                        segment: segment.clone(),
                        offset,
                        payload_bytes: u32::try_from(frame.payload.len()).expect("bounded by entry_bytes_max"),
                    });
                }
            }
            Scanned::End(end) => break end,
        }
    };
    if end.bytes_torn > 0 {
        // A torn final write: it was never reported durable, so it can go.
        segment::cut_torn_tail(&segment.path, &end, options.sync).map_err(log_error)?;
    }
    Ok((segment, end))
}

pub(crate) struct LogStore {
    lock: Arc<DirLock>,
    log_dir: PathBuf,
    options: LogOptions,
    index: Arc<RwLock<Index>>,
    /// Segment files on disk, oldest first; the last is the one appended to.
    segments: Vec<Arc<Segment>>,
    active_bytes: u64,
    vote: Option<Vote>,
    poisoned: Arc<AtomicBool>,
    /// Index + 1 of the newest entry openraft reported committed (0: none). For metrics only.
    committed: Arc<AtomicU64>,
    counters: Arc<LogCounters>,
    syncer: Syncer,
}

impl LogStore {
    pub(crate) fn open(lock: Arc<DirLock>, options: LogOptions) -> io::Result<(LogStore, Recovered)> {
        let dir = lock.dir().to_path_buf();
        let log_dir = dir.join("log");
        fs::create_dir_all(&log_dir)?;
        let vote = match fsio::read_record(&dir, "vote", VOTE_MAGIC)? {
            None => None,
            Some(body) => {
                let mut r = Reader::new(&body, "vote");
                let vote = r.vote().and_then(|v| r.finish().map(|()| v));
                Some(vote.map_err(|e| corrupt(&dir.join("vote"), e))?)
            }
        };
        let purged = match fsio::read_record(&dir, "purged", PURGED_MAGIC)? {
            None => None,
            Some(body) => {
                let mut r = Reader::new(&body, "purge point");
                let log_id = r.log_id().and_then(|l| r.finish().map(|()| l));
                Some(log_id.map_err(|e| corrupt(&dir.join("purged"), e))?)
            }
        };
        let log = recover(&log_dir, purged, &options)?;
        let poisoned = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(LogCounters::default());
        let syncer = Syncer::start(options.sync, poisoned.clone(), counters.clone())?;
        let store = LogStore {
            lock,
            log_dir,
            options,
            index: Arc::new(RwLock::new(log.index)),
            segments: log.segments,
            active_bytes: log.active_bytes,
            vote,
            poisoned,
            committed: Arc::new(AtomicU64::new(0)),
            counters,
            syncer,
        };
        // Recovery reads every entry anyway: check them all once.
        store
            .check_invariants(invariants::Depth::Entries)
            .map_err(|violation| corrupt(&store.log_dir, violation))?;
        Ok((store, log.recovered))
    }

    /// Index + 1 of the newest committed entry (0: none), updated as openraft commits.
    pub(crate) fn committed_handle(&self) -> Arc<AtomicU64> {
        self.committed.clone()
    }

    pub(crate) fn counters(&self) -> Arc<LogCounters> {
        self.counters.clone()
    }

    /// Checks the store's invariants ([`invariants::check`]) down to `depth`.
    fn check_invariants(&self, depth: invariants::Depth) -> Result<(), invariants::InvariantViolation> {
        invariants::check(
            &self.index.read(),
            &self.segments,
            self.active_bytes,
            self.committed.load(Ordering::Acquire),
            depth,
        )
    }

    /// After every append, truncate and purge: the O(1) checks always, the O(segments) ones in
    /// debug builds; never work per entry held.
    fn assert_invariants(&self) {
        let depth = if cfg!(debug_assertions) {
            invariants::Depth::Segments
        } else {
            invariants::Depth::Ends
        };
        if let Err(violation) = self.check_invariants(depth) {
            panic!("Raft log store invariant violated: {violation}");
        }
    }

    fn check_poisoned(&self) -> Result<(), StorageError> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(write_error(AnyError::error(
                "log poisoned by an earlier write failure; reopen the replica",
            )));
        }
        Ok(())
    }

    fn poison(&self, error: &io::Error) -> StorageError {
        self.poisoned.store(true, Ordering::Release);
        write_error(io_any(error))
    }

    /// Starts a new, empty segment for entries from `first_index` on. The segment rolled past
    /// is synced first: recovery reads damage in any segment but the last as corruption, never
    /// as a torn write, so only the last may hold bytes that are not yet durable.
    fn roll(&mut self, first_index: u64) -> io::Result<()> {
        if let Some(sealed) = self.segments.last() {
            self.options.sync.sync_data(&sealed.file)?;
        }
        let file = segment::create(&self.log_dir, first_index, self.options.sync).map_err(log_error)?;
        self.segments.push(Arc::new(Segment {
            first_index,
            path: segment::path(&self.log_dir, first_index),
            file,
        }));
        self.active_bytes = 0;
        Ok(())
    }

    /// Writes `entries` (one batch, one `pwrite`) and queues their sync; `callback` hears when
    /// they are durable. They are readable when this returns.
    pub(crate) fn append_batch(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
        callback: FlushCallback,
    ) -> Result<(), StorageError> {
        self.check_poisoned()?;
        let purged = self.index.read().purged;
        let mut buffer = Vec::new();
        let mut frames: Vec<(LogId, usize, u32)> = Vec::new();
        for entry in entries {
            if purged.is_some_and(|p| entry.log_id.index <= p.index) {
                // Already covered by the snapshot the log was compacted to; openraft never sends
                // these, but its storage suite does.
                continue;
            }
            if let Some((previous, _, _)) = frames.last() {
                if entry.log_id.index != previous.index + 1 {
                    return Err(write_error(AnyError::error("appended entries are not consecutive")));
                }
            }
            let start = buffer.len();
            let payload_bytes = frame::encode_with(
                &mut buffer,
                entry.log_id.index,
                self.options.entry_bytes_max,
                |buffer| codec::put_entry(buffer, &entry),
            )
            .map_err(|e| write_error(AnyError::error(format!("entry {}: {e}", entry.log_id.index))))?;
            frames.push((entry.log_id, start, payload_bytes));
        }
        let Some(&(first, _, _)) = frames.first() else {
            callback(Ok(()));
            return Ok(());
        };
        let next_index = self.index.read().next_index();
        if next_index.is_some_and(|next| next != first.index) {
            return Err(write_error(AnyError::error(format!(
                "append at {} would leave a hole: the log continues at {}",
                first.index,
                next_index.unwrap_or_default()
            ))));
        }

        let active_fits = self.segments.last().is_some_and(|active| {
            if self.active_bytes == 0 {
                // An empty segment must be named for the entry it will start with.
                active.first_index == first.index
            } else {
                self.active_bytes + buffer.len() as u64 <= self.options.segment_bytes_max
            }
        });
        if !active_fits {
            if self.active_bytes == 0 {
                if let Some(empty) = self.segments.pop() {
                    self.remove_segment_file(&empty)?;
                }
            }
            self.roll(first.index).map_err(|e| self.poison(&e))?;
        }
        let active = self.segments.last().expect("rolled above").clone();
        active
            .file
            .write_all_at(&buffer, self.active_bytes)
            .map_err(|e| self.poison(&e))?;
        {
            let mut index = self.index.write();
            for (log_id, start, payload_bytes) in frames {
                index.entries.push_back(Location {
                    log_id,
                    segment: active.clone(),
                    offset: self.active_bytes + start as u64,
                    payload_bytes,
                });
            }
        }
        self.active_bytes += buffer.len() as u64;
        self.counters.appends.fetch_add(1, Ordering::Relaxed);
        self.assert_invariants();
        self.syncer.send(Job::Flush {
            segment: active,
            callback,
        })
    }

    fn remove_segment_file(&self, segment: &Segment) -> Result<(), StorageError> {
        fs::remove_file(&segment.path).map_err(|e| self.poison(&e))
    }

    fn sync_log_dir(&self) -> Result<(), StorageError> {
        self.options.sync.sync_dir(&self.log_dir).map_err(|e| self.poison(&e))
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        self.get_log_reader()
            .await
            .read((range.start_bound(), range.end_bound()))
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let index = self.index.read();
        Ok(LogState {
            last_purged_log_id: index.purged,
            last_log_id: index.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> LogReader {
        LogReader {
            index: self.index.clone(),
            entry_bytes_max: self.options.entry_bytes_max,
        }
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.check_poisoned()?;
        // Votes are ordered after every earlier append, as openraft requires of all log IO.
        self.syncer.barrier().await?;
        let mut body = Vec::new();
        codec::put_vote(&mut body, vote);
        fsio::write_record(self.lock.dir(), "vote", VOTE_MAGIC, &body, self.options.sync)
            .map_err(|e| StorageError::from(StorageIOError::write_vote(io_any(&e))))?;
        self.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not persisted: a restarted replica learns the commit point from the leader (or commits
        // again as leader). Kept in memory for metrics.
        self.committed
            .store(committed.map_or(0, |c| c.index + 1), Ordering::Release);
        Ok(())
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        self.append_batch(entries, Box::new(move |result| callback.log_io_completed(result)))
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.check_poisoned()?;
        self.syncer.barrier().await?;
        let mut index = self.index.write();
        let Some(position) = index.position(log_id.index) else {
            // Nothing at or after `log_id` is present.
            return Ok(());
        };
        let cut = index.entries[position].clone();
        // Newest first, so a crash part-way leaves a prefix of the log.
        let mut removed = false;
        while self
            .segments
            .last()
            .is_some_and(|s| s.first_index > cut.segment.first_index)
        {
            let segment = self.segments.pop().expect("checked non-empty");
            self.remove_segment_file(&segment)?;
            removed = true;
        }
        cut.segment.file.set_len(cut.offset).map_err(|e| self.poison(&e))?;
        self.options
            .sync
            .sync_data(&cut.segment.file)
            .map_err(|e| self.poison(&e))?;
        if removed {
            self.sync_log_dir()?;
        }
        index.entries.truncate(position);
        drop(index);
        self.active_bytes = cut.offset;
        self.assert_invariants();
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.check_poisoned()?;
        if self.index.read().purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        // The purge point goes to disk before any segment goes, so recovery always knows where
        // the log resumes.
        let mut body = Vec::new();
        codec::put_log_id(&mut body, &log_id);
        fsio::write_record(self.lock.dir(), "purged", PURGED_MAGIC, &body, self.options.sync)
            .map_err(|e| self.poison(&e))?;
        let first_kept = {
            let mut index = self.index.write();
            index.purged = Some(log_id);
            while index.entries.front().is_some_and(|l| l.log_id.index <= log_id.index) {
                index.entries.pop_front();
            }
            index.entries.front().map(|l| l.segment.first_index)
        };
        let removable = match first_kept {
            Some(first_kept) => self.segments.iter().take_while(|s| s.first_index < first_kept).count(),
            // Everything is purged: the next append starts a segment named for its index.
            None => self.segments.len(),
        };
        if removable > 0 {
            for segment in self.segments.drain(..removable).collect::<Vec<_>>() {
                self.remove_segment_file(&segment)?;
            }
            if self.segments.is_empty() {
                self.active_bytes = 0;
            }
            self.sync_log_dir()?;
        }
        self.assert_invariants();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use openraft::{CommittedLeaderId, EmptyNode, EntryPayload, Membership};

    use super::*;
    use crate::types::Batch;

    fn options() -> LogOptions {
        LogOptions {
            segment_bytes_max: 300,
            entry_bytes_max: 1 << 20,
            sync: SyncMode::Fsync,
        }
    }

    pub(super) fn open(dir: &Path) -> (LogStore, Recovered) {
        let lock = Arc::new(DirLock::acquire(dir, 1_000).unwrap());
        LogStore::open(lock, options()).unwrap()
    }

    pub(super) fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Batch(vec![index.to_le_bytes().to_vec(); 3])),
        }
    }

    pub(super) async fn append(store: &mut LogStore, entries: Vec<Entry>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let callback: FlushCallback = Box::new(move |result| {
            let _ = tx.send(result);
        });
        store.append_batch(entries, callback).unwrap();
        rx.await.unwrap().unwrap();
    }

    async fn indexes(store: &mut LogStore) -> Vec<(u64, u64)> {
        let entries = store.try_get_log_entries(..).await.unwrap();
        entries
            .iter()
            .map(|e| (e.log_id.leader_id.term, e.log_id.index))
            .collect()
    }

    fn segment_files(dir: &Path) -> usize {
        fs::read_dir(dir.join("log")).unwrap().count()
    }

    #[tokio::test]
    async fn reopen_recovers_entries_vote_and_purge_point_across_segments() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, _) = open(dir.path());
            for i in 0..20 {
                append(&mut store, vec![entry(1, 2 * i), entry(1, 2 * i + 1)]).await;
            }
            store.save_vote(&Vote::new_committed(3, 2)).await.unwrap();
            store.purge(LogId::new(CommittedLeaderId::new(1, 1), 9)).await.unwrap();
            store
                .truncate(LogId::new(CommittedLeaderId::new(1, 1), 35))
                .await
                .unwrap();
            append(&mut store, vec![entry(2, 35)]).await;
        }
        let (mut store, recovered) = open(dir.path());
        assert_eq!(recovered.torn_tail_bytes, 0);
        let mut want: Vec<(u64, u64)> = (10..35).map(|i| (1, i)).collect();
        want.push((2, 35));
        assert_eq!(indexes(&mut store).await, want);
        assert_eq!(store.read_vote().await.unwrap(), Some(Vote::new_committed(3, 2)));
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(9));
        assert_eq!(state.last_log_id.map(|l| (l.leader_id.term, l.index)), Some((2, 35)));
        assert!(segment_files(dir.path()) > 1, "small segments roll");
    }

    #[tokio::test]
    async fn a_torn_tail_is_cut_and_damage_in_the_middle_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, _) = open(dir.path());
            append(&mut store, vec![entry(1, 0), entry(1, 1), entry(1, 2)]).await;
        }
        let segment = segment::path(&dir.path().join("log"), 0);
        let good = fs::read(&segment).unwrap();
        let frame = good.len() / 3;

        // Half of the last frame made it to disk.
        fs::write(&segment, &good[..good.len() - frame / 2]).unwrap();
        let (mut store, recovered) = open(dir.path());
        assert_eq!(recovered.torn_tail_bytes as usize, frame - frame / 2);
        assert_eq!(indexes(&mut store).await, vec![(1, 0), (1, 1)]);
        append(&mut store, vec![entry(1, 2)]).await;
        drop(store);

        // A flipped byte in the first frame, with valid frames after it.
        let mut damaged = fs::read(&segment).unwrap();
        damaged[frame::HEADER_BYTES + 3] ^= 0xff;
        fs::write(&segment, &damaged).unwrap();
        let err = open_err(dir.path());
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        let message = err.to_string();
        assert!(
            message.contains("log corrupt in") && message.contains("a valid frame follows"),
            "{message}"
        );
    }

    fn open_err(dir: &Path) -> io::Error {
        let lock = Arc::new(DirLock::acquire(dir, 1_000).unwrap());
        LogStore::open(lock, options()).err().expect("corruption refused")
    }

    /// Damage in a segment the log rolled past cannot be a torn write: even at its very end it
    /// is refused, not cut.
    #[tokio::test]
    async fn a_torn_frame_in_a_sealed_segment_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, _) = open(dir.path());
            for i in 0..10 {
                append(&mut store, vec![entry(1, i)]).await;
            }
        }
        let log_dir = dir.path().join("log");
        let first = segment::list(&log_dir).unwrap()[0];
        let path = segment::path(&log_dir, first);
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        let err = open_err(dir.path());
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(err.to_string().contains("sealed segment"), "{err}");
    }

    /// A frame whose checksum holds but whose entry names another index than the frame: not
    /// something this store writes, so refused rather than replayed.
    #[tokio::test]
    async fn a_valid_frame_holding_another_entry_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let log_dir = dir.path().join("log");
        fs::create_dir_all(&log_dir).unwrap();
        let mut bytes = Vec::new();
        let mut payload = Vec::new();
        codec::put_entry(&mut payload, &entry(1, 5));
        frame::encode(&mut bytes, 4, &payload, 1 << 20).unwrap();
        fs::write(segment::path(&log_dir, 4), &bytes).unwrap();
        let err = open_err(dir.path());
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
        assert!(err.to_string().contains("has index 4 but holds entry 5"), "{err}");
    }

    fn membership_entry(term: u64, index: u64) -> Entry {
        let voters = BTreeSet::from([1, 2, 3]);
        let nodes: BTreeMap<u64, EmptyNode> = voters.iter().map(|&id| (id, EmptyNode {})).collect();
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Membership(Membership::new(vec![voters], nodes)),
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// The entry frames, pinned through the store's own write path: changing these bytes breaks
    /// every Raft log on disk, so it must be deliberate (and `specie-log`'s format docs and the
    /// codec with it).
    #[tokio::test]
    async fn golden_entry_frames() {
        let dir = tempfile::tempdir().unwrap();
        let normal = Entry {
            log_id: LogId::new(CommittedLeaderId::new(3, 1), 7),
            payload: EntryPayload::Normal(Batch(vec![b"tx".to_vec()])),
        };
        {
            let (mut store, _) = open(dir.path());
            append(&mut store, vec![normal.clone(), membership_entry(3, 8)]).await;
        }
        let bytes = fs::read(dir.path().join("log/log-00000000000000000007.seg")).unwrap();
        let expected = concat!(
            // Normal entry 7: length 35, crc32(index ‖ payload), index 7,
            "23000000",
            "8b93eb2f",
            "0700000000000000",
            // payload: term 3, node 1, index 7, kind 1 (normal), 1 command of 2 bytes "tx".
            "0300000000000000",
            "0100000000000000",
            "0700000000000000",
            "01",
            "01000000",
            "02000000",
            "7478",
            // Membership entry 8: length 85, crc32, index 8,
            "55000000",
            "78a6e008",
            "0800000000000000",
            // payload: term 3, node 1, index 8, kind 2 (membership), 1 voter set {1, 2, 3},
            "0300000000000000",
            "0100000000000000",
            "0800000000000000",
            "02",
            "01000000",
            "03000000",
            "010000000000000002000000000000000300000000000000",
            // nodes {1, 2, 3}.
            "03000000",
            "010000000000000002000000000000000300000000000000",
        );
        assert_eq!(hex(&bytes), expected);
        let (mut store, _) = open(dir.path());
        let entries = store.try_get_log_entries(..).await.unwrap();
        assert_eq!(entries, vec![normal, membership_entry(3, 8)]);
    }

    #[tokio::test]
    async fn batches_queued_behind_a_sync_share_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path());
        let mut waits = Vec::new();
        for i in 0..200 {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let callback: FlushCallback = Box::new(move |result| {
                let _ = tx.send(result);
            });
            store.append_batch(vec![entry(1, i)], callback).unwrap();
            waits.push(rx);
        }
        for wait in waits {
            wait.await.unwrap().unwrap();
        }
        let counters = store.counters();
        let (appends, syncs) = (
            counters.appends.load(Ordering::Relaxed),
            counters.syncs.load(Ordering::Relaxed),
        );
        assert_eq!(appends, 200);
        assert!((1..=200).contains(&syncs), "{syncs} syncs for {appends} appends");
    }

    #[tokio::test]
    async fn a_purge_that_crashed_before_deleting_segments_is_finished_on_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut store, _) = open(dir.path());
            for i in 0..12 {
                append(&mut store, vec![entry(1, i)]).await;
            }
        }
        // The purge point reached the disk; the segment deletions did not.
        let mut body = Vec::new();
        codec::put_log_id(&mut body, &LogId::new(CommittedLeaderId::new(1, 1), 20));
        fsio::write_record(dir.path(), "purged", PURGED_MAGIC, &body, SyncMode::Fsync).unwrap();
        {
            let (mut store, recovered) = open(dir.path());
            assert!(recovered.segments_deleted > 0);
            assert_eq!(segment_files(dir.path()), 0);
            append(&mut store, vec![entry(2, 21), entry(2, 22)]).await;
        }
        let (mut store, _) = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![(2, 21), (2, 22)]);
    }

    #[tokio::test]
    async fn purging_everything_deletes_every_segment() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path());
        for i in 0..30 {
            append(&mut store, vec![entry(1, i)]).await;
        }
        assert!(segment_files(dir.path()) > 3);
        store.purge(LogId::new(CommittedLeaderId::new(1, 1), 29)).await.unwrap();
        assert_eq!(segment_files(dir.path()), 0);
        append(&mut store, vec![entry(1, 30)]).await;
        drop(store);
        let (mut store, _) = open(dir.path());
        assert_eq!(indexes(&mut store).await, vec![(1, 30)]);
    }
}
