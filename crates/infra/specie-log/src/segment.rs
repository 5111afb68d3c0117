//! Segment files, shared by the embedded log and Raft's log store: naming, listing, creation,
//! and the one rule for reading a segment's frames back (where a torn tail ends and corruption
//! begins).

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use crate::error::{io_error, Corruption, LogError};
use crate::frame::{self, Frame};
use crate::SyncMode;

const SEGMENT_PREFIX: &str = "log-";
const SEGMENT_SUFFIX: &str = ".seg";
const SEGMENT_INDEX_DIGITS: usize = 20;

/// The file name of the segment whose first record has `first_index`:
/// `log-<first_index, 20 digits>.seg`, so names sort like indexes.
pub fn name(first_index: u64) -> String {
    format!(
        "{SEGMENT_PREFIX}{first_index:0width$}{SEGMENT_SUFFIX}",
        width = SEGMENT_INDEX_DIGITS
    )
}

pub fn path(dir: &Path, first_index: u64) -> PathBuf {
    dir.join(name(first_index))
}

/// The first index a segment file name encodes, or `None` for any other file. Only the exact
/// canonical spelling counts, so a stray `log-1.seg` cannot alias `log-00000000000000000001.seg`.
pub fn parse_name(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_prefix(SEGMENT_PREFIX)?.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEGMENT_INDEX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// First indexes of all segment files in `dir`, ascending. Other files are ignored.
pub fn list(dir: &Path) -> Result<Vec<u64>, LogError> {
    let mut firsts = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error(dir))? {
        let entry = entry.map_err(io_error(dir))?;
        if let Some(first_index) = entry.file_name().to_str().and_then(parse_name) {
            firsts.push(first_index);
        }
    }
    firsts.sort_unstable();
    Ok(firsts)
}

/// Creates the empty segment for records from `first_index` on, open for reading and writing
/// at offset 0, and makes its directory entry durable.
pub fn create(dir: &Path, first_index: u64, sync: SyncMode) -> Result<File, LogError> {
    let path = path(dir, first_index);
    // create_new: a segment is never reused, so an existing file means our view is wrong.
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io_error(&path))?;
    // A batch's fdatasync covers the file's data, not its directory entry; without this a crash
    // could lose the whole new segment along with acknowledged records.
    sync.sync_dir(dir).map_err(io_error(dir))?;
    Ok(file)
}

/// Where a segment's valid frames end, as [`SegmentScan`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentEnd {
    /// The index a record appended to this segment would get.
    pub index_next: u64,
    /// Bytes of valid frames from the start of the file.
    pub bytes_valid: u64,
    /// Bytes of torn tail after the valid frames (only ever non-zero for an unsealed segment):
    /// cut them off with [`cut_torn_tail`] before appending.
    pub bytes_torn: u64,
}

/// One step of a [`SegmentScan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scanned<'a> {
    /// The next valid frame, at byte `offset` of the file; its index is the one expected.
    Frame { offset: u64, frame: Frame<'a> },
    /// No more valid frames; what follows, if anything, is a torn tail.
    End(SegmentEnd),
}

/// Reads a segment file's frames in order, applying the recovery rules:
///
/// - frames carry consecutive indexes from the one the file is named for; a valid frame with
///   another index cannot come from a torn write and is corruption;
/// - a bad frame in a **sealed** segment (one the writer rolled past, after syncing its last
///   batch) is corruption;
/// - a bad frame in the unsealed (last) segment is a torn tail from a crash mid-append, never
///   acknowledged, if no valid frame of the sequence follows it; if one does, acknowledged data
///   was damaged and that is corruption.
///
/// Corruption is `LogError::Corrupt` naming the file and byte offset. The scan only slices
/// `bytes` (the whole file) and never allocates.
#[derive(Debug)]
pub struct SegmentScan<'a> {
    path: &'a Path,
    bytes: &'a [u8],
    sealed: bool,
    record_bytes_max: u32,
    offset: usize,
    index_next: u64,
    end: Option<SegmentEnd>,
}

impl<'a> SegmentScan<'a> {
    pub fn new(path: &'a Path, bytes: &'a [u8], first_index: u64, sealed: bool, record_bytes_max: u32) -> Self {
        SegmentScan {
            path,
            bytes,
            sealed,
            record_bytes_max,
            offset: 0,
            index_next: first_index,
            end: None,
        }
    }

    fn corrupt(&self, corruption: Corruption) -> LogError {
        LogError::Corrupt {
            path: self.path.to_path_buf(),
            offset: self.offset as u64,
            corruption,
        }
    }

    /// The next valid frame, or the end of the valid frames (returned again on every later call).
    pub fn step(&mut self) -> Result<Scanned<'a>, LogError> {
        if let Some(end) = self.end {
            return Ok(Scanned::End(end));
        }
        if self.offset == self.bytes.len() {
            return Ok(Scanned::End(self.finish(0)));
        }
        match frame::decode(&self.bytes[self.offset..], self.record_bytes_max) {
            Ok(frame) => {
                // A valid checksum with the wrong index cannot come from a torn write.
                if frame.index != self.index_next {
                    return Err(self.corrupt(Corruption::IndexUnexpected {
                        expected: self.index_next,
                        found: frame.index,
                    }));
                }
                let Some(index_next) = self.index_next.checked_add(1) else {
                    return Err(self.corrupt(Corruption::IndexSpaceExhausted));
                };
                let offset = self.offset as u64;
                self.offset += frame.bytes() as usize;
                self.index_next = index_next;
                Ok(Scanned::Frame { offset, frame })
            }
            Err(defect) => {
                if self.sealed {
                    return Err(self.corrupt(Corruption::FrameInSealedSegment { defect }));
                }
                let valid_after =
                    frame::find_valid_after(self.bytes, self.offset, self.index_next, self.record_bytes_max);
                if let Some(valid_frame_offset) = valid_after {
                    return Err(self.corrupt(Corruption::FrameBeforeValidFrame {
                        defect,
                        valid_frame_offset: valid_frame_offset as u64,
                    }));
                }
                Ok(Scanned::End(self.finish(self.bytes.len() - self.offset)))
            }
        }
    }

    fn finish(&mut self, bytes_torn: usize) -> SegmentEnd {
        assert_eq!(self.offset + bytes_torn, self.bytes.len());
        assert!(
            bytes_torn == 0 || !self.sealed,
            "sealed segments never have a torn tail"
        );
        let end = SegmentEnd {
            index_next: self.index_next,
            bytes_valid: self.offset as u64,
            bytes_torn: bytes_torn as u64,
        };
        self.end = Some(end);
        end
    }
}

/// Cuts the torn tail a scan found off the segment at `path`, durably, before anything is
/// appended after it: otherwise the torn bytes would sit between valid frames and read as
/// corruption next time.
pub fn cut_torn_tail(path: &Path, end: &SegmentEnd, sync: SyncMode) -> Result<(), LogError> {
    let file = OpenOptions::new().write(true).open(path).map_err(io_error(path))?;
    file.set_len(end.bytes_valid).map_err(io_error(path))?;
    sync.sync_all(&file).map_err(io_error(path))
}

/// What replay has accepted so far, across segments.
pub(crate) struct Replay {
    pub snapshot_last_index: u64,
    /// The index the next record newer than the snapshot must have.
    pub index_next: u64,
    pub records: Vec<(u64, Vec<u8>)>,
    /// Per accepted record: its index and the running total of frame bytes, for
    /// `Log::bytes_since_snapshot`.
    pub record_ends: Vec<(u64, u64)>,
    pub bytes_total: u64,
}

impl Replay {
    pub(crate) fn new(snapshot_last_index: u64) -> Replay {
        Replay {
            snapshot_last_index,
            index_next: snapshot_last_index + 1,
            records: Vec::new(),
            record_ends: Vec::new(),
            bytes_total: 0,
        }
    }

    /// Checks that a segment may start at `first_index`: either it continues the live sequence
    /// exactly, or it starts inside what the snapshot covers (a segment whose deletion a crash
    /// interrupted, or the one holding `snapshot_last_index + 1`).
    fn check_segment_start(&self, path: &Path, first_index: u64) -> Result<(), LogError> {
        if first_index == self.index_next || first_index <= self.snapshot_last_index + 1 {
            Ok(())
        } else {
            Err(LogError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                corruption: Corruption::SegmentGap {
                    expected: self.index_next,
                    found: first_index,
                },
            })
        }
    }

    fn accept(&mut self, path: &Path, offset: u64, frame: Frame<'_>) -> Result<(), LogError> {
        if frame.index <= self.snapshot_last_index {
            return Ok(());
        }
        if frame.index != self.index_next {
            return Err(LogError::Corrupt {
                path: path.to_path_buf(),
                offset,
                corruption: Corruption::IndexUnexpected {
                    expected: self.index_next,
                    found: frame.index,
                },
            });
        }
        self.index_next += 1;
        self.bytes_total += frame.bytes();
        self.records.push((frame.index, frame.payload.to_vec()));
        self.record_ends.push((frame.index, self.bytes_total));
        Ok(())
    }
}

/// Replays the segment `bytes` (the whole file) into `replay`. `sealed` is true for every segment
/// but the last: the log only rolls past a segment after its final batch was fsynced.
pub(crate) fn replay(
    path: &Path,
    first_index: u64,
    bytes: &[u8],
    sealed: bool,
    record_bytes_max: u32,
    replay: &mut Replay,
) -> Result<SegmentEnd, LogError> {
    replay.check_segment_start(path, first_index)?;
    let mut scan = SegmentScan::new(path, bytes, first_index, sealed, record_bytes_max);
    loop {
        match scan.step()? {
            Scanned::Frame { offset, frame } => replay.accept(path, offset, frame)?,
            Scanned::End(end) => return Ok(end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(name(1), "log-00000000000000000001.seg");
        assert_eq!(parse_name(&name(1)), Some(1));
        assert_eq!(parse_name(&name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_name("log-00000000000000000000.seg"), Some(0));
        assert_eq!(parse_name("log-1.seg"), None);
        assert_eq!(parse_name("log-0000000000000000000a.seg"), None);
        assert_eq!(parse_name("log-00000000000000000001.seg.tmp"), None);
        assert_eq!(parse_name("snapshot"), None);
    }

    fn frames(indexes: std::ops::RangeInclusive<u64>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for index in indexes {
            frame::encode(&mut bytes, index, &index.to_le_bytes(), 64).unwrap();
        }
        bytes
    }

    /// Scans `bytes` to the end: the indexes of the frames read, and the end.
    fn scan_all(bytes: &[u8], first_index: u64, sealed: bool) -> Result<(Vec<u64>, SegmentEnd), LogError> {
        let path = Path::new("segment");
        let mut scan = SegmentScan::new(path, bytes, first_index, sealed, 64);
        let mut indexes = Vec::new();
        loop {
            match scan.step()? {
                Scanned::Frame { offset, frame } => {
                    assert_eq!(offset, (indexes.len() * 24) as u64);
                    indexes.push(frame.index);
                }
                Scanned::End(end) => {
                    assert_eq!(scan.step().unwrap(), Scanned::End(end), "the end is sticky");
                    return Ok((indexes, end));
                }
            }
        }
    }

    fn corruption(result: Result<(Vec<u64>, SegmentEnd), LogError>) -> (u64, Corruption) {
        match result {
            Err(LogError::Corrupt { offset, corruption, .. }) => (offset, corruption),
            other => panic!("expected corruption, got {other:?}"),
        }
    }

    #[test]
    fn scan_reads_frames_and_cuts_only_a_torn_tail() {
        let bytes = frames(5..=7);
        let whole = SegmentEnd {
            index_next: 8,
            bytes_valid: 72,
            bytes_torn: 0,
        };
        assert_eq!(scan_all(&bytes, 5, true).unwrap(), (vec![5, 6, 7], whole));
        assert_eq!(
            scan_all(&[], 5, false).unwrap(),
            (
                vec![],
                SegmentEnd {
                    index_next: 5,
                    bytes_valid: 0,
                    bytes_torn: 0
                }
            )
        );

        // The last frame half written: a torn tail in the last segment ...
        let torn = &bytes[..bytes.len() - 5];
        let end = SegmentEnd {
            index_next: 7,
            bytes_valid: 48,
            bytes_torn: 19,
        };
        assert_eq!(scan_all(torn, 5, false).unwrap(), (vec![5, 6], end));
        // ... but corruption in a sealed one.
        assert!(matches!(
            corruption(scan_all(torn, 5, true)),
            (48, Corruption::FrameInSealedSegment { .. })
        ));

        // A damaged frame with a valid one after it is never a torn tail.
        let mut damaged = bytes.clone();
        damaged[24 + 17] ^= 1;
        assert!(matches!(
            corruption(scan_all(&damaged, 5, false)),
            (
                24,
                Corruption::FrameBeforeValidFrame {
                    valid_frame_offset: 48,
                    ..
                }
            )
        ));
    }

    #[test]
    fn scan_refuses_frames_out_of_sequence() {
        assert_eq!(
            corruption(scan_all(&frames(5..=7), 4, false)),
            (0, Corruption::IndexUnexpected { expected: 4, found: 5 })
        );
        let mut skipping = frames(5..=5);
        skipping.extend(frames(7..=7));
        assert_eq!(
            corruption(scan_all(&skipping, 5, false)),
            (24, Corruption::IndexUnexpected { expected: 6, found: 7 })
        );
        assert_eq!(
            corruption(scan_all(&frames(u64::MAX..=u64::MAX), u64::MAX, false)),
            (0, Corruption::IndexSpaceExhausted)
        );
    }

    #[test]
    fn a_torn_tail_is_cut_durably() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = create(dir.path(), 5, SyncMode::Fsync).unwrap();
        assert_eq!(list(dir.path()).unwrap(), vec![5]);
        assert!(
            create(dir.path(), 5, SyncMode::Fsync).is_err(),
            "segments are never reused"
        );
        let bytes = frames(5..=6);
        std::io::Write::write_all(&mut file, &bytes[..30]).unwrap();
        let (indexes, end) = scan_all(&fs::read(path(dir.path(), 5)).unwrap(), 5, false).unwrap();
        assert_eq!((indexes, end.bytes_torn), (vec![5], 6));
        cut_torn_tail(&path(dir.path(), 5), &end, SyncMode::Fsync).unwrap();
        assert_eq!(fs::read(path(dir.path(), 5)).unwrap(), bytes[..24]);
    }
}
