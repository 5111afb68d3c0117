//! FastPay's two core transactions (seed 002 §4.3): a *funding* moves value out of core
//! circulation into one Byzantine-mode account, and a *FastPay redeem* brings a certified
//! transfer to `Recipient::Core` back as a core output. The full specification with test
//! vectors is `docs/transaction-format.md` §5.4–5.6; the rules in brief:
//!
//! * Funding (kind `0x03`): `header ‖ kind ‖ committee_id(32) ‖ account(32) ‖ amount(u64) ‖
//!   vec<Input> ‖ vec<Output> (change) ‖ vec<Witness>`, txid = SHA-256(everything but the
//!   witnesses), signed by every input owner, no issuer. Its compact transaction spends the
//!   inputs and creates the change plus [`fastpay_funding_marker`]`(txid)`: the id whose
//!   presence in the UHS authorities check before crediting the account, once.
//! * FastPay redeem (kind `0x04`): `header ‖ kind ‖ certificate` (the canonical encoding of
//!   `specie_fastpay::Certificate`). txid = SHA-256(header ‖ kind ‖ order digest). It creates
//!   output 0 `{ commitment: the order's core address, value: its amount }` plus
//!   [`fastpay_redeem_marker`]`(sender, sequence)`, so the shards refuse a second redeem of that
//!   account's transfer forever, whichever certificate carries it and even after the output is
//!   spent (FastPay's redeem log, `redeemed^x(σ)`).
//!
//! * FastPay committee epoch (kind `0x09`): `header ‖ kind ‖ record` (the canonical encoding of
//!   `specie_fastpay::CommitteeRecord`), txid = SHA-256(header ‖ kind ‖ previous id ‖ next
//!   committee). No value: it keeps the committee's record of an epoch in the ledger, and its
//!   marker [`fastpay_epoch_marker`]`(previous id)` lets the ledger hold one successor of each
//!   committee, so two records of one epoch can never both be published.
//!
//! **Markers are never spendable.** Spending a UHS id means presenting an input whose 80-byte
//! encoding hashes to it; the marker preimages are 25 + 32 = 57 bytes (funding) and
//! 24 + 32 + 8 = 64 bytes (redeem), 30 + 32 = 62 bytes (epoch), and the mint marker's is 53, so a marker equal to a
//! spendable id, or two markers of different kinds equal, would be a SHA-256 collision between
//! inputs of different lengths.

use std::any::Any;

use secp256k1::Keypair;
use specie_codec::{put_vec, Decode, DecodeError, Encode, Reader};
use specie_fastpay::{
    AccountKey, Certificate, CommitteeRecord, CoreAddress, Recipient, CERTIFICATE_BYTES_MAX, COMMITTEE_RECORD_BYTES_MAX,
};
use specie_transaction::bridge::{funding_preimage, read_funding_body, FundingBody};
use specie_transaction::extension::{put_header, read_header, MINT_MARKER_DOMAIN};
use specie_transaction::hash::{sha256, Sha256Writer};
use specie_transaction::limits::{DecodeLimits, HASH_BYTES, INPUT_BYTES};
use specie_transaction::signing::{sign_inputs, NonceMode, SignError};
use specie_transaction::{
    CapabilityKind, CapabilityTransaction, Circulation, Counterparty, Input, Output, SpecieTransaction, Txid, UhsId,
    Witness,
};

/// Kind byte of a FastPay funding (value leaves the core for a Byzantine-mode account).
pub const KIND_FASTPAY_FUND: u8 = 0x03;
/// Kind byte of a FastPay redeem (a certified transfer to the core becomes a core output).
pub const KIND_FASTPAY_REDEEM: u8 = 0x04;
/// Kind byte of a FastPay committee epoch (the signed record of the committee's next epoch,
/// kept in the ledger).
pub const KIND_FASTPAY_EPOCH: u8 = 0x09;

/// Domain separator of the funding marker (25 bytes; see the module docs for why its length
/// matters).
pub const FASTPAY_FUNDING_MARKER_DOMAIN: &[u8; 25] = b"specie/fastpay-funding/v1";
/// Domain separator of the FastPay redeem marker (24 bytes).
pub const FASTPAY_REDEEM_MARKER_DOMAIN: &[u8; 24] = b"specie/fastpay-redeem/v1";
/// Domain separator of the epoch marker (30 bytes).
pub const FASTPAY_EPOCH_MARKER_DOMAIN: &[u8; 30] = b"specie/fastpay-epoch-record/v1";
/// Bytes hashed into a funding marker: domain ‖ txid.
pub const FASTPAY_FUNDING_MARKER_PREIMAGE_BYTES: usize = FASTPAY_FUNDING_MARKER_DOMAIN.len() + HASH_BYTES;
/// Bytes hashed into a FastPay redeem marker: domain ‖ sender ‖ u64le(sequence).
pub const FASTPAY_REDEEM_MARKER_PREIMAGE_BYTES: usize = FASTPAY_REDEEM_MARKER_DOMAIN.len() + HASH_BYTES + 8;
/// Bytes hashed into an epoch marker: domain ‖ previous committee id.
pub const FASTPAY_EPOCH_MARKER_PREIMAGE_BYTES: usize = FASTPAY_EPOCH_MARKER_DOMAIN.len() + HASH_BYTES;

// A marker is unspendable only while its preimage cannot be an encoded input (80 bytes), and the
// kinds of marker stay apart only while their preimage lengths differ (the mint marker's is 53).
const _: () = assert!(FASTPAY_FUNDING_MARKER_PREIMAGE_BYTES == 57);
const _: () = assert!(FASTPAY_REDEEM_MARKER_PREIMAGE_BYTES == 64);
const _: () = assert!(FASTPAY_EPOCH_MARKER_PREIMAGE_BYTES == 62);
const _: () = assert!(FASTPAY_EPOCH_MARKER_PREIMAGE_BYTES != INPUT_BYTES);
const _: () = assert!(FASTPAY_FUNDING_MARKER_PREIMAGE_BYTES != INPUT_BYTES);
const _: () = assert!(FASTPAY_REDEEM_MARKER_PREIMAGE_BYTES != INPUT_BYTES);
const _: () = assert!(MINT_MARKER_DOMAIN.len() + HASH_BYTES != FASTPAY_FUNDING_MARKER_PREIMAGE_BYTES);
const _: () = assert!(MINT_MARKER_DOMAIN.len() + HASH_BYTES != FASTPAY_REDEEM_MARKER_PREIMAGE_BYTES);

/// The proof of a funding that FastPay authorities look for in the UHS:
/// SHA-256("specie/fastpay-funding/v1" ‖ txid).
pub fn fastpay_funding_marker(txid: &Txid) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(FASTPAY_FUNDING_MARKER_DOMAIN);
    hasher.update(&txid.0);
    UhsId(hasher.finish())
}

/// The redeem log entry of one account's transfer:
/// SHA-256("specie/fastpay-redeem/v1" ‖ sender ‖ u64le(sequence)).
pub fn fastpay_redeem_marker(sender: &AccountKey, sequence: u64) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(FASTPAY_REDEEM_MARKER_DOMAIN);
    hasher.update(&sender.0);
    hasher.update(&sequence.to_le_bytes());
    UhsId(hasher.finish())
}

/// The ledger's one successor of the committee `previous_id`:
/// SHA-256("specie/fastpay-epoch-record/v1" ‖ previous id).
pub fn fastpay_epoch_marker(previous_id: &[u8; 32]) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(FASTPAY_EPOCH_MARKER_DOMAIN);
    hasher.update(previous_id);
    UhsId(hasher.finish())
}

/// A funding: owners give up inputs, `amount` leaves core circulation into the Byzantine-mode
/// account `account` of the committee `committee_id`, change returns.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FastpayFunding {
    /// The committee whose authorities credit the funding (`Committee::id`).
    pub committee_id: [u8; 32],
    /// The Byzantine-mode account credited.
    pub account: AccountKey,
    /// Value moved to the account, in the smallest currency unit.
    pub amount: u64,
    pub inputs: Vec<Input>,
    /// Change outputs; may be empty.
    pub outputs: Vec<Output>,
    /// One p2pk witness per input, signing the funding txid.
    pub witnesses: Vec<Witness>,
}

/// What a confirmed funding entitles its account to: the authorities credit `amount` to
/// `account` once per `marker`, after finding `marker` in the UHS.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FastpayFundingClaim {
    pub committee_id: [u8; 32],
    pub account: AccountKey,
    pub amount: u64,
    pub marker: UhsId,
}

impl FastpayFunding {
    /// The signed part: header ‖ kind ‖ committee_id ‖ account ‖ u64le(amount) ‖ ser(vec<Input>)
    /// ‖ ser(vec<Output>).
    fn txid_preimage(&self) -> Vec<u8> {
        funding_preimage(
            KIND_FASTPAY_FUND,
            &self.committee_id,
            &self.account.0,
            self.amount,
            &self.inputs,
            &self.outputs,
        )
    }

    pub fn txid(&self) -> Txid {
        Txid(sha256(&self.txid_preimage()))
    }

    /// The id the compact transaction creates besides the change.
    pub fn marker(&self) -> UhsId {
        fastpay_funding_marker(&self.txid())
    }

    /// What the authorities credit once the marker is in the UHS.
    pub fn claim(&self) -> FastpayFundingClaim {
        FastpayFundingClaim {
            committee_id: self.committee_id,
            account: self.account,
            amount: self.amount,
            marker: self.marker(),
        }
    }

    /// Builds a funding and signs it by every input owner (`owners[i]` for input `i`).
    pub fn new_signed(
        committee_id: [u8; 32],
        account: AccountKey,
        amount: u64,
        inputs: Vec<Input>,
        outputs: Vec<Output>,
        owners: &[Keypair],
        mode: NonceMode,
    ) -> Result<Self, SignError> {
        let mut funding = FastpayFunding {
            committee_id,
            account,
            amount,
            inputs,
            outputs,
            witnesses: Vec::new(),
        };
        funding.sign(owners, mode)?;
        Ok(funding)
    }

    /// (Re)signs every input over the txid.
    pub fn sign(&mut self, owners: &[Keypair], mode: NonceMode) -> Result<(), SignError> {
        let txid = self.txid();
        self.witnesses = sign_inputs(&self.inputs, &txid.0, owners, mode)?;
        Ok(())
    }

    fn decode_body(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let FundingBody {
            destination,
            beneficiary,
            amount,
            inputs,
            outputs,
            witnesses,
        } = read_funding_body(reader, limits)?;
        Ok(FastpayFunding {
            committee_id: destination,
            account: AccountKey(beneficiary),
            amount,
            inputs,
            outputs,
            witnesses,
        })
    }
}

impl Encode for FastpayFunding {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.txid_preimage());
        put_vec(out, &self.witnesses);
    }
}

/// The redeem of a FastPay certificate: the certified order's amount returns to core
/// circulation as one output to the order's core address. The sentinel checks the certificate
/// against its configured committee; the redeem marker makes it happen at most once.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FastpayRedeem {
    certificate: Certificate,
    /// Derived from the certificate when it is built: one output when the recipient is the
    /// core, none otherwise (such a redeem is invalid). Kept so that every kind can lend its
    /// outputs as a slice.
    outputs: Vec<Output>,
}

impl FastpayRedeem {
    pub fn new(certificate: Certificate) -> Self {
        let order = &certificate.order.order;
        let outputs = match order.recipient {
            Recipient::Core(address) => vec![Output {
                witness_program_commitment: address.0,
                value: order.amount,
            }],
            Recipient::Account(_) => Vec::new(),
        };
        FastpayRedeem { certificate, outputs }
    }

    pub fn certificate(&self) -> &Certificate {
        &self.certificate
    }

    /// The core address paid, if the certified order pays the core.
    pub fn recipient(&self) -> Option<CoreAddress> {
        match self.certificate.order.order.recipient {
            Recipient::Core(address) => Some(address),
            Recipient::Account(_) => None,
        }
    }

    /// The output created: at index 0 of the txid, when the order pays the core.
    pub fn outputs(&self) -> &[Output] {
        &self.outputs
    }

    /// SHA-256(header ‖ kind ‖ order digest): one txid per certified order, whichever quorum
    /// signed the certificate.
    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::with_capacity(9 + 32);
        put_header(&mut preimage, KIND_FASTPAY_REDEEM);
        preimage.extend_from_slice(&self.certificate.order.order.digest());
        Txid(sha256(&preimage))
    }

    /// The redeem-log entry of the certified order's (sender, sequence).
    pub fn marker(&self) -> UhsId {
        let order = &self.certificate.order.order;
        fastpay_redeem_marker(&order.sender, order.sequence)
    }

    /// Reads the certificate from at most [`CERTIFICATE_BYTES_MAX`] bytes, so that no
    /// certificate can make the decoder read past the largest one a committee can sign.
    fn decode_body(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rest = reader.peek_rest();
        let mut bounded = Reader::new(&rest[..rest.len().min(CERTIFICATE_BYTES_MAX)]);
        let certificate = Certificate::decode_from(&mut bounded)?;
        reader.read_bytes("fastpay redeem certificate", bounded.offset())?;
        Ok(FastpayRedeem::new(certificate))
    }
}

impl Encode for FastpayRedeem {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_FASTPAY_REDEEM);
        self.certificate.encode_to(out);
    }
}

/// The committee's record of its next epoch, kept in the ledger: it moves no value, spends
/// nothing, and creates only [`fastpay_epoch_marker`]`(previous id)`, so the ledger holds at most
/// one successor of each committee. The sentinel checks the record against the epoch before.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FastpayEpoch {
    pub record: CommitteeRecord,
}

impl FastpayEpoch {
    /// SHA-256(header ‖ kind ‖ previous id ‖ next committee): one txid per record, whichever
    /// quorum endorsed it.
    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::with_capacity(9 + 32 + 13 + 32 * self.record.next.size());
        put_header(&mut preimage, KIND_FASTPAY_EPOCH);
        preimage.extend_from_slice(&self.record.previous_id);
        self.record.next.encode_to(&mut preimage);
        Txid(sha256(&preimage))
    }

    pub fn marker(&self) -> UhsId {
        fastpay_epoch_marker(&self.record.previous_id)
    }

    /// Reads the record from at most [`COMMITTEE_RECORD_BYTES_MAX`] bytes.
    fn decode_body(reader: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let rest = reader.peek_rest();
        let mut bounded = Reader::new(&rest[..rest.len().min(COMMITTEE_RECORD_BYTES_MAX)]);
        let record = CommitteeRecord::decode_from(&mut bounded)?;
        reader.read_bytes("fastpay epoch record", bounded.offset())?;
        Ok(FastpayEpoch { record })
    }
}

impl Encode for FastpayEpoch {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_header(out, KIND_FASTPAY_EPOCH);
        self.record.encode_to(out);
    }
}

impl Decode for FastpayEpoch {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "fastpay epoch transaction";
    fn decode_from(reader: &mut Reader<'_>, _limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_FASTPAY_EPOCH))?;
        Self::decode_body(reader)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

impl Decode for FastpayFunding {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "fastpay funding transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_FASTPAY_FUND))?;
        Self::decode_body(reader, limits)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

impl Decode for FastpayRedeem {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "fastpay redeem transaction";
    fn decode_from(reader: &mut Reader<'_>, _limits: &DecodeLimits) -> Result<Self, DecodeError> {
        read_header(reader, Some(KIND_FASTPAY_REDEEM))?;
        Self::decode_body(reader)
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

/// The decoder of kind `0x03`.
#[derive(Debug)]
pub struct FundingKind;

/// The decoder of kind `0x04`.
#[derive(Debug)]
pub struct RedeemKind;

/// The decoder of kind `0x09`.
#[derive(Debug)]
pub struct EpochKind;

impl CapabilityKind for EpochKind {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_EPOCH
    }
    fn name(&self) -> &'static str {
        "fastpay_epoch"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        _limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(FastpayEpoch::decode_body(reader)?))
    }
}

impl CapabilityTransaction for FastpayEpoch {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_EPOCH
    }
    fn kind_name(&self) -> &'static str {
        EpochKind.name()
    }
    fn txid(&self) -> Txid {
        FastpayEpoch::txid(self)
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        Encode::encode_to(self, out)
    }
    fn inputs(&self) -> &[Input] {
        &[]
    }
    fn outputs(&self) -> &[Output] {
        &[]
    }
    fn marker(&self) -> Option<UhsId> {
        Some(FastpayEpoch::marker(self))
    }
    /// No value moves: circulation is unchanged.
    fn circulation(&self) -> Circulation {
        Circulation::default()
    }
    fn clone_box(&self) -> Box<dyn CapabilityTransaction> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl CapabilityKind for FundingKind {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_FUND
    }
    fn name(&self) -> &'static str {
        "fastpay_funding"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(FastpayFunding::decode_body(reader, limits)?))
    }
}

impl CapabilityKind for RedeemKind {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_REDEEM
    }
    fn name(&self) -> &'static str {
        "fastpay_redeem"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        _limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(FastpayRedeem::decode_body(reader)?))
    }
}

impl CapabilityTransaction for FastpayFunding {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_FUND
    }
    fn kind_name(&self) -> &'static str {
        FundingKind.name()
    }
    fn txid(&self) -> Txid {
        FastpayFunding::txid(self)
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        Encode::encode_to(self, out)
    }
    fn inputs(&self) -> &[Input] {
        &self.inputs
    }
    fn outputs(&self) -> &[Output] {
        &self.outputs
    }
    fn marker(&self) -> Option<UhsId> {
        Some(FastpayFunding::marker(self))
    }
    /// The amount leaves core circulation for the committee's account.
    fn circulation(&self) -> Circulation {
        Circulation::left(committee(self.committee_id), self.amount)
    }
    fn clone_box(&self) -> Box<dyn CapabilityTransaction> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl CapabilityTransaction for FastpayRedeem {
    fn kind(&self) -> u8 {
        KIND_FASTPAY_REDEEM
    }
    fn kind_name(&self) -> &'static str {
        RedeemKind.name()
    }
    fn txid(&self) -> Txid {
        FastpayRedeem::txid(self)
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        Encode::encode_to(self, out)
    }
    fn inputs(&self) -> &[Input] {
        &[]
    }
    fn outputs(&self) -> &[Output] {
        FastpayRedeem::outputs(self)
    }
    fn marker(&self) -> Option<UhsId> {
        Some(FastpayRedeem::marker(self))
    }
    /// The certified amount comes back into core circulation from the committee.
    fn circulation(&self) -> Circulation {
        let value = self.outputs.iter().map(|output| output.value).sum();
        Circulation::entered(committee(self.certificate.committee_id), value)
    }
    fn clone_box(&self) -> Box<dyn CapabilityTransaction> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The supply report's role for a FastPay committee: value held in the Byzantine mode, by
/// committee id.
pub const COMMITTEE_ROLE: &str = "fastpay_committee";

fn committee(id: [u8; 32]) -> Counterparty {
    Counterparty {
        role: COMMITTEE_ROLE,
        key: id,
    }
}

impl From<FastpayFunding> for SpecieTransaction {
    fn from(funding: FastpayFunding) -> SpecieTransaction {
        SpecieTransaction::Capability(Box::new(funding))
    }
}

impl From<FastpayRedeem> for SpecieTransaction {
    fn from(redeem: FastpayRedeem) -> SpecieTransaction {
        SpecieTransaction::Capability(Box::new(redeem))
    }
}

impl From<FastpayEpoch> for SpecieTransaction {
    fn from(epoch: FastpayEpoch) -> SpecieTransaction {
        SpecieTransaction::Capability(Box::new(epoch))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_fastpay::{SignedOrder, TransferOrder};
    use specie_transaction::extension::EXTENSION_HEADER;
    use specie_transaction::mint_marker;

    fn certificate(recipient: Recipient, amount: u64, signers: &[u16]) -> Certificate {
        Certificate {
            kind: specie_fastpay::VoteKind::Prepare,
            order: SignedOrder {
                order: TransferOrder {
                    sender: AccountKey([5; 32]),
                    recipient,
                    amount,
                    sequence: 3,
                    memo: b"back".to_vec(),
                },
                signature: [6; 64],
            },
            committee_id: [7; 32],
            round: 0,
            signatures: signers.iter().map(|&signer| (signer, [signer as u8; 64])).collect(),
        }
    }

    #[test]
    fn marker_preimages_differ_in_length_from_inputs_and_from_each_other() {
        let lengths = [
            MINT_MARKER_DOMAIN.len() + 32,
            FASTPAY_FUNDING_MARKER_PREIMAGE_BYTES,
            FASTPAY_REDEEM_MARKER_PREIMAGE_BYTES,
            FASTPAY_EPOCH_MARKER_PREIMAGE_BYTES,
        ];
        assert_eq!(lengths, [53, 57, 64, 62]);
        assert!(!lengths.contains(&INPUT_BYTES));
        let txid = Txid([9; 32]);
        let mut preimage = FASTPAY_FUNDING_MARKER_DOMAIN.to_vec();
        preimage.extend_from_slice(&txid.0);
        assert_eq!(fastpay_funding_marker(&txid), UhsId(sha256(&preimage)));
        assert_ne!(fastpay_funding_marker(&txid), mint_marker(&txid));
        let mut preimage = FASTPAY_REDEEM_MARKER_DOMAIN.to_vec();
        preimage.extend_from_slice(&[5; 32]);
        preimage.extend_from_slice(&3u64.to_le_bytes());
        assert_eq!(fastpay_redeem_marker(&AccountKey([5; 32]), 3), UhsId(sha256(&preimage)));
        assert_ne!(
            fastpay_redeem_marker(&AccountKey([5; 32]), 3),
            fastpay_redeem_marker(&AccountKey([5; 32]), 4)
        );
    }

    #[test]
    fn every_certificate_of_one_order_redeems_to_the_same_txid_output_and_marker() {
        let address = CoreAddress([8; 32]);
        let by_first = FastpayRedeem::new(certificate(Recipient::Core(address), 10, &[0, 1, 2]));
        let by_last = FastpayRedeem::new(certificate(Recipient::Core(address), 10, &[1, 2, 3]));
        assert_eq!(by_first.txid(), by_last.txid());
        let (first, last) = (
            SpecieTransaction::from(by_first.clone()),
            SpecieTransaction::from(by_last),
        );
        assert_eq!(first.compact().created, last.compact().created);
        assert_eq!(
            first.outputs(),
            &[Output {
                witness_program_commitment: address.0,
                value: 10
            }]
        );
        assert_eq!(
            first.compact().created,
            vec![first.created_outputs()[0].uhs_id, by_first.marker()]
        );
        assert!(first.compact().spent.is_empty());

        // Another order for the same (sender, sequence): another txid, the same marker.
        let other = FastpayRedeem::new(certificate(Recipient::Core(address), 11, &[0, 1, 2]));
        assert_ne!(other.txid(), by_first.txid());
        assert_eq!(other.marker(), by_first.marker());
        assert_eq!(other.marker(), fastpay_redeem_marker(&AccountKey([5; 32]), 3));

        // A certificate that pays an account creates nothing but its marker (and is invalid).
        let to_account = FastpayRedeem::new(certificate(Recipient::Account(AccountKey([4; 32])), 10, &[0]));
        assert_eq!(to_account.recipient(), None);
        let to_account = SpecieTransaction::from(to_account);
        assert!(to_account.outputs().is_empty());
        assert_eq!(to_account.compact().created, vec![to_account.marker().unwrap()]);
    }

    #[test]
    fn a_funding_claims_its_amount_for_its_account_under_its_marker() {
        let funding = FastpayFunding {
            committee_id: [1; 32],
            account: AccountKey([2; 32]),
            amount: 25,
            inputs: vec![Input::default()],
            outputs: vec![Output::default()],
            witnesses: vec![Witness(vec![0; 97])],
        };
        let claim = funding.claim();
        assert_eq!(claim.marker, fastpay_funding_marker(&funding.txid()));
        assert_eq!(
            (claim.committee_id, claim.account, claim.amount),
            ([1; 32], AccountKey([2; 32]), 25)
        );
        // Witnesses are not in the txid; every other field is.
        let mut resigned = funding.clone();
        resigned.witnesses[0].0[5] = 1;
        assert_eq!(resigned.txid(), funding.txid());
        for changed in [
            FastpayFunding {
                committee_id: [9; 32],
                ..funding.clone()
            },
            FastpayFunding {
                account: AccountKey([9; 32]),
                ..funding.clone()
            },
            FastpayFunding {
                amount: 26,
                ..funding.clone()
            },
            FastpayFunding {
                outputs: vec![],
                ..funding.clone()
            },
        ] {
            assert_ne!(changed.txid(), funding.txid());
        }
        let tx = SpecieTransaction::from(funding.clone());
        let compact = tx.compact();
        assert_eq!(compact.spent, vec![Input::default().uhs_id()]);
        assert_eq!(compact.created.last(), Some(&claim.marker));
        assert_eq!(compact.created.len(), 2);
    }

    #[test]
    fn decoders_refuse_the_other_kinds_and_the_largest_certificate_still_decodes() {
        crate::install();
        let redeem = FastpayRedeem::new(certificate(Recipient::Core(CoreAddress([8; 32])), 10, &[0, 1, 2]));
        let bytes = redeem.encode();
        assert_eq!(FastpayRedeem::decode_exact(&bytes), Ok(redeem.clone()));
        assert!(matches!(
            FastpayFunding::decode_exact(&bytes),
            Err(DecodeError::UnknownKind {
                kind: KIND_FASTPAY_REDEEM,
                ..
            })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            SpecieTransaction::decode_exact(&longer),
            Err(DecodeError::TrailingBytes { trailing_bytes: 1 })
        ));
        // The largest certificate a committee can sign (longest memo, every member of the
        // largest committee) still decodes: the bound is not tighter than the format.
        let mut largest = certificate(Recipient::Core(CoreAddress([8; 32])), 10, &[]);
        largest.order.order.memo = vec![1; specie_fastpay::MEMO_BYTES_MAX];
        largest.signatures = (0..specie_fastpay::COMMITTEE_MEMBERS_MAX as u16)
            .map(|signer| (signer, [2; 64]))
            .collect();
        let largest = FastpayRedeem::new(largest);
        let bytes = largest.encode();
        assert_eq!(bytes.len(), EXTENSION_HEADER.len() + 1 + CERTIFICATE_BYTES_MAX);
        assert_eq!(
            SpecieTransaction::decode_exact(&bytes),
            Ok(SpecieTransaction::from(largest))
        );

        // The largest committee record (every seat of the largest committee endorsing) too,
        // within the transaction limit; one byte cut is refused.
        let members = (0..specie_fastpay::COMMITTEE_MEMBERS_MAX as u64)
            .map(|n| {
                specie_fastpay::deterministic_key("authority", n)
                    .verifying_key()
                    .to_bytes()
            })
            .collect::<Vec<_>>();
        let first = specie_fastpay::Committee::new(0, members.clone()).unwrap();
        let mut record = CommitteeRecord::propose(&first, members).unwrap();
        record.signatures = (0..specie_fastpay::COMMITTEE_MEMBERS_MAX as u16)
            .map(|seat| (seat, [3; 64]))
            .collect();
        let largest = FastpayEpoch { record };
        let bytes = largest.encode();
        assert_eq!(COMMITTEE_RECORD_BYTES_MAX, 25_138);
        assert_eq!(bytes.len(), EXTENSION_HEADER.len() + 1 + COMMITTEE_RECORD_BYTES_MAX);
        assert!(bytes.len() <= DecodeLimits::default().transaction_bytes_max);
        assert_eq!(
            SpecieTransaction::decode_exact(&bytes),
            Ok(SpecieTransaction::from(largest))
        );
        assert!(SpecieTransaction::decode_exact(&bytes[..bytes.len() - 1]).is_err());
    }
}
