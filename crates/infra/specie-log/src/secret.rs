//! Files only their owner may read (0600): secrets, and documents that hold them. The one home of
//! such files: a 32-byte secret kept as hex beside a server's data (read it, or create it on first
//! use), a new key file written once, and a document replaced atomically (a wallet, a registration
//! authority's state). Everything is synced, the directory entry too, before it is used.

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// Why a secret file could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum SecretFileError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not 64 hexadecimal digits (a 32-byte secret); remove it only if nothing was issued with it")]
    Bad { path: PathBuf },
    #[error("{path} exists already; choose another path, or move that file away if it is no longer needed")]
    Exists { path: PathBuf },
}

fn io_error(path: &Path) -> impl Fn(std::io::Error) -> SecretFileError + '_ {
    move |source| SecretFileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The directory `path` is in (`.` for a bare file name).
fn directory_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Makes the directory entry of a file just created or renamed in `directory` durable.
fn sync_directory(directory: &Path) -> Result<(), SecretFileError> {
    std::fs::File::open(directory)
        .and_then(|dir| dir.sync_all())
        .map_err(io_error(directory))
}

/// Creates `path` (which must not exist) with `bytes`, readable only by its owner, and syncs it
/// and its directory entry.
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<(), SecretFileError> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| match source.kind() {
            std::io::ErrorKind::AlreadyExists => SecretFileError::Exists { path: path.into() },
            _ => io_error(path)(source),
        })?;
    file.write_all(bytes).map_err(io_error(path))?;
    file.sync_all().map_err(io_error(path))?;
    sync_directory(&directory_of(path))
}

/// Writes `bytes` to `path` (0600) so that a crash leaves either the old file or the new one,
/// whole: a temporary file beside it, synced, renamed over it (or, unless `replace`, only where
/// no file is: else [`SecretFileError::Exists`]), and the directory synced.
pub fn write_atomically(path: &Path, bytes: &[u8], replace: bool) -> Result<(), SecretFileError> {
    let directory = directory_of(path);
    // Same directory, so the rename cannot cross file systems and is atomic.
    let mut temp = tempfile::Builder::new()
        .prefix(".specie-")
        .suffix(".tmp")
        .permissions(std::fs::Permissions::from_mode(0o600))
        .tempfile_in(&directory)
        .map_err(io_error(&directory))?;
    temp.write_all(bytes).map_err(io_error(temp.path()))?;
    temp.as_file().sync_all().map_err(io_error(path))?;
    let persisted = match replace {
        true => temp.persist(path),
        false => temp.persist_noclobber(path),
    };
    persisted.map_err(|error| match error.error.kind() {
        std::io::ErrorKind::AlreadyExists if !replace => SecretFileError::Exists { path: path.into() },
        _ => io_error(path)(error.error),
    })?;
    sync_directory(&directory)
}

/// The secret in `path`, made (from the operating system's random source) if the file is missing.
pub fn read_or_create(path: &Path) -> Result<[u8; 32], SecretFileError> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let bad = || SecretFileError::Bad { path: path.into() };
            let bytes = hex::decode(text.trim()).map_err(|_| bad())?;
            bytes.try_into().map_err(|_| bad())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut secret = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
            write_new(path, hex::encode(secret).as_bytes())?;
            Ok(secret)
        }
        Err(error) => Err(io_error(path)(error)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_secret_is_made_once_for_its_owner_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed");
        let made = read_or_create(&path).unwrap();
        assert_eq!(read_or_create(&path).unwrap(), made);
        assert_eq!(mode(&path), 0o600);
        std::fs::write(&path, "not hex").unwrap();
        assert!(matches!(read_or_create(&path), Err(SecretFileError::Bad { .. })));
    }

    #[test]
    fn a_new_file_never_overwrites_and_is_its_owners_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key");
        write_new(&path, b"first").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(
            write_new(&path, b"second"),
            Err(SecretFileError::Exists { .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let missing_dir = dir.path().join("no-such-dir").join("key");
        assert!(matches!(write_new(&missing_dir, b"x"), Err(SecretFileError::Io { .. })));
    }

    #[test]
    fn an_atomic_write_replaces_whole_or_refuses_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomically(&path, b"one", false).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(
            write_atomically(&path, b"two", false),
            Err(SecretFileError::Exists { .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        write_atomically(&path, b"three", true).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"three");
        assert_eq!(mode(&path), 0o600);
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["state.json"], "no temporary file is left behind");
    }
}
