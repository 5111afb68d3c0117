//! The offline authority's HTTP/JSON API as types: every path, and every request and answer
//! body, shared by the server ([`crate::api`]) and the client ([`crate::device::AuthorityClient`])
//! so the two cannot drift (docs/offline-mode.md, "The authority as a process"). Binary values
//! are hex of their canonical encodings; values that may pass 2^53 (the books' u128 sums) are
//! decimal strings; errors are the one error body of `specie_service`.
//!
//! | endpoint | request | answer |
//! |---|---|---|
//! | `GET /v1/offline/keys` | | [`KeysBody`] |
//! | `POST /v1/offline/rotate` (operator) | | [`KeysBody`] |
//! | `POST /v1/offline/revoke-key` (operator) | [`RevokeKeyRequest`] | [`KeysBody`] |
//! | `POST /v1/offline/register` (operator) | [`RegisterRequest`] | [`RegisteredBody`] |
//! | `POST /v1/offline/fund` (operator, trials) | [`FundRequest`] | [`FundedBody`] |
//! | `POST /v1/offline/fund-from-core` | [`FundFromCoreRequest`] | [`FundedBody`]: tokens, or a refund |
//! | `POST /v1/offline/certify` | [`CertifyRequest`] | [`CertifiedBody`] |
//! | `POST /v1/offline/deposit` | [`DepositRequest`] | [`DepositBody`] |
//! | `GET /v1/offline/revocations?from=N` | | [`RevocationsBody`] |
//! | `GET /v1/offline/books` | | [`BooksBody`] |
//! | `GET /v1/offline/evidence/{identity}` | | [`EvidenceBody`] |

use serde::{Deserialize, Serialize};

pub const KEYS_PATH: &str = "/v1/offline/keys";
pub const ROTATE_PATH: &str = "/v1/offline/rotate";
pub const REVOKE_KEY_PATH: &str = "/v1/offline/revoke-key";
pub const REGISTER_PATH: &str = "/v1/offline/register";
pub const FUND_PATH: &str = "/v1/offline/fund";
pub const FUND_FROM_CORE_PATH: &str = "/v1/offline/fund-from-core";
pub const CERTIFY_PATH: &str = "/v1/offline/certify";
pub const DEPOSIT_PATH: &str = "/v1/offline/deposit";
/// With `?from=N`: the revocations from the N-th on.
pub const REVOCATIONS_PATH: &str = "/v1/offline/revocations";
pub const BOOKS_PATH: &str = "/v1/offline/books";
/// Followed by `/{identity}` (hex).
pub const EVIDENCE_PATH: &str = "/v1/offline/evidence";

/// The error code of a refused call; the message says why.
pub const CODE_REFUSED: &str = "refused";

/// The key ring now: signed (what devices take), and plain.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeysBody {
    pub signed_ring: String,
    pub ring: String,
    pub fingerprint: String,
    /// The bridge key the core banks for (what a bridge funding names).
    pub bridge: String,
    pub current_period: u32,
    pub spend_periods: u32,
    pub deposit_periods: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevokeKeyRequest {
    /// The issuing key to revoke (hex, 32 bytes).
    pub key: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegisterRequest {
    /// The device's identity (hex, 32 bytes).
    pub identity: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RegisteredBody {
    pub registered: bool,
}

/// A funding on the operator's word (an authority started with `--allow-operator-funding`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FundRequest {
    /// The funding's id (hex, 32 bytes): a funding is issued once per id.
    pub id: String,
    pub amount: u64,
    /// The one-time keys that get the tokens.
    pub owners: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FundFromCoreRequest {
    /// The bridge funding transaction (hex of its core encoding), confirmed by the core.
    pub transaction: String,
    /// The one-time keys that get the tokens, in the order their digest was taken.
    pub owners: Vec<String>,
}

/// A funding's answer: the tokens issued, or (a funding from the core whose owners could never
/// be issued tokens) its refund.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FundedBody {
    /// The issuances (hex of each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuances: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refunded: Option<RefundBody>,
}

/// A refunded funding: why, and the payout that pays it back to its first input's owner,
/// signed by the bridge key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefundBody {
    pub reason: String,
    pub amount: u64,
    /// The core address paid (hex, 32 bytes).
    pub address: String,
    /// The bridge payout (hex of its core encoding).
    pub payout: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CertifyRequest {
    /// Key bindings (hex of each).
    pub bindings: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CertifiedBody {
    /// Key certificates (hex of each), one per binding, in order.
    pub certificates: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DepositRequest {
    pub token: String,
    pub statement: String,
    pub instruction: String,
}

/// A deposit's outcome (the same for a deposit sent again), and for a defund its payout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DepositBody {
    #[serde(flatten)]
    pub outcome: OutcomeBody,
    /// With `defunded`: the bridge payout (hex of its core encoding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<String>,
}

/// `{"outcome": "reissued", "issuances": [...]}` and so on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum OutcomeBody {
    /// Paid: these fresh tokens (hex issuances) replace it.
    Reissued { issuances: Vec<String> },
    /// Paid: the value goes back to the core.
    Defunded {
        serial: String,
        address: String,
        amount: u64,
    },
    /// Refused: another branch of the token was paid first; `debtor` owes it.
    DoubleSpent { serial: String, debtor: String, value: u64 },
    /// Refused: the owner deposited this token before with another instruction.
    AlreadyDeposited,
}

/// The query of `GET /v1/offline/revocations`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevocationsQuery {
    #[serde(default)]
    pub from: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevocationsBody {
    pub from: u64,
    /// Revoked serials (hex, 16 bytes each).
    pub serials: Vec<String>,
}

/// The authority's books: what the supply audit and `specie offline audit` read. Sums are
/// decimal strings (u128).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BooksBody {
    pub by_key: Vec<KeyBooksBody>,
    pub current_period: u32,
    pub debts: Vec<DebtBody>,
    pub defunded: String,
    pub expired: String,
    pub funded: String,
    pub outstanding: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeyBooksBody {
    pub denomination: u64,
    pub issued: String,
    pub issuing_key: String,
    pub paid: String,
    pub period: u32,
    /// `spendable`, `deposit_only`, `expired` or `revoked`.
    pub status: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DebtBody {
    pub double_spends: u64,
    pub identity: String,
    pub value: String,
}

/// The evidence against one identity, as a bundle with the key ring (what `specie offline
/// check-evidence` reads).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EvidenceBody {
    pub bundle: String,
    pub double_spends: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shapes as the API documents them; a change here is a change of the API every
    /// device's client reads.
    #[test]
    fn bodies_have_their_documented_shapes() {
        let paid = DepositBody {
            outcome: OutcomeBody::Defunded {
                serial: "01".into(),
                address: "02".into(),
                amount: 5,
            },
            payout: Some("03".into()),
        };
        let text = json!({"outcome": "defunded", "serial": "01", "address": "02", "amount": 5, "payout": "03"});
        assert_eq!(serde_json::to_value(&paid).unwrap(), text);
        assert_eq!(serde_json::from_value::<DepositBody>(text).unwrap(), paid);
        let refused = json!({"outcome": "already_deposited"});
        assert_eq!(
            serde_json::from_value::<DepositBody>(refused).unwrap().outcome,
            OutcomeBody::AlreadyDeposited
        );
        for junk in [json!({}), json!({"outcome": "paid"}), json!({"outcome": "defunded"})] {
            assert!(serde_json::from_value::<DepositBody>(junk.clone()).is_err(), "{junk}");
        }
        let funded = FundedBody {
            issuances: Some(vec!["04".into()]),
            refunded: None,
        };
        assert_eq!(serde_json::to_value(&funded).unwrap(), json!({"issuances": ["04"]}));
    }
}
