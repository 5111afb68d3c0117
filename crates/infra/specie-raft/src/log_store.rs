//! The durable Raft log (openraft's `RaftLogStorage`).
//!
//! Entries live in segment files `log/<first index, 20 digits>.seg`, one frame per entry:
//! `u32 payload length ‖ u32 crc32(payload) ‖ payload`, the payload being the entry in the
//! [`crate::codec`] encoding (it starts with the entry's log id, so the checksum covers the index).
//!
//! - **append**: a batch of entries is encoded into one buffer and written with one `pwrite`; a
//!   background thread then `fdatasync`s and reports the batch durable. Batches that queue up
//!   behind a sync share the next one (group commit), so there is at most one fsync per batch.
//! - **vote** and the **purge point** are small checksummed records replaced atomically
//!   (`write_record`): the vote must be durable before openraft acts on it.
//! - **truncate** (a follower dropping a conflicting suffix) deletes later segments newest first
//!   and then cuts the segment holding the first dropped entry, so a crash part-way leaves a prefix.
//! - **purge** (compaction after a snapshot) records the purge point first, then deletes every
//!   segment whose entries are all covered; a crash in between leaves segments that the next open
//!   deletes.
//! - **recovery** reads every segment: a bad frame at the end of the last segment with no valid
//!   frame after it is a torn, never-acknowledged write and is cut off; any other bad frame, or a
//!   gap in the indexes, is corruption and opening fails rather than silently losing entries.
//!
//! Only the log ids and file positions are held in memory (`Index`); readers (openraft's
//! replication tasks) `pread` entries back, usually from the page cache.

// The error types are openraft's, fixed by the traits implemented here; large as they are, they
// only travel on failure paths.
#![allow(clippy::result_large_err)]

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

use crate::codec::{self, Reader};
use specie_log::SyncMode;

use crate::fsio::{self, DirLock};
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const FRAME_HEADER_BYTES: usize = 8;
/// The smallest payload: a log id and a payload kind.
const PAYLOAD_BYTES_MIN: usize = 25;
const VOTE_MAGIC: &[u8; 8] = b"SPRAVOTE";
const PURGED_MAGIC: &[u8; 8] = b"SPRAPURG";
/// Most queued flush requests one background sync covers; keeps a callback's wait bounded.
const GROUP_COMMIT_JOBS_MAX: usize = 4096;

/// Counts of log writes, so "one fsync per batch" can be checked rather than assumed.
#[derive(Debug, Default)]
pub(crate) struct LogCounters {
    /// Batches written (one `pwrite` each).
    pub appends: AtomicU64,
    /// `fdatasync`s of appended data.
    pub syncs: AtomicU64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct LogOptions {
    /// The log rolls to a new segment before a batch would take the active one past this.
    pub segment_bytes_max: u64,
    /// Largest encoded entry accepted on append and on recovery.
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

#[derive(Debug, Default)]
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

fn segment_name(first_index: u64) -> String {
    format!("{first_index:020}.seg")
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

/// A valid frame at the start of `bytes`: its log id and payload length.
fn decode_frame(bytes: &[u8], entry_bytes_max: u32) -> Option<(LogId, u32)> {
    let header = bytes.get(..FRAME_HEADER_BYTES)?;
    let length = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
    let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if length > entry_bytes_max || (length as usize) < PAYLOAD_BYTES_MIN {
        return None;
    }
    let payload = bytes.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + length as usize)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let log_id = Reader::new(payload, "log frame").log_id().ok()?;
    Some((log_id, length))
}

/// Whether any valid frame for an index at or after `next_index` starts after `from`: if so, the
/// bad frame at `from` is damage in the middle of the log, not a torn final write. The index field
/// is checked before the checksum, so the scan costs little on ordinary garbage.
fn valid_frame_after(bytes: &[u8], from: usize, next_index: u64, entry_bytes_max: u32) -> bool {
    let frames_max = (bytes.len() / (FRAME_HEADER_BYTES + PAYLOAD_BYTES_MIN)) as u64;
    (from + 1..bytes.len().saturating_sub(FRAME_HEADER_BYTES + PAYLOAD_BYTES_MIN - 1)).any(|offset| {
        let index_at = offset + FRAME_HEADER_BYTES + 16;
        let index = u64::from_le_bytes(bytes[index_at..index_at + 8].try_into().expect("8 bytes"));
        index >= next_index
            && index - next_index <= frames_max
            && decode_frame(&bytes[offset..], entry_bytes_max).is_some_and(|(log_id, _)| log_id.index == index)
    })
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
    let mut frame = vec![0; FRAME_HEADER_BYTES + location.payload_bytes as usize];
    location
        .segment
        .file
        .read_exact_at(&mut frame, location.offset)
        .map_err(|e| StorageError::from(StorageIOError::read_log_at_index(index, io_any(&e))))?;
    let damaged = |reason: &str| {
        StorageError::from(StorageIOError::read_log_at_index(
            index,
            AnyError::error(format!("{}: {reason}", location.segment.path.display())),
        ))
    };
    if decode_frame(&frame, entry_bytes_max).map(|(log_id, _)| log_id) != Some(location.log_id) {
        return Err(damaged("frame no longer matches the index (disk corruption?)"));
    }
    let mut reader = Reader::new(&frame[FRAME_HEADER_BYTES..], "log entry");
    let entry = reader.entry().map_err(|e| damaged(&e.to_string()))?;
    reader.finish().map_err(|e| damaged(&e.to_string()))?;
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

        let mut firsts = Vec::new();
        for dirent in fs::read_dir(&log_dir)? {
            let name = dirent?.file_name();
            let Some(first) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".seg"))
                .and_then(|n| n.parse().ok())
            else {
                continue;
            };
            firsts.push(first);
        }
        firsts.sort_unstable();

        let mut recovered = Recovered::default();
        let mut index = Index {
            entries: VecDeque::new(),
            purged,
        };
        let mut segments = Vec::new();
        let mut active_bytes = 0;
        let mut next_index: Option<u64> = None;
        for (position, &first) in firsts.iter().enumerate() {
            let path = log_dir.join(segment_name(first));
            let is_last = position + 1 == firsts.len();
            // Every entry of this segment precedes the next segment's first, so if that is within
            // the purged prefix this whole segment is: a purge that crashed before deleting it.
            if let (Some(&next_first), Some(purged)) = (firsts.get(position + 1), purged) {
                if next_first <= purged.index + 1 {
                    fs::remove_file(&path)?;
                    recovered.segments_deleted += 1;
                    continue;
                }
            }
            if let Some(expected) = next_index {
                if first != expected {
                    return Err(corrupt(
                        &path,
                        format!("segment starts at {first}, expected {expected}"),
                    ));
                }
            }
            let file = OpenOptions::new().read(true).write(true).open(&path)?;
            let bytes = fs::read(&path)?;
            let segment = Arc::new(Segment {
                first_index: first,
                path,
                file,
            });
            let mut offset = 0;
            let mut expected = first;
            while offset < bytes.len() {
                match decode_frame(&bytes[offset..], options.entry_bytes_max) {
                    Some((log_id, payload_bytes)) if log_id.index == expected => {
                        if purged.is_none_or(|p| log_id.index > p.index) {
                            index.entries.push_back(Location {
                                log_id,
                                segment: segment.clone(),
                                offset: offset as u64,
                                payload_bytes,
                            });
                        }
                        offset += FRAME_HEADER_BYTES + payload_bytes as usize;
                        expected += 1;
                    }
                    Some((log_id, _)) => {
                        return Err(corrupt(
                            &segment.path,
                            format!("entry {} at offset {offset}, expected {expected}", log_id.index),
                        ));
                    }
                    None => {
                        if !is_last || valid_frame_after(&bytes, offset, expected, options.entry_bytes_max) {
                            return Err(corrupt(&segment.path, format!("damaged frame at offset {offset}")));
                        }
                        // A torn final write: it was never reported durable, so it can go.
                        segment.file.set_len(offset as u64)?;
                        options.sync.sync_data(&segment.file)?;
                        recovered.torn_tail_bytes = (bytes.len() - offset) as u64;
                        break;
                    }
                }
            }
            next_index = Some(expected);
            active_bytes = offset as u64;
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
            options.sync.sync_dir(&log_dir)?;
        }
        if let (Some(first), Some(purged)) = (index.first_index(), purged) {
            if first != purged.index + 1 {
                return Err(corrupt(
                    &log_dir,
                    format!("log resumes at {first} after purging up to {}", purged.index),
                ));
            }
        }
        let poisoned = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(LogCounters::default());
        let syncer = Syncer::start(options.sync, poisoned.clone(), counters.clone())?;
        let store = LogStore {
            lock,
            log_dir,
            options,
            index: Arc::new(RwLock::new(index)),
            segments,
            active_bytes,
            vote,
            poisoned,
            committed: Arc::new(AtomicU64::new(0)),
            counters,
            syncer,
        };
        Ok((store, recovered))
    }

    /// Index + 1 of the newest committed entry (0: none), updated as openraft commits.
    pub(crate) fn committed_handle(&self) -> Arc<AtomicU64> {
        self.committed.clone()
    }

    pub(crate) fn counters(&self) -> Arc<LogCounters> {
        self.counters.clone()
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

    /// Starts a new, empty segment for entries from `first_index` on.
    fn roll(&mut self, first_index: u64) -> io::Result<()> {
        let path = self.log_dir.join(segment_name(first_index));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        self.options.sync.sync_dir(&self.log_dir)?;
        self.segments.push(Arc::new(Segment {
            first_index,
            path,
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
            let start = buffer.len();
            buffer.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
            codec::put_entry(&mut buffer, &entry);
            let payload_bytes = buffer.len() - start - FRAME_HEADER_BYTES;
            let payload_bytes = u32::try_from(payload_bytes)
                .ok()
                .filter(|&b| b <= self.options.entry_bytes_max)
                .ok_or_else(|| {
                    write_error(AnyError::error(format!(
                        "entry {} encodes to {payload_bytes} bytes, over entry_bytes_max {}",
                        entry.log_id.index, self.options.entry_bytes_max
                    )))
                })?;
            let crc = crc32fast::hash(&buffer[start + FRAME_HEADER_BYTES..]);
            buffer[start..start + 4].copy_from_slice(&payload_bytes.to_le_bytes());
            buffer[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
            if let Some((previous, _, _)) = frames.last() {
                if entry.log_id.index != previous.index + 1 {
                    return Err(write_error(AnyError::error("appended entries are not consecutive")));
                }
            }
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
        self.active_bytes = cut.offset;
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
        if removable == 0 {
            return Ok(());
        }
        for segment in self.segments.drain(..removable).collect::<Vec<_>>() {
            self.remove_segment_file(&segment)?;
        }
        if self.segments.is_empty() {
            self.active_bytes = 0;
        }
        self.sync_log_dir()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;
    use crate::types::Batch;

    fn options() -> LogOptions {
        LogOptions {
            segment_bytes_max: 300,
            entry_bytes_max: 1 << 20,
            sync: SyncMode::Fsync,
        }
    }

    fn open(dir: &Path) -> (LogStore, Recovered) {
        let lock = Arc::new(DirLock::acquire(dir, Duration::from_secs(1)).unwrap());
        LogStore::open(lock, options()).unwrap()
    }

    fn entry(term: u64, index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(term, 1), index),
            payload: EntryPayload::Normal(Batch(vec![index.to_le_bytes().to_vec(); 3])),
        }
    }

    async fn append(store: &mut LogStore, entries: Vec<Entry>) {
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
        let segment = dir.path().join("log").join(segment_name(0));
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
        damaged[FRAME_HEADER_BYTES + 3] ^= 0xff;
        fs::write(&segment, &damaged).unwrap();
        let lock = Arc::new(DirLock::acquire(dir.path(), Duration::from_secs(1)).unwrap());
        let err = LogStore::open(lock, options()).err().expect("corruption refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData, "{err}");
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
