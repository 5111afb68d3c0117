//! An authority's issuing and certifying keys and the key ring payees trust, for the offline
//! tests: tokens issued, one-time keys certified, payments made and checked as a payee would.
#![allow(dead_code)] // each test module uses its own part of this

use specie_offline::{Issuance, KeyCertificate, KeyRing, PublicKey, SigningKey, Token};

/// The one period the certifying key serves.
pub const PERIOD: u32 = 5;

/// Test key `n` (a one-time key, an identity, …).
pub fn key(n: u8) -> SigningKey {
    SigningKey::from_bytes(&[n; 32])
}

pub fn public(n: u8) -> PublicKey {
    key(n).verifying_key().to_bytes()
}

pub struct World {
    pub ring: KeyRing,
    pub issuing: SigningKey,
    pub certifying: SigningKey,
}

impl World {
    /// Keys 250 (issuing, for `denomination`) and 251 (certifying, for [`PERIOD`]).
    pub fn new(denomination: u64) -> World {
        let (issuing, certifying) = (key(250), key(251));
        let mut ring = KeyRing::default();
        ring.add_issuing_key(issuing.verifying_key().to_bytes(), denomination)
            .unwrap();
        ring.add_certifying_key(PERIOD, certifying.verifying_key().to_bytes())
            .unwrap();
        World {
            ring,
            issuing,
            certifying,
        }
    }

    pub fn certified(&self, owner: &SigningKey) -> KeyCertificate {
        KeyCertificate::sign(owner.verifying_key().to_bytes(), PERIOD, &self.certifying)
    }

    /// A token of serial `[serial; 16]` issued to key `owner`.
    pub fn issue(&self, serial: u8, owner: u8) -> Token {
        Token::issued(Issuance::sign(&self.issuing, [serial; 16], public(owner)))
    }

    /// `token` passed on by its owner, key `from`, to key `to` at nonce `[nonce; 16]`, checked as
    /// a payee would.
    pub fn pay(&self, token: &Token, from: u8, to: u8, nonce: u8) -> Token {
        let paid = token
            .transfer(&key(from), self.certified(&key(to)), [nonce; 16])
            .unwrap();
        paid.verify(&self.ring).unwrap();
        paid
    }
}
