//! The offline authority's HTTP/JSON API: the routes of [`crate::http_api`]'s endpoints. Each
//! binary value is length-checked before it is decoded, and decoded with its bounded decoder.

use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::{Json, Router};
use ed25519_dalek::SigningKey;
use specie_codec::{DecodeError, Reader};
use specie_offline::{
    EvidenceBundle, Instruction, KeyBinding, KeyStatus, PublicKey, SignedKeyRing, SignedMove, Token,
    INSTRUCTION_BYTES_MAX, KEY_BINDING_BYTES, SIGNED_MOVE_BYTES_MAX, TOKEN_BYTES_MAX,
};
use specie_offline_authority::{
    DepositOutcome, Funding, Input, Refusal, Reply, BINDINGS_PER_CALL_MAX, TOKENS_PER_FUNDING_MAX,
};

use std::sync::Arc;

use crate::http_api::{
    BooksBody, CertifiedBody, CertifyRequest, DebtBody, DepositBody, DepositRequest, EvidenceBody, FundFromCoreRequest,
    FundRequest, FundedBody, KeyBooksBody, KeysBody, OutcomeBody, RefundBody, RegisterRequest, RegisteredBody,
    RevocationsBody, RevocationsQuery, RevokeKeyRequest, BOOKS_PATH, CERTIFY_PATH, CODE_REFUSED, DEPOSIT_PATH,
    EVIDENCE_PATH, FUND_FROM_CORE_PATH, FUND_PATH, KEYS_PATH, REGISTER_PATH, REVOCATIONS_PATH, REVOKE_KEY_PATH,
    ROTATE_PATH,
};
use crate::service::{AuthorityService, EmbeddedAuthority};
use crate::AuthorityHandle;
use specie_service::{ApiDoc, ApiError, CoreApi, CoreTransactions, NotAFunding, Param, PayTo};

/// The authority the API serves, however it is hosted.
pub type Authority = Arc<dyn AuthorityService>;

/// Largest request body: a certification of the most keys, in hex, with room for JSON.
const BODY_BYTES_MAX: usize = 2 * BINDINGS_PER_CALL_MAX * (KEY_BINDING_BYTES + 8) + 4_096;

/// How the authority learns that value left the online core for it, and pays value back.
#[derive(Clone, Debug)]
pub struct CoreLink {
    /// The online core's transaction format (`specie_wallet::CORE_FORMAT`, handed in by whoever
    /// starts the service): it reads the fundings posted to `POST /v1/offline/fund-from-core` and
    /// writes the payouts the API answers with, so the service never reads core transactions.
    pub format: &'static dyn CoreTransactions,
    /// The online core's HTTP API (`specie node`, or a cluster's), asked whether a funding's
    /// marker is in the UHS: `POST /v1/offline/fund-from-core`.
    pub core: Option<CoreApi>,
    /// Whether the operator may fund devices on its word (`POST /v1/offline/fund`): value from
    /// nowhere, outside the platform's supply audit. For trials without a core only.
    pub operator_funding: bool,
}

/// The API of the authority on this process's embedded host (whose bridge key signs the payouts
/// it answers with).
pub fn router(authority: AuthorityHandle, core_link: CoreLink) -> Router {
    service_router(Arc::new(EmbeddedAuthority {
        handle: authority,
        core_link,
    }))
}

/// The offline authority's API as an OpenAPI document: what `GET /openapi.json` serves.
pub fn openapi() -> ApiDoc {
    ApiDoc::new(
        "specie offline authority",
        "Offline cash's authority: key rings, enrolment, funding, deposits, books (docs/offline-mode.md). \
         Operator calls need the operator's bearer token.",
    )
    .path_parameter("identity", Param::Hex32)
    .get::<KeysBody>(KEYS_PATH, "The signed key ring and the bridge key")
    .post_empty::<KeysBody>(ROTATE_PATH, "(Operator) begin the next period")
    .post::<RevokeKeyRequest, KeysBody>(REVOKE_KEY_PATH, "(Operator) revoke an issuing key")
    .post::<RegisterRequest, RegisteredBody>(REGISTER_PATH, "(Operator) register a device's identity")
    .post::<FundRequest, FundedBody>(FUND_PATH, "(Operator) issue tokens without a core funding")
    .post::<FundFromCoreRequest, FundedBody>(FUND_FROM_CORE_PATH, "Issue tokens for a confirmed core funding")
    .post::<CertifyRequest, CertifiedBody>(CERTIFY_PATH, "Certify a device's one-time keys")
    .post::<DepositRequest, DepositBody>(
        DEPOSIT_PATH,
        "Deposit tokens: re-issue them, or pay them back to the core",
    )
    .get_with_query::<RevocationsBody>(
        REVOCATIONS_PATH,
        "Revoked serials",
        &[("from", "the first revocation to list")],
    )
    .get::<BooksBody>(BOOKS_PATH, "The books: funded, paid back, outstanding, debts")
    .get::<EvidenceBody>(
        &format!("{EVIDENCE_PATH}/{{identity}}"),
        "The evidence against a double spender",
    )
}

/// The API of `authority`, however it is hosted.
pub fn service_router(authority: Authority) -> Router {
    Router::new()
        .route(KEYS_PATH, get(keys))
        .route(ROTATE_PATH, post(rotate))
        .route(REVOKE_KEY_PATH, post(revoke_key))
        .route(REGISTER_PATH, post(register))
        .route(FUND_PATH, post(fund))
        .route(FUND_FROM_CORE_PATH, post(fund_from_core))
        .route(CERTIFY_PATH, post(certify))
        .route(DEPOSIT_PATH, post(deposit))
        .route(REVOCATIONS_PATH, get(revocations))
        .route(BOOKS_PATH, get(books))
        .route(&format!("{EVIDENCE_PATH}/{{identity}}"), get(evidence))
        .merge(openapi().router())
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "not_found",
                "no such endpoint; see docs/offline-mode.md",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(authority)
}

/// `what` in hex, at most `bytes_max` bytes, decoded exactly with `decode`.
fn from_hex<T>(
    what: &'static str,
    text: &str,
    bytes_max: usize,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<T, ApiError> {
    if text.len() > 2 * bytes_max {
        return Err(ApiError::bad_request(format!("{what}: longer than {bytes_max} bytes")));
    }
    let bytes = hex::decode(text).map_err(|e| ApiError::bad_request(format!("{what}: not hex: {e}")))?;
    specie_offline::decode_exact(what, &bytes, bytes_max, decode)
        .map_err(|e| ApiError::bad_request(format!("{what}: {e}")))
}

fn key_from_hex(what: &'static str, text: &str) -> Result<PublicKey, ApiError> {
    from_hex(what, text, 32, |reader| reader.read_array(what))
}

fn refused(refusal: &Refusal) -> ApiError {
    ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, CODE_REFUSED, refusal.to_string())
}

/// The authority's answer, or 503 if it cannot give one here (stopping, or not the leader).
async fn ask(authority: &Authority, input: impl FnOnce(u64) -> Input + Send + 'static) -> Result<Reply, ApiError> {
    match authority.call(Box::new(input)).await {
        Ok(Reply::Refused(refusal)) => Err(refused(&refusal)),
        Ok(reply) => Ok(reply),
        Err(why) => Err(ApiError::from(why)),
    }
}

fn operator_only(authority: &Authority, headers: &HeaderMap) -> Result<(), ApiError> {
    let token = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match token.is_some_and(|token| authority.is_operator(token)) {
        true => Ok(()),
        false => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "registering, funding, rotating and revoking keys need the operator's bearer token (the authority's DATA_DIR/operator.token)",
        )),
    }
}

fn unexpected(reply: Reply) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        format!("unexpected answer {reply:?}"),
    )
}

/// The key ring now: signed (what devices take), and plain.
fn keys_body(authority: &Authority, signed: &SignedKeyRing) -> Json<KeysBody> {
    let ring = &signed.ring;
    let (mut bytes, mut signed_bytes) = (Vec::new(), Vec::new());
    ring.encode_to(&mut bytes);
    signed.encode_to(&mut signed_bytes);
    let lifecycle = ring.lifecycle();
    Json(KeysBody {
        signed_ring: hex::encode(signed_bytes),
        ring: hex::encode(bytes),
        fingerprint: hex::encode(ring.fingerprint()),
        bridge: hex::encode(authority.bridge()),
        current_period: lifecycle.current_period,
        spend_periods: lifecycle.spend_periods,
        deposit_periods: lifecycle.deposit_periods,
    })
}

async fn ring(authority: &Authority) -> Result<SignedKeyRing, ApiError> {
    match ask(authority, |ticket| Input::Keys { ticket }).await? {
        Reply::Keys(ring) => Ok(*ring),
        other => Err(unexpected(other)),
    }
}

async fn keys(State(authority): State<Authority>) -> Result<Json<KeysBody>, ApiError> {
    let ring = ring(&authority).await?;
    Ok(keys_body(&authority, &ring))
}

/// (Operator) the next period begins; answered with the new ring.
async fn rotate(State(authority): State<Authority>, headers: HeaderMap) -> Result<Json<KeysBody>, ApiError> {
    operator_only(&authority, &headers)?;
    match ask(&authority, |ticket| Input::Rotate { ticket }).await? {
        Reply::Keys(ring) => Ok(keys_body(&authority, &ring)),
        other => Err(unexpected(other)),
    }
}

/// (Operator) revokes an issuing key; answered with the new ring.
async fn revoke_key(
    State(authority): State<Authority>,
    headers: HeaderMap,
    Json(request): Json<RevokeKeyRequest>,
) -> Result<Json<KeysBody>, ApiError> {
    operator_only(&authority, &headers)?;
    let key = key_from_hex("key", &request.key)?;
    match ask(&authority, move |ticket| Input::RevokeKey { ticket, key }).await? {
        Reply::Keys(ring) => Ok(keys_body(&authority, &ring)),
        other => Err(unexpected(other)),
    }
}

async fn register(
    State(authority): State<Authority>,
    headers: HeaderMap,
    Json(request): Json<RegisterRequest>,
) -> Result<Json<RegisteredBody>, ApiError> {
    operator_only(&authority, &headers)?;
    let identity = key_from_hex("identity", &request.identity)?;
    match ask(&authority, move |ticket| Input::Register { ticket, identity }).await? {
        Reply::Registered => Ok(Json(RegisteredBody { registered: true })),
        other => Err(unexpected(other)),
    }
}

async fn fund(
    State(authority): State<Authority>,
    headers: HeaderMap,
    Json(request): Json<FundRequest>,
) -> Result<Json<FundedBody>, ApiError> {
    if !authority.operator_funding() {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "operator_funding_off",
            "funding on the operator's word is off (start the authority with --allow-operator-funding for a \
             trial without a core); fund from the core: POST /v1/offline/fund-from-core",
        ));
    }
    operator_only(&authority, &headers)?;
    if request.owners.len() > TOKENS_PER_FUNDING_MAX {
        return Err(ApiError::bad_request(format!(
            "more than {TOKENS_PER_FUNDING_MAX} owners"
        )));
    }
    let funding = Funding {
        id: from_hex("funding id", &request.id, 32, |reader| reader.read_array("funding id"))?,
        amount: request.amount,
        owners: request
            .owners
            .iter()
            .map(|owner| key_from_hex("owner", owner))
            .collect::<Result<_, _>>()?,
    };
    match ask(&authority, move |ticket| Input::Fund { ticket, funding }).await? {
        Reply::Funded { issuances } => Ok(Json(FundedBody {
            issuances: Some(issuances_hex(&issuances)),
            refunded: None,
        })),
        other => Err(unexpected(other)),
    }
}

/// A funding the core confirmed: credited once its marker is found in the core's UHS (asked
/// here, never taken from the caller), to exactly the owners the transaction commits to, once
/// per marker. Needs no operator: the core transaction is the authorisation. A funding whose
/// owners could never be issued tokens (not this authority's certified keys, or not one per
/// token) is refunded to its first input's owner on the core: `{refunded: {reason, amount,
/// address, payout}}`, the payout signed by the bridge key.
async fn fund_from_core(
    State(authority): State<Authority>,
    Json(request): Json<FundFromCoreRequest>,
) -> Result<Json<FundedBody>, ApiError> {
    if request.owners.len() > TOKENS_PER_FUNDING_MAX {
        return Err(ApiError::bad_request(format!(
            "more than {TOKENS_PER_FUNDING_MAX} owners"
        )));
    }
    // Decoded without a length check of its own: the body limit keeps the hex far below the
    // core's largest transaction, and the format refuses anything larger.
    let bytes =
        hex::decode(&request.transaction).map_err(|e| ApiError::bad_request(format!("transaction: not hex: {e}")))?;
    let core = authority
        .core_format()
        .bridge_funding(&bytes)
        .map_err(|error| match error {
            NotAFunding::Undecodable { reason } => ApiError::bad_request(format!("transaction: {reason}")),
            NotAFunding::OtherKind { .. } => ApiError::bad_request("transaction: not an offline funding (kind 0x05)"),
        })?;
    let owners = request
        .owners
        .iter()
        .map(|owner| key_from_hex("owner", owner))
        .collect::<Result<Vec<_>, _>>()?;
    let bridge = authority.bridge();
    let funding = Funding::from_core(
        &core.authority,
        &core.owners_digest,
        core.amount,
        core.marker,
        &bridge,
        owners,
    )
    .map_err(|refusal| refused(&refusal))?;
    let Some(refund_to) = core.refund_to else {
        return Err(ApiError::bad_request("transaction: the funding spends no input"));
    };
    specie_service::funding_confirmed(authority.in_core(funding.id).await)?;
    let input = move |ticket| Input::FundOrRefund {
        ticket,
        funding,
        refund_to,
    };
    match ask(&authority, input).await? {
        Reply::Funded { issuances } => Ok(Json(FundedBody {
            issuances: Some(issuances_hex(&issuances)),
            refunded: None,
        })),
        Reply::Refunded {
            reason,
            serial,
            to,
            amount,
        } => {
            let reason = reason.map_or_else(|| "refunded earlier".to_string(), |reason| reason.to_string());
            let (format, bridge) = (authority.core_format(), authority.bridge_key());
            let payout = format.bridge_payout(bridge, serial, PayTo::Commitment(to), amount);
            Ok(Json(FundedBody {
                issuances: None,
                refunded: Some(RefundBody {
                    reason,
                    amount,
                    address: hex::encode(to),
                    payout: hex::encode(payout),
                }),
            }))
        }
        other => Err(unexpected(other)),
    }
}

fn issuances_hex(issuances: &[specie_offline::Issuance]) -> Vec<String> {
    issuances
        .iter()
        .map(|issuance| {
            let mut bytes = Vec::new();
            issuance.encode_to(&mut bytes);
            hex::encode(bytes)
        })
        .collect()
}

async fn certify(
    State(authority): State<Authority>,
    Json(request): Json<CertifyRequest>,
) -> Result<Json<CertifiedBody>, ApiError> {
    if request.bindings.len() > BINDINGS_PER_CALL_MAX {
        return Err(ApiError::bad_request(format!(
            "more than {BINDINGS_PER_CALL_MAX} bindings"
        )));
    }
    let bindings = request
        .bindings
        .iter()
        .map(|binding| from_hex("binding", binding, KEY_BINDING_BYTES, KeyBinding::decode_from))
        .collect::<Result<Vec<_>, _>>()?;
    match ask(&authority, move |ticket| Input::Certify { ticket, bindings }).await? {
        Reply::Certified { certificates } => {
            let certificates = certificates
                .iter()
                .map(|certificate| {
                    let mut bytes = Vec::new();
                    certificate.encode_to(&mut bytes);
                    hex::encode(bytes)
                })
                .collect();
            Ok(Json(CertifiedBody { certificates }))
        }
        other => Err(unexpected(other)),
    }
}

async fn deposit(
    State(authority): State<Authority>,
    Json(request): Json<DepositRequest>,
) -> Result<Json<DepositBody>, ApiError> {
    let token = from_hex("token", &request.token, TOKEN_BYTES_MAX, Token::decode_from)?;
    let statement = from_hex(
        "statement",
        &request.statement,
        SIGNED_MOVE_BYTES_MAX,
        SignedMove::decode_from,
    )?;
    let instruction = from_hex(
        "instruction",
        &request.instruction,
        INSTRUCTION_BYTES_MAX,
        Instruction::decode_from,
    )?;
    let input = move |ticket| Input::Deposit {
        ticket,
        token: Box::new(token),
        statement,
        instruction,
    };
    match ask(&authority, input).await? {
        Reply::Deposited(outcome) => Ok(Json(deposit_body(
            &outcome,
            authority.core_format(),
            authority.bridge_key(),
        ))),
        other => Err(unexpected(other)),
    }
}

/// A deposit's answer (the same for a deposit sent again): its outcome, and a defund's payout
/// for the core, written by `format` and signed by the `bridge` key (Ed25519 signing is
/// deterministic: the same deposit gets the same payout).
pub fn deposit_body(outcome: &DepositOutcome, format: &dyn CoreTransactions, bridge: &SigningKey) -> DepositBody {
    let payout = match *outcome {
        DepositOutcome::Defunded {
            serial,
            address,
            amount,
        } => Some(hex::encode(format.bridge_payout(
            bridge,
            serial,
            PayTo::Key(address),
            amount,
        ))),
        _ => None,
    };
    DepositBody {
        outcome: outcome_body(outcome),
        payout,
    }
}

fn outcome_body(outcome: &DepositOutcome) -> OutcomeBody {
    match outcome {
        DepositOutcome::Reissued { issuances } => OutcomeBody::Reissued {
            issuances: issuances_hex(issuances),
        },
        DepositOutcome::Defunded {
            serial,
            address,
            amount,
        } => OutcomeBody::Defunded {
            serial: hex::encode(serial),
            address: hex::encode(address),
            amount: *amount,
        },
        DepositOutcome::DoubleSpent { serial, debtor, value } => OutcomeBody::DoubleSpent {
            serial: hex::encode(serial),
            debtor: hex::encode(debtor),
            value: *value,
        },
        DepositOutcome::AlreadyDeposited => OutcomeBody::AlreadyDeposited,
    }
}

async fn revocations(
    State(authority): State<Authority>,
    Query(query): Query<RevocationsQuery>,
) -> Result<Json<RevocationsBody>, ApiError> {
    let from = query.from;
    match ask(&authority, move |ticket| Input::Revocations { ticket, from }).await? {
        Reply::Revocations { from, serials } => {
            let serials = serials.iter().map(hex::encode).collect();
            Ok(Json(RevocationsBody { from, serials }))
        }
        other => Err(unexpected(other)),
    }
}

async fn books(State(authority): State<Authority>) -> Result<Json<BooksBody>, ApiError> {
    match ask(&authority, |ticket| Input::Books { ticket }).await? {
        Reply::Books(books) => Ok(Json(books_body(&books))),
        other => Err(unexpected(other)),
    }
}

/// The books as `GET /v1/offline/books` answers them.
pub fn books_body(books: &specie_offline_authority::Books) -> BooksBody {
    BooksBody {
        funded: books.funded.to_string(),
        defunded: books.defunded.to_string(),
        outstanding: books.outstanding.to_string(),
        expired: books.expired.to_string(),
        current_period: books.current_period,
        by_key: books
            .by_key
            .iter()
            .map(|key| KeyBooksBody {
                issuing_key: hex::encode(key.issuing_key),
                denomination: key.denomination,
                period: key.period,
                status: key_status_name(key.status).to_string(),
                issued: key.issued.to_string(),
                paid: key.paid.to_string(),
            })
            .collect(),
        debts: books
            .debts
            .iter()
            .map(|debt| DebtBody {
                identity: hex::encode(debt.identity),
                value: debt.value.to_string(),
                double_spends: debt.double_spends,
            })
            .collect(),
    }
}

/// The evidence against `identity`, as a bundle with the key ring (what `specie offline
/// check-evidence` reads).
async fn evidence(
    State(authority): State<Authority>,
    Path(identity): Path<String>,
) -> Result<Json<EvidenceBody>, ApiError> {
    let identity = key_from_hex("identity", &identity)?;
    match ask(&authority, move |ticket| Input::Evidence { ticket, identity }).await? {
        Reply::Evidence(double_spends) => {
            let bundle = EvidenceBundle {
                ring: ring(&authority).await?.ring,
                double_spends,
            };
            let mut bytes = Vec::new();
            bundle.encode_to(&mut bytes);
            Ok(Json(EvidenceBody {
                double_spends: bundle.double_spends.len() as u64,
                bundle: hex::encode(bytes),
            }))
        }
        other => Err(unexpected(other)),
    }
}

fn key_status_name(status: KeyStatus) -> &'static str {
    match status {
        KeyStatus::Spendable => "spendable",
        KeyStatus::SpendExpired { .. } => "deposit_only",
        KeyStatus::Expired { .. } => "expired",
        KeyStatus::Revoked => "revoked",
    }
}
