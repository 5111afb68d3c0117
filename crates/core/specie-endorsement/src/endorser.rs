//! The endorser: one sentinel's part of the threshold signature. Pure and deterministic.
//!
//! It keeps, per (aggregator, session), the nonces it committed to in round 1 and uses them at
//! most once: they are taken out of the session before signing, so no path signs with them
//! twice. A repeated request is answered with the same bytes (the aggregator may have lost the
//! answer); a second, different signing package in a signed session is refused, because two
//! shares with one nonce and two challenges give away the endorser's secret share.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;

use frost::round1::{SigningCommitments, SigningNonces};
use frost::round2::SignatureShare;
use frost::SigningPackage;
use frost_secp256k1_tr as frost;
use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_role::{Output, Role};

use crate::keys::EndorserKeys;
use crate::merkle::MerkleTree;
use crate::messages::{AggregatorId, AggregatorMessage, BatchItem, EndorserMessage, Refusal, SessionId, Validator};
use crate::wire::refusal_text;

/// An endorser's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndorserConfig {
    /// The largest batch it validates and signs, in transactions.
    pub batch_transactions_max: usize,
    /// Sessions it keeps at once (nonces waiting for round 2, shares kept for retransmission);
    /// past it, the oldest session is forgotten, nonces and all.
    pub sessions_max: usize,
    /// How long a session lives after round 1, in milliseconds.
    pub session_ttl_ms: u64,
}

impl Default for EndorserConfig {
    fn default() -> Self {
        EndorserConfig {
            batch_transactions_max: 4096,
            sessions_max: 1024,
            session_ttl_ms: 10_000,
        }
    }
}

/// What an endorser receives: an aggregator's request, authenticated by the host.
#[derive(Clone, Debug, PartialEq)]
pub struct EndorserInput<I> {
    pub from: AggregatorId,
    pub message: AggregatorMessage<I>,
}

/// What the endorser tells its operator.
#[derive(Clone, Debug, PartialEq)]
pub enum EndorserReport<R> {
    /// It refused an aggregator's request (a refusal of a reused session points at a faulty or
    /// malicious aggregator).
    Refused {
        from: AggregatorId,
        session: SessionId,
        refusal: Refusal<R>,
    },
    /// A session was forgotten to make room (`sessions_max`) before it signed.
    Evicted { from: AggregatorId, session: SessionId },
}

struct Session {
    commitments: SigningCommitments,
    /// Present until the endorser signs; taken out to sign, so they are used at most once.
    nonces: Option<SigningNonces>,
    /// What it signed in this session, kept to answer a retransmitted request identically.
    signed: Option<(SigningPackage, SignatureShare)>,
    expires_ms: u64,
}

/// One endorser of a FROST group.
pub struct Endorser<V: Validator> {
    keys: EndorserKeys,
    validator: V,
    config: EndorserConfig,
    /// Draws nonces. Seeded by the host from the operating system at every start: a replayed
    /// seed would replay nonces for new messages.
    rng: StdRng,
    sessions: BTreeMap<(AggregatorId, SessionId), Session>,
    /// Sessions in the order they were opened, for eviction.
    opened: VecDeque<(AggregatorId, SessionId)>,
    outputs: VecDeque<Output<Endorser<V>>>,
}

impl<V: Validator> Endorser<V> {
    /// An endorser with its key share, its validation and a fresh 32-byte `seed` for nonces.
    pub fn new(keys: EndorserKeys, validator: V, config: EndorserConfig, seed: [u8; 32]) -> Endorser<V> {
        assert!(config.sessions_max >= 1 && config.batch_transactions_max >= 1);
        Endorser {
            keys,
            validator,
            config,
            rng: StdRng::from_seed(seed),
            sessions: BTreeMap::new(),
            opened: VecDeque::new(),
            outputs: VecDeque::new(),
        }
    }

    /// The validator, for a host that hands it what it needs before each input (verdicts
    /// computed in parallel, say).
    pub fn validator_mut(&mut self) -> &mut V {
        &mut self.validator
    }

    pub fn keys(&self) -> &EndorserKeys {
        &self.keys
    }

    /// Replaces the key share (after a refresh). Every open session is dropped: its nonces were
    /// committed under the old share's round and must not sign under the new one.
    pub fn replace_keys(&mut self, keys: EndorserKeys) {
        assert_eq!(keys.id, self.keys.id, "a refresh keeps the endorser's identifier");
        self.keys = keys;
        self.sessions.clear();
        self.opened.clear();
    }

    /// Sessions holding unused nonces.
    pub fn sessions_with_nonces(&self) -> usize {
        self.sessions.values().filter(|s| s.nonces.is_some()).count()
    }

    fn send(&mut self, to: AggregatorId, message: EndorserMessage<V::Reason>) {
        self.outputs.push_back(Output::Send { to, message });
    }

    fn refuse(&mut self, from: AggregatorId, session: SessionId, refusal: Refusal<V::Reason>) {
        self.outputs.push_back(Output::Report(EndorserReport::Refused {
            from,
            session,
            refusal: refusal.clone(),
        }));
        self.send(from, EndorserMessage::Refused { session, refusal });
    }

    fn commit(&mut self, now_ms: u64, from: AggregatorId, session: SessionId) {
        if let Some(open) = self.sessions.get(&(from, session)) {
            let commitments = open.commitments;
            return self.send(
                from,
                EndorserMessage::Commitments {
                    session,
                    commitments: Box::new(commitments),
                },
            );
        }
        while self.sessions.len() >= self.config.sessions_max {
            let oldest = self.opened.pop_front().expect("sessions are tracked in opened");
            if let Some(evicted) = self.sessions.remove(&oldest) {
                if evicted.nonces.is_some() {
                    let (from, session) = oldest;
                    self.outputs
                        .push_back(Output::Report(EndorserReport::Evicted { from, session }));
                }
            }
        }
        let (nonces, commitments) = frost::round1::commit(self.keys.share.signing_share(), &mut self.rng);
        let expires_ms = now_ms.saturating_add(self.config.session_ttl_ms);
        let fresh = Session {
            commitments,
            nonces: Some(nonces),
            signed: None,
            expires_ms,
        };
        self.sessions.insert((from, session), fresh);
        self.opened.push_back((from, session));
        debug_assert!(self.sessions.len() <= self.config.sessions_max);
        self.send(
            from,
            EndorserMessage::Commitments {
                session,
                commitments: Box::new(commitments),
            },
        );
    }

    /// Checks a round-2 request against the session and the items; the share to send, or why not.
    fn sign(
        &mut self,
        from: AggregatorId,
        session: SessionId,
        items: &[V::Item],
        package: &SigningPackage,
    ) -> Result<SignatureShare, Refusal<V::Reason>> {
        let open = self.sessions.get(&(from, session)).ok_or(Refusal::UnknownSession)?;
        if let Some((signed, share)) = &open.signed {
            return if signed == package {
                Ok(*share)
            } else {
                Err(Refusal::SessionReused)
            };
        }
        if items.is_empty() || items.len() > self.config.batch_transactions_max {
            return Err(Refusal::BadBatchSize {
                items: items.len(),
                items_max: self.config.batch_transactions_max,
            });
        }
        if package.signing_commitments().get(&self.keys.id.identifier()) != Some(&open.commitments) {
            return Err(Refusal::WrongCommitments);
        }
        let digests: Vec<_> = items.iter().map(BatchItem::digest).collect();
        if package.message().as_slice() != MerkleTree::new(&digests).message() {
            return Err(Refusal::WrongMessage);
        }
        let invalid: Vec<_> = items
            .iter()
            .enumerate()
            .filter_map(|(index, item)| self.validator.validate(item).err().map(|reason| (index as u32, reason)))
            .collect();
        if !invalid.is_empty() {
            return Err(Refusal::Invalid { items: invalid });
        }
        let open = self.sessions.get_mut(&(from, session)).expect("looked up above");
        // Taken before signing: whatever happens next, these nonces never sign again.
        let nonces = open.nonces.take().expect("an unsigned session still holds its nonces");
        let share = frost::round2::sign(package, &nonces, &self.keys.share)
            .map_err(|error| Refusal::Frost(refusal_text(&error.to_string())))?;
        open.signed = Some((package.clone(), share));
        Ok(share)
    }
}

impl<V: Validator> Role for Endorser<V> {
    type Command = Infallible;
    type Input = EndorserInput<V::Item>;
    type Peer = AggregatorId;
    type Message = EndorserMessage<V::Reason>;
    type Reply = Infallible;
    type Report = EndorserReport<V::Reason>;

    /// An endorser keeps nothing durable: leading changes nothing.
    fn lead(&mut self, _now_ms: u64) {}

    fn follow(&mut self) {}

    fn handle(&mut self, now_ms: u64, input: Self::Input) {
        let from = input.from;
        match input.message {
            AggregatorMessage::Commit { session } => self.commit(now_ms, from, session),
            AggregatorMessage::Sign {
                session,
                items,
                package,
            } => match self.sign(from, session, &items, &package) {
                Ok(share) => self.send(from, EndorserMessage::Share { session, share }),
                Err(refusal) => self.refuse(from, session, refusal),
            },
        }
    }

    fn apply(&mut self, _now_ms: u64, command: &Infallible) {
        match *command {}
    }

    /// Forgets expired sessions: unused nonces are dropped, never used late.
    fn handle_timeout(&mut self, now_ms: u64) {
        self.sessions.retain(|_, session| session.expires_ms > now_ms);
        let sessions = &self.sessions;
        self.opened.retain(|key| sessions.contains_key(key));
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.sessions.values().map(|session| session.expires_ms).min()
    }
}
