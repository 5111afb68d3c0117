//! Times the unlinkable level's operations on one core and prints the encodings' sizes:
//! `cargo run --release -p specie-credential --example unlinkable_timing`.
//! Beside them, the same run's floor for any pairing-based check: one two-pairing product
//! (`e(a, b)·e(c, d) = 1`, what verifying one BBS or PS signature costs at least).
//! The numbers in `docs/unlinkable-format.md` §6 come from this.

use std::time::{Duration, Instant};

use ark_bls12_381::{Bls12_381, G1Affine, G2Affine};
use ark_ec::pairing::Pairing;
use ark_ec::AffineRepr;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_codec::Encode;
use specie_credential::unlinkable::*;
use specie_credential::{EnrolmentId, Identity, Jurisdiction, RegistrationAuthority, UserSecret};

const ROUNDS: u32 = 10;
const BATCH: usize = 16;

fn ms(total: Duration, count: u32) -> f64 {
    total.as_secs_f64() * 1e3 / f64::from(count)
}

fn main() {
    let mut rng = StdRng::seed_from_u64(1);
    let mut ra = RegistrationAuthority::random(&mut rng);
    let authority = ra.public_key();
    let secret = UserSecret::random(&mut rng);
    let challenge = ra.challenge(EnrolmentId(1), Jurisdiction(276), &mut rng);
    let request = secret.enrolment_request(&authority, &challenge, &mut rng);
    let credential = ra.enrol(&request, &mut rng).unwrap();
    let alice = Identity::new(secret, credential, &authority).unwrap();
    let (group, certifiers) = deal_certifiers(3, 4, &mut rng).unwrap();
    let keys = UnlinkableKeys {
        authority: &authority,
        certifiers: &group,
    };

    let started = Instant::now();
    let (a, b) = (G1Affine::generator(), G2Affine::generator());
    for _ in 0..ROUNDS * 10 {
        let _ = std::hint::black_box(Bls12_381::multi_pairing([a, a], [b, b]));
    }
    println!(
        "ceiling: two-pairing product          {:7.3} ms",
        ms(started.elapsed(), ROUNDS * 10)
    );

    let mut share_time = Duration::ZERO;
    let mut assemble_time = Duration::ZERO;
    let mut held = Vec::new();
    for _ in 0..2 * BATCH {
        let opening = TokenOpening::random(alice.enrolment_id(), 50, &mut rng);
        let token = opening.token();
        let started = Instant::now();
        let shares: Vec<CertificateShare> = certifiers[..3].iter().map(|c| c.certify(&token)).collect();
        share_time += started.elapsed();
        let started = Instant::now();
        let certificate = opening.certificate(&group, &shares).unwrap();
        assemble_time += started.elapsed();
        held.push((opening, certificate));
    }
    let count = 2 * BATCH as u32;
    println!(
        "certify: one certifier's share        {:7.3} ms",
        ms(share_time, count * 3)
    );
    println!(
        "certify: owner unblinds, checks, combines 3 {:7.3} ms",
        ms(assemble_time, count)
    );

    let mut prove_time = Duration::ZERO;
    let mut proofs = Vec::new();
    for pair in held.chunks(2) {
        let spent: Vec<SpentToken<'_>> = pair
            .iter()
            .map(|(opening, certificate)| SpentToken { opening, certificate })
            .collect();
        let outputs = [
            TokenOpening::random(EnrolmentId(2), 70, &mut rng),
            TokenOpening::random(alice.enrolment_id(), 30, &mut rng),
        ];
        let started = Instant::now();
        let proof = alice
            .prove_unlinkable(
                &keys,
                &TransferPlan {
                    inputs: &spent,
                    outputs: &outputs,
                    amounts: PublicAmounts::default(),
                    auditors: &[],
                },
                &[7; 32],
                &mut rng,
            )
            .unwrap();
        prove_time += started.elapsed();
        proofs.push(proof);
    }
    println!(
        "2-in/2-out transfer: prove            {:7.3} ms",
        ms(prove_time, BATCH as u32)
    );
    let started = Instant::now();
    for proof in proofs.iter().take(ROUNDS as usize) {
        proof.verify(&keys, &[7; 32]).unwrap();
    }
    println!(
        "2-in/2-out transfer: verify alone     {:7.3} ms",
        ms(started.elapsed(), ROUNDS)
    );
    let items: Vec<(&UnlinkableTransfer, &[u8; 32])> = proofs.iter().map(|p| (p, &[7u8; 32])).collect();
    let started = Instant::now();
    verify_unlinkable_batch(&keys, &items).unwrap();
    println!(
        "2-in/2-out transfer: verify, batch of {BATCH} {:7.3} ms each",
        ms(started.elapsed(), BATCH as u32)
    );
    println!(
        "2-in/2-out transfer: {} bytes; token {} bytes; certificate {} bytes",
        proofs[0].encode().len(),
        TOKEN_BYTES,
        CERTIFICATE_BYTES
    );
}
