//! Proving, verifying, batching and auditing through the public API, and the decoder on untrusted
//! bytes (limits, canonical form, mutations of a valid encoding).

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::{Decode, DecodeError, Encode};
use specie_confidential::{
    verify_batch, AuditError, AuditorSecret, ConfidentialTransfer, Opening, ProveError, TransferLimits, TransferPlan,
    VerifyError, AUDITORS_MAX, INPUTS_MAX, OUTPUTS_MAX, TRANSFER_BYTES_MAX,
};

const CONTEXT: [u8; 32] = [3; 32];

fn auditors(n: u8) -> Vec<AuditorSecret> {
    (0..n).map(|i| AuditorSecret::from_seed(&[i + 1; 32])).collect()
}

fn plan(
    rng: &mut StdRng,
    inputs: &[u64],
    outputs: &[u64],
    public: (u64, u64),
    auditors: &[AuditorSecret],
) -> TransferPlan {
    TransferPlan {
        context: CONTEXT,
        inputs: inputs.iter().map(|v| Opening::random(*v, rng)).collect(),
        outputs: outputs.to_vec(),
        public_in: public.0,
        public_out: public.1,
        auditors: auditors.iter().map(AuditorSecret::public).collect(),
    }
}

/// Proves, verifies, checks the payees' openings and every auditor's reading.
fn round_trip(inputs: &[u64], outputs: &[u64], public: (u64, u64), auditor_count: u8) {
    let mut rng = StdRng::seed_from_u64(inputs.len() as u64 * 31 + outputs.len() as u64);
    let auditors = auditors(auditor_count);
    let plan = plan(&mut rng, inputs, outputs, public, &auditors);
    let (transfer, openings) = ConfidentialTransfer::prove(&plan, &mut rng).unwrap();
    assert_eq!(transfer.verify(&CONTEXT), Ok(()));
    let commitments: Vec<_> = openings.iter().map(Opening::commitment).collect();
    assert_eq!(transfer.output_commitments(), commitments);
    assert_eq!(openings.iter().map(|o| o.value).collect::<Vec<_>>(), outputs);
    for auditor in &auditors {
        assert_eq!(transfer.audit(auditor).as_deref(), Ok(outputs));
    }
    assert_eq!(
        transfer.audit(&AuditorSecret::from_seed(&[99; 32])),
        Err(AuditError::NotAddressed)
    );
    let decoded = ConfidentialTransfer::decode_exact(&transfer.encode()).unwrap();
    assert_eq!(decoded, transfer);
    assert_eq!(decoded.verify(&CONTEXT), Ok(()));
}

#[test]
fn transfers_of_every_shape_verify_and_audit() {
    round_trip(&[100, 23], &[50, 73], (0, 0), 2);
    round_trip(&[5], &[5], (0, 0), 1);
    round_trip(&[u64::MAX, u64::MAX], &[u64::MAX, u64::MAX - 7], (0, 7), 1);
    round_trip(&[], &[1_000, 2_000, 3_000], (6_000, 0), 1); // a mint
}

#[test]
fn the_largest_transfer_verifies() {
    let inputs = vec![1_000u64; INPUTS_MAX];
    let outputs = vec![2_000u64; OUTPUTS_MAX];
    round_trip(&inputs, &outputs, (0, 0), AUDITORS_MAX as u8);
    round_trip(&[700, 300], &[1], (0, 999), 0); // a redeem with change, no auditor
}

#[test]
fn the_prover_refuses_what_it_cannot_prove() {
    let mut rng = StdRng::seed_from_u64(1);
    let a = auditors(1);
    let unbalanced = plan(&mut rng, &[10], &[11], (0, 0), &a);
    assert_eq!(
        ConfidentialTransfer::prove(&unbalanced, &mut rng).err(),
        Some(ProveError::Unbalanced {
            incoming: 10,
            outgoing: 11
        })
    );
    let too_many = plan(&mut rng, &[9], &[1; OUTPUTS_MAX + 1], (0, 0), &a);
    assert!(matches!(
        ConfidentialTransfer::prove(&too_many, &mut rng),
        Err(ProveError::TooManyOutputs { .. })
    ));
    let none = plan(&mut rng, &[9], &[], (0, 9), &a);
    assert_eq!(
        ConfidentialTransfer::prove(&none, &mut rng).err(),
        Some(ProveError::NoOutputs)
    );
    let mut twice = plan(&mut rng, &[9], &[9], (0, 0), &a);
    twice.auditors.push(twice.auditors[0]);
    assert_eq!(
        ConfidentialTransfer::prove(&twice, &mut rng).err(),
        Some(ProveError::DuplicateAuditor)
    );
}

#[test]
fn a_batch_names_the_transfer_that_fails() {
    let mut rng = StdRng::seed_from_u64(2);
    let a = auditors(2);
    let transfers: Vec<ConfidentialTransfer> = (0..5)
        .map(|i| {
            ConfidentialTransfer::prove(&plan(&mut rng, &[100 + i], &[60, 40 + i], (0, 0), &a), &mut rng)
                .unwrap()
                .0
        })
        .collect();
    let mut batch: Vec<(&ConfidentialTransfer, [u8; 32])> = transfers.iter().map(|t| (t, CONTEXT)).collect();
    assert_eq!(verify_batch(&batch), Ok(()));
    batch[3].1 = [4; 32];
    let error = verify_batch(&batch).unwrap_err();
    assert_eq!((error.index, error.error), (3, VerifyError::Balance));
}

fn sample() -> (ConfidentialTransfer, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(5);
    let plan = plan(&mut rng, &[100, 23], &[50, 73], (0, 0), &auditors(2));
    let transfer = ConfidentialTransfer::prove(&plan, &mut rng).unwrap().0;
    let bytes = transfer.encode();
    (transfer, bytes)
}

#[test]
fn every_single_bit_flip_of_a_transfer_is_refused() {
    // Each flip either breaks the encoding or changes what the proofs are checked against.
    let (_, bytes) = sample();
    for at in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[at] ^= 1;
        if let Ok(t) = ConfidentialTransfer::decode_exact(&changed) {
            assert!(
                t.verify(&CONTEXT).is_err(),
                "flipping a bit of byte {at} still verifies"
            );
        }
    }
}

#[test]
fn the_decoder_checks_limits_before_allocating() {
    let (_, bytes) = sample();
    let tight = TransferLimits {
        inputs_max: 1,
        ..TransferLimits::default()
    };
    assert!(matches!(
        ConfidentialTransfer::decode_exact_with(&bytes, &tight),
        Err(DecodeError::CountTooLarge { what: "inputs", .. }) | Err(DecodeError::TooLarge { .. })
    ));
    // A count of 2⁶³ inputs in a short input: refused without reserving memory.
    let mut huge = bytes[..17].to_vec();
    huge.extend_from_slice(&(1u64 << 63).to_le_bytes());
    huge.extend_from_slice(&[0; 64]);
    assert!(matches!(
        ConfidentialTransfer::decode_exact(&huge),
        Err(DecodeError::CountTooLarge { .. })
    ));
    let mut few = bytes[..17].to_vec();
    few.extend_from_slice(&3u64.to_le_bytes());
    few.extend_from_slice(&[0; 64]);
    assert!(matches!(
        ConfidentialTransfer::decode_exact(&few),
        Err(DecodeError::CountExceedsInput { .. })
    ));
    assert!(matches!(
        ConfidentialTransfer::decode_exact(&vec![1; TRANSFER_BYTES_MAX + 1]),
        Err(DecodeError::TooLarge { .. })
    ));
    let mut version = bytes.clone();
    version[0] = 2;
    assert!(matches!(
        ConfidentialTransfer::decode_exact(&version),
        Err(DecodeError::UnsupportedVersion { .. })
    ));
    let mut trailing = bytes;
    trailing.push(0);
    assert!(ConfidentialTransfer::decode_exact(&trailing).is_err());
}

#[test]
fn auditor_keys_must_be_ascending() {
    let (transfer, bytes) = sample();
    let keys = transfer.auditors();
    assert!(keys[0].to_bytes() < keys[1].to_bytes(), "the prover sorts them");
    // Swap the two auditor records (key and handles): a non-canonical order.
    let record = 32 + 2 * 4 * 32;
    let start = 1 + 16 + 8 + 2 * 32 + 8 + 2 * 4 * 32 + 8;
    let mut swapped = bytes.clone();
    swapped[start..start + record].copy_from_slice(&bytes[start + record..start + 2 * record]);
    swapped[start + record..start + 2 * record].copy_from_slice(&bytes[start..start + record]);
    assert!(matches!(
        ConfidentialTransfer::decode_exact(&swapped),
        Err(DecodeError::NonCanonical { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn whatever_decodes_re_encodes_to_its_input(at in 0usize..2_000, value in any::<u8>(), cut in 0usize..2_000) {
        let (_, bytes) = sample();
        let mut changed = bytes.clone();
        let at = at % bytes.len();
        changed[at] = value;
        changed.truncate(bytes.len() - cut % 64);
        if let Ok(t) = ConfidentialTransfer::decode_exact(&changed) {
            prop_assert_eq!(t.encode(), changed);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn random_balanced_transfers_round_trip(
        inputs in proptest::collection::vec(0u64..1 << 40, 0..4),
        split in proptest::collection::vec(1u64..100, 1..4),
        fee in 0u64..1_000,
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let total: u64 = inputs.iter().sum::<u64>() + 1_000;
        let parts: u64 = split.iter().sum();
        let mut outputs: Vec<u64> = split.iter().map(|s| total / parts * s).collect();
        let rest = total - outputs.iter().sum::<u64>();
        outputs[0] += rest - fee.min(rest);
        let public_out = fee.min(rest);
        let plan = plan(&mut rng, &inputs, &outputs, (1_000, public_out), &auditors(1));
        let (transfer, _) = ConfidentialTransfer::prove(&plan, &mut rng).unwrap();
        let decoded = ConfidentialTransfer::decode_exact(&transfer.encode()).unwrap();
        prop_assert_eq!(&decoded, &transfer);
        prop_assert_eq!(decoded.verify(&CONTEXT), Ok(()));
        prop_assert_eq!(decoded.audit(&auditors(1)[0]), Ok(outputs));
    }
}
