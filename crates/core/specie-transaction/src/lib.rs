//! specie's transactions: the Hamilton / OpenCBDC reference format, byte for byte, plus
//! specie's issuer-signed mint and redeem, and the seam where capabilities add kinds of their
//! own.
//!
//! * The byte encoding and its bounded reader live in the base crate `specie-codec`.
//! * [`limits`]: format sizes and the [`DecodeLimits`] every decoder enforces.
//! * [`transaction`]: `OutPoint`, `Output`, `Input`, `Witness`, the reference `Transaction`,
//!   txids and UHS ids.
//! * [`signing`]: commitments, pay-to-pubkey witnesses, BIP-340 signing.
//! * [`address`]: bech32 (BIP-173) pay-to-pubkey addresses.
//! * [`extension`]: [`SpecieTransaction`] with specie's mint and redeem.
//! * [`capability`]: kinds a capability adds (FastPay's funding and redeem, in
//!   `specie-fastpay-primary`; the privacy levels' confidential and anonymous transactions, in
//!   `specie-private-transactions`), decoded once a deployment installs them.
//! * [`bridge`]: bridge funding and payout (offline cash, the exchange) and their markers.
//! * [`compact`]: compact transactions and sentinel attestations.
//!
//! The byte-level specification with test vectors is `docs/transaction-format.md`.
//! Nothing here panics on any input; decoding allocates at most a small multiple of the input.

pub mod address;
pub mod bridge;

pub mod capability;
pub mod compact;
pub mod extension;
pub mod hash;
pub mod limits;
pub mod signing;
#[cfg(any(test, feature = "testing"))]
pub mod test_support;
pub mod transaction;

pub use address::{Address, AddressError, DEFAULT_HRP};

/// The `tracing` target of the lines that follow one transaction through the core: the API's
/// answer for each txid (node or sentinel), the coordinator's outcome (txid, and the dtxn and
/// index it had there), each shard's answer to a dtxn (dtxn and coordinator: shards never see a
/// txid), the atomizer's outcome (txid and block). At debug level, so off by default; an
/// operator turns it on with `RUST_LOG=warn,specie::txn=debug` (and `--log-format json` for a
/// log pipeline).
pub const TRANSACTION_LOG: &str = "specie::txn";

pub use bridge::{bridge_funding_marker, bridge_payout_marker, BridgeFunding, BridgePayout, BRIDGE_SERIAL_BYTES};
pub use capability::{CapabilityKind, CapabilityTransaction, Circulation, Counterparty};
pub use compact::AttestationError;
pub use extension::{mint_marker, redeem_marker, CreatedOutput, MintTransaction, RedeemTransaction, SpecieTransaction};
pub use limits::DecodeLimits;
pub use signing::{
    witness_program_commitment, witness_program_commitment_of, NonceMode, P2pkParseError, P2pkWitness, SignError,
};
pub use transaction::{uhs_id_for, Input, OutPoint, Output, Transaction, Witness};

/// A 32-byte SHA-256 digest.
pub type Hash32 = [u8; 32];

/// The hash committing to one unspent output: the only thing the UHS stores.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct UhsId(pub Hash32);

/// Transaction identifier: SHA-256 over the inputs and outputs (witnesses excluded).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Txid(pub Hash32);

/// What the sentinel hands the 2PC engine: the ids to spend and the ids to create.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CompactTransaction {
    pub txid: Txid,
    pub spent: Vec<UhsId>,
    pub created: Vec<UhsId>,
    /// Sentinel attestations: x-only public key -> BIP-340 signature, ordered by key.
    pub attestations: std::collections::BTreeMap<[u8; 32], [u8; 64]>,
}

impl std::fmt::Display for Txid {
    /// Lowercase hex, as in logs and the vectors.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl std::fmt::Display for UhsId {
    /// Lowercase hex, as in logs and the vectors.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}
