//! The privacy capability's world, two protocols under one seed:
//!
//! - threshold endorsement ([`endorsement`]): the real FROST `Coordinator` and k of n real
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
//!   exactly one block and no other transaction is in any.

mod ceremony;
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
    /// Key generation ceremonies every participant finished with one key that signs.
    pub ceremonies_finished: u64,
    /// Ceremonies with an equivocating participant that no honest participant finished.
    pub ceremonies_caught_equivocating: u64,
    pub trace_digest: [u8; 32],
}

pub fn run_privacy(options: PrivacyOptions) -> Result<PrivacyReport, Violation> {
    let mut report = PrivacyReport::default();
    let mut trace = Sha256::new();
    endorsement::run(&options, &mut report, &mut trace)?;
    ceremony::run(&options, &mut report, &mut trace)?;
    ledger::run(&options, &mut report, &mut trace)?;
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
