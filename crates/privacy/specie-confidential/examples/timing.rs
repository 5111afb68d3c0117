//! A quick benchmark (no criterion): prove and verify times of a 2-in/2-out confidential transfer
//! with two auditors, single and batched verification, and the raw primitives measured in the same
//! run (one 64-bit Bulletproofs+ verify with the library's own generators, one Ristretto scalar
//! multiplication) so that ratios can be reported.
//!
//!   cargo run --release -p specie-confidential --example timing

use std::hint::black_box;
use std::time::{Duration, Instant};

use curve25519_dalek::ristretto::RistrettoPoint;
use curve25519_dalek::scalar::Scalar;
use rand::rngs::OsRng;
use specie_codec::{Decode, Encode};
use specie_confidential::{verify_batch, AuditorSecret, ConfidentialTransfer, Opening, TransferPlan};
use tari_bulletproofs_plus::commitment_opening::CommitmentOpening;
use tari_bulletproofs_plus::generators::pedersen_gens::ExtensionDegree;
use tari_bulletproofs_plus::range_parameters::RangeParameters;
use tari_bulletproofs_plus::range_proof::{RangeProof, VerifyAction};
use tari_bulletproofs_plus::range_statement::RangeStatement;
use tari_bulletproofs_plus::range_witness::RangeWitness;
use tari_bulletproofs_plus::ristretto::create_pedersen_gens_with_extension_degree;
use tari_bulletproofs_plus::Transcript;

/// Median of `runs` timings of `f`, after one warm-up call.
fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f();
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn plan(auditors: &[AuditorSecret]) -> TransferPlan {
    let mut rng = OsRng;
    TransferPlan {
        context: [7; 32],
        inputs: vec![Opening::random(70_000, &mut rng), Opening::random(1_234_567, &mut rng)],
        outputs: vec![1_000_000, 304_467],
        public_in: 0,
        public_out: 100,
        auditors: auditors.iter().map(|a| a.public()).collect(),
    }
}

/// One 64-bit Bulletproofs+ proof with the library's default generators: the primitive's cost.
fn raw_range_proof_verify() -> Duration {
    let mut rng = OsRng;
    let pedersen = create_pedersen_gens_with_extension_degree(ExtensionDegree::DefaultPedersen);
    let parameters = RangeParameters::init(64, 1, pedersen).unwrap();
    let blinding = Scalar::random(&mut rng);
    let commitment = parameters.pc_gens().commit(&Scalar::from(42u64), &[blinding]).unwrap();
    let statement = RangeStatement::init(parameters, vec![commitment], vec![None], None).unwrap();
    let witness = RangeWitness::init(vec![CommitmentOpening::new(42, vec![blinding])]).unwrap();
    let proof = RangeProof::prove_with_rng(&mut Transcript::new(b"raw"), &statement, &witness, &mut rng).unwrap();
    median(101, || {
        let mut transcripts = [Transcript::new(b"raw")];
        let statements = [statement.clone()];
        let proofs = [proof.clone()];
        RangeProof::verify_batch(&mut transcripts, &statements, &proofs, VerifyAction::VerifyOnly).unwrap();
    })
}

fn main() {
    let mut rng = OsRng;
    let auditors = [AuditorSecret::random(&mut rng), AuditorSecret::random(&mut rng)];
    let plan = plan(&auditors);
    let (transfer, _) = ConfidentialTransfer::prove(&plan, &mut rng).unwrap();
    let bytes = transfer.encode();
    println!("2-in/2-out, 2 auditors: {} bytes", bytes.len());

    let prove = median(31, || {
        drop(black_box(ConfidentialTransfer::prove(&plan, &mut rng).unwrap()))
    });
    let verify = median(101, || transfer.verify(&plan.context).unwrap());
    let decode_verify = median(101, || {
        ConfidentialTransfer::decode_exact(&bytes)
            .unwrap()
            .verify(&plan.context)
            .unwrap();
    });
    let batch_size = 64;
    let batch: Vec<ConfidentialTransfer> = (0..batch_size)
        .map(|_| ConfidentialTransfer::prove(&plan, &mut rng).unwrap().0)
        .collect();
    let pairs: Vec<(&ConfidentialTransfer, [u8; 32])> = batch.iter().map(|t| (t, plan.context)).collect();
    let batched = median(11, || verify_batch(&pairs).unwrap());
    let audit = median(31, || drop(black_box(transfer.audit(&auditors[0]).unwrap())));

    let range64 = raw_range_proof_verify();
    let point = RistrettoPoint::random(&mut rng);
    let scalar = Scalar::random(&mut rng);
    let mult = median(1001, || {
        black_box(black_box(scalar) * black_box(point));
    });

    println!("prove 2-in/2-out:                 {:8.3} ms", ms(prove));
    println!("verify 2-in/2-out (one):          {:8.3} ms", ms(verify));
    println!("decode + verify (one):            {:8.3} ms", ms(decode_verify));
    println!(
        "verify_batch of {batch_size}:               {:8.3} ms  ({:.3} ms per transfer)",
        ms(batched),
        ms(batched) / batch_size as f64
    );
    println!("auditor decrypts both outputs:    {:8.3} ms", ms(audit));
    println!("primitive: 64-bit BP+ verify:     {:8.3} ms", ms(range64));
    println!("primitive: Ristretto scalar mult: {:8.3} µs", ms(mult) * 1e3);
    println!(
        "ratios: verify / 64-bit range verify = {:.2}; verify / scalar mult = {:.0}; batched per transfer / scalar mult = {:.0}",
        ms(verify) / ms(range64),
        ms(verify) / ms(mult),
        ms(batched) / batch_size as f64 / ms(mult)
    );
}
