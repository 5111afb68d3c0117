//! Segment files: naming, listing and replay.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{io_error, Corruption, LogError};
use crate::frame::{self, Frame};

const SEGMENT_PREFIX: &str = "log-";
const SEGMENT_SUFFIX: &str = ".seg";
const SEGMENT_INDEX_DIGITS: usize = 20;

pub(crate) fn name(first_index: u64) -> String {
    format!(
        "{SEGMENT_PREFIX}{first_index:0width$}{SEGMENT_SUFFIX}",
        width = SEGMENT_INDEX_DIGITS
    )
}

pub(crate) fn path(dir: &Path, first_index: u64) -> PathBuf {
    dir.join(name(first_index))
}

/// The first index a segment file name encodes, or `None` for any other file. Only the exact
/// canonical spelling counts, so a stray `log-1.seg` cannot alias `log-00000000000000000001.seg`.
pub(crate) fn parse_name(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_prefix(SEGMENT_PREFIX)?.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != SEGMENT_INDEX_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let first_index: u64 = digits.parse().ok()?;
    // Index 0 is never assigned, so no segment can start there.
    (first_index > 0).then_some(first_index)
}

/// First indexes of all segment files in `dir`, ascending.
pub(crate) fn list(dir: &Path) -> Result<Vec<u64>, LogError> {
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

    fn accept(&mut self, path: &Path, offset: usize, frame: Frame<'_>) -> Result<(), LogError> {
        if frame.index <= self.snapshot_last_index {
            return Ok(());
        }
        if frame.index != self.index_next {
            return Err(LogError::Corrupt {
                path: path.to_path_buf(),
                offset: offset as u64,
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

/// How one segment file replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentReplayed {
    /// The index a record appended to this segment would get.
    pub index_next: u64,
    /// Bytes of valid frames from the start of the file.
    pub bytes_valid: u64,
    /// Bytes of torn tail after the valid frames (only ever non-zero for the last segment).
    pub bytes_torn: u64,
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
) -> Result<SegmentReplayed, LogError> {
    replay.check_segment_start(path, first_index)?;
    let mut offset = 0usize;
    let mut index_next = first_index;
    while offset < bytes.len() {
        match frame::decode(&bytes[offset..], record_bytes_max) {
            Ok(frame) => {
                // A valid checksum with the wrong index cannot come from a torn write.
                if frame.index != index_next {
                    return Err(LogError::Corrupt {
                        path: path.to_path_buf(),
                        offset: offset as u64,
                        corruption: Corruption::IndexUnexpected {
                            expected: index_next,
                            found: frame.index,
                        },
                    });
                }
                replay.accept(path, offset, frame)?;
                offset += frame.bytes() as usize;
                index_next += 1;
            }
            Err(defect) => {
                let corruption = if sealed {
                    Some(Corruption::FrameInSealedSegment { defect })
                } else {
                    frame::find_valid_after(bytes, offset, index_next, record_bytes_max).map(|valid_frame_offset| {
                        Corruption::FrameBeforeValidFrame {
                            defect,
                            valid_frame_offset: valid_frame_offset as u64,
                        }
                    })
                };
                if let Some(corruption) = corruption {
                    return Err(LogError::Corrupt {
                        path: path.to_path_buf(),
                        offset: offset as u64,
                        corruption,
                    });
                }
                return Ok(SegmentReplayed {
                    index_next,
                    bytes_valid: offset as u64,
                    bytes_torn: (bytes.len() - offset) as u64,
                });
            }
        }
    }
    assert_eq!(offset, bytes.len());
    Ok(SegmentReplayed {
        index_next,
        bytes_valid: offset as u64,
        bytes_torn: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(name(1), "log-00000000000000000001.seg");
        assert_eq!(parse_name(&name(1)), Some(1));
        assert_eq!(parse_name(&name(u64::MAX)), Some(u64::MAX));
        assert_eq!(parse_name("log-00000000000000000000.seg"), None);
        assert_eq!(parse_name("log-1.seg"), None);
        assert_eq!(parse_name("log-0000000000000000000a.seg"), None);
        assert_eq!(parse_name("log-00000000000000000001.seg.tmp"), None);
        assert_eq!(parse_name("snapshot"), None);
    }
}
