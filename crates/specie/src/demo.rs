//! `specie demo`: the main job on the embedded default. Mints money to a set of wallets, streams
//! payments through an embedded node (with double spends, conflicting concurrent spends and
//! forged signatures mixed in), and proves at the end that no money was created or destroyed.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_api::Backend;
use specie_api::{Completion, TxStatus};
use specie_cluster::sentinel::ClusterBackend;
use specie_cluster::Topology;
use specie_node::{EmbeddedNode, NodeOptions};
use specie_shard::Vote;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CreatedOutput, Hash32, MintTransaction, NonceMode, Output, RedeemTransaction,
    SpecieTransaction, Transaction, UhsId,
};

use crate::ceiling;

/// Run the whole system on this machine and audit it: the first thing to try.
///
/// Starts an embedded node (fsync on) in a temporary directory, mints to a set of wallets, runs
/// a stream of payments (mostly 2-in/2-out, some 4-in/4-out) with a fraction of double spends,
/// conflicting concurrent spends and forged signatures, redeems some money, then audits: total
/// minted minus redeemed equals the sum of all wallet balances, every output a wallet holds is in
/// the UHS and no spent one is. Exits non-zero if any check fails.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Number of wallets (each with its own key).
    #[arg(long, default_value_t = 200)]
    pub wallets: usize,
    /// Number of payments to stream.
    #[arg(long, default_value_t = 40_000)]
    pub payments: usize,
    /// Fraction of payments that are double spends: re-spending an already spent output, or two
    /// conflicting spends of one output submitted together.
    #[arg(long, default_value_t = 0.02)]
    pub double_spend_fraction: f64,
    /// Fraction of payments sent with a forged (corrupted) signature.
    #[arg(long, default_value_t = 0.02)]
    pub bad_signature_fraction: f64,
    /// Fraction of honest payments that are 4-in/4-out instead of 2-in/2-out.
    #[arg(long, default_value_t = 0.05)]
    pub large_fraction: f64,
    /// Number of shards.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Transactions in flight at once.
    #[arg(long, default_value_t = 4096)]
    pub window: usize,
    /// Seed for the workload (keys, amounts, choices).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the node's data here instead of a temporary directory.
    #[arg(long, conflicts_with = "cluster")]
    pub data_dir: Option<PathBuf>,
    /// Run against the cluster in this directory (started by `specie cluster up --dir DIR`)
    /// instead of an embedded node.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    pub json: bool,
}

const COIN_VALUE: u64 = 1_000;
const COINS_PER_WALLET: usize = 64;
const MINT_OUTPUTS_MAX: usize = 500;
const SUBMIT_BATCH_MAX: usize = 512;
/// How long the UHS must say the same about transactions with unknown outcomes before it is
/// believed: longer than a coordinator's retry period (`request_timeout_ms`, 2 s by default).
const UNKNOWN_QUIET_MS: u64 = 3_000;
/// Give up (with an error) if those transactions are still changing the UHS after this long.
const UNKNOWN_WAIT_MS_MAX: u64 = 60_000;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Mint,
    Payment,
    /// Re-spends an output that a confirmed transaction already spent.
    Replay,
    /// One of two spends of the same output submitted together.
    Conflict {
        pair: u64,
    },
    ForgedSignature,
    Redeem {
        amount: u64,
    },
}

struct Wallet {
    keypair: Keypair,
    commitment: Hash32,
    coins: Vec<CreatedOutput>,
}

struct Planned {
    kind: Kind,
    sender: usize,
    inputs: Vec<CreatedOutput>,
    /// (owner, value) of each output, in order.
    outputs: Vec<(usize, u64)>,
}

struct InFlight {
    kind: Kind,
    sender: usize,
    inputs: Vec<CreatedOutput>,
    outputs: Vec<(usize, CreatedOutput)>,
    submitted: Instant,
}

#[derive(Default, serde::Serialize)]
struct Checks {
    replays: u64,
    replays_rejected: u64,
    conflict_pairs: u64,
    conflict_pairs_with_two_winners: u64,
    forged: u64,
    forged_rejected: u64,
    honest_refused: u64,
}

struct Demo {
    rng: StdRng,
    wallets: Vec<Wallet>,
    spent: Vec<CreatedOutput>,
    in_flight: HashMap<u64, InFlight>,
    next_ref: u64,
    pairs: HashMap<u64, Vec<(bool, Vec<CreatedOutput>, usize)>>,
    next_pair: u64,
    minted: u64,
    redeemed: u64,
    confirmed: u64,
    confirmed_payments: u64,
    rejected: BTreeMap<String, u64>,
    checks: Checks,
    latency_us: hdrhistogram::Histogram<u64>,
    unknown: Vec<(u64, specie_transaction::Txid, InFlight)>,
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    if !(0.0..=0.5).contains(&args.double_spend_fraction) || !(0.0..=0.5).contains(&args.bad_signature_fraction) {
        bail!("--double-spend-fraction and --bad-signature-fraction must each be between 0 and 0.5");
    }
    if !(0.0..=1.0).contains(&args.large_fraction) {
        bail!("--large-fraction must be between 0 and 1");
    }
    if args.wallets < 2 || args.wallets > 100_000 {
        bail!("--wallets must be between 2 and 100000");
    }
    if args.window == 0 {
        bail!("--window must be at least 1");
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    match &args.cluster {
        Some(dir) => {
            let topology = Topology::load(&dir.join("cluster.toml"))?;
            let key_path = dir.join(crate::cluster_cmd::ISSUER_KEY_FILE);
            let secret = std::fs::read_to_string(&key_path).with_context(|| {
                format!(
                    "cannot read the cluster's issuer key {} (made by `specie cluster up`)",
                    key_path.display()
                )
            })?;
            let issuer =
                Keypair::from_seckey_str_global(secret.trim()).context("the issuer key file is not a secret key")?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            // The demo validates and submits in process, as the cluster's first sentinel.
            let backend = ClusterBackend::new(&topology, runtime.handle().clone(), &topology.sentinels[0].name)?;
            let replicas = topology.shard_groups[0].replicas.len();
            let label = format!(
                "cluster {} ({} shard groups × {replicas} replicas)",
                dir.display(),
                topology.shard_groups.len()
            );
            run_with(&args, &backend, issuer, rng, &label, || {})
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("specie-demo-")
                .tempdir()
                .context("cannot create a temporary directory")?;
            let data_dir = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
            let issuer = Keypair::new_global(&mut rng);
            let mut options = NodeOptions::new(&data_dir);
            options.shards = Some(args.shards);
            options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
            let node = EmbeddedNode::open(options).context("cannot start the embedded node")?;
            let label = format!(
                "embedded node, {} shards, fsync on, data in {}",
                args.shards,
                data_dir.display()
            );
            run_with(&args, &node.handle(), issuer, rng, &label, move || node.shutdown())
        }
    }
}

/// The workload and the audit, against any backend: the embedded node or a cluster's sentinels.
fn run_with<B: Backend>(
    args: &DemoArgs,
    backend: &B,
    issuer: Keypair,
    mut rng: StdRng,
    label: &str,
    finish: impl FnOnce(),
) -> anyhow::Result<ExitCode> {
    let wallets = (0..args.wallets)
        .map(|_| {
            let keypair = Keypair::new_global(&mut rng);
            Wallet {
                commitment: witness_program_commitment(&xonly_bytes(&keypair)),
                keypair,
                coins: vec![],
            }
        })
        .collect();
    let mut demo = Demo {
        rng,
        wallets,
        spent: vec![],
        in_flight: HashMap::new(),
        next_ref: 0,
        pairs: HashMap::new(),
        next_pair: 0,
        minted: 0,
        redeemed: 0,
        confirmed: 0,
        confirmed_payments: 0,
        rejected: BTreeMap::new(),
        checks: Checks::default(),
        latency_us: hdrhistogram::Histogram::new(3).expect("histogram"),
        unknown: vec![],
    };
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    let quiet = args.json;

    // 1. Mint COINS_PER_WALLET coins to every wallet.
    let mut mints = vec![];
    let all: Vec<usize> = (0..args.wallets)
        .flat_map(|w| std::iter::repeat_n(w, COINS_PER_WALLET))
        .collect();
    for owners in all.chunks(MINT_OUTPUTS_MAX) {
        mints.push(Planned {
            kind: Kind::Mint,
            sender: 0,
            inputs: vec![],
            outputs: owners.iter().map(|&o| (o, COIN_VALUE)).collect(),
        });
    }
    demo.submit(backend, mints, &issuer, &reply);
    demo.settle_all(&mut completions)?;
    demo.resolve_unknown(backend)?;
    if demo.minted != (args.wallets * COINS_PER_WALLET) as u64 * COIN_VALUE {
        bail!("minting failed: {:?}", demo.rejected);
    }

    // 2. Stream payments.
    let bar = if quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(args.payments as u64)
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} payments {pos}/{len} [{bar:40}] {per_sec} {msg}").expect("template"),
    );
    let started = Instant::now();
    let mut planned = 0usize;
    while planned < args.payments || !demo.in_flight.is_empty() {
        let room = args
            .window
            .saturating_sub(demo.in_flight.len())
            .min(SUBMIT_BATCH_MAX)
            // A conflicting pair is planned as two, so `planned` can pass `args.payments` by one.
            .min(args.payments.saturating_sub(planned));
        if room > 0 {
            let batch = demo.plan_payments(room, args);
            if !batch.is_empty() {
                planned += batch.len();
                bar.inc(batch.len() as u64);
                demo.submit(backend, batch, &issuer, &reply);
                while let Ok(completion) = completions.try_recv() {
                    demo.settle(completion)?;
                }
                continue;
            }
        }
        let completion = completions.blocking_recv().context("the node stopped")?;
        demo.settle(completion)?;
        while let Ok(completion) = completions.try_recv() {
            demo.settle(completion)?;
        }
    }
    let elapsed = started.elapsed();
    demo.resolve_unknown(backend)?;
    bar.finish_and_clear();

    // 3. Redeem a little of the first wallet's money through the issuer.
    let redeem_count = demo.wallets[0].coins.len().min(2);
    let redeem_inputs: Vec<CreatedOutput> = demo.wallets[0].coins.drain(..redeem_count).collect();
    if !redeem_inputs.is_empty() {
        let total: u64 = redeem_inputs.iter().map(|c| c.output.value).sum();
        let amount = total.div_ceil(2);
        let change: Vec<(usize, u64)> = if total > amount {
            vec![(0, total - amount)]
        } else {
            vec![]
        };
        let redeem = Planned {
            kind: Kind::Redeem { amount },
            sender: 0,
            inputs: redeem_inputs,
            outputs: change,
        };
        demo.submit(backend, vec![redeem], &issuer, &reply);
        demo.settle_all(&mut completions)?;
        demo.resolve_unknown(backend)?;
    }

    // 4. Audit.
    let supply = demo.minted - demo.redeemed;
    let balances: u64 = demo.wallets.iter().flat_map(|w| &w.coins).map(|c| c.output.value).sum();
    let held: Vec<UhsId> = demo.wallets.iter().flat_map(|w| &w.coins).map(|c| c.uhs_id).collect();
    let spent: Vec<UhsId> = demo.spent.iter().map(|c| c.uhs_id).collect();
    let held_present = backend.query_uhs(&held)?.iter().filter(|p| **p).count();
    let spent_present = backend.query_uhs(&spent)?.iter().filter(|p| **p).count();
    let info = backend.info()?;
    finish();

    let ceiling_tps = ceiling::sign_verify_2in2out_tps(Duration::from_millis(1500));
    let throughput_tps = demo.confirmed_payments as f64 / elapsed.as_secs_f64();
    let c = &demo.checks;
    let supply_ok = supply == balances;
    let uhs_ok = held_present == held.len() && spent_present == 0;
    let rejections_ok =
        c.replays == c.replays_rejected && c.forged == c.forged_rejected && c.conflict_pairs_with_two_winners == 0;
    // The UHS also holds one replay marker per mint, which no wallet owns.
    let audit_ok = supply_ok && uhs_ok && rejections_ok && c.honest_refused == 0;
    let p50 = demo.latency_us.value_at_quantile(0.50) as f64 / 1000.0;
    let p99 = demo.latency_us.value_at_quantile(0.99) as f64 / 1000.0;

    if args.json {
        let summary = serde_json::json!({
            "confirmed": demo.confirmed,
            "confirmed_payments": demo.confirmed_payments,
            "payments_submitted": planned,
            "elapsed_s": elapsed.as_secs_f64(),
            "throughput_tps": throughput_tps,
            "latency_ms_p50": p50,
            "latency_ms_p99": p99,
            "rejected": demo.rejected,
            "checks": demo.checks,
            "sign_verify_ceiling_tps": ceiling_tps,
            "ratio_to_ceiling": throughput_tps / ceiling_tps,
            "minted": demo.minted,
            "redeemed": demo.redeemed,
            "wallet_balances": balances,
            "wallet_outputs": held.len(),
            "wallet_outputs_in_uhs": held_present,
            "spent_outputs": spent.len(),
            "spent_outputs_in_uhs": spent_present,
            "uhs_ids": info.uhs_ids,
            "shards": info.shards,
            "backend": label,
            "wallets": args.wallets,
            "audit_ok": audit_ok,
        });
        println!("{summary}");
    } else {
        let mark = |ok: bool| if ok { "ok" } else { "FAILED" };
        println!("specie demo: {label}, {} wallets", args.wallets);
        println!(
            "  payments     {planned} submitted, {} confirmed in {:.1} s = {throughput_tps:.0} tx/s",
            demo.confirmed_payments,
            elapsed.as_secs_f64()
        );
        println!("  latency      p50 {p50:.1} ms, p99 {p99:.1} ms");
        println!(
            "  ceiling      sign+verify of 2-in/2-out on all cores: {ceiling_tps:.0} tx/s; end to end is {:.0}% of it",
            100.0 * throughput_tps / ceiling_tps
        );
        println!(
            "  rejected     {}",
            demo.rejected
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "  double spend {} replays, {} rejected; {} conflicting pairs, {} with two winners  [{}]",
            c.replays,
            c.replays_rejected,
            c.conflict_pairs,
            c.conflict_pairs_with_two_winners,
            mark(rejections_ok)
        );
        println!(
            "  forged sigs  {} sent, {} rejected  [{}]",
            c.forged,
            c.forged_rejected,
            mark(c.forged == c.forged_rejected)
        );
        println!(
            "  supply       minted {} - redeemed {} = {supply}; wallets hold {balances}  [{}]",
            demo.minted,
            demo.redeemed,
            mark(supply_ok)
        );
        println!(
            "  UHS          {held_present}/{} wallet outputs present, {spent_present}/{} spent outputs present  [{}]",
            held.len(),
            spent.len(),
            mark(uhs_ok)
        );
        println!(
            "  audit        {}",
            if audit_ok {
                "OK: no money was created or destroyed"
            } else {
                "FAILED"
            }
        );
    }
    Ok(if audit_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

impl Demo {
    fn take_coins(&mut self, wallet: usize, count: usize) -> Option<Vec<CreatedOutput>> {
        let coins = &mut self.wallets[wallet].coins;
        if coins.len() < count {
            return None;
        }
        let start = coins.len() - count;
        Some(coins.drain(start..).collect())
    }

    /// Picks a sender that holds at least `count` coins, trying random wallets first.
    fn pick_sender(&mut self, count: usize) -> Option<usize> {
        for _ in 0..16 {
            let wallet = self.rng.gen_range(0..self.wallets.len());
            if self.wallets[wallet].coins.len() >= count {
                return Some(wallet);
            }
        }
        (0..self.wallets.len()).find(|w| self.wallets[*w].coins.len() >= count)
    }

    fn split(&mut self, total: u64, parts: usize) -> Vec<u64> {
        assert!(total >= parts as u64);
        let mut cuts: Vec<u64> = (0..parts - 1).map(|_| self.rng.gen_range(1..total)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        while cuts.len() < parts - 1 {
            // Rare collision: fall back to even cuts, each part at least 1.
            cuts = (1..parts as u64).map(|i| i * total / parts as u64).collect();
        }
        let mut values = vec![];
        let mut last = 0;
        for cut in cuts.into_iter().chain([total]) {
            values.push(cut - last);
            last = cut;
        }
        debug_assert_eq!(values.iter().sum::<u64>(), total);
        values
    }

    fn plan_payments(&mut self, count: usize, args: &DemoArgs) -> Vec<Planned> {
        let mut batch = vec![];
        while batch.len() < count {
            let roll: f64 = self.rng.gen();
            if roll < args.double_spend_fraction {
                if self.rng.gen_bool(0.5) && !self.spent.is_empty() {
                    let coin = self.spent[self.rng.gen_range(0..self.spent.len())];
                    let owner = self.owner_of(&coin);
                    batch.push(Planned {
                        kind: Kind::Replay,
                        sender: owner,
                        inputs: vec![coin],
                        outputs: vec![(owner, coin.output.value)],
                    });
                    continue;
                }
                let Some(sender) = self.pick_sender(1) else { break };
                let coin = self.take_coins(sender, 1).expect("picked");
                let pair = self.next_pair;
                self.next_pair += 1;
                // Two different recipients, so the two spends are different transactions.
                let first = self.rng.gen_range(0..self.wallets.len());
                for to in [first, (first + 1) % self.wallets.len()] {
                    batch.push(Planned {
                        kind: Kind::Conflict { pair },
                        sender,
                        inputs: coin.clone(),
                        outputs: vec![(to, coin[0].output.value)],
                    });
                }
                continue;
            }
            let large = self.rng.gen_bool(args.large_fraction);
            let arity = if large { 4 } else { 2 };
            let Some(sender) = self.pick_sender(arity) else { break };
            let inputs = self.take_coins(sender, arity).expect("picked");
            let total: u64 = inputs.iter().map(|c| c.output.value).sum();
            let values = self.split(total, arity);
            let outputs = values
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        if i == 0 {
                            sender
                        } else {
                            self.rng.gen_range(0..self.wallets.len())
                        },
                        v,
                    )
                })
                .collect();
            let kind = if roll < args.double_spend_fraction + args.bad_signature_fraction {
                Kind::ForgedSignature
            } else {
                Kind::Payment
            };
            batch.push(Planned {
                kind,
                sender,
                inputs,
                outputs,
            });
        }
        batch
    }

    fn owner_of(&self, coin: &CreatedOutput) -> usize {
        self.wallets
            .iter()
            .position(|w| w.commitment == coin.output.witness_program_commitment)
            .expect("every coin has an owner")
    }

    /// Signs the batch on all cores and submits it.
    fn submit<B: Backend>(
        &mut self,
        handle: &B,
        batch: Vec<Planned>,
        issuer: &Keypair,
        reply: &specie_api::CompletionSender,
    ) {
        let nonces: Vec<[u8; 32]> = batch.iter().map(|_| self.rng.gen()).collect();
        let wallets = &self.wallets;
        let signed: Vec<(Planned, SpecieTransaction)> = batch
            .into_par_iter()
            .zip(nonces)
            .map(|(plan, nonce)| {
                let outputs: Vec<Output> = plan
                    .outputs
                    .iter()
                    .map(|(owner, value)| Output {
                        witness_program_commitment: wallets[*owner].commitment,
                        value: *value,
                    })
                    .collect();
                let inputs: Vec<_> = plan.inputs.iter().map(CreatedOutput::to_input).collect();
                let owners: Vec<Keypair> = plan.inputs.iter().map(|_| wallets[plan.sender].keypair).collect();
                let tx = match plan.kind {
                    Kind::Mint => SpecieTransaction::Mint(MintTransaction::new_signed(
                        nonce,
                        outputs,
                        issuer,
                        NonceMode::Randomized,
                    )),
                    Kind::Redeem { amount } => SpecieTransaction::Redeem(
                        RedeemTransaction::new_signed(amount, inputs, outputs, &owners, issuer, NonceMode::Randomized)
                            .expect("own coins"),
                    ),
                    _ => {
                        let mut tx = Transaction {
                            inputs,
                            outputs,
                            witnesses: vec![],
                        };
                        tx.sign(&owners, NonceMode::Randomized).expect("own coins");
                        if plan.kind == Kind::ForgedSignature {
                            let last = tx.witnesses[0].0.len() - 1;
                            tx.witnesses[0].0[last] ^= 0x01;
                        }
                        SpecieTransaction::Transfer(tx)
                    }
                };
                (plan, tx)
            })
            .collect();
        let now = Instant::now();
        let mut submission = Vec::with_capacity(signed.len());
        for (plan, tx) in signed {
            let client_ref = self.next_ref;
            self.next_ref += 1;
            let created = tx.created_outputs();
            let outputs = plan
                .outputs
                .iter()
                .zip(created)
                .map(|((owner, _), created)| (*owner, created))
                .collect();
            self.in_flight.insert(
                client_ref,
                InFlight {
                    kind: plan.kind,
                    sender: plan.sender,
                    inputs: plan.inputs,
                    outputs,
                    submitted: now,
                },
            );
            submission.push((client_ref, tx));
        }
        handle.submit(submission, reply);
    }

    /// Settles transactions whose outcome was lost in a failover by looking at the UHS: applied
    /// if its outputs exist (or, with none, its inputs are gone). Such a transaction's dtxn may
    /// be in the log of a coordinator group still electing, or being finished by its new leader,
    /// so the UHS is read only once every coordinator group leads again (having resumed what was
    /// in flight), and believed only once it has said the same for [`UNKNOWN_QUIET_MS`], longer
    /// than a coordinator's retry period. (A dtxn stalled for longer, say behind a shard group
    /// without a majority, would be misjudged; the audit then fails, loudly.)
    fn resolve_unknown<B: Backend>(&mut self, backend: &B) -> anyhow::Result<()> {
        if self.unknown.is_empty() {
            return Ok(());
        }
        let read = |unknown: &[(u64, specie_transaction::Txid, InFlight)]| -> anyhow::Result<Vec<bool>> {
            unknown
                .iter()
                .map(|(_, _, flight)| {
                    let outputs: Vec<UhsId> = flight.outputs.iter().map(|(_, c)| c.uhs_id).collect();
                    Ok(if outputs.is_empty() {
                        let inputs: Vec<UhsId> = flight.inputs.iter().map(|c| c.uhs_id).collect();
                        backend.query_uhs(&inputs)?.iter().all(|present| !present)
                    } else {
                        backend.query_uhs(&outputs)?.iter().all(|present| *present)
                    })
                })
                .collect()
        };
        backend.wait_for_leaders(Duration::from_millis(UNKNOWN_WAIT_MS_MAX))?;
        let started = Instant::now();
        let mut applied = read(&self.unknown)?;
        loop {
            std::thread::sleep(Duration::from_millis(UNKNOWN_QUIET_MS));
            let again = read(&self.unknown)?;
            if again == applied {
                break;
            }
            applied = again;
            ensure!(
                started.elapsed() < Duration::from_millis(UNKNOWN_WAIT_MS_MAX),
                "transactions with unknown outcomes were still changing the UHS after {} s",
                UNKNOWN_WAIT_MS_MAX / 1000
            );
        }
        for ((client_ref, txid, flight), applied) in std::mem::take(&mut self.unknown).into_iter().zip(applied) {
            let status = if applied {
                TxStatus::Confirmed
            } else {
                TxStatus::Dropped
            };
            self.in_flight.insert(client_ref, flight);
            self.settle(Completion {
                client_ref,
                txid,
                status,
            })?;
        }
        Ok(())
    }

    fn settle_all(&mut self, completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>) -> anyhow::Result<()> {
        while !self.in_flight.is_empty() {
            let completion = completions.blocking_recv().context("the node stopped")?;
            self.settle(completion)?;
        }
        Ok(())
    }

    fn settle(&mut self, completion: Completion) -> anyhow::Result<()> {
        let flight = self
            .in_flight
            .remove(&completion.client_ref)
            .context("a completion for a transaction never sent")?;
        if completion.status == TxStatus::Unknown {
            // A coordinator failed over with it in flight: the UHS will tell what happened.
            self.unknown.push((completion.client_ref, completion.txid, flight));
            return Ok(());
        }
        let _ = self.latency_us.record(flight.submitted.elapsed().as_micros() as u64);
        let confirmed = completion.status == TxStatus::Confirmed;
        if confirmed {
            self.confirmed += 1;
        } else {
            *self.rejected.entry(completion.status.code().to_string()).or_default() += 1;
        }
        match flight.kind {
            Kind::Mint => {
                if confirmed {
                    self.minted += flight.outputs.iter().map(|(_, c)| c.output.value).sum::<u64>();
                    self.credit(&flight.outputs);
                }
            }
            Kind::Redeem { amount } => {
                if confirmed {
                    self.redeemed += amount;
                    self.spent.extend(&flight.inputs);
                    self.credit(&flight.outputs);
                } else {
                    self.wallets[flight.sender].coins.extend(&flight.inputs);
                }
            }
            Kind::Payment => self.finish_payment(&flight, &completion.status),
            Kind::Replay => {
                self.checks.replays += 1;
                // Refused by the shards (spent input), or never applied: either way not confirmed.
                if matches!(
                    completion.status,
                    TxStatus::Rejected(Vote::InputMissing) | TxStatus::Dropped
                ) {
                    self.checks.replays_rejected += 1;
                }
            }
            Kind::ForgedSignature => {
                self.checks.forged += 1;
                if matches!(completion.status, TxStatus::Invalid(_)) {
                    self.checks.forged_rejected += 1;
                }
                self.wallets[flight.sender].coins.extend(&flight.inputs);
            }
            Kind::Conflict { pair } => {
                let sides = self.pairs.entry(pair).or_default();
                sides.push((confirmed, flight.inputs.clone(), flight.sender));
                let both_done = sides.len() == 2;
                if confirmed {
                    self.confirmed_payments += 1;
                    self.spent.extend(&flight.inputs);
                    self.credit(&flight.outputs);
                }
                if both_done {
                    let sides = self.pairs.remove(&pair).expect("present");
                    self.checks.conflict_pairs += 1;
                    match sides.iter().filter(|(won, _, _)| *won).count() {
                        0 => self.wallets[sides[0].2].coins.extend(&sides[0].1), // neither won: the coin is still unspent
                        1 => {}
                        _ => self.checks.conflict_pairs_with_two_winners += 1,
                    }
                }
            }
        }
        Ok(())
    }

    fn finish_payment(&mut self, flight: &InFlight, status: &TxStatus) {
        match status {
            TxStatus::Confirmed => {
                self.confirmed_payments += 1;
                self.spent.extend(&flight.inputs);
                self.credit(&flight.outputs);
            }
            TxStatus::Busy | TxStatus::Dropped => self.wallets[flight.sender].coins.extend(&flight.inputs),
            _ => {
                // An honest payment spends coins only its sender holds: a refusal is a bug.
                self.checks.honest_refused += 1;
                self.wallets[flight.sender].coins.extend(&flight.inputs);
            }
        }
    }

    fn credit(&mut self, outputs: &[(usize, CreatedOutput)]) {
        for (owner, coin) in outputs {
            self.wallets[*owner].coins.push(*coin);
        }
    }
}
