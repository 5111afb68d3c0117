//! Distributed key generation and proactive share refresh, as one sans-IO flow of three rounds.
//!
//! Both are FROST's Pedersen DKG (frost-core's `keys::dkg` and `keys::refresh`): round 1
//! broadcasts commitments to a random polynomial with a proof of knowledge, round 2 sends each
//! peer its share of it (over the mutually authenticated, encrypted channel of the wire
//! protocol), and each participant sums what it got into its key share. A refresh shares
//! polynomials whose constant term is zero, so every share changes and the group key does not:
//! old shares stop combining with new ones, and whatever an attacker learned of old shares is
//! worthless once the refresh completes.
//!
//! The DKG is only secure if everyone saw the same round-1 broadcasts, which a point-to-point
//! network does not promise. So a third round confirms: each participant sends a digest of every
//! round-1 package it used, the group key and the public shares it derived, and finishes only
//! when all n agree. A peer that showed two faces fails the ceremony everywhere.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;

use frost::keys::dkg::{round1, round2};
use frost::Identifier;
use frost_secp256k1_tr as frost;
use rand::rngs::StdRng;
use rand::SeedableRng;
use sha2::{Digest, Sha256};
use specie_role::{Output, Role, Round};
use thiserror::Error;

use crate::format::GroupKey;
use crate::keys::{group_key, EndorserId, EndorserKeys, KeyError, Threshold};
use crate::merkle::Hash;

/// Domain of a ceremony's transcript digest.
pub const TRANSCRIPT_DOMAIN: &[u8] = b"specie/endorsement/ceremony-transcript/v1\0";

/// Which ceremony.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CeremonyKind {
    /// A new group key (distributed key generation).
    Generate,
    /// New shares of the same group key; `old` is this participant's current key material.
    Refresh { old: Box<EndorserKeys> },
}

/// What participants send each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CeremonyMessage {
    /// Broadcast: commitments to the sender's polynomial and its proof of knowledge.
    Round1(Box<round1::Package>),
    /// To one peer, confidential: the sender's polynomial evaluated at the recipient.
    Round2(Box<round2::Package>),
    /// Broadcast: what the sender derived, to be compared.
    Confirm(Confirmation),
}

/// A participant's view of the finished ceremony; every participant's must be equal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Confirmation {
    /// Digest of every round-1 package used, in identifier order.
    pub transcript: Hash,
    pub group_key: GroupKey,
    /// Digest of the group's public key package (every endorser's verifying share).
    pub public_shares: Hash,
}

/// What a participant receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CeremonyInput {
    /// Begin (the operator's command, at the same time on every participant).
    Start,
    /// A peer's message, authenticated by the host.
    FromPeer { from: EndorserId, message: CeremonyMessage },
}

/// Why a ceremony failed. A failed ceremony is started again from the beginning, without the
/// peers it names if they keep failing it.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CeremonyError {
    #[error("FROST refused the ceremony's packages: {0}")]
    Frost(#[from] frost::Error),
    #[error("key material refused: {0}")]
    Key(#[from] KeyError),
    #[error("round {round} timed out waiting for {missing:?}")]
    Timeout { round: u8, missing: Vec<EndorserId> },
    #[error("endorser {peer:?} derived another transcript, group key or public shares")]
    Mismatch { peer: EndorserId },
    #[error("the refresh changed the group key (a participant's polynomial had a non-zero constant)")]
    GroupKeyChanged,
}

/// What the ceremony tells the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CeremonyReport {
    Finished { group_key: GroupKey },
    Failed(CeremonyError),
}

enum Stage {
    Idle,
    Round1(round1::SecretPackage),
    Round2(round2::SecretPackage),
    Confirming {
        keys: Box<EndorserKeys>,
        mine: Confirmation,
    },
    Finished,
    Failed,
}

/// One participant of a key generation or refresh.
pub struct Ceremony {
    me: EndorserId,
    threshold: Threshold,
    kind: CeremonyKind,
    round_timeout_ms: u64,
    rng: StdRng,
    stage: Stage,
    deadline_ms: Option<u64>,
    /// Round-1 packages by sender, this participant's own included (for the transcript).
    round1: BTreeMap<Identifier, round1::Package>,
    round2: BTreeMap<Identifier, round2::Package>,
    confirmations: BTreeMap<EndorserId, Confirmation>,
    outcome: Option<EndorserKeys>,
    outputs: VecDeque<Output<Ceremony>>,
}

impl Ceremony {
    /// A participant `me` of a `threshold` group. `seed` is fresh randomness from the host (the
    /// polynomial's coefficients come from it). `round_timeout_ms` bounds each round.
    pub fn new(
        me: EndorserId,
        threshold: Threshold,
        kind: CeremonyKind,
        round_timeout_ms: u64,
        seed: [u8; 32],
    ) -> Ceremony {
        assert!(
            (1..=threshold.n).contains(&me.0),
            "{me:?} is not in a group of {}",
            threshold.n
        );
        if let CeremonyKind::Refresh { old } = &kind {
            assert_eq!(old.id, me, "a refresh renews this participant's own share");
        }
        Ceremony {
            me,
            threshold,
            kind,
            round_timeout_ms,
            rng: StdRng::from_seed(seed),
            stage: Stage::Idle,
            deadline_ms: None,
            round1: BTreeMap::new(),
            round2: BTreeMap::new(),
            confirmations: BTreeMap::new(),
            outcome: None,
            outputs: VecDeque::new(),
        }
    }

    /// The new key material, once every participant confirmed.
    pub fn outcome(&self) -> Option<&EndorserKeys> {
        self.outcome.as_ref()
    }

    fn peers(&self) -> impl Iterator<Item = EndorserId> + '_ {
        self.threshold.endorsers().filter(move |id| *id != self.me)
    }

    fn broadcast(&mut self, message: CeremonyMessage) {
        let peers: Vec<_> = self.peers().collect();
        for to in peers {
            self.outputs.push_back(Output::Send {
                to,
                message: message.clone(),
            });
        }
    }

    fn fail(&mut self, error: CeremonyError) {
        self.stage = Stage::Failed;
        self.deadline_ms = None;
        self.outputs.push_back(Output::Report(CeremonyReport::Failed(error)));
    }

    fn start(&mut self, now_ms: u64) -> Result<(), CeremonyError> {
        let Threshold { k, n } = self.threshold;
        let identifier = self.me.identifier();
        let (secret, package) = match &self.kind {
            CeremonyKind::Generate => frost::keys::dkg::part1(identifier, n, k, &mut self.rng)?,
            CeremonyKind::Refresh { .. } => frost::keys::refresh::refresh_dkg_part1(identifier, n, k, &mut self.rng)?,
        };
        self.round1.insert(identifier, package.clone());
        self.stage = Stage::Round1(secret);
        self.deadline_ms = Some(now_ms.saturating_add(self.round_timeout_ms));
        self.broadcast(CeremonyMessage::Round1(Box::new(package)));
        Ok(())
    }

    /// Stores a peer's message (whatever the stage: a fast peer may be a round ahead). The first
    /// package of each kind from a peer counts; the confirmation round catches equivocation.
    fn receive(&mut self, from: EndorserId, message: CeremonyMessage) {
        if from == self.me || !(1..=self.threshold.n).contains(&from.0) {
            return;
        }
        match message {
            CeremonyMessage::Round1(package) => {
                self.round1.entry(from.identifier()).or_insert(*package);
            }
            CeremonyMessage::Round2(package) => {
                self.round2.entry(from.identifier()).or_insert(*package);
            }
            CeremonyMessage::Confirm(confirmation) => {
                self.confirmations.entry(from).or_insert(confirmation);
            }
        }
    }

    /// Moves through every round whose messages are all in.
    fn progress(&mut self, now_ms: u64) -> Result<(), CeremonyError> {
        let peers = usize::from(self.threshold.n) - 1;
        loop {
            match std::mem::replace(&mut self.stage, Stage::Idle) {
                Stage::Round1(secret) if self.round1.len() == peers + 1 => self.round2_send(now_ms, secret)?,
                Stage::Round2(secret) if self.round2.len() == peers => self.derive(now_ms, &secret)?,
                Stage::Confirming { keys, mine } if self.confirmations.len() == peers => {
                    if let Some((&peer, _)) = self.confirmations.iter().find(|(_, theirs)| **theirs != mine) {
                        return Err(CeremonyError::Mismatch { peer });
                    }
                    self.stage = Stage::Finished;
                    self.deadline_ms = None;
                    self.outputs.push_back(Output::Report(CeremonyReport::Finished {
                        group_key: mine.group_key,
                    }));
                    self.outcome = Some(*keys);
                    return Ok(());
                }
                waiting => {
                    self.stage = waiting;
                    return Ok(());
                }
            }
        }
    }

    fn others_round1(&self) -> BTreeMap<Identifier, round1::Package> {
        let me = self.me.identifier();
        self.round1
            .iter()
            .filter(|(id, _)| **id != me)
            .map(|(id, p)| (*id, p.clone()))
            .collect()
    }

    fn round2_send(&mut self, now_ms: u64, secret: round1::SecretPackage) -> Result<(), CeremonyError> {
        let received = self.others_round1();
        let (secret, packages) = match &self.kind {
            CeremonyKind::Generate => frost::keys::dkg::part2(secret, &received)?,
            CeremonyKind::Refresh { .. } => frost::keys::refresh::refresh_dkg_part2(secret, &received)?,
        };
        for (identifier, package) in packages {
            let to = EndorserId::from_identifier(&identifier).expect("packages are for the group's ids");
            self.outputs.push_back(Output::Send {
                to,
                message: CeremonyMessage::Round2(Box::new(package)),
            });
        }
        self.stage = Stage::Round2(secret);
        self.deadline_ms = Some(now_ms.saturating_add(self.round_timeout_ms));
        Ok(())
    }

    fn derive(&mut self, now_ms: u64, secret: &round2::SecretPackage) -> Result<(), CeremonyError> {
        let received = self.others_round1();
        let (share, public) = match &self.kind {
            CeremonyKind::Generate => frost::keys::dkg::part3(secret, &received, &self.round2)?,
            CeremonyKind::Refresh { old } => frost::keys::refresh::refresh_dkg_shares(
                secret,
                &received,
                &self.round2,
                old.public.clone(),
                old.share.clone(),
            )?,
        };
        let key = group_key(&public)?;
        if let CeremonyKind::Refresh { old } = &self.kind {
            if key != old.group_key() {
                return Err(CeremonyError::GroupKeyChanged);
            }
        }
        let mine = Confirmation {
            transcript: self.transcript()?,
            group_key: key,
            public_shares: Sha256::digest(public.serialize()?).into(),
        };
        let keys = Box::new(EndorserKeys {
            id: self.me,
            share,
            public,
        });
        self.stage = Stage::Confirming { keys, mine };
        self.deadline_ms = Some(now_ms.saturating_add(self.round_timeout_ms));
        self.broadcast(CeremonyMessage::Confirm(mine));
        Ok(())
    }

    /// SHA-256 over the domain, the kind, k, n and each round-1 package (id order, length-prefixed).
    fn transcript(&self) -> Result<Hash, CeremonyError> {
        let mut hasher = Sha256::new();
        hasher.update(TRANSCRIPT_DOMAIN);
        hasher.update([u8::from(matches!(self.kind, CeremonyKind::Refresh { .. }))]);
        hasher.update(self.threshold.k.to_le_bytes());
        hasher.update(self.threshold.n.to_le_bytes());
        for (identifier, package) in &self.round1 {
            let bytes = package.serialize()?;
            hasher.update(identifier.serialize());
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        }
        Ok(hasher.finalize().into())
    }

    fn missing(&self) -> (u8, Vec<EndorserId>) {
        let peers = self.peers();
        match &self.stage {
            Stage::Round1(_) => (
                1,
                peers.filter(|id| !self.round1.contains_key(&id.identifier())).collect(),
            ),
            Stage::Round2(_) => (
                2,
                peers.filter(|id| !self.round2.contains_key(&id.identifier())).collect(),
            ),
            _ => (3, peers.filter(|id| !self.confirmations.contains_key(id)).collect()),
        }
    }
}

impl Role for Ceremony {
    type Command = Infallible;
    type Input = CeremonyInput;
    type Peer = EndorserId;
    type Message = CeremonyMessage;
    type Reply = Infallible;
    type Report = CeremonyReport;

    fn lead(&mut self, _now_ms: u64) {}

    fn follow(&mut self) {}

    fn handle(&mut self, now_ms: u64, input: CeremonyInput) {
        if matches!(self.stage, Stage::Finished | Stage::Failed) {
            return;
        }
        let result = match input {
            CeremonyInput::Start if matches!(self.stage, Stage::Idle) => self.start(now_ms),
            CeremonyInput::Start => Ok(()),
            CeremonyInput::FromPeer { from, message } => {
                self.receive(from, message);
                Ok(())
            }
        };
        if let Err(error) = result.and_then(|()| self.progress(now_ms)) {
            self.fail(error);
        }
    }

    fn apply(&mut self, _now_ms: u64, command: &Infallible) {
        match *command {}
    }

    fn handle_timeout(&mut self, now_ms: u64) {
        if self.deadline_ms.is_some_and(|deadline| deadline <= now_ms) {
            let (round, missing) = self.missing();
            self.fail(CeremonyError::Timeout { round, missing });
        }
    }

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.deadline_ms
    }
}

/// Runs one ceremony per participant to the end, delivering their messages in this process:
/// every participant's outcome (its key material, or why it failed). Every share passes through
/// this process, so it is no safer than a trusted dealer: for tests, as [`crate::deal`] is. A
/// cluster's sentinels run each participant in its own process, over the wire protocol
/// (`specie_cluster::endorsing::generate_keys`).
pub fn run_together(
    mut participants: BTreeMap<EndorserId, Ceremony>,
) -> BTreeMap<EndorserId, Result<EndorserKeys, CeremonyError>> {
    let mut queue: Vec<(EndorserId, EndorserId, CeremonyMessage)> = Vec::new();
    let ids: Vec<_> = participants.keys().copied().collect();
    let mut outcomes = BTreeMap::new();
    let collect = |id: EndorserId, ceremony: &mut Ceremony, queue: &mut Vec<_>, outcomes: &mut BTreeMap<_, _>| {
        let round = Round::take(ceremony);
        for (to, message) in round.sends {
            queue.push((id, to, message));
        }
        for report in round.reports {
            let outcome = match report {
                CeremonyReport::Finished { .. } => {
                    Ok(ceremony.outcome().expect("a finished ceremony has keys").clone())
                }
                CeremonyReport::Failed(error) => Err(error),
            };
            outcomes.insert(id, outcome);
        }
    };
    for id in &ids {
        if let Some(ceremony) = participants.get_mut(id) {
            ceremony.handle(0, CeremonyInput::Start);
            collect(*id, ceremony, &mut queue, &mut outcomes);
        }
    }
    // Bounded: each participant sends a fixed number of messages per round, three rounds.
    while !queue.is_empty() {
        for (from, to, message) in std::mem::take(&mut queue) {
            if let Some(ceremony) = participants.get_mut(&to) {
                ceremony.handle(1, CeremonyInput::FromPeer { from, message });
                collect(to, ceremony, &mut queue, &mut outcomes);
            }
        }
    }
    outcomes
}
