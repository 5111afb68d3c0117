//! Active auditors (Fabric CBDC §2: "active auditors must co-sign before submission"): an active
//! auditor reads a private transaction *before* it is submitted and co-signs it only if it can
//! read all of it and its policy allows it. The sentinels of a node configured with active
//! auditors refuse a private transaction without every one's co-signature
//! (`active_auditor_missing`), so nothing private settles unseen.
//!
//! The co-signature is a p2pk witness (BIP-340 over the txid) appended after the transaction's
//! own witnesses: witnesses are outside the txid, so co-signing changes nothing else, and the
//! ledger of record keeps it (non-repudiation of the auditor's approval).
//!
//! It co-signs when:
//! - the transaction is private (kind 0x07 or 0x08): there is nothing to co-sign otherwise;
//! - its value proof holds and it can decrypt every value (and, given an owner view, the owner
//!   audits hold and it can name every payee and every payer of an anonymous transaction);
//! - no output is worth more than its limit, if it has one.

use secp256k1::Keypair;
use specie_private_transactions::{AnonymousTransaction, AnonymousValues, ConfidentialTransaction};
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{NonceMode, P2pkWitness, SpecieTransaction, Witness};

use crate::{anonymous_outputs, AuditorSecret, Owner, OwnerView};

/// Prefix of the hash that derives an auditor's co-signing key from its seed.
pub const DOMAIN_COSIGNING_KEY: &[u8] = b"specie/auditor/cosigning-key/v1";

/// Why an active auditor does not co-sign. The code is what its service answers.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CosignRefusal {
    #[error("not a private transaction: only confidential and anonymous transactions are co-signed")]
    NotPrivate,
    #[error("its proofs do not verify")]
    InvalidProof,
    #[error("this auditor cannot read every value")]
    Unreadable,
    #[error("this auditor cannot name every payer and payee")]
    UnknownOwner,
    #[error("an output of {value} is over this auditor's limit of {limit}")]
    OverLimit { value: u64, limit: u64 },
}

impl CosignRefusal {
    pub fn code(&self) -> &'static str {
        match self {
            CosignRefusal::NotPrivate => "not_private",
            CosignRefusal::InvalidProof => "invalid_proof",
            CosignRefusal::Unreadable => "unreadable",
            CosignRefusal::UnknownOwner => "unknown_owner",
            CosignRefusal::OverLimit { .. } => "over_limit",
        }
    }
}

/// An active auditor: its value key, its co-signing key (both from one seed), an optional view
/// of owners, and an optional limit per output.
pub struct ActiveAuditor {
    values: AuditorSecret,
    cosigning: Keypair,
    owners: Option<OwnerView>,
    limit: Option<u64>,
}

impl ActiveAuditor {
    pub fn new(seed: &[u8; 32], owners: Option<OwnerView>, limit: Option<u64>) -> ActiveAuditor {
        ActiveAuditor {
            values: AuditorSecret::from_seed(seed),
            cosigning: cosigning_keypair(seed),
            owners,
            limit,
        }
    }

    /// The x-only key its co-signatures verify under: what `specie node --active-auditor` takes.
    pub fn public_key(&self) -> [u8; 32] {
        xonly_bytes(&self.cosigning)
    }

    /// Reviews `tx` and, if it passes, returns the co-signature to append to its witnesses.
    pub fn review(&self, tx: &SpecieTransaction) -> Result<Witness, CosignRefusal> {
        let values: Vec<u64> = if let Some(tx) = tx.capability::<ConfidentialTransaction>() {
            tx.proof
                .verify(&tx.context())
                .map_err(|_| CosignRefusal::InvalidProof)?;
            let hidden = tx.proof.audit(&self.values).map_err(|_| CosignRefusal::Unreadable)?;
            tx.transparent_outputs.iter().map(|o| o.value).chain(hidden).collect()
        } else if let Some(tx) = tx.capability::<AnonymousTransaction>() {
            self.review_anonymous(tx)?
        } else {
            return Err(CosignRefusal::NotPrivate);
        };
        if let (Some(limit), Some(&value)) = (self.limit, values.iter().max()) {
            if value > limit {
                return Err(CosignRefusal::OverLimit { value, limit });
            }
        }
        Ok(P2pkWitness::sign(&self.cosigning, &tx.txid().0, NonceMode::Randomized).to_witness())
    }

    /// Every output's value (transparent, then anonymous), once the proofs hold and, with an
    /// owner view, every payee and payer is named.
    fn review_anonymous(&self, tx: &AnonymousTransaction) -> Result<Vec<u64>, CosignRefusal> {
        let context = tx.context();
        if let AnonymousValues::Hidden(proof) = &tx.values {
            proof.verify(&context).map_err(|_| CosignRefusal::InvalidProof)?;
        }
        let audits_hold = tx.owner_audits_hold(&context);
        if !audits_hold {
            return Err(CosignRefusal::InvalidProof);
        }
        let outputs = anonymous_outputs(tx, &self.values, self.owners.as_ref());
        if let Some(view) = &self.owners {
            let payers_named = tx.spend_proofs.iter().all(|proof| {
                proof
                    .auditor_ciphertexts()
                    .iter()
                    .any(|c| view.directory.identify(&view.secret, c).is_ok())
            });
            if !payers_named || outputs.iter().any(|p| p.owner == Owner::Unknown) {
                return Err(CosignRefusal::UnknownOwner);
            }
        }
        let hidden: Option<Vec<u64>> = outputs.iter().map(|p| p.value).collect();
        let hidden = hidden.ok_or(CosignRefusal::Unreadable)?;
        Ok(tx.transparent_outputs.iter().map(|o| o.value).chain(hidden).collect())
    }
}

/// The co-signing key of the auditor whose seed is `seed`.
fn cosigning_keypair(seed: &[u8; 32]) -> Keypair {
    let mut preimage = DOMAIN_COSIGNING_KEY.to_vec();
    preimage.extend_from_slice(seed);
    let mut secret = specie_transaction::hash::sha256(&preimage);
    // A hash is a valid secret key but with probability ~2^-128; rehash until it is.
    loop {
        if let Some(keypair) = keypair_from_secret(&secret) {
            return keypair;
        }
        secret = specie_transaction::hash::sha256(&secret);
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use specie_credential::{AuditDirectory, EnrolmentId, OwnerOpening, RegistrationAuthority};
    use specie_private_transactions::AnonymousPlan;
    use specie_transaction::signing::{keypair_from_secret, parse_xonly, schnorr_verify, xonly_bytes};
    use specie_transaction::{witness_program_commitment, MintTransaction, Output};

    use super::*;

    const SEED: [u8; 32] = [0xa7; 32];

    /// An anonymous entry of 100 (hidden) to `owner_id`, proven for this auditor's keys.
    fn entry(owner_id: u64, rng: &mut StdRng) -> SpecieTransaction {
        let payer = keypair_from_secret(&[1; 32]).unwrap();
        let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
            [3; 32],
            vec![Output {
                witness_program_commitment: witness_program_commitment(&xonly_bytes(&payer)),
                value: 100,
            }],
            &keypair_from_secret(&[2; 32]).unwrap(),
            NonceMode::Deterministic,
        ));
        // An entry spends coins, not anonymous notes: no credential is needed, only the RA's key.
        let ra = RegistrationAuthority::from_seed(&[9; 32]);
        let plan = AnonymousPlan {
            transparent_inputs: vec![mint.created_outputs()[0].to_input()],
            anonymous_inputs: vec![],
            outputs: vec![(OwnerOpening::random(EnrolmentId(owner_id), rng), 100)],
            transparent_outputs: vec![],
            hide_values: true,
            value_auditors: vec![AuditorSecret::from_seed(&SEED).public()],
            owner_auditors: vec![specie_credential::AuditorSecret::from_seed(&SEED).public()],
        };
        let (tx, _) = plan
            .prove_and_sign(&[payer], None, &ra.public_key(), NonceMode::Deterministic, rng)
            .unwrap();
        SpecieTransaction::from(tx)
    }

    fn view(ids: &[u64]) -> OwnerView {
        OwnerView {
            secret: specie_credential::AuditorSecret::from_seed(&SEED),
            directory: AuditDirectory::new(ids.iter().map(|id| EnrolmentId(*id))),
        }
    }

    #[test]
    fn it_co_signs_what_it_can_read_and_its_policy_passes_and_nothing_else() {
        let mut rng = StdRng::seed_from_u64(4);
        let tx = entry(5, &mut rng);
        let auditor = ActiveAuditor::new(&SEED, Some(view(&[5])), Some(100));
        let witness = auditor.review(&tx).expect("readable, named, within the limit");
        let p2pk = P2pkWitness::parse(&witness).unwrap();
        assert_eq!(p2pk.pubkey, auditor.public_key());
        let key = parse_xonly(&p2pk.pubkey).unwrap();
        assert!(
            schnorr_verify(&key, &tx.txid().0, &p2pk.signature),
            "a BIP-340 signature of the txid"
        );
        assert_eq!(
            ActiveAuditor::new(&SEED, Some(view(&[5])), Some(99)).review(&tx),
            Err(CosignRefusal::OverLimit { value: 100, limit: 99 })
        );
        assert_eq!(
            ActiveAuditor::new(&SEED, Some(view(&[6])), None).review(&tx),
            Err(CosignRefusal::UnknownOwner),
            "an owner outside its directory"
        );
        assert_eq!(
            ActiveAuditor::new(&[0xa8; 32], None, None).review(&tx),
            Err(CosignRefusal::Unreadable),
            "another auditor's values"
        );
        let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
            [3; 32],
            vec![],
            &keypair_from_secret(&[2; 32]).unwrap(),
            NonceMode::Deterministic,
        ));
        assert_eq!(auditor.review(&mint), Err(CosignRefusal::NotPrivate));
        let mut tampered = tx.capability::<AnonymousTransaction>().unwrap().clone();
        tampered.owner_audits.clear();
        assert_eq!(
            auditor.review(&SpecieTransaction::from(tampered)),
            Err(CosignRefusal::UnknownOwner),
            "no audit addressed to it: it cannot name the owner"
        );
    }
}
