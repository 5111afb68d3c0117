//! The reference transfer transaction (OpenCBDC `full_tx`) and its parts, byte-compatible with
//! `src/uhs/transaction/transaction.{hpp,cpp}` and `src/util/serialization/format.cpp` of
//! mit-dci/opencbdc-tx.

use crate::hash::{sha256, Sha256Writer};
use crate::limits::{DecodeLimits, HASH_BYTES, INPUT_BYTES, OUTPUT_BYTES, OUT_POINT_BYTES, WITNESS_BYTES_MIN};
use crate::{Hash32, Txid, UhsId};
use specie_codec::{put_byte_vec, put_u64, put_vec, Decode, DecodeError, Encode, Reader};

/// Names one output of an earlier transaction: the creating txid and the output's index.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct OutPoint {
    pub txid: Txid,
    pub index: u64,
}

/// An output: who may spend it (a commitment to a witness program) and how much it is worth.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Output {
    /// SHA-256 of the witness program; for pay-to-pubkey, SHA-256(0x00 ‖ x-only pubkey).
    pub witness_program_commitment: Hash32,
    /// Value in the currency's smallest unit.
    pub value: u64,
}

/// An input: the outpoint being spent together with the full output it names. Carrying the
/// output lets sentinels validate without any state; the UHS id proves the data is honest.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default)]
pub struct Input {
    pub prevout: OutPoint,
    pub data: Output,
}

/// A witness: opaque bytes whose first byte is the witness program type (0x00 = p2pk).
#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct Witness(pub Vec<u8>);

/// The reference transfer transaction. One witness per input; witnesses are not part of the txid.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Transaction {
    pub inputs: Vec<Input>,
    pub outputs: Vec<Output>,
    pub witnesses: Vec<Witness>,
}

/// UHS id of output `index` of the transaction `txid`:
/// SHA-256(txid ‖ u64le(index) ‖ commitment ‖ u64le(value)). This is also SHA-256 of the input
/// that will later spend the output, so sentinels can compute it from the spender's data alone.
pub fn uhs_id_for(txid: &Txid, index: u64, output: &Output) -> UhsId {
    let mut hasher = Sha256Writer::new();
    hasher.update(&txid.0);
    hasher.update(&index.to_le_bytes());
    hasher.update(&output.witness_program_commitment);
    hasher.update(&output.value.to_le_bytes());
    UhsId(hasher.finish())
}

impl Input {
    /// The UHS id this input spends: SHA-256(ser(Input)).
    pub fn uhs_id(&self) -> UhsId {
        uhs_id_for(&self.prevout.txid, self.prevout.index, &self.data)
    }
}

impl Transaction {
    /// SHA-256(ser(vec<Input>) ‖ ser(vec<Output>)); witnesses excluded so that owners can sign it.
    pub fn txid(&self) -> Txid {
        let mut preimage = Vec::with_capacity(16 + self.inputs.len() * INPUT_BYTES + self.outputs.len() * OUTPUT_BYTES);
        put_vec(&mut preimage, &self.inputs);
        put_vec(&mut preimage, &self.outputs);
        Txid(sha256(&preimage))
    }

    /// UHS ids of the outputs, in output order, given this transaction's txid.
    pub fn output_uhs_ids(&self, txid: &Txid) -> Vec<UhsId> {
        outputs_uhs_ids(txid, &self.outputs)
    }

    /// Sum of input values, or `None` on u64 overflow.
    pub fn input_value_total(&self) -> Option<u64> {
        self.inputs
            .iter()
            .try_fold(0u64, |total, input| total.checked_add(input.data.value))
    }

    /// Sum of output values, or `None` on u64 overflow.
    pub fn output_value_total(&self) -> Option<u64> {
        outputs_value_total(&self.outputs)
    }
}

/// UHS ids of `outputs` created by `txid`, in order.
pub fn outputs_uhs_ids(txid: &Txid, outputs: &[Output]) -> Vec<UhsId> {
    outputs
        .iter()
        .enumerate()
        .map(|(index, output)| uhs_id_for(txid, index as u64, output))
        .collect()
}

/// Sum of output values, or `None` on u64 overflow.
pub fn outputs_value_total(outputs: &[Output]) -> Option<u64> {
    outputs
        .iter()
        .try_fold(0u64, |total, output| total.checked_add(output.value))
}

impl Encode for Txid {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

impl Encode for UhsId {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0);
    }
}

impl Encode for OutPoint {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.txid.encode_to(out);
        put_u64(out, self.index);
    }
}

impl Encode for Output {
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.witness_program_commitment);
        put_u64(out, self.value);
    }
}

impl Encode for Input {
    fn encode_to(&self, out: &mut Vec<u8>) {
        self.prevout.encode_to(out);
        self.data.encode_to(out);
    }
}

impl Encode for Witness {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_byte_vec(out, &self.0);
    }
}

impl Encode for Transaction {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_vec(out, &self.inputs);
        put_vec(out, &self.outputs);
        put_vec(out, &self.witnesses);
    }
}

impl Decode for Txid {
    type Limits = ();
    const WHAT: &'static str = "txid";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        Ok(Txid(reader.read_array(Self::WHAT)?))
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        HASH_BYTES
    }
}

impl Decode for UhsId {
    type Limits = ();
    const WHAT: &'static str = "uhs id";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        Ok(UhsId(reader.read_array(Self::WHAT)?))
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        HASH_BYTES
    }
}

impl Decode for OutPoint {
    type Limits = ();
    const WHAT: &'static str = "outpoint";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        let txid = Txid(reader.read_array("outpoint txid")?);
        let index = reader.read_u64("outpoint index")?;
        Ok(OutPoint { txid, index })
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        OUT_POINT_BYTES
    }
}

impl Decode for Output {
    type Limits = ();
    const WHAT: &'static str = "output";
    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        let witness_program_commitment = reader.read_array("output witness program commitment")?;
        let value = reader.read_u64("output value")?;
        Ok(Output {
            witness_program_commitment,
            value,
        })
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        OUTPUT_BYTES
    }
}

impl Decode for Input {
    type Limits = ();
    const WHAT: &'static str = "input";
    fn decode_from(reader: &mut Reader<'_>, limits: &()) -> Result<Self, DecodeError> {
        let prevout = OutPoint::decode_from(reader, limits)?;
        let data = Output::decode_from(reader, limits)?;
        Ok(Input { prevout, data })
    }
    fn encoded_bytes_max(_limits: &()) -> usize {
        INPUT_BYTES
    }
}

impl Decode for Witness {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "witness";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let bytes = reader.read_byte_vec("witness bytes", limits.witness_bytes_max)?;
        Ok(Witness(bytes.to_vec()))
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        WITNESS_BYTES_MIN.saturating_add(usize::try_from(limits.witness_bytes_max).unwrap_or(usize::MAX))
    }
}

/// Reads `vec<Input>` under `limits.inputs_max`.
pub fn read_inputs(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Vec<Input>, DecodeError> {
    reader.read_vec("inputs", limits.inputs_max, INPUT_BYTES, |r| Input::decode_from(r, &()))
}

/// Reads `vec<Output>` under `limits.outputs_max`.
pub fn read_outputs(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Vec<Output>, DecodeError> {
    reader.read_vec("outputs", limits.outputs_max, OUTPUT_BYTES, |r| {
        Output::decode_from(r, &())
    })
}

/// Reads `vec<Witness>` under `limits.witnesses_max` and `limits.witness_bytes_max`.
pub fn read_witnesses(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Vec<Witness>, DecodeError> {
    reader.read_vec("witnesses", limits.witnesses_max, WITNESS_BYTES_MIN, |r| {
        Witness::decode_from(r, limits)
    })
}

impl Decode for Transaction {
    type Limits = DecodeLimits;
    const WHAT: &'static str = "transaction";
    fn decode_from(reader: &mut Reader<'_>, limits: &DecodeLimits) -> Result<Self, DecodeError> {
        let inputs = read_inputs(reader, limits)?;
        let outputs = read_outputs(reader, limits)?;
        let witnesses = read_witnesses(reader, limits)?;
        Ok(Transaction {
            inputs,
            outputs,
            witnesses,
        })
    }
    fn encoded_bytes_max(limits: &DecodeLimits) -> usize {
        limits.transaction_bytes_max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Transaction {
        Transaction {
            inputs: vec![Input {
                prevout: OutPoint {
                    txid: Txid([7; 32]),
                    index: 3,
                },
                data: Output {
                    witness_program_commitment: [9; 32],
                    value: 42,
                },
            }],
            outputs: vec![Output {
                witness_program_commitment: [5; 32],
                value: 42,
            }],
            witnesses: vec![Witness(vec![0; 97])],
        }
    }

    #[test]
    fn input_uhs_id_is_hash_of_serialized_input() {
        let tx = sample();
        let input = tx.inputs[0];
        assert_eq!(input.uhs_id().0, sha256(&input.encode()));
    }

    #[test]
    fn round_trip_and_length() {
        let tx = sample();
        let bytes = tx.encode();
        assert_eq!(bytes.len(), 8 + 80 + 8 + 40 + 8 + 8 + 97);
        assert_eq!(Transaction::decode_exact(&bytes), Ok(tx));
    }

    #[test]
    fn witness_limit_applies() {
        let mut tx = sample();
        tx.witnesses[0].0 = vec![0; 2000];
        let err = Transaction::decode_exact(&tx.encode()).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::CountTooLarge {
                what: "witness bytes",
                count: 2000,
                ..
            }
        ));
    }

    #[test]
    fn value_totals_detect_overflow() {
        let mut tx = sample();
        assert_eq!(tx.input_value_total(), Some(42));
        tx.outputs.push(Output {
            witness_program_commitment: [0; 32],
            value: u64::MAX,
        });
        assert_eq!(tx.output_value_total(), None);
    }
}
