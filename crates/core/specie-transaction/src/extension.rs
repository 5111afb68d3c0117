//! specie's extension to the reference format: issuer-signed mint and redeem, bridge funding and
//! payout, and the kinds capabilities add (module [`crate::capability`]).
//!
//! The reference mints with an unauthorised zero-input transaction and has no redeem. specie
//! adds transaction kinds of its own (mint and redeem signed by a configured issuer key; bridge
//! funding and payout), carries those capabilities add (FastPay's funding and redeem, the privacy
//! levels' confidential and anonymous transactions), and keeps transfers byte-for-byte the
//! reference's. The full specification with test vectors is `docs/transaction-format.md`; the
//! rules in brief:
//!
//! * Extension transactions start with [`EXTENSION_HEADER`] = `0xFF 'S' 'P' 'C' 'E' 'X' 'T'`
//!   (the 7-byte [`EXTENSION_MAGIC`]) then the version byte `0x01`, then a kind byte
//!   (`0x01` mint, `0x02` redeem, `0x03` FastPay funding, `0x04` FastPay redeem, `0x05` bridge
//!   funding, `0x06` bridge payout, `0x07` confidential, `0x08` anonymous; `0x05` and `0x06` in
//!   module [`crate::bridge`], `0x03`, `0x04`, `0x07` and `0x08` in their capabilities' crates,
//!   decoded once installed). Read as the little-endian input count a reference transaction
//!   starts with, those 8 bytes are `0x01_54_58_45_43_50_53_FF` ≥ 2^56 (and the magic alone is
//!   ≥ 2^54 whatever the version), a count no transaction can have, so the two formats never
//!   collide. Detection compares all 7 magic bytes, not just the first one: `0xFF` alone is the
//!   low byte of perfectly ordinary input counts such as 255.
//! * Mint: `header ‖ kind ‖ nonce(32) ‖ vec<Output> ‖ issuer_pubkey(32) ‖ issuer_signature(64)`,
//!   txid = SHA-256(header ‖ kind ‖ nonce ‖ ser(vec<Output>)), signed by the issuer. The compact
//!   transaction creates the outputs' UHS ids plus [`mint_marker`]`(txid)`, so a replayed mint
//!   tries to create an id that already exists and is refused by the shards forever.
//! * Redeem: `header ‖ kind ‖ amount(u64) ‖ vec<Input> ‖ vec<Output> (change) ‖ vec<Witness> ‖
//!   issuer_pubkey(32) ‖ issuer_signature(64)`, txid = SHA-256(header ‖ kind ‖ u64le(amount) ‖
//!   ser(vec<Input>) ‖ ser(vec<Output>)), signed by every input owner and by the issuer.
//!   sum(inputs) = sum(change) + amount, amount ≥ 1 (checked by the sentinel). The compact
//!   transaction creates the change's UHS ids plus [`redeem_marker`]`(txid)`: a redeem may have
//!   no change, and the marker makes every confirmed transaction leave an id in the UHS, which
//!   is how the ledger of record tells, after a crash, which transactions the shards committed.
//!
//! Because every txid preimage starts with the header and kind, a signature over an extension
//! txid can never be replayed as one over a transfer txid or another kind's.

use crate::bridge::{BridgeFunding, BridgePayout};
use crate::capability::{self, CapabilityTransaction};
use crate::hash::{sha256, Sha256Writer};
use crate::limits::{DecodeLimits, INPUT_BYTES, OUTPUT_BYTES, SIGNATURE_BYTES, XONLY_PUBKEY_BYTES};
use crate::signing::{schnorr_sign, sign_inputs, xonly_bytes, NonceMode, SignError};
use crate::transaction::{
    read_inputs, read_outputs, read_witnesses, uhs_id_for, Input, OutPoint, Output, Transaction, Witness,
};
use crate::{CompactTransaction, Txid, UhsId};
use secp256k1::Keypair;
use specie_codec::{put_u64, put_vec, Decode, DecodeError, Encode, Reader};

/// The 7 magic bytes that open every extension transaction.
pub const EXTENSION_MAGIC: [u8; 7] = [0xFF, b'S', b'P', b'C', b'E', b'X', b'T'];
/// The only extension version defined.
pub const EXTENSION_VERSION: u8 = 0x01;
/// Magic ‖ version.
pub const EXTENSION_HEADER: [u8; 8] = [0xFF, b'S', b'P', b'C', b'E', b'X', b'T', EXTENSION_VERSION];
/// Kind byte of a mint.
pub const KIND_MINT: u8 = 0x01;
/// Kind byte of a redeem.
pub const KIND_REDEEM: u8 = 0x02;
// 0x03 and 0x04 are FastPay's funding and redeem, defined by its bridge crate
// (`specie-fastpay-primary`) and decoded where a deployment installs them (crate::capability).
/// Kind byte of a bridge funding (value leaves the core for a bridge: offline cash, the exchange).
pub const KIND_BRIDGE_FUND: u8 = 0x05;
/// Kind byte of a bridge payout (value a bridge gives back becomes a core output).
pub const KIND_BRIDGE_PAYOUT: u8 = 0x06;
// 0x07 and 0x08 are the privacy levels' confidential and anonymous transactions, defined by
// their bridge crate (`specie-private-transactions`).
/// Bytes in a mint nonce.
pub const MINT_NONCE_BYTES: usize = 32;
/// Domain separator of the mint marker id. The preimage is 21 + 32 = 53 bytes, while every
/// spendable UHS id hashes an 80-byte input, so the marker can never equal a spendable id.
pub const MINT_MARKER_DOMAIN: &[u8; 21] = b"specie/mint-marker/v1";
pub const REDEEM_MARKER_DOMAIN: &[u8; 23] = b"specie/redeem-marker/v1";

const _: () = assert!(EXTENSION_HEADER[7] == EXTENSION_VERSION);
// The header, read as a little-endian input count, is at least 2^56.
const _: () = assert!(u64::from_le_bytes(EXTENSION_HEADER) >= 1 << 56);

/// The replay guard of a mint: SHA-256("specie/mint-marker/v1" ‖ txid).
pub fn mint_marker(txid: &Txid) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(MINT_MARKER_DOMAIN);
    hasher.update(&txid.0);
    UhsId(hasher.finish())
}

/// The mark of a confirmed redeem: SHA-256("specie/redeem-marker/v1" ‖ txid). Never spent.
pub fn redeem_marker(txid: &Txid) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(REDEEM_MARKER_DOMAIN);
    hasher.update(&txid.0);
    UhsId(hasher.finish())
}

/// An issuer-signed mint: new outputs, no inputs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MintTransaction {
    /// Uniformly random, chosen by the issuer; makes each mint's txid (and so its outputs'
    /// serial numbers) unique, as Hamilton §3.4 requires.
    pub nonce: [u8; MINT_NONCE_BYTES],
    pub outputs: Vec<Output>,
    /// x-only public key of the issuer; must be one the sentinel is configured with.
    pub issuer_pubkey: [u8; XONLY_PUBKEY_BYTES],
    /// BIP-340 signature over the txid.
    pub issuer_signature: [u8; SIGNATURE_BYTES],
}

/// An issuer-signed redeem: owners give up inputs, `amount` leaves circulation, change returns.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct RedeemTransaction {
    /// Value leaving circulation, in the smallest currency unit.
    pub amount: u64,
    pub inputs: Vec<Input>,
    /// Change outputs; may be empty.
    pub outputs: Vec<Output>,
    /// One p2pk witness per input, signing the redeem txid.
    pub witnesses: Vec<Witness>,
    pub issuer_pubkey: [u8; XONLY_PUBKEY_BYTES],
    pub issuer_signature: [u8; SIGNATURE_BYTES],
}

/// Any transaction specie accepts.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum SpecieTransaction {
    /// The reference transfer, encoded exactly as the reference encodes it.
    Transfer(Transaction),
    Mint(MintTransaction),
    Redeem(RedeemTransaction),
    BridgeFunding(BridgeFunding),
    BridgePayout(BridgePayout),
    /// A kind a capability adds (module [`crate::capability`]): FastPay's funding and redeem,
    /// the privacy levels' confidential and anonymous transactions.
    Capability(Box<dyn CapabilityTransaction>),
}

/// An output a transaction creates, with what a wallet needs to spend it later.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct CreatedOutput {
    pub outpoint: OutPoint,
    pub output: Output,
    pub uhs_id: UhsId,
}

impl CreatedOutput {
    /// The input that spends this output.
    pub fn to_input(&self) -> Input {
        Input {
            prevout: self.outpoint,
            data: self.output,
        }
    }
}

fn created_outputs(txid: Txid, outputs: &[Output]) -> Vec<CreatedOutput> {
    outputs
        .iter()
        .enumerate()
        .map(|(index, output)| CreatedOutput {
            outpoint: OutPoint {
                txid,
                index: index as u64,
            },
            output: *output,
            uhs_id: uhs_id_for(&txid, index as u64, output),
        })
        .collect()
}

/// Writes the extension header and `kind`.
pub fn put_header(out: &mut Vec<u8>, kind: u8) {
    out.extend_from_slice(&EXTENSION_HEADER);
    out.push(kind);
}

/// Whether `kind` is one of the core's own kinds, decoded without anything installed.
pub(crate) fn is_core_kind(kind: u8) -> bool {
    matches!(kind, KIND_MINT | KIND_REDEEM | KIND_BRIDGE_FUND | KIND_BRIDGE_PAYOUT)
}

/// Reads and checks header and kind; `expected_kind` is `None` when any known kind (the core's
/// own and those installed in this process) is fine.
pub fn read_header(reader: &mut Reader<'_>, expected_kind: Option<u8>) -> Result<u8, DecodeError> {
    let magic: [u8; 7] = reader.read_array("extension magic")?;
    if magic != EXTENSION_MAGIC {
        return Err(DecodeError::BadMagic {
            what: "extension transaction",
            found_hex: hex::encode(magic),
            expected_hex: hex::encode(EXTENSION_MAGIC),
        });
    }
    let version = reader.read_u8("extension version")?;
    if version != EXTENSION_VERSION {
        return Err(DecodeError::UnsupportedVersion {
            what: "extension transaction",
            version,
            supported: EXTENSION_VERSION,
        });
    }
    let kind = reader.read_u8("extension kind")?;
    let known = match expected_kind {
        Some(expected) => kind == expected,
        None => is_core_kind(kind) || capability::installed(kind).is_some(),
    };
    if !known {
        return Err(DecodeError::UnknownKind {
            what: "extension transaction kind",
            kind,
        });
    }
    Ok(kind)
}

impl MintTransaction {
    /// The signed part: header ‖ kind ‖ nonce ‖ ser(vec<Output>).
    fn txid_preimage(&self) -> Vec<u8> {
        let mut preimage = Vec::with_capacity(9 + MINT_NONCE_BYTES + 8 + self.outputs.len() * OUTPUT_BYTES);
        put_header(&mut preimage, KIND_MINT);
        preimage.extend_from_slice(&self.nonce);
        put_vec(&mut preimage, &self.outputs);
        preimage
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    /// Builds and signs a mint.
    pub fn new_signed(nonce: [u8; MINT_NONCE_BYTES], outputs: Vec<Output>, issuer: &Keypair, mode: NonceMode) -> Self {
        let mut mint = MintTransaction {
            nonce,
            outputs,
            issuer_pubkey: xonly_bytes(issuer),
            issuer_signature: [0; SIGNATURE_BYTES],
        };
        mint.sign(issuer, mode);
        mint
    }

    /// (Re)signs with `issuer`, also setting `issuer_pubkey`.
    pub fn sign(&mut self, issuer: &Keypair, mode: NonceMode) {
        self.issuer_pubkey = xonly_bytes(issuer);
        self.issuer_signature = schnorr_sign(issuer, &self.txid().0, mode);
    }

    fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let nonce = reader.read_array("mint nonce")?;
        let outputs = read_outputs(reader, limits)?;
        let issuer_pubkey = reader.read_array("issuer public key")?;
        let issuer_signature = reader.read_array("issuer signature")?;
        Ok(MintTransaction {
            nonce,
            outputs,
            issuer_pubkey,
            issuer_signature,
        })
    }
}

impl RedeemTransaction {
    /// The signed part: header ‖ kind ‖ u64le(amount) ‖ ser(vec<Input>) ‖ ser(vec<Output>).
    fn txid_preimage(&self) -> Vec<u8> {
        let mut preimage =
            Vec::with_capacity(9 + 8 + 16 + self.inputs.len() * INPUT_BYTES + self.outputs.len() * OUTPUT_BYTES);
        put_header(&mut preimage, KIND_REDEEM);
        put_u64(&mut preimage, self.amount);
        put_vec(&mut preimage, &self.inputs);
        put_vec(&mut preimage, &self.outputs);
        preimage
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    /// Builds a redeem and signs it by every input owner (`owners[i]` for input `i`) and the issuer.
    pub fn new_signed(
        amount: u64,
        inputs: Vec<Input>,
        outputs: Vec<Output>,
        owners: &[Keypair],
        issuer: &Keypair,
        mode: NonceMode,
    ) -> Result<Self, SignError> {
        let mut redeem = RedeemTransaction {
            amount,
            inputs,
            outputs,
            witnesses: Vec::new(),
            issuer_pubkey: xonly_bytes(issuer),
            issuer_signature: [0; SIGNATURE_BYTES],
        };
        redeem.sign(owners, issuer, mode)?;
        Ok(redeem)
    }

    /// (Re)signs: owner witnesses over the txid, then the issuer signature.
    pub fn sign(&mut self, owners: &[Keypair], issuer: &Keypair, mode: NonceMode) -> Result<(), SignError> {
        let txid = self.txid();
        self.witnesses = sign_inputs(&self.inputs, &txid.0, owners, mode)?;
        self.issuer_pubkey = xonly_bytes(issuer);
        self.issuer_signature = schnorr_sign(issuer, &txid.0, mode);
        Ok(())
    }

    fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let amount = reader.read_u64("redeem amount")?;
        let inputs = read_inputs(reader, limits)?;
        let outputs = read_outputs(reader, limits)?;
        let witnesses = read_witnesses(reader, limits)?;
        let issuer_pubkey = reader.read_array("issuer public key")?;
        let issuer_signature = reader.read_array("issuer signature")?;
        Ok(RedeemTransaction {
            amount,
            inputs,
            outputs,
            witnesses,
            issuer_pubkey,
            issuer_signature,
        })
    }
}

impl SpecieTransaction {
    /// The kind's stable name, as APIs, the inspector and auditors print it.
    pub fn kind_name(&self) -> &'static str {
        match self {
            SpecieTransaction::Transfer(_) => "transfer",
            SpecieTransaction::Mint(_) => "mint",
            SpecieTransaction::Redeem(_) => "redeem",
            // Stable names, kept from before these kinds were called bridge funding and payout.
            SpecieTransaction::BridgeFunding(_) => "offline_funding",
            SpecieTransaction::BridgePayout(_) => "offline_payout",
            SpecieTransaction::Capability(tx) => tx.kind_name(),
        }
    }

    pub fn txid(&self) -> Txid {
        match self {
            SpecieTransaction::Transfer(tx) => tx.txid(),
            SpecieTransaction::Mint(mint) => mint.txid(),
            SpecieTransaction::Redeem(redeem) => redeem.txid(),
            SpecieTransaction::BridgeFunding(funding) => funding.txid(),
            SpecieTransaction::BridgePayout(payout) => payout.txid(),
            SpecieTransaction::Capability(tx) => tx.txid(),
        }
    }

    /// The outputs this transaction creates, in order (transfer outputs, mint outputs, redeem
    /// and funding change, a FastPay redeem's one output). Markers are not outputs and are not
    /// listed (see [`SpecieTransaction::marker`]).
    pub fn outputs(&self) -> &[Output] {
        match self {
            SpecieTransaction::Transfer(tx) => &tx.outputs,
            SpecieTransaction::Mint(mint) => &mint.outputs,
            SpecieTransaction::Redeem(redeem) => &redeem.outputs,
            SpecieTransaction::BridgeFunding(funding) => &funding.outputs,
            SpecieTransaction::BridgePayout(payout) => payout.outputs(),
            SpecieTransaction::Capability(tx) => tx.outputs(),
        }
    }

    /// The transparent inputs this transaction spends (none for a mint or a FastPay redeem; a
    /// confidential transaction's confidential inputs are in its own list).
    pub fn inputs(&self) -> &[Input] {
        match self {
            SpecieTransaction::Transfer(tx) => &tx.inputs,
            SpecieTransaction::Mint(_) | SpecieTransaction::BridgePayout(_) => &[],
            SpecieTransaction::Redeem(redeem) => &redeem.inputs,
            SpecieTransaction::BridgeFunding(funding) => &funding.inputs,
            SpecieTransaction::Capability(tx) => tx.inputs(),
        }
    }

    /// The value-less, unspendable id this transaction creates after its outputs, if its kind
    /// has one: a mint's [`mint_marker`], a redeem's [`redeem_marker`], a bridge funding's or
    /// payout's, or a capability kind's own.
    pub fn marker(&self) -> Option<UhsId> {
        match self {
            SpecieTransaction::Transfer(_) => None,
            SpecieTransaction::Mint(mint) => Some(mint_marker(&mint.txid())),
            SpecieTransaction::Redeem(redeem) => Some(redeem_marker(&redeem.txid())),
            SpecieTransaction::BridgeFunding(funding) => Some(funding.marker()),
            SpecieTransaction::BridgePayout(payout) => Some(payout.marker()),
            SpecieTransaction::Capability(tx) => tx.marker(),
        }
    }

    /// Created outputs with their outpoints and UHS ids: what a wallet stores to spend them.
    pub fn created_outputs(&self) -> Vec<CreatedOutput> {
        created_outputs(self.txid(), self.outputs())
    }

    /// The compact transaction (no attestations). Does not validate: call a sentinel first.
    /// It spends the inputs' UHS ids and creates the outputs' UHS ids, then the kind's
    /// [`marker`](SpecieTransaction::marker), if any, last; a capability's kind says its own
    /// (the private kinds also spend and create outputs hidden in commitments).
    pub fn compact(&self) -> CompactTransaction {
        match self {
            SpecieTransaction::Capability(tx) => tx.compact(),
            _ => capability::compact_of(self.txid(), self.inputs(), self.outputs(), self.marker()),
        }
    }

    /// What this transaction does to the core's circulating supply (see
    /// [`Circulation`](crate::capability::Circulation)): a mint and a bridge payout bring value
    /// in, a redeem and a bridge funding take it out, a transfer moves it; a capability's kinds
    /// say for themselves.
    pub fn circulation(&self) -> capability::Circulation {
        use capability::{Circulation, Counterparty};
        let created = || self.outputs().iter().map(|output| output.value).sum();
        let issuer = |key: &[u8; 32]| Counterparty {
            role: Counterparty::ISSUER,
            key: *key,
        };
        let bridge = |key: &[u8; 32]| Counterparty {
            role: Counterparty::BRIDGE,
            key: *key,
        };
        match self {
            SpecieTransaction::Mint(mint) => Circulation::entered(issuer(&mint.issuer_pubkey), created()),
            SpecieTransaction::Redeem(redeem) => Circulation::left(issuer(&redeem.issuer_pubkey), redeem.amount),
            SpecieTransaction::BridgePayout(payout) => Circulation::entered(bridge(&payout.authority), created()),
            SpecieTransaction::BridgeFunding(funding) => Circulation::left(bridge(&funding.authority), funding.amount),
            SpecieTransaction::Transfer(_) => Circulation::default(),
            SpecieTransaction::Capability(tx) => tx.circulation(),
        }
    }

    /// This transaction as a capability kind's type `T`, if it is one.
    pub fn capability<T: CapabilityTransaction>(&self) -> Option<&T> {
        match self {
            SpecieTransaction::Capability(tx) => tx.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// True for byte strings that start like an extension transaction (all 7 magic bytes).
    pub fn is_extension_encoding(bytes: &[u8]) -> bool {
        bytes.starts_with(&EXTENSION_MAGIC)
    }
}

impl Encode for MintTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_MINT);
        out.extend_from_slice(&self.nonce);
        put_vec(out, &self.outputs);
        out.extend_from_slice(&self.issuer_pubkey);
        out.extend_from_slice(&self.issuer_signature);
    }
}

impl Encode for RedeemTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_REDEEM);
        put_u64(out, self.amount);
        put_vec(out, &self.inputs);
        put_vec(out, &self.outputs);
        put_vec(out, &self.witnesses);
        out.extend_from_slice(&self.issuer_pubkey);
        out.extend_from_slice(&self.issuer_signature);
    }
}

impl Encode for SpecieTransaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            SpecieTransaction::Transfer(tx) => tx.encode_to(out),
            SpecieTransaction::Mint(mint) => mint.encode_to(out),
            SpecieTransaction::Redeem(redeem) => redeem.encode_to(out),
            SpecieTransaction::BridgeFunding(funding) => funding.encode_to(out),
            SpecieTransaction::BridgePayout(payout) => payout.encode_to(out),
            SpecieTransaction::Capability(tx) => tx.encode_to(out),
        }
    }
}

impl Decode for MintTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "mint transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_MINT))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

impl Decode for RedeemTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "redeem transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_REDEEM))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

impl Decode for SpecieTransaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        if !SpecieTransaction::is_extension_encoding(reader.peek_rest()) {
            return Ok(SpecieTransaction::Transfer(Transaction::decode_from(reader, limits)?));
        }
        match read_header(reader, None)? {
            KIND_MINT => Ok(SpecieTransaction::Mint(MintTransaction::decode_body(reader, limits)?)),
            KIND_REDEEM => Ok(SpecieTransaction::Redeem(RedeemTransaction::decode_body(
                reader, limits,
            )?)),
            KIND_BRIDGE_FUND => Ok(SpecieTransaction::BridgeFunding(BridgeFunding::decode_body(
                reader, limits,
            )?)),
            KIND_BRIDGE_PAYOUT => Ok(SpecieTransaction::BridgePayout(BridgePayout::decode_body(reader)?)),
            kind => match capability::installed(kind) {
                Some(decoder) => Ok(SpecieTransaction::Capability(decoder.decode_body(reader, limits)?)),
                None => Err(DecodeError::UnknownKind {
                    what: "extension transaction kind",
                    kind,
                }),
            },
        }
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_bytes() {
        assert_eq!(hex::encode(EXTENSION_HEADER), "ff53504345585401");
        assert_eq!(MINT_MARKER_DOMAIN.len() + 32, 53);
        assert_eq!(REDEEM_MARKER_DOMAIN.len() + 32, 55);
        assert_ne!(REDEEM_MARKER_DOMAIN.len() + 32, crate::limits::INPUT_BYTES);
        assert_ne!(redeem_marker(&Txid([1; 32])), mint_marker(&Txid([1; 32])));
    }

    #[test]
    fn transfer_with_255_inputs_is_not_mistaken_for_an_extension() {
        let input = Input::default();
        let tx = Transaction {
            inputs: vec![input; 255],
            outputs: vec![Output::default()],
            witnesses: vec![],
        };
        let bytes = tx.encode();
        assert_eq!(bytes[0], 0xFF);
        assert_eq!(
            SpecieTransaction::decode_exact(&bytes),
            Ok(SpecieTransaction::Transfer(tx))
        );
    }

    #[test]
    fn header_errors_are_typed() {
        // The first kind not defined (0x08 is the anonymous transaction, which nothing here
        // installs, and 0x09 no one's).
        let mut bytes = EXTENSION_HEADER.to_vec();
        bytes.push(0x09);
        assert_eq!(
            SpecieTransaction::decode_exact(&bytes),
            Err(DecodeError::UnknownKind {
                what: "extension transaction kind",
                kind: 9
            })
        );
        bytes[7] = 2;
        assert!(matches!(
            SpecieTransaction::decode_exact(&bytes),
            Err(DecodeError::UnsupportedVersion { version: 2, .. })
        ));
        let mut redeem_header = EXTENSION_HEADER.to_vec();
        redeem_header.push(KIND_REDEEM);
        assert!(matches!(
            MintTransaction::decode_exact(&redeem_header),
            Err(DecodeError::UnknownKind { kind: KIND_REDEEM, .. })
        ));
        let mut bad_magic = redeem_header.clone();
        bad_magic[1] = b'X';
        assert!(matches!(
            RedeemTransaction::decode_exact(&bad_magic),
            Err(DecodeError::BadMagic { .. })
        ));
    }
}
