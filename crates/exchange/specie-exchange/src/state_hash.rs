//! The state hash replicas compare after every block: SHA-256 over the height, the per-asset
//! totals, and the roots of Merkle trees over the accounts in id order, the resting offers in
//! (pair, limit, account, sequence) order, the withdrawals in (account, sequence) order and the
//! credited (asset, deposit marker) pairs in order. A leaf and an inner node are hashed
//! under different prefixes, and an odd node moves up a level unhashed, so no two trees share a
//! root. An account's leaf and the path to the root prove its balances to anyone who has the
//! state hash ([`Ledger::account_proof`]).
//!
//! Every level of each tree is kept between blocks ([`StateTrees`]): a block rehashes the leaves
//! of the accounts it touched and their ancestors only (the accounts' positions do not move
//! unless one is created), and a tree whose leaves changed otherwise (books, withdrawals,
//! credited deposits) from its first changed leaf on. The root is bit for bit the one a full
//! recomputation gives ([`Ledger::compute_state_hash`], which replicas' audits and snapshots use).

use std::fmt;

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use specie_codec::put_u64;

use crate::ledger::{Account, Ledger, OfferKey, Pair};
use crate::screen::Withdrawal;
use crate::transaction::{AccountId, AssetId};

type Hash = [u8; 32];

const STATE_DOMAIN: &[u8] = b"specie/exchange/state/v1";
const LEAF: u8 = 0;
const NODE: u8 = 1;
/// Nodes one parallel task hashes at least (below it, splitting costs more than it saves).
const NODES_PER_TASK_MIN: usize = 512;

fn leaf_hash(bytes: &[u8]) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([LEAF]);
    hasher.update(bytes);
    hasher.finalize().into()
}

fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([NODE]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
}

/// A node from its one or two children (an odd node moves up unhashed).
fn parent(children: &[Hash]) -> Hash {
    match children {
        [left, right] => node_hash(left, right),
        [odd] => *odd,
        _ => unreachable!("a node has one or two children"),
    }
}

/// An account's leaf bytes: id, key, last sequence, then each balance.
pub fn account_leaf(id: AccountId, account: &Account) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(8 + 32 + 8 + 8 * account.balances.len());
    put_u64(&mut bytes, id);
    bytes.extend_from_slice(&account.key);
    put_u64(&mut bytes, account.last_sequence);
    account.balances.iter().for_each(|b| put_u64(&mut bytes, *b));
    bytes
}

/// `leaf_hash(&account_leaf(id, account))`, without the allocation.
fn account_hash(id: AccountId, account: &Account) -> Hash {
    let mut hasher = Sha256::new();
    hasher.update([LEAF]);
    hasher.update(id.to_le_bytes());
    hasher.update(account.key);
    hasher.update(account.last_sequence.to_le_bytes());
    account.balances.iter().for_each(|b| hasher.update(b.to_le_bytes()));
    hasher.finalize().into()
}

fn offer_hash(&((sell, buy), key, amount): &(Pair, OfferKey, u64)) -> Hash {
    let mut bytes = Vec::with_capacity(2 + 2 + 8 + 8 + 8 + 8);
    bytes.extend_from_slice(&sell.to_le_bytes());
    bytes.extend_from_slice(&buy.to_le_bytes());
    put_u64(&mut bytes, key.limit.0);
    put_u64(&mut bytes, key.account);
    put_u64(&mut bytes, key.sequence);
    put_u64(&mut bytes, amount);
    leaf_hash(&bytes)
}

fn withdrawal_hash(withdrawal: &Withdrawal) -> Hash {
    leaf_hash(&crate::ledger::withdrawal_bytes(withdrawal))
}

fn credited_hash((asset, marker): &(AssetId, [u8; 32])) -> Hash {
    leaf_hash(&[&asset.to_le_bytes()[..], marker].concat())
}

/// A Merkle tree over leaves in order, every level kept, so that changed leaves are rehashed
/// with their ancestors only.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tree {
    /// The leaves first; the last level has one node, the root (none: no leaves).
    levels: Vec<Vec<Hash>>,
}

impl Tree {
    fn new(leaves: Vec<Hash>) -> Tree {
        let mut tree = Tree { levels: vec![leaves] };
        tree.rehash_from(0);
        tree
    }

    /// The root: the all-zero hash for no leaves.
    fn root(&self) -> Hash {
        match self.levels.last().map(Vec::as_slice) {
            Some([root]) => *root,
            _ => [0; 32],
        }
    }

    /// Makes `leaves` the leaves, rehashing the nodes above the first leaf that differs only.
    fn set_leaves(&mut self, leaves: Vec<Hash>) {
        let old = &self.levels[0];
        let same = old.len().min(leaves.len());
        let from = old.iter().zip(&leaves).position(|(a, b)| a != b).unwrap_or(same);
        if from == old.len() && from == leaves.len() {
            return;
        }
        self.splice(leaves, from);
    }

    /// Makes `leaves`, equal to the old ones before position `from`, the leaves; rehashes.
    fn splice(&mut self, leaves: Vec<Hash>, from: usize) {
        assert!(
            from <= self.levels[0].len().min(leaves.len()),
            "leaves before `from` are kept"
        );
        self.levels[0] = leaves;
        self.rehash_from(from);
    }

    /// Rehashes, level by level, every node above a leaf at `from` or after (the nodes before
    /// cover unchanged leaves only). Levels are added or dropped as the leaves grew or shrank.
    fn rehash_from(&mut self, from: usize) {
        let mut level = 1;
        while self.levels[level - 1].len() > 1 {
            let start = match level < self.levels.len() {
                true => from >> level,
                false => 0,
            };
            if level == self.levels.len() {
                self.levels.push(Vec::new());
            }
            let (below, above) = self.levels.split_at_mut(level);
            let (children, nodes) = (&below[level - 1], &mut above[0]);
            assert!(start <= nodes.len(), "the nodes kept exist");
            nodes.truncate(start);
            let fresh: Vec<Hash> = children[2 * start..]
                .par_chunks(2)
                .with_min_len(NODES_PER_TASK_MIN)
                .map(parent)
                .collect();
            nodes.extend(fresh);
            level += 1;
        }
        self.levels.truncate(level);
    }

    /// Replaces the leaves at `changes`' positions (increasing, each once, within the leaves) and
    /// rehashes their ancestors only.
    fn update(&mut self, changes: Vec<(usize, Hash)>) {
        assert!(
            changes.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "positions increase"
        );
        let mut dirty: Vec<usize> = Vec::with_capacity(changes.len());
        for (position, hash) in changes {
            self.levels[0][position] = hash;
            dirty.push(position);
        }
        for level in 1..self.levels.len() {
            dirty.iter_mut().for_each(|index| *index /= 2);
            dirty.dedup();
            let (below, above) = self.levels.split_at_mut(level);
            let children = &below[level - 1];
            let hashes: Vec<Hash> = dirty
                .par_iter()
                .with_min_len(NODES_PER_TASK_MIN)
                .map(|&index| parent(&children[2 * index..(2 * index + 2).min(children.len())]))
                .collect();
            for (&index, hash) in dirty.iter().zip(hashes) {
                above[0][index] = hash;
            }
        }
    }
}

/// The trees behind the state hash, kept between blocks: always those of the ledger's state
/// (so two equal states have equal trees).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct StateTrees {
    /// Every account id, increasing: an account's leaf position.
    account_ids: Vec<AccountId>,
    accounts: Tree,
    offers: Tree,
    withdrawals: Tree,
    credited: Tree,
}

impl fmt::Debug for StateTrees {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateTrees")
            .field("accounts", &self.account_ids.len())
            .field("accounts_root", &self.accounts.root())
            .field("offers_root", &self.offers.root())
            .finish_non_exhaustive()
    }
}

/// What a change to a ledger touched, for [`Ledger::rehash`].
#[derive(Debug, Default)]
pub(crate) struct Touched {
    /// Accounts changed or created, in any order, repeats allowed.
    pub(crate) accounts: Vec<AccountId>,
    pub(crate) books: bool,
    pub(crate) withdrawals: bool,
    pub(crate) credited: bool,
}

impl StateTrees {
    /// No trees: what a ledger holds until [`Ledger::rebuild_trees`].
    pub(crate) fn empty() -> StateTrees {
        StateTrees {
            account_ids: Vec::new(),
            accounts: Tree::new(Vec::new()),
            offers: Tree::new(Vec::new()),
            withdrawals: Tree::new(Vec::new()),
            credited: Tree::new(Vec::new()),
        }
    }

    /// Every tree of `ledger`'s state, from scratch.
    fn build(ledger: &Ledger) -> StateTrees {
        let mut accounts: Vec<(AccountId, &Account)> = ledger.accounts().map(|(id, a)| (*id, a)).collect();
        accounts.par_sort_unstable_by_key(|(id, _)| *id);
        let leaves = accounts
            .par_iter()
            .map(|(id, account)| account_hash(*id, account))
            .collect();
        StateTrees {
            account_ids: accounts.iter().map(|(id, _)| *id).collect(),
            accounts: Tree::new(leaves),
            offers: Tree::new(offer_leaves(ledger)),
            withdrawals: Tree::new(ledger.withdrawals.values().map(withdrawal_hash).collect()),
            credited: Tree::new(ledger.credited.iter().map(credited_hash).collect()),
        }
    }
}

fn offer_leaves(ledger: &Ledger) -> Vec<Hash> {
    let offers: Vec<(Pair, OfferKey, u64)> = ledger
        .books
        .iter()
        .flat_map(|(pair, book)| book.iter().map(move |(key, amount)| (*pair, *key, *amount)))
        .collect();
    offers.par_iter().map(offer_hash).collect()
}

/// The path from an account's leaf to the accounts root: each step's sibling and whether the
/// sibling is on the left; a step without a sibling (an odd node) is skipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountProof {
    pub leaf: Vec<u8>,
    pub path: Vec<([u8; 32], bool)>,
    /// The other parts of the state hash: height, totals and the books root, as hashed.
    pub rest: Vec<u8>,
}

impl AccountProof {
    /// Whether the proof leads from its leaf to `state_hash`.
    pub fn verify(&self, state_hash: &[u8; 32]) -> bool {
        let mut hash = leaf_hash(&self.leaf);
        for (sibling, sibling_left) in &self.path {
            hash = if *sibling_left {
                node_hash(sibling, &hash)
            } else {
                node_hash(&hash, sibling)
            };
        }
        state(&hash, &self.rest) == *state_hash
    }
}

fn state(accounts_root: &[u8; 32], rest: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(STATE_DOMAIN);
    hasher.update(accounts_root);
    hasher.update(rest);
    hasher.finalize().into()
}

impl Ledger {
    /// Height, totals and the other trees' roots: what the state hash covers besides the accounts.
    fn rest_of_state(&self, trees: &StateTrees) -> Vec<u8> {
        let mut rest = Vec::new();
        put_u64(&mut rest, self.height);
        for totals in &self.totals {
            for figure in [totals.deposited, totals.withdrawn, totals.burned] {
                rest.extend_from_slice(&figure.to_le_bytes());
            }
        }
        for tree in [&trees.offers, &trees.withdrawals, &trees.credited] {
            rest.extend_from_slice(&tree.root());
        }
        rest
    }

    fn state_hash_of(&self, trees: &StateTrees) -> [u8; 32] {
        state(&trees.accounts.root(), &self.rest_of_state(trees))
    }

    /// The state hash recomputed from scratch, every leaf and node: what [`Ledger::state_hash`],
    /// kept up to date block by block, must equal (audits compare the two).
    pub fn compute_state_hash(&self) -> [u8; 32] {
        self.state_hash_of(&StateTrees::build(self))
    }

    /// Builds every tree from scratch and sets the state hash.
    pub(crate) fn rebuild_trees(&mut self) {
        self.trees = StateTrees::build(self);
        self.state_hash = self.state_hash_of(&self.trees);
    }

    /// Brings the trees and the state hash up to date after a change of what `touched` names
    /// (and of the height and totals, hashed whole): only that is rehashed.
    pub(crate) fn rehash(&mut self, touched: Touched) {
        self.rehash_accounts(touched.accounts);
        if touched.books {
            let leaves = offer_leaves(self);
            self.trees.offers.set_leaves(leaves);
        }
        if touched.withdrawals {
            let leaves = self.withdrawals.values().map(withdrawal_hash).collect();
            self.trees.withdrawals.set_leaves(leaves);
        }
        if touched.credited {
            let leaves = self.credited.iter().map(credited_hash).collect();
            self.trees.credited.set_leaves(leaves);
        }
        self.state_hash = self.state_hash_of(&self.trees);
        debug_assert_eq!(
            self.state_hash,
            self.compute_state_hash(),
            "the kept trees are the state's"
        );
    }

    /// The touched accounts' leaves: rehashed in place for existing ones (with their ancestors),
    /// merged in for created ones (every node from the first on).
    fn rehash_accounts(&mut self, mut touched: Vec<AccountId>) {
        touched.par_sort_unstable();
        touched.dedup();
        let ids = &self.trees.account_ids;
        let (changed, created): (Vec<AccountId>, Vec<AccountId>) =
            touched.into_iter().partition(|id| ids.binary_search(id).is_ok());
        let hash_of = |id: &AccountId| account_hash(*id, self.account(*id).expect("a touched account exists"));
        let updates: Vec<(usize, Hash)> = changed
            .par_iter()
            .map(|id| (ids.binary_search(id).expect("an existing account"), hash_of(id)))
            .collect();
        let created: Vec<(AccountId, Hash)> = created.par_iter().map(|id| (*id, hash_of(id))).collect();
        self.trees.accounts.update(updates);
        let Some(&(first, _)) = created.first() else {
            return;
        };
        let ids = &self.trees.account_ids;
        let from = ids.partition_point(|id| *id < first);
        let mut old = ids
            .iter()
            .copied()
            .zip(self.trees.accounts.levels[0].iter().copied())
            .peekable();
        let mut created = created.into_iter().peekable();
        let mut merged: Vec<(AccountId, Hash)> = Vec::with_capacity(ids.len() + created.len());
        while let Some(next) = match (old.peek(), created.peek()) {
            (Some(a), Some(b)) if a.0 < b.0 => old.next(),
            (Some(_), None) => old.next(),
            _ => created.next(),
        } {
            merged.push(next);
        }
        let leaves = merged.iter().map(|(_, hash)| *hash).collect();
        self.trees.account_ids = merged.into_iter().map(|(id, _)| id).collect();
        self.trees.accounts.splice(leaves, from);
    }

    /// A proof of account `id`'s state against [`Ledger::state_hash`].
    pub fn account_proof(&self, id: AccountId) -> Option<AccountProof> {
        let mut index = self.trees.account_ids.binary_search(&id).ok()?;
        let leaf = account_leaf(id, self.account(id)?);
        let levels = &self.trees.accounts.levels;
        let mut path = Vec::new();
        for level in &levels[..levels.len() - 1] {
            let sibling = index ^ 1;
            if sibling < level.len() {
                path.push((level[sibling], sibling < index));
            }
            index /= 2;
        }
        Some(AccountProof {
            leaf,
            path,
            rest: self.rest_of_state(&self.trees),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn leaf(n: u32) -> Hash {
        leaf_hash(&n.to_le_bytes())
    }

    /// An edit of a tree's leaves: replace some in place, or insert and remove some.
    #[derive(Clone, Debug)]
    enum Edit {
        Update(Vec<(usize, u32)>),
        Splice { at: usize, remove: usize, insert: Vec<u32> },
    }

    fn edit() -> impl Strategy<Value = Edit> {
        prop_oneof![
            proptest::collection::vec((any::<usize>(), any::<u32>()), 0..40).prop_map(Edit::Update),
            (
                any::<usize>(),
                0..20usize,
                proptest::collection::vec(any::<u32>(), 0..20)
            )
                .prop_map(|(at, remove, insert)| Edit::Splice { at, remove, insert }),
        ]
    }

    proptest! {
        /// Whatever the edits, the kept tree is the one built from scratch over its leaves, node
        /// for node (so its root is the full recomputation's).
        #[test]
        fn an_edited_tree_is_the_tree_of_its_leaves(
            start in proptest::collection::vec(any::<u32>(), 0..300),
            edits in proptest::collection::vec(edit(), 1..12),
        ) {
            let mut leaves: Vec<Hash> = start.into_iter().map(leaf).collect();
            let mut tree = Tree::new(leaves.clone());
            for edit in edits {
                match edit {
                    Edit::Update(changes) if !leaves.is_empty() => {
                        let mut changes: Vec<(usize, Hash)> =
                            changes.into_iter().map(|(at, n)| (at % leaves.len(), leaf(n))).collect();
                        changes.sort_by_key(|(at, _)| *at);
                        changes.dedup_by_key(|(at, _)| *at);
                        changes.iter().for_each(|(at, hash)| leaves[*at] = *hash);
                        tree.update(changes);
                    }
                    Edit::Update(_) => {}
                    Edit::Splice { at, remove, insert } => {
                        let at = at % (leaves.len() + 1);
                        let end = (at + remove).min(leaves.len());
                        leaves.splice(at..end, insert.into_iter().map(leaf));
                        tree.set_leaves(leaves.clone());
                    }
                }
                prop_assert!(tree == Tree::new(leaves.clone()), "the kept tree is the full one");
            }
        }
    }

    #[test]
    fn an_account_hashes_as_its_leaf_bytes() {
        let account = Account::new([9; 32], 7, vec![1, u64::MAX, 0]);
        assert_eq!(account_hash(5, &account), leaf_hash(&account_leaf(5, &account)));
    }
}
