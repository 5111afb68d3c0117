//! The unlinkable level in `specie bench privacy`: 2-in/2-out unlinkable payments (certified
//! tokens spent by serial number, one proof of the whole transfer, the owner auditor reading
//! every party), beside the proof verified alone and in batches of 32, proving in the wallet and
//! one certifier's share.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_credential::unlinkable::{
    deal_certifiers, verify_unlinkable_batch, Certificate, CertificateShare, CertifierGroup, CertifierSecret,
    SpentToken, TokenOpening, UnlinkableKeys,
};
use specie_credential::EnrolmentId;
use specie_private_transactions::{PrivacyRules, UnlinkableBuild, UnlinkableTransaction};
use specie_sentinel::TrustedKeys;
use specie_transaction::{CreatedOutput, NonceMode, SpecieTransaction};

use super::anonymous::AnonymousPayments;
use crate::ceiling::per_cpu_second;

const ALICE: EnrolmentId = EnrolmentId(1);
const BOB: EnrolmentId = EnrolmentId(2);

/// The certifiers, and the payments proven once.
pub struct UnlinkablePayments {
    pub group: CertifierGroup,
    certifiers: Vec<CertifierSecret>,
    /// Entries of two coins each into two tokens of alice's.
    pub entries: Vec<SpecieTransaction>,
    /// 2-in/2-out payments spending those tokens.
    pub payments: Vec<SpecieTransaction>,
    /// One payment's tokens, to time proving.
    sample: Vec<(TokenOpening, Certificate)>,
}

/// What the unlinkable level costs, in the units printed.
#[derive(serde::Serialize, Default)]
pub struct UnlinkableFigures {
    pub unlinkable_proof_verify_per_cpu_s: f64,
    pub unlinkable_proof_batch32_verify_per_cpu_s: f64,
    pub unlinkable_prove_ms: f64,
    pub certify_share_ms: f64,
    pub unlinkable_validate_per_cpu_s: f64,
    pub unlinkable_validate_all_cores_per_s: f64,
}

fn build(
    spent: Vec<SpentToken<'_>>,
    outputs: Vec<TokenOpening>,
    auditor: specie_credential::AuditorKey,
) -> UnlinkableBuild<'_> {
    UnlinkableBuild {
        transparent_inputs: vec![],
        spent,
        outputs,
        transparent_outputs: vec![],
        owner_auditors: vec![auditor],
    }
}

impl UnlinkablePayments {
    /// A 2-of-3 certifier group; for each pair of `coins` (alice's, signed with `key`), an entry
    /// into two tokens of alice's, certified, and a payment of both, proven on all cores.
    pub fn prove(
        coins: &[CreatedOutput],
        key: &Keypair,
        anonymous: &AnonymousPayments,
        rng: &mut StdRng,
    ) -> UnlinkablePayments {
        let (group, certifiers) = deal_certifiers(2, 3, rng).expect("2 of 3");
        let keys = UnlinkableKeys {
            authority: &anonymous.authority,
            certifiers: &group,
        };
        let auditor = anonymous.owner_auditor.public();
        let alice = &anonymous.alice;
        let seed: u64 = rng.gen();
        let proven: Vec<_> = coins
            .chunks_exact(2)
            .collect::<Vec<_>>()
            .into_par_iter()
            .enumerate()
            .map(|(n, pair)| {
                let mut rng = StdRng::seed_from_u64(seed ^ n as u64);
                let tokens = [
                    TokenOpening::random(ALICE, 700, &mut rng),
                    TokenOpening::random(ALICE, 1_300, &mut rng),
                ];
                let entry = UnlinkableBuild {
                    transparent_inputs: pair.iter().map(CreatedOutput::to_input).collect(),
                    ..build(vec![], tokens.to_vec(), auditor)
                }
                .prove_and_sign(&[*key, *key], alice, &keys, NonceMode::Randomized, &mut rng)
                .expect("an honest entry proves");
                let held: Vec<(TokenOpening, Certificate)> = tokens
                    .into_iter()
                    .map(|opening| {
                        let shares: Vec<CertificateShare> =
                            certifiers[..2].iter().map(|c| c.certify(&opening.token())).collect();
                        let certificate = opening.certificate(&group, &shares).expect("two honest shares");
                        (opening, certificate)
                    })
                    .collect();
                let spent = held
                    .iter()
                    .map(|(opening, certificate)| SpentToken { opening, certificate })
                    .collect();
                let outputs = vec![
                    TokenOpening::random(BOB, 500, &mut rng),
                    TokenOpening::random(ALICE, 1_500, &mut rng),
                ];
                let payment = build(spent, outputs, auditor)
                    .prove_and_sign(&[], alice, &keys, NonceMode::Randomized, &mut rng)
                    .expect("an honest payment proves");
                (SpecieTransaction::from(entry), SpecieTransaction::from(payment), held)
            })
            .collect();
        UnlinkablePayments {
            sample: proven
                .first()
                .map(|(_, _, held)| held.clone())
                .expect("at least one payment"),
            entries: proven.iter().map(|(entry, _, _)| entry.clone()).collect(),
            payments: proven.iter().map(|(_, payment, _)| payment.clone()).collect(),
            group,
            certifiers,
        }
    }

    /// The proof alone and in batches, proving, certifying, and the sentinel's validation by a
    /// sentinel trusting `issuers` and this level's keys.
    pub fn measure(
        &self,
        issuers: &TrustedKeys,
        anonymous: &AnonymousPayments,
        measure: Duration,
    ) -> UnlinkableFigures {
        let auditor = anonymous.owner_auditor.public();
        let rules = PrivacyRules::new(vec![], Some(anonymous.authority.clone()), vec![auditor], vec![])
            .with_certifiers(self.group.clone());
        let trusted = issuers.clone().with_capability(std::sync::Arc::new(rules));
        let keys = UnlinkableKeys {
            authority: &anonymous.authority,
            certifiers: &self.group,
        };
        let tx = (self.payments[0].capability::<UnlinkableTransaction>())
            .expect("unlinkable payments")
            .clone();
        let context = tx.context();
        let batch: Vec<_> = (0..32).map(|_| (&tx.proof, &context)).collect();
        let mut prove_rng = StdRng::seed_from_u64(5);
        let spent: Vec<SpentToken<'_>> = self
            .sample
            .iter()
            .map(|(opening, certificate)| SpentToken { opening, certificate })
            .collect();
        let outputs = vec![
            TokenOpening::random(BOB, 500, &mut prove_rng),
            TokenOpening::random(ALICE, 1_500, &mut prove_rng),
        ];
        let plan = build(spent, outputs, auditor);
        let token = self.sample[0].0.token();
        UnlinkableFigures {
            unlinkable_proof_verify_per_cpu_s: per_cpu_second(measure, || {
                tx.proof.verify(&keys, &context).expect("valid")
            }),
            unlinkable_proof_batch32_verify_per_cpu_s: 32.0
                * per_cpu_second(measure, || verify_unlinkable_batch(&keys, &batch).expect("valid")),
            unlinkable_prove_ms: 1000.0
                / per_cpu_second(measure, || {
                    plan.prove_and_sign(&[], &anonymous.alice, &keys, NonceMode::Randomized, &mut prove_rng)
                        .expect("proves");
                }),
            certify_share_ms: 1000.0
                / per_cpu_second(measure, || {
                    std::hint::black_box(self.certifiers[0].certify(&token));
                }),
            unlinkable_validate_per_cpu_s: per_cpu_second(measure, || {
                specie_sentinel::validate(&self.payments[0], &trusted).expect("valid")
            }),
            unlinkable_validate_all_cores_per_s: super::validate_all_cores(&self.payments, &trusted, measure),
        }
    }
}

impl UnlinkableFigures {
    pub fn print(&self) {
        println!("  unlinkable level (certified tokens spent by serial number, 2 of 3 certifiers, one owner auditor)");
        println!(
            "    2-in/2-out transfer proof             {:>10.0} /s verified alone, {:.0} /s in batches of 32 ({:.2}x)",
            self.unlinkable_proof_verify_per_cpu_s,
            self.unlinkable_proof_batch32_verify_per_cpu_s,
            self.unlinkable_proof_batch32_verify_per_cpu_s / self.unlinkable_proof_verify_per_cpu_s
        );
        println!(
            "    wallet: prove 2-in/2-out              {:>10.1} ms (target <= 100 ms); a certifier's share {:.2} ms",
            self.unlinkable_prove_ms, self.certify_share_ms
        );
        println!(
            "    validate unlinkable                   {:>8.0} /s one core, {:>8.0} /s on all cores (proofs in batches)",
            self.unlinkable_validate_per_cpu_s, self.unlinkable_validate_all_cores_per_s
        );
    }
}
