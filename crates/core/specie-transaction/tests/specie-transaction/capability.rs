//! Kinds a capability adds: a process decodes a kind byte only once a decoder is installed for
//! it, then the kind decodes, re-encodes and compacts as its type says; a byte claimed by two
//! kinds, or one of the core's own, is refused by `install` (it panics).
//!
//! Each test uses its own kind bytes, which no other test of this binary installs (installing
//! is for the whole process): `0xF1` and `0xF3` here, `0xF2` for the double claim.

use std::any::Any;

use specie_codec::{Decode, DecodeError, Encode, Reader};
use specie_transaction::capability::{install, installed};
use specie_transaction::extension::{put_header, EXTENSION_HEADER, KIND_MINT};
use specie_transaction::hash::sha256;
use specie_transaction::limits::DecodeLimits;
use specie_transaction::{
    uhs_id_for, CapabilityKind, CapabilityTransaction, Circulation, Input, Output, SpecieTransaction, Txid, UhsId,
};

/// A made-up kind: header ‖ kind ‖ u64le(value) ‖ commitment(32), creating that one output and
/// taking `value` out of circulation (as if to another mode). txid = SHA-256(all of it).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Token {
    kind: u8,
    outputs: [Output; 1],
}

impl Token {
    fn new(kind: u8, value: u64) -> Token {
        Token {
            kind,
            outputs: [Output {
                witness_program_commitment: [0x5A; 32],
                value,
            }],
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_header(&mut out, self.kind);
        out.extend_from_slice(&self.outputs[0].value.to_le_bytes());
        out.extend_from_slice(&self.outputs[0].witness_program_commitment);
        out
    }
}

impl CapabilityTransaction for Token {
    fn kind(&self) -> u8 {
        self.kind
    }
    fn kind_name(&self) -> &'static str {
        "test_token"
    }
    fn txid(&self) -> Txid {
        Txid(sha256(&self.bytes()))
    }
    fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.bytes());
    }
    fn inputs(&self) -> &[Input] {
        &[]
    }
    fn outputs(&self) -> &[Output] {
        &self.outputs
    }
    fn marker(&self) -> Option<UhsId> {
        Some(UhsId(sha256(&self.txid().0)))
    }
    fn circulation(&self) -> Circulation {
        Circulation {
            left: self.outputs[0].value,
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

/// The decoder of [`Token`]s on `kind`, under the name `name`.
#[derive(Debug)]
struct TokenKind {
    kind: u8,
    name: &'static str,
}

impl CapabilityKind for TokenKind {
    fn kind(&self) -> u8 {
        self.kind
    }
    fn name(&self) -> &'static str {
        self.name
    }
    fn decode_body(
        &self,
        reader: &mut Reader<'_>,
        _limits: &DecodeLimits,
    ) -> Result<Box<dyn CapabilityTransaction>, DecodeError> {
        let value = reader.read_u64("token value")?;
        let witness_program_commitment = reader.read_array("token commitment")?;
        Ok(Box::new(Token {
            kind: self.kind,
            outputs: [Output {
                witness_program_commitment,
                value,
            }],
        }))
    }
}

static TOKEN_F1: TokenKind = TokenKind {
    kind: 0xF1,
    name: "test_token",
};
static TOKEN_F2: TokenKind = TokenKind {
    kind: 0xF2,
    name: "test_token",
};
static OTHER_F2: TokenKind = TokenKind {
    kind: 0xF2,
    name: "another_test_token",
};
static ON_MINT: TokenKind = TokenKind {
    kind: KIND_MINT,
    name: "test_token",
};

fn unknown(kind: u8) -> DecodeError {
    DecodeError::UnknownKind {
        what: "extension transaction kind",
        kind,
    }
}

#[test]
fn a_kind_nobody_installed_is_unknown() {
    let bytes = Token::new(0xF3, 7).bytes();
    assert!(installed(0xF3).is_none());
    assert_eq!(SpecieTransaction::decode_exact(&bytes), Err(unknown(0xF3)));
    // Its header alone, too: the kind is refused before its body is read.
    let mut header = EXTENSION_HEADER.to_vec();
    header.push(0xF3);
    assert_eq!(SpecieTransaction::decode_exact(&header), Err(unknown(0xF3)));
}

#[test]
fn an_installed_kind_decodes_round_trips_and_compacts_as_its_type_says() {
    let token = Token::new(0xF1, 7);
    let bytes = token.bytes();
    assert_eq!(SpecieTransaction::decode_exact(&bytes), Err(unknown(0xF1)));

    install(&[&TOKEN_F1]);
    install(&[&TOKEN_F1]); // idempotent
    assert_eq!(installed(0xF1).map(|kind| kind.name()), Some("test_token"));
    let tx = SpecieTransaction::decode_exact(&bytes).unwrap();
    assert_eq!(tx, SpecieTransaction::Capability(Box::new(token.clone())));
    assert_eq!(tx.capability::<Token>(), Some(&token));
    assert_eq!(tx.encode(), bytes);
    assert!(SpecieTransaction::is_extension_encoding(&bytes));
    assert_eq!((tx.kind_name(), tx.txid()), ("test_token", token.txid()));

    // What the core makes of it comes from the type: outputs, marker, compact, circulation.
    let output = token.outputs[0];
    let created = tx.created_outputs();
    assert_eq!(created.len(), 1);
    assert_eq!((created[0].output, created[0].outpoint.index), (output, 0));
    assert_eq!(created[0].uhs_id, uhs_id_for(&token.txid(), 0, &output));
    let compact = tx.compact();
    assert!(compact.spent.is_empty());
    assert_eq!(compact.created, vec![created[0].uhs_id, token.marker().unwrap()]);
    assert_eq!(tx.circulation().left, 7);

    // Its decoder bounds it like any other kind: short and long bytes are refused.
    assert!(SpecieTransaction::decode_exact(&bytes[..bytes.len() - 1]).is_err());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(matches!(
        SpecieTransaction::decode_exact(&longer),
        Err(DecodeError::TrailingBytes { trailing_bytes: 1 })
    ));
    // Another value, another txid; other kinds stay unknown.
    let other = Token::new(0xF1, 8);
    assert_ne!(other.txid(), token.txid());
    assert_eq!(
        SpecieTransaction::decode_exact(&other.bytes())
            .unwrap()
            .capability::<Token>(),
        Some(&other)
    );
    assert_eq!(
        SpecieTransaction::decode_exact(&Token::new(0xF3, 7).bytes()),
        Err(unknown(0xF3))
    );
}

#[test]
#[should_panic(expected = "kind 0xf2 is claimed by two capabilities")]
fn installing_a_second_kind_on_a_byte_panics() {
    install(&[&TOKEN_F2]);
    install(&[&OTHER_F2]);
}

#[test]
#[should_panic(expected = "kind 0x01 (test_token) is one of the core's own")]
fn installing_a_kind_on_a_core_byte_panics() {
    install(&[&ON_MINT]);
}
