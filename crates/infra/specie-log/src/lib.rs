#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

pub mod dir_lock;
mod error;
pub mod frame;
pub mod secret;
pub mod segment;
mod snapshot;
pub mod wait_lock;

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

pub use dir_lock::{DirLock, DirLockError};
pub use error::{Corruption, FrameDefect, LogError};
pub use wait_lock::{wait_lock, WaitLockError};

use error::io_error;

/// The largest `record_bytes_max` accepted. It keeps a frame's length (u32) and its size in
/// memory (usize, also on 32-bit targets) far from overflow.
pub const RECORD_BYTES_LIMIT: u32 = 1 << 30;

/// Whether writes wait for the disk: one setting for every durable file of a process (the
/// embedded log, Raft's log store and state-machine snapshots).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// `fdatasync` (`File::sync_data`) after every batch (group-committed); `fsync` for new
    /// files, renames and directories.
    #[default]
    Fsync,
    /// No syncs at all: a machine crash loses acknowledged records and can break Raft's safety.
    /// Tests and benchmarks of everything but the disk only.
    None,
}

impl SyncMode {
    /// Every batch's sync, timed (`specie_log_fsync_duration_seconds`).
    pub fn sync_data(self, file: &File) -> std::io::Result<()> {
        match self {
            SyncMode::Fsync => timed(|| file.sync_data()),
            SyncMode::None => Ok(()),
        }
    }

    pub fn sync_all(self, file: &File) -> std::io::Result<()> {
        match self {
            SyncMode::Fsync => timed(|| file.sync_all()),
            SyncMode::None => Ok(()),
        }
    }

    /// Makes a file creation, rename or deletion in `dir` durable.
    pub fn sync_dir(self, dir: &Path) -> std::io::Result<()> {
        match self {
            SyncMode::Fsync => File::open(dir)?.sync_all(),
            SyncMode::None => Ok(()),
        }
    }
}

fn timed(sync: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
    let started = std::time::Instant::now();
    let synced = sync();
    specie_metrics::log::synced(started.elapsed());
    synced
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogOptions {
    /// The log rolls to a new segment before a batch would take the active one past this.
    pub segment_bytes_max: u64,
    /// Largest payload of a single record, at most [`RECORD_BYTES_LIMIT`].
    pub record_bytes_max: u32,
    /// Most records one `append_batch` may carry.
    pub batch_records_max: usize,
    pub sync: SyncMode,
}

impl Default for LogOptions {
    fn default() -> LogOptions {
        LogOptions {
            segment_bytes_max: 64 * 1024 * 1024,
            record_bytes_max: 1024 * 1024,
            batch_records_max: 8192,
            sync: SyncMode::Fsync,
        }
    }
}

impl LogOptions {
    fn validate(&self) -> Result<(), LogError> {
        let invalid = |reason| Err(LogError::OptionsInvalid { reason });
        if self.segment_bytes_max == 0 {
            return invalid("segment_bytes_max must be positive");
        }
        if self.record_bytes_max > RECORD_BYTES_LIMIT {
            return invalid("record_bytes_max exceeds RECORD_BYTES_LIMIT");
        }
        if self.batch_records_max == 0 {
            return invalid("batch_records_max must be positive");
        }
        // The batch buffer must be addressable in memory even when every record is maximal.
        let frame_bytes_max = frame::frame_bytes(self.record_bytes_max as usize);
        let batch_bytes_max = (self.batch_records_max as u64).checked_mul(frame_bytes_max);
        if batch_bytes_max.is_none_or(|bytes| usize::try_from(bytes).is_err()) {
            return invalid("batch_records_max * record_bytes_max overflows memory");
        }
        Ok(())
    }

    fn fsync(&self) -> bool {
        self.sync == SyncMode::Fsync
    }
}

/// The state machine's state as of `last_index`, in whatever encoding the state machine uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub last_index: u64,
    pub bytes: Vec<u8>,
}

/// What `Log::open` found: restore `snapshot` (if any), then apply `records` in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovered {
    pub snapshot: Option<Snapshot>,
    /// Every record after the snapshot, as `(index, payload)`, indexes consecutive.
    pub records: Vec<(u64, Vec<u8>)>,
    /// Bytes of a torn final write that were truncated: a crash mid-append, never acknowledged.
    pub truncated_tail_bytes: u64,
}

/// Where the running byte total stood after the record (or batch) ending at `last_index`.
#[derive(Clone, Copy, Debug)]
struct BytesMark {
    last_index: u64,
    bytes_total: u64,
}

/// An index-addressed, append-only log of byte records with snapshots. See the crate docs for
/// the format and recovery rules.
#[derive(Debug)]
pub struct Log {
    dir: PathBuf,
    options: LogOptions,
    /// First index of every segment file on disk, ascending. The last is the active segment,
    /// the only one ever written to.
    segments: Vec<u64>,
    active: File,
    active_bytes: u64,
    /// Invariant: the active segment holds exactly the records `segments.last() ..= last_index`.
    last_index: u64,
    snapshot_last_index: u64,
    /// Frame bytes appended or replayed since open, and where that total stood after each
    /// batch newer than the snapshot, so `install_snapshot` can tell how many bytes it covered.
    bytes_total: u64,
    bytes_total_at_snapshot: u64,
    bytes_marks: VecDeque<BytesMark>,
    /// Reused for every batch so that steady-state appends allocate nothing.
    buffer: Vec<u8>,
    poisoned: bool,
}

impl Log {
    /// Opens (creating if absent) the log in `dir`, truncates a torn tail, and returns what to
    /// replay. Appends continue after the last valid record.
    pub fn open(dir: &Path, options: LogOptions) -> Result<(Log, Recovered), LogError> {
        options.validate()?;
        let fsync = options.fsync();
        create_dir(dir, fsync)?;
        snapshot::remove_tmp(dir)?;
        let snapshot = snapshot::read(dir)?;
        let snapshot_last_index = snapshot.as_ref().map_or(0, |snapshot| snapshot.last_index);

        let mut segments = segment::list(dir)?;
        // This log assigns indexes from 1, so a segment named 0 is not one of its files.
        segments.retain(|&first_index| first_index > 0);
        let mut replay = segment::Replay::new(snapshot_last_index);
        let mut truncated_tail_bytes = 0;
        let mut tail = None;
        for (position, &first_index) in segments.iter().enumerate() {
            let path = segment::path(dir, first_index);
            let sealed = position + 1 < segments.len();
            let bytes = fs::read(&path).map_err(io_error(&path))?;
            let replayed = segment::replay(
                &path,
                first_index,
                &bytes,
                sealed,
                options.record_bytes_max,
                &mut replay,
            )?;
            if replayed.bytes_torn > 0 {
                segment::cut_torn_tail(&path, &replayed, options.sync)?;
                truncated_tail_bytes = replayed.bytes_torn;
            }
            if !sealed {
                tail = Some((first_index, replayed));
            }
        }

        let last_index = replay.index_next - 1;
        assert!(last_index >= snapshot_last_index);
        let (active, active_bytes) = match tail {
            // The last segment continues the log: append to it.
            Some((first_index, replayed)) if replayed.index_next == last_index + 1 => {
                let path = segment::path(dir, first_index);
                let file = OpenOptions::new().append(true).open(&path).map_err(io_error(&path))?;
                (file, replayed.bytes_valid)
            }
            // No segment yet, or a crash came between installing a snapshot newer than the
            // log and rolling past it: start a segment right after the snapshot.
            _ => {
                let file = segment::create(dir, last_index + 1, options.sync)?;
                segments.push(last_index + 1);
                (file, 0)
            }
        };
        let mut log = Log {
            dir: dir.to_path_buf(),
            options,
            segments,
            active,
            active_bytes,
            last_index,
            snapshot_last_index,
            bytes_total: replay.bytes_total,
            bytes_total_at_snapshot: 0,
            bytes_marks: replay
                .record_ends
                .iter()
                .map(|&(last_index, bytes_total)| BytesMark {
                    last_index,
                    bytes_total,
                })
                .collect(),
            buffer: Vec::new(),
            poisoned: false,
        };
        log.delete_segments_through(snapshot_last_index)?;
        log.check_invariants();

        let recovered = Recovered {
            snapshot,
            records: replay.records,
            truncated_tail_bytes,
        };
        Ok((log, recovered))
    }

    /// Appends `records` with one write and (under `SyncMode::Fsync`) one `fdatasync`. They are
    /// durable when this returns, and get the consecutive indexes returned.
    pub fn append_batch<R: AsRef<[u8]>>(&mut self, records: &[R]) -> Result<RangeInclusive<u64>, LogError> {
        self.check_poisoned()?;
        if records.is_empty() {
            return Err(LogError::BatchEmpty);
        }
        if records.len() > self.options.batch_records_max {
            return Err(LogError::BatchTooLarge {
                records: records.len(),
                records_max: self.options.batch_records_max,
            });
        }
        let mut batch_bytes: u64 = 0;
        for (position, record) in records.iter().enumerate() {
            let bytes = record.as_ref().len();
            if bytes > self.options.record_bytes_max as usize {
                return Err(LogError::RecordTooLarge {
                    position,
                    bytes,
                    bytes_max: self.options.record_bytes_max,
                });
            }
            batch_bytes += frame::frame_bytes(bytes);
        }
        let index_first = self.last_index + 1;
        let index_last = self
            .last_index
            .checked_add(records.len() as u64)
            .expect("u64 index space exhausted");

        // Cleared only once every step below succeeded.
        self.poisoned = true;
        if self.active_bytes > 0 && self.active_bytes + batch_bytes > self.options.segment_bytes_max {
            self.roll(index_first)?;
        }
        self.buffer.clear();
        self.buffer.reserve(batch_bytes as usize);
        for (index, record) in (index_first..=index_last).zip(records) {
            frame::encode(&mut self.buffer, index, record.as_ref(), self.options.record_bytes_max)
                .expect("record sizes checked above");
        }
        assert_eq!(self.buffer.len() as u64, batch_bytes);
        self.active
            .write_all(&self.buffer)
            .map_err(io_error(&self.active_path()))?;
        if self.options.fsync() {
            self.active.sync_data().map_err(io_error(&self.active_path()))?;
        }
        self.active_bytes += batch_bytes;
        self.last_index = index_last;
        self.bytes_total += batch_bytes;
        self.bytes_marks.push_back(BytesMark {
            last_index: index_last,
            bytes_total: self.bytes_total,
        });
        self.poisoned = false;
        self.check_invariants();
        Ok(index_first..=index_last)
    }

    /// Durably installs a snapshot of the state as of `last_index`, then deletes the segments it
    /// makes redundant. `last_index` may be past the log's end (a snapshot from elsewhere, as
    /// Raft followers get); appends then continue at `last_index + 1`.
    pub fn install_snapshot(&mut self, last_index: u64, bytes: &[u8]) -> Result<(), LogError> {
        self.check_poisoned()?;
        if last_index < self.snapshot_last_index {
            return Err(LogError::SnapshotRegressed {
                last_index,
                snapshot_last_index: self.snapshot_last_index,
            });
        }
        self.poisoned = true;
        snapshot::write(&self.dir, last_index, bytes, self.options.fsync())?;
        self.snapshot_last_index = last_index;
        if last_index >= self.last_index {
            // The snapshot covers the whole log. Roll to an empty segment so every older one
            // can be deleted and appends continue right after the snapshot.
            if self.active_bytes > 0 || self.active_first_index() != last_index + 1 {
                self.roll(last_index + 1)?;
            }
            self.last_index = last_index;
        }
        self.delete_segments_through(last_index)?;

        // A batch straddling `last_index` counts whole: over-reporting by under one batch is fine
        // for deciding when to snapshot next.
        while let Some(mark) = self.bytes_marks.front().copied() {
            if mark.last_index > last_index {
                break;
            }
            self.bytes_total_at_snapshot = mark.bytes_total;
            self.bytes_marks.pop_front();
        }
        if self.bytes_marks.is_empty() {
            self.bytes_total_at_snapshot = self.bytes_total;
        }
        self.poisoned = false;
        self.check_invariants();
        Ok(())
    }

    /// The payload of record `index`, read back from its segment. Costs one read and scan of
    /// that segment (at most `segment_bytes_max`): for logs read now and then, such as a
    /// ledger's blocks served on request, not for a hot path.
    pub fn read(&self, index: u64) -> Result<Vec<u8>, LogError> {
        self.check_poisoned()?;
        let first_held = self.segments[0].max(self.snapshot_last_index + 1);
        if index < first_held || index > self.last_index {
            return Err(LogError::IndexAbsent {
                index,
                first_index: first_held,
                last_index: self.last_index,
            });
        }
        let position = self.segments.partition_point(|&first| first <= index) - 1;
        let first_index = self.segments[position];
        let path = segment::path(&self.dir, first_index);
        let bytes = fs::read(&path).map_err(io_error(&path))?;
        let sealed = position + 1 < self.segments.len();
        let mut scan = segment::SegmentScan::new(&path, &bytes, first_index, sealed, self.options.record_bytes_max);
        loop {
            match scan.step()? {
                segment::Scanned::Frame { frame, .. } if frame.index == index => return Ok(frame.payload.to_vec()),
                segment::Scanned::Frame { .. } => {}
                segment::Scanned::End(_) => unreachable!("record {index} is below last_index, so in its segment"),
            }
        }
    }

    /// Index of the newest record, or of the snapshot if it is newer; 0 for an empty log.
    pub fn last_index(&self) -> u64 {
        self.last_index
    }

    /// `last_index` of the installed snapshot; 0 if there is none.
    pub fn snapshot_last_index(&self) -> u64 {
        self.snapshot_last_index
    }

    /// Frame bytes of the records after the snapshot, so the driver knows when to take the
    /// next one. Counted at batch granularity: a batch straddling the snapshot counts whole.
    pub fn bytes_since_snapshot(&self) -> u64 {
        self.bytes_total - self.bytes_total_at_snapshot
    }

    fn check_poisoned(&self) -> Result<(), LogError> {
        if self.poisoned {
            Err(LogError::Poisoned)
        } else {
            Ok(())
        }
    }

    fn active_first_index(&self) -> u64 {
        *self.segments.last().expect("an open log always has an active segment")
    }

    fn active_path(&self) -> PathBuf {
        segment::path(&self.dir, self.active_first_index())
    }

    /// Makes a new, empty segment starting at `first_index` the active one.
    fn roll(&mut self, first_index: u64) -> Result<(), LogError> {
        assert!(self.segments.last().is_none_or(|&last| last < first_index));
        self.active = segment::create(&self.dir, first_index, self.options.sync)?;
        self.segments.push(first_index);
        self.active_bytes = 0;
        Ok(())
    }

    /// Deletes every sealed segment whose records all have index `<= last_index`. Deleting
    /// oldest first means a crash midway leaves a suffix, which recovery accepts. The deletions
    /// need no directory fsync: a resurrected old segment is skipped and deleted on open.
    fn delete_segments_through(&mut self, last_index: u64) -> Result<(), LogError> {
        // A sealed segment ends where the next one starts.
        let deletable = self
            .segments
            .windows(2)
            .take_while(|pair| pair[1] <= last_index + 1)
            .count();
        for position in 0..deletable {
            let path = segment::path(&self.dir, self.segments[position]);
            fs::remove_file(&path).map_err(io_error(&path))?;
        }
        self.segments.drain(..deletable);
        Ok(())
    }

    fn check_invariants(&self) {
        let active_first_index = self.active_first_index();
        // O(segments): debug builds only, so appends stay O(1) in release.
        debug_assert!(self.segments.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(active_first_index <= self.last_index + 1);
        assert_eq!(self.active_bytes == 0, active_first_index == self.last_index + 1);
        assert!(self.snapshot_last_index <= self.last_index);
        assert!(self.bytes_total_at_snapshot <= self.bytes_total);
    }
}

fn create_dir(dir: &Path, fsync: bool) -> Result<(), LogError> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::create_dir_all(dir).map_err(io_error(dir))?;
    if fsync {
        // Make the new directory's own entry durable, or a crash could lose the whole log.
        match dir.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent)?,
            _ => sync_dir(Path::new("."))?,
        }
    }
    Ok(())
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    SyncMode::Fsync.sync_dir(dir).map_err(io_error(dir))
}
