//! Who signs as the issuer: a key kept in the wallet file, or an external signer command, so
//! that the issuer key need not sit in a file on the machine that builds mints (it can be on a
//! hardware module, or behind `ssh` on another machine).
//!
//! The external signer protocol is one line each way: the command is started once per
//! signature, is written the 32-byte message to sign (the transaction id) as 64 hex digits and a
//! newline on its standard input, and answers the 64-byte BIP-340 signature as 128 hex digits on
//! its standard output, then exits 0. Anything else is refused, and so is a signature that does
//! not verify under the issuer key the wallet was created with: a signer cannot make the wallet
//! send what the node would refuse. `specie issuer sign --key-file FILE` is such a signer.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use secp256k1::XOnlyPublicKey;
use specie_transaction::signing::{schnorr_sign, schnorr_verify};
use specie_transaction::NonceMode;

use crate::error::WalletError;
use crate::wallet::WalletKey;

/// How long a signer may take: a person may have to approve on a device.
pub const SIGNER_TIMEOUT_MS: u64 = 120_000;
/// The most a signer's standard output may hold (a signature is 129 bytes with its newline).
const SIGNER_OUTPUT_BYTES_MAX: u64 = 1024;
/// Words in a signer command at most, and bytes in one.
pub const SIGNER_WORDS_MAX: usize = 64;
pub const SIGNER_WORD_BYTES_MAX: usize = 4096;

/// An external signer: the program and its arguments (no shell), and the issuer key its
/// signatures must verify under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalSigner {
    pub pubkey: XOnlyPublicKey,
    pub command: Vec<String>,
}

/// The issuer's signing: a key in the wallet, or an external signer.
#[derive(Clone, Debug)]
pub(crate) enum IssuerSigner {
    Key(WalletKey),
    External(ExternalSigner),
}

impl IssuerSigner {
    pub fn pubkey(&self) -> XOnlyPublicKey {
        match self {
            IssuerSigner::Key(key) => key.pubkey,
            IssuerSigner::External(signer) => signer.pubkey,
        }
    }

    /// A BIP-340 signature of `message` by the issuer key, checked to verify.
    pub fn sign(&self, message: &[u8; 32]) -> Result<[u8; 64], WalletError> {
        match self {
            IssuerSigner::Key(key) => Ok(schnorr_sign(&key.keypair, message, NonceMode::Randomized)),
            IssuerSigner::External(signer) => signer.sign(message),
        }
    }
}

impl ExternalSigner {
    /// A signer running `command` (split on white space), for `pubkey`; checked for its shape.
    pub fn new(pubkey: XOnlyPublicKey, command: Vec<String>) -> Result<ExternalSigner, WalletError> {
        let shown = command.join(" ");
        let bad = |reason: &str| WalletError::Signer {
            command: shown.chars().take(200).collect(),
            reason: reason.to_owned(),
        };
        if command.is_empty() || command[0].is_empty() {
            return Err(bad("it names no program"));
        }
        if command.len() > SIGNER_WORDS_MAX || command.iter().any(|word| word.len() > SIGNER_WORD_BYTES_MAX) {
            return Err(bad("it is too long"));
        }
        Ok(ExternalSigner { pubkey, command })
    }

    /// Runs the signer on `message` (module docs) and checks its answer.
    pub fn sign(&self, message: &[u8; 32]) -> Result<[u8; 64], WalletError> {
        let failed = |reason: String| WalletError::Signer {
            command: self.command.join(" ").chars().take(200).collect(),
            reason,
        };
        let mut child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|error| failed(format!("it does not start: {error}")))?;
        let mut stdin = child.stdin.take().expect("piped");
        let written = writeln!(stdin, "{}", hex::encode(message));
        drop(stdin);
        let stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            stdout
                .take(SIGNER_OUTPUT_BYTES_MAX)
                .read_to_string(&mut text)
                .map(|_| text)
        });
        let deadline = Instant::now() + Duration::from_millis(SIGNER_TIMEOUT_MS);
        let status = loop {
            match child.try_wait().map_err(|error| failed(error.to_string()))? {
                Some(status) => break status,
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(failed(format!(
                        "it did not answer within {} s",
                        SIGNER_TIMEOUT_MS / 1000
                    )));
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        };
        written.map_err(|error| failed(format!("it did not take the message: {error}")))?;
        if !status.success() {
            return Err(failed(format!("it exited with {status}")));
        }
        let text = reader
            .join()
            .map_err(|_| failed("its output could not be read".into()))?
            .map_err(|error| failed(format!("its output could not be read: {error}")))?;
        let signature = hex::decode(text.trim())
            .ok()
            .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok())
            .ok_or_else(|| failed("it did not answer 128 hex digits (a BIP-340 signature)".into()))?;
        if !schnorr_verify(&self.pubkey, message, &signature) {
            return Err(failed(format!(
                "its signature does not verify under the issuer key {}: is it the signer of that key?",
                hex::encode(self.pubkey.serialize())
            )));
        }
        Ok(signature)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A signer script that signs with `secret` through `specie issuer sign`'s protocol, written
    /// in shell with a fixed answer: the test checks the wallet's side of the protocol.
    fn script(dir: &std::path::Path, body: &str) -> Vec<String> {
        let path = dir.join("signer.sh");
        std::fs::write(&path, format!("#!/bin/sh\nread message\n{body}\n")).unwrap();
        vec!["sh".into(), path.display().to_string()]
    }

    #[test]
    fn an_external_signature_is_used_only_if_it_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let key = WalletKey::random(&mut crate::testkit::rng(40)).unwrap();
        let message = [7u8; 32];
        let good = schnorr_sign(&key.keypair, &message, NonceMode::Deterministic);
        let signer = |body: &str| ExternalSigner::new(key.pubkey, script(dir.path(), body)).unwrap();
        assert_eq!(
            signer(&format!("echo {}", hex::encode(good))).sign(&message).unwrap(),
            good
        );
        let other = WalletKey::random(&mut crate::testkit::rng(41)).unwrap();
        let wrong = schnorr_sign(&other.keypair, &message, NonceMode::Deterministic);
        for (body, expected) in [
            (format!("echo {}", hex::encode(wrong)), "does not verify"),
            ("echo nothex".to_string(), "128 hex digits"),
            ("exit 3".to_string(), "exited with"),
        ] {
            let error = signer(&body).sign(&message).unwrap_err().to_string();
            assert!(error.contains(expected) && error.contains("signer.sh"), "{error}");
        }
        let missing = ExternalSigner::new(key.pubkey, vec!["/nonexistent/signer".into()]).unwrap();
        assert!(missing
            .sign(&message)
            .unwrap_err()
            .to_string()
            .contains("does not start"));
        assert!(ExternalSigner::new(key.pubkey, vec![]).is_err());
    }
}
