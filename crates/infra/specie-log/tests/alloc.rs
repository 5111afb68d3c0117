//! Recovery never allocates a length read from disk. A global allocator records the largest
//! single request; this binary holds one test so nothing else allocates alongside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::sync::atomic::{AtomicUsize, Ordering};

use specie_log::{Corruption, FrameDefect, Log, LogError, LogOptions, SyncMode};

struct LargestAllocation;

static LARGEST_BYTES: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call unchanged to the system allocator; only observes sizes.
unsafe impl GlobalAlloc for LargestAllocation {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST_BYTES.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LARGEST_BYTES.fetch_max(layout.size(), Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(pointer, layout) }
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST_BYTES.fetch_max(new_size, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(pointer, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

#[test]
fn garbage_lengths_allocate_nothing_near_their_size() {
    let options = LogOptions {
        segment_bytes_max: 1 << 20,
        // As large as allowed, so that only the bytes-remaining check stands between a garbage
        // length and a gigabyte allocation.
        record_bytes_max: specie_log::RECORD_BYTES_LIMIT,
        batch_records_max: 16,
        sync: SyncMode::None,
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = Log::open(dir.path(), options.clone()).unwrap();
    for _ in 0..4 {
        log.append_batch(&[[7u8; 100]]).unwrap();
    }
    drop(log);
    let path = dir.path().join("log-00000000000000000001.seg");
    let full = fs::read(&path).unwrap();
    let frame_bytes = 116;

    for (frame, length, tail) in [
        (1, u32::MAX, false),
        (1, specie_log::RECORD_BYTES_LIMIT, false),
        (3, u32::MAX, true),
        (3, specie_log::RECORD_BYTES_LIMIT, true),
    ] {
        let mut damaged = full.clone();
        let start = frame * frame_bytes;
        damaged[start..start + 4].copy_from_slice(&length.to_le_bytes());
        fs::write(&path, &damaged).unwrap();

        LARGEST_BYTES.store(0, Ordering::Relaxed);
        let result = Log::open(dir.path(), options.clone());
        let largest = LARGEST_BYTES.load(Ordering::Relaxed);
        assert!(largest < 64 * 1024, "largest allocation {largest} bytes");

        match (result, tail) {
            (Err(LogError::Corrupt { offset, corruption, .. }), false) => {
                assert_eq!(offset, start as u64);
                assert!(matches!(
                    corruption,
                    Corruption::FrameBeforeValidFrame {
                        defect: FrameDefect::LengthExceedsMax { .. } | FrameDefect::PayloadShort { .. },
                        ..
                    }
                ));
            }
            (Ok((_, recovered)), true) => {
                assert_eq!(recovered.records.len(), 3);
                assert_eq!(recovered.truncated_tail_bytes, frame_bytes as u64);
                // Recovery truncated the torn tail; put the full file back for the next case.
                fs::write(&path, &full).unwrap();
            }
            (other, _) => panic!("frame {frame} length {length:#x}: {other:?}"),
        }
    }
}
