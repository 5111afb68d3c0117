//! Threshold endorsement under a lossy network and compromised endorsers. The network is this
//! world's own version of the endorsement crate's test harness (a seeded queue of messages
//! ordered by delivery time), with duplicates added and garbling left out: channels between the
//! aggregator and its endorsers are authenticated, so a message is lost, late or repeated, never
//! altered.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_endorsement::{
    deal, Aggregator, AggregatorConfig, AggregatorInput, AggregatorMessage, BatchItem, EndorseReply, Endorsement,
    Endorser, EndorserConfig, EndorserId, EndorserInput, EndorserMessage, GroupKey, Hash, Threshold, Validator,
};
use specie_role::{Role, Round, Ticket};

use super::{chance, violation, PrivacyOptions, PrivacyReport};
use crate::Violation;

const AGGREGATOR: u32 = 1;
/// Rounds of submitting the unendorsed transactions again once the network stopped dropping.
/// One is enough unless a batch mixing forgeries with authorised transactions runs out of
/// attempts before the honest endorsers have refused every forgery out of it.
const HEALED_ROUNDS_MAX: u32 = 4;
/// What honest endorsers check a transaction's authorisation tag with; a forger does not know it.
const AUTHORISATION_KEY: [u8; 32] = [0xa7; 32];
const FORGED: &str = "the authorisation tag does not match";

/// A transaction as the endorsers see it: a body, and a tag only its authorised payer can make.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Candidate {
    body: [u8; 16],
    tag: Hash,
}

fn authorisation_tag(body: &[u8; 16]) -> Hash {
    Sha256::new()
        .chain_update(AUTHORISATION_KEY)
        .chain_update(body)
        .finalize()
        .into()
}

impl Candidate {
    fn new(seed: u64, index: u64, forged: bool, rng: &mut StdRng) -> Candidate {
        let mut body = [0u8; 16];
        body[..8].copy_from_slice(&seed.to_le_bytes());
        body[8..].copy_from_slice(&index.to_le_bytes());
        let tag = if forged { rng.gen() } else { authorisation_tag(&body) };
        Candidate { body, tag }
    }

    fn is_authorised(&self) -> bool {
        self.tag == authorisation_tag(&self.body)
    }
}

impl BatchItem for Candidate {
    fn digest(&self) -> Hash {
        Sha256::new()
            .chain_update(self.body)
            .chain_update(self.tag)
            .finalize()
            .into()
    }
}

/// An endorser's checks: the tag, unless the endorser is compromised and signs anything.
struct Sentinel {
    compromised: bool,
}

impl Validator for Sentinel {
    type Item = Candidate;
    type Reason = &'static str;

    fn validate(&mut self, item: &Candidate) -> Result<(), &'static str> {
        if self.compromised || item.is_authorised() {
            Ok(())
        } else {
            Err(FORGED)
        }
    }
}

enum Envelope {
    ToEndorser(EndorserId, AggregatorMessage<Candidate>),
    ToAggregator(EndorserId, EndorserMessage<&'static str>),
}

/// What became of a transaction so far.
#[derive(Clone, Debug)]
enum Fate {
    Unsettled,
    Endorsed(Box<Endorsement>),
    Refused,
}

struct World<'a> {
    options: &'a PrivacyOptions,
    report: &'a mut PrivacyReport,
    trace: &'a mut Sha256,
    rng: StdRng,
    now_ms: u64,
    drop_per_mille: u32,
    aggregator: Aggregator<Candidate, &'static str>,
    endorsers: BTreeMap<EndorserId, Endorser<Sentinel>>,
    compromised: Vec<EndorserId>,
    /// (deliver at, sequence number) → message: equal times keep the order they were sent in.
    in_flight: BTreeMap<(u64, u64), Envelope>,
    sequence: u64,
    candidates: Vec<Candidate>,
    fates: Vec<Fate>,
    /// Ticket → candidate, for the submissions not answered yet.
    unanswered: BTreeMap<Ticket, usize>,
    next_ticket: Ticket,
}

pub(super) fn run(options: &PrivacyOptions, report: &mut PrivacyReport, trace: &mut Sha256) -> Result<(), Violation> {
    let threshold = Threshold::new(options.threshold, options.endorsers)
        .map_err(|e| violation(options, 0, format!("threshold: {e}")))?;
    let (keys, public) = deal(threshold, options.seed).map_err(|e| violation(options, 0, format!("deal: {e}")))?;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut compromised: Vec<EndorserId> = keys.keys().copied().collect();
    compromised.shuffle(&mut rng);
    compromised.truncate(usize::from(options.compromised));
    let endorsers = keys
        .into_iter()
        .map(|(id, keys)| {
            let sentinel = Sentinel {
                compromised: compromised.contains(&id),
            };
            (id, Endorser::new(keys, sentinel, EndorserConfig::default(), rng.gen()))
        })
        .collect();
    let config = AggregatorConfig {
        batch_transactions_max: options.batch_transactions_max,
        batch_delay_ms: 5,
        round_timeout_ms: 50,
        attempts_max: 6,
        ..AggregatorConfig::default()
    };
    let mut aggregator = Aggregator::new(AGGREGATOR, public, config, 1)
        .map_err(|e| violation(options, 0, format!("aggregator: {e}")))?;
    aggregator.lead(0);
    let candidates: Vec<Candidate> = (0..options.endorsement_transactions)
        .map(|index| {
            let forged = chance(&mut rng, options.forged_per_mille);
            Candidate::new(options.seed, index, forged, &mut rng)
        })
        .collect();
    let mut world = World {
        options,
        report,
        trace,
        rng,
        now_ms: 0,
        drop_per_mille: options.drop_per_mille,
        aggregator,
        endorsers,
        compromised,
        in_flight: BTreeMap::new(),
        sequence: 0,
        fates: vec![Fate::Unsettled; candidates.len()],
        candidates,
        unanswered: BTreeMap::new(),
        next_ticket: 1,
    };
    world.endorse_everything()?;
    world.check_endorsements()
}

impl World<'_> {
    /// Endorsement runs on virtual time, not steps: a violation is placed by its millisecond.
    fn violation(&self, message: impl Into<String>) -> Violation {
        violation(self.options, self.now_ms, format!("endorsement: {}", message.into()))
    }

    /// Submits every transaction on the faulty network, then, once it stops dropping, submits
    /// again those that failed until every authorised one is endorsed.
    fn endorse_everything(&mut self) -> Result<(), Violation> {
        for index in 0..self.candidates.len() {
            if chance(&mut self.rng, self.options.endorser_restart_per_mille) {
                self.restart_an_endorser();
            }
            self.submit(index)?;
            let until = self.now_ms + self.rng.gen_range(0..=3);
            self.run_until(until)?;
            self.now_ms = self.now_ms.max(until);
        }
        self.run_until(u64::MAX)?;
        self.drop_per_mille = 0;
        for _ in 0..HEALED_ROUNDS_MAX {
            let unsettled: Vec<usize> = (0..self.candidates.len())
                .filter(|&index| matches!(self.fates[index], Fate::Unsettled))
                .collect();
            if unsettled.is_empty() {
                return Ok(());
            }
            for index in unsettled {
                self.report.resubmitted += 1;
                self.submit(index)?;
            }
            self.run_until(u64::MAX)?;
        }
        let unendorsed = (0..self.candidates.len())
            .filter(|&index| matches!(self.fates[index], Fate::Unsettled))
            .count();
        Err(self.violation(format!(
            "{unendorsed} transactions still unendorsed after {HEALED_ROUNDS_MAX} rounds on a network that no longer drops"
        )))
    }

    /// An endorser keeps nothing durable: restarted, it has forgotten its sessions (their nonces
    /// with them) and draws fresh nonces from a new seed, as its host gives it at every start.
    fn restart_an_endorser(&mut self) {
        let id = EndorserId(self.rng.gen_range(1..=self.options.endorsers));
        let seed: [u8; 32] = self.rng.gen();
        let old = self.endorsers.remove(&id).expect("a member of the group");
        let sentinel = Sentinel {
            compromised: self.compromised.contains(&id),
        };
        let fresh = Endorser::new(old.keys().clone(), sentinel, EndorserConfig::default(), seed);
        self.endorsers.insert(id, fresh);
        self.report.endorser_restarts += 1;
        self.trace.update(id.0.to_le_bytes());
    }

    fn submit(&mut self, index: usize) -> Result<(), Violation> {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.unanswered.insert(ticket, index);
        let item = self.candidates[index].clone();
        self.aggregator
            .handle(self.now_ms, AggregatorInput::Submit { ticket, item });
        self.drain_aggregator()
    }

    /// Sends one message: lost, or delivered once or twice, each copy after its own delay (so
    /// messages overtake each other).
    fn post(&mut self, make: impl Fn() -> Envelope) {
        if chance(&mut self.rng, self.drop_per_mille) {
            self.report.messages_dropped += 1;
            return;
        }
        let copies = if chance(&mut self.rng, self.options.duplicate_per_mille) {
            self.report.messages_duplicated += 1;
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self.now_ms + self.rng.gen_range(0..=self.options.delay_ms_max);
            self.sequence += 1;
            self.in_flight.insert((at, self.sequence), make());
        }
    }

    fn drain_aggregator(&mut self) -> Result<(), Violation> {
        let round = Round::take(&mut self.aggregator);
        for (to, message) in round.sends {
            self.post(|| Envelope::ToEndorser(to, message.clone()));
        }
        for (ticket, reply) in round.replies {
            self.answered(ticket, reply)?;
        }
        Ok(())
    }

    fn deliver_to_endorser(&mut self, id: EndorserId, message: AggregatorMessage<Candidate>) {
        let endorser = self.endorsers.get_mut(&id).expect("a member of the group");
        endorser.handle(
            self.now_ms,
            EndorserInput {
                from: AGGREGATOR,
                message,
            },
        );
        for (_, message) in Round::take(endorser).sends {
            self.post(|| Envelope::ToAggregator(id, message.clone()));
        }
    }

    /// Runs until nothing is in flight and no role waits for a time-out, or `until_ms`.
    fn run_until(&mut self, until_ms: u64) -> Result<(), Violation> {
        loop {
            let next_message = self.in_flight.keys().next().map(|(at, _)| *at);
            let endorser_timeouts = self.endorsers.values().filter_map(|e| e.poll_timeout());
            let next_timeout = self
                .aggregator
                .poll_timeout()
                .into_iter()
                .chain(endorser_timeouts)
                .min();
            let Some(next) = next_message.into_iter().chain(next_timeout).min() else {
                return Ok(());
            };
            if next > until_ms {
                return Ok(());
            }
            self.now_ms = self.now_ms.max(next);
            if next_message == Some(next) {
                let (_, envelope) = self.in_flight.pop_first().expect("a message is due");
                match envelope {
                    Envelope::ToEndorser(id, message) => self.deliver_to_endorser(id, message),
                    Envelope::ToAggregator(from, message) => {
                        self.aggregator
                            .handle(self.now_ms, AggregatorInput::FromEndorser { from, message });
                        self.drain_aggregator()?;
                    }
                }
                continue;
            }
            if self.aggregator.poll_timeout().is_some_and(|t| t <= self.now_ms) {
                self.aggregator.handle_timeout(self.now_ms);
                self.drain_aggregator()?;
            }
            let now = self.now_ms;
            for endorser in self.endorsers.values_mut() {
                if endorser.poll_timeout().is_some_and(|t| t <= now) {
                    endorser.handle_timeout(now);
                }
            }
        }
    }

    /// Checks one answer as it comes: once per ticket, no forgery endorsed, no authorised
    /// transaction refused, and the endorsement verifies for the transaction's digest.
    fn answered(&mut self, ticket: Ticket, reply: EndorseReply<&'static str>) -> Result<(), Violation> {
        let Some(index) = self.unanswered.remove(&ticket) else {
            return Err(self.violation(format!("ticket {ticket} answered twice, or never asked")));
        };
        let candidate = &self.candidates[index];
        self.trace.update(ticket.to_le_bytes());
        match reply {
            EndorseReply::Endorsed(endorsement) => {
                if !candidate.is_authorised() {
                    return Err(self.violation(format!("forged transaction {index} was endorsed")));
                }
                if let Err(error) = endorsement.verify(&self.aggregator.group_key(), &candidate.digest()) {
                    return Err(self.violation(format!("transaction {index}'s endorsement does not verify: {error}")));
                }
                self.trace.update(endorsement.signature);
                self.report.endorsed += 1;
                self.fates[index] = Fate::Endorsed(Box::new(endorsement));
            }
            EndorseReply::Refused { reasons } => {
                if candidate.is_authorised() {
                    return Err(self.violation(format!("authorised transaction {index} was refused: {reasons:?}")));
                }
                self.trace.update(b"refused");
                self.report.forged_refused += 1;
                self.fates[index] = Fate::Refused;
            }
            EndorseReply::Failed => {
                self.trace.update(b"failed");
                self.report.endorsement_failures += 1;
            }
            other => return Err(self.violation(format!("unexpected answer {other:?} from a leading aggregator"))),
        }
        Ok(())
    }

    /// Once all is answered: every endorsement verifies for its own transaction only, and a
    /// forged transaction has no endorsement, nor does any endorsement verify for it.
    fn check_endorsements(&self) -> Result<(), Violation> {
        if !self.unanswered.is_empty() {
            return Err(self.violation(format!("{} submissions never answered", self.unanswered.len())));
        }
        let key: GroupKey = self.aggregator.group_key();
        let digests: Vec<Hash> = self.candidates.iter().map(BatchItem::digest).collect();
        for (index, fate) in self.fates.iter().enumerate() {
            let Fate::Endorsed(endorsement) = fate else {
                continue;
            };
            let other = digests
                .iter()
                .enumerate()
                .find(|&(other, digest)| other != index && endorsement.verify(&key, digest).is_ok());
            if let Some((other, _)) = other {
                return Err(self.violation(format!(
                    "transaction {index}'s endorsement verifies for transaction {other} too"
                )));
            }
        }
        Ok(())
    }
}
