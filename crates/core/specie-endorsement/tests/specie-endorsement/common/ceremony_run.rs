//! Real ceremonies, driven as `run_together` drives them, recording every message sent.

use std::collections::BTreeMap;

use specie_endorsement::{
    Ceremony, CeremonyInput, CeremonyKind, CeremonyMessage, CeremonyReport, EndorserId, EndorserKeys, Threshold,
};
use specie_role::{Role, Round};

/// One message: sender, recipient, message.
pub type Sent = (EndorserId, EndorserId, CeremonyMessage);

pub struct CeremonyRun {
    /// Every message of the three rounds, in the order sent.
    pub sent: Vec<Sent>,
    /// Every participant's new key material.
    pub keys: BTreeMap<EndorserId, EndorserKeys>,
}

impl CeremonyRun {
    /// The first message `from` sent `to` that `kind` picks.
    pub fn message(&self, from: u16, to: u16, kind: fn(&CeremonyMessage) -> bool) -> CeremonyMessage {
        let found = self.sent.iter().find(|(f, t, m)| f.0 == from && t.0 == to && kind(m));
        found.expect("sent in the run").2.clone()
    }
}

pub fn is_round1(message: &CeremonyMessage) -> bool {
    matches!(message, CeremonyMessage::Round1(_))
}

pub fn is_round2(message: &CeremonyMessage) -> bool {
    matches!(message, CeremonyMessage::Round2(_))
}

pub fn is_confirm(message: &CeremonyMessage) -> bool {
    matches!(message, CeremonyMessage::Confirm(_))
}

/// A distributed key generation; participant `id` draws from seed `[id + seed_offset; 32]`.
pub fn generate(threshold: Threshold, seed_offset: u8) -> CeremonyRun {
    run(threshold, seed_offset, |_| CeremonyKind::Generate)
}

/// A refresh of `old`'s shares.
pub fn refresh(threshold: Threshold, old: &BTreeMap<EndorserId, EndorserKeys>, seed_offset: u8) -> CeremonyRun {
    run(threshold, seed_offset, |id| CeremonyKind::Refresh {
        old: Box::new(old[&id].clone()),
    })
}

fn run(threshold: Threshold, seed_offset: u8, kind: impl Fn(EndorserId) -> CeremonyKind) -> CeremonyRun {
    let mut participants: BTreeMap<_, _> = threshold
        .endorsers()
        .map(|id| {
            let seed = [(id.0 as u8).wrapping_add(seed_offset); 32];
            (id, Ceremony::new(id, threshold, kind(id), 1_000, seed))
        })
        .collect();
    let mut sent = Vec::new();
    let mut queue = Vec::new();
    let mut finished = 0;
    let mut collect = |from: EndorserId, ceremony: &mut Ceremony, queue: &mut Vec<Sent>| {
        let round = Round::take(ceremony);
        for (to, message) in round.sends {
            sent.push((from, to, message.clone()));
            queue.push((from, to, message));
        }
        for report in round.reports {
            assert!(matches!(report, CeremonyReport::Finished { .. }), "{report:?}");
            finished += 1;
        }
    };
    for (id, ceremony) in participants.iter_mut() {
        ceremony.handle(0, CeremonyInput::Start);
        collect(*id, ceremony, &mut queue);
    }
    while !queue.is_empty() {
        for (from, to, message) in std::mem::take(&mut queue) {
            let ceremony = participants.get_mut(&to).expect("a participant");
            ceremony.handle(1, CeremonyInput::FromPeer { from, message });
            collect(to, ceremony, &mut queue);
        }
    }
    assert_eq!(finished, usize::from(threshold.n), "every participant finished");
    let keys = participants
        .iter()
        .map(|(id, ceremony)| (*id, ceremony.outcome().expect("finished").clone()))
        .collect();
    CeremonyRun { sent, keys }
}
