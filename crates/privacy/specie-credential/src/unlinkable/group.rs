//! The unlinkable level's fixed parameters, derived by every party from the domain strings alone:
//! Coconut's signature parameters for the three token messages, the serial numbers' generator and
//! the range proofs' Bulletproofs++ generators (one set per output count).

use std::sync::OnceLock;

use ark_ec::AffineRepr;
use bulletproofs_plus_plus::setup::SetupParams;
use coconut_crypto::setup::SignatureParams;
use dock_crypto_utils::hashing_utils::affine_group_elem_from_try_and_incr;
use sha2::{Digest, Sha256};

use crate::group::{compressed, Pairing, G1};
use crate::unlinkable::OUTPUTS_MAX;

/// Label Coconut's `g`, `g̃` and `h_1..h_3` are hashed from (`SignatureParams::new::<Sha256>`).
pub const DOMAIN_TOKEN_PARAMS: &[u8] = b"specie/unlinkable/ps-params/v1";
/// Prefix of the serial numbers' generator `G_sn` (`sn = G_sn / (sk + r)`).
pub const DOMAIN_SERIAL_GENERATOR: &[u8] = b"specie/unlinkable/generator/v1/serial";
/// Prefix of the per-token base `h = H(domain ‖ cm)` the certifiers sign with.
pub const DOMAIN_TOKEN_BASE: &[u8] = b"specie/unlinkable/token-base/v1";
/// Label of the range proofs' Bulletproofs++ generators (the same for every output count, so the
/// value commitments' `G` and `H` are one pair and the `g_i`, `h_i` of a larger count extend those
/// of a smaller).
pub const DOMAIN_RANGE_GENERATORS: &[u8] = b"specie/unlinkable/range-generators/v1";

/// The messages a certificate signs, in order: the owner's enrolment id, the value, the serial
/// seed `r` (the paper's `Commit(eid, v, r, t)`; `t` is the commitment's blinding).
pub const TOKEN_MESSAGES: usize = 3;
pub(crate) const MESSAGE_OWNER: usize = 0;
pub(crate) const MESSAGE_VALUE: usize = 1;
pub(crate) const MESSAGE_SERIAL: usize = 2;

/// Range proofs: values are proven in `[0, 2^64)` in base 16.
pub(crate) const RANGE_BITS: u16 = 64;
pub(crate) const RANGE_BASE: u16 = 16;

pub(crate) struct UnlinkableGenerators {
    pub token: SignatureParams<Pairing>,
    pub serial: G1,
    /// `range[n - 1]`: the generators of an aggregated range proof over `n` values.
    pub range: Vec<SetupParams<G1>>,
}

pub(crate) fn unlinkable_generators() -> &'static UnlinkableGenerators {
    static GENERATORS: OnceLock<UnlinkableGenerators> = OnceLock::new();
    GENERATORS.get_or_init(|| UnlinkableGenerators {
        token: SignatureParams::new::<Sha256>(DOMAIN_TOKEN_PARAMS, TOKEN_MESSAGES as u32),
        serial: affine_group_elem_from_try_and_incr::<G1, Sha256>(DOMAIN_SERIAL_GENERATOR),
        range: (1..=OUTPUTS_MAX as u32)
            .map(|count| {
                SetupParams::new_for_perfect_range_proof::<Sha256>(
                    DOMAIN_RANGE_GENERATORS,
                    RANGE_BASE,
                    RANGE_BITS,
                    count,
                )
            })
            .collect(),
    })
}

/// The base a token is certified with: `h = H(domain ‖ cm)`, so one `h` names one message vector.
pub(crate) fn token_base(commitment: &G1) -> G1 {
    let mut seed = Sha256::new();
    seed.update(DOMAIN_TOKEN_BASE);
    seed.update(compressed(commitment));
    let base: G1 = affine_group_elem_from_try_and_incr::<G1, Sha256>(&seed.finalize());
    debug_assert!(!base.is_zero());
    base
}
