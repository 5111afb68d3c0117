//! `specie bench offline`: offline cash's authority and devices measured on this machine, beside
//! the Ed25519 ceilings measured in the same run and the prototype's figure (seed 001, Table I:
//! 5,143 deposited tokens/s with 3-signature chains on one thread).
//!
//! One run measures, in this order:
//! 1. the ceilings: strict single verifications, batch verification (as many signatures per
//!    batch as the authority's batches hold at most) and signing, per second of one core's CPU
//!    time, and batch verification on all cores by the wall clock;
//! 2. the authority's deposit path in memory, on one thread and on every core: `--tokens` tokens
//!    with 3-signature chains (the issuance, one hop, the deposit statement), handed to the real
//!    role in turns of [`DEPOSITS_PER_TURN`] as a host hands them, every proposed deposit applied
//!    (the token's tree, the books). Once defunded (checks, and the payout signed) and once
//!    re-issued (checks, and the new token signed); the process's CPU time per deposit beside;
//! 3. low load: deposits handed in one per turn, the process's CPU time per deposit (target:
//!    at most [`LOW_LOAD_CPU_RATIO_MAX`] times its value on every core at peak);
//! 4. the same deposits through the embedded host over a real log with fsync (one append and one
//!    fsync per turn);
//! 5. a device-to-device payment: the payer signs the hop, the payee checks the whole chain
//!    strictly (its issuance, the new owner's certificate, the hop).
//!
//! The authority checks its own issuance and certificates by looking them up, so a token with a
//! 3-signature chain costs it two signature checks; the target (issue 33) is
//! [`CEILING_TARGET_SHARE`] of what the batch ceiling allows for two signatures per token, on one
//! core and on all. Every deposit also costs the authority one signature (the payout, or the
//! re-issued token), which that ceiling leaves out; the report gives the ceiling that counts it
//! as well, computed from the same run's sign and batch-verify ceilings.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use rayon::prelude::*;
use specie_host::{EmbeddedHost, HostMessage, SimEvent, SimHost, Wiring};
use specie_log::LogOptions;
use specie_offline::{
    deterministic_key, Denominations, Instruction, KeyBinding, KeyCertificate, KeyRing, Move, PublicKey, SignedMove,
    Token,
};
use specie_offline_authority::{
    AuthorityKeys, DepositOutcome, Funding, Input, OfflineAuthority, Reply, Report, DEPOSITS_PER_BATCH,
    TOKENS_PER_FUNDING_MAX,
};
use specie_role::Ticket;
use specie_service::{CoreTransactions, PayTo};
use specie_wallet::CORE_FORMAT;

use crate::ceiling::per_cpu_second;
use crate::cpu::CpuClock;
use crate::ensure_that;
use crate::error::{BenchResult, StepContext};

/// The prototype's authority: deposited tokens with 3-signature chains per second, one thread.
const PROTOTYPE_TOKENS_PER_S: f64 = 5_143.0;
/// specie's targets: this multiple of the prototype on one thread…
const PER_THREAD_TARGET_RATIO: f64 = 4.0;
/// …and this share of the batch-verification ceiling, on one core and on all (issue 33)…
const CEILING_TARGET_SHARE: f64 = 0.8;
/// …and at low load at most this multiple of the CPU time per deposit at peak.
const LOW_LOAD_CPU_RATIO_MAX: f64 = 2.0;
/// Deposits handed in one per turn for the low-load figure, at most.
const LOW_LOAD_DEPOSITS_MAX: usize = 2_000;
/// Signatures the authority checks per token with a 3-signature chain (the hop and the deposit).
const SIGNATURES_PER_TOKEN: f64 = 2.0;
/// Deposits handed to the role before its outputs are polled: one host turn.
const DEPOSITS_PER_TURN: usize = 256;
/// Signatures per batch in the batch ceiling: what the authority's batches of deposits hold (two
/// signatures checked per token).
const CEILING_BATCH: usize = DEPOSITS_PER_BATCH * SIGNATURES_PER_TOKEN as usize;
/// The denomination every benchmark token has (one issuing key's).
const VALUE: u64 = 50_000;
/// One-time keys on each side: first owners, payees, re-issue owners.
const KEYS_PER_SIDE: usize = 64;

/// What `specie bench offline` runs.
#[derive(Clone, Debug)]
pub struct OfflineOptions {
    pub tokens: usize,
    pub ceiling_seconds: f64,
    pub payments: usize,
    pub json: bool,
}

/// Operations per second.
#[derive(Clone, Copy, Debug, Default)]
struct Ceilings {
    verify_strict_per_s: f64,
    batch_verify_per_s: f64,
    sign_per_s: f64,
    batch_verify_all_cores_per_s: f64,
}

impl Ceilings {
    /// Deposits per second the batch ceiling allows at two signature checks per token: on one
    /// core, and on all.
    fn deposits_one_core_per_s(&self) -> f64 {
        self.batch_verify_per_s / SIGNATURES_PER_TOKEN
    }

    fn deposits_all_cores_per_s(&self) -> f64 {
        self.batch_verify_all_cores_per_s / SIGNATURES_PER_TOKEN
    }

    /// The same, with the one signature the authority makes per deposit counted too (a
    /// defund's payout, a re-issue's token): two batch checks and a signature per token on one
    /// core, scaled to all cores as batch verification scaled in this run.
    fn deposits_with_signing_one_core_per_s(&self) -> f64 {
        1.0 / (SIGNATURES_PER_TOKEN / self.batch_verify_per_s + 1.0 / self.sign_per_s)
    }

    fn deposits_with_signing_all_cores_per_s(&self) -> f64 {
        self.deposits_with_signing_one_core_per_s() * self.batch_verify_all_cores_per_s / self.batch_verify_per_s
    }
}

/// One run of deposits through the role in memory.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    per_s: f64,
    /// The whole process's CPU time per deposit: every thread, a pool's idle ones included.
    cpu_us_per_deposit: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Rates {
    defunded: Run,
    reissued: Run,
}

#[derive(Clone, Debug)]
struct OfflineReport {
    cores: usize,
    ceilings: Ceilings,
    one_thread: Rates,
    all_cores: Rates,
    /// Defunds handed in one per turn, on every core.
    low_load: Run,
    durable_per_s: f64,
    payment_us_p50: f64,
    payment_us_p99: f64,
}

impl OfflineReport {
    /// CPU time per deposit at low load over its value on every core at peak.
    fn low_load_cpu_ratio(&self) -> f64 {
        self.low_load.cpu_us_per_deposit / self.all_cores.defunded.cpu_us_per_deposit
    }
}

/// `specie bench offline`.
pub fn run(options: OfflineOptions) -> BenchResult<ExitCode> {
    let report = measure(&options, |step| {
        if !options.json {
            eprintln!("{step}");
        }
    })?;
    match options.json {
        true => println!("{}", json(&report)),
        false => print!("{}", table(&report)),
    }
    Ok(ExitCode::SUCCESS)
}

fn measure(options: &OfflineOptions, say: impl Fn(&str)) -> BenchResult<OfflineReport> {
    let cores = rayon::current_num_threads();
    say("ceilings …");
    let ceilings = measure_ceilings(options.ceiling_seconds);
    say("preparing tokens …");
    let setup = Setup::new(options.tokens)?;
    let pool = |threads: usize| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .step("a thread pool")
    };
    let rates = |threads: usize| -> BenchResult<Rates> {
        let pool = pool(threads)?;
        Ok(Rates {
            defunded: pool.install(|| setup.deposit_in_memory(false, DEPOSITS_PER_TURN, usize::MAX))?,
            reissued: pool.install(|| setup.deposit_in_memory(true, DEPOSITS_PER_TURN, usize::MAX))?,
        })
    };
    say("the authority on one thread …");
    let one_thread = rates(1)?;
    say("the authority on every core …");
    let all_cores = rates(cores)?;
    say("the authority at low load (one deposit per turn) …");
    let low_load = pool(cores)?.install(|| setup.deposit_in_memory(false, 1, LOW_LOAD_DEPOSITS_MAX))?;
    say("the authority on the embedded host, fsync on …");
    let durable_per_s = setup.deposit_durably()?;
    say("device-to-device payments …");
    let (payment_us_p50, payment_us_p99) = setup.payments(options.payments);
    Ok(OfflineReport {
        cores,
        ceilings,
        one_thread,
        all_cores,
        low_load,
        durable_per_s,
        payment_us_p50,
        payment_us_p99,
    })
}

fn measure_ceilings(seconds: f64) -> Ceilings {
    let duration = Duration::from_secs_f64(seconds);
    let keys: Vec<SigningKey> = (0..CEILING_BATCH as u64)
        .map(|n| deterministic_key("bench-offline-ceiling", n))
        .collect();
    let verifying: Vec<VerifyingKey> = keys.iter().map(SigningKey::verifying_key).collect();
    let messages: Vec<Vec<u8>> = (0..CEILING_BATCH).map(|n| vec![n as u8; 112]).collect();
    let signatures: Vec<Signature> = keys.iter().zip(&messages).map(|(k, m)| k.sign(m)).collect();
    let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
    let batch = || ed25519_dalek::verify_batch(&slices, &signatures, &verifying).is_ok();
    assert!(batch());
    // Every core verifying batches on a thread of its own until the deadline, by the wall clock.
    let batches_on = |threads: usize| -> usize {
        let started = Instant::now();
        std::thread::scope(|scope| {
            let running: Vec<_> = (0..threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut batches = 0usize;
                        while started.elapsed() < duration {
                            assert!(batch());
                            batches += 1;
                        }
                        batches
                    })
                })
                .collect();
            running
                .into_iter()
                .map(|thread| thread.join().expect("a verifying thread"))
                .sum()
        })
    };
    let all_cores = batches_on(rayon::current_num_threads());
    Ceilings {
        batch_verify_all_cores_per_s: (all_cores * CEILING_BATCH) as f64 / seconds,
        batch_verify_per_s: per_cpu_second(duration, || assert!(batch())) * CEILING_BATCH as f64,
        verify_strict_per_s: per_cpu_second(duration, || {
            assert!(verifying[0].verify_strict(&messages[0], &signatures[0]).is_ok());
        }),
        sign_per_s: per_cpu_second(duration, || {
            std::hint::black_box(keys[0].sign(&messages[0]));
        }),
    }
}

/// An authority with its snapshot after the fundings, and the deposits to make: `tokens` tokens,
/// each issued to a first owner, paid on to a payee, and deposited by the payee.
struct Setup {
    keys: fn() -> AuthorityKeys,
    snapshot: Vec<u8>,
    ring: KeyRing,
    payees: Vec<SigningKey>,
    /// Each token as its payee holds it, and the payee's key index.
    paid: Vec<(Token, usize)>,
    reissue_owners: Vec<PublicKey>,
}

fn bench_keys() -> AuthorityKeys {
    AuthorityKeys::deterministic("bench-offline", Denominations::default(), 1)
}

/// The payouts of a turn's defunds, signed by the `bridge` key on every core of the pool, as the
/// authority's service signs them (through the core's format). The role answers a defund with its
/// payout's terms (it signed the payout itself, in its parallel phase, before); the bench signs
/// them here, in the turn, so that a defund measures the same work as before: its checks and one
/// signature.
fn sign_payouts(bridge: &SigningKey, replies: &[(Ticket, Reply)]) -> Vec<Vec<u8>> {
    replies
        .par_iter()
        .filter_map(|(_, reply)| match *reply {
            Reply::Deposited(DepositOutcome::Defunded {
                serial,
                address,
                amount,
            }) => Some(CORE_FORMAT.bridge_payout(bridge, serial, PayTo::Key(address), amount)),
            _ => None,
        })
        .collect()
}

/// The authority's answers to one turn's `inputs`, by ticket, on the simulator's host (every
/// command encoded for its log, as a durable host would).
fn drive(host: &mut SimHost<OfflineAuthority>, inputs: Vec<Input>) -> Vec<(Ticket, Reply)> {
    host.handle_all(0, inputs)
        .into_iter()
        .filter_map(|event| match event {
            SimEvent::Reply { ticket, reply } => Some((ticket, reply)),
            _ => None,
        })
        .collect()
}

impl Setup {
    fn new(tokens: usize) -> BenchResult<Setup> {
        let mut authority = SimHost::start("offline-authority", || OfflineAuthority::new(bench_keys()));
        let identity = deterministic_key("bench-offline-identity", 0);
        let side = |label: &str| -> Vec<SigningKey> {
            (0..KEYS_PER_SIDE as u64).map(|n| deterministic_key(label, n)).collect()
        };
        let (owners, payees, reissue) = (
            side("bench-offline-owner"),
            side("bench-offline-payee"),
            side("bench-offline-reissue"),
        );
        let public =
            |keys: &[SigningKey]| -> Vec<PublicKey> { keys.iter().map(|k| k.verifying_key().to_bytes()).collect() };
        let register = Input::Register {
            ticket: 0,
            identity: identity.verifying_key().to_bytes(),
        };
        let bindings = [&owners, &payees, &reissue]
            .into_iter()
            .flat_map(|keys| public(keys))
            .map(|key| KeyBinding::sign(&identity, key))
            .collect();
        // One after the other: a certification is checked against the identities already applied.
        for input in [register, Input::Certify { ticket: 1, bindings }] {
            let replies = drive(&mut authority, vec![input]);
            ensure_that!(
                matches!(replies[..], [(_, Reply::Registered | Reply::Certified { .. })]),
                "enrolment refused: {replies:?}"
            );
        }
        let owners_public = public(&owners);
        let mut issued = Vec::with_capacity(tokens);
        for (n, chunk) in (0..tokens)
            .collect::<Vec<_>>()
            .chunks(TOKENS_PER_FUNDING_MAX)
            .enumerate()
        {
            let owners = chunk.iter().map(|i| owners_public[i % KEYS_PER_SIDE]).collect();
            let mut id = [0; 32];
            id[..8].copy_from_slice(&(n as u64).to_le_bytes());
            let funding = Funding {
                id,
                amount: VALUE * chunk.len() as u64,
                owners,
            };
            for (_, reply) in drive(&mut authority, vec![Input::Fund { ticket: 2, funding }]) {
                let Reply::Funded { issuances } = reply else {
                    return Err(crate::BenchError::Failed(format!("funding refused: {reply:?}")));
                };
                issued.extend(issuances);
            }
        }
        let role = authority.role().step("the authority is running")?;
        let ring = role.ring().clone();
        let period = bench_keys().lifecycle.current_period;
        let certifying = bench_keys().certifying(period);
        let certificates: Vec<KeyCertificate> = public(&payees)
            .into_iter()
            .map(|key| KeyCertificate::sign(key, period, &certifying))
            .collect();
        let paid = issued
            .par_iter()
            .enumerate()
            .map(|(i, issuance)| {
                let token = Token::issued(*issuance);
                let payee = i % KEYS_PER_SIDE;
                let nonce = (i as u128).to_le_bytes();
                let paid = token
                    .transfer(&owners[i % KEYS_PER_SIDE], certificates[payee], nonce)
                    .expect("the first owner pays");
                (paid, payee)
            })
            .collect();
        Ok(Setup {
            keys: bench_keys,
            snapshot: specie_role::Durable::snapshot(role),
            ring,
            payees,
            paid,
            reissue_owners: public(&reissue),
        })
    }

    /// The first `count_max` tokens' deposits, each signed by its payee (re-issued or defunded).
    fn deposits(&self, reissue: bool, count_max: usize) -> Vec<DepositRequest> {
        self.paid[..count_max.min(self.paid.len())]
            .par_iter()
            .enumerate()
            .map(|(i, (token, payee))| {
                let instruction = match reissue {
                    true => Instruction::Reissue {
                        outputs: vec![(VALUE, self.reissue_owners[i % KEYS_PER_SIDE])],
                    },
                    false => Instruction::Defund { address: [1; 32] },
                };
                let statement = Move::Deposit {
                    instruction: instruction.hash(),
                    nonce: [0; 16],
                }
                .sign(token, &self.payees[*payee]);
                DepositRequest {
                    token: Box::new(token.clone()),
                    statement,
                    instruction,
                }
            })
            .collect()
    }

    /// The authority after the fundings (following: its host makes it lead).
    fn authority(&self) -> BenchResult<OfflineAuthority> {
        let mut authority = OfflineAuthority::new((self.keys)());
        specie_role::Durable::restore(&mut authority, &self.snapshot).step("restoring the authority")?;
        Ok(authority)
    }

    /// The first `deposits_max` deposits through the role in memory, `per_turn` to a turn, on the
    /// current thread pool: per second, and the process's CPU time per deposit.
    fn deposit_in_memory(&self, reissue: bool, per_turn: usize, deposits_max: usize) -> BenchResult<Run> {
        assert!(per_turn >= 1, "a turn hands in a deposit at least");
        self.authority()?; // the snapshot restores: the host's `fresh` below may expect it to
        let (keys, snapshot) = (self.keys, self.snapshot.clone());
        let mut authority = SimHost::start("offline-authority", move || {
            let mut authority = OfflineAuthority::new(keys());
            specie_role::Durable::restore(&mut authority, &snapshot).expect("restored once already");
            authority
        });
        // The inputs as a host hands them, built before the clock starts: decoding requests is
        // the transport's work, not the authority's.
        let deposits = self.deposits(reissue, deposits_max);
        let turns: Vec<Vec<Input>> = deposits
            .chunks(per_turn)
            .enumerate()
            .map(|(n, turn)| {
                let first = n * per_turn;
                let inputs = turn.iter().enumerate();
                inputs
                    .map(|(i, deposit)| deposit.input((first + i) as Ticket))
                    .collect()
            })
            .collect();
        let bridge = (self.keys)().bridge;
        let (started, cpu) = (Instant::now(), CpuClock::now());
        let (mut paid, mut payouts) = (0usize, 0usize);
        for inputs in turns {
            let replies = drive(&mut authority, inputs);
            paid += replies
                .iter()
                .filter(|(_, reply)| {
                    matches!(
                        reply,
                        Reply::Deposited(DepositOutcome::Reissued { .. } | DepositOutcome::Defunded { .. })
                    )
                })
                .count();
            payouts += sign_payouts(&bridge, &replies).len();
        }
        let (seconds, cpu_s) = (started.elapsed().as_secs_f64(), cpu.used().process_s);
        ensure_that!(paid == deposits.len(), "{paid} of {} deposits paid", deposits.len());
        let defunds = if reissue { 0 } else { paid };
        ensure_that!(payouts == defunds, "{payouts} payouts signed for {defunds} defunds");
        let role = authority.role().step("the authority is running")?;
        specie_role::Durable::check_invariants(role).step("the authority's books")?;
        Ok(Run {
            per_s: paid as f64 / seconds,
            cpu_us_per_deposit: cpu_s * 1e6 / paid as f64,
        })
    }

    /// Deposits per second through the embedded host over a real log, fsync on.
    fn deposit_durably(&self) -> BenchResult<f64> {
        let dir = tempfile::tempdir().step("a temporary directory")?;
        let (replies_tx, replies) = crossbeam_channel::unbounded();
        let host = EmbeddedHost::recover(
            "offline-authority",
            self.authority()?,
            Replies(replies_tx),
            dir.path(),
            LogOptions::default(),
            u64::MAX,
        )
        .step("starting the authority's host")?;
        let (calls_tx, calls) = crossbeam_channel::unbounded();
        let thread = std::thread::spawn(move || host.run(calls, crossbeam_channel::never()));
        let deposits = self.deposits(true, usize::MAX);
        let count = deposits.len();
        let started = Instant::now();
        for chunk in deposits.chunks(DEPOSITS_PER_TURN) {
            let calls = chunk.iter().cloned().map(|input| (input, ())).collect();
            calls_tx.send(HostMessage::Calls(calls)).step("the host stopped")?;
        }
        let paid = replies
            .iter()
            .take(count)
            .filter(|reply| matches!(reply, Reply::Deposited(DepositOutcome::Reissued { .. })))
            .count();
        let seconds = started.elapsed().as_secs_f64();
        calls_tx.send(HostMessage::Stop).step("the host stopped")?;
        let authority = thread
            .join()
            .map_err(|_| crate::BenchError::Failed("the host panicked".into()))?;
        specie_role::Durable::check_invariants(&authority).step("the authority's books")?;
        ensure_that!(paid == count, "{paid} of {count} durable deposits paid");
        Ok(count as f64 / seconds)
    }

    /// A device-to-device payment's time: the payee's offer taken as given, the payer signs the
    /// hop, the payee checks the chain strictly. p50 and p99 in microseconds.
    fn payments(&self, payments: usize) -> (f64, f64) {
        let period = bench_keys().lifecycle.current_period;
        let certificate = KeyCertificate::sign(self.reissue_owners[0], period, &bench_keys().certifying(period));
        let mut times: Vec<f64> = self
            .paid
            .iter()
            .cycle()
            .take(payments)
            .enumerate()
            .map(|(i, (token, payee))| {
                let started = Instant::now();
                let paid = token
                    .transfer(&self.payees[*payee], certificate, (i as u128).to_le_bytes())
                    .expect("the payee pays on");
                let verified = paid.verify(&self.ring).expect("the chain holds");
                assert_eq!(verified.owner, certificate.key);
                started.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q) as usize];
        (at(0.5), at(0.99))
    }
}

/// A device's deposit, before the host gives it a ticket.
#[derive(Clone)]
struct DepositRequest {
    token: Box<Token>,
    statement: SignedMove,
    instruction: Instruction,
}

impl DepositRequest {
    fn input(&self, ticket: Ticket) -> Input {
        let request = self.clone();
        Input::Deposit {
            ticket,
            token: request.token,
            statement: request.statement,
            instruction: request.instruction,
        }
    }
}

/// Replies go back to the benchmark's thread.
struct Replies(crossbeam_channel::Sender<Reply>);

impl Wiring<OfflineAuthority> for Replies {
    type Call = DepositRequest;
    type ReplyTo = ();
    fn input(call: DepositRequest, ticket: Ticket) -> Input {
        call.input(ticket)
    }
    fn send(&mut self, to: std::convert::Infallible, _message: std::convert::Infallible) {
        match to {}
    }
    fn reply(&mut self, (): (), reply: Reply) {
        let _ = self.0.send(reply);
    }
    fn report(&mut self, _report: Report) {}
}

fn verdict(meets: bool) -> &'static str {
    if meets {
        "meets target"
    } else {
        "below target"
    }
}

fn table(r: &OfflineReport) -> String {
    let c = &r.ceilings;
    let per_thread_ratio = r.one_thread.defunded.per_s / PROTOTYPE_TOKENS_PER_S;
    let one_core_share = r.one_thread.defunded.per_s / c.deposits_one_core_per_s();
    let all_cores_share = r.all_cores.defunded.per_s / c.deposits_all_cores_per_s();
    let low_load_ratio = r.low_load_cpu_ratio();
    format!(
        "offline cash on {cores} cores (Ed25519; a 3-signature chain: issuance, one hop, the deposit)\n\
         ceilings (same run): strict verify {vs:.0}/s per core, batch verify {bv:.0} signatures/s per core \
         ({bva:.0}/s on all cores), sign {sg:.0}/s per core\n\
         authority, tokens deposited per second (in memory; 2 signature checks per token, issuance and \
         certificates by lookup; and 1 signature made, the payout or the new token):\n\
         \x20 one thread:  defunded {d1:.0}/s = {per_thread_ratio:.2}x the prototype's {proto:.0} ({pt}: >= {ptr}x) \
         = {one_core_share:.0}% of the batch ceiling {tc1:.0}/s ({oc}: >= {target:.0}%); re-issued {r1:.0}/s; \
         CPU {cpu1:.1} us/deposit\n\
         \x20 all cores:   defunded {da:.0}/s = {all_cores_share:.0}% of the batch ceiling {tca:.0}/s ({ac}: >= {target:.0}%); \
         re-issued {ra:.0}/s; CPU {cpua:.1} us/deposit\n\
         \x20 the ceiling counting the signature made too: {ts1:.0}/s on one core ({s1:.0}%), {tsa:.0}/s on all ({sa:.0}%)\n\
         \x20 low load, one deposit per turn: defunded, CPU {cpul:.1} us/deposit = {low_load_ratio:.2}x peak \
         ({ll}: <= {llr}x)\n\
         \x20 embedded host, fsync on, re-issued: {durable:.0}/s\n\
         device-to-device payment (sign the hop, check the chain strictly): p50 {p50:.0} us, p99 {p99:.0} us\n",
        cores = r.cores,
        vs = c.verify_strict_per_s,
        bv = c.batch_verify_per_s,
        bva = c.batch_verify_all_cores_per_s,
        sg = c.sign_per_s,
        d1 = r.one_thread.defunded.per_s,
        proto = PROTOTYPE_TOKENS_PER_S,
        pt = verdict(per_thread_ratio >= PER_THREAD_TARGET_RATIO),
        ptr = PER_THREAD_TARGET_RATIO,
        one_core_share = one_core_share * 100.0,
        tc1 = c.deposits_one_core_per_s(),
        oc = verdict(one_core_share >= CEILING_TARGET_SHARE),
        target = CEILING_TARGET_SHARE * 100.0,
        r1 = r.one_thread.reissued.per_s,
        cpu1 = r.one_thread.defunded.cpu_us_per_deposit,
        da = r.all_cores.defunded.per_s,
        all_cores_share = all_cores_share * 100.0,
        tca = c.deposits_all_cores_per_s(),
        ac = verdict(all_cores_share >= CEILING_TARGET_SHARE),
        ra = r.all_cores.reissued.per_s,
        cpua = r.all_cores.defunded.cpu_us_per_deposit,
        ts1 = c.deposits_with_signing_one_core_per_s(),
        s1 = r.one_thread.defunded.per_s / c.deposits_with_signing_one_core_per_s() * 100.0,
        tsa = c.deposits_with_signing_all_cores_per_s(),
        sa = r.all_cores.defunded.per_s / c.deposits_with_signing_all_cores_per_s() * 100.0,
        cpul = r.low_load.cpu_us_per_deposit,
        ll = verdict(low_load_ratio <= LOW_LOAD_CPU_RATIO_MAX),
        llr = LOW_LOAD_CPU_RATIO_MAX,
        durable = r.durable_per_s,
        p50 = r.payment_us_p50,
        p99 = r.payment_us_p99,
    )
}

/// A run's figures under `ceiling` (deposits per second) and `with_signing` (the same ceiling
/// with the authority's own signature per deposit counted).
fn json_rates(rates: &Rates, ceiling: f64, with_signing: f64) -> serde_json::Value {
    serde_json::json!({
        "defunded_per_s": rates.defunded.per_s,
        "reissued_per_s": rates.reissued.per_s,
        "ceiling_defunded_per_s": ceiling,
        "ceiling_with_signing_defunded_per_s": with_signing,
        "share_of_ceiling": rates.defunded.per_s / ceiling,
        "defunded_cpu_us_per_deposit": rates.defunded.cpu_us_per_deposit,
        "reissued_cpu_us_per_deposit": rates.reissued.cpu_us_per_deposit,
    })
}

/// The report as one object. `one_thread` and `all_cores` each carry the deposits per second
/// (`defunded_per_s`) beside the same run's batch-verify ceiling in deposits per second at two
/// signature checks per token (`ceiling_defunded_per_s`), and their ratio.
fn json(r: &OfflineReport) -> serde_json::Value {
    let c = &r.ceilings;
    serde_json::json!({
        "cores": r.cores,
        "ceilings": {
            "verify_strict_per_s": c.verify_strict_per_s,
            "batch_verify_per_s": c.batch_verify_per_s,
            "batch_verify_all_cores_per_s": c.batch_verify_all_cores_per_s,
            "sign_per_s": c.sign_per_s,
        },
        "one_thread": json_rates(&r.one_thread, c.deposits_one_core_per_s(), c.deposits_with_signing_one_core_per_s()),
        "all_cores": json_rates(&r.all_cores, c.deposits_all_cores_per_s(), c.deposits_with_signing_all_cores_per_s()),
        "low_load": {
            "defunded_per_s": r.low_load.per_s,
            "defunded_cpu_us_per_deposit": r.low_load.cpu_us_per_deposit,
            "cpu_ratio_to_all_cores": r.low_load_cpu_ratio(),
        },
        "durable_reissued_per_s": r.durable_per_s,
        "payment_us_p50": r.payment_us_p50,
        "payment_us_p99": r.payment_us_p99,
        "prototype_tokens_per_s": PROTOTYPE_TOKENS_PER_S,
        "per_thread_ratio": r.one_thread.defunded.per_s / PROTOTYPE_TOKENS_PER_S,
        "all_cores_share_of_batch_ceiling": r.all_cores.defunded.per_s / c.deposits_all_cores_per_s(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole bench at a toy size: every phase runs, every deposit is paid (each phase checks
    /// it), and every figure is a positive, finite number (no timing is asserted).
    #[test]
    fn the_bench_runs_every_phase_at_a_toy_size_and_reports_sane_figures() {
        let options = OfflineOptions {
            tokens: 300,
            ceiling_seconds: 0.02,
            payments: 20,
            json: true,
        };
        let report = measure(&options, |_| {}).unwrap();
        let json = json(&report);
        for pointer in [
            "/ceilings/verify_strict_per_s",
            "/ceilings/batch_verify_per_s",
            "/ceilings/batch_verify_all_cores_per_s",
            "/ceilings/sign_per_s",
            "/one_thread/defunded_per_s",
            "/one_thread/reissued_per_s",
            "/one_thread/ceiling_defunded_per_s",
            "/one_thread/ceiling_with_signing_defunded_per_s",
            "/one_thread/defunded_cpu_us_per_deposit",
            "/all_cores/defunded_per_s",
            "/all_cores/reissued_per_s",
            "/all_cores/ceiling_defunded_per_s",
            "/all_cores/ceiling_with_signing_defunded_per_s",
            "/all_cores/share_of_ceiling",
            "/all_cores/defunded_cpu_us_per_deposit",
            "/low_load/defunded_cpu_us_per_deposit",
            "/low_load/cpu_ratio_to_all_cores",
            "/durable_reissued_per_s",
            "/payment_us_p50",
            "/per_thread_ratio",
            "/all_cores_share_of_batch_ceiling",
        ] {
            let value = json.pointer(pointer).and_then(serde_json::Value::as_f64);
            assert!(value.is_some_and(|v| v.is_finite() && v > 0.0), "{pointer} in {json}");
        }
        assert!(report.payment_us_p50 <= report.payment_us_p99);
        let text = table(&report);
        let verdicts = text.matches("meets target").count() + text.matches("below target").count();
        assert_eq!(verdicts, 4, "one verdict per target:\n{text}");
    }
}
