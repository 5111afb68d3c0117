//! Soundness tests against forged transfers. They sit inside the crate because a forger builds a
//! transfer from parts the public prover refuses to make (values that do not balance, limbs out of
//! range, handles with another blinding); each test also shows what its forgery gets past, so that
//! the check it expects to fail is the one that stops it.

use curve25519_dalek::scalar::Scalar;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::auditor::{AuditorKey, AuditorSecret};
use crate::group::{generators, Point};
use crate::transfer::{ConfidentialTransfer, LimbSecrets, Opening, Statement, TransferPlan};
use crate::{range, VerifyError, LIMBS};

const CONTEXT: [u8; 32] = [7; 32];

fn rng() -> StdRng {
    StdRng::seed_from_u64(12)
}

fn auditors() -> Vec<AuditorSecret> {
    let mut keys: Vec<AuditorSecret> = (0..2u8).map(|i| AuditorSecret::from_seed(&[i; 32])).collect();
    keys.sort_by_key(|a| a.public().to_bytes());
    keys
}

fn keys(auditors: &[AuditorSecret]) -> Vec<AuditorKey> {
    auditors.iter().map(AuditorSecret::public).collect()
}

/// Limb secrets with these limb values (any scalars) and fresh blindings.
fn limb_secrets(values: &[Scalar], rng: &mut StdRng) -> LimbSecrets {
    LimbSecrets {
        values: values.to_vec(),
        blindings: values.iter().map(|_| Scalar::random(rng)).collect(),
    }
}

/// Limb values of 64-bit outputs.
fn limbs_of(outputs: &[u64]) -> Vec<Scalar> {
    outputs
        .iter()
        .flat_map(|v| (0..LIMBS).map(move |j| Scalar::from((v >> (16 * j)) & 0xffff)))
        .collect()
}

/// A transfer built the way a forger would: any limb values, sigma proofs made honestly from the
/// secrets, and a range proof over `range_values` (16-bit values the forger can prove, for commitments
/// with the same blindings).
fn forge(inputs: &[Opening], secrets: &LimbSecrets, range_values: &[u16], rng: &mut StdRng) -> ConfidentialTransfer {
    let commitments = inputs.iter().map(Opening::commitment).collect();
    let statement = Statement::new((0, 0), commitments, secrets, &keys(&auditors()));
    prove_statement(statement, inputs, secrets, range_values, rng)
}

/// Every proof of `statement`, made from the forger's secrets (its handles may be anything).
fn prove_statement(
    statement: Statement,
    inputs: &[Opening],
    secrets: &LimbSecrets,
    range_values: &[u16],
    rng: &mut StdRng,
) -> ConfidentialTransfer {
    let digest = statement.digest(&CONTEXT);
    let proven: Vec<Point> = range_values
        .iter()
        .zip(&secrets.blindings)
        .map(|(v, r)| Point::new(crate::group::commit(Scalar::from(*v), *r)))
        .collect();
    let range = range::prove(&digest, &proven, range_values, &secrets.blindings, rng).expect("in range");
    ConfidentialTransfer::with_sigma_proofs(statement, &digest, inputs, secrets, range, rng)
}

fn sigma_holds(t: &ConfidentialTransfer) -> (bool, bool) {
    let digest = t.digest(&CONTEXT);
    (t.sigma_part_holds(&digest, true), t.sigma_part_holds(&digest, false))
}

fn honest(rng: &mut StdRng) -> (ConfidentialTransfer, TransferPlan) {
    let plan = TransferPlan {
        context: CONTEXT,
        inputs: vec![Opening::random(10, rng), Opening::random(90, rng)],
        outputs: vec![60, 40],
        public_in: 0,
        public_out: 0,
        auditors: keys(&auditors()),
    };
    (ConfidentialTransfer::prove(&plan, rng).unwrap().0, plan)
}

#[test]
fn the_forgery_helper_makes_a_valid_transfer_from_honest_values() {
    // The control for the tests below: the same construction with honest values verifies.
    let mut rng = rng();
    let inputs = [Opening::random(100, &mut rng)];
    let secrets = limb_secrets(&limbs_of(&[70, 30]), &mut rng);
    let t = forge(&inputs, &secrets, &[70, 0, 0, 0, 30, 0, 0, 0], &mut rng);
    assert_eq!(t.verify(&CONTEXT), Ok(()));
}

#[test]
fn outputs_worth_more_than_inputs_fail_the_balance_proof() {
    let mut rng = rng();
    let inputs = [Opening::random(100, &mut rng)];
    let secrets = limb_secrets(&limbs_of(&[70, 31]), &mut rng);
    let t = forge(&inputs, &secrets, &[70, 0, 0, 0, 31, 0, 0, 0], &mut rng);
    assert_eq!(sigma_holds(&t), (false, true), "only the balance equation fails");
    assert_eq!(t.verify(&CONTEXT), Err(VerifyError::Balance));
}

#[test]
fn a_negative_output_that_wraps_around_fails_the_range_proof() {
    // 10 in, 15 + (−5) out: balances modulo the group order.
    let mut rng = rng();
    let inputs = [Opening::random(10, &mut rng)];
    let mut values = limbs_of(&[15, 0]);
    values[LIMBS] = -Scalar::from(5u64);
    let secrets = limb_secrets(&values, &mut rng);
    // The best range proof the forger has: for the limb it would like to have (0).
    let t = forge(&inputs, &secrets, &[15, 0, 0, 0, 0, 0, 0, 0], &mut rng);
    assert_eq!(
        sigma_holds(&t),
        (true, true),
        "balance and validity proofs hold for the forgery"
    );
    assert!(matches!(t.verify(&CONTEXT), Err(VerifyError::Range { .. })));
}

#[test]
fn a_limb_of_two_to_the_sixteen_fails_the_range_proof() {
    // 65,536 written as limb 0 = 2¹⁶ instead of limb 1 = 1: each limb must be below 2¹⁶.
    let mut rng = rng();
    let inputs = [Opening::random(65_536, &mut rng)];
    let mut values = limbs_of(&[0]);
    values[0] = Scalar::from(65_536u64);
    let secrets = limb_secrets(&values, &mut rng);
    let t = forge(&inputs, &secrets, &[0, 0, 0, 0], &mut rng);
    assert_eq!(sigma_holds(&t), (true, true));
    assert!(matches!(t.verify(&CONTEXT), Err(VerifyError::Range { .. })));
}

#[test]
fn a_transfer_verified_for_another_transaction_fails() {
    let (t, _) = honest(&mut rng());
    assert_eq!(t.verify(&CONTEXT), Ok(()));
    assert_eq!(t.verify(&[8; 32]), Err(VerifyError::Balance));
}

#[test]
fn proofs_replayed_from_another_transfer_fail() {
    let mut rng = rng();
    let (a, _) = honest(&mut rng);
    let (b, _) = honest(&mut rng);
    let mut with_balance = b.clone();
    with_balance.balance = a.balance.clone();
    assert_eq!(with_balance.verify(&CONTEXT), Err(VerifyError::Balance));
    let mut with_validity = b.clone();
    with_validity.validity = a.validity.clone();
    assert_eq!(with_validity.verify(&CONTEXT), Err(VerifyError::AuditorValidity));
    let mut with_range = b.clone();
    with_range.range = a.range.clone();
    assert!(matches!(with_range.verify(&CONTEXT), Err(VerifyError::Range { .. })));
}

#[test]
fn malleated_commitments_and_handles_fail() {
    let (t, _) = honest(&mut rng());
    let g = generators().value;
    let mut limb = t.clone();
    limb.statement.limbs[1] = Point::new(limb.statement.limbs[1].point + g);
    assert!(limb.verify(&CONTEXT).is_err());
    let mut swapped = t.clone();
    swapped.statement.limbs.swap(0, LIMBS);
    assert!(swapped.verify(&CONTEXT).is_err());
    let mut input = t.clone();
    input.statement.inputs[0] = Point::new(input.statement.inputs[0].point - g);
    assert!(input.verify(&CONTEXT).is_err());
    let mut handle = t.clone();
    handle.statement.auditors[1].handles[2] = Point::new(handle.statement.auditors[1].handles[2].point + g);
    assert!(handle.verify(&CONTEXT).is_err());
    let mut public = t;
    public.statement.public_out = 1;
    assert!(public.verify(&CONTEXT).is_err());
}

#[test]
fn a_handle_that_decrypts_to_another_value_fails_the_validity_proof() {
    // The strongest forger: it knows auditor 0's secret, so it can aim a handle at any value, and it
    // re-makes every proof it can for the statement with the forged handle.
    let mut rng = rng();
    let inputs = [Opening::random(100, &mut rng)];
    let secrets = limb_secrets(&limbs_of(&[60, 40]), &mut rng);
    let range_values = [60, 0, 0, 0, 40, 0, 0, 0];
    let honest = forge(&inputs, &secrets, &range_values, &mut rng);
    let auditor = &auditors()[0];
    assert_eq!(honest.audit(auditor), Ok(vec![60, 40]));
    let aimed = 61u64;
    let s = auditor.secret_for_tests();
    let mut statement = honest.statement.clone();
    // C − s·D = 61·G  ⇔  D = s⁻¹·(C − 61·G).
    let forged = s.invert() * (statement.limbs[0].point - Scalar::from(aimed) * generators().value);
    let entry = statement
        .auditors
        .iter_mut()
        .find(|a| a.key == auditor.public())
        .unwrap();
    entry.handles[0] = Point::new(forged);
    let t = prove_statement(statement, &inputs, &secrets, &range_values, &mut rng);
    assert_eq!(
        t.audit(auditor),
        Ok(vec![aimed, 40]),
        "the forged handle reads as another value"
    );
    assert_eq!(sigma_holds(&t), (true, false), "only the validity equation fails");
    assert_eq!(t.verify(&CONTEXT), Err(VerifyError::AuditorValidity));
}

#[test]
fn an_auditor_dropped_from_the_transfer_fails_the_validity_proof() {
    // Removing an auditor changes the statement: the proofs were made for the full list.
    let (mut t, _) = honest(&mut rng());
    t.statement.auditors.pop();
    t.validity.auditor_nonces.pop();
    assert!(t.verify(&CONTEXT).is_err());
}
