//! A quick timing of threshold endorsement on this machine (not a benchmark suite):
//! FROST signing of one batch root with k = 3 of n = 5 (round 1, round 2 per signer,
//! aggregation), verification of one endorsement (signature + path) beside a raw libsecp256k1
//! BIP340 verification measured in the same run, and the endorsement cost per transaction at
//! batch sizes 1, 100 and 1000.
//!
//!     cargo run --release -p specie-endorsement --example timing

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::SeedableRng;
use secp256k1::{schnorr, Keypair, SECP256K1};
use specie_endorsement::frost;
use specie_endorsement::{deal, group_key, Endorsement, EndorsementVerifier, EndorserId, MerkleTree, Threshold};

/// Microseconds per iteration of `f`, best of 5 runs of `iterations`.
fn time_us(iterations: u32, mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iterations {
                f();
            }
            start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let (keys, public) = deal(Threshold::new(3, 5).expect("3 of 5"), 1).expect("dealt");
    let key = group_key(&public).expect("a BIP340 key");
    let signers = [EndorserId(1), EndorserId(3), EndorserId(5)];
    let mut rng = StdRng::seed_from_u64(2);
    let digests: Vec<[u8; 32]> = (0..1000u32)
        .map(|i| {
            let mut d = [7u8; 32];
            d[..4].copy_from_slice(&i.to_le_bytes());
            d
        })
        .collect();
    let message = MerkleTree::new(&digests).message();

    // FROST, step by step.
    let share = |id: &EndorserId| &keys[id].share;
    let round1 = time_us(200, || {
        black_box(frost::round1::commit(share(&signers[0]).signing_share(), &mut rng));
    });
    let commits: Vec<_> = signers
        .iter()
        .map(|id| {
            (
                id.identifier(),
                frost::round1::commit(share(id).signing_share(), &mut rng),
            )
        })
        .collect();
    let package = frost::SigningPackage::new(commits.iter().map(|(i, (_, c))| (*i, *c)).collect(), &message);
    let round2 = time_us(200, || {
        black_box(frost::round2::sign(&package, &commits[0].1 .0, share(&signers[0])).expect("signs"));
    });
    let shares: BTreeMap<_, _> = signers
        .iter()
        .zip(&commits)
        .map(|(id, (i, (n, _)))| (*i, frost::round2::sign(&package, n, share(id)).expect("signs")))
        .collect();
    let aggregate = time_us(200, || {
        black_box(frost::aggregate(&package, &shares, &public).expect("aggregates"));
    });
    let signature = frost::aggregate(&package, &shares, &public).expect("aggregates");
    let signature: [u8; 64] = signature.serialize().expect("valid").try_into().expect("64 bytes");

    // Verification: raw BIP340 beside an endorsement of a 1000-transaction batch.
    let tree = MerkleTree::new(&digests);
    let endorsement = Endorsement {
        signature,
        leaf_count: 1000,
        index: 417,
        siblings: tree.path(417),
    };
    let keypair = Keypair::from_seckey_slice(SECP256K1, &[3u8; 32]).expect("a key");
    let raw_signature = SECP256K1.sign_schnorr(&message, &keypair);
    let (raw_key, _) = keypair.x_only_public_key();
    let raw = time_us(2000, || {
        black_box(SECP256K1.verify_schnorr(&raw_signature, &message, &raw_key)).expect("verifies");
    });
    let full = time_us(2000, || {
        black_box(endorsement.verify(&key, &digests[417])).expect("verifies");
    });
    let mut verifier = EndorsementVerifier::new(&key, 16).expect("valid key");
    verifier.verify(&endorsement, &digests[417]).expect("verifies");
    let cached = time_us(2000, || {
        black_box(verifier.verify(&endorsement, &digests[417])).expect("verifies");
    });
    let _ = schnorr::Signature::from_byte_array(signature);

    println!("FROST k=3 n=5, one batch root:");
    println!("  round 1 (commit), per signer     {round1:9.1} us");
    println!("  round 2 (sign share), per signer {round2:9.1} us");
    println!("  aggregate (checks the 3 shares)  {aggregate:9.1} us");
    let signing = 3.0 * (round1 + round2) + aggregate;
    println!("  total compute (3 signers + agg)  {signing:9.1} us");
    println!("verification:");
    println!("  raw BIP340 verify (libsecp256k1) {raw:9.1} us");
    println!("  endorsement, 1000-tx batch path  {full:9.1} us  (signature + 10-sibling path)");
    println!("  endorsement, batch cached        {cached:9.1} us  (path + lookup)");
    println!("endorsement cost per transaction (sign: Merkle tree + FROST compute; verify: cached verifier):");
    for size in [1usize, 100, 1000] {
        let batch = &digests[..size];
        let tree_us = time_us(20, || {
            black_box(MerkleTree::new(batch));
        });
        let sign_per_tx = (tree_us + signing) / size as f64;
        let tree = MerkleTree::new(batch);
        let endorsements: Vec<_> = (0..size as u32)
            .map(|i| Endorsement {
                signature,
                leaf_count: size as u32,
                index: i,
                siblings: tree.path(i),
            })
            .collect();
        // Each batch needs its own signature for the verifier; time first sight (one signature
        // check per batch) plus the rest through the cache.
        let batch_message = tree.message();
        let batch_signature = {
            let commits: Vec<_> = signers
                .iter()
                .map(|id| {
                    (
                        id.identifier(),
                        frost::round1::commit(share(id).signing_share(), &mut rng),
                    )
                })
                .collect();
            let package =
                frost::SigningPackage::new(commits.iter().map(|(i, (_, c))| (*i, *c)).collect(), &batch_message);
            let shares: BTreeMap<_, _> = signers
                .iter()
                .zip(&commits)
                .map(|(id, (i, (n, _)))| (*i, frost::round2::sign(&package, n, share(id)).expect("signs")))
                .collect();
            let s: [u8; 64] = frost::aggregate(&package, &shares, &public)
                .expect("aggregates")
                .serialize()
                .expect("valid")
                .try_into()
                .expect("64");
            s
        };
        let endorsements: Vec<_> = endorsements
            .into_iter()
            .map(|mut e| {
                e.signature = batch_signature;
                e
            })
            .collect();
        let verify_batch = time_us(5, || {
            let mut verifier = EndorsementVerifier::new(&key, 4).expect("valid key");
            for (e, d) in endorsements.iter().zip(batch) {
                verifier.verify(e, d).expect("verifies");
            }
        });
        let bytes = specie_codec::Encode::encode(&endorsements[0]).len();
        println!(
            "  batch {size:5}: sign {sign_per_tx:8.2} us/tx, verify {:8.2} us/tx, endorsement {bytes} bytes",
            verify_batch / size as f64
        );
    }
}
