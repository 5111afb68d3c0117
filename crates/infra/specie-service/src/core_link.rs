//! What a capability's service needs of the online core's transactions, declared here and handed
//! in by whoever starts the service (`specie_wallet::CORE_FORMAT`), so that no capability's
//! service reads or writes the core's transaction format itself: the offline authority and the
//! exchange read a bridge funding and sign the bridge payouts that pay value back into the core.
//! (FastPay's authorities read their own kind, a FastPay funding, with `specie-fastpay-primary`.)

/// A bridge funding (the core's kind `0x05`): value that left the core for a bridge key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BridgeFundingTerms {
    /// The bridge key (Ed25519) the value is made out to.
    pub authority: [u8; 32],
    /// What the value is committed to, as the bridge defines it (the offline devices' keys, the
    /// exchange account's key); the core does not read it.
    pub owners_digest: [u8; 32],
    pub amount: u64,
    /// The UHS id the core creates when it confirms the funding: credit it once, after finding
    /// it in the core.
    pub marker: [u8; 32],
    /// Where a refund goes: the owner (witness program commitment) of the funding's first input,
    /// whose key signed it; none if it spends no input (no confirmed funding does).
    pub refund_to: Option<[u8; 32]>,
}

/// Whom a bridge payout pays on the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PayTo {
    /// The owner of a core output, as a witness program commitment (a funding's input names its
    /// owner so: a refund).
    Commitment([u8; 32]),
    /// The x-only public key of a core wallet (a device defunding a token to its owner's wallet).
    Key([u8; 32]),
}

/// Why bytes sent as a funding are not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotAFunding {
    #[error("not a transaction of the online core: {reason}")]
    Undecodable { reason: String },
    #[error("the transaction is not a {wanted} (kind {wanted_kind:#04x})")]
    OtherKind { wanted: &'static str, wanted_kind: u8 },
}

/// The online core's transaction format, as far as a capability's service needs it.
pub trait CoreTransactions: Send + Sync + std::fmt::Debug + 'static {
    /// The longest encoding of one core transaction: a longer one is refused unread.
    fn transaction_bytes_max(&self) -> usize;
    /// The terms of the bridge funding whose encoding is `bytes` (all of them).
    fn bridge_funding(&self, bytes: &[u8]) -> Result<BridgeFundingTerms, NotAFunding>;
    /// The encoded bridge payout (the core's kind `0x06`) of `amount` to `to` under `serial`,
    /// signed by the bridge key `bridge`: what the core takes, once per serial. Ed25519 signing
    /// is deterministic, so the same payout asked again is the same bytes.
    fn bridge_payout(&self, bridge: &ed25519_dalek::SigningKey, serial: [u8; 16], to: PayTo, amount: u64) -> Vec<u8>;
}
