use std::process::ExitCode;

use clap::{Args, ValueEnum};
use specie_sim::{
    run, run_atomizer, run_byzantine, run_cluster, run_exchange, run_offline, run_privacy, run_replication,
    AtomizerWorldOptions, ByzantineOptions, ClusterOptions, ClusterShape, ExchangeOptions, OfflineOptions,
    PrivacyOptions, ReplicationOptions, SimOptions, Violation, BYZANTINE_AUTHORITIES,
};

/// Deterministic simulation, nine worlds per seed: the 2PC protocol (shards and coordinator over
/// modelled replicated logs, thousands of steps), the replication layer (real Raft replicas of
/// one group, with snapshots, whole-group restarts, replicas added, removed and replaced, and
/// lost directories), the whole cluster (shard groups and a coordinator group of real Raft
/// replicas running the cluster's roles, their members changing; and the same in the
/// atomizer's shape, an atomizer group over UHS shard groups), and the Byzantine mode
/// (a FastPay committee of 4 sharded authorities, one of them Byzantine in most seeds, with
/// correct and Byzantine users), each under crashes, restarts, partitions and a network that
/// drops, duplicates, delays and reorders messages; and offline cash (devices paying each other
/// offline, cheaters spending copies, replays, late syncs, lost answers, authority crashes, and
/// direct hand-overs with change over a link that is cut, a side that vanishes, hostile messages);
/// and the exchange (blocks of offers cleared at one price per asset, replicas applying them
/// shuffled and on one thread, proposer crashes, replicas restored from snapshots, hostile
/// transactions, deposits handed in twice); and the atomizer (blocks ordered from shards'
/// attestations, stale attestations, double spends and replayed mints, atomizer and shard
/// crashes); and privacy (threshold endorsement with compromised endorsers over a lossy network,
/// forgeries refused; the endorsers' key generation with messages resent, duplicated and
/// reordered, an equivocator caught; the ledger of record reconciled by the UHS after crashes;
/// the replicated archiver with lost outcome reports and leader crashes). `--world` runs
/// one of them. Invariants are checked as the run goes and once it settles; a failing seed replays exactly
/// with `--seed N`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// Number of seeds to run (a soak), starting at --start.
    #[arg(long, default_value_t = 1000, conflicts_with = "seed")]
    pub seeds: u64,
    #[arg(long, default_value_t = 0)]
    pub start: u64,
    /// Run just this seed and print its report (to replay a failure).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print one line per seed.
    #[arg(long)]
    pub verbose: bool,
    /// Run only this world (all nine by default).
    #[arg(long, value_enum, default_value_t = World::All)]
    pub world: World,
}

/// The worlds `specie sim` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum World {
    All,
    #[value(name = "2pc")]
    TwoPc,
    Replication,
    Cluster,
    Byzantine,
    Offline,
    Exchange,
    Atomizer,
    /// The cluster world in the atomizer's shape.
    AtomizerCluster,
    Privacy,
}

/// Totals over the seeds run.
#[derive(Default)]
struct Totals {
    steps: u64,
    crashes: u64,
    elections: u64,
    confirmed: u64,
    acknowledged: u64,
    cluster_confirmed: u64,
    byzantine_payments: u64,
    offline_payments: u64,
    hand_overs: u64,
    hand_overs_completed: u64,
    hand_overs_with_change: u64,
    hand_overs_cut: u64,
    hand_overs_vanished: u64,
    hand_overs_refused: u64,
    exchange_blocks: u64,
    exchange_trades: u64,
    atomizer_blocks: u64,
    atomizer_confirmed: u64,
    endorsed: u64,
    forgeries_refused: u64,
    ledger_reconciled: u64,
}

pub fn run_sim(args: SimArgs) -> anyhow::Result<ExitCode> {
    let seeds: Vec<u64> = match args.seed {
        Some(seed) => vec![seed],
        None => (args.start..args.start.saturating_add(args.seeds)).collect(),
    };
    let verbose = args.verbose || args.seed.is_some();
    let started = std::time::Instant::now();
    let mut totals = Totals::default();
    for &seed in &seeds {
        if let Err(violation) = run_seed(seed, args.world, verbose, &mut totals) {
            eprintln!("FAILED {violation}");
            return Ok(ExitCode::FAILURE);
        }
    }
    let t = &totals;
    println!(
        "{} seeds passed in {:.1} s: {} steps, {} transactions confirmed (2PC), {} commands acknowledged (Raft), {} transactions confirmed (cluster), {} payments settled (Byzantine mode), {} offline payments, {} direct exchanges ({} completed, {} with change, {} cut, {} with a side vanished, {} refused), {} exchange blocks ({} offers traded), {} atomizer blocks ({} transactions confirmed), {} transactions endorsed and {} forgeries refused (threshold endorsement), {} written-ahead records reconciled (ledger of record), {} elections, {} crashes injected",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        t.steps,
        t.confirmed,
        t.acknowledged,
        t.cluster_confirmed,
        t.byzantine_payments,
        t.offline_payments,
        t.hand_overs,
        t.hand_overs_completed,
        t.hand_overs_with_change,
        t.hand_overs_cut,
        t.hand_overs_vanished,
        t.hand_overs_refused,
        t.exchange_blocks,
        t.exchange_trades,
        t.atomizer_blocks,
        t.atomizer_confirmed,
        t.endorsed,
        t.forgeries_refused,
        t.ledger_reconciled,
        t.elections,
        t.crashes
    );
    Ok(ExitCode::SUCCESS)
}

/// The worlds of one seed (all nine, or the one chosen), each printing its report line when
/// `verbose`.
fn run_seed(seed: u64, world: World, verbose: bool, totals: &mut Totals) -> Result<(), Violation> {
    type RunWorld = fn(u64, &mut Totals) -> Result<String, Violation>;
    let worlds: [(World, RunWorld); 9] = [
        (World::TwoPc, two_pc_world),
        (World::Replication, replication_world),
        (World::Cluster, cluster_world),
        (World::Byzantine, byzantine_world),
        (World::Offline, offline_world),
        (World::Exchange, exchange_world),
        (World::Atomizer, atomizer_world),
        (World::AtomizerCluster, atomizer_cluster_world),
        (World::Privacy, privacy_world),
    ];
    for (which, run_world) in worlds {
        if world == World::All || world == which {
            let line = run_world(seed, totals)?;
            if verbose {
                println!("seed {seed}: ok — {line}");
            }
        }
    }
    Ok(())
}

/// The 2PC world of one seed; returns its report line.
fn two_pc_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = SimOptions::from_seed(seed);
    let r = run(options.clone())?;
    totals.confirmed += r.confirmed;
    totals.crashes += r.crashes;
    totals.steps += r.steps;
    Ok(format!(
        "{} shards, {} steps, {} submitted, {} confirmed, {} rejected, {} crashes, {}",
        options.shards,
        r.steps,
        r.submitted,
        r.confirmed,
        r.rejected,
        r.crashes,
        network_and_trace(r.messages_dropped, r.messages_duplicated, &r.trace_digest)
    ))
}

/// The replication world of one seed; returns its report line.
fn replication_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = ReplicationOptions::from_seed(seed);
    let r = run_replication(options.clone())?;
    totals.acknowledged += r.acknowledged;
    totals.elections += r.term.saturating_sub(1);
    totals.crashes += r.crashes;
    totals.steps += r.steps;
    Ok(format!(
        "raft group of {}, {} steps ({} ms virtual), {} proposed, {} acknowledged, {} unknown, {} applied, term {}, {} crashes, {} whole-group restarts, {} partitions, {} replicas joined, {} left, {} wiped (each refused under its old id), {}",
        options.replicas,
        r.steps,
        r.virtual_ms,
        r.proposed,
        r.acknowledged,
        r.unknown,
        r.applied,
        r.term,
        r.crashes,
        r.full_restarts,
        r.partitions,
        r.joined,
        r.left,
        r.wiped,
        network_and_trace(r.messages_dropped, r.messages_duplicated, &r.trace_digest)
    ))
}

/// The cluster world of one seed, in 2PC's shape; returns its report line.
fn cluster_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    shaped_cluster_world(seed, ClusterOptions::from_seed(seed), totals)
}

/// The cluster world of one seed, in the atomizer's shape; returns its report line.
fn atomizer_cluster_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    shaped_cluster_world(seed, ClusterOptions::atomizer_from_seed(seed), totals)
}

/// Odd seeds run the ordering replicas behind the ledger of record's gate.
fn shaped_cluster_world(seed: u64, options: ClusterOptions, totals: &mut Totals) -> Result<String, Violation> {
    let options = ClusterOptions {
        ledger_of_record: seed % 2 == 1,
        ..options
    };
    let r = run_cluster(options.clone())?;
    totals.cluster_confirmed += r.confirmed;
    totals.elections += r.elections;
    totals.crashes += r.crashes;
    totals.steps += r.steps;
    let ledger_of_record = match options.ledger_of_record {
        true => format!(
            "ledger of record's gate: {} not written ahead (none applied), {} outcomes reported, all true ({} of them the client never heard), ",
            r.not_written_ahead, r.ledger_reports, r.ledger_reports_of_unknown
        ),
        false => String::new(),
    };
    let ordering = match &options.shape {
        ClusterShape::TwoPhaseCommit => format!("{} coordinator group(s)", options.ordering_groups),
        ClusterShape::Atomizer(a) => format!(
            "atomizer group (window {} blocks of at most {}, {} blocks made)",
            a.window_blocks, a.block_transactions_max, r.blocks
        ),
    };
    Ok(format!(
        "cluster of {} shard group(s) + {ordering}, {} replicas each at first, {} steps, {} submitted, {} confirmed, {} rejected, {} unknown ({} applied), {} elections, {} crashes, {} whole-group restarts, {} partitions, {} replicas joined a group, {} left one, {}{}",
        options.shard_groups,
        options.replicas,
        r.steps,
        r.submitted,
        r.confirmed,
        r.rejected,
        r.unknown,
        r.unknown_applied,
        r.elections,
        r.crashes,
        r.full_restarts,
        r.partitions,
        r.joined,
        r.left,
        ledger_of_record,
        network_and_trace(r.messages_dropped, r.messages_duplicated, &r.trace_digest)
    ))
}

/// The offline-cash world of one seed; returns its report line.
fn offline_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = OfflineOptions::from_seed(seed);
    let r = run_offline(options.clone())?;
    totals.offline_payments += r.payments;
    totals.crashes += r.crashes;
    totals.hand_overs += r.hand_overs;
    totals.hand_overs_completed += r.hand_overs_completed;
    totals.hand_overs_with_change += r.hand_overs_with_change;
    totals.hand_overs_cut += r.hand_overs_cut;
    totals.hand_overs_vanished += r.hand_overs_vanished;
    totals.hand_overs_refused += r.hand_overs_refused;
    Ok(format!(
        "offline cash: {} devices ({} cheating), {} payments offline, {} copies spent again, {} replays and {} revoked tokens refused by payees, {} deposits ({} sent again after a lost answer), {} double spends refused, {} owners named, {} direct exchanges ({} completed, {} with change, {} cut, {} with a side vanished, {} refused ({} not payable); {} hostile messages refused, {} lost payments refused late, {} tokens in limbo), {} authority crashes, trace {:016x}",
        options.devices,
        options.cheaters,
        r.payments,
        r.copies_kept,
        r.replays_refused,
        r.revoked_refused,
        r.deposits,
        r.deposits_resent,
        r.double_spends_refused,
        r.debtors,
        r.hand_overs,
        r.hand_overs_completed,
        r.hand_overs_with_change,
        r.hand_overs_cut,
        r.hand_overs_vanished,
        r.hand_overs_refused,
        r.hand_overs_not_payable,
        r.hostile_refused,
        r.late_payments_refused,
        r.tokens_in_limbo,
        r.crashes,
        r.trace_digest
    ))
}

/// The exchange's world of one seed; returns its report line.
fn exchange_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = ExchangeOptions::from_seed(seed);
    let r = run_exchange(options.clone())?;
    totals.exchange_blocks += r.blocks;
    totals.exchange_trades += r.offers_traded;
    totals.crashes += r.crashes;
    Ok(format!(
        "exchange: {} traders, {} assets, {} blocks, {} transactions included and {} refused ({} hostile), {} offers traded, {} deposits (each refused when handed in again), {} proposer crashes, {} replicas restored from snapshots, trace {:016x}",
        options.traders,
        options.assets,
        r.blocks,
        r.included,
        r.refused,
        r.hostile_refused,
        r.offers_traded,
        r.deposits,
        r.crashes,
        r.replicas_restored,
        r.trace_digest
    ))
}

/// The atomizer's world of one seed; returns its report line.
fn atomizer_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = AtomizerWorldOptions::from_seed(seed);
    let r = run_atomizer(options.clone())?;
    totals.atomizer_blocks += r.blocks;
    totals.atomizer_confirmed += r.confirmed;
    totals.crashes += r.atomizer_crashes + r.shard_crashes;
    Ok(format!(
        "atomizer: {} shards, window {} blocks of at most {}, {} blocks, {} submitted, {} confirmed ({} once healed), {} rejected, {} dropped, {} busy, {} callers lost to crashes, {} double spends and {} replayed mints tried, {} stale attestations, {} resends, {} misbehaving answers, {} atomizer and {} shard crashes, {} dropped, {} duplicated, trace {:016x}",
        options.shards,
        options.window_blocks,
        options.block_transactions_max,
        r.blocks,
        r.submitted,
        r.confirmed,
        r.healed_confirmed,
        r.rejected,
        r.dropped,
        r.busy,
        r.lost_to_crashes,
        r.double_spends,
        r.replayed_mints,
        r.stale_attestations,
        r.resends,
        r.misbehaving_answers,
        r.atomizer_crashes,
        r.shard_crashes,
        r.messages_dropped,
        r.messages_duplicated,
        r.trace_digest
    ))
}

/// The privacy world of one seed; returns its report line.
fn privacy_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = PrivacyOptions::from_seed(seed);
    let r = run_privacy(options.clone())?;
    totals.crashes += r.crashes;
    totals.endorsed += r.endorsed;
    totals.forgeries_refused += r.forged_refused + r.archiver_forgeries_refused + r.uncertified_refused;
    totals.ledger_reconciled += r.reconciled + r.archiver_settled_committed + r.archiver_settled_not_committed;
    totals.crashes += r.archiver_crashes;
    Ok(format!(
        "privacy: {}-of-{} endorsers ({} compromised), {} endorsed, {} forgeries refused, {} failed and submitted again once healed, {} endorser restarts; key generation: {}; ledger of record: {} committed, {} refused, {} lost in a crash, {} blocks, {} crashes, {} records reconciled by the UHS; replicated archiver: {} committed, {} refused, {} forged compact forms refused at the ledger's gate, {} outcomes lost, {} + {} decided by the UHS in {} rounds, {} blocks, {} leader crashes; unlinkable: {} tokens certified ({} retries), {} certifications of tokens not in the ledger refused, {} second spends met their serial number, {}",
        options.threshold,
        options.endorsers,
        options.compromised,
        r.endorsed,
        r.forged_refused,
        r.resubmitted,
        r.endorser_restarts,
        if r.ceremonies_caught_equivocating > 0 {
            "an equivocator caught, no honest share made"
        } else {
            "one key, every share made, k of them sign"
        },
        r.committed,
        r.refused,
        r.lost_in_crash,
        r.blocks,
        r.crashes,
        r.reconciled,
        r.archiver_committed,
        r.archiver_refused,
        r.archiver_forgeries_refused,
        r.archiver_outcomes_lost,
        r.archiver_settled_committed,
        r.archiver_settled_not_committed,
        r.archiver_evidence_rounds,
        r.archiver_blocks,
        r.archiver_crashes,
        r.certificates,
        r.certification_retries,
        r.uncertified_refused,
        r.double_spends_refused,
        network_and_trace(r.messages_dropped, r.messages_duplicated, &r.trace_digest)
    ))
}

/// The Byzantine-mode world of one seed; returns its report line.
fn byzantine_world(seed: u64, totals: &mut Totals) -> Result<String, Violation> {
    let options = ByzantineOptions::from_seed(seed);
    let r = run_byzantine(options.clone())?;
    totals.byzantine_payments += r.payments;
    totals.crashes += r.crashes;
    totals.steps += r.steps;
    let byzantine_authority = match options.byzantine_authority {
        Some((index, behaviour)) => format!("authority {index} Byzantine ({behaviour:?})"),
        None => "every authority honest".to_string(),
    };
    let epoch = match (&options.epoch_change, r.epoch_stall_ms) {
        (None, _) => "one epoch".to_string(),
        (Some(change), stall) => format!(
            "epoch change at {} ms replacing seat {} (first payment of the new epoch {}, {} payers learned it, {} forged records refused)",
            change.at_ms,
            change.seat,
            stall.map_or("none after it".to_string(), |ms| format!("{ms} ms after the record")),
            r.epochs_learned,
            r.forged_records_refused
        ),
    };
    Ok(format!(
        "byzantine mode: {BYZANTINE_AUTHORITIES} authorities × {} shards, {byzantine_authority}, {epoch}, {} correct + {} Byzantine users, {} steps ({} ms virtual), {} payments settled everywhere ({} redeems), {} fundings, {} equivocations ({} split slots recovered), {} Byzantine certificates, {} final by commit votes ({} in a recovery round), {} double votes and {} broken promises held as evidence, {} forged votes and {} false answers ignored, {} forged certificates and {} forged round requests refused, {} replays, {} forged credits refused by the transport, {} malformed channel messages ({} reported), {} catch-ups, {} inputs taken before earlier commands were durable, {} crashes, {} snapshots, {}",
        options.shards,
        options.correct_users,
        options.byzantine_users,
        r.steps,
        r.virtual_ms,
        r.payments,
        r.redeems,
        r.fundings,
        r.equivocations,
        r.recovered_slots,
        r.byzantine_certificates,
        r.commit_certificates,
        r.recovery_rounds_used,
        r.double_votes,
        r.broken_promises,
        r.forged_votes_ignored,
        r.false_answers_ignored,
        r.forged_certificates_refused,
        r.forged_round_requests_refused,
        r.replays,
        r.forged_credits_refused,
        r.corrupt_channel_messages,
        r.channel_violations_reported,
        r.missing_earlier,
        r.inputs_before_durable,
        r.crashes,
        r.snapshots,
        network_and_trace(r.messages_dropped, r.messages_duplicated, &r.trace_digest)
    ))
}

/// The end of every world's report line: the network's faults, and the trace digest that a
/// replay must reproduce.
fn network_and_trace(dropped: u64, duplicated: u64, trace_digest: &[u8; 32]) -> String {
    format!(
        "{dropped} dropped, {duplicated} duplicated, trace {}",
        hex::encode(&trace_digest[..8])
    )
}
