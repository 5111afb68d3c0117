//! How group commit pays off: appends/s and fsyncs/s for batches of 1, 64 and 2048 records of
//! 100 bytes each, fsyncing every batch.
//!
//! ```text
//! cargo run --release -p specie-log --example fsync_rate -- [directory] [seconds per size]
//! ```
//!
//! Point `directory` at the disk you care about: the default temp directory may be tmpfs,
//! where fsync costs nothing.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use specie_log::{Log, LogOptions, SyncMode};

const RECORD_BYTES: usize = 100;
const BATCH_SIZES: [usize; 3] = [1, 64, 2048];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let base = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let duration = Duration::from_secs_f64(args.next().map_or(Ok(2.0), |arg| arg.parse())?);
    println!("directory {}, {duration:?} per batch size", base.display());

    let record = [0xA5u8; RECORD_BYTES];
    for batch_records in BATCH_SIZES {
        let dir = tempfile::tempdir_in(&base)?;
        let options = LogOptions {
            batch_records_max: batch_records,
            sync: SyncMode::Fsync,
            ..LogOptions::default()
        };
        let (mut log, _) = Log::open(dir.path(), options)?;
        let batch = vec![record; batch_records];
        let mut fsyncs: u64 = 0;
        let start = Instant::now();
        while start.elapsed() < duration {
            log.append_batch(&batch)?;
            fsyncs += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        let appends = fsyncs * batch_records as u64;
        println!(
            "batch {batch_records:>5} x {RECORD_BYTES} B: {:>12.0} appends/s {:>9.0} fsyncs/s",
            appends as f64 / seconds,
            fsyncs as f64 / seconds,
        );
    }
    Ok(())
}
