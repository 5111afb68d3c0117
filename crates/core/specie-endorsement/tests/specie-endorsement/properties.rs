//! Properties: any k-subset signs, fewer than k cannot; a tampered message, path or signature
//! is refused; paths are exact for every batch shape; the decoder is canonical and bounded.

use std::sync::OnceLock;

use proptest::prelude::*;
use specie_codec::{Decode, Encode};
use specie_endorsement::frost;
use specie_endorsement::merkle::{batch_message, path_len, root_from_path};
use specie_endorsement::{
    deal, group_key, sign_together, Endorsement, EndorsementVerifier, EndorserId, EndorserKeys, GroupKey, MerkleTree,
    Threshold, ENDORSEMENT_BYTES_MAX,
};

type Group = (
    std::collections::BTreeMap<EndorserId, EndorserKeys>,
    frost::keys::PublicKeyPackage,
);

/// A 4-of-7 group, dealt once for all cases.
fn group() -> &'static Group {
    static GROUP: OnceLock<Group> = OnceLock::new();
    GROUP.get_or_init(|| deal(Threshold::new(4, 7).unwrap(), 99).unwrap())
}

fn subset(mask: u8) -> Vec<EndorserId> {
    (1..=7u16)
        .filter(|i| mask & (1 << (i - 1)) != 0)
        .map(EndorserId)
        .collect()
}

/// Endorsements of every transaction of a batch of `digests`, signed by `signers`.
fn endorse(digests: &[[u8; 32]], signers: &[EndorserId], seed: u64) -> Vec<Endorsement> {
    let (keys, public) = group();
    let tree = MerkleTree::new(digests);
    let signature = sign_together(keys, public, signers, &tree.message(), seed).expect("k signers");
    let signature: [u8; 64] = signature.serialize().unwrap().try_into().unwrap();
    (0..tree.leaf_count())
        .map(|index| Endorsement {
            signature,
            leaf_count: tree.leaf_count(),
            index,
            siblings: tree.path(index),
        })
        .collect()
}

fn key() -> GroupKey {
    group_key(&group().1).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn any_k_subset_signs_and_fewer_cannot(mask in 1u8..128, seed in any::<u64>()) {
        let signers = subset(mask);
        let (keys, public) = group();
        let digest = [mask; 32];
        let message = MerkleTree::new(&[digest]).message();
        let result = sign_together(keys, public, &signers, &message, seed);
        if signers.len() >= 4 {
            let signature = result.expect("k or more sign");
            let endorsement = Endorsement {
                signature: signature.serialize().unwrap().try_into().unwrap(),
                leaf_count: 1, index: 0, siblings: vec![],
            };
            prop_assert!(endorsement.verify(&key(), &digest).is_ok());
        } else {
            prop_assert!(result.is_err(), "{} signers must not sign", signers.len());
        }
    }

    #[test]
    fn every_endorsement_of_a_batch_verifies_and_tampering_is_refused(
        count in 1usize..40,
        pick in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        seed in any::<u64>(),
    ) {
        let digests: Vec<[u8; 32]> = (0..count).map(|i| { let mut d = [seed as u8; 32]; d[0] = i as u8; d }).collect();
        let endorsements = endorse(&digests, &subset(0b1010101), seed);
        let mut verifier = EndorsementVerifier::new(&key(), 4).unwrap();
        for (endorsement, digest) in endorsements.iter().zip(&digests) {
            prop_assert!(endorsement.verify(&key(), digest).is_ok());
            prop_assert!(verifier.verify(endorsement, digest).is_ok());
        }
        prop_assert_eq!(verifier.cached_batches(), 1, "one signature check for the whole batch");
        let i = pick.index(count);
        let (endorsement, digest) = (&endorsements[i], digests[i]);
        // Another transaction's digest.
        let mut other = digest;
        other[31] ^= 0x80;
        prop_assert!(endorsement.verify(&key(), &other).is_err());
        prop_assert!(verifier.verify(endorsement, &other).is_err(), "the cache does not cover other messages");
        // A flipped bit anywhere in the signature or the path.
        let mut bytes = endorsement.encode();
        let at = 1 + flip.index(bytes.len() - 1 - 9);
        let at = if at < 65 { at } else { at + 9 }; // skip leaf count, index, sibling count
        if at < bytes.len() {
            bytes[at] ^= 1 << (seed % 8);
            let tampered = Endorsement::decode_exact(&bytes).expect("still well formed");
            prop_assert!(tampered.verify(&key(), &digest).is_err(), "flip at byte {}", at);
            prop_assert!(verifier.verify(&tampered, &digest).is_err(), "flip at byte {}", at);
        }
        // Another group's key.
        let (_, other_public) = deal(Threshold::new(4, 7).unwrap(), seed ^ 1).unwrap();
        prop_assert!(endorsement.verify(&group_key(&other_public).unwrap(), &digest).is_err());
    }

    #[test]
    fn paths_are_exact_for_every_shape(count in 1u32..3000, pick in any::<prop::sample::Index>()) {
        let digests: Vec<[u8; 32]> = (0..count).map(|i| { let mut d = [0u8; 32]; d[..4].copy_from_slice(&i.to_le_bytes()); d }).collect();
        let tree = MerkleTree::new(&digests);
        let index = pick.index(count as usize) as u32;
        let path = tree.path(index);
        prop_assert_eq!(path.len(), path_len(index, count));
        prop_assert_eq!(root_from_path(&digests[index as usize], index, count, &path), Some(tree.root()));
        // The same path claimed for another position or batch size does not lead to the root.
        if count > 1 {
            let other = (index + 1) % count;
            prop_assert_ne!(root_from_path(&digests[index as usize], other, count, &path), Some(tree.root()));
        }
        // Claimed in a larger batch, the path may reach the same root (the shapes agree), but the
        // signed message binds the leaf count, so the batch's signature does not cover it.
        let larger = root_from_path(&digests[index as usize], index, count + 1, &path).map(|root| batch_message(count + 1, &root));
        prop_assert_ne!(larger, Some(tree.message()));
    }

    #[test]
    fn decoding_is_canonical_and_bounded(bytes in prop::collection::vec(any::<u8>(), 0..700)) {
        if let Ok(endorsement) = Endorsement::decode_exact(&bytes) {
            prop_assert_eq!(endorsement.encode(), bytes.clone());
            prop_assert!(bytes.len() <= ENDORSEMENT_BYTES_MAX);
        }
    }
}

#[test]
fn batches_of_two_orders_or_two_sizes_have_different_messages() {
    let a = [[1u8; 32], [2u8; 32], [3u8; 32]];
    let b = [[2u8; 32], [1u8; 32], [3u8; 32]];
    assert_ne!(MerkleTree::new(&a).message(), MerkleTree::new(&b).message());
    // The promoted last node is not duplicated: [x, y, z] and [x, y, z, z] differ.
    let c = [[1u8; 32], [2u8; 32], [3u8; 32], [3u8; 32]];
    assert_ne!(MerkleTree::new(&a).root(), MerkleTree::new(&c).root());
    // A leaf cannot pose as a node: the root of two leaves is not the leaf hash of their concatenation.
    assert_ne!(
        MerkleTree::new(&a[..2]).root(),
        MerkleTree::new(&[MerkleTree::new(&a[..2]).root()]).root()
    );
}
