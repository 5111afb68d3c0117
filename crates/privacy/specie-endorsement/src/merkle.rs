//! The batch's Merkle tree: SHA-256, domain-separated leaves and nodes, no duplicated nodes.
//!
//! Leaves are the batch's transaction digests in batch order, each hashed under the leaf domain;
//! an inner node hashes its two children under the node domain, so no leaf can be passed off as a
//! node (the second-preimage trick on plain Merkle trees). A level of odd length promotes its last
//! node unchanged instead of pairing it with itself: Bitcoin's duplication made two different
//! batches share a root (CVE-2012-2459). Which siblings a path has is fixed by the leaf's index
//! and the batch's leaf count, both of which the endorsers sign, so each leaf has exactly one path.

use sha2::{Digest, Sha256};

/// A 32-byte SHA-256 digest.
pub type Hash = [u8; 32];

/// The most transactions one batch (one signature) endorses. 2^16 keeps a path at 16 siblings
/// (512 bytes) and one batch's tree in a few MiB, while already making the signature's cost per
/// transaction negligible.
pub const BATCH_TRANSACTIONS_MAX: usize = 1 << 16;

/// The most siblings a path has: log2 of [`BATCH_TRANSACTIONS_MAX`].
pub const PATH_SIBLINGS_MAX: usize = 16;

/// Domain of a leaf: `SHA256(LEAF_DOMAIN ‖ transaction digest)`.
pub const LEAF_DOMAIN: &[u8] = b"specie/endorsement/leaf/v1\0";
/// Domain of an inner node: `SHA256(NODE_DOMAIN ‖ left ‖ right)`.
pub const NODE_DOMAIN: &[u8] = b"specie/endorsement/node/v1\0";
/// Domain of the message the endorsers sign: `SHA256(BATCH_DOMAIN ‖ u32le(leaf count) ‖ root)`.
pub const BATCH_DOMAIN: &[u8] = b"specie/endorsement/batch/v1\0";

/// The leaf hash of a transaction digest.
pub fn leaf_hash(digest: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(LEAF_DOMAIN);
    hasher.update(digest);
    hasher.finalize().into()
}

/// The hash of an inner node.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update(NODE_DOMAIN);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
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
/// except where the node is the promoted last node of an odd level. Requires `index < leaf_count`.
pub fn path_len(index: u32, leaf_count: u32) -> usize {
    assert!(index < leaf_count, "leaf {index} is outside a batch of {leaf_count}");
    let (mut index, mut count, mut len) = (index, leaf_count, 0);
    while count > 1 {
        if !(index == count - 1 && count % 2 == 1) {
            len += 1;
        }
        index /= 2;
        count = count.div_ceil(2);
    }
    len
}

/// A whole batch's tree, every level kept so that each transaction's path is read off it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MerkleTree {
    /// `levels[0]` are the leaf hashes; the last level is the root alone.
    levels: Vec<Vec<Hash>>,
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
        let mut levels = vec![digests.iter().map(leaf_hash).collect::<Vec<_>>()];
        while levels.last().map_or(0, Vec::len) > 1 {
            let below = levels.last().expect("at least the leaves");
            let above = below
                .chunks(2)
                .map(|pair| match pair {
                    [left, right] => node_hash(left, right),
                    [last] => *last,
                    _ => unreachable!("chunks(2) yields one or two"),
                })
                .collect();
            levels.push(above);
        }
        MerkleTree { levels }
    }

    pub fn root(&self) -> Hash {
        self.levels.last().expect("a tree has a root")[0]
    }

    pub fn leaf_count(&self) -> u32 {
        // new() bounds the leaves by BATCH_TRANSACTIONS_MAX, far below u32::MAX.
        self.levels[0].len() as u32
    }

    /// The message the endorsers sign for this tree.
    pub fn message(&self) -> Hash {
        batch_message(self.leaf_count(), &self.root())
    }

    /// The siblings from leaf `index` up to the root (bottom first).
    pub fn path(&self, index: u32) -> Vec<Hash> {
        let leaf_count = self.leaf_count();
        assert!(index < leaf_count, "leaf {index} is outside a batch of {leaf_count}");
        let expected = path_len(index, leaf_count);
        let mut siblings = Vec::with_capacity(expected);
        let mut index = index as usize;
        for level in &self.levels[..self.levels.len() - 1] {
            let sibling = index ^ 1;
            if sibling < level.len() {
                siblings.push(level[sibling]);
            }
            index /= 2;
        }
        debug_assert_eq!(siblings.len(), expected, "the tree and path_len agree on the shape");
        siblings
    }
}

/// The root a path leads to from `digest` at `index` of `leaf_count`, or `None` if the path has
/// the wrong number of siblings for that position (or the position is outside the batch).
pub fn root_from_path(digest: &Hash, index: u32, leaf_count: u32, siblings: &[Hash]) -> Option<Hash> {
    if index >= leaf_count || siblings.len() != path_len(index, leaf_count) {
        return None;
    }
    let (mut index, mut count) = (index, leaf_count);
    let mut hash = leaf_hash(digest);
    let mut siblings = siblings.iter();
    while count > 1 {
        let promoted = index == count - 1 && count % 2 == 1;
        if !promoted {
            let sibling = siblings.next().expect("path_len counted this level");
            hash = if index % 2 == 0 {
                node_hash(&hash, sibling)
            } else {
                node_hash(sibling, &hash)
            };
        }
        index /= 2;
        count = count.div_ceil(2);
    }
    debug_assert!(siblings.next().is_none(), "path_len counted every sibling");
    Some(hash)
}
