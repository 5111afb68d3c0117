//! Behaviour of the log through its public API and its files on disk.

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use specie_log::{Corruption, FrameDefect, Log, LogError, LogOptions, Snapshot, SyncMode};

const FRAME_HEADER_BYTES: usize = 16;

/// Records as `Recovered::records` holds them: `(index, payload)`.
type Records = Vec<(u64, Vec<u8>)>;

fn options(segment_bytes_max: u64) -> LogOptions {
    LogOptions {
        segment_bytes_max,
        record_bytes_max: 4096,
        batch_records_max: 256,
        sync: SyncMode::None,
    }
}

/// Deterministic payload for `index`, so recovered records can be checked by index alone.
fn payload(index: u64, bytes: usize) -> Vec<u8> {
    (0..bytes)
        .map(|position| (index as usize * 31 + position * 7) as u8)
        .collect()
}

/// Appends one batch of `count` records of `bytes` bytes each and returns them.
fn append(log: &mut Log, count: usize, bytes: usize) -> Records {
    let first = log.last_index() + 1;
    let batch: Vec<Vec<u8>> = (0..count as u64).map(|k| payload(first + k, bytes)).collect();
    let range = log.append_batch(&batch).unwrap();
    assert_eq!(range, first..=first + count as u64 - 1);
    range.zip(batch).collect()
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "seg"))
        .collect();
    files.sort();
    files
}

fn segment_first_index(path: &Path) -> u64 {
    let name = path.file_name().unwrap().to_str().unwrap();
    name["log-".len()..name.len() - ".seg".len()].parse().unwrap()
}

fn last_segment(dir: &Path) -> PathBuf {
    segment_files(dir).pop().unwrap()
}

fn frame_bytes(payload_bytes: usize) -> usize {
    FRAME_HEADER_BYTES + payload_bytes
}

#[test]
fn round_trip_across_segment_rolls_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    let (mut log, recovered) = Log::open(dir.path(), options(4096)).unwrap();
    assert_eq!(recovered.snapshot, None);
    assert!(recovered.records.is_empty());
    assert_eq!(log.last_index(), 0);
    for batch in 0..300usize {
        expected.extend(append(&mut log, 1 + batch % 37, batch % 211));
        if batch % 60 == 59 {
            drop(log);
            let (reopened, recovered) = Log::open(dir.path(), options(4096)).unwrap();
            assert_eq!(recovered.records, expected);
            assert_eq!(recovered.truncated_tail_bytes, 0);
            log = reopened;
        }
    }
    assert_eq!(log.last_index(), expected.len() as u64);
    drop(log);
    let (log, recovered) = Log::open(dir.path(), options(4096)).unwrap();
    assert_eq!(recovered.records, expected);
    assert_eq!(log.last_index(), expected.len() as u64);
    // Every record reads back by index, from sealed segments and the active one alike.
    for (index, payload) in &expected {
        assert_eq!(&log.read(*index).unwrap(), payload, "record {index}");
    }
    for absent in [0, expected.len() as u64 + 1] {
        assert!(
            matches!(log.read(absent), Err(LogError::IndexAbsent { index, .. }) if index == absent),
            "record {absent}"
        );
    }

    let segments = segment_files(dir.path());
    assert!(segments.len() > 10, "expected many rolls, got {}", segments.len());
    assert_eq!(segment_first_index(&segments[0]), 1);
    for pair in segments.windows(2) {
        // Rolls happen between batches, and a segment only exceeds the limit by holding one
        // oversized batch on its own.
        let bytes = fs::metadata(&pair[0]).unwrap().len();
        assert!(bytes <= 4096 || segment_first_index(&pair[1]) - segment_first_index(&pair[0]) <= 37);
    }
}

#[test]
fn file_format_is_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(1 << 20)).unwrap();
    log.append_batch(&[b"ab".as_slice(), b"c"]).unwrap();
    drop(log);
    let bytes = fs::read(dir.path().join("log-00000000000000000001.seg")).unwrap();
    let mut expected = Vec::new();
    for (index, payload) in [(1u64, b"ab".as_slice()), (2, b"c")] {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&index.to_le_bytes());
        hasher.update(payload);
        expected.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        expected.extend_from_slice(&hasher.finalize().to_le_bytes());
        expected.extend_from_slice(&index.to_le_bytes());
        expected.extend_from_slice(payload);
    }
    assert_eq!(bytes, expected);
}

/// Indexes start at 1, so a segment named 0 is no file of this log: it is left alone.
#[test]
fn a_segment_named_zero_is_not_part_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("log-00000000000000000000.seg"), b"not ours").unwrap();
    let (mut log, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
    assert_eq!(recovered.records, Vec::<(u64, Vec<u8>)>::new());
    assert_eq!(log.append_batch(&[b"a"]).unwrap(), 1..=1);
    drop(log);
    let (_, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
    assert_eq!(recovered.records, vec![(1, b"a".to_vec())]);
    assert_eq!(
        fs::read(dir.path().join("log-00000000000000000000.seg")).unwrap(),
        b"not ours"
    );
}

#[test]
fn snapshot_then_reopen_returns_snapshot_and_later_records_only() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(2048)).unwrap();
    let mut records = Vec::new();
    for _ in 0..100 {
        records.extend(append(&mut log, 5, 60));
    }
    let segments_before = segment_files(dir.path()).len();
    assert!(segments_before > 10);
    let bytes_before = log.bytes_since_snapshot();
    assert_eq!(bytes_before, 500 * frame_bytes(60) as u64);

    log.install_snapshot(321, b"state at 321").unwrap();
    assert_eq!(log.snapshot_last_index(), 321);
    assert_eq!(log.last_index(), 500);
    // 321 sits inside the batch 321..=325, which counts whole.
    assert_eq!(log.bytes_since_snapshot(), (500 - 320) * frame_bytes(60) as u64);
    let segments = segment_files(dir.path());
    assert!(segments.len() < segments_before);
    // Every remaining segment but the first starts after the snapshot; the first holds 322.
    assert!(segment_first_index(&segments[0]) <= 322);
    assert!(segments[1..].iter().all(|path| segment_first_index(path) > 322));

    drop(log);
    let (mut log, recovered) = Log::open(dir.path(), options(2048)).unwrap();
    assert_eq!(
        recovered.snapshot,
        Some(Snapshot {
            last_index: 321,
            bytes: b"state at 321".to_vec()
        })
    );
    assert_eq!(recovered.records, records[321..].to_vec());
    assert_eq!(log.last_index(), 500);

    // A snapshot covering everything leaves one empty segment and nothing to replay.
    records.extend(append(&mut log, 3, 10));
    log.install_snapshot(503, b"state at 503").unwrap();
    assert_eq!(log.bytes_since_snapshot(), 0);
    let segments = segment_files(dir.path());
    assert_eq!(segments.len(), 1);
    assert_eq!(segment_first_index(&segments[0]), 504);
    assert_eq!(fs::metadata(&segments[0]).unwrap().len(), 0);
    let later = append(&mut log, 2, 10);
    drop(log);
    let (log, recovered) = Log::open(dir.path(), options(2048)).unwrap();
    assert_eq!(recovered.snapshot.unwrap().last_index, 503);
    assert_eq!(recovered.records, later);
    assert_eq!(log.last_index(), 505);
}

#[test]
fn snapshot_ahead_of_the_log_moves_appends_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(2048)).unwrap();
    append(&mut log, 4, 10);
    log.install_snapshot(1000, b"from the leader").unwrap();
    assert_eq!(log.last_index(), 1000);
    assert_eq!(log.append_batch(&[b"x"]).unwrap(), 1001..=1001);
    drop(log);
    let (log, recovered) = Log::open(dir.path(), options(2048)).unwrap();
    assert_eq!(recovered.snapshot.unwrap().last_index, 1000);
    assert_eq!(recovered.records, vec![(1001, b"x".to_vec())]);
    assert_eq!(log.last_index(), 1001);
}

#[test]
fn crash_between_snapshot_rename_and_segment_cleanup_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(256)).unwrap();
    let mut records = Vec::new();
    for _ in 0..20 {
        records.extend(append(&mut log, 2, 50));
    }
    drop(log);
    let segments = segment_files(dir.path());
    // Simulate the snapshot landing while the segments it covers were not deleted yet, with
    // a stale `snapshot.tmp` from a later attempt lying around.
    let other = tempfile::tempdir().unwrap();
    let (mut writer, _) = Log::open(other.path(), options(1 << 20)).unwrap();
    writer.install_snapshot(25, b"s25").unwrap();
    drop(writer);
    fs::copy(other.path().join("snapshot"), dir.path().join("snapshot")).unwrap();
    fs::write(dir.path().join("snapshot.tmp"), b"half a snapshot").unwrap();

    let (mut log, recovered) = Log::open(dir.path(), options(256)).unwrap();
    assert_eq!(recovered.snapshot.unwrap().bytes, b"s25");
    assert_eq!(recovered.records, records[25..].to_vec());
    assert!(!dir.path().join("snapshot.tmp").exists());
    assert!(segment_files(dir.path()).len() < segments.len());
    append(&mut log, 1, 1);

    // And a snapshot past the end of the log, before the roll past it happened.
    let (mut writer, _) = Log::open(other.path(), options(1 << 20)).unwrap();
    writer.install_snapshot(90, b"s90").unwrap();
    drop((writer, log));
    fs::copy(other.path().join("snapshot"), dir.path().join("snapshot")).unwrap();
    let (mut log, recovered) = Log::open(dir.path(), options(256)).unwrap();
    assert_eq!(recovered.snapshot.unwrap().bytes, b"s90");
    assert!(recovered.records.is_empty());
    assert_eq!(log.last_index(), 90);
    assert_eq!(log.append_batch(&[b"y"]).unwrap(), 91..=91);
    let segments = segment_files(dir.path());
    assert_eq!(segments.len(), 1);
    assert_eq!(segment_first_index(&segments[0]), 91);
}

/// Writes `batches` of records and returns them plus the bytes of the last segment.
fn write_log(dir: &Path, batches: &[(usize, usize)]) -> (Records, PathBuf, Vec<u8>) {
    let (mut log, _) = Log::open(dir, options(1 << 20)).unwrap();
    let mut records = Vec::new();
    for &(count, bytes) in batches {
        records.extend(append(&mut log, count, bytes));
    }
    drop(log);
    let path = last_segment(dir);
    let bytes = fs::read(&path).unwrap();
    (records, path, bytes)
}

#[test]
fn torn_tail_at_every_offset_inside_the_last_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (records, path, full) = write_log(dir.path(), &[(3, 40), (1, 100)]);
    let frame_start = full.len() - frame_bytes(100);
    for cut in frame_start..full.len() {
        fs::write(&path, &full[..cut]).unwrap();
        let (mut log, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
        assert_eq!(recovered.records, records[..3].to_vec(), "cut at {cut}");
        assert_eq!(recovered.truncated_tail_bytes, (cut - frame_start) as u64);
        assert_eq!(fs::metadata(&path).unwrap().len(), frame_start as u64);
        // Appends continue right after the last valid record, and survive a reopen.
        assert_eq!(log.append_batch(&[b"again"]).unwrap(), 4..=4);
        drop(log);
        let (_, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
        assert_eq!(recovered.records.len(), 4);
        assert_eq!(recovered.records[3], (4, b"again".to_vec()));
        assert_eq!(recovered.truncated_tail_bytes, 0);
    }
}

#[test]
fn torn_tail_at_every_offset_inside_the_last_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (records, path, full) = write_log(dir.path(), &[(2, 30), (5, 20)]);
    let batch_start = 2 * frame_bytes(30);
    for cut in batch_start..full.len() {
        for zero_fill in [false, true] {
            // A crash can leave a prefix of the write, or (on some file systems) the file
            // extended with zeros that were never written.
            let mut torn = full[..cut].to_vec();
            if zero_fill {
                torn.resize(full.len(), 0);
            }
            fs::write(&path, &torn).unwrap();
            // Zero fill can complete a frame whose missing bytes happened to be zero (the high
            // bytes of a small index, say): such a frame is valid data and must be kept.
            let mut complete = 2;
            let mut valid_bytes = batch_start;
            while complete < records.len()
                && torn.get(valid_bytes..valid_bytes + frame_bytes(20))
                    == Some(&full[valid_bytes..valid_bytes + frame_bytes(20)])
            {
                complete += 1;
                valid_bytes += frame_bytes(20);
            }
            let (_, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
            assert_eq!(
                recovered.records,
                records[..complete].to_vec(),
                "cut {cut} zero {zero_fill}"
            );
            assert_eq!(recovered.truncated_tail_bytes, (torn.len() - valid_bytes) as u64);
        }
    }
}

fn expect_corrupt(result: Result<(Log, specie_log::Recovered), LogError>) -> (PathBuf, u64, Corruption) {
    match result {
        Err(LogError::Corrupt {
            path,
            offset,
            corruption,
        }) => (path, offset, corruption),
        Err(other) => panic!("expected corruption, got {other}"),
        Ok((_, recovered)) => panic!("expected corruption, recovered {} records", recovered.records.len()),
    }
}

#[test]
fn flipped_byte_in_a_middle_record_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path, full) = write_log(dir.path(), &[(3, 40), (3, 40)]);
    let middle_start = 2 * frame_bytes(40);
    for position in middle_start..middle_start + frame_bytes(40) {
        for flip in [0x01u8, 0x80] {
            let mut damaged = full.clone();
            damaged[position] ^= flip;
            fs::write(&path, &damaged).unwrap();
            let (error_path, offset, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
            assert_eq!(error_path, path);
            assert_eq!(offset, middle_start as u64, "flip at {position}");
            assert!(
                matches!(corruption, Corruption::FrameBeforeValidFrame { .. }),
                "flip at {position}: {corruption}"
            );
        }
    }
    // The damaged file is left alone for an operator to inspect.
    assert_eq!(fs::metadata(&path).unwrap().len(), full.len() as u64);
}

#[test]
fn damage_in_a_sealed_segment_is_corruption() {
    let (dir, segments) = six_sealed_segments();
    assert_eq!(segments.len(), 6);
    // Even damage at the very end of a sealed segment is not a torn tail.
    let bytes = fs::read(&segments[2]).unwrap();
    fs::write(&segments[2], &bytes[..bytes.len() - 1]).unwrap();
    let (path, offset, corruption) = expect_corrupt(Log::open(dir.path(), options(200)));
    assert_eq!(path, segments[2]);
    assert_eq!(offset, 0);
    assert!(matches!(
        corruption,
        Corruption::FrameInSealedSegment {
            defect: FrameDefect::PayloadShort { .. }
        }
    ));
}

#[test]
fn missing_segment_is_a_gap() {
    let (dir, segments) = six_sealed_segments();
    fs::remove_file(&segments[3]).unwrap();
    let (path, _, corruption) = expect_corrupt(Log::open(dir.path(), options(200)));
    assert_eq!(path, segments[4]);
    assert_eq!(corruption, Corruption::SegmentGap { expected: 4, found: 5 });

    // Losing the oldest segment without a snapshot covering it is a gap too.
    fs::remove_file(&segments[0]).unwrap();
    let (path, _, corruption) = expect_corrupt(Log::open(dir.path(), options(200)));
    assert_eq!(path, segments[1]);
    assert_eq!(corruption, Corruption::SegmentGap { expected: 1, found: 2 });
}

#[test]
fn garbage_length_in_a_middle_record_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path, full) = write_log(dir.path(), &[(4, 40)]);
    let middle_start = frame_bytes(40);
    for length in [u32::MAX, 0x7FFF_FFFF, 4097, 1000, 100] {
        let mut damaged = full.clone();
        damaged[middle_start..middle_start + 4].copy_from_slice(&length.to_le_bytes());
        fs::write(&path, &damaged).unwrap();
        let (_, offset, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
        assert_eq!(offset, middle_start as u64);
        let Corruption::FrameBeforeValidFrame { defect, .. } = corruption else {
            panic!("{corruption}");
        };
        match length {
            4097.. => assert!(matches!(defect, FrameDefect::LengthExceedsMax { .. }), "{defect}"),
            1000 => assert!(matches!(defect, FrameDefect::PayloadShort { .. }), "{defect}"),
            _ => assert!(matches!(defect, FrameDefect::ChecksumMismatch { .. }), "{defect}"),
        }
    }
    // At the tail, a garbage length is indistinguishable from a torn write.
    let last_start = 3 * frame_bytes(40);
    let mut damaged = full.clone();
    damaged[last_start..last_start + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    fs::write(&path, &damaged).unwrap();
    let (_, recovered) = Log::open(dir.path(), options(1 << 20)).unwrap();
    assert_eq!(recovered.records.len(), 3);
    assert_eq!(recovered.truncated_tail_bytes, frame_bytes(40) as u64);
}

#[test]
fn valid_frame_with_wrong_index_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path, full) = write_log(dir.path(), &[(3, 8)]);
    // Swap the second and third frames: every checksum still holds.
    let frame = frame_bytes(8);
    let mut swapped = full[..frame].to_vec();
    swapped.extend_from_slice(&full[2 * frame..]);
    swapped.extend_from_slice(&full[frame..2 * frame]);
    fs::write(&path, &swapped).unwrap();
    let (_, offset, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
    assert_eq!(offset, frame as u64);
    assert_eq!(corruption, Corruption::IndexUnexpected { expected: 2, found: 3 });
}

#[test]
fn bad_snapshot_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(1 << 20)).unwrap();
    append(&mut log, 3, 10);
    log.install_snapshot(2, b"snapshot payload").unwrap();
    drop(log);
    let path = dir.path().join("snapshot");
    let good = fs::read(&path).unwrap();
    for position in [12, 16, 23, good.len() - 1] {
        let mut damaged = good.clone();
        damaged[position] ^= 0x04;
        fs::write(&path, &damaged).unwrap();
        let (error_path, offset, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
        assert_eq!(error_path, path);
        assert_eq!(offset, 0);
        assert!(
            matches!(corruption, Corruption::SnapshotChecksum { .. }),
            "{corruption}"
        );
    }
    fs::write(&path, &good[..good.len() - 1]).unwrap();
    let (_, _, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
    assert!(matches!(corruption, Corruption::SnapshotLength { .. }));
    fs::write(&path, b"SPECSNAP").unwrap();
    let (_, _, corruption) = expect_corrupt(Log::open(dir.path(), options(1 << 20)));
    assert!(matches!(corruption, Corruption::SnapshotHeaderShort { bytes: 8 }));
    fs::write(&path, &good).unwrap();
    assert!(Log::open(dir.path(), options(1 << 20)).is_ok());
}

#[test]
fn invalid_batches_and_options_are_rejected_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(1 << 20)).unwrap();
    let empty: [&[u8]; 0] = [];
    assert!(matches!(log.append_batch(&empty), Err(LogError::BatchEmpty)));
    let many = vec![b"r".to_vec(); 257];
    assert!(matches!(
        log.append_batch(&many),
        Err(LogError::BatchTooLarge {
            records: 257,
            records_max: 256
        })
    ));
    let big = [vec![0u8; 10], vec![0u8; 4097]];
    assert!(matches!(
        log.append_batch(&big),
        Err(LogError::RecordTooLarge {
            position: 1,
            bytes: 4097,
            bytes_max: 4096
        })
    ));
    assert_eq!(log.last_index(), 0);
    assert_eq!(fs::metadata(last_segment(dir.path())).unwrap().len(), 0);
    // A rejected batch does not poison the log.
    assert_eq!(log.append_batch(&[vec![0u8; 4096]]).unwrap(), 1..=1);

    log.install_snapshot(1, b"s").unwrap();
    assert!(matches!(
        log.install_snapshot(0, b"older"),
        Err(LogError::SnapshotRegressed {
            last_index: 0,
            snapshot_last_index: 1
        })
    ));
    log.install_snapshot(1, b"same index, replaced").unwrap();

    for bad in [
        LogOptions {
            segment_bytes_max: 0,
            ..options(1)
        },
        LogOptions {
            batch_records_max: 0,
            ..options(1)
        },
        LogOptions {
            record_bytes_max: specie_log::RECORD_BYTES_LIMIT + 1,
            ..options(1)
        },
    ] {
        assert!(matches!(
            Log::open(dir.path(), bad),
            Err(LogError::OptionsInvalid { .. })
        ));
    }
}

#[test]
fn fsync_mode_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let sync = LogOptions {
        sync: SyncMode::Fsync,
        ..options(512)
    };
    let nested = dir.path().join("a/b");
    let (mut log, _) = Log::open(&nested, sync.clone()).unwrap();
    let mut records = Vec::new();
    for _ in 0..10 {
        records.extend(append(&mut log, 3, 50));
    }
    log.install_snapshot(7, b"seven").unwrap();
    drop(log);
    let (_, recovered) = Log::open(&nested, sync).unwrap();
    assert_eq!(recovered.records, records[7..].to_vec());
}

const CRASH_CHILD_DIR_ENV: &str = "SPECIE_LOG_CRASH_CHILD_DIR";
const ACK_PREFIX: &str = "acknowledged ";

fn crash_options() -> LogOptions {
    LogOptions {
        segment_bytes_max: 64 * 1024,
        record_bytes_max: 4096,
        batch_records_max: 128,
        sync: SyncMode::Fsync,
    }
}

/// The child half of `sigkill_mid_append_loses_no_acknowledged_record`: a no-op unless that
/// test re-executes this binary with the environment variable set.
#[test]
fn crash_child_appends_until_killed() {
    let Some(dir) = std::env::var_os(CRASH_CHILD_DIR_ENV) else {
        return;
    };
    let (mut log, _) = Log::open(Path::new(&dir), crash_options()).unwrap();
    let mut stdout = std::io::stdout().lock();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    loop {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let count = 1 + (seed % 128) as usize;
        let bytes = 20 + (seed >> 32) as usize % 300;
        let range = append(&mut log, count, bytes);
        // Printed only once append_batch returned, i.e. after the fsync.
        writeln!(stdout, "{ACK_PREFIX}{}", range.last().unwrap().0).unwrap();
        stdout.flush().unwrap();
    }
}

/// Indexes the crash child reported as durable.
#[derive(Default)]
struct Acks {
    index_last: u64,
    count: usize,
}

impl Acks {
    /// Reads one line; false at end of output.
    fn read_line(&mut self, stdout: &mut BufReader<ChildStdout>) -> bool {
        let mut line = String::new();
        let bytes = stdout.read_line(&mut line).unwrap();
        // A line cut off by the kill has no newline and was not fully printed: ignore it.
        if let Some(index) = line.strip_prefix(ACK_PREFIX).and_then(|rest| rest.strip_suffix('\n')) {
            let index: u64 = index.parse().unwrap();
            assert!(index > self.index_last);
            self.index_last = index;
            self.count += 1;
        }
        bytes > 0
    }
}

#[test]
fn sigkill_mid_append_loses_no_acknowledged_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            // The test's full name in this binary (this file is its `log` module).
            "log::crash_child_appends_until_killed",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_CHILD_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut acks = Acks::default();
    // Wait for the child to be appending, so the kill lands in the loop rather than at startup.
    let started = Instant::now();
    while acks.count < 3 {
        assert!(acks.read_line(&mut stdout), "child exited before appending");
        assert!(started.elapsed() < Duration::from_secs(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    while acks.read_line(&mut stdout) {}
    assert!(acks.count > 3);
    let acknowledged = acks.index_last;

    let (mut log, recovered) = Log::open(dir.path(), crash_options()).unwrap();
    assert!(
        log.last_index() >= acknowledged,
        "acknowledged {acknowledged}, recovered {}",
        log.last_index()
    );
    for (position, (index, bytes)) in recovered.records.iter().enumerate() {
        assert_eq!(*index, position as u64 + 1);
        assert_eq!(*bytes, payload(*index, bytes.len()));
    }
    // And the log is usable after the crash.
    let next = log.last_index() + 1;
    assert_eq!(log.append_batch(&[b"after"]).unwrap(), next..=next);
}

/// A log of six segments (small segments, one record each), closed.
fn six_sealed_segments() -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options(200)).unwrap();
    for _ in 0..6 {
        append(&mut log, 1, 150);
    }
    drop(log);
    let segments = segment_files(dir.path());
    (dir, segments)
}
