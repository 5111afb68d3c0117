//! Transaction kinds a capability adds to the core's format, without the core knowing them.
//!
//! The core's own kinds (transfer, mint, redeem, bridge funding and payout) are variants of
//! [`SpecieTransaction`](crate::SpecieTransaction). A capability that moves value in and out of
//! the core (FastPay's funding and redeem, the privacy levels' confidential and anonymous
//! transactions) defines its kinds in its own bridge crate:
//!
//! * each transaction type implements [`CapabilityTransaction`]: what the core needs of any
//!   transaction (txid, encoding, the UHS ids it spends and creates, what it does to the
//!   circulating supply);
//! * each kind byte has a [`CapabilityKind`], its decoder;
//! * the deployment that assembles the capabilities (the binary, the node, the cluster, a test)
//!   [`install`]s their kinds once, before it decodes anything. A process decodes the kinds
//!   installed in it and refuses every other kind byte as `UnknownKind`, as it always has.
//!
//! The encoding is the extension format of [`crate::extension`]: header, kind byte, the kind's
//! body. Kind bytes are one namespace, listed in `docs/transaction-format.md` §5; installing
//! two kinds on one byte is a programming error and panics.

use std::any::Any;
use std::fmt::Debug;
use std::sync::OnceLock;

use specie_codec::{DecodeError, Reader};

use crate::limits::DecodeLimits;
use crate::transaction::{outputs_uhs_ids, Input, Output};
use crate::{CompactTransaction, Txid, UhsId};

/// What a transaction does to the core's circulating supply: the value it brings into the
/// core's circulation (a mint, a certified FastPay transfer redeemed, a bridge's payout) and the
/// value it takes out (a redeem, a funding of another mode), with whom; and the transparent value
/// it moves into notes whose values are hidden and back out (the private kinds). The supply
/// report adds these up per counterparty (docs/operator-guide.md, "The supply report").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Circulation {
    pub entered: u64,
    pub left: u64,
    /// Whose value entered or left: the issuer that minted or redeemed, the mode that was
    /// funded or paid back. `None` when nothing entered or left.
    pub counterparty: Option<Counterparty>,
    /// Transparent value spent into hidden notes (a private kind's public inputs).
    pub hidden_in: u64,
    /// Transparent value created out of hidden notes (a private kind's public outputs).
    pub hidden_out: u64,
}

/// Who is on the other side of value entering or leaving core circulation: `role` names what
/// `key` is ([`Counterparty::ISSUER`], [`Counterparty::BRIDGE`], or a capability's own, such as
/// FastPay's `fastpay_committee`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Counterparty {
    pub role: &'static str,
    pub key: [u8; 32],
}

impl Counterparty {
    /// An issuer's key: what it mints enters circulation, what it redeems leaves.
    pub const ISSUER: &'static str = "issuer";
    /// A bridge's key (the offline authority's, the exchange's): fundings leave circulation
    /// to it, its payouts come back.
    pub const BRIDGE: &'static str = "bridge";
}

impl Circulation {
    /// `value` entered circulation from `counterparty`.
    pub fn entered(counterparty: Counterparty, value: u64) -> Circulation {
        Circulation {
            entered: value,
            counterparty: Some(counterparty),
            ..Circulation::default()
        }
    }

    /// `value` left circulation to `counterparty`.
    pub fn left(counterparty: Counterparty, value: u64) -> Circulation {
        Circulation {
            left: value,
            counterparty: Some(counterparty),
            ..Circulation::default()
        }
    }
}

/// A transaction of a kind a capability adds. Object safe: the core holds it boxed.
pub trait CapabilityTransaction: Any + Debug + Send + Sync {
    /// The kind byte after the extension header.
    fn kind(&self) -> u8;
    /// The kind's stable name, as APIs, the inspector and auditors print it.
    fn kind_name(&self) -> &'static str;
    fn txid(&self) -> Txid;
    /// The whole encoding: extension header, kind byte, body.
    fn encode_to(&self, out: &mut Vec<u8>);
    /// The transparent inputs spent.
    fn inputs(&self) -> &[Input];
    /// The transparent outputs created, in order (index `i` is output `i` of the txid).
    fn outputs(&self) -> &[Output];
    /// The value-less, unspendable id created after the outputs, if the kind has one.
    fn marker(&self) -> Option<UhsId>;
    /// The compact transaction (no attestations): the inputs' UHS ids spent, the outputs'
    /// and then the marker created. A kind whose ids are not those (the private kinds hide
    /// theirs in commitments) says so here.
    fn compact(&self) -> CompactTransaction {
        compact_of(self.txid(), self.inputs(), self.outputs(), self.marker())
    }
    fn circulation(&self) -> Circulation;
    fn clone_box(&self) -> Box<dyn CapabilityTransaction>;
    fn as_any(&self) -> &dyn Any;
}

/// The compact transaction of transparent inputs and outputs and an optional marker.
pub fn compact_of(txid: Txid, inputs: &[Input], outputs: &[Output], marker: Option<UhsId>) -> CompactTransaction {
    let spent = inputs.iter().map(Input::uhs_id).collect();
    let mut created = outputs_uhs_ids(&txid, outputs);
    created.extend(marker);
    CompactTransaction {
        txid,
        spent,
        created,
        attestations: Default::default(),
    }
}

impl dyn CapabilityTransaction {
    /// This transaction as its concrete type, if it is one.
    pub fn downcast_ref<T: CapabilityTransaction>(&self) -> Option<&T> {
        self.as_any().downcast_ref::<T>()
    }

    /// The whole encoding.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out);
        out
    }
}

impl Clone for Box<dyn CapabilityTransaction> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// Two transactions are equal when their canonical encodings are.
impl PartialEq for dyn CapabilityTransaction {
    fn eq(&self, other: &Self) -> bool {
        self.kind() == other.kind() && self.encode() == other.encode()
    }
}

impl Eq for dyn CapabilityTransaction {}

/// The decoder of one kind byte.
pub trait CapabilityKind: Debug + Send + Sync {
    fn kind(&self) -> u8;
    fn name(&self) -> &'static str;
    /// Reads the body that follows the header and kind byte, within `limits`.
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError>;
}

static INSTALLED: [OnceLock<&'static dyn CapabilityKind>; 256] = [const { OnceLock::new() }; 256];

/// Makes this process decode `kinds`. Idempotent; installing a kind byte the core owns, or one
/// another kind holds, panics: the deployment is assembled wrong.
pub fn install(kinds: &[&'static dyn CapabilityKind]) {
    for kind in kinds {
        let byte = kind.kind();
        assert!(
            !crate::extension::is_core_kind(byte),
            "kind 0x{byte:02x} ({}) is one of the core's own",
            kind.name()
        );
        let held = INSTALLED[usize::from(byte)].get_or_init(|| *kind);
        assert_eq!(
            held.name(),
            kind.name(),
            "kind 0x{byte:02x} is claimed by two capabilities"
        );
    }
}

/// The decoder installed for `kind`, if any.
pub fn installed(kind: u8) -> Option<&'static dyn CapabilityKind> {
    INSTALLED[usize::from(kind)].get().copied()
}
