//! Tokens: an issuance by the authority's issuing key, then one signed statement per hop, each
//! binding the previous statement's hash (its *link*), the hop's index, the next owner's certified
//! one-time key and the payee's handshake nonce. A transfer replayed to the same payee is the same
//! statement, and a second transfer of the same token is a different statement with the same
//! link: the authority tells them apart from the statements alone (docs/offline-mode.md, "The
//! double-spend rule").

use ed25519_dalek::ed25519::signature::Keypair;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use sha2::{Digest, Sha256};
use specie_codec::{put_u32, DecodeError, Reader};
use thiserror::Error;

use crate::keys::{check_public_key, KeyCertificate, KeyError, KeyRing, PublicKey, CERTIFIED_KEY_BYTES};
use crate::{read_version, ENCODING_VERSION, NONCE_BYTES, PUBLIC_KEY_BYTES, SERIAL_BYTES, SIGNATURE_BYTES};

/// Signed by issuing keys: a new token and its first owner.
const ISSUE_DOMAIN: &[u8] = b"specie/offline/issue/v1";
/// Signed by a token's owner: the token passes to the next owner.
const TRANSFER_DOMAIN: &[u8] = b"specie/offline/transfer/v1";

/// Hops a token may carry before it must go back to the authority, whatever the policy says: the
/// decoder's bound (devices enforce a lower policy limit, docs/offline-mode.md).
pub const HOPS_MAX: usize = 32;
/// One hop's encoding: the next owner's key certificate, the payee's nonce, the owner's signature.
pub const HOP_BYTES: usize = CERTIFIED_KEY_BYTES + NONCE_BYTES + SIGNATURE_BYTES;
/// An issuance's encoding: issuing key, serial, first owner, signature.
pub const ISSUANCE_BYTES: usize = 2 * PUBLIC_KEY_BYTES + SERIAL_BYTES + SIGNATURE_BYTES;
/// The longest canonical token: version, issuance, hop count, `HOPS_MAX` hops.
pub const TOKEN_BYTES_MAX: usize = 1 + ISSUANCE_BYTES + 1 + HOPS_MAX * HOP_BYTES;

/// SHA-256 of a statement's signing bytes: what the next statement signs, and what the
/// authority's tree of a token's history is made of.
pub type Link = [u8; 32];

/// The authority's issuance of a token to its first owner (a registered one-time key: the
/// issuance vouches for it, so it carries no certificate). The denomination is the issuing key's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Issuance {
    pub issuing_key: PublicKey,
    pub serial: [u8; SERIAL_BYTES],
    pub first_owner: PublicKey,
    pub signature: [u8; SIGNATURE_BYTES],
}

impl Issuance {
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(ISSUE_DOMAIN.len() + 1 + ISSUANCE_BYTES);
        bytes.extend_from_slice(ISSUE_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(&self.issuing_key);
        bytes.extend_from_slice(&self.serial);
        bytes.extend_from_slice(&self.first_owner);
        bytes
    }

    /// Signed by `issuing`: a [`SigningKey`], or one expanded once (`specie_ed25519::ExpandedSigningKey`).
    pub fn sign<K>(issuing: &K, serial: [u8; SERIAL_BYTES], first_owner: PublicKey) -> Issuance
    where
        K: Signer<Signature> + Keypair<VerifyingKey = VerifyingKey>,
    {
        let mut issuance = Issuance {
            issuing_key: issuing.verifying_key().to_bytes(),
            serial,
            first_owner,
            signature: [0; SIGNATURE_BYTES],
        };
        issuance.signature = issuing.sign(&issuance.signing_bytes()).to_bytes();
        issuance
    }

    /// Issuing key, serial, first owner, signature: the issuance as it is inside a token, and
    /// wherever else one travels (with the version byte of what carries it).
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.issuing_key);
        out.extend_from_slice(&self.serial);
        out.extend_from_slice(&self.first_owner);
        out.extend_from_slice(&self.signature);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Issuance, DecodeError> {
        Ok(Issuance {
            issuing_key: reader.read_array("issuing key")?,
            serial: reader.read_array("serial")?,
            first_owner: reader.read_array("first owner")?,
            signature: reader.read_array("issuance signature")?,
        })
    }

    /// The token's first link: the hash of the issuance statement.
    pub fn link(&self) -> Link {
        Sha256::digest(self.signing_bytes()).into()
    }
}

/// One hop: the next owner (with its certificate), the payee's nonce, the owner's signature over
/// the transfer statement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hop {
    pub next_owner: KeyCertificate,
    pub nonce: [u8; NONCE_BYTES],
    pub signature: [u8; SIGNATURE_BYTES],
}

impl Hop {
    /// What the owner signs to pass the token on as its `index`-th hop (from 1): the domain, the
    /// version, the previous link, the index, the next owner's key and certificate period, and the
    /// payee's nonce.
    pub fn signing_bytes(
        previous: &Link,
        index: u8,
        next_owner: &KeyCertificate,
        nonce: &[u8; NONCE_BYTES],
    ) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(TRANSFER_DOMAIN.len() + 1 + 32 + 1 + PUBLIC_KEY_BYTES + 4 + NONCE_BYTES);
        bytes.extend_from_slice(TRANSFER_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(previous);
        bytes.push(index);
        bytes.extend_from_slice(&next_owner.key);
        put_u32(&mut bytes, next_owner.period);
        bytes.extend_from_slice(nonce);
        bytes
    }
}

/// Why a token is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum TokenError {
    #[error("issued by a key that is not a known issuing key")]
    UnknownIssuingKey,
    #[error("the first owner's key: {0}")]
    FirstOwner(KeyError),
    #[error("the issuing key's signature does not verify")]
    BadIssuance,
    #[error("{hops} hops, more than {hops_max}")]
    TooManyHops { hops: usize, hops_max: usize },
    #[error("hop {hop}: the new owner's key certificate: {error}")]
    Certificate { hop: usize, error: KeyError },
    #[error("hop {hop}: the owner's signature does not verify")]
    BadTransfer { hop: usize },
    #[error("signed with a key that does not own the token")]
    NotTheOwner,
}

/// What a verified token is: its denomination, its current owner and its last link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified {
    pub denomination: u64,
    pub owner: PublicKey,
    pub link: Link,
}

/// A token with its whole chain since issuance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Token {
    pub issuance: Issuance,
    pub hops: Vec<Hop>,
}

impl Token {
    pub fn issued(issuance: Issuance) -> Token {
        Token {
            issuance,
            hops: Vec::new(),
        }
    }

    /// The key that owns the token now.
    pub fn owner(&self) -> &PublicKey {
        self.hops
            .last()
            .map_or(&self.issuance.first_owner, |hop| &hop.next_owner.key)
    }

    /// Every link of the chain, the issuance's first: `links()[i]` is what hop `i + 1` signs.
    pub fn links(&self) -> Vec<Link> {
        let mut links = Vec::with_capacity(1 + self.hops.len());
        links.push(self.issuance.link());
        for (i, hop) in self.hops.iter().enumerate() {
            let message = Hop::signing_bytes(&links[i], (i + 1) as u8, &hop.next_owner, &hop.nonce);
            links.push(Sha256::digest(message).into());
        }
        links
    }

    /// The token passed on by its `owner` to `next_owner`, at the payee's `nonce`.
    pub fn transfer(
        &self,
        owner: &SigningKey,
        next_owner: KeyCertificate,
        nonce: [u8; NONCE_BYTES],
    ) -> Result<Token, TokenError> {
        if owner.verifying_key().to_bytes() != *self.owner() {
            return Err(TokenError::NotTheOwner);
        }
        if self.hops.len() >= HOPS_MAX {
            return Err(TokenError::TooManyHops {
                hops: self.hops.len() + 1,
                hops_max: HOPS_MAX,
            });
        }
        let last = *self.links().last().expect("an issuance link");
        let index = (self.hops.len() + 1) as u8;
        let signature = owner
            .sign(&Hop::signing_bytes(&last, index, &next_owner, &nonce))
            .to_bytes();
        let mut token = self.clone();
        token.hops.push(Hop {
            next_owner,
            nonce,
            signature,
        });
        Ok(token)
    }

    /// Checks the whole chain as a payee does (seed 001, §IV-C): a known issuing key signed the
    /// issuance, every new owner's key is certified, and every owner signed the hop that passed
    /// the token on. Signatures are verified strictly, one at a time. Whether the owner is the
    /// payee, and its nonce the payee's, is the payee's to check with what this returns.
    pub fn verify(&self, ring: &KeyRing) -> Result<Verified, TokenError> {
        if self.hops.len() > HOPS_MAX {
            return Err(TokenError::TooManyHops {
                hops: self.hops.len(),
                hops_max: HOPS_MAX,
            });
        }
        let issuance = &self.issuance;
        let (denomination, issuing) = ring
            .issuing_key(&issuance.issuing_key)
            .ok_or(TokenError::UnknownIssuingKey)?;
        let mut owner = check_public_key(&issuance.first_owner).map_err(TokenError::FirstOwner)?;
        issuing
            .verify_strict(&issuance.signing_bytes(), &Signature::from_bytes(&issuance.signature))
            .map_err(|_| TokenError::BadIssuance)?;
        let mut link = issuance.link();
        for (i, hop) in self.hops.iter().enumerate() {
            let index = i + 1;
            let next = hop
                .next_owner
                .check(ring)
                .map_err(|error| TokenError::Certificate { hop: index, error })?;
            let message = Hop::signing_bytes(&link, index as u8, &hop.next_owner, &hop.nonce);
            owner
                .verify_strict(&message, &Signature::from_bytes(&hop.signature))
                .map_err(|_| TokenError::BadTransfer { hop: index })?;
            link = Sha256::digest(message).into();
            owner = next;
        }
        Ok(Verified {
            denomination,
            owner: *self.owner(),
            link,
        })
    }

    /// The canonical encoding: version, issuance (issuing key, serial, first owner, signature),
    /// hop count (`u8`), hops.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        assert!(self.hops.len() <= HOPS_MAX, "a token never grows past HOPS_MAX");
        out.push(ENCODING_VERSION);
        self.issuance.encode_to(out);
        out.push(self.hops.len() as u8);
        for hop in &self.hops {
            hop.next_owner.encode_to(out);
            out.extend_from_slice(&hop.nonce);
            out.extend_from_slice(&hop.signature);
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Token, DecodeError> {
        read_version(reader, "token")?;
        let issuance = Issuance::decode_from(reader)?;
        let count = reader.read_u8_count("hop count", HOPS_MAX as u64, HOP_BYTES)?;
        let mut hops = Vec::with_capacity(count);
        for _ in 0..count {
            hops.push(Hop {
                next_owner: KeyCertificate::decode_from(reader)?,
                nonce: reader.read_array("payee nonce")?,
                signature: reader.read_array("transfer signature")?,
            });
        }
        Ok(Token { issuance, hops })
    }
}
