//! A 32-byte secret kept as hex in a file only its owner may read: read it, or create it on first
//! use (0600, written and synced before it is used). The one home of such files for the servers
//! that keep a secret seed beside their data (the offline authority, a standalone FastPay
//! committee).

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
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
}

/// The secret in `path`, made (from the operating system's random source) if the file is missing.
pub fn read_or_create(path: &Path) -> Result<[u8; 32], SecretFileError> {
    let io = |source| SecretFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let bad = || SecretFileError::Bad { path: path.into() };
            let bytes = hex::decode(text.trim()).map_err(|_| bad())?;
            bytes.try_into().map_err(|_| bad())
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut secret = [0u8; 32];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut secret);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
                .map_err(io)?;
            file.write_all(hex::encode(secret).as_bytes()).map_err(io)?;
            file.sync_all().map_err(io)?;
            Ok(secret)
        }
        Err(error) => Err(io(error)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_secret_is_made_once_for_its_owner_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed");
        let made = read_or_create(&path).unwrap();
        assert_eq!(read_or_create(&path).unwrap(), made);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(&path, "not hex").unwrap();
        assert!(matches!(read_or_create(&path), Err(SecretFileError::Bad { .. })));
    }
}
