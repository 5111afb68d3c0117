//! End-to-end tests of the HTTP API (`docs/api.md`): an embedded node served by
//! `specie_service::server` on a loopback port, driven with a blocking HTTP client from the
//! test thread.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use secp256k1::{Keypair, SECP256K1};
use serde_json::{json, Value};
use specie_codec::{Decode, Encode};
use specie_node::{EmbeddedNode, NodeOptions};
use specie_service::HttpLimits;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction,
    UhsId,
};

/// A running node and its API. Fields drop in order: the server stops before the node.
struct Server {
    base: String,
    agent: ureq::Agent,
    runtime: tokio::runtime::Runtime,
    node: EmbeddedNode,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(issuer: &Keypair) -> Server {
        Server::start_with(issuer, true)
    }

    fn start_with(issuer: &Keypair, ledger_of_record: bool) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = NodeOptions::new(dir.path());
        options.shards = Some(2);
        options.ledger_of_record = Some(ledger_of_record);
        options.issuers = vec![hex::encode(xonly_bytes(issuer))];
        let node = EmbeddedNode::open(options).expect("node opens");
        let router = specie_api::api::router(node.handle());
        let (runtime, address) =
            specie_service::server::serve_on_loopback(router, HttpLimits::default()).expect("serve on 127.0.0.1");
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build();
        Server {
            base: format!("http://{address}"),
            agent,
            runtime,
            node,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn get(&self, path: &str) -> (u16, Value) {
        respond(self.agent.get(&self.url(path)).call())
    }

    /// POSTs `body` verbatim as `application/json`.
    fn post_raw(&self, path: &str, body: &str) -> (u16, Value) {
        respond(
            self.agent
                .post(&self.url(path))
                .set("content-type", "application/json")
                .send_string(body),
        )
    }

    fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_raw(path, &body.to_string())
    }

    /// Submits transactions and returns their results, checking the response's shape.
    fn submit(&self, txs: &[String]) -> Vec<Value> {
        let (status, body) = self.post("/v1/transactions", &json!({ "transactions": txs }));
        assert_eq!(status, 200, "{body}");
        let results = body["results"].as_array().expect("results array").clone();
        assert_eq!(results.len(), txs.len(), "{body}");
        results
    }

    fn submit_one(&self, tx: &SpecieTransaction) -> Value {
        self.submit(&[hex::encode(tx.encode())]).remove(0)
    }

    fn present(&self, ids: &[String]) -> Vec<bool> {
        let (status, body) = self.post("/v1/uhs/query", &json!({ "ids": ids }));
        assert_eq!(status, 200, "{body}");
        let present: Vec<bool> = body["present"]
            .as_array()
            .expect("present array")
            .iter()
            .map(|p| p.as_bool().expect("bool"))
            .collect();
        assert_eq!(present.len(), ids.len());
        present
    }

    fn present_one(&self, id: &str) -> bool {
        let (status, body) = self.get(&format!("/v1/uhs/{id}"));
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["id"], id, "{body}");
        body["present"].as_bool().expect("present is a bool")
    }

    fn info(&self) -> Value {
        let (status, body) = self.get("/v1/info");
        assert_eq!(status, 200, "{body}");
        body
    }
}

/// Status and JSON body of a response, whatever its status.
fn respond(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    let response = match result {
        Ok(response) => response,
        Err(ureq::Error::Status(_, response)) => response,
        Err(error) => panic!("transport error: {error}"),
    };
    let status = response.status();
    let text = response.into_string().expect("body is text");
    let body =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("status {status}: body is not JSON ({e}): {text:?}"));
    (status, body)
}

/// Asserts the documented error shape `{"error": {"code", "message"}}` and nothing else.
fn assert_error(response: (u16, Value), status: u16, code: &str) {
    let (got_status, body) = response;
    assert_eq!(got_status, status, "{body}");
    let error = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("no error object: {body}"));
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert_eq!(error.len(), 2, "{body}");
    assert_eq!(error["code"], code, "{body}");
    let message = error["message"].as_str().expect("message is a string");
    assert!(!message.trim().is_empty(), "{body}");
}

fn keypair() -> Keypair {
    Keypair::new(SECP256K1, &mut rand::thread_rng())
}

fn pay_to(owner: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(owner)),
        value,
    }
}

fn transfer(inputs: &[CreatedOutput], outputs: Vec<Output>, owners: &[Keypair]) -> SpecieTransaction {
    let mut tx = Transaction {
        inputs: inputs.iter().map(CreatedOutput::to_input).collect(),
        outputs,
        witnesses: vec![],
    };
    tx.sign(owners, NonceMode::Randomized).expect("keys match inputs");
    SpecieTransaction::Transfer(tx)
}

/// The shard of a 2-shard node that owns `id`: `ShardRange::partition(2)` splits the buckets
/// (the id's first two bytes) in half.
fn shard_of(id: &UhsId) -> usize {
    usize::from(id.0[0] >> 7)
}

fn ids(created: &[CreatedOutput]) -> Vec<String> {
    created.iter().map(|c| hex::encode(c.uhs_id.0)).collect()
}

#[test]
fn api_end_to_end() {
    let issuer = keypair();
    let server = Server::start(&issuer);

    let info = server.info();
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"), "{info}");
    assert_eq!(info["hrp"], "usd", "{info}");
    assert_eq!(info["shards"], 2, "{info}");
    assert_eq!(info["issuers"], json!([hex::encode(xonly_bytes(&issuer))]), "{info}");
    assert_eq!(info["uhs_ids"], 0, "{info}");

    let (confirmed, refused) = check_transactions(&server, &issuer);
    check_ledger_of_record(&server, &confirmed, &refused);
    check_watchtower(&server, &confirmed, &refused);
    let (status, digest) = server.get("/v1/uhs/digest");
    assert_eq!(status, 200, "{digest}");
    assert_eq!(digest["ids"], server.info()["uhs_ids"], "{digest}");
    let sha = digest["sha256_sorted"].as_str().expect("digest is a string");
    assert!(sha.len() == 64 && hex::decode(sha).is_ok(), "{digest}");
    check_error_paths(&server);

    // Still up and still answering after every malformed request.
    let info = server.info();
    assert_eq!(info["shards"], 2, "{info}");
    let Server { runtime, node, .. } = server;
    runtime.shutdown_timeout(Duration::from_secs(5));
    node.shutdown();
}

/// Submits transactions of every outcome; returns the txids confirmed and those refused.
fn check_transactions(server: &Server, issuer: &Keypair) -> (Vec<String>, Vec<String>) {
    let alice = keypair();
    let bob = keypair();

    // A valid mint: three outputs to alice.
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rand::random(),
        vec![pay_to(&alice, 100), pay_to(&alice, 50), pay_to(&alice, 25)],
        issuer,
        NonceMode::Randomized,
    ));
    let minted = mint.created_outputs();
    let minted_ids = ids(&minted);
    assert_eq!(server.present(&minted_ids), vec![false; 3]);
    let result = server.submit_one(&mint);
    assert_eq!(result, json!({"txid": mint.txid().to_string(), "status": "confirmed"}));
    assert_eq!(server.present(&minted_ids), vec![true; 3]);
    // Three outputs plus the mint's replay marker.
    assert_eq!(server.info()["uhs_ids"], 4);

    // A valid transfer: alice pays bob part of her 100, the rest back to herself. The split is
    // chosen so that its input and both outputs live on one shard, which makes the reason its
    // replay is refused deterministic (see `replay_across_shards` below).
    let pay = (1..100)
        .map(|to_bob| {
            transfer(
                &minted[..1],
                vec![pay_to(&bob, to_bob), pay_to(&alice, 100 - to_bob)],
                std::slice::from_ref(&alice),
            )
        })
        .find(|tx| {
            let shard = shard_of(&minted[0].uhs_id);
            tx.created_outputs().iter().all(|c| shard_of(&c.uhs_id) == shard)
        })
        .expect("some split puts everything on one shard");
    let paid = pay.created_outputs();
    let result = server.submit_one(&pay);
    assert_eq!(result, json!({"txid": pay.txid().to_string(), "status": "confirmed"}));
    assert_eq!(
        server.present(&[minted_ids[0].clone(), ids(&paid)[0].clone(), ids(&paid)[1].clone()]),
        vec![false, true, true]
    );
    for id in ids(&paid) {
        assert!(server.present_one(&id), "{id} is missing");
    }
    assert!(!server.present_one(&minted_ids[0]), "a spent output is still present");
    assert_eq!(server.info()["uhs_ids"], 5);

    // Replaying the transfer: its input is gone (the shard checks inputs before outputs).
    let result = server.submit_one(&pay);
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["code"], "input_spent_or_unknown", "{result}");
    assert_eq!(result["txid"], pay.txid().to_string(), "{result}");
    assert!(result["message"].as_str().is_some_and(|m| !m.is_empty()), "{result}");

    // A 2-in transfer whose second witness has a corrupted signature.
    let mut forged = transfer(&minted[1..3], vec![pay_to(&bob, 75)], &[alice, alice]);
    let SpecieTransaction::Transfer(tx) = &mut forged else {
        unreachable!()
    };
    *tx.witnesses[1].0.last_mut().unwrap() ^= 0x01;
    let result = server.submit_one(&forged);
    assert_eq!(result["status"], "invalid", "{result}");
    assert_eq!(result["code"], "invalid_signature", "{result}");
    assert_eq!(result["index"], 1, "{result}");
    assert_eq!(result["txid"], forged.txid().to_string(), "{result}");
    assert!(result["message"].as_str().is_some_and(|m| !m.is_empty()), "{result}");
    // Nothing was applied: alice's other two coins are still there, bob's is not.
    assert_eq!(server.present(&minted_ids[1..]), vec![true, true]);
    assert_eq!(server.present(&ids(&forged.created_outputs())), vec![false]);

    // Replaying the mint: its outputs (and marker) already exist... or were spent; the marker
    // refuses it forever either way.
    let result = server.submit_one(&mint);
    assert_eq!(result["status"], "rejected", "{result}");
    assert_eq!(result["code"], "output_already_exists", "{result}");
    assert!(
        !server.present_one(&minted_ids[0]),
        "a replayed mint resurrected a spent output"
    );

    // Undecodable transactions (hex, but not a transaction), mixed with a valid one, in one
    // request: results come back in order.
    let spend_bob = transfer(
        &paid[..1],
        vec![pay_to(&alice, paid[0].output.value)],
        std::slice::from_ref(&bob),
    );
    let results = server.submit(&[
        "deadbeef".to_string(),
        hex::encode(spend_bob.encode()),
        "00".repeat(300),
        String::new(),
    ]);
    assert_eq!(results[0]["status"], "malformed", "{results:?}");
    assert_eq!(results[0]["code"], "decode_error", "{results:?}");
    assert_eq!(results[0]["txid"], Value::Null, "{results:?}");
    assert_eq!(
        results[1],
        json!({"txid": spend_bob.txid().to_string(), "status": "confirmed"})
    );
    assert_eq!(results[2]["status"], "malformed", "{results:?}");
    assert_eq!(results[2]["code"], "decode_error", "{results:?}");
    assert_eq!(results[2]["txid"], Value::Null, "{results:?}");
    assert_eq!(results[3]["status"], "malformed", "{results:?}");
    assert_eq!(results[3]["code"], "decode_error", "{results:?}");
    for result in [&results[0], &results[2], &results[3]] {
        assert!(result["message"].as_str().is_some_and(|m| !m.is_empty()), "{result}");
    }

    // Replaying a transfer whose input and outputs live on different shards: refused, but the
    // reason reported is whichever shard's "no" vote reached the coordinator first.
    let replay_across_shards = (0..64)
        .map(|_| {
            let carol = keypair();
            transfer(
                &paid[1..],
                vec![pay_to(&carol, paid[1].output.value)],
                std::slice::from_ref(&alice),
            )
        })
        .find(|tx| shard_of(&tx.created_outputs()[0].uhs_id) != shard_of(&paid[1].uhs_id))
        .expect("some key puts the output on the other shard");
    assert_eq!(server.submit_one(&replay_across_shards)["status"], "confirmed");
    let result = server.submit_one(&replay_across_shards);
    assert_eq!(result["status"], "rejected", "{result}");
    let code = result["code"].as_str().unwrap_or_default();
    assert!(
        ["input_spent_or_unknown", "output_already_exists"].contains(&code),
        "{result}"
    );

    // An empty list is a valid request with no results.
    assert!(server.submit(&[]).is_empty());
    let confirmed = [&mint, &pay, &spend_bob, &replay_across_shards];
    (
        confirmed.iter().map(|tx| tx.txid().to_string()).collect(),
        vec![forged.txid().to_string()],
    )
}

/// The ledger of record holds exactly the confirmed transactions, each with a proof, and its
/// blocks replay to the shards' UHS; bad requests get clear errors.
fn check_ledger_of_record(server: &Server, confirmed: &[String], refused: &[String]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let head = loop {
        let (status, head) = server.get("/v1/ledger");
        assert_eq!(status, 200, "{head}");
        if head["waiting"] == 0 && head["undecided"] == 0 {
            break head;
        }
        assert!(std::time::Instant::now() < deadline, "the ledger never settled: {head}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let (_, digest) = server.get("/v1/uhs/digest");
    assert_eq!(head["uhs_ids"], digest["ids"], "{head} {digest}");
    assert_eq!(head["uhs_sha256_sorted"], digest["sha256_sorted"], "{head} {digest}");
    let height = head["height"].as_u64().expect("height");
    let mut in_blocks = vec![];
    let mut previous = "00".repeat(32);
    for h in 1..=height {
        let (status, block) = server.get(&format!("/v1/ledger/blocks/{h}"));
        assert_eq!(status, 200, "{block}");
        assert_eq!(block["header"]["height"], h, "{block}");
        assert_eq!(block["header"]["previous"], previous.as_str(), "{block}");
        previous = block["header"]["hash"].as_str().unwrap().to_string();
        in_blocks.extend(
            block["txids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string()),
        );
    }
    assert_eq!(head["head"]["hash"], previous.as_str(), "{head}");
    in_blocks.sort();
    let mut expected = confirmed.to_vec();
    expected.sort();
    assert_eq!(in_blocks, expected, "every confirmed transaction once, nothing else");
    for txid in confirmed {
        let (status, entry) = server.get(&format!("/v1/ledger/transactions/{txid}"));
        assert_eq!(status, 200, "{entry}");
        assert_eq!(entry["txid"], txid.as_str(), "{entry}");
        assert!(entry["proof"].as_str().is_some_and(|p| !p.is_empty()), "{entry}");
    }
    for txid in refused {
        assert_error(
            server.get(&format!("/v1/ledger/transactions/{txid}")),
            404,
            "not_in_ledger",
        );
    }
    check_disputes(server, &confirmed[0], &refused[0], height, &previous);
    assert_error(server.get("/v1/ledger/blocks/0"), 400, "bad_height");
    assert_error(server.get("/v1/ledger/blocks/-1"), 400, "bad_height");
    assert_error(
        server.get(&format!("/v1/ledger/blocks/{}", height + 1)),
        404,
        "no_such_block",
    );
    assert_error(server.get("/v1/ledger/transactions/zz"), 400, "bad_hex");
}

/// The watchtower answers each transaction's outcome: confirmed ones stay confirmed (a refused
/// replay of one does not hide it), a forged one is invalid, a stranger is unknown.
fn check_watchtower(server: &Server, confirmed: &[String], refused: &[String]) {
    for txid in confirmed {
        let (status, answer) = server.get(&format!("/v1/transactions/{txid}"));
        assert_eq!((status, &answer["status"]), (200, &json!("confirmed")), "{answer}");
    }
    let (status, answer) = server.get(&format!("/v1/transactions/{}", refused[0]));
    assert_eq!((status, &answer["status"]), (200, &json!("invalid")), "{answer}");
    assert!(answer["code"].as_str().is_some_and(|c| !c.is_empty()), "{answer}");
    let stranger = "ab".repeat(32);
    assert_error(
        server.get(&format!("/v1/transactions/{stranger}")),
        404,
        "unknown_transaction",
    );
    assert_error(server.get("/v1/transactions/zz"), 400, "bad_hex");
}

/// Dispute proofs: a confirmed transaction is in the ledger at the head, and in no block before
/// its own; a refused one is in none. Each proof is checked here, with the headers it carries,
/// and ends at the head the node published.
fn check_disputes(server: &Server, confirmed: &str, refused: &str, height: u64, head: &str) {
    let dispute = |txid: &str, at: Option<u64>| {
        let query = at.map(|h| format!("?height={h}")).unwrap_or_default();
        let (status, answer) = server.get(&format!("/v1/ledger/disputes/{txid}{query}"));
        assert_eq!(status, 200, "{answer}");
        let bytes = hex::decode(answer["proof"].as_str().unwrap()).unwrap();
        let verdict = specie_archiver::DisputeProof::decode_exact(&bytes)
            .unwrap()
            .check()
            .unwrap();
        assert_eq!(answer["included"], verdict.located.is_some(), "{answer}");
        assert_eq!(answer["head"], hex::encode(verdict.head), "{answer}");
        (verdict, answer)
    };
    let (verdict, answer) = dispute(confirmed, None);
    assert_eq!(
        (verdict.height, hex::encode(verdict.head)),
        (height, head.to_string()),
        "{answer}"
    );
    let block = verdict
        .located
        .expect("a confirmed transaction is in the ledger")
        .height;
    let (before, _) = dispute(confirmed, Some(block - 1));
    assert_eq!(
        (before.located, before.height),
        (None, block - 1),
        "in no block before its own"
    );
    let (absent, _) = dispute(refused, None);
    assert_eq!(absent.located, None);
    let beyond = format!("/v1/ledger/disputes/{confirmed}?height={}", height + 1);
    assert_error(server.get(&beyond), 404, "no_such_block");
    assert_error(
        server.get(&format!("/v1/ledger/disputes/{confirmed}?height=x")),
        400,
        "bad_height",
    );
}

#[test]
fn a_node_without_the_ledger_of_record_says_so() {
    let server = Server::start_with(&keypair(), false);
    assert_error(server.get("/v1/ledger"), 404, "no_ledger_of_record");
    assert_error(server.get("/v1/ledger/blocks/1"), 404, "no_ledger_of_record");
    assert_error(
        server.get(&format!("/v1/ledger/transactions/{}", "00".repeat(32))),
        404,
        "no_ledger_of_record",
    );
}

/// A body over the limit is answered 413 `body_too_large`. The server may answer from the
/// content length and close while the client still writes, and the client then sees the
/// connection reset instead of the answer: so a few tries, never another answer, and the 413 at
/// least once.
fn assert_too_large(server: &Server, path: &str, body: &str) {
    let mut answered = 0;
    for _ in 0..5 {
        let sent = server
            .agent
            .post(&server.url(path))
            .set("content-type", "application/json")
            .send_string(body);
        if let Ok(_) | Err(ureq::Error::Status(..)) = &sent {
            assert_error(respond(sent), 413, "body_too_large");
            answered += 1;
        }
    }
    assert!(
        answered > 0,
        "{path}: never answered 413, the connection was cut every time"
    );
}

fn check_error_paths(server: &Server) {
    let zero_id = "00".repeat(32);

    // Body over 4 MiB.
    let big = format!(r#"{{"transactions": ["{}"]}}"#, "0".repeat(4 * 1024 * 1024 + 2));
    assert_too_large(server, "/v1/transactions", &big);
    let big = format!(r#"{{"ids": ["{}"]}}"#, "0".repeat(4 * 1024 * 1024 + 2));
    assert_too_large(server, "/v1/uhs/query", &big);
    // Also when the client streams it without a content-length.
    let answers: Vec<(u16, Value)> = (0..5)
        .filter_map(|_| post_chunked(server, "/v1/transactions", &big))
        .collect();
    assert!(!answers.is_empty(), "never answered, the connection was cut every time");
    answers
        .into_iter()
        .for_each(|answer| assert_error(answer, 413, "body_too_large"));

    for path in ["/v1/transactions", "/v1/uhs/query"] {
        // Not JSON, wrong shape, unknown field, missing field.
        for body in [
            "",
            "not json",
            "{\"transactions\": [",
            "[]",
            "{}",
            "{\"transactions\": \"00\"}",
            "{\"transactions\": [1, 2]}",
            "{\"ids\": \"00\"}",
            "{\"ids\": [null]}",
            "{\"transactions\": [], \"ids\": [], \"extra\": 1}",
        ] {
            let response = server.post_raw(path, body);
            assert_error(response, 400, "bad_json");
        }
    }
    assert_error(
        server.post_raw("/v1/transactions", r#"{"transactions": [], "extra": 1}"#),
        400,
        "bad_json",
    );
    assert_error(
        server.post_raw("/v1/transactions", r#"{"transactions": [], "timeout_ms": -1}"#),
        400,
        "bad_json",
    );
    assert_error(
        server.post_raw("/v1/uhs/query", r#"{"ids": [], "extra": 1}"#),
        400,
        "bad_json",
    );
    // JSON without the JSON content type.
    let response = respond(
        server
            .agent
            .post(&server.url("/v1/uhs/query"))
            .set("content-type", "text/plain")
            .send_string(r#"{"ids": []}"#),
    );
    assert_error(response, 400, "bad_json");

    // Lists over their limits.
    let txs = vec!["00"; 1001];
    assert_error(
        server.post("/v1/transactions", &json!({ "transactions": txs })),
        400,
        "too_many",
    );
    let ids = vec![zero_id.as_str(); 10_001];
    assert_error(server.post("/v1/uhs/query", &json!({ "ids": ids })), 400, "too_many");
    // At the limit is fine.
    let ids = vec![zero_id.as_str(); 10_000];
    let (status, body) = server.post("/v1/uhs/query", &json!({ "ids": ids }));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["present"].as_array().map(Vec::len), Some(10_000));

    // Ids of the wrong length or not hex.
    let bad_ids = [
        "00".repeat(31),
        "00".repeat(33),
        "0".repeat(63),
        "zz".repeat(32),
        String::new(),
    ];
    for bad in &bad_ids {
        assert_error(
            server.post("/v1/uhs/query", &json!({ "ids": [zero_id, bad] })),
            400,
            "bad_hex",
        );
    }
    for bad in &bad_ids[..4] {
        assert_error(server.get(&format!("/v1/uhs/{bad}")), 400, "bad_hex");
    }
    assert!(!server.present_one(&zero_id));

    // Unknown paths.
    for path in ["/", "/v1", "/v1/nope", "/v2/info", "/v1/uhs/00/extra", "/v1/info/"] {
        assert_error(server.get(path), 404, "not_found");
    }
    assert_error(server.post("/v1/nope", &json!({})), 404, "not_found");
}

/// POSTs `body` with `transfer-encoding: chunked` (no content-length) over a raw socket.
/// `None` if the connection was cut before any answer arrived (see `assert_too_large`).
fn post_chunked(server: &Server, path: &str, body: &str) -> Option<(u16, Value)> {
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("write head");
    // The server may answer and close before it has read everything: stop writing then.
    for chunk in body.as_bytes().chunks(64 * 1024) {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        if stream.write_all(&framed).is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n");
    let mut response = Vec::new();
    let _ = stream.read_to_end(&mut response);
    if response.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(&response);
    let (head, rest) = text.split_once("\r\n\r\n").expect("a complete response head");
    let status: u16 = head.split(' ').nth(1).and_then(|s| s.parse().ok()).expect("status");
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("status {status}: not JSON ({e}): {body:?}"));
    Some((status, json))
}

fn dechunk(mut text: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = text.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        text = &rest[size + 2..];
    }
    out
}

/// docs/api.md: "Any 4xx/5xx carries {"error": {...}}", including a known route called with the
/// wrong method (axum's default 405 would have an empty body).
#[test]
fn wrong_method_gets_the_json_error_shape() {
    let server = Server::start(&keypair());
    for (method, path) in [
        ("GET", "/v1/transactions"),
        ("POST", "/v1/info"),
        ("GET", "/v1/uhs/query"),
    ] {
        let response = respond(server.agent.request(method, &server.url(path)).call());
        assert_eq!(response.0, 405, "{method} {path}: {}", response.1);
        assert!(
            response.1["error"]["code"].is_string(),
            "{method} {path}: {}",
            response.1
        );
    }
}

/// Asserts a 400 `bad_hex` whose message names `field`.
fn assert_bad_hex(response: (u16, Value), field: &str) {
    let message = response.1["error"]["message"].as_str().unwrap_or_default().to_string();
    assert_error(response, 400, "bad_hex");
    assert!(message.contains(field), "{message:?} does not name {field}");
}

/// docs/api.md: every id, key and transaction is lowercase hex (0-9, a-f, two a byte, nothing
/// else); anything else is 400 `bad_hex` naming the field, and a submission with one such
/// transaction submits none of them.
#[test]
fn hex_is_lowercase_without_whitespace() {
    let issuer = keypair();
    let server = Server::start(&issuer);
    let alice = keypair();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        rand::random(),
        vec![pay_to(&alice, 10)],
        &issuer,
        NonceMode::Randomized,
    ));
    let good = hex::encode(mint.encode());
    let minted = ids(&mint.created_outputs());

    for bad in [
        good.to_uppercase(),
        format!(" {good}"),
        format!("{good}\n"),
        format!("{}\t{}", &good[..10], &good[10..]),
        format!("0x{good}"),
        good[1..].to_string(),
    ] {
        let response = server.post("/v1/transactions", &json!({ "transactions": [good, bad] }));
        assert_bad_hex(response, "transactions[1]");
    }
    let response = server.post("/v1/transactions", &json!({ "transactions": [good.to_uppercase()] }));
    assert_bad_hex(response, "uppercase");
    // Nothing was submitted, not even the good transaction beside the bad one.
    assert_eq!(server.present(&minted), vec![false]);
    assert_eq!(server.info()["uhs_ids"], 0);

    let zero_id = "00".repeat(32);
    for bad in [
        "AB".repeat(32),
        "aB".repeat(32),
        format!(" {zero_id}"),
        format!("{zero_id} "),
        format!("{zero_id}\n"),
        format!("00{}", " ".repeat(62)),
    ] {
        assert_bad_hex(
            server.post("/v1/uhs/query", &json!({ "ids": [zero_id, bad] })),
            "ids[1]",
        );
    }
    for bad in [
        "AB".repeat(32),
        format!("%20{zero_id}"),
        format!("{zero_id}%20"),
        format!("{zero_id}%0A"),
    ] {
        assert_bad_hex(server.get(&format!("/v1/uhs/{bad}")), "path");
    }

    // The canonical form works, and answers come back lowercase.
    let result = server.submit(std::slice::from_ref(&good)).remove(0);
    assert_eq!(result["status"], "confirmed", "{result}");
    let txid = result["txid"].as_str().expect("txid").to_string();
    assert_eq!(txid, txid.to_lowercase());
    assert_eq!(server.present(&minted), vec![true]);
    assert!(server.present_one(&minted[0]));
    let (_, digest) = server.get("/v1/uhs/digest");
    let sha = digest["sha256_sorted"].as_str().expect("digest");
    assert_eq!(sha, sha.to_lowercase());
}
