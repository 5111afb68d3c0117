//! The FastPay authorities' HTTP API as both ends see it: paths, limits and the JSON bodies
//! (docs/api.md, "FastPay authorities"). An authority shard replica serves it
//! (`specie_cluster::authority_replica`); [`crate::http_client`] speaks it.
//!
//! Orders, votes, certificates and fundings travel as their canonical bytes
//! (`application/octet-stream`, docs/byzantine-format.md and docs/transaction-format.md): they
//! are signed, so the bytes are what counts. Answers about state and every error are JSON.

use serde::{Deserialize, Serialize};
use specie_authority::Refusal;
use specie_codec::{put_u32, DecodeError, Reader};
use specie_fastpay::{decode_exact, Justification, SignedOrder, JUSTIFICATION_BYTES_MAX, SIGNED_ORDER_BYTES_MAX};

/// POST a `SignedOrder`; 200 answers the authority's `Vote` (bytes).
pub const ORDERS_PATH: &str = "/v1/fastpay/orders";
/// POST a `Certificate`; 200 answers [`ConfirmedBody`].
pub const CERTIFICATES_PATH: &str = "/v1/fastpay/certificates";
/// GET `ACCOUNTS_PATH/{account hex}?from_sequence=N`; 200 answers [`AccountBody`].
pub const ACCOUNTS_PATH: &str = "/v1/fastpay/accounts";
/// POST a FastPay funding transaction (`SpecieTransaction`, kind 0x03); 200 answers [`FundedBody`].
pub const FUNDINGS_PATH: &str = "/v1/fastpay/fundings";
/// GET: which authority and shard this is, and whether it leads ([`InfoBody`]).
pub const INFO_PATH: &str = "/v1/fastpay/info";
/// POST a lock (a `Certificate` of a quorum's prepare votes); 200 answers the authority's commit
/// `Vote` (bytes).
pub const LOCKS_PATH: &str = "/v1/fastpay/locks";
/// POST the account owner's `SignedRoundRequest` (bytes); 200 answers the authority's
/// `SignedRoundChange` (bytes).
pub const ROUND_CHANGES_PATH: &str = "/v1/fastpay/round-changes";
/// POST a [`Proposal`]; 200 answers the authority's prepare `Vote` of that round (bytes).
pub const PROPOSALS_PATH: &str = "/v1/fastpay/proposals";
/// GET `EPOCHS_PATH?after=N`: the committee records this shard holds of the epochs after N
/// ([`EpochsBody`]); POST a `CommitteeRecord` (bytes): the shard enters that epoch once it
/// checks against its current one ([`EpochBody`]).
pub const EPOCHS_PATH: &str = "/v1/fastpay/epochs";
/// One authority shard's books (the supply report's, `specie audit supply --fastpay-shard`).
pub const BOOKS_PATH: &str = "/v1/fastpay/books";

/// The largest request body an authority reads: a funding transaction with many inputs, or a
/// certificate of the largest committee, fits easily.
pub const BODY_BYTES_MAX: usize = 256 * 1024;

/// The `code` of an error whose `refusal` names what the authority's role refused.
pub const CODE_REFUSED: &str = "refused";
/// The `code` of a replica that does not lead its shard group: ask `leader_http` instead.
pub const CODE_NOT_LEADER: &str = "not_leader";
/// The `code` of a request whose replica lost the lead meanwhile: send it again.
pub const CODE_OUTCOME_UNKNOWN: &str = "outcome_unknown";
/// The `code` of a replica that is stopping: ask another.
pub const CODE_STOPPING: &str = "stopping";
/// The `code` of a request about an account's slot that is settled already: `certificate` holds
/// its final certificate.
pub const CODE_SETTLED: &str = "settled";

/// The version byte that starts the request bodies this module defines.
const BODY_VERSION: u8 = 1;

/// Asks an authority to prepare `order` in `round`: version 1, the signed order, the round
/// (u32 LE), the justification (each in its canonical encoding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub order: SignedOrder,
    pub round: u32,
    pub justification: Justification,
}

impl Proposal {
    pub const BYTES_MAX: usize = 1 + SIGNED_ORDER_BYTES_MAX + 4 + JUSTIFICATION_BYTES_MAX;

    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![BODY_VERSION];
        self.order.encode_to(&mut out);
        put_u32(&mut out, self.round);
        self.justification.encode_to(&mut out);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Proposal, DecodeError> {
        decode_exact("proposal", bytes, Self::BYTES_MAX, |reader| {
            read_body_version(reader, "proposal")?;
            Ok(Proposal {
                order: SignedOrder::decode_from(reader)?,
                round: reader.read_u32("round")?,
                justification: Justification::decode_from(reader)?,
            })
        })
    }
}

fn read_body_version(reader: &mut Reader<'_>, what: &'static str) -> Result<(), DecodeError> {
    match reader.read_u8(what)? {
        BODY_VERSION => Ok(()),
        _ => Err(DecodeError::NonCanonical {
            what,
            reason: "unknown body version",
        }),
    }
}

/// FastPay's own fields of an error answer, beside the common ones (`code`, `message`,
/// `leader_http`) of the one error body every specie API answers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefusalFields {
    /// With `refused`: the role's refusal, by name (`OtherOrderPending`, `MissingEarlier`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// With `MissingEarlier` and `WrongSequence`: the account's next sequence number here, from
    /// which a client sends the certificates this authority lacks. With `OtherOrderPending`: the
    /// sequence number of the order pending here (below the refused order's, this authority
    /// lags: the certificates from there on settle the pending order and bring it up to date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_sequence: Option<u64>,
    /// With `RoundPassed`: the round of the slot this authority is in already (a payer opens a
    /// round above the one more than f authorities report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<u32>,
    /// With `not_leader`: the shard group's leader (its replica id; `leader_http` is its API).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    /// With `settled`: the slot's final certificate, canonical bytes in hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

/// Every error: `{"error": {...}}`, the one shape of every specie API, with FastPay's fields.
pub type ErrorBody = specie_service::ErrorBody<RefusalFields>;
pub type ErrorDetail = specie_service::ErrorDetail<RefusalFields>;

/// A refusal's name (its variant's, `WrongSequence`): the `refusal` of an error body.
pub fn refusal_name(refusal: &Refusal) -> String {
    let debug = format!("{refusal:?}");
    debug.chars().take_while(char::is_ascii_alphanumeric).collect()
}

/// A refusal of the authority's role, named as the enum names it.
pub fn refused_detail(refusal: &Refusal) -> ErrorDetail {
    let name = refusal_name(refusal);
    let next_sequence = match refusal {
        Refusal::MissingEarlier { next, .. } => Some(*next),
        Refusal::WrongSequence { expected, .. } => Some(*expected),
        Refusal::OtherOrderPending { sequence } => Some(*sequence),
        _ => None,
    };
    let round = match refusal {
        Refusal::RoundPassed { round } => Some(*round),
        _ => None,
    };
    ErrorDetail {
        more: RefusalFields {
            refusal: Some(name),
            next_sequence,
            round,
            ..RefusalFields::default()
        },
        ..ErrorDetail::new(CODE_REFUSED, refusal.to_string())
    }
}

/// A certificate settled at this authority.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ConfirmedBody {
    /// The payer's account key, hex.
    pub sender: String,
    /// The payer's sequence number now confirmed.
    pub sequence: u64,
}

/// An account as this authority knows it (FastPay §4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AccountBody {
    /// May be negative for a while (docs/byzantine-mode.md, "Negative balances").
    pub balance: i128,
    pub next_sequence: u64,
    /// The order this authority voted for at `next_sequence` and its vote, canonical bytes in hex.
    pub pending: Option<PendingBody>,
    /// Confirmed certificates from the requested `from_sequence` on, canonical bytes in hex (at
    /// most 64: ask again from where they end).
    pub confirmed: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PendingBody {
    pub order: String,
    pub vote: String,
}

/// A funding credited (or credited before: the same answer).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FundedBody {
    /// The funding's marker in the online core's UHS (hex): its id at every authority.
    pub funded: String,
    pub account: String,
    pub amount: u64,
}

/// The epoch a shard is in, once it applied the record posted (or had before).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EpochBody {
    pub epoch: u64,
}

/// Committee records, oldest first, canonical bytes in hex (docs/byzantine-format.md §3.1; at
/// most 16: ask again after the last one's epoch).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EpochsBody {
    pub records: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct InfoBody {
    pub authority: u16,
    pub shard: u32,
    pub shards: u32,
    pub replica: u64,
    pub leader: bool,
    pub committee_id: String,
    pub epoch: u64,
}

/// `GET /v1/fastpay/books`: one authority shard's books, as its replica has applied them.
/// Values are decimal strings (they may pass 2^53).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShardBooksBody {
    pub authority: u16,
    pub shard: u32,
    pub shards: u32,
    pub committee_id: String,
    /// The sum of the shard's accounts' balances.
    pub balances: String,
    /// Value credited to the authority's other shards and not yet acknowledged by them.
    pub credits_unacked: String,
    /// Value funded into this shard from the core.
    pub funded: String,
    /// Value certified out of this shard to the core (redeems).
    pub redeemed: String,
}

#[cfg(test)]
mod tests {
    use specie_fastpay::AccountKey;

    use super::*;

    #[test]
    fn proposals_round_trip_and_refuse_other_versions_and_trailing_bytes() {
        let owner = specie_fastpay::deterministic_key("account", 0);
        let order = specie_fastpay::TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient: specie_fastpay::Recipient::Account(AccountKey([3; 32])),
            amount: 1,
            sequence: 0,
            memo: vec![],
        }
        .sign(&owner);
        let proposal = Proposal {
            order,
            round: 1,
            justification: Justification { changes: vec![] },
        };
        let bytes = proposal.encode();
        assert_eq!(Proposal::decode(&bytes), Ok(proposal));
        assert!(Proposal::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Proposal::decode(&longer).is_err());
        let mut other_version = bytes;
        other_version[0] = 2;
        assert!(Proposal::decode(&other_version).is_err());
    }

    #[test]
    fn a_refusal_is_named_as_the_enum_names_it_with_the_sequence_a_client_needs() {
        let detail = refused_detail(&Refusal::MissingEarlier { next: 3, got: 5 });
        assert_eq!(detail.more.refusal.as_deref(), Some("MissingEarlier"));
        assert_eq!(detail.more.next_sequence, Some(3));
        assert_eq!(detail.code, CODE_REFUSED);
        let detail = refused_detail(&Refusal::WrongSequence { expected: 2, got: 4 });
        assert_eq!(
            (detail.more.refusal.as_deref(), detail.more.next_sequence),
            (Some("WrongSequence"), Some(2))
        );
        let detail = refused_detail(&Refusal::OtherOrderPending { sequence: 7 });
        assert_eq!(
            (detail.more.refusal.as_deref(), detail.more.next_sequence),
            (Some("OtherOrderPending"), Some(7))
        );
        let detail = refused_detail(&Refusal::RoundPassed { round: 4 });
        assert_eq!(
            (detail.more.refusal.as_deref(), detail.more.round),
            (Some("RoundPassed"), Some(4))
        );
        let detail = refused_detail(&Refusal::Busy);
        assert_eq!(
            (detail.more.refusal.as_deref(), detail.more.next_sequence),
            (Some("Busy"), None)
        );
        let detail = refused_detail(&Refusal::Order(specie_fastpay::OrderError::BadSignature));
        assert_eq!(detail.more.refusal.as_deref(), Some("Order"));
        let json = serde_json::to_string(&ErrorBody { error: detail.clone() }).unwrap();
        assert!(!json.contains("leader"), "absent fields are left out: {json}");
        assert_eq!(serde_json::from_str::<ErrorBody>(&json).unwrap().error, detail);
    }
}
