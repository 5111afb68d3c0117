//! The messages roles exchange over `specie-wire` frames: one tag byte, then the body in the
//! reference's count-prefixed little-endian style. Documented in docs/wire-protocol.md.

use std::collections::BTreeMap;

use secp256k1::Keypair;
use specie_archiver::{put_outcomes, read_outcomes, LedgerRead, LedgerReply, LedgerReplyLimits, Record, RecordLimits};
use specie_atomizer::{ShardAnswer, ShardMessage, ShardMessageLimits};
use specie_authority::{Credit, Message as AuthorityMessage, CREDITS_PER_MESSAGE_MAX};
use specie_codec::{put_byte_vec, put_count, put_u64, put_vec, Decode, DecodeError, Encode, Reader};
use specie_coordinator::TxResult;
use specie_endorsement::{
    AggregatorMessage, CeremonyMessage, Endorsement, EndorserMessage, MessageLimits, RefusalCode, ReplyLimits,
    BATCH_TRANSACTIONS_MAX, ENDORSEMENT_BYTES_MIN, ENDORSERS_MAX,
};
use specie_sentinel::endorsement::Candidate;
use specie_shard::{ShardRequest, ShardResponse, ShardWireLimits, Vote};
use specie_transaction::hash::Sha256Writer;
use specie_transaction::signing::{parse_xonly, schnorr_sign, schnorr_verify, xonly_bytes, NonceMode};
use specie_transaction::{CompactTransaction, DecodeLimits, Txid, UhsId};

/// The first byte of every payload: what kind of message follows. Authorisation is decided on it
/// alone, before the rest is decoded.
pub mod tag {
    pub const RAFT: u8 = 1;
    pub const SHARD_BATCH: u8 = 2;
    pub const SHARD_QUERY: u8 = 3;
    pub const SHARD_IDS: u8 = 4;
    pub const SUBMIT: u8 = 5;
    pub const STATUS: u8 = 6;
    pub const NOT_LEADER: u8 = 7;
    /// Credits from one shard of a FastPay authority to another shard of the same authority.
    pub const CREDITS: u8 = 8;
    /// Which credits a shard of an authority has applied, for the shard that sent them.
    pub const CREDIT_ACK: u8 = 9;
    /// The answer to credits or an acknowledgement: handed to the receiving shard's role.
    pub const TAKEN: u8 = 10;
    /// A submission whose every transaction carries the sentinels' threshold endorsement.
    pub const SUBMIT_ENDORSED: u8 = 11;
    /// Sentinel (aggregating an endorsement) → sentinel (an endorser): a round of FROST signing,
    /// answered by the endorser's message under the same tag.
    pub const ENDORSE: u8 = 12;
    /// Sentinel → sentinel: a message of their key generation ceremony, answered `Taken`.
    pub const CEREMONY: u8 = 13;
    /// Sentinel → archiver group: records to make durable before their transactions reach a
    /// coordinator; answered `Taken`, or `ARCHIVE_WRITE` (busy).
    pub const ARCHIVE_WRITE: u8 = 14;
    /// Ordering group leader → archiver group: what became of written-ahead transactions;
    /// answered `Taken`.
    pub const ARCHIVE_OUTCOMES: u8 = 15;
    /// Sentinel or operator → archiver group: a read of the ledger of record, answered under
    /// the same tag.
    pub const LEDGER_READ: u8 = 16;
    /// Atomizer group leader → shard group leader (the atomizer shape): attestation requests
    /// and blocks, answered under the same tag.
    pub const ATOMIZER_SHARD: u8 = 17;
    /// Ordering group leader (a coordinator or the atomizer) → archiver group: which of a
    /// submission's transactions are written ahead, by txid and compact digest; answered under
    /// the same tag, one flag each. Nothing reaches the core the ledger of record did not take.
    pub const WRITTEN_AHEAD: u8 = 18;
    /// Operator → a group's leader: one step of a membership change; answered `STATUS` with
    /// the group's membership afterwards, or `NOT_LEADER`.
    pub const MEMBERSHIP: u8 = 19;
    /// Operator → any shard replica: the digest of the UHS it holds itself (not its leader's),
    /// answered `STATUS`; what shows that a group's replicas agree.
    pub const REPLICA_DIGEST: u8 = 20;
    /// Operator → a group's replica: the whole state it has applied, in its role's snapshot
    /// encoding, answered under the same tag (`cluster backup`).
    pub const REPLICA_SNAPSHOT: u8 = 21;

    /// For log lines and refusals.
    pub fn name(tag: u8) -> &'static str {
        match tag {
            RAFT => "raft rpc",
            SHARD_BATCH => "shard batch",
            SHARD_QUERY => "uhs query",
            SHARD_IDS => "uhs ids",
            SUBMIT => "submit",
            STATUS => "status",
            NOT_LEADER => "not leader",
            CREDITS => "credits",
            CREDIT_ACK => "credit ack",
            TAKEN => "taken",
            SUBMIT_ENDORSED => "endorsed submit",
            ENDORSE => "endorse",
            CEREMONY => "key generation ceremony",
            ARCHIVE_WRITE => "archive write-ahead",
            ARCHIVE_OUTCOMES => "archive outcomes",
            LEDGER_READ => "ledger read",
            ATOMIZER_SHARD => "atomizer to shard",
            WRITTEN_AHEAD => "written-ahead question",
            MEMBERSHIP => "membership change",
            REPLICA_DIGEST => "replica digest",
            REPLICA_SNAPSHOT => "replica snapshot",
            _ => "unknown request",
        }
    }
}
use tag::{
    ARCHIVE_OUTCOMES, ARCHIVE_WRITE, ATOMIZER_SHARD, CEREMONY, CREDITS, CREDIT_ACK, ENDORSE, LEDGER_READ, MEMBERSHIP,
    NOT_LEADER, RAFT, REPLICA_DIGEST, REPLICA_SNAPSHOT, SHARD_BATCH, SHARD_IDS, SHARD_QUERY, STATUS, SUBMIT,
    SUBMIT_ENDORSED, TAKEN, WRITTEN_AHEAD,
};

/// The smallest record: its transaction's three counts, its attestations' count and its
/// endorsement flag (checked against the bytes left before anything is allocated).
const RECORD_BYTES_MIN: usize = 33;
/// A batch of requests carries at most this many items (transactions, ids, shard requests).
pub const BATCH_ITEMS_MAX: u64 = 100_000;
const UHS_ID_BYTES: usize = 32;
/// A written-ahead question: a txid and the digest of its compact form.
const WRITTEN_AHEAD_QUESTION_BYTES: usize = 64;
/// The smallest atomizer message: kind, round and an empty count (an attestation request).
const ATOMIZER_MESSAGE_BYTES_MIN: usize = 17;
/// The smallest shard answer: kind and height.
const SHARD_ANSWER_BYTES_MIN: usize = 9;
/// A credit's encoding: recipient, amount, sender, the sender's sequence number.
const CREDIT_BYTES: usize = 32 + 8 + 32 + 8;

#[derive(Clone, Debug, PartialEq)]
pub enum RoleRequest {
    /// A Raft RPC for this process's replica.
    Raft(Vec<u8>),
    /// Coordinator → shard group leader: 2PC requests, made durable as one Raft entry.
    ShardBatch(Vec<ShardRequest>),
    /// Sentinel → shard group leader: which of these ids are in the UHS.
    ShardQuery(Vec<UhsId>),
    /// Every UHS id of the shard, ascending (digests and audits).
    ShardIds,
    /// Sentinel → coordinator group leader: validated compact transactions, attested.
    Submit(Submission),
    /// Operator → any replica: role, Raft metrics, health.
    Status,
    /// Authority shard → another shard of the same authority (its group's leader): credits or
    /// an acknowledgement. Who sent it is the sender's certificate, never the message.
    Authority(AuthorityMessage),
    /// Sentinel → sentinel: a round of threshold endorsement, the batch's full transactions
    /// included (each endorser validates them itself). Which aggregator asks is the sender's
    /// certificate, never the message.
    Endorse(Box<AggregatorMessage<Candidate>>),
    /// Sentinel → sentinel: a message of the sentinels' key generation ceremony (round 2 carries
    /// a secret share, which the channel's TLS keeps secret). Who sent it is the certificate.
    Ceremony(Box<CeremonyMessage>),
    /// Sentinel → archiver group leader: the records of a batch, written ahead.
    ArchiveWrite(Vec<Record>),
    /// Ordering group leader → archiver group leader: `(txid, committed)` for written-ahead
    /// transactions it decided.
    ArchiveOutcomes(Vec<(Txid, bool)>),
    /// Sentinel or operator → archiver group leader.
    LedgerRead(LedgerRead),
    /// Atomizer group leader → shard group leader: one round of attestation requests and
    /// blocks, each block made durable through the shard group's Raft before it is answered.
    AtomizerShard(Vec<ShardMessage>),
    /// Ordering group leader → archiver group leader: `(txid, compact digest)` of each
    /// transaction of a submission, before it is ordered.
    WrittenAhead(Vec<(Txid, [u8; 32])>),
    /// Operator → a group's leader: one step of a membership change.
    Membership(MembershipChange),
    /// Operator → any shard replica: its own UHS's size and digest.
    ReplicaDigest,
    /// The replica's whole applied state from byte `offset` on, as much as one answer holds.
    ReplicaSnapshot { offset: u64 },
}

/// One step of a membership change (docs/operator-guide.md, "Changing a group's replicas").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MembershipChange {
    /// Add replica `id` as a learner: it receives the log and does not vote.
    AddLearner(u64),
    /// Make learner `id` a voter, once it has caught up.
    Promote(u64),
    /// Remove replica `id`, voter or learner, for good.
    Remove(u64),
}

impl MembershipChange {
    fn code(self) -> (u8, u64) {
        match self {
            MembershipChange::AddLearner(id) => (1, id),
            MembershipChange::Promote(id) => (2, id),
            MembershipChange::Remove(id) => (3, id),
        }
    }
}

/// Compact transactions a sentinel validated, with its BIP-340 signature over all of them
/// ([`Submission::message`]). The coordinator acts only on a submission whose signature comes from
/// the attestation key the topology lists for the sentinel that sent it, so a stolen network
/// position or a stolen TLS certificate, without the sentinel's attestation key, cannot create
/// value. One signature per batch rather than the reference's one per transaction: the
/// coordinator leader checks every batch, and per-transaction verification would cost it more
/// than one core at the cluster's throughput (docs/wire-protocol.md, "Submit").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The sentinel's x-only attestation key.
    pub sentinel: [u8; 32],
    pub signature: [u8; 64],
    pub txs: Vec<CompactTransaction>,
    /// One per transaction, in order, when the cluster requires threshold endorsement (sent
    /// with tag 11); otherwise none (tag 5). Not covered by the attestation: each verifies on
    /// its own under the endorsers' group key.
    pub endorsements: Vec<Endorsement>,
}

/// Why a submission's attestation does not check out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AttestationError {
    #[error("the submission is attested by key {key}, not one of the sender's")]
    UntrustedKey { key: String },
    #[error("the sentinel attestation does not verify over the submitted transactions")]
    BadSignature,
}

/// Domain separation: this signature can never be mistaken for a transaction's or another
/// message's.
const SUBMISSION_DOMAIN: &[u8] = b"specie/submission/v1\0";

impl Submission {
    /// The 32 bytes a sentinel signs: SHA-256 over the domain tag, the count (`u64` LE) and each
    /// transaction's attestation message (the reference's per-transaction attestation hash).
    pub fn message(txs: &[CompactTransaction]) -> [u8; 32] {
        let digests: Vec<[u8; 32]> = txs.iter().map(CompactTransaction::attestation_message).collect();
        Self::message_of_digests(&digests)
    }

    /// [`Submission::message`] from each transaction's attestation message, for a receiver that
    /// needs those digests again (endorsements, the ledger's gate) and hashes each once.
    fn message_of_digests(digests: &[[u8; 32]]) -> [u8; 32] {
        let mut hasher = Sha256Writer::new();
        hasher.update(SUBMISSION_DOMAIN);
        hasher.update(&(digests.len() as u64).to_le_bytes());
        for digest in digests {
            hasher.update(digest);
        }
        hasher.finish()
    }

    /// Each transaction's attestation message, in order.
    pub fn digests(&self) -> Vec<[u8; 32]> {
        self.txs.iter().map(CompactTransaction::attestation_message).collect()
    }

    /// `txs`, attested by `sentinel`.
    pub fn attest(txs: Vec<CompactTransaction>, sentinel: &Keypair) -> Submission {
        let signature = schnorr_sign(sentinel, &Self::message(&txs), NonceMode::Randomized);
        Submission {
            sentinel: xonly_bytes(sentinel),
            signature,
            txs,
            endorsements: vec![],
        }
    }

    /// `txs`, attested by `sentinel`, each with its threshold endorsement.
    pub fn attest_endorsed(endorsed: Vec<(CompactTransaction, Endorsement)>, sentinel: &Keypair) -> Submission {
        let (txs, endorsements) = endorsed.into_iter().unzip();
        Submission {
            endorsements,
            ..Submission::attest(txs, sentinel)
        }
    }

    /// Checks the attestation against the keys the sender may use.
    pub fn verify<'a>(&self, trusted: impl Iterator<Item = &'a [u8; 32]>) -> Result<(), AttestationError> {
        self.verify_digests(trusted, &self.digests())
    }

    /// [`Submission::verify`], given [`Submission::digests`].
    pub fn verify_digests<'a>(
        &self,
        mut trusted: impl Iterator<Item = &'a [u8; 32]>,
        digests: &[[u8; 32]],
    ) -> Result<(), AttestationError> {
        debug_assert_eq!(digests.len(), self.txs.len());
        if !trusted.any(|key| *key == self.sentinel) {
            return Err(AttestationError::UntrustedKey {
                key: hex::encode(self.sentinel),
            });
        }
        let key = parse_xonly(&self.sentinel).ok_or(AttestationError::BadSignature)?;
        if schnorr_verify(&key, &Self::message_of_digests(digests), &self.signature) {
            Ok(())
        } else {
            Err(AttestationError::BadSignature)
        }
    }
}

/// Sentinel name → its attestation key, from the topology.
pub type SentinelKeys = BTreeMap<String, [u8; 32]>;

/// What a coordinator answers for one submitted transaction. On the wire one byte: 0 for
/// confirmed, the shard's vote code for rejected, 0xFE dropped, 0xFF busy (`docs/wire-protocol.md`);
/// any other byte is refused by the decoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubmitOutcome {
    /// Durably applied.
    Confirmed,
    /// A shard refused it (the vote says why); nothing was applied.
    Rejected(Vote),
    /// Abandoned before it was durable (the leader stepped down); nothing was applied.
    Dropped,
    /// Not taken (queue full, empty or too large); nothing was applied.
    Busy,
}

const OUTCOME_DROPPED: u8 = 0xFE;
const OUTCOME_BUSY: u8 = 0xFF;

impl SubmitOutcome {
    pub fn to_u8(self) -> u8 {
        match self {
            SubmitOutcome::Confirmed => 0,
            SubmitOutcome::Rejected(vote) => vote as u8,
            SubmitOutcome::Dropped => OUTCOME_DROPPED,
            SubmitOutcome::Busy => OUTCOME_BUSY,
        }
    }

    pub fn from_u8(byte: u8) -> Option<SubmitOutcome> {
        match byte {
            0 => Some(SubmitOutcome::Confirmed),
            OUTCOME_DROPPED => Some(SubmitOutcome::Dropped),
            OUTCOME_BUSY => Some(SubmitOutcome::Busy),
            vote => Vote::from_u8(vote)
                .filter(|vote| *vote != Vote::Yes)
                .map(SubmitOutcome::Rejected),
        }
    }
}

impl From<TxResult> for SubmitOutcome {
    fn from(result: TxResult) -> SubmitOutcome {
        match result {
            TxResult::Confirmed => SubmitOutcome::Confirmed,
            TxResult::Rejected(vote) => SubmitOutcome::Rejected(vote),
            TxResult::Dropped => SubmitOutcome::Dropped,
            TxResult::Refused(_) => SubmitOutcome::Busy,
        }
    }
}

impl From<SubmitOutcome> for specie_api::TxStatus {
    fn from(outcome: SubmitOutcome) -> specie_api::TxStatus {
        use specie_api::TxStatus;
        match outcome {
            SubmitOutcome::Confirmed => TxStatus::Confirmed,
            SubmitOutcome::Rejected(vote) => TxStatus::Rejected(vote),
            SubmitOutcome::Dropped => TxStatus::Dropped,
            SubmitOutcome::Busy => TxStatus::Busy,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum RoleResponse {
    Raft(Vec<u8>),
    ShardBatch(Vec<ShardResponse>),
    ShardQuery(Vec<bool>),
    ShardIds(Vec<UhsId>),
    Submitted(Vec<SubmitOutcome>),
    /// JSON, for people and `specie cluster status`.
    Status(String),
    /// Ask the leader instead (its replica id, if known).
    NotLeader(Option<u64>),
    /// An authority shard's leader took the message (it will act on it or not, as its role
    /// decides; the sender retransmits until acknowledged either way).
    Taken,
    /// An endorser's answer to a round of threshold endorsement.
    Endorser(Box<EndorserMessage<RefusalCode>>),
    /// The archiver group has too much undecided: write ahead again later.
    ArchiveBusy,
    /// The ledger of record's answer to a read.
    Ledger(Box<LedgerReply>),
    /// A shard's answers to the atomizer, in the order of its messages.
    AtomizerShard(Vec<ShardAnswer>),
    /// Whether each transaction asked is written ahead and undecided, in order.
    WrittenAhead(Vec<bool>),
    /// Part of a replica's whole applied state (its role's snapshot encoding): the bytes from
    /// the offset asked, of a state `total_bytes` long, as it was at `applied_index`.
    Snapshot {
        applied_index: u64,
        total_bytes: u64,
        chunk: Vec<u8>,
    },
}

/// What an endorsement round may carry: a batch of at most `BATCH_ITEMS_MAX` transactions
/// (further bounded by the frame), signed by at most every sentinel.
fn endorse_limits() -> MessageLimits<DecodeLimits> {
    MessageLimits {
        items: DecodeLimits::default(),
        batch_items_max: BATCH_ITEMS_MAX.min(BATCH_TRANSACTIONS_MAX as u64) as u32,
        signers_max: ENDORSERS_MAX,
    }
}

/// What an endorser's answer may carry: refusal codes for at most a whole batch.
fn endorser_reply_limits() -> ReplyLimits<()> {
    ReplyLimits {
        reasons: (),
        refused_items_max: BATCH_ITEMS_MAX.min(BATCH_TRANSACTIONS_MAX as u64) as u32,
    }
}

impl Submission {
    fn decode_body(reader: &mut Reader<'_>, kind: u8) -> Result<Submission, DecodeError> {
        let limits = DecodeLimits::default();
        let sentinel = reader.read_array("sentinel key")?;
        let signature = reader.read_array("sentinel attestation")?;
        let txs = reader.read_vec("transactions", BATCH_ITEMS_MAX, 56, |r| {
            CompactTransaction::decode_from(r, &limits)
        })?;
        let mut endorsements = vec![];
        if kind == SUBMIT_ENDORSED {
            endorsements = reader.read_vec("endorsements", BATCH_ITEMS_MAX, ENDORSEMENT_BYTES_MIN, |r| {
                Endorsement::decode_from(r, &())
            })?;
            // One encoding per submission: an endorsed one endorses each of its transactions.
            if txs.is_empty() || endorsements.len() != txs.len() {
                return Err(DecodeError::NonCanonical {
                    what: "endorsed submission",
                    reason: "not one endorsement per transaction",
                });
            }
        }
        Ok(Submission {
            sentinel,
            signature,
            txs,
            endorsements,
        })
    }
}

/// One byte per flag, 0 or 1, as a byte vector.
fn put_flags(out: &mut Vec<u8>, flags: &[bool]) {
    put_byte_vec(out, &flags.iter().map(|f| u8::from(*f)).collect::<Vec<u8>>());
}

fn read_flags(reader: &mut Reader<'_>, what: &'static str) -> Result<Vec<bool>, DecodeError> {
    (reader.read_byte_vec(what, BATCH_ITEMS_MAX)?.iter())
        .map(|&flag| Reader::new(&[flag]).read_bool(what))
        .collect()
}

fn read_bytes_vec(reader: &mut Reader<'_>, what: &'static str) -> Result<Vec<u8>, DecodeError> {
    Ok(reader.read_byte_vec(what, u64::from(u32::MAX))?.to_vec())
}

impl Encode for RoleRequest {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            RoleRequest::Raft(bytes) => {
                out.push(RAFT);
                put_byte_vec(out, bytes);
            }
            RoleRequest::ShardBatch(requests) => {
                out.push(SHARD_BATCH);
                put_count(out, requests.len());
                for request in requests {
                    put_byte_vec(out, &request.encode());
                }
            }
            RoleRequest::ShardQuery(ids) => {
                out.push(SHARD_QUERY);
                put_vec(out, ids);
            }
            RoleRequest::ShardIds => out.push(SHARD_IDS),
            RoleRequest::Submit(submission) => {
                let endorsed = !submission.endorsements.is_empty();
                out.push(if endorsed { SUBMIT_ENDORSED } else { SUBMIT });
                out.extend_from_slice(&submission.sentinel);
                out.extend_from_slice(&submission.signature);
                put_vec(out, &submission.txs);
                if endorsed {
                    put_vec(out, &submission.endorsements);
                }
            }
            RoleRequest::Endorse(message) => {
                out.push(ENDORSE);
                message.encode_to(out);
            }
            RoleRequest::Ceremony(message) => {
                out.push(CEREMONY);
                message.encode_to(out);
            }
            RoleRequest::ArchiveWrite(records) => {
                out.push(ARCHIVE_WRITE);
                put_vec(out, records);
            }
            RoleRequest::ArchiveOutcomes(outcomes) => {
                out.push(ARCHIVE_OUTCOMES);
                put_outcomes(out, outcomes);
            }
            RoleRequest::LedgerRead(read) => {
                out.push(LEDGER_READ);
                read.encode_to(out);
            }
            RoleRequest::AtomizerShard(messages) => {
                out.push(ATOMIZER_SHARD);
                put_vec(out, messages);
            }
            RoleRequest::WrittenAhead(asked) => {
                out.push(WRITTEN_AHEAD);
                put_count(out, asked.len());
                for (txid, digest) in asked {
                    out.extend_from_slice(&txid.0);
                    out.extend_from_slice(digest);
                }
            }
            RoleRequest::Status => out.push(STATUS),
            RoleRequest::Membership(change) => {
                let (kind, id) = change.code();
                out.push(MEMBERSHIP);
                out.push(kind);
                put_u64(out, id);
            }
            RoleRequest::ReplicaDigest => out.push(REPLICA_DIGEST),
            RoleRequest::ReplicaSnapshot { offset } => {
                out.push(REPLICA_SNAPSHOT);
                put_u64(out, *offset);
            }
            RoleRequest::Authority(AuthorityMessage::Credits {
                first_sequence,
                credits,
            }) => {
                out.push(CREDITS);
                put_u64(out, *first_sequence);
                put_count(out, credits.len());
                for credit in credits {
                    credit.encode_to(out);
                }
            }
            RoleRequest::Authority(AuthorityMessage::CreditAck { through }) => {
                out.push(CREDIT_ACK);
                put_u64(out, *through);
            }
        }
    }
}

impl RoleRequest {
    /// What kind of request this is, for log lines and refusals (never the payload: a refusal
    /// must not echo megabytes back).
    pub fn kind(&self) -> &'static str {
        tag::name(match self {
            RoleRequest::Raft(_) => RAFT,
            RoleRequest::ShardBatch(_) => SHARD_BATCH,
            RoleRequest::ShardQuery(_) => SHARD_QUERY,
            RoleRequest::ShardIds => SHARD_IDS,
            RoleRequest::Submit(submission) if !submission.endorsements.is_empty() => SUBMIT_ENDORSED,
            RoleRequest::Submit(_) => SUBMIT,
            RoleRequest::Endorse(_) => ENDORSE,
            RoleRequest::Ceremony(_) => CEREMONY,
            RoleRequest::ArchiveWrite(_) => ARCHIVE_WRITE,
            RoleRequest::ArchiveOutcomes(_) => ARCHIVE_OUTCOMES,
            RoleRequest::LedgerRead(_) => LEDGER_READ,
            RoleRequest::AtomizerShard(_) => ATOMIZER_SHARD,
            RoleRequest::WrittenAhead(_) => WRITTEN_AHEAD,
            RoleRequest::Status => STATUS,
            RoleRequest::Membership(_) => MEMBERSHIP,
            RoleRequest::ReplicaDigest => REPLICA_DIGEST,
            RoleRequest::ReplicaSnapshot { .. } => REPLICA_SNAPSHOT,
            RoleRequest::Authority(AuthorityMessage::Credits { .. }) => CREDITS,
            RoleRequest::Authority(AuthorityMessage::CreditAck { .. }) => CREDIT_ACK,
        })
    }

    pub fn decode(bytes: &[u8]) -> Result<RoleRequest, DecodeError> {
        let mut reader = Reader::new(bytes);
        let request = match reader.read_u8("request tag")? {
            RAFT => RoleRequest::Raft(read_bytes_vec(&mut reader, "raft rpc")?),
            SHARD_BATCH => {
                let limits = ShardWireLimits::default();
                RoleRequest::ShardBatch(reader.read_vec("shard requests", BATCH_ITEMS_MAX, 8, |r| {
                    let bytes = r.read_byte_vec("shard request", u64::from(u32::MAX))?;
                    ShardRequest::decode_exact_with(bytes, &limits)
                })?)
            }
            SHARD_QUERY => RoleRequest::ShardQuery(
                reader.read_vec("ids", BATCH_ITEMS_MAX, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?,
            ),
            SHARD_IDS => RoleRequest::ShardIds,
            kind @ (SUBMIT | SUBMIT_ENDORSED) => RoleRequest::Submit(Submission::decode_body(&mut reader, kind)?),
            ENDORSE => RoleRequest::Endorse(Box::new(AggregatorMessage::decode_from(
                &mut reader,
                &endorse_limits(),
            )?)),
            CEREMONY => RoleRequest::Ceremony(Box::new(CeremonyMessage::decode_from(&mut reader, &())?)),
            ARCHIVE_WRITE => {
                let limits = RecordLimits::default();
                RoleRequest::ArchiveWrite(reader.read_vec("records", BATCH_ITEMS_MAX, RECORD_BYTES_MIN, |r| {
                    Record::decode_from(r, &limits)
                })?)
            }
            ARCHIVE_OUTCOMES => RoleRequest::ArchiveOutcomes(read_outcomes(&mut reader, BATCH_ITEMS_MAX as usize)?),
            LEDGER_READ => RoleRequest::LedgerRead(LedgerRead::decode_from(&mut reader, &())?),
            ATOMIZER_SHARD => {
                let limits = ShardMessageLimits::default();
                RoleRequest::AtomizerShard(reader.read_vec(
                    "atomizer messages",
                    BATCH_ITEMS_MAX,
                    ATOMIZER_MESSAGE_BYTES_MIN,
                    |r| ShardMessage::decode_from(r, &limits),
                )?)
            }
            WRITTEN_AHEAD => RoleRequest::WrittenAhead(reader.read_vec(
                "written-ahead questions",
                BATCH_ITEMS_MAX,
                WRITTEN_AHEAD_QUESTION_BYTES,
                |r| Ok((Txid(r.read_array("txid")?), r.read_array("compact digest")?)),
            )?),
            STATUS => RoleRequest::Status,
            MEMBERSHIP => {
                let kind = reader.read_u8("membership change")?;
                let id = reader.read_u64("replica id")?;
                RoleRequest::Membership(match kind {
                    1 => MembershipChange::AddLearner(id),
                    2 => MembershipChange::Promote(id),
                    3 => MembershipChange::Remove(id),
                    kind => {
                        return Err(DecodeError::UnknownKind {
                            what: "membership change",
                            kind,
                        })
                    }
                })
            }
            REPLICA_DIGEST => RoleRequest::ReplicaDigest,
            REPLICA_SNAPSHOT => RoleRequest::ReplicaSnapshot {
                offset: reader.read_u64("snapshot offset")?,
            },
            CREDITS => RoleRequest::Authority(AuthorityMessage::Credits {
                first_sequence: reader.read_u64("first credit sequence")?,
                credits: reader.read_vec("credits", CREDITS_PER_MESSAGE_MAX as u64, CREDIT_BYTES, |r| {
                    Credit::decode_from(r)
                })?,
            }),
            CREDIT_ACK => RoleRequest::Authority(AuthorityMessage::CreditAck {
                through: reader.read_u64("credits acknowledged through")?,
            }),
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "role request",
                    kind,
                })
            }
        };
        reader.finish()?;
        Ok(request)
    }
}

impl Encode for RoleResponse {
    fn encode_to(&self, out: &mut Vec<u8>) {
        match self {
            RoleResponse::Raft(bytes) => {
                out.push(RAFT);
                put_byte_vec(out, bytes);
            }
            RoleResponse::ShardBatch(responses) => {
                out.push(SHARD_BATCH);
                put_count(out, responses.len());
                for response in responses {
                    put_byte_vec(out, &response.encode());
                }
            }
            RoleResponse::ShardQuery(present) => {
                out.push(SHARD_QUERY);
                put_flags(out, present);
            }
            RoleResponse::ShardIds(ids) => {
                out.push(SHARD_IDS);
                put_vec(out, ids);
            }
            RoleResponse::Submitted(outcomes) => {
                out.push(SUBMIT);
                put_byte_vec(out, &outcomes.iter().map(|o| o.to_u8()).collect::<Vec<u8>>());
            }
            RoleResponse::Status(json) => {
                out.push(STATUS);
                put_byte_vec(out, json.as_bytes());
            }
            RoleResponse::NotLeader(leader) => {
                out.push(NOT_LEADER);
                put_u64(out, leader.unwrap_or(0));
            }
            RoleResponse::Taken => out.push(TAKEN),
            RoleResponse::Endorser(message) => {
                out.push(ENDORSE);
                message.encode_to(out);
            }
            RoleResponse::ArchiveBusy => out.push(ARCHIVE_WRITE),
            RoleResponse::Ledger(reply) => {
                out.push(LEDGER_READ);
                reply.encode_to(out);
            }
            RoleResponse::AtomizerShard(answers) => {
                out.push(ATOMIZER_SHARD);
                put_vec(out, answers);
            }
            RoleResponse::WrittenAhead(written) => {
                out.push(WRITTEN_AHEAD);
                put_flags(out, written);
            }
            RoleResponse::Snapshot {
                applied_index,
                total_bytes,
                chunk,
            } => {
                out.push(REPLICA_SNAPSHOT);
                put_u64(out, *applied_index);
                put_u64(out, *total_bytes);
                put_byte_vec(out, chunk);
            }
        }
    }
}

impl RoleResponse {
    pub fn decode(bytes: &[u8]) -> Result<RoleResponse, DecodeError> {
        let mut reader = Reader::new(bytes);
        let response = match reader.read_u8("response tag")? {
            RAFT => RoleResponse::Raft(read_bytes_vec(&mut reader, "raft rpc")?),
            SHARD_BATCH => {
                let limits = ShardWireLimits::default();
                RoleResponse::ShardBatch(reader.read_vec("shard responses", BATCH_ITEMS_MAX, 8, |r| {
                    let bytes = r.read_byte_vec("shard response", u64::from(u32::MAX))?;
                    ShardResponse::decode_exact_with(bytes, &limits)
                })?)
            }
            SHARD_QUERY => RoleResponse::ShardQuery(read_flags(&mut reader, "presence flags")?),
            SHARD_IDS => {
                RoleResponse::ShardIds(reader.read_vec("ids", u64::MAX, UHS_ID_BYTES, |r| UhsId::decode_from(r, &()))?)
            }
            SUBMIT => RoleResponse::Submitted(
                reader
                    .read_byte_vec("outcomes", BATCH_ITEMS_MAX)?
                    .iter()
                    .map(|&code| {
                        SubmitOutcome::from_u8(code).ok_or(DecodeError::UnknownKind {
                            what: "submit outcome",
                            kind: code,
                        })
                    })
                    .collect::<Result<_, _>>()?,
            ),
            STATUS => {
                let bytes = reader.read_byte_vec("status", 1 << 20)?;
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NonCanonical {
                    what: "status",
                    reason: "not UTF-8",
                })?;
                RoleResponse::Status(text)
            }
            NOT_LEADER => {
                let leader = reader.read_u64("leader id")?;
                RoleResponse::NotLeader((leader != 0).then_some(leader))
            }
            TAKEN => RoleResponse::Taken,
            ENDORSE => RoleResponse::Endorser(Box::new(EndorserMessage::decode_from(
                &mut reader,
                &endorser_reply_limits(),
            )?)),
            ARCHIVE_WRITE => RoleResponse::ArchiveBusy,
            LEDGER_READ => RoleResponse::Ledger(Box::new(LedgerReply::decode_from(
                &mut reader,
                &LedgerReplyLimits::default(),
            )?)),
            WRITTEN_AHEAD => RoleResponse::WrittenAhead(read_flags(&mut reader, "written-ahead flags")?),
            REPLICA_SNAPSHOT => RoleResponse::Snapshot {
                applied_index: reader.read_u64("applied index")?,
                total_bytes: reader.read_u64("snapshot length")?,
                // Bounded by the frame it arrived in (`frame_bytes_max`).
                chunk: read_bytes_vec(&mut reader, "snapshot chunk")?,
            },
            ATOMIZER_SHARD => {
                let limits = ShardMessageLimits::default();
                RoleResponse::AtomizerShard(reader.read_vec(
                    "shard answers",
                    BATCH_ITEMS_MAX,
                    SHARD_ANSWER_BYTES_MIN,
                    |r| ShardAnswer::decode_from(r, &limits),
                )?)
            }
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "role response",
                    kind,
                })
            }
        };
        reader.finish()?;
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use specie_shard::{ShardTx, Vote};
    use specie_transaction::Txid;

    use super::*;

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let id = UhsId([7; 32]);
        let requests = vec![
            RoleRequest::Raft(vec![1, 2, 3]),
            RoleRequest::ShardBatch(vec![
                ShardRequest::Prepare {
                    dtxn: 4,
                    txs: vec![ShardTx {
                        index: 0,
                        spent: vec![id],
                        created: vec![],
                    }],
                },
                ShardRequest::Commit {
                    dtxn: 4,
                    complete: vec![true],
                },
            ]),
            RoleRequest::ShardQuery(vec![id, id]),
            RoleRequest::ShardIds,
            RoleRequest::Submit(Submission {
                sentinel: [3; 32],
                signature: [4; 64],
                txs: vec![CompactTransaction {
                    txid: Txid([1; 32]),
                    spent: vec![id],
                    ..Default::default()
                }],
                endorsements: vec![],
            }),
            RoleRequest::Status,
            RoleRequest::Membership(MembershipChange::AddLearner(4)),
            RoleRequest::Membership(MembershipChange::Promote(4)),
            RoleRequest::Membership(MembershipChange::Remove(1)),
            RoleRequest::ReplicaDigest,
            RoleRequest::ReplicaSnapshot { offset: 0 },
            RoleRequest::ReplicaSnapshot { offset: 1 << 40 },
            RoleRequest::Authority(AuthorityMessage::Credits {
                first_sequence: 7,
                credits: vec![Credit {
                    recipient: specie_fastpay::AccountKey([1; 32]),
                    amount: 5,
                    sender: specie_fastpay::AccountKey([2; 32]),
                    sender_sequence: 3,
                }],
            }),
            RoleRequest::Authority(AuthorityMessage::Credits {
                first_sequence: 0,
                credits: vec![],
            }),
            RoleRequest::Authority(AuthorityMessage::CreditAck { through: 9 }),
            RoleRequest::ArchiveWrite(vec![record()]),
            RoleRequest::ArchiveOutcomes(vec![(Txid([1; 32]), true), (Txid([2; 32]), false)]),
            RoleRequest::LedgerRead(LedgerRead::Dispute(Txid([1; 32]), Some(3))),
            RoleRequest::LedgerRead(LedgerRead::Head),
            RoleRequest::AtomizerShard(atomizer_messages()),
            RoleRequest::WrittenAhead(vec![(Txid([1; 32]), [2; 32]), (Txid([3; 32]), [4; 32])]),
            RoleRequest::WrittenAhead(vec![]),
        ];
        for request in requests {
            let bytes = request.encode();
            assert_eq!(RoleRequest::decode(&bytes).unwrap(), request);
            for cut in 0..bytes.len() {
                assert!(RoleRequest::decode(&bytes[..cut]).is_err());
            }
        }
        let responses = vec![
            RoleResponse::Raft(vec![9]),
            RoleResponse::ShardBatch(vec![ShardResponse::Prepared {
                dtxn: 1,
                votes: vec![Vote::Yes, Vote::InputMissing],
            }]),
            RoleResponse::ShardQuery(vec![true, false]),
            RoleResponse::ShardIds(vec![id]),
            RoleResponse::Submitted(vec![
                SubmitOutcome::Confirmed,
                SubmitOutcome::Rejected(Vote::InputMissing),
                SubmitOutcome::Dropped,
                SubmitOutcome::Busy,
            ]),
            RoleResponse::Status("{}".into()),
            RoleResponse::NotLeader(Some(2)),
            RoleResponse::NotLeader(None),
            RoleResponse::Taken,
            RoleResponse::ArchiveBusy,
            RoleResponse::Ledger(Box::new(LedgerReply::Block(None))),
            RoleResponse::Ledger(Box::new(LedgerReply::Failed("a disk".into()))),
            RoleResponse::AtomizerShard(shard_answers()),
            RoleResponse::WrittenAhead(vec![true, false]),
            RoleResponse::Snapshot {
                applied_index: 9,
                total_bytes: 10,
                chunk: vec![1, 2, 3],
            },
            RoleResponse::Snapshot {
                applied_index: 0,
                total_bytes: 0,
                chunk: vec![],
            },
        ];
        for response in responses {
            assert_eq!(RoleResponse::decode(&response.encode()).unwrap(), response);
        }
        assert!(RoleRequest::decode(&[0xee]).is_err());
        let mut forged_count = vec![SUBMIT];
        forged_count.extend_from_slice(&[0; 96]);
        forged_count.extend_from_slice(&[0xff; 8]);
        assert!(RoleRequest::decode(&forged_count).is_err());
        // A record count beyond what the bytes could hold, and an outcome flag that is no bool.
        let mut forged_records = vec![ARCHIVE_WRITE];
        forged_records.extend_from_slice(&[0xff; 8]);
        assert!(RoleRequest::decode(&forged_records).is_err());
        let mut bad_flag = vec![ARCHIVE_OUTCOMES, 1, 0, 0, 0, 0, 0, 0, 0];
        bad_flag.extend_from_slice(&[0; 32]);
        bad_flag.push(2);
        assert!(RoleRequest::decode(&bad_flag).is_err());
        // A written-ahead question count beyond the bytes; a written-ahead flag that is no bool.
        let mut forged_questions = vec![WRITTEN_AHEAD];
        forged_questions.extend_from_slice(&[0xff; 8]);
        assert!(RoleRequest::decode(&forged_questions).is_err());
        assert!(RoleResponse::decode(&[WRITTEN_AHEAD, 1, 0, 0, 0, 0, 0, 0, 0, 2]).is_err());
        assert!(RoleResponse::decode(&[WRITTEN_AHEAD, 1, 0, 0, 0, 0, 0, 0, 0, 1]).is_ok());
    }

    fn atomizer_messages() -> Vec<ShardMessage> {
        vec![
            ShardMessage::Attest(specie_atomizer::AttestRequest {
                round: 4,
                ids: vec![UhsId([1; 32]), UhsId([2; 32])],
            }),
            ShardMessage::Block(specie_atomizer::ShardBlock {
                height: 9,
                spent: vec![UhsId([1; 32])],
                created: vec![],
            }),
        ]
    }

    fn shard_answers() -> Vec<ShardAnswer> {
        vec![
            ShardAnswer::Attested {
                round: 4,
                asked: [3; 32],
                height: 8,
                present: vec![true, false],
            },
            ShardAnswer::Applied { height: 9 },
            ShardAnswer::Behind { height: 8 },
        ]
    }

    /// A record of an issuer's mint, as a sentinel writes it ahead.
    fn record() -> Record {
        use specie_transaction::{MintTransaction, NonceMode, Output, SpecieTransaction};
        let issuer = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[7; 32]).unwrap();
        let output = Output {
            witness_program_commitment: [1; 32],
            value: 5,
        };
        let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
            [2; 32],
            vec![output],
            &issuer,
            NonceMode::Deterministic,
        ));
        Record::new(mint.clone(), &mint.compact()).unwrap()
    }

    #[test]
    fn every_outcome_code_round_trips_and_unknown_codes_are_refused() {
        for code in 0..=u8::MAX {
            match SubmitOutcome::from_u8(code) {
                Some(outcome) => assert_eq!(outcome.to_u8(), code),
                None => {
                    let mut bytes = RoleResponse::Submitted(vec![SubmitOutcome::Busy]).encode();
                    *bytes.last_mut().unwrap() = code;
                    assert!(
                        matches!(RoleResponse::decode(&bytes), Err(DecodeError::UnknownKind { kind, .. }) if kind == code),
                        "code {code:#04x}"
                    );
                }
            }
        }
        // A "rejected because yes" cannot be said: code 0 is confirmed.
        assert_eq!(SubmitOutcome::from_u8(0), Some(SubmitOutcome::Confirmed));
        assert_eq!(
            SubmitOutcome::from_u8(Vote::InputMissing as u8),
            Some(SubmitOutcome::Rejected(Vote::InputMissing))
        );
    }

    #[test]
    fn a_submission_verifies_only_with_its_sentinels_key_and_untouched_transactions() {
        let sentinel = Keypair::new_global(&mut rand::thread_rng());
        let other = Keypair::new_global(&mut rand::thread_rng());
        let tx = |byte: u8| CompactTransaction {
            txid: Txid([byte; 32]),
            spent: vec![UhsId([byte; 32])],
            created: vec![UhsId([byte + 1; 32])],
            ..Default::default()
        };
        let submission = Submission::attest(vec![tx(1), tx(2)], &sentinel);
        let key = xonly_bytes(&sentinel);
        assert_eq!(submission.verify([key].iter()), Ok(()));
        assert!(matches!(
            submission.verify([xonly_bytes(&other)].iter()),
            Err(AttestationError::UntrustedKey { .. })
        ));
        let mut swapped = submission.clone();
        swapped.txs[1].created[0] = UhsId([0xee; 32]);
        assert_eq!(swapped.verify([key].iter()), Err(AttestationError::BadSignature));
        let mut dropped = submission.clone();
        dropped.txs.pop();
        assert_eq!(dropped.verify([key].iter()), Err(AttestationError::BadSignature));
        let mut impostor = Submission::attest(vec![tx(1), tx(2)], &other);
        impostor.sentinel = key;
        assert_eq!(impostor.verify([key].iter()), Err(AttestationError::BadSignature));
    }
}
