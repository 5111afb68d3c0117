//! Threshold endorsement in the embedded node (the Fabric CBDC framework's endorsement policy):
//! a transaction reaches the coordinator only with one FROST signature of k of the n endorsers
//! over its batch, each endorser having validated every transaction of the batch itself.
//!
//! ```text
//! submit ─▶ endorsement thread: aggregator ⇄ n endorsers (each a sentinel's checks) ─▶ replies
//!        ─▶ the core's gate: the endorsement verifies under the group key ─▶ write ahead ─▶ 2PC
//! ```
//!
//! The roles are `specie-endorsement`'s sans-IO state machines; this thread delivers their
//! messages in memory and runs the endorsers of one round in parallel. All n endorsers live in
//! this one process, so here endorsement adds no security. The gate is what this module adds:
//! `NodeHandle::submit_endorsed` refuses a transaction whose endorsement does not verify, so the
//! same checks stand when endorsers run as separate sentinels (not built yet).
//!
//! Keys come from a trusted dealer seeded by the options, so a restart finds the same group key
//! that the ledger of record's endorsements verify under. A real group runs the distributed key
//! generation of `specie_endorsement::ceremony`, so that no one holds the group secret.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use rayon::prelude::*;
use specie_endorsement::{
    deal, Aggregator, AggregatorConfig, AggregatorInput, AggregatorMessage, EndorseReply, Endorser, EndorserConfig,
    EndorserId, EndorserInput, EndorserMessage, GroupKey, KeyError, Replies, Threshold,
};
use specie_role::{Role, Round, Ticket};
pub use specie_sentinel::endorsement::Candidate;
use specie_sentinel::endorsement::SentinelChecks;
use specie_sentinel::{TrustedKeys, ValidationError};

/// How the embedded node endorses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndorsementOptions {
    /// Signatures needed.
    pub k: u16,
    /// Endorsers.
    pub n: u16,
    /// Seed of the dealt shares: the same seed gives the same group key after a restart.
    pub seed: u64,
    /// Endorsers (1 to n) whose checks are switched off: compromised, they sign whatever they
    /// are sent. For demonstrations and tests of what fewer than k of them can do.
    pub compromised: Vec<u16>,
}

pub type Reply = EndorseReply<ValidationError>;

/// What the endorsement thread is asked.
pub enum Call {
    /// Endorse these; the replies, one each in order, go to the sender.
    Endorse(Vec<Candidate>, Sender<Vec<Reply>>),
    Stop,
}

/// The one aggregator of the embedded group.
const AGGREGATOR: u32 = 1;

/// The way into the endorsement thread.
#[derive(Clone)]
pub struct EndorsementHandle {
    requests: Sender<Call>,
    group_key: GroupKey,
    threshold: Threshold,
}

impl EndorsementHandle {
    pub fn group_key(&self) -> GroupKey {
        self.group_key
    }

    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    /// Has the group endorse `candidates`; one reply each, in order. `None` if the thread is gone.
    pub fn endorse(&self, candidates: Vec<Candidate>) -> Option<Vec<Reply>> {
        let (reply, replies) = crossbeam_channel::bounded(1);
        self.requests.send(Call::Endorse(candidates, reply)).ok()?;
        replies.recv().ok()
    }

    /// Stops the thread once it has answered what it holds.
    pub fn stop(&self) {
        let _ = self.requests.send(Call::Stop);
    }
}

/// A group ready to run, the way in, and its inbox.
pub type StartedGroup = (EndorsementGroup, EndorsementHandle, Receiver<Call>);

/// The endorsement thread's roles and bookkeeping.
pub struct EndorsementGroup {
    aggregator: Aggregator<Candidate, ValidationError>,
    endorsers: Vec<(EndorserId, Endorser<SentinelChecks>)>,
    started: Instant,
    replies: Replies<ValidationError, Sender<Vec<Reply>>>,
}

impl EndorsementGroup {
    /// Deals the group's shares and starts its aggregator and endorsers.
    pub fn new(options: &EndorsementOptions, trusted: TrustedKeys) -> Result<StartedGroup, KeyError> {
        let threshold = Threshold::new(options.k, options.n)?;
        let (shares, public) = deal(threshold, options.seed)?;
        let config = AggregatorConfig {
            batch_delay_ms: 1,
            round_timeout_ms: 2_000,
            ..AggregatorConfig::default()
        };
        let mut aggregator = Aggregator::new(AGGREGATOR, public, config, 1)?;
        aggregator.lead(0);
        let endorsers = shares
            .into_iter()
            .map(|(id, keys)| {
                let checks = SentinelChecks {
                    trusted: trusted.clone(),
                    compromised: options.compromised.contains(&id.0),
                };
                let mut seed = [0u8; 32];
                seed[..8].copy_from_slice(&options.seed.to_le_bytes());
                seed[8..10].copy_from_slice(&id.0.to_le_bytes());
                // Fresh nonces after every restart: the seed mixes in the time the group started.
                let started_ns = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |since| since.as_nanos());
                seed[10..26].copy_from_slice(&started_ns.to_le_bytes());
                (id, Endorser::new(keys, checks, EndorserConfig::default(), seed))
            })
            .collect();
        let (requests, inbox) = crossbeam_channel::bounded(1024);
        let handle = EndorsementHandle {
            requests,
            group_key: aggregator.group_key(),
            threshold,
        };
        let group = EndorsementGroup {
            aggregator,
            endorsers,
            started: Instant::now(),
            replies: Replies::default(),
        };
        Ok((group, handle, inbox))
    }

    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Runs until told to stop or every handle is gone.
    pub fn run(mut self, inbox: Receiver<Call>) {
        loop {
            let wait = self.next_timeout().map_or(Duration::from_secs(3600), |at| {
                Duration::from_millis(at.saturating_sub(self.now_ms()))
            });
            let mut calls = match inbox.recv_timeout(wait) {
                Ok(call) => vec![call],
                Err(RecvTimeoutError::Timeout) => vec![],
                Err(RecvTimeoutError::Disconnected) => return,
            };
            calls.extend(inbox.try_iter());
            let mut stop = false;
            for call in calls {
                match call {
                    Call::Endorse(candidates, reply) => self.accept(candidates, reply),
                    Call::Stop => stop = true,
                }
            }
            self.fire_timeouts();
            self.pump();
            if stop {
                return;
            }
        }
    }

    fn next_timeout(&self) -> Option<u64> {
        let endorsers = self.endorsers.iter().filter_map(|(_, e)| e.poll_timeout());
        self.aggregator.poll_timeout().into_iter().chain(endorsers).min()
    }

    fn fire_timeouts(&mut self) {
        let now = self.now_ms();
        if self.aggregator.poll_timeout().is_some_and(|at| at <= now) {
            self.aggregator.handle_timeout(now);
        }
        for (_, endorser) in &mut self.endorsers {
            if endorser.poll_timeout().is_some_and(|at| at <= now) {
                endorser.handle_timeout(now);
            }
        }
    }

    fn accept(&mut self, candidates: Vec<Candidate>, reply: Sender<Vec<Reply>>) {
        let now = self.now_ms();
        let (tickets, answered) = self.replies.open(candidates.len(), reply);
        for (ticket, item) in tickets.into_iter().zip(candidates) {
            self.aggregator.handle(now, AggregatorInput::Submit { ticket, item });
        }
        if let Some((to, replies)) = answered {
            let _ = to.send(replies);
        }
    }

    /// Delivers messages between the aggregator and the endorsers until none is left, with the
    /// endorsers of each round working in parallel.
    fn pump(&mut self) {
        loop {
            let round = Round::take(&mut self.aggregator);
            for (ticket, reply) in round.replies {
                self.answer(ticket, reply);
            }
            for report in round.reports {
                tracing::debug!(?report, "endorsement coordinator");
            }
            if round.sends.is_empty() {
                return;
            }
            let mut inboxes: BTreeMap<EndorserId, Vec<AggregatorMessage<Candidate>>> = BTreeMap::new();
            for (to, message) in round.sends {
                inboxes.entry(to).or_default().push(message);
            }
            let now = self.now_ms();
            let answers: Vec<(EndorserId, EndorserMessage<ValidationError>)> = self
                .endorsers
                .par_iter_mut()
                .flat_map_iter(|(id, endorser)| {
                    for message in inboxes.get(id).into_iter().flatten() {
                        let input = EndorserInput {
                            from: AGGREGATOR,
                            message: message.clone(),
                        };
                        endorser.handle(now, input);
                    }
                    let id = *id;
                    Round::take(endorser)
                        .sends
                        .into_iter()
                        .map(move |(_, message)| (id, message))
                })
                .collect();
            for (from, message) in answers {
                self.aggregator
                    .handle(now, AggregatorInput::FromEndorser { from, message });
            }
        }
    }

    fn answer(&mut self, ticket: Ticket, reply: Reply) {
        if let Some((to, replies)) = self.replies.answer(ticket, reply) {
            let _ = to.send(replies);
        }
    }
}
