//! Evidence of a double spend that anyone can check without trusting the authority
//! (docs/offline-mode.md, "Privacy"): the token as the accused held it, two different statements
//! it signed on it, and the binding of its one-time key to a registered identity.

use specie_codec::{DecodeError, Reader};
use thiserror::Error;

use crate::history::{Move, SignedMove};
use crate::keys::{KeyBinding, KeyCertificate, KeyRing, PublicKey};
use crate::token::{Token, TokenError, TOKEN_BYTES_MAX};
use crate::{read_version, ENCODING_VERSION, NONCE_BYTES, PUBLIC_KEY_BYTES, SIGNATURE_BYTES};

const MOVE_TRANSFER: u8 = 0;
const MOVE_DEPOSIT: u8 = 1;

/// The longest signed move: a transfer (kind, key certificate, nonce, signature).
const SIGNED_MOVE_BYTES_MAX: usize = 1 + crate::CERTIFIED_KEY_BYTES + NONCE_BYTES + SIGNATURE_BYTES;
/// The longest canonical evidence: version, the longest token, two moves, a binding.
pub const DOUBLE_SPEND_BYTES_MAX: usize =
    1 + TOKEN_BYTES_MAX + 2 * SIGNED_MOVE_BYTES_MAX + 2 * PUBLIC_KEY_BYTES + SIGNATURE_BYTES;

/// The owner of `token` (its last key) signed both `first` and `second` on its last link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleSpend {
    pub token: Token,
    pub first: SignedMove,
    pub second: SignedMove,
    /// The accused one-time key's binding to its registered identity.
    pub binding: KeyBinding,
}

/// Whom a double spend convicts, and of what value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Convicted {
    pub one_time_key: PublicKey,
    pub identity: PublicKey,
    pub denomination: u64,
}

/// Why evidence convicts no one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum EvidenceError {
    #[error("the token does not verify: {0}")]
    Token(#[from] TokenError),
    #[error("the two statements are the same: a replay, not a double spend")]
    SameStatement,
    #[error("both statements are deposits: one deposit sent twice")]
    BothDeposits,
    #[error("the accused owner's signature over a statement does not verify")]
    BadSignature,
    #[error("the binding is for another key, or does not verify")]
    BadBinding,
}

impl DoubleSpend {
    /// Checks the evidence with nothing but the key ring: the token verifies (so its last key
    /// really owned it), the two statements on its last link differ and are not both deposits,
    /// both verify under that key with the cofactored equation (what any batch verification
    /// accepts), and the key's binding names the identity.
    pub fn check(&self, ring: &KeyRing) -> Result<Convicted, EvidenceError> {
        let verified = self.token.verify(ring)?;
        let index = (self.token.hops.len() + 1) as u8;
        let (first, second) = (&self.first, &self.second);
        let message = |signed: &SignedMove| signed.statement.signing_bytes(&verified.link, index);
        if first.statement == second.statement {
            return Err(EvidenceError::SameStatement);
        }
        if first.statement.is_deposit() && second.statement.is_deposit() {
            return Err(EvidenceError::BothDeposits);
        }
        let owner = crate::keys::check_public_key(&verified.owner).map_err(TokenError::FirstOwner)?;
        for signed in [first, second] {
            if !specie_ed25519::verify_cofactored(&owner, &message(signed), &signed.signature) {
                return Err(EvidenceError::BadSignature);
            }
        }
        if self.binding.key != verified.owner || self.binding.check().is_err() {
            return Err(EvidenceError::BadBinding);
        }
        Ok(Convicted {
            one_time_key: verified.owner,
            identity: self.binding.identity,
            denomination: verified.denomination,
        })
    }

    /// Version, token, the two moves, the binding (identity, key, signature).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        self.token.encode_to(out);
        for signed in [&self.first, &self.second] {
            encode_move(signed, out);
        }
        out.extend_from_slice(&self.binding.identity);
        out.extend_from_slice(&self.binding.key);
        out.extend_from_slice(&self.binding.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<DoubleSpend, DecodeError> {
        read_version(reader, "double spend")?;
        Ok(DoubleSpend {
            token: Token::decode_from(reader)?,
            first: decode_move(reader)?,
            second: decode_move(reader)?,
            binding: KeyBinding {
                identity: reader.read_array("binding identity")?,
                key: reader.read_array("binding key")?,
                signature: reader.read_array("binding signature")?,
            },
        })
    }
}

fn encode_move(signed: &SignedMove, out: &mut Vec<u8>) {
    match &signed.statement {
        Move::Transfer { next_owner, nonce } => {
            out.push(MOVE_TRANSFER);
            next_owner.encode_to(out);
            out.extend_from_slice(nonce);
        }
        Move::Deposit { instruction, nonce } => {
            out.push(MOVE_DEPOSIT);
            out.extend_from_slice(instruction);
            out.extend_from_slice(nonce);
        }
    }
    out.extend_from_slice(&signed.signature);
}

fn decode_move(reader: &mut Reader<'_>) -> Result<SignedMove, DecodeError> {
    let statement = match reader.read_u8("move kind")? {
        MOVE_TRANSFER => Move::Transfer {
            next_owner: KeyCertificate::decode_from(reader)?,
            nonce: reader.read_array("transfer nonce")?,
        },
        MOVE_DEPOSIT => Move::Deposit {
            instruction: reader.read_array("deposit instruction")?,
            nonce: reader.read_array("deposit nonce")?,
        },
        kind => {
            return Err(DecodeError::UnknownKind {
                what: "move kind",
                kind,
            })
        }
    };
    Ok(SignedMove {
        statement,
        signature: reader.read_array("move signature")?,
    })
}
