//! The directory's exclusive lock: `flock` on `DIR/lock` ([`specie_log::wait_lock`]), released
//! when the process ends, however it ends. A command that finds it held waits (up to a bound)
//! for the other one to finish.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use specie_log::WaitLockError;

use crate::{RegistrationError, LOCK};

/// The lock on `dir`, waiting up to `wait` for another command to finish; `on_wait` runs once if
/// it has to wait (to tell the operator why nothing happens).
pub(crate) fn lock(dir: &Path, wait: Duration, on_wait: impl FnOnce()) -> Result<File, RegistrationError> {
    let wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    specie_log::wait_lock(&dir.join(LOCK), wait_ms, on_wait).map_err(|error| match error {
        WaitLockError::Open { path, source } => RegistrationError::OpenLock { path, source },
        WaitLockError::Lock { path, source } => RegistrationError::Lock { path, source },
        WaitLockError::Busy { path, .. } => RegistrationError::Busy {
            path,
            waited_s: wait.as_secs(),
        },
    })
}
