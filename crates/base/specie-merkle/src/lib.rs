//! Binary SHA-256 Merkle trees, one implementation for every part of specie that commits to a list
//! with proofs of membership (the ledger of record's blocks, endorsed batches).
//!
//! - A leaf hashes as `SHA-256(0x00 ‖ domain ‖ bytes)` and a node as `SHA-256(0x01 ‖ domain ‖
//!   left ‖ right)`: the prefix byte keeps a node from passing for a leaf (the second-preimage
//!   attack on trees that hash both alike), and the domain keeps a proof for one kind of tree from
//!   verifying in another.
//! - A level with an odd count carries its last hash up unchanged (no duplication, so no two lists
//!   share a root the way Bitcoin's `[a, b, c]` and `[a, b, c, c]` do).
//! - The root binds the list's length: `SHA-256(0x02 ‖ domain ‖ u64le(length) ‖ top)`, where
//!   `top` is the last level's hash (zeros for the empty list). Without it a proof for leaf 0 of
//!   five leaves would also pass for leaf 0 of six, whose path has the same shape.
//!
//! A proof is the leaf's index, the list's length and the sibling hashes from the leaf up; the
//! verifier recomputes which levels carry a hash up from the index and length, so a proof cannot
//! claim a shape, or a length, the tree does not have.

use sha2::{Digest, Sha256};
use specie_codec::{put_count, put_u64, Decode, DecodeError, Encode, Reader};

const LEAF: u8 = 0x00;
const NODE: u8 = 0x01;
const ROOT: u8 = 0x02;

/// Most leaves a tree has: proofs are at most 40 hashes long.
pub const LEAVES_MAX: u64 = 1 << 40;
/// Most sibling hashes in a proof (the depth of a tree of [`LEAVES_MAX`] leaves).
pub const PROOF_HASHES_MAX: usize = 40;

/// The hash of one leaf of a tree of kind `domain`.
pub fn leaf_hash(domain: &[u8], bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([LEAF]);
    hasher.update(domain);
    hasher.update(bytes);
    hasher.finalize().into()
}

fn node_hash(domain: &[u8], left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([NODE]);
    hasher.update(domain);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

fn bound_root(domain: &[u8], leaves: u64, top: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([ROOT]);
    hasher.update(domain);
    hasher.update(leaves.to_le_bytes());
    hasher.update(top);
    hasher.finalize().into()
}

/// The next level up: pairs hashed, an odd last hash carried up.
fn level_up(domain: &[u8], level: &[[u8; 32]]) -> Vec<[u8; 32]> {
    level
        .chunks(2)
        .map(|pair| match pair {
            [left, right] => node_hash(domain, left, right),
            [single] => *single,
            _ => unreachable!("chunks of two"),
        })
        .collect()
}

/// A tree with every level kept, so that each leaf's proof is read off it in O(log n).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// `levels[0]` are the leaf hashes; the last level is the top hash alone (none if empty).
    levels: Vec<Vec<[u8; 32]>>,
    root: [u8; 32],
}

impl Tree {
    /// The tree of kind `domain` over `leaves` (leaf hashes, from [`leaf_hash`]).
    pub fn new(domain: &[u8], leaves: Vec<[u8; 32]>) -> Tree {
        assert!(
            leaves.len() as u64 <= LEAVES_MAX,
            "a tree has at most LEAVES_MAX leaves"
        );
        let count = leaves.len() as u64;
        let mut levels = vec![leaves];
        while levels.last().expect("the leaves").len() > 1 {
            let above = level_up(domain, levels.last().expect("a level"));
            levels.push(above);
        }
        let top = levels.last().expect("a level").first().copied().unwrap_or([0; 32]);
        Tree {
            root: bound_root(domain, count, &top),
            levels,
        }
    }

    pub fn root(&self) -> [u8; 32] {
        self.root
    }

    pub fn leaves(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// The proof for leaf `index`; `None` if there is no such leaf.
    pub fn prove(&self, index: usize) -> Option<InclusionProof> {
        if index >= self.levels[0].len() {
            return None;
        }
        let mut siblings = Vec::new();
        let mut at = index;
        for level in &self.levels[..self.levels.len() - 1] {
            if let Some(sibling) = level.get(at ^ 1) {
                siblings.push(*sibling);
            }
            at /= 2;
        }
        Some(InclusionProof {
            index: index as u64,
            leaves: self.leaves(),
            siblings,
        })
    }
}

/// The root over `leaves` (leaf hashes, from [`leaf_hash`]).
pub fn root(domain: &[u8], leaves: &[[u8; 32]]) -> [u8; 32] {
    Tree::new(domain, leaves.to_vec()).root()
}

/// Proof that one leaf is at `index` of a list of `leaves` leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InclusionProof {
    pub index: u64,
    pub leaves: u64,
    /// Sibling hashes from the leaf's level up, skipping levels where the path's hash is carried
    /// up alone.
    pub siblings: Vec<[u8; 32]>,
}

/// Why a proof does not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProofError {
    #[error("index {index} is not below the tree's {leaves} leaves")]
    OutOfRange { index: u64, leaves: u64 },
    #[error("the proof has {given} sibling hashes; a tree of that shape needs {needed}")]
    WrongLength { given: usize, needed: usize },
    #[error("the proof leads to another root")]
    OtherRoot,
}

/// The proof for leaf `index` of `leaves`; `None` if there is no such leaf.
pub fn prove(domain: &[u8], leaves: &[[u8; 32]], index: usize) -> Option<InclusionProof> {
    Tree::new(domain, leaves.to_vec()).prove(index)
}

/// How many sibling hashes the proof of leaf `index` of `leaves` has: one per level, except where
/// the leaf's hash is carried up alone.
pub fn path_len(index: u64, leaves: u64) -> usize {
    let (mut at, mut width, mut needed) = (index, leaves, 0);
    while width > 1 {
        if (at ^ 1) < width {
            needed += 1;
        }
        at /= 2;
        width = width.div_ceil(2);
    }
    needed
}

impl InclusionProof {
    /// The root this proof leads to from `leaf` (a leaf hash), if its shape is right.
    pub fn root_from(&self, domain: &[u8], leaf: &[u8; 32]) -> Result<[u8; 32], ProofError> {
        if self.index >= self.leaves || self.leaves > LEAVES_MAX {
            return Err(ProofError::OutOfRange {
                index: self.index,
                leaves: self.leaves,
            });
        }
        let needed = path_len(self.index, self.leaves);
        if self.siblings.len() != needed {
            return Err(ProofError::WrongLength {
                given: self.siblings.len(),
                needed,
            });
        }
        let (mut at, mut width, mut hash) = (self.index, self.leaves, *leaf);
        let mut siblings = self.siblings.iter();
        while width > 1 {
            if (at ^ 1) < width {
                let sibling = siblings.next().expect("the length was checked");
                hash = if at % 2 == 0 {
                    node_hash(domain, &hash, sibling)
                } else {
                    node_hash(domain, sibling, &hash)
                };
            }
            at /= 2;
            width = width.div_ceil(2);
        }
        Ok(bound_root(domain, self.leaves, &hash))
    }

    /// Whether `leaf` is at this proof's index in the tree whose root is `root`.
    pub fn verify(&self, domain: &[u8], leaf: &[u8; 32], root: &[u8; 32]) -> Result<(), ProofError> {
        if self.root_from(domain, leaf)? == *root {
            Ok(())
        } else {
            Err(ProofError::OtherRoot)
        }
    }
}

/// `index (u64) ‖ leaves (u64) ‖ count ‖ sibling hashes`.
impl Encode for InclusionProof {
    fn encode_to(&self, out: &mut Vec<u8>) {
        put_u64(out, self.index);
        put_u64(out, self.leaves);
        put_count(out, self.siblings.len());
        for sibling in &self.siblings {
            out.extend_from_slice(sibling);
        }
    }
}

impl Decode for InclusionProof {
    type Limits = ();
    const WHAT: &'static str = "inclusion proof";

    fn decode_from(reader: &mut Reader<'_>, _limits: &()) -> Result<Self, DecodeError> {
        let index = reader.read_u64("proof index")?;
        let leaves = reader.read_u64("proof leaves")?;
        let siblings = reader.read_vec("proof siblings", PROOF_HASHES_MAX as u64, 32, |r| {
            r.read_array("sibling")
        })?;
        Ok(InclusionProof {
            index,
            leaves,
            siblings,
        })
    }

    fn encoded_bytes_max(_limits: &()) -> usize {
        16 + 9 + 32 * PROOF_HASHES_MAX
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const DOMAIN: &[u8] = b"specie/merkle/test/v1";

    fn leaves(count: usize) -> Vec<[u8; 32]> {
        (0..count as u64).map(|i| leaf_hash(DOMAIN, &i.to_le_bytes())).collect()
    }

    /// The plain recursive definition, to check the level-by-level code against.
    fn model_root(hashes: &[[u8; 32]]) -> [u8; 32] {
        fn top(hashes: &[[u8; 32]]) -> [u8; 32] {
            match hashes.len() {
                0 => [0; 32],
                1 => hashes[0],
                _ => top(&level_up(DOMAIN, hashes)),
            }
        }
        bound_root(DOMAIN, hashes.len() as u64, &top(hashes))
    }

    #[test]
    fn roots_tell_lists_apart_that_duplication_would_confuse() {
        let three = leaves(3);
        let mut four = three.clone();
        four.push(three[2]);
        assert_ne!(root(DOMAIN, &three), root(DOMAIN, &four));
        assert_ne!(root(DOMAIN, &[]), root(DOMAIN, &leaves(1)));
        // One leaf's root is not the leaf itself.
        assert_ne!(root(DOMAIN, &leaves(1)), leaves(1)[0]);
        // A node's hash is not a leaf's: a two-leaf root is not the leaf hash of its children.
        let two = leaves(2);
        let mut joined = two[0].to_vec();
        joined.extend_from_slice(&two[1]);
        assert_ne!(root(DOMAIN, &two), leaf_hash(DOMAIN, &joined));
        assert_ne!(root(DOMAIN, &two), root(b"another kind of tree", &two));
    }

    proptest! {
        #[test]
        fn every_leaf_proves_and_nothing_else_does(count in 1usize..70, pick in any::<prop::sample::Index>(), flip in 0usize..32) {
            let hashes = leaves(count);
            let tree_root = root(DOMAIN, &hashes);
            prop_assert_eq!(tree_root, model_root(&hashes));
            let index = pick.index(count);
            for (i, leaf) in hashes.iter().enumerate() {
                let proof = prove(DOMAIN, &hashes, i).unwrap();
                prop_assert_eq!(proof.verify(DOMAIN, leaf, &tree_root), Ok(()));
                let bytes = proof.encode();
                prop_assert_eq!(&InclusionProof::decode_exact_with(&bytes, &()).unwrap(), &proof);
            }
            let proof = prove(DOMAIN, &hashes, index).unwrap();
            // Another leaf, another index, another length, a flipped sibling bit: refused.
            let other = leaf_hash(DOMAIN, b"not in the tree");
            prop_assert!(proof.verify(DOMAIN, &other, &tree_root).is_err());
            if count > 1 {
                let moved = InclusionProof { index: (proof.index + 1) % count as u64, ..proof.clone() };
                prop_assert!(moved.verify(DOMAIN, &hashes[index], &tree_root).is_err());
            }
            let longer = InclusionProof { leaves: proof.leaves + 1, ..proof.clone() };
            prop_assert!(longer.verify(DOMAIN, &hashes[index], &tree_root).is_err());
            if let Some(first) = proof.siblings.first() {
                let mut bent = proof.clone();
                let mut sibling = *first;
                sibling[flip] ^= 1;
                bent.siblings[0] = sibling;
                prop_assert_eq!(bent.verify(DOMAIN, &hashes[index], &tree_root), Err(ProofError::OtherRoot));
            }
            prop_assert!(proof.verify(b"another kind of tree", &hashes[index], &tree_root).is_err());
        }
    }

    #[test]
    fn out_of_range_and_misshapen_proofs_are_refused() {
        let hashes = leaves(5);
        let tree_root = root(DOMAIN, &hashes);
        assert!(prove(DOMAIN, &hashes, 5).is_none());
        let proof = prove(DOMAIN, &hashes, 4).unwrap();
        // Leaf 4 of 5 is carried up twice: one sibling only.
        assert_eq!(proof.siblings.len(), 1);
        let past = InclusionProof {
            index: 5,
            ..proof.clone()
        };
        assert_eq!(
            past.verify(DOMAIN, &hashes[4], &tree_root),
            Err(ProofError::OutOfRange { index: 5, leaves: 5 })
        );
        let padded = InclusionProof {
            siblings: vec![proof.siblings[0], proof.siblings[0]],
            ..proof
        };
        assert_eq!(
            padded.verify(DOMAIN, &hashes[4], &tree_root),
            Err(ProofError::WrongLength { given: 2, needed: 1 })
        );
        let too_long = {
            let mut bytes = Vec::new();
            put_u64(&mut bytes, 0);
            put_u64(&mut bytes, 1);
            put_count(&mut bytes, PROOF_HASHES_MAX + 1);
            bytes
        };
        assert!(InclusionProof::decode_exact_with(&too_long, &()).is_err());
    }
}
