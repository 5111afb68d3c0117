//! What an authority shard takes, makes durable, answers and sends.

use specie_codec::{put_u32, put_u64, DecodeError, Reader};
use specie_fastpay::{
    AccountKey, Certificate, CertificateError, CommitteeRecord, Evidence, Justification, JustificationError,
    OrderError, RecordError, RoundRequestError, SignedOrder, SignedRoundChange, SignedRoundRequest, Vote,
    SIGNATURE_BYTES,
};
use specie_role::Ticket;
use thiserror::Error;

/// A shard's position among its authority's shards.
pub type ShardIndex = u32;

/// Most credits one cross-shard message carries (and one `Credit` command applies).
pub const CREDITS_PER_MESSAGE_MAX: usize = 1024;
/// Most certificates one account-state answer carries; a client asks again from where it ended.
pub const CERTIFICATES_PER_ANSWER_MAX: usize = 64;
/// Most committee records one answer carries; a client asks again from the last epoch it got.
pub const RECORDS_PER_ANSWER_MAX: usize = 16;

/// Value moved into this shard's account by a funding from the online core, identified by the
/// core's id for it so that it is credited once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Funding {
    pub id: [u8; 32],
    pub account: AccountKey,
    pub amount: u64,
}

/// A confirmed payment to an account on another shard of the same authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Credit {
    pub recipient: AccountKey,
    pub amount: u64,
    /// The payer and the sequence number of the certified order, for the recipient's history.
    pub sender: AccountKey,
    pub sender_sequence: u64,
}

/// An input, decoded and authorised by the host: client requests carry a ticket; `Credits`,
/// `CreditAck` come only from this authority's own shards, `Fund` only from the core bridge.
#[derive(Clone, Debug)]
pub enum Input {
    /// A transfer order (FastPay step 1): answered with this authority's vote.
    Transfer {
        ticket: Ticket,
        order: SignedOrder,
    },
    /// A confirmation order (step 3): a certificate to settle.
    Confirm {
        ticket: Ticket,
        certificate: Certificate,
    },
    /// Recovery: enter the requested round (≥ 1) of the account's slot, answered with this
    /// authority's signed round change. Only the account's owner may ask.
    RoundChange {
        ticket: Ticket,
        request: SignedRoundRequest,
    },
    /// Recovery: prepare `order` in `round` (≥ 1), as the justification allows.
    Propose {
        ticket: Ticket,
        order: SignedOrder,
        round: u32,
        justification: Box<Justification>,
    },
    /// A lock (a quorum of prepare votes, any round): lock it and answer with a commit vote.
    Lock {
        ticket: Ticket,
        certificate: Certificate,
    },
    /// §4.4: an account's state and its confirmed certificates from `from_sequence` on.
    Account {
        ticket: Ticket,
        account: AccountKey,
        from_sequence: u64,
    },
    Fund {
        ticket: Ticket,
        funding: Funding,
    },
    /// This shard's books (what the supply report reads): answered at once.
    Books {
        ticket: Ticket,
    },
    /// The next epoch's committee: entered once checked against the current one (anyone may
    /// bring it, since a quorum of the current seats signed it). Answered with the epoch.
    EnterEpoch {
        ticket: Ticket,
        record: Box<CommitteeRecord>,
    },
    /// The committee records of the epochs after `after`: how a client learns of a new epoch.
    Epochs {
        ticket: Ticket,
        after: u64,
    },
    /// Credits from shard `from`, the first numbered `first_sequence` in that channel.
    Credits {
        from: ShardIndex,
        first_sequence: u64,
        credits: Vec<Credit>,
    },
    /// Shard `from` has applied every credit this shard sent it numbered below `through`.
    CreditAck {
        from: ShardIndex,
        through: u64,
    },
}

/// What the shard makes durable before acting on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// This shard's vote on `order`, signed before it is made durable and sent only after, in
    /// the name of the committee of epoch `epoch`, the one current when it was signed (`None`:
    /// a log record from before epochs existed, signed in the first epoch).
    Vote {
        order: SignedOrder,
        signature: [u8; SIGNATURE_BYTES],
        epoch: Option<u64>,
    },
    /// A checked certificate: debit the sender, credit the recipient here or through a channel.
    Confirm {
        certificate: Certificate,
    },
    Fund {
        funding: Funding,
    },
    /// This shard's prepare vote in recovery round `round` (≥ 1), signed in epoch `epoch`.
    Prepare {
        order: SignedOrder,
        round: u32,
        signature: [u8; SIGNATURE_BYTES],
        epoch: Option<u64>,
    },
    /// This shard locks the certificate's order at its round; `signature` is its commit vote,
    /// signed in epoch `epoch`.
    Lock {
        certificate: Certificate,
        signature: [u8; SIGNATURE_BYTES],
        epoch: Option<u64>,
    },
    /// This shard acts in no round below `round` for the account's slot at `sequence`.
    EnterRound {
        account: AccountKey,
        sequence: u64,
        round: u32,
    },
    /// Credits received from shard `from`, numbered from `first_sequence`.
    Credit {
        from: ShardIndex,
        first_sequence: u64,
        credits: Vec<Credit>,
    },
    /// Shard `to` acknowledged every credit numbered below `through`: forget them.
    Acked {
        to: ShardIndex,
        through: u64,
    },
    /// The committee of the next epoch (checked): from now on this shard votes, if its key
    /// holds its seat, only in that committee's name.
    EnterEpoch {
        record: Box<CommitteeRecord>,
    },
    /// This log, the seat's state, is handed to the key that holds the seat in epoch `epoch`
    /// (proposed by the previous holder once its key was replaced): replicas that run on it
    /// with that key vote from now on.
    HandOver {
        epoch: u64,
    },
}

/// An account as this shard knows it (FastPay §4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountState {
    pub balance: i128,
    pub next_sequence: u64,
    /// The order this authority voted for at `next_sequence`, with its vote.
    pub pending: Option<(SignedOrder, Vote)>,
    /// Confirmed certificates from the requested sequence number on (at most
    /// [`CERTIFICATES_PER_ANSWER_MAX`]).
    pub confirmed: Vec<Certificate>,
}

/// The answer to a client's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Voted(Vote),
    /// The certificate is settled here; `sequence` is now confirmed for its sender.
    Confirmed {
        sender: AccountKey,
        sequence: u64,
    },
    Funded {
        id: [u8; 32],
    },
    Account(Box<AccountState>),
    RoundChanged(Box<SignedRoundChange>),
    /// The slot asked about is settled here with this final certificate.
    Final(Box<Certificate>),
    Refused(Refusal),
    Books(ShardBooks),
    /// The shard is in this epoch (the record brought is applied, or was already).
    Epoch {
        epoch: u64,
    },
    /// Records of the epochs after the one asked about, oldest first.
    Epochs(Vec<CommitteeRecord>),
}

/// A shard's books: the value in its accounts, what moved in from and out to the core, and
/// what is on its way to the other shards of its authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardBooks {
    pub balances: i128,
    pub funded: u128,
    pub redeemed: u128,
    pub credits_unacked: u128,
}

/// Why a client's order or certificate is refused, in FastPay's order of checks.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error("account belongs to shard {owner}, not this one")]
    WrongShard { owner: ShardIndex },
    #[error("invalid order: {0}")]
    Order(#[from] OrderError),
    #[error("invalid certificate: {0}")]
    Certificate(#[from] CertificateError),
    #[error("the account has never been funded")]
    UnknownAccount,
    #[error("another order is pending for sequence number {sequence}")]
    OtherOrderPending { sequence: u64 },
    #[error("sequence number {got}, expected {expected}")]
    WrongSequence { expected: u64, got: u64 },
    #[error("balance {balance} is less than the amount {amount}")]
    InsufficientBalance { balance: i128, amount: u64 },
    #[error("certificate for sequence number {got}, but {next} must be confirmed first")]
    MissingEarlier { next: u64, got: u64 },
    #[error("a different order was already confirmed for sequence number {sequence}: conflicting certificates")]
    ConflictingCertificate { sequence: u64 },
    #[error("the channel to shard {shard} holds {credits} credits, its limit: try again")]
    ChannelFull { shard: ShardIndex, credits: usize },
    #[error("too many orders wait for this account's state to settle: try again")]
    Busy,
    #[error("funding {id_hex} was credited already with other terms")]
    FundingMismatch { id_hex: String },
    #[error("this authority is in round {round} of the slot already")]
    RoundPassed { round: u32 },
    #[error("locked on another order in round {lock_round}; the justification has no higher lock")]
    LockedOnOther { lock_round: u32 },
    #[error("the justification does not allow this order")]
    NotAllowed,
    #[error("invalid round request: {0}")]
    RoundRequest(#[from] RoundRequestError),
    #[error("invalid justification: {0}")]
    Justification(#[from] JustificationError),
    #[error("this authority's key does not hold its seat in epoch {epoch}: it votes no more (an authority replaced, or one not yet handed its seat)")]
    NotSeated { epoch: u64 },
    #[error("invalid committee record: {0}")]
    Record(#[from] RecordError),
}

/// What an authority shard sends to another shard of the same authority.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Credits { first_sequence: u64, credits: Vec<Credit> },
    CreditAck { through: u64 },
}

impl Message {
    /// The input this message is for its receiver, which the transport has authenticated as
    /// coming from shard `from` of the same authority.
    pub fn into_input(self, from: ShardIndex) -> Input {
        match self {
            Message::Credits {
                first_sequence,
                credits,
            } => Input::Credits {
                from,
                first_sequence,
                credits,
            },
            Message::CreditAck { through } => Input::CreditAck { from, through },
        }
    }
}

/// What an operator must see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// Two final certificates for one account and sequence number: more than f authorities
    /// are Byzantine. Followed by an `Equivocation` report when they convict by themselves (one
    /// phase of one round); across rounds, the evidence is in the justifications of the
    /// rounds between them (docs/byzantine-mode.md, "Accountable safety").
    ConflictingCertificates(Box<[Certificate; 2]>),
    /// Evidence that convicts: double votes in two conflicting certificates, or round changes
    /// in a justification that votes of their signers contradict. Never empty.
    Equivocation(Box<Evidence>),
    /// A shard sent credits out of order or beyond what it could have: a bug or a forgery.
    ChannelViolation { from: ShardIndex, reason: &'static str },
}

const COMMAND_VOTE: u8 = 1;
const COMMAND_CONFIRM: u8 = 2;
const COMMAND_FUND: u8 = 3;
const COMMAND_CREDIT: u8 = 4;
const COMMAND_ACKED: u8 = 5;
const COMMAND_PREPARE: u8 = 6;
const COMMAND_LOCK: u8 = 7;
const COMMAND_ENTER_ROUND: u8 = 8;
const COMMAND_ENTER_EPOCH: u8 = 9;
/// The signing commands with the epoch they were signed in. Logs written before epochs hold
/// kinds 1, 6 and 7 (read back with no epoch: signed in the first).
const COMMAND_VOTE_IN_EPOCH: u8 = 10;
const COMMAND_PREPARE_IN_EPOCH: u8 = 11;
const COMMAND_LOCK_IN_EPOCH: u8 = 12;
const COMMAND_HAND_OVER: u8 = 13;

const CREDIT_BYTES: usize = 32 + 8 + 32 + 8;

impl Credit {
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.recipient.0);
        put_u64(out, self.amount);
        out.extend_from_slice(&self.sender.0);
        put_u64(out, self.sender_sequence);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Credit, DecodeError> {
        Ok(Credit {
            recipient: AccountKey(reader.read_array("credit recipient")?),
            amount: reader.read_u64("credit amount")?,
            sender: AccountKey(reader.read_array("credit sender")?),
            sender_sequence: reader.read_u64("credit sender sequence")?,
        })
    }
}

pub(crate) fn encode_credits(credits: &[Credit], out: &mut Vec<u8>) {
    put_u32(out, credits.len() as u32);
    for credit in credits {
        credit.encode_to(out);
    }
}

pub(crate) fn decode_credits(reader: &mut Reader<'_>) -> Result<Vec<Credit>, DecodeError> {
    let count = reader.read_u32_count("credits", CREDITS_PER_MESSAGE_MAX as u64, CREDIT_BYTES)?;
    (0..count).map(|_| Credit::decode_from(reader)).collect()
}

impl Funding {
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&self.account.0);
        put_u64(out, self.amount);
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Funding, DecodeError> {
        Ok(Funding {
            id: reader.read_array("funding id")?,
            account: AccountKey(reader.read_array("funding account")?),
            amount: reader.read_u64("funding amount")?,
        })
    }
}

impl Command {
    /// The canonical log record: a kind byte, then the command's fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Command::Vote {
                order,
                signature,
                epoch,
            } => {
                match epoch {
                    None => out.push(COMMAND_VOTE),
                    Some(epoch) => {
                        out.push(COMMAND_VOTE_IN_EPOCH);
                        put_u64(&mut out, *epoch);
                    }
                }
                order.encode_to(&mut out);
                out.extend_from_slice(signature);
            }
            Command::Confirm { certificate } => {
                out.push(COMMAND_CONFIRM);
                certificate.encode_to(&mut out);
            }
            Command::Fund { funding } => {
                out.push(COMMAND_FUND);
                funding.encode_to(&mut out);
            }
            Command::Credit {
                from,
                first_sequence,
                credits,
            } => {
                out.push(COMMAND_CREDIT);
                put_u32(&mut out, *from);
                put_u64(&mut out, *first_sequence);
                encode_credits(credits, &mut out);
            }
            Command::Acked { to, through } => {
                out.push(COMMAND_ACKED);
                put_u32(&mut out, *to);
                put_u64(&mut out, *through);
            }
            Command::Prepare {
                order,
                round,
                signature,
                epoch,
            } => {
                match epoch {
                    None => out.push(COMMAND_PREPARE),
                    Some(epoch) => {
                        out.push(COMMAND_PREPARE_IN_EPOCH);
                        put_u64(&mut out, *epoch);
                    }
                }
                order.encode_to(&mut out);
                put_u32(&mut out, *round);
                out.extend_from_slice(signature);
            }
            Command::Lock {
                certificate,
                signature,
                epoch,
            } => {
                match epoch {
                    None => out.push(COMMAND_LOCK),
                    Some(epoch) => {
                        out.push(COMMAND_LOCK_IN_EPOCH);
                        put_u64(&mut out, *epoch);
                    }
                }
                certificate.encode_to(&mut out);
                out.extend_from_slice(signature);
            }
            Command::EnterRound {
                account,
                sequence,
                round,
            } => {
                out.push(COMMAND_ENTER_ROUND);
                out.extend_from_slice(&account.0);
                put_u64(&mut out, *sequence);
                put_u32(&mut out, *round);
            }
            Command::EnterEpoch { record } => {
                out.push(COMMAND_ENTER_EPOCH);
                record.encode_to(&mut out);
            }
            Command::HandOver { epoch } => {
                out.push(COMMAND_HAND_OVER);
                put_u64(&mut out, *epoch);
            }
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Command, DecodeError> {
        let mut reader = Reader::new(bytes);
        let kind = reader.read_u8("authority command kind")?;
        let epoch = match kind {
            COMMAND_VOTE_IN_EPOCH | COMMAND_PREPARE_IN_EPOCH | COMMAND_LOCK_IN_EPOCH => {
                Some(reader.read_u64("command epoch")?)
            }
            _ => None,
        };
        let command = match kind {
            COMMAND_VOTE | COMMAND_VOTE_IN_EPOCH => Command::Vote {
                order: SignedOrder::decode_from(&mut reader)?,
                signature: reader.read_array("vote signature")?,
                epoch,
            },
            COMMAND_CONFIRM => Command::Confirm {
                certificate: Certificate::decode_from(&mut reader)?,
            },
            COMMAND_FUND => Command::Fund {
                funding: Funding::decode_from(&mut reader)?,
            },
            COMMAND_CREDIT => Command::Credit {
                from: reader.read_u32("credit channel")?,
                first_sequence: reader.read_u64("credit first sequence")?,
                credits: decode_credits(&mut reader)?,
            },
            COMMAND_ACKED => Command::Acked {
                to: reader.read_u32("ack channel")?,
                through: reader.read_u64("ack through")?,
            },
            COMMAND_PREPARE | COMMAND_PREPARE_IN_EPOCH => Command::Prepare {
                order: SignedOrder::decode_from(&mut reader)?,
                round: reader.read_u32("prepare round")?,
                signature: reader.read_array("prepare signature")?,
                epoch,
            },
            COMMAND_LOCK | COMMAND_LOCK_IN_EPOCH => Command::Lock {
                certificate: Certificate::decode_from(&mut reader)?,
                signature: reader.read_array("commit signature")?,
                epoch,
            },
            COMMAND_ENTER_ROUND => Command::EnterRound {
                account: AccountKey(reader.read_array("round account")?),
                sequence: reader.read_u64("round sequence")?,
                round: reader.read_u32("round")?,
            },
            COMMAND_ENTER_EPOCH => Command::EnterEpoch {
                record: Box::new(CommitteeRecord::decode_from(&mut reader)?),
            },
            COMMAND_HAND_OVER => Command::HandOver {
                epoch: reader.read_u64("hand-over epoch")?,
            },
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "authority command kind",
                    kind,
                })
            }
        };
        reader.finish()?;
        Ok(command)
    }
}
