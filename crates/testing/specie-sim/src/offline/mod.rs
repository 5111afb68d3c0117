//! Deterministic simulation of offline cash (docs/offline-mode.md): devices (the real
//! `specie-offline-device` state machine) funded by the real `specie-offline-authority` role pay
//! each other with no network, in random topologies; some devices cheat: they keep a copy of what
//! they pay and spend it again (to one payee or several) or deposit it, signing with keys derived
//! outside the device; payees are shown replays of old payments; devices go online at random to
//! deposit what they hold and fetch the revocation list, and answers get lost on the way back; the
//! authority crashes and restarts from its log (the simulator's host checks that the log rebuilds
//! the crashed state).
//!
//! A share of the payments run as direct hand-overs (`hand_over`): the device crate's hand-over
//! state machines over a link the world carries, with change paid back, links cut, sides that
//! vanish after taking a payment, and hostile messages; tokens signed over and never taken stay
//! in limbo, known to the world, and outstanding at the authority.
//!
//! Every payee's device checks what it receives offline: the chain verifies, the last hop gives
//! the token to the key it offered and signs the nonce it offered for this payment (so a replay is
//! refused), the token is not on the revocation list it last fetched, and it is within the hop
//! limit.
//!
//! The world keeps its own model of every token's tree: who owned each node, and every statement
//! signed on it; what reached the authority is what lies on the way from a deposit it recorded.
//! Checked after every step: the authority's invariants (per issuing key paid ≤ issued, value
//! conserved, debts = refused value). A deposit sent again is answered exactly as
//! the first time, and no token is paid twice. Once every device has synced everything: value is
//! conserved (what was funded is what was defunded plus what the devices hold plus what is owed
//! for tokens in limbo), and the debts are
//! exactly the model's. An owner who signed c statements on one node owes c − 1 copies, and no one
//! else owes anything, so every double spender whose branches reached the authority is named, with
//! the right value, and no honest owner ever is.

mod hand_over;
#[cfg(test)]
mod planted;
#[cfg(test)]
mod planted_hand_over;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::convert::Infallible;
use std::hash::{DefaultHasher, Hasher};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use specie_host::{SimEvent, SimHost};
use specie_offline::{Denominations, Instruction, KeyRing, KeyStatus, Lifecycle, Link, PublicKey};
use specie_offline_authority::{
    AuthorityKeys, Command, DepositOutcome, Input, OfflineAuthority, Refusal, Reply, Report,
};
use specie_role::{Durable, Role};

use crate::world::Violation;
use specie_offline::Token;
use specie_offline_device::DeviceLimits;
use specie_offline_device::{Deposit, DeviceError};
use specie_workload::offline::{self, OfflineActor, PaymentChoice, PaymentEnd};

/// What the world can host as the authority: the real role, or a planted variant of it.
pub trait OfflineRole:
    Durable
    + Role<Command = Command, Input = Input, Reply = Reply, Report = Report, Peer = Infallible, Message = Infallible>
{
}

impl<T> OfflineRole for T where
    T: Durable
        + Role<Command = Command, Input = Input, Reply = Reply, Report = Report, Peer = Infallible, Message = Infallible>
{
}

#[derive(Clone, Debug)]
pub struct OfflineOptions {
    pub seed: u64,
    pub devices: usize,
    /// Devices (among the first ones) that keep a copy of what they pay, sometimes.
    pub cheaters: usize,
    /// Actions before the final sync: payments, replays, syncs, crashes.
    pub steps: usize,
    /// A cheater's chance, per payment, to keep a copy of the token it pays.
    pub copy_per_mille: u32,
    pub replay_per_mille: u32,
    pub sync_per_mille: u32,
    pub crash_per_mille: u32,
    /// Chance that the authority's answer to a deposit is lost on the way back.
    pub answer_loss_per_mille: u32,
    /// Chance that a deposit sends the value back to the core rather than re-issuing it.
    pub defund_per_mille: u32,
    /// Hops a token may carry before a device refuses it (the device policy).
    pub hops_max: usize,
    /// One-time keys a device has certified at a time.
    pub keys_per_certification: usize,
    /// Chance per step that the operator begins the next period, and that it revokes a live
    /// issuing key.
    pub rotate_per_mille: u32,
    pub revoke_per_mille: u32,
    /// Share of payments made as a direct hand-over (the device crate's hand-over state machines
    /// over a link the world carries), and the chance that such a hand-over meets a fault.
    pub hand_over_per_mille: u32,
    pub hand_over_fault_per_mille: u32,
}

impl OfflineOptions {
    /// The options of seed `seed`: the topology, the share of cheaters and the fault rates vary.
    pub fn from_seed(seed: u64) -> OfflineOptions {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x0ff1_11e0);
        let devices = rng.gen_range(3..=7);
        OfflineOptions {
            seed,
            devices,
            cheaters: rng.gen_range(0..=devices / 2),
            steps: rng.gen_range(20..=60),
            copy_per_mille: rng.gen_range(100..=500),
            replay_per_mille: rng.gen_range(0..=100),
            sync_per_mille: rng.gen_range(50..=250),
            crash_per_mille: rng.gen_range(0..=60),
            answer_loss_per_mille: rng.gen_range(0..=300),
            defund_per_mille: rng.gen_range(0..=200),
            hops_max: rng.gen_range(2..=8),
            keys_per_certification: 16,
            rotate_per_mille: rng.gen_range(0..=120),
            revoke_per_mille: rng.gen_range(0..=40),
            hand_over_per_mille: rng.gen_range(150..=450),
            hand_over_fault_per_mille: rng.gen_range(200..=600),
        }
    }
}

/// What a run did, summed over seeds by the soak.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OfflineReport {
    pub payments: u64,
    /// Copies cheaters kept of what they paid.
    pub copies_kept: u64,
    pub replays_refused: u64,
    pub revoked_refused: u64,
    pub hop_limit_reached: u64,
    pub deposits: u64,
    pub deposits_resent: u64,
    pub answers_lost: u64,
    pub double_spends_refused: u64,
    pub debtors: u64,
    pub crashes: u64,
    pub syncs_while_down: u64,
    pub rotations: u64,
    pub keys_revoked: u64,
    /// Deposits refused because their key's deposit window had closed.
    pub expired_refused: u64,
    /// Direct hand-overs begun, and how they ended: completed (of them, with change paid back),
    /// cut on the link, a side vanished after taking a payment, or refused by a side (no change,
    /// not payable, over the payer's maximum, a hostile message).
    pub hand_overs: u64,
    pub hand_overs_completed: u64,
    pub hand_overs_with_change: u64,
    pub hand_overs_cut: u64,
    pub hand_overs_vanished: u64,
    pub hand_overs_refused: u64,
    /// Of the refused, those whose amount could not be made: the payer has too little, or the
    /// payee cannot pay the change back.
    pub hand_overs_not_payable: u64,
    /// Hostile messages (out of turn, garbage, duplicated) a side refused.
    pub hostile_refused: u64,
    /// Payments lost on the way (or refused as revoked), refused when they arrived late, and
    /// their tokens, in limbo: signed to a payee that never took them.
    pub late_payments_refused: u64,
    pub tokens_in_limbo: u64,
    pub trace_digest: u64,
}

/// One node of the world's model of a token's tree: whose it was, what it is worth, and the
/// statements signed on it (by link).
struct ModelNode {
    owner: usize,
    value: u64,
    /// The node this one hangs under (none at an issuance).
    parent: Option<Link>,
    children: Vec<Link>,
}

struct World<R: OfflineRole> {
    options: OfflineOptions,
    rng: StdRng,
    step: u64,
    host: SimHost<R>,
    /// Steps left before a crashed authority comes back.
    down_for: Option<u64>,
    ring: KeyRing,
    devices: Vec<OfflineActor>,
    model: HashMap<Link, ModelNode>,
    /// Payments that happened, for replays: the payee and the tokens as paid.
    paid: Vec<(usize, Vec<Token>)>,
    /// Every deposit's first outcome, by the deposit's link.
    outcomes: HashMap<Link, DepositOutcome>,
    /// The deposit that got each paid token's value, by serial.
    paid_serials: HashMap<[u8; 16], Link>,
    /// The node each deposit the authority recorded was made on.
    deposit_nodes: HashMap<Link, Link>,
    funded: u128,
    defunded: u128,
    /// Tokens signed over in a hand-over and never taken (see `hand_over`).
    limbo: Vec<Token>,
    sides: hand_over::Sides,
    next_ticket: u64,
    trace: DefaultHasher,
    report: OfflineReport,
}

/// Runs the world of `options.seed` with the real authority.
pub fn run_offline(options: OfflineOptions) -> Result<OfflineReport, Violation> {
    run_offline_with(options, || OfflineAuthority::new(authority_keys()))
}

/// Short windows, so that a run's rotations take keys through their whole life: tokens are
/// spendable for one period after their key's and depositable for two.
fn authority_keys() -> AuthorityKeys {
    let lifecycle = Lifecycle {
        current_period: 1,
        spend_periods: 1,
        deposit_periods: 2,
    };
    let seed = [0x51; 32];
    AuthorityKeys::from_seed(&seed, Denominations::default(), lifecycle)
}

fn run_offline_with<R: OfflineRole>(
    options: OfflineOptions,
    fresh: impl Fn() -> R + 'static,
) -> Result<OfflineReport, Violation> {
    run_world(options, fresh, hand_over::Sides::real())
}

/// Runs the world of `options.seed` with the authority `fresh` makes and the hand-over sides
/// `sides` makes.
fn run_world<R: OfflineRole>(
    options: OfflineOptions,
    fresh: impl Fn() -> R + 'static,
    sides: hand_over::Sides,
) -> Result<OfflineReport, Violation> {
    let mut world = World {
        rng: StdRng::seed_from_u64(options.seed),
        step: 0,
        host: SimHost::start("offline-authority", fresh),
        down_for: None,
        ring: authority_keys().ring(),
        devices: Vec::new(),
        model: HashMap::new(),
        paid: Vec::new(),
        outcomes: HashMap::new(),
        paid_serials: HashMap::new(),
        deposit_nodes: HashMap::new(),
        funded: 0,
        defunded: 0,
        limbo: Vec::new(),
        sides,
        next_ticket: 0,
        trace: DefaultHasher::new(),
        report: OfflineReport::default(),
        options,
    };
    world.enrol_and_fund()?;
    for _ in 0..world.options.steps {
        world.step += 1;
        world.act()?;
        world.check_invariants()?;
    }
    world.settle()?;
    world.check_end()?;
    world.report.trace_digest = world.trace.finish();
    Ok(world.report)
}

impl<R: OfflineRole> World<R> {
    fn violation(&self, message: impl Into<String>) -> Violation {
        Violation {
            seed: self.options.seed,
            step: self.step,
            message: message.into(),
        }
    }

    fn chance(&mut self, per_mille: u32) -> bool {
        self.rng.gen_range(0..1000) < per_mille
    }

    /// The authority's answer to `input`, or `None` while it is down. Reports are the leader's
    /// news of a double spend: the world checks the outcomes themselves.
    fn call(&mut self, input: impl FnOnce(u64) -> Input) -> Result<Option<Reply>, Violation> {
        if !self.host.is_up() {
            return Ok(None);
        }
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        let mut answer = None;
        for event in self.host.handle(self.step, input(ticket)) {
            match event {
                SimEvent::Reply { ticket: t, reply } if t == ticket => answer = Some(reply),
                SimEvent::Durable(bytes) => self.trace.write(&bytes),
                _ => {}
            }
        }
        match answer {
            Some(reply) => {
                self.trace.write(format!("{reply:?}").as_bytes());
                Ok(Some(reply))
            }
            None => Err(self.violation("the authority left a call unanswered")),
        }
    }

    fn check_invariants(&self) -> Result<(), Violation> {
        match self.host.role().map(Durable::check_invariants) {
            Some(Err(error)) => Err(self.violation(format!("authority invariant: {error}"))),
            _ => Ok(()),
        }
    }

    /// Every device registers, certifies its first keys and is funded from the core.
    fn enrol_and_fund(&mut self) -> Result<(), Violation> {
        for n in 0..self.options.devices {
            let cheater = n < self.options.cheaters;
            // The world has no clock worth a sync limit, and its amounts are not the point here:
            // the device's own tests cover those limits. The hop limit varies by seed.
            let limits = DeviceLimits {
                holding_max: u64::MAX / 4,
                payment_max: u64::MAX / 4,
                hops_max: self.options.hops_max,
                sync_age_ms_max: u64::MAX,
            };
            let device = OfflineActor::new(self.options.seed, n, cheater, limits, [n as u8; 32]);
            self.devices.push(device);
            let identity = self.devices[n].device.identity();
            match self.call(|ticket| Input::Register { ticket, identity })? {
                Some(Reply::Registered) => {}
                other => return Err(self.violation(format!("registration: {other:?}"))),
            }
            self.certify(n)?;
            let amount = self.rng.gen_range(1..=3_000);
            self.fund(n, amount)?;
        }
        Ok(())
    }

    fn certify(&mut self, device: usize) -> Result<(), Violation> {
        let bindings = self.devices[device]
            .device
            .bindings(self.options.keys_per_certification);
        let count = bindings.len();
        match self.call(|ticket| Input::Certify { ticket, bindings })? {
            Some(Reply::Certified { certificates }) if certificates.len() == count => {
                self.devices[device].device.certified(&certificates);
                Ok(())
            }
            // A named double spender gets no more keys: it can still deposit (to the core), but
            // no longer receive.
            Some(Reply::Refused(Refusal::Convicted { .. })) if self.devices[device].cheater => Ok(()),
            None => Ok(()),
            other => Err(self.violation(format!("device {device}'s certification: {other:?}"))),
        }
    }

    fn fund(&mut self, device: usize, amount: u64) -> Result<(), Violation> {
        let split = Denominations::default().split(amount);
        let funding = self.devices[device]
            .funding(amount, split.len())
            .map_err(|error| self.violation(format!("device {device}'s funding: {error}")))?;
        match self.call(|ticket| Input::Fund { ticket, funding })? {
            Some(Reply::Funded { issuances }) => {
                self.funded += u128::from(amount);
                for (issuance, value) in issuances.iter().zip(split) {
                    self.model_node(issuance.link(), None, device, value);
                }
                let ring = self.ring.clone();
                self.devices[device]
                    .device
                    .receive_issued(&issuances, &ring)
                    .map_err(|error| self.violation(format!("device {device} refused its funding: {error}")))?;
                Ok(())
            }
            other => Err(self.violation(format!("device {device}'s funding: {other:?}"))),
        }
    }

    fn model_node(&mut self, link: Link, parent: Option<Link>, owner: usize, value: u64) {
        self.model.entry(link).or_insert(ModelNode {
            owner,
            value,
            parent,
            children: Vec::new(),
        });
    }

    /// A statement signed on node `parent`: the model counts each distinct one once.
    fn model_child(&mut self, parent: Link, child: Link) -> Result<(), Violation> {
        let Some(node) = self.model.get_mut(&parent) else {
            return Err(self.violation("a statement on a node the model never saw"));
        };
        if !node.children.contains(&child) {
            node.children.push(child);
        }
        Ok(())
    }

    fn act(&mut self) -> Result<(), Violation> {
        if let Some(left) = self.down_for.as_mut() {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.restart()?;
            }
        } else if self.chance(self.options.crash_per_mille) {
            self.host.crash();
            self.report.crashes += 1;
            self.down_for = Some(self.rng.gen_range(1..=5));
            return Ok(());
        }
        if self.chance(self.options.rotate_per_mille) {
            return self.rotate();
        }
        if self.chance(self.options.revoke_per_mille) {
            return self.revoke_key();
        }
        let replay = self.options.replay_per_mille;
        let sync = self.options.sync_per_mille;
        if !self.paid.is_empty() && self.chance(replay) {
            self.replay()
        } else if self.chance(sync) {
            let device = self.rng.gen_range(0..self.devices.len());
            self.sync(device)
        } else if self.chance(self.options.hand_over_per_mille) {
            self.hand_over()
        } else {
            self.pay()
        }
    }

    /// The operator begins the next period; devices see the new ring from now on.
    fn rotate(&mut self) -> Result<(), Violation> {
        match self.call(|ticket| Input::Rotate { ticket })? {
            Some(Reply::Keys(ring)) => {
                self.ring = ring.ring;
                self.report.rotations += 1;
                Ok(())
            }
            None => Ok(()),
            Some(other) => Err(self.violation(format!("rotation: {other:?}"))),
        }
    }

    /// The operator revokes a live issuing key (its tokens go back to the authority, where the
    /// issued ones are paid).
    fn revoke_key(&mut self) -> Result<(), Violation> {
        // A key in use: spendable, and not one of the next period's, which are only announced.
        let current = self.ring.lifecycle().current_period;
        let live: Vec<PublicKey> = self
            .ring
            .issuing_keys()
            .filter(|key| self.ring.key_status(key) == Some(KeyStatus::Spendable))
            .filter(|key| self.ring.key_period(key) <= Some(current))
            .copied()
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let key = live[self.rng.gen_range(0..live.len())];
        match self.call(|ticket| Input::RevokeKey { ticket, key })? {
            Some(Reply::Keys(ring)) => {
                if ring.ring.key_status(&key) != Some(KeyStatus::Revoked) {
                    return Err(self.violation("a revoked key is not marked revoked in the ring"));
                }
                self.ring = ring.ring;
                self.report.keys_revoked += 1;
                Ok(())
            }
            None => Ok(()),
            Some(other) => Err(self.violation(format!("revocation: {other:?}"))),
        }
    }

    fn restart(&mut self) -> Result<(), Violation> {
        self.down_for = None;
        match self.host.restart(self.step) {
            Ok(_) => Ok(()),
            Err(error) => Err(self.violation(format!("authority restart: {error}"))),
        }
    }

    /// A payment between two devices, offline: the payee asks for an amount the payer can make
    /// (a fresh certified key, a fresh nonce), the payer's device pays it (a cheater sometimes
    /// keeps a copy, or spends a copy it kept), the payee's device checks it.
    fn pay(&mut self) -> Result<(), Violation> {
        let payer = self.rng.gen_range(0..self.devices.len());
        let mut payee = self.rng.gen_range(0..self.devices.len() - 1);
        if payee >= payer {
            payee += 1;
        }
        let choice = PaymentChoice {
            pick: self.rng.gen_range(0..usize::MAX),
            spend_copy: self.devices[payer].cheater && self.chance(500),
            nonce: self.rng.gen(),
            keeps_it: self.chance(self.options.copy_per_mille),
            keep_copy: self.chance(self.options.copy_per_mille),
        };
        let ring = self.ring.clone();
        let paid = match offline::pay(&mut self.devices, payer, payee, choice, &ring, self.step) {
            Ok(PaymentEnd::Paid { tokens, copies_kept }) => {
                self.report.copies_kept += copies_kept as u64;
                tokens
            }
            Ok(PaymentEnd::NothingPayable { hop_limit }) => {
                self.report.hop_limit_reached += u64::from(hop_limit);
                return Ok(());
            }
            // It receives nothing until it syncs; or nothing was signed.
            Ok(PaymentEnd::PayeeHasNoKeys | PaymentEnd::NotMade) => return Ok(()),
            Ok(PaymentEnd::RevokedRefused) => {
                self.report.revoked_refused += 1;
                return Ok(());
            }
            Err(error) => return Err(self.violation(format!("a payment from {payer} to {payee} refused: {error}"))),
        };
        for token in &paid {
            let links = token.links();
            let (parent, child) = (links[links.len() - 2], links[links.len() - 1]);
            self.model_child(parent, child)?;
            let value = self.model[&parent].value;
            self.model_node(child, Some(parent), payee, value);
            self.trace.write(&child);
        }
        self.report.payments += 1;
        self.paid.push((payee, paid));
        Ok(())
    }

    /// A payer presents an old payment to its payee again, under a fresh request: the payee must
    /// refuse it, since it is not paid to the key and nonce of this request.
    fn replay(&mut self) -> Result<(), Violation> {
        let (payee, tokens) = self.paid[self.rng.gen_range(0..self.paid.len())].clone();
        let amount = tokens
            .iter()
            .map(|token| self.model[token.links().last().expect("a link")].value)
            .sum();
        let nonce: [u8; 16] = self.rng.gen();
        if self.devices[payee].device.request(amount, nonce, self.step).is_err() {
            return Ok(());
        }
        let ring = self.ring.clone();
        let replayed = self.devices[payee].device.receive(&nonce, &tokens, &ring, self.step);
        self.devices[payee].device.cancel_request(&nonce);
        match replayed {
            Err(DeviceError::NotForThisPayment { .. }) => {
                self.report.replays_refused += 1;
                Ok(())
            }
            // Refused before the nonce is looked at: the payee's key or the tokens went stale.
            Err(_) => Ok(()),
            Ok(_) => Err(self.violation("a replayed payment was accepted")),
        }
    }

    /// A device goes online: it deposits what it holds (a cheater its copies too), resends the
    /// deposits nobody answered, fetches the revocation list and certifies keys.
    fn sync(&mut self, device: usize) -> Result<(), Violation> {
        if !self.host.is_up() {
            self.report.syncs_while_down += 1;
            return Ok(());
        }
        let defund = self.chance(self.options.defund_per_mille);
        self.devices[device].device.deposit_all([device as u8; 32], defund);
        self.devices[device].deposit_copies();
        let answer_loss = self.options.answer_loss_per_mille;
        for deposit in self.devices[device].pending() {
            let lost = self.chance(answer_loss);
            self.deposit(device, deposit, lost)?;
        }
        let from = self.devices[device].device.revocations_seen();
        if let Some(Reply::Revocations { serials, .. }) = self.call(|ticket| Input::Revocations { ticket, from })? {
            self.devices[device].device.synced(&serials, self.step);
        }
        let ring = self.ring.clone();
        self.devices[device].device.forget_stale_keys(&ring);
        if self.devices[device].device.keys_left() < self.options.keys_per_certification / 2 {
            self.certify(device)?;
        }
        Ok(())
    }

    /// A defund's payout terms are its deposit's: the token's serial, the instruction's address,
    /// the token's value (while its key is in the ring); and only a defund is paid out.
    fn check_defund(&self, deposit: &Deposit, outcome: &DepositOutcome) -> Result<(), Violation> {
        let wanted = match deposit.instruction {
            Instruction::Defund { address } => Some(address),
            _ => None,
        };
        let DepositOutcome::Defunded {
            serial,
            address,
            amount,
        } = *outcome
        else {
            return Ok(());
        };
        let issuance = &deposit.token.issuance;
        let value = self.ring.issuing_key(&issuance.issuing_key).map(|(value, _)| value);
        if wanted != Some(address) || serial != issuance.serial || value.is_some_and(|value| value != amount) {
            return Err(self.violation(format!("a payout that does not match its deposit: {outcome:?}")));
        }
        Ok(())
    }

    fn deposit(&mut self, device: usize, deposit: Deposit, lost: bool) -> Result<(), Violation> {
        let parent = *deposit.token.links().last().expect("an issuance link");
        let link = deposit.link();
        let input = |ticket| Input::Deposit {
            ticket,
            token: Box::new(deposit.token.clone()),
            statement: deposit.statement,
            instruction: deposit.instruction.clone(),
        };
        let Some(reply) = self.call(input)? else {
            return Ok(());
        };
        let outcome = match reply {
            Reply::Deposited(outcome) => {
                self.check_defund(&deposit, &outcome)?;
                outcome
            }
            Reply::Refused(Refusal::Expired { .. }) => {
                // Past its deposit window a key leaves the ring.
                let status = self.ring.key_status(&deposit.token.issuance.issuing_key);
                if !matches!(status, None | Some(KeyStatus::Expired { .. })) {
                    return Err(self.violation(format!("a deposit refused as expired, its key {status:?}")));
                }
                self.report.expired_refused += 1;
                let ring = self.ring.clone();
                return self.devices[device]
                    .answered(&deposit.link(), &[], &ring)
                    .map_err(|error| self.violation(format!("device {device}: {error}")));
            }
            reply => return Err(self.violation(format!("device {device}'s deposit refused: {reply:?}"))),
        };
        self.report.deposits += 1;
        self.model_child(parent, link)?;
        self.deposit_nodes.insert(link, parent);
        if let Some(first) = self.outcomes.get(&link) {
            self.report.deposits_resent += 1;
            if *first != outcome {
                return Err(self.violation(format!("a deposit sent again got {outcome:?}, first {first:?}")));
            }
        }
        self.outcomes.entry(link).or_insert_with(|| outcome.clone());
        if matches!(
            outcome,
            DepositOutcome::Reissued { .. } | DepositOutcome::Defunded { .. }
        ) {
            let first = *self.paid_serials.entry(deposit.token.issuance.serial).or_insert(link);
            if first != link {
                return Err(self.violation("a token was paid twice"));
            }
        }
        if lost {
            self.report.answers_lost += 1;
            return Ok(());
        }
        let reissued = match &outcome {
            DepositOutcome::Reissued { issuances } => {
                let value = self.model[&parent].value;
                for issuance in issuances {
                    self.model_node(issuance.link(), None, device, value);
                }
                issuances.clone()
            }
            DepositOutcome::Defunded { amount, .. } => {
                self.defunded += u128::from(*amount);
                Vec::new()
            }
            DepositOutcome::DoubleSpent { .. } => Vec::new(),
            DepositOutcome::AlreadyDeposited => {
                return Err(self.violation("a device's only deposit of a token called a second one"));
            }
        };
        let ring = self.ring.clone();
        self.devices[device]
            .answered(&link, &reissued, &ring)
            .map_err(|error| self.violation(format!("device {device} refused its re-issue: {error}")))
    }

    /// Faults stop: the authority comes back and every device syncs until nothing is pending.
    fn settle(&mut self) -> Result<(), Violation> {
        self.step += 1;
        if !self.host.is_up() {
            self.restart()?;
        }
        self.options.answer_loss_per_mille = 0;
        self.options.defund_per_mille = 0;
        for _round in 0..3 {
            for device in 0..self.devices.len() {
                self.sync(device)?;
            }
        }
        if let Some(device) = self
            .devices
            .iter()
            .position(|d| !d.pending().is_empty() || d.copies_left() > 0)
        {
            return Err(self.violation(format!("device {device} still has unanswered deposits or copies")));
        }
        Ok(())
    }

    fn books(&mut self) -> Result<specie_offline_authority::Books, Violation> {
        match self.call(|ticket| Input::Books { ticket })? {
            Some(Reply::Books(books)) => Ok(*books),
            other => Err(self.violation(format!("books: {other:?}"))),
        }
    }

    /// Every statement the authority has seen: the deposits it recorded and every statement on
    /// the way from each to its issuance. (A payment whose payee later lost the token, refused
    /// as revoked further on, never reaches it.)
    fn reached(&self) -> HashSet<Link> {
        let mut reached = HashSet::new();
        for (deposit, node) in &self.deposit_nodes {
            reached.insert(*deposit);
            let mut at = Some(*node);
            while let Some(link) = at {
                if !reached.insert(link) {
                    break;
                }
                at = self.model[&link].parent;
            }
        }
        reached
    }

    /// The value of the tokens in limbo (signed over in a hand-over, never taken) that stays
    /// outstanding: no deposit was ever made of one (nobody holds them), and a serial no deposit
    /// was paid for, of a key not yet expired, is still owed (once, however many branches of it
    /// are in limbo).
    fn outstanding_in_limbo(&self, books: &specie_offline_authority::Books) -> Result<u128, Violation> {
        let expired: HashSet<PublicKey> = books
            .by_key
            .iter()
            .filter(|key| matches!(key.status, KeyStatus::Expired { .. }))
            .map(|key| key.issuing_key)
            .collect();
        let deposited: HashSet<Link> = self.deposit_nodes.values().copied().collect();
        let mut owed: HashMap<[u8; 16], u64> = HashMap::new();
        for token in &self.limbo {
            let link = *token.links().last().expect("a link");
            if deposited.contains(&link) {
                return Err(self.violation("a token in limbo was deposited"));
            }
            let serial = token.issuance.serial;
            if !self.paid_serials.contains_key(&serial) && !expired.contains(&token.issuance.issuing_key) {
                owed.insert(serial, self.model[&link].value);
            }
        }
        Ok(owed.values().map(|value| u128::from(*value)).sum())
    }

    /// Conservation, paid once, and debts exactly the model's.
    fn check_end(&mut self) -> Result<(), Violation> {
        let books = self.books()?;
        let held: u128 = self.devices.iter().map(|d| u128::from(d.device.balance())).sum();
        // Expired tokens are worth nothing: the devices dropped them when their deposits were
        // refused, and the books count them apart.
        let live = books.outstanding - books.expired;
        let limbo = self.outstanding_in_limbo(&books)?;
        if books.funded != self.funded || books.defunded != self.defunded || live != held + limbo {
            return Err(self.violation(format!(
                "value not conserved: authority funded {} defunded {} outstanding {} (expired {}), world funded {} defunded {} held {held}, in limbo {limbo}",
                books.funded, books.defunded, books.outstanding, books.expired, self.funded, self.defunded
            )));
        }
        let reached = self.reached();
        let mut expected: BTreeMap<PublicKey, u128> = BTreeMap::new();
        for node in self.model.values() {
            let children = node.children.iter().filter(|child| reached.contains(*child)).count() as u128;
            if children > 1 {
                let identity = self.devices[node.owner].device.identity();
                *expected.entry(identity).or_default() += (children - 1) * u128::from(node.value);
            }
        }
        let debts: BTreeMap<PublicKey, u128> = books.debts.iter().map(|d| (d.identity, d.value)).collect();
        if debts != expected {
            return Err(self.violation(format!("debts {debts:?} are not the model's {expected:?}")));
        }
        let honest = |identity: &PublicKey| {
            self.devices
                .iter()
                .any(|d| !d.cheater && d.device.identity() == *identity)
        };
        if debts.keys().any(honest) {
            return Err(self.violation("an honest device is named"));
        }
        for outcome in self.outcomes.values() {
            if let DepositOutcome::DoubleSpent { debtor, .. } = outcome {
                if !expected.contains_key(debtor) {
                    return Err(self.violation("a refused deposit names someone who signed once per token"));
                }
            }
        }
        self.report.double_spends_refused = self
            .outcomes
            .values()
            .filter(|o| matches!(o, DepositOutcome::DoubleSpent { .. }))
            .count() as u64;
        self.report.debtors = debts.len() as u64;
        Ok(())
    }
}
