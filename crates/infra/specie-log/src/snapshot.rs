//! The snapshot file: `magic ‖ u32 version ‖ u32 crc32 ‖ u64 last_index ‖ u64 length ‖ payload`.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use crate::error::{io_error, Corruption, LogError};
use crate::{sync_dir, Snapshot};

pub(crate) const SNAPSHOT_FILE: &str = "snapshot";
pub(crate) const SNAPSHOT_TMP_FILE: &str = "snapshot.tmp";

const MAGIC: [u8; 8] = *b"SPECSNAP";
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 32;

fn checksum(covered_header: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(covered_header);
    hasher.update(payload);
    hasher.finalize()
}

fn encode_header(last_index: u64, payload: &[u8]) -> [u8; HEADER_BYTES] {
    let mut header = [0u8; HEADER_BYTES];
    header[0..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header[16..24].copy_from_slice(&last_index.to_le_bytes());
    header[24..32].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    let crc = checksum(&header[16..], payload);
    header[12..16].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Decodes a whole snapshot file. The caller read exactly the file's bytes, so the only
/// allocation is bounded by what is on disk, never by the length field.
fn decode(path: &Path, mut bytes: Vec<u8>) -> Result<Snapshot, LogError> {
    let corrupt = |corruption| LogError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        corruption,
    };
    if bytes.len() < HEADER_BYTES {
        return Err(corrupt(Corruption::SnapshotHeaderShort {
            bytes: bytes.len() as u64,
        }));
    }
    let field_u32 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let field_u64 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    if bytes[0..8] != MAGIC {
        return Err(corrupt(Corruption::SnapshotMagic));
    }
    let version = field_u32(8);
    if version != VERSION {
        return Err(LogError::SnapshotVersionUnsupported {
            path: path.to_path_buf(),
            version,
        });
    }
    let stored = field_u32(12);
    let last_index = field_u64(16);
    let length = field_u64(24);
    let bytes_remaining = (bytes.len() - HEADER_BYTES) as u64;
    if length != bytes_remaining {
        return Err(corrupt(Corruption::SnapshotLength {
            length,
            bytes_remaining,
        }));
    }
    let computed = checksum(&bytes[16..HEADER_BYTES], &bytes[HEADER_BYTES..]);
    if computed != stored {
        return Err(corrupt(Corruption::SnapshotChecksum { stored, computed }));
    }
    bytes.drain(..HEADER_BYTES);
    Ok(Snapshot { last_index, bytes })
}

/// Reads `dir/snapshot`, or `None` if there is none yet.
pub(crate) fn read(dir: &Path) -> Result<Option<Snapshot>, LogError> {
    let path = dir.join(SNAPSHOT_FILE);
    match fs::read(&path) {
        Ok(bytes) => decode(&path, bytes).map(Some),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io_error(&path)(error)),
    }
}

/// Atomically replaces `dir/snapshot`: write a temporary file, make it durable, rename it over
/// the old one, then make the rename durable. A crash at any point leaves either the old or the
/// new snapshot in place, never a mix.
pub(crate) fn write(dir: &Path, last_index: u64, payload: &[u8], fsync: bool) -> Result<(), LogError> {
    let path_tmp = dir.join(SNAPSHOT_TMP_FILE);
    let path = dir.join(SNAPSHOT_FILE);
    let header = encode_header(last_index, payload);
    let mut file = File::create(&path_tmp).map_err(io_error(&path_tmp))?;
    file.write_all(&header).map_err(io_error(&path_tmp))?;
    file.write_all(payload).map_err(io_error(&path_tmp))?;
    if fsync {
        // sync_all, not sync_data: the file is new, so its size and metadata must be durable too.
        file.sync_all().map_err(io_error(&path_tmp))?;
    }
    drop(file);
    fs::rename(&path_tmp, &path).map_err(io_error(&path))?;
    if fsync {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Deletes a `snapshot.tmp` left by a crash mid-write; it was never renamed, so never installed.
pub(crate) fn remove_tmp(dir: &Path) -> Result<(), LogError> {
    let path_tmp = dir.join(SNAPSHOT_TMP_FILE);
    match fs::remove_file(&path_tmp) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(io_error(&path_tmp)(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(last_index: u64, payload: &[u8]) -> Vec<u8> {
        let mut bytes = encode_header(last_index, payload).to_vec();
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn round_trip() {
        let path = Path::new("snapshot");
        let snapshot = decode(path, encode(42, b"state")).unwrap();
        assert_eq!(
            snapshot,
            Snapshot {
                last_index: 42,
                bytes: b"state".to_vec()
            }
        );
        let empty = decode(path, encode(0, b"")).unwrap();
        assert_eq!(
            empty,
            Snapshot {
                last_index: 0,
                bytes: Vec::new()
            }
        );
    }

    #[test]
    fn every_flipped_byte_is_rejected() {
        let path = Path::new("snapshot");
        let good = encode(42, b"state");
        for position in 0..good.len() {
            let mut bad = good.clone();
            bad[position] ^= 0x01;
            assert!(decode(path, bad).is_err(), "flip at {position} accepted");
        }
    }

    #[test]
    fn short_and_long_files_are_rejected() {
        let path = Path::new("snapshot");
        let good = encode(42, b"state");
        for length in 0..good.len() {
            assert!(matches!(
                decode(path, good[..length].to_vec()),
                Err(LogError::Corrupt { .. })
            ));
        }
        let mut long = good.clone();
        long.push(0);
        assert!(matches!(
            decode(path, long),
            Err(LogError::Corrupt {
                corruption: Corruption::SnapshotLength { .. },
                ..
            })
        ));
    }
}
