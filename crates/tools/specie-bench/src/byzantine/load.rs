//! A committee of authorities on durable embedded hosts under a closed loop of transfer orders,
//! then of confirmation orders: orders per second and CPU per order per authority.

use std::path::Path;
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use rayon::prelude::*;
use specie_authority::{Funding, Reply};
use specie_committee::{Answer, AuthorityBooks, Behaviour, Call, EmbeddedCommittee, EmbeddedCommitteeOptions};
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Recipient, SignedOrder, SigningKey, TransferOrder, Vote,
};
use specie_log::{LogOptions, SyncMode};

use crate::cpu::{CpuClock, CpuUsed};
use crate::error::{BenchResult, StepContext};
use crate::{ensure_that, fail};

/// FastPay's smallest Byzantine-tolerant committee (f = 1), as the reference measures it.
pub(crate) const AUTHORITIES: usize = 4;
/// Fail rather than hang if no answer comes for this long.
const STALL: Duration = Duration::from_secs(60);
/// After a phase's last answer, credits and acknowledgements between shards may still flow:
/// the CPU clock is read this much later (the phase's time is not).
const SETTLE_AFTER_PHASE: Duration = Duration::from_millis(200);
/// Each account's funding: enough for the one order of amount 1 it sends.
const FUNDING_AMOUNT: u64 = 10;
/// Fundings in flight while accounts are set up.
const FUNDING_WINDOW: usize = 4096;
/// The hosts' snapshot threshold, as the embedded node's (no snapshot is due in a run this size).
const SNAPSHOT_LOG_BYTES: u64 = 256 * 1024 * 1024;
/// Longer than any run: a credit between shards is acknowledged long before it is resent.
const CREDIT_RETRANSMIT_MS: u64 = 1_000;

/// Where and how the committee runs.
#[derive(Clone, Debug)]
pub(crate) struct CommitteeSetup {
    pub shards: u32,
    pub fsync: bool,
}

impl CommitteeSetup {
    /// Starts `AUTHORITIES` authorities × `shards` shards over fresh logs in `dir`.
    pub fn start(&self, dir: &Path, behaviours: Vec<Behaviour>) -> BenchResult<EmbeddedCommittee> {
        let options = EmbeddedCommitteeOptions {
            data_dir: dir.to_path_buf(),
            shards: self.shards,
            behaviours,
            log: LogOptions {
                sync: if self.fsync { SyncMode::Fsync } else { SyncMode::None },
                ..LogOptions::default()
            },
            snapshot_log_bytes: SNAPSHOT_LOG_BYTES,
            credit_retransmit_ms: CREDIT_RETRANSMIT_MS,
            channel_credits_max: usize::MAX,
        };
        let keys: Vec<SigningKey> = (0..AUTHORITIES as u64)
            .map(|n| deterministic_key("bench-authority", n))
            .collect();
        EmbeddedCommittee::start(&options, &keys, 1).step("cannot start the committee")
    }
}

/// Account owners' keys, made in parallel (not measured).
pub(crate) struct Owners {
    pub keys: Vec<SigningKey>,
    pub accounts: Vec<AccountKey>,
}

impl Owners {
    pub fn new(label: &str, count: usize) -> Owners {
        let keys: Vec<SigningKey> = (0..count as u64)
            .into_par_iter()
            .map(|n| deterministic_key(label, n))
            .collect();
        let accounts = keys.iter().map(|k| AccountKey(k.verifying_key().to_bytes())).collect();
        Owners { keys, accounts }
    }

    /// One order of amount 1 from each account to the next one (so about half the payments
    /// cross shards, with credits between them), signed in parallel (the client's cost, not
    /// measured).
    pub fn orders(&self) -> Vec<SignedOrder> {
        let count = self.accounts.len();
        (0..count)
            .into_par_iter()
            .map(|n| {
                TransferOrder {
                    sender: self.accounts[n],
                    recipient: Recipient::Account(self.accounts[(n + 1) % count]),
                    amount: 1,
                    sequence: 0,
                    memo: Vec::new(),
                }
                .sign(&self.keys[n])
            })
            .collect()
    }

    /// Funds every account at the authorities that answer (`answering` of them).
    pub fn fund(&self, committee: &EmbeddedCommittee, answering: usize) -> BenchResult<()> {
        let calls: Vec<Call> = self
            .accounts
            .iter()
            .map(|account| {
                Call::Fund(Funding {
                    id: account.0,
                    account: *account,
                    amount: FUNDING_AMOUNT,
                })
            })
            .collect();
        drive(committee, &calls, FUNDING_WINDOW, answering, |answer| {
            match answer.reply {
                Reply::Funded { .. } => Ok(()),
                other => fail!("authority {} refused a funding: {other:?}", answer.authority),
            }
        })?;
        Ok(())
    }
}

/// Sends each call to every authority, keeping `window` calls in flight; a call is done when
/// `answering` authorities have answered it. `on_answer` sees every answer (its tag is the
/// call's index). Returns the time from the first send to the last answer.
pub(crate) fn drive(
    committee: &EmbeddedCommittee,
    calls: &[Call],
    window: usize,
    answering: usize,
    mut on_answer: impl FnMut(Answer) -> BenchResult<()>,
) -> BenchResult<Duration> {
    ensure_that!(window > 0, "the window must be positive");
    let (reply_to, answers) = unbounded();
    let mut answered = vec![0usize; calls.len()];
    let (mut sent, mut done) = (0usize, 0usize);
    let started = Instant::now();
    while done < calls.len() {
        while sent < calls.len() && sent - done < window {
            committee.broadcast(&calls[sent], sent as u64, &reply_to);
            sent += 1;
        }
        let first = answers
            .recv_timeout(STALL)
            .with_step(|| format!("no answer for {STALL:?} with {done} of {} calls done", calls.len()))?;
        for answer in std::iter::once(first).chain(answers.try_iter()) {
            let tag = answer.tag as usize;
            answered[tag] += 1;
            if answered[tag] == answering {
                done += 1;
            }
            on_answer(answer)?;
        }
    }
    Ok(started.elapsed())
}

/// One phase of the load: every order sent to every authority, all answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    pub orders: usize,
    pub seconds: f64,
    /// From the phase's first send until shortly after its last answer.
    pub cpu: CpuUsed,
}

impl Phase {
    /// Orders the whole committee completed per second (every authority answered each).
    pub fn orders_per_s(&self) -> f64 {
        self.orders as f64 / self.seconds
    }

    /// CPU of everything but the driving thread (the authorities' shard threads), per order and
    /// per authority.
    pub fn cpu_us_per_order_per_authority(&self) -> f64 {
        self.cpu.others_s() * 1e6 / (self.orders * AUTHORITIES) as f64
    }

    /// The driving thread's CPU (sending orders, collecting answers) per order.
    pub fn driver_cpu_us_per_order(&self) -> f64 {
        self.cpu.this_thread_s * 1e6 / self.orders as f64
    }
}

/// What [`measure_load`] measured.
#[derive(Clone, Debug)]
pub(crate) struct LoadFigures {
    pub transfer: Phase,
    pub confirm: Phase,
    /// Keys, fundings and signed orders made before the first phase.
    pub setup_seconds: f64,
}

/// Funds `orders` accounts, then sends one transfer order from each to every authority (until
/// all four votes are back), then the final certificates those votes make (every authority's
/// round-0 prepare: the fast path).
pub(crate) fn measure_load(
    setup: &CommitteeSetup,
    dir: &Path,
    orders: usize,
    window: usize,
) -> BenchResult<LoadFigures> {
    ensure_that!(orders >= 2, "at least 2 orders (each pays the next account)");
    let started = Instant::now();
    let committee = setup.start(dir, vec![Behaviour::Honest; AUTHORITIES])?;
    let owners = Owners::new("bench-account", orders);
    owners.fund(&committee, AUTHORITIES)?;
    let signed = owners.orders();
    let setup_seconds = started.elapsed().as_secs_f64();

    let (transfer, votes) = transfer_phase(&committee, &signed, window)?;
    let certificates: Vec<Call> = signed
        .into_iter()
        .zip(&votes)
        .map(|(order, votes)| Call::Confirm(Certificate::from_votes(order, votes)))
        .collect();
    let confirm = timed_phase(orders, || {
        drive(&committee, &certificates, window, AUTHORITIES, |answer| {
            match answer.reply {
                Reply::Confirmed { .. } => Ok(()),
                other => fail!("authority {} refused a certificate: {other:?}", answer.authority),
            }
        })
    })?;
    audit(committee, orders)?;
    Ok(LoadFigures {
        transfer,
        confirm,
        setup_seconds,
    })
}

/// Every order to every authority; each order's votes in the order they arrived.
fn transfer_phase(
    committee: &EmbeddedCommittee,
    orders: &[SignedOrder],
    window: usize,
) -> BenchResult<(Phase, Vec<Vec<Vote>>)> {
    let calls: Vec<Call> = orders.iter().cloned().map(Call::Transfer).collect();
    let mut votes: Vec<Vec<Vote>> = vec![Vec::with_capacity(AUTHORITIES); orders.len()];
    let phase = timed_phase(orders.len(), || {
        drive(committee, &calls, window, AUTHORITIES, |answer| match answer.reply {
            Reply::Voted(vote) => {
                votes[answer.tag as usize].push(vote);
                Ok(())
            }
            other => fail!("authority {} refused a transfer order: {other:?}", answer.authority),
        })
    })?;
    Ok((phase, votes))
}

/// Runs a phase and reads its time and CPU (the CPU a little after, see [`SETTLE_AFTER_PHASE`]).
fn timed_phase(orders: usize, run: impl FnOnce() -> BenchResult<Duration>) -> BenchResult<Phase> {
    let clock = CpuClock::now();
    let elapsed = run()?;
    std::thread::sleep(SETTLE_AFTER_PHASE);
    Ok(Phase {
        orders,
        seconds: elapsed.as_secs_f64(),
        cpu: clock.used(),
    })
}

/// Audits every authority's books as its shards stopped: balances plus credits still between
/// shards equal what came in less what left, and every funding was credited.
pub(crate) fn audit(committee: EmbeddedCommittee, accounts: usize) -> BenchResult<()> {
    let reports = committee.reports();
    ensure_that!(reports.is_empty(), "the authorities reported {reports:?}");
    for (authority, shards) in committee.stop().iter().enumerate() {
        let books = AuthorityBooks::of(shards);
        ensure_that!(
            books.balanced(),
            "authority {authority}'s books do not balance: {books:?}"
        );
        ensure_that!(
            books.funded == u128::from(FUNDING_AMOUNT) * accounts as u128,
            "authority {authority} holds {} funded, not {accounts} fundings of {FUNDING_AMOUNT}",
            books.funded
        );
    }
    Ok(())
}
