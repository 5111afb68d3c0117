//! `specie demo`: the main job on the embedded default. Mints money to a set of wallets, streams
//! payments through an embedded node or a cluster (with double spends, conflicting concurrent
//! spends and forged signatures mixed in: the payment workload of `specie-workload`), and proves
//! at the end, with the workload's supply audit, that no money was created or destroyed.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::supply::{DemoFigures, SupplyCheck};
use indicatif::{ProgressBar, ProgressStyle};
use rand::rngs::StdRng;
use rand::SeedableRng;
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_api::http_api::SupplyBody;
use specie_api::supply::supply_body;
use specie_api::{Backend, Completion, NodeInfo, TxStatus};
use specie_cluster::sentinel::ClusterBackend;
use specie_cluster::Topology;
use specie_node::{CoreShape, EmbeddedNode, NodeOptions};
use specie_shard::Vote;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{SpecieTransaction, Txid, UhsId};
use specie_workload::{Outcome, PaymentMix, PaymentWorkload, Planned, Sent, SupplyAudit};

use specie_measure::ceiling;
use specie_measure::error::{BenchError, BenchResult, StepContext};
use specie_measure::{ensure_that, fail};

/// What `specie demo` runs (see its command-line help).
#[derive(Clone, Debug)]
pub struct DemoOptions {
    pub wallets: usize,
    pub payments: usize,
    pub double_spend_fraction: f64,
    pub bad_signature_fraction: f64,
    pub large_fraction: f64,
    pub shards: usize,
    /// Coordinators of the embedded 2PC core (`None`: the node's default).
    pub coordinators: Option<usize>,
    /// Transactions in flight at once.
    pub window: usize,
    pub seed: u64,
    /// Keep the embedded node's data here instead of a temporary directory.
    pub data_dir: Option<PathBuf>,
    /// Run against the cluster in this directory instead of an embedded node.
    pub cluster: Option<PathBuf>,
    /// Print the summary as one JSON object.
    pub json: bool,
    /// Whether the embedded node keeps the ledger of record (checked against the UHS at the end).
    pub ledger_of_record: bool,
    /// How the embedded core orders transactions.
    pub shape: CoreShape,
}

const COIN_VALUE: u64 = 1_000;
const COINS_PER_WALLET: usize = 64;
/// How many times mints not applied are sent (a group failing over drops what it was given),
/// and the pause before each new round.
const MINT_ROUNDS_MAX: usize = 5;
const MINT_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(500);
const MINT_OUTPUTS_MAX: usize = 500;
const SUBMIT_BATCH_MAX: usize = 512;
/// How long the UHS must say the same about transactions with unknown outcomes before it is
/// believed: longer than a coordinator's retry period (`request_timeout_ms`, 2 s by default).
const UNKNOWN_QUIET_MS: u64 = 3_000;
/// Give up (with an error) if those transactions are still changing the UHS after this long.
const UNKNOWN_WAIT_MS_MAX: u64 = 60_000;

struct InFlight {
    sent: Sent,
    submitted: Instant,
}

/// The workload in flight against one backend: what was sent, when, and what came back.
struct Demo {
    workload: PaymentWorkload,
    in_flight: HashMap<u64, InFlight>,
    next_ref: u64,
    rejected: BTreeMap<String, u64>,
    latency_us: hdrhistogram::Histogram<u64>,
    unknown: Vec<(u64, Txid, InFlight)>,
}

/// What the run measured, for the report.
struct Measured {
    planned: usize,
    elapsed: Duration,
    audit: SupplyAudit,
    info: NodeInfo,
    ledger: Option<LedgerCheck>,
    /// The supply report at the ledger's last cut (with a ledger of record).
    supply: Option<SupplyCheck>,
}

pub fn run(args: &DemoOptions) -> BenchResult<ExitCode> {
    if !(0.0..=0.5).contains(&args.double_spend_fraction) || !(0.0..=0.5).contains(&args.bad_signature_fraction) {
        return Err(BenchError::InvalidOptions(
            "--double-spend-fraction and --bad-signature-fraction must each be between 0 and 0.5".into(),
        ));
    }
    if !(0.0..=1.0).contains(&args.large_fraction) {
        return Err(BenchError::InvalidOptions(
            "--large-fraction must be between 0 and 1".into(),
        ));
    }
    if args.wallets < 2 || args.wallets > 100_000 {
        return Err(BenchError::InvalidOptions(
            "--wallets must be between 2 and 100000".into(),
        ));
    }
    if args.window == 0 {
        return Err(BenchError::InvalidOptions("--window must be at least 1".into()));
    }
    let mut rng = StdRng::seed_from_u64(args.seed);
    match &args.cluster {
        Some(dir) => {
            let topology_file = dir.join(specie_cluster::supervisor::TOPOLOGY_FILE);
            let topology = Topology::load(&topology_file)?;
            let key_path = dir.join(specie_cluster::supervisor::ISSUER_KEY_FILE);
            let secret = std::fs::read_to_string(&key_path).with_step(|| {
                format!(
                    "cannot read the cluster's issuer key {} (made by `specie cluster up`)",
                    key_path.display()
                )
            })?;
            let issuer =
                Keypair::from_seckey_str_global(secret.trim()).step("the issuer key file is not a secret key")?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            // The demo validates and submits in process, as the cluster's first sentinel, and
            // follows the cluster file's membership changes as a sentinel does.
            {
                let _runtime = runtime.enter();
                specie_cluster::live::follow(topology_file.clone(), &topology);
            }
            let backend = ClusterBackend::new(&topology, runtime.handle().clone(), &topology.sentinels[0].name)
                .step("cannot reach the cluster")?;
            let replicas = topology.shard_groups[0].replicas.len();
            let ordering = match topology.coordinator_groups.len() {
                0 => "an atomizer group".to_string(),
                1 => "1 coordinator group".to_string(),
                groups => format!("{groups} coordinator groups"),
            };
            let label = format!(
                "cluster {} ({} shard groups and {ordering} × {replicas} replicas, {} shape)",
                dir.display(),
                topology.shard_groups.len(),
                topology.shape_name()
            );
            run_with(args, &backend, (issuer, true), rng, &label, || {})
        }
        None => {
            let temp = tempfile::Builder::new()
                .prefix("specie-demo-")
                .tempdir()
                .step("cannot create a temporary directory")?;
            let data_dir = args.data_dir.clone().unwrap_or_else(|| temp.path().to_path_buf());
            let issuer = Keypair::new_global(&mut rng);
            let mut options = NodeOptions::new(&data_dir);
            options.shards = Some(args.shards);
            options.issuers = vec![hex::encode(xonly_bytes(&issuer))];
            options.ledger_of_record = Some(args.ledger_of_record);
            options.shape = Some(args.shape);
            options.coordinators = args.coordinators;
            let node = EmbeddedNode::open(options).step("cannot start the embedded node")?;
            let label = format!(
                "embedded node ({}), {} shards, {} coordinator(s), fsync on, ledger of record {}, data in {}",
                args.shape,
                args.shards,
                node.handle().manifest().coordinators,
                if args.ledger_of_record { "on" } else { "off" },
                data_dir.display()
            );
            run_with(args, &node.handle(), (issuer, false), rng, &label, move || {
                node.shutdown()
            })
        }
    }
}

/// The workload and the audit, against any backend: the embedded node or a cluster's sentinels
/// (`shared`: others may use its ledger too).
fn run_with<B: Backend>(
    args: &DemoOptions,
    backend: &B,
    (issuer, shared): (Keypair, bool),
    rng: StdRng,
    label: &str,
    finish: impl FnOnce(),
) -> BenchResult<ExitCode> {
    let mut demo = Demo {
        workload: PaymentWorkload::new(args.wallets, rng),
        in_flight: HashMap::new(),
        next_ref: 0,
        rejected: BTreeMap::new(),
        latency_us: hdrhistogram::Histogram::new(3).expect("histogram"),
        unknown: vec![],
    };
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    let before = match shared {
        true => backend.ledger_supply().ok().map(|cut| supply_body(&cut)),
        false => None,
    };

    // 1. Mint COINS_PER_WALLET coins to every wallet; a mint not applied while a group fails
    // over (busy, dropped) is sent again, a few times.
    let mut mints = demo.workload.plan_mints(COINS_PER_WALLET, COIN_VALUE, MINT_OUTPUTS_MAX);
    for _ in 0..MINT_ROUNDS_MAX {
        demo.submit(backend, mints, &issuer, &reply);
        demo.settle_all(&mut completions)?;
        demo.resolve_unknown(backend)?;
        mints = demo.workload.take_unminted();
        if mints.is_empty() {
            break;
        }
        std::thread::sleep(MINT_RETRY_PAUSE);
    }
    if demo.workload.minted() != (args.wallets * COINS_PER_WALLET) as u64 * COIN_VALUE {
        fail!("minting failed: {:?}", demo.rejected);
    }

    // 2. Stream payments.
    let started = Instant::now();
    let planned = demo.stream_payments(args, backend, &issuer, &reply, &mut completions)?;
    let elapsed = started.elapsed();

    // 3. Redeem a little of the first wallet's money through the issuer.
    if let Some(redeem) = demo.workload.plan_redeem(0, 2) {
        demo.submit(backend, vec![redeem], &issuer, &reply);
        demo.settle_all(&mut completions)?;
        demo.resolve_unknown(backend)?;
    }

    // 4. Audit.
    let held_present = backend
        .query_uhs(&demo.workload.held_ids())?
        .iter()
        .filter(|p| **p)
        .count();
    let spent_present = backend
        .query_uhs(&demo.workload.spent_ids())?
        .iter()
        .filter(|p| **p)
        .count();
    let info = backend.info()?;
    let ledger = check_ledger_of_record(backend)?;
    finish();
    let audit = demo.workload.audit(held_present, spent_present);
    let supply = ledger.as_ref().map(|ledger| {
        let figures = DemoFigures::new(
            &issuer,
            audit.minted.into(),
            audit.redeemed.into(),
            audit.wallet_balances.into(),
            0,
        );
        SupplyCheck::new(before.as_ref(), ledger.supply.clone(), vec![], &figures)
    });
    let measured = Measured {
        planned,
        elapsed,
        audit,
        info,
        ledger,
        supply,
    };
    demo.report(args, label, &measured);
    Ok(
        if measured.audit.ok()
            && measured.ledger.as_ref().is_none_or(|l| l.replays_to_uhs)
            && measured.supply.as_ref().is_none_or(SupplyCheck::ok)
        {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        },
    )
}

/// The ledger of record, checked against the shards once it has sealed everything, and the
/// supply at that cut.
pub(crate) struct LedgerCheck {
    pub(crate) blocks: u64,
    pub(crate) replays_to_uhs: bool,
    /// `GET /v1/supply`'s body at the same head.
    pub(crate) supply: SupplyBody,
}

/// How long the archiver may take to seal what was confirmed last (it seals every 100–200 ms)
/// and to decide what nobody reported (a cluster's archiver reads those off the UHS after
/// `decide_after_ms`, a minute by default).
const LEDGER_SETTLE_MS_MAX: u64 = 90_000;

/// `None` if the backend keeps no ledger of record; otherwise whether its blocks replay to
/// exactly the UHS the shards hold, once nothing waits for a block, and the supply then.
pub(crate) fn check_ledger_of_record<B: Backend>(backend: &B) -> BenchResult<Option<LedgerCheck>> {
    let deadline = Instant::now() + Duration::from_millis(LEDGER_SETTLE_MS_MAX);
    loop {
        let cut = match backend.ledger_supply() {
            Ok(cut) => cut,
            Err(specie_api::BackendError::NoLedger) => return Ok(None),
            Err(error) => return Err(error.into()),
        };
        let head = &cut.head;
        if head.waiting == 0 && head.undecided == 0 {
            return Ok(Some(LedgerCheck {
                blocks: head.height,
                replays_to_uhs: head.uhs == backend.uhs_digest()?,
                supply: supply_body(&cut),
            }));
        }
        if Instant::now() > deadline {
            fail!(
                "the ledger of record still has {} transactions waiting and {} undecided after {LEDGER_SETTLE_MS_MAX} ms",
                head.waiting,
                head.undecided
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How the workload's book-keeping reads a transaction's final status.
fn outcome(status: &TxStatus) -> Outcome {
    match status {
        TxStatus::Confirmed => Outcome::Confirmed,
        TxStatus::Busy => Outcome::Busy,
        TxStatus::Dropped => Outcome::Dropped,
        TxStatus::Rejected(Vote::InputMissing) => Outcome::InputMissing,
        TxStatus::Invalid(_) => Outcome::Invalid,
        _ => Outcome::Refused,
    }
}

impl Demo {
    /// Keeps up to `--window` payments in flight until `--payments` were planned and all settled;
    /// returns how many were planned.
    fn stream_payments<B: Backend>(
        &mut self,
        args: &DemoOptions,
        backend: &B,
        issuer: &Keypair,
        reply: &specie_api::CompletionSender,
        completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>,
    ) -> BenchResult<usize> {
        let mix = PaymentMix {
            double_spend_fraction: args.double_spend_fraction,
            bad_signature_fraction: args.bad_signature_fraction,
            large_fraction: args.large_fraction,
        };
        let bar = if args.json {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(args.payments as u64)
        };
        bar.set_style(
            ProgressStyle::with_template("{spinner} payments {pos}/{len} [{bar:40}] {per_sec} {msg}")
                .expect("template"),
        );
        let mut planned = 0usize;
        while planned < args.payments || !self.in_flight.is_empty() {
            let room = args
                .window
                .saturating_sub(self.in_flight.len())
                .min(SUBMIT_BATCH_MAX)
                // A conflicting pair is planned as two, so `planned` can pass `args.payments` by one.
                .min(args.payments.saturating_sub(planned));
            if room > 0 {
                let batch = self.workload.plan_payments(room, &mix);
                if !batch.is_empty() {
                    planned += batch.len();
                    bar.inc(batch.len() as u64);
                    self.submit(backend, batch, issuer, reply);
                    while let Ok(completion) = completions.try_recv() {
                        self.settle(completion)?;
                    }
                    continue;
                }
            }
            let completion = completions.blocking_recv().step("the node stopped")?;
            self.settle(completion)?;
            while let Ok(completion) = completions.try_recv() {
                self.settle(completion)?;
            }
        }
        self.resolve_unknown(backend)?;
        bar.finish_and_clear();
        Ok(planned)
    }

    /// Signs the batch on all cores and submits it.
    fn submit<B: Backend>(
        &mut self,
        handle: &B,
        batch: Vec<Planned>,
        issuer: &Keypair,
        reply: &specie_api::CompletionSender,
    ) {
        let nonces = self.workload.nonces(batch.len());
        let workload = &self.workload;
        let signed: Vec<(Sent, SpecieTransaction)> = batch
            .into_par_iter()
            .zip(nonces)
            .map(|(plan, nonce)| workload.sign(plan, issuer, nonce))
            .collect();
        let now = Instant::now();
        let mut submission = Vec::with_capacity(signed.len());
        for (sent, tx) in signed {
            let client_ref = self.next_ref;
            self.next_ref += 1;
            self.in_flight.insert(client_ref, InFlight { sent, submitted: now });
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
    fn resolve_unknown<B: Backend>(&mut self, backend: &B) -> BenchResult<()> {
        if self.unknown.is_empty() {
            return Ok(());
        }
        let read = |unknown: &[(u64, Txid, InFlight)]| -> BenchResult<Vec<bool>> {
            unknown
                .iter()
                .map(|(_, _, flight)| {
                    let outputs: Vec<UhsId> = flight.sent.outputs.iter().map(|(_, c)| c.uhs_id).collect();
                    Ok(if outputs.is_empty() {
                        let inputs: Vec<UhsId> = flight.sent.inputs.iter().map(|c| c.uhs_id).collect();
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
            ensure_that!(
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

    fn settle_all(&mut self, completions: &mut tokio::sync::mpsc::UnboundedReceiver<Completion>) -> BenchResult<()> {
        while !self.in_flight.is_empty() {
            let completion = completions.blocking_recv().step("the node stopped")?;
            self.settle(completion)?;
        }
        Ok(())
    }

    fn settle(&mut self, completion: Completion) -> BenchResult<()> {
        let flight = self
            .in_flight
            .remove(&completion.client_ref)
            .step("a completion for a transaction never sent")?;
        if completion.status == TxStatus::Unknown {
            // A coordinator failed over with it in flight: the UHS will tell what happened.
            self.unknown.push((completion.client_ref, completion.txid, flight));
            return Ok(());
        }
        let _ = self.latency_us.record(flight.submitted.elapsed().as_micros() as u64);
        if completion.status != TxStatus::Confirmed {
            *self.rejected.entry(completion.status.code().to_string()).or_default() += 1;
        }
        self.workload.settle(flight.sent, outcome(&completion.status));
        Ok(())
    }

    fn report(&self, args: &DemoOptions, label: &str, measured: &Measured) {
        let ceiling_tps = ceiling::sign_verify_2in2out_tps(Duration::from_millis(1500));
        let throughput_tps = self.workload.confirmed_payments() as f64 / measured.elapsed.as_secs_f64();
        let p50 = self.latency_us.value_at_quantile(0.50) as f64 / 1000.0;
        let p99 = self.latency_us.value_at_quantile(0.99) as f64 / 1000.0;
        let audit = &measured.audit;
        if args.json {
            let summary = serde_json::json!({
                "confirmed": self.workload.confirmed(),
                "confirmed_payments": self.workload.confirmed_payments(),
                "payments_submitted": measured.planned,
                "elapsed_s": measured.elapsed.as_secs_f64(),
                "throughput_tps": throughput_tps,
                "latency_ms_p50": p50,
                "latency_ms_p99": p99,
                "rejected": self.rejected,
                "checks": audit.checks,
                "sign_verify_ceiling_tps": ceiling_tps,
                "ratio_to_ceiling": throughput_tps / ceiling_tps,
                "minted": audit.minted,
                "redeemed": audit.redeemed,
                "wallet_balances": audit.wallet_balances,
                "wallet_outputs": audit.wallet_outputs,
                "wallet_outputs_in_uhs": audit.wallet_outputs_in_uhs,
                "spent_outputs": audit.spent_outputs,
                "spent_outputs_in_uhs": audit.spent_outputs_in_uhs,
                "uhs_ids": measured.info.uhs_ids,
                "shards": measured.info.shards,
                "shape": measured.info.shape,
                "backend": label,
                "wallets": args.wallets,
                "ledger_of_record_blocks": measured.ledger.as_ref().map(|l| l.blocks),
                "ledger_of_record_replays_to_uhs": measured.ledger.as_ref().map(|l| l.replays_to_uhs),
                "audit_ok": audit.ok(),
                "supply": measured.supply.as_ref().map(SupplyCheck::json),
            });
            println!("{summary}");
            return;
        }
        println!("specie demo: {label}, {} wallets", args.wallets);
        println!(
            "  payments     {} submitted, {} confirmed in {:.1} s = {throughput_tps:.0} tx/s",
            measured.planned,
            self.workload.confirmed_payments(),
            measured.elapsed.as_secs_f64()
        );
        println!("  latency      p50 {p50:.1} ms, p99 {p99:.1} ms");
        println!(
            "  ceiling      sign+verify of 2-in/2-out on all cores: {ceiling_tps:.0} tx/s; end to end is {:.0}% of it",
            100.0 * throughput_tps / ceiling_tps
        );
        if let Some(ledger) = &measured.ledger {
            println!(
                "  ledger       {} blocks of every confirmed transaction replay to exactly the shards' UHS  [{}]",
                ledger.blocks,
                if ledger.replays_to_uhs { "ok" } else { "FAILED" }
            );
        }
        self.report_audit(audit);
        if let Some(supply) = &measured.supply {
            supply.print();
        }
    }

    fn report_audit(&self, audit: &SupplyAudit) {
        let mark = |ok: bool| if ok { "ok" } else { "FAILED" };
        let c = &audit.checks;
        println!(
            "  rejected     {}",
            self.rejected
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
            mark(audit.rejections_ok())
        );
        println!(
            "  forged sigs  {} sent, {} rejected  [{}]",
            c.forged,
            c.forged_rejected,
            mark(c.forged == c.forged_rejected)
        );
        println!(
            "  supply       minted {} - redeemed {} = {}; wallets hold {}  [{}]",
            audit.minted,
            audit.redeemed,
            audit.minted - audit.redeemed,
            audit.wallet_balances,
            mark(audit.supply_ok())
        );
        println!(
            "  UHS          {}/{} wallet outputs present, {}/{} spent outputs present  [{}]",
            audit.wallet_outputs_in_uhs,
            audit.wallet_outputs,
            audit.spent_outputs_in_uhs,
            audit.spent_outputs,
            mark(audit.uhs_ok())
        );
        println!(
            "  audit        {}",
            if audit.ok() {
                "OK: no money was created or destroyed"
            } else {
                "FAILED"
            }
        );
    }
}
