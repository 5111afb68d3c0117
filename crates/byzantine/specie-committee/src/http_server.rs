//! The FastPay clients' HTTP API of one authority shard, however it is hosted (docs/api.md,
//! "FastPay authorities"; the shapes are [`crate::http_api`]): a replica of a cluster's Raft
//! group (`specie-cluster`), or a shard of a committee embedded in one process
//! ([`crate::standalone`]). Requests are self-authenticating (the owner's signature on an order, a
//! quorum's on a certificate, the core's UHS behind a funding), so no client certificate is asked
//! for. Bodies are bounded; anything malformed gets a 4xx naming what is wrong; a replica that
//! does not lead answers 503 `not_leader` with the leader's API, so clients retry there.

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
use specie_authority::ShardIndex;
use specie_authority::{shard_of, Funding, Refusal, Reply};
use specie_codec::Decode;
use specie_codec::DecodeError;
use specie_fastpay::{
    decode_exact, AccountKey, AuthorityIndex, Certificate, Committee, CommitteeRecord, RoundRequest, SignedOrder,
    SignedRoundRequest, CERTIFICATE_BYTES_MAX, COMMITTEE_RECORD_BYTES_MAX, SIGNED_ORDER_BYTES_MAX,
};
use specie_fastpay_primary::FastpayFunding;
use specie_service::{ApiDoc, ApiError, CoreCheckError, Param, Pending};

use crate::http_api::{
    refusal_name, refused_detail, AccountBody, ConfirmedBody, EpochBody, EpochsBody, ErrorDetail, FundedBody, InfoBody,
    PendingBody, Proposal, RefusalFields, ShardBooksBody, ACCOUNTS_PATH, BODY_BYTES_MAX, BOOKS_PATH, CERTIFICATES_PATH,
    CODE_NOT_LEADER, CODE_OUTCOME_UNKNOWN, CODE_REFUSED, CODE_SETTLED, CODE_STOPPING, EPOCHS_PATH, FUNDINGS_PATH,
    INFO_PATH, LOCKS_PATH, ORDERS_PATH, PROPOSALS_PATH, ROUND_CHANGES_PATH,
};
use crate::Call;

/// Why a call got no answer from the authority shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// This replica does not lead its shard group: the leader's id and HTTP API, if known.
    NotLeader {
        leader: Option<u64>,
        leader_http: Option<String>,
    },
    /// The lead was lost while the call was in flight: the log decides; every call is idempotent.
    OutcomeUnknown,
    Stopping,
}

/// Which shard of which authority a service is, and whether it answers now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardPlace {
    pub authority: AuthorityIndex,
    pub shard: ShardIndex,
    pub shards: u32,
    /// The replica's id in its group (1 for a shard with no replicas).
    pub replica: u64,
}

/// One authority shard as the API reaches it.
pub trait AuthorityService: Send + Sync + 'static {
    fn committee(&self) -> &Committee;
    fn place(&self) -> ShardPlace;
    /// Ok to take calls now, or why not (a follower names its leader).
    fn ready(&self) -> Result<(), Unavailable>;
    /// The role's reply to `call`, once it is durable.
    fn call(&self, call: Call) -> Pending<'_, Result<Reply, Unavailable>>;
    /// Whether the UHS id `marker` is in the online core's UHS, asked of the core itself.
    fn in_core(&self, marker: [u8; 32]) -> Pending<'_, Result<bool, CoreCheckError>>;
}

type Shared = State<Arc<dyn AuthorityService>>;

/// An error answer: a status and the one error body, with FastPay's fields.
pub type HttpError = ApiError<RefusalFields>;

fn http_error(status: StatusCode, code: &str, message: impl Into<String>) -> HttpError {
    ApiError::of(status, ErrorDetail::new(code, message))
}

fn body_error(rejection: BytesRejection) -> HttpError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return http_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            format!("the request body exceeds {BODY_BYTES_MAX} bytes"),
        );
    }
    http_error(rejection.status(), "bad_body", rejection.body_text())
}

fn undecodable(what: &str, error: DecodeError) -> HttpError {
    http_error(
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
    ApiError::of(status, refused_detail(refusal))
}

/// The slot is settled: its final certificate, for the client to use instead.
fn settled(certificate: &Certificate) -> HttpError {
    let mut bytes = vec![];
    certificate.encode_to(&mut bytes);
    let mut detail = ErrorDetail::new(CODE_SETTLED, "the account's slot is settled: its final certificate");
    detail.more.certificate = Some(hex::encode(bytes));
    ApiError::of(StatusCode::CONFLICT, detail)
}

/// The role answered a call with the wrong kind of reply: a bug.
fn wrong_reply(reply: &Reply) -> HttpError {
    tracing::error!(?reply, "the authority answered with the wrong kind of reply");
    http_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the authority answered with the wrong kind of reply",
    )
}

/// The API's code for a call that got no answer.
fn unavailable_code(error: &Unavailable) -> &'static str {
    match error {
        Unavailable::NotLeader { .. } => CODE_NOT_LEADER,
        Unavailable::OutcomeUnknown => CODE_OUTCOME_UNKNOWN,
        Unavailable::Stopping => CODE_STOPPING,
    }
}

/// Hands `call` (named `name` in the metrics) to the role, and records how long its answer took
/// and, if it was not granted, why (`specie_metrics::fastpay`).
async fn timed(replica: &dyn AuthorityService, name: &'static str, call: Call) -> Result<Reply, Unavailable> {
    let started = std::time::Instant::now();
    let answer = replica.call(call).await;
    let refusal;
    let refused = match &answer {
        Ok(Reply::Refused(why)) => {
            refusal = refusal_name(why);
            Some((CODE_REFUSED, refusal.as_str()))
        }
        Ok(Reply::Final(_)) => Some((CODE_SETTLED, "")),
        Ok(_) => None,
        Err(error) => Some((unavailable_code(error), "")),
    };
    specie_metrics::fastpay::answered(name, refused, started.elapsed());
    answer
}

fn unavailable(error: Unavailable) -> HttpError {
    match error {
        Unavailable::NotLeader { leader, leader_http } => {
            let mut detail = ErrorDetail::new(
                CODE_NOT_LEADER,
                "this replica does not lead its shard group: ask the leader",
            );
            detail.more.leader = leader;
            detail.leader_http = leader_http;
            ApiError::of(StatusCode::SERVICE_UNAVAILABLE, detail)
        }
        Unavailable::OutcomeUnknown => http_error(
            StatusCode::SERVICE_UNAVAILABLE,
            CODE_OUTCOME_UNKNOWN,
            "the replica lost the lead meanwhile: send the same request again (it is idempotent)",
        ),
        Unavailable::Stopping => http_error(
            StatusCode::SERVICE_UNAVAILABLE,
            CODE_STOPPING,
            "the replica is stopping",
        ),
    }
}

/// One authority shard's API as an OpenAPI document, served at the root (a cluster's
/// authority replica).
pub fn openapi() -> ApiDoc {
    describe(
        ApiDoc::new(
            "specie FastPay authority shard",
            "One shard of one FastPay authority (docs/byzantine-mode.md, docs/api.md). Orders, \
             certificates, locks, round changes, proposals and fundings travel as their canonical encodings.",
        ),
        "",
    )
}

/// `doc` with one authority shard's operations under `prefix` (empty at the root).
pub fn describe(doc: ApiDoc, prefix: &str) -> ApiDoc {
    let at = |path: &str| format!("{prefix}{path}");
    doc.path_parameter("account", Param::Hex32)
        .post_bytes_for_bytes(&at(ORDERS_PATH), "Sign a transfer order: this authority's vote")
        .post_bytes::<ConfirmedBody>(&at(CERTIFICATES_PATH), "Confirm a certificate")
        .post_bytes_for_bytes(
            &at(LOCKS_PATH),
            "Vote on a lock (a quorum of prepare votes) in a later round",
        )
        .post_bytes_for_bytes(
            &at(ROUND_CHANGES_PATH),
            "Move an account's pending order to a later round",
        )
        .post_bytes_for_bytes(&at(PROPOSALS_PATH), "A round's proposal, with its justification")
        .get_with_query::<AccountBody>(
            &at(&format!("{ACCOUNTS_PATH}/{{account}}")),
            "An account's balance, next sequence and pending order",
            &[("from_sequence", "also list the certificates from this sequence")],
        )
        .post_bytes::<FundedBody>(&at(FUNDINGS_PATH), "Credit a confirmed core funding (kind 0x03) once")
        .get::<InfoBody>(&at(INFO_PATH), "Which authority and shard this is")
        .get::<ShardBooksBody>(
            &at(BOOKS_PATH),
            "This shard's books: balances, credits moving, funded, redeemed",
        )
        .get_with_query::<EpochsBody>(
            &at(EPOCHS_PATH),
            "The committee records of the epochs after `after` (16 at most per answer)",
            &[("after", "the epoch the client knows (1 for the first)")],
        )
        .post_bytes::<EpochBody>(
            &at(EPOCHS_PATH),
            "Enter the epoch this committee record makes (checked against the current committee)",
        )
}

/// The API's routes, on `replica`.
pub fn router(replica: Arc<dyn AuthorityService>) -> Router {
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
        .route(BOOKS_PATH, get(books))
        .route(EPOCHS_PATH, get(epochs).post(enter_epoch))
        .fallback(|| async { http_error(StatusCode::NOT_FOUND, "not_found", "no such endpoint; see docs/api.md") })
        .method_not_allowed_fallback(|| async {
            http_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "wrong HTTP method for this endpoint; see docs/api.md",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(replica)
}

/// The answer to a call that yields a vote or a signed round change as its canonical bytes.
fn signed_answer(answer: Result<Reply, Unavailable>) -> Result<Response, HttpError> {
    let mut bytes = vec![];
    match answer.map_err(unavailable)? {
        Reply::Voted(vote) => vote.encode_to(&mut bytes),
        Reply::RoundChanged(change) => change.encode_to(&mut bytes),
        Reply::Final(certificate) => return Err(settled(&certificate)),
        Reply::Refused(refusal) => return Err(refused(&refusal)),
        other => return Err(wrong_reply(&other)),
    }
    Ok(([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
}

async fn order(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(body_error)?;
    let order = decode_exact(
        "transfer order",
        &bytes,
        SIGNED_ORDER_BYTES_MAX,
        SignedOrder::decode_from,
    )
    .map_err(|error| undecodable("signed transfer order", error))?;
    signed_answer(timed(&*replica, "order", Call::Transfer(order)).await)
}

async fn lock(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(body_error)?;
    let certificate = decode_exact("lock", &bytes, CERTIFICATE_BYTES_MAX, Certificate::decode_from)
        .map_err(|error| undecodable("certificate", error))?;
    signed_answer(timed(&*replica, "lock", Call::Lock(certificate)).await)
}

async fn round_change(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(body_error)?;
    let request = decode_exact(
        "round request",
        &bytes,
        RoundRequest::SIGNED_BYTES,
        SignedRoundRequest::decode_from,
    )
    .map_err(|error| undecodable("signed round request", error))?;
    signed_answer(timed(&*replica, "round_change", Call::RoundChange(request)).await)
}

async fn proposal(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Response, HttpError> {
    let bytes = body.map_err(body_error)?;
    let proposal = Proposal::decode(&bytes).map_err(|error| undecodable("proposal", error))?;
    let call = Call::Propose {
        order: proposal.order,
        round: proposal.round,
        justification: Box::new(proposal.justification),
    };
    signed_answer(timed(&*replica, "proposal", call).await)
}

async fn certificate(
    State(replica): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ConfirmedBody>, HttpError> {
    let bytes = body.map_err(body_error)?;
    let certificate = decode_exact("certificate", &bytes, CERTIFICATE_BYTES_MAX, Certificate::decode_from)
        .map_err(|error| undecodable("certificate", error))?;
    match timed(&*replica, "certificate", Call::Confirm(certificate))
        .await
        .map_err(unavailable)?
    {
        Reply::Confirmed { sender, sequence } => Ok(Json(ConfirmedBody {
            sender: hex::encode(sender.0),
            sequence,
        })),
        Reply::Final(certificate) => Err(settled(&certificate)),
        Reply::Refused(refusal) => Err(refused(&refusal)),
        other => Err(wrong_reply(&other)),
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
        query.map_err(|rejection| http_error(StatusCode::BAD_REQUEST, "bad_query", rejection.body_text()))?;
    let key = hex::decode(&account)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| {
            http_error(
                StatusCode::BAD_REQUEST,
                "bad_account",
                "the account is not a 32-byte Ed25519 public key in hex",
            )
        })?;
    let call = Call::Account {
        account: AccountKey(key),
        from_sequence: query.from_sequence.unwrap_or(0),
    };
    match replica.call(call).await.map_err(unavailable)? {
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
        Reply::Refused(refusal) => Err(refused(&refusal)),
        other => Err(wrong_reply(&other)),
    }
}

/// A funding is credited only once this replica has found its marker in the online core's UHS
/// itself; the body only says which funding to look for.
async fn funding(State(replica): Shared, body: Result<Bytes, BytesRejection>) -> Result<Json<FundedBody>, HttpError> {
    let bytes = body.map_err(body_error)?;
    let claim = FastpayFunding::decode_exact(&bytes)
        .map_err(|error| match error {
            DecodeError::UnknownKind { .. } => http_error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "not_a_funding",
                "the transaction is not a FastPay funding (kind 0x03)",
            ),
            error => http_error(
                StatusCode::BAD_REQUEST,
                "bad_body",
                format!("the body is not a canonical transaction: {error}"),
            ),
        })?
        .claim();
    let account = claim.account;
    let committee_id = replica.committee().id();
    if claim.committee_id != committee_id {
        return Err(http_error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "wrong_committee",
            format!(
                "the funding is for committee {}, this authority is in {}",
                hex::encode(claim.committee_id),
                hex::encode(committee_id)
            ),
        ));
    }
    let place = replica.place();
    let owner = shard_of(&account, place.shards);
    if owner != place.shard {
        return Err(refused(&Refusal::WrongShard { owner }));
    }
    replica.ready().map_err(unavailable)?;
    specie_service::funding_confirmed(replica.in_core(claim.marker.0).await)?;
    let funding = Funding {
        id: claim.marker.0,
        account,
        amount: claim.amount,
    };
    match timed(&*replica, "funding", Call::Fund(funding))
        .await
        .map_err(unavailable)?
    {
        Reply::Funded { id } => Ok(Json(FundedBody {
            funded: hex::encode(id),
            account: hex::encode(claim.account.0),
            amount: claim.amount,
        })),
        Reply::Refused(refusal) => Err(refused(&refusal)),
        other => Err(wrong_reply(&other)),
    }
}

/// The shard's books, as its role answers them (a replica's once it leads).
async fn books(State(replica): Shared) -> Result<Json<ShardBooksBody>, HttpError> {
    let place = replica.place();
    match replica
        .call(Call::Books { shard: place.shard })
        .await
        .map_err(unavailable)?
    {
        Reply::Books(books) => Ok(Json(ShardBooksBody {
            authority: place.authority,
            shard: place.shard,
            shards: place.shards,
            committee_id: hex::encode(replica.committee().id()),
            balances: books.balances.to_string(),
            credits_unacked: books.credits_unacked.to_string(),
            funded: books.funded.to_string(),
            redeemed: books.redeemed.to_string(),
        })),
        other => Err(wrong_reply(&other)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EpochsQuery {
    after: u64,
}

/// The records this shard holds of the epochs after `after`, as its role answers them.
async fn epochs(
    State(replica): Shared,
    query: Result<Query<EpochsQuery>, QueryRejection>,
) -> Result<Json<EpochsBody>, HttpError> {
    let Query(query) =
        query.map_err(|rejection| http_error(StatusCode::BAD_REQUEST, "bad_query", rejection.body_text()))?;
    let call = Call::Epochs {
        shard: replica.place().shard,
        after: query.after,
    };
    match timed(&*replica, "epochs", call).await.map_err(unavailable)? {
        Reply::Epochs(records) => Ok(Json(EpochsBody {
            records: records.iter().map(CommitteeRecord::to_hex).collect(),
        })),
        Reply::Refused(refusal) => Err(refused(&refusal)),
        other => Err(wrong_reply(&other)),
    }
}

/// A committee record brought to this shard: entered once checked and durable.
async fn enter_epoch(
    State(replica): Shared,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<EpochBody>, HttpError> {
    let bytes = body.map_err(body_error)?;
    let record = decode_exact(
        "committee record",
        &bytes,
        COMMITTEE_RECORD_BYTES_MAX,
        CommitteeRecord::decode_from,
    )
    .map_err(|error| undecodable("committee record", error))?;
    let call = Call::EnterEpoch {
        shard: replica.place().shard,
        record: Box::new(record),
    };
    match timed(&*replica, "enter_epoch", call).await.map_err(unavailable)? {
        Reply::Epoch { epoch } => Ok(Json(EpochBody { epoch })),
        Reply::Refused(refusal) => Err(refused(&refusal)),
        other => Err(wrong_reply(&other)),
    }
}

async fn info(State(replica): Shared) -> Json<InfoBody> {
    let place = replica.place();
    Json(InfoBody {
        authority: place.authority,
        shard: place.shard,
        shards: place.shards,
        replica: place.replica,
        leader: replica.ready().is_ok(),
        committee_id: hex::encode(replica.committee().id()),
        epoch: replica.committee().epoch(),
    })
}
