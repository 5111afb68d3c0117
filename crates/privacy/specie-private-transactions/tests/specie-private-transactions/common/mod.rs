//! Builders for signed test transactions, the keys a sentinel trusts (the issuer, and the
//! privacy rules), and the vector block of `docs/transaction-format.md`.

#![allow(dead_code)] // Each test module uses a different subset.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use secp256k1::Keypair;
use specie_private_transactions::PrivacyRules;
use specie_sentinel::{IssuerKeys, TrustedKeys};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{witness_program_commitment, Input, NonceMode, OutPoint, Output, Transaction, Txid};

/// A keypair from a one-byte seed (secret = seed repeated; valid for every seed 1..=255).
pub fn key(seed: u8) -> Keypair {
    keypair_from_secret(&[seed; 32]).expect("seeds 1..=255 are valid secret keys")
}

pub fn issuer() -> Keypair {
    key(0x03)
}

/// The issuer only: no rules for the private kinds, so they are not accepted at all.
pub fn issuers_only() -> TrustedKeys {
    TrustedKeys::new(IssuerKeys::new([issuer().x_only_public_key().0]).unwrap())
}

/// The issuer, and the privacy rules `rules`. Installs the private kinds' decoders too, so that
/// the tests can decode what they validate.
pub fn trusted_with(rules: PrivacyRules) -> TrustedKeys {
    specie_private_transactions::install();
    issuers_only().with_capability(Arc::new(rules))
}

/// The issuer, and privacy rules with no keys: no auditor has jurisdiction, and no registration
/// authority is trusted (so no anonymous transaction is valid).
pub fn trusted() -> TrustedKeys {
    trusted_with(PrivacyRules::default())
}

pub fn pays(owner: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(owner)),
        value,
    }
}

/// An input owned by `owner`, as if output `index` of some earlier transaction `txid_seed`.
pub fn owned_input(owner: &Keypair, value: u64, txid_seed: u8, index: u64) -> Input {
    Input {
        prevout: OutPoint {
            txid: Txid([txid_seed; 32]),
            index,
        },
        data: pays(owner, value),
    }
}

/// A signed transfer: inputs (owner, value) to outputs (payee, value).
pub fn transfer(inputs: &[(Keypair, u64)], outputs: &[(Keypair, u64)]) -> Transaction {
    let mut tx = Transaction {
        inputs: inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xA0, i as u64))
            .collect(),
        outputs: outputs.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        witnesses: vec![],
    };
    let owners: Vec<Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    tx.sign(&owners, NonceMode::Deterministic).unwrap();
    tx
}

/// Alice pays 60 to bob from 100, 40 change: valid.
pub fn valid_transfer() -> Transaction {
    transfer(&[(key(1), 100)], &[(key(2), 60), (key(1), 40)])
}

/// `docs/transaction-format.md`, whose vector block the tests check (the same file the core's
/// tests read).
pub fn format_doc() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/transaction-format.md"
    ))
}

/// `name=value` lines inside the fenced code blocks of a markdown file; `#` lines are comments.
/// (As `specie-transaction`'s tests read them.)
pub fn parse_kv_blocks(markdown: &str) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    let mut in_block = false;
    for line in markdown.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block || line.is_empty() || line.starts_with('#') {
            continue;
        }
        // Vector lines are `name=value` with no spaces; formulas such as `txid = SHA256(…)`
        // in the same document are not vectors.
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let is_name = |c: char| c.is_ascii_alphanumeric() || "_[]".contains(c);
        if key.is_empty() || !key.chars().all(is_name) || value.contains(char::is_whitespace) {
            continue;
        }
        let previous = values.insert(key.to_owned(), value.to_owned());
        assert!(previous.is_none(), "duplicate vector key {key}");
    }
    values
}

pub struct Vectors(pub BTreeMap<String, String>);

impl Vectors {
    /// The documented vectors; the private kinds are installed first, so that they decode.
    pub fn documented() -> Vectors {
        specie_private_transactions::install();
        let path = format_doc();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
        Vectors(parse_kv_blocks(&text))
    }
    pub fn get(&self, key: &str) -> &str {
        self.0.get(key).unwrap_or_else(|| panic!("vector {key} missing"))
    }
    pub fn bytes(&self, key: &str) -> Vec<u8> {
        hex::decode(self.get(key)).unwrap_or_else(|error| panic!("vector {key}: {error}"))
    }
    pub fn hash(&self, key: &str) -> [u8; 32] {
        self.bytes(key)
            .try_into()
            .unwrap_or_else(|_| panic!("vector {key} is not 32 bytes"))
    }
}
