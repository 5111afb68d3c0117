//! The exchange's HTTP/JSON API as types: every path, and every request and answer body, shared
//! by the server ([`crate::router`]) and the client ([`crate::client`]) so the two cannot drift.
//! Binary values are hex of their canonical encodings; amounts are JSON numbers; errors are the
//! one error body of `specie_service`.
//!
//! | endpoint | request | answer |
//! |---|---|---|
//! | `GET /v1/exchange` | | [`SummaryBody`] |
//! | `POST /v1/exchange/transactions` | [`TransactionsRequest`] | [`FatesBody`], once the transactions are in a durable block |
//! | `GET /v1/exchange/accounts/{id}` | | [`AccountBody`], or 404 `no_such_account` |
//! | `GET /v1/exchange/accounts/{id}/offers` | | [`OffersBody`] |
//! | `GET /v1/exchange/blocks/last` | | [`LastBlockBody`] |
//! | `POST /v1/exchange/deposits` | [`DepositRequest`] | [`DepositBody`]: a confirmed core funding, credited once (the exchange asks the core itself), or refunded to its first input's owner if it can never be credited |
//! | `GET /v1/exchange/withdrawals/{account}/{sequence}` | | [`WithdrawalBody`], or 404 `no_such_withdrawal` |
//! | `GET /v1/exchange/supply` | | [`ExchangeSupplyBody`]: per asset, what the exchange holds (`specie audit supply`) |

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub const SUMMARY_PATH: &str = "/v1/exchange";
pub const TRANSACTIONS_PATH: &str = "/v1/exchange/transactions";
/// Followed by `/{id}`, and `/{id}/offers` for the account's resting offers.
pub const ACCOUNTS_PATH: &str = "/v1/exchange/accounts";
pub const LAST_BLOCK_PATH: &str = "/v1/exchange/blocks/last";
pub const DEPOSITS_PATH: &str = "/v1/exchange/deposits";
/// Followed by `/{account}/{sequence}`.
pub const WITHDRAWALS_PATH: &str = "/v1/exchange/withdrawals";
pub const SUPPLY_PATH: &str = "/v1/exchange/supply";

/// The error code of an account the exchange does not have (yet).
pub const CODE_NO_SUCH_ACCOUNT: &str = "no_such_account";
/// The error code of a withdrawal the exchange did not execute.
pub const CODE_NO_SUCH_WITHDRAWAL: &str = "no_such_withdrawal";
/// The error code of a refused transaction or deposit; the message says why.
pub const CODE_REFUSED: &str = "refused";

/// `GET /v1/exchange/supply`: per asset, what came in from its core, went back, and where the
/// rest is, after block `height`. Amounts are decimal strings (they may pass 2^64).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ExchangeSupplyBody {
    /// The bridge key its cores know it by (hex).
    pub bridge: String,
    pub height: u64,
    pub assets: Vec<AssetSupplyBody>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AssetSupplyBody {
    pub name: String,
    pub deposited: String,
    pub withdrawn: String,
    /// Unlocked balances over every account.
    pub balances: String,
    /// In resting offers.
    pub locked: String,
    /// The auctioneer's commission and rounding, burned.
    pub burned: String,
}

impl ExchangeSupplyBody {
    /// The body of `holdings` (per asset, in asset order, named by `names`).
    pub fn new(bridge: [u8; 32], height: u64, names: &[String], holdings: &[specie_exchange::AssetHoldings]) -> Self {
        ExchangeSupplyBody {
            bridge: hex::encode(bridge),
            height,
            assets: names
                .iter()
                .zip(holdings)
                .map(|(name, held)| AssetSupplyBody {
                    name: name.clone(),
                    deposited: held.totals.deposited.to_string(),
                    withdrawn: held.totals.withdrawn.to_string(),
                    balances: held.balances.to_string(),
                    locked: held.locked.to_string(),
                    burned: held.totals.burned.to_string(),
                })
                .collect(),
        }
    }
}

/// `GET /v1/exchange`: who the exchange is and where it stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SummaryBody {
    /// The exchange's identity (hex, 32 bytes).
    pub exchange: String,
    /// The bridge key that signs its core payouts (hex, 32 bytes).
    pub bridge: String,
    /// The assets' names, in asset order.
    pub assets: Vec<String>,
    pub height: u64,
    /// The hash of the exchange's whole state after `height` (hex, 32 bytes).
    pub state_hash: String,
}

/// `POST /v1/exchange/transactions`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TransactionsRequest {
    /// Signed exchange transactions (hex of each one's canonical encoding).
    pub transactions: Vec<String>,
}

/// The answer to [`TransactionsRequest`]: one fate per transaction, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FatesBody {
    pub fates: Vec<FateBody>,
}

/// `{"included": height}` or `{"refused": why}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FateBody {
    Included(u64),
    Refused(String),
}

/// `GET /v1/exchange/accounts/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AccountBody {
    /// The account's key (hex, 32 bytes).
    pub key: String,
    pub last_sequence: u64,
    /// Unlocked balance per asset, by name.
    pub balances: BTreeMap<String, u64>,
}

/// `GET /v1/exchange/accounts/{id}/offers`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OffersBody {
    pub offers: Vec<OfferBody>,
}

/// One resting offer; its id is the sequence number of the transaction that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct OfferBody {
    pub sell: String,
    pub buy: String,
    /// The limit price, Q32.32.
    pub limit: u64,
    pub sequence: u64,
    /// What is left to sell.
    pub amount: u64,
}

/// `GET /v1/exchange/blocks/last`: height 0 and nothing else before the first block.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LastBlockBody {
    pub height: u64,
    #[serde(default)]
    pub transactions: u64,
    /// Each asset's valuation, in asset order (a pair trades at the ratio of its two).
    #[serde(default)]
    pub prices: Vec<u64>,
    /// Per pair that traded: the amount sold.
    #[serde(default)]
    pub trades: Vec<TradeBody>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TradeBody {
    pub sell: String,
    pub buy: String,
    pub amount: u64,
}

/// `POST /v1/exchange/deposits`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DepositRequest {
    pub asset: String,
    /// The core funding (hex of its core encoding), confirmed by the asset's core.
    pub transaction: String,
    pub account: u64,
    /// The key of the account to credit (hex, 32 bytes).
    pub key: String,
}

/// The answer to [`DepositRequest`]: credited, or refunded instead.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DepositBody {
    pub credited: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refunded: Option<RefundBody>,
}

/// A funding refunded: why, the withdrawal it became (fetched again like any other), and its
/// payout for the core, signed by the bridge key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RefundBody {
    pub reason: String,
    pub account: u64,
    pub sequence: u64,
    pub amount: u64,
    /// The core address refunded (hex, 32 bytes).
    pub address: String,
    /// The bridge payout (hex of its core encoding).
    pub payout: String,
}

/// `GET /v1/exchange/withdrawals/{account}/{sequence}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct WithdrawalBody {
    /// The bridge payout (hex of its core encoding), signed by the bridge key.
    pub payout: String,
    pub amount: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shapes as the API documents them (docs/exchange.md); a change here is a change of the
    /// API every trader's client reads.
    #[test]
    fn bodies_have_their_documented_shapes() {
        let fates = FatesBody {
            fates: vec![FateBody::Included(3), FateBody::Refused("no such payee".into())],
        };
        assert_eq!(
            serde_json::to_value(&fates).unwrap(),
            json!({"fates": [{"included": 3}, {"refused": "no such payee"}]})
        );
        assert_eq!(
            serde_json::from_value::<LastBlockBody>(json!({"height": 0})).unwrap(),
            LastBlockBody::default()
        );
        let credited = DepositBody {
            credited: true,
            refunded: None,
        };
        assert_eq!(serde_json::to_value(&credited).unwrap(), json!({"credited": true}));
        let account = AccountBody {
            key: "00".into(),
            last_sequence: 2,
            balances: [("usd".to_string(), 5), ("eur".to_string(), 7)].into(),
        };
        assert_eq!(
            serde_json::to_string(&account).unwrap(),
            r#"{"key":"00","last_sequence":2,"balances":{"eur":7,"usd":5}}"#
        );
    }
}
