//! Batches, the `Sentinel`, and the documented vectors end to end.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::*;
use specie_codec::{Decode, Encode};
use specie_sentinel::{validate, validate_and_compact, validate_batch, IssuerKeys, Sentinel, TrustedKeys};
use specie_transaction::{CompactTransaction, SpecieTransaction};

/// `name=value` vector lines of `docs/transaction-format.md`.
fn documented_vectors() -> BTreeMap<String, String> {
    let path = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../docs/transaction-format.md"
    ));
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .filter_map(|line| line.trim().split_once('='))
        .filter(|(key, value)| !key.is_empty() && !key.contains(' ') && !value.contains(' '))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

#[test]
fn documented_transactions_validate_and_compact_as_documented() {
    let v = documented_vectors();
    let trusted = TrustedKeys::from(IssuerKeys::from_hex(&[&v["issuer_xonly_pubkey"]]).unwrap());
    for name in ["mint", "transfer", "redeem"] {
        let bytes = hex::decode(&v[&format!("{name}_ser")]).unwrap();
        let tx = SpecieTransaction::decode_exact(&bytes).unwrap();
        let compact = validate_and_compact(&tx, &trusted).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            hex::encode(compact.encode()),
            v[&format!("{name}_compact_ser")],
            "{name}"
        );
        // Without the issuer configured, the extension kinds are refused; transfers are not.
        let verdict = validate(&tx, &TrustedKeys::default()).map_err(|e| e.code());
        let expected = if name == "transfer" {
            Ok(())
        } else {
            Err("unknown_issuer")
        };
        assert_eq!(verdict, expected, "{name}");
    }
}

#[test]
fn sentinel_attests_only_with_a_key() {
    let tx = SpecieTransaction::Transfer(valid_transfer());
    let silent = Sentinel::new(trusted(), None);
    let compact = silent.process(&tx).unwrap();
    assert!(compact.attestations.is_empty());
    assert_eq!(silent.attestation_pubkey(), None);

    let attesting = Sentinel::new(trusted(), Some(key(0x04)));
    let mut compact = attesting.process(&tx).unwrap();
    let pubkey = attesting.attestation_pubkey().unwrap();
    let signature = compact.attestations[&pubkey];
    assert_eq!(compact.verify_attestation(&pubkey, &signature), Ok(()));
    assert!(compact.check_attestations(&[pubkey].into(), 1));
    // Attesting again replaces, not duplicates.
    assert!(attesting.attest(&mut compact));
    assert_eq!(compact.attestations.len(), 1);

    let mut bad = valid_transfer();
    bad.witnesses[0].0[96] ^= 1;
    let results = attesting.process_batch(&[tx.clone(), SpecieTransaction::Transfer(bad)]);
    assert_eq!(results.len(), 2);
    let first = results[0].as_ref().unwrap();
    assert_eq!(first.verify_attestation(&pubkey, &first.attestations[&pubkey]), Ok(()));
    assert_eq!(results[1].as_ref().unwrap_err().code(), "invalid_signature");
}

#[test]
fn large_mixed_batch_equals_sequential() {
    // Enough transactions for many chunks on any core count.
    let mut txs = Vec::new();
    for i in 0..300u64 {
        let value = 10 + i;
        let mut tx = transfer(&[(key(1), value)], &[(key(2), value - 1), (key(1), 1)]);
        match i % 5 {
            0 => tx.witnesses[0].0[80] ^= 1,
            1 => tx.outputs[0].value += 1,
            _ => {}
        }
        txs.push(SpecieTransaction::Transfer(tx));
        if i % 50 == 0 {
            txs.push(SpecieTransaction::Mint(mint(&[(key(1), value)])));
        }
    }
    let trusted = trusted();
    let sequential: Vec<Result<CompactTransaction, _>> =
        txs.iter().map(|tx| validate_and_compact(tx, &trusted)).collect();
    assert_eq!(validate_batch(&txs, &trusted), sequential);
    assert!(sequential.iter().any(Result::is_ok) && sequential.iter().any(Result::is_err));
    assert!(validate_batch(&[], &trusted).is_empty());
}
