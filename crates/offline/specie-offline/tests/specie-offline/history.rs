//! The authority's double-spend rule on a token's tree of statements: it names exactly the owners
//! who signed two different statements on one node, whatever order the copies arrive in; a
//! replayed transfer or a deposit sent twice names no one; and it catches what the prototype's
//! single history misses, a double spend nested in another.

use std::collections::BTreeSet;

use proptest::prelude::*;
use specie_offline::{History, Issuance, Move, PublicKey, Recorded, SignedMove, Token};

use crate::issuing_world;

use issuing_world::{key, public, World};

fn deposit(token: &Token, owner: u8, instruction: u8) -> SignedMove {
    let deposit = Move::Deposit {
        instruction: [instruction; 32],
        nonce: [9; 16],
    };
    deposit.sign(token, &key(owner))
}

/// Records each (token, depositor) in order; returns every owner named.
fn record_all(history: &mut History, deposits: &[(Token, u8)]) -> BTreeSet<PublicKey> {
    let mut named = BTreeSet::new();
    for (token, owner) in deposits {
        match history.record(token, Some(deposit(token, *owner, 1))).unwrap() {
            Recorded::New { conflicts } => named.extend(conflicts.iter().map(|c| c.owner)),
            other => panic!("each path is new: {other:?}"),
        }
    }
    named
}

/// Alice (1) pays Bob (2) and Carol (3); Carol pays Dan (4) and Erin (5). Every order of the three
/// deposits names Alice and Carol, and no one else. The prototype compares each deposit with one
/// stored line, so with Bob's deposit first it names Alice twice and never Carol.
#[test]
fn a_double_spend_nested_in_another_names_both_spenders_in_every_order() {
    let w = World::new(100);
    let alice = w.issue(1, 1);
    let bob = w.pay(&alice, 1, 2, 10);
    let carol = w.pay(&alice, 1, 3, 11);
    let dan = w.pay(&carol, 3, 4, 12);
    let erin = w.pay(&carol, 3, 5, 13);
    let paths = [(bob, 2), (dan, 4), (erin, 5)];
    for order in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
        let mut history = History::new(&alice.issuance);
        let deposits: Vec<(Token, u8)> = order.iter().map(|&i| paths[i].clone()).collect();
        let named = record_all(&mut history, &deposits);
        assert_eq!(named, BTreeSet::from([public(1), public(3)]), "order {order:?}");
        assert_eq!(history.statements(), 4 + 3, "four transfers and three deposits");
    }
}

/// The replay of §IV-G: Alice sends Bob the same transfer twice. The same nonce makes it the same
/// statement: known, no one named. A second transfer to Bob at a new nonce is Alice's second
/// statement on her node: Alice is named, never Bob, who spends each copy once.
#[test]
fn a_replay_names_no_one_and_a_second_transfer_to_the_same_payee_names_the_payer() {
    let w = World::new(100);
    let alice = w.issue(1, 1);
    let to_bob = w.pay(&alice, 1, 2, 20);
    let mut history = History::new(&alice.issuance);
    let bob_deposits = deposit(&to_bob, 2, 1);
    assert_eq!(
        history.record(&to_bob, Some(bob_deposits)),
        Ok(Recorded::New { conflicts: vec![] })
    );
    assert_eq!(history.record(&to_bob, Some(bob_deposits)), Ok(Recorded::Known));
    assert_eq!(history.record(&w.pay(&alice, 1, 2, 20), None), Ok(Recorded::Known));
    // Bob deposits again with another instruction: one deposit, the first counts.
    assert_eq!(
        history.record(&to_bob, Some(deposit(&to_bob, 2, 7))),
        Ok(Recorded::DepositedBefore { first: bob_deposits })
    );

    let again = w.pay(&alice, 1, 2, 21);
    let carol = w.pay(&again, 2, 3, 22);
    let Ok(Recorded::New { conflicts }) = history.record(&carol, Some(deposit(&carol, 3, 1))) else {
        panic!("a new branch")
    };
    let named: Vec<PublicKey> = conflicts.iter().map(|c| c.owner).collect();
    assert_eq!(named, vec![public(1)]);
    assert_eq!(conflicts[0].index, 0);

    let other = Token::issued(Issuance::sign(&w.issuing, [1; 16], public(9)));
    assert!(history.record(&other, None).is_err(), "another issuance of the serial");
}

/// A random tree of payments: each owner pays one peer (honest) or, if it cheats, two; every
/// leaf deposits, in a random order.
fn tree(w: &World, cheats: &[bool], order: &[usize]) -> (Issuance, Vec<(Token, u8)>, BTreeSet<PublicKey>) {
    let root = w.issue(1, 1);
    let mut leaves = Vec::new();
    let mut cheaters = BTreeSet::new();
    let mut next_owner = 2u8;
    let mut frontier = vec![(root.clone(), 1u8, 0usize)];
    while let Some((token, owner, depth)) = frontier.pop() {
        if depth == 3 {
            leaves.push((token, owner));
            continue;
        }
        let children = if cheats[usize::from(owner) % cheats.len()] {
            2
        } else {
            1
        };
        if children == 2 {
            cheaters.insert(public(owner));
        }
        for _ in 0..children {
            let paid = w.pay(&token, owner, next_owner, next_owner);
            frontier.push((paid, next_owner, depth + 1));
            next_owner += 1;
        }
    }
    let mut shuffled: Vec<(Token, u8)> = Vec::new();
    let mut remaining = leaves;
    for &pick in order {
        if remaining.is_empty() {
            break;
        }
        shuffled.push(remaining.remove(pick % remaining.len()));
    }
    shuffled.extend(remaining);
    (root.issuance, shuffled, cheaters)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn exactly_the_owners_who_signed_twice_are_named_whatever_the_order(
        cheats in proptest::collection::vec(any::<bool>(), 5),
        order in proptest::collection::vec(any::<usize>(), 8),
    ) {
        let w = World::new(100);
        let (issuance, deposits, cheaters) = tree(&w, &cheats, &order);
        let mut history = History::new(&issuance);
        let named = record_all(&mut history, &deposits);
        prop_assert_eq!(named, cheaters);
        for (token, owner) in &deposits {
            prop_assert_eq!(history.record(token, Some(deposit(token, *owner, 1))), Ok(Recorded::Known));
        }
    }
}
