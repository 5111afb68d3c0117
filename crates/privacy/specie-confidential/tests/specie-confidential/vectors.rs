//! The vectors of `docs/privacy-format.md` (`docs/privacy-vectors.json`): generators, auditor keys
//! from seeds, and a 2-in/2-out transfer proven with a seeded generator (`StdRng::seed_from_u64(2024)`,
//! rand 0.8's ChaCha12, fixed by Cargo.lock), so every byte is reproducible. Any change to a domain
//! string, the encoding or the proving order fails this test. The stored transfer is also decoded,
//! re-encoded, verified for the stored context, and read by both auditors.
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-confidential --test specie-confidential vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::Value;
use specie_codec::{Decode, Encode};
use specie_confidential::{generator_points, AuditorSecret, ConfidentialTransfer, Opening, TransferPlan};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, vectors_text, Vector};

const FILE: &str = "docs/privacy-vectors.json";
const DESCRIPTION: &str = "Test vectors of docs/privacy-format.md, generated and checked by crates/privacy/specie-confidential/tests/specie-confidential/vectors.rs";
const CONTEXT: [u8; 32] = [0xc0; 32];
const INPUTS: [u64; 2] = [70_000, 1_234_567];
const OUTPUTS: [u64; 2] = [1_000_000, 304_467];
const FEE: u64 = 100;

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").join(FILE)
}

fn auditors() -> [AuditorSecret; 2] {
    [
        AuditorSecret::from_seed(&[0xa1; 32]),
        AuditorSecret::from_seed(&[0xa2; 32]),
    ]
}

fn vector(name: &str, description: &str, bytes: &[u8]) -> Vector {
    Vector {
        name: name.into(),
        description: description.into(),
        bytes: bytes.to_vec(),
    }
}

fn vectors() -> Vec<Vector> {
    let mut rng = StdRng::seed_from_u64(2024);
    let inputs: Vec<Opening> = INPUTS.iter().map(|v| Opening::random(*v, &mut rng)).collect();
    let auditors = auditors();
    let plan = TransferPlan {
        context: CONTEXT,
        inputs: inputs.clone(),
        outputs: OUTPUTS.to_vec(),
        public_in: 0,
        public_out: FEE,
        auditors: auditors.iter().map(AuditorSecret::public).collect(),
    };
    let (transfer, openings) = ConfidentialTransfer::prove(&plan, &mut rng).unwrap();
    let (g, h) = generator_points();
    let mut v = vec![
        vector(
            "generator_value",
            "G: SHA-512(\"specie/confidential/generator/v1/value\") mapped by from_uniform_bytes",
            &g.to_bytes(),
        ),
        vector(
            "generator_blinding",
            "H: SHA-512(\"specie/confidential/generator/v1/blinding\") mapped by from_uniform_bytes",
            &h.to_bytes(),
        ),
    ];
    for (i, a) in auditors.iter().enumerate() {
        let seed = [0xa1 + i as u8; 32];
        v.push(vector(
            &format!("auditor[{i}]_seed"),
            "seed of AuditorSecret::from_seed",
            &seed,
        ));
        v.push(vector(
            &format!("auditor[{i}]_public_key"),
            "P = s⁻¹·H, s = SHA-512(\"specie/confidential/auditor-key/v1\" ‖ seed) mod ℓ",
            &a.public().to_bytes(),
        ));
    }
    for (i, o) in inputs.iter().enumerate() {
        v.push(vector(
            &format!("input[{i}]_blinding"),
            &format!("blinding of input {i} (value {})", o.value),
            o.blinding.as_bytes(),
        ));
        v.push(vector(
            &format!("input[{i}]_commitment"),
            "value·G + blinding·H",
            &o.commitment().to_bytes(),
        ));
    }
    for (i, o) in openings.iter().enumerate() {
        v.push(vector(
            &format!("output[{i}]_blinding"),
            &format!("blinding of output {i} (value {}): Σ 2^(16j)·r_j", o.value),
            o.blinding.as_bytes(),
        ));
        v.push(vector(
            &format!("output[{i}]_commitment"),
            "Σ 2^(16j)·C_j of its limbs",
            &o.commitment().to_bytes(),
        ));
    }
    v.push(vector("context", "the enclosing transaction's context", &CONTEXT));
    v.push(vector(
        "statement_digest",
        "SHA-256(\"specie/confidential/statement/v1\" ‖ context ‖ statement)",
        &transfer.digest(&CONTEXT),
    ));
    v.push(vector(
        "transfer",
        "the 2-in/2-out transfer, fee 100, auditors 0 and 1 (format version 1)",
        &transfer.encode(),
    ));
    v
}

fn stored() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| read_or_write(&path(), || vectors_text(DESCRIPTION, &vectors())))
}

#[test]
fn the_code_makes_the_stored_vectors() {
    assert_file_matches(stored(), FILE, DESCRIPTION, &vectors());
}

#[test]
fn the_stored_transfer_verifies_and_audits() {
    let stored: Value = serde_json::from_str(stored()).unwrap();
    let bytes = stored_bytes(&stored, "transfer");
    let transfer = ConfidentialTransfer::decode_exact(&bytes).unwrap();
    assert_eq!(transfer.encode(), bytes);
    assert_eq!(transfer.verify(&CONTEXT), Ok(()));
    assert!(transfer.verify(&[0xc1; 32]).is_err());
    assert_eq!(transfer.public_out(), FEE);
    for auditor in auditors() {
        assert_eq!(transfer.audit(&auditor), Ok(OUTPUTS.to_vec()));
    }
    let outputs: Vec<Vec<u8>> = transfer
        .output_commitments()
        .iter()
        .map(|c| c.to_bytes().to_vec())
        .collect();
    assert_eq!(
        outputs,
        [
            stored_bytes(&stored, "output[0]_commitment"),
            stored_bytes(&stored, "output[1]_commitment")
        ]
    );
}
