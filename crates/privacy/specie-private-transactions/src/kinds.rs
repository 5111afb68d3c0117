//! The two kinds as the core carries them (`specie_transaction::capability`): their decoders,
//! and what the core needs of each transaction. Both spend and create outputs hidden in
//! commitments besides the transparent ones, so each says its own compact transaction; neither
//! changes the circulating supply (values only move between the transparent and the private
//! outputs of one transaction, balanced by its proof).

use std::any::Any;

use specie_codec::{DecodeError, Encode, Reader};
use specie_transaction::{
    CapabilityKind, CapabilityTransaction, Circulation, CompactTransaction, DecodeLimits, Input, Output,
    SpecieTransaction, Txid, UhsId,
};

use crate::anonymous::AnonymousTransaction;
use crate::confidential::ConfidentialTransaction;
use crate::{KIND_ANONYMOUS, KIND_CONFIDENTIAL};

/// The decoder of kind `0x07`.
#[derive(Debug)]
pub struct ConfidentialKind;

/// The decoder of kind `0x08`.
#[derive(Debug)]
pub struct AnonymousKind;

impl CapabilityKind for ConfidentialKind {
    fn kind(&self) -> u8 {
        KIND_CONFIDENTIAL
    }
    fn name(&self) -> &'static str {
        "confidential"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(ConfidentialTransaction::decode_body(reader, limits)?))
    }
}

impl CapabilityKind for AnonymousKind {
    fn kind(&self) -> u8 {
        KIND_ANONYMOUS
    }
    fn name(&self) -> &'static str {
        "anonymous"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(AnonymousTransaction::decode_body(reader, limits)?))
    }
}

/// The compact transaction of ids spent and created, in the kinds' order.
fn compact((spent, created): (Vec<UhsId>, Vec<UhsId>), txid: Txid) -> CompactTransaction {
    CompactTransaction {
        txid,
        spent,
        created,
        attestations: Default::default(),
    }
}

impl CapabilityTransaction for ConfidentialTransaction {
    fn kind(&self) -> u8 {
        KIND_CONFIDENTIAL
    }
    fn kind_name(&self) -> &'static str {
        ConfidentialKind.name()
    }
    fn txid(&self) -> Txid {
        ConfidentialTransaction::txid(self)
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        Encode::encode_to(self, out)
    }
    fn inputs(&self) -> &[Input] {
        &self.transparent_inputs
    }
    fn outputs(&self) -> &[Output] {
        &self.transparent_outputs
    }
    fn marker(&self) -> Option<UhsId> {
        None
    }
    /// Transparent inputs, then confidential; transparent outputs, then confidential.
    fn compact(&self) -> CompactTransaction {
        compact(self.uhs_ids(), ConfidentialTransaction::txid(self))
    }
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

impl CapabilityTransaction for AnonymousTransaction {
    fn kind(&self) -> u8 {
        KIND_ANONYMOUS
    }
    fn kind_name(&self) -> &'static str {
        AnonymousKind.name()
    }
    fn txid(&self) -> Txid {
        AnonymousTransaction::txid(self)
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        Encode::encode_to(self, out)
    }
    fn inputs(&self) -> &[Input] {
        &self.transparent_inputs
    }
    fn outputs(&self) -> &[Output] {
        &self.transparent_outputs
    }
    fn marker(&self) -> Option<UhsId> {
        None
    }
    /// Transparent inputs, then anonymous; transparent outputs, then anonymous.
    fn compact(&self) -> CompactTransaction {
        compact(self.uhs_ids(), AnonymousTransaction::txid(self))
    }
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

impl From<ConfidentialTransaction> for SpecieTransaction {
    fn from(tx: ConfidentialTransaction) -> SpecieTransaction {
        SpecieTransaction::Capability(Box::new(tx))
    }
}

impl From<AnonymousTransaction> for SpecieTransaction {
    fn from(tx: AnonymousTransaction) -> SpecieTransaction {
        SpecieTransaction::Capability(Box::new(tx))
    }
}
