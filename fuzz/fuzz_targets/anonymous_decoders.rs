//! Feeds arbitrary bytes to the decoders of anonymous transactions (kind 0x08,
//! `docs/transaction-format.md` §5.10) through `decode_exact`: `AnonymousTransaction`,
//! `AnonymousInput` and `AnonymousValue`.
//!
//! Nothing may panic; whatever decodes must re-encode to exactly the input (one encoding per
//! value); and what a node derives from a decoded transaction (txid, context, the outputs it
//! creates, its UHS ids, its compact transaction) must not panic and must agree: anonymous outputs
//! numbered after the transparent ones, each id that of the input that spends it, the compact
//! transaction spending and creating exactly those ids. Inputs grown from the anonymous vectors
//! (the `anonymous_*_ser` lines of `docs/transaction-format.md` §8) reach the owners, audits,
//! spend proofs and value proofs.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_codec::{Decode, Encode};
use specie_transaction::SpecieTransaction;
use specie_private_transactions::{AnonymousInput, AnonymousTransaction, AnonymousValue};

fn check_transaction(tx: AnonymousTransaction, bytes: &[u8]) {
    assert_eq!(tx.encode(), bytes, "what decodes re-encodes to its input");
    let txid = tx.txid();
    let _ = tx.context();
    let created = tx.created_anonymous_outputs();
    assert_eq!(created.len(), tx.owners.len().min(tx.output_values().len()));
    let first = tx.transparent_outputs.len() as u64;
    for (i, output) in created.iter().enumerate() {
        assert_eq!((output.outpoint.txid, output.outpoint.index), (txid, first + i as u64));
        assert_eq!(output.to_input().uhs_id(), output.uhs_id);
    }
    let (spent, created_ids) = tx.uhs_ids();
    assert_eq!(spent.len(), tx.transparent_inputs.len() + tx.anonymous_inputs.len());
    assert_eq!(created_ids.len(), tx.transparent_outputs.len() + created.len());
    let specie = SpecieTransaction::from(tx);
    assert_eq!(specie.encode(), bytes);
    let compact = specie.compact();
    assert_eq!((compact.txid, compact.spent, compact.created), (txid, spent, created_ids));
    assert_eq!(SpecieTransaction::decode_exact(bytes), Ok(specie), "both decoders agree");
}

fuzz_target!(|data: &[u8]| {
    specie_private_transactions::install();
    if let Ok(tx) = AnonymousTransaction::decode_exact(data) {
        check_transaction(tx, data);
    }
    if let Ok(input) = AnonymousInput::decode_exact(data) {
        assert_eq!(input.encode(), data, "what decodes re-encodes to its input");
        let _ = input.uhs_id();
    }
    if let Ok(value) = AnonymousValue::decode_exact(data) {
        assert_eq!(value.encode(), data, "what decodes re-encodes to its input");
    }
});
