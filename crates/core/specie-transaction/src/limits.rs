//! Size constants of the format and the bounds a decoder enforces on untrusted input.

/// Bytes in a SHA-256 digest, txid, UHS id, witness program commitment.
pub const HASH_BYTES: usize = 32;
/// Bytes in an x-only (BIP-340) public key.
pub const XONLY_PUBKEY_BYTES: usize = 32;
/// Bytes in a BIP-340 Schnorr signature.
pub const SIGNATURE_BYTES: usize = 64;
/// `OutPoint = txid(32) ‖ index(u64)`.
pub const OUT_POINT_BYTES: usize = HASH_BYTES + 8;
/// `Output = witness_program_commitment(32) ‖ value(u64)`.
pub const OUTPUT_BYTES: usize = HASH_BYTES + 8;
/// `Input = OutPoint ‖ Output`: an input carries its whole prevout.
pub const INPUT_BYTES: usize = OUT_POINT_BYTES + OUTPUT_BYTES;
/// The smallest possible encoded witness: an empty byte vector is just its `u64` length.
pub const WITNESS_BYTES_MIN: usize = 8;
/// A pay-to-pubkey witness program: type byte ‖ x-only public key.
pub const P2PK_WITNESS_PROGRAM_BYTES: usize = 1 + XONLY_PUBKEY_BYTES;
/// A pay-to-pubkey witness: program ‖ signature = 97 bytes.
pub const P2PK_WITNESS_BYTES: usize = P2PK_WITNESS_PROGRAM_BYTES + SIGNATURE_BYTES;
/// One attestation map entry: public key ‖ signature.
pub const ATTESTATION_BYTES: usize = XONLY_PUBKEY_BYTES + SIGNATURE_BYTES;

/// Bounds on what a decoder accepts. The reference implementation has no such bounds; specie
/// sets them so that no peer can make a decoder allocate or work more than these numbers allow.
/// Defaults are generous for payments (a wallet rarely needs more than a few dozen inputs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Inputs in one transaction (transfer or redeem).
    pub inputs_max: u64,
    /// Outputs in one transaction (transfer outputs, mint outputs, redeem change).
    pub outputs_max: u64,
    /// Witnesses in one transaction. Decoded independently of `inputs_max` because a count
    /// mismatch is a validation error (`missing_witness`) that the sentinel reports, not a
    /// decoding error.
    pub witnesses_max: u64,
    /// Bytes in one witness. A p2pk witness is 97 bytes; longer ones decode and are then
    /// rejected by validation as `malformed`, which keeps the reference's error reporting.
    pub witness_bytes_max: u64,
    /// Bytes in one encoded transaction of any kind.
    pub transaction_bytes_max: usize,
    /// Spent UHS ids in one compact transaction.
    pub compact_spent_max: u64,
    /// Created UHS ids in one compact transaction (a mint, funding or FastPay redeem adds one
    /// marker id to its outputs).
    pub compact_created_max: u64,
    /// Sentinel attestations on one compact transaction.
    pub attestations_max: u64,
    /// Bytes in one encoded compact transaction.
    pub compact_transaction_bytes_max: usize,
}

impl DecodeLimits {
    pub const INPUTS_MAX_DEFAULT: u64 = 1024;
    pub const OUTPUTS_MAX_DEFAULT: u64 = 1024;
    pub const WITNESS_BYTES_MAX_DEFAULT: u64 = 1024;
    pub const TRANSACTION_BYTES_MAX_DEFAULT: usize = 256 * 1024;
    pub const ATTESTATIONS_MAX_DEFAULT: u64 = 64;
}

impl Default for DecodeLimits {
    fn default() -> Self {
        let inputs_max = Self::INPUTS_MAX_DEFAULT;
        let outputs_max = Self::OUTPUTS_MAX_DEFAULT;
        let attestations_max = Self::ATTESTATIONS_MAX_DEFAULT;
        let compact_created_max = outputs_max + 1;
        // txid ‖ two counted id vectors ‖ counted attestation map, each at its maximum.
        let compact_transaction_bytes_max = HASH_BYTES
            + 3 * 8
            + (inputs_max + compact_created_max) as usize * HASH_BYTES
            + attestations_max as usize * ATTESTATION_BYTES;
        DecodeLimits {
            inputs_max,
            outputs_max,
            witnesses_max: inputs_max,
            witness_bytes_max: Self::WITNESS_BYTES_MAX_DEFAULT,
            transaction_bytes_max: Self::TRANSACTION_BYTES_MAX_DEFAULT,
            compact_spent_max: inputs_max,
            compact_created_max,
            attestations_max,
            compact_transaction_bytes_max,
        }
    }
}

const _: () = assert!(P2PK_WITNESS_BYTES == 97);
const _: () = assert!(INPUT_BYTES == 80);
