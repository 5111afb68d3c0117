//! Feeds arbitrary bytes to the wallet's file readers (`specie_wallet`), as a damaged disk or
//! whoever hands a user a wallet file would: the bytes are written to a file and loaded with
//! `WalletFile::load_with` and a fixed passphrase, which opens an encrypted file's envelope
//! (Argon2id and XChaCha20-Poly1305, `envelope.rs`) or parses a file in clear; and they are
//! parsed in memory as a `WalletFile` document and rebuilt with `into_wallet`. Nothing may panic.
//! Whatever loads must save and load again to the same wallet (an encrypted file is sealed again
//! under its own key and opens again with the passphrase, and with no other); a file in clear
//! saves to the same bytes each time; the in-memory parser agrees with the loader.
//!
//! Argon2 runs at the cost the file's header asks for, within the envelope's limits (1 GiB, 16
//! passes, 16 lanes). A header within those limits that asks for more than [`KDF_WORK_MAX`] is
//! not opened here (each run would take seconds); one beyond them is, and must be refused before
//! anything is derived or allocated, or the run exceeds libFuzzer's memory and time limits.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use specie_wallet::{FileError, Passphrase, Wallet, WalletFile, WALLET_FORMAT_VERSION};

/// The envelope's limits on the header's Argon2 parameters (`MEMORY_KIB_MAX`, `ITERATIONS_MAX`).
const MEMORY_KIB_MAX: u32 = 1024 * 1024;
const ITERATIONS_MAX: u32 = 16;
/// The most Argon2 work (KiB × passes) an input may ask for and still be opened here.
const KDF_WORK_MAX: u64 = 1024;

/// The envelope as `envelope.rs` reads it (same fields, same types, same order: serde accepts a
/// JSON array for a struct too), to read the cost a header asks for before opening it.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Envelope {
    format: String,
    version: u32,
    kdf: Kdf,
    cipher: String,
    nonce: String,
    ciphertext: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct Kdf {
    algorithm: String,
    version: u32,
    memory_kib: u32,
    iterations: u32,
    parallelism: u32,
    salt: String,
}

/// Whether opening `data` would run Argon2 for longer than a fuzzing run should.
fn too_costly(data: &[u8]) -> bool {
    serde_json::from_slice::<Envelope>(data).is_ok_and(|envelope| {
        let kdf = envelope.kdf;
        kdf.memory_kib <= MEMORY_KIB_MAX
            && kdf.iterations <= ITERATIONS_MAX
            && u64::from(kdf.memory_kib) * u64::from(kdf.iterations) > KDF_WORK_MAX
    })
}

fn passphrase() -> &'static Passphrase {
    static PASSPHRASE: OnceLock<Passphrase> = OnceLock::new();
    PASSPHRASE.get_or_init(|| Passphrase::new(b"fuzz wallet passphrase".to_vec(), "the fuzz target").unwrap())
}

fn wrong_passphrase() -> &'static Passphrase {
    static PASSPHRASE: OnceLock<Passphrase> = OnceLock::new();
    PASSPHRASE.get_or_init(|| Passphrase::new(b"fuzz wallet passphrasf".to_vec(), "the fuzz target").unwrap())
}

/// The wallet file's path, in a directory of this process (in memory where there is one), left
/// behind when the run ends (`/dev/shm/specie-fuzz-wallet-files-<pid>`).
fn wallet_path() -> &'static Path {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let base = if shm.is_dir() {
            shm.to_owned()
        } else {
            std::env::temp_dir()
        };
        let dir = base.join(format!("specie-fuzz-wallet-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("wallet.json")
    })
}

/// The wallet as the document a save writes, to compare wallets (`Wallet` has no `PartialEq`).
fn document(wallet: &Wallet) -> serde_json::Value {
    serde_json::to_value(WalletFile::from_wallet(wallet)).expect("a wallet document serializes")
}

fn is_envelope(data: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        format: Option<String>,
    }
    serde_json::from_slice::<Probe>(data)
        .is_ok_and(|probe| probe.format.as_deref() == Some(specie_wallet::ENCRYPTED_WALLET_FORMAT))
}

/// The in-memory parser: the document and the wallet it rebuilds, and its document again.
fn parse_in_memory(data: &[u8]) -> Option<serde_json::Value> {
    let wallet = serde_json::from_slice::<WalletFile>(data).ok()?.into_wallet().ok()?;
    let saved = document(&wallet);
    let again: WalletFile = serde_json::from_value(saved.clone()).expect("a saved document parses");
    let again = again.into_wallet().expect("a saved document rebuilds its wallet");
    assert_eq!(
        document(&again),
        saved,
        "a wallet rebuilt from its own document is the same wallet"
    );
    Some(saved)
}

fuzz_target!(|data: &[u8]| {
    // Every kind a deployment installs, as the binary does.
    specie_fastpay_primary::install();
    specie_private_transactions::install();
    specie_privacy_wallet::install();
    let in_memory = parse_in_memory(data);
    if too_costly(data) {
        return;
    }
    let path = wallet_path();
    std::fs::write(path, data).unwrap();
    let encrypted = is_envelope(data);
    assert_eq!(WalletFile::is_encrypted(path).unwrap(), encrypted);
    if encrypted {
        assert!(
            matches!(
                WalletFile::load_with(path, None),
                Err(FileError::PassphraseNeeded { .. })
            ),
            "an encrypted file asks for a passphrase before anything else"
        );
    }
    let loaded = WalletFile::load_with(path, Some(passphrase()));
    if !encrypted {
        // In clear, the loader is the in-memory parser plus the version check.
        let version_ok = serde_json::from_slice::<serde_json::Value>(data)
            .ok()
            .and_then(|value| value.get("version").and_then(serde_json::Value::as_u64))
            .is_some_and(|version| (1..=u64::from(WALLET_FORMAT_VERSION)).contains(&version));
        match &loaded {
            Ok(wallet) => assert_eq!(Some(document(wallet)), in_memory, "the loader and the parser agree"),
            Err(_) if version_ok => assert!(in_memory.is_none(), "the parser took what the loader refused"),
            Err(_) => {}
        }
    }
    let Ok(wallet) = loaded else {
        return;
    };
    let saved = document(&wallet);
    // Saved as the same kind of file (sealed again under the remembered key, or in clear).
    WalletFile::save(path, &wallet).expect("a loaded wallet saves");
    let first_save = std::fs::read(path).unwrap();
    assert_eq!(
        WalletFile::is_encrypted(path).unwrap(),
        encrypted,
        "a save keeps the file's kind"
    );
    let again = WalletFile::load_with(path, Some(passphrase())).expect("a saved wallet loads");
    assert_eq!(document(&again), saved, "a saved wallet loads as the same wallet");
    if encrypted {
        assert!(matches!(
            WalletFile::load_with(path, Some(wrong_passphrase())),
            Err(FileError::WrongPassphrase { .. })
        ));
    } else {
        WalletFile::save(path, &again).expect("a loaded wallet saves");
        assert_eq!(
            std::fs::read(path).unwrap(),
            first_save,
            "a wallet in clear saves to one file"
        );
    }
});
