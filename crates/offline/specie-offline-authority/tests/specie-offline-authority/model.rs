//! Random payment trees against a simple model. Devices pay tokens on at random, some owners
//! paying one token to several payees; every leaf of every tree is deposited, in a random order,
//! some twice. The model: a token is paid exactly once; an owner who passed a token on c times
//! owes c − 1 of it; no one else owes anything; value is conserved; the invariants hold after every
//! deposit and a restart rebuilds the same state.

use crate::world;

use std::collections::BTreeMap;

use proptest::prelude::*;
use specie_offline::{PublicKey, Token};
use specie_offline_authority::{DepositOutcome, Input, Reply};
use specie_role::Durable;
use world::{pay, World};

const DEVICES: usize = 4;
const KEYS_PER_DEVICE: usize = 24;

/// One token's tree: each step passes the token held at node `parent % nodes` to device `payee`.
#[derive(Clone, Debug)]
struct TreePlan {
    first_owner: usize,
    steps: Vec<(usize, usize)>,
}

fn tree_plan() -> impl Strategy<Value = TreePlan> {
    (0..DEVICES, prop::collection::vec((0usize..64, 0..DEVICES), 0..7))
        .prop_map(|(first_owner, steps)| TreePlan { first_owner, steps })
}

/// A node of a token's tree: the token as its owner holds it, which device and key own it, how
/// many times it was passed on.
struct Node {
    token: Token,
    device: usize,
    key: usize,
    children: u128,
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn each_token_is_paid_once_and_each_extra_copy_is_owed_by_the_owner_who_made_it(
        plans in prop::collection::vec(tree_plan(), 1..4),
        order_keys in prop::collection::vec(any::<u64>(), 32),
        repeats in prop::collection::vec(any::<bool>(), 32),
    ) {
        let mut world = World::new();
        let devices: Vec<_> = (0..DEVICES as u64).map(|n| world.device(n + 1, KEYS_PER_DEVICE)).collect();
        // Key 0 of each device takes its fundings; payments go to fresh keys from 1 on.
        let mut keys_used = [1usize; DEVICES];
        let mut fresh_key = |device: usize| {
            keys_used[device] += 1;
            keys_used[device] - 1
        };
        let value = 500u64;
        let mut owed: BTreeMap<PublicKey, u128> = BTreeMap::new();
        let mut leaves = Vec::new();
        for (id, plan) in plans.iter().enumerate() {
            let token = world.fund(id as u8, value, &devices[plan.first_owner]);
            prop_assert_eq!(token.len(), 1, "500 is one token, to key 0");
            let mut nodes = vec![Node { token: token[0].clone(), device: plan.first_owner, key: 0, children: 0 }];
            for (nonce, (parent, payee)) in plan.steps.iter().enumerate() {
                let parent = parent % nodes.len();
                let key = fresh_key(*payee);
                let (from, from_key) = (nodes[parent].device, nodes[parent].key);
                let token = pay(&world, &nodes[parent].token, &devices[from].keys[from_key], &devices[*payee], key, nonce as u8);
                nodes[parent].children += 1;
                nodes.push(Node { token, device: *payee, key, children: 0 });
            }
            for node in &nodes {
                if node.children > 1 {
                    *owed.entry(devices[node.device].identity()).or_default() += (node.children - 1) * u128::from(value);
                }
            }
            leaves.extend(nodes.into_iter().filter(|node| node.children == 0));
        }
        let mut order: Vec<usize> = (0..leaves.len()).collect();
        order.sort_by_key(|&i| order_keys[i % order_keys.len()].wrapping_add(i as u64));
        let mut paid = 0;
        for (n, &i) in order.iter().enumerate() {
            let leaf = &leaves[i];
            let device = &devices[leaf.device];
            let outcome = world.deposit_to(&leaf.token, &device.keys[leaf.key], device, KEYS_PER_DEVICE - 1 - n % 4);
            if repeats[n % repeats.len()] {
                let again = world.deposit_to(&leaf.token, &device.keys[leaf.key], device, KEYS_PER_DEVICE - 1 - n % 4);
                prop_assert_eq!(&again, &outcome, "a deposit sent again is answered as before");
            }
            match outcome {
                DepositOutcome::Reissued { .. } => paid += 1,
                DepositOutcome::DoubleSpent { debtor, .. } => {
                    prop_assert!(owed.contains_key(&debtor), "an owner who passed each token on once is never named");
                }
                other => prop_assert!(false, "unexpected {:?}", other),
            }
            let role = world.host.role().expect("running");
            prop_assert!(role.check_invariants().is_ok());
        }
        prop_assert_eq!(paid, plans.len(), "each token paid exactly once");
        let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
            panic!("books");
        };
        let debts: BTreeMap<PublicKey, u128> = books.debts.iter().map(|debt| (debt.identity, debt.value)).collect();
        prop_assert_eq!(debts, owed);
        let funded = plans.len() as u128 * u128::from(value);
        prop_assert_eq!((books.funded, books.defunded, books.outstanding), (funded, 0, funded));
        world.crash_and_restart();
    }
}
