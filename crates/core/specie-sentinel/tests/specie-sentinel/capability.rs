//! A capability's kind, as the sentinel sees it, with a made-up kind: a *voucher* (kind `0xF0`,
//! installed in this test binary only) that creates one output of its amount, and rules that
//! refuse odd amounts. Without rules the kind is refused (`kind_not_accepted`); with them, the
//! batch hands the vouchers to the rules' `check_batch` and each verdict lands where the
//! transaction is, equal to what `validate` says of it alone.

use crate::common;

use std::any::Any;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use common::*;
use specie_codec::{Decode, DecodeError, Reader};
use specie_sentinel::inspect::inspect;
use specie_sentinel::{
    batch_chunk_transactions, validate, validate_and_compact, validate_batch, validate_batch_timed, CapabilityError,
    CapabilityRules, TrustedKeys, ValidationError,
};
use specie_transaction::extension::put_header;
use specie_transaction::hash::sha256;
use specie_transaction::limits::DecodeLimits;
use specie_transaction::{
    CapabilityKind, CapabilityTransaction, Circulation, CompactTransaction, Input, Output, SpecieTransaction, Txid,
    UhsId,
};

/// The voucher's kind byte: no kind of the core's and no capability's (`docs/transaction-format.md` §5).
const KIND_VOUCHER: u8 = 0xF0;

/// header ‖ kind ‖ u64le(amount) ‖ payee(32); txid = SHA-256(all of it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Voucher {
    outputs: [Output; 1],
}

impl Voucher {
    fn new(payee: &secp256k1::Keypair, amount: u64) -> Voucher {
        Voucher {
            outputs: [pays(payee, amount)],
        }
    }

    fn amount(&self) -> u64 {
        self.outputs[0].value
    }
}

impl CapabilityTransaction for Voucher {
    fn kind(&self) -> u8 {
        KIND_VOUCHER
    }
    fn kind_name(&self) -> &'static str {
        VoucherKind.name()
    }
    fn txid(&self) -> Txid {
        Txid(sha256(&self.encode()))
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_VOUCHER);
        out.extend_from_slice(&self.amount().to_le_bytes());
        out.extend_from_slice(&self.outputs[0].witness_program_commitment);
    }
    fn inputs(&self) -> &[Input] {
        &[]
    }
    fn outputs(&self) -> &[Output] {
        &self.outputs
    }
    fn marker(&self) -> Option<UhsId> {
        None
    }
    fn circulation(&self) -> Circulation {
        Circulation {
            entered: self.amount(),
            ..Circulation::default()
        }
    }
    fn clone_box(&self) -> Box<dyn CapabilityTransaction> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Voucher {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        CapabilityTransaction::encode_to(self, &mut out);
        out
    }
}

#[derive(Debug)]
struct VoucherKind;

impl CapabilityKind for VoucherKind {
    fn kind(&self) -> u8 {
        KIND_VOUCHER
    }
    fn name(&self) -> &'static str {
        "test_voucher"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        _limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        let value = reader.read_u64("voucher amount")?;
        let witness_program_commitment = reader.read_array("voucher payee")?;
        Ok(Box::new(Voucher {
            outputs: [Output {
                witness_program_commitment,
                value,
            }],
        }))
    }
}

fn install() {
    specie_transaction::capability::install(&[&VoucherKind]);
}

fn voucher(seed: u8, amount: u64) -> SpecieTransaction {
    SpecieTransaction::Capability(Box::new(Voucher::new(&key(seed), amount)))
}

/// The rules' refusal of an odd amount; the message names the amount, so that a verdict given
/// at the wrong position shows.
fn odd(amount: u64) -> ValidationError {
    ValidationError::Capability(CapabilityError {
        category: "voucher",
        code: "odd_voucher_amount",
        message: format!("voucher of {amount}: the amount is odd"),
    })
}

/// Refuses odd amounts. Counts how it is asked: one by one, or a task's vouchers together
/// (each batch's txids, in the order given).
#[derive(Debug, Default)]
struct EvenRules {
    single: Mutex<usize>,
    batches: Mutex<Vec<Vec<Txid>>>,
}

impl EvenRules {
    fn judge(tx: &dyn CapabilityTransaction, txid: &Txid) -> Result<(), ValidationError> {
        let voucher = tx.downcast_ref::<Voucher>().expect("asked about vouchers only");
        assert_eq!(*txid, voucher.txid(), "the rules are given the transaction's txid");
        match voucher.amount() % 2 {
            0 => Ok(()),
            _ => Err(odd(voucher.amount())),
        }
    }

    fn single_calls(&self) -> usize {
        *self.single.lock().unwrap()
    }

    fn batches(&self) -> Vec<Vec<Txid>> {
        self.batches.lock().unwrap().clone()
    }
}

impl CapabilityRules for EvenRules {
    fn kinds(&self) -> &'static [u8] {
        &[KIND_VOUCHER]
    }
    fn check(&self, tx: &dyn CapabilityTransaction, txid: &Txid) -> Result<(), ValidationError> {
        *self.single.lock().unwrap() += 1;
        Self::judge(tx, txid)
    }
    fn check_batch(&self, txs: &[(&dyn CapabilityTransaction, Txid)]) -> Vec<Result<(), ValidationError>> {
        self.batches
            .lock()
            .unwrap()
            .push(txs.iter().map(|(_, txid)| *txid).collect());
        txs.iter().map(|(tx, txid)| Self::judge(*tx, txid)).collect()
    }
}

fn with_rules() -> (TrustedKeys, Arc<EvenRules>) {
    let rules = Arc::new(EvenRules::default());
    (trusted().with_capability(rules.clone()), rules)
}

/// Transfers and vouchers, in an order that puts vouchers in every chunk: every third a
/// voucher (odd ones among them), every fifth transfer with a broken signature.
fn mixed_batch(len: u64) -> Vec<SpecieTransaction> {
    (0..len)
        .map(|i| match i % 3 {
            0 => voucher(1 + (i % 200) as u8, 10 + i),
            _ => {
                let mut tx = transfer(&[(key(1), 10 + i)], &[(key(2), 9 + i), (key(1), 1)]);
                if i % 5 == 1 {
                    tx.witnesses[0].0[90] ^= 1;
                }
                SpecieTransaction::Transfer(tx)
            }
        })
        .collect()
}

#[test]
fn a_kind_without_rules_is_not_accepted() {
    let tx = voucher(1, 10);
    let expected = ValidationError::Capability(CapabilityError {
        category: "specie",
        code: "kind_not_accepted",
        message: "this node accepts no test_voucher transactions (its configuration names no keys for that mode)"
            .into(),
    });
    assert_eq!(validate(&tx, &trusted()), Err(expected.clone()));
    assert_eq!(validate(&tx, &TrustedKeys::default()), Err(expected.clone()));
    assert_eq!(expected.category(), "specie");
    // In a batch too, next to a transfer that passes.
    let transfer = SpecieTransaction::Transfer(valid_transfer());
    let verdicts = validate_batch(&[transfer.clone(), tx.clone()], &trusted());
    assert_eq!(verdicts, vec![Ok(transfer.compact()), Err(expected.clone())]);

    // Decoded from bytes (once its kind is installed), with the same verdict.
    install();
    let bytes = Voucher::new(&key(1), 10).encode();
    assert_eq!(SpecieTransaction::decode_exact(&bytes), Ok(tx.clone()));
    let inspection = inspect(&hex::encode(&bytes), &trusted()).unwrap();
    assert_eq!((inspection.kind, inspection.verdict), ("test_voucher", Err(expected)));
    // The rules decide once they are handed in.
    let (with, _) = with_rules();
    assert_eq!(inspect(&hex::encode(&bytes), &with).unwrap().verdict, Ok(()));
}

#[test]
fn the_rules_judge_their_kind_and_a_valid_one_compacts_as_its_kind_says() {
    let (trusted, rules) = with_rules();
    let tx = voucher(2, 12);
    let compact = validate_and_compact(&tx, &trusted).unwrap();
    assert!(compact.spent.is_empty());
    assert_eq!(compact.created, vec![tx.created_outputs()[0].uhs_id]);
    assert_eq!(compact, tx.compact());
    let error = validate(&voucher(2, 13), &trusted).unwrap_err();
    assert_eq!(error, odd(13));
    assert_eq!(
        (error.code(), error.category(), error.index()),
        ("odd_voucher_amount", "voucher", None)
    );
    assert_eq!(error.to_string(), "voucher of 13: the amount is odd");
    assert_eq!(rules.single_calls(), 2);
    assert!(rules.batches().is_empty(), "one transaction is judged alone");
}

#[test]
fn a_batch_hands_the_vouchers_to_check_batch_and_each_verdict_lands_in_place() {
    let (trusted, rules) = with_rules();
    let transfer = SpecieTransaction::Transfer(valid_transfer());
    let mut broken = valid_transfer();
    broken.witnesses[0].0[90] ^= 1;
    let broken = SpecieTransaction::Transfer(broken);
    let txs = [
        voucher(1, 3),
        transfer.clone(),
        voucher(2, 4),
        broken,
        voucher(3, 5),
        voucher(4, 6),
    ];
    let verdicts = validate_batch(&txs, &trusted);
    assert_eq!(verdicts.len(), txs.len());
    assert_eq!(verdicts[0], Err(odd(3)));
    assert_eq!(verdicts[1], Ok(transfer.compact()));
    assert_eq!(verdicts[2], Ok(txs[2].compact()));
    assert_eq!(verdicts[3].as_ref().unwrap_err().code(), "invalid_signature");
    assert_eq!(verdicts[4], Err(odd(5)));
    assert_eq!(verdicts[5], Ok(txs[5].compact()));
    // Fewer transactions than a chunk: one call, with the four vouchers in their order.
    assert_eq!(rules.single_calls(), 0, "a batch does not ask one by one");
    let vouchers: Vec<Txid> = [0, 2, 4, 5].iter().map(|&i| txs[i].txid()).collect();
    assert_eq!(rules.batches(), vec![vouchers]);
    // A batch without vouchers does not call the rules.
    let _ = validate_batch(&[transfer], &trusted);
    assert_eq!(rules.batches().len(), 1);
}

#[test]
fn a_large_mixed_batch_equals_validating_one_by_one() {
    let (trusted, rules) = with_rules();
    let txs = mixed_batch(300);
    let started = std::time::Instant::now();
    let (batch, times) = validate_batch_timed(&txs, &trusted, &|| started.elapsed());
    let batches = rules.batches();
    // Timed per kind, every transaction counted once under its kind's name.
    let mut kinds: Vec<(&str, u64)> = times.kinds().iter().map(|(kind, count, _)| (*kind, *count)).collect();
    kinds.sort();
    assert_eq!(kinds, vec![("test_voucher", 100), ("transfer", 200)]);
    assert!(times.kinds().iter().all(|(_, _, took)| !took.is_zero()), "{times:?}");
    let sequential: Vec<Result<CompactTransaction, ValidationError>> =
        txs.iter().map(|tx| validate_and_compact(tx, &trusted)).collect();
    assert_eq!(batch, sequential);
    assert_eq!(
        rules.single_calls(),
        txs.len() / 3,
        "validate asks about each voucher alone"
    );

    // Both kinds pass and fail somewhere, and the vouchers' verdicts are their own.
    for (tx, verdict) in txs.iter().zip(&batch) {
        if let Some(voucher) = tx.capability::<Voucher>() {
            let expected = if voucher.amount() % 2 == 0 {
                Ok(tx.compact())
            } else {
                Err(odd(voucher.amount()))
            };
            assert_eq!(verdict, &expected);
        }
    }
    let failing = |transfers: bool| {
        txs.iter()
            .zip(&batch)
            .filter(|(tx, verdict)| matches!(tx, SpecieTransaction::Transfer(_)) == transfers && verdict.is_err())
            .count()
    };
    assert!(failing(true) > 0 && failing(false) > 0);
    assert!(batch.iter().filter(|verdict| verdict.is_ok()).count() > txs.len() / 2);

    // Every voucher went to check_batch exactly once, at most one call per chunk, none empty.
    let chunks = txs
        .len()
        .div_ceil(batch_chunk_transactions(txs.len(), rayon::current_num_threads()));
    assert!(
        (1..=chunks).contains(&batches.len()),
        "{} calls for {chunks} chunks",
        batches.len()
    );
    assert!(batches.iter().all(|batch| !batch.is_empty()));
    let judged: Vec<Txid> = batches.into_iter().flatten().collect();
    let vouchers: BTreeSet<Txid> = txs
        .iter()
        .filter(|tx| tx.capability::<Voucher>().is_some())
        .map(SpecieTransaction::txid)
        .collect();
    assert_eq!(judged.len(), vouchers.len());
    assert_eq!(judged.into_iter().collect::<BTreeSet<_>>(), vouchers);
}

#[test]
#[should_panic(expected = "two rules for kind 0xf0")]
fn two_rules_for_one_kind_are_a_deployment_assembled_wrong() {
    let (trusted, _) = with_rules();
    let _ = trusted.with_capability(Arc::new(EvenRules::default()));
}
