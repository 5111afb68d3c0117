//! The atomizer replicated by Raft (three replicas on the shared replicated host, over the
//! in-process network), with two UHS shards: payments are ordered into blocks, a double spend is
//! refused, and after the leader crashes the new leader brings the shards to its last block and
//! goes on from there; every replica holds the same blocks, and the shards the expected UHS.

use std::sync::Arc;

use parking_lot::Mutex;
use specie_atomizer::{
    Atomizer, AtomizerConfig, AtomizerInput, AtomizerReport, ShardMessage, UhsShard, UhsShardInput, UhsShardReply,
};
use specie_coordinator::{TxOutcome, TxResult};
use specie_faultnet::RoleGroup;
use specie_host::{Slot, Wiring};
use specie_role::{Role, Round, Ticket};
use specie_shard::{ShardRange, Vote};
use specie_transaction::{CompactTransaction, Txid, UhsId};
use tokio::sync::{mpsc, RwLock};

/// The atomizer's sends go to the test's shards; its replies to the callers' slots.
struct ToShards(mpsc::UnboundedSender<(usize, ShardMessage)>);

impl Wiring<Atomizer> for ToShards {
    type Call = CompactTransaction;
    type ReplyTo = Slot<TxOutcome>;
    fn input(tx: CompactTransaction, ticket: Ticket) -> AtomizerInput {
        AtomizerInput::Submit { ticket, tx }
    }
    fn send(&mut self, shard: usize, message: ShardMessage) {
        let _ = self.0.send((shard, message));
    }
    fn reply(&mut self, slot: Slot<TxOutcome>, outcome: TxOutcome) {
        slot.fill(outcome);
    }
    fn report(&mut self, report: AtomizerReport) {
        // A new leader reports the blocks it applied from its predecessor as settled; every
        // leader, its rounds' and blocks' times.
        assert!(
            matches!(
                report,
                AtomizerReport::Settled(_) | AtomizerReport::Attested { .. } | AtomizerReport::Finished { .. }
            ),
            "{report:?}"
        );
    }
}

fn id(first: u8, n: u8) -> UhsId {
    let mut bytes = [n; 32];
    bytes[0] = first;
    UhsId(bytes)
}

fn pay(n: u8, spent: UhsId, created: UhsId) -> CompactTransaction {
    CompactTransaction {
        txid: Txid([n; 32]),
        spent: vec![spent],
        created: vec![created],
        attestations: Default::default(),
    }
}

/// Hands `message` to `shard`, makes its proposals durable and applied; its answers.
fn deliver(shard: &mut UhsShard, message: ShardMessage) -> Vec<specie_atomizer::ShardAnswer> {
    shard.handle(0, UhsShardInput::Atomizer { ticket: 0, message });
    let mut answers = vec![];
    loop {
        let round = Round::take(shard);
        answers.extend(round.replies.into_iter().filter_map(|(_, reply)| match reply {
            UhsShardReply::Answer(answer) => Some(answer),
            UhsShardReply::Read(_) => None,
        }));
        if round.proposals.is_empty() {
            return answers;
        }
        round.proposals.iter().for_each(|block| shard.apply(0, block));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replicated_atomizer_orders_payments_and_its_new_leader_goes_on_after_a_crash() {
    let ranges = ShardRange::partition(2).unwrap();
    // Genesis: coins a and b on shard 0 (first byte below 0x80), c on shard 1.
    let (a, b, c) = (id(0x10, 1), id(0x20, 2), id(0x90, 3));
    let shards = Arc::new(Mutex::new(vec![
        UhsShard::with_unspent(ranges[0], [a, b]),
        UhsShard::with_unspent(ranges[1], [c]),
    ]));
    let (to_shards, mut shard_inbox) = mpsc::unbounded_channel();
    let config = AtomizerConfig::with_shards(ranges.clone());
    let group = RoleGroup::start(
        "atomizer",
        3,
        || Atomizer::new(config.clone()),
        || ToShards(to_shards.clone()),
    )
    .await;
    let group = Arc::new(RwLock::new(group));

    // The shards, as their own hosts would run them: answers go back to whoever leads.
    let (pump_group, pump_shards) = (group.clone(), shards.clone());
    tokio::spawn(async move {
        while let Some((to, message)) = shard_inbox.recv().await {
            let answers = deliver(&mut pump_shards.lock()[to], message);
            let inputs = answers
                .into_iter()
                .map(|answer| AtomizerInput::ShardAnswer { shard: to, answer })
                .collect();
            pump_group.read().await.input(inputs).await;
        }
    });

    let call = |tx: CompactTransaction| {
        let group = group.clone();
        async move { group.read().await.call(|| tx.clone()).await.result }
    };
    let (d, e, f, g) = (id(0x91, 4), id(0x30, 5), id(0x92, 6), id(0x40, 7));
    assert_eq!(call(pay(1, a, d)).await, TxResult::Confirmed);
    assert_eq!(call(pay(2, b, e)).await, TxResult::Confirmed);
    assert_eq!(
        call(pay(3, b, f)).await,
        TxResult::Rejected(Vote::InputMissing),
        "b is spent"
    );

    let old = group.read().await.leader().await;
    group.write().await.crash(old).await;
    let new = group.read().await.leader().await;
    assert_ne!(new, old);
    // d was created by a block of the old leader: the new one goes on from its last block.
    assert_eq!(call(pay(4, d, g)).await, TxResult::Confirmed);
    assert_eq!(
        call(pay(5, a, f)).await,
        TxResult::Rejected(Vote::InputMissing),
        "a is spent"
    );

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let heights = group.read().await.read_roles(Atomizer::height);
        if heights.iter().all(|h| *h == heights[0]) && heights[0] >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the replicas never agreed: {heights:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let held: Vec<Vec<UhsId>> = shards.lock().iter().map(UhsShard::sorted_ids).collect();
    assert_eq!(held, vec![vec![e, g], vec![c]]);
}
