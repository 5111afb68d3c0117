//! Confidential payments' proof systems (Fabric CBDC's "confidential" privacy level, with passive
//! auditors): outputs are Pedersen commitments to 64-bit values over Ristretto, a transfer proves
//! that they are in range (Bulletproofs+), that inputs and outputs balance (a Schnorr proof bound to
//! the transaction), and that each auditor with jurisdiction can decrypt every output's value (twisted
//! ElGamal handles with a validity proof). The format and its vectors: `docs/privacy-format.md`.
//!
//! Sans-IO: the prover takes its randomness as an argument; the verifier needs none (its batch
//! weights are derived by hashing the batch). No clocks, no I/O.

mod auditor;
mod codec;
mod error;
mod group;
mod range;
mod sigma;
mod transfer;

pub use auditor::{AuditorKey, AuditorSecret, DOMAIN_AUDITOR_KEY};
pub use codec::{TransferLimits, DOMAIN_STATEMENT, FORMAT_VERSION, TRANSFER_BYTES_MAX};
pub use curve25519_dalek::scalar::Scalar;
pub use error::{AuditError, BatchError, ProveError, VerifyError};
pub use group::{hash_to_group, Point, DOMAIN_GENERATOR, ELEMENT_BYTES};
pub use range::{proof_bytes as range_proof_bytes, AGGREGATED_LIMBS_MAX, DOMAIN_RANGE};
pub use sigma::{DOMAIN_BALANCE, DOMAIN_VALIDITY, DOMAIN_VALIDITY_FOLD};
pub use transfer::{verify_batch, ConfidentialTransfer, Opening, TransferPlan, DOMAIN_WEIGHTS};

/// Inputs one transfer may spend.
pub const INPUTS_MAX: usize = 16;
/// Outputs one transfer may create. With four limbs each, 32 commitments: one aggregated proof.
pub const OUTPUTS_MAX: usize = 8;
/// Auditors one transfer may address.
pub const AUDITORS_MAX: usize = 4;
/// Bits of one limb: small enough for an auditor's discrete log (2 × 256 steps).
pub const LIMB_BITS: u32 = 16;
/// Limbs of one 64-bit value.
pub const LIMBS: usize = 4;

/// The value generator `G` and the blinding generator `H` as points.
pub fn generator_points() -> (Point, Point) {
    let g = group::generators();
    (g.value_point, g.blinding_point)
}

#[cfg(test)]
mod soundness;
