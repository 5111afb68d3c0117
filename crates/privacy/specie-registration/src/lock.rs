//! The directory's exclusive lock: `flock` on `DIR/lock`, released when the process ends, however
//! it ends. A command that finds it held waits (up to a bound) for the other one to finish.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::{RegistrationError, LOCK};

/// How often a waiting command tries again.
const RETRY: Duration = Duration::from_millis(20);

/// The lock on `dir`, waiting up to `wait` for another command to finish; `on_wait` runs once if
/// it has to wait (to tell the operator why nothing happens).
pub(crate) fn lock(dir: &Path, wait: Duration, on_wait: impl FnOnce()) -> Result<File, RegistrationError> {
    let path = dir.join(LOCK);
    let mut options = OpenOptions::new();
    options.create(true).truncate(false).write(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(&path).map_err(|source| RegistrationError::OpenLock {
        path: path.clone(),
        source,
    })?;
    let started = Instant::now();
    let mut on_wait = Some(on_wait);
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) if started.elapsed() < wait => {
                if let Some(on_wait) = on_wait.take() {
                    on_wait();
                }
                std::thread::sleep(RETRY);
            }
            Err(TryLockError::WouldBlock) => {
                return Err(RegistrationError::Busy {
                    path,
                    waited_s: wait.as_secs(),
                })
            }
            Err(TryLockError::Error(source)) => return Err(RegistrationError::Lock { path, source }),
        }
    }
}
