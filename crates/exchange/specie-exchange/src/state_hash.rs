//! The state hash replicas compare after every block: SHA-256 over the height, the per-asset
//! totals, and the roots of Merkle trees over the accounts in id order, the resting offers in
//! (pair, limit, account, sequence) order, the withdrawals in (account, sequence) order and the
//! credited (asset, deposit marker) pairs in order. A leaf and an inner node are hashed
//! under different prefixes, and an odd node moves up a level unhashed, so no two trees share a
//! root. An account's leaf and the path to the root prove its balances to anyone who has the
//! state hash ([`Ledger::account_proof`]).

use rayon::prelude::*;
use sha2::{Digest, Sha256};
use specie_codec::put_u64;

use crate::ledger::{Account, Ledger};
use crate::transaction::AccountId;

const STATE_DOMAIN: &[u8] = b"specie/exchange/state/v1";
const LEAF: u8 = 0;
const NODE: u8 = 1;

fn leaf_hash(bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([LEAF]);
    hasher.update(bytes);
    hasher.finalize().into()
}

fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update([NODE]);
    hasher.update(left);
    hasher.update(right);
    hasher.finalize().into()
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

/// The levels of the tree over `leaves`, leaves first; the root is the last level's one node
/// (the all-zero hash for no leaves).
fn levels(leaves: Vec<[u8; 32]>) -> Vec<Vec<[u8; 32]>> {
    let mut levels = vec![leaves];
    while levels.last().is_some_and(|level| level.len() > 1) {
        let level = levels.last().expect("a level");
        let next: Vec<[u8; 32]> = level
            .par_chunks(2)
            .map(|pair| match pair {
                [left, right] => node_hash(left, right),
                [odd] => *odd,
                _ => unreachable!("chunks of at most two"),
            })
            .collect();
        levels.push(next);
    }
    levels
}

fn root(levels: &[Vec<[u8; 32]>]) -> [u8; 32] {
    levels
        .last()
        .and_then(|level| level.first())
        .copied()
        .unwrap_or([0; 32])
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
    fn sorted_accounts(&self) -> Vec<(AccountId, &Account)> {
        let mut accounts: Vec<(AccountId, &Account)> = self.accounts().map(|(id, a)| (*id, a)).collect();
        accounts.par_sort_unstable_by_key(|(id, _)| *id);
        accounts
    }

    fn account_levels(&self) -> Vec<Vec<[u8; 32]>> {
        let leaves = self
            .sorted_accounts()
            .par_iter()
            .map(|(id, account)| leaf_hash(&account_leaf(*id, account)))
            .collect();
        levels(leaves)
    }

    /// Height, totals and the books root: what the state hash covers besides the accounts.
    fn rest_of_state(&self) -> Vec<u8> {
        let offers: Vec<[u8; 32]> = self
            .books
            .iter()
            .flat_map(|(pair, book)| book.iter().map(move |(key, amount)| (*pair, *key, *amount)))
            .collect::<Vec<_>>()
            .par_iter()
            .map(|((sell, buy), key, amount)| {
                let mut bytes = Vec::with_capacity(2 + 2 + 8 + 8 + 8 + 8);
                bytes.extend_from_slice(&sell.to_le_bytes());
                bytes.extend_from_slice(&buy.to_le_bytes());
                put_u64(&mut bytes, key.limit.0);
                put_u64(&mut bytes, key.account);
                put_u64(&mut bytes, key.sequence);
                put_u64(&mut bytes, *amount);
                leaf_hash(&bytes)
            })
            .collect();
        let mut rest = Vec::new();
        put_u64(&mut rest, self.height);
        for totals in &self.totals {
            for figure in [totals.deposited, totals.withdrawn, totals.burned] {
                rest.extend_from_slice(&figure.to_le_bytes());
            }
        }
        rest.extend_from_slice(&root(&levels(offers)));
        let withdrawals = self
            .withdrawals
            .values()
            .map(|w| leaf_hash(&crate::ledger::withdrawal_bytes(w)))
            .collect();
        rest.extend_from_slice(&root(&levels(withdrawals)));
        let credited = self
            .credited
            .iter()
            .map(|(asset, marker)| leaf_hash(&[&asset.to_le_bytes()[..], marker].concat()))
            .collect();
        rest.extend_from_slice(&root(&levels(credited)));
        rest
    }

    pub(crate) fn compute_state_hash(&self) -> [u8; 32] {
        state(&root(&self.account_levels()), &self.rest_of_state())
    }

    /// A proof of account `id`'s state against [`Ledger::state_hash`].
    pub fn account_proof(&self, id: AccountId) -> Option<AccountProof> {
        let accounts = self.sorted_accounts();
        let mut index = accounts.binary_search_by_key(&id, |(id, _)| *id).ok()?;
        let leaf = account_leaf(id, accounts[index].1);
        let levels = self.account_levels();
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
            rest: self.rest_of_state(),
        })
    }
}
