//! `specie tx inspect`: what a serialized transaction is, and the sentinel's verdict on it.

use specie_codec::{Decode, DecodeError};
use specie_transaction::{mint_marker, redeem_marker, SpecieTransaction, Txid, UhsId};

use crate::{validate, TrustedKeys, ValidationError};

/// A decoded transaction as an operator reads it.
#[derive(Debug)]
pub struct Inspection {
    /// "transfer", "mint", "redeem", "offline_funding" or "offline_payout" (the stable names of
    /// bridge funding and payout), "confidential", "anonymous", or a capability kind's name
    /// ("fastpay_funding", "fastpay_redeem").
    pub kind: &'static str,
    pub txid: Txid,
    /// The UHS id each input spends.
    pub inputs: Vec<UhsId>,
    /// (value, UHS id) of each created output.
    pub outputs: Vec<(u64, UhsId)>,
    /// A mint's replay marker, which the shards also create.
    pub mint_marker: Option<UhsId>,
    /// A redeem's marker, which the shards also create.
    pub redeem_marker: Option<UhsId>,
    /// A capability kind's marker (a FastPay funding's or redeem's), which the shards also create.
    pub capability_marker: Option<UhsId>,
    /// A bridge funding's or payout's marker, which the shards also create.
    pub bridge_marker: Option<UhsId>,
    pub verdict: Result<(), ValidationError>,
}

/// Why the input is not a transaction at all.
#[derive(Debug, thiserror::Error)]
pub enum Undecodable {
    #[error("the input is not hex: {0}")]
    NotHex(#[from] hex::FromHexError),
    #[error("the bytes are not a transaction: {0}")]
    NotATransaction(#[source] DecodeError),
}

/// Decodes the hex-encoded transaction `hex_text` and validates it against `trusted`.
pub fn inspect(hex_text: &str, trusted: &TrustedKeys) -> Result<Inspection, Undecodable> {
    let bytes = hex::decode(hex_text.trim())?;
    let tx = SpecieTransaction::decode_exact(&bytes).map_err(Undecodable::NotATransaction)?;
    let txid = tx.txid();
    let kind = tx.kind_name();
    let is_bridge = matches!(
        tx,
        SpecieTransaction::BridgeFunding(_) | SpecieTransaction::BridgePayout(_)
    );
    let is_capability = matches!(tx, SpecieTransaction::Capability(_));
    Ok(Inspection {
        kind,
        txid,
        inputs: tx.inputs().iter().map(|input| input.uhs_id()).collect(),
        outputs: tx
            .created_outputs()
            .iter()
            .map(|c| (c.output.value, c.uhs_id))
            .collect(),
        mint_marker: matches!(tx, SpecieTransaction::Mint(_)).then(|| mint_marker(&txid)),
        redeem_marker: matches!(tx, SpecieTransaction::Redeem(_)).then(|| redeem_marker(&txid)),
        capability_marker: tx.marker().filter(|_| is_capability),
        bridge_marker: tx.marker().filter(|_| is_bridge),
        verdict: validate(&tx, trusted),
    })
}
