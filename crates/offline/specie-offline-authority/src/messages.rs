//! What the offline authority takes, makes durable, answers and reports, and the canonical bytes of
//! its commands (what its log holds).

use std::sync::Arc;

use specie_codec::{put_u64, DecodeError, Reader};
use specie_offline::{
    funding_owners_digest, DoubleSpend, Instruction, Issuance, KeyBinding, KeyCertificate, KeyError, KeyStatus, Link,
    PublicKey, SignedKeyRing, SignedMove, Token, DENOMINATIONS_MAX, ISSUANCE_BYTES, KEY_BINDING_BYTES,
    REISSUE_OUTPUTS_MAX, TOKEN_BYTES_MAX,
};
use specie_role::Ticket;
use thiserror::Error;

/// The first byte of every command and snapshot of this role.
pub const AUTHORITY_ENCODING_VERSION: u8 = 1;
/// Most one-time keys one certification request may carry.
pub const BINDINGS_PER_CALL_MAX: usize = 256;
/// Most certified keys one identity holds: what one registered device can make the key table
/// grow by (a device certifies a fresh batch as it uses its keys up).
pub const KEYS_PER_IDENTITY_MAX: usize = 4_096;
/// Most tokens one funding issues.
pub const TOKENS_PER_FUNDING_MAX: usize = 1_024;
/// Most revoked serials one answer carries; a device asks again from where it got to.
pub const REVOCATIONS_PER_ANSWER_MAX: usize = 4_096;
/// Most evidence one answer carries.
pub const EVIDENCE_PER_ANSWER_MAX: usize = 64;

/// One certified key in a certify command: its binding and the certificate's signature.
const CERTIFIED_BYTES: usize = KEY_BINDING_BYTES + 64;

const COMMAND_REGISTER: u8 = 0;
const COMMAND_CERTIFY: u8 = 1;
const COMMAND_FUND: u8 = 2;
const COMMAND_DEPOSIT: u8 = 3;
const COMMAND_ROTATE: u8 = 4;
const COMMAND_REVOKE_KEY: u8 = 5;
const COMMAND_REFUND: u8 = 6;

/// Value moved out of the online core for offline cash, as the core bridge saw it confirmed: the
/// core transaction's id (credited once), the amount, and the certified one-time keys that get the
/// tokens, one per token of the amount's split into denominations, largest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Funding {
    pub id: [u8; 32],
    pub amount: u64,
    pub owners: Vec<PublicKey>,
}

impl Funding {
    /// What a core bridge funding (confirmed: its marker is in the UHS, which the bridge
    /// checks) entitles `owners` to, from the terms the core's format reads out of it (the role
    /// never reads core transactions): the bridge key it is made out to (`authority`), what it
    /// commits to (`owners_digest`), its `amount`, and its `marker`. Its amount is credited once
    /// under its marker, if it names this authority's `bridge` key and exactly these owners
    /// ([`funding_owners_digest`]).
    pub fn from_core(
        authority: &PublicKey,
        owners_digest: &[u8; 32],
        amount: u64,
        marker: [u8; 32],
        bridge: &PublicKey,
        owners: Vec<PublicKey>,
    ) -> Result<Funding, Refusal> {
        if authority != bridge {
            return Err(Refusal::FundingOtherAuthority);
        }
        if funding_owners_digest(&owners) != *owners_digest {
            return Err(Refusal::FundingOwnersDigest);
        }
        Ok(Funding {
            id: marker,
            amount,
            owners,
        })
    }
}

/// What the authority makes durable before it acts (its log's records).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// A device's identity key, enrolled by the registrar.
    Register { identity: PublicKey },
    /// One-time keys bound to registered identities, certified for `period`: each binding with
    /// the certificate's signature (the leader's), so deposits are checked against the table.
    Certify {
        period: u32,
        certified: Vec<(KeyBinding, [u8; 64])>,
    },
    /// A funding and the tokens issued for it (signed by the leader, so replay signs nothing).
    Fund { funding: Funding, issuances: Vec<Issuance> },
    /// A verified deposit: the chain, the owner's deposit statement, its instruction, and the
    /// tokens a re-issue would give (signed by the leader; kept only if the deposit is paid).
    /// Shared, not copied, with the state's record of deposits once applied.
    Deposit(Arc<Deposit>),
    /// The next period begins: its issuing keys with their denominations (derived by the leader
    /// from the seed; the log keeps the public halves, so every replica knows them).
    Rotate { period: u32, keys: Vec<(PublicKey, u64)> },
    /// An issuing key is revoked (compromised): devices refuse its tokens, which go back to the
    /// authority, where those its issuance log holds are paid (recoup).
    RevokeKey { key: PublicKey },
    /// A core funding (`id`, its marker) that could never be issued as it stands (its owners are
    /// not this authority's certified keys, or are not one per token of its amount), refunded:
    /// its `amount` goes back to `address` (a core witness program commitment: the funding's
    /// first input's owner) by the bridge key's payout for the serial [`refund_serial`]`(id)`.
    /// Counted as funded and defunded; a funding is issued or refunded once.
    Refund {
        id: [u8; 32],
        amount: u64,
        address: [u8; 32],
    },
}

/// The serial of the payout that refunds core funding `id` (a token serial's derivation, with a
/// kind no token has, so no token's payout shares its marker).
pub fn refund_serial(id: &[u8; 32]) -> [u8; 16] {
    crate::state::derive_serial(b"refund", id, 0)
}

/// A deposit as the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deposit {
    pub token: Token,
    pub statement: SignedMove,
    pub instruction: Instruction,
    pub issuances: Vec<Issuance>,
}

/// What callers and the host hand the authority. The host authorises by kind: `Register` only
/// from the registrar, `Fund` only from the core bridge after it saw the funding confirmed; the
/// others from any device.
#[derive(Clone, Debug)]
pub enum Input {
    Register {
        ticket: Ticket,
        identity: PublicKey,
    },
    Certify {
        ticket: Ticket,
        bindings: Vec<KeyBinding>,
    },
    Fund {
        ticket: Ticket,
        funding: Funding,
    },
    /// A funding the core confirmed, as `Fund`; if it can never be issued as it stands
    /// ([`Refusal::refundable`]), it is refunded to `refund_to` (its first input's owner on the
    /// core) instead of refused.
    FundOrRefund {
        ticket: Ticket,
        funding: Funding,
        refund_to: [u8; 32],
    },
    Deposit {
        ticket: Ticket,
        token: Box<Token>,
        statement: SignedMove,
        instruction: Instruction,
    },
    /// Revoked serials from position `from` of the list.
    Revocations {
        ticket: Ticket,
        from: u64,
    },
    /// Evidence against an identity (every double spend it is named for).
    Evidence {
        ticket: Ticket,
        identity: PublicKey,
    },
    Books {
        ticket: Ticket,
    },
    /// The key ring now (periods, windows, revocations): what devices fetch when they sync.
    Keys {
        ticket: Ticket,
    },
    /// (Operator) begin the next period: issue and certify with its keys from now on.
    Rotate {
        ticket: Ticket,
    },
    /// (Operator) revoke an issuing key; if it is of the current period, the next one begins.
    RevokeKey {
        ticket: Ticket,
        key: PublicKey,
    },
}

/// What happened to a deposit. A deposit sent again gets the same outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepositOutcome {
    /// Paid: these fresh tokens replace it.
    Reissued { issuances: Vec<Issuance> },
    /// Paid: the value goes back to the online core, to `address` (an x-only key), by the
    /// bridge key's payout of `amount` for `serial` (the token's), which the core accepts once
    /// per serial. The authority's service signs it (the role does not write core transactions).
    Defunded {
        serial: [u8; 16],
        address: [u8; 32],
        amount: u64,
    },
    /// Refused: another branch of this token was paid first. `debtor` (a registered identity)
    /// signed two statements on one node; the value is its debt, and the evidence names it.
    DoubleSpent {
        serial: [u8; 16],
        debtor: PublicKey,
        value: u64,
    },
    /// Refused: the owner deposited this token before with another instruction; only the first
    /// counts.
    AlreadyDeposited,
}

/// The authority's books: what the platform-wide supply audit and `specie offline audit` read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Books {
    /// Value moved in from the online core.
    pub funded: u128,
    /// Value paid back to the online core.
    pub defunded: u128,
    /// Per issuing key: value issued, value paid back (re-issued or defunded).
    pub by_key: Vec<KeyBooks>,
    /// Value of issued tokens not yet paid: funded − defunded.
    pub outstanding: u128,
    /// Of it, the value of tokens past their key's deposit window: worth nothing any more, like
    /// destroyed cash.
    pub expired: u128,
    pub current_period: u32,
    /// Refused double-spent value, and who owes it (sorted by identity).
    pub debts: Vec<Debt>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyBooks {
    pub issuing_key: PublicKey,
    pub denomination: u64,
    pub period: u32,
    pub status: KeyStatus,
    pub issued: u128,
    pub paid: u128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Debt {
    pub identity: PublicKey,
    pub value: u128,
    pub double_spends: u64,
}

/// What the authority answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Registered,
    Certified {
        certificates: Vec<KeyCertificate>,
    },
    Funded {
        issuances: Vec<Issuance>,
    },
    /// The funding could never be issued (`reason`; unknown when refunded earlier): refunded by
    /// the bridge key's payout of `amount` to `to` (a core witness program commitment: the
    /// funding's first input's owner) for `serial` ([`refund_serial`] of the funding's id), which
    /// the authority's service signs (the same terms when asked again).
    Refunded {
        reason: Option<Refusal>,
        serial: [u8; 16],
        to: [u8; 32],
        amount: u64,
    },
    /// A deposit's outcome; a defund's carries the terms of its payout to the online core.
    Deposited(DepositOutcome),
    Revocations {
        from: u64,
        serials: Vec<[u8; 16]>,
    },
    Evidence(Vec<DoubleSpend>),
    Books(Box<Books>),
    /// The key ring now, signed by the bridge key (also the answer to a rotation or a revocation).
    Keys(Box<SignedKeyRing>),
    Refused(Refusal),
}

/// Why a request is refused. Nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    #[error("not a valid identity key: {0}")]
    BadIdentity(KeyError),
    #[error("binding {index}: {error}")]
    BadBinding { index: usize, error: KeyError },
    #[error("binding {index}: its identity is not registered")]
    NotRegistered { index: usize },
    #[error("binding {index}: its identity is named as a double spender and gets no more keys")]
    Convicted { index: usize },
    #[error("binding {index}: the key is certified already, for another identity")]
    KeyTaken { index: usize },
    #[error("the identity holds {held} certified keys and asks for {asked} more, over the limit of {limit}")]
    TooManyKeys { held: usize, asked: usize, limit: usize },
    #[error("{count} items in one request, more than {max}")]
    TooMany { count: usize, max: usize },
    #[error("funding {id_hex} is known with other contents")]
    FundingMismatch { id_hex: String },
    #[error("the core funding names another authority's bridge key")]
    FundingOtherAuthority,
    #[error("the owners given are not the ones the core funding names (their digest differs)")]
    FundingOwnersDigest,
    #[error("an amount of {amount} splits into {needed} tokens but {given} owners were given")]
    FundingOwners { amount: u64, needed: usize, given: usize },
    #[error("owner {index} is not a key this authority certified")]
    UncertifiedOwner { index: usize },
    #[error("the token was not issued by this authority")]
    UnknownToken,
    #[error("{hops} hops, more than {hops_max}")]
    TooManyHops { hops: usize, hops_max: usize },
    #[error("hop {hop}: the new owner's key certificate is not one this authority issued")]
    UncertifiedKey { hop: usize },
    #[error("statement {statement} (the hops from 1, then the deposit) does not verify under its owner's key")]
    BadSignature { statement: usize },
    #[error("the deposit statement is a transfer, not a deposit")]
    NotADeposit,
    #[error("the deposit statement signs another instruction")]
    InstructionMismatch,
    #[error("the re-issue asks for {asked} but the token is worth {value}")]
    ReissueValue { asked: u128, value: u64 },
    #[error("re-issued value {value} is not a denomination")]
    NotADenomination { value: u64 },
    #[error(
        "the token's key (period {period}) took deposits through period {depositable_through}; it is worth nothing now"
    )]
    Expired { period: u32, depositable_through: u32 },
    #[error("not an issuing key of this authority")]
    UnknownIssuingKey,
    #[error("the key is revoked already")]
    AlreadyRevoked,
}

impl Refusal {
    /// Whether a core funding refused for this can never be issued as it stands (the owners its
    /// digest fixes are not certified keys of this authority, or not one per token, or too many):
    /// then it is refunded rather than left out of every book.
    pub fn refundable(&self) -> bool {
        matches!(
            self,
            Refusal::FundingOwners { .. } | Refusal::UncertifiedOwner { .. } | Refusal::TooMany { .. }
        )
    }
}

fn put_issuances(out: &mut Vec<u8>, issuances: &[Issuance]) {
    out.extend_from_slice(&(issuances.len() as u32).to_le_bytes());
    for issuance in issuances {
        issuance.encode_to(out);
    }
}

fn read_issuances(reader: &mut Reader<'_>, max: usize) -> Result<Vec<Issuance>, DecodeError> {
    let count = reader.read_u32_count("issuance count", max as u64, ISSUANCE_BYTES)?;
    (0..count).map(|_| Issuance::decode_from(reader)).collect()
}

impl Command {
    /// Version, kind, then the kind's fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![AUTHORITY_ENCODING_VERSION];
        self.encode_body(&mut out);
        out
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            Command::Register { identity } => {
                out.push(COMMAND_REGISTER);
                out.extend_from_slice(identity);
            }
            Command::Certify { period, certified } => {
                out.push(COMMAND_CERTIFY);
                out.extend_from_slice(&period.to_le_bytes());
                out.extend_from_slice(&(certified.len() as u32).to_le_bytes());
                for (binding, signature) in certified {
                    binding.encode_to(out);
                    out.extend_from_slice(signature);
                }
            }
            Command::Fund { funding, issuances } => {
                out.push(COMMAND_FUND);
                out.extend_from_slice(&funding.id);
                put_u64(out, funding.amount);
                out.extend_from_slice(&(funding.owners.len() as u32).to_le_bytes());
                for owner in &funding.owners {
                    out.extend_from_slice(owner);
                }
                put_issuances(out, issuances);
            }
            Command::Deposit(deposit) => {
                out.push(COMMAND_DEPOSIT);
                deposit.token.encode_to(out);
                deposit.statement.encode_to(out);
                deposit.instruction.encode_to(out);
                put_issuances(out, &deposit.issuances);
            }
            Command::Rotate { period, keys } => {
                assert!(keys.len() <= DENOMINATIONS_MAX, "one key per denomination");
                out.push(COMMAND_ROTATE);
                out.extend_from_slice(&period.to_le_bytes());
                out.push(keys.len() as u8);
                for (key, denomination) in keys {
                    out.extend_from_slice(key);
                    put_u64(out, *denomination);
                }
            }
            Command::RevokeKey { key } => {
                out.push(COMMAND_REVOKE_KEY);
                out.extend_from_slice(key);
            }
            Command::Refund { id, amount, address } => {
                out.push(COMMAND_REFUND);
                out.extend_from_slice(id);
                put_u64(out, *amount);
                out.extend_from_slice(address);
            }
        }
    }

    /// The largest command: a deposit of the longest token re-issued as the most outputs.
    pub const BYTES_MAX: usize = 2
        + TOKEN_BYTES_MAX
        + specie_offline::SIGNED_MOVE_BYTES_MAX
        + specie_offline::INSTRUCTION_BYTES_MAX
        + 4
        + REISSUE_OUTPUTS_MAX * ISSUANCE_BYTES
        + 2 * TOKENS_PER_FUNDING_MAX * ISSUANCE_BYTES
        + BINDINGS_PER_CALL_MAX * CERTIFIED_BYTES;

    pub fn decode(bytes: &[u8]) -> Result<Command, DecodeError> {
        specie_codec::decode_bounded("authority command", bytes, Self::BYTES_MAX, |reader| {
            reader.read_version("authority command", AUTHORITY_ENCODING_VERSION)?;
            Self::decode_body(reader)
        })
    }

    pub(crate) fn decode_body(reader: &mut Reader<'_>) -> Result<Command, DecodeError> {
        Ok(match reader.read_u8("command kind")? {
            COMMAND_REGISTER => Command::Register {
                identity: reader.read_array("identity")?,
            },
            COMMAND_CERTIFY => {
                let period = reader.read_u32("period")?;
                let count = reader.read_u32_count("binding count", BINDINGS_PER_CALL_MAX as u64, CERTIFIED_BYTES)?;
                let certified = (0..count)
                    .map(|_| {
                        Ok((
                            KeyBinding::decode_from(reader)?,
                            reader.read_array("certificate signature")?,
                        ))
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Command::Certify { period, certified }
            }
            COMMAND_FUND => {
                let id = reader.read_array("funding id")?;
                let amount = reader.read_u64("funding amount")?;
                let count = reader.read_u32_count("owner count", TOKENS_PER_FUNDING_MAX as u64, 32)?;
                let owners = (0..count)
                    .map(|_| reader.read_array("owner"))
                    .collect::<Result<_, _>>()?;
                let issuances = read_issuances(reader, TOKENS_PER_FUNDING_MAX)?;
                Command::Fund {
                    funding: Funding { id, amount, owners },
                    issuances,
                }
            }
            COMMAND_DEPOSIT => Command::Deposit(Arc::new(Deposit {
                token: Token::decode_from(reader)?,
                statement: SignedMove::decode_from(reader)?,
                instruction: Instruction::decode_from(reader)?,
                issuances: read_issuances(reader, REISSUE_OUTPUTS_MAX)?,
            })),
            COMMAND_ROTATE => {
                let period = reader.read_u32("period")?;
                let count = reader.read_u8_count("rotated key count", DENOMINATIONS_MAX as u64, 40)?;
                let keys = (0..count)
                    .map(|_| Ok((reader.read_array("issuing key")?, reader.read_u64("denomination")?)))
                    .collect::<Result<_, DecodeError>>()?;
                Command::Rotate { period, keys }
            }
            COMMAND_REVOKE_KEY => Command::RevokeKey {
                key: reader.read_array("revoked key")?,
            },
            COMMAND_REFUND => Command::Refund {
                id: reader.read_array("refunded funding id")?,
                amount: reader.read_u64("refunded amount")?,
                address: reader.read_array("refund address")?,
            },
            kind => {
                return Err(DecodeError::UnknownKind {
                    what: "command kind",
                    kind,
                })
            }
        })
    }
}

/// What the operator must see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Report {
    /// A double spend was found; the evidence names the owner who signed twice.
    DoubleSpend(Box<DoubleSpend>),
}

/// A deposit statement's link: the node of the token's tree the deposit makes.
pub(crate) type DepositLink = Link;
