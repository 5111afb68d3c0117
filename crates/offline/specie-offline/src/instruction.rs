//! What a deposit asks the authority to do with the token's value. The owner's deposit statement
//! signs the instruction's hash, so no one on the way can redirect the value.

use sha2::{Digest, Sha256};
use specie_codec::{put_u64, DecodeError, Reader};

use crate::keys::PublicKey;
use crate::{read_version, ENCODING_VERSION, PUBLIC_KEY_BYTES};

/// Hashed with an instruction's encoding: the hash a deposit statement signs.
const INSTRUCTION_DOMAIN: &[u8] = b"specie/offline/instruction/v1";

const INSTRUCTION_REISSUE: u8 = 0;
const INSTRUCTION_DEFUND: u8 = 1;

/// Most tokens one deposited token may be re-issued as (change at the authority: one large token
/// for many small ones).
pub const REISSUE_OUTPUTS_MAX: usize = 64;
/// One re-issued token in an instruction: its value and its first owner.
const REISSUE_OUTPUT_BYTES: usize = 8 + PUBLIC_KEY_BYTES;
/// The longest canonical instruction: version, kind, count, `REISSUE_OUTPUTS_MAX` outputs.
pub const INSTRUCTION_BYTES_MAX: usize = 1 + 1 + 1 + REISSUE_OUTPUTS_MAX * REISSUE_OUTPUT_BYTES;

/// A deposit's instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// Fresh tokens of these values to these certified one-time keys of the depositor's (or of
    /// anyone's: a deposit may pay). The values must add up to the deposited token's.
    Reissue { outputs: Vec<(u64, PublicKey)> },
    /// The value back to the online core, to this address (a BIP-340 x-only key).
    Defund { address: [u8; 32] },
}

impl Instruction {
    /// Version, kind; then for a re-issue a `u8` count and (value `u64`, owner) per output, for a
    /// defund the address.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        match self {
            Instruction::Reissue { outputs } => {
                assert!(
                    outputs.len() <= REISSUE_OUTPUTS_MAX,
                    "a re-issue has at most REISSUE_OUTPUTS_MAX outputs"
                );
                out.push(INSTRUCTION_REISSUE);
                out.push(outputs.len() as u8);
                for (value, owner) in outputs {
                    put_u64(out, *value);
                    out.extend_from_slice(owner);
                }
            }
            Instruction::Defund { address } => {
                out.push(INSTRUCTION_DEFUND);
                out.extend_from_slice(address);
            }
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_to(&mut out);
        out
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Instruction, DecodeError> {
        read_version(reader, "instruction")?;
        match reader.read_u8("instruction kind")? {
            INSTRUCTION_REISSUE => {
                let count = reader.read_u8_count(
                    "re-issue output count",
                    REISSUE_OUTPUTS_MAX as u64,
                    REISSUE_OUTPUT_BYTES,
                )?;
                let mut outputs = Vec::with_capacity(count);
                for _ in 0..count {
                    outputs.push((reader.read_u64("re-issue value")?, reader.read_array("re-issue owner")?));
                }
                Ok(Instruction::Reissue { outputs })
            }
            INSTRUCTION_DEFUND => Ok(Instruction::Defund {
                address: reader.read_array("defund address")?,
            }),
            kind => Err(DecodeError::UnknownKind {
                what: "instruction kind",
                kind,
            }),
        }
    }

    /// What the owner's deposit statement signs: SHA-256 of the domain and the encoding.
    pub fn hash(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(INSTRUCTION_DOMAIN);
        hasher.update(self.encode());
        hasher.finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_round_trip_and_hash_apart() {
        let reissue = Instruction::Reissue {
            outputs: vec![(5, [1; 32]), (2, [2; 32])],
        };
        let defund = Instruction::Defund { address: [3; 32] };
        for instruction in [&reissue, &defund] {
            let bytes = instruction.encode();
            let decoded =
                crate::decode_exact("instruction", &bytes, INSTRUCTION_BYTES_MAX, Instruction::decode_from).unwrap();
            assert_eq!(&decoded, instruction);
        }
        assert_ne!(reissue.hash(), defund.hash());
        let swapped = Instruction::Reissue {
            outputs: vec![(2, [2; 32]), (5, [1; 32])],
        };
        assert_ne!(reissue.hash(), swapped.hash(), "the order of outputs is signed");
        let mut too_many = vec![ENCODING_VERSION, INSTRUCTION_REISSUE, (REISSUE_OUTPUTS_MAX + 1) as u8];
        too_many.extend(std::iter::repeat_n(0, (REISSUE_OUTPUTS_MAX + 1) * REISSUE_OUTPUT_BYTES));
        assert!(matches!(
            Instruction::decode_from(&mut Reader::new(&too_many)),
            Err(DecodeError::CountTooLarge { .. })
        ));
    }
}
