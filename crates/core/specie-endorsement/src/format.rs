//! The `Endorsement` a transaction carries (docs/endorsement-format.md): the batch's threshold
//! signature, the transaction's position in the batch and its Merkle path. One canonical,
//! versioned encoding; a bounded decoder; verification with libsecp256k1's BIP340 check, the same
//! check the core already runs on sentinel attestations.

use std::collections::{HashSet, VecDeque};

use secp256k1::{schnorr, XOnlyPublicKey, SECP256K1};
use specie_codec::{Decode, DecodeError, Encode, Reader};
use thiserror::Error;

use crate::merkle::{batch_message, path_len, root_from_path, Hash, BATCH_TRANSACTIONS_MAX, PATH_SIBLINGS_MAX};

/// The encoding version this code writes and reads.
pub const ENDORSEMENT_VERSION: u8 = 1;
/// Bytes of a BIP340 signature.
pub const SIGNATURE_BYTES: usize = 64;
/// Bytes of an endorsement with an empty path (a batch of one): version, signature, leaf count,
/// index, sibling count.
pub const ENDORSEMENT_BYTES_MIN: usize = 1 + SIGNATURE_BYTES + 4 + 4 + 1;
/// Bytes of the largest endorsement (a path of [`PATH_SIBLINGS_MAX`] siblings).
pub const ENDORSEMENT_BYTES_MAX: usize = ENDORSEMENT_BYTES_MIN + 32 * PATH_SIBLINGS_MAX;

/// The endorsers' group key: a BIP340 x-only public key (the FROST group's verifying key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey(pub [u8; 32]);

impl GroupKey {
    /// The key as libsecp256k1 parses it; `None` if the bytes are not a point's x coordinate.
    pub fn xonly(&self) -> Option<XOnlyPublicKey> {
        XOnlyPublicKey::from_byte_array(&self.0).ok()
    }
}

/// Proof that the endorsers' group signed the batch holding one transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endorsement {
    /// BIP340 signature of the group key over [`batch_message`]`(leaf_count, root)`.
    pub signature: [u8; SIGNATURE_BYTES],
    /// Transactions in the batch: 1 to [`BATCH_TRANSACTIONS_MAX`].
    pub leaf_count: u32,
    /// The transaction's position in the batch: below `leaf_count`.
    pub index: u32,
    /// Siblings from the leaf up; exactly [`path_len`]`(index, leaf_count)` of them.
    pub siblings: Vec<Hash>,
}

/// Why an endorsement does not endorse a transaction.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    #[error("the path does not fit its position: leaf {index} of {leaf_count} needs another number of siblings than {siblings}")]
    BadPath {
        index: u32,
        leaf_count: u32,
        siblings: usize,
    },
    #[error("the group key is not a valid x-only public key")]
    BadGroupKey,
    #[error("the signature does not verify under the group key for this transaction's batch")]
    BadSignature,
}

impl Endorsement {
    /// The batch message this endorsement's path leads to from `digest`: what the signature must
    /// sign. Fails if the path's shape does not match its position.
    pub fn batch_message_for(&self, digest: &Hash) -> Result<Hash, VerifyError> {
        let root = root_from_path(digest, self.index, self.leaf_count, &self.siblings).ok_or(VerifyError::BadPath {
            index: self.index,
            leaf_count: self.leaf_count,
            siblings: self.siblings.len(),
        })?;
        Ok(batch_message(self.leaf_count, &root))
    }

    /// Checks that the group `key` endorsed the transaction whose digest is `digest`: the path
    /// leads to a root, and the signature over that batch verifies (BIP340, libsecp256k1).
    pub fn verify(&self, key: &GroupKey, digest: &Hash) -> Result<(), VerifyError> {
        let message = self.batch_message_for(digest)?;
        let key = key.xonly().ok_or(VerifyError::BadGroupKey)?;
        verify_signature(&key, &message, &self.signature)
    }
}

fn verify_signature(
    key: &XOnlyPublicKey,
    message: &Hash,
    signature: &[u8; SIGNATURE_BYTES],
) -> Result<(), VerifyError> {
    let signature = schnorr::Signature::from_byte_array(*signature);
    SECP256K1
        .verify_schnorr(&signature, message, key)
        .map_err(|_| VerifyError::BadSignature)
}

impl Encode for Endorsement {
    fn encode_to(&self, out: &mut Vec<u8>) {
        debug_assert!(self.index < self.leaf_count && self.siblings.len() <= PATH_SIBLINGS_MAX);
        out.push(ENDORSEMENT_VERSION);
        out.extend_from_slice(&self.signature);
        specie_codec::put_u32(out, self.leaf_count);
        specie_codec::put_u32(out, self.index);
        // At most PATH_SIBLINGS_MAX (16) siblings, so one byte counts them.
        out.push(self.siblings.len() as u8);
        for sibling in &self.siblings {
            out.extend_from_slice(sibling);
        }
    }
}

impl Decode for Endorsement {
    type Limits = ();
    const WHAT: &'static str = "endorsement";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        reader.read_version("endorsement version", ENDORSEMENT_VERSION)?;
        let signature = reader.read_array::<SIGNATURE_BYTES>("endorsement signature")?;
        let leaf_count = reader.read_u32("endorsement leaf count")?;
        if leaf_count == 0 || leaf_count as usize > BATCH_TRANSACTIONS_MAX {
            return Err(DecodeError::Invalid {
                what: "endorsement leaf count",
                reason: format!("{leaf_count} is not between 1 and {BATCH_TRANSACTIONS_MAX}"),
            });
        }
        let index = reader.read_u32("endorsement index")?;
        if index >= leaf_count {
            return Err(DecodeError::Invalid {
                what: "endorsement index",
                reason: format!("{index} is not below the leaf count {leaf_count}"),
            });
        }
        let count = reader.read_u8_count("endorsement path", PATH_SIBLINGS_MAX as u64, 32)?;
        let expected = path_len(index, leaf_count);
        if count != expected {
            return Err(DecodeError::Invalid {
                what: "endorsement path",
                reason: format!("leaf {index} of {leaf_count} has {expected} siblings, not {count}"),
            });
        }
        let siblings = (0..count)
            .map(|_| reader.read_array::<32>("endorsement path sibling"))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Endorsement {
            signature,
            leaf_count,
            index,
            siblings,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        ENDORSEMENT_BYTES_MAX
    }
}

/// Verifies endorsements with one signature check per batch: a shard, the atomizer or an auditor
/// sees many transactions of each batch, and all but the first cost only a path (a few SHA-256
/// compressions) and a lookup.
///
/// Only signatures that verified are cached, keyed by (batch message, signature), so a forged
/// signature is checked (and refused) every time and cannot evict anything but older entries.
pub struct EndorsementVerifier {
    key: XOnlyPublicKey,
    verified: HashSet<(Hash, [u8; SIGNATURE_BYTES])>,
    /// Insertion order, to evict the oldest batch once `cache_batches_max` are kept.
    order: VecDeque<(Hash, [u8; SIGNATURE_BYTES])>,
    cache_batches_max: usize,
}

impl EndorsementVerifier {
    /// A verifier for the group `key`, caching up to `cache_batches_max` verified batches.
    pub fn new(key: &GroupKey, cache_batches_max: usize) -> Result<EndorsementVerifier, VerifyError> {
        assert!(cache_batches_max >= 1, "a verifier caches at least one batch");
        Ok(EndorsementVerifier {
            key: key.xonly().ok_or(VerifyError::BadGroupKey)?,
            verified: HashSet::with_capacity(cache_batches_max),
            order: VecDeque::with_capacity(cache_batches_max),
            cache_batches_max,
        })
    }

    /// [`Endorsement::verify`], with the batch's signature check cached.
    pub fn verify(&mut self, endorsement: &Endorsement, digest: &Hash) -> Result<(), VerifyError> {
        let message = endorsement.batch_message_for(digest)?;
        let entry = (message, endorsement.signature);
        if self.verified.contains(&entry) {
            return Ok(());
        }
        verify_signature(&self.key, &message, &endorsement.signature)?;
        if self.order.len() == self.cache_batches_max {
            let oldest = self.order.pop_front().expect("a full cache is not empty");
            self.verified.remove(&oldest);
        }
        self.verified.insert(entry);
        self.order.push_back(entry);
        debug_assert_eq!(self.verified.len(), self.order.len());
        Ok(())
    }

    /// Batches whose signature is cached.
    pub fn cached_batches(&self) -> usize {
        self.verified.len()
    }
}
