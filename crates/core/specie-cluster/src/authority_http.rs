//! The FastPay clients' HTTP API of one authority shard replica (docs/api.md, "FastPay
//! authorities"; the shapes are `specie_committee::http_api`). Requests are self-authenticating
//! (the owner's signature on an order, a quorum's on a certificate, the core's UHS behind a
//! funding), so no client certificate is asked for. Bodies are bounded; anything malformed gets
//! a 4xx naming what is wrong; a replica that does not lead answers 503 `not_leader` with the
//! leader's API, so clients retry there.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use specie_authority::{shard_of, Funding, Refusal, Reply};
use specie_codec::{Decode, DecodeError};
use specie_committee::http_api::{
    AccountBody, ConfirmedBody, ErrorBody, ErrorDetail, FundedBody, InfoBody, PendingBody, Proposal, ACCOUNTS_PATH,
    BODY_BYTES_MAX, CERTIFICATES_PATH, CODE_NOT_LEADER, CODE_OUTCOME_UNKNOWN, CODE_SETTLED, CODE_STOPPING,
    FUNDINGS_PATH, INFO_PATH, LOCKS_PATH, ORDERS_PATH, PROPOSALS_PATH, ROUND_CHANGES_PATH,
};
use specie_committee::Call;
use specie_fastpay::{
    decode_exact, AccountKey, Certificate, RoundRequest, SignedOrder, SignedRoundRequest, CERTIFICATE_BYTES_MAX,
    SIGNED_ORDER_BYTES_MAX,
};
use specie_transaction::SpecieTransaction;

use crate::authority_replica::{AuthorityCallError, AuthorityReplica};

type Shared = State<Arc<AuthorityReplica>>;

/// An error answer: a status and `{"error": {...}}`.
pub struct HttpError {
    status: StatusCode,
    /// Boxed: an error's detail is large, and every handler returns it.
    detail: Box<ErrorDetail>,
}

impl HttpError {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> HttpError {
        HttpError {
            status,
            detail: Box::new(ErrorDetail::new(code, message)),
        }
    }

    fn body(rejection: BytesRejection) -> HttpError {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return HttpError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!("the request body exceeds {BODY_BYTES_MAX} bytes"),
            );
        }
        HttpError::new(rejection.status(), "bad_body", rejection.body_text())
    }

    fn undecodable(what: &str, error: DecodeError) -> HttpError {
        HttpError::new(
            StatusCode::BAD_REQUEST,
            "bad_body",
            format!("the body is not a canonical {what}: {error}"),
        )
    }

    fn refused(refusal: &Refusal) -> HttpError {
        let status = match refusal {
            Refusal::UnknownAccount => StatusCode::NOT_FOUND,
            Refusal::WrongShard { .. } => StatusCode::MISDIRECTED_REQUEST,
            Refusal::Busy | Refusal::ChannelFull { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::CONFLICT,
        };
        HttpError {
            status,
            detail: Box::new(ErrorDetail::refused(refusal)),
        }
    }

    /// The slot is settled: its final certificate, for the client to use instead.
    fn settled(certificate: &Certificate) -> HttpError {
        let mut bytes = vec![];
        certificate.encode_to(&mut bytes);
        let mut detail = ErrorDetail::new(CODE_SETTLED, "the account's slot is settled: its final certificate");
        detail.certificate = Some(hex::encode(bytes));
        HttpError {
            status: StatusCode::CONFLICT,
            detail: Box::new(detail),
        }
    }

    /// The role answered a call with the wrong kind of reply: a bug.
    fn wrong_reply(reply: &Reply) -> HttpError {
        tracing::error!(?reply, "the authority answered with the wrong kind of reply");
        HttpError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the authority answered with the wrong kind of reply",
        )
    }

    fn call(replica: &AuthorityReplica, error: AuthorityCallError) -> HttpError {
        match error {
            AuthorityCallError::NotLeader(leader) => {
                let mut detail = ErrorDetail::new(
                    CODE_NOT_LEADER,
                    "this replica does not lead its shard group: ask the leader",
                );
                detail.leader = leader;
                detail.leader_http = replica.http_of(leader).map(|address| address.to_string());
                HttpError {
                    status: StatusCode::SERVICE_UNAVAILABLE,
                    detail: Box::new(detail),
                }
            }
            AuthorityCallError::OutcomeUnknown => HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                CODE_OUTCOME_UNKNOWN,
                "the replica lost the lead meanwhile: send the same request again (it is idempotent)",
            ),
            AuthorityCallError::Stopping => HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                CODE_STOPPING,
                "the replica is stopping",
            ),
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: *self.detail })).into_response()
    }
}

/// The API's routes, on `replica`.
pub fn router(replica: Arc<AuthorityReplica>) -> Router {
    Router::new()
        .route(ORDERS_PATH, post(order))
        .route(CERTIFICATES_PATH, post(certificate))
        .route(LOCKS_PATH, post(lock))
        .route(ROUND_CHANGES_PATH, post(round_change))
        .route(
            PROPOSALS_PATH,
            post(proposal).layer(DefaultBodyLimit::max(Proposal::BYTES_MAX)),
        )
        .route(&format!("{ACCOUNTS_PATH}/{{account}}"), get(account))
        .route(FUNDINGS_PATH, post(funding))
        .route(INFO_PATH, get(info))
        .fallback(|| async { HttpError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint; see docs/api.md") })
        .method_not_allowed_fallback(|| async {
            HttpError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "wrong HTTP method for this endpoint; see docs/api.md",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(replica)
}

/// The answer to a call that yields a vote or a signed round change as its canonical bytes.
fn signed_answer(replica: &AuthorityReplica, answer: Result<Reply, AuthorityCallError>) -> Result<Response, HttpError> {
    let mut bytes = vec![];
    match answer.map_err(|error| HttpError::call(replica, error))? {
        Reply::Voted(vote) => vote.encode_to(&mut bytes),
        Reply::RoundChanged(change) => change.encode_to(&mut bytes),
        Reply::Final(certificate) => return Err(HttpError::settled(&certificate)),
        Reply::Refused(refusal) => return Err(HttpError::refused(&refusal)),
        other => return Err(HttpError::wrong_reply(&other)),
    }
    Ok(([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

async fn order(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let order = decode_exact(
        "transfer order",
        &bytes,
        SIGNED_ORDER_BYTES_MAX,
        SignedOrder::decode_from,
    )
    .map_err(|error| HttpError::undecodable("signed transfer order", error))?;
    signed_answer(&replica, replica.call(Call::Transfer(order)).await)
}

async fn lock(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let certificate = decode_exact("lock", &bytes, CERTIFICATE_BYTES_MAX, Certificate::decode_from)
        .map_err(|error| HttpError::undecodable("certificate", error))?;
    signed_answer(&replica, replica.call(Call::Lock(certificate)).await)
}

async fn round_change(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let request = decode_exact(
        "round request",
        &bytes,
        RoundRequest::SIGNED_BYTES,
        SignedRoundRequest::decode_from,
    )
    .map_err(|error| HttpError::undecodable("signed round request", error))?;
    signed_answer(&replica, replica.call(Call::RoundChange(request)).await)
}

async fn proposal(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let proposal = Proposal::decode(&bytes).map_err(|error| HttpError::undecodable("proposal", error))?;
    let call = Call::Propose {
        order: proposal.order,
        round: proposal.round,
        justification: Box::new(proposal.justification),
    };
    signed_answer(&replica, replica.call(call).await)
}

async fn certificate(
    State(replica): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ConfirmedBody>, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let certificate = decode_exact("certificate", &bytes, CERTIFICATE_BYTES_MAX, Certificate::decode_from)
        .map_err(|error| HttpError::undecodable("certificate", error))?;
    match replica
        .call(Call::Confirm(certificate))
        .await
        .map_err(|error| HttpError::call(&replica, error))?
    {
        Reply::Confirmed { sender, sequence } => Ok(Json(ConfirmedBody {
            sender: hex::encode(sender.0),
            sequence,
        })),
        Reply::Final(certificate) => Err(HttpError::settled(&certificate)),
        Reply::Refused(refusal) => Err(HttpError::refused(&refusal)),
        other => Err(HttpError::wrong_reply(&other)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountQuery {
    from_sequence: Option<u64>,
}

async fn account(
    State(replica): Shared,
    Path(account): Path<String>,
    query: Result<Query<AccountQuery>, QueryRejection>,
) -> Result<Json<AccountBody>, HttpError> {
    let Query(query) =
        query.map_err(|rejection| HttpError::new(StatusCode::BAD_REQUEST, "bad_query", rejection.body_text()))?;
    let key = hex::decode(&account)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| {
            HttpError::new(
                StatusCode::BAD_REQUEST,
                "bad_account",
                "the account is not a 32-byte Ed25519 public key in hex",
            )
        })?;
    let call = Call::Account {
        account: AccountKey(key),
        from_sequence: query.from_sequence.unwrap_or(0),
    };
    match replica
        .call(call)
        .await
        .map_err(|error| HttpError::call(&replica, error))?
    {
        Reply::Account(state) => {
            let encoded = |encode: &dyn Fn(&mut Vec<u8>)| {
                let mut bytes = vec![];
                encode(&mut bytes);
                hex::encode(bytes)
            };
            Ok(Json(AccountBody {
                balance: state.balance,
                next_sequence: state.next_sequence,
                pending: state.pending.as_ref().map(|(order, vote)| PendingBody {
                    order: encoded(&|out| order.encode_to(out)),
                    vote: encoded(&|out| vote.encode_to(out)),
                }),
                confirmed: state
                    .confirmed
                    .iter()
                    .map(|certificate| encoded(&|out| certificate.encode_to(out)))
                    .collect(),
            }))
        }
        Reply::Refused(refusal) => Err(HttpError::refused(&refusal)),
        other => Err(HttpError::wrong_reply(&other)),
    }
}

/// A funding is credited only once this replica has found its marker in the online core's UHS
/// itself; the body only says which funding to look for.
async fn funding(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Json<FundedBody>, HttpError> {
    let bytes = body.map_err(HttpError::body)?;
    let transaction =
        SpecieTransaction::decode_exact(&bytes).map_err(|error| HttpError::undecodable("transaction", error))?;
    let SpecieTransaction::FastpayFunding(funding) = transaction else {
        return Err(HttpError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_a_funding",
            "the transaction is not a FastPay funding (kind 0x03)",
        ));
    };
    let claim = funding.claim();
    if claim.committee_id != replica.committee.id() {
        return Err(HttpError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "wrong_committee",
            format!(
                "the funding is for committee {}, this authority is in {}",
                hex::encode(claim.committee_id),
                hex::encode(replica.committee.id())
            ),
        ));
    }
    let owner = shard_of(&claim.account, replica.group.shards);
    if owner != replica.place.shard {
        return Err(HttpError::refused(&Refusal::WrongShard { owner }));
    }
    if !replica.hosted.is_leader() {
        let leader = replica.hosted.replica.leader();
        return Err(HttpError::call(&replica, AuthorityCallError::NotLeader(leader)));
    }
    match replica.in_core(claim.marker).await {
        Ok(true) => {}
        Ok(false) => {
            return Err(HttpError::new(
                StatusCode::CONFLICT,
                "funding_unconfirmed",
                "the funding's marker is not in the online core's UHS: submit the funding to the core first, \
                 and send it here once it is confirmed",
            ))
        }
        Err(error) => {
            return Err(HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "core_unavailable",
                format!("cannot ask the online core: {error}"),
            ))
        }
    }
    let funding = Funding {
        id: claim.marker.0,
        account: claim.account,
        amount: claim.amount,
    };
    match replica
        .call(Call::Fund(funding))
        .await
        .map_err(|error| HttpError::call(&replica, error))?
    {
        Reply::Funded { id } => Ok(Json(FundedBody {
            funded: hex::encode(id),
            account: hex::encode(claim.account.0),
            amount: claim.amount,
        })),
        Reply::Refused(refusal) => Err(HttpError::refused(&refusal)),
        other => Err(HttpError::wrong_reply(&other)),
    }
}

async fn info(State(replica): Shared) -> Json<InfoBody> {
    Json(InfoBody {
        authority: replica.place.authority,
        shard: replica.place.shard,
        shards: replica.group.shards,
        replica: replica.hosted.replica.id(),
        leader: replica.hosted.is_leader(),
        committee_id: hex::encode(replica.committee.id()),
        epoch: replica.committee.epoch(),
    })
}
