use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong opening, appending to or snapshotting a [`crate::Log`].
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("log options invalid: {reason}")]
    OptionsInvalid { reason: &'static str },

    #[error("io error on {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// Data that was (or may have been) acknowledged is damaged. Recovery refuses to guess.
    #[error("log corrupt in {} at byte offset {offset}: {corruption}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        corruption: Corruption,
    },

    #[error("snapshot {} has unsupported version {version}", path.display())]
    SnapshotVersionUnsupported { path: PathBuf, version: u32 },

    #[error("batch is empty")]
    BatchEmpty,

    #[error("batch has {records} records, more than batch_records_max {records_max}")]
    BatchTooLarge { records: usize, records_max: usize },

    #[error("record {position} of the batch has {bytes} bytes, more than record_bytes_max {bytes_max}")]
    RecordTooLarge {
        position: usize,
        bytes: usize,
        bytes_max: u32,
    },

    /// A read of an index the log does not hold: after its end, or folded into a snapshot.
    #[error("record {index} is not in the log (it holds {first_index}..={last_index})")]
    IndexAbsent {
        index: u64,
        first_index: u64,
        last_index: u64,
    },

    #[error("snapshot last_index {last_index} is before the installed snapshot's {snapshot_last_index}")]
    SnapshotRegressed { last_index: u64, snapshot_last_index: u64 },

    /// An earlier write, fsync or file operation failed. After a failed fsync the kernel may
    /// have dropped the dirty pages and cleared the error (fsyncgate), so retrying could report
    /// success for data that is gone: the only safe way on is to reopen and recover.
    #[error("log poisoned by an earlier io failure; reopen it to recover")]
    Poisoned,
}

/// What exactly is wrong in a [`LogError::Corrupt`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Corruption {
    /// A sealed segment was fully written and fsynced before the log rolled past it, so a bad
    /// frame there cannot be a torn write.
    #[error("{defect} in a sealed segment")]
    FrameInSealedSegment { defect: FrameDefect },

    /// A torn write only ever damages the end of the log, so a valid frame after a bad one means
    /// acknowledged data was damaged.
    #[error("{defect}, yet a valid frame follows at byte offset {valid_frame_offset}")]
    FrameBeforeValidFrame {
        defect: FrameDefect,
        valid_frame_offset: u64,
    },

    #[error("frame has index {found}, expected {expected}")]
    IndexUnexpected { expected: u64, found: u64 },

    /// A frame claims the index `u64::MAX`, after which no record could follow.
    #[error("frame index exhausts the u64 index space")]
    IndexSpaceExhausted,

    #[error("segment starts at index {found}, expected {expected}")]
    SegmentGap { expected: u64, found: u64 },

    #[error("snapshot is {bytes} bytes, shorter than its header")]
    SnapshotHeaderShort { bytes: u64 },

    #[error("snapshot magic mismatch")]
    SnapshotMagic,

    #[error("snapshot length field says {length} bytes, but {bytes_remaining} follow the header")]
    SnapshotLength { length: u64, bytes_remaining: u64 },

    #[error("snapshot checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    SnapshotChecksum { stored: u32, computed: u32 },
}

/// Why one frame failed to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameDefect {
    #[error("frame header cut short: {bytes_remaining} bytes remain")]
    HeaderShort { bytes_remaining: u64 },

    #[error("frame length {length} exceeds record_bytes_max {record_bytes_max}")]
    LengthExceedsMax { length: u32, record_bytes_max: u32 },

    #[error("frame length {length} exceeds the {bytes_remaining} bytes remaining")]
    PayloadShort { length: u32, bytes_remaining: u64 },

    #[error("frame checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch { stored: u32, computed: u32 },
}

/// Attaches the file path to an io error, because "No such file or directory" alone is useless
/// at 3 a.m.
pub(crate) fn io_error(path: &Path) -> impl FnOnce(io::Error) -> LogError + '_ {
    move |source| LogError::Io {
        path: path.to_path_buf(),
        source,
    }
}
