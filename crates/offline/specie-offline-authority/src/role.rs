//! The offline authority as a role: checks (and signatures) in `handle`, effects in `apply`.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use ed25519_dalek::{Signature, SigningKey, VerifyingKey};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use specie_ed25519::ExpandedSigningKey;
use specie_offline::{
    check_public_key, Denominations, Hop, Instruction, Issuance, KeyBinding, KeyCertificate, KeyRing, KeyStatus,
    Lifecycle, Move, PublicKey, SignedKeyRing, SignedMove, Token, HOPS_MAX, REISSUE_OUTPUTS_MAX,
};
use specie_role::{Durable, Output, Role, Ticket};

use crate::messages::{
    refund_serial, Command, Deposit, DepositLink, DepositOutcome, Funding, Input, Refusal, Reply, Report,
    BINDINGS_PER_CALL_MAX, EVIDENCE_PER_ANSWER_MAX, KEYS_PER_IDENTITY_MAX, REVOCATIONS_PER_ANSWER_MAX,
    TOKENS_PER_FUNDING_MAX,
};
use crate::state::{derive_serial, AuthorityState, StateError};

/// The authority's secret keys, all derived from its seed: per period, one issuing key per
/// denomination and a certifying key; and the bridge key, which signs the key ring here and the
/// payouts for the core in the authority's service.
pub struct AuthorityKeys {
    seed: [u8; 32],
    pub denominations: Denominations,
    /// The windows, and the period the authority starts in (later ones come from its log).
    pub lifecycle: Lifecycle,
    /// Signs the published key ring, and (in the authority's service, through the core's format)
    /// the payouts for the online core (docs/transaction-format.md §5.8); the core banks for its
    /// public key (`specie node --offline-authority`).
    pub bridge: SigningKey,
}

/// One period's secret keys.
struct PeriodKeys {
    period: u32,
    /// `issuing[i]` issues tokens of `denominations.values()[i]` (expanded once: they sign every
    /// token issued).
    issuing: Vec<ExpandedSigningKey>,
    certifying: SigningKey,
}

impl AuthorityKeys {
    /// Deterministic keys from a label, starting in `period` with the default windows (demos,
    /// simulations, tests: anyone can derive them).
    pub fn deterministic(label: &str, denominations: Denominations, period: u32) -> AuthorityKeys {
        let seed = Sha256::digest(format!("specie/offline/deterministic-authority/{label}")).into();
        let lifecycle = Lifecycle {
            current_period: period,
            ..Lifecycle::default()
        };
        AuthorityKeys::from_seed(&seed, denominations, lifecycle)
    }

    /// The keys an authority derives from its secret `seed`, starting in
    /// `lifecycle.current_period`. At most `KEY_RING_KEYS_MAX` issuing keys are live at once (the
    /// deposit window's periods times the denominations).
    pub fn from_seed(seed: &[u8; 32], denominations: Denominations, lifecycle: Lifecycle) -> AuthorityKeys {
        let live = (lifecycle.deposit_periods as usize + 2) * denominations.values().len();
        let certifying = (lifecycle.spend_periods + lifecycle.deposit_periods) as usize + 2;
        assert!(
            live.max(certifying) <= specie_offline::KEY_RING_KEYS_MAX
                && lifecycle.spend_periods <= lifecycle.deposit_periods,
            "the deposit window's issuing keys fit in a key ring, and it is at least the spend window"
        );
        AuthorityKeys {
            seed: *seed,
            denominations,
            lifecycle,
            bridge: derive_key(seed, "bridge", 0),
        }
    }

    fn period_keys(&self, period: u32) -> PeriodKeys {
        PeriodKeys {
            period,
            issuing: self.issuing(period).iter().map(ExpandedSigningKey::new).collect(),
            certifying: self.certifying(period),
        }
    }

    /// The issuing keys of `period`, in the order of the denominations.
    fn issuing(&self, period: u32) -> Vec<SigningKey> {
        (0..self.denominations.values().len() as u64)
            .map(|i| derive_key(&self.seed, "issuing", (u64::from(period) << 32) | i))
            .collect()
    }

    /// The certifying key of `period`.
    pub fn certifying(&self, period: u32) -> SigningKey {
        derive_key(&self.seed, "certifying", u64::from(period))
    }

    /// The issuing keys of `period` (public) with the denominations they issue.
    pub fn issuing_keys(&self, period: u32) -> Vec<(PublicKey, u64)> {
        let keys = self.issuing(period);
        let publics = keys.iter().map(|key| key.verifying_key().to_bytes());
        publics.zip(self.denominations.values().iter().copied()).collect()
    }

    /// What a payee trusts under `lifecycle`: the issuing keys of every period whose tokens may
    /// still be deposited (and the next period's, announced), with `revoked` marked, and those
    /// periods' certifying keys.
    pub fn ring_at(&self, lifecycle: Lifecycle, revoked: &BTreeSet<PublicKey>) -> KeyRing {
        let mut ring = KeyRing::new(lifecycle);
        let start = self.lifecycle.current_period;
        let next = lifecycle.current_period.saturating_add(1);
        for period in lifecycle.oldest_live_period().max(start)..=next {
            for (key, value) in self.issuing_keys(period) {
                ring.add_issuing_key_of(key, value, period)
                    .expect("distinct, valid issuing keys");
                if revoked.contains(&key) {
                    ring.revoke_issuing_key(&key).expect("just added");
                }
            }
        }
        for period in lifecycle.oldest_certifying_period().max(start)..=next {
            ring.add_certifying_key(period, self.certifying(period).verifying_key().to_bytes())
                .expect("a valid certifying key");
        }
        ring
    }

    /// The ring at the start (the first period, nothing revoked).
    pub fn ring(&self) -> KeyRing {
        self.ring_at(self.lifecycle, &BTreeSet::new())
    }
}

/// A key derived from the authority's seed: SHA-256 of a domain, the kind, the seed and `n`.
fn derive_key(seed: &[u8; 32], kind: &str, n: u64) -> SigningKey {
    let mut hasher = Sha256::new();
    hasher.update(b"specie/offline/authority-key/v1/");
    hasher.update(kind.as_bytes());
    hasher.update(seed);
    hasher.update(n.to_le_bytes());
    SigningKey::from_bytes(&hasher.finalize().into())
}

/// The offline authority: enrols identities, certifies one-time keys, issues tokens against
/// fundings from the online core, and takes deposits back, naming whoever spent a token twice.
pub struct OfflineAuthority {
    keys: AuthorityKeys,
    /// The current period's secret keys, and the ring of every live period.
    current: PeriodKeys,
    ring: KeyRing,
    /// The ring as published: signed by the bridge key (again each time the ring changes).
    signed_ring: SignedKeyRing,
    /// Rotations and revocations on their way to the log; the operators waiting for the ring
    /// they make (answered when none is left in flight).
    key_changes_in_flight: usize,
    key_changes_waiting: Vec<Ticket>,
    /// The last period a proposed rotation begins (so two rotations in flight name two periods).
    rotation_proposed: u32,
    /// Denomination → the key that issues it.
    issuing: BTreeMap<u64, usize>,
    state: AuthorityState,
    leading: bool,
    outputs: VecDeque<Output<OfflineAuthority>>,
    registering: HashMap<PublicKey, Vec<Ticket>>,
    /// One-time keys on their way to the log, by the identity they are bound to.
    certifying_keys: HashMap<PublicKey, PublicKey>,
    /// Certification requests on their way to the log, by their first key.
    certifying: HashMap<PublicKey, (Ticket, Vec<KeyCertificate>)>,
    funding: HashMap<[u8; 32], (Funding, Vec<Ticket>)>,
    /// Refunds on their way to the log, by funding id: why, and who waits.
    refunding: HashMap<[u8; 32], (Refusal, Vec<Ticket>)>,
    /// Deposits by link, from the moment they are queued until they are applied or refused.
    depositing: HashMap<DepositLink, Vec<Ticket>>,
    /// Deposits past their cheap checks, waiting for the turn's batch signature check.
    queue: Vec<QueuedDeposit>,
}

/// The most deposits one batch equation checks: with one-hop tokens, 128 signatures and 257
/// points, past the size (190 points) where curve25519-dalek's multiscalar multiplication switches
/// from Straus to Pippenger, which costs less per point (with 32 deposits, one-thread deposits ran
/// 5-8% slower). A bad signature has every signature of its batch checked alone.
pub const DEPOSITS_PER_BATCH: usize = 64;
/// The fewest deposits a batch is cut down to so that a turn gives every core a batch: smaller
/// batches cost more per signature (each has its fixed costs), so a turn of fewer than this many
/// per core leaves cores idle rather than cut it finer.
pub const DEPOSITS_PER_BATCH_MIN: usize = 8;

/// How many batches a turn of `queued` deposits is checked in on `threads` threads: at most
/// [`DEPOSITS_PER_BATCH`] deposits each, and one batch per thread as long as each keeps
/// [`DEPOSITS_PER_BATCH_MIN`] (so 256 deposits are 16 batches of 16 on 16 cores, not 4 of 64 that
/// leave 12 cores idle); past one per thread, a multiple of the threads, so that they finish
/// together. The turn is cut into batches of equal size, give or take one. Which batch a deposit
/// falls in never changes its verdict: a batch accepts exactly what its members would alone.
pub fn deposit_batches(queued: usize, threads: usize) -> usize {
    assert!(threads >= 1, "at least the calling thread");
    let needed = queued.div_ceil(DEPOSITS_PER_BATCH).max(1);
    let shared = threads.min(queued / DEPOSITS_PER_BATCH_MIN);
    let batches = needed.max(shared);
    match batches > threads {
        true => batches.div_ceil(threads) * threads,
        false => batches,
    }
}

/// The most queued deposits whose memory the queue keeps from one turn to the next.
const QUEUE_CAPACITY_KEPT_MAX: usize = 4_096;

/// One signature a deposit needs checked: an owner's, over a statement no table vouches for.
struct SignatureCheck {
    key: VerifyingKey,
    message: Vec<u8>,
    signature: [u8; 64],
}

/// A deposit past its lookups, waiting for the turn's parallel phase: the owners' keys (from the
/// certified table), then the chain's statements hashed, its signatures checked in a batch.
struct QueuedDeposit {
    ticket: Ticket,
    owners: Vec<VerifyingKey>,
    deposit: Deposit,
}

/// What the parallel phase made of a queued deposit.
enum Checked {
    /// Its signatures hold: its link and the re-issue's tokens, signed (none for a defund).
    Verified {
        link: DepositLink,
        issuances: Vec<Issuance>,
    },
    /// A deposit known already, or on its way to the log (not checked again).
    Known {
        link: DepositLink,
    },
    Refused(Refusal),
}

/// A deposit's statements rebuilt and hashed: the signatures to check and its link.
fn signature_checks(queued: &QueuedDeposit) -> (Vec<SignatureCheck>, DepositLink) {
    let Deposit { token, statement, .. } = &queued.deposit;
    let mut checks = Vec::with_capacity(token.hops.len() + 1);
    let mut link = token.issuance.link();
    for (i, (hop, key)) in token.hops.iter().zip(&queued.owners).enumerate() {
        let message = Hop::signing_bytes(&link, (i + 1) as u8, &hop.next_owner, &hop.nonce);
        link = Sha256::digest(&message).into();
        checks.push(SignatureCheck {
            key: *key,
            message,
            signature: hop.signature,
        });
    }
    let message = statement.statement.signing_bytes(&link, (token.hops.len() + 1) as u8);
    let deposit_link: DepositLink = Sha256::digest(&message).into();
    checks.push(SignatureCheck {
        key: *queued.owners.last().expect("the depositor's key"),
        message,
        signature: statement.signature,
    });
    (checks, deposit_link)
}

/// Each deposit's verdict: all its signatures hold, or the first that does not (counting its
/// statements from 1). One batch equation for the lot; if it fails, each signature alone, under
/// the same (cofactored) rule, so a batch accepts exactly what its members would alone, and
/// nothing that evidence would not (docs/offline-mode.md).
fn verify_batch(deposits: &[&[SignatureCheck]]) -> Vec<Result<(), usize>> {
    let checks = deposits.iter().flat_map(|checks| checks.iter());
    let messages: Vec<&[u8]> = checks.clone().map(|check| check.message.as_slice()).collect();
    let signatures: Vec<Signature> = checks
        .clone()
        .map(|check| Signature::from_bytes(&check.signature))
        .collect();
    let keys: Vec<VerifyingKey> = checks.map(|check| check.key).collect();
    if ed25519_dalek::verify_batch(&messages, &signatures, &keys).is_ok() {
        return vec![Ok(()); deposits.len()];
    }
    deposits
        .iter()
        .map(|checks| {
            let bad = checks
                .iter()
                .position(|check| !specie_ed25519::verify_cofactored(&check.key, &check.message, &check.signature));
            bad.map_or(Ok(()), |at| Err(at + 1))
        })
        .collect()
}

impl OfflineAuthority {
    pub fn new(keys: AuthorityKeys) -> OfflineAuthority {
        let ring = keys.ring();
        let signed_ring = SignedKeyRing::sign(ring.clone(), &keys.bridge);
        let first = keys.lifecycle.current_period;
        let state = AuthorityState::new(keys.lifecycle, &keys.issuing_keys(first));
        let current = keys.period_keys(first);
        let issuing = keys
            .denominations
            .values()
            .iter()
            .enumerate()
            .map(|(i, value)| (*value, i))
            .collect();
        OfflineAuthority {
            keys,
            current,
            ring,
            signed_ring,
            key_changes_in_flight: 0,
            key_changes_waiting: Vec::new(),
            rotation_proposed: 0,
            issuing,
            state,
            leading: false,
            outputs: VecDeque::new(),
            registering: HashMap::new(),
            certifying_keys: HashMap::new(),
            certifying: HashMap::new(),
            funding: HashMap::new(),
            refunding: HashMap::new(),
            depositing: HashMap::new(),
            queue: Vec::new(),
        }
    }

    pub fn ring(&self) -> &KeyRing {
        &self.ring
    }

    pub fn books(&self) -> crate::Books {
        self.state.books()
    }

    /// The revocation list: serials of tokens found double spent, in the order found.
    pub fn revoked(&self) -> &[[u8; 16]] {
        &self.state.revoked
    }

    fn reply(&mut self, ticket: Ticket, reply: Reply) {
        self.outputs.push_back(Output::Reply { ticket, reply });
    }

    fn propose(&mut self, command: Command) {
        self.outputs.push_back(Output::Propose(command));
    }

    fn register(&mut self, ticket: Ticket, identity: PublicKey) -> Result<(), Refusal> {
        check_public_key(&identity).map_err(Refusal::BadIdentity)?;
        if self.state.identities.contains(&identity) {
            self.reply(ticket, Reply::Registered);
        } else if let Some(tickets) = self.registering.get_mut(&identity) {
            tickets.push(ticket);
        } else {
            self.registering.insert(identity, vec![ticket]);
            self.propose(Command::Register { identity });
        }
        Ok(())
    }

    /// The identity `key` is (or is about to be) certified for.
    fn holder(&self, key: &PublicKey) -> Option<PublicKey> {
        let known = self
            .state
            .certified
            .get(key)
            .map(|certified| certified.binding.identity);
        known.or_else(|| self.certifying_keys.get(key).copied())
    }

    fn certify(&mut self, ticket: Ticket, bindings: Vec<KeyBinding>) -> Result<(), Refusal> {
        if bindings.len() > BINDINGS_PER_CALL_MAX {
            return Err(Refusal::TooMany {
                count: bindings.len(),
                max: BINDINGS_PER_CALL_MAX,
            });
        }
        for (index, binding) in bindings.iter().enumerate() {
            binding.check().map_err(|error| Refusal::BadBinding { index, error })?;
            if !self.state.identities.contains(&binding.identity) {
                return Err(Refusal::NotRegistered { index });
            }
            if self.state.debts.contains_key(&binding.identity) {
                return Err(Refusal::Convicted { index });
            }
            if self
                .holder(&binding.key)
                .is_some_and(|holder| holder != binding.identity)
            {
                return Err(Refusal::KeyTaken { index });
            }
        }
        self.check_keys_per_identity(&bindings)?;
        let certificates: Vec<KeyCertificate> = bindings
            .iter()
            .map(|binding| KeyCertificate::sign(binding.key, self.current.period, &self.current.certifying))
            .collect();
        let Some(first) = bindings.first().map(|binding| binding.key) else {
            self.reply(ticket, Reply::Certified { certificates });
            return Ok(());
        };
        if self.certifying.contains_key(&first) {
            // The same first key in flight twice: answer this one once the other is applied.
            return Err(Refusal::KeyTaken { index: 0 });
        }
        for binding in &bindings {
            self.certifying_keys.insert(binding.key, binding.identity);
        }
        let certified = bindings
            .into_iter()
            .zip(&certificates)
            .map(|(binding, certificate)| (binding, certificate.signature))
            .collect();
        self.certifying.insert(first, (ticket, certificates));
        self.propose(Command::Certify {
            period: self.current.period,
            certified,
        });
        Ok(())
    }

    /// No identity holds more than [`KEYS_PER_IDENTITY_MAX`] certified keys, counting those on
    /// their way to the log: the key table grows with registered devices, not with requests.
    fn check_keys_per_identity(&self, bindings: &[KeyBinding]) -> Result<(), Refusal> {
        let mut asked: BTreeMap<PublicKey, usize> = BTreeMap::new();
        for binding in bindings {
            if self.holder(&binding.key).is_none() {
                *asked.entry(binding.identity).or_default() += 1;
            }
        }
        for (identity, new) in asked {
            let in_flight = self
                .certifying_keys
                .values()
                .filter(|holder| **holder == identity)
                .count();
            let held = self.state.keys_of(&identity) + in_flight;
            if held + new > KEYS_PER_IDENTITY_MAX {
                return Err(Refusal::TooManyKeys {
                    held,
                    asked: new,
                    limit: KEYS_PER_IDENTITY_MAX,
                });
            }
        }
        Ok(())
    }

    fn issuance(&self, value: u64, kind: &[u8], source: &[u8; 32], index: usize, owner: PublicKey) -> Issuance {
        let key = &self.current.issuing[self.issuing[&value]];
        Issuance::sign(key, derive_serial(kind, source, index), owner)
    }

    /// A funding: issued (once per id); with `refund_to`, refunded there instead if it can never
    /// be issued as it stands ([`Refusal::refundable`]).
    fn fund(&mut self, ticket: Ticket, funding: Funding, refund_to: Option<[u8; 32]>) -> Result<(), Refusal> {
        let mismatch = || Refusal::FundingMismatch {
            id_hex: funding.id.iter().map(|b| format!("{b:02x}")).collect(),
        };
        if let Some((known, issuances)) = self.state.fundings.get(&funding.id) {
            if *known != funding {
                return Err(mismatch());
            }
            let issuances = issuances.clone();
            self.reply(ticket, Reply::Funded { issuances });
            return Ok(());
        }
        if let Some(&(amount, to)) = self.state.refunds.get(&funding.id) {
            let serial = refund_serial(&funding.id);
            let refunded = Reply::Refunded {
                reason: None,
                serial,
                to,
                amount,
            };
            self.reply(ticket, refunded);
            return Ok(());
        }
        if let Some((known, tickets)) = self.funding.get_mut(&funding.id) {
            if *known != funding {
                return Err(mismatch());
            }
            tickets.push(ticket);
            return Ok(());
        }
        if let Some((_, tickets)) = self.refunding.get_mut(&funding.id) {
            tickets.push(ticket);
            return Ok(());
        }
        match (self.issuances_for(&funding), refund_to) {
            (Ok(issuances), _) => {
                self.funding.insert(funding.id, (funding.clone(), vec![ticket]));
                self.propose(Command::Fund { funding, issuances });
            }
            (Err(reason), Some(address)) if reason.refundable() => {
                self.refunding.insert(funding.id, (reason, vec![ticket]));
                self.propose(Command::Refund {
                    id: funding.id,
                    amount: funding.amount,
                    address,
                });
            }
            (Err(reason), _) => return Err(reason),
        }
        Ok(())
    }

    /// The tokens `funding` issues, signed, if its owners are one certified key per token of its
    /// amount.
    fn issuances_for(&self, funding: &Funding) -> Result<Vec<Issuance>, Refusal> {
        let values = self.keys.denominations.split(funding.amount);
        if values.len() > TOKENS_PER_FUNDING_MAX {
            return Err(Refusal::TooMany {
                count: values.len(),
                max: TOKENS_PER_FUNDING_MAX,
            });
        }
        if values.len() != funding.owners.len() {
            return Err(Refusal::FundingOwners {
                amount: funding.amount,
                needed: values.len(),
                given: funding.owners.len(),
            });
        }
        if let Some(index) = funding
            .owners
            .iter()
            .position(|owner| !self.state.certified.contains_key(owner))
        {
            return Err(Refusal::UncertifiedOwner { index });
        }
        Ok(values
            .iter()
            .zip(&funding.owners)
            .enumerate()
            .map(|(i, (value, owner))| self.issuance(*value, b"fund", &funding.id, i, *owner))
            .collect())
    }

    /// The seed's re-validation (001, §IV-E), with specie's changes, its lookups: the issuance is
    /// one this authority made, byte for byte (step 3, so its signature needs no check); every new
    /// owner's certificate is one it issued, byte for byte (looked up, not verified); a re-issue
    /// adds up. The rest waits for the turn's parallel phase ([`OfflineAuthority::verify_queued`]):
    /// the deposit statement signs this instruction (step 2; any hop count, so step 1 is gone) and
    /// the owners' signatures hold (step 4). Double-spend detection (step 5) and the re-issue
    /// (step 6) happen on apply, in log order.
    fn deposit(
        &mut self,
        ticket: Ticket,
        token: Token,
        statement: SignedMove,
        instruction: Instruction,
    ) -> Result<(), Refusal> {
        let issuance = &token.issuance;
        if self.state.issued.get(&issuance.serial) != Some(issuance) {
            return Err(Refusal::UnknownToken);
        }
        if token.hops.len() > HOPS_MAX {
            return Err(Refusal::TooManyHops {
                hops: token.hops.len(),
                hops_max: HOPS_MAX,
            });
        }
        if !statement.statement.is_deposit() {
            return Err(Refusal::NotADeposit);
        }
        let mut owners = Vec::with_capacity(token.hops.len() + 1);
        let first = self.state.verifying_key(&issuance.first_owner);
        owners.push(*first.ok_or(Refusal::UncertifiedKey { hop: 0 })?);
        for (i, hop) in token.hops.iter().enumerate() {
            let certified = self.state.issued_certificate(&hop.next_owner);
            let key = self.state.verifying_key(&hop.next_owner.key).filter(|_| certified);
            owners.push(*key.ok_or(Refusal::UncertifiedKey { hop: i + 1 })?);
        }
        if let Instruction::Reissue { outputs } = &instruction {
            self.check_reissue(outputs, self.state.denomination(&issuance.issuing_key))?;
        }
        self.queue.push(QueuedDeposit {
            ticket,
            owners,
            deposit: Deposit {
                token,
                statement,
                instruction,
                issuances: Vec::new(),
            },
        });
        Ok(())
    }

    /// The refusal of a token past its key's deposit window, if it is.
    fn expired(&self, token: &Token) -> Option<Refusal> {
        let key = &token.issuance.issuing_key;
        match self.state.key_status(key)? {
            KeyStatus::Expired { depositable_through } => Some(Refusal::Expired {
                period: self.state.key_period(key).unwrap_or(0),
                depositable_through,
            }),
            _ => None,
        }
    }

    /// The turn's deposits, on every core: each one's statements hashed, its instruction checked,
    /// its signatures checked in batches ([`deposit_batches`]: one batch equation each, one batch
    /// per core or more), the re-issue signed; deposits known already are not
    /// checked again. A turn of one batch is checked on the calling thread (no other is woken).
    /// Then, in the order they came: known deposits answered (or joined to the same deposit on
    /// its way), the others proposed or refused.
    fn verify_queued(&mut self) {
        let mut queued = std::mem::take(&mut self.queue);
        let batches = deposit_batches(queued.len(), rayon::current_num_threads());
        let bound = |batch: usize| batch * queued.len() / batches;
        let checked: Vec<Checked> = match batches {
            1 => self.check_chunk(&queued),
            _ => (0..batches)
                .into_par_iter()
                .flat_map_iter(|batch| self.check_chunk(&queued[bound(batch)..bound(batch + 1)]))
                .collect(),
        };
        assert_eq!(checked.len(), queued.len(), "a verdict per queued deposit");
        for (queued, checked) in queued.drain(..).zip(checked) {
            let ticket = queued.ticket;
            match checked {
                Checked::Refused(refusal) => self.reply(ticket, Reply::Refused(refusal)),
                Checked::Known { link } | Checked::Verified { link, .. } if self.joins(ticket, &link) => {}
                Checked::Known { link } => unreachable!("a known deposit {link:?} is answered or joined"),
                // A new deposit past its key's deposit window: worth nothing. (Checked after the
                // lookup above, so a deposit paid before and sent again gets its answer again.
                // A revoked key's tokens are paid as any other: the issuance log is the recoup
                // check.)
                Checked::Verified { .. } if self.expired(&queued.deposit.token).is_some() => {
                    let refusal = self.expired(&queued.deposit.token).expect("just checked");
                    self.reply(ticket, Reply::Refused(refusal));
                }
                Checked::Verified { link, issuances } => {
                    self.depositing.insert(link, vec![ticket]);
                    let mut deposit = queued.deposit;
                    deposit.issuances = issuances;
                    self.propose(Command::Deposit(Arc::new(deposit)));
                }
            }
        }
        // The next turn queues into the same memory, unless a burst made it large.
        assert!(self.queue.is_empty(), "nothing is queued while a turn is checked");
        if queued.capacity() <= QUEUE_CAPACITY_KEPT_MAX {
            self.queue = queued;
        }
    }

    /// One batch of queued deposits, checked as [`OfflineAuthority::verify_queued`] says.
    fn check_chunk(&self, chunk: &[QueuedDeposit]) -> Vec<Checked> {
        let hashed: Vec<_> = chunk.iter().map(signature_checks).collect();
        let fresh = |link: &DepositLink| !self.state.outcomes.contains_key(link) && !self.depositing.contains_key(link);
        let mut checked: Vec<Option<Checked>> = chunk
            .iter()
            .zip(&hashed)
            .map(|(queued, (_, link))| {
                let Move::Deposit { instruction, .. } = queued.deposit.statement.statement else {
                    unreachable!("refused in handle");
                };
                match (instruction == queued.deposit.instruction.hash(), fresh(link)) {
                    (false, _) => Some(Checked::Refused(Refusal::InstructionMismatch)),
                    (true, false) => Some(Checked::Known { link: *link }),
                    (true, true) => None,
                }
            })
            .collect();
        let to_verify: Vec<usize> = (0..chunk.len()).filter(|&i| checked[i].is_none()).collect();
        let batch: Vec<&[SignatureCheck]> = to_verify.iter().map(|&i| hashed[i].0.as_slice()).collect();
        for (&i, verdict) in to_verify.iter().zip(verify_batch(&batch)) {
            let link = hashed[i].1;
            checked[i] = Some(match verdict {
                Ok(()) => Checked::Verified {
                    link,
                    issuances: self.reissue(&chunk[i].deposit.instruction, &link),
                },
                Err(statement) => Checked::Refused(Refusal::BadSignature { statement }),
            });
        }
        checked.into_iter().map(|c| c.expect("every deposit checked")).collect()
    }

    /// Answers `ticket` with the outcome of the deposit `link` if it has one, or joins it to the
    /// same deposit on its way to the log; false if the deposit is new.
    fn joins(&mut self, ticket: Ticket, link: &DepositLink) -> bool {
        if let Some(outcome) = self.state.outcomes.get(link) {
            let reply = Reply::Deposited(outcome.clone());
            self.reply(ticket, reply);
            return true;
        }
        match self.depositing.get_mut(link) {
            Some(tickets) => {
                tickets.push(ticket);
                true
            }
            None => false,
        }
    }

    /// The tokens a verified deposit's re-issue gives, signed (none for a defund).
    fn reissue(&self, instruction: &Instruction, link: &DepositLink) -> Vec<Issuance> {
        let Instruction::Reissue { outputs } = instruction else {
            return Vec::new();
        };
        outputs
            .iter()
            .enumerate()
            .map(|(i, (value, owner))| self.issuance(*value, b"reissue", link, i, *owner))
            .collect()
    }

    /// A re-issue gives certified keys tokens of known denominations worth the deposited token.
    fn check_reissue(&self, outputs: &[(u64, PublicKey)], value: u64) -> Result<(), Refusal> {
        if outputs.len() > REISSUE_OUTPUTS_MAX {
            return Err(Refusal::TooMany {
                count: outputs.len(),
                max: REISSUE_OUTPUTS_MAX,
            });
        }
        if let Some((value, _)) = outputs.iter().find(|(v, _)| !self.issuing.contains_key(v)) {
            return Err(Refusal::NotADenomination { value: *value });
        }
        let asked: u128 = outputs.iter().map(|(value, _)| u128::from(*value)).sum();
        if asked != u128::from(value) {
            return Err(Refusal::ReissueValue { asked, value });
        }
        if let Some(index) = outputs
            .iter()
            .position(|(_, owner)| !self.state.certified.contains_key(owner))
        {
            return Err(Refusal::UncertifiedOwner { index });
        }
        Ok(())
    }

    fn evidence(&self, identity: &PublicKey) -> Reply {
        let convictions = self.state.convictions.get(identity).map_or(&[][..], Vec::as_slice);
        let evidence = convictions
            .iter()
            .take(EVIDENCE_PER_ANSWER_MAX)
            .filter_map(|conviction| self.state.evidence(conviction))
            .collect();
        Reply::Evidence(evidence)
    }

    /// The next period: its keys proposed (their public halves go in the log).
    fn rotate(&mut self) {
        let period = self.state.lifecycle.current_period.max(self.rotation_proposed) + 1;
        self.rotation_proposed = period;
        let keys = self.keys.issuing_keys(period);
        self.key_changes_in_flight += 1;
        self.propose(Command::Rotate { period, keys });
    }

    /// Revokes an issuing key; one of the current period's makes the next period begin at once,
    /// so nothing more is issued with it.
    fn revoke_key(&mut self, key: PublicKey) -> Result<(), Refusal> {
        let period = self.state.key_period(&key).ok_or(Refusal::UnknownIssuingKey)?;
        if self.state.revoked_keys.contains(&key) {
            return Err(Refusal::AlreadyRevoked);
        }
        self.key_changes_in_flight += 1;
        self.propose(Command::RevokeKey { key });
        if period == self.state.lifecycle.current_period {
            self.rotate();
        }
        Ok(())
    }

    /// After a rotation or revocation is applied: the current period's keys and the ring follow
    /// the state; the operators waiting get the ring once no key change is left in flight.
    fn keys_changed(&mut self) {
        self.refresh_keys();
        self.key_changes_in_flight = self.key_changes_in_flight.saturating_sub(1);
        if self.key_changes_in_flight == 0 {
            for ticket in std::mem::take(&mut self.key_changes_waiting) {
                self.reply(ticket, Reply::Keys(Box::new(self.signed_ring.clone())));
            }
        }
    }

    /// The current period's keys and the ring, as the state says.
    fn refresh_keys(&mut self) {
        let lifecycle = self.state.lifecycle;
        if self.current.period != lifecycle.current_period {
            self.current = self.keys.period_keys(lifecycle.current_period);
        }
        let ring = self.keys.ring_at(lifecycle, &self.state.revoked_keys);
        if ring != self.ring {
            self.signed_ring = SignedKeyRing::sign(ring.clone(), &self.keys.bridge);
            self.ring = ring;
        }
    }

    fn answer_applied(&mut self, command: &Command, deposited: Option<(DepositLink, DepositOutcome)>) {
        match command {
            Command::Register { identity } => {
                for ticket in self.registering.remove(identity).unwrap_or_default() {
                    self.reply(ticket, Reply::Registered);
                }
            }
            Command::Certify { certified, .. } => {
                for (binding, _) in certified {
                    self.certifying_keys.remove(&binding.key);
                }
                let first = certified.first().map(|(binding, _)| binding.key);
                if let Some((ticket, certificates)) = first.and_then(|key| self.certifying.remove(&key)) {
                    self.reply(ticket, Reply::Certified { certificates });
                }
            }
            Command::Fund { funding, issuances } => {
                let tickets = self
                    .funding
                    .remove(&funding.id)
                    .map(|(_, tickets)| tickets)
                    .unwrap_or_default();
                for ticket in tickets {
                    let issuances = issuances.clone();
                    self.reply(ticket, Reply::Funded { issuances });
                }
            }
            Command::Deposit(deposit) => {
                let (link, outcome) = deposited.expect("a deposit has an outcome");
                if self.leading {
                    self.report_double_spend(&deposit.token.issuance.serial, &outcome);
                }
                for ticket in self.depositing.remove(&link).unwrap_or_default() {
                    self.reply(ticket, Reply::Deposited(outcome.clone()));
                }
            }
            Command::Refund { id, amount, address } => {
                if let Some((reason, tickets)) = self.refunding.remove(id) {
                    let (serial, to, amount) = (refund_serial(id), *address, *amount);
                    for ticket in tickets {
                        let reason = Some(reason.clone());
                        self.reply(
                            ticket,
                            Reply::Refunded {
                                reason,
                                serial,
                                to,
                                amount,
                            },
                        );
                    }
                }
            }
            Command::Rotate { .. } | Command::RevokeKey { .. } => self.keys_changed(),
        }
    }

    fn report_double_spend(&mut self, serial: &[u8; 16], outcome: &DepositOutcome) {
        let DepositOutcome::DoubleSpent { debtor, .. } = outcome else {
            return;
        };
        let conviction = self.state.convictions[debtor]
            .iter()
            .rev()
            .find(|conviction| conviction.serial == *serial)
            .expect("just convicted");
        if let Some(evidence) = self.state.evidence(conviction) {
            self.outputs
                .push_back(Output::Report(Report::DoubleSpend(Box::new(evidence))));
        }
    }
}

impl Role for OfflineAuthority {
    type Command = Command;
    type Input = Input;
    type Peer = std::convert::Infallible;
    type Message = std::convert::Infallible;
    type Reply = Reply;
    type Report = Report;

    fn lead(&mut self, _now_ms: u64) {
        self.leading = true;
    }

    fn follow(&mut self) {
        self.leading = false;
        self.registering.clear();
        self.certifying_keys.clear();
        self.certifying.clear();
        self.funding.clear();
        self.refunding.clear();
        self.depositing.clear();
        self.queue.clear();
        self.key_changes_in_flight = 0;
        self.key_changes_waiting.clear();
        self.rotation_proposed = 0;
    }

    fn handle(&mut self, _now_ms: u64, input: Input) {
        let (ticket, result) = match input {
            Input::Register { ticket, identity } => (ticket, self.register(ticket, identity)),
            Input::Certify { ticket, bindings } => (ticket, self.certify(ticket, bindings)),
            Input::Fund { ticket, funding } => (ticket, self.fund(ticket, funding, None)),
            Input::FundOrRefund {
                ticket,
                funding,
                refund_to,
            } => (ticket, self.fund(ticket, funding, Some(refund_to))),
            Input::Deposit {
                ticket,
                token,
                statement,
                instruction,
            } => (ticket, self.deposit(ticket, *token, statement, instruction)),
            Input::Revocations { ticket, from } => {
                let start = from.min(self.state.revoked.len() as u64) as usize;
                let serials = self.state.revoked[start..]
                    .iter()
                    .take(REVOCATIONS_PER_ANSWER_MAX)
                    .copied()
                    .collect();
                self.reply(ticket, Reply::Revocations { from, serials });
                return;
            }
            Input::Evidence { ticket, identity } => {
                let reply = self.evidence(&identity);
                self.reply(ticket, reply);
                return;
            }
            Input::Keys { ticket } => {
                self.reply(ticket, Reply::Keys(Box::new(self.signed_ring.clone())));
                return;
            }
            Input::Rotate { ticket } => {
                self.rotate();
                self.key_changes_waiting.push(ticket);
                return;
            }
            Input::RevokeKey { ticket, key } => {
                let result = self.revoke_key(key);
                if result.is_ok() {
                    self.key_changes_waiting.push(ticket);
                }
                (ticket, result)
            }
            Input::Books { ticket } => {
                let books = Box::new(self.state.books());
                self.reply(ticket, Reply::Books(books));
                return;
            }
        };
        if let Err(refusal) = result {
            self.reply(ticket, Reply::Refused(refusal));
        }
    }

    fn apply(&mut self, _now_ms: u64, command: &Command) {
        let outcome = self.state.apply(command);
        self.answer_applied(command, outcome);
    }

    fn handle_timeout(&mut self, _now_ms: u64) {}

    fn poll_output(&mut self) -> Option<Output<Self>> {
        if self.outputs.is_empty() && !self.queue.is_empty() {
            self.verify_queued();
        }
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }
}

impl Durable for OfflineAuthority {
    type StateError = StateError;

    fn encode_command(command: &Command) -> Vec<u8> {
        command.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<Command, StateError> {
        Ok(Command::decode(bytes)?)
    }

    fn snapshot(&self) -> Vec<u8> {
        self.state.encode()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), StateError> {
        let first = self.keys.lifecycle.current_period;
        self.state = AuthorityState::decode(self.keys.lifecycle, &self.keys.issuing_keys(first), snapshot)?;
        self.refresh_keys();
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), StateError> {
        self.state.check()
    }
}

#[cfg(test)]
#[path = "role_tests.rs"]
mod tests;
