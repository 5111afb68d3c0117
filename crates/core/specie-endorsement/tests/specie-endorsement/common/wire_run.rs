//! One deterministic run of the real roles with the types a cluster puts on the wire: 32-byte
//! digests as items and `RefusalCode` reasons. A 2-of-3 group; endorser 2 refuses digest 1.

use std::collections::{BTreeMap, BTreeSet};

use sha2::{Digest, Sha256};
use specie_endorsement::frost;
use specie_endorsement::{
    deal, Aggregator, AggregatorConfig, AggregatorInput, AggregatorMessage, Endorser, EndorserConfig, EndorserId,
    EndorserInput, EndorserKeys, EndorserMessage, Hash, RefusalCode, Threshold, Validator,
};
use specie_role::{Role, Round};

pub const AGGREGATOR: u32 = 7;

/// Refuses the digests in `refused` as `double_spend`.
pub struct DigestValidator {
    pub refused: BTreeSet<Hash>,
}

impl Validator for DigestValidator {
    type Item = Hash;
    type Reason = RefusalCode;

    fn validate(&mut self, item: &Hash) -> Result<(), RefusalCode> {
        match self.refused.contains(item) {
            true => Err(RefusalCode::new("double_spend").expect("a valid code")),
            false => Ok(()),
        }
    }
}

pub type WireEndorser = Endorser<DigestValidator>;
pub type Sent = (EndorserId, AggregatorMessage<Hash>);
pub type Answered = (EndorserId, EndorserMessage<RefusalCode>);

pub fn wire_digest(i: u8) -> Hash {
    Sha256::digest(format!("specie wire vector {i}")).into()
}

pub struct WireRun {
    pub keys: BTreeMap<EndorserId, EndorserKeys>,
    pub public: frost::keys::PublicKeyPackage,
    pub endorsers: BTreeMap<EndorserId, WireEndorser>,
    /// Every aggregator message of both rounds, in order.
    pub sent: Vec<Sent>,
    /// Every endorser answer of both rounds, in order.
    pub answered: Vec<Answered>,
}

impl WireRun {
    pub fn sent_to(&self, id: u16, tag: fn(&AggregatorMessage<Hash>) -> bool) -> AggregatorMessage<Hash> {
        let found = self.sent.iter().find(|(to, m)| to.0 == id && tag(m));
        found.expect("sent in the run").1.clone()
    }

    pub fn answered_by(&self, id: u16, tag: fn(&EndorserMessage<RefusalCode>) -> bool) -> EndorserMessage<RefusalCode> {
        let found = self.answered.iter().find(|(from, m)| from.0 == id && tag(m));
        found.expect("answered in the run").1.clone()
    }
}

/// Asks `endorser` one thing and returns its one answer.
pub fn ask(endorser: &mut WireEndorser, message: AggregatorMessage<Hash>) -> EndorserMessage<RefusalCode> {
    endorser.handle(
        0,
        EndorserInput {
            from: AGGREGATOR,
            message,
        },
    );
    let mut sends = Round::take(endorser).sends;
    assert_eq!(sends.len(), 1, "one answer per request");
    sends.pop().expect("one answer").1
}

/// Dealer `seed`, endorser nonce seeds `[id; 32]`; the aggregator batches digests 0 and 1,
/// asks endorsers 1 and 2 (k = 2, no spares); endorser 1 signs, endorser 2 refuses digest 1.
pub fn wire_run(seed: u64) -> WireRun {
    let (keys, public) = deal(Threshold::new(2, 3).expect("2 of 3"), seed).expect("dealt");
    let config = AggregatorConfig {
        batch_transactions_max: 2,
        spare_endorsers: 0,
        ..AggregatorConfig::default()
    };
    let mut aggregator: Aggregator<Hash, RefusalCode> =
        Aggregator::new(AGGREGATOR, public.clone(), config, 1).expect("a valid group");
    aggregator.lead(0);
    let mut endorsers: BTreeMap<EndorserId, WireEndorser> = keys
        .iter()
        .map(|(id, k)| {
            let refused = if id.0 == 2 {
                BTreeSet::from([wire_digest(1)])
            } else {
                BTreeSet::new()
            };
            let endorser = Endorser::new(
                k.clone(),
                DigestValidator { refused },
                EndorserConfig::default(),
                [id.0 as u8; 32],
            );
            (*id, endorser)
        })
        .collect();
    for ticket in 0..2u64 {
        let item = wire_digest(ticket as u8);
        aggregator.handle(0, AggregatorInput::Submit { ticket, item });
    }
    let mut pending = Round::take(&mut aggregator).sends;
    let (mut sent, mut answered) = (Vec::new(), Vec::new());
    for _round in 0..2 {
        let mut replies = Vec::new();
        for (to, message) in pending.drain(..) {
            sent.push((to, message.clone()));
            let endorser = endorsers.get_mut(&to).expect("a member");
            replies.push((to, ask(endorser, message)));
        }
        for (from, message) in replies {
            answered.push((from, message.clone()));
            aggregator.handle(0, AggregatorInput::FromEndorser { from, message });
            pending.extend(Round::take(&mut aggregator).sends);
        }
    }
    WireRun {
        keys,
        public,
        endorsers,
        sent,
        answered,
    }
}
