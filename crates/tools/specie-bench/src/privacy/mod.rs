//! `specie bench privacy`: what the privacy levels cost, beside the raw primitives measured in
//! the same run.
//!
//! - Primitives, per CPU second of one core: a BIP-340 verification (what a transparent input
//!   costs), a confidential 2-output transfer's proofs verified alone and in a batch of 32
//!   (range, balance and auditor-validity proofs together), and a 2-in/2-out confidential
//!   transaction proven and signed by a wallet.
//! - Sentinel validation of 2-in/2-out transactions, transparent and confidential, per CPU
//!   second of one core and per second on all cores.
//! - The ledger of record's append rate: 2-in/2-out records sealed into blocks, encoded and
//!   appended with one fsync per block.
//! - The anonymous level, in clear and hidden ([`anonymous`]): the spend proof alone and in
//!   batches, proving in the wallet, and the sentinel's validation.
//! - The unlinkable level ([`unlinkable`]): the transfer proof alone and in batches, proving in
//!   the wallet, a certifier's share, and the sentinel's validation.
//! - The four levels' validation beside the paper's Table 2 and issue 38's targets.
//! - End to end on an embedded node (fsync on, ledger of record on): 2-in/2-out payments per
//!   second, transparent, confidential, anonymous, anonymous and confidential, and unlinkable, from
//!   submission to confirmation.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use secp256k1::Keypair;
use specie_api::TxStatus;
use specie_archiver::{LedgerLimits, LedgerOfRecord, Record};
use specie_codec::Encode;
use specie_confidential::{AuditorSecret, ConfidentialTransfer};
use specie_node::{CoreShape, EmbeddedNode, NodeHandle, NodeOptions};
use specie_private_transactions::{ConfidentialPlan, ConfidentialTransaction, PrivacyRules};
use specie_sentinel::{IssuerKeys, TrustedKeys};
use specie_transaction::signing::{schnorr_sign, schnorr_verify, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction,
};

use crate::ceiling::per_cpu_second;

mod anonymous;
mod unlinkable;
use crate::error::{BenchResult, StepContext};
use crate::fail;
use crate::submit::submit_all;
use anonymous::{AnonymousFigures, AnonymousPayments};
use unlinkable::{UnlinkableFigures, UnlinkablePayments};

pub struct PrivacyBenchOptions {
    /// How long each per-second figure is measured.
    pub measure_ms: u64,
    /// Payments of each level submitted end to end.
    pub payments: usize,
    pub json: bool,
}

/// Everything measured, in the units printed.
#[derive(serde::Serialize)]
struct Figures {
    bip340_verify_per_cpu_s: f64,
    transfer_proofs_verify_per_cpu_s: f64,
    transfer_proofs_batch32_verify_per_cpu_s: f64,
    confidential_prove_ms: f64,
    transparent_validate_per_cpu_s: f64,
    confidential_validate_per_cpu_s: f64,
    transparent_validate_all_cores_per_s: f64,
    confidential_validate_all_cores_per_s: f64,
    confidential_verify_ms: f64,
    ledger_append_records_per_s: f64,
    end_to_end_transparent_tps: f64,
    end_to_end_confidential_tps: f64,
    /// The same payments on a core in the atomizer shape (every transaction in a block).
    end_to_end_atomizer_transparent_tps: f64,
    end_to_end_atomizer_confidential_tps: f64,
    #[serde(flatten)]
    anonymous: AnonymousFigures,
    end_to_end_anonymous_tps: f64,
    end_to_end_anonymous_confidential_tps: f64,
    end_to_end_atomizer_anonymous_tps: f64,
    end_to_end_atomizer_anonymous_confidential_tps: f64,
    #[serde(flatten)]
    unlinkable: UnlinkableFigures,
    end_to_end_unlinkable_tps: f64,
    end_to_end_atomizer_unlinkable_tps: f64,
    cores: usize,
}

fn owner(key: &Keypair) -> [u8; 32] {
    witness_program_commitment(&xonly_bytes(key))
}

/// Two-output mints' worth of coins to `key`: `count` coins of 1000.
fn mint(issuer: &Keypair, key: &Keypair, count: usize, rng: &mut StdRng) -> Vec<SpecieTransaction> {
    let output = Output {
        witness_program_commitment: owner(key),
        value: 1_000,
    };
    (0..count.div_ceil(500))
        .map(|n| {
            let outputs = vec![output; (count - n * 500).min(500)];
            SpecieTransaction::Mint(MintTransaction::new_signed(
                rng.gen(),
                outputs,
                issuer,
                NonceMode::Randomized,
            ))
        })
        .collect()
}

fn transfer(coins: &[CreatedOutput], key: &Keypair, to: [u8; 32]) -> SpecieTransaction {
    let total: u64 = coins.iter().map(|c| c.output.value).sum();
    let mut tx = Transaction {
        inputs: coins.iter().map(CreatedOutput::to_input).collect(),
        outputs: vec![
            Output {
                witness_program_commitment: to,
                value: total / 3,
            },
            Output {
                witness_program_commitment: owner(key),
                value: total - total / 3,
            },
        ],
        witnesses: vec![],
    };
    tx.sign(&vec![*key; coins.len()], NonceMode::Randomized)
        .expect("the key owns the coins");
    SpecieTransaction::Transfer(tx)
}

/// A 2-in/2-out shielding of two coins: two notes to `key`.
fn shield_plan(coins: &[CreatedOutput], key: &Keypair, auditor: &AuditorSecret) -> ConfidentialPlan {
    ConfidentialPlan {
        transparent_inputs: coins.iter().map(CreatedOutput::to_input).collect(),
        confidential_inputs: vec![],
        outputs: vec![(owner(key), 700), (owner(key), 1_300)],
        transparent_outputs: vec![],
        auditors: vec![auditor.public()],
    }
}

/// Proves `plans` on all cores, each signed by `key`.
fn prove(
    plans: Vec<ConfidentialPlan>,
    key: &Keypair,
    seed: u64,
) -> Vec<(ConfidentialTransaction, Vec<specie_confidential::Opening>)> {
    plans
        .into_par_iter()
        .enumerate()
        .map(|(n, plan)| {
            let mut rng = StdRng::seed_from_u64(seed ^ n as u64);
            let keys = vec![*key; plan.transparent_inputs.len() + plan.confidential_inputs.len()];
            plan.prove_and_sign(&keys, NonceMode::Randomized, &mut rng)
                .expect("an honest plan proves")
        })
        .collect()
}

/// The 2-in/2-out confidential payments spending the notes of `shields`, two per payment.
fn pay_plans(
    shields: &[(ConfidentialTransaction, Vec<specie_confidential::Opening>)],
    to: [u8; 32],
    key: &Keypair,
    auditor: &AuditorSecret,
) -> Vec<ConfidentialPlan> {
    shields
        .iter()
        .map(|(tx, openings)| {
            let notes = tx.created_confidential_outputs();
            ConfidentialPlan {
                transparent_inputs: vec![],
                confidential_inputs: vec![(notes[0].to_input(), openings[0]), (notes[1].to_input(), openings[1])],
                outputs: vec![(to, 500), (owner(key), 1_500)],
                transparent_outputs: vec![],
                auditors: vec![auditor.public()],
            }
        })
        .collect()
}

pub fn run(options: &PrivacyBenchOptions) -> BenchResult<ExitCode> {
    let measure = Duration::from_millis(options.measure_ms);
    let mut rng = StdRng::seed_from_u64(7);
    let (issuer, alice, bob) = (
        Keypair::new_global(&mut rng),
        Keypair::new_global(&mut rng),
        Keypair::new_global(&mut rng),
    );
    let auditor = AuditorSecret::random(&mut rng);
    let payments = options.payments.max(1);
    if !options.json {
        eprintln!(
            "proving {payments} shieldings, {payments} confidential payments, {} anonymous entries and {payments} anonymous payments of each kind, {payments} unlinkable entries and payments for the runs (not measured)...",
            2 * payments
        );
    }
    // Coins for the end-to-end runs: 2 per transparent payment, 2 per shielding, 2 per
    // anonymous entry (one entry per anonymous payment), 2 per unlinkable entry.
    let mints = mint(&issuer, &alice, 10 * payments, &mut rng);
    let coins: Vec<CreatedOutput> = mints.iter().flat_map(SpecieTransaction::created_outputs).collect();
    let (for_transfers, rest) = coins.split_at(2 * payments);
    let (for_shields, rest) = rest.split_at(2 * payments);
    let (for_anonymous, for_unlinkable) = rest.split_at(4 * payments);
    let anonymous = AnonymousPayments::prove(for_anonymous, &alice, auditor.public(), &mut rng);
    let unlinkable = UnlinkablePayments::prove(for_unlinkable, &alice, &anonymous, &mut rng);
    let shields = prove(
        for_shields
            .chunks(2)
            .map(|c| shield_plan(c, &alice, &auditor))
            .collect(),
        &alice,
        rng.gen(),
    );
    let pays = prove(pay_plans(&shields, owner(&bob), &alice, &auditor), &alice, rng.gen());
    let transfers: Vec<SpecieTransaction> = for_transfers
        .chunks(2)
        .map(|c| transfer(c, &alice, owner(&bob)))
        .collect();
    let confidential: Vec<SpecieTransaction> = pays.iter().map(|(tx, _)| SpecieTransaction::from(tx.clone())).collect();

    let issuers = TrustedKeys::from(IssuerKeys::from_hex(&[hex::encode(xonly_bytes(&issuer))]).step("issuer key")?);
    let auditors = vec![auditor.public().to_bytes()];
    let privacy = PrivacyRules::new(auditors.clone(), None, vec![], vec![]);
    let trusted = issuers.clone().with_capability(std::sync::Arc::new(privacy));
    let figures = Figures {
        bip340_verify_per_cpu_s: bip340_per_cpu_s(measure),
        transfer_proofs_verify_per_cpu_s: {
            let (tx, _) = &pays[0];
            let context = tx.context();
            per_cpu_second(measure, || tx.proof.verify(&context).expect("valid"))
        },
        transfer_proofs_batch32_verify_per_cpu_s: batch_verify_per_cpu_s(&pays, measure),
        confidential_prove_ms: confidential_prove_ms(&shields[..1], (&alice, &bob), &auditor, measure),
        transparent_validate_per_cpu_s: per_cpu_second(measure, || {
            specie_sentinel::validate(&transfers[0], &trusted).expect("valid")
        }),
        confidential_validate_per_cpu_s: per_cpu_second(measure, || {
            specie_sentinel::validate(&confidential[0], &trusted).expect("valid")
        }),
        transparent_validate_all_cores_per_s: validate_all_cores(&transfers, &trusted, measure),
        confidential_validate_all_cores_per_s: validate_all_cores(&confidential, &trusted, measure),
        confidential_verify_ms: 0.0,
        ledger_append_records_per_s: ledger_append_per_s(&[mints.clone(), transfers.clone()].concat())?,
        end_to_end_transparent_tps: 0.0,
        end_to_end_confidential_tps: 0.0,
        end_to_end_atomizer_transparent_tps: 0.0,
        end_to_end_atomizer_confidential_tps: 0.0,
        anonymous: anonymous.measure(&issuers, auditors, measure),
        end_to_end_anonymous_tps: 0.0,
        end_to_end_anonymous_confidential_tps: 0.0,
        end_to_end_atomizer_anonymous_tps: 0.0,
        end_to_end_atomizer_anonymous_confidential_tps: 0.0,
        unlinkable: unlinkable.measure(&issuers, &anonymous, measure),
        end_to_end_unlinkable_tps: 0.0,
        end_to_end_atomizer_unlinkable_tps: 0.0,
        cores: rayon::current_num_threads(),
    };
    let mut figures = Figures {
        confidential_verify_ms: 1000.0 / figures.confidential_validate_per_cpu_s,
        ..figures
    };
    let payments = EndToEnd {
        issuer,
        auditor,
        mints,
        shields: shields.into_iter().map(|(tx, _)| SpecieTransaction::from(tx)).collect(),
        transfers,
        confidential,
        anonymous,
        unlinkable,
    };
    payments.run_both_shapes(&mut figures)?;
    report(&figures, options.json);
    Ok(ExitCode::SUCCESS)
}

/// A 2-in/2-out confidential payment of `shields`' notes from `alice` to `bob`, proven and signed.
fn confidential_prove_ms(
    shields: &[(ConfidentialTransaction, Vec<specie_confidential::Opening>)],
    (alice, bob): (&Keypair, &Keypair),
    auditor: &AuditorSecret,
    measure: Duration,
) -> f64 {
    let plan = pay_plans(shields, owner(bob), alice, auditor).remove(0);
    let mut prove_rng = StdRng::seed_from_u64(1);
    1000.0
        / per_cpu_second(measure, || {
            plan.prove_and_sign(&[*alice, *alice], NonceMode::Randomized, &mut prove_rng)
                .expect("proves");
        })
}

fn bip340_per_cpu_s(measure: Duration) -> f64 {
    let key = Keypair::new_global(&mut rand::thread_rng());
    let (public, _) = key.x_only_public_key();
    let message = [7u8; 32];
    let signature = schnorr_sign(&key, &message, NonceMode::Randomized);
    per_cpu_second(measure, || assert!(schnorr_verify(&public, &message, &signature)))
}

fn batch_verify_per_cpu_s(
    pays: &[(ConfidentialTransaction, Vec<specie_confidential::Opening>)],
    measure: Duration,
) -> f64 {
    let batch: Vec<(&ConfidentialTransfer, [u8; 32])> =
        pays.iter().take(32).map(|(tx, _)| (&tx.proof, tx.context())).collect();
    let size = batch.len() as f64;
    size * per_cpu_second(measure, || specie_confidential::verify_batch(&batch).expect("valid"))
}

/// Sentinel validation of `txs` (repeated) on all cores, per second of wall-clock time.
pub(crate) fn validate_all_cores(txs: &[SpecieTransaction], trusted: &TrustedKeys, measure: Duration) -> f64 {
    let started = Instant::now();
    let mut validated = 0usize;
    while started.elapsed() < measure {
        let verdicts = specie_sentinel::validate_batch(txs, trusted);
        assert!(
            verdicts.iter().all(Result::is_ok),
            "every benchmark transaction is valid"
        );
        validated += txs.len();
    }
    validated as f64 / started.elapsed().as_secs_f64()
}

/// Confirmed records of `txs` (mints first, so every spend is of a known output) offered to
/// the ledger, sealed into blocks of 1000, applied, encoded and appended with one fsync per
/// block: the archiver's work per confirmed transaction, records per second.
fn ledger_append_per_s(txs: &[SpecieTransaction]) -> BenchResult<f64> {
    let dir = tempfile::tempdir()?;
    let options = specie_log::LogOptions {
        record_bytes_max: 64 << 20,
        ..specie_log::LogOptions::default()
    };
    let (mut log, _) = specie_log::Log::open(dir.path(), options).step("cannot open a log")?;
    let mut ledger = LedgerOfRecord::new(LedgerLimits {
        block_records_max: 1_000,
        ..LedgerLimits::default()
    });
    let records: Vec<Record> = txs
        .iter()
        .map(|tx| Record::new(tx.clone(), &tx.compact()).expect("its own compact form"))
        .collect();
    let started = Instant::now();
    for record in records {
        ledger.offer(record);
    }
    while let Some(block) = ledger.seal() {
        ledger.apply(&block).expect("a sealed block extends the ledger");
        log.append_batch(&[block.encode()]).step("cannot append a block")?;
    }
    if ledger.waiting() > 0 {
        fail!("{} records were never sealed", ledger.waiting());
    }
    Ok(txs.len() as f64 / started.elapsed().as_secs_f64())
}

/// Submits `txs` and waits for every outcome; payments confirmed per second.
fn submit_measured(core: &NodeHandle, txs: Vec<SpecieTransaction>, what: &str) -> BenchResult<f64> {
    let count = txs.len();
    let started = Instant::now();
    let statuses = submit_all(core, txs)?;
    let elapsed = started.elapsed();
    if let Some(status) = statuses.iter().find(|s| **s != TxStatus::Confirmed) {
        fail!("a {what} payment was not confirmed: {}", status.code());
    }
    Ok(count as f64 / elapsed.as_secs_f64())
}

/// The payments of the end-to-end runs, proven once.
struct EndToEnd {
    issuer: Keypair,
    auditor: AuditorSecret,
    mints: Vec<SpecieTransaction>,
    shields: Vec<SpecieTransaction>,
    transfers: Vec<SpecieTransaction>,
    confidential: Vec<SpecieTransaction>,
    anonymous: AnonymousPayments,
    unlinkable: UnlinkablePayments,
}

impl EndToEnd {
    /// Both shapes in the same run, one after the other, on the same payments.
    fn run_both_shapes(&self, figures: &mut Figures) -> BenchResult<()> {
        [
            figures.end_to_end_transparent_tps,
            figures.end_to_end_confidential_tps,
            figures.end_to_end_anonymous_tps,
            figures.end_to_end_anonymous_confidential_tps,
            figures.end_to_end_unlinkable_tps,
        ] = self.run(CoreShape::TwoPhaseCommit)?;
        [
            figures.end_to_end_atomizer_transparent_tps,
            figures.end_to_end_atomizer_confidential_tps,
            figures.end_to_end_atomizer_anonymous_tps,
            figures.end_to_end_atomizer_anonymous_confidential_tps,
            figures.end_to_end_atomizer_unlinkable_tps,
        ] = self.run(CoreShape::Atomizer)?;
        Ok(())
    }

    /// On a fresh embedded node of `shape` with the ledger of record: the transparent payments,
    /// then the confidential ones (after their notes were shielded, not measured), then the
    /// anonymous ones in clear and hidden (after their entries, not measured), then the
    /// unlinkable ones (after theirs).
    fn run(&self, shape: CoreShape) -> BenchResult<[f64; 5]> {
        let dir = tempfile::tempdir()?;
        let mut options = NodeOptions::new(dir.path());
        options.issuers = vec![hex::encode(xonly_bytes(&self.issuer))];
        options.ledger_of_record = Some(true);
        options.shape = Some(shape);
        options.auditors = vec![self.auditor.public().to_bytes()];
        options.registration_authority = Some(self.anonymous.authority.clone());
        options.owner_auditors = vec![self.anonymous.owner_auditor.public()];
        options.certifiers = Some(self.unlinkable.group.clone());
        let node = EmbeddedNode::open(options).step("cannot start the embedded node")?;
        let core = node.handle();
        submit_measured(&core, self.mints.clone(), "mint")?;
        let transparent = submit_measured(&core, self.transfers.clone(), "transparent")?;
        submit_measured(&core, self.shields.clone(), "shielding")?;
        let confidential = submit_measured(&core, self.confidential.clone(), "confidential")?;
        submit_measured(&core, self.anonymous.entries.clone(), "anonymous entry")?;
        let anonymous = submit_measured(&core, self.anonymous.clear.clone(), "anonymous")?;
        let anonymous_confidential =
            submit_measured(&core, self.anonymous.hidden.clone(), "anonymous and confidential")?;
        submit_measured(&core, self.unlinkable.entries.clone(), "unlinkable entry")?;
        let unlinkable = submit_measured(&core, self.unlinkable.payments.clone(), "unlinkable")?;
        node.shutdown();
        Ok([transparent, confidential, anonymous, anonymous_confidential, unlinkable])
    }
}

fn report(figures: &Figures, json: bool) {
    if json {
        println!("{}", serde_json::to_string(figures).expect("figures serialize"));
        return;
    }
    let f = figures;
    println!("specie bench privacy ({} cores)", f.cores);
    println!("  primitives, one core");
    println!(
        "    BIP-340 verification                  {:>10.0} /s",
        f.bip340_verify_per_cpu_s
    );
    println!(
        "    confidential 2-output transfer proofs {:>10.0} /s verified alone, {:.0} /s in batches of 32 ({:.2}x)",
        f.transfer_proofs_verify_per_cpu_s,
        f.transfer_proofs_batch32_verify_per_cpu_s,
        f.transfer_proofs_batch32_verify_per_cpu_s / f.transfer_proofs_verify_per_cpu_s
    );
    println!(
        "    wallet: prove and sign 2-in/2-out     {:>10.1} ms   (target <= 20 ms; Go reference ~175 ms: {:.1}x faster)",
        f.confidential_prove_ms,
        175.0 / f.confidential_prove_ms
    );
    println!("  sentinel validation of 2-in/2-out");
    println!(
        "    transparent   {:>8.0} /s one core (one at a time), {:>8.0} /s on all cores (batches)",
        f.transparent_validate_per_cpu_s, f.transparent_validate_all_cores_per_s
    );
    println!(
        "    confidential  {:>8.0} /s one core (one at a time), {:>8.0} /s on all cores (proofs verified in batches); one at a time {:.2} ms each (target <= 5 ms; Go reference ~90 ms: {:.0}x faster)",
        f.confidential_validate_per_cpu_s,
        f.confidential_validate_all_cores_per_s,
        f.confidential_verify_ms,
        90.0 / f.confidential_verify_ms
    );
    println!(
        "    transparent costs {:.2} BIP-340 verifications; confidential {:.1}",
        f.bip340_verify_per_cpu_s / f.transparent_validate_per_cpu_s,
        f.bip340_verify_per_cpu_s / f.confidential_validate_per_cpu_s
    );
    println!(
        "  ledger of record: {:.0} records/s sealed, encoded and appended (one fsync per block of 1000)",
        f.ledger_append_records_per_s
    );
    f.anonymous.print();
    println!(
        "    anonymous costs {:.1} BIP-340 verifications; anonymous and confidential {:.1}",
        f.bip340_verify_per_cpu_s / f.anonymous.anonymous_validate_per_cpu_s,
        f.bip340_verify_per_cpu_s / f.anonymous.anonymous_confidential_validate_per_cpu_s
    );
    f.unlinkable.print();
    print_table_2(f);
    println!("  end to end (embedded node, fsync on, ledger on), payments/s");
    println!(
        "    2pc shape       {:>8.0} transparent, {:>8.0} confidential, {:>8.0} anonymous, {:>8.0} anonymous and confidential, {:>8.0} unlinkable",
        f.end_to_end_transparent_tps,
        f.end_to_end_confidential_tps,
        f.end_to_end_anonymous_tps,
        f.end_to_end_anonymous_confidential_tps,
        f.end_to_end_unlinkable_tps
    );
    println!(
        "    atomizer shape  {:>8.0} transparent, {:>8.0} confidential, {:>8.0} anonymous, {:>8.0} anonymous and confidential, {:>8.0} unlinkable   ({:.2}x, {:.2}x, {:.2}x, {:.2}x, {:.2}x of 2pc)",
        f.end_to_end_atomizer_transparent_tps,
        f.end_to_end_atomizer_confidential_tps,
        f.end_to_end_atomizer_anonymous_tps,
        f.end_to_end_atomizer_anonymous_confidential_tps,
        f.end_to_end_atomizer_unlinkable_tps,
        f.end_to_end_atomizer_transparent_tps / f.end_to_end_transparent_tps,
        f.end_to_end_atomizer_confidential_tps / f.end_to_end_confidential_tps,
        f.end_to_end_atomizer_anonymous_tps / f.end_to_end_anonymous_tps,
        f.end_to_end_atomizer_anonymous_confidential_tps / f.end_to_end_anonymous_confidential_tps,
        f.end_to_end_atomizer_unlinkable_tps / f.end_to_end_unlinkable_tps
    );
}

/// The paper's Table 2 (execution latency of one transaction's proofs, ms) and issue 38's
/// targets per level, against this run's validation of one 2-in/2-out transaction on one core:
/// alone, and in the sentinel's batches (all cores' rate divided by the cores).
fn print_table_2(f: &Figures) {
    let per_core_batched = |all_cores_per_s: f64| 1000.0 * f.cores as f64 / all_cores_per_s;
    let rows = [
        (
            "transparent (no privacy)",
            f.transparent_validate_per_cpu_s,
            f.transparent_validate_all_cores_per_s,
            0.3,
            None,
        ),
        (
            "anonymous",
            f.anonymous.anonymous_validate_per_cpu_s,
            f.anonymous.anonymous_validate_all_cores_per_s,
            4.2,
            Some(2.0),
        ),
        (
            "anonymous and confidential",
            f.anonymous.anonymous_confidential_validate_per_cpu_s,
            f.anonymous.anonymous_confidential_validate_all_cores_per_s,
            13.6,
            Some(7.0),
        ),
        (
            "unlinkable",
            f.unlinkable.unlinkable_validate_per_cpu_s,
            f.unlinkable.unlinkable_validate_all_cores_per_s,
            19.7,
            Some(10.0),
        ),
    ];
    println!("  the four levels beside the paper's Table 2: validating one 2-in/2-out transaction, ms of one core");
    println!("    level                          alone   batched   paper   target   batched/target   paper/batched");
    for (level, alone_per_s, all_cores_per_s, paper_ms, target_ms) in rows {
        let batched = per_core_batched(all_cores_per_s);
        let target = target_ms.map_or("     -".to_string(), |t: f64| format!("{t:>6.1}"));
        let ratio = target_ms.map_or("        -".to_string(), |t| format!("{:>9.2}", batched / t));
        println!(
            "    {level:<28} {:>7.2} {:>9.2} {paper_ms:>7.1}   {target}   {ratio}        {:>8.1}x",
            1000.0 / alone_per_s,
            batched,
            paper_ms / batched
        );
    }
}
