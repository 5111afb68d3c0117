//! Deterministic simulation of specie's Byzantine mode: FastPay (seed 002, §3–§5, Appendix A–B)
//! with a committee of 4 authorities (f = 1), each split into 2 or 3 shards running the real
//! `specie-authority` role, under a seeded network and up to one Byzantine authority.
//!
//! Every honest shard is hosted as a process would host it, by the project's simulated host
//! (`specie_host::SimHost`; see `shard`): each round's commands go through `encode_command`
//! into the shard's own durable log and are checked to read back as themselves with
//! `decode_command` when they are applied, sometimes after an fsync delay during which the
//! shard keeps taking inputs (so the role's in-flight paths run); the log is truncated behind
//! occasional snapshots; a crash loses everything in memory, commands not yet durable included,
//! and the restarted role is rebuilt with `restore` and a replay of the commands after the
//! snapshot, then `lead`s. In some seeds a channel between shards holds only a few
//! unacknowledged credits, so confirmations are refused as `ChannelFull` and retried.
//!
//! The parties (see `users` and `adversary`):
//! - correct users fund accounts (through the core bridge, `Fund` at every authority) and pay
//!   with `specie_committee::Payment`, the client state machine of docs/byzantine-mode.md
//!   ("Rounds"): the order to every authority, final at every authority's round-0 prepare vote
//!   (the fast path) or, through a lock, at a quorum's commit votes (the slow path), recovery
//!   rounds if a round stalls; they resend the payment's call to whoever has not answered,
//!   send the final certificate to every authority, bring a lagging authority up to date as §5
//!   says (on `MissingEarlier` or a vote refused for an earlier slot, the missing certificates
//!   first; on a shortfall, the certificates that paid them), and redeem some value to the core;
//! - an auditor that, once the network heals, reads every account at every authority (§4.4) and
//!   pushes any certificate it learns to the authorities that lack it;
//! - Byzantine users who sign two orders for one sequence number and split the committee
//!   between them, replay confirmations and forge certificates, and then get their account back:
//!   a payment holding both orders settles one of them through the recovery rounds;
//! - at most one Byzantine authority, which equivocates (prepares anything, commits any lock,
//!   claims rounds it is not in), withholds, forges votes, round changes and answers, or replays
//!   certificates and tries to forge cross-shard credits.
//!
//! The network between all of them drops, duplicates, delays and reorders messages; shards
//! crash and restart; malformed channel messages are handed to honest shards.
//!
//! Checked after every step (see `checks`): every honest shard's `check_invariants`; each
//! honest authority's books (balances + credits in flight between its shards = funded −
//! redeemed); an honest authority's votes and round changes are its own, valid, and what it was
//! asked for, and it never signs two orders for one account and sequence number in one phase of
//! one round; no two honest authorities confirm different orders for one (account, sequence);
//! only orders some party certified are settled; safety: never two final certificates for one
//! (account, sequence), and round-0 votes of one authority on two of a user's orders convict
//! only the Byzantine authority; forged certificates (locks passed off as final among them) and
//! malformed channel messages change nothing; a restarted shard is the shard that crashed.
//! Once the network heals and retransmissions drain: every correct user's payments are settled
//! at every honest authority, every slot a Byzantine user split is final and confirmed by a
//! quorum (within `recovery_ms_max` of the heal), honest authorities agree on every account,
//! and value is conserved.

mod adversary;
mod checks;
mod epochs;
mod paying;
#[cfg(test)]
mod planted;
mod shard;
mod users;

use std::collections::{BTreeMap, BTreeSet};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_authority::{AuthorityConfig, AuthorityShard, Input, Message, Reply, ShardIndex};
use specie_committee::Call;
use specie_fastpay::{
    deterministic_key, AccountKey, AuthorityIndex, Certificate, Committee, CommitteeChain, SignedOrder, SigningKey,
};
use specie_host::SimHost;
use specie_role::Ticket;
use specie_transaction::hash::Sha256Writer;

use crate::world::Violation;
use adversary::{ByzantineAuthority, ByzantineUser};
use checks::{Checks, Observed};
pub use epochs::EpochChange;
use epochs::EpochProgress;
use shard::{BuildRole, HostError, Outputs, Shard, ShardRole};
use users::{Auditor, Bridge, Client};

/// The committee's size: 3f + 1 with f = 1.
pub const AUTHORITIES: usize = 4;

/// What the Byzantine authority does, chosen per seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorityBehaviour {
    /// Votes for every order it is sent, conflicting ones included, in any phase and round,
    /// confirms everything, and sometimes claims to be in a round far ahead.
    Equivocates,
    /// Answers no order, confirmation, funding or read.
    Withholds,
    /// Answers orders, proposals and locks with malformed votes (bad signature, another
    /// committee, another order, another phase or round, an index not in the committee, another
    /// authority's index), round changes with broken signatures, and reads with false states.
    ForgesVotes,
    /// Votes for everything, and replays the certificates and orders it has seen at honest
    /// authorities, and tries to push forged credits into their shards' channels.
    Replays,
}

impl AuthorityBehaviour {
    const ALL: [AuthorityBehaviour; 4] = [
        AuthorityBehaviour::Equivocates,
        AuthorityBehaviour::Withholds,
        AuthorityBehaviour::ForgesVotes,
        AuthorityBehaviour::Replays,
    ];
}

/// Fault rates while faults are on, in parts per thousand.
#[derive(Clone, Debug)]
pub struct ByzantineFaults {
    pub drop_per_mille: u32,
    pub duplicate_per_mille: u32,
    /// Each message is delayed uniformly by 0..=this many simulated milliseconds.
    pub delay_ms_max: u64,
    /// Chance per step that an honest shard crashes.
    pub crash_per_mille: u32,
    pub restart_ms_max: u64,
    /// Chance per step that an honest shard is handed a malformed channel message.
    pub corrupt_channel_per_mille: u32,
    /// Chance that a shard's proposals wait up to `durability_ms_max` for their fsync (or
    /// commit) while the shard takes more inputs.
    pub slow_durability_per_mille: u32,
    pub durability_ms_max: u64,
}

#[derive(Clone, Debug)]
pub struct ByzantineOptions {
    pub seed: u64,
    /// Shards per authority.
    pub shards: u32,
    pub correct_users: usize,
    /// Payments the correct users make between them (and to the core), in all.
    pub payments: usize,
    pub byzantine_users: usize,
    pub byzantine_authority: Option<(AuthorityIndex, AuthorityBehaviour)>,
    pub faults: ByzantineFaults,
    /// A shard snapshots its state and truncates its log after this many commands.
    pub snapshot_every_commands: usize,
    /// How long a party waits for answers before it asks again.
    pub retry_ms: u64,
    pub credit_retransmit_ms: u64,
    /// Most unacknowledged credits a shard keeps towards another: small in some seeds, so that
    /// confirmations are refused as `ChannelFull` and retried.
    pub channel_credits_max: usize,
    /// Faults (and Byzantine users) go on for at least this much virtual time, and then until
    /// every correct payment is certified, or `faults_ms_max` at the latest.
    pub faults_ms_min: u64,
    pub faults_ms_max: u64,
    /// Chance that a correct user with nothing in flight starts its next payment when it wakes.
    pub pay_per_mille: u32,
    /// Virtual time allowed, once faults stop, for everything to settle everywhere.
    pub settle_ms_max: u64,
    /// Safety net against a run that never ends.
    pub steps_max: u64,
    /// How long a payment's round may take before the payer opens the next (recovery rounds).
    pub round_timeout_ms: u64,
    /// Once faults stop, every slot a Byzantine user signed two orders for must have a final
    /// certificate confirmed by a quorum within this much virtual time: an owner who
    /// equivocated regains its account within bounded time.
    pub recovery_ms_max: u64,
    /// A committee epoch change replacing one honest seat's key, in some seeds.
    pub epoch_change: Option<EpochChange>,
    /// The first payment certified in the new epoch comes at most this long after its record.
    pub epoch_stall_ms_max: u64,
}

impl ByzantineOptions {
    /// Options derived from the seed alone, so `specie sim --seed N` needs nothing else.
    pub fn from_seed(seed: u64) -> ByzantineOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0xB12A_2714);
        let byzantine_authority = rng.gen_bool(0.8).then(|| {
            let behaviour = AuthorityBehaviour::ALL[rng.gen_range(0..AuthorityBehaviour::ALL.len())];
            (rng.gen_range(0..AUTHORITIES) as AuthorityIndex, behaviour)
        });
        let faults_ms_min = rng.gen_range(1_000..4_000);
        // Drawn apart, so that the seeds from before epochs existed run as they did.
        let mut epoch_rng = StdRng::seed_from_u64(seed ^ 0xE90C_4C4A);
        let epoch_change = epoch_rng.gen_bool(0.5).then(|| EpochChange {
            at_ms: epoch_rng.gen_range(100..faults_ms_min / 2),
            seat: loop {
                let seat = epoch_rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
                if byzantine_authority.is_none_or(|(index, _)| index != seat) {
                    break seat;
                }
            },
        });
        ByzantineOptions {
            seed,
            epoch_change,
            epoch_stall_ms_max: 2_000,
            shards: rng.gen_range(2..=3),
            correct_users: rng.gen_range(3..=6),
            payments: rng.gen_range(8..=24),
            byzantine_users: rng.gen_range(0..=2),
            byzantine_authority,
            faults: ByzantineFaults {
                drop_per_mille: rng.gen_range(0..80),
                duplicate_per_mille: rng.gen_range(0..60),
                delay_ms_max: rng.gen_range(1..40),
                crash_per_mille: rng.gen_range(1..8),
                restart_ms_max: 300,
                corrupt_channel_per_mille: rng.gen_range(0..10),
                slow_durability_per_mille: rng.gen_range(0..600),
                durability_ms_max: rng.gen_range(1..15),
            },
            snapshot_every_commands: rng.gen_range(4..40),
            retry_ms: 150,
            credit_retransmit_ms: 100,
            channel_credits_max: match rng.gen_bool(0.3) {
                true => rng.gen_range(1..=3),
                false => 10_000,
            },
            faults_ms_min,
            faults_ms_max: 20_000,
            pay_per_mille: rng.gen_range(200..800),
            settle_ms_max: 30_000,
            steps_max: 400_000,
            round_timeout_ms: 600,
            recovery_ms_max: 4_000,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct ByzantineReport {
    pub seed: u64,
    pub steps: u64,
    pub virtual_ms: u64,
    /// Correct users' payments, each settled at every honest authority.
    pub payments: u64,
    /// Of them, redeems to the online core.
    pub redeems: u64,
    pub fundings: u64,
    /// Certificates Byzantine users formed, and the sequence numbers they signed two orders for.
    pub byzantine_certificates: u64,
    pub equivocations: u64,
    /// Slots a Byzantine user signed two orders for that still reached a final certificate
    /// (through recovery rounds, or round 0 if one order won everywhere).
    pub recovered_slots: u64,
    /// Of them, those settled (final, and confirmed by a quorum) only after faults stopped, and
    /// how long after at the latest: at most `recovery_ms_max`.
    pub recovered_after_heal: u64,
    pub recovery_after_heal_ms_max: u64,
    /// Final certificates made of commit votes (the slow path or a recovery round), not of
    /// every authority's round-0 prepare votes.
    pub commit_certificates: u64,
    /// Payments that reached a final certificate in a round above 0.
    pub recovery_rounds_used: u64,
    /// Pairs of one authority's votes on conflicting orders that Byzantine users held: evidence,
    /// which must convict only the Byzantine authority.
    pub double_votes: u64,
    pub forged_votes_ignored: u64,
    /// False account states and certificates in them that readers refused.
    pub false_answers_ignored: u64,
    pub forged_certificates_refused: u64,
    /// Round requests not signed by the account's owner that an honest shard refused.
    pub forged_round_requests_refused: u64,
    /// Round changes contradicted by their signer's own votes, kept as evidence (by an honest
    /// shard checking a justification, or by a payer).
    pub broken_promises: u64,
    pub replays: u64,
    /// Credits a Byzantine authority tried to push into an honest shard's channel.
    pub forged_credits_refused: u64,
    pub corrupt_channel_messages: u64,
    pub channel_violations_reported: u64,
    /// Confirmations an honest authority refused as `MissingEarlier`, answered with the missing
    /// certificates (§5).
    pub missing_earlier: u64,
    /// Confirmations an honest authority refused while a channel was full, asked again later.
    pub channel_full: u64,
    /// Inputs a shard took while earlier proposals still waited to become durable.
    pub inputs_before_durable: u64,
    pub crashes: u64,
    pub snapshots: u64,
    pub messages_dropped: u64,
    pub messages_duplicated: u64,
    /// Committee epochs published (0 or 1), payers that learned one, records a Byzantine
    /// authority forged that payers refused, and answers waited out because an authority and
    /// a party were in different epochs.
    pub epoch_changes: u64,
    pub epochs_learned: u64,
    pub forged_records_refused: u64,
    pub epoch_lag_answers: u64,
    /// How long after the record the first payment of the new epoch was certified.
    pub epoch_stall_ms: Option<u64>,
    /// SHA-256 over every event of the run: equal digests mean identical runs.
    pub trace_digest: [u8; 32],
}

/// Runs one seed of the Byzantine-mode world. Returns the first invariant violated, if any.
pub fn run_byzantine(options: ByzantineOptions) -> Result<ByzantineReport, Violation> {
    World::new(options, AuthorityShard::new, Checks::ALL).run()
}

/// Who sent a request, to route its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Party {
    Client(usize),
    ByzantineUser(usize),
    Bridge,
    Auditor,
    ByzantineAuthority,
    /// Publishes committee epochs.
    Operator,
}

/// What a request asked, kept by ticket to interpret the answer.
#[derive(Clone, Debug)]
enum Asked {
    /// An order sent on its own, outside a payment (a Byzantine party's).
    Transfer(SignedOrder),
    /// A call of the party's payment number `payment`, in its attempt `attempt`.
    Payment {
        payment: u64,
        attempt: u32,
        call: Call,
    },
    Confirm {
        sender: AccountKey,
        sequence: u64,
    },
    Fund(usize),
    Account {
        account: AccountKey,
        from_sequence: u64,
    },
    /// A forged certificate or round request: an honest authority must refuse it and stay
    /// unchanged.
    Forged,
    /// The records of the epochs after `after`.
    Epochs {
        after: u64,
    },
    /// The operator's record of the next epoch.
    EnterEpoch,
}

#[derive(Clone, Debug)]
enum Payload {
    /// A client-facing input (carrying its ticket) for one shard of one authority.
    Request {
        authority: AuthorityIndex,
        shard: ShardIndex,
        input: Input,
    },
    /// Between two shards of one authority, over their authenticated channel.
    Channel {
        authority: AuthorityIndex,
        from: ShardIndex,
        to: ShardIndex,
        message: Message,
    },
    /// An authority's answer to the request that carried `ticket`.
    Reply {
        authority: AuthorityIndex,
        ticket: Ticket,
        reply: Reply,
    },
}

struct Envelope {
    deliver_at_ms: u64,
    payload: Payload,
}

struct World<R: ShardRole> {
    options: ByzantineOptions,
    checks: Checks,
    rng: StdRng,
    now_ms: u64,
    step: u64,
    faults_on: bool,
    settle_by_ms: u64,
    /// When faults stopped, once they have.
    healed_at_ms: Option<u64>,
    /// Every published epoch: what the world's checks trust.
    chain: CommitteeChain,
    /// The online core as the committee's Primary: a sentinel's rules for the epoch
    /// transaction, and the markers its ledger holds (one successor per committee).
    primary: specie_fastpay_primary::FastpayRules,
    primary_markers: BTreeSet<specie_transaction::UhsId>,
    /// The epochs each payer has learned, where it has learned any beyond the first.
    views: BTreeMap<Party, CommitteeChain>,
    epoch: EpochProgress,
    /// The successor's key, once epoch 2 is published, and when it was.
    next_key: Option<SigningKey>,
    epoch_published_ms: Option<u64>,
    /// How the world builds a shard's role (for the successor's shards too).
    build: BuildRole<R>,
    authority_keys: Vec<SigningKey>,
    /// Each authority's shards; `None` for the Byzantine one, which runs no role at all.
    authorities: Vec<Option<Vec<Shard<R>>>>,
    network: Vec<Envelope>,
    tickets: BTreeMap<Ticket, (Party, Asked)>,
    next_ticket: Ticket,
    /// Payments started so far, to tell a payment's late answers from its successor's.
    payments_started: u64,
    clients: Vec<Client>,
    byzantine_users: Vec<ByzantineUser>,
    adversary: Option<ByzantineAuthority>,
    bridge: Bridge,
    auditor: Auditor,
    /// Every account, funded at the start, and who owns it.
    owners: BTreeMap<AccountKey, Party>,
    /// Valid certificates known to correct parties (self-authenticating, so any may hold them:
    /// a payer hands its certificate to the payee, and readers learn them from authorities).
    directory: BTreeMap<(AccountKey, u64), Certificate>,
    /// When a party last pushed a certificate to an authority: pushes are rate-limited, so an
    /// authority that lies about what it misses cannot make a client flood the network.
    pushed: BTreeMap<(Party, AuthorityIndex, AccountKey, u64), u64>,
    /// When a party last asked an authority for an account's certificates from a sequence number.
    read: BTreeMap<(Party, AuthorityIndex, AccountKey, u64), u64>,
    observed: Observed,
    trace: Sha256Writer,
    /// `SPECIE_SIM_TRACE` set: every recorded event is printed too.
    print_trace: bool,
    report: ByzantineReport,
}

impl<R: ShardRole> World<R> {
    fn new(options: ByzantineOptions, build: BuildRole<R>, checks: Checks) -> World<R> {
        let authority_keys: Vec<SigningKey> = (0..AUTHORITIES as u64)
            .map(|i| deterministic_key("sim-authority", options.seed.wrapping_mul(8).wrapping_add(i)))
            .collect();
        let members = authority_keys.iter().map(|k| k.verifying_key().to_bytes()).collect();
        let committee = Committee::new(options.seed, members).expect("distinct deterministic keys");
        let byzantine = options.byzantine_authority.map(|(index, _)| index);
        let authorities = (0..AUTHORITIES)
            .map(|authority| {
                (byzantine != Some(authority as AuthorityIndex)).then(|| {
                    (0..options.shards)
                        .map(|shard| {
                            let config = AuthorityConfig {
                                committee: committee.clone(),
                                authority: authority as AuthorityIndex,
                                shard,
                                shards: options.shards,
                                credit_retransmit_ms: options.credit_retransmit_ms,
                                channel_credits_max: options.channel_credits_max,
                            };
                            let key = authority_keys[authority].clone();
                            let name = format!("authority {authority} shard {shard}");
                            let fresh = move || build(config.clone(), key.clone());
                            let host = SimHost::start(name, fresh)
                                .snapshot_every(options.snapshot_every_commands)
                                .check_round_trip();
                            Shard::new(host)
                        })
                        .collect()
                })
            })
            .collect();
        let user_key = |label: &str, i: usize| deterministic_key(label, options.seed.wrapping_mul(64) + i as u64);
        let clients: Vec<Client> = (0..options.correct_users)
            .map(|i| {
                let share = options.payments / options.correct_users
                    + usize::from(i < options.payments % options.correct_users);
                Client::new(user_key("sim-user", i), share)
            })
            .collect();
        let byzantine_users: Vec<ByzantineUser> = (0..options.byzantine_users)
            .map(|i| ByzantineUser::new(user_key("sim-byzantine-user", i)))
            .collect();
        let mut owners = BTreeMap::new();
        for (i, client) in clients.iter().enumerate() {
            owners.insert(client.account, Party::Client(i));
        }
        for (i, user) in byzantine_users.iter().enumerate() {
            owners.insert(user.account, Party::ByzantineUser(i));
        }
        World {
            rng: StdRng::seed_from_u64(options.seed),
            adversary: options
                .byzantine_authority
                .map(|(index, behaviour)| ByzantineAuthority::new(index, behaviour)),
            report: ByzantineReport {
                seed: options.seed,
                ..ByzantineReport::default()
            },
            checks,
            now_ms: 0,
            step: 0,
            faults_on: true,
            settle_by_ms: u64::MAX,
            healed_at_ms: None,
            primary: specie_fastpay_primary::FastpayRules::of(CommitteeChain::new(committee.clone())),
            primary_markers: BTreeSet::new(),
            chain: CommitteeChain::new(committee),
            views: BTreeMap::new(),
            epoch: EpochProgress::default(),
            next_key: None,
            epoch_published_ms: None,
            build,
            authority_keys,
            authorities,
            network: Vec::new(),
            tickets: BTreeMap::new(),
            next_ticket: 0,
            payments_started: 0,
            clients,
            byzantine_users,
            bridge: Bridge::default(),
            auditor: Auditor::default(),
            owners,
            directory: BTreeMap::new(),
            pushed: BTreeMap::new(),
            read: BTreeMap::new(),
            observed: Observed::new(),
            trace: Sha256Writer::new(),
            print_trace: std::env::var_os("SPECIE_SIM_TRACE").is_some(),
            options,
        }
    }

    fn violation(&self, message: impl Into<String>) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: format!("byzantine: {}", message.into()),
        }
    }

    fn host_violation(&self, authority: AuthorityIndex, shard: ShardIndex, error: HostError) -> Violation {
        self.violation(format!("authority {authority} shard {shard}: {error}"))
    }

    fn record(&mut self, event: &str, values: &[u64]) {
        if self.print_trace {
            eprintln!("TRACE {} {} ms: {event} {values:?}", self.step, self.now_ms);
        }
        self.trace.update(&self.now_ms.to_le_bytes());
        self.trace.update(event.as_bytes());
        for value in values {
            self.trace.update(&value.to_le_bytes());
        }
    }

    fn is_byzantine(&self, authority: AuthorityIndex) -> bool {
        self.options
            .byzantine_authority
            .is_some_and(|(index, _)| index == authority)
    }

    fn honest(&self) -> impl Iterator<Item = (AuthorityIndex, &Vec<Shard<R>>)> {
        self.authorities
            .iter()
            .enumerate()
            .filter_map(|(index, shards)| Some((index as AuthorityIndex, shards.as_ref()?)))
    }

    fn host(&self, authority: AuthorityIndex, shard: ShardIndex) -> Option<&Shard<R>> {
        self.authorities[usize::from(authority)].as_ref()?.get(shard as usize)
    }

    fn host_mut(&mut self, authority: AuthorityIndex, shard: ShardIndex) -> Option<&mut Shard<R>> {
        self.authorities[usize::from(authority)]
            .as_mut()?
            .get_mut(shard as usize)
    }

    fn shard_of(&self, account: &AccountKey) -> ShardIndex {
        specie_authority::shard_of(account, self.options.shards)
    }

    fn run(mut self) -> Result<ByzantineReport, Violation> {
        self.fund_everyone();
        loop {
            self.step += 1;
            if self.step > self.options.steps_max {
                return Err(self.violation(format!("no quiescence after {} steps", self.options.steps_max)));
            }
            let faults_done = self.now_ms >= self.options.faults_ms_min && self.workload_certified();
            if self.faults_on && (faults_done || self.now_ms >= self.options.faults_ms_max) {
                self.heal();
            }
            if !self.faults_on && self.now_ms > self.settle_by_ms {
                return Err(self.violation(format!(
                    "not settled {} ms after the network healed: {}",
                    self.options.settle_ms_max,
                    self.describe_unsettled()
                )));
            }
            self.check_recovered_in_time()?;
            if self.faults_on {
                self.inject_faults()?;
            }
            self.restart_due()?;
            self.advance_epoch()?;
            self.wake_parties()?;
            self.fire_timers()?;
            if !self.deliver_one()? {
                if !self.faults_on && self.settled() {
                    return self.finish();
                }
                self.advance_clock();
            }
            self.check_step()?;
        }
    }

    /// Faults stop: no more drops, duplicates, delays, crashes or corruption; every shard
    /// restarts; Byzantine users stop acting (the Byzantine authority stays Byzantine); the
    /// auditor starts reading every account everywhere.
    fn heal(&mut self) {
        self.faults_on = false;
        self.settle_by_ms = self.now_ms + self.options.settle_ms_max;
        self.healed_at_ms = Some(self.now_ms);
        self.auditor.wake_at_ms = Some(self.now_ms);
        self.record("healed", &[]);
    }

    /// An owner who signed two orders for one slot regains its account within bounded time once
    /// faults stop: the slot has a final certificate confirmed by a quorum.
    fn check_recovered_in_time(&self) -> Result<(), Violation> {
        let Some(healed_at_ms) = self.healed_at_ms else {
            return Ok(());
        };
        if self.now_ms <= healed_at_ms + self.options.recovery_ms_max {
            return Ok(());
        }
        for (i, user) in self.byzantine_users.iter().enumerate() {
            if let Some(sequence) = user.unrecovered().next() {
                return Err(self.violation(format!(
                    "Byzantine user {i}'s contested slot {sequence} is not final and confirmed {} ms after faults \
                     stopped (round {:?})",
                    self.options.recovery_ms_max,
                    user.paying.as_ref().map(|p| p.payment.round())
                )));
            }
        }
        Ok(())
    }

    fn workload_certified(&self) -> bool {
        self.clients.iter().all(Client::is_certified)
    }

    fn fresh_ticket(&mut self, party: Party, asked: Asked) -> Ticket {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.tickets.insert(ticket, (party, asked));
        ticket
    }

    /// Puts a message on the network, where it may be dropped, duplicated and delayed.
    fn send(&mut self, payload: Payload) {
        let faults = &self.options.faults;
        if self.faults_on && self.rng.gen_range(0..1000) < faults.drop_per_mille {
            self.report.messages_dropped += 1;
            return;
        }
        let copies = if self.faults_on && self.rng.gen_range(0..1000) < faults.duplicate_per_mille {
            self.report.messages_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = match self.faults_on {
                true => self.rng.gen_range(0..=self.options.faults.delay_ms_max),
                false => 0,
            };
            self.network.push(Envelope {
                deliver_at_ms: self.now_ms + delay,
                payload: payload.clone(),
            });
        }
    }

    /// Sends a client-facing request to the shard of `authority` that holds `account`.
    fn request(&mut self, party: Party, authority: AuthorityIndex, account: &AccountKey, asked: Asked) {
        let make: Box<dyn FnOnce(Ticket) -> Input> = match asked.clone() {
            Asked::Transfer(order) => Box::new(move |ticket| Input::Transfer { ticket, order }),
            Asked::Payment { call, .. } => Box::new(move |ticket| call.into_input(ticket)),
            Asked::Confirm { sender, sequence } => {
                let Some(certificate) = self.certificate_of(party, &sender, sequence) else {
                    return;
                };
                Box::new(move |ticket| Input::Confirm { ticket, certificate })
            }
            Asked::Fund(index) => {
                let funding = self.bridge.fundings[index];
                Box::new(move |ticket| Input::Fund { ticket, funding })
            }
            Asked::Account { account, from_sequence } => Box::new(move |ticket| Input::Account {
                ticket,
                account,
                from_sequence,
            }),
            Asked::Forged => unreachable!("forged certificates are sent with `send_input`"),
            Asked::Epochs { after } => Box::new(move |ticket| Input::Epochs { ticket, after }),
            Asked::EnterEpoch => unreachable!("the operator hands records to shards directly"),
        };
        self.send_input(party, authority, account, asked, make);
    }

    /// Sends the input `make` builds around a fresh ticket to the shard of `authority` that
    /// holds `account`.
    fn send_input(
        &mut self,
        party: Party,
        authority: AuthorityIndex,
        account: &AccountKey,
        asked: Asked,
        make: impl FnOnce(Ticket) -> Input,
    ) {
        if self.print_trace {
            eprintln!(
                "TRACE {} {} ms: {party:?} asks {authority} (ticket {}): {asked:?}",
                self.step, self.now_ms, self.next_ticket
            );
        }
        let ticket = self.fresh_ticket(party, asked);
        let shard = self.shard_of(account);
        self.send(Payload::Request {
            authority,
            shard,
            input: make(ticket),
        });
    }

    /// The certificate `party` holds for (`sender`, `sequence`): its own, or one it knows.
    fn certificate_of(&self, party: Party, sender: &AccountKey, sequence: u64) -> Option<Certificate> {
        let own = match party {
            Party::Client(i) if self.clients[i].account == *sender => {
                self.clients[i].certificates.get(sequence as usize)
            }
            Party::ByzantineUser(i) if self.byzantine_users[i].account == *sender => {
                self.byzantine_users[i].certificates.get(sequence as usize)
            }
            _ => None,
        };
        own.or_else(|| self.directory.get(&(*sender, sequence))).cloned()
    }

    /// Delivers one message that is due, chosen at random among them (reordering).
    fn deliver_one(&mut self) -> Result<bool, Violation> {
        let due: Vec<usize> = (0..self.network.len())
            .filter(|&i| self.network[i].deliver_at_ms <= self.now_ms)
            .collect();
        if due.is_empty() {
            return Ok(false);
        }
        let envelope = self.network.swap_remove(due[self.rng.gen_range(0..due.len())]);
        match envelope.payload {
            Payload::Request {
                authority,
                shard,
                input,
            } => self.shard_receives(authority, shard, input)?,
            Payload::Channel {
                authority,
                from,
                to,
                message,
            } => {
                self.record("channel", &[u64::from(authority), u64::from(from), u64::from(to)]);
                self.honest_shard_handles(authority, to, message.into_input(from))?;
            }
            Payload::Reply {
                authority,
                ticket,
                reply,
            } => self.party_receives(authority, ticket, reply)?,
        }
        Ok(true)
    }

    fn shard_receives(&mut self, authority: AuthorityIndex, shard: ShardIndex, input: Input) -> Result<(), Violation> {
        let ticket = input_ticket(&input);
        self.record("request", &[u64::from(authority), u64::from(shard), ticket]);
        if self.is_byzantine(authority) {
            return self.adversary_receives(input);
        }
        if matches!(self.tickets.get(&ticket), Some((_, Asked::Forged))) {
            return self.forgery_arrives(authority, shard, input);
        }
        self.honest_shard_handles(authority, shard, input)
    }

    /// An honest shard takes an input; its outputs are routed and checked.
    fn honest_shard_handles(
        &mut self,
        authority: AuthorityIndex,
        shard: ShardIndex,
        input: Input,
    ) -> Result<(), Violation> {
        let (now_ms, delay_ms) = (self.now_ms, self.durable_delay_ms());
        let host = self.host_mut(authority, shard).expect("an honest shard");
        let waiting = host.up() && host.pending() > 0;
        let outputs = host.handle(now_ms, input, delay_ms);
        self.report.inputs_before_durable += u64::from(waiting);
        let outputs = outputs.map_err(|e| self.host_violation(authority, shard, e))?;
        self.route(authority, shard, outputs)
    }

    /// How long the proposals of a turn wait to become durable, as the dice say.
    fn durable_delay_ms(&mut self) -> u64 {
        let faults = &self.options.faults;
        match self.faults_on && self.rng.gen_range(0..1000) < faults.slow_durability_per_mille {
            true => self.rng.gen_range(1..=faults.durability_ms_max),
            false => 0,
        }
    }

    /// Routes what an honest shard did: durable commands to the trace and the checks, channel
    /// messages to its sibling shards, replies to their parties, reports to the checks.
    fn route(&mut self, authority: AuthorityIndex, shard: ShardIndex, outputs: Outputs) -> Result<(), Violation> {
        for bytes in &outputs.durable {
            self.trace.update(bytes);
        }
        if outputs.snapshot_taken {
            self.report.snapshots += 1;
            self.record("snapshot", &[u64::from(authority), u64::from(shard)]);
        }
        self.observe_applied(authority, shard, &outputs.applied)?;
        for (to, message) in outputs.sends {
            self.send(Payload::Channel {
                authority,
                from: shard,
                to,
                message,
            });
        }
        for (ticket, reply) in outputs.replies {
            self.observe_honest_reply(authority, ticket, &reply)?;
            self.send(Payload::Reply {
                authority,
                ticket,
                reply,
            });
        }
        for report in outputs.reports {
            self.observe_report(authority, shard, report)?;
        }
        Ok(())
    }

    fn party_receives(&mut self, authority: AuthorityIndex, ticket: Ticket, reply: Reply) -> Result<(), Violation> {
        self.record("reply", &[u64::from(authority), ticket]);
        let Some((party, asked)) = self.tickets.get(&ticket).cloned() else {
            return Err(self.violation(format!("authority {authority} answered ticket {ticket}, never issued")));
        };
        if let Asked::Epochs { .. } = asked {
            return self.epochs_received(party, authority, reply);
        }
        if self.epoch_lag(party, authority, &reply) {
            return Ok(());
        }
        match party {
            Party::Client(i) => self.client_receives(i, authority, asked, reply),
            Party::Bridge => self.bridge_receives(authority, asked, reply),
            Party::Auditor => self.reader_receives(party, authority, asked, reply),
            Party::ByzantineUser(i) => self.byzantine_user_receives(i, authority, asked, reply),
            Party::ByzantineAuthority | Party::Operator => Ok(()),
        }
    }

    fn restart_due(&mut self) -> Result<(), Violation> {
        let (now_ms, faults_on) = (self.now_ms, self.faults_on);
        for authority in 0..AUTHORITIES as AuthorityIndex {
            for shard in 0..self.options.shards {
                let due = self
                    .host(authority, shard)
                    .and_then(|h| h.restart_at_ms)
                    .is_some_and(|at| at <= now_ms || !faults_on);
                if !due {
                    continue;
                }
                self.record("restart", &[u64::from(authority), u64::from(shard)]);
                let host = self.host_mut(authority, shard).expect("honest");
                let outputs = host
                    .restart(now_ms)
                    .map_err(|e| self.host_violation(authority, shard, e))?;
                self.route(authority, shard, outputs)?;
            }
        }
        Ok(())
    }

    /// Completes the fsyncs and fires the credit retransmission timers that are due.
    fn fire_timers(&mut self) -> Result<(), Violation> {
        let now_ms = self.now_ms;
        for authority in 0..AUTHORITIES as AuthorityIndex {
            for shard in 0..self.options.shards {
                let delay_ms = self.durable_delay_ms();
                let Some(host) = self.host_mut(authority, shard) else {
                    continue;
                };
                let outputs = host
                    .tick(now_ms, delay_ms)
                    .map_err(|e| self.host_violation(authority, shard, e))?;
                self.route(authority, shard, outputs)?;
            }
        }
        Ok(())
    }

    /// Moves time to the next thing due: a message, a party's retry, a shard's timer, a restart.
    fn advance_clock(&mut self) {
        let messages = self.network.iter().map(|e| e.deliver_at_ms);
        let shards = self.honest().flat_map(|(_, shards)| {
            shards
                .iter()
                .flat_map(|h| match h.up() {
                    true => [h.role().poll_timeout(), h.host.durable_at()],
                    false => [h.restart_at_ms, None],
                })
                .flatten()
        });
        let next = messages.chain(shards).chain(self.party_wakes()).min();
        self.now_ms = next.unwrap_or(self.now_ms + 1).max(self.now_ms + 1);
    }

    /// Crashes a shard, hands one a malformed channel message, or nothing, as the dice say.
    fn inject_faults(&mut self) -> Result<(), Violation> {
        if self.rng.gen_range(0..1000) < self.options.faults.crash_per_mille {
            self.crash_someone()?;
        }
        if self.rng.gen_range(0..1000) < self.options.faults.corrupt_channel_per_mille {
            self.corrupt_channel()?;
        }
        Ok(())
    }

    fn crash_someone(&mut self) -> Result<(), Violation> {
        let authority = self.rng.gen_range(0..AUTHORITIES) as AuthorityIndex;
        let shard = self.rng.gen_range(0..self.options.shards);
        let restart_at_ms = self.now_ms + self.rng.gen_range(1..=self.options.faults.restart_ms_max);
        let now_ms = self.now_ms;
        let Some(host) = self.host_mut(authority, shard).filter(|h| h.up()) else {
            return Ok(());
        };
        let lossless = host
            .crash(now_ms, restart_at_ms)
            .map_err(|e| self.host_violation(authority, shard, e))?;
        self.report.crashes += 1;
        self.record("crash", &[u64::from(authority), u64::from(shard)]);
        if self.checks.restart_is_lossless && !lossless {
            return Err(self.violation(format!(
                "authority {authority} shard {shard}: rebuilt from its log, it is not the shard that crashed \
                 (something applied was not durable)"
            )));
        }
        Ok(())
    }

    /// Everything settled: every shard up, every funding and correct payment settled at every
    /// honest authority, channels drained, and honest authorities agreeing on every account.
    fn settled(&self) -> bool {
        self.describe_unsettled().is_empty()
    }

    fn describe_unsettled(&self) -> String {
        let mut missing = Vec::new();
        if !self.epoch_settled() {
            missing.push("the epoch change is not over (the seat handed over, every shard in it)".to_string());
        }
        for (authority, shards) in self.honest() {
            if shards.iter().any(|h| !h.up() || h.pending() > 0) {
                missing.push(format!("authority {authority} has a shard down or not yet durable"));
            }
            if shards.iter().any(|h| h.role().shard().credits_unacked() > 0) {
                missing.push(format!("authority {authority} has credits in flight"));
            }
            for (index, funding) in self.bridge.fundings.iter().enumerate() {
                if !self.bridge.funded[index].contains(&authority) {
                    missing.push(format!("authority {authority} misses funding {:?}", &funding.id[..4]));
                }
            }
        }
        for (i, client) in self.clients.iter().enumerate() {
            if !client.is_certified() {
                missing.push(format!("client {i} still has payments to make"));
            }
        }
        for (i, user) in self.byzantine_users.iter().enumerate() {
            if let Some(sequence) = user.unrecovered().next() {
                missing.push(format!("Byzantine user {i}'s contested slot {sequence} is not settled"));
            }
        }
        for account in self.owners.keys() {
            let at: BTreeMap<AuthorityIndex, u64> = self
                .honest()
                .map(|(authority, shards)| {
                    let shard = &shards[self.shard_of(account) as usize];
                    let next = shard.role().shard().account(account, u64::MAX);
                    (authority, next.map_or(0, |a| a.next_sequence))
                })
                .collect();
            let sequences: BTreeSet<u64> = at.values().copied().collect();
            let client_done = match self.owners[account] {
                Party::Client(i) => self.clients[i].certificates.len() as u64,
                _ => 0,
            };
            if sequences.len() > 1 || sequences.iter().any(|&s| s < client_done) {
                missing.push(format!(
                    "account {:?} is at sequences {at:?} (by authority)",
                    &account.0[..4]
                ));
            }
        }
        missing.join("; ")
    }
}

fn input_ticket(input: &Input) -> Ticket {
    match input {
        Input::Transfer { ticket, .. }
        | Input::Confirm { ticket, .. }
        | Input::RoundChange { ticket, .. }
        | Input::Propose { ticket, .. }
        | Input::Lock { ticket, .. }
        | Input::Account { ticket, .. }
        | Input::Fund { ticket, .. }
        | Input::Books { ticket }
        | Input::EnterEpoch { ticket, .. }
        | Input::Epochs { ticket, .. } => *ticket,
        Input::Credits { .. } | Input::CreditAck { .. } => u64::MAX,
    }
}
