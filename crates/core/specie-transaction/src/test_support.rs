//! What the tests of every crate that builds or judges core transactions share (feature
//! `testing`): deterministic keys, signed transfers, mints and redeems, and the vector block of
//! `docs/transaction-format.md`. Panics on misuse: it is for tests only.

use std::collections::BTreeMap;
use std::path::PathBuf;

use secp256k1::Keypair;

use crate::signing::{keypair_from_secret, xonly_bytes, NonceMode};
use crate::{
    witness_program_commitment, Input, MintTransaction, OutPoint, Output, RedeemTransaction, Transaction, Txid,
};

/// A keypair from a one-byte seed (secret = seed repeated; valid for every seed 1..=255).
pub fn key(seed: u8) -> Keypair {
    keypair_from_secret(&[seed; 32]).expect("seeds 1..=255 are valid secret keys")
}

/// The issuer of the tests' mints and redeems.
pub fn issuer() -> Keypair {
    key(0x03)
}

/// An output of `value` to `owner`'s key.
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

/// Two inputs (alice 70, bob 30) to carol 100: valid.
pub fn valid_two_input_transfer() -> Transaction {
    transfer(&[(key(1), 70), (key(2), 30)], &[(key(4), 100)])
}

/// Re-signs a transfer after a test changed it, so that only the intended error remains.
pub fn resign(tx: &mut Transaction, owners: &[Keypair]) {
    tx.sign(owners, NonceMode::Deterministic).unwrap();
}

/// A mint by [`issuer`] of `outputs` (payee, value).
pub fn mint(outputs: &[(Keypair, u64)]) -> MintTransaction {
    MintTransaction::new_signed(
        [0x4E; 32],
        outputs.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &issuer(),
        NonceMode::Deterministic,
    )
}

/// Redeem `amount` from inputs, with change outputs.
pub fn redeem(amount: u64, inputs: &[(Keypair, u64)], change: &[(Keypair, u64)]) -> RedeemTransaction {
    let owners: Vec<Keypair> = inputs.iter().map(|(owner, _)| *owner).collect();
    RedeemTransaction::new_signed(
        amount,
        inputs
            .iter()
            .enumerate()
            .map(|(i, (owner, value))| owned_input(owner, *value, 0xB0, i as u64))
            .collect(),
        change.iter().map(|(payee, value)| pays(payee, *value)).collect(),
        &owners,
        &issuer(),
        NonceMode::Deterministic,
    )
    .unwrap()
}

/// Re-signs a redeem (owners and issuer) after a test changed it.
pub fn resign_redeem(tx: &mut RedeemTransaction, owners: &[Keypair]) {
    tx.sign(owners, &issuer(), NonceMode::Deterministic).unwrap();
}

/// specie's own format document, whose vector block the tests check.
pub fn format_doc() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/transaction-format.md"
    ))
}

/// `name=value` lines inside the fenced code blocks of a markdown file; `#` lines are comments.
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

/// The vectors of `docs/transaction-format.md`, by name.
pub struct Vectors(pub BTreeMap<String, String>);

impl Vectors {
    /// The documented vectors. A test of a capability's kinds installs them first, so that they
    /// decode.
    pub fn documented() -> Vectors {
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

/// proptest strategies of the format's parts, arbitrary (for decoders) or honestly signed (for
/// validation).
pub mod strategies {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::{key, transfer};
    use crate::{Input, OutPoint, Output, Transaction, Txid, Witness};

    pub fn hash() -> impl Strategy<Value = [u8; 32]> {
        any::<[u8; 32]>()
    }

    pub fn output() -> impl Strategy<Value = Output> {
        (hash(), any::<u64>()).prop_map(|(witness_program_commitment, value)| Output {
            witness_program_commitment,
            value,
        })
    }

    pub fn input() -> impl Strategy<Value = Input> {
        (hash(), any::<u64>(), output()).prop_map(|(txid, index, data)| Input {
            prevout: OutPoint {
                txid: Txid(txid),
                index,
            },
            data,
        })
    }

    /// Empty and short witnesses, p2pk-sized ones, and longer ones.
    pub fn witness() -> impl Strategy<Value = Witness> {
        prop_oneof![
            vec(any::<u8>(), 0..4),
            vec(any::<u8>(), 97..=97),
            vec(any::<u8>(), 0..200)
        ]
        .prop_map(Witness)
    }

    /// 64 arbitrary bytes.
    pub fn signature() -> impl Strategy<Value = [u8; 64]> {
        (hash(), hash()).prop_map(|(a, b)| {
            let mut signature = [0u8; 64];
            signature[..32].copy_from_slice(&a);
            signature[32..].copy_from_slice(&b);
            signature
        })
    }

    /// Splits `total` into positive values at the cut points.
    pub fn split(total: u64, cuts: &[u64]) -> Vec<u64> {
        let mut points: Vec<u64> = cuts.iter().map(|cut| 1 + cut % (total - 1).max(1)).collect();
        points.retain(|p| *p < total);
        points.sort_unstable();
        points.dedup();
        let mut values = Vec::new();
        let mut previous = 0;
        for point in points.into_iter().chain([total]) {
            values.push(point - previous);
            previous = point;
        }
        values
    }

    /// A valid signed transfer: 1–4 inputs owned by keys from seeds 1..=250, outputs splitting
    /// the total among one payee's outputs.
    pub fn valid_transfer() -> impl Strategy<Value = Transaction> {
        (
            vec((1u8..=250, 1u64..1_000_000_000), 1..4),
            vec(any::<u64>(), 0..4),
            1u8..=250,
        )
            .prop_map(|(inputs, cuts, payee)| {
                let owners: Vec<_> = inputs.iter().map(|(seed, value)| (key(*seed), *value)).collect();
                let total: u64 = inputs.iter().map(|(_, value)| value).sum();
                let outputs: Vec<_> = split(total, &cuts)
                    .into_iter()
                    .map(|value| (key(payee), value))
                    .collect();
                transfer(&owners, &outputs)
            })
    }
}
