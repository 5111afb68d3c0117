//! The offline authority's deposits: paid once, re-issued or defunded, a repeat answered as
//! before, a second branch refused with its debt on the owner who signed twice, and evidence that
//! convicts exactly that owner. The authority crashes and restarts between steps; the simulator's
//! host checks each time that its log rebuilds the state it crashed in.

use crate::world;

use specie_offline::{Instruction, Move};
use specie_offline_authority::{DepositOutcome, Input, Refusal, Reply, Report};
use world::{authority_keys, pay, World};

#[test]
fn a_token_paid_twice_offline_is_reissued_once_a_repeat_gets_the_same_answer_and_a_defund_leaves_the_books() {
    let mut world = World::new();
    let (alice, bob, carol) = (world.device(1, 4), world.device(2, 4), world.device(3, 8));
    let tokens = world.fund(1, 50, &alice);
    assert_eq!(tokens.len(), 1, "50 is one token");
    world.crash_and_restart();
    let to_bob = pay(&world, &tokens[0], &alice.keys[0], &bob, 0, 1);
    let to_carol = pay(&world, &to_bob, &bob.keys[0], &carol, 0, 2);

    let change = Instruction::Reissue {
        outputs: vec![(20, carol.public(1)), (20, carol.public(2)), (10, carol.public(3))],
    };
    let Reply::Deposited(DepositOutcome::Reissued { issuances }) =
        world.deposit(&to_carol, &carol.keys[0], change.clone(), 9)
    else {
        panic!("the first deposit is paid");
    };
    assert_eq!(issuances.len(), 3);
    for (issuance, key) in issuances.iter().zip(1..) {
        let token = specie_offline::Token::issued(*issuance);
        let verified = token.verify(&world.ring).unwrap();
        assert_eq!(verified.owner, carol.public(key));
    }
    world.crash_and_restart();
    assert_eq!(
        world.deposit(&to_carol, &carol.keys[0], change, 9),
        Reply::Deposited(DepositOutcome::Reissued {
            issuances: issuances.clone()
        }),
        "a deposit sent again is answered as before, and pays nothing more"
    );
    let other = Instruction::Reissue {
        outputs: vec![(50, carol.public(4))],
    };
    assert_eq!(
        world.deposit(&to_carol, &carol.keys[0], other, 10),
        Reply::Deposited(DepositOutcome::AlreadyDeposited),
        "a second deposit of one token by its owner is not a double spend"
    );

    let twenty = specie_offline::Token::issued(issuances[0]);
    let address = [7; 32];
    let serial = twenty.issuance.serial;
    let paid_out = world.deposit(&twenty, &carol.keys[1], Instruction::Defund { address }, 0);
    // The terms of the payout the core takes: 20 to the address (an x-only key, whose witness
    // program the core's format pays), for this token's serial. The authority's service signs
    // it with the bridge key (specie-wallet's core format tests check that payout).
    assert_eq!(
        paid_out,
        Reply::Deposited(DepositOutcome::Defunded {
            serial,
            address,
            amount: 20
        }),
        "a defund is answered with its payout's terms"
    );
    world.crash_and_restart();
    assert_eq!(
        world.deposit(&twenty, &carol.keys[1], Instruction::Defund { address }, 0),
        paid_out,
        "the same payout's terms for the same deposit after a crash (the core takes one per serial)"
    );
    let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
        panic!("books");
    };
    assert_eq!((books.funded, books.defunded, books.outstanding), (50, 20, 30));
    assert!(books.debts.is_empty());
    let key_of = |value: u64| books.by_key.iter().find(|k| k.denomination == value).unwrap();
    assert_eq!((key_of(50).issued, key_of(50).paid), (50, 50));
    assert_eq!((key_of(20).issued, key_of(20).paid), (40, 20));
    assert_eq!((key_of(10).issued, key_of(10).paid), (10, 0));
    assert!(world.reports.is_empty(), "nothing to report");
}

/// Alice pays one token to Bob and to Carol. Whichever deposit arrives first is paid; the other is
/// refused and Alice, not the recipient, owes it.
#[test]
fn a_double_spend_names_the_spender_with_evidence_in_either_order_and_never_a_recipient() {
    for bob_first in [true, false] {
        let mut world = World::new();
        let (alice, bob, carol) = (world.device(1, 2), world.device(2, 2), world.device(3, 2));
        let token = world.fund(1, 100, &alice).remove(0);
        let to_bob = pay(&world, &token, &alice.keys[0], &bob, 0, 1);
        let to_carol = pay(&world, &token, &alice.keys[0], &carol, 0, 2);
        let deposits = [(&to_bob, &bob), (&to_carol, &carol)];
        let order = if bob_first { [0, 1] } else { [1, 0] };
        let first = world.deposit_to(
            deposits[order[0]].0,
            &deposits[order[0]].1.keys[0],
            deposits[order[0]].1,
            1,
        );
        assert!(matches!(first, DepositOutcome::Reissued { .. }), "{first:?}");
        world.crash_and_restart();
        let second = world.deposit_to(
            deposits[order[1]].0,
            &deposits[order[1]].1.keys[0],
            deposits[order[1]].1,
            1,
        );
        assert_eq!(
            second,
            DepositOutcome::DoubleSpent {
                serial: token.issuance.serial,
                debtor: alice.identity(),
                value: 100
            }
        );
        world.crash_and_restart();

        let Reply::Evidence(evidence) = world.call(|ticket| Input::Evidence {
            ticket,
            identity: alice.identity(),
        }) else {
            panic!("evidence");
        };
        assert_eq!(evidence.len(), 1);
        let convicted = evidence[0].check(&world.ring).expect("the evidence convicts");
        assert_eq!(convicted.identity, alice.identity());
        assert_eq!(convicted.one_time_key, alice.public(0));
        assert_eq!(world.reports, vec![Report::DoubleSpend(Box::new(evidence[0].clone()))]);
        for honest in [&bob, &carol] {
            let identity = honest.identity();
            let reply = world.call(|ticket| Input::Evidence { ticket, identity });
            assert_eq!(reply, Reply::Evidence(Vec::new()), "no evidence against a recipient");
        }
        let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
            panic!("books");
        };
        assert_eq!(books.debts.len(), 1);
        assert_eq!((books.debts[0].identity, books.debts[0].value), (alice.identity(), 100));
        assert_eq!((books.funded, books.outstanding), (100, 100), "one token paid, once");
        assert_eq!(
            world.call(|ticket| Input::Revocations { ticket, from: 0 }),
            Reply::Revocations {
                from: 0,
                serials: vec![token.issuance.serial]
            }
        );
        let binding = specie_offline::KeyBinding::sign(&alice.identity, [9; 32]);
        let reply = world.call(|ticket| Input::Certify {
            ticket,
            bindings: vec![binding],
        });
        assert_eq!(reply, Reply::Refused(Refusal::Convicted { index: 0 }));
    }
}

/// A transfer replayed to the same payee at the same nonce is the same statement: the authority
/// sees one chain, pays it once and names no one.
#[test]
fn a_replayed_transfer_names_no_one() {
    let mut world = World::new();
    let (alice, bob) = (world.device(1, 2), world.device(2, 2));
    let token = world.fund(1, 5, &alice).remove(0);
    let once = pay(&world, &token, &alice.keys[0], &bob, 0, 4);
    let again = pay(&world, &token, &alice.keys[0], &bob, 0, 4);
    assert_eq!(
        once, again,
        "Ed25519 is deterministic: the replay is byte for byte the payment"
    );
    let paid = world.deposit_to(&once, &bob.keys[0], &bob, 1);
    assert_eq!(world.deposit_to(&again, &bob.keys[0], &bob, 1), paid);
    let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
        panic!("books");
    };
    assert!(books.debts.is_empty());
}

/// A pays B and C; C pays D and E. Whatever the order the three deposits arrive in, one is paid,
/// A owes one token and C owes one: each branching owner pays for the copy it made.
#[test]
fn nested_double_spends_charge_each_spender_once_in_every_order() {
    let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    for order in orders {
        let mut world = World::new();
        let devices: Vec<_> = (1..=5).map(|n| world.device(n, 2)).collect();
        let (a, b, c, d, e) = (&devices[0], &devices[1], &devices[2], &devices[3], &devices[4]);
        let token = world.fund(1, 200, a).remove(0);
        let to_b = pay(&world, &token, &a.keys[0], b, 0, 1);
        let to_c = pay(&world, &token, &a.keys[0], c, 0, 2);
        let to_d = pay(&world, &to_c, &c.keys[0], d, 0, 3);
        let to_e = pay(&world, &to_c, &c.keys[0], e, 0, 4);
        let leaves = [(&to_b, b), (&to_d, d), (&to_e, e)];
        let outcomes: Vec<_> = order
            .iter()
            .map(|&i| world.deposit_to(leaves[i].0, &leaves[i].1.keys[0], leaves[i].1, 1))
            .collect();
        assert!(matches!(outcomes[0], DepositOutcome::Reissued { .. }), "{order:?}");
        let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
            panic!("books");
        };
        let mut debtors: Vec<_> = books.debts.iter().map(|debt| (debt.identity, debt.value)).collect();
        debtors.sort();
        let mut expected = vec![(a.identity(), 200), (c.identity(), 200)];
        expected.sort();
        assert_eq!(debtors, expected, "order {order:?}");
        world.crash_and_restart();
    }
}

#[test]
fn bad_requests_are_refused_with_their_reason_and_change_nothing() {
    let mut world = World::new();
    let (alice, bob) = (world.device(1, 4), world.device(2, 4));
    let token = world.fund(1, 20, &alice).remove(0);
    let before = world.host.role().map(specie_role::Durable::snapshot);

    // A token this authority never issued (a funding it never saw, under its own keys).
    let mut stranger = World::new();
    let stranger_device = stranger.device(1, 1);
    let foreign = stranger.fund(2, 20, &stranger_device).remove(0);
    let reissue = |to: &world::Device| Instruction::Reissue {
        outputs: vec![(20, to.public(1))],
    };
    assert_eq!(
        world.deposit(&foreign, &stranger_device.keys[0], reissue(&alice), 0),
        Reply::Refused(Refusal::UnknownToken)
    );
    // A chain whose hop Bob signed, not Alice (the owner).
    let forged = token.transfer(&alice.keys[0], bob.certificates[0], [1; 16]).unwrap();
    let mut forged_hop = forged.clone();
    forged_hop.hops[0].signature = pay(&world, &token, &alice.keys[0], &bob, 0, 2).hops[0].signature;
    assert_eq!(
        world.deposit(&forged_hop, &bob.keys[0], reissue(&bob), 0),
        Reply::Refused(Refusal::BadSignature { statement: 1 })
    );
    // A deposit signed by someone who does not own the token.
    assert_eq!(
        world.deposit(&forged, &alice.keys[0], reissue(&alice), 0),
        Reply::Refused(Refusal::BadSignature { statement: 2 })
    );
    // A hop to a key certified by someone else's certifying key, or with its period changed.
    let stranger_certificate = specie_offline::KeyCertificate::sign(bob.public(2), world::PERIOD, &alice.keys[3]);
    let unknown = token.transfer(&alice.keys[0], stranger_certificate, [3; 16]).unwrap();
    assert_eq!(
        world.deposit(&unknown, &bob.keys[2], reissue(&bob), 0),
        Reply::Refused(Refusal::UncertifiedKey { hop: 1 })
    );
    let mut moved = bob.certificates[1];
    moved.period += 1;
    let unknown = token.transfer(&alice.keys[0], moved, [3; 16]).unwrap();
    assert_eq!(
        world.deposit(&unknown, &bob.keys[1], reissue(&bob), 0),
        Reply::Refused(Refusal::UncertifiedKey { hop: 1 })
    );
    // A deposit statement over another instruction.
    let statement = Move::Deposit {
        instruction: reissue(&bob).hash(),
        nonce: [0; 16],
    }
    .sign(&forged, &bob.keys[0]);
    let reply = world.call(|ticket| Input::Deposit {
        ticket,
        token: Box::new(forged.clone()),
        statement,
        instruction: Instruction::Defund { address: [1; 32] },
    });
    assert_eq!(reply, Reply::Refused(Refusal::InstructionMismatch));
    // A transfer statement in place of a deposit.
    let transfer = Move::Transfer {
        next_owner: alice.certificates[1],
        nonce: [0; 16],
    }
    .sign(&forged, &bob.keys[0]);
    let reply = world.call(|ticket| Input::Deposit {
        ticket,
        token: Box::new(forged.clone()),
        statement: transfer,
        instruction: reissue(&bob),
    });
    assert_eq!(reply, Reply::Refused(Refusal::NotADeposit));
    // Re-issues that do not add up, are not denominations, or go to uncertified keys.
    let wrong = |outputs: Vec<(u64, [u8; 32])>| Instruction::Reissue { outputs };
    assert_eq!(
        world.deposit(
            &forged,
            &bob.keys[0],
            wrong(vec![(20, bob.public(1)), (1, bob.public(2))]),
            0
        ),
        Reply::Refused(Refusal::ReissueValue { asked: 21, value: 20 })
    );
    assert_eq!(
        world.deposit(
            &forged,
            &bob.keys[0],
            wrong(vec![(3, bob.public(1)), (17, bob.public(2))]),
            0
        ),
        Reply::Refused(Refusal::NotADenomination { value: 3 })
    );
    assert_eq!(
        world.deposit(&forged, &bob.keys[0], wrong(vec![(20, [5; 32])]), 0),
        Reply::Refused(Refusal::UncertifiedOwner { index: 0 })
    );
    assert_eq!(
        world.host.role().map(specie_role::Durable::snapshot),
        before,
        "nothing changed"
    );
}

#[test]
fn bad_enrolments_and_fundings_are_refused_with_their_reason() {
    let mut world = World::new();
    let alice = world.device(1, 2);
    let unregistered = specie_offline::deterministic_key("identity", 77);
    let binding = specie_offline::KeyBinding::sign(&unregistered, [9; 32]);
    let reply = world.call(|ticket| Input::Certify {
        ticket,
        bindings: vec![binding],
    });
    assert_eq!(reply, Reply::Refused(Refusal::NotRegistered { index: 0 }));
    let mut forged = specie_offline::KeyBinding::sign(&alice.identity, alice.public(1));
    forged.key = world::Device::public(&world.device(2, 1), 0);
    let reply = world.call(|ticket| Input::Certify {
        ticket,
        bindings: vec![forged],
    });
    assert!(
        matches!(reply, Reply::Refused(Refusal::BadBinding { index: 0, .. })),
        "{reply:?}"
    );
    let bob_identity = world.device(3, 0).identity;
    let taken = specie_offline::KeyBinding::sign(&bob_identity, alice.public(0));
    let reply = world.call(|ticket| Input::Certify {
        ticket,
        bindings: vec![taken],
    });
    assert_eq!(reply, Reply::Refused(Refusal::KeyTaken { index: 0 }));

    let funding = |amount: u64, owners: Vec<[u8; 32]>| specie_offline_authority::Funding {
        id: [4; 32],
        amount,
        owners,
    };
    let reply = world.call(|ticket| Input::Fund {
        ticket,
        funding: funding(3, vec![alice.public(0)]),
    });
    assert_eq!(
        reply,
        Reply::Refused(Refusal::FundingOwners {
            amount: 3,
            needed: 2,
            given: 1
        })
    );
    let reply = world.call(|ticket| Input::Fund {
        ticket,
        funding: funding(2, vec![[5; 32]]),
    });
    assert_eq!(reply, Reply::Refused(Refusal::UncertifiedOwner { index: 0 }));
    let tokens = world.fund(4, 2, &alice);
    assert_eq!(tokens.len(), 1);
    let again = world.call(|ticket| Input::Fund {
        ticket,
        funding: funding(2, vec![alice.public(0)]),
    });
    assert_eq!(
        again,
        Reply::Funded {
            issuances: vec![tokens[0].issuance]
        },
        "a funding is credited once"
    );
    let reply = world.call(|ticket| Input::Fund {
        ticket,
        funding: funding(2, vec![alice.public(1)]),
    });
    assert!(
        matches!(reply, Reply::Refused(Refusal::FundingMismatch { .. })),
        "{reply:?}"
    );
    world.crash_and_restart();
}

/// Deposits taken in one turn are checked together (one batch equation); a forged signature in
/// the batch refuses its own deposit and no other.
#[test]
fn a_batch_with_one_forged_signature_refuses_only_that_deposit() {
    let mut world = World::new();
    let (alice, bob) = (world.device(1, 4), world.device(2, 8));
    let tokens = world.fund(1, 80, &alice);
    assert_eq!(tokens.len(), 3, "50 + 20 + 10");
    // Tickets of this turn's own, apart from those the world's calls use.
    const TICKET: u64 = 1_000;
    let mut inputs = Vec::new();
    for (n, token) in tokens.iter().enumerate() {
        let paid = pay(&world, token, &alice.keys[n], &bob, n, n as u8);
        let value = paid.verify(&world.ring).unwrap().denomination;
        let instruction = Instruction::Reissue {
            outputs: vec![(value, bob.public(4 + n))],
        };
        // The second deposit is signed by Alice's key, not by Bob's, who owns the token now.
        let signer = if n == 1 { &alice.keys[3] } else { &bob.keys[n] };
        let statement = Move::Deposit {
            instruction: instruction.hash(),
            nonce: [0; 16],
        }
        .sign(&paid, signer);
        let deposit = |ticket: u64| Input::Deposit {
            ticket,
            token: Box::new(paid.clone()),
            statement,
            instruction: instruction.clone(),
        };
        inputs.push(deposit(TICKET + n as u64));
        if n == 0 {
            // The same deposit again in the same turn: joined to the first, paid once.
            inputs.push(deposit(TICKET + 10));
        }
    }
    let replies: std::collections::BTreeMap<u64, Reply> = world
        .host
        .handle_all(0, inputs)
        .into_iter()
        .filter_map(|event| match event {
            specie_host::SimEvent::Reply { ticket, reply } => Some((ticket - TICKET, reply)),
            _ => None,
        })
        .collect();
    assert!(
        matches!(replies[&0], Reply::Deposited(DepositOutcome::Reissued { .. })),
        "{replies:?}"
    );
    assert_eq!(replies[&1], Reply::Refused(Refusal::BadSignature { statement: 2 }));
    assert!(
        matches!(replies[&2], Reply::Deposited(DepositOutcome::Reissued { .. })),
        "{replies:?}"
    );
    assert_eq!(
        replies[&10], replies[&0],
        "a deposit sent twice in one turn is answered alike"
    );
    let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
        panic!("books");
    };
    let paid: u128 = books.by_key.iter().map(|key| key.paid).sum();
    assert_eq!(paid, 60, "50 + 10 paid, once each");
    world.crash_and_restart();
}

/// One registered device cannot grow the key table without bound: past KEYS_PER_IDENTITY_MAX
/// certified keys, its certifications are refused (keys it holds already are answered again).
#[test]
fn an_identity_holds_at_most_the_key_limit() {
    use specie_offline_authority::{BINDINGS_PER_CALL_MAX, KEYS_PER_IDENTITY_MAX};
    let mut world = World::new();
    let identity = specie_offline::deterministic_key("identity", 42);
    let public = identity.verifying_key().to_bytes();
    assert_eq!(
        world.call(|ticket| Input::Register {
            ticket,
            identity: public
        }),
        Reply::Registered
    );
    let binding = |n: u64| {
        let key = specie_offline::deterministic_key("limit-one-time", n)
            .verifying_key()
            .to_bytes();
        specie_offline::KeyBinding::sign(&identity, key)
    };
    let limit = KEYS_PER_IDENTITY_MAX as u64;
    for start in (0..limit).step_by(BINDINGS_PER_CALL_MAX) {
        let bindings: Vec<_> = (start..(start + BINDINGS_PER_CALL_MAX as u64).min(limit))
            .map(binding)
            .collect();
        let reply = world.call(|ticket| Input::Certify { ticket, bindings });
        assert!(matches!(reply, Reply::Certified { .. }), "{reply:?}");
    }
    let reply = world.call(|ticket| Input::Certify {
        ticket,
        bindings: vec![binding(limit)],
    });
    assert_eq!(
        reply,
        Reply::Refused(Refusal::TooManyKeys {
            held: KEYS_PER_IDENTITY_MAX,
            asked: 1,
            limit: KEYS_PER_IDENTITY_MAX
        })
    );
    let again = world.call(|ticket| Input::Certify {
        ticket,
        bindings: vec![binding(0)],
    });
    assert!(
        matches!(again, Reply::Certified { .. }),
        "a key held already: {again:?}"
    );
    world.crash_and_restart();
}

/// A core funding entitles exactly the owners it names, at this authority only, under its marker.
#[test]
fn a_core_funding_credits_only_the_owners_it_names_and_only_here() {
    use specie_offline_authority::Funding;
    let bridge = authority_keys().bridge.verifying_key().to_bytes();
    let owners = vec![[1; 32], [2; 32]];
    let digest = specie_offline::funding_owners_digest(&owners);
    let marker = [4; 32];
    let funding = Funding::from_core(&bridge, &digest, 70, marker, &bridge, owners.clone()).unwrap();
    assert_eq!((funding.id, funding.amount, &funding.owners), (marker, 70, &owners));
    let swapped = vec![owners[1], owners[0]];
    assert_eq!(
        Funding::from_core(&bridge, &digest, 70, marker, &bridge, swapped),
        Err(Refusal::FundingOwnersDigest)
    );
    assert_eq!(
        Funding::from_core(&bridge, &digest, 70, marker, &[9; 32], owners),
        Err(Refusal::FundingOtherAuthority)
    );
}

/// A core funding the authority could never issue (its owners are not keys it certified, or
/// not one per token) is refunded, once, to the address it names: the payout's terms (the
/// funding's refund serial, the address, the amount), which the authority's service signs with
/// the bridge key, are the same each time they are asked for, the books
/// count it in and out, and the refund survives a crash. Without a refund address (the
/// operator's funding) such a funding is refused as before.
#[test]
fn a_core_funding_that_can_never_be_issued_is_refunded_once() {
    let mut world = World::new();
    let alice = world.device(1, 2);
    let uncertified = specie_offline_authority::Funding {
        id: [6; 32],
        amount: 2,
        owners: vec![[5; 32]],
    };
    let refund = |ticket, funding: &specie_offline_authority::Funding| Input::FundOrRefund {
        ticket,
        funding: funding.clone(),
        refund_to: [7; 32],
    };
    let serial = specie_offline_authority::refund_serial(&[6; 32]);
    assert_eq!(
        world.call(|ticket| refund(ticket, &uncertified)),
        Reply::Refunded {
            reason: Some(Refusal::UncertifiedOwner { index: 0 }),
            serial,
            to: [7; 32],
            amount: 2
        },
        "refunded"
    );
    let refunded_earlier = Reply::Refunded {
        reason: None,
        serial,
        to: [7; 32],
        amount: 2,
    };
    // Once: asked again (even as a plain funding, or with other owners), the same payout.
    let again = world.call(|ticket| Input::Fund {
        ticket,
        funding: uncertified.clone(),
    });
    assert_eq!(again, refunded_earlier);
    // Owners that are certified keys but not one per token: refunded too.
    let miscounted = specie_offline_authority::Funding {
        id: [8; 32],
        amount: 3,
        owners: vec![alice.public(0)],
    };
    let reply = world.call(|ticket| refund(ticket, &miscounted));
    assert!(
        matches!(
            reply,
            Reply::Refunded {
                reason: Some(Refusal::FundingOwners { .. }),
                ..
            }
        ),
        "{reply:?}"
    );
    // The operator's funding (no refund address) is refused as before.
    let operator = specie_offline_authority::Funding {
        id: [9; 32],
        ..uncertified.clone()
    };
    let refused = world.call(|ticket| Input::Fund {
        ticket,
        funding: operator,
    });
    assert_eq!(refused, Reply::Refused(Refusal::UncertifiedOwner { index: 0 }));
    let Reply::Books(books) = world.call(|ticket| Input::Books { ticket }) else {
        panic!("books");
    };
    assert_eq!(
        (books.funded, books.defunded, books.outstanding),
        (5, 5, 0),
        "in and out"
    );
    world.crash_and_restart();
    let after = world.call(|ticket| refund(ticket, &uncertified));
    assert_eq!(after, refunded_earlier);
    // A snapshot keeps the refunds (restored by replaying them, re-encoded byte for byte).
    use specie_role::Durable;
    let snapshot = world.host.role().unwrap().snapshot();
    let mut restored = specie_offline_authority::OfflineAuthority::new(authority_keys());
    restored.restore(&snapshot).unwrap();
    assert_eq!(restored.snapshot(), snapshot);
}
