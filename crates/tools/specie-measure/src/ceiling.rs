//! The raw cryptographic ceilings that specie's throughput is measured against, on all cores.

use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::cpu::CpuClock;
use secp256k1::{Keypair, XOnlyPublicKey};
use specie_transaction::signing::{schnorr_sign, schnorr_verify};
use specie_transaction::NonceMode;

const CHUNK: usize = 256;

/// BIP-340 verifications per second on all cores.
pub fn verify_per_s(duration: Duration) -> f64 {
    let keypair = Keypair::new_global(&mut rand::thread_rng());
    let (pubkey, _) = XOnlyPublicKey::from_keypair(&keypair);
    let samples: Vec<([u8; 32], [u8; 64])> = (0..CHUNK as u32)
        .map(|i| {
            let message = specie_transaction::hash::sha256(&i.to_le_bytes());
            (message, schnorr_sign(&keypair, &message, NonceMode::Randomized))
        })
        .collect();
    run_for(duration, || {
        samples
            .par_iter()
            .map(|(m, s)| schnorr_verify(&pubkey, m, s) as u64)
            .sum::<u64>() as usize
    })
}

/// 2-in/2-out transactions per second that could be signed (2 signatures) and verified (2
/// verifications) on all cores if nothing else ran: the end-to-end ceiling for the demo.
pub fn sign_verify_2in2out_tps(duration: Duration) -> f64 {
    let keypair = Keypair::new_global(&mut rand::thread_rng());
    let (pubkey, _) = XOnlyPublicKey::from_keypair(&keypair);
    let operations = run_for(duration, || {
        (0..CHUNK as u32)
            .into_par_iter()
            .map(|i| {
                let message = specie_transaction::hash::sha256(&i.to_le_bytes());
                let signature = schnorr_sign(&keypair, &message, NonceMode::Randomized);
                assert!(schnorr_verify(&pubkey, &message, &signature));
                1
            })
            .sum::<usize>()
    });
    operations / 2.0
}

/// Runs `batch` (which returns how many operations it did) until `duration` passes.
fn run_for(duration: Duration, mut batch: impl FnMut() -> usize) -> f64 {
    batch(); // warm up
    let started = Instant::now();
    let mut operations = 0usize;
    while started.elapsed() < duration {
        operations += batch();
    }
    operations as f64 / started.elapsed().as_secs_f64()
}

/// Operations between two readings of the thread's CPU clock.
const CPU_CHUNK: usize = 64;

/// Runs `operation` until this thread has used `duration` of CPU time; operations per CPU second.
pub fn per_cpu_second(duration: Duration, mut operation: impl FnMut()) -> f64 {
    operation(); // warm up
    let started = CpuClock::this_thread();
    let mut operations = 0usize;
    loop {
        for _ in 0..CPU_CHUNK {
            operation();
        }
        operations += CPU_CHUNK;
        let used = CpuClock::this_thread().saturating_sub(started);
        if used >= duration {
            return operations as f64 / used.as_secs_f64();
        }
    }
}
