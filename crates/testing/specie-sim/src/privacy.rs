//! The privacy capability's world, its protocols under one seed:
//!
//! - threshold endorsement ([`endorsement`]): the real FROST `Aggregator` and k of n real
//!   `Endorser`s, some of them compromised (they sign anything) and some restarted (losing their
//!   sessions), on a network that drops, duplicates, delays and reorders messages, endorsing a workload of authorised and forged
//!   transactions. Checked: a forged transaction never gets an endorsement, every endorsement
//!   verifies under the group key for its own transaction's digest and for no other, and once the
//!   network stops dropping, every authorised transaction (submitted again if it failed) is
//!   endorsed;
//! - the sentinels' key generation ([`ceremony`]) as a cluster runs it: every participant's real
//!   `Ceremony`, messages resent until taken, duplicated, delayed and reordered, sometimes one
//!   participant equivocating. Checked: honest participants all finish with one group key whose
//!   k shares sign, or, with an equivocator, none finishes;
//! - the ledger of record's reconciliation ([`ledger`]): the embedded node's archiver writing
//!   records ahead, a model UHS committing some of them in order and refusing conflicting spends,
//!   blocks sealed at random moments, and crashes that lose the archiver's memory, after which the
//!   records written ahead are decided by the UHS exactly as the node does. Checked: after every
//!   recovery, the blocks replay from genesis to the model UHS, every committed transaction is in
//!   exactly one block and no other transaction is in any;
//! - the ledger of record as a cluster's archiver group keeps it ([`archiver`]): the real
//!   replicated `Archiver` role on the simulated host, crashing and restarting from its log as a
//!   new leader; sentinels writing batches ahead, a compromised one submitting forged compact
//!   forms of what was written; the ordering leader's gate asking the role what is written ahead,
//!   the model UHS deciding what passes (double spends and twins refused), and the ordering
//!   leader reporting the outcomes, except when it dies, reports only some, or reports late; the
//!   archiver leader's driver asking for the stale records, reading the model UHS and handing the
//!   evidence back at random moments; seals from the role's timer. Checked at every step: every
//!   honest batch written ahead passes the gate and no forgery does, the role's invariants, the
//!   blocks chain and hold only committed transactions, each once, and none is lost in a
//!   restart; once settled: nothing undecided or waiting, the ledger replays to the model UHS,
//!   every committed transaction is in exactly one block, and a replica restored from the role's
//!   snapshot has the same head;
//! - the unlinkable level's certification and serial numbers ([`certification`]): a certifier
//!   group with fewer than k compromised certifiers, answers dropped and duplicated, a forger
//!   asking for tokens the ledger never held, spends tried twice. Checked: no certificate for a
//!   token not in the ledger, every certificate verifies, every token in the ledger certified
//!   once healed, and every second spend meets its serial number's id.

mod archiver;
mod ceremony;
mod certification;
mod endorsement;
mod ledger;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};

use crate::Violation;

#[derive(Clone, Debug)]
pub struct PrivacyOptions {
    pub seed: u64,
    /// n: the endorser group's size.
    pub endorsers: u16,
    /// k: the signatures a transaction needs, a majority of n.
    pub threshold: u16,
    /// Endorsers that sign anything, at least one and fewer than k (at most n − k, so the honest
    /// ones can still refuse a forgery out of every batch).
    pub compromised: u16,
    /// Transactions submitted for endorsement.
    pub endorsement_transactions: u64,
    pub forged_per_mille: u32,
    /// Drops while the network is faulty; it stops dropping once every transaction was submitted.
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    pub delay_ms_max: u64,
    /// Endorser restarts per submitted transaction while the network is faulty.
    pub endorser_restart_per_mille: u32,
    /// The most transactions in one endorsement batch.
    pub batch_transactions_max: usize,
    /// Steps of the ledger-of-record model.
    pub ledger_steps: u64,
    pub double_spend_per_mille: u32,
    pub submitted_twice_per_mille: u32,
    pub seal_per_mille: u32,
    pub crash_per_mille: u32,
    /// The most records in one block of the ledger of record.
    pub block_records_max: usize,
    /// A planted bug: after a crash, the records written ahead but in no block are not decided by
    /// the UHS, so the transactions whose outcomes the crash lost never reach a block. The world
    /// must report it.
    pub skip_reconciliation: bool,
    /// Steps of the replicated archiver's part.
    pub archiver_steps: u64,
    pub archiver_seal_interval_ms: u64,
    pub archiver_decide_after_ms: u64,
    /// The role's bound on undecided records: beyond it, write-aheads are answered `Busy`.
    pub archiver_undecided_max: usize,
    /// The most records in one write-ahead, one report, one evidence round.
    pub archiver_batch_records_max: usize,
    /// The ledger's waiting room as configured (the role makes it at least `undecided_max`).
    pub archiver_waiting_records_max: usize,
    /// Ordering leaders that die once the UHS decided a submission, before reporting anything.
    pub ordering_leader_dies_per_mille: u32,
    /// Ordering leaders that report only some outcomes (the others dropped in a failover).
    pub ordering_leader_partial_per_mille: u32,
    /// Reports that reach the archiver some steps late.
    pub report_late_per_mille: u32,
    /// Steps at which the leader's driver takes its next step.
    pub archiver_reconcile_per_mille: u32,
    pub archiver_crash_per_mille: u32,
    /// A planted bug: the leader's driver hands back no evidence (the shards hold none of the ids
    /// asked about), so committed transactions whose outcome no ordering leader reported are
    /// decided as not committed and never reach a block. The world must report it.
    pub archiver_ignores_evidence: bool,
    /// Batches after whose write-ahead a compromised sentinel submits a forged compact form of
    /// one of them: under its txid (its inputs, other outputs), or under a txid never written.
    pub sentinel_forges_per_mille: u32,
    /// A planted bug: the ordering leader does not ask the archiver what is written ahead, so a
    /// forgery is ordered and the ledger of record misses what the UHS committed. The world
    /// must report it.
    pub ordering_skips_ledger_gate: bool,
}

impl PrivacyOptions {
    pub fn from_seed(seed: u64) -> PrivacyOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_9e1f);
        let endorsers = rng.gen_range(3..=7u16);
        // A majority, and short of everyone so that at least one endorser can be compromised.
        let threshold = rng.gen_range(endorsers / 2 + 1..endorsers);
        let compromised = rng.gen_range(1..=endorsers - threshold);
        PrivacyOptions {
            seed,
            endorsers,
            threshold,
            compromised,
            endorsement_transactions: rng.gen_range(10..=30),
            forged_per_mille: rng.gen_range(100..=300),
            drop_per_mille: rng.gen_range(0..=200),
            duplicate_per_mille: rng.gen_range(0..=150),
            delay_ms_max: rng.gen_range(1..=20),
            endorser_restart_per_mille: rng.gen_range(0..=100),
            batch_transactions_max: rng.gen_range(2..=8),
            ledger_steps: rng.gen_range(20..=60),
            double_spend_per_mille: rng.gen_range(50..=250),
            submitted_twice_per_mille: rng.gen_range(0..=150),
            seal_per_mille: rng.gen_range(100..=500),
            crash_per_mille: rng.gen_range(20..=120),
            block_records_max: rng.gen_range(1..=6),
            skip_reconciliation: false,
            archiver_steps: rng.gen_range(20..=50),
            archiver_seal_interval_ms: rng.gen_range(50..=400),
            archiver_decide_after_ms: rng.gen_range(200..=1_500),
            archiver_undecided_max: rng.gen_range(12..=64),
            archiver_batch_records_max: rng.gen_range(1..=64),
            archiver_waiting_records_max: rng.gen_range(1..=64),
            ordering_leader_dies_per_mille: rng.gen_range(50..=250),
            ordering_leader_partial_per_mille: rng.gen_range(50..=250),
            report_late_per_mille: rng.gen_range(0..=200),
            archiver_reconcile_per_mille: rng.gen_range(100..=500),
            archiver_crash_per_mille: rng.gen_range(20..=120),
            archiver_ignores_evidence: false,
            // Drawn last, so that every option before it is what the seed always gave.
            sentinel_forges_per_mille: rng.gen_range(50..=300),
            ordering_skips_ledger_gate: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrivacyReport {
    /// Transactions endorsed (each once, however often it was submitted).
    pub endorsed: u64,
    /// Forged transactions refused by enough honest endorsers.
    pub forged_refused: u64,
    /// Submissions answered `Failed` (too few shares through the lossy network).
    pub endorsement_failures: u64,
    /// Transactions submitted again after a failure, once the network stopped dropping.
    pub resubmitted: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    pub endorser_restarts: u64,
    /// Ledger transactions the model UHS committed.
    pub committed: u64,
    /// Ledger transactions the model UHS refused (a spend of what is not unspent).
    pub refused: u64,
    /// Transactions written ahead that never reached the shards before a crash.
    pub lost_in_crash: u64,
    pub blocks: u64,
    pub crashes: u64,
    /// Records a recovery found committed by the UHS (their outcome was lost in the crash).
    pub reconciled: u64,
    /// Replicated archiver: transactions the model UHS committed and refused.
    pub archiver_committed: u64,
    pub archiver_refused: u64,
    /// Transactions whose write-ahead was answered `Busy` or by no leader (never submitted).
    pub archiver_not_written: u64,
    /// Outcomes no ordering leader reported (dead, dropped, or no archiver leader to take them).
    pub archiver_outcomes_lost: u64,
    /// Forged compact forms a compromised sentinel submitted, refused at the ledger's gate.
    pub archiver_forgeries_refused: u64,
    /// Records the UHS decided (`ArchiverReport::Settled`), committed and not.
    pub archiver_settled_committed: u64,
    pub archiver_settled_not_committed: u64,
    pub archiver_waiting_room_full: u64,
    /// Evidence handed back by the leader's driver.
    pub archiver_evidence_rounds: u64,
    pub archiver_blocks: u64,
    pub archiver_crashes: u64,
    /// Key generation ceremonies every participant finished with one key that signs.
    pub ceremonies_finished: u64,
    /// Ceremonies with an equivocating participant that no honest participant finished.
    pub ceremonies_caught_equivocating: u64,
    /// Unlinkable tokens certified (each once).
    pub certificates: u64,
    /// Certification attempts that gathered too few shares through the lossy network.
    pub certification_retries: u64,
    /// Certification requests for tokens the ledger never held, refused.
    pub uncertified_refused: u64,
    /// Second spends of a token, refused as a serial number's id that exists.
    pub double_spends_refused: u64,
    pub trace_digest: [u8; 32],
}

pub fn run_privacy(options: PrivacyOptions) -> Result<PrivacyReport, Violation> {
    let mut report = PrivacyReport::default();
    let mut trace = Sha256::new();
    endorsement::run(&options, &mut report, &mut trace)?;
    ceremony::run(&options, &mut report, &mut trace)?;
    ledger::run(&options, &mut report, &mut trace)?;
    archiver::run(&options, &mut report, &mut trace)?;
    certification::run(&options, &mut report, &mut trace)?;
    report.trace_digest = trace.finalize().into();
    Ok(report)
}

fn violation(options: &PrivacyOptions, step: u64, message: impl Into<String>) -> Violation {
    Violation {
        seed: options.seed,
        step,
        message: format!("privacy world: {}", message.into()),
    }
}

fn chance(rng: &mut StdRng, per_mille: u32) -> bool {
    rng.gen_range(0..1000) < per_mille
}
