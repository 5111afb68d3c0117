//! Small file helpers shared by the log store and the state-machine store: checksummed records
//! replaced atomically (vote, purge point, snapshot). The directory lock is `specie_log::DirLock`.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::Path;

use specie_log::SyncMode;

/// Writes `magic ‖ crc32(body) ‖ u64 body length ‖ body` to `name.tmp`, syncs it, renames it over
/// `name` and syncs the directory: after a crash the file holds either the old or the new record.
pub(crate) fn write_record(dir: &Path, name: &str, magic: &[u8; 8], body: &[u8], sync: SyncMode) -> io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut bytes = Vec::with_capacity(20 + body.len());
    bytes.extend_from_slice(magic);
    bytes.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(body);
    let mut file = File::create(&tmp)?;
    file.write_all(&bytes)?;
    sync.sync_all(&file)?;
    drop(file);
    fs::rename(&tmp, dir.join(name))?;
    sync.sync_dir(dir)
}

/// Reads a record written by [`write_record`]; `Ok(None)` if there is none. A record that is
/// present but damaged is an error: renames are atomic, so damage is corruption, not a torn write.
pub(crate) fn read_record(dir: &Path, name: &str, magic: &[u8; 8]) -> io::Result<Option<Vec<u8>>> {
    // A leftover temporary is a write that never got renamed: it was never in force.
    match fs::remove_file(dir.join(format!("{name}.tmp"))) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let bytes = match fs::read(dir.join(name)) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    let corrupt = |reason: &str| io::Error::new(io::ErrorKind::InvalidData, format!("{name}: {reason}"));
    if bytes.len() < 20 || &bytes[..8] != magic {
        return Err(corrupt("bad magic or short header"));
    }
    let crc = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let body = &bytes[20..];
    if len != body.len() as u64 {
        return Err(corrupt("length mismatch"));
    }
    if crc32fast::hash(body) != crc {
        return Err(corrupt("checksum mismatch"));
    }
    Ok(Some(body.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_record(dir.path(), "r", b"TESTMAGC").unwrap(), None);
        write_record(dir.path(), "r", b"TESTMAGC", b"hello", SyncMode::Fsync).unwrap();
        assert_eq!(
            read_record(dir.path(), "r", b"TESTMAGC").unwrap().as_deref(),
            Some(&b"hello"[..])
        );
        let path = dir.path().join("r");
        let mut bytes = fs::read(&path).unwrap();
        *bytes.last_mut().unwrap() ^= 1;
        fs::write(&path, bytes).unwrap();
        assert!(read_record(dir.path(), "r", b"TESTMAGC").is_err());
    }
}
