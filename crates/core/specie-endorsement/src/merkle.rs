//! The batch's Merkle tree: `specie-merkle`'s trees (the one implementation specie has) of kind
//! [`TREE_DOMAIN`], whose leaves are the batch's transaction digests in batch order.
//!
//! Leaves and inner nodes hash apart, so no leaf can be passed off as a node (the second-preimage
//! trick on plain Merkle trees); a level of odd length carries its last node up unchanged instead
//! of pairing it with itself (Bitcoin's duplication made two different batches share a root,
//! CVE-2012-2459); the root binds the leaf count. Which siblings a path has is fixed by the leaf's
//! index and the batch's leaf count, both of which the endorsers sign, so each leaf has exactly
//! one path.

use sha2::{Digest, Sha256};
use specie_merkle::{InclusionProof, Tree};

/// A 32-byte SHA-256 digest.
pub type Hash = [u8; 32];

/// The most transactions one batch (one signature) endorses. 2^16 keeps a path at 16 siblings
/// (512 bytes) and one batch's tree in a few MiB, while already making the signature's cost per
/// transaction negligible.
pub const BATCH_TRANSACTIONS_MAX: usize = 1 << 16;

/// The most siblings a path has: log2 of [`BATCH_TRANSACTIONS_MAX`].
pub const PATH_SIBLINGS_MAX: usize = 16;

/// The kind of tree (`specie-merkle`'s domain) of an endorsed batch.
pub const TREE_DOMAIN: &[u8] = b"specie/endorsement/batch-tree/v1";
/// Domain of the message the endorsers sign: `SHA256(BATCH_DOMAIN ‖ u32le(leaf count) ‖ root)`.
pub const BATCH_DOMAIN: &[u8] = b"specie/endorsement/batch/v1\0";

/// The leaf hash of a transaction digest.
pub fn leaf_hash(digest: &Hash) -> Hash {
    specie_merkle::leaf_hash(TREE_DOMAIN, digest)
}

/// The 32-byte message the endorsers sign for a batch: binds the root and the leaf count (which
/// fixes the tree's shape, hence every path's length).
pub fn batch_message(leaf_count: u32, root: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(BATCH_DOMAIN);
    hasher.update(leaf_count.to_le_bytes());
    hasher.update(root);
    hasher.finalize().into()
}

/// How many siblings the path of leaf `index` has in a tree of `leaf_count` leaves: one per level,
/// except where the node is the carried-up last node of an odd level. Requires `index < leaf_count`.
pub fn path_len(index: u32, leaf_count: u32) -> usize {
    assert!(index < leaf_count, "leaf {index} is outside a batch of {leaf_count}");
    specie_merkle::path_len(u64::from(index), u64::from(leaf_count))
}

/// A whole batch's tree, every level kept so that each transaction's path is read off it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
    tree: Tree,
}

impl MerkleTree {
    /// The tree over `digests` (in batch order). Requires 1 to [`BATCH_TRANSACTIONS_MAX`] digests:
    /// callers bound their batches before building one.
    pub fn new(digests: &[Hash]) -> MerkleTree {
        assert!(
            !digests.is_empty() && digests.len() <= BATCH_TRANSACTIONS_MAX,
            "a batch has 1 to {BATCH_TRANSACTIONS_MAX} transactions, not {}",
            digests.len()
        );
        MerkleTree {
            tree: Tree::new(TREE_DOMAIN, digests.iter().map(leaf_hash).collect()),
        }
    }

    pub fn root(&self) -> Hash {
        self.tree.root()
    }

    pub fn leaf_count(&self) -> u32 {
        // new() bounds the leaves by BATCH_TRANSACTIONS_MAX, far below u32::MAX.
        self.tree.leaves() as u32
    }

    /// The message the endorsers sign for this tree.
    pub fn message(&self) -> Hash {
        batch_message(self.leaf_count(), &self.root())
    }

    /// The siblings from leaf `index` up to the root (bottom first).
    pub fn path(&self, index: u32) -> Vec<Hash> {
        let leaf_count = self.leaf_count();
        assert!(index < leaf_count, "leaf {index} is outside a batch of {leaf_count}");
        self.tree
            .prove(index as usize)
            .expect("the index is in the tree")
            .siblings
    }
}

/// The root a path leads to from `digest` at `index` of `leaf_count`, or `None` if the path has
/// the wrong number of siblings for that position (or the position is outside the batch).
pub fn root_from_path(digest: &Hash, index: u32, leaf_count: u32, siblings: &[Hash]) -> Option<Hash> {
    let proof = InclusionProof {
        index: u64::from(index),
        leaves: u64::from(leaf_count),
        siblings: siblings.to_vec(),
    };
    proof.root_from(TREE_DOMAIN, &leaf_hash(digest)).ok()
}
