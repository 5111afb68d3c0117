//! The exchange's HTTP/JSON API: the routes of [`crate::http_api`]'s endpoints. Each binary
//! value is length-checked before it is decoded with its bounded decoder.

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use specie_exchange::{
    ExchangeInput, ExchangeReply, Fate, SignedTransaction, Withdrawal, SIGNED_TRANSACTION_BYTES_MAX,
};

use std::sync::Arc;

use specie_service::{ApiDoc, ApiError, NotAFunding, Param};

use crate::core_bridge::{bridge_payout, deposit_from_core, refund_address};
use crate::http_api::{
    AccountBody, DepositBody, DepositRequest, ExchangeSupplyBody, FateBody, FatesBody, LastBlockBody, OfferBody,
    OffersBody, RefundBody, SummaryBody, TradeBody, TransactionsRequest, WithdrawalBody, ACCOUNTS_PATH,
    CODE_NO_SUCH_ACCOUNT, CODE_NO_SUCH_WITHDRAWAL, CODE_REFUSED, DEPOSITS_PATH, LAST_BLOCK_PATH, SUMMARY_PATH,
    SUPPLY_PATH, TRANSACTIONS_PATH, WITHDRAWALS_PATH,
};
use crate::service::ExchangeService;

/// The exchange the API serves, however hosted.
type Exchange = Arc<dyn ExchangeService>;

/// Most transactions one request carries (the role's submission limit).
const TRANSACTIONS_PER_REQUEST_MAX: usize = 10_000;
const BODY_BYTES_MAX: usize = TRANSACTIONS_PER_REQUEST_MAX * (2 * SIGNED_TRANSACTION_BYTES_MAX + 4) + 4_096;

/// The exchange's API as an OpenAPI document: what `GET /openapi.json` serves.
pub fn openapi() -> ApiDoc {
    let account = format!("{ACCOUNTS_PATH}/{{id}}");
    ApiDoc::new(
        "specie exchange",
        "The SPEEDEX exchange between specie's currencies (docs/exchange.md).",
    )
    .path_parameter("id", Param::Number)
    .path_parameter("account", Param::Number)
    .path_parameter("sequence", Param::Number)
    .get::<SummaryBody>(SUMMARY_PATH, "The exchange: identity, bridge key, assets, height")
    .post::<TransactionsRequest, FatesBody>(TRANSACTIONS_PATH, "Signed transactions for the next blocks")
    .get::<AccountBody>(&account, "An account's balances and sequence")
    .get::<OffersBody>(&format!("{account}/offers"), "An account's resting offers")
    .get::<LastBlockBody>(LAST_BLOCK_PATH, "The last block: prices, trades, state hash")
    .post::<DepositRequest, DepositBody>(
        DEPOSITS_PATH,
        "Hand in a confirmed core funding: credited once, or refunded",
    )
    .get::<WithdrawalBody>(
        &format!("{WITHDRAWALS_PATH}/{{account}}/{{sequence}}"),
        "A withdrawal and its payout",
    )
    .get::<ExchangeSupplyBody>(SUPPLY_PATH, "Per asset, what the exchange holds (the supply report's)")
}

pub fn router(exchange: Arc<dyn ExchangeService>) -> Router {
    Router::new()
        .route(SUMMARY_PATH, get(summary))
        .route(TRANSACTIONS_PATH, post(transactions))
        .route(&format!("{ACCOUNTS_PATH}/{{id}}"), get(account))
        .route(&format!("{ACCOUNTS_PATH}/{{id}}/offers"), get(offers))
        .route(LAST_BLOCK_PATH, get(last_block))
        .route(DEPOSITS_PATH, post(deposit))
        .route(&format!("{WITHDRAWALS_PATH}/{{account}}/{{sequence}}"), get(withdrawal))
        .route(SUPPLY_PATH, get(supply))
        .merge(openapi().router())
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint; see docs/exchange.md",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(exchange)
}

async fn ask(
    exchange: &Exchange,
    input: impl FnOnce(u64) -> ExchangeInput + Send + 'static,
) -> Result<ExchangeReply, ApiError> {
    match exchange.call(Box::new(input)).await.map_err(ApiError::from)? {
        ExchangeReply::Dropped => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "dropped",
            "the exchange lost the lead or stopped before the transactions were in a block: send them again",
        )),
        ExchangeReply::Busy {
            mempool_transactions_max,
        } => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!("{mempool_transactions_max} transactions wait for a block already: send them again shortly"),
        )),
        reply => Ok(reply),
    }
}

fn unexpected(reply: ExchangeReply) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("unexpected answer {reply:?}"),
    )
}

fn asset_name(names: &[String], asset: u16) -> String {
    names.get(usize::from(asset)).map_or("?", String::as_str).to_string()
}

async fn summary(State(exchange): State<Exchange>) -> Result<Json<SummaryBody>, ApiError> {
    let ExchangeReply::Summary { height, state_hash } =
        ask(&exchange, |ticket| ExchangeInput::Summary { ticket }).await?
    else {
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "no summary",
        ));
    };
    Ok(Json(SummaryBody {
        exchange: hex::encode(exchange.id()),
        bridge: hex::encode(exchange.bridge().verifying_key().to_bytes()),
        assets: exchange.asset_names(),
        height,
        state_hash: hex::encode(state_hash),
    }))
}

async fn supply(State(exchange): State<Exchange>) -> Result<Json<ExchangeSupplyBody>, ApiError> {
    match ask(&exchange, |ticket| ExchangeInput::Holdings { ticket }).await? {
        ExchangeReply::Holdings { height, holdings } => {
            let bridge = exchange.bridge().verifying_key().to_bytes();
            Ok(Json(ExchangeSupplyBody::new(
                bridge,
                height,
                &exchange.asset_names(),
                &holdings,
            )))
        }
        other => Err(unexpected(other)),
    }
}

async fn transactions(
    State(exchange): State<Exchange>,
    Json(request): Json<TransactionsRequest>,
) -> Result<Json<FatesBody>, ApiError> {
    if request.transactions.len() > TRANSACTIONS_PER_REQUEST_MAX {
        return Err(ApiError::bad_request(format!(
            "more than {TRANSACTIONS_PER_REQUEST_MAX} transactions"
        )));
    }
    let transactions = request
        .transactions
        .iter()
        .enumerate()
        .map(|(index, text)| {
            if text.len() > 2 * SIGNED_TRANSACTION_BYTES_MAX {
                return Err(ApiError::bad_request(format!("transaction {index}: too long")));
            }
            let bytes =
                hex::decode(text).map_err(|e| ApiError::bad_request(format!("transaction {index}: not hex: {e}")))?;
            specie_codec::decode_bounded(
                "transaction",
                &bytes,
                SIGNED_TRANSACTION_BYTES_MAX,
                SignedTransaction::decode_from,
            )
            .map_err(|e| ApiError::bad_request(format!("transaction {index}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match ask(&exchange, move |ticket| ExchangeInput::Submit { ticket, transactions }).await? {
        ExchangeReply::Settled(fates) => {
            let fates = fates
                .iter()
                .map(|fate| match fate {
                    Fate::Included { height } => FateBody::Included(*height),
                    Fate::Refused(refusal) => FateBody::Refused(refusal.to_string()),
                })
                .collect();
            Ok(Json(FatesBody { fates }))
        }
        other => Err(unexpected(other)),
    }
}

async fn account(State(exchange): State<Exchange>, Path(id): Path<u64>) -> Result<Json<AccountBody>, ApiError> {
    match ask(&exchange, move |ticket| ExchangeInput::Account { ticket, id }).await? {
        ExchangeReply::Account(Some(account)) => {
            let balances = exchange.asset_names().into_iter().zip(account.balances).collect();
            Ok(Json(AccountBody {
                key: hex::encode(account.key),
                last_sequence: account.last_sequence,
                balances,
            }))
        }
        ExchangeReply::Account(None) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            CODE_NO_SUCH_ACCOUNT,
            "no such account",
        )),
        other => Err(unexpected(other)),
    }
}

async fn offers(State(exchange): State<Exchange>, Path(id): Path<u64>) -> Result<Json<OffersBody>, ApiError> {
    match ask(&exchange, move |ticket| ExchangeInput::Offers { ticket, account: id }).await? {
        ExchangeReply::Offers(offers) => {
            let names = exchange.asset_names();
            let name = |asset: u16| asset_name(&names, asset);
            let offers = offers
                .iter()
                .map(|((sell, buy), key, amount)| OfferBody {
                    sell: name(*sell),
                    buy: name(*buy),
                    limit: key.limit.0,
                    sequence: key.sequence,
                    amount: *amount,
                })
                .collect();
            Ok(Json(OffersBody { offers }))
        }
        other => Err(unexpected(other)),
    }
}

async fn last_block(State(exchange): State<Exchange>) -> Result<Json<LastBlockBody>, ApiError> {
    match ask(&exchange, |ticket| ExchangeInput::LastBlock { ticket }).await? {
        ExchangeReply::LastBlock(None) => Ok(Json(LastBlockBody::default())),
        ExchangeReply::LastBlock(Some(block)) => {
            let names = exchange.asset_names();
            let name = |asset: u16| asset_name(&names, asset);
            let trades = block
                .clearing
                .trades
                .iter()
                .map(|t| TradeBody {
                    sell: name(t.sell),
                    buy: name(t.buy),
                    amount: t.amount,
                })
                .collect();
            Ok(Json(LastBlockBody {
                height: block.height,
                transactions: block.transactions.len() as u64,
                prices: block.clearing.prices.iter().map(|p| p.0).collect(),
                trades,
            }))
        }
        other => Err(unexpected(other)),
    }
}

/// A core funding to the exchange, credited once its marker is found in its core's UHS (asked
/// here, never taken from the caller), to exactly the account and key it commits to.
async fn deposit(
    State(exchange): State<Exchange>,
    Json(request): Json<DepositRequest>,
) -> Result<Json<DepositBody>, ApiError> {
    let Some(asset) = exchange.asset_names().iter().position(|name| *name == request.asset) else {
        return Err(ApiError::bad_request(format!(
            "asset: the exchange trades no {}",
            request.asset
        )));
    };
    let core = exchange.core_format();
    if request.transaction.len() > 2 * core.transaction_bytes_max() {
        return Err(ApiError::bad_request("transaction: too long"));
    }
    let bytes =
        hex::decode(&request.transaction).map_err(|e| ApiError::bad_request(format!("transaction: not hex: {e}")))?;
    let funding = core.bridge_funding(&bytes).map_err(|error| match error {
        NotAFunding::Undecodable { reason } => ApiError::bad_request(format!("transaction: {reason}")),
        NotAFunding::OtherKind { .. } => ApiError::bad_request("transaction: not a funding (kind 0x05)"),
    })?;
    let key: [u8; 32] = hex::decode(&request.key)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .ok_or_else(|| ApiError::bad_request("key: not 32 bytes of hex"))?;
    let bridge = exchange.bridge().verifying_key().to_bytes();
    let asset_index = u16::try_from(asset).expect("an exchange trades at most 64 assets");
    let deposit = deposit_from_core(&funding, &bridge, asset_index, request.account, key)
        .map_err(|refusal| ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, CODE_REFUSED, refusal.to_string()))?;
    let refund_to =
        Some(refund_address(&funding).map_err(|refusal| ApiError::bad_request(format!("transaction: {refusal}")))?);
    let marker = deposit.marker;
    specie_service::funding_confirmed(exchange.in_core(asset, marker).await)?;
    let input = move |ticket| ExchangeInput::Deposit {
        ticket,
        deposit,
        refund_to,
    };
    match ask(&exchange, input).await? {
        ExchangeReply::Deposited => Ok(Json(DepositBody {
            credited: true,
            refunded: None,
        })),
        ExchangeReply::Refunded { withdrawal, reason } => {
            let reason = reason.map_or_else(|| "refunded earlier".to_string(), |reason| reason.to_string());
            Ok(Json(DepositBody {
                credited: false,
                refunded: Some(refund_body(&exchange, &withdrawal, reason)),
            }))
        }
        ExchangeReply::DepositRefused(refusal) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            CODE_REFUSED,
            refusal.to_string(),
        )),
        other => Err(unexpected(other)),
    }
}

/// A refunded funding, as the deposit's answer gives it: why, the withdrawal it became (fetched
/// again like any other), and its payout for the core, signed by the bridge key.
fn refund_body(exchange: &Exchange, withdrawal: &Withdrawal, reason: String) -> RefundBody {
    let payout = bridge_payout(exchange.core_format(), withdrawal, exchange.bridge());
    RefundBody {
        reason,
        account: withdrawal.account,
        sequence: withdrawal.sequence,
        amount: withdrawal.amount,
        address: hex::encode(withdrawal.address),
        payout: hex::encode(payout),
    }
}

async fn withdrawal(
    State(exchange): State<Exchange>,
    Path((account, sequence)): Path<(u64, u64)>,
) -> Result<Json<WithdrawalBody>, ApiError> {
    match ask(&exchange, move |ticket| ExchangeInput::Withdrawal {
        ticket,
        account,
        sequence,
    })
    .await?
    {
        ExchangeReply::Withdrawal(Some(withdrawal)) => {
            let payout = bridge_payout(exchange.core_format(), &withdrawal, exchange.bridge());
            Ok(Json(WithdrawalBody {
                payout: hex::encode(payout),
                amount: withdrawal.amount,
            }))
        }
        ExchangeReply::Withdrawal(None) => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            CODE_NO_SUCH_WITHDRAWAL,
            "no such withdrawal",
        )),
        other => Err(unexpected(other)),
    }
}
