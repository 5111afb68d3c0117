//! The sentinels' key generation as a cluster runs it (`specie_cluster::endorsing::generate_keys`):
//! the real `Ceremony` of every participant, each message resent until its recipient takes it
//! (so a drop costs a resend interval, never the message), duplicated, delayed and reordered,
//! participants starting at different times. In some seeds one participant equivocates: one
//! peer gets another round-1 package than the rest.
//!
//! Checked: without an equivocator, every participant finishes with the same group key and the
//! same public shares, and any k of the shares sign a BIP-340 signature that verifies under that
//! key; with one, no honest participant finishes at all (the confirmation round catches it), so
//! no two honest sentinels can ever hold shares of different keys.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sha2::{Digest, Sha256};
use specie_endorsement::{
    sign_together, Ceremony, CeremonyError, CeremonyInput, CeremonyKind, CeremonyMessage, CeremonyReport, EndorserId,
    EndorserKeys, Threshold,
};
use specie_role::{Role, Round};

use super::{chance, violation, PrivacyOptions, PrivacyReport};
use crate::Violation;

/// The round time-out the cluster's sentinels use.
const ROUND_TIMEOUT_MS: u64 = 120_000;
/// A sentinel resends a message its recipient did not take after this long.
const RESEND_MS: u64 = 250;
/// The latest a participant starts after the first.
const START_SPREAD_MS: u64 = 2_000;

/// A message in flight: when it arrives, in which order it was sent (ties), from, to, what.
type Delivery = Reverse<(u64, u64, u16, u16, Vec<u8>)>;

struct Network<'a> {
    options: &'a PrivacyOptions,
    rng: StdRng,
    queue: BinaryHeap<Delivery>,
    /// Messages sent so far: orders deliveries due at the same moment.
    sent: u64,
}

impl Network<'_> {
    /// Schedules `message` from `from` to `to`: dropped attempts cost a resend interval each,
    /// a duplicate arrives separately.
    fn send(
        &mut self,
        now_ms: u64,
        from: EndorserId,
        to: EndorserId,
        message: &CeremonyMessage,
        report: &mut PrivacyReport,
    ) {
        let bytes = specie_codec::Encode::encode(message);
        let mut at = now_ms + self.rng.gen_range(0..=self.options.delay_ms_max);
        while chance(&mut self.rng, self.options.drop_per_mille) {
            report.messages_dropped += 1;
            at += RESEND_MS;
        }
        let copies = if chance(&mut self.rng, self.options.duplicate_per_mille) {
            2
        } else {
            1
        };
        report.messages_duplicated += copies - 1;
        for copy in 0..copies {
            self.sent += 1;
            let delay = copy * self.rng.gen_range(0..=RESEND_MS);
            self.queue
                .push(Reverse((at + delay, self.sent, from.0, to.0, bytes.clone())));
        }
    }
}

pub(super) fn run(options: &PrivacyOptions, report: &mut PrivacyReport, trace: &mut Sha256) -> Result<(), Violation> {
    let mut rng = StdRng::seed_from_u64(options.seed ^ 0xce7e_3011);
    let threshold = Threshold::new(options.threshold, options.endorsers).expect("the options make a valid group");
    let equivocator = (rng.gen_range(0..3) == 0).then(|| EndorserId(rng.gen_range(1..=options.endorsers)));
    let mut participants: BTreeMap<EndorserId, Ceremony> = threshold
        .endorsers()
        .map(|id| {
            (
                id,
                Ceremony::new(id, threshold, CeremonyKind::Generate, ROUND_TIMEOUT_MS, rng.gen()),
            )
        })
        .collect();
    // The equivocator's second face: a ceremony of its own id with another polynomial, fed
    // everything the equivocator receives, whose messages (round 1, the round-2 shares that match
    // it, the confirmation) alone reach one peer. That peer can finish with a consistent share of
    // another key; only the confirmation round tells the group.
    let mut twin =
        equivocator.map(|id| Ceremony::new(id, threshold, CeremonyKind::Generate, ROUND_TIMEOUT_MS, rng.gen()));
    let deceived = equivocator.map(|id| EndorserId(id.0 % options.endorsers + 1));
    let mut network = Network {
        options,
        rng: StdRng::seed_from_u64(rng.gen()),
        queue: BinaryHeap::new(),
        sent: 0,
    };
    let mut starts: Vec<(u64, EndorserId)> = threshold
        .endorsers()
        .map(|id| (rng.gen_range(0..=START_SPREAD_MS), id))
        .collect();
    starts.sort();
    let mut outcomes: BTreeMap<EndorserId, Result<EndorserKeys, CeremonyError>> = BTreeMap::new();
    let mut step = 0u64;
    let mut next_start = 0;
    loop {
        step += 1;
        let next_delivery = network.queue.peek().map(|Reverse((at, ..))| *at);
        let next_timeout = participants
            .values()
            .chain(twin.as_ref())
            .filter_map(Role::poll_timeout)
            .min();
        let start_at = starts.get(next_start).map(|(at, _)| *at);
        let Some(now_ms) = [next_delivery, next_timeout, start_at].into_iter().flatten().min() else {
            break;
        };
        let mut touched = BTreeSet::new();
        if start_at == Some(now_ms) {
            let (_, id) = starts[next_start];
            next_start += 1;
            participants
                .get_mut(&id)
                .expect("a participant")
                .handle(now_ms, CeremonyInput::Start);
            if let Some(twin) = twin.as_mut().filter(|_| Some(id) == equivocator) {
                twin.handle(now_ms, CeremonyInput::Start);
            }
            touched.insert(id);
        } else if next_delivery == Some(now_ms) {
            let Reverse((_, _, from, to, bytes)) = network.queue.pop().expect("peeked");
            trace.update(&bytes);
            let message = <CeremonyMessage as specie_codec::Decode>::decode_exact(&bytes)
                .map_err(|error| violation(options, step, format!("a ceremony message does not decode: {error}")))?;
            let (from, to) = (EndorserId(from), EndorserId(to));
            if let Some(twin) = twin.as_mut().filter(|_| Some(to) == equivocator) {
                let message = message.clone();
                twin.handle(now_ms, CeremonyInput::FromPeer { from, message });
            }
            participants
                .get_mut(&to)
                .expect("a participant")
                .handle(now_ms, CeremonyInput::FromPeer { from, message });
            touched.insert(to);
        } else {
            for (id, ceremony) in &mut participants {
                if ceremony.poll_timeout().is_some_and(|at| at <= now_ms) {
                    ceremony.handle_timeout(now_ms);
                    touched.insert(*id);
                }
            }
            if let Some(twin) = twin
                .as_mut()
                .filter(|twin| twin.poll_timeout().is_some_and(|at| at <= now_ms))
            {
                twin.handle_timeout(now_ms);
            }
        }
        for id in touched {
            let ceremony = participants.get_mut(&id).expect("a participant");
            let faces = Faces {
                twin: twin.as_mut().filter(|_| Some(id) == equivocator),
                deceived,
            };
            emit(now_ms, id, ceremony, faces, &mut network, &mut outcomes, report);
        }
    }
    check(options, step, threshold, equivocator, &outcomes, report)
}

/// The equivocator's second face, and the peer it shows it to.
struct Faces<'a> {
    twin: Option<&'a mut Ceremony>,
    deceived: Option<EndorserId>,
}

/// Sends what participant `id` has to say (its second face's messages instead, to the deceived
/// peer) and records its outcome if it has one.
fn emit(
    now_ms: u64,
    id: EndorserId,
    ceremony: &mut Ceremony,
    faces: Faces<'_>,
    network: &mut Network<'_>,
    outcomes: &mut BTreeMap<EndorserId, Result<EndorserKeys, CeremonyError>>,
    report: &mut PrivacyReport,
) {
    let round = Round::take(ceremony);
    let mut sends = round.sends;
    if let Some(twin) = faces.twin {
        sends.retain(|(to, _)| Some(*to) != faces.deceived);
        let second_face = Round::take(twin).sends.into_iter();
        sends.extend(second_face.filter(|(to, _)| Some(*to) == faces.deceived));
    }
    for (to, message) in sends {
        network.send(now_ms, id, to, &message, report);
    }
    for outcome in round.reports {
        let outcome = match outcome {
            CeremonyReport::Finished { .. } => Ok(ceremony.outcome().cloned().expect("finished with keys")),
            CeremonyReport::Failed(error) => Err(error),
        };
        outcomes.insert(id, outcome);
    }
}

fn check(
    options: &PrivacyOptions,
    step: u64,
    threshold: Threshold,
    equivocator: Option<EndorserId>,
    outcomes: &BTreeMap<EndorserId, Result<EndorserKeys, CeremonyError>>,
    report: &mut PrivacyReport,
) -> Result<(), Violation> {
    let honest = |id: &EndorserId| Some(*id) != equivocator;
    let finished: Vec<&EndorserKeys> = outcomes
        .iter()
        .filter(|(id, _)| honest(id))
        .filter_map(|(_, o)| o.as_ref().ok())
        .collect();
    if equivocator.is_some() {
        report.ceremonies_caught_equivocating += 1;
        if !finished.is_empty() {
            return Err(violation(
                options,
                step,
                format!(
                    "{} honest participants finished a ceremony with an equivocator",
                    finished.len()
                ),
            ));
        }
        return Ok(());
    }
    if finished.len() != usize::from(threshold.n) {
        return Err(violation(
            options,
            step,
            format!(
                "{} of {} participants finished: {outcomes:?}",
                finished.len(),
                threshold.n
            ),
        ));
    }
    let key = finished[0].group_key();
    if finished
        .iter()
        .any(|keys| keys.group_key() != key || keys.public != finished[0].public)
    {
        return Err(violation(
            options,
            step,
            "participants derived different group keys or public shares",
        ));
    }
    let shares: BTreeMap<EndorserId, EndorserKeys> = finished.iter().map(|keys| (keys.id, (*keys).clone())).collect();
    // The last k: not always the same k as the endorsement world's first ones.
    let signers: Vec<EndorserId> = threshold
        .endorsers()
        .skip(usize::from(threshold.n - threshold.k))
        .collect();
    let message = [0x5a; 32];
    let signed = sign_together(&shares, &finished[0].public, &signers, &message, options.seed)
        .ok()
        .and_then(|signature| signature.serialize().ok())
        .and_then(|bytes| <[u8; 64]>::try_from(bytes).ok());
    let verifies = signed.zip(key.xonly()).is_some_and(|(signature, key)| {
        let signature = secp256k1::schnorr::Signature::from_byte_array(signature);
        secp256k1::SECP256K1.verify_schnorr(&signature, &message, &key).is_ok()
    });
    if !verifies {
        return Err(violation(
            options,
            step,
            "k shares of the new key do not sign under the group key",
        ));
    }
    report.ceremonies_finished += 1;
    Ok(())
}
