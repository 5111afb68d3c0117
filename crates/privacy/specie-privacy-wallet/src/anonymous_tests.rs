//! Anonymous payments from wallet files against a real embedded node that trusts a registration
//! authority and has a value auditor and an owner auditor, over the HTTP API, through the session
//! functions the CLI calls: Alice and Bob enrol, Alice's coins enter the anonymous level, she
//! pays Bob with values in clear, Bob pays part back with values hidden, and every altered or
//! misdirected payment string is refused.

use rand::rngs::StdRng;
use specie_credential::{
    AuditorSecret as OwnerAuditorSecret, EnrolmentId, Jurisdiction, RegistrationAuthority, Textual,
};

use crate::confidential_tests::{confirmed, fund, is_refused_as, start_node_with, Holder, Node};
use specie_wallet::session as core_session;
use specie_wallet::{sync, Outcome};

use crate::session::{self, PrivacySessionError};
use crate::testkit::rng;
use crate::{AnonymousPaymentString, AnonymousWallet, PrivacyError};

/// Enrols `holder` as `id`: the RA's challenge, the wallet's request, the RA's credential.
fn enrol(ra: &mut RegistrationAuthority, node: &Node, holder: &Holder, id: u64, rng: &mut StdRng) {
    let challenge = ra.challenge(EnrolmentId(id), Jurisdiction(1), rng).to_text();
    let request = session::begin_enrolment(&holder.path, &mut holder.load(), &node.client, &challenge, rng).unwrap();
    let request = specie_credential::EnrolmentRequest::from_text(&request).unwrap();
    let credential = ra.enrol(&request, rng).unwrap().to_text();
    assert_eq!(
        session::finish_enrolment(&holder.path, &mut holder.load(), &credential).unwrap(),
        EnrolmentId(id)
    );
}

/// (transparent spendable, anonymous spendable), nothing pending.
fn holdings(holder: &Holder) -> (u64, u64) {
    let wallet = holder.load();
    let (clear, anonymous) = (wallet.balance(), wallet.anonymous_balance());
    assert_eq!((clear.pending_in, clear.pending_out), (0, 0), "{clear:?}");
    assert_eq!((anonymous.pending_in, anonymous.pending_out), (0, 0), "{anonymous:?}");
    (clear.spendable, anonymous.spendable)
}

#[test]
fn enrol_enter_pay_in_clear_pay_back_hidden_against_a_node() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(80);
    let mut ra = RegistrationAuthority::from_seed(&[0x5a; 32]);
    let values = specie_confidential::AuditorSecret::random(&mut rng);
    let owners = OwnerAuditorSecret::from_seed(&[0x5b; 32]);
    let issuer = Holder::create(dir.path(), "issuer", true, &mut rng);
    let node = start_node_with(dir.path(), &issuer.load(), |options| {
        options.auditors = vec![values.public().to_bytes()];
        options.registration_authority = Some(ra.public_key());
        options.owner_auditors = vec![owners.public()];
    });
    let (alice, bob) = (
        Holder::create(dir.path(), "alice", false, &mut rng),
        Holder::create(dir.path(), "bob", false, &mut rng),
    );
    fund(&node, &issuer, &alice, 1000, &mut rng);
    let clear = session::anonymous_policy(&node.client, false).unwrap();
    assert_eq!(
        clear.owner_auditors,
        vec![owners.public()],
        "the owner auditors come from /v1/info"
    );
    // Not enrolled yet: nothing anonymous can be built.
    assert!(matches!(
        alice.load().build_anonymise(10, &clear, &mut rng),
        Err(PrivacyError::NotEnrolled)
    ));
    enrol(&mut ra, &node, &alice, 1, &mut rng);
    enrol(&mut ra, &node, &bob, 2, &mut rng);

    let (outcome, _) = alice.submit(&node, |w| w.build_anonymise(600, &clear, &mut rng).unwrap());
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(holdings(&alice), (400, 600));
    let (outcome, payment) = alice.submit(&node, |w| {
        w.build_anonymous_payment(EnrolmentId(2), 250, &clear, &mut rng)
            .unwrap()
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(holdings(&alice), (400, 350));
    let text = payment.payment_string.encode();
    refuse_tampered(&node, &alice, &bob, &payment.payment_string);
    let received = session::receive_anonymous(&bob.path, &mut bob.load(), &node.client, &text).unwrap();
    assert_eq!((received.value, received.already_known), (250, false));
    let again = session::receive_anonymous(&bob.path, &mut bob.load(), &node.client, &text).unwrap();
    assert!(again.already_known);
    assert_eq!(holdings(&bob), (0, 250));

    let hidden = session::anonymous_policy(&node.client, true).unwrap();
    let (outcome, back) = bob.submit(&node, |w| {
        w.build_anonymous_payment(EnrolmentId(1), 100, &hidden, &mut rng)
            .unwrap()
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    assert!(
        back.payment_string.value_blinding.is_some(),
        "a hidden value travels with its opening"
    );
    session::receive_anonymous(
        &alice.path,
        &mut alice.load(),
        &node.client,
        &back.payment_string.encode(),
    )
    .unwrap();
    assert_eq!((holdings(&alice), holdings(&bob)), ((400, 450), (0, 150)));
    // A payment in clear cannot spend Alice's hidden note; one with hidden values spends both.
    let error = alice
        .load()
        .build_anonymous_payment(EnrolmentId(2), 400, &clear, &mut rng)
        .unwrap_err();
    assert!(
        matches!(error, PrivacyError::InsufficientAnonymousNotes { available: 350, .. }),
        "{error}"
    );
    let (outcome, _) = alice.submit(&node, |w| {
        w.build_anonymous_payment(EnrolmentId(2), 400, &hidden, &mut rng)
            .unwrap()
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    // The node agrees with both wallets: a sync forgets nothing.
    for holder in [&alice, &bob] {
        let mut wallet = holder.load();
        let report = sync(&mut wallet, &node.client).unwrap();
        assert!(report.notes_missing.is_empty(), "{report:?}");
    }
    assert_eq!(holdings(&alice), (400, 50));

    // Out of the anonymous level: Alice's last note is hidden, so not in clear; Bob takes 100
    // of his 150 into a coin, Alice all of her 50 (her change a hidden note of 0).
    let error = alice
        .load()
        .build_leave_anonymous(50, None, &clear, &mut rng)
        .unwrap_err();
    assert!(
        matches!(error, PrivacyError::InsufficientAnonymousNotes { available: 0, .. }),
        "{error}"
    );
    let (outcome, _) = bob.submit(&node, |w| {
        let (tx, txid, change) = w.build_leave_anonymous(100, None, &hidden, &mut rng).unwrap();
        assert_eq!(change, 50);
        (tx, txid)
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    let (outcome, _) = alice.submit(&node, |w| {
        let (tx, txid, change) = w.build_leave_anonymous(50, None, &hidden, &mut rng).unwrap();
        assert_eq!(change, 0);
        (tx, txid)
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!((holdings(&alice), holdings(&bob)), ((450, 0), (100, 50)));
    for holder in [&alice, &bob] {
        let report = sync(&mut holder.load(), &node.client).unwrap();
        assert!(
            report.notes_missing.is_empty() && report.coins_missing.is_empty(),
            "{report:?}"
        );
    }
    // The coin is the wallet's like any other: it can enter the anonymous level again.
    let (outcome, _) = bob.submit(&node, |w| w.build_anonymise(100, &clear, &mut rng).unwrap());
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(holdings(&bob), (0, 150));

    // Out of the level into another wallet's coin: Bob pays Alice's address 40 from his notes,
    // and she takes it with the string, as a transparent payment.
    let to = alice.load().latest_address().unwrap();
    let (outcome, (change, payment_string)) = bob.submit(&node, |w| {
        let (tx, txid, change) = w.build_leave_anonymous(40, Some(&to), &clear, &mut rng).unwrap();
        let payment_string = w.payment_string_for(&txid).expect("a coin of another wallet");
        (tx, (change, payment_string))
    });
    assert!(confirmed(&outcome), "{outcome:?}");
    assert_eq!(change, 60, "Bob's 100 note pays 40");
    assert_eq!(bob.load().coins().count(), 0, "the coin is Alice's, not Bob's");
    core_session::import(&alice.path, &mut alice.load(), &node.client, &payment_string.encode()).unwrap();
    assert_eq!((holdings(&alice), holdings(&bob)), ((490, 0), (0, 110)));
}

/// Every altered or misdirected string is refused, and the wallet gains nothing.
fn refuse_tampered(node: &Node, alice: &Holder, bob: &Holder, genuine: &AnonymousPaymentString) {
    let receive = |holder: &Holder, payment: &AnonymousPaymentString| {
        session::receive_anonymous(&holder.path, &mut holder.load(), &node.client, &payment.encode())
    };
    let not_at_node = |error: &PrivacyError| matches!(error, PrivacyError::NoteNotAtNode { .. });
    let mut more = *genuine;
    more.value += 1;
    assert!(is_refused_as(receive(bob, &more), not_at_node));
    let mut other = *genuine;
    other.index ^= 1;
    assert!(is_refused_as(receive(bob, &other), not_at_node));
    let not_ours = |error: &PrivacyError| matches!(error, PrivacyError::AnonymousNotOurs);
    assert!(is_refused_as(receive(alice, genuine), not_ours));
    assert!(matches!(
        session::receive_anonymous(&bob.path, &mut bob.load(), &node.client, "specie-apay1zz"),
        Err(PrivacySessionError::AnonymousPaymentString(_))
    ));
    assert_eq!(bob.load().anonymous_balance().spendable, 0);
}

#[test]
fn a_node_without_a_registration_authority_refuses_enrolment_and_anonymous_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rng(81);
    let issuer = Holder::create(dir.path(), "issuer", true, &mut rng);
    let node = start_node_with(dir.path(), &issuer.load(), |_| {});
    let alice = Holder::create(dir.path(), "alice", false, &mut rng);
    let mut ra = RegistrationAuthority::from_seed(&[0x5c; 32]);
    let challenge = ra.challenge(EnrolmentId(1), Jurisdiction(1), &mut rng).to_text();
    assert!(matches!(
        session::begin_enrolment(&alice.path, &mut alice.load(), &node.client, &challenge, &mut rng),
        Err(PrivacySessionError::NoRegistrationAuthority { .. })
    ));
    // Enrolled with an RA the node does not trust: its entry is refused and rolled back.
    fund(&node, &issuer, &alice, 300, &mut rng);
    let mut wallet = alice.load();
    let request = wallet
        .begin_enrolment(
            ra.public_key(),
            ra.challenge(EnrolmentId(1), Jurisdiction(1), &mut rng),
            &mut rng,
        )
        .unwrap();
    wallet.finish_enrolment(ra.enrol(&request, &mut rng).unwrap()).unwrap();
    specie_wallet::WalletFile::save(&alice.path, &wallet).unwrap();
    let policy = session::anonymous_policy(&node.client, false).unwrap();
    let (outcome, _) = alice.submit(&node, |w| w.build_anonymise(100, &policy, &mut rng).unwrap());
    assert!(
        matches!(&outcome, Outcome::Rejected { reason, .. } if reason.contains("no_registration_authority")),
        "{outcome:?}"
    );
    assert_eq!(holdings(&alice), (300, 0));
}
