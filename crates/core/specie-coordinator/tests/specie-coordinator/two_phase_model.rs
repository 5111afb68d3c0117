//! Random workloads through one coordinator and several shards, against a simple model.
//!
//! Messages between coordinator and shards are delivered in a random order (and the coordinator
//! is sometimes crashed and resumed from its durable state), with double spends, conflicting
//! concurrent spends and replayed mints mixed in. Whatever the interleaving:
//! - a missing or already spent id is never spent (each id leaves the UHS at most once),
//! - value is conserved (the values of the final UHS equal what was minted),
//! - the final UHS is exactly the model's: initial - spent(confirmed) + created(confirmed),
//! - every submitted transaction gets exactly one outcome, and every dtxn finishes.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_coordinator::{
    Coordinator, CoordinatorCommand, CoordinatorConfig, CoordinatorOutput, CoordinatorState, TxResult,
};
use specie_shard::{ShardRange, ShardRequest, ShardResponse, ShardState, Vote};
use specie_transaction::{CompactTransaction, Txid, UhsId};

/// Steps per round during which the coordinator may crash; after them it runs undisturbed.
const CRASHING_STEPS_MAX: u64 = 5_000;

struct World {
    rng: StdRng,
    coordinator: Coordinator,
    config: CoordinatorConfig,
    shards: Vec<ShardState>,
    /// Durable coordinator log: replayed into a fresh state on a simulated crash.
    log: Vec<CoordinatorCommand>,
    to_shards: Vec<(usize, ShardRequest)>,
    to_coordinator: Vec<(usize, ShardResponse)>,
    outcomes: HashMap<u64, TxResult>,
    unreported: HashSet<Txid>,
    now_ms: u64,
}

impl World {
    fn new(seed: u64, shard_count: usize, batch_max: usize) -> Self {
        let ranges = ShardRange::partition(shard_count).unwrap();
        let mut config = CoordinatorConfig::with_shards(ranges.clone());
        config.batch_transactions_max = batch_max;
        config.queue_transactions_max = 10_000;
        config.dtxns_in_flight_max = 3;
        config.retry_timeout_ms = 50;
        let mut coordinator = Coordinator::new(config.clone(), CoordinatorState::default());
        coordinator.become_leader(0);
        World {
            rng: StdRng::seed_from_u64(seed),
            coordinator,
            config,
            shards: ranges.into_iter().map(ShardState::new).collect(),
            log: vec![],
            to_shards: vec![],
            to_coordinator: vec![],
            outcomes: HashMap::new(),
            unreported: HashSet::new(),
            now_ms: 0,
        }
    }

    fn drain_outputs(&mut self) {
        while let Some(output) = self.coordinator.poll() {
            match output {
                CoordinatorOutput::Propose(command) => {
                    self.log.push(command.clone());
                    self.coordinator.apply(&command, self.now_ms);
                }
                CoordinatorOutput::Send { shard, request } => self.to_shards.push((shard, request)),
                CoordinatorOutput::Outcome { tag, txid, result } => {
                    if let Some(tag) = tag {
                        assert!(
                            self.outcomes.insert(tag, result).is_none(),
                            "one outcome per submission"
                        );
                    } else {
                        self.unreported.insert(txid);
                    }
                }
                CoordinatorOutput::ShardRefused { shard, response } => {
                    panic!("shard {shard} refused: {response:?}")
                }
                CoordinatorOutput::Finished(times) => assert!(times.transactions > 0, "{times:?}"),
            }
        }
    }

    /// Delivers one random in-flight message; sometimes duplicates it.
    fn step(&mut self) -> bool {
        self.drain_outputs();
        let total = self.to_shards.len() + self.to_coordinator.len();
        if total == 0 {
            return false;
        }
        let pick = self.rng.gen_range(0..total);
        if pick < self.to_shards.len() {
            let (shard, request) = self.to_shards.swap_remove(pick);
            if self.rng.gen_bool(0.05) {
                self.to_shards.push((shard, request.clone()));
            }
            let response = self.shards[shard].apply(0, &request);
            self.shards[shard].check_invariants().unwrap();
            if !matches!(response, ShardResponse::Discarded { .. }) {
                self.to_coordinator.push((shard, response));
            }
        } else {
            let (shard, response) = self.to_coordinator.swap_remove(pick - self.to_shards.len());
            self.coordinator.on_shard_response(shard, response, self.now_ms);
        }
        self.now_ms += 1;
        self.coordinator.tick(self.now_ms);
        true
    }

    /// A crash loses the leader's memory; the log survives, and messages already on the wire are
    /// still delivered (late) to shards and to the next leader.
    fn crash_coordinator(&mut self) {
        let mut state = CoordinatorState::default();
        for command in &self.log {
            state.apply(command);
        }
        assert_eq!(&state, self.coordinator.state(), "replaying the log rebuilds the state");
        // Outputs the dead leader had not yet handed over (proposals not durable, outcomes not
        // reported) die with it.
        self.coordinator = Coordinator::new(self.config.clone(), state);
        self.coordinator.become_leader(self.now_ms);
    }
}

fn id(rng: &mut StdRng) -> UhsId {
    UhsId(rng.gen())
}

#[derive(Debug, Clone)]
struct Case {
    seed: u64,
    shards: usize,
    batch_max: usize,
    rounds: usize,
    crash_every: Option<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        1usize..5,
        1usize..12,
        1usize..6,
        prop::option::of(5usize..40),
    )
        .prop_map(|(seed, shards, batch_max, rounds, crash_every)| Case {
            seed,
            shards,
            batch_max,
            rounds,
            crash_every,
        })
}

fn run(case: Case) {
    let mut world = World::new(case.seed, case.shards, case.batch_max);
    // Model: id -> value for every id the model believes unspent.
    let mut model: BTreeMap<UhsId, u64> = BTreeMap::new();
    let mut minted: u64 = 0;
    let mut spent_ever: HashSet<UhsId> = HashSet::new();
    let mut submitted: HashMap<u64, (CompactTransaction, Vec<u64>)> = HashMap::new();
    let mut values: HashMap<UhsId, u64> = HashMap::new();
    let mut next_tag = 0u64;
    let mut mints: Vec<CompactTransaction> = vec![];
    let mut markers: HashSet<UhsId> = HashSet::new();
    let mut steps = 0usize;

    for _round in 0..case.rounds {
        // Mints (sometimes a replay of an earlier one), then transfers from current model ids,
        // some spending ids already spent, some conflicting with each other.
        let mut batch: Vec<(CompactTransaction, Vec<u64>)> = vec![];
        for _ in 0..world.rng.gen_range(1..4) {
            if !mints.is_empty() && world.rng.gen_bool(0.2) {
                let replay = mints[world.rng.gen_range(0..mints.len())].clone();
                let vals = replay.created.iter().map(|i| values[i]).collect();
                batch.push((replay, vals));
                continue;
            }
            // Like a real mint: outputs plus a replay marker that no transaction can spend.
            let mut created: Vec<UhsId> = (0..world.rng.gen_range(1..4)).map(|_| id(&mut world.rng)).collect();
            let mut vals: Vec<u64> = created.iter().map(|_| world.rng.gen_range(1..1000)).collect();
            let marker = id(&mut world.rng);
            markers.insert(marker);
            created.push(marker);
            vals.push(0);
            let tx = CompactTransaction {
                txid: Txid(world.rng.gen()),
                spent: vec![],
                created: created.clone(),
                ..Default::default()
            };
            for (i, v) in created.iter().zip(&vals) {
                values.insert(*i, *v);
            }
            mints.push(tx.clone());
            batch.push((tx, vals));
        }
        let unspent: Vec<UhsId> = model.keys().filter(|i| !markers.contains(i)).copied().collect();
        let spent_list: Vec<UhsId> = spent_ever.iter().copied().collect();
        for _ in 0..world.rng.gen_range(0..12) {
            if unspent.is_empty() {
                break;
            }
            let n_in = world.rng.gen_range(1..3).min(unspent.len());
            let mut inputs: Vec<UhsId> = (0..n_in)
                .map(|_| unspent[world.rng.gen_range(0..unspent.len())])
                .collect();
            if world.rng.gen_bool(0.1) && !spent_list.is_empty() {
                inputs[0] = spent_list[world.rng.gen_range(0..spent_list.len())];
                // double spend
            }
            if world.rng.gen_bool(0.05) {
                inputs.push(id(&mut world.rng)); // never existed
            }
            let total: u64 = inputs.iter().map(|i| values.get(i).copied().unwrap_or(1)).sum();
            let split = world.rng.gen_range(0..=total);
            let created = vec![id(&mut world.rng), id(&mut world.rng)];
            let vals = vec![split, total - split];
            let tx = CompactTransaction {
                txid: Txid(world.rng.gen()),
                spent: inputs,
                created,
                ..Default::default()
            };
            batch.push((tx, vals));
        }
        for (tx, vals) in batch {
            for (i, v) in tx.created.iter().zip(&vals) {
                values.entry(*i).or_insert(*v);
            }
            let tag = next_tag;
            next_tag += 1;
            world.coordinator.submit(tag, tx.clone(), world.now_ms).unwrap();
            submitted.insert(tag, (tx, vals));
        }
        // Run to quiescence, crashing the coordinator now and then. Crashes stop after a while:
        // a dtxn that needs more steps than the crash interval (many shards, small batches)
        // would otherwise be resumed and interrupted forever, and liveness is only promised
        // once faults stop.
        let mut round_steps = 0u64;
        while world.step() {
            steps += 1;
            round_steps += 1;
            if round_steps <= CRASHING_STEPS_MAX && case.crash_every.is_some_and(|every| steps.is_multiple_of(every)) {
                world.crash_coordinator();
            }
            if steps > 200_000 {
                panic!("no quiescence: a dtxn never finished");
            }
        }
        // Let a retry fire for anything a crash orphaned, then settle again.
        for _ in 0..3 {
            world.now_ms += 1000;
            world.coordinator.tick(world.now_ms);
            while world.step() {}
        }
        // Apply outcomes to the model, in tag order; conflicting txs never both confirm, so any
        // order of confirmed txs is consistent.
        let mut tags: Vec<u64> = world
            .outcomes
            .keys()
            .copied()
            .filter(|t| submitted.contains_key(t))
            .collect();
        tags.sort();
        for tag in tags {
            let (tx, vals) = submitted.remove(&tag).unwrap();
            let result = world.outcomes[&tag];
            apply_to_model(&mut model, &mut spent_ever, &mut minted, &tx, &vals, result);
        }
    }
    // Outcomes a crashed leader could not report are settled by looking at the shards.
    for (_, (tx, vals)) in submitted.drain() {
        let applied = tx.created.iter().all(|i| shard_of(&world, i).contains(i)) && !tx.created.is_empty();
        let result = if applied && !model.contains_key(&tx.created[0]) {
            TxResult::Confirmed
        } else {
            TxResult::Dropped
        };
        apply_to_model(&mut model, &mut spent_ever, &mut minted, &tx, &vals, result);
    }
    assert!(
        world.coordinator.state().active().is_empty(),
        "every dtxn finishes once faults stop"
    );
    let mut actual: BTreeMap<UhsId, u64> = BTreeMap::new();
    for shard in &world.shards {
        shard.check_invariants().unwrap();
        assert_eq!(shard.stats().locked_ids, 0, "no lock outlives its dtxn");
    }
    for id in model.keys() {
        assert!(
            shard_of(&world, id).contains(id),
            "confirmed output {id:?} missing from the UHS"
        );
    }
    let total_ids: u64 = world.shards.iter().map(|s| s.stats().uhs_ids).sum();
    assert_eq!(total_ids as usize, model.len(), "UHS holds exactly the model's ids");
    for (i, v) in &model {
        actual.insert(*i, *v);
    }
    assert_eq!(actual.values().sum::<u64>(), minted, "value is conserved");
}

fn shard_of<'a>(world: &'a World, id: &UhsId) -> &'a ShardState {
    let ranges: Vec<ShardRange> = world.shards.iter().map(|s| s.range()).collect();
    &world.shards[ShardRange::owner(&ranges, id)]
}

fn apply_to_model(
    model: &mut BTreeMap<UhsId, u64>,
    spent_ever: &mut HashSet<UhsId>,
    minted: &mut u64,
    tx: &CompactTransaction,
    vals: &[u64],
    result: TxResult,
) {
    let valid_now = tx.spent.iter().all(|i| model.contains_key(i))
        && tx
            .created
            .iter()
            .all(|i| !model.contains_key(i) && !spent_ever.contains(i))
        && tx.spent.iter().collect::<HashSet<_>>().len() == tx.spent.len();
    match result {
        TxResult::Confirmed => {
            assert!(valid_now, "confirmed a transaction the model says is invalid: {tx:?}");
            for i in &tx.spent {
                assert!(spent_ever.insert(*i), "id spent twice");
                model.remove(i);
            }
            for (i, v) in tx.created.iter().zip(vals) {
                model.insert(*i, *v);
            }
            if tx.spent.is_empty() {
                *minted += vals.iter().sum::<u64>();
            }
        }
        TxResult::Rejected(vote) => {
            assert_ne!(vote, Vote::Yes);
            // A valid transaction may still lose a conflict with a concurrent one; an invalid
            // one must never be confirmed, which the Confirmed arm checks.
        }
        TxResult::Refused(error) => panic!("the model never overfills the queue: {error}"),
        TxResult::Dropped => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]
    #[test]
    fn random_workloads_match_the_model(case in case()) {
        run(case);
    }
}

#[test]
fn conflicting_spends_in_one_batch_never_both_confirm() {
    let mut world = World::new(7, 2, 100);
    let a = UhsId([1; 32]);
    let mint = CompactTransaction {
        txid: Txid([9; 32]),
        created: vec![a],
        ..Default::default()
    };
    world.coordinator.submit(0, mint, 0).unwrap();
    while world.step() {}
    assert_eq!(world.outcomes[&0], TxResult::Confirmed);
    for tag in 1..=5u64 {
        let tx = CompactTransaction {
            txid: Txid([tag as u8; 32]),
            spent: vec![a],
            created: vec![UhsId([10 + tag as u8; 32])],
            ..Default::default()
        };
        world.coordinator.submit(tag, tx, 0).unwrap();
    }
    while world.step() {}
    let confirmed = (1..=5).filter(|t| world.outcomes[t] == TxResult::Confirmed).count();
    assert!(confirmed <= 1, "{confirmed} spends of one id confirmed");
    assert_eq!(confirmed, 1, "exactly one spend of a single-shard input wins");
    let lost = [
        TxResult::Rejected(Vote::InputLocked),
        TxResult::Rejected(Vote::InputMissing),
    ];
    assert!((1..=5u64).all(|t| world.outcomes[&t] == TxResult::Confirmed || lost.contains(&world.outcomes[&t])));
}

#[test]
fn replayed_mint_is_refused_even_after_its_outputs_are_spent() {
    let mut world = World::new(8, 3, 1);
    let out = UhsId([5; 32]);
    let marker = UhsId([6; 32]);
    let mint = CompactTransaction {
        txid: Txid([1; 32]),
        created: vec![out, marker],
        ..Default::default()
    };
    world.coordinator.submit(0, mint.clone(), 0).unwrap();
    while world.step() {}
    let spend = CompactTransaction {
        txid: Txid([2; 32]),
        spent: vec![out],
        created: vec![UhsId([7; 32])],
        ..Default::default()
    };
    world.coordinator.submit(1, spend, 0).unwrap();
    while world.step() {}
    world.coordinator.submit(2, mint, 0).unwrap();
    while world.step() {}
    assert_eq!(world.outcomes[&0], TxResult::Confirmed);
    assert_eq!(world.outcomes[&1], TxResult::Confirmed);
    assert_eq!(world.outcomes[&2], TxResult::Rejected(Vote::OutputExists));
}
