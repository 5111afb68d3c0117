//! Encrypted wallet files: the wallet's JSON sealed under a key stretched from a passphrase.
//!
//! An encrypted wallet file is a small JSON envelope whose plaintext is the wallet file exactly
//! as it would be written in clear:
//!
//! ```json
//! {
//!   "format": "specie-wallet-encrypted",
//!   "version": 1,
//!   "kdf": {"algorithm": "argon2id", "version": 19, "memory_kib": 65536, "iterations": 3,
//!           "parallelism": 1, "salt": "<16 bytes, hex>"},
//!   "cipher": "xchacha20poly1305",
//!   "nonce": "<24 bytes, hex>",
//!   "ciphertext": "<hex: the wallet JSON, then the 16-byte tag>"
//! }
//! ```
//!
//! The key is Argon2id (RFC 9106, version 0x13) of the passphrase with the header's parameters
//! and salt. The salt is drawn when the file is first encrypted and kept, so that a command derives
//! the key once and every save after it draws only a fresh random 24-byte nonce (XChaCha20's
//! nonces are long enough to be drawn at random). The header (everything but `nonce` and
//! `ciphertext`) is the cipher's associated data: altering any of it makes the file fail to open,
//! as a wrong passphrase or an altered ciphertext does; the three cannot be told apart.
//!
//! Everything in the header is checked against fixed limits before anything is allocated or
//! derived, so a hostile file cannot make the wallet allocate more than [`MEMORY_KIB_MAX`] KiB
//! or run Argon2 for long: memory × passes is bounded by [`WORK_KIB_PASSES_MAX`], about 21 times
//! the default cost (0.3 s on a 2-core machine, so a few seconds at most).

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use zeroize::Zeroizing;

/// The `format` field of an encrypted wallet file.
pub const ENCRYPTED_WALLET_FORMAT: &str = "specie-wallet-encrypted";
/// The envelope version this code reads and writes.
pub const ENCRYPTED_WALLET_VERSION: u32 = 1;
/// The environment variable a passphrase is taken from when none was given otherwise.
pub const PASSPHRASE_ENV: &str = "SPECIE_WALLET_PASSPHRASE";
/// A passphrase file larger than this is refused: it should hold the passphrase alone.
pub const PASSPHRASE_FILE_BYTES_MAX: u64 = 1024;
/// The most memory a file's Argon2 parameters may ask for (1 GiB), in KiB.
pub const MEMORY_KIB_MAX: u32 = 1024 * 1024;
/// The most Argon2 passes a file may ask for.
pub const ITERATIONS_MAX: u32 = 16;
/// The most Argon2 lanes a file may ask for.
pub const PARALLELISM_MAX: u32 = 16;
/// The most Argon2 work a file may ask for, memory (KiB) × passes: 1 GiB × 4 passes. Each bound
/// above alone would allow 1 GiB × 16 passes, tens of seconds per load.
pub const WORK_KIB_PASSES_MAX: u64 = 4 * 1024 * 1024;

const KDF_ALGORITHM: &str = "argon2id";
/// Argon2 version 1.3 (0x13), the RFC's.
const KDF_VERSION: u32 = 0x13;
const CIPHER: &str = "xchacha20poly1305";
const SALT_BYTES: usize = 16;
const SALT_BYTES_MAX: usize = 64;
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;

/// A passphrase that opens encrypted wallet files. Its `Debug` shows nothing of it, and its
/// bytes are wiped when it is dropped.
#[derive(Clone)]
pub struct Passphrase(Zeroizing<Vec<u8>>);

impl fmt::Debug for Passphrase {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("Passphrase(…)")
    }
}

/// Why a passphrase could not be had.
#[derive(Debug, Error)]
pub enum PassphraseError {
    #[error("could not read the passphrase file {path}: {source}")]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the passphrase file {path} is larger than {PASSPHRASE_FILE_BYTES_MAX} bytes; it should hold the \
         passphrase alone"
    )]
    TooLarge { path: std::path::PathBuf },
    #[error("the passphrase from {from} is empty")]
    Empty { from: String },
}

static PROCESS_PASSPHRASE: OnceLock<Option<Passphrase>> = OnceLock::new();

impl Passphrase {
    /// A passphrase of these bytes; `from` names where they came from, for the error.
    pub fn new(bytes: Vec<u8>, from: &str) -> Result<Self, PassphraseError> {
        if bytes.is_empty() {
            return Err(PassphraseError::Empty { from: from.to_owned() });
        }
        Ok(Passphrase(Zeroizing::new(bytes)))
    }

    /// The passphrase in the file at `path`: its contents without the line break that ends them
    /// (`\n` or `\r\n`); anything else, spaces included, is part of it.
    pub fn from_file(path: &Path) -> Result<Self, PassphraseError> {
        let read = |source| PassphraseError::Read {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read)?;
        let mut bytes = Zeroizing::new(Vec::new());
        file.take(PASSPHRASE_FILE_BYTES_MAX + 1)
            .read_to_end(&mut bytes)
            .map_err(read)?;
        if bytes.len() as u64 > PASSPHRASE_FILE_BYTES_MAX {
            return Err(PassphraseError::TooLarge { path: path.to_owned() });
        }
        let mut end = bytes.len();
        if bytes[..end].ends_with(b"\n") {
            end -= 1;
            if bytes[..end].ends_with(b"\r") {
                end -= 1;
            }
        }
        Passphrase::new(bytes[..end].to_vec(), &format!("the file {}", path.display()))
    }

    /// The passphrase in [`PASSPHRASE_ENV`], if it is set.
    pub fn from_env() -> Result<Option<Self>, PassphraseError> {
        match std::env::var_os(PASSPHRASE_ENV) {
            None => Ok(None),
            Some(value) => Passphrase::new(value.into_encoded_bytes(), PASSPHRASE_ENV).map(Some),
        }
    }

    /// Makes this the passphrase that [`crate::WalletFile::load`] and [`crate::WalletFile::save`]
    /// use in this process (the command line does this once, from `--passphrase-file`). False if
    /// the process already has one.
    pub fn install(self) -> bool {
        PROCESS_PASSPHRASE.set(Some(self)).is_ok()
    }

    /// The process's passphrase: the one installed, else the one in [`PASSPHRASE_ENV`] (read the
    /// first time it is needed; an empty one counts as none).
    pub fn process() -> Option<&'static Passphrase> {
        PROCESS_PASSPHRASE
            .get_or_init(|| Passphrase::from_env().ok().flatten())
            .as_ref()
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// Argon2id's cost: memory in KiB, passes, lanes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KdfCost {
    pub memory_kib: u32,
    pub iterations: u32,
    pub parallelism: u32,
}

impl KdfCost {
    /// What new files get: 64 MiB and 3 passes (RFC 9106's second recommendation, one lane;
    /// this crate computes lanes one after the other anyway), a fraction of a second.
    pub const DEFAULT: KdfCost = KdfCost {
        memory_kib: 64 * 1024,
        iterations: 3,
        parallelism: 1,
    };
}

/// What is wrong with an envelope, or why it does not open.
#[derive(Debug, Error)]
pub(crate) enum OpenError {
    /// The envelope is damaged or asks for more than this program allows.
    #[error("{0}")]
    Invalid(String),
    #[error("it is an encrypted wallet file of version {0}; this program reads version {ENCRYPTED_WALLET_VERSION}")]
    UnsupportedVersion(u32),
    /// Wrong passphrase, or an altered file: authentication failed.
    #[error("the passphrase does not open it")]
    NotOpened,
}

/// The fields that are the cipher's associated data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Header {
    format: String,
    version: u32,
    kdf: KdfRecord,
    cipher: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct KdfRecord {
    algorithm: String,
    version: u32,
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
    salt: String,
}

/// The whole file. Not `#[serde(flatten)]` of [`Header`]: flattening buffers every field, the
/// (large) ciphertext included.
#[derive(Serialize, Deserialize)]
struct Envelope {
    format: String,
    version: u32,
    kdf: KdfRecord,
    cipher: String,
    nonce: String,
    ciphertext: String,
}

/// The key of one encrypted file, with the header it was derived under: what a save needs to
/// seal the file again without the passphrase.
#[derive(Clone)]
pub(crate) struct Seal {
    header: Header,
    key: Zeroizing<[u8; 32]>,
}

impl fmt::Debug for Seal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter
            .debug_struct("Seal")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// Whether `bytes` (a whole file, already known to be JSON) is an encrypted wallet file.
pub(crate) fn is_envelope(bytes: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        format: Option<String>,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok_and(|probe| probe.format.as_deref() == Some(ENCRYPTED_WALLET_FORMAT))
}

impl Seal {
    /// A new key for `passphrase`, under a fresh random salt.
    pub(crate) fn new(passphrase: &Passphrase, cost: KdfCost) -> Result<Seal, OpenError> {
        let mut salt = [0u8; SALT_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut salt);
        let header = Header {
            format: ENCRYPTED_WALLET_FORMAT.to_owned(),
            version: ENCRYPTED_WALLET_VERSION,
            kdf: KdfRecord {
                algorithm: KDF_ALGORITHM.to_owned(),
                version: KDF_VERSION,
                memory_kib: cost.memory_kib,
                iterations: cost.iterations,
                parallelism: cost.parallelism,
                salt: hex::encode(salt),
            },
            cipher: CIPHER.to_owned(),
        };
        let key = derive(passphrase, &header.kdf, &salt)?;
        Ok(Seal { header, key })
    }

    /// The envelope of `plaintext`, under a fresh random nonce, as the file's bytes.
    pub(crate) fn seal(&self, plaintext: &[u8]) -> Result<Vec<u8>, OpenError> {
        let mut nonce = [0u8; NONCE_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let cipher = XChaCha20Poly1305::new((&*self.key).into());
        let aad = associated_data(&self.header);
        let ciphertext = cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .map_err(|_| OpenError::Invalid("the wallet is too large to encrypt".to_owned()))?;
        let envelope = Envelope {
            format: self.header.format.clone(),
            version: self.header.version,
            kdf: self.header.kdf.clone(),
            cipher: self.header.cipher.clone(),
            nonce: hex::encode(nonce),
            ciphertext: hex::encode(ciphertext),
        };
        let mut bytes = serde_json::to_vec_pretty(&envelope).map_err(|error| OpenError::Invalid(error.to_string()))?;
        bytes.push(b'\n');
        Ok(bytes)
    }

    /// Opens the envelope `bytes` with `passphrase`: the plaintext, and the key to seal it again.
    pub(crate) fn open(bytes: &[u8], passphrase: &Passphrase) -> Result<(Seal, Zeroizing<Vec<u8>>), OpenError> {
        let envelope: Envelope =
            serde_json::from_slice(bytes).map_err(|error| OpenError::Invalid(error.to_string()))?;
        let header = Header {
            format: envelope.format,
            version: envelope.version,
            kdf: envelope.kdf,
            cipher: envelope.cipher,
        };
        let salt = check_header(&header)?;
        let nonce = hex::decode(&envelope.nonce)
            .ok()
            .filter(|nonce| nonce.len() == NONCE_BYTES)
            .ok_or_else(|| OpenError::Invalid(format!("its nonce is not {NONCE_BYTES} bytes of hex")))?;
        let ciphertext = hex::decode(&envelope.ciphertext)
            .ok()
            .filter(|ciphertext| ciphertext.len() >= TAG_BYTES)
            .ok_or_else(|| OpenError::Invalid("its ciphertext is not hex, or is too short".to_owned()))?;
        let key = derive(passphrase, &header.kdf, &salt)?;
        let cipher = XChaCha20Poly1305::new((&*key).into());
        let aad = associated_data(&header);
        let plaintext = cipher
            .decrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: &ciphertext,
                    aad: &aad,
                },
            )
            .map_err(|_| OpenError::NotOpened)?;
        Ok((Seal { header, key }, Zeroizing::new(plaintext)))
    }
}

fn associated_data(header: &Header) -> Vec<u8> {
    // Serializing a struct of strings and integers cannot fail.
    serde_json::to_vec(header).unwrap_or_default()
}

/// Checks every header field against this program's limits; the salt.
fn check_header(header: &Header) -> Result<Vec<u8>, OpenError> {
    let invalid = |reason: String| Err(OpenError::Invalid(reason));
    if header.format != ENCRYPTED_WALLET_FORMAT {
        return invalid(format!(
            "its format is {:?}, not {ENCRYPTED_WALLET_FORMAT:?}",
            header.format
        ));
    }
    if header.version != ENCRYPTED_WALLET_VERSION {
        return Err(OpenError::UnsupportedVersion(header.version));
    }
    if header.cipher != CIPHER {
        return invalid(format!(
            "its cipher is {:?}; this program knows only {CIPHER:?}",
            header.cipher
        ));
    }
    let kdf = &header.kdf;
    if kdf.algorithm != KDF_ALGORITHM || kdf.version != KDF_VERSION {
        return invalid(format!(
            "its key derivation is {:?} version {}; this program knows only {KDF_ALGORITHM:?} version {KDF_VERSION}",
            kdf.algorithm, kdf.version
        ));
    }
    if !(1..=PARALLELISM_MAX).contains(&kdf.parallelism) || !(1..=ITERATIONS_MAX).contains(&kdf.iterations) {
        return invalid(format!(
            "its key derivation asks for {} passes and {} lanes; this program allows 1 to {ITERATIONS_MAX} \
             passes and 1 to {PARALLELISM_MAX} lanes",
            kdf.iterations, kdf.parallelism
        ));
    }
    if kdf.memory_kib < 8 * kdf.parallelism || kdf.memory_kib > MEMORY_KIB_MAX {
        return invalid(format!(
            "its key derivation asks for {} KiB of memory; this program allows {} to {MEMORY_KIB_MAX}",
            kdf.memory_kib,
            8 * kdf.parallelism
        ));
    }
    let work = u64::from(kdf.memory_kib) * u64::from(kdf.iterations);
    if work > WORK_KIB_PASSES_MAX {
        return invalid(format!(
            "its key derivation asks for {} KiB × {} passes; this program allows at most \
             {WORK_KIB_PASSES_MAX} KiB-passes (1 GiB × 4)",
            kdf.memory_kib, kdf.iterations
        ));
    }
    match hex::decode(&kdf.salt) {
        Ok(salt) if (SALT_BYTES..=SALT_BYTES_MAX).contains(&salt.len()) => Ok(salt),
        _ => invalid(format!("its salt is not {SALT_BYTES} to {SALT_BYTES_MAX} bytes of hex")),
    }
}

/// Argon2id of the passphrase; `kdf` is within the limits ([`check_header`], or ours).
fn derive(passphrase: &Passphrase, kdf: &KdfRecord, salt: &[u8]) -> Result<Zeroizing<[u8; 32]>, OpenError> {
    let invalid = |error: argon2::Error| OpenError::Invalid(format!("its key derivation parameters: {error}"));
    let params = argon2::Params::new(kdf.memory_kib, kdf.iterations, kdf.parallelism, Some(32)).map_err(invalid)?;
    let mut blocks = vec![argon2::Block::default(); params.block_count()];
    let argon2 = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
    let mut key = Zeroizing::new([0u8; 32]);
    argon2
        .hash_password_into_with_memory(passphrase.bytes(), salt, &mut *key, &mut blocks)
        .map_err(invalid)?;
    Ok(key)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Cheap enough for tests; the file records it, so opening uses it too.
    pub(crate) const TEST_COST: KdfCost = KdfCost {
        memory_kib: 64,
        iterations: 1,
        parallelism: 1,
    };

    fn passphrase(text: &str) -> Passphrase {
        Passphrase::new(text.as_bytes().to_vec(), "a test").unwrap()
    }

    #[test]
    fn sealed_text_opens_with_its_passphrase_only() {
        let seal = Seal::new(&passphrase("correct horse"), TEST_COST).unwrap();
        let plaintext = br#"{"format": "specie-wallet", "keys": ["secret"]}"#;
        let sealed = seal.seal(plaintext).unwrap();
        assert!(is_envelope(&sealed));
        assert!(!is_envelope(plaintext));
        assert!(!String::from_utf8_lossy(&sealed).contains("secret"));
        let (again, opened) = Seal::open(&sealed, &passphrase("correct horse")).unwrap();
        assert_eq!(&opened[..], plaintext);
        assert_eq!(again.header, seal.header);
        // A fresh nonce each time: the same plaintext never seals to the same bytes.
        assert_ne!(seal.seal(plaintext).unwrap(), sealed);
        assert!(matches!(
            Seal::open(&sealed, &passphrase("correct horse ")),
            Err(OpenError::NotOpened)
        ));
    }

    fn tampered(sealed: &[u8], change: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut value: serde_json::Value = serde_json::from_slice(sealed).unwrap();
        change(&mut value);
        serde_json::to_vec(&value).unwrap()
    }

    #[test]
    fn altered_files_do_not_open() {
        let pass = passphrase("p");
        let sealed = Seal::new(&pass, TEST_COST).unwrap().seal(b"{\"a\": 1}").unwrap();
        let flip = |text: &str| {
            let mut bytes = hex::decode(text).unwrap();
            bytes[0] ^= 1;
            serde_json::Value::String(hex::encode(bytes))
        };
        let ciphertext = tampered(&sealed, |v| v["ciphertext"] = flip(v["ciphertext"].as_str().unwrap()));
        assert!(matches!(Seal::open(&ciphertext, &pass), Err(OpenError::NotOpened)));
        let nonce = tampered(&sealed, |v| v["nonce"] = flip(v["nonce"].as_str().unwrap()));
        assert!(matches!(Seal::open(&nonce, &pass), Err(OpenError::NotOpened)));
        let salt = tampered(&sealed, |v| v["kdf"]["salt"] = flip(v["kdf"]["salt"].as_str().unwrap()));
        assert!(matches!(Seal::open(&salt, &pass), Err(OpenError::NotOpened)));
        let cost = tampered(&sealed, |v| v["kdf"]["iterations"] = 2.into());
        assert!(matches!(Seal::open(&cost, &pass), Err(OpenError::NotOpened)));
        let version = tampered(&sealed, |v| v["version"] = 2.into());
        assert!(matches!(
            Seal::open(&version, &pass),
            Err(OpenError::UnsupportedVersion(2))
        ));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any byte of an envelope changed (or the file cut short): it never opens to anything but
        /// its own plaintext, and nothing panics; the decoder as the fuzz targets would drive it.
        #[test]
        fn a_damaged_envelope_never_opens_to_other_bytes(at in 0usize..4096, byte in proptest::prelude::any::<u8>(), cut in proptest::prelude::any::<bool>()) {
            let pass = passphrase("p");
            let plaintext = b"{\"format\": \"specie-wallet\"}";
            let mut sealed = Seal::new(&pass, TEST_COST).unwrap().seal(plaintext).unwrap();
            let at = at % sealed.len();
            if cut {
                sealed.truncate(at);
            } else {
                sealed[at] = byte;
            }
            let _ = is_envelope(&sealed);
            if let Ok((_, opened)) = Seal::open(&sealed, &pass) {
                proptest::prop_assert_eq!(&opened[..], &plaintext[..]);
            }
        }
    }

    #[test]
    fn hostile_headers_are_refused_before_deriving() {
        let pass = passphrase("p");
        let sealed = Seal::new(&pass, TEST_COST).unwrap().seal(b"{}").unwrap();
        let refused = |change: fn(&mut serde_json::Value), says: &str| {
            let message = match Seal::open(&tampered(&sealed, change), &pass) {
                Err(OpenError::Invalid(message)) => message,
                other => panic!("expected Invalid, got {other:?}"),
            };
            assert!(message.contains(says), "{message}");
        };
        refused(
            |v| v["kdf"]["memory_kib"] = (MEMORY_KIB_MAX + 1).into(),
            "KiB of memory",
        );
        refused(|v| v["kdf"]["memory_kib"] = 7.into(), "KiB of memory");
        refused(|v| v["kdf"]["iterations"] = 1_000_000.into(), "passes");
        refused(
            |v| {
                v["kdf"]["memory_kib"] = MEMORY_KIB_MAX.into();
                v["kdf"]["iterations"] = 5.into();
            },
            "KiB-passes",
        );
        refused(|v| v["kdf"]["parallelism"] = 0.into(), "lanes");
        refused(|v| v["kdf"]["algorithm"] = "scrypt".into(), "key derivation");
        refused(|v| v["kdf"]["salt"] = "00".repeat(65).into(), "salt");
        refused(|v| v["kdf"]["salt"] = "00".repeat(8).into(), "salt");
        refused(|v| v["cipher"] = "aes-256-gcm".into(), "cipher");
        refused(|v| v["nonce"] = "00".repeat(12).into(), "nonce");
        refused(|v| v["ciphertext"] = "zz".into(), "ciphertext");
        refused(|v| v["ciphertext"] = "00".repeat(15).into(), "ciphertext");
        refused(|v| v["kdf"] = serde_json::Value::Null, "invalid type");
    }

    #[test]
    fn passphrase_files_are_read_strictly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pass");
        std::fs::write(&path, " two words \r\n").unwrap();
        assert_eq!(Passphrase::from_file(&path).unwrap().bytes(), b" two words ");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(
            Passphrase::from_file(&path),
            Err(PassphraseError::Empty { .. })
        ));
        std::fs::write(&path, vec![b'x'; PASSPHRASE_FILE_BYTES_MAX as usize + 1]).unwrap();
        assert!(matches!(
            Passphrase::from_file(&path),
            Err(PassphraseError::TooLarge { .. })
        ));
        let missing = Passphrase::from_file(&dir.path().join("none")).unwrap_err();
        assert!(
            missing.to_string().starts_with("could not read the passphrase file"),
            "{missing}"
        );
        assert_eq!(format!("{:?}", passphrase("hunter2")), "Passphrase(…)");
    }
}
