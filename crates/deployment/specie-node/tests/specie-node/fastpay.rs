//! The embedded node as FastPay's Primary, end to end through the HTTP API (`docs/api.md`): a
//! funding takes value out of core circulation and leaves its marker in the UHS, and a
//! certificate for a transfer to the core is redeemed exactly once, however often and in
//! whatever form it is presented again.

use std::time::Duration;

use secp256k1::Keypair;
use serde_json::{json, Value};
use specie_codec::Encode;
use specie_fastpay::test_support::SigningCommittee;
use specie_fastpay::{
    deterministic_key, AccountKey, Certificate, Committee, CoreAddress, Recipient, SignedOrder, SigningKey,
    TransferOrder,
};
use specie_fastpay_primary::{fastpay_redeem_marker, FastpayFunding, FastpayRedeem};
use specie_node::{EmbeddedNode, NodeOptions};
use specie_service::HttpLimits;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction,
    UhsId,
};

/// A running node with a FastPay committee, and its API. Fields drop in order: the server
/// stops before the node.
struct Server {
    base: String,
    agent: ureq::Agent,
    runtime: tokio::runtime::Runtime,
    node: EmbeddedNode,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(issuer: &Keypair, committee: Option<Committee>) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut options = NodeOptions::new(dir.path());
        options.shards = Some(2);
        options.issuers = vec![hex::encode(xonly_bytes(issuer))];
        options.fastpay_committee = committee;
        let node = EmbeddedNode::open(options).expect("node opens");
        let router = specie_api::api::router(node.handle());
        let (runtime, address) =
            specie_service::server::serve_on_loopback(router, HttpLimits::default()).expect("serve on 127.0.0.1");
        Server {
            base: format!("http://{address}"),
            agent: ureq::AgentBuilder::new().timeout(Duration::from_secs(30)).build(),
            runtime,
            node,
            _dir: dir,
        }
    }

    fn post(&self, path: &str, body: &Value) -> Value {
        let response = self
            .agent
            .post(&format!("{}{path}", self.base))
            .set("content-type", "application/json")
            .send_string(&body.to_string())
            .unwrap_or_else(|error| panic!("POST {path}: {error}"));
        assert_eq!(response.status(), 200);
        serde_json::from_str(&response.into_string().expect("body is text")).expect("body is JSON")
    }

    /// Submits one transaction as hex, as a wallet would, and returns its result.
    fn submit(&self, tx: &SpecieTransaction) -> Value {
        let body = self.post(
            "/v1/transactions",
            &json!({ "transactions": [hex::encode(tx.encode())] }),
        );
        let result = body["results"][0].clone();
        assert_eq!(result["txid"], tx.txid().to_string(), "{result}");
        result
    }

    fn present(&self, ids: &[UhsId]) -> Vec<bool> {
        let ids: Vec<String> = ids.iter().map(|id| hex::encode(id.0)).collect();
        let body = self.post("/v1/uhs/query", &json!({ "ids": ids }));
        body["present"]
            .as_array()
            .expect("present array")
            .iter()
            .map(|present| present.as_bool().expect("bool"))
            .collect()
    }

    fn stop(self) {
        let Server { runtime, node, .. } = self;
        runtime.shutdown_timeout(Duration::from_secs(5));
        node.shutdown();
    }
}

fn key(byte: u8) -> Keypair {
    keypair_from_secret(&[byte; 32]).expect("a valid secret")
}

fn pay_to(owner: &Keypair, value: u64) -> Output {
    Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(owner)),
        value,
    }
}

fn confirmed(result: &Value) {
    assert_eq!(result["status"], "confirmed", "{result}");
}

fn refused(result: &Value, status: &str, code: &str) {
    assert_eq!(result["status"], status, "{result}");
    assert_eq!(result["code"], code, "{result}");
}

/// The committee's authorities, which certify whatever the test asks them to.
struct Authorities {
    signing: SigningCommittee,
    committee: Committee,
}

impl Authorities {
    fn new(n: usize) -> Authorities {
        let signing = SigningCommittee::deterministic(n, 0);
        let committee = signing.committee.clone();
        Authorities { signing, committee }
    }

    /// `owner`'s transfer `sequence`.
    fn order(owner: &SigningKey, recipient: Recipient, amount: u64, sequence: u64) -> SignedOrder {
        TransferOrder {
            sender: AccountKey(owner.verifying_key().to_bytes()),
            recipient,
            amount,
            sequence,
            memo: b"to the core".to_vec(),
        }
        .sign(owner)
    }

    /// A certificate of `owner`'s transfer `sequence`: the commit votes of `signers` (final if
    /// they are a quorum).
    fn certify(
        &self,
        owner: &SigningKey,
        recipient: Recipient,
        amount: u64,
        sequence: u64,
        signers: &[u16],
    ) -> Certificate {
        let order = Authorities::order(owner, recipient, amount, sequence);
        self.signing.commit_certificate(0, &order, signers)
    }
}

#[test]
fn fund_then_redeem_exactly_once_through_the_api() {
    let (issuer, alice, bob, carol) = (key(0x03), key(0x01), key(0x02), key(0x05));
    let authorities = Authorities::new(4);
    let server = Server::start(&issuer, Some(authorities.committee.clone()));
    let owner = deterministic_key("account", 0);
    let account = AccountKey(owner.verifying_key().to_bytes());

    // Mint 100 to alice.
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [0x11; 32],
        vec![pay_to(&alice, 100)],
        &issuer,
        NonceMode::Randomized,
    ));
    confirmed(&server.submit(&mint));
    let minted = mint.created_outputs()[0];

    // Fund the account with 60 of it: the input is gone, the change and the marker are there.
    let funding = FastpayFunding::new_signed(
        authorities.committee.id(),
        account,
        60,
        vec![minted.to_input()],
        vec![pay_to(&alice, 40)],
        std::slice::from_ref(&alice),
        NonceMode::Randomized,
    )
    .unwrap();
    let claim = funding.claim();
    assert_eq!((claim.account, claim.amount), (account, 60));
    let funding = SpecieTransaction::from(funding);
    let change = funding.created_outputs()[0];
    assert_eq!(server.present(&[change.uhs_id, claim.marker]), vec![false, false]);
    confirmed(&server.submit(&funding));
    assert_eq!(
        server.present(&[minted.uhs_id, change.uhs_id, claim.marker]),
        vec![false, true, true]
    );
    // Replayed, the funding's input is spent.
    refused(&server.submit(&funding), "rejected", "input_spent_or_unknown");

    // The account's transfer 0 pays 25 to bob's core address; a quorum certifies it.
    let to_bob = Recipient::Core(CoreAddress(pay_to(&bob, 1).witness_program_commitment));
    let certificate = authorities.certify(&owner, to_bob, 25, 0, &[0, 1, 2]);
    let redeem = SpecieTransaction::from(FastpayRedeem::new(certificate));
    let redeemed: CreatedOutput = redeem.created_outputs()[0];
    assert_eq!(redeemed.output, pay_to(&bob, 25));
    let marker = fastpay_redeem_marker(&account, 0);
    assert_eq!(redeem.marker(), Some(marker));
    confirmed(&server.submit(&redeem));
    assert_eq!(server.present(&[redeemed.uhs_id, marker]), vec![true, true]);

    // Presented again at once: refused (the output and the marker exist).
    refused(&server.submit(&redeem), "rejected", "output_already_exists");

    // Bob spends the redeemed output like any other.
    let mut spend = Transaction {
        inputs: vec![redeemed.to_input()],
        outputs: vec![pay_to(&carol, 25)],
        witnesses: vec![],
    };
    spend.sign(std::slice::from_ref(&bob), NonceMode::Randomized).unwrap();
    let spend = SpecieTransaction::Transfer(spend);
    confirmed(&server.submit(&spend));
    assert_eq!(
        server.present(&[redeemed.uhs_id, spend.created_outputs()[0].uhs_id, marker]),
        vec![false, true, true]
    );

    // Presented again after the output is spent: still refused, by the marker alone.
    refused(&server.submit(&redeem), "rejected", "output_already_exists");
    assert!(
        !server.present(&[redeemed.uhs_id])[0],
        "the spent output was not re-created"
    );

    // Another quorum's certificate of the same order, and a certificate of another order for the
    // same (sender, sequence): both refused.
    let other_quorum = authorities.certify(&owner, to_bob, 25, 0, &[1, 2, 3]);
    let other_quorum = SpecieTransaction::from(FastpayRedeem::new(other_quorum));
    assert_eq!(other_quorum.txid(), redeem.txid());
    refused(&server.submit(&other_quorum), "rejected", "output_already_exists");
    let to_carol = Recipient::Core(CoreAddress(pay_to(&carol, 1).witness_program_commitment));
    let conflicting = authorities.certify(&owner, to_carol, 35, 0, &[0, 1, 2]);
    let conflicting = SpecieTransaction::from(FastpayRedeem::new(conflicting));
    assert_ne!(conflicting.txid(), redeem.txid());
    refused(&server.submit(&conflicting), "rejected", "output_already_exists");
    assert!(!server.present(&[conflicting.created_outputs()[0].uhs_id])[0]);

    // The account's next transfer redeems; a certificate below quorum is invalid.
    let next = authorities.certify(&owner, to_bob, 5, 1, &[0, 2, 3]);
    confirmed(&server.submit(&SpecieTransaction::from(FastpayRedeem::new(next))));
    let below_quorum = authorities.certify(&owner, to_bob, 5, 2, &[0, 3]);
    let result = server.submit(&SpecieTransaction::from(FastpayRedeem::new(below_quorum)));
    refused(&result, "invalid", "certificate_below_quorum");
    // Prepare votes: a quorum of them is only a lock, and a later round's are never final.
    let order = Authorities::order(&owner, to_bob, 5, 2);
    let lock = authorities.signing.lock_certificate(0, &order, &[0, 1, 2]);
    let result = server.submit(&SpecieTransaction::from(FastpayRedeem::new(lock)));
    refused(&result, "invalid", "certificate_below_quorum");
    let round_one = authorities.signing.lock_certificate(1, &order, &[0, 1, 2, 3]);
    let result = server.submit(&SpecieTransaction::from(FastpayRedeem::new(round_one)));
    refused(&result, "invalid", "certificate_not_final");
    // Every authority's round-0 vote is final: the fast path.
    let fast = authorities.signing.final_certificate(&order);
    confirmed(&server.submit(&SpecieTransaction::from(FastpayRedeem::new(fast))));
    server.stop();
}

#[test]
fn a_node_without_a_committee_refuses_fundings_and_redeems() {
    let (issuer, alice, bob) = (key(0x03), key(0x01), key(0x02));
    let authorities = Authorities::new(4);
    let server = Server::start(&issuer, None);
    let owner = deterministic_key("account", 0);
    let funding = FastpayFunding::new_signed(
        authorities.committee.id(),
        AccountKey(owner.verifying_key().to_bytes()),
        10,
        vec![CreatedOutput {
            outpoint: Default::default(),
            output: pay_to(&alice, 10),
            uhs_id: UhsId::default(),
        }
        .to_input()],
        vec![],
        std::slice::from_ref(&alice),
        NonceMode::Randomized,
    )
    .unwrap();
    let result = server.submit(&SpecieTransaction::from(funding));
    refused(&result, "invalid", "no_fastpay_committee");
    let to_bob = Recipient::Core(CoreAddress(pay_to(&bob, 1).witness_program_commitment));
    let certificate = authorities.certify(&owner, to_bob, 25, 0, &[0, 1, 2]);
    let result = server.submit(&SpecieTransaction::from(FastpayRedeem::new(certificate)));
    refused(&result, "invalid", "no_fastpay_committee");
    server.stop();
}
