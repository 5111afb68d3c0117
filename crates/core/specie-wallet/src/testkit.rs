//! Test helpers: seeded RNGs, funded wallets, an independent validity check, and an in-memory
//! ledger that behaves like the node's API. The capabilities' wallet drivers test with them too
//! (feature `testing`), handing in their kinds' checks ([`CapabilityCheck`]).
//!
//! The validity check asks the real sentinel (`specie_sentinel::validate`), and also applies
//! the transaction-local rules as the reference format notes list them, read independently of
//! both the sentinel's and the wallet's code: a wallet bug has to fool two readings of the rules.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeSet, HashSet};

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, Encode};
use specie_transaction::signing::{parse_xonly, schnorr_verify};
use specie_transaction::{mint_marker, Input, Output, P2pkWitness, SpecieTransaction, Txid, UhsId, Witness};

use crate::client::{ClientError, Ledger, SubmitResult, SubmitStatus};
use crate::payment::{PaidOutput, PaymentString};
use crate::wallet::Wallet;

/// A seeded rng; every test starts with one.
pub fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A wallet whose first address holds spendable coins of `values` (as if received and
/// confirmed from some earlier transaction).
pub fn funded_wallet(values: &[u64], rng: &mut StdRng) -> Wallet {
    let mut wallet = Wallet::new("usd", false, rng).unwrap();
    if values.is_empty() {
        return wallet;
    }
    let commitment = wallet.latest_address().unwrap().witness_program_commitment();
    let mut txid = [0u8; 32];
    rand::RngCore::fill_bytes(rng, &mut txid);
    let payment = PaymentString::new(
        Txid(txid),
        values
            .iter()
            .enumerate()
            .map(|(index, &value)| PaidOutput {
                index: index as u64,
                output: Output {
                    witness_program_commitment: commitment,
                    value,
                },
            })
            .collect(),
    );
    wallet.import_payment(&payment, &payment.uhs_ids()).unwrap();
    wallet
}

fn check_witnesses(inputs: &[Input], witnesses: &[Witness], txid: &Txid) -> Result<(), String> {
    if witnesses.len() != inputs.len() {
        return Err("missing_witness".into());
    }
    for (index, (input, witness)) in inputs.iter().zip(witnesses).enumerate() {
        let parsed = P2pkWitness::parse(witness).map_err(|error| format!("input {index}: {error}"))?;
        if parsed.program_commitment() != input.data.witness_program_commitment {
            return Err(format!("input {index}: witness program does not match"));
        }
        let pubkey = parse_xonly(&parsed.pubkey).ok_or(format!("input {index}: bad pubkey"))?;
        if !schnorr_verify(&pubkey, &txid.0, &parsed.signature) {
            return Err(format!("input {index}: invalid_signature"));
        }
    }
    Ok(())
}

fn check_inputs_outputs(inputs: &[Input], outputs: &[Output]) -> Result<(u128, u128), String> {
    let outpoints: BTreeSet<_> = inputs.iter().map(|input| input.prevout).collect();
    if outpoints.len() != inputs.len() {
        return Err("duplicate outpoint".into());
    }
    if inputs.iter().any(|input| input.data.value == 0) {
        return Err("zero-value input".into());
    }
    if outputs.iter().any(|output| output.value == 0) {
        return Err("zero-value output".into());
    }
    let in_total = inputs.iter().map(|input| u128::from(input.data.value)).sum();
    let out_total = outputs.iter().map(|output| u128::from(output.value)).sum();
    Ok((in_total, out_total))
}

/// What a capability's tests have the memory ledger and [`check_valid_with`] accept of its
/// kinds: the rules a node judges them by, and an independent reading of what a wallet's
/// transaction of those kinds must pass (the second reading every kind gets here).
#[derive(Clone)]
pub struct CapabilityCheck {
    pub rules: std::sync::Arc<dyn specie_sentinel::CapabilityRules>,
    pub independent: fn(&dyn specie_transaction::CapabilityTransaction) -> Result<(), String>,
}

/// The sentinel's transaction-local checks, plus a canonical-encoding round trip. No
/// capability's keys: a capability's kinds are refused, as a node configured without them
/// refuses them.
pub fn check_valid(tx: &SpecieTransaction, issuers: &[[u8; 32]]) -> Result<(), String> {
    check_valid_with(tx, issuers, None)
}

/// [`check_valid`], accepting the kinds `capability` judges.
pub fn check_valid_with(
    tx: &SpecieTransaction,
    issuers: &[[u8; 32]],
    capability: Option<&CapabilityCheck>,
) -> Result<(), String> {
    let issuer_keys = specie_sentinel::IssuerKeys::from_bytes(issuers).map_err(|error| error.to_string())?;
    let mut trusted = specie_sentinel::TrustedKeys::from(issuer_keys);
    if let Some(capability) = capability {
        trusted = trusted.with_capability(capability.rules.clone());
    }
    specie_sentinel::validate(tx, &trusted).map_err(|error| format!("sentinel: {error}"))?;
    let decoded = SpecieTransaction::decode_exact(&tx.encode()).map_err(|error| error.to_string())?;
    if &decoded != tx {
        return Err("does not survive an encode/decode round trip".into());
    }
    let txid = tx.txid();
    match tx {
        SpecieTransaction::Transfer(transfer) => {
            if transfer.inputs.is_empty() {
                return Err("no_inputs".into());
            }
            if transfer.outputs.is_empty() {
                return Err("no_outputs".into());
            }
            let (in_total, out_total) = check_inputs_outputs(&transfer.inputs, &transfer.outputs)?;
            if in_total > u128::from(u64::MAX) || in_total != out_total {
                return Err("asymmetric_values".into());
            }
            check_witnesses(&transfer.inputs, &transfer.witnesses, &txid)
        }
        SpecieTransaction::Mint(mint) => {
            if mint.outputs.is_empty() {
                return Err("no_outputs".into());
            }
            check_inputs_outputs(&[], &mint.outputs)?;
            check_issuer(&mint.issuer_pubkey, &mint.issuer_signature, &txid, issuers)
        }
        SpecieTransaction::Redeem(redeem) => {
            if redeem.inputs.is_empty() {
                return Err("no_inputs".into());
            }
            if redeem.amount == 0 {
                return Err("zero redeem amount".into());
            }
            let (in_total, out_total) = check_inputs_outputs(&redeem.inputs, &redeem.outputs)?;
            if in_total != out_total + u128::from(redeem.amount) {
                return Err("asymmetric_values".into());
            }
            check_witnesses(&redeem.inputs, &redeem.witnesses, &txid)?;
            check_issuer(&redeem.issuer_pubkey, &redeem.issuer_signature, &txid, issuers)
        }
        SpecieTransaction::BridgeFunding(_) | SpecieTransaction::BridgePayout(_) => {
            Err("the memory ledger trusts no offline authority".into())
        }
        SpecieTransaction::Capability(kind) => match capability {
            Some(capability) => (capability.independent)(&**kind),
            None => Err("the memory ledger trusts no capability's kinds".into()),
        },
    }
}

fn check_issuer(pubkey: &[u8; 32], signature: &[u8; 64], txid: &Txid, issuers: &[[u8; 32]]) -> Result<(), String> {
    if !issuers.contains(pubkey) {
        return Err("unknown issuer".into());
    }
    let key = parse_xonly(pubkey).ok_or("bad issuer key")?;
    if !schnorr_verify(&key, &txid.0, signature) {
        return Err("invalid issuer signature".into());
    }
    Ok(())
}

/// What the in-memory ledger does with the next submissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Validate and apply, answer truthfully.
    Normal,
    /// Accept nothing: answer `busy`.
    Busy,
    /// Apply, but answer `pending` (the answer was late).
    ApplyButTimeOut,
    /// Lose the transaction, answer `pending`.
    LoseAndTimeOut,
}

/// A UHS in memory with the node's submit and query semantics.
pub struct MemoryLedger {
    pub uhs: RefCell<HashSet<UhsId>>,
    pub issuers: Vec<[u8; 32]>,
    /// The capability kinds it accepts, if any.
    pub capability: Option<CapabilityCheck>,
    pub mode: Cell<Mode>,
    pub submissions: Cell<usize>,
}

impl MemoryLedger {
    pub fn new(issuers: Vec<[u8; 32]>) -> Self {
        MemoryLedger {
            uhs: RefCell::new(HashSet::new()),
            issuers,
            capability: None,
            mode: Cell::new(Mode::Normal),
            submissions: Cell::new(0),
        }
    }

    /// A ledger that also accepts the kinds `capability` judges.
    pub fn with_capability(issuers: Vec<[u8; 32]>, capability: CapabilityCheck) -> Self {
        MemoryLedger {
            capability: Some(capability),
            ..MemoryLedger::new(issuers)
        }
    }

    /// Applies `tx` as the shards would; the status the node would report.
    pub fn apply(&self, tx: &SpecieTransaction) -> SubmitStatus {
        if let Err(message) = check_valid_with(tx, &self.issuers, self.capability.as_ref()) {
            return SubmitStatus::Invalid {
                code: "invalid".into(),
                index: None,
                message,
            };
        }
        let compact = tx.compact();
        let mut uhs = self.uhs.borrow_mut();
        if !compact.spent.iter().all(|id| uhs.contains(id)) {
            return SubmitStatus::Rejected {
                code: "input_spent_or_unknown".into(),
                message: "an input is spent or unknown".into(),
            };
        }
        if compact.created.iter().any(|id| uhs.contains(id)) {
            return SubmitStatus::Rejected {
                code: "output_already_exists".into(),
                message: "an output already exists".into(),
            };
        }
        for id in &compact.spent {
            uhs.remove(id);
        }
        uhs.extend(compact.created.iter().copied());
        debug_assert!(match tx {
            SpecieTransaction::Mint(_) => uhs.contains(&mint_marker(&tx.txid())),
            _ => true,
        });
        SubmitStatus::Confirmed
    }
}

impl Ledger for MemoryLedger {
    fn submit(&self, transactions: &[SpecieTransaction], _timeout_ms: u64) -> Result<Vec<SubmitResult>, ClientError> {
        self.submissions.set(self.submissions.get() + transactions.len());
        Ok(transactions
            .iter()
            .map(|tx| {
                let status = match self.mode.get() {
                    Mode::Normal => self.apply(tx),
                    Mode::Busy => SubmitStatus::Busy {
                        message: "the node is overloaded; retry later".into(),
                    },
                    Mode::ApplyButTimeOut => {
                        self.apply(tx);
                        SubmitStatus::Pending {
                            message: "not final after 10000 ms".into(),
                        }
                    }
                    Mode::LoseAndTimeOut => SubmitStatus::Pending {
                        message: "not final after 10000 ms".into(),
                    },
                };
                SubmitResult {
                    txid: Some(tx.txid()),
                    status,
                }
            })
            .collect())
    }

    fn query_uhs(&self, ids: &[UhsId]) -> Result<Vec<bool>, ClientError> {
        let uhs = self.uhs.borrow();
        Ok(ids.iter().map(|id| uhs.contains(id)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checker used by the other tests must refuse broken transactions, or their passing
    /// would mean nothing.
    #[test]
    fn the_validity_check_refuses_tampering() {
        let mut rng = rng(40);
        let mut alice = funded_wallet(&[100], &mut rng);
        let to = alice.latest_address().unwrap();
        let (tx, _) = alice.build_payment(&to, 60, &mut rng).unwrap();
        check_valid(&tx, &[]).unwrap();
        let SpecieTransaction::Transfer(transfer) = tx else {
            panic!("a payment is a transfer")
        };
        let mut more = transfer.clone();
        more.outputs[0].value += 1;
        assert!(check_valid(&SpecieTransaction::Transfer(more), &[]).is_err());
        let mut forged = transfer.clone();
        let last = forged.witnesses[0].0.len() - 1;
        forged.witnesses[0].0[last] ^= 1;
        assert!(check_valid(&SpecieTransaction::Transfer(forged), &[]).is_err());

        let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
        let (mint, _) = issuer.build_mint(&[(to, 5)], &mut rng).unwrap();
        let key = issuer.issuer_pubkey().unwrap().serialize();
        check_valid(&mint, &[key]).unwrap();
        assert!(check_valid(&mint, &[]).is_err(), "an issuer the node does not trust");
    }
}
