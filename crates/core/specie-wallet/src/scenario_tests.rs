//! Whole-wallet scenarios against the in-memory ledger: mint, pay, import, lost answers,
//! resubmission, conflicts, and a property test that no operation sequence creates or loses
//! money.

use proptest::prelude::*;
use specie_transaction::SpecieTransaction;

use crate::client::{Ledger, SubmitStatus};
use crate::payment::PaymentString;
use crate::sync::{settle, sync, Outcome};
use crate::testkit::{rng, MemoryLedger, Mode};
use crate::wallet::{CoinState, Wallet};

/// An issuer, a ledger that trusts it, and `alice` holding `amount` confirmed minted money.
fn world(amount: u64, seed: u64) -> (Wallet, MemoryLedger, Wallet, rand::rngs::StdRng) {
    let mut rng = rng(seed);
    let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
    let ledger = MemoryLedger::new(vec![issuer.issuer_pubkey().unwrap().serialize()]);
    let mut alice = Wallet::new("usd", false, &mut rng).unwrap();
    let (mint, minted) = issuer
        .build_mint(&[(alice.latest_address().unwrap(), amount)], &mut rng)
        .unwrap();
    assert_eq!(submit_one(&ledger, &mint), SubmitStatus::Confirmed);
    issuer.on_confirmed(&minted.txid).unwrap();
    let payment = minted.payment_string.unwrap();
    receive(&mut alice, &ledger, &payment);
    assert_eq!(alice.balance().spendable, amount);
    (issuer, ledger, alice, rng)
}

fn submit_one(ledger: &MemoryLedger, tx: &SpecieTransaction) -> SubmitStatus {
    ledger.submit(std::slice::from_ref(tx), 1000).unwrap().remove(0).status
}

/// What `specie wallet import` does: ask the node, then import.
fn receive(wallet: &mut Wallet, ledger: &MemoryLedger, payment: &PaymentString) {
    let ours = wallet.receivable_outputs(payment).unwrap();
    let ids: Vec<_> = ours.iter().map(|created| created.uhs_id).collect();
    let present = ledger.query_uhs(&ids).unwrap();
    let confirmed: Vec<_> = ids.iter().zip(present).filter(|(_, p)| *p).map(|(id, _)| *id).collect();
    wallet.import_payment(payment, &confirmed).unwrap();
}

fn ledger_total(ledger: &MemoryLedger, wallets: &[&Wallet]) -> u64 {
    // Sum of the coins whose ids the ledger holds: the money the wallets can prove they have.
    let uhs = ledger.uhs.borrow();
    wallets
        .iter()
        .flat_map(|wallet| wallet.coins())
        .filter(|coin| uhs.contains(&coin.uhs_id()))
        .map(|coin| coin.value())
        .sum()
}

#[test]
fn mint_pay_import_and_pay_back() {
    let (_issuer, ledger, mut alice, mut rng) = world(1000, 30);
    let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
    let (tx, payment) = alice
        .build_payment(&bob.latest_address().unwrap(), 150, &mut rng)
        .unwrap();
    let status = submit_one(&ledger, &tx);
    assert!(matches!(
        settle(&mut alice, &ledger, &payment.txid, &status).unwrap(),
        Outcome::Confirmed(_)
    ));
    assert_eq!(alice.balance().spendable, 850);
    // Bob receives the payment string as text.
    let text = payment.payment_string.encode();
    receive(&mut bob, &ledger, &PaymentString::parse(&text).unwrap());
    assert_eq!(bob.balance().spendable, 150);
    let (back, back_payment) = bob
        .build_payment(&alice.latest_address().unwrap(), 100, &mut rng)
        .unwrap();
    assert_eq!(submit_one(&ledger, &back), SubmitStatus::Confirmed);
    bob.on_confirmed(&back_payment.txid).unwrap();
    receive(&mut alice, &ledger, &back_payment.payment_string);
    assert_eq!((alice.balance().spendable, bob.balance().spendable), (950, 50));
    assert_eq!(ledger_total(&ledger, &[&alice, &bob]), 1000);
}

#[test]
fn resubmission_is_never_applied_twice() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 31);
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    let (tx, payment) = alice.build_payment(&to, 100, &mut rng).unwrap();
    assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
    // The same bytes again: refused, and the ledger is unchanged.
    let before = ledger.uhs.borrow().clone();
    assert!(matches!(submit_one(&ledger, &tx), SubmitStatus::Rejected { .. }));
    assert_eq!(*ledger.uhs.borrow(), before);
    // If the wallet only heard the refusal, the double check finds the outputs: confirmed,
    // not rolled back.
    let refused = SubmitStatus::Rejected {
        code: "input_spent_or_unknown".into(),
        message: "spent".into(),
    };
    let outcome = settle(&mut alice, &ledger, &payment.txid, &refused).unwrap();
    assert!(matches!(outcome, Outcome::Confirmed(_)), "{outcome:?}");
    assert_eq!(alice.balance().spendable, 0);
}

#[test]
fn sync_confirms_a_payment_whose_answer_was_late() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 32);
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    let (tx, payment) = alice.build_payment(&to, 30, &mut rng).unwrap();
    ledger.mode.set(Mode::ApplyButTimeOut);
    let status = submit_one(&ledger, &tx);
    assert!(matches!(
        settle(&mut alice, &ledger, &payment.txid, &status).unwrap(),
        Outcome::StillPending { .. }
    ));
    assert_eq!(alice.balance().pending_out, 100);
    ledger.mode.set(Mode::Normal);
    let submissions = ledger.submissions.get();
    let report = sync(&mut alice, &ledger).unwrap();
    assert_eq!(
        ledger.submissions.get(),
        submissions,
        "outputs present: no resubmission"
    );
    assert!(matches!(report.outcomes[..], [(txid, Outcome::Confirmed(_))] if txid == payment.txid));
    assert_eq!(alice.balance().spendable, 70);
    assert!(alice.pending().next().is_none());
}

#[test]
fn sync_resubmits_a_lost_payment_once() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 33);
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    let (tx, payment) = alice.build_payment(&to, 30, &mut rng).unwrap();
    ledger.mode.set(Mode::LoseAndTimeOut);
    submit_one(&ledger, &tx);
    // Still lost on the first sync: stays pending, resubmitted exactly once.
    let submissions = ledger.submissions.get();
    let report = sync(&mut alice, &ledger).unwrap();
    assert_eq!(ledger.submissions.get(), submissions + 1);
    assert!(matches!(report.outcomes[..], [(_, Outcome::StillPending { .. })]));
    // A busy node: nothing applied, the payment stays pending rather than being rolled back
    // (an earlier attempt might still be in flight).
    ledger.mode.set(Mode::Busy);
    let report = sync(&mut alice, &ledger).unwrap();
    assert!(matches!(report.outcomes[..], [(_, Outcome::StillPending { .. })]));
    assert_eq!(alice.balance().pending_out, 100);
    // The node is healthy again.
    ledger.mode.set(Mode::Normal);
    let report = sync(&mut alice, &ledger).unwrap();
    assert!(matches!(report.outcomes[..], [(txid, Outcome::Confirmed(_))] if txid == payment.txid));
    assert_eq!(alice.balance().spendable, 70);
    // A further sync has nothing to do and changes nothing.
    assert!(sync(&mut alice, &ledger).unwrap().is_empty());
}

#[test]
fn sync_sees_inputs_spent_by_a_copy_of_the_wallet() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 34);
    let mut copy = alice.clone();
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    // Alice's payment is lost; the copy spends the same coin and wins.
    let (lost, _) = alice.build_payment(&to, 40, &mut rng).unwrap();
    ledger.mode.set(Mode::LoseAndTimeOut);
    submit_one(&ledger, &lost);
    ledger.mode.set(Mode::Normal);
    let (winner, won) = copy.build_payment(&to, 100, &mut rng).unwrap();
    assert_eq!(submit_one(&ledger, &winner), SubmitStatus::Confirmed);
    copy.on_confirmed(&won.txid).unwrap();
    alice.accept_node();
    let report = sync(&mut alice, &ledger).unwrap();
    assert!(matches!(report.outcomes[..], [(_, Outcome::Conflicted { settled })] if settled.spent == 100));
    // Kept, never selected: the copy's spend is the node's word, which only the user can accept.
    assert_eq!(
        alice.balance(),
        crate::Balance {
            missing: 100,
            ..Default::default()
        }
    );
    assert!(alice.coins().all(|coin| coin.state == CoinState::Missing));
    assert_eq!(alice.forget_missing(), (1, 100));
    assert!(alice.coins().next().is_none());
}

/// A node that does not hold the wallet's coins (another node of the same currency, asked before
/// the wallet knew its network) makes `sync` mark them missing, never delete them; the right
/// node's `sync` restores them, and they pay again.
#[test]
fn coins_a_wrong_node_does_not_hold_are_marked_and_restored_by_the_right_one() {
    let (issuer, ledger, mut alice, mut rng) = world(500, 37);
    let empty = MemoryLedger::new(vec![issuer.issuer_pubkey().unwrap().serialize()]);
    alice.accept_node();
    let report = sync(&mut alice, &empty).unwrap();
    assert_eq!(report.coins_missing.len(), 1, "{report:?}");
    assert_eq!((alice.balance().spendable, alice.balance().missing), (0, 500));
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    assert!(
        alice.build_payment(&to, 10, &mut rng).is_err(),
        "a missing coin is never selected"
    );
    // Asking the empty node again changes nothing; the right node restores the coin.
    assert!(sync(&mut alice, &empty).unwrap().restored.is_empty());
    let report = sync(&mut alice, &ledger).unwrap();
    assert_eq!(report.restored.iter().map(|(_, value)| value).sum::<u64>(), 500);
    assert_eq!(alice.balance().spendable, 500);
    let (tx, _) = alice.build_payment(&to, 10, &mut rng).unwrap();
    assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
}

/// A wallet talks only to nodes of its currency, and once it holds money only to its network.
#[test]
fn a_wallet_refuses_another_currency_or_network() {
    let (_issuer, _ledger, mut alice, mut rng) = world(100, 38);
    let url = "http://127.0.0.1:1";
    let error = alice.check_network(url, "eur", Some("aa")).unwrap_err().to_string();
    assert!(
        error.contains("eur") && error.contains("usd") && error.contains(url),
        "{error}"
    );
    alice.check_network(url, "usd", Some("aa")).unwrap();
    assert_eq!(alice.network_id(), Some("aa"), "remembered: the wallet holds money");
    let error = alice.check_network(url, "usd", Some("bb")).unwrap_err().to_string();
    assert!(error.contains("aa") && error.contains("bb"), "{error}");
    // An empty wallet remembers nothing yet: its first node may be a mistyped one.
    let mut empty = Wallet::new("usd", false, &mut rng).unwrap();
    empty.check_network(url, "usd", Some("bb")).unwrap();
    assert_eq!(empty.network_id(), None);
    empty.check_network(url, "usd", Some("aa")).unwrap();
}

/// An import that no node has confirmed (imported at a mistyped node, which holds none of it)
/// does not tie the wallet to that node's network: its own node confirms it later.
#[test]
fn an_unconfirmed_import_remembers_no_network() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 43);
    let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
    let (tx, payment) = alice
        .build_payment(&bob.latest_address().unwrap(), 100, &mut rng)
        .unwrap();
    bob.check_network("http://mistyped", "usd", Some("bb")).unwrap();
    bob.import_payment(&payment.payment_string, &[]).unwrap();
    assert_eq!(bob.balance().pending_in, 100);
    let mut saved = crate::WalletFile::from_wallet(&bob).into_wallet().unwrap();
    assert_eq!(saved.network_id(), None);
    assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
    saved.check_network("http://node", "usd", Some("aa")).unwrap();
    assert_eq!(sync(&mut saved, &ledger).unwrap().imports_confirmed, 100);
    assert_eq!(saved.network_id(), Some("aa"), "remembered once the node confirmed it");
}

#[test]
fn sync_marks_missing_the_coins_that_vanished_and_confirms_imports() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 35);
    let mut copy = alice.clone();
    let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
    let (tx, payment) = copy
        .build_payment(&bob.latest_address().unwrap(), 100, &mut rng)
        .unwrap();
    // Bob imports before the payment is confirmed: pending.
    bob.import_payment(&payment.payment_string, &[]).unwrap();
    assert_eq!(bob.balance().pending_in, 100);
    assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
    // Alice's only coin is gone: the node holds none of hers, which she takes for a stranger
    // until she knows her network or vouches for the node.
    assert!(matches!(
        sync(&mut alice, &ledger),
        Err(crate::SyncError::Stranger {
            coins: 1,
            value: 100,
            ..
        })
    ));
    assert_eq!(alice.balance().spendable, 100, "nothing changed");
    alice.check_network("http://node", "usd", Some("aa")).unwrap();
    let mut saved = crate::WalletFile::from_wallet(&alice).into_wallet().unwrap();
    assert_eq!(saved.network_id(), Some("aa"));
    let report = sync(&mut saved, &ledger).unwrap();
    assert_eq!(report.coins_missing.len(), 1);
    assert_eq!((saved.balance().spendable, saved.balance().missing), (0, 100));
    let report = sync(&mut bob, &ledger).unwrap();
    assert_eq!(report.imports_confirmed, 100);
    assert_eq!(bob.balance().spendable, 100);
}

#[test]
fn rejected_invalid_and_busy_answers() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 36);
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    let (_, payment) = alice.build_payment(&to, 30, &mut rng).unwrap();
    let busy = SubmitStatus::Busy {
        message: "overloaded".into(),
    };
    assert!(matches!(
        settle(&mut alice, &ledger, &payment.txid, &busy).unwrap(),
        Outcome::StillPending { .. }
    ));
    let invalid = SubmitStatus::Invalid {
        code: "invalid_signature".into(),
        index: Some(0),
        message: "input 0: bad signature".into(),
    };
    let outcome = settle(&mut alice, &ledger, &payment.txid, &invalid).unwrap();
    assert!(
        matches!(&outcome, Outcome::Rejected { reason, settled } if reason.contains("invalid_signature") && settled.released == 100),
        "{outcome:?}"
    );
    assert_eq!(alice.balance().spendable, 100);
    assert!(alice.coins().all(|coin| coin.state == CoinState::Spendable));
}

#[test]
fn lost_mint_is_resubmitted_and_its_replay_refused() {
    let mut rng = rng(37);
    let mut issuer = Wallet::new("usd", true, &mut rng).unwrap();
    let ledger = MemoryLedger::new(vec![issuer.issuer_pubkey().unwrap().serialize()]);
    let own = issuer.latest_address().unwrap();
    let (mint, minted) = issuer.build_mint(&[(own, 500)], &mut rng).unwrap();
    ledger.mode.set(Mode::LoseAndTimeOut);
    submit_one(&ledger, &mint);
    ledger.mode.set(Mode::Normal);
    let report = sync(&mut issuer, &ledger).unwrap();
    assert!(matches!(report.outcomes[..], [(txid, Outcome::Confirmed(_))] if txid == minted.txid));
    assert_eq!(issuer.balance().spendable, 500);
    assert!(matches!(submit_one(&ledger, &mint), SubmitStatus::Rejected { .. }));
    // Redeem it all: the money leaves circulation.
    let (redeem, redeemed) = issuer.build_redeem(500, &mut rng).unwrap();
    assert_eq!(submit_one(&ledger, &redeem), SubmitStatus::Confirmed);
    issuer.on_confirmed(&redeemed.txid).unwrap();
    assert_eq!(issuer.balance(), Default::default());
    assert_eq!(
        ledger.uhs.borrow().len(),
        2,
        "only the mint's and the redeem's markers remain"
    );
}

#[derive(Clone, Debug)]
enum Step {
    /// Wallet `from` (0 = alice, 1 = bob) pays the other `amount`.
    Pay { from: usize, amount: u64 },
    /// The `k`-th (mod count) pending payment is applied by the ledger.
    Confirm { k: usize },
    /// The `k`-th (mod count) pending payment is refused.
    Reject { k: usize },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0usize..2, 1u64..400).prop_map(|(from, amount)| Step::Pay { from, amount }),
        any::<usize>().prop_map(|k| Step::Confirm { k }),
        any::<usize>().prop_map(|k| Step::Reject { k }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Across any sequence of payments, confirmations and rejections between two wallets:
    /// the ledger accepts every confirmed payment (no wallet ever double-spends), and the
    /// money the wallets hold or have locked always equals what was minted.
    #[test]
    fn balance_is_conserved(seed in any::<u64>(), steps in proptest::collection::vec(step(), 1..40)) {
        let (_issuer, ledger, alice, mut rng) = world(1000, seed);
        let bob = Wallet::new("usd", false, &mut rng).unwrap();
        let mut wallets = [alice, bob];
        // (sender, txid, transaction, payment string for the other wallet)
        let mut in_flight: Vec<(usize, specie_transaction::Txid, SpecieTransaction, PaymentString)> = Vec::new();
        for step in steps {
            match step {
                Step::Pay { from, amount } => {
                    let to = wallets[1 - from].latest_address().unwrap();
                    if let Ok((tx, payment)) = wallets[from].build_payment(&to, amount, &mut rng) {
                        in_flight.push((from, payment.txid, tx, payment.payment_string));
                    }
                }
                Step::Confirm { k } if !in_flight.is_empty() => {
                    let (from, txid, tx, payment) = in_flight.remove(k % in_flight.len());
                    prop_assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
                    wallets[from].on_confirmed(&txid).unwrap();
                    receive(&mut wallets[1 - from], &ledger, &payment);
                }
                Step::Reject { k } if !in_flight.is_empty() => {
                    let (from, txid, _, _) = in_flight.remove(k % in_flight.len());
                    wallets[from].on_rejected(&txid).unwrap();
                }
                _ => {}
            }
            let held: u64 = wallets
                .iter()
                .map(|wallet| wallet.balance().spendable + wallet.balance().pending_out)
                .sum();
            prop_assert_eq!(held, 1000);
        }
        // Settle the rest by rejection; everything is then spendable and backed by the ledger.
        for (from, txid, _, _) in in_flight {
            wallets[from].on_rejected(&txid).unwrap();
        }
        let total: u64 = wallets.iter().map(|wallet| wallet.balance().spendable).sum();
        prop_assert_eq!(total, 1000);
        prop_assert_eq!(wallets.iter().map(|w| w.balance().pending_in).sum::<u64>(), 0);
        prop_assert_eq!(ledger_total(&ledger, &[&wallets[0], &wallets[1]]), 1000);
        prop_assert_eq!(ledger.uhs.borrow().len(), wallets[0].coins().count() + wallets[1].coins().count() + 1);
    }
}

/// The payee cannot receive without the payment string, so a confirmed payment's string stays in
/// the wallet (and its file) to be shown again: a terminal that lost it loses no money.
#[test]
fn a_confirmed_payments_string_is_kept_to_be_shown_again() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 39);
    let mut bob = Wallet::new("usd", false, &mut rng).unwrap();
    let (tx, payment) = alice
        .build_payment(&bob.latest_address().unwrap(), 60, &mut rng)
        .unwrap();
    assert_eq!(alice.sent().count(), 0, "not before it is confirmed");
    assert_eq!(submit_one(&ledger, &tx), SubmitStatus::Confirmed);
    alice.on_confirmed(&payment.txid).unwrap();
    let reloaded = crate::WalletFile::from_wallet(&alice).into_wallet().unwrap();
    let kept: Vec<_> = reloaded.sent().collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].txid, kept[0].payment_string.as_str()),
        (payment.txid, payment.payment_string.encode().as_str())
    );
    // The kept string still pays Bob.
    receive(
        &mut bob,
        &ledger,
        &PaymentString::parse(&kept[0].payment_string).unwrap(),
    );
    assert_eq!(bob.balance().spendable, 60);
}

/// A payment whose fate is unknown (its answer lost) is abandoned: a payment of its coins back
/// to the wallet is sent instead, and once the node applies that, the first can never be
/// applied and `sync` resolves it, never sending it again. Had the first won the race, its
/// change comes back and its coins are gone, not missing.
#[test]
fn an_abandoned_payment_is_never_sent_again_and_its_coins_come_back() {
    let (_issuer, ledger, mut alice, mut rng) = world(100, 42);
    let to = Wallet::new("usd", false, &mut rng).unwrap().latest_address().unwrap();
    let (lost, payment) = alice.build_payment(&to, 40, &mut rng).unwrap();
    ledger.mode.set(Mode::LoseAndTimeOut);
    submit_one(&ledger, &lost);
    ledger.mode.set(Mode::Normal);
    // LoseAndTimeOut applied nothing; the answer said nothing either way.
    assert!(crate::resolve_by_presence(&mut alice, &ledger, &payment.txid)
        .unwrap()
        .is_none());
    let (_, back_txid) = alice.build_abandon(&payment.txid, &mut rng).unwrap();
    assert!(alice.build_abandon(&payment.txid, &mut rng).is_err(), "once");
    // Sync sends the replacement, never the abandoned payment; the next sync sees the
    // abandoned one's coins gone and resolves it as never applied.
    let report = sync(&mut alice, &ledger).unwrap();
    assert_eq!(report.outcomes.len(), 1, "{report:?}");
    assert!(matches!(report.outcomes[0], (txid, Outcome::Confirmed(_)) if txid == back_txid));
    let report = sync(&mut alice, &ledger).unwrap();
    assert!(matches!(report.outcomes[..], [(txid, Outcome::Conflicted { .. })] if txid == payment.txid));
    assert!(alice.pending().next().is_none(), "{report:?}");
    assert_eq!(alice.balance().spendable, 100);
    assert!(
        !ledger.uhs.borrow().contains(&lost.created_outputs()[0].uhs_id),
        "the abandoned payment never applied"
    );

    // The race lost: the first payment applies before its replacement.
    let (first, payment) = alice.build_payment(&to, 30, &mut rng).unwrap();
    let (back, _) = alice.build_abandon(&payment.txid, &mut rng).unwrap();
    assert_eq!(submit_one(&ledger, &first), SubmitStatus::Confirmed);
    let status = submit_one(&ledger, &back);
    assert!(matches!(status, SubmitStatus::Rejected { .. }), "{status:?}");
    sync(&mut alice, &ledger).unwrap();
    assert!(alice.pending().next().is_none());
    assert_eq!((alice.balance().spendable, alice.balance().missing), (70, 0));
}
