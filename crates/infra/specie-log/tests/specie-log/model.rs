//! Random sequences of appends, snapshots, reopens and torn appends against a model: a snapshot
//! plus the vector of acknowledged records after it.

use std::fs;
use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;
use specie_log::{Log, LogOptions, Recovered, Snapshot, SyncMode};

const FRAME_HEADER_BYTES: usize = 16;

fn options() -> LogOptions {
    LogOptions {
        // Small segments so most sequences roll and delete segments.
        segment_bytes_max: 256,
        record_bytes_max: 48,
        batch_records_max: 8,
        sync: SyncMode::None,
    }
}

#[derive(Debug, Clone)]
enum Op {
    Append(Vec<Vec<u8>>),
    /// Snapshot at an index chosen by `selector` between the current snapshot and a little past
    /// the end of the log.
    Snapshot {
        selector: u64,
        bytes: Vec<u8>,
    },
    Reopen,
    /// Append, then crash mid-write: cut the batch's bytes at a point chosen by `selector`, and
    /// maybe zero-fill the rest as a file system that extended the file but lost the data would.
    TornAppend {
        records: Vec<Vec<u8>>,
        selector: u64,
        zero_fill: bool,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let records = vec(vec(any::<u8>(), 0..48), 1..=8);
    prop_oneof![
        5 => records.clone().prop_map(Op::Append),
        1 => (any::<u64>(), vec(any::<u8>(), 0..16))
            .prop_map(|(selector, bytes)| Op::Snapshot { selector, bytes }),
        1 => Just(Op::Reopen),
        1 => (records, any::<u64>(), any::<bool>())
            .prop_map(|(records, selector, zero_fill)| Op::TornAppend { records, selector, zero_fill }),
    ]
}

#[derive(Default)]
struct Model {
    snapshot: Option<Snapshot>,
    /// Acknowledged records after the snapshot.
    records: Vec<(u64, Vec<u8>)>,
    last_index: u64,
}

impl Model {
    fn append(&mut self, records: &[Vec<u8>]) {
        for record in records {
            self.last_index += 1;
            self.records.push((self.last_index, record.clone()));
        }
    }

    fn check(&self, recovered: &Recovered) {
        assert_eq!(recovered.snapshot, self.snapshot);
        assert_eq!(recovered.records, self.records);
    }
}

fn last_segment(dir: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "seg"))
        .collect();
    segments.sort();
    segments.pop().unwrap()
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::default();
    let (mut log, recovered) = Log::open(dir.path(), options()).unwrap();
    model.check(&recovered);
    for op in ops {
        match op {
            Op::Append(records) => {
                let range = log.append_batch(&records).unwrap();
                assert_eq!(*range.start(), model.last_index + 1);
                model.append(&records);
                assert_eq!(*range.end(), model.last_index);
            }
            Op::Snapshot { selector, bytes } => {
                let floor = model.snapshot.as_ref().map_or(0, |snapshot| snapshot.last_index);
                let last_index = floor + selector % (model.last_index - floor + 3);
                log.install_snapshot(last_index, &bytes).unwrap();
                model.snapshot = Some(Snapshot { last_index, bytes });
                model.records.retain(|&(index, _)| index > last_index);
                model.last_index = model.last_index.max(last_index);
            }
            Op::Reopen => {
                drop(log);
                let (reopened, recovered) = Log::open(dir.path(), options()).unwrap();
                model.check(&recovered);
                assert_eq!(recovered.truncated_tail_bytes, 0);
                let bytes: usize = model
                    .records
                    .iter()
                    .map(|(_, payload)| FRAME_HEADER_BYTES + payload.len())
                    .sum();
                assert_eq!(reopened.bytes_since_snapshot(), bytes as u64);
                log = reopened;
            }
            Op::TornAppend {
                records,
                selector,
                zero_fill,
            } => {
                log.append_batch(&records).unwrap();
                drop(log);
                // The batch is always the tail of the newest segment.
                let path = last_segment(dir.path());
                let full = fs::read(&path).unwrap();
                let frames: Vec<usize> = records.iter().map(|record| FRAME_HEADER_BYTES + record.len()).collect();
                let batch_bytes: usize = frames.iter().sum();
                let batch_start = full.len() - batch_bytes;
                let cut = batch_start + (selector % batch_bytes as u64) as usize;
                let mut torn = full[..cut].to_vec();
                if zero_fill {
                    torn.resize(full.len(), 0);
                }
                fs::write(&path, &torn).unwrap();

                // Frames that survived intact are valid data; the first damaged one ends the log.
                let mut valid_end = batch_start;
                let mut kept = 0;
                for frame in &frames {
                    if torn.get(valid_end..valid_end + frame) != Some(&full[valid_end..valid_end + frame]) {
                        break;
                    }
                    valid_end += frame;
                    kept += 1;
                }
                model.append(&records[..kept]);

                let (reopened, recovered) = Log::open(dir.path(), options()).unwrap();
                model.check(&recovered);
                assert_eq!(recovered.truncated_tail_bytes, (torn.len() - valid_end) as u64);
                log = reopened;
            }
        }
        assert_eq!(log.last_index(), model.last_index);
        let snapshot_last_index = model.snapshot.as_ref().map_or(0, |snapshot| snapshot.last_index);
        assert_eq!(log.snapshot_last_index(), snapshot_last_index);
    }
    drop(log);
    let (_, recovered) = Log::open(dir.path(), options()).unwrap();
    model.check(&recovered);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn recovered_state_equals_model(ops in vec(op(), 1..40)) {
        run(ops);
    }
}
