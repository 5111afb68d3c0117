//! An exclusive lock on one file (`flock`, 0600, released when the process ends, however it
//! ends) that a command waits for, up to a bound, while another command holds it: the lock of a
//! wallet file and of a registration authority's directory. A server's data directory has
//! [`crate::DirLock`] instead, which refuses a second process at once and names it.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How often a waiting command tries again.
const RETRY_MS: u64 = 20;

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum WaitLockError {
    #[error("cannot open the lock file {}: {source}", path.display())]
    Open { path: PathBuf, source: std::io::Error },
    #[error("cannot lock {}: {source}", path.display())]
    Lock { path: PathBuf, source: std::io::Error },
    /// Another command still held it after `waited_ms`.
    #[error("{} is still locked by another command after {waited_ms} ms", path.display())]
    Busy { path: PathBuf, waited_ms: u64 },
}

/// The lock on `path` (created if missing), waiting up to `wait_ms` for another holder to let
/// go; `on_wait` runs once if it has to wait (to tell the user why nothing happens). The lock
/// lasts as long as the returned file is open.
pub fn wait_lock(path: &Path, wait_ms: u64, on_wait: impl FnOnce()) -> Result<File, WaitLockError> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(|source| WaitLockError::Open {
            path: path.to_path_buf(),
            source,
        })?;
    let started = Instant::now();
    let mut on_wait = Some(on_wait);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(source)) => {
                return Err(WaitLockError::Lock {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        let waited_ms = started.elapsed().as_millis() as u64;
        if waited_ms >= wait_ms {
            return Err(WaitLockError::Busy {
                path: path.to_path_buf(),
                waited_ms,
            });
        }
        if let Some(on_wait) = on_wait.take() {
            on_wait();
        }
        std::thread::sleep(Duration::from_millis(RETRY_MS.min(wait_ms - waited_ms)));
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_second_holder_waits_says_so_once_then_gives_up_and_gets_in_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let first = wait_lock(&path, 0, || panic!("nothing holds it")).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let mut told = 0;
        match wait_lock(&path, 60, || told += 1) {
            Err(WaitLockError::Busy { waited_ms, .. }) => assert!(waited_ms >= 60),
            other => panic!("expected Busy, got {other:?}"),
        }
        assert_eq!(told, 1);
        drop(first);
        assert!(wait_lock(&path, 0, || panic!("released")).is_ok());
        let missing = dir.path().join("no-such-dir").join("lock");
        assert!(matches!(wait_lock(&missing, 0, || ()), Err(WaitLockError::Open { .. })));
    }
}
