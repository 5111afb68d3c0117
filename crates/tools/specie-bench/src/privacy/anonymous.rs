//! The anonymous level in `specie bench privacy`: 2-in/2-out anonymous payments (owners behind
//! commitments, spends proven with a registration authority's credential, one owner auditor),
//! with values in clear and hidden, beside the spend proof verified alone and in batches of 32.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_credential::{
    AuditorSecret as OwnerAuditorSecret, EnrolmentId, Identity, Jurisdiction, OwnerOpening, RaPublicKey,
    RegistrationAuthority, UserSecret,
};
use specie_private_transactions::{AnonymousPlan, AnonymousSpend, AnonymousTransaction, PrivacyRules};
use specie_sentinel::TrustedKeys;
use specie_transaction::{CreatedOutput, NonceMode, SpecieTransaction};

use crate::ceiling::per_cpu_second;

const ALICE: EnrolmentId = EnrolmentId(1);
const BOB: EnrolmentId = EnrolmentId(2);

/// The registration authority, alice's identity, the owner auditor, and the payments proven once.
pub struct AnonymousPayments {
    pub authority: RaPublicKey,
    pub owner_auditor: OwnerAuditorSecret,
    pub(super) alice: Identity,
    /// Entries of two coins each into two anonymous notes, in clear then hidden.
    pub entries: Vec<SpecieTransaction>,
    /// 2-in/2-out anonymous payments spending those notes: values in clear, then hidden.
    pub clear: Vec<SpecieTransaction>,
    pub hidden: Vec<SpecieTransaction>,
    /// One payment of each mode's plan, to time proving.
    plans: [AnonymousPlan; 2],
}

/// What the anonymous level costs, in the units printed.
#[derive(serde::Serialize, Default)]
pub struct AnonymousFigures {
    pub spend_proof_verify_per_cpu_s: f64,
    pub spend_proof_batch32_verify_per_cpu_s: f64,
    pub anonymous_prove_ms: f64,
    pub anonymous_confidential_prove_ms: f64,
    pub anonymous_validate_per_cpu_s: f64,
    pub anonymous_confidential_validate_per_cpu_s: f64,
    pub anonymous_validate_all_cores_per_s: f64,
    pub anonymous_confidential_validate_all_cores_per_s: f64,
}

impl AnonymousPayments {
    /// Enrols alice and bob, and proves (on all cores) an entry of `coins[2i..2i+2]` and a
    /// payment of its two notes for each pair of coins: the first half in clear, the rest hidden.
    pub fn prove(
        coins: &[CreatedOutput],
        key: &Keypair,
        value_auditor: specie_confidential::AuditorKey,
        rng: &mut StdRng,
    ) -> AnonymousPayments {
        let mut ra = RegistrationAuthority::from_seed(&rng.gen());
        let alice = enrol(&mut ra, ALICE, rng);
        let owner_auditor = OwnerAuditorSecret::from_seed(&rng.gen());
        let base = AnonymousPlan {
            transparent_inputs: vec![],
            anonymous_inputs: vec![],
            outputs: vec![],
            transparent_outputs: vec![],
            hide_values: false,
            value_auditors: vec![value_auditor],
            owner_auditors: vec![owner_auditor.public()],
        };
        let pairs: Vec<&[CreatedOutput]> = coins.chunks_exact(2).collect();
        let half = pairs.len() / 2;
        let authority = ra.public_key();
        let seed: u64 = rng.gen();
        let proven: Vec<(SpecieTransaction, SpecieTransaction, AnonymousPlan)> = pairs
            .into_par_iter()
            .enumerate()
            .map(|(n, pair)| {
                let mut rng = StdRng::seed_from_u64(seed ^ n as u64);
                let hide_values = n >= half;
                let owners = [
                    OwnerOpening::random(ALICE, &mut rng),
                    OwnerOpening::random(ALICE, &mut rng),
                ];
                let entry = AnonymousPlan {
                    transparent_inputs: pair.iter().map(CreatedOutput::to_input).collect(),
                    outputs: vec![(owners[0], 700), (owners[1], 1_300)],
                    hide_values,
                    ..base.clone()
                };
                let (entered, openings) = entry
                    .prove_and_sign(&[*key, *key], None, &authority, NonceMode::Randomized, &mut rng)
                    .expect("an honest entry proves");
                let notes = entered.created_anonymous_outputs();
                let pay = AnonymousPlan {
                    anonymous_inputs: (0..2)
                        .map(|i| AnonymousSpend {
                            input: notes[i].to_input(),
                            owner: owners[i],
                            value: openings[i],
                        })
                        .collect(),
                    outputs: vec![
                        (OwnerOpening::random(BOB, &mut rng), 500),
                        (OwnerOpening::random(ALICE, &mut rng), 1_500),
                    ],
                    hide_values,
                    ..base.clone()
                };
                let (paid, _) = pay
                    .prove_and_sign(&[], Some(&alice), &authority, NonceMode::Randomized, &mut rng)
                    .expect("an honest payment proves");
                (SpecieTransaction::from(entered), SpecieTransaction::from(paid), pay)
            })
            .collect();
        let (clear, hidden) = proven.split_at(half);
        let plan_of = |set: &[(SpecieTransaction, SpecieTransaction, AnonymousPlan)]| {
            set.first()
                .map(|(_, _, plan)| plan.clone())
                .expect("at least one payment of each mode")
        };
        AnonymousPayments {
            plans: [plan_of(clear), plan_of(hidden)],
            entries: proven.iter().map(|(entry, _, _)| entry.clone()).collect(),
            clear: clear.iter().map(|(_, pay, _)| pay.clone()).collect(),
            hidden: hidden.iter().map(|(_, pay, _)| pay.clone()).collect(),
            authority,
            owner_auditor,
            alice,
        }
    }

    /// The primitives and the sentinel's validation, as the transparent and confidential levels
    /// are measured beside them: by a sentinel trusting `issuers` and, for the private kinds,
    /// the value `auditors`, this level's registration authority and owner auditor.
    pub fn measure(&self, issuers: &TrustedKeys, auditors: Vec<[u8; 32]>, measure: Duration) -> AnonymousFigures {
        let rules = PrivacyRules::new(
            auditors,
            Some(self.authority.clone()),
            vec![self.owner_auditor.public()],
            vec![],
        );
        let trusted = issuers.clone().with_capability(std::sync::Arc::new(rules));
        let first = |txs: &[SpecieTransaction]| -> AnonymousTransaction {
            (txs[0].capability::<AnonymousTransaction>())
                .expect("anonymous payments")
                .clone()
        };
        let clear = first(&self.clear);
        let txid = clear.txid();
        let spend = (&clear.spend_proofs[0], &clear.anonymous_inputs[0].owner, &txid.0);
        let batch: Vec<specie_credential::SpendItem<'_>> = (0..32).map(|_| spend).collect();
        let mut prove_rng = StdRng::seed_from_u64(3);
        let mut prove_ms = |plan: &AnonymousPlan| {
            1000.0
                / per_cpu_second(measure, || {
                    plan.prove_and_sign(
                        &[],
                        Some(&self.alice),
                        &self.authority,
                        NonceMode::Randomized,
                        &mut prove_rng,
                    )
                    .expect("proves");
                })
        };
        let (clear_ms, hidden_ms) = (prove_ms(&self.plans[0]), prove_ms(&self.plans[1]));
        let validate = |tx: &SpecieTransaction| {
            per_cpu_second(measure, || specie_sentinel::validate(tx, &trusted).expect("valid"))
        };
        AnonymousFigures {
            spend_proof_verify_per_cpu_s: per_cpu_second(measure, || {
                spend.0.verify(&self.authority, spend.1, spend.2).expect("valid")
            }),
            spend_proof_batch32_verify_per_cpu_s: 32.0
                * per_cpu_second(measure, || {
                    specie_credential::verify_batch(&self.authority, &batch).expect("valid")
                }),
            anonymous_prove_ms: clear_ms,
            anonymous_confidential_prove_ms: hidden_ms,
            anonymous_validate_per_cpu_s: validate(&self.clear[0]),
            anonymous_confidential_validate_per_cpu_s: validate(&self.hidden[0]),
            anonymous_validate_all_cores_per_s: super::validate_all_cores(&self.clear, &trusted, measure),
            anonymous_confidential_validate_all_cores_per_s: super::validate_all_cores(&self.hidden, &trusted, measure),
        }
    }
}

fn enrol(ra: &mut RegistrationAuthority, id: EnrolmentId, rng: &mut StdRng) -> Identity {
    let secret = UserSecret::from_seed(&rng.gen());
    let challenge = ra.challenge(id, Jurisdiction(1), rng);
    let request = secret.enrolment_request(&ra.public_key(), &challenge, rng);
    let credential = ra.enrol(&request, rng).expect("a fresh id enrols");
    Identity::new(secret, credential, &ra.public_key()).expect("the RA's own credential")
}

impl AnonymousFigures {
    pub fn print(&self) {
        println!(
            "  anonymous level (owners behind commitments, spends proven with the RA's credential, one owner auditor)"
        );
        println!(
            "    spend proof (BBS credential)          {:>10.0} /s verified alone, {:.0} /s in batches of 32 ({:.2}x)",
            self.spend_proof_verify_per_cpu_s,
            self.spend_proof_batch32_verify_per_cpu_s,
            self.spend_proof_batch32_verify_per_cpu_s / self.spend_proof_verify_per_cpu_s
        );
        println!(
            "    wallet: prove 2-in/2-out              {:>10.1} ms anonymous, {:.1} ms anonymous and confidential",
            self.anonymous_prove_ms, self.anonymous_confidential_prove_ms
        );
        println!(
            "    validate anonymous                    {:>8.0} /s one core, {:>8.0} /s on all cores (spend proofs in batches)",
            self.anonymous_validate_per_cpu_s, self.anonymous_validate_all_cores_per_s
        );
        println!(
            "    validate anonymous and confidential   {:>8.0} /s one core, {:>8.0} /s on all cores",
            self.anonymous_confidential_validate_per_cpu_s, self.anonymous_confidential_validate_all_cores_per_s
        );
    }
}
