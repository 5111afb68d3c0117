//! Threshold endorsement in the embedded node: 3 of 4 endorsers, one of them compromised (it
//! signs whatever it is sent). Valid transactions are endorsed and committed, and the ledger of
//! record keeps their endorsements, which verify under the group key, also after a restart. A
//! forged transaction is refused: the compromised endorser alone is fewer than k. Endorsements
//! forged around the group are refused at the core's gate: one signed by a key outside the
//! group, and another transaction's genuine one.

use std::time::{Duration, Instant};

use secp256k1::Keypair;
use specie_api::{Completion, TxStatus};
use specie_endorsement::merkle::MerkleTree;
use specie_endorsement::{BatchItem, Endorsement};
use specie_node::endorsement::{Candidate, EndorsementOptions};
use specie_node::{EmbeddedNode, NodeHandle, NodeOptions};
use specie_transaction::signing::{schnorr_sign, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction,
};

fn options(dir: &std::path::Path, issuer: &Keypair, endorsement: bool) -> NodeOptions {
    let mut options = NodeOptions::new(dir);
    options.issuers = vec![hex::encode(xonly_bytes(issuer))];
    options.endorsement = endorsement.then(|| EndorsementOptions {
        k: 3,
        n: 4,
        seed: 42,
        compromised: vec![4],
    });
    options
}

fn statuses(run: impl FnOnce(&specie_api::CompletionSender), count: usize) -> Vec<TxStatus> {
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    run(&reply);
    let mut statuses = vec![TxStatus::Unknown; count];
    for _ in 0..count {
        let completion = completions.blocking_recv().expect("a completion");
        statuses[completion.client_ref as usize] = completion.status;
    }
    statuses
}

fn submit(core: &NodeHandle, txs: &[SpecieTransaction]) -> Vec<TxStatus> {
    let numbered = txs.iter().cloned().enumerate().map(|(n, tx)| (n as u64, tx)).collect();
    statuses(|reply| core.submit(numbered, reply), txs.len())
}

fn submit_endorsed(core: &NodeHandle, txs: Vec<(SpecieTransaction, Endorsement)>) -> Vec<TxStatus> {
    let count = txs.len();
    let numbered = txs
        .into_iter()
        .enumerate()
        .map(|(n, (tx, e))| (n as u64, tx, e))
        .collect();
    statuses(|reply| core.submit_endorsed(numbered, reply), count)
}

fn code(status: &TxStatus) -> &'static str {
    status.code()
}

/// The record of `tx` in the ledger, once sealed, and its endorsement.
fn endorsement_in_ledger(core: &NodeHandle, tx: &SpecieTransaction) -> Endorsement {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(entry) = core.ledger_transaction(tx.txid()).unwrap() {
            return entry.record.endorsement().expect("an endorsed record").clone();
        }
        assert!(Instant::now() < deadline, "{} never reached the ledger", tx.txid());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn k_of_n_endorse_what_is_valid_and_nothing_forged_gets_past_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Keypair::new_global(&mut rand::thread_rng());
    let alice = Keypair::new_global(&mut rand::thread_rng());
    let to_alice = Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(&alice)),
        value: 100,
    };
    let node = EmbeddedNode::open(options(dir.path(), &issuer, true)).unwrap();
    let core = node.handle();
    let group_key = core.endorsement_group_key().expect("a group");

    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [1; 32],
        vec![to_alice; 3],
        &issuer,
        NonceMode::Randomized,
    ));
    assert_eq!(submit(&core, std::slice::from_ref(&mint)), vec![TxStatus::Confirmed]);
    let coins = mint.created_outputs();
    let pay = |coin: usize, forge: bool| {
        let mut tx = Transaction {
            inputs: vec![coins[coin].to_input()],
            outputs: vec![Output { value: 100, ..to_alice }],
            witnesses: vec![],
        };
        tx.sign(&[alice], NonceMode::Randomized).unwrap();
        if forge {
            tx.witnesses[0].0[40] ^= 1;
        }
        SpecieTransaction::Transfer(tx)
    };

    // Honest endorsers refuse a forged signature; the compromised one's share is not enough.
    let forged = pay(0, true);
    assert_eq!(
        code(&submit(&core, std::slice::from_ref(&forged))[0]),
        "invalid_signature"
    );
    // A valid payment is endorsed and committed.
    let valid = pay(1, false);
    assert_eq!(submit(&core, std::slice::from_ref(&valid)), vec![TxStatus::Confirmed]);

    // Around the group: an endorsement signed by a key outside it, over the right batch message.
    let digest = Candidate::new(forged.clone()).digest();
    let tree = MerkleTree::new(&[digest]);
    let outsider = Keypair::new_global(&mut rand::thread_rng());
    let wrong_key = Endorsement {
        signature: schnorr_sign(&outsider, &tree.message(), NonceMode::Randomized),
        leaf_count: 1,
        index: 0,
        siblings: vec![],
    };
    // And another transaction's genuine endorsement, as the ledger keeps it.
    let borrowed = endorsement_in_ledger(&core, &valid);
    let valid_digest = Candidate::new(valid.clone()).digest();
    assert_eq!(
        borrowed.verify(&group_key, &valid_digest),
        Ok(()),
        "genuine for its own transaction"
    );
    let refused = submit_endorsed(
        &core,
        vec![(forged.clone(), wrong_key), (forged.clone(), borrowed.clone())],
    );
    assert_eq!(refused.iter().map(code).collect::<Vec<_>>(), vec!["not_endorsed"; 2]);
    // The genuine endorsement admits its own transaction (which the shards then refuse as a
    // replay: its input is spent).
    assert_eq!(
        code(&submit_endorsed(&core, vec![(valid.clone(), borrowed)])[0]),
        "input_spent_or_unknown"
    );
    let unspent = core.query_uhs(&[coins[0].uhs_id]).unwrap();
    assert_eq!(unspent, vec![true], "nothing forged spent the coin");
    node.shutdown();

    // After a restart with the same seed, the ledger's endorsements verify under the same key.
    let node = EmbeddedNode::open(options(dir.path(), &issuer, true)).unwrap();
    let core = node.handle();
    assert_eq!(core.endorsement_group_key(), Some(group_key));
    let kept = endorsement_in_ledger(&core, &valid);
    assert_eq!(kept.verify(&group_key, &valid_digest), Ok(()));
    let mint_endorsement = endorsement_in_ledger(&core, &mint);
    assert_eq!(
        mint_endorsement.verify(&group_key, &Candidate::new(mint.clone()).digest()),
        Ok(())
    );
    node.shutdown();

    // A node without a group admits nothing by endorsement.
    let other = tempfile::tempdir().unwrap();
    let node = EmbeddedNode::open(options(other.path(), &issuer, false)).unwrap();
    let statuses = submit_endorsed(&node.handle(), vec![(valid, kept)]);
    assert_eq!(code(&statuses[0]), "not_endorsed");
    node.shutdown();
}
