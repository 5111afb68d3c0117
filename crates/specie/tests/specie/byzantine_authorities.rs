//! One Byzantine authority among real ones. A committee of 4 (f = 1) beside an online core
//! (`specie cluster up --authorities`): authorities 1 to 3 are real `specie authority` processes;
//! authority 0's processes are killed and, at its addresses, this test serves a liar that speaks
//! the same HTTP API and signs with authority 0's real key (`DIR/pki/authority-0.fastpay.key`).
//! An honest client (`HttpCommittee`) pays through the committee while the liar, in turn:
//!
//! 1. forges votes: a bad signature, signed for another order, committee, round or index;
//! 2. answers garbage, truncated votes, wrong status codes, false lags, false "settled" answers,
//!    false confirmations and false account states (one of which a catch-up asks it for first);
//! 3. says nothing: it reads each request and never answers;
//! 4. signs whatever it is sent: both orders of an owner who signed two for one sequence number,
//!    and a lock on one of them that it and the owner build and hide (the committee must settle
//!    that very order);
//! 5. lies about rounds: `RoundPassed` at `u32::MAX`, round changes for other rounds, with bad
//!    signatures, claiming locks it cannot prove, or reporting an order nobody signed; and round
//!    requests for `u32::MAX` the owner did not sign, sent to the honest authorities.
//!
//! Every honest payment settles (contested slots through the recovery rounds); each honest
//! authority's books balance and no two honest authorities settle different orders for one
//! account and sequence number; the two conflicting votes the liar gave the client are evidence
//! on which `specie byzantine check-evidence` convicts it, and the same signatures convict no
//! honest authority.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use ed25519_dalek::Signer;
use specie_cluster::Topology;
use specie_codec::{Decode, Encode};
use specie_committee::http_api::{
    AccountBody, ConfirmedBody, ErrorBody, ErrorDetail, FundedBody, InfoBody, Proposal, ACCOUNTS_PATH,
    CERTIFICATES_PATH, CODE_NOT_LEADER, CODE_SETTLED, FUNDINGS_PATH, INFO_PATH, LOCKS_PATH, ORDERS_PATH,
    PROPOSALS_PATH, ROUND_CHANGES_PATH,
};
use specie_committee::http_client::Request;
use specie_committee::{AuthorityReply, FundWait, HttpCommittee, HttpCommitteeOptions, HttpSettlement, Observed};
use specie_fastpay::{
    decode_exact, AccountKey, AuthorityIndex, Certificate, Committee, DoubleVote, Evidence, Recipient, RoundChange,
    RoundRequest, SignedOrder, SignedRoundRequest, SignedVote, SigningKey, TransferOrder, Vote, VoteKind,
    VoteStatement, CERTIFICATE_BYTES_MAX, SIGNED_ORDER_BYTES_MAX,
};
use specie_fastpay_primary::FastpayFunding;
use specie_transaction::SpecieTransaction;

use crate::cluster_harness;

use cluster_harness::authority_state::{check_books, history, mint_and_sign_fundings};
use cluster_harness::{cluster_up_with_committee, confirm_in_core, free_ports, kill_9, Down, BIN};

/// The Byzantine authority. Authority 0: a client catching up a lagging authority asks the
/// others for its history in index order, so the liar is asked first.
const LIAR: AuthorityIndex = 0;
const HONEST: [AuthorityIndex; 3] = [1, 2, 3];
const SHARDS: u32 = 2;
const ACCOUNTS: usize = 8;
const FUNDING: u64 = 1_000_000;

/// What the liar does; the test switches it between phases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lie {
    /// Votes no client may count, each signed with its real key where a signature is asked for.
    ForgesVotes,
    /// Bodies no client can use and status codes that mean something else.
    Malformed,
    /// Reads every request and never answers.
    Silent,
    /// Signs whatever it is sent, conflicting orders included.
    SignsEverything,
    /// Signs what it is sent, but lies in every answer about rounds.
    LiesAboutRounds,
}

/// The Byzantine authority: its real key, no state but what it was sent, and a record of the
/// lies it told (each phase checks that its lies were told, not only that payments settled).
struct Liar {
    key: SigningKey,
    committee: Arc<Committee>,
    lie: Mutex<Lie>,
    /// Per kind of answer, how many it gave: each lie cycles through its variants in turn.
    turns: Mutex<BTreeMap<&'static str, usize>>,
    orders: Mutex<Vec<SignedOrder>>,
    certificates: Mutex<Vec<Certificate>>,
    told: Mutex<BTreeMap<&'static str, usize>>,
}

impl Liar {
    fn lie(&self) -> Lie {
        *self.lie.lock().unwrap()
    }

    fn set(&self, lie: Lie) {
        *self.lie.lock().unwrap() = lie;
    }

    fn tell(&self, lie: &'static str) {
        *self.told.lock().unwrap().entry(lie).or_default() += 1;
    }

    /// Asserts that each of `lies` was told at least once.
    fn assert_told(&self, lies: &[&str]) {
        let told = self.told.lock().unwrap();
        for lie in lies {
            assert!(told.contains_key(lie), "the liar never told '{lie}': {told:?}");
        }
    }

    /// The next of `variants` variants of the lie it tells in `answer`.
    fn variant(&self, answer: &'static str, variants: usize) -> usize {
        let mut turns = self.turns.lock().unwrap();
        let turn = turns.entry(answer).or_default();
        *turn += 1;
        (*turn - 1) % variants
    }

    fn vote(&self, kind: VoteKind, round: u32, order: &TransferOrder) -> Vote {
        let statement = VoteStatement {
            committee_id: self.committee.id(),
            kind,
            round,
            order_digest: order.digest(),
        };
        Vote {
            authority: LIAR,
            statement,
            signature: statement.sign(&self.key),
        }
    }

    fn remember_order(&self, order: &SignedOrder) {
        self.orders.lock().unwrap().push(order.clone());
    }

    /// The first order it was sent for the slot, if any.
    fn first_order(&self, account: AccountKey, sequence: u64) -> Option<SignedOrder> {
        let orders = self.orders.lock().unwrap();
        let mut slot = orders
            .iter()
            .filter(|o| (o.order.sender, o.order.sequence) == (account, sequence));
        slot.next().cloned()
    }

    fn answer(&self, method: &Method, uri: &Uri, body: &[u8]) -> Response {
        let path = uri.path();
        match (method.as_str(), path) {
            ("POST", ORDERS_PATH) => {
                match decode_exact("order", body, SIGNED_ORDER_BYTES_MAX, SignedOrder::decode_from) {
                    Ok(order) => {
                        self.remember_order(&order);
                        self.answer_vote(VoteKind::Prepare, 0, &order)
                    }
                    Err(error) => {
                        error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_body", error.to_string()))
                    }
                }
            }
            ("POST", PROPOSALS_PATH) => match Proposal::decode(body) {
                Ok(proposal) => {
                    self.remember_order(&proposal.order);
                    self.answer_vote(VoteKind::Prepare, proposal.round, &proposal.order)
                }
                Err(error) => error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_body", error.to_string())),
            },
            ("POST", LOCKS_PATH) => match decode_certificate(body) {
                Some(lock) => self.answer_vote(VoteKind::Commit, lock.round, &lock.order),
                None => error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_body", "not a lock")),
            },
            ("POST", ROUND_CHANGES_PATH) => match decode_round_request(body) {
                Ok(request) => self.answer_round_change(&request.request),
                Err(error) => error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_body", error.to_string())),
            },
            ("POST", CERTIFICATES_PATH) => match decode_certificate(body) {
                Some(certificate) => {
                    self.certificates.lock().unwrap().push(certificate.clone());
                    self.answer_confirmation(&certificate)
                }
                None => error_answer(
                    StatusCode::BAD_REQUEST,
                    ErrorDetail::new("bad_body", "not a certificate"),
                ),
            },
            ("POST", FUNDINGS_PATH) => self.answer_funding(body),
            ("GET", INFO_PATH) => {
                self.tell("info of another authority");
                let info = InfoBody {
                    authority: 2,
                    shard: 7,
                    shards: 1,
                    replica: 9,
                    leader: true,
                    committee_id: hex::encode([7; 32]),
                    epoch: 99,
                };
                Json(info).into_response()
            }
            ("GET", _) if path.starts_with(ACCOUNTS_PATH) => self.answer_account(path, uri.query()),
            _ => error_answer(StatusCode::NOT_FOUND, ErrorDetail::new("not_found", "no such endpoint")),
        }
    }

    /// An order, a proposal or a lock: the vote, as the current lie has it.
    fn answer_vote(&self, kind: VoteKind, round: u32, order: &SignedOrder) -> Response {
        let honest = self.vote(kind, round, &order.order);
        match self.lie() {
            Lie::ForgesVotes => self.forged_vote(honest, order),
            Lie::Malformed => self.malformed_vote(&honest, order),
            Lie::SignsEverything | Lie::LiesAboutRounds => {
                self.tell("a vote for whatever it is sent");
                vote_answer(&honest)
            }
            Lie::Silent => unreachable!("the silent liar answers nothing"),
        }
    }

    fn forged_vote(&self, mut vote: Vote, order: &SignedOrder) -> Response {
        let lie = match self.variant("forged vote", 5) {
            0 => {
                vote.signature[9] ^= 0x20;
                "a vote with a bad signature"
            }
            1 => {
                let other = TransferOrder {
                    amount: order.order.amount + 1,
                    ..order.order.clone()
                };
                vote = self.vote(vote.statement.kind, vote.statement.round, &other);
                "a vote signed for another order"
            }
            2 => {
                let other = Committee::new(self.committee.epoch() + 1, self.committee.members().to_vec()).unwrap();
                vote.statement.committee_id = other.id();
                vote.signature = vote.statement.sign(&self.key);
                "a vote signed for another committee"
            }
            3 => {
                vote.statement.round = vote.statement.round.wrapping_add(1);
                vote.signature = vote.statement.sign(&self.key);
                "a vote signed for another round"
            }
            _ => {
                vote.authority = HONEST[1];
                "its own signature under another authority's index"
            }
        };
        self.tell(lie);
        vote_answer(&vote)
    }

    fn malformed_vote(&self, honest: &Vote, order: &SignedOrder) -> Response {
        let mut bytes = vec![];
        honest.encode_to(&mut bytes);
        let (lie, response) = match self.variant("malformed vote", 10) {
            0 => (
                "garbage with 200",
                octets(StatusCode::OK, b"\xde\xad\xbe\xef not a vote".to_vec()),
            ),
            1 => {
                bytes.truncate(bytes.len() - 7);
                ("a truncated vote", octets(StatusCode::OK, bytes))
            }
            2 => {
                bytes.extend_from_slice(b"trailing");
                ("a vote with trailing bytes", octets(StatusCode::OK, bytes))
            }
            3 => (
                "500 with a body that is not JSON",
                (StatusCode::INTERNAL_SERVER_ERROR, "the liar is lying").into_response(),
            ),
            4 => (
                "404 on an endpoint that exists",
                error_answer(StatusCode::NOT_FOUND, ErrorDetail::new("not_found", "no such endpoint")),
            ),
            5 => (
                "JSON where a vote belongs",
                Json(serde_json::json!({ "vote": "yes" })).into_response(),
            ),
            6 => {
                // A lag that sends the client back to send it certificates it has.
                let mut detail = ErrorDetail::new("refused", "missing earlier certificates");
                detail.more.refusal = Some("MissingEarlier".into());
                detail.more.next_sequence = Some(0);
                ("a false lag", error_answer(StatusCode::CONFLICT, detail))
            }
            7 => {
                // Its own vote alone, passed off as the slot's final certificate.
                let certificate = Certificate::from_votes(order.clone(), std::slice::from_ref(honest));
                let mut certificate_bytes = vec![];
                certificate.encode_to(&mut certificate_bytes);
                let mut detail = ErrorDetail::new(CODE_SETTLED, "settled");
                detail.more.certificate = Some(hex::encode(certificate_bytes));
                ("a false final certificate", error_answer(StatusCode::CONFLICT, detail))
            }
            8 => {
                // Sends the client to itself: asked again, it tells the next lie.
                let mut detail = ErrorDetail::new(CODE_NOT_LEADER, "ask the leader");
                detail.more.leader = Some(1);
                (
                    "not_leader naming itself",
                    error_answer(StatusCode::SERVICE_UNAVAILABLE, detail),
                )
            }
            _ => ("204 with no vote", StatusCode::NO_CONTENT.into_response()),
        };
        self.tell(lie);
        response
    }

    fn answer_round_change(&self, request: &RoundRequest) -> Response {
        let change = RoundChange {
            committee_id: self.committee.id(),
            account: request.account,
            sequence: request.sequence,
            round: request.round,
            prepared_first: self
                .first_order(request.account, request.sequence)
                .map(|o| o.order.digest()),
            lock: None,
        };
        match self.lie() {
            Lie::ForgesVotes => {
                let mut signed = change.sign(LIAR, &self.key, None);
                signed.signature[3] ^= 1;
                self.tell("a round change with a bad signature");
                signed_round_change_answer(&signed)
            }
            Lie::Malformed => {
                self.tell("garbage for a round change");
                octets(StatusCode::OK, vec![2, 0, 0, 1])
            }
            Lie::SignsEverything => {
                self.tell("a round change reporting the first order it saw");
                signed_round_change_answer(&change.sign(LIAR, &self.key, None))
            }
            Lie::LiesAboutRounds => self.round_lie(change),
            Lie::Silent => unreachable!("the silent liar answers nothing"),
        }
    }

    fn round_lie(&self, mut change: RoundChange) -> Response {
        let (lie, signed) = match self.variant("round change", 6) {
            0 => {
                let mut detail = ErrorDetail::new("refused", format!("in round {} already", u32::MAX));
                detail.more.refusal = Some("RoundPassed".into());
                detail.more.next_sequence = Some(u64::from(u32::MAX));
                self.tell("RoundPassed at u32::MAX");
                return error_answer(StatusCode::CONFLICT, detail);
            }
            1 => {
                change.round = u32::MAX;
                ("a round change into round u32::MAX", change.sign(LIAR, &self.key, None))
            }
            2 => {
                let mut signed = change.sign(LIAR, &self.key, None);
                signed.signature[40] ^= 4;
                ("a round change with a bad signature", signed)
            }
            3 => {
                change.lock = Some((0, change.prepared_first.unwrap_or([9; 32])));
                (
                    "a lock claimed without its certificate",
                    change.sign(LIAR, &self.key, None),
                )
            }
            4 => {
                // The round request may come before the slot's order: then any order it saw.
                let seen = self.first_order(change.account, change.sequence);
                let Some(order) = seen.or_else(|| self.orders.lock().unwrap().last().cloned()) else {
                    return self.round_lie(change);
                };
                let own = self.vote(VoteKind::Prepare, 0, &order.order);
                let lock = Certificate::from_votes(order.clone(), &[own]);
                change.lock = Some((0, order.order.digest()));
                (
                    "a lock certified by its own vote alone",
                    change.sign(LIAR, &self.key, Some(lock)),
                )
            }
            _ => {
                // Validly signed: nothing tells this lie from the truth but the other reports.
                change.prepared_first = Some([0x5a; 32]);
                (
                    "a round change reporting an order nobody signed",
                    change.sign(LIAR, &self.key, None),
                )
            }
        };
        self.tell(lie);
        signed_round_change_answer(&signed)
    }

    fn answer_confirmation(&self, certificate: &Certificate) -> Response {
        let order = &certificate.order.order;
        let confirmed = |sequence: u64| {
            Json(ConfirmedBody {
                sender: hex::encode(order.sender.0),
                sequence,
            })
            .into_response()
        };
        if self.lie() != Lie::Malformed {
            // It holds no account: every confirmation it gives is a lie.
            self.tell("a confirmation of what it never applied");
            return confirmed(order.sequence);
        }
        let (lie, response) = match self.variant("confirmation", 3) {
            0 => (
                "a confirmation of another sequence number",
                confirmed(order.sequence + 1),
            ),
            1 => (
                "a confirmation that is not JSON",
                octets(StatusCode::OK, b"{\"sender\":".to_vec()),
            ),
            _ => (
                "an empty 500 for a certificate",
                StatusCode::INTERNAL_SERVER_ERROR.into_response(),
            ),
        };
        self.tell(lie);
        response
    }

    /// A false account: a huge balance, nothing settled, and a certificate it was sent with a
    /// signature broken (for this account and sequence number if it has one, else any other).
    fn answer_account(&self, path: &str, query: Option<&str>) -> Response {
        let account = path
            .rsplit('/')
            .next()
            .and_then(|text| hex::decode(text).ok())
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .map(AccountKey);
        let from_sequence = query
            .and_then(|q| q.strip_prefix("from_sequence="))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        let Some(account) = account else {
            return error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_account", "not a key"));
        };
        let certificates = self.certificates.lock().unwrap();
        let fitting = certificates
            .iter()
            .find(|c| (c.order.order.sender, c.order.order.sequence) == (account, from_sequence));
        let confirmed: Vec<String> = fitting
            .or(certificates.first())
            .map(|certificate| {
                let mut broken = certificate.clone();
                broken.signatures[0].1[7] ^= 0x40;
                let mut bytes = vec![];
                broken.encode_to(&mut bytes);
                hex::encode(bytes)
            })
            .into_iter()
            .collect();
        self.tell("a false account state");
        Json(AccountBody {
            balance: 1 << 60,
            next_sequence: from_sequence,
            pending: None,
            confirmed,
        })
        .into_response()
    }

    /// Says it credited any funding, without asking the core.
    fn answer_funding(&self, body: &[u8]) -> Response {
        match FastpayFunding::decode_exact(body).map(|funding| funding.claim()) {
            Ok(claim) => {
                self.tell("a funding credited unchecked");
                Json(FundedBody {
                    funded: hex::encode(claim.marker.0),
                    account: hex::encode(claim.account.0),
                    amount: claim.amount,
                })
                .into_response()
            }
            _ => error_answer(StatusCode::BAD_REQUEST, ErrorDetail::new("bad_body", "not a funding")),
        }
    }
}

/// The owner's signed request for a round: the liar answers it without checking the signature.
fn decode_round_request(body: &[u8]) -> Result<SignedRoundRequest, specie_codec::DecodeError> {
    decode_exact(
        "round request",
        body,
        RoundRequest::SIGNED_BYTES,
        SignedRoundRequest::decode_from,
    )
}

fn decode_certificate(body: &[u8]) -> Option<Certificate> {
    decode_exact("certificate", body, CERTIFICATE_BYTES_MAX, Certificate::decode_from).ok()
}

fn octets(status: StatusCode, bytes: Vec<u8>) -> Response {
    (status, [(CONTENT_TYPE, "application/octet-stream")], bytes).into_response()
}

fn vote_answer(vote: &Vote) -> Response {
    let mut bytes = vec![];
    vote.encode_to(&mut bytes);
    octets(StatusCode::OK, bytes)
}

fn signed_round_change_answer(change: &specie_fastpay::SignedRoundChange) -> Response {
    let mut bytes = vec![];
    change.encode_to(&mut bytes);
    octets(StatusCode::OK, bytes)
}

fn error_answer(status: StatusCode, error: ErrorDetail) -> Response {
    (status, Json(ErrorBody { error })).into_response()
}

/// Every request to the liar: silent, it reads the request and never answers.
async fn serve_lies(State(liar): State<Arc<Liar>>, method: Method, uri: Uri, body: Bytes) -> Response {
    if liar.lie() == Lie::Silent {
        liar.tell("silence");
        std::future::pending::<()>().await;
    }
    liar.answer(&method, &uri, &body)
}

/// Serves the liar at `addresses` (those of the killed authority's shards: freed by the kill,
/// so bound as soon as the kernel lets go of them).
fn serve_liar(runtime: &tokio::runtime::Runtime, liar: &Arc<Liar>, addresses: &[SocketAddr]) {
    for address in addresses {
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match runtime.block_on(tokio::net::TcpListener::bind(address)) {
                Ok(listener) => break listener,
                Err(error) if Instant::now() < deadline => {
                    eprintln!("binding the liar to {address}: {error}; again");
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(error) => panic!("cannot serve the liar at {address}: {error}"),
            }
        };
        let router = Router::new().fallback(serve_lies).with_state(liar.clone());
        runtime.spawn(async move { axum::serve(listener, router).await });
    }
}

struct Account {
    owner: SigningKey,
    key: AccountKey,
    next_sequence: u64,
}

impl Account {
    fn new(n: u64) -> Account {
        let owner = specie_fastpay::deterministic_key("byzantine-authorities-test-owner", n);
        Account {
            key: AccountKey(owner.verifying_key().to_bytes()),
            owner,
            next_sequence: 0,
        }
    }

    fn order(&self, recipient: AccountKey, amount: u64, memo: &[u8]) -> SignedOrder {
        TransferOrder {
            sender: self.key,
            recipient: Recipient::Account(recipient),
            amount,
            sequence: self.next_sequence,
            memo: memo.to_vec(),
        }
        .sign(&self.owner)
    }
}

/// Mints to one core key per account, moves each output whole into its account by a funding the
/// core confirms, and posts every funding to every authority: each honest one credits it.
fn fund(dir: &str, topology: &Topology, client: &HttpCommittee, accounts: &[Account]) {
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    let (_, fundings) = mint_and_sign_fundings(dir, topology, client.committee().id(), &keys, FUNDING);
    let fundings: Vec<SpecieTransaction> = fundings.into_iter().map(SpecieTransaction::from).collect();
    confirm_in_core(&format!("http://{}", topology.sentinels[0].http), &fundings);
    for (account, funding) in accounts.iter().zip(&fundings) {
        let replies = client.fund(account.key, funding.encode(), FundWait::All);
        for authority in HONEST {
            assert!(
                matches!(replies.get(&authority), Some(AuthorityReply::Funded { .. })),
                "{replies:?}"
            );
        }
    }
}

fn voted(reply: AuthorityReply) -> Vote {
    match reply {
        AuthorityReply::Voted(vote) => vote,
        other => panic!("no vote: {other:?}"),
    }
}

/// What the test saw settle, for the checks at the end.
struct Ledger {
    committee: Arc<Committee>,
    settled: Vec<Certificate>,
}

impl Ledger {
    /// Pays `count` orders from `accounts` in turn, to the next account; each must settle.
    fn pay_round_robin(&mut self, client: &HttpCommittee, accounts: &mut [Account], count: usize, what: &str) {
        let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
        for n in 0..count {
            let account = &mut accounts[n % keys.len()];
            let order = account.order(keys[(n + 1) % keys.len()], 1 + n as u64 % 5, what.as_bytes());
            let settlement = client
                .pay(&account.owner, order)
                .unwrap_or_else(|error| panic!("{what}: payment {n} did not settle: {error}"));
            self.settled(account, settlement);
        }
    }

    /// A payment of `account` settled: its certificate is final, for the account's next slot.
    fn settled(&mut self, account: &mut Account, settlement: HttpSettlement) {
        assert_eq!(settlement.certificate.check(&self.committee), Ok(()));
        assert_eq!(settlement.certificate.order.order.sender, account.key);
        assert_eq!(settlement.certificate.order.order.sequence, account.next_sequence);
        account.next_sequence += 1;
        self.settled.push(settlement.certificate);
    }
}

/// An owner who signs two orders for its next sequence number and splits the honest
/// authorities between them: the first to authority 1, the second to 2 and 3.
fn split(client: &HttpCommittee, account: &Account, recipient: AccountKey) -> (SignedOrder, SignedOrder) {
    let first = account.order(recipient, 3, b"first of two");
    let second = account.order(recipient, 4, b"second of two");
    for (authority, order) in [(1, &first), (2, &second), (3, &second)] {
        voted(client.ask(authority, Request::Transfer(order.clone())));
    }
    (first, second)
}

#[test]
fn one_byzantine_authority_process_neither_breaks_safety_nor_holds_up_honest_payments() {
    let started = Instant::now();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster").to_str().unwrap().to_string();
    let _down = Down(dir.clone());
    let shards = SHARDS.to_string();
    let committee = ["--authorities", "--authority-shards", &shards];
    cluster_up_with_committee(&dir, free_ports(4 + 3 + 4 * SHARDS as u16 * 2), &committee);
    let topology = Topology::load(&Path::new(&dir).join("cluster.toml")).unwrap();
    let config = topology.fastpay_committee.clone().unwrap();
    let committee = Arc::new(config.committee().unwrap());

    // Authority 0 becomes the liar: its processes go, its key and addresses stay.
    let liar = Arc::new(Liar {
        key: specie_cluster::credentials::authority_key(&topology, LIAR).unwrap(),
        committee: committee.clone(),
        lie: Mutex::new(Lie::ForgesVotes),
        turns: Mutex::new(BTreeMap::new()),
        orders: Mutex::new(vec![]),
        certificates: Mutex::new(vec![]),
        told: Mutex::new(BTreeMap::new()),
    });
    let liar_addresses: Vec<SocketAddr> = topology
        .authority_groups()
        .iter()
        .filter(|group| group.place.authority == LIAR)
        .map(|group| group.replicas[0].http)
        .collect();
    for group in topology.authority_groups().iter().filter(|g| g.place.authority == LIAR) {
        kill_9(&dir, &format!("{}-1", group.name));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    serve_liar(&runtime, &liar, &liar_addresses);

    let (observer, observed) = crossbeam_channel::unbounded();
    let client_with = |request_timeout: Duration| {
        let options = HttpCommitteeOptions {
            request_timeout,
            payment_timeout: Duration::from_secs(30),
            observer: Some(observer.clone()),
            ..HttpCommitteeOptions::default()
        };
        HttpCommittee::new(committee.clone(), config.http_addresses(), options).unwrap()
    };
    let client = client_with(Duration::from_secs(5));
    let mut accounts: Vec<Account> = (0..ACCOUNTS as u64).map(Account::new).collect();
    fund(&dir, &topology, &client, &accounts);
    liar.assert_told(&["a funding credited unchecked"]);
    let mut ledger = Ledger {
        committee: committee.clone(),
        settled: vec![],
    };

    forged_votes(&client, &liar, &mut ledger, &mut accounts);
    malformed_answers(&client, &liar, &mut ledger, &mut accounts);
    silence(&client_with(Duration::from_secs(20)), &liar, &mut ledger, &mut accounts);
    equivocation(&client, &liar, &mut ledger, &mut accounts);
    round_lies(&client, &liar, &mut ledger, &mut accounts);

    // No value created or destroyed at an honest authority (the liar's shards answer no status).
    check_books(&topology, HONEST.len() * SHARDS as usize, ACCOUNTS as u64 * FUNDING);
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    check_one_order_per_slot(&client, &keys, &ledger.settled);
    let observations: Vec<Observed> = observed.try_iter().collect();
    check_evidence(&committee, &observations, temp.path());
    check_no_honest_evidence(&topology);
    drop(runtime);
    eprintln!(
        "{} payments settled, {} answers observed, in {:?}; the liar told: {:#?}",
        ledger.settled.len(),
        observations.len(),
        started.elapsed(),
        liar.told.lock().unwrap()
    );
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "took {:?}",
        started.elapsed()
    );
}

/// Lie 1, forged votes (a bad signature, or signed for something else): the client counts none,
/// takes the slow path with the honest three, and their certificate holds no signature of the
/// liar. Then a lagging honest authority: the client catches it up with the payer's history,
/// which it asks the liar for first, and the liar answers a false one.
fn forged_votes(client: &HttpCommittee, liar: &Liar, ledger: &mut Ledger, accounts: &mut [Account]) {
    liar.set(Lie::ForgesVotes);
    let from = ledger.settled.len();
    ledger.pay_round_robin(client, accounts, 6, "forged votes");
    for certificate in &ledger.settled[from..] {
        assert!(
            certificate.signatures.iter().all(|(a, _)| *a != LIAR),
            "{certificate:?}"
        );
    }
    liar.assert_told(&[
        "a vote with a bad signature",
        "a vote signed for another order",
        "a vote signed for another committee",
        "a vote signed for another round",
        "its own signature under another authority's index",
        "a confirmation of what it never applied",
    ]);

    // Authority 3 voted for and locked an order whose certificate it never saw: it lags.
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    let account = &mut accounts[0];
    let order = account.order(keys[1], 2, b"certified behind authority 3's back");
    let prepares: Vec<Vote> = HONEST
        .iter()
        .map(|a| voted(client.ask(*a, Request::Transfer(order.clone()))))
        .collect();
    let lock = Certificate::from_votes(order.clone(), &prepares);
    let commits: Vec<Vote> = HONEST
        .iter()
        .map(|a| voted(client.ask(*a, Request::Lock(lock.clone()))))
        .collect();
    let certificate = Certificate::from_votes(order, &commits);
    assert_eq!(certificate.check(client.committee()), Ok(()));
    for authority in [1, 2, LIAR] {
        let reply = client.ask(authority, Request::Confirm(vec![certificate.clone()]));
        assert!(matches!(reply, AuthorityReply::Confirmed { .. }), "{reply:?}");
    }
    ledger.settled.push(certificate);
    account.next_sequence += 1;
    let next = account.order(keys[2], 1, b"after a lag");
    let settlement = client
        .pay(&account.owner, next)
        .unwrap_or_else(|error| panic!("a payment needing the lagging authority: {error}"));
    // The liar's votes never count: the lagging authority, caught up, signed.
    let signers: Vec<AuthorityIndex> = settlement.certificate.signatures.iter().map(|(a, _)| *a).collect();
    assert_eq!(signers, HONEST);
    ledger.settled(account, settlement);
    liar.assert_told(&["a false account state"]);
}

/// Lie 2, answers no client can use and status codes that mean something else (garbage, truncated
/// votes, non-JSON errors, a lag that is not one, a "settled" with a certificate that is not
/// final, a `not_leader` naming itself, confirmations of the wrong slot): every payment settles.
fn malformed_answers(client: &HttpCommittee, liar: &Liar, ledger: &mut Ledger, accounts: &mut [Account]) {
    liar.set(Lie::Malformed);
    ledger.pay_round_robin(client, accounts, 10, "malformed answers");
    liar.assert_told(&[
        "garbage with 200",
        "a truncated vote",
        "a vote with trailing bytes",
        "500 with a body that is not JSON",
        "404 on an endpoint that exists",
        "JSON where a vote belongs",
        "a false lag",
        "a false final certificate",
        "not_leader naming itself",
        "204 with no vote",
        "a confirmation of another sequence number",
        "a confirmation that is not JSON",
        "an empty 500 for a certificate",
    ]);
}

/// Lie 3, silence: each request is read and never answered. The client's requests to the liar wait
/// out a 20 s time-out; its payments act at the first quorum and settle in round 0 long before.
fn silence(client: &HttpCommittee, liar: &Liar, ledger: &mut Ledger, accounts: &mut [Account]) {
    liar.set(Lie::Silent);
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    for n in 0..4 {
        let account = &mut accounts[n];
        let order = account.order(keys[n + 1], 2, b"while the liar is silent");
        let settlement = client
            .pay(&account.owner, order)
            .unwrap_or_else(|error| panic!("a payment with the liar silent: {error}"));
        assert_eq!(settlement.round, 0);
        assert!(!settlement.confirmed_by.contains(&LIAR));
        assert!(
            settlement.to_settlement < Duration::from_secs(5),
            "waited on the silent liar: {:?}",
            settlement.to_settlement
        );
        ledger.settled(account, settlement);
    }
    liar.assert_told(&["silence"]);
}

/// Lie 4, equivocation: the liar signs both orders of an owner who signed two for one sequence
/// number (the client receives both votes: evidence). The owner gets the account back through
/// the recovery rounds. Then the liar and the owner collude: with two honest prepares they build
/// a lock on the second order, have it committed by the same two and the liar, and hide that
/// final certificate; the committee must settle that order and no other.
fn equivocation(client: &HttpCommittee, liar: &Liar, ledger: &mut Ledger, accounts: &mut [Account]) {
    liar.set(Lie::SignsEverything);
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();

    let account = &mut accounts[4];
    let (first, second) = split(client, account, keys[5]);
    // The liar signs both: the client now holds its two conflicting votes.
    for order in [&first, &second] {
        voted(client.ask(LIAR, Request::Transfer(order.clone())));
    }
    let recovered = client
        .pay_orders(&account.owner, vec![first.clone(), second.clone()])
        .unwrap_or_else(|error| panic!("the split slot: {error}"));
    assert!(recovered.round >= 1, "settled in round {}", recovered.round);
    assert!([&first, &second].contains(&&recovered.certificate.order));
    ledger.settled(account, recovered);
    ledger.pay_round_robin(client, std::slice::from_mut(account), 1, "after recovery");

    let account = &mut accounts[5];
    let (first, second) = split(client, account, keys[6]);
    let prepares: Vec<Vote> = [2, 3, LIAR]
        .iter()
        .map(|a| voted(client.ask(*a, Request::Transfer(second.clone()))))
        .collect();
    let lock = Certificate::from_votes(second.clone(), &prepares);
    assert_eq!(lock.check_lock(client.committee()), Ok(()));
    let commits: Vec<Vote> = [2, 3, LIAR]
        .iter()
        .map(|a| voted(client.ask(*a, Request::Lock(lock.clone()))))
        .collect();
    let hidden = Certificate::from_votes(second.clone(), &commits);
    assert_eq!(hidden.check(client.committee()), Ok(()));
    let settled = client
        .pay_orders(&account.owner, vec![first, second.clone()])
        .unwrap_or_else(|error| panic!("the slot with a hidden final certificate: {error}"));
    assert_eq!(
        settled.certificate.order, second,
        "the committee settled another order than the one certified in round 0"
    );
    ledger.settled(account, settled);
    let reply = client.ask(1, Request::Confirm(vec![hidden]));
    assert!(matches!(reply, AuthorityReply::Confirmed { .. }), "{reply:?}");
    ledger.pay_round_robin(client, std::slice::from_mut(account), 1, "after the hidden certificate");
    liar.assert_told(&[
        "a vote for whatever it is sent",
        "a round change reporting the first order it saw",
    ]);
}

/// Lie 5, lies about rounds in the recovery rounds of split slots: they move no payment past the
/// round the honest authorities open, and of its round changes only validly signed ones count.
/// Then round requests the owner did not sign for that round, which honest authorities refuse.
fn round_lies(client: &HttpCommittee, liar: &Liar, ledger: &mut Ledger, accounts: &mut [Account]) {
    liar.set(Lie::LiesAboutRounds);
    let keys: Vec<AccountKey> = accounts.iter().map(|a| a.key).collect();
    let mut broken_promises = Vec::new();
    for n in 0..6 {
        let account = &mut accounts[n];
        let (first, second) = split(client, account, keys[(n + 3) % keys.len()]);
        let recovered = client
            .pay_orders(&account.owner, vec![first.clone(), second.clone()])
            .unwrap_or_else(|error| panic!("a split slot with the liar lying about rounds: {error}"));
        assert!(
            (1..=2).contains(&recovered.round),
            "settled in round {}",
            recovered.round
        );
        broken_promises.extend(recovered.broken_promises.iter().cloned());
        ledger.settled(account, recovered);
        ledger.pay_round_robin(client, std::slice::from_mut(account), 1, "after lies about rounds");
    }

    // A round change reporting an order nobody signed contradicts the liar's round-0 vote, when
    // the payer got that vote before the round changed (timing decides): the payment keeps the
    // pair, and whatever it keeps convicts the liar alone.
    if !broken_promises.is_empty() {
        let evidence = Evidence {
            committee: (**client.committee()).clone(),
            double_votes: Vec::new(),
            broken_promises,
        };
        assert_eq!(evidence.convicted(), Ok(vec![LIAR]), "{:?}", evidence.broken_promises);
    }

    // The liar asks the honest authorities, as if it were the owner, to move the next slot of an
    // account to round u32::MAX: under its own signature, and under the owner's signature of a
    // request for another round. Both are refused, and the owner's payment takes round 0.
    let account = &mut accounts[0];
    let request = RoundRequest {
        committee_id: client.committee().id(),
        account: account.key,
        sequence: account.next_sequence,
        round: u32::MAX,
    };
    let by_liar = SignedRoundRequest {
        request,
        signature: liar.key.sign(&request.signing_bytes()).to_bytes(),
    };
    let for_another_round = SignedRoundRequest {
        request,
        signature: RoundRequest { round: 1, ..request }.sign(&account.owner).signature,
    };
    for forged in [by_liar, for_another_round] {
        for authority in HONEST {
            let reply = client.ask(authority, Request::RoundChange(forged));
            assert!(
                matches!(&reply, AuthorityReply::Refused { refusal, .. } if refusal == "RoundRequest"),
                "{reply:?}"
            );
        }
    }
    let order = account.order(keys[1], 1, b"after a forged round request");
    let settlement = client
        .pay(&account.owner, order)
        .unwrap_or_else(|error| panic!("after a forged round request: {error}"));
    assert_eq!(settlement.round, 0);
    ledger.settled(account, settlement);
    liar.assert_told(&[
        "RoundPassed at u32::MAX",
        "a round change into round u32::MAX",
        "a round change with a bad signature",
        "a lock claimed without its certificate",
        "a lock certified by its own vote alone",
        "a round change reporting an order nobody signed",
    ]);
}

/// No account spends twice: for every account and sequence number, every honest authority that
/// settled it settled the same order, with a final certificate; and every payment the client
/// saw settle is settled at a quorum of the honest ones at least (the liar's confirmations may
/// have counted towards its settlement).
fn check_one_order_per_slot(client: &HttpCommittee, accounts: &[AccountKey], settled: &[Certificate]) {
    let mut orders: BTreeMap<(AccountKey, u64), SignedOrder> = BTreeMap::new();
    let mut holders: BTreeMap<(AccountKey, u64), usize> = BTreeMap::new();
    for authority in HONEST {
        for account in accounts {
            for (sequence, certificate) in history(client, authority, *account).into_iter().enumerate() {
                assert_eq!(certificate.check(client.committee()), Ok(()));
                let slot = (*account, sequence as u64);
                assert_eq!((certificate.order.order.sender, certificate.order.order.sequence), slot);
                let first = orders.entry(slot).or_insert_with(|| certificate.order.clone());
                assert_eq!(*first, certificate.order, "two orders settled for {slot:?}");
                *holders.entry(slot).or_default() += 1;
            }
        }
    }
    for certificate in settled {
        let order = &certificate.order.order;
        let slot = (order.sender, order.sequence);
        assert_eq!(orders.get(&slot), Some(&certificate.order), "{slot:?}");
        assert!(
            holders[&slot] >= 2,
            "{slot:?} is settled at {} honest authorities",
            holders[&slot]
        );
    }
}

/// Evidence from what the client received: every two valid votes one authority gave it for two
/// orders in one phase of one round of one slot. There are some, all the liar's (its two votes
/// for the split owner's orders), and `specie byzantine check-evidence` convicts the liar on
/// them, and only it; the same signatures put under an honest authority's index convict no one.
fn check_evidence(committee: &Committee, observations: &[Observed], dir: &Path) {
    type Slot = (AuthorityIndex, AccountKey, u64, VoteKind, u32);
    let mut votes: BTreeMap<Slot, BTreeMap<[u8; 32], (TransferOrder, Vote)>> = BTreeMap::new();
    for observation in observations {
        let order = match &observation.request {
            Request::Transfer(order) => order,
            Request::Propose(proposal) => &proposal.order,
            Request::Lock(lock) => &lock.order,
            _ => continue,
        };
        let AuthorityReply::Voted(vote) = &observation.reply else {
            continue;
        };
        let statement = vote.statement;
        if vote.authority != observation.authority
            || statement.order_digest != order.order.digest()
            || vote.check(committee, &statement).is_err()
        {
            continue;
        }
        let order = &order.order;
        let slot = (
            vote.authority,
            order.sender,
            order.sequence,
            statement.kind,
            statement.round,
        );
        let by_order = votes.entry(slot).or_default();
        by_order.insert(statement.order_digest, (order.clone(), vote.clone()));
    }
    let signed_vote = |(order, vote): &(TransferOrder, Vote)| SignedVote {
        order: order.clone(),
        kind: vote.statement.kind,
        round: vote.statement.round,
        signature: vote.signature,
    };
    let double_votes: Vec<DoubleVote> = votes
        .iter()
        .filter(|(_, by_order)| by_order.len() > 1)
        .map(|(&(authority, ..), by_order)| {
            let mut signed = by_order.values().map(signed_vote);
            DoubleVote {
                authority,
                first: signed.next().unwrap(),
                second: signed.next().unwrap(),
            }
        })
        .collect();
    let signers: BTreeSet<AuthorityIndex> = double_votes.iter().map(|d| d.authority).collect();
    assert_eq!(signers, BTreeSet::from([LIAR]), "{double_votes:?}");

    let check = |double_votes: Vec<DoubleVote>, name: &str| {
        let evidence = Evidence {
            committee: committee.clone(),
            double_votes,
            broken_promises: Vec::new(),
        };
        let mut bytes = vec![];
        evidence.encode_to(&mut bytes);
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let output = std::process::Command::new(BIN)
            .args(["byzantine", "check-evidence", path.to_str().unwrap()])
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).to_string(),
        )
    };
    let (code, stdout) = check(double_votes.clone(), "received.evidence");
    assert_eq!(code, Some(0), "{stdout}");
    let convicted: Vec<&str> = stdout.lines().filter(|l| l.starts_with("convicted:")).collect();
    assert_eq!(convicted.len(), 1, "{stdout}");
    assert!(
        convicted[0].starts_with(&format!("convicted: authority {LIAR} ")),
        "{stdout}"
    );
    for honest in HONEST {
        let framed = double_votes
            .iter()
            .map(|d| DoubleVote {
                authority: honest,
                ..d.clone()
            })
            .collect();
        let (code, stdout) = check(framed, "framed.evidence");
        assert_eq!(code, Some(1), "authority {honest} framed: {stdout}");
        assert!(!stdout.contains("convicted:"), "{stdout}");
    }
}

/// No honest authority saw two conflicting final certificates: none wrote evidence. (With one
/// liar there can be none: two quorums share two authorities, one of them honest.)
fn check_no_honest_evidence(topology: &Topology) {
    for group in topology.authority_groups() {
        for replica in &group.replicas {
            let data = topology.data_dir.join(format!("{}-{}", group.name, replica.id));
            assert!(data.is_dir(), "no {}", data.display());
            let evidence = data.join("evidence");
            let files: Vec<_> = std::fs::read_dir(&evidence)
                .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
                .unwrap_or_default();
            let equivocations: Vec<_> = files
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "evidence"))
                .collect();
            assert!(equivocations.is_empty(), "{}: {equivocations:?}", group.name);
        }
    }
}
