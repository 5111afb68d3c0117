//! Evidence of a double spend that anyone can check without trusting the authority
//! (docs/offline-mode.md, "Privacy"): the token as the accused held it, two different statements
//! it signed on it, and the binding of its one-time key to a registered identity.

use specie_codec::{DecodeError, Reader};
use thiserror::Error;

use crate::history::{SignedMove, SIGNED_MOVE_BYTES_MAX};
use crate::keys::{KeyBinding, KeyRing, PublicKey};
use crate::token::{Token, TokenError, TOKEN_BYTES_MAX};
use crate::{read_version, ENCODING_VERSION, PUBLIC_KEY_BYTES, SIGNATURE_BYTES};

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
        self.first.encode_to(out);
        self.second.encode_to(out);
        self.binding.encode_to(out);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<DoubleSpend, DecodeError> {
        read_version(reader, "double spend")?;
        Ok(DoubleSpend {
            token: Token::decode_from(reader)?,
            first: SignedMove::decode_from(reader)?,
            second: SignedMove::decode_from(reader)?,
            binding: KeyBinding::decode_from(reader)?,
        })
    }
}

/// Most double spends one evidence bundle carries.
pub const BUNDLE_DOUBLE_SPENDS_MAX: usize = 255;
/// The longest canonical bundle.
pub const EVIDENCE_BUNDLE_BYTES_MAX: usize =
    1 + crate::keys::KEY_RING_BYTES_MAX + 1 + BUNDLE_DOUBLE_SPENDS_MAX * DOUBLE_SPEND_BYTES_MAX;
/// The shortest double spend: version, an issued token, two deposit moves, a binding.
const DOUBLE_SPEND_BYTES_MIN: usize =
    1 + 146 + 2 * (1 + 32 + 16 + SIGNATURE_BYTES) + 2 * PUBLIC_KEY_BYTES + SIGNATURE_BYTES;

/// What `specie offline check-evidence` reads: double spends with the key ring they are checked
/// against. The ring travels with them, so the checker needs nothing else, and its fingerprint is
/// what the checker compares with the key set the authority published.
#[derive(Clone, Debug)]
pub struct EvidenceBundle {
    pub ring: KeyRing,
    pub double_spends: Vec<DoubleSpend>,
}

impl EvidenceBundle {
    /// Version, key ring, count (`u8`), double spends.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        assert!(
            self.double_spends.len() <= BUNDLE_DOUBLE_SPENDS_MAX,
            "a bundle holds at most BUNDLE_DOUBLE_SPENDS_MAX"
        );
        out.push(ENCODING_VERSION);
        self.ring.encode_to(out);
        out.push(self.double_spends.len() as u8);
        for double_spend in &self.double_spends {
            double_spend.encode_to(out);
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<EvidenceBundle, DecodeError> {
        read_version(reader, "evidence bundle")?;
        let ring = KeyRing::decode_from(reader)?;
        let count = reader.read_u8_count(
            "double spend count",
            BUNDLE_DOUBLE_SPENDS_MAX as u64,
            DOUBLE_SPEND_BYTES_MIN,
        )?;
        let double_spends = (0..count)
            .map(|_| DoubleSpend::decode_from(reader))
            .collect::<Result<_, _>>()?;
        Ok(EvidenceBundle { ring, double_spends })
    }
}
