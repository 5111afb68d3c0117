//! One process per data directory: an exclusive lock on `<dir>/LOCK` (`flock` through
//! `File::try_lock`), held for as long as a server owns the directory. Two processes writing one
//! directory would corrupt it; the second is refused with a sentence naming the first.
//!
//! Once the lock is held, `LOCK` holds the holder's identity (`<pid> <command line>`, one line),
//! so that a refused process can say who holds the directory. The kernel releases the lock when
//! the holder exits, however it exits (`kill -9` too); the identity left behind is read only
//! while someone holds the lock again, and every holder rewrites it first.
//!
//! `flock` belongs to an open file description, so two acquires in one process conflict as well:
//! an instance reopened in the same process waits (up to `wait_ms`) for the old one to let go.
//! A directory whose `LOCK` names another process is refused at once, without waiting.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The lock file's name in the directory it locks.
pub const LOCK_FILE: &str = "LOCK";

/// How long a server waits for its directory: long enough for an instance stopped in this same
/// process to let go (its threads finishing), short enough that a second process fails promptly.
pub const RESTART_WAIT_MS: u64 = 2_000;

/// The most bytes of the holder's identity written to, and read from, `LOCK`. The file is
/// anyone's to write, so reading it is bounded.
pub const HOLDER_BYTES_MAX: usize = 400;

/// How often a waiting acquire tries again.
const RETRY_MS: u64 = 5;

/// How long a refused acquire waits for a holder that has the lock but has not written its
/// identity yet (it writes right after locking).
const HOLDER_WRITE_WAIT_MS: u64 = 200;

/// Why a directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum DirLockError {
    /// Another process (or another instance in this one) holds the directory.
    #[error(
        "{} is in use by {holder}: stop that process first, or give this one another data directory",
        dir.display()
    )]
    InUse {
        dir: PathBuf,
        /// Who holds it, as its `LOCK` file says: `process 12345 (specie node …)`, or `another
        /// process` if the file names no one.
        holder: String,
    },
    #[error("cannot create the directory {}: {source}", dir.display())]
    CreateDir {
        dir: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot open the lock file {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot lock {}: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write this process's identity to {}: {source}", path.display())]
    WriteHolder {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// An exclusive lock on a directory, released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DirLock {
    dir: PathBuf,
    _file: File,
}

impl DirLock {
    /// Creates `dir` if missing and locks it, retrying for up to `wait_ms` while someone else
    /// holds it; then writes this process's identity into `dir/LOCK`.
    pub fn acquire(dir: &Path, wait_ms: u64) -> Result<DirLock, DirLockError> {
        fs::create_dir_all(dir).map_err(|source| DirLockError::CreateDir {
            dir: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join(LOCK_FILE);
        let mut options = OpenOptions::new();
        options.create(true).truncate(false).read(true).write(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&path).map_err(|source| DirLockError::Open {
            path: path.clone(),
            source,
        })?;
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        loop {
            match file.try_lock() {
                Ok(()) => break,
                // Only an instance of this process is worth waiting for (it is letting go); a
                // holder that names another process is refused at once.
                Err(TryLockError::WouldBlock) if Instant::now() < deadline && !held_elsewhere(&mut file) => {
                    std::thread::sleep(Duration::from_millis(RETRY_MS));
                }
                Err(TryLockError::WouldBlock) => {
                    return Err(DirLockError::InUse {
                        dir: dir.to_path_buf(),
                        holder: read_holder(&mut file),
                    })
                }
                Err(TryLockError::Error(source)) => return Err(DirLockError::Lock { path, source }),
            }
        }
        write_holder(&mut file).map_err(|source| DirLockError::WriteHolder { path, source })?;
        Ok(DirLock {
            dir: dir.to_path_buf(),
            _file: file,
        })
    }

    /// The directory locked.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// This process's identity as `LOCK` keeps it: `<pid> <command line>`, on one line, at most
/// [`HOLDER_BYTES_MAX`] bytes.
fn holder_identity() -> String {
    let command = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let mut identity = printable(&format!("{} {command}", std::process::id()));
    truncate_at_char(&mut identity, HOLDER_BYTES_MAX);
    identity.push('\n');
    identity
}

fn write_holder(file: &mut File) -> io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(holder_identity().as_bytes())
}

/// Who holds the lock, as `LOCK` says (read bounded, shown lossily, control characters
/// replaced). A holder that locked but has not written yet is given a moment to.
fn read_holder(file: &mut File) -> String {
    let deadline = Instant::now() + Duration::from_millis(HOLDER_WRITE_WAIT_MS);
    loop {
        let text = read_bounded(file).unwrap_or_default();
        if !text.trim().is_empty() || Instant::now() >= deadline {
            return describe_holder(&text);
        }
        std::thread::sleep(Duration::from_millis(RETRY_MS));
    }
}

/// Whether `LOCK` names a process other than this one as its holder.
fn held_elsewhere(file: &mut File) -> bool {
    let text = read_bounded(file).unwrap_or_default();
    let pid = text.split_whitespace().next().and_then(|pid| pid.parse::<u32>().ok());
    pid.is_some_and(|pid| pid != std::process::id())
}

fn read_bounded(file: &mut File) -> io::Result<String> {
    file.rewind()?;
    let mut bytes = Vec::with_capacity(HOLDER_BYTES_MAX);
    file.take(HOLDER_BYTES_MAX as u64).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// `process 12345 (specie node …)` from `12345 specie node …`; `another process` from nothing.
fn describe_holder(text: &str) -> String {
    let line = printable(text.lines().next().unwrap_or_default());
    let line = line.trim();
    let (first, rest) = line.split_once(' ').unwrap_or((line, ""));
    match (first.parse::<u32>(), rest.trim()) {
        (Ok(pid), "") => format!("process {pid}"),
        (Ok(pid), command) => format!("process {pid} ({command})"),
        (Err(_), _) if line.is_empty() => "another process".to_string(),
        (Err(_), _) => format!("another process (its lock file says \"{line}\")"),
    }
}

/// `text` with every control character (a newline, a terminal escape) replaced by `?`.
fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

fn truncate_at_char(text: &mut String, bytes_max: usize) {
    if text.len() > bytes_max {
        let mut end = bytes_max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_acquire_is_refused_with_a_sentence_naming_this_process() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let lock = DirLock::acquire(&data, 0).unwrap();
        assert_eq!(lock.dir(), data);
        let written = fs::read_to_string(data.join(LOCK_FILE)).unwrap();
        assert!(written.starts_with(&format!("{} ", std::process::id())), "{written}");
        let error = DirLock::acquire(&data, 0).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, DirLockError::InUse { .. }), "{message}");
        let expected = format!("{} is in use by process {} (", data.display(), std::process::id());
        assert!(message.starts_with(&expected), "{message}");
        assert!(
            message.ends_with("): stop that process first, or give this one another data directory"),
            "{message}"
        );
        // The refused acquire leaves the holder's identity alone.
        assert_eq!(fs::read_to_string(data.join(LOCK_FILE)).unwrap(), written);
    }

    #[test]
    fn the_lock_is_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path(), 0).unwrap();
        drop(lock);
        let again = DirLock::acquire(dir.path(), 0).unwrap();
        drop(again);
    }

    #[test]
    fn wait_ms_is_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let lock = DirLock::acquire(dir.path(), 0).unwrap();
        let started = Instant::now();
        assert!(DirLock::acquire(dir.path(), 150).is_err());
        assert!(started.elapsed() >= Duration::from_millis(150));
        // A holder that lets go within the wait lets the waiter in.
        let path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || DirLock::acquire(&path, 10_000).map(|_| ()));
        std::thread::sleep(Duration::from_millis(50));
        drop(lock);
        waiter.join().unwrap().unwrap();
    }

    /// Another process's lock is not waited for: the refusal comes at once, naming it.
    #[test]
    fn a_lock_held_by_another_process_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let _lock = DirLock::acquire(dir.path(), 0).unwrap();
        // What a holder in another process would have written (the flock is this process's).
        fs::write(dir.path().join(LOCK_FILE), "4194304 specie node --data-dir elsewhere\n").unwrap();
        let started = Instant::now();
        let error = DirLock::acquire(dir.path(), 60_000).unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "waited {:?}",
            started.elapsed()
        );
        assert!(
            error.contains("process 4194304 (specie node --data-dir elsewhere)"),
            "{error}"
        );
    }

    #[test]
    fn a_hostile_or_empty_lock_file_is_shown_safely() {
        assert_eq!(describe_holder(""), "another process");
        assert_eq!(describe_holder("  \n"), "another process");
        assert_eq!(describe_holder("42\n"), "process 42");
        assert_eq!(describe_holder("42 specie node\nmore"), "process 42 (specie node)");
        assert_eq!(
            describe_holder("\u{1b}[31mred"),
            "another process (its lock file says \"?[31mred\")"
        );

        let dir = tempfile::tempdir().unwrap();
        let _lock = DirLock::acquire(dir.path(), 0).unwrap();
        let mut hostile = vec![0xff; 10];
        hostile.extend_from_slice(&[b'x'; 100_000]);
        fs::write(dir.path().join(LOCK_FILE), hostile).unwrap();
        let message = DirLock::acquire(dir.path(), 0).unwrap_err().to_string();
        assert!(
            message.contains("another process (its lock file says \"\u{fffd}"),
            "{message}"
        );
        assert!(message.len() < HOLDER_BYTES_MAX * 3 + 200, "{} bytes", message.len());
    }

    #[test]
    fn the_identity_is_capped_on_a_char_boundary() {
        let mut text = "é".repeat(HOLDER_BYTES_MAX);
        truncate_at_char(&mut text, HOLDER_BYTES_MAX + 1);
        assert_eq!(text.len(), HOLDER_BYTES_MAX);
        assert!(holder_identity().len() <= HOLDER_BYTES_MAX + 1);
    }
}
