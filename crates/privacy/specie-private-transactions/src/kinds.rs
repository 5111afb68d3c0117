//! The private kinds as the core carries them (`specie_transaction::capability`): their decoders,
//! and what the core needs of each transaction. Both spend and create outputs hidden in
//! commitments besides the transparent ones, so each says its own compact transaction; neither
//! changes the circulating supply (values only move between the transparent and the private
//! outputs of one transaction, balanced by its proof).

use std::any::Any;

use specie_codec::{DecodeError, Encode, Reader};
use specie_transaction::{
    uhs_id_for, CapabilityKind, CapabilityTransaction, Circulation, CompactTransaction, DecodeLimits, Input, Output,
    SpecieTransaction, Txid, UhsId,
};

use crate::anonymous::AnonymousTransaction;
use crate::confidential::ConfidentialTransaction;
use crate::unlinkable::UnlinkableTransaction;
use crate::{KIND_ANONYMOUS, KIND_CONFIDENTIAL, KIND_UNLINKABLE};

/// The decoder of kind `0x07`.
#[derive(Debug)]
pub struct ConfidentialKind;

/// The decoder of kind `0x08`.
#[derive(Debug)]
pub struct AnonymousKind;

/// The decoder of kind `0x0a`.
#[derive(Debug)]
pub struct UnlinkableKind;

impl CapabilityKind for UnlinkableKind {
    fn kind(&self) -> u8 {
        KIND_UNLINKABLE
    }
    fn name(&self) -> &'static str {
        "unlinkable"
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        Ok(Box::new(UnlinkableTransaction::decode_body(reader, limits)?))
    }
}

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

/// The ids a private transaction spends (its transparent inputs', then its private inputs') and
/// creates (its transparent outputs', then its private outputs'), for its txid.
pub(crate) fn private_uhs_ids(
    txid: &Txid,
    transparent_inputs: &[Input],
    private_spent: impl Iterator<Item = UhsId>,
    transparent_outputs: &[Output],
    private_created: impl Iterator<Item = UhsId>,
) -> (Vec<UhsId>, Vec<UhsId>) {
    let spent = transparent_inputs
        .iter()
        .map(Input::uhs_id)
        .chain(private_spent)
        .collect();
    let created = (transparent_outputs.iter().enumerate())
        .map(|(index, output)| uhs_id_for(txid, index as u64, output))
        .chain(private_created)
        .collect();
    (spent, created)
}

/// One p2pk witness per transparent input, `keys[i]` signing `txid` for input `i` (each key
/// checked to own its input): what the private kinds' own witnesses are.
pub(crate) fn sign_transparent_inputs(
    inputs: &[Input],
    keys: &[secp256k1::Keypair],
    txid: &Txid,
    mode: specie_transaction::NonceMode,
) -> Result<Vec<specie_transaction::Witness>, specie_transaction::signing::SignError> {
    use specie_transaction::signing::{P2pkWitness, SignError};
    if keys.len() != inputs.len() {
        return Err(SignError::KeypairCount {
            keypairs: keys.len(),
            inputs: inputs.len(),
        });
    }
    (inputs.iter().zip(keys).enumerate())
        .map(|(index, (input, key))| {
            let witness = P2pkWitness::sign(key, &txid.0, mode);
            if witness.program_commitment() != input.data.witness_program_commitment {
                return Err(SignError::KeyMismatch { index });
            }
            Ok(witness.to_witness())
        })
        .collect()
}

/// The compact transaction of a private kind, its txid (which hashes the proofs) hashed once.
fn compact(txid: Txid, uhs_ids_of: impl FnOnce(Txid) -> (Vec<UhsId>, Vec<UhsId>)) -> CompactTransaction {
    let (spent, created) = uhs_ids_of(txid);
    CompactTransaction {
        txid,
        spent,
        created,
        attestations: Default::default(),
    }
}

/// What the core needs of a private kind: its transparent inputs and outputs, no marker, its own
/// compact transaction (its private outputs after the transparent ones), no change to the
/// circulating supply. The two kinds differ only in their types, bytes and names.
macro_rules! private_capability_transaction {
    ($tx:ty, $kind:expr, $decoder:expr) => {
        impl CapabilityTransaction for $tx {
            fn kind(&self) -> u8 {
                $kind
            }
            fn kind_name(&self) -> &'static str {
                $decoder.name()
            }
            fn txid(&self) -> Txid {
                <$tx>::txid(self)
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
            fn compact(&self) -> CompactTransaction {
                compact(<$tx>::txid(self), |txid| self.uhs_ids_of(txid))
            }
            /// Nothing enters or leaves circulation: the public inputs go into notes whose
            /// values are hidden, and the public outputs come out of them.
            fn circulation(&self) -> Circulation {
                let sum = |values: &[Output]| values.iter().map(|output| output.value).sum();
                Circulation {
                    hidden_in: self.transparent_inputs.iter().map(|input| input.data.value).sum(),
                    hidden_out: sum(&self.transparent_outputs),
                    ..Circulation::default()
                }
            }
            fn clone_box(&self) -> Box<dyn CapabilityTransaction> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> &dyn Any {
                self
            }
        }

        impl From<$tx> for SpecieTransaction {
            fn from(tx: $tx) -> SpecieTransaction {
                SpecieTransaction::Capability(Box::new(tx))
            }
        }
    };
}

private_capability_transaction!(ConfidentialTransaction, KIND_CONFIDENTIAL, ConfidentialKind);
private_capability_transaction!(AnonymousTransaction, KIND_ANONYMOUS, AnonymousKind);
private_capability_transaction!(UnlinkableTransaction, KIND_UNLINKABLE, UnlinkableKind);
