//! Shared by the integration tests: a test transaction, a validator, direct FROST signing, and a
//! seeded network that runs an aggregator with endorsers, dropping and garbling messages.
#![allow(dead_code)]

pub mod ceremony_run;
pub mod wire_run;

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_endorsement::frost;
use specie_endorsement::{
    Aggregator, AggregatorConfig, AggregatorInput, AggregatorMessage, BatchItem, EndorseReply, Endorser,
    EndorserConfig, EndorserId, EndorserInput, EndorserKeys, EndorserMessage, Hash, Validator,
};
use specie_role::{Role, Round, Ticket};

/// A transaction stand-in: its digest is SHA-256 of its body; a body starting with `0xff` is
/// invalid to every honest validator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestTx(pub Vec<u8>);

impl TestTx {
    pub fn valid(n: u64) -> TestTx {
        TestTx(n.to_le_bytes().to_vec())
    }

    pub fn invalid(n: u64) -> TestTx {
        let mut body = vec![0xff];
        body.extend_from_slice(&n.to_le_bytes());
        TestTx(body)
    }

    pub fn is_valid(&self) -> bool {
        self.0.first() != Some(&0xff)
    }
}

impl BatchItem for TestTx {
    fn digest(&self) -> Hash {
        Sha256::digest(&self.0).into()
    }
}

pub const INVALID: &str = "body starts with 0xff";

/// The honest validator; `accept_all` makes a faulty one that signs anything.
#[derive(Clone, Debug, Default)]
pub struct TestValidator {
    pub accept_all: bool,
    pub refuse_all: bool,
    pub seen: usize,
}

impl Validator for TestValidator {
    type Item = TestTx;
    type Reason = &'static str;

    fn validate(&mut self, item: &TestTx) -> Result<(), &'static str> {
        self.seen += 1;
        if self.refuse_all {
            return Err("censored");
        }
        if self.accept_all || item.is_valid() {
            Ok(())
        } else {
            Err(INVALID)
        }
    }
}

pub type TestAggregator = Aggregator<TestTx, &'static str>;
pub type TestEndorser = Endorser<TestValidator>;

/// How an endorser misbehaves in a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Honest,
    /// Never answers.
    Silent,
    /// Answers every round-2 request with a random share.
    GarbleShares,
    /// Refuses every transaction as invalid.
    Censor,
}

/// Network faults of a simulation, in parts per thousand of messages.
#[derive(Clone, Copy, Debug)]
pub struct NetFaults {
    pub drop_per_mille: u32,
    pub garble_per_mille: u32,
    pub delay_ms_max: u64,
}

enum Envelope {
    ToEndorser(EndorserId, AggregatorMessage<TestTx>),
    ToAggregator(EndorserId, EndorserMessage<&'static str>),
}

/// An aggregator and its endorsers on a seeded, lossy network with a simulated clock.
pub struct World {
    pub now_ms: u64,
    pub aggregator: TestAggregator,
    pub endorsers: BTreeMap<EndorserId, TestEndorser>,
    pub faults: BTreeMap<EndorserId, Fault>,
    pub net: NetFaults,
    pub rng: StdRng,
    /// (deliver at, sequence number) → message.
    in_flight: BTreeMap<(u64, u64), Envelope>,
    sequence: u64,
    pub replies: BTreeMap<Ticket, EndorseReply<&'static str>>,
    pub reports: Vec<specie_endorsement::AggregatorReport<&'static str>>,
    pub endorser_reports: Vec<specie_endorsement::EndorserReport<&'static str>>,
}

impl World {
    pub fn new(
        keys: &BTreeMap<EndorserId, EndorserKeys>,
        public: &frost::keys::PublicKeyPackage,
        config: AggregatorConfig,
        faults: BTreeMap<EndorserId, Fault>,
        net: NetFaults,
        seed: u64,
    ) -> World {
        let mut aggregator = TestAggregator::new(7, public.clone(), config, 1).expect("a valid group");
        aggregator.lead(0);
        let endorsers = keys
            .iter()
            .map(|(id, k)| {
                let validator = TestValidator {
                    accept_all: false,
                    refuse_all: faults.get(id) == Some(&Fault::Censor),
                    seen: 0,
                };
                let mut seed_bytes = [0u8; 32];
                seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
                seed_bytes[8..10].copy_from_slice(&id.0.to_le_bytes());
                (
                    *id,
                    Endorser::new(k.clone(), validator, EndorserConfig::default(), seed_bytes),
                )
            })
            .collect();
        World {
            now_ms: 0,
            aggregator,
            endorsers,
            faults,
            net,
            rng: StdRng::seed_from_u64(seed),
            in_flight: BTreeMap::new(),
            sequence: 0,
            replies: BTreeMap::new(),
            reports: Vec::new(),
            endorser_reports: Vec::new(),
        }
    }

    pub fn submit(&mut self, ticket: Ticket, item: TestTx) {
        self.aggregator
            .handle(self.now_ms, AggregatorInput::Submit { ticket, item });
        self.drain_aggregator();
    }

    fn post(&mut self, envelope: Envelope) {
        if self.rng.gen_range(0..1000) < self.net.drop_per_mille {
            return;
        }
        let envelope = if self.rng.gen_range(0..1000) < self.net.garble_per_mille {
            garble(envelope, &mut self.rng)
        } else {
            envelope
        };
        let at = self.now_ms + self.rng.gen_range(0..=self.net.delay_ms_max);
        self.sequence += 1;
        self.in_flight.insert((at, self.sequence), envelope);
    }

    fn drain_aggregator(&mut self) {
        let round = Round::take(&mut self.aggregator);
        for (to, message) in round.sends {
            self.post(Envelope::ToEndorser(to, message));
        }
        for (ticket, reply) in round.replies {
            assert!(
                self.replies.insert(ticket, reply).is_none(),
                "ticket {ticket} answered twice"
            );
        }
        self.reports.extend(round.reports);
    }

    fn deliver_to_endorser(&mut self, id: EndorserId, message: AggregatorMessage<TestTx>) {
        let fault = self.faults.get(&id).copied().unwrap_or(Fault::Honest);
        if fault == Fault::Silent {
            return;
        }
        let endorser = self.endorsers.get_mut(&id).expect("a member");
        endorser.handle(self.now_ms, EndorserInput { from: 7, message });
        let round = Round::take(endorser);
        self.endorser_reports.extend(round.reports);
        for (_, message) in round.sends {
            let message = match (fault, message) {
                (Fault::GarbleShares, EndorserMessage::Share { session, .. }) => EndorserMessage::Share {
                    session,
                    share: random_share(&mut self.rng),
                },
                (_, message) => message,
            };
            self.post(Envelope::ToAggregator(id, message));
        }
    }

    /// Runs until nothing is in flight and no role waits for a time-out, or `until_ms`.
    pub fn run(&mut self, until_ms: u64) {
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
                return;
            };
            if next > until_ms {
                return;
            }
            self.now_ms = self.now_ms.max(next);
            if next_message == Some(next) {
                let (key, envelope) = self.in_flight.pop_first().expect("a message is due");
                debug_assert_eq!(key.0, next);
                match envelope {
                    Envelope::ToEndorser(id, message) => self.deliver_to_endorser(id, message),
                    Envelope::ToAggregator(from, message) => {
                        self.aggregator
                            .handle(self.now_ms, AggregatorInput::FromEndorser { from, message });
                        self.drain_aggregator();
                    }
                }
                continue;
            }
            if self.aggregator.poll_timeout().is_some_and(|t| t <= self.now_ms) {
                self.aggregator.handle_timeout(self.now_ms);
                self.drain_aggregator();
            }
            let now = self.now_ms;
            for endorser in self.endorsers.values_mut() {
                if endorser.poll_timeout().is_some_and(|t| t <= now) {
                    endorser.handle_timeout(now);
                }
            }
        }
    }
}

pub fn random_share(rng: &mut StdRng) -> frost::round2::SignatureShare {
    loop {
        let bytes: [u8; 32] = rng.gen();
        if let Ok(share) = frost::round2::SignatureShare::deserialize(&bytes) {
            return share;
        }
    }
}

/// Garbles a message the way a faulty network or peer might: other commitments, a random share,
/// a different session, a batch with a transaction removed.
fn garble(envelope: Envelope, rng: &mut StdRng) -> Envelope {
    match envelope {
        Envelope::ToAggregator(from, EndorserMessage::Share { session, .. }) => Envelope::ToAggregator(
            from,
            EndorserMessage::Share {
                session,
                share: random_share(rng),
            },
        ),
        Envelope::ToAggregator(from, EndorserMessage::Commitments { session, .. }) => {
            let secret = frost::keys::SigningShare::deserialize(&[7u8; 32]).expect("a scalar");
            let (_, commitments) = frost::round1::commit(&secret, rng);
            Envelope::ToAggregator(
                from,
                EndorserMessage::Commitments {
                    session,
                    commitments: Box::new(commitments),
                },
            )
        }
        Envelope::ToEndorser(
            to,
            AggregatorMessage::Sign {
                session,
                mut items,
                package,
            },
        ) if items.len() > 1 => {
            items.pop();
            Envelope::ToEndorser(
                to,
                AggregatorMessage::Sign {
                    session,
                    items,
                    package,
                },
            )
        }
        Envelope::ToEndorser(to, AggregatorMessage::Commit { session }) => Envelope::ToEndorser(
            to,
            AggregatorMessage::Commit {
                session: session + 1_000_000,
            },
        ),
        other => other,
    }
}
