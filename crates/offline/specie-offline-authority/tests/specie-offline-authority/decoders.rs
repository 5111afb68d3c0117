//! The authority's decoders take bytes a crashed disk or a replica's snapshot may have mangled:
//! every mutation of a real snapshot, and arbitrary bytes as a command, are refused with an error
//! or decode to exactly what re-encodes to them; nothing panics.

use crate::world;

use proptest::prelude::*;
use specie_offline_authority::{Command, OfflineAuthority};
use specie_role::Durable;
use world::{authority_keys, pay, World};

/// A snapshot holding every kind of command: identities, certified keys, a funding, a paid deposit
/// and a double-spent one.
fn snapshot() -> Vec<u8> {
    let mut world = World::new();
    let (alice, bob, carol) = (world.device(1, 2), world.device(2, 2), world.device(3, 2));
    let token = world.fund(1, 7, &alice).remove(0);
    let to_bob = pay(&world, &token, &alice.keys[0], &bob, 0, 1);
    let to_carol = pay(&world, &token, &alice.keys[0], &carol, 0, 2);
    world.deposit_to(&to_bob, &bob.keys[0], &bob, 1);
    world.deposit_to(&to_carol, &carol.keys[0], &carol, 1);
    world.host.role().expect("running").snapshot()
}

#[test]
fn a_snapshot_restores_to_the_same_bytes() {
    let bytes = snapshot();
    let mut restored = OfflineAuthority::new(authority_keys());
    restored.restore(&bytes).unwrap();
    assert_eq!(restored.snapshot(), bytes);
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(restored.restore(&longer).is_err(), "trailing bytes are refused");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_snapshot_is_refused_or_canonical(position in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = snapshot();
        let at = position.index(bytes.len());
        bytes[at] = byte;
        let mut authority = OfflineAuthority::new(authority_keys());
        if authority.restore(&bytes).is_ok() {
            prop_assert_eq!(authority.snapshot(), bytes);
            prop_assert!(authority.check_invariants().is_ok());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_command_decoder(bytes in prop::collection::vec(any::<u8>(), 0..2_048)) {
        if let Ok(command) = Command::decode(&bytes) {
            prop_assert_eq!(command.encode(), bytes);
        }
    }
}
