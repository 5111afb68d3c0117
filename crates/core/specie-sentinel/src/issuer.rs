//! The issuer keys a sentinel accepts on mints and redeems.

use std::collections::BTreeMap;

use secp256k1::XOnlyPublicKey;
use specie_transaction::signing::parse_xonly;
use thiserror::Error;

/// Why an issuer key set could not be built.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum IssuerKeysError {
    #[error("{count} issuer keys configured; at most {max} are allowed")]
    TooMany { count: usize, max: usize },
    #[error("issuer key {index} is not 64 hex characters: {text:?}")]
    NotHex { index: usize, text: String },
    #[error("issuer key {index} is not a valid x-only public key")]
    InvalidKey { index: usize },
}

/// A set of x-only issuer public keys, parsed once so that validation only looks them up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IssuerKeys {
    keys: BTreeMap<[u8; 32], XOnlyPublicKey>,
}

impl IssuerKeys {
    /// A central bank has few issuing keys; a long list is a configuration mistake.
    pub const KEYS_MAX: usize = 64;

    /// No issuer: every mint and redeem fails with `unknown_issuer`.
    pub fn empty() -> Self {
        IssuerKeys::default()
    }

    pub fn new(keys: impl IntoIterator<Item = XOnlyPublicKey>) -> Result<Self, IssuerKeysError> {
        let mut set = IssuerKeys::default();
        for key in keys {
            set.keys.insert(key.serialize(), key);
            if set.keys.len() > Self::KEYS_MAX {
                return Err(IssuerKeysError::TooMany {
                    count: set.keys.len(),
                    max: Self::KEYS_MAX,
                });
            }
        }
        Ok(set)
    }

    /// From raw 32-byte x-only keys.
    pub fn from_bytes(keys: &[[u8; 32]]) -> Result<Self, IssuerKeysError> {
        Self::check_count(keys.len())?;
        let parsed = keys
            .iter()
            .enumerate()
            .map(|(index, bytes)| parse_xonly(bytes).ok_or(IssuerKeysError::InvalidKey { index }))
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(parsed)
    }

    /// From lowercase or uppercase hex strings (configuration files).
    pub fn from_hex<S: AsRef<str>>(keys: &[S]) -> Result<Self, IssuerKeysError> {
        Self::check_count(keys.len())?;
        let bytes = keys
            .iter()
            .enumerate()
            .map(|(index, text)| {
                let text = text.as_ref();
                let not_hex = || IssuerKeysError::NotHex {
                    index,
                    text: text.chars().take(80).collect(),
                };
                let decoded = hex::decode(text).map_err(|_| not_hex())?;
                <[u8; 32]>::try_from(decoded.as_slice()).map_err(|_| not_hex())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::from_bytes(&bytes)
    }

    fn check_count(count: usize) -> Result<(), IssuerKeysError> {
        if count > Self::KEYS_MAX {
            return Err(IssuerKeysError::TooMany {
                count,
                max: Self::KEYS_MAX,
            });
        }
        Ok(())
    }

    /// The parsed key for these bytes, if it is configured.
    pub fn get(&self, pubkey: &[u8; 32]) -> Option<&XOnlyPublicKey> {
        self.keys.get(pubkey)
    }

    pub fn contains(&self, pubkey: &[u8; 32]) -> bool {
        self.keys.contains_key(pubkey)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The configured keys in ascending byte order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8; 32]> {
        self.keys.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUER: &str = "531fe6068134503d2723133227c867ac8fa6c83c537e9a44c3c5bdbdcb1fe337";

    #[test]
    fn parsing_errors_are_typed() {
        let keys = IssuerKeys::from_hex(&[ISSUER]).unwrap();
        assert_eq!(keys.len(), 1);
        let bytes: [u8; 32] = hex::decode(ISSUER).unwrap().try_into().unwrap();
        assert!(keys.contains(&bytes));
        assert_eq!(
            IssuerKeys::from_hex(&["zz"]),
            Err(IssuerKeysError::NotHex {
                index: 0,
                text: "zz".into()
            })
        );
        assert_eq!(
            IssuerKeys::from_hex(&[ISSUER, &"ff".repeat(32)]),
            Err(IssuerKeysError::InvalidKey { index: 1 })
        );
        let many = vec![ISSUER; IssuerKeys::KEYS_MAX + 1];
        assert!(matches!(
            IssuerKeys::from_hex(&many),
            Err(IssuerKeysError::TooMany { .. })
        ));
        let from_vec: Vec<String> = vec![ISSUER.to_uppercase()];
        assert_eq!(IssuerKeys::from_hex(&from_vec), Ok(keys));
    }
}
