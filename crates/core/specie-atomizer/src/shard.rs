//! A shard of the atomizer shape: its part of the UHS at a height, attested on request and
//! advanced only by the atomizer's blocks, strictly in order.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;

use specie_codec::{put_byte_vec, put_count, put_u64, put_vec, Decode, DecodeError, Encode, Reader};
use specie_role::{Durable, Output, Role, Ticket};
use specie_shard::{ShardRange, ShardRead, ShardReply, ShardStats};
use specie_transaction::UhsId;

use crate::block::{AtomizerLimits, ShardBlock};

const SNAPSHOT_VERSION: u8 = 1;

/// The atomizer asks: is each of these ids unspent, at your height?
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttestRequest {
    pub round: u64,
    pub ids: Vec<UhsId>,
}

/// What the atomizer sends a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardMessage {
    Attest(AttestRequest),
    Block(ShardBlock),
}

/// What binds an attestation to the ids it answers: SHA-256 over a domain and the ids, in the
/// order asked. An answer that reaches a later round under the same number (a restarted
/// atomizer numbers its rounds afresh) does not answer that round's ids, and is dropped.
pub fn attested_ids_digest(ids: &[UhsId]) -> [u8; 32] {
    let mut hasher = specie_transaction::hash::Sha256Writer::new();
    hasher.update(b"specie/atomizer/attested-ids/v1");
    ids.iter().for_each(|id| hasher.update(&id.0));
    hasher.finish()
}

/// A shard's answer to the atomizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShardAnswer {
    /// At `height`, which of the round's ids (whose [`attested_ids_digest`] is `asked`) were in
    /// the UHS, in the order asked.
    Attested {
        round: u64,
        asked: [u8; 32],
        height: u64,
        present: Vec<bool>,
    },
    /// Every block up to `height` is durable here.
    Applied { height: u64 },
    /// A block beyond the next one arrived: send again from `height + 1`.
    Behind { height: u64 },
}

const MESSAGE_ATTEST: u8 = 0;
const MESSAGE_BLOCK: u8 = 1;
const ANSWER_ATTESTED: u8 = 0;
const ANSWER_APPLIED: u8 = 1;
const ANSWER_BEHIND: u8 = 2;
const UHS_ID_BYTES: usize = 32;

/// Bounds on a message between the atomizer and a shard as it crosses a network.
#[derive(Clone, Debug)]
pub struct ShardMessageLimits {
    /// Ids one attestation may ask about or answer.
    pub attest_ids_max: u64,
    pub block: AtomizerLimits,
}

impl Default for ShardMessageLimits {
    fn default() -> Self {
        ShardMessageLimits {
            attest_ids_max: 1_000_000,
            block: AtomizerLimits::default(),
        }
    }
}

/// One kind byte, then the body: `0` attest (round ‖ ids), `1` a shard's block.
impl Encode for ShardMessage {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            ShardMessage::Attest(request) => {
                out.push(MESSAGE_ATTEST);
                put_u64(out, request.round);
                put_vec(out, &request.ids);
            }
            ShardMessage::Block(block) => {
                out.push(MESSAGE_BLOCK);
                block.encode_to(out);
            }
        }
    }
}

impl Decode for ShardMessage {
    type Limits = ShardMessageLimits;
    const WHAT: &'static str = "atomizer message to a shard";

    fn decode_from(reader: &mut Reader<'_>, limits: &ShardMessageLimits) -> Result<Self, DecodeError> {
        match reader.read_u8("atomizer message kind")? {
            MESSAGE_ATTEST => {
                let round = reader.read_u64("attest round")?;
                let ids = reader.read_vec("attest ids", limits.attest_ids_max, UHS_ID_BYTES, |r| {
                    UhsId::decode_from(r, &())
                })?;
                Ok(ShardMessage::Attest(AttestRequest { round, ids }))
            }
            MESSAGE_BLOCK => Ok(ShardMessage::Block(ShardBlock::decode_from(reader, &limits.block)?)),
            _ => Err(DecodeError::NonCanonical {
                what: Self::WHAT,
                reason: "unknown message kind",
            }),
        }
    }

    fn encoded_bytes_max(limits: &ShardMessageLimits) -> usize {
        let attest = 16usize.saturating_add((limits.attest_ids_max as usize).saturating_mul(UHS_ID_BYTES));
        1 + attest.max(ShardBlock::encoded_bytes_max(&limits.block))
    }
}

/// One kind byte, then the body: `0` attested (round ‖ digest asked ‖ height ‖ one byte 0 or 1
/// per id), `1` applied (height), `2` behind (height).
impl Encode for ShardAnswer {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            ShardAnswer::Attested {
                round,
                asked,
                height,
                present,
            } => {
                out.push(ANSWER_ATTESTED);
                put_u64(out, *round);
                out.extend_from_slice(asked);
                put_u64(out, *height);
                put_byte_vec(out, &present.iter().map(|p| u8::from(*p)).collect::<Vec<u8>>());
            }
            ShardAnswer::Applied { height } => {
                out.push(ANSWER_APPLIED);
                put_u64(out, *height);
            }
            ShardAnswer::Behind { height } => {
                out.push(ANSWER_BEHIND);
                put_u64(out, *height);
            }
        }
    }
}

impl Decode for ShardAnswer {
    type Limits = ShardMessageLimits;
    const WHAT: &'static str = "shard answer to the atomizer";

    fn decode_from(reader: &mut Reader<'_>, limits: &ShardMessageLimits) -> Result<Self, DecodeError> {
        match reader.read_u8("shard answer kind")? {
            ANSWER_ATTESTED => {
                let round = reader.read_u64("attested round")?;
                let asked = reader.read_array("attested ids digest")?;
                let height = reader.read_u64("attested height")?;
                let flags = reader.read_byte_vec("presence flags", limits.attest_ids_max)?;
                let present = flags
                    .iter()
                    .map(|&flag| Reader::new(&[flag]).read_bool("presence flag"))
                    .collect::<Result<_, _>>()?;
                Ok(ShardAnswer::Attested {
                    round,
                    asked,
                    height,
                    present,
                })
            }
            ANSWER_APPLIED => Ok(ShardAnswer::Applied {
                height: reader.read_u64("applied height")?,
            }),
            ANSWER_BEHIND => Ok(ShardAnswer::Behind {
                height: reader.read_u64("shard height")?,
            }),
            _ => Err(DecodeError::NonCanonical {
                what: Self::WHAT,
                reason: "unknown answer kind",
            }),
        }
    }

    fn encoded_bytes_max(limits: &ShardMessageLimits) -> usize {
        1 + 8 + 32 + 8 + 8 + limits.attest_ids_max as usize
    }
}

/// What callers and the atomizer hand a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UhsShardInput {
    Atomizer { ticket: Ticket, message: ShardMessage },
    Read { ticket: Ticket, read: ShardRead },
}

/// A shard's reply: to the atomizer, or to a reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UhsShardReply {
    Answer(ShardAnswer),
    Read(ShardReply),
}

/// What a shard tells the operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UhsShardReport {
    /// The atomizer's block spends an id this shard does not hold, or creates one it does: the
    /// atomizer and this shard disagree, and the shard will not move until an operator looks.
    BlockRefused { height: u64, id: UhsId },
}

/// One shard of the atomizer shape.
#[derive(Debug)]
pub struct UhsShard {
    range: ShardRange,
    height: u64,
    uhs: HashSet<UhsId>,
    /// Blocks proposed but not yet durable: the last one's height, and their ids, so the next
    /// block is checked against the state they will leave.
    proposed_through: u64,
    proposed_spent: HashSet<UhsId>,
    proposed_created: HashSet<UhsId>,
    waiting: VecDeque<(u64, Ticket)>,
    outputs: VecDeque<Output<Self>>,
}

impl UhsShard {
    pub fn new(range: ShardRange) -> UhsShard {
        UhsShard::with_unspent(range, [])
    }

    /// A shard whose UHS holds exactly `ids` at height 0 (genesis, tests).
    ///
    /// # Panics
    /// If an id lies outside `range`.
    pub fn with_unspent(range: ShardRange, ids: impl IntoIterator<Item = UhsId>) -> UhsShard {
        let uhs: HashSet<UhsId> = ids.into_iter().collect();
        assert!(uhs.iter().all(|id| range.contains(id)), "an id lies outside {range:?}");
        UhsShard {
            range,
            height: 0,
            uhs,
            proposed_through: 0,
            proposed_spent: HashSet::new(),
            proposed_created: HashSet::new(),
            waiting: VecDeque::new(),
            outputs: VecDeque::new(),
        }
    }

    pub fn height(&self) -> u64 {
        self.height
    }

    pub fn range(&self) -> ShardRange {
        self.range
    }

    pub fn contains(&self, id: &UhsId) -> bool {
        self.uhs.contains(id)
    }

    pub fn sorted_ids(&self) -> Vec<UhsId> {
        let mut ids: Vec<UhsId> = self.uhs.iter().copied().collect();
        ids.sort_unstable();
        ids
    }

    fn answer(&mut self, ticket: Ticket, answer: ShardAnswer) {
        self.outputs.push_back(Output::Reply {
            ticket,
            reply: UhsShardReply::Answer(answer),
        });
    }

    fn read(&self, read: ShardRead) -> ShardReply {
        match read {
            ShardRead::Contains(ids) => ShardReply::Contains(ids.iter().map(|id| self.uhs.contains(id)).collect()),
            ShardRead::Stats => ShardReply::Stats(ShardStats {
                uhs_ids: self.uhs.len() as u64,
                locked_ids: 0,
                dtxns_active: 0,
            }),
            ShardRead::SortedIds => ShardReply::SortedIds(self.sorted_ids()),
        }
    }

    /// The first id of `block` that the state left by every proposed block contradicts.
    fn misfit(&self, block: &ShardBlock) -> Option<UhsId> {
        let held = |id: &UhsId| {
            !self.proposed_spent.contains(id) && (self.uhs.contains(id) || self.proposed_created.contains(id))
        };
        let mut spent_here = HashSet::new();
        let bad_spend = block
            .spent
            .iter()
            .find(|id| !self.range.contains(id) || !held(id) || !spent_here.insert(**id));
        let mut created_here = HashSet::new();
        let bad_create = || {
            block.created.iter().find(|id| {
                !self.range.contains(id)
                    || self.uhs.contains(id)
                    || self.proposed_created.contains(id)
                    || !created_here.insert(**id)
            })
        };
        bad_spend.or_else(bad_create).copied()
    }

    fn on_block(&mut self, ticket: Ticket, block: ShardBlock) {
        if block.height <= self.proposed_through {
            // A copy sent again: its first copy is (or will be) answered.
            return self.answer(ticket, ShardAnswer::Applied { height: self.height });
        }
        if block.height > self.proposed_through + 1 {
            let height = self.proposed_through;
            return self.answer(ticket, ShardAnswer::Behind { height });
        }
        if let Some(id) = self.misfit(&block) {
            self.outputs.push_back(Output::Report(UhsShardReport::BlockRefused {
                height: block.height,
                id,
            }));
            return self.answer(ticket, ShardAnswer::Applied { height: self.height });
        }
        self.proposed_through = block.height;
        self.proposed_spent.extend(block.spent.iter().copied());
        self.proposed_created.extend(block.created.iter().copied());
        self.waiting.push_back((block.height, ticket));
        self.outputs.push_back(Output::Propose(block));
    }
}

impl Role for UhsShard {
    type Command = ShardBlock;
    type Input = UhsShardInput;
    type Peer = Infallible;
    type Message = Infallible;
    type Reply = UhsShardReply;
    type Report = UhsShardReport;

    fn lead(&mut self, _now_ms: u64) {}

    fn follow(&mut self) {
        self.proposed_through = self.height;
        self.proposed_spent.clear();
        self.proposed_created.clear();
        self.waiting.clear();
    }

    fn handle(&mut self, _now_ms: u64, input: UhsShardInput) {
        match input {
            UhsShardInput::Read { ticket, read } => {
                let reply = UhsShardReply::Read(self.read(read));
                self.outputs.push_back(Output::Reply { ticket, reply });
            }
            UhsShardInput::Atomizer {
                ticket,
                message: ShardMessage::Attest(request),
            } => {
                let present = request.ids.iter().map(|id| self.uhs.contains(id)).collect();
                let (round, height) = (request.round, self.height);
                let asked = attested_ids_digest(&request.ids);
                self.answer(
                    ticket,
                    ShardAnswer::Attested {
                        round,
                        asked,
                        height,
                        present,
                    },
                );
            }
            UhsShardInput::Atomizer {
                ticket,
                message: ShardMessage::Block(block),
            } => self.on_block(ticket, block),
        }
    }

    /// # Panics
    /// If the block is not the next, or does not fit: [`UhsShard::handle`] proposes only blocks
    /// that do, so this is a bug (or a log that is not this shard's).
    fn apply(&mut self, _now_ms: u64, block: &ShardBlock) {
        assert_eq!(block.height, self.height + 1, "shard blocks apply in order");
        for id in &block.spent {
            assert!(
                self.uhs.remove(id),
                "block {} spends {id}, which is not here",
                block.height
            );
            self.proposed_spent.remove(id);
        }
        for id in &block.created {
            assert!(
                self.uhs.insert(*id),
                "block {} creates {id}, which is here",
                block.height
            );
            self.proposed_created.remove(id);
        }
        self.height = block.height;
        self.proposed_through = self.proposed_through.max(self.height);
        while let Some(&(height, ticket)) = self.waiting.front() {
            if height > self.height {
                break;
            }
            self.waiting.pop_front();
            self.answer(ticket, ShardAnswer::Applied { height: self.height });
        }
    }

    fn handle_timeout(&mut self, _now_ms: u64) {}

    fn poll_output(&mut self) -> Option<Output<Self>> {
        self.outputs.pop_front()
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }
}

/// Why a shard's log or snapshot bytes were refused.
#[derive(Debug, thiserror::Error)]
pub enum UhsShardStateError {
    #[error("does not decode: {0}")]
    Decode(#[from] DecodeError),
    #[error("the snapshot is of range {found:?}, this shard owns {owned:?}")]
    WrongRange { found: ShardRange, owned: ShardRange },
    #[error("{id} lies outside the shard's range")]
    OutOfRange { id: UhsId },
    #[error("the snapshot's ids are not in ascending order, each once")]
    NotCanonical,
}

impl Durable for UhsShard {
    type StateError = UhsShardStateError;

    fn encode_command(block: &ShardBlock) -> Vec<u8> {
        block.encode()
    }

    fn decode_command(&self, bytes: &[u8]) -> Result<ShardBlock, UhsShardStateError> {
        Ok(ShardBlock::decode_exact_with(bytes, &AtomizerLimits::default())?)
    }

    /// Canonical: the range, the height and the ids in ascending order.
    fn snapshot(&self) -> Vec<u8> {
        let mut out = vec![SNAPSHOT_VERSION];
        put_u64(&mut out, u64::from(self.range.first));
        put_u64(&mut out, u64::from(self.range.last));
        put_u64(&mut out, self.height);
        let ids = self.sorted_ids();
        put_count(&mut out, ids.len());
        ids.iter().for_each(|id| id.encode_to(&mut out));
        out
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), UhsShardStateError> {
        let mut reader = Reader::new(snapshot);
        reader.read_version("atomizer shard snapshot", SNAPSHOT_VERSION)?;
        let mut bound = |what| {
            let value = reader.read_u64(what)?;
            u16::try_from(value).map_err(|_| DecodeError::CountTooLarge {
                what,
                count: value,
                max: u16::MAX.into(),
            })
        };
        let found = ShardRange {
            first: bound("range first")?,
            last: bound("range last")?,
        };
        if found != self.range {
            return Err(UhsShardStateError::WrongRange {
                found,
                owned: self.range,
            });
        }
        let height = reader.read_u64("shard height")?;
        let ids = reader.read_vec("shard ids", u64::MAX, 32, |r| UhsId::decode_from(r, &()))?;
        reader.finish()?;
        if let Some(id) = ids.iter().find(|id| !self.range.contains(id)) {
            return Err(UhsShardStateError::OutOfRange { id: *id });
        }
        // One encoding per state: ascending, each id once.
        if ids.windows(2).any(|pair| pair[0] >= pair[1]) {
            return Err(UhsShardStateError::NotCanonical);
        }
        *self = UhsShard::with_unspent(self.range, ids);
        self.height = height;
        self.proposed_through = height;
        Ok(())
    }

    fn check_invariants(&self) -> Result<(), UhsShardStateError> {
        match self.uhs.iter().find(|id| !self.range.contains(id)) {
            Some(id) => Err(UhsShardStateError::OutOfRange { id: *id }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_role::Round;

    fn id(first: u8, n: u8) -> UhsId {
        let mut bytes = [n; 32];
        bytes[0] = first;
        UhsId(bytes)
    }

    fn block(height: u64, spent: Vec<UhsId>, created: Vec<UhsId>) -> UhsShardInput {
        UhsShardInput::Atomizer {
            ticket: height,
            message: ShardMessage::Block(ShardBlock { height, spent, created }),
        }
    }

    /// Hands the shard its inputs, makes its proposals "durable" and applies them; its replies.
    fn run(shard: &mut UhsShard, inputs: Vec<UhsShardInput>) -> (Vec<UhsShardReply>, Vec<UhsShardReport>) {
        inputs.into_iter().for_each(|input| shard.handle(0, input));
        let (mut replies, mut reports) = (vec![], vec![]);
        loop {
            let round = Round::take(shard);
            replies.extend(round.replies.into_iter().map(|(_, reply)| reply));
            reports.extend(round.reports);
            if round.proposals.is_empty() {
                return (replies, reports);
            }
            round.proposals.iter().for_each(|command| shard.apply(0, command));
        }
    }

    #[test]
    fn blocks_apply_in_order_and_a_gap_asks_for_a_resend() {
        let range = ShardRange {
            first: 0,
            last: u16::MAX,
        };
        let mut shard = UhsShard::with_unspent(range, [id(1, 1)]);
        let (replies, _) = run(
            &mut shard,
            vec![
                block(1, vec![id(1, 1)], vec![id(2, 2)]),
                block(2, vec![id(2, 2)], vec![id(3, 3)]),
                block(4, vec![], vec![]),
                block(1, vec![id(1, 1)], vec![id(2, 2)]),
            ],
        );
        assert_eq!(shard.height(), 2);
        assert_eq!(shard.sorted_ids(), vec![id(3, 3)]);
        let answers: Vec<UhsShardReply> = [
            ShardAnswer::Behind { height: 2 },
            ShardAnswer::Applied { height: 0 },
            ShardAnswer::Applied { height: 1 },
            ShardAnswer::Applied { height: 2 },
        ]
        .into_iter()
        .map(UhsShardReply::Answer)
        .collect();
        assert_eq!(replies, answers);
        let snapshot = shard.snapshot();
        let mut restored = UhsShard::new(range);
        restored.restore(&snapshot).unwrap();
        assert_eq!((restored.height(), restored.sorted_ids()), (2, vec![id(3, 3)]));
        let mut other = UhsShard::new(ShardRange { first: 0, last: 9 });
        assert!(matches!(
            other.restore(&snapshot),
            Err(UhsShardStateError::WrongRange { .. })
        ));
    }

    #[test]
    fn a_block_that_does_not_fit_is_refused_and_reported_not_applied() {
        let range = ShardRange {
            first: 0,
            last: u16::MAX,
        };
        let mut shard = UhsShard::with_unspent(range, [id(1, 1)]);
        for bad in [
            block(1, vec![id(9, 9)], vec![]),
            block(1, vec![], vec![id(1, 1)]),
            block(1, vec![id(1, 1), id(1, 1)], vec![]),
        ] {
            let (replies, reports) = run(&mut shard, vec![bad]);
            assert_eq!(replies, vec![UhsShardReply::Answer(ShardAnswer::Applied { height: 0 })]);
            assert_eq!(reports.len(), 1);
        }
        assert_eq!((shard.height(), shard.sorted_ids()), (0, vec![id(1, 1)]));
        let attest = UhsShardInput::Atomizer {
            ticket: 7,
            message: ShardMessage::Attest(AttestRequest {
                round: 3,
                ids: vec![id(1, 1), id(2, 2)],
            }),
        };
        let (replies, _) = run(&mut shard, vec![attest]);
        let attested = ShardAnswer::Attested {
            round: 3,
            asked: attested_ids_digest(&[id(1, 1), id(2, 2)]),
            height: 0,
            present: vec![true, false],
        };
        assert_eq!(replies, vec![UhsShardReply::Answer(attested)]);
    }

    fn any_id() -> impl proptest::strategy::Strategy<Value = UhsId> {
        proptest::array::uniform32(proptest::prelude::any::<u8>()).prop_map(UhsId)
    }

    fn any_message() -> impl proptest::strategy::Strategy<Value = ShardMessage> {
        use proptest::prelude::*;
        let ids = || proptest::collection::vec(any_id(), 0..5);
        prop_oneof![
            (any::<u64>(), ids()).prop_map(|(round, ids)| ShardMessage::Attest(AttestRequest { round, ids })),
            (any::<u64>(), ids(), ids()).prop_map(|(height, spent, created)| ShardMessage::Block(ShardBlock {
                height,
                spent,
                created
            })),
        ]
    }

    fn any_answer() -> impl proptest::strategy::Strategy<Value = ShardAnswer> {
        use proptest::prelude::*;
        prop_oneof![
            (
                any::<u64>(),
                any::<[u8; 32]>(),
                any::<u64>(),
                proptest::collection::vec(any::<bool>(), 0..9)
            )
                .prop_map(|(round, asked, height, present)| ShardAnswer::Attested {
                    round,
                    asked,
                    height,
                    present
                }),
            any::<u64>().prop_map(|height| ShardAnswer::Applied { height }),
            any::<u64>().prop_map(|height| ShardAnswer::Behind { height }),
        ]
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// One encoding each: what is encoded decodes to itself, and every strict prefix is refused.
        #[test]
        fn messages_and_answers_round_trip(message in any_message(), answer in any_answer()) {
            let limits = ShardMessageLimits::default();
            let bytes = message.encode();
            proptest::prop_assert_eq!(&ShardMessage::decode_exact_with(&bytes, &limits).unwrap(), &message);
            proptest::prop_assert!(bytes.len() <= ShardMessage::encoded_bytes_max(&limits));
            for cut in 0..bytes.len() {
                proptest::prop_assert!(ShardMessage::decode_exact_with(&bytes[..cut], &limits).is_err());
            }
            let bytes = answer.encode();
            proptest::prop_assert_eq!(&ShardAnswer::decode_exact_with(&bytes, &limits).unwrap(), &answer);
            proptest::prop_assert!(bytes.len() <= ShardAnswer::encoded_bytes_max(&limits));
            for cut in 0..bytes.len() {
                proptest::prop_assert!(ShardAnswer::decode_exact_with(&bytes[..cut], &limits).is_err());
            }
        }
    }
}
