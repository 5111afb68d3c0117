//! Blocks against a simple model: random worlds of a few accounts and assets, random candidate
//! transactions (offers, cancels, payments, new accounts, and bad ones: forged signatures,
//! overdrafts, replayed or repeated sequence numbers, cancels of offers that are not there).
//! Each block is proposed by one ledger and applied by replicas: one given the transactions
//! shuffled, one on a single thread. Every replica must reach the proposer's state hash, the
//! audit must hold after every block, and every account's balances and every book must be what a
//! plain sequential model of the accepted transactions and the block's clearing gives.

use std::collections::BTreeMap;

use ed25519_dalek::SigningKey;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use specie_exchange::{
    payout, Block, BlockError, ExchangeConfig, Ledger, LimitPrice, OfferKey, Operation, Refusal, SignedTransaction,
    Transaction,
};

const ASSETS: usize = 3;
const EXCHANGE: [u8; 32] = [7; 32];

fn key(n: u64) -> SigningKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&n.to_le_bytes());
    seed[8] = 0x5e;
    SigningKey::from_bytes(&seed)
}

struct World {
    ledger: Ledger,
    rng: rand::rngs::StdRng,
    next_sequence: BTreeMap<u64, u64>,
}

impl World {
    fn new(seed: u64, accounts: u64) -> World {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let genesis = (1..=accounts)
            .map(|id| {
                let balances = (0..ASSETS).map(|_| rng.gen_range(0..1_000_000)).collect();
                (id, key(id).verifying_key().to_bytes(), balances)
            })
            .collect();
        let ledger = Ledger::genesis(ExchangeConfig::new(EXCHANGE, ASSETS), genesis).unwrap();
        World {
            ledger,
            rng,
            next_sequence: BTreeMap::new(),
        }
    }

    fn account_ids(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.ledger.accounts().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        ids
    }

    /// A random operation of `account`, sometimes one the screen must refuse.
    fn operation(&mut self, account: u64, ids: &[u64]) -> Operation {
        let balances = self.ledger.account(account).unwrap().balances.clone();
        let asset = self.rng.gen_range(0..ASSETS as u16);
        let spend = |rng: &mut rand::rngs::StdRng, balance: u64| match rng.gen_range(0..10) {
            0 => balance.saturating_add(1), // an overdraft
            _ => rng.gen_range(1..=balance.clamp(1, 1 << 40) / 3 + 1),
        };
        match self.rng.gen_range(0..10) {
            0..=4 => {
                let buy = (asset + self.rng.gen_range(1..ASSETS as u16)) % ASSETS as u16;
                Operation::SellOffer {
                    sell: asset,
                    buy,
                    amount: spend(&mut self.rng, balances[usize::from(asset)]),
                    limit: LimitPrice(self.rng.gen_range(1u64 << 31..1u64 << 33)),
                }
            }
            5 | 6 => {
                let own: Vec<((u16, u16), OfferKey)> = (0..ASSETS as u16)
                    .flat_map(|s| (0..ASSETS as u16).map(move |b| (s, b)))
                    .flat_map(|pair| {
                        let keys: Vec<_> = self.ledger.book(pair).map(|(k, _)| (pair, *k)).collect();
                        keys
                    })
                    .filter(|(_, k)| k.account == account)
                    .collect();
                match own.choose(&mut self.rng) {
                    Some(((sell, buy), k)) => Operation::CancelOffer {
                        sell: *sell,
                        buy: *buy,
                        limit: k.limit,
                        sequence: k.sequence,
                    },
                    None => Operation::CancelOffer {
                        sell: 0,
                        buy: 1,
                        limit: LimitPrice(1),
                        sequence: 1,
                    },
                }
            }
            7 => Operation::Payment {
                to: *ids.choose(&mut self.rng).unwrap(),
                asset,
                amount: spend(&mut self.rng, balances[usize::from(asset)]),
            },
            8 => Operation::Withdraw {
                asset,
                amount: spend(&mut self.rng, balances[usize::from(asset)]),
                address: [account as u8; 32],
            },
            _ => Operation::CreateAccount {
                id: self.rng.gen_range(1..40),
                key: key(self.rng.gen_range(1..40)).verifying_key().to_bytes(),
            },
        }
    }

    fn candidates(&mut self, count: usize) -> Vec<SignedTransaction> {
        let ids = self.account_ids();
        let mut candidates = Vec::new();
        for _ in 0..count {
            let account = *ids.choose(&mut self.rng).unwrap();
            let last = self.ledger.account(account).unwrap().last_sequence;
            let next = self.next_sequence.entry(account).or_insert(last + 1);
            let sequence = match self.rng.gen_range(0..20) {
                0 => last,      // replayed
                1 => last + 65, // beyond the window
                _ => {
                    *next += 1;
                    *next - 1
                }
            };
            let operation = self.operation(account, &ids);
            let transaction = Transaction {
                account,
                sequence,
                operation,
            };
            let signer = if self.rng.gen_range(0..25) == 0 {
                key(account + 1000)
            } else {
                key(account)
            };
            candidates.push(transaction.sign(&EXCHANGE, &signer));
        }
        self.next_sequence.clear();
        candidates
    }
}

type Balances = BTreeMap<u64, Vec<u64>>;
type Books = BTreeMap<(u16, u16), BTreeMap<OfferKey, u64>>;

/// The plain model: the accepted transactions applied one by one, then the clearing's trades.
fn model(before: &Ledger, block: &Block) -> (Balances, Books) {
    let mut balances: Balances = before.accounts().map(|(id, a)| (*id, a.balances.clone())).collect();
    let mut books: Books = BTreeMap::new();
    for sell in 0..ASSETS as u16 {
        for buy in 0..ASSETS as u16 {
            books.insert((sell, buy), before.book((sell, buy)).map(|(k, a)| (*k, *a)).collect());
        }
    }
    for signed in &block.transactions {
        let t = signed.transaction;
        match t.operation {
            Operation::CreateAccount { id, .. } => {
                balances.insert(id, vec![0; ASSETS]);
            }
            Operation::SellOffer {
                sell,
                buy,
                amount,
                limit,
            } => {
                balances.get_mut(&t.account).unwrap()[usize::from(sell)] -= amount;
                let key = OfferKey {
                    limit,
                    account: t.account,
                    sequence: t.sequence,
                };
                books.get_mut(&(sell, buy)).unwrap().insert(key, amount);
            }
            Operation::CancelOffer {
                sell,
                buy,
                limit,
                sequence,
            } => {
                let key = OfferKey {
                    limit,
                    account: t.account,
                    sequence,
                };
                let left = books.get_mut(&(sell, buy)).unwrap().remove(&key).unwrap();
                balances.get_mut(&t.account).unwrap()[usize::from(sell)] += left;
            }
            Operation::Payment { to, asset, amount } => {
                balances.get_mut(&t.account).unwrap()[usize::from(asset)] -= amount;
                balances.get_mut(&to).unwrap()[usize::from(asset)] += amount;
            }
            Operation::Withdraw { asset, amount, .. } => {
                balances.get_mut(&t.account).unwrap()[usize::from(asset)] -= amount;
            }
        }
    }
    let prices: Vec<u64> = block.clearing.prices.iter().map(|p| p.0).collect();
    for trade in &block.clearing.trades {
        let book = books.get_mut(&(trade.sell, trade.buy)).unwrap();
        let mut left = trade.amount;
        for (key, offered) in book.iter_mut() {
            let sold = left.min(*offered);
            left -= sold;
            *offered -= sold;
            let (p_sell, p_buy) = (prices[usize::from(trade.sell)], prices[usize::from(trade.buy)]);
            if sold > 0 {
                balances.get_mut(&key.account).unwrap()[usize::from(trade.buy)] +=
                    payout(sold, p_sell, p_buy, 15).unwrap() as u64;
            }
        }
        book.retain(|_, amount| *amount > 0);
    }
    books.retain(|_, book| !book.is_empty());
    (balances, books)
}

fn check_against_model(before: &Ledger, after: &Ledger, block: &Block) {
    let (balances, books) = model(before, block);
    let actual: BTreeMap<u64, Vec<u64>> = after.accounts().map(|(id, a)| (*id, a.balances.clone())).collect();
    assert_eq!(actual, balances, "balances as the model has them");
    for ((sell, buy), book) in &books {
        let actual: BTreeMap<OfferKey, u64> = after.book((*sell, *buy)).map(|(k, a)| (*k, *a)).collect();
        assert_eq!(&actual, book, "book {sell}->{buy}");
    }
    assert_eq!(after.offer_count(), books.values().map(BTreeMap::len).sum::<usize>());
}

/// How many transactions of each kind blocks held (create, offer, cancel, pay, withdraw), and how many
/// candidates the proposer dropped: a world that exercises nothing proves nothing.
fn run_world(seed: u64, blocks: usize, per_block: usize) -> ([usize; 5], usize, usize) {
    let mut world = World::new(seed, 8);
    let single = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (mut kinds, mut dropped, mut traded) = ([0usize; 5], 0, 0);
    for _ in 0..blocks {
        let before = world.ledger.clone();
        let candidates = world.candidates(per_block);
        let (block, executed) = world.ledger.propose(candidates);
        dropped += per_block - block.transactions.len();
        traded += executed.offers_traded;
        for signed in &block.transactions {
            kinds[match signed.transaction.operation {
                Operation::CreateAccount { .. } => 0,
                Operation::SellOffer { .. } => 1,
                Operation::CancelOffer { .. } => 2,
                Operation::Payment { .. } => 3,
                Operation::Withdraw { .. } => 4,
            }] += 1;
        }
        world.ledger.audit().unwrap();
        check_against_model(&before, &world.ledger, &block);
        let mut shuffled = block.clone();
        shuffled.transactions.shuffle(&mut world.rng);
        let mut replica = before.clone();
        replica.apply(&shuffled).unwrap();
        assert_eq!(replica.state_hash(), world.ledger.state_hash(), "order does not matter");
        let mut alone = before.clone();
        single.install(|| alone.apply(&block)).unwrap();
        assert_eq!(
            alone.state_hash(),
            world.ledger.state_hash(),
            "thread count does not matter"
        );
        assert_eq!(alone, world.ledger);
        // The state hash kept block by block is the full recomputation's, and stays so after a
        // snapshot and restore (the next block is applied to the restored ledger).
        assert_eq!(world.ledger.state_hash(), world.ledger.compute_state_hash());
        let restored = Ledger::restore(world.ledger.config().clone(), &world.ledger.snapshot()).unwrap();
        assert_eq!(
            restored, world.ledger,
            "a restored ledger is the one snapshotted, trees and all"
        );
        world.ledger = restored;
    }
    (kinds, dropped, traded)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn replicas_agree_with_the_proposer_and_the_model_whatever_the_order(seed: u64) {
        let (kinds, dropped, _) = run_world(seed, 6, 40);
        // Offers make up half the draws; a payment is a tenth and is refused whenever its payer
        // holds none of the asset, so a short world may accept none (seed 3181385424801147936
        // did). The long world below, on a fixed seed, holds every kind.
        prop_assert!(kinds[1] > 0, "offers: {kinds:?}");
        prop_assert!(dropped > 0, "the screen dropped something");
    }
}

#[test]
fn a_long_world_holds_every_kind_of_transaction() {
    let (kinds, dropped, traded) = run_world(42, 30, 60);
    assert!(kinds.iter().all(|k| *k > 0), "{kinds:?}");
    assert!(dropped > 0);
    assert!(traded > 0, "offers crossed and traded at the blocks' prices");
}

#[test]
fn a_replica_refuses_a_block_that_breaks_a_rule_and_stays_as_it_was() {
    let mut world = World::new(1, 8);
    let before = world.ledger.clone();
    let candidates = world.candidates(60);
    let (block, _) = world.ledger.propose(candidates);
    assert!(!block.transactions.is_empty());
    let refused = |tamper: &dyn Fn(&mut Block)| {
        let mut bad = block.clone();
        tamper(&mut bad);
        let mut replica = before.clone();
        let error = replica.apply(&bad).unwrap_err();
        assert_eq!(replica, before, "a refused block changes nothing");
        error
    };
    assert!(matches!(
        refused(&|b| b.transactions[0].signature[0] ^= 1),
        BlockError::Signature { index: 0 }
    ));
    assert!(matches!(refused(&|b| b.height += 1), BlockError::Height { .. }));
    assert!(matches!(refused(&|b| b.previous[0] ^= 1), BlockError::Previous));
    let duplicate = refused(&|b| {
        let first = b.transactions[0];
        b.transactions.push(first)
    });
    assert!(matches!(duplicate, BlockError::Refused { .. }), "{duplicate}");
    // An overdraft signed properly: the account pays more than it has.
    let account = block.transactions[0].transaction.account;
    let balance = before.account(account).unwrap().balances[0];
    let overdraft = Transaction {
        account,
        sequence: before.account(account).unwrap().last_sequence + 64,
        operation: Operation::Payment {
            to: account % 8 + 1,
            asset: 0,
            amount: balance + 1,
        },
    }
    .sign(&EXCHANGE, &key(account));
    let error = refused(&|b| b.transactions.push(overdraft));
    assert!(
        matches!(
            error,
            BlockError::Refused {
                refusal: Refusal::Overdraft(0),
                ..
            } | BlockError::Refused {
                refusal: Refusal::Sequence,
                ..
            }
        ),
        "{error}"
    );
    let mut replica = before.clone();
    replica.apply(&block).unwrap();
    assert_eq!(replica.state_hash(), world.ledger.state_hash());
}

#[test]
fn a_block_round_trips_its_encoding_and_a_proof_shows_an_accounts_balances() {
    let mut world = World::new(2, 8);
    let candidates = world.candidates(50);
    let (block, _) = world.ledger.propose(candidates);
    let mut bytes = Vec::new();
    block.encode_to(&mut bytes);
    let max = Block::encoded_bytes_max(1_000);
    let decoded = specie_codec::decode_bounded("block", &bytes, max, |r| Block::decode_from(r, 1_000)).unwrap();
    assert_eq!(decoded, block);
    for id in world.account_ids() {
        let proof = world.ledger.account_proof(id).unwrap();
        assert!(proof.verify(&world.ledger.state_hash()), "account {id}");
        let mut forged = proof.clone();
        let last = forged.leaf.len() - 1;
        forged.leaf[last] ^= 1;
        assert!(
            !forged.verify(&world.ledger.state_hash()),
            "a changed balance no longer proves"
        );
    }
    assert!(world.ledger.account_proof(999_999).is_none());
}

/// Payments signed by `accounts` accounts in turn, `count` of them.
fn payments(ledger: &Ledger, accounts: u64, count: u64) -> Vec<SignedTransaction> {
    (0..count)
        .map(|n| {
            let account = n % accounts + 1;
            let transaction = Transaction {
                account,
                sequence: ledger.account(account).unwrap().last_sequence + 1 + n / accounts,
                operation: Operation::Payment {
                    to: (account % accounts) + 1,
                    asset: 0,
                    amount: 1,
                },
            };
            transaction.sign(&EXCHANGE, &key(account))
        })
        .collect()
}

/// Signatures are checked in batches, but a block is refused exactly as if each were checked
/// alone: at its first bad signature, whichever batch it falls in, and the verdicts are those of
/// each signature alone.
#[test]
fn a_block_with_one_bad_signature_among_many_is_refused_at_it() {
    let world = World::new(3, 50);
    let before = world.ledger.clone();
    let transactions = payments(&before, 50, 300);
    let (block, _) = before.clone().propose(transactions.clone());
    assert_eq!(block.transactions.len(), 300);
    for bad in [vec![0], vec![63], vec![64], vec![200, 299], vec![299], vec![130, 70]] {
        let mut tampered = block.clone();
        for &index in &bad {
            tampered.transactions[index].signature[if index % 2 == 0 { 10 } else { 40 }] ^= 0x40;
        }
        let verdicts = specie_exchange::block::signatures_valid(&before, &tampered.transactions);
        let alone: Vec<bool> = tampered
            .transactions
            .iter()
            .map(|signed| {
                let key =
                    ed25519_dalek::VerifyingKey::from_bytes(&before.account(signed.transaction.account).unwrap().key);
                let message = signed.transaction.signing_bytes(&EXCHANGE);
                key.unwrap()
                    .verify_strict(&message, &ed25519_dalek::Signature::from_bytes(&signed.signature))
                    .is_ok()
            })
            .collect();
        assert_eq!(verdicts, alone, "batched verdicts are the single ones");
        let mut replica = before.clone();
        let error = replica.apply(&tampered).unwrap_err();
        let first = *bad.iter().min().unwrap();
        assert_eq!(error, BlockError::Signature { index: first });
        assert_eq!(replica, before, "a refused block changes nothing");
        // A proposer drops exactly the bad ones.
        let (proposed, refused, _) = before.assemble(tampered.transactions.clone());
        assert_eq!(proposed.transactions.len(), 300 - bad.len());
        assert!(refused.iter().all(|(_, refusal)| *refusal == Refusal::Signature));
    }
    // A signature of another transaction (valid, for another message) is bad too.
    let mut swapped = block.clone();
    swapped.transactions[100].signature = block.transactions[101].signature;
    let error = before.clone().apply(&swapped).unwrap_err();
    assert_eq!(error, BlockError::Signature { index: 100 });
    let mut replica = before.clone();
    replica.apply(&block).unwrap();
}
