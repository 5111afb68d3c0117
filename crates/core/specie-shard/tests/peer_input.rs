//! Whatever a peer sends, a shard answers: arbitrary sequences of arbitrary requests of up to
//! three coordinators (from a small id and dtxn space, so that they collide with each other,
//! across coordinators, and with the shard's state) never
//! make `apply` panic, leave the state consistent after every step, and drive two replicas to
//! the same state and the same answers. Snapshots, even mutated ones, decode to a consistent
//! state or to an error.

use proptest::prelude::*;
use specie_shard::{CoordinatorIndex, ShardCommand, ShardRange, ShardRequest, ShardState, ShardTx, ShardWireLimits};
use specie_transaction::UhsId;

/// Ten ids: the first six inside the test shard's range, the last four outside it.
fn id(n: u8) -> UhsId {
    let mut bytes = [n; 32];
    bytes[0] = if n < 6 { 0x10 } else { 0xf0 };
    UhsId(bytes)
}

fn shard() -> ShardState {
    ShardState::with_unspent(ShardRange { first: 0, last: 0x7fff }, [id(0), id(1), id(2), id(3)])
}

fn ids() -> impl Strategy<Value = Vec<UhsId>> {
    // Mostly owned ids, so that most prepares are not refused outright as misrouted.
    let one = prop_oneof![8 => (0u8..6).prop_map(id), 1 => (6u8..10).prop_map(id)];
    prop::collection::vec(one, 0..3)
}

fn dtxn() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..8, 1 => any::<u64>(), 1 => Just(u64::MAX), 1 => Just(u64::MAX - 1)]
}

fn request() -> impl Strategy<Value = ShardRequest> {
    let tx = (prop_oneof![4 => 0u32..4, 1 => any::<u32>()], ids(), ids()).prop_map(|(index, spent, created)| ShardTx {
        index,
        spent,
        created,
    });
    // Ascending indexes most of the time, so prepares get through and lock things.
    let txs = prop::collection::vec(tx, 0..4).prop_map(|mut txs| {
        if txs.len() % 2 == 0 {
            for (i, tx) in txs.iter_mut().enumerate() {
                tx.index = i as u32;
            }
        }
        txs
    });
    prop_oneof![
        3 => (dtxn(), txs).prop_map(|(dtxn, txs)| ShardRequest::Prepare { dtxn, txs }),
        3 => (dtxn(), prop::collection::vec(any::<bool>(), 0..4))
            .prop_map(|(dtxn, complete)| ShardRequest::Commit { dtxn, complete }),
        1 => (dtxn(), prop_oneof![12 => 0u64..6, 1 => any::<u64>(), 1 => Just(u64::MAX)])
            .prop_map(|(dtxn, finished_below)| ShardRequest::Discard { dtxn, finished_below }),
    ]
}

/// A request, or a commit that follows the protocol a little: it names the most recent prepare
/// of the sequence and carries one flag per transaction of it, so that commits actually swap.
#[derive(Clone, Debug)]
enum Step {
    Request(CoordinatorIndex, ShardRequest),
    CommitLatestPrepare(Vec<bool>),
}

/// Mostly coordinators 0 to 2, whose dtxn numbers overlap; now and then a far one.
fn coordinator() -> impl Strategy<Value = CoordinatorIndex> {
    prop_oneof![8 => 0u16..3, 1 => any::<u16>()]
}

fn steps(len: std::ops::Range<usize>) -> impl Strategy<Value = Vec<ShardCommand>> {
    let step = prop_oneof![
        4 => (coordinator(), request()).prop_map(|(coordinator, request)| Step::Request(coordinator, request)),
        1 => prop::collection::vec(any::<bool>(), 4).prop_map(Step::CommitLatestPrepare),
    ];
    prop::collection::vec(step, len).prop_map(|steps| {
        let mut latest: Option<(CoordinatorIndex, u64, usize)> = None;
        steps
            .into_iter()
            .map(|step| match step {
                Step::Request(coordinator, request) => {
                    if let ShardRequest::Prepare { dtxn, txs } = &request {
                        latest = Some((coordinator, *dtxn, txs.len()));
                    }
                    ShardCommand { coordinator, request }
                }
                Step::CommitLatestPrepare(mut complete) => {
                    let (coordinator, dtxn, len) = latest.unwrap_or((0, 0, 0));
                    complete.resize(len, false);
                    ShardCommand {
                        coordinator,
                        request: ShardRequest::Commit { dtxn, complete },
                    }
                }
            })
            .collect()
    })
}

fn apply(shard: &mut ShardState, command: &ShardCommand) -> specie_shard::ShardResponse {
    shard.apply(command.coordinator, &command.request)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_requests_never_panic_and_replicas_agree(requests in steps(0..40)) {
        let mut replica = shard();
        let mut other = shard();
        for command in &requests {
            let response = apply(&mut replica, command);
            prop_assert_eq!(response.dtxn(), command.request.dtxn(), "an answer names its request's dtxn");
            if let Err(error) = replica.check_invariants() {
                return Err(TestCaseError::fail(format!("after {command:?}: {error}")));
            }
            prop_assert_eq!(apply(&mut other, command), response, "replicas answer alike");
        }
        let snapshot = replica.encode_snapshot();
        prop_assert_eq!(&other.encode_snapshot(), &snapshot, "replicas agree");
        let restored = ShardState::decode_snapshot(&snapshot).expect("a shard's own snapshot decodes");
        prop_assert_eq!(restored.encode_snapshot(), snapshot);
    }

    #[test]
    fn requests_survive_the_wire_and_still_apply(requests in steps(0..20)) {
        let mut replica = shard();
        let mut decoded_replica = shard();
        for command in &requests {
            let decoded = ShardCommand::decode(&command.encode(), &ShardWireLimits::default()).expect("round trip");
            prop_assert_eq!(&decoded, command);
            prop_assert_eq!(apply(&mut replica, command), apply(&mut decoded_replica, &decoded));
        }
        prop_assert_eq!(replica.encode_snapshot(), decoded_replica.encode_snapshot());
    }

    /// A snapshot arrives from a peer (Raft install-snapshot): flipped bytes, cuts and arbitrary
    /// bytes give an error or a consistent state that later requests cannot make panic.
    #[test]
    fn mutated_snapshots_decode_to_consistent_states_or_errors(
        history in steps(0..20),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
        later in steps(0..10),
        junk in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let _ = ShardState::decode_snapshot(&junk);
        let mut replica = shard();
        for command in &history {
            apply(&mut replica, command);
        }
        let mut bytes = replica.encode_snapshot();
        for (at, byte) in flips {
            let at = at.index(bytes.len());
            bytes[at] = byte;
        }
        for candidate in [&bytes[..], &bytes[..cut.index(bytes.len() + 1)]] {
            if let Ok(mut restored) = ShardState::decode_snapshot(candidate) {
                prop_assert!(restored.check_invariants().is_ok());
                for command in &later {
                    apply(&mut restored, command);
                    prop_assert!(restored.check_invariants().is_ok());
                }
            }
        }
    }
}
