//! Confidential payments from wallet files against a real embedded node (its sentinel verifies
//! the proofs, its shards hold the UHS) started with one auditor, over the HTTP API, through the
//! same session functions the CLI calls: Alice shields, pays Bob confidentially, Bob receives
//! from the payment string and pays part back, Alice unshields.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use specie_confidential::{AuditorKey, AuditorSecret, Scalar};
use specie_node::{EmbeddedNode, NodeOptions};
use specie_service::HttpLimits;
use specie_transaction::SpecieTransaction;

use specie_wallet::session::{self as core_session, Submitted};
use specie_wallet::{sync, NodeClient, Outcome, Wallet, WalletFile};

use crate::session::{self, PrivacySessionError};
use crate::testkit::rng;
use crate::{ConfidentialPaymentString, ConfidentialWallet, PrivacyError};

/// A node serving its API on a loopback port. Fields drop in order: the server stops first.
pub(crate) struct Node {
    pub(crate) client: NodeClient,
    _runtime: tokio::runtime::Runtime,
    _node: EmbeddedNode,
}

fn start_node(dir: &Path, issuer: &Wallet, auditor: &AuditorKey) -> Node {
    start_node_with(dir, issuer, |options| options.auditors = vec![auditor.to_bytes()])
}

/// A node with two shards accepting `issuer`, as `configure` adds to it.
pub(crate) fn start_node_with(dir: &Path, issuer: &Wallet, configure: impl FnOnce(&mut NodeOptions)) -> Node {
    let mut options = NodeOptions::new(dir.join("node"));
    options.shards = Some(2);
    options.issuers = vec![issuer.issuer_pubkey_hex().unwrap()];
    configure(&mut options);
    let node = EmbeddedNode::open(options).expect("node opens");
    let router = specie_api::api::router(node.handle());
    let (runtime, address) =
        specie_service::server::serve_on_loopback(router, HttpLimits::default()).expect("serve on 127.0.0.1");
    Node {
        client: NodeClient::new(&format!("http://{address}")).unwrap(),
        _runtime: runtime,
        _node: node,
    }
}

pub(crate) const TIMEOUT_MS: u64 = 30_000;

/// A wallet kept in a file, as the CLI keeps it: every step loads it and saves it, so the notes
/// go through the file format each time.
pub(crate) struct Holder {
    pub(crate) path: PathBuf,
}

impl Holder {
    pub(crate) fn create(dir: &Path, name: &str, issuer: bool, rng: &mut StdRng) -> Holder {
        let path = dir.join(format!("{name}.json"));
        WalletFile::create(&path, &Wallet::new("usd", issuer, rng).unwrap()).unwrap();
        Holder { path }
    }

    pub(crate) fn load(&self) -> Wallet {
        WalletFile::load(&self.path).unwrap()
    }

    /// Builds with `build`, submits, and returns what `build` returned once confirmed.
    pub(crate) fn submit<T>(
        &self,
        node: &Node,
        build: impl FnOnce(&mut Wallet) -> (SpecieTransaction, T),
    ) -> (Outcome, T) {
        let mut wallet = self.load();
        let (tx, built) = build(&mut wallet);
        match core_session::submit(&self.path, &mut wallet, &node.client, &tx, TIMEOUT_MS).unwrap() {
            Submitted::Settled(outcome) => (outcome, built),
            Submitted::Unknown(error) => panic!("the node did not answer: {error}"),
        }
    }

    fn receive(&self, node: &Node, text: &str) -> Result<crate::ReceivedNote, PrivacySessionError> {
        session::receive_confidential(&self.path, &mut self.load(), &node.client, text)
    }

    /// (transparent spendable, confidential spendable), and nothing pending either way.
    fn holdings(&self) -> (u64, u64) {
        let wallet = self.load();
        let (clear, hidden) = (wallet.balance(), wallet.confidential_balance());
        assert_eq!((clear.pending_in, clear.pending_out), (0, 0), "{clear:?}");
        assert_eq!((hidden.pending_in, hidden.pending_out), (0, 0), "{hidden:?}");
        (clear.spendable, hidden.spendable)
    }
}

pub(crate) fn confirmed(outcome: &Outcome) -> bool {
    matches!(outcome, Outcome::Confirmed(_))
}

pub(crate) fn is_refused_as(
    result: Result<crate::ReceivedNote, PrivacySessionError>,
    expected: fn(&PrivacyError) -> bool,
) -> bool {
    match result {
        Err(PrivacySessionError::Privacy(error)) => expected(&error),
        _ => false,
    }
}

/// Mints `amount` to `holder` through `issuer`, and has `holder` import it.
pub(crate) fn fund(node: &Node, issuer: &Holder, holder: &Holder, amount: u64, rng: &mut StdRng) {
    let to = holder.load().latest_address().unwrap();
    let (outcome, minted) = issuer.submit(node, |wallet| wallet.build_mint(&[(to, amount)], rng).unwrap());
    assert!(confirmed(&outcome), "{outcome:?}");
    let text = minted.payment_string.unwrap().encode();
    core_session::import(&holder.path, &mut holder.load(), &node.client, &text).unwrap();
}

#[test]
fn shield_pay_receive_pay_back_and_unshield_against_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(70);
    let auditor = AuditorSecret::random(&mut rng);
    let issuer = Holder::create(dir.path(), "issuer", true, &mut rng);
    let node = start_node(dir.path(), &issuer.load(), &auditor.public());
    let (alice, bob) = (
        Holder::create(dir.path(), "alice", false, &mut rng),
        Holder::create(dir.path(), "bob", false, &mut rng),
    );
    fund(&node, &issuer, &alice, 1000, &mut rng);
    // The auditors come from the node's /v1/info.
    let auditors = session::auditors_for(&node.client, &[]).unwrap();
    assert_eq!(auditors, vec![auditor.public()]);

    let (outcome, shielded) = alice.submit(&node, |w| w.build_shield(600, &auditors, &mut rng).unwrap());
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!((shielded.amount, shielded.change), (600, 400));
    assert_eq!(alice.holdings(), (400, 600));

    let to_bob = bob.load().latest_address().unwrap();
    let (outcome, (tx, payment)) = alice.submit(&node, |w| {
        let (tx, payment) = w.build_confidential_payment(&to_bob, 250, &auditors, &mut rng).unwrap();
        (tx.clone(), (tx, payment))
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(alice.holdings(), (400, 350));
    let confidential = (tx.capability::<specie_private_transactions::ConfidentialTransaction>())
        .expect("a confidential payment is a confidential transaction")
        .clone();
    let mut audited = confidential.proof.audit(&auditor).unwrap();
    audited.sort_unstable();
    assert_eq!(audited, vec![250, 350], "the auditor reads both outputs");

    let text = payment.payment_string.encode();
    refuse_tampered(&node, &bob, &alice, &payment.payment_string);
    let received = bob.receive(&node, &text).unwrap();
    assert_eq!((received.value, received.already_known), (250, false));
    let again = bob.receive(&node, &text).unwrap();
    assert!(again.already_known);
    assert_eq!(bob.holdings(), (0, 250), "a second receive does not double-count");

    let to_alice = alice.load().latest_address().unwrap();
    let (outcome, back) = bob.submit(&node, |w| {
        w.build_confidential_payment(&to_alice, 100, &auditors, &mut rng)
            .unwrap()
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    alice.receive(&node, &back.payment_string.encode()).unwrap();
    assert_eq!((alice.holdings(), bob.holdings()), ((400, 450), (0, 150)));

    let (outcome, unshielded) = alice.submit(&node, |w| w.build_unshield(300, &auditors, &mut rng).unwrap());
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(unshielded.change, 150);
    assert_eq!(alice.holdings(), (700, 150));
    // The node agrees: a sync forgets nothing.
    let mut wallet = alice.load();
    let report = sync(&mut wallet, &node.client).unwrap();
    assert!(
        report.notes_missing.is_empty() && report.coins_missing.is_empty(),
        "{report:?}"
    );
    assert_eq!(wallet.confidential_balance().spendable, 150);
    let (alice_total, bob_total) = (alice.holdings(), bob.holdings());
    assert_eq!(alice_total.0 + alice_total.1 + bob_total.0 + bob_total.1, 1000);
}

/// Every altered string is refused by `receive`, and the wallet gains nothing.
fn refuse_tampered(node: &Node, bob: &Holder, alice: &Holder, genuine: &ConfidentialPaymentString) {
    let not_at_node = |error: &PrivacyError| matches!(error, PrivacyError::NoteNotAtNode { .. });
    let mut more = *genuine;
    more.opening.value += 1;
    assert!(is_refused_as(bob.receive(node, &more.encode()), not_at_node));
    let mut other_blinding = *genuine;
    other_blinding.opening.blinding += Scalar::ONE;
    assert!(is_refused_as(bob.receive(node, &other_blinding.encode()), not_at_node));
    // The change output of the same payment, claimed as Bob's: its owner and commitment are
    // Alice's, so with Bob's owner the id is not the node's.
    let mut claimed = *genuine;
    claimed.index = if genuine.index == 0 { 1 } else { 0 };
    assert!(is_refused_as(bob.receive(node, &claimed.encode()), not_at_node));
    // The genuine string is not Alice's to receive: its output pays Bob.
    let not_ours = |error: &PrivacyError| matches!(error, PrivacyError::ConfidentialNotOurs { .. });
    assert!(is_refused_as(alice.receive(node, &genuine.encode()), not_ours));
    assert_eq!(bob.load().confidential_balance().spendable, 0);
}

#[test]
fn a_node_refuses_a_confidential_transaction_hidden_from_its_auditor() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(71);
    let auditor = AuditorSecret::random(&mut rng);
    let issuer = Holder::create(dir.path(), "issuer", true, &mut rng);
    let node = start_node(dir.path(), &issuer.load(), &auditor.public());
    let alice = Holder::create(dir.path(), "alice", false, &mut rng);
    fund(&node, &issuer, &alice, 500, &mut rng);
    // `--auditor` overrides the node's list; a key the node does not know is refused there,
    // and the shielding is rolled back.
    let stranger = hex::encode(AuditorSecret::random(&mut rng).public().to_bytes());
    let wrong = session::auditors_for(&node.client, &[stranger]).unwrap();
    let (outcome, _) = alice.submit(&node, |w| w.build_shield(200, &wrong, &mut rng).unwrap());
    assert!(matches!(outcome, Outcome::Rejected { .. }), "{outcome:?}");
    assert_eq!(alice.holdings(), (500, 0));
    assert!(matches!(
        session::auditors_for(&node.client, &["00".to_owned()]),
        Err(PrivacySessionError::Privacy(PrivacyError::BadAuditor { .. }))
    ));
}
