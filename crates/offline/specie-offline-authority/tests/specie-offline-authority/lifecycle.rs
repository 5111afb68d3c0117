//! The key lifecycle (docs/offline-mode.md, "Key lifecycle"): the authority rotates to a new
//! period's keys and still takes the old ones' tokens through their deposit window; past it, a
//! token is worth nothing and the books say so; a revoked key's honest tokens come back through
//! deposit (recoup), and revoking a current key begins the next period at once. Every change
//! survives a crash (the simulator's host checks the log rebuilds the state), and the ring the
//! devices fetch says it all.

use crate::world;

use specie_offline::{Instruction, KeyStatus};
use specie_offline_authority::{DepositOutcome, Input, Refusal, Reply};
use world::{authority_keys, World, PERIOD};

fn rotate(world: &mut World) -> specie_offline::KeyRing {
    match world.call(|ticket| Input::Rotate { ticket }) {
        Reply::Keys(signed) => {
            // Published signed by the bridge key, re-signed as it changes.
            let bridge = authority_keys().bridge.verifying_key().to_bytes();
            signed
                .check(Some(&bridge))
                .expect("the ring is signed by the bridge key");
            assert!(signed.check(Some(&[9; 32])).is_err(), "and by no other");
            signed.ring
        }
        other => panic!("rotation refused: {other:?}"),
    }
}

#[test]
fn old_keys_tokens_are_paid_through_their_deposit_window_then_worth_nothing() {
    let mut world = World::new();
    let (alice, bob) = (world.device(1, 8), world.device(2, 8));
    let tokens = world.fund(1, 70, &alice); // 50 + 20, period PERIOD
    let lifecycle = authority_keys().lifecycle;
    assert_eq!(world.ring.lifecycle().current_period, PERIOD);

    let ring = rotate(&mut world);
    world.crash_and_restart();
    assert_eq!(ring.lifecycle().current_period, PERIOD + 1);
    let old_key = tokens[0].issuance.issuing_key;
    assert_eq!(ring.key_period(&old_key), Some(PERIOD));
    assert_eq!(ring.key_status(&old_key), Some(KeyStatus::Spendable));
    // New fundings issue under the new period's keys; the old ones stay in the ring.
    let fresh = world.fund(2, 50, &bob);
    assert_eq!(ring.key_period(&fresh[0].issuance.issuing_key), Some(PERIOD + 1));
    assert_ne!(fresh[0].issuance.issuing_key, old_key);

    // Through the spend window, then deposit only, then nothing.
    for _ in 0..lifecycle.spend_periods {
        world.ring = rotate(&mut world);
    }
    assert_eq!(
        world.ring.key_status(&old_key),
        Some(KeyStatus::SpendExpired {
            spendable_through: PERIOD + lifecycle.spend_periods
        })
    );
    let reissued = world.deposit_to(&tokens[1], &alice.keys[1], &alice, 5);
    assert!(matches!(reissued, DepositOutcome::Reissued { .. }), "{reissued:?}");
    for _ in lifecycle.spend_periods..lifecycle.deposit_periods {
        world.ring = rotate(&mut world);
    }
    world.crash_and_restart();
    let current = world.ring.lifecycle().current_period;
    assert_eq!(current, PERIOD + 1 + lifecycle.deposit_periods);
    assert_eq!(
        world.ring.key_status(&old_key),
        None,
        "a key past its deposit window leaves the ring"
    );
    let refused = world.deposit(&tokens[0], &alice.keys[0], Instruction::Defund { address: [1; 32] }, 0);
    assert_eq!(
        refused,
        Reply::Refused(Refusal::Expired {
            period: PERIOD,
            depositable_through: PERIOD + lifecycle.deposit_periods
        })
    );
    let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
        panic!("books");
    };
    assert_eq!(
        (books.current_period, books.outstanding, books.expired),
        (current, 120, 50)
    );
    assert!(books
        .by_key
        .iter()
        .any(|key| key.issuing_key == old_key && matches!(key.status, KeyStatus::Expired { .. })));
}

#[test]
fn a_revoked_current_key_begins_the_next_period_and_its_issued_tokens_are_recouped() {
    let mut world = World::new();
    let alice = world.device(1, 8);
    let tokens = world.fund(1, 50, &alice);
    let key = tokens[0].issuance.issuing_key;
    let Reply::Keys(ring) = world.call(|ticket| Input::RevokeKey { ticket, key }) else {
        panic!("revocation refused");
    };
    assert_eq!(ring.ring.key_status(&key), Some(KeyStatus::Revoked));
    assert_eq!(
        ring.ring.lifecycle().current_period,
        PERIOD + 1,
        "nothing more is issued with it"
    );
    world.crash_and_restart();
    assert_eq!(
        world.call(|ticket| Input::RevokeKey { ticket, key }),
        Reply::Refused(Refusal::AlreadyRevoked)
    );
    assert_eq!(
        world.call(|ticket| Input::RevokeKey { ticket, key: [7; 32] }),
        Reply::Refused(Refusal::UnknownIssuingKey)
    );
    world.ring = ring.ring;
    // Recoup: the honest holder deposits and is re-issued under the new period's key.
    let DepositOutcome::Reissued { issuances } = world.deposit_to(&tokens[0], &alice.keys[0], &alice, 3) else {
        panic!("recoup refused");
    };
    assert_eq!(world.ring.key_period(&issuances[0].issuing_key), Some(PERIOD + 1));
    assert_eq!(
        world.ring.key_status(&issuances[0].issuing_key),
        Some(KeyStatus::Spendable)
    );
    let Reply::Keys(after) = world.call(|ticket| Input::Keys { ticket }) else {
        panic!("keys");
    };
    assert_eq!(
        after.ring, world.ring,
        "the ring a device fetches is the one the operator got"
    );
}

/// Two leaders in turn may each propose the rotation to the same period: the second one that
/// reaches the log changes nothing (it must not stop the replicas).
#[test]
fn a_rotation_to_a_period_reached_already_changes_nothing() {
    use specie_offline_authority::{Command, OfflineAuthority};
    use specie_role::{Durable, Role};
    let keys = authority_keys();
    let next = keys.lifecycle.current_period + 1;
    let rotation = Command::Rotate {
        period: next,
        keys: keys.issuing_keys(next),
    };
    let mut role = OfflineAuthority::new(authority_keys());
    role.apply(0, &rotation);
    let after_first = role.snapshot();
    role.apply(0, &rotation);
    assert_eq!(role.snapshot(), after_first);
    role.check_invariants().expect("the invariants hold");
    assert_eq!(role.ring().lifecycle().current_period, next);
}
