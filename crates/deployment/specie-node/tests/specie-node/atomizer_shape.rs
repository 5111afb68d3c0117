//! The embedded node in the atomizer shape: transactions are ordered into blocks that the shards
//! apply. A valid payment confirms; of two spends of one coin submitted together exactly one
//! confirms; a replayed mint is refused; the ledger of record replays to the shards' UHS; and
//! after a restart the shards hold the same UHS (caught up to the atomizer's last block) and the
//! data directory keeps its shape.

use std::time::{Duration, Instant};

use secp256k1::Keypair;
use specie_api::{Completion, TxStatus};
use specie_node::{CoreShape, EmbeddedNode, NodeHandle, NodeOptions, OpenError};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{witness_program_commitment, MintTransaction, NonceMode, Output, SpecieTransaction};
use specie_transaction::{CreatedOutput, Transaction};

fn options(dir: &std::path::Path, issuer: &Keypair, shape: Option<CoreShape>) -> NodeOptions {
    let mut options = NodeOptions::new(dir);
    options.issuers = vec![hex::encode(xonly_bytes(issuer))];
    options.shards = Some(3);
    options.shape = shape;
    options
}

fn submit(core: &NodeHandle, txs: &[SpecieTransaction]) -> Vec<TxStatus> {
    let (reply, mut completions) = tokio::sync::mpsc::unbounded_channel::<Completion>();
    let numbered = txs.iter().cloned().enumerate().map(|(n, tx)| (n as u64, tx)).collect();
    core.submit(numbered, &reply);
    let mut statuses = vec![TxStatus::Unknown; txs.len()];
    for _ in 0..txs.len() {
        let completion = completions.blocking_recv().expect("a completion");
        statuses[completion.client_ref as usize] = completion.status;
    }
    statuses
}

fn pay(coin: &CreatedOutput, owner: &Keypair, to: &Keypair) -> SpecieTransaction {
    let mut tx = Transaction {
        inputs: vec![coin.to_input()],
        outputs: vec![Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(to)),
            value: coin.output.value,
        }],
        witnesses: vec![],
    };
    tx.sign(&[*owner], NonceMode::Randomized).unwrap();
    SpecieTransaction::Transfer(tx)
}

/// Waits until the ledger of record has sealed every confirmed transaction, then checks it
/// replays to exactly the shards' UHS.
fn ledger_matches_the_shards(core: &NodeHandle) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let head = core.ledger_head().unwrap();
        if head.waiting == 0 && head.undecided == 0 && head.uhs == core.uhs_digest().unwrap() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the ledger never matched the shards: {head:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_atomizer_shape_orders_payments_into_blocks_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let issuer = Keypair::new_global(&mut rand::thread_rng());
    let alice = Keypair::new_global(&mut rand::thread_rng());
    let bob = Keypair::new_global(&mut rand::thread_rng());
    let to_alice = Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(&alice)),
        value: 100,
    };
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [7; 32],
        vec![to_alice; 4],
        &issuer,
        NonceMode::Randomized,
    ));
    let coins = mint.created_outputs();
    let (to_bob, double, other) = (
        pay(&coins[0], &alice, &bob),
        pay(&coins[1], &alice, &bob),
        pay(&coins[1], &alice, &alice),
    );
    {
        let node = EmbeddedNode::open(options(dir.path(), &issuer, Some(CoreShape::Atomizer))).unwrap();
        let core = node.handle();
        assert_eq!(core.info().unwrap().shape, "atomizer");
        assert_eq!(submit(&core, std::slice::from_ref(&mint)), vec![TxStatus::Confirmed]);
        assert_eq!(submit(&core, std::slice::from_ref(&to_bob)), vec![TxStatus::Confirmed]);
        let both = submit(&core, &[double.clone(), other.clone()]);
        let confirmed = both.iter().filter(|s| **s == TxStatus::Confirmed).count();
        assert_eq!(confirmed, 1, "exactly one spend of a coin: {both:?}");
        assert!(both.iter().any(|s| s.code() == "input_spent_or_unknown"), "{both:?}");
        let replayed = submit(&core, std::slice::from_ref(&mint));
        assert_eq!(replayed[0].code(), "output_already_exists", "{replayed:?}");
        ledger_matches_the_shards(&core);
    }
    let before = {
        let node = EmbeddedNode::open(options(dir.path(), &issuer, None)).unwrap();
        let core = node.handle();
        assert_eq!(core.info().unwrap().shape, "atomizer", "the directory keeps its shape");
        let spent_again = submit(&core, std::slice::from_ref(&to_bob));
        assert_eq!(spent_again[0].code(), "input_spent_or_unknown", "{spent_again:?}");
        assert_eq!(
            submit(&core, &[pay(&coins[2], &alice, &bob)]),
            vec![TxStatus::Confirmed]
        );
        ledger_matches_the_shards(&core);
        core.uhs_digest().unwrap()
    };
    let node = EmbeddedNode::open(options(dir.path(), &issuer, None)).unwrap();
    assert_eq!(node.handle().uhs_digest().unwrap(), before);
    drop(node);
    let error = EmbeddedNode::open(options(dir.path(), &issuer, Some(CoreShape::TwoPhaseCommit)))
        .err()
        .expect("a directory cannot change shape");
    assert!(matches!(error, OpenError::Manifest(_)), "{error}");
}
