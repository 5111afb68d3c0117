//! Devices around a real authority (on the simulator's host): enrolled, funded, paying each other
//! offline with exact change, refusing replays and everything past a limit with a message that
//! names it, depositing and getting their value back re-issued.

use specie_host::{SimEvent, SimHost};
use specie_offline::{Denominations, KeyRing};
use specie_offline_authority::{AuthorityKeys, DepositOutcome, Funding, Input, OfflineAuthority, Reply};
use specie_offline_device::{
    one_time_key, Device, DeviceError, DeviceLimits, HandOverError, HandOverMessage, HandOverSide, HandedOver,
    PayeeHandOver, PayerHandOver, Step,
};

const HOUR_MS: u64 = 3_600_000;

fn keys() -> AuthorityKeys {
    AuthorityKeys::deterministic("device-tests", Denominations::default(), 1)
}

struct World {
    host: SimHost<OfflineAuthority>,
    ring: KeyRing,
    next: u64,
}

impl World {
    fn new() -> World {
        World {
            host: SimHost::start("offline-authority", || OfflineAuthority::new(keys())),
            ring: keys().ring(),
            next: 0,
        }
    }

    fn call(&mut self, input: impl FnOnce(u64) -> Input) -> Reply {
        self.next += 1;
        let ticket = self.next;
        let events = self.host.handle(0, input(ticket));
        events
            .into_iter()
            .find_map(|event| match event {
                SimEvent::Reply { ticket: t, reply } if t == ticket => Some(reply),
                _ => None,
            })
            .expect("an answer")
    }

    /// A registered device with `keys` certified one-time keys, funded with `amount`.
    fn device(&mut self, n: u8, limits: DeviceLimits, keys: usize, amount: u64) -> Device {
        let mut device = Device::new([n; 32], limits, 0);
        let identity = device.identity();
        assert_eq!(
            self.call(|ticket| Input::Register { ticket, identity }),
            Reply::Registered
        );
        let bindings = device.bindings(keys);
        let Reply::Certified { certificates } = self.call(|ticket| Input::Certify { ticket, bindings }) else {
            panic!("certification refused");
        };
        device.certified(&certificates);
        let owners = device
            .funding_owners(Denominations::default().split(amount).len())
            .unwrap();
        let funding = Funding {
            id: [n; 32],
            amount,
            owners,
        };
        let Reply::Funded { issuances } = self.call(|ticket| Input::Fund { ticket, funding }) else {
            panic!("funding refused");
        };
        assert_eq!(device.receive_issued(&issuances, &self.ring), Ok(amount));
        device
    }
}

#[test]
fn a_payment_moves_exact_change_and_a_replay_or_a_stale_request_is_refused() {
    let mut world = World::new();
    let limits = DeviceLimits::default();
    let mut alice = world.device(1, limits, 8, 17); // 10 + 5 + 2
    let mut bob = world.device(2, limits, 8, 0);
    let request = bob.request(7, [1; 16], 0).unwrap();
    let paid = alice.pay(&request, &world.ring, 0).unwrap();
    assert_eq!(paid.len(), 2, "5 + 2");
    assert_eq!(bob.receive(&[1; 16], &paid, &world.ring, 0), Ok(7));
    assert_eq!((alice.balance(), bob.balance()), (10, 7));
    assert_eq!(alice.signed().len(), 2, "one statement recorded per node signed");

    // The same tokens again, under a fresh request: not to this key or nonce.
    bob.request(7, [2; 16], 0).unwrap();
    assert_eq!(
        bob.receive(&[2; 16], &paid, &world.ring, 0),
        Err(DeviceError::NotForThisPayment { index: 0 })
    );
    // Under the old request: it is closed.
    assert_eq!(
        bob.receive(&[1; 16], &paid, &world.ring, 0),
        Err(DeviceError::UnknownRequest)
    );
    bob.cancel_request(&[2; 16]);

    // 3 cannot be made of a single 10.
    let request = bob.request(3, [3; 16], 0).unwrap();
    let refused = alice.pay(&request, &world.ring, 0).unwrap_err();
    assert_eq!(refused, DeviceError::NoExactChange { amount: 3 });
    assert!(
        refused.to_string().contains("exchange tokens for smaller ones"),
        "{refused}"
    );
}

#[test]
fn every_limit_is_enforced_with_a_message_that_names_it() {
    let mut world = World::new();
    let tight = DeviceLimits {
        holding_max: 100,
        payment_max: 50,
        hops_max: 1,
        sync_age_ms_max: 24 * HOUR_MS,
    };
    let mut alice = world.device(1, DeviceLimits::default(), 8, 190); // 100 + 50 + 20 + 20
    let mut bob = world.device(2, tight, 8, 0);
    let mut carol = world.device(3, DeviceLimits::default(), 8, 0);

    let refused = bob.request(120, [1; 16], 0).unwrap_err();
    assert_eq!(
        refused,
        DeviceError::HoldingLimit {
            amount: 120,
            total: 120,
            limit: 100
        }
    );
    assert!(refused.to_string().contains("holding limit of 100"), "{refused}");

    let request = bob.request(70, [2; 16], 0).unwrap();
    let paid = alice.pay(&request, &world.ring, 0).unwrap();
    bob.receive(&[2; 16], &paid, &world.ring, 0).unwrap();
    let request = carol.request(70, [3; 16], 0).unwrap();
    let refused = bob.pay(&request, &world.ring, 0).unwrap_err();
    assert_eq!(refused, DeviceError::PaymentLimit { amount: 70, limit: 50 });
    assert!(refused.to_string().contains("per-payment limit of 50"), "{refused}");
    carol.cancel_request(&[3; 16]);

    // Bob's tokens have passed one hand, his limit: he cannot pay them on.
    let request = carol.request(20, [4; 16], 0).unwrap();
    let refused = bob.pay(&request, &world.ring, 0).unwrap_err();
    assert_eq!(
        refused,
        DeviceError::NotEnough {
            amount: 20,
            spendable: 0,
            blocked: 70
        }
    );
    assert!(refused.to_string().contains("past the hop limit"), "{refused}");
    carol.cancel_request(&[4; 16]);

    // A payee whose hop limit a token exceeds refuses it.
    let request = carol.request(20, [5; 16], 0).unwrap();
    let to_carol = alice.pay(&request, &world.ring, 0).unwrap();
    carol.receive(&[5; 16], &to_carol, &world.ring, 0).unwrap();
    let request = bob.request(20, [6; 16], 0).unwrap();
    let two_hops = carol.pay(&request, &world.ring, 0).unwrap();
    let refused = bob.receive(&[6; 16], &two_hops, &world.ring, 0).unwrap_err();
    assert_eq!(
        refused,
        DeviceError::TooManyHops {
            index: 0,
            hops: 2,
            limit: 1
        }
    );

    // Past a day without a sync, Bob neither pays nor asks to be paid.
    let later = 25 * HOUR_MS;
    let refused = bob.request(1, [7; 16], later).unwrap_err();
    assert!(matches!(refused, DeviceError::SyncTooOld { .. }), "{refused}");
    assert!(refused.to_string().contains("25 hours ago"), "{refused}");
    bob.synced(&[], later);
    bob.request(1, [7; 16], later).unwrap();
}

#[test]
fn a_device_deposits_what_it_holds_and_holds_the_reissued_value() {
    let mut world = World::new();
    let mut alice = world.device(1, DeviceLimits::default(), 8, 0);
    let mut bob = world.device(2, DeviceLimits::default(), 8, 25); // 20 + 5
    let request = alice.request(25, [1; 16], 0).unwrap();
    let paid = bob.pay(&request, &world.ring, 0).unwrap();
    alice.receive(&[1; 16], &paid, &world.ring, 0).unwrap();
    let deposits = alice.deposit_all([9; 32], false);
    assert_eq!((deposits.len(), alice.balance(), alice.pending().len()), (2, 0, 2));
    let mut answers = Vec::new();
    for deposit in &deposits {
        let input = |ticket| Input::Deposit {
            ticket,
            token: Box::new(deposit.token.clone()),
            statement: deposit.statement,
            instruction: deposit.instruction.clone(),
        };
        let Reply::Deposited(DepositOutcome::Reissued { issuances }) = world.call(input) else {
            panic!("deposit refused");
        };
        answers.push((deposit.link(), issuances));
    }
    // An answer that is not this deposit's (another deposit's tokens, or more) ends nothing.
    let (first, second) = (&answers[0], &answers[1]);
    let both: Vec<_> = first.1.iter().chain(&second.1).copied().collect();
    for wrong in [&second.1, &both] {
        let error = alice.deposited(&first.0, wrong, &world.ring).unwrap_err();
        assert!(matches!(error, DeviceError::NotTheReissueAsked { .. }), "{error}");
    }
    assert_eq!((alice.balance(), alice.pending().len()), (0, 2), "kept, nothing taken");
    for (link, issuances) in &answers {
        alice.deposited(link, issuances, &world.ring).unwrap();
    }
    assert_eq!((alice.balance(), alice.pending().len()), (25, 0));
    assert!(
        alice.held().iter().all(|held| held.token.hops.is_empty()),
        "fresh tokens"
    );
}

/// A defund stays pending until its payout is handed on: the device says what the payout must
/// pay (serial, address, value), and only `paid_out` ends it.
#[test]
fn a_defund_is_pending_until_its_payout_is_handed_on() {
    let mut world = World::new();
    let mut alice = world.device(1, DeviceLimits::default(), 8, 25);
    let deposits = alice.deposit_all([4; 32], true);
    let link = deposits[0].link();
    let owed = alice.owed_payout(&link).unwrap();
    assert_eq!(owed, (deposits[0].token.issuance.serial, [4; 32], deposits[0].value));
    // A re-issue answer to a defund is not its answer.
    let error = alice
        .deposited(&link, &[deposits[1].token.issuance], &world.ring)
        .unwrap_err();
    assert!(matches!(error, DeviceError::NotTheReissueAsked { .. }), "{error}");
    assert!(alice.paid_out(&link));
    assert!(!alice.paid_out(&link), "once");
    assert_eq!((alice.pending().len(), alice.owed_payout(&link)), (1, None));
}

/// A device after every kind of activity, written to its file and read back, is the same device;
/// single-byte changes of the file are refused or read into a device that re-encodes to them.
#[test]
fn a_device_file_round_trips_and_mutations_never_panic() {
    let mut world = World::new();
    let mut alice = world.device(1, DeviceLimits::default(), 8, 77);
    let mut bob = world.device(2, DeviceLimits::default(), 8, 0);
    let request = bob.request(70, [1; 16], 0).unwrap();
    let paid = alice.pay(&request, &world.ring, 0).unwrap();
    bob.receive(&[1; 16], &paid, &world.ring, 0).unwrap();
    bob.request(5, [2; 16], 0).unwrap(); // left open
    bob.synced(&[[3; 16]], 10);
    alice.deposit_all([4; 32], true); // pending
    for device in [&alice, &bob] {
        let bytes = device.encode();
        let read = Device::decode(&bytes).unwrap();
        assert_eq!(read.encode(), bytes);
        assert_eq!(
            (read.balance(), read.keys_left()),
            (device.balance(), device.keys_left())
        );
        assert_eq!(read.pending(), device.pending());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Device::decode(&longer).is_err(), "trailing bytes are refused");
        for at in (0..bytes.len()).step_by(7) {
            let mut mutated = bytes.clone();
            mutated[at] ^= 0x5a;
            if let Ok(device) = Device::decode(&mutated) {
                assert_eq!(device.encode(), mutated);
            }
        }
    }
    // The read device carries on: Bob's open request is still open.
    let mut bob = Device::decode(&bob.encode()).unwrap();
    let request_again = bob.request(1, [9; 16], 20);
    assert!(request_again.is_ok());
}

/// Runs one hand-over in memory, the payee asking `amount` of a payer who agrees to pay at most
/// `max`: each side's result, as its driver would see it.
fn hand_over(
    ring: &KeyRing,
    payee: &mut Device,
    payer: &mut Device,
    amount: u64,
    max: u64,
) -> (Result<HandedOver, HandOverError>, Result<HandedOver, HandOverError>) {
    let mut nonces = (100u8..).map(|n| [n; 16]);
    let (mut payee_side, first) = match PayeeHandOver::start(payee, amount, nonces.next().unwrap(), 0) {
        Ok(started) => started,
        Err(error) => return (Err(error.clone()), Err(HandOverError::Refused(error.to_string()))),
    };
    let mut payer_side = PayerHandOver::new(max);
    let (mut payee_result, mut payer_result) = (None, None);
    let mut to_payer = Some(first);
    let mut to_payee = None;
    for _ in 0..8 {
        if let Some(message) = to_payer.take() {
            match payer_side.on_message(payer, message, ring, nonces.next().unwrap(), 0) {
                Ok(Step::Send(reply)) => to_payee = Some(reply),
                Ok(Step::Finish(last, done)) => {
                    to_payee = last;
                    payer_result = Some(Ok(done));
                }
                Err(error) => {
                    payer_side.abandon(payer);
                    // A refusal is the last word: it is not answered.
                    if !matches!(error, HandOverError::Refused(_)) {
                        to_payee = Some(HandOverMessage::Refused(error.to_string()));
                    }
                    payer_result = Some(Err(error));
                }
            }
        }
        if let Some(message) = to_payee.take() {
            match payee_side.on_message(payee, message, ring, nonces.next().unwrap(), 0) {
                Ok(Step::Send(reply)) => to_payer = Some(reply),
                Ok(Step::Finish(last, done)) => {
                    to_payer = last;
                    payee_result = Some(Ok(done));
                }
                Err(error) => {
                    payee_side.abandon(payee);
                    // A refusal is the last word: it is not answered.
                    if !matches!(error, HandOverError::Refused(_)) {
                        to_payer = Some(HandOverMessage::Refused(error.to_string()));
                    }
                    payee_result = Some(Err(error));
                }
            }
        }
        if to_payer.is_none() && to_payee.is_none() {
            break;
        }
    }
    (
        payee_result.expect("the payee ended"),
        payer_result.expect("the payer ended"),
    )
}

#[test]
fn a_payer_without_exact_change_pays_more_and_gets_the_change_in_the_same_hand_over() {
    let mut world = World::new();
    let limits = DeviceLimits::default();
    let ring = world.ring.clone();
    let mut payer = world.device(1, limits, 8, 10); // one 10
    let mut payee = world.device(2, limits, 8, 7); // 5 + 2
    let (payee_end, payer_end) = hand_over(&ring, &mut payee, &mut payer, 3, 3);
    assert_eq!(payee_end, Ok(HandedOver { received: 10, paid: 7 }));
    assert_eq!(payer_end, Ok(HandedOver { received: 7, paid: 10 }));
    assert_eq!((payer.balance(), payee.balance()), (7, 10), "3 moved");

    // Exact: no change.
    let (payee_end, payer_end) = hand_over(&ring, &mut payee, &mut payer, 5, 5);
    assert_eq!(
        (payee_end, payer_end),
        (
            Ok(HandedOver { received: 5, paid: 0 }),
            Ok(HandedOver { received: 0, paid: 5 })
        )
    );
    assert_eq!((payer.balance(), payee.balance()), (2, 15));
}

#[test]
fn a_hand_over_stops_cleanly_without_change_over_the_payers_maximum_or_out_of_turn() {
    let mut world = World::new();
    let limits = DeviceLimits::default();
    let ring = world.ring.clone();
    let mut payer = world.device(1, limits, 8, 10);
    let mut payee = world.device(2, limits, 8, 0);
    let keys = payee.keys_left();
    // The payee cannot give 7 back: it says so before it takes anything.
    let (payee_end, payer_end) = hand_over(&ring, &mut payee, &mut payer, 3, 3);
    assert_eq!(payee_end, Err(HandOverError::NoChange { change: 7 }));
    assert!(matches!(payer_end, Err(HandOverError::Refused(why)) if why.contains("cannot pay 7 back")));
    assert_eq!((payer.balance(), payee.balance()), (10, 0), "nothing moved");
    assert_eq!(payee.keys_left(), keys, "the withdrawn request's key is kept");

    // More than the payer agreed to pay.
    let (payee_end, payer_end) = hand_over(&ring, &mut payee, &mut payer, 10, 9);
    assert_eq!(payer_end, Err(HandOverError::OverMax { asked: 10, max: 9 }));
    assert!(matches!(payee_end, Err(HandOverError::Refused(_))));
    assert_eq!((payer.balance(), payee.balance()), (10, 0));

    // A payee that gets "done" before anything was paid.
    let (mut side, _) = PayeeHandOver::start(&mut payee, 4, [9; 16], 0).unwrap();
    assert_eq!(
        side.on_message(&mut payee, HandOverMessage::Done, &ring, [8; 16], 0),
        Err(HandOverError::OutOfTurn("done"))
    );
    side.abandon(&mut payee);
    assert_eq!(payee.keys_left(), keys);
}

#[test]
fn a_payee_refuses_a_change_request_it_could_not_pay_before_it_takes_the_larger_payment() {
    let mut world = World::new();
    let limits = DeviceLimits::default();
    let ring = world.ring.clone();
    let mut payer = world.device(1, limits, 8, 10); // one 10
    let mut payee = world.device(2, limits, 8, 7); // 5 + 2
    let keys = payee.keys_left();
    let (mut side, _) = PayeeHandOver::start(&mut payee, 3, [100; 16], 0).unwrap();
    // The payer offers 10 and asks 7 back, to a key whose certificate does not check: were the
    // payee to take the 10 first, it could not pay the change, and would keep all 10.
    let mut change = payer.request(7, [101; 16], 0).unwrap();
    change.certificate.signature[0] ^= 1;
    let offer = HandOverMessage::Change { offer: 10, change };
    let refused = side.on_message(&mut payee, offer, &ring, [102; 16], 0);
    assert!(
        matches!(refused, Err(HandOverError::Device(DeviceError::BadRequest(_)))),
        "{refused:?}"
    );
    side.abandon(&mut payee);
    assert_eq!(
        (payee.balance(), payee.keys_left()),
        (7, keys),
        "nothing taken, nothing left open"
    );
}

#[test]
fn tokens_of_a_revoked_or_spend_expired_key_are_neither_paid_nor_taken_offline() {
    let mut world = World::new();
    let limits = DeviceLimits::default();
    let mut alice = world.device(1, limits, 8, 10);
    let mut bob = world.device(2, limits, 8, 0);
    let key = alice.held()[0].token.issuance.issuing_key;
    let Reply::Keys(revoked) = world.call(|ticket| Input::RevokeKey { ticket, key }) else {
        panic!("revocation refused");
    };
    let revoked = revoked.ring;
    let request = bob.request(10, [1; 16], 0).unwrap();
    assert_eq!(
        alice.pay(&request, &revoked, 0),
        Err(DeviceError::NotEnough {
            amount: 10,
            spendable: 0,
            blocked: 10
        }),
        "a device that synced does not offer them"
    );
    // A device that did not sync pays them; a payee that did refuses them, saying what to do.
    let paid = alice.pay(&request, &world.ring, 0).unwrap();
    let refused = bob.receive(&[1; 16], &paid, &revoked, 0).unwrap_err();
    assert_eq!(refused, DeviceError::KeyRevoked { index: 0 });
    assert!(refused.to_string().contains("must deposit it"), "{refused}");

    // Spend window: a period's keys' tokens pass hand to hand through spend_periods more.
    let mut carol = world.device(3, limits, 8, 5);
    let spend_periods = keys().lifecycle.spend_periods;
    let mut ring = revoked;
    for _ in 0..=spend_periods {
        let Reply::Keys(next) = world.call(|ticket| Input::Rotate { ticket }) else {
            panic!("rotation refused");
        };
        ring = next.ring;
    }
    world.ring = ring.clone();
    let mut dave = world.device(4, limits, 8, 0);
    let request = dave.request(5, [2; 16], 0).unwrap();
    assert!(
        matches!(
            carol.pay(&request, &ring, 0),
            Err(DeviceError::NotEnough { blocked: 5, .. })
        ),
        "a device that synced does not offer a token past its spend window"
    );
    // Signed over all the same (a device that ignores the ring), the payee refuses it.
    let held = &carol.held()[0];
    let paid = held
        .token
        .transfer(&one_time_key(&[3; 32], held.key), request.certificate, [2; 16])
        .unwrap();
    let refused = dave.receive(&[2; 16], &[paid], &ring, 0).unwrap_err();
    let through = ring.lifecycle().current_period - 1;
    assert_eq!(
        refused,
        DeviceError::Expired {
            index: 0,
            spendable_through: through
        }
    );
    assert!(refused.to_string().contains("must deposit it"), "{refused}");
}
