//! Passive auditors (Fabric CBDC framework, seed 003 §2 and App. C): an auditor with jurisdiction
//! reads the ledger of record from genesis and reconstructs who paid whom what.
//!
//! - Transparent transactions are read as they are.
//! - Every confidential transaction carries its output values encrypted to the auditors with
//!   jurisdiction, with a proof that they are the committed values. The sentinels refuse one that
//!   leaves an auditor out. The auditor decrypts the values of the outputs.
//! - It learns the values of confidential *inputs* by remembering the outputs it read before, so
//!   it must read from genesis. That is why it reads the ledger rather than the UHS.
//!
//! - Every anonymous transaction carries each output's owner encrypted to the owner auditors with
//!   jurisdiction (and each spend proof the payer's), proven to be the committed owner. An
//!   auditor given its owner key and the directory of ids it oversees names those owners.
//!
//! - Every unlinkable transaction carries each spender's and each payee's enrolment id, and each
//!   new token's value, encrypted to the owner auditors with jurisdiction, proven; the auditor
//!   names the parties the same way and reads what each payee got with its owner key. A spent
//!   token's value is not repeated (the spend does not say which token it was), but what enters
//!   and leaves the level is in clear, so the auditor knows the level's total exactly
//!   ([`PassiveAuditor::unlinkable_pool`]), which [`PassiveAuditor::holdings`] counts.
//!
//! Pure: the caller fetches the blocks (`GET /v1/ledger/blocks/{height}`) and hands them over in
//! order. Nothing here reads a clock, a file or a socket.

use std::collections::HashMap;

use specie_confidential::AuditorSecret;
use specie_credential::{AuditDirectory, AuditorSecret as OwnerAuditorSecret, EnrolmentId};
use specie_private_transactions::{
    AnonymousTransaction, AnonymousValues, ConfidentialTransaction, UnlinkableTransaction,
};
use specie_transaction::signing::{parse_xonly, schnorr_verify, P2pkWitness};
use specie_transaction::{SpecieTransaction, Txid, UhsId};

/// Who owns an output, as far as the auditor can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The witness program commitment of an ordinary or confidential output's owner.
    Key([u8; 32]),
    /// The enrolled owner of an anonymous output, named from its audit.
    Enrolled(EnrolmentId),
    /// An anonymous output whose owner this auditor cannot name (another jurisdiction's), or an
    /// output the auditor never saw created.
    Unknown,
}

impl std::fmt::Display for Owner {
    /// `key:<hex>`, `id:<enrolment id>` or `unknown`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Owner::Key(key) => write!(f, "key:{}", hex::encode(key)),
            Owner::Enrolled(id) => write!(f, "id:{}", id.0),
            Owner::Unknown => f.write_str("unknown"),
        }
    }
}

/// One side of a payment: whose it is, and how much, if the auditor can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Party {
    pub owner: Owner,
    /// `None` for a confidential value this auditor cannot read (another jurisdiction's).
    pub value: Option<u64>,
}

/// A transaction as the auditor sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audited {
    pub height: u64,
    pub position: u32,
    pub txid: Txid,
    pub kind: &'static str,
    /// Values hidden (confidential, or anonymous and confidential).
    pub confidential: bool,
    /// Owners hidden (anonymous).
    pub anonymous: bool,
    /// Inputs spent by serial number (unlinkable): the parties are named, the new tokens' values
    /// read with the owner key, the spent ones' `None`.
    pub unlinkable: bool,
    /// Who paid: the outputs spent.
    pub inputs: Vec<Party>,
    /// Who was paid: the outputs created, transparent first.
    pub outputs: Vec<Party>,
    /// Value entering or leaving circulation in clear (mint, redeem, fundings, payouts): what
    /// the inputs and outputs do not show.
    pub clear_in: u64,
    pub clear_out: u64,
    /// An output's value is over the auditor's threshold.
    pub flagged: bool,
    /// The x-only keys whose co-signatures of the txid follow a private transaction's own
    /// witnesses and verify (the active auditors who approved it before submission).
    pub cosigned_by: Vec<[u8; 32]>,
}

impl Audited {
    /// Whether every value is known to the auditor.
    pub fn readable(&self) -> bool {
        self.inputs.iter().chain(&self.outputs).all(|p| p.value.is_some())
    }

    /// The total paid out, if every output is readable.
    pub fn paid(&self) -> Option<u64> {
        self.outputs.iter().map(|p| p.value).sum()
    }
}

/// What an auditor needs to name anonymous owners: its owner key and the ids it oversees.
pub struct OwnerView {
    pub secret: OwnerAuditorSecret,
    pub directory: AuditDirectory,
}

mod active;
pub use active::{ActiveAuditor, CosignRefusal, DOMAIN_COSIGNING_KEY};

/// A passive auditor's state: its keys, and what it knows of every unspent output.
pub struct PassiveAuditor {
    secret: AuditorSecret,
    owners: Option<OwnerView>,
    flag_over: u64,
    unspent: HashMap<UhsId, Party>,
    unlinkable_pool: u64,
    height: u64,
}

/// Why a block cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuditReadError {
    #[error("block {got} does not follow block {read}, the last one read")]
    OutOfOrder { read: u64, got: u64 },
}

impl PassiveAuditor {
    /// An auditor holding `secret` that flags every transaction with an output over `flag_over`.
    pub fn new(secret: AuditorSecret, flag_over: u64) -> PassiveAuditor {
        PassiveAuditor {
            secret,
            owners: None,
            flag_over,
            unspent: HashMap::new(),
            unlinkable_pool: 0,
            height: 0,
        }
    }

    /// This auditor, naming the anonymous owners `view` can read.
    pub fn with_owner_view(self, view: OwnerView) -> PassiveAuditor {
        PassiveAuditor {
            owners: Some(view),
            ..self
        }
    }

    /// The height of the last block read.
    pub fn height(&self) -> u64 {
        self.height
    }

    /// The value of every unspent output the auditor has read and of the unlinkable level, and
    /// how many outputs it cannot read (another jurisdiction's): with nothing unreadable, the
    /// money in circulation.
    pub fn holdings(&self) -> (u64, usize) {
        let readable: u64 = self.unspent.values().filter_map(|p| p.value).sum();
        let unreadable = self.unspent.values().filter(|p| p.value.is_none()).count();
        (readable + self.unlinkable_pool, unreadable)
    }

    /// The value inside the unlinkable level: what entered it in clear less what left. Its
    /// tokens' values are hidden, their total is not.
    pub fn unlinkable_pool(&self) -> u64 {
        self.unlinkable_pool
    }

    /// Reads the next block of the ledger of record, block `height`'s transactions in order (the
    /// caller has checked the block: its chain, its commitment to its records, its endorsements):
    /// every transaction in it, as this auditor sees it.
    pub fn read<'a>(
        &mut self,
        height: u64,
        transactions: impl IntoIterator<Item = &'a SpecieTransaction>,
    ) -> Result<Vec<Audited>, AuditReadError> {
        if height != self.height + 1 {
            return Err(AuditReadError::OutOfOrder {
                read: self.height,
                got: height,
            });
        }
        let audited = transactions
            .into_iter()
            .enumerate()
            .map(|(position, tx)| self.read_transaction(height, position as u32, tx))
            .collect();
        self.height = height;
        Ok(audited)
    }

    fn read_transaction(&mut self, height: u64, position: u32, tx: &SpecieTransaction) -> Audited {
        let compact = tx.compact();
        let mut inputs: Vec<Party> = compact
            .spent
            .iter()
            .map(|id| {
                self.unspent.remove(id).unwrap_or(Party {
                    owner: Owner::Unknown,
                    value: None,
                })
            })
            .collect();
        let mut outputs: Vec<Party> = tx
            .outputs()
            .iter()
            .map(|o| Party {
                owner: Owner::Key(o.witness_program_commitment),
                value: Some(o.value),
            })
            .collect();
        if let Some(confidential) = tx.capability::<ConfidentialTransaction>() {
            let values = confidential.proof.audit(&self.secret).ok();
            outputs.extend(confidential.owners.iter().enumerate().map(|(i, owner)| Party {
                owner: Owner::Key(*owner),
                value: values.as_ref().and_then(|v| v.get(i).copied()),
            }));
        }
        let anonymous = tx.capability::<AnonymousTransaction>();
        if let Some(anonymous) = anonymous {
            outputs.extend(self.anonymous_outputs(anonymous));
        }
        // The created ids are the outputs' in order, then the kind's marker (which no one owns).
        // An unlinkable transaction's tokens and serial numbers are never spent by id: the
        // auditor keeps their total instead.
        for (id, party) in compact.created.iter().zip(&outputs) {
            self.unspent.insert(*id, *party);
        }
        let unlinkable = tx.capability::<UnlinkableTransaction>();
        if let Some(unlinkable) = unlinkable {
            let (spenders, payees) = self.unlinkable_parties(unlinkable);
            inputs.extend(spenders);
            outputs.extend(payees);
            let amounts = unlinkable.proof.amounts();
            // The sentinels checked the transfer balanced, so the level never gives out more than
            // entered it; should it (k certifiers compromised), the pool reads empty rather than wrap.
            self.unlinkable_pool = (self.unlinkable_pool + amounts.issued).saturating_sub(amounts.redeemed);
        }
        let (clear_in, clear_out) = clear_values(tx);
        let flagged = outputs.iter().any(|p| p.value.is_some_and(|v| v > self.flag_over));
        Audited {
            height,
            position,
            txid: compact.txid,
            kind: tx.kind_name(),
            confidential: tx.capability::<ConfidentialTransaction>().is_some()
                || anonymous.is_some_and(|anonymous| anonymous.values.clear().is_none()),
            anonymous: anonymous.is_some(),
            unlinkable: unlinkable.is_some(),
            inputs,
            outputs,
            clear_in,
            clear_out,
            flagged,
            cosigned_by: cosigners(tx, &compact.txid),
        }
    }
}

/// The keys whose p2pk co-signatures of `txid` follow a private transaction's own witnesses
/// (one per input a key owns: every confidential one's, an anonymous one's transparent ones) and
/// verify. A co-signature that does not verify is not listed:
/// the sentinels refused such a transaction, so one in the ledger means the node let it in.
fn cosigners(tx: &SpecieTransaction, txid: &Txid) -> Vec<[u8; 32]> {
    let (witnesses, own) = if let Some(tx) = tx.capability::<ConfidentialTransaction>() {
        (
            &tx.witnesses,
            tx.transparent_inputs.len() + tx.confidential_inputs.len(),
        )
    } else if let Some(tx) = tx.capability::<AnonymousTransaction>() {
        (&tx.witnesses, tx.transparent_inputs.len())
    } else if let Some(tx) = tx.capability::<UnlinkableTransaction>() {
        (&tx.witnesses, tx.transparent_inputs.len())
    } else {
        return vec![];
    };
    let verifies = |p2pk: &P2pkWitness| {
        parse_xonly(&p2pk.pubkey).is_some_and(|key| schnorr_verify(&key, &txid.0, &p2pk.signature))
    };
    (witnesses.iter().skip(own))
        .filter_map(|witness| P2pkWitness::parse(witness).ok())
        .filter(verifies)
        .map(|p2pk| p2pk.pubkey)
        .collect()
}

impl PassiveAuditor {
    fn anonymous_outputs(&self, tx: &AnonymousTransaction) -> Vec<Party> {
        anonymous_outputs(tx, &self.secret, self.owners.as_ref())
    }

    /// An unlinkable transaction's spenders (one per serial number) and payees (one per token),
    /// named from the ciphertexts addressed to this auditor's owner key; each payee's value read
    /// with it, the spent tokens' unknown.
    fn unlinkable_parties(&self, tx: &UnlinkableTransaction) -> (Vec<Party>, Vec<Party>) {
        let owner = |ciphertext: Option<&specie_credential::OwnerCiphertext>| {
            (self.owners.as_ref().zip(ciphertext))
                .and_then(|(view, ciphertext)| view.directory.identify(&view.secret, ciphertext).ok())
                .map_or(Owner::Unknown, Owner::Enrolled)
        };
        let (spenders, payees, values) = match &self.owners {
            Some(view) => {
                let (spenders, payees) = tx.proof.party_ciphertexts(&view.secret.public());
                (spenders, payees, tx.proof.value_ciphertexts(&view.secret.public()))
            }
            None => (vec![], vec![], vec![]),
        };
        let value = |i: usize| {
            let view = self.owners.as_ref()?;
            view.secret.read_value(values.get(i)?).ok()
        };
        let spenders = (0..tx.proof.serial_numbers().count()).map(|i| Party {
            owner: owner(spenders.get(i)),
            value: None,
        });
        let payees = (0..tx.proof.output_tokens().count()).map(|i| Party {
            owner: owner(payees.get(i)),
            value: value(i),
        });
        (spenders.collect(), payees.collect())
    }
}

/// The anonymous outputs of `tx`: each owner named from the audit addressed to `owners`' key
/// (the sentinels checked it is the committed owner), each value in clear or decrypted with
/// `values`.
fn anonymous_outputs(tx: &AnonymousTransaction, values: &AuditorSecret, owners: Option<&OwnerView>) -> Vec<Party> {
    let amounts: Vec<Option<u64>> = match &tx.values {
        AnonymousValues::Clear(amounts) => amounts.iter().map(|v| Some(*v)).collect(),
        AnonymousValues::Hidden(proof) => match proof.audit(values) {
            Ok(amounts) => amounts.into_iter().map(Some).collect(),
            Err(_) => vec![None; tx.owners.len()],
        },
    };
    let audits_per_output = tx.owner_audits.len().checked_div(tx.owners.len()).unwrap_or(0);
    (0..tx.owners.len())
        .map(|i| {
            let audits = tx
                .owner_audits
                .iter()
                .skip(i * audits_per_output)
                .take(audits_per_output);
            let owner = owners
                .and_then(|view| {
                    audits
                        .filter_map(|audit| view.directory.identify(&view.secret, audit.ciphertext()).ok())
                        .next()
                })
                .map_or(Owner::Unknown, Owner::Enrolled);
            Party {
                owner,
                value: amounts.get(i).copied().flatten(),
            }
        })
        .collect()
}

/// Value a transaction brings into or takes out of the outputs it spends and creates, in clear:
/// a mint's outputs come from nowhere; a redeem, funding or payout moves value to or from
/// another mode or out of circulation (whatever kind says so: its circulation).
fn clear_values(tx: &SpecieTransaction) -> (u64, u64) {
    let circulation = tx.circulation();
    (circulation.entered, circulation.left)
}
