//! The ledger of record against a simple model: transactions confirmed in a random dependency
//! graph, offered in any order, come out in blocks that replay from genesis to exactly the
//! model's unspent set; every transaction has a block, a position and a proof; a block that was
//! tampered with, reordered against its dependencies, or repeated is refused and changes nothing.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use specie_archiver::{
    committed, created_ids, Block, BlockError, DisputeProof, LedgerLimits, LedgerOfRecord, Offered, Record,
    RECORDS_DOMAIN,
};
use specie_codec::{Decode, Encode};
use specie_transaction::{
    CreatedOutput, MintTransaction, NonceMode, Output, SpecieTransaction, Transaction, Txid, UhsId,
};

fn issuer() -> secp256k1::Keypair {
    secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[7; 32]).unwrap()
}

fn output(value: u64, owner: u8) -> Output {
    Output {
        witness_program_commitment: [owner; 32],
        value,
    }
}

/// A mint of `outputs` coins and then `transfers` transfers, each spending one or two unspent
/// coins picked by `picks`: the records in the order they were confirmed, and the model's UHS.
fn history(outputs: usize, transfers: &[(usize, usize, u8)]) -> (Vec<Record>, BTreeSet<UhsId>) {
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [1; 32],
        (0..outputs).map(|i| output(100, i as u8)).collect(),
        &issuer(),
        NonceMode::Deterministic,
    ));
    let mut unspent: Vec<CreatedOutput> = mint.created_outputs();
    let mut records = vec![Record::new(mint.clone(), &mint.compact()).unwrap()];
    for (n, (first, second, owner)) in transfers.iter().enumerate() {
        if unspent.is_empty() {
            break;
        }
        let a = unspent.remove(first % unspent.len());
        let mut inputs = vec![a.to_input()];
        if !unspent.is_empty() && second % 2 == 0 {
            inputs.push(unspent.remove(second % unspent.len()).to_input());
        }
        let total: u64 = inputs.iter().map(|i| i.data.value).sum();
        let tx = SpecieTransaction::Transfer(Transaction {
            inputs,
            // The transfer's index in the owner byte keeps every output (so every txid) apart.
            outputs: vec![output(total / 2, *owner), output(total - total / 2, n as u8)],
            witnesses: vec![],
        });
        unspent.extend(tx.created_outputs());
        records.push(Record::new(tx.clone(), &tx.compact()).unwrap());
    }
    // The UHS is every id created (outputs, and the markers some kinds create so that they are
    // never replayed) less every id spent.
    let created: BTreeSet<UhsId> = records.iter().flat_map(|r| r.created().to_vec()).collect();
    let spent: BTreeSet<UhsId> = records.iter().flat_map(|r| r.spent().to_vec()).collect();
    assert!(unspent.iter().all(|o| created.contains(&o.uhs_id)));
    (records, created.difference(&spent).copied().collect())
}

fn digest_of(model: &BTreeSet<UhsId>) -> (u64, [u8; 32]) {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    for id in model {
        hasher.update(id.0);
    }
    (model.len() as u64, hasher.finalize().into())
}

/// Offers everything, then seals and applies blocks until nothing is left.
fn settle(ledger: &mut LedgerOfRecord, records: Vec<Record>) -> Vec<Block> {
    for record in records {
        assert_eq!(ledger.offer(record), Offered::Waiting);
    }
    let mut blocks = Vec::new();
    while let Some(block) = ledger.seal() {
        ledger.apply(&block).unwrap();
        blocks.push(block);
    }
    blocks
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_arrival_order_replays_to_the_model(
        outputs in 1usize..6,
        transfers in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..40),
        order in any::<prop::sample::Index>(),
        block_records_max in 1usize..8,
    ) {
        let (records, model) = history(outputs, &transfers);
        let count = records.len();
        // Arrival order: rotated, then reversed, so dependents often come before what they spend.
        let mut arriving = records.clone();
        arriving.rotate_left(order.index(count));
        arriving.reverse();
        let limits = LedgerLimits { block_records_max, ..LedgerLimits::default() };
        let mut ledger = LedgerOfRecord::new(limits);
        let blocks = settle(&mut ledger, arriving);
        prop_assert_eq!(ledger.waiting(), 0);
        prop_assert_eq!(ledger.uhs_digest(), digest_of(&model));
        // Replayed from genesis, from the blocks' bytes: the same ledger.
        let decoded: Vec<Block> = blocks
            .iter()
            .map(|b| Block::decode_exact_with(&b.encode(), &Default::default()).unwrap())
            .collect();
        prop_assert_eq!(&decoded, &blocks);
        let replayed = LedgerOfRecord::replay(limits, &decoded).unwrap();
        prop_assert_eq!(replayed.uhs_digest(), ledger.uhs_digest());
        prop_assert_eq!(replayed.head(), ledger.head());
        // Every transaction has a place, and a proof of it against that block's header.
        for record in &records {
            let at = ledger.locate(&record.txid()).unwrap();
            let block = &blocks[at.height as usize - 1];
            let proof = block.prove(at.position as usize).unwrap();
            let header = ledger.header(at.height).unwrap();
            prop_assert_eq!(proof.verify(RECORDS_DOMAIN, &record.leaf(), &header.records_root), Ok(()));
            prop_assert_eq!(ledger.offer(record.clone()), Offered::Known);
        }
    }

    /// A crash left written-ahead records whose outcome nobody wrote down: the shards committed
    /// a prefix of the history (and refused a double spend of every other committed transfer).
    /// Read off the UHS, exactly the prefix comes out committed, whatever the order.
    #[test]
    fn the_uhs_tells_exactly_which_written_ahead_records_were_committed(
        outputs in 1usize..6,
        transfers in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..40),
        committed_count in any::<prop::sample::Index>(),
        order in any::<prop::sample::Index>(),
    ) {
        let (records, _) = history(outputs, &transfers);
        let committed_count = committed_count.index(records.len() + 1);
        let prefix = &records[..committed_count];
        let created: BTreeSet<UhsId> = prefix.iter().flat_map(|r| r.created().to_vec()).collect();
        let spent: BTreeSet<UhsId> = prefix.iter().flat_map(|r| r.spent().to_vec()).collect();
        let uhs: HashSet<UhsId> = created.difference(&spent).copied().collect();
        let mut pending: Vec<(Record, bool)> = records
            .iter()
            .enumerate()
            .map(|(index, record)| (record.clone(), index < committed_count))
            .collect();
        for (n, record) in prefix.iter().enumerate().filter(|(n, _)| n % 2 == 1) {
            if let SpecieTransaction::Transfer(transfer) = record.transaction() {
                let mut twin = transfer.clone();
                twin.outputs[0].witness_program_commitment = [0xEE; 32];
                twin.outputs[0].value = n as u64;
                let twin = SpecieTransaction::Transfer(twin);
                pending.push((Record::new(twin.clone(), &twin.compact()).unwrap(), false));
            }
        }
        let rotate = order.index(pending.len());
        pending.rotate_left(rotate);
        let (pending, expected): (Vec<Record>, Vec<bool>) = pending.into_iter().unzip();
        let asked: HashSet<UhsId> = created_ids(&pending).into_iter().filter(|id| uhs.contains(id)).collect();
        prop_assert_eq!(committed(&pending, &asked), expected);
    }
}

#[test]
fn a_block_that_breaks_a_rule_is_refused_and_changes_nothing() {
    // One coin, spent by transfer 1, whose first output transfer 2 spends.
    let (records, _) = history(1, &[(0, 1, 9), (0, 1, 8)]);
    assert!(records[2].spent().iter().any(|id| records[1].created().contains(id)));
    let mut ledger = LedgerOfRecord::new(LedgerLimits::default());
    let first = Block::seal(None, vec![records[0].clone()]);
    ledger.apply(&first).unwrap();
    let before = (ledger.uhs_digest(), ledger.height());

    // A dependent before what it spends (sealed by hand, skipping the ledger's ordering).
    let reordered = Block::seal(ledger.head(), vec![records[2].clone(), records[1].clone()]);
    assert!(matches!(
        ledger.apply(&reordered),
        Err(BlockError::SpendsUnknown { position: 0, .. })
    ));
    // The genesis block again; a block naming another previous header; records swapped after
    // sealing; a transaction twice.
    assert!(matches!(
        ledger.apply(&first),
        Err(BlockError::Height { head: 1, got: 1 })
    ));
    let mut elsewhere = Block::seal(ledger.head(), vec![records[1].clone()]);
    elsewhere.header.previous = [9; 32];
    assert!(matches!(
        ledger.apply(&elsewhere),
        Err(BlockError::Previous { height: 2 })
    ));
    let mut swapped = Block::seal(ledger.head(), vec![records[1].clone(), records[2].clone()]);
    swapped.records.swap(0, 1);
    assert!(matches!(ledger.apply(&swapped), Err(BlockError::Records { height: 2 })));
    let twice = Block::seal(ledger.head(), vec![records[1].clone(), records[1].clone()]);
    assert!(matches!(
        ledger.apply(&twice),
        Err(BlockError::Repeated { position: 1, .. })
    ));
    let again = Block::seal(ledger.head(), vec![records[0].clone()]);
    assert!(matches!(
        ledger.apply(&again),
        Err(BlockError::Repeated { position: 0, .. })
    ));
    assert_eq!((ledger.uhs_digest(), ledger.height()), before, "nothing changed");

    // In the right order it goes in.
    let right = Block::seal(ledger.head(), vec![records[1].clone(), records[2].clone()]);
    ledger.apply(&right).unwrap();
    assert_eq!(ledger.height(), 2);
}

#[test]
fn a_double_spend_waits_forever_and_the_waiting_room_is_bounded() {
    let (records, _) = history(1, &[(0, 1, 9)]);
    let mint = records[0].clone();
    let spend = records[1].clone();
    // Another transfer of the same coin: the core would never confirm both; the ledger never
    // seals the second.
    let SpecieTransaction::Transfer(mut other) = spend.transaction().clone() else {
        unreachable!()
    };
    other.outputs[0].value -= 1;
    other.outputs[1].value += 1;
    let other = SpecieTransaction::Transfer(other);
    let double = Record::new(other.clone(), &other.compact()).unwrap();
    let limits = LedgerLimits {
        block_records_max: 10,
        waiting_records_max: 3,
    };
    let mut ledger = LedgerOfRecord::new(limits);
    settle(&mut ledger, vec![mint, spend, double]);
    assert_eq!(ledger.waiting(), 1, "the second spend of one coin waits");
    // Two more mints fill the room (3); a third is refused until blocks make room.
    let mint_of = |coins| history(coins, &[]).0.remove(0);
    assert_eq!(ledger.offer(mint_of(3)), Offered::Waiting);
    assert_eq!(ledger.offer(mint_of(4)), Offered::Waiting);
    assert_eq!(ledger.offer(mint_of(5)), Offered::Full);
    assert_eq!(ledger.offer(mint_of(4)), Offered::Known);
    let block = ledger.seal().unwrap();
    assert_eq!(block.records.len(), 2, "the two mints, not the double spend");
    ledger.apply(&block).unwrap();
    assert_eq!(ledger.offer(mint_of(5)), Offered::Waiting);
}

#[test]
fn a_record_must_be_its_transactions_own() {
    let (records, _) = history(2, &[(0, 1, 9)]);
    let mut wrong = records[1].compact().clone();
    wrong.created.pop();
    assert!(Record::new(records[1].transaction().clone(), &wrong).is_err());
    let other = records[0].compact();
    assert!(Record::new(records[1].transaction().clone(), other).is_err());
}

/// The dispute proof of `txid` at `height`, as the node makes it.
fn dispute(ledger: &LedgerOfRecord, blocks: &[Block], txid: Txid, height: u64) -> DisputeProof {
    let block = |h: u64| Ok::<_, ()>(blocks[h as usize - 1].clone());
    ledger
        .dispute(txid, Some(height), block)
        .unwrap()
        .expect("a height of the ledger")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For every transaction and a stranger, at every height: the proof checks, says exactly
    /// whether the transaction is in the ledger up to that height, and ends at that height's
    /// header. A proof with one byte changed fails to decode, fails its check, ends at a head
    /// that is not the ledger's at its height, or tells the truth about the txid it names.
    #[test]
    fn dispute_proofs_tell_the_truth_and_nothing_else(
        outputs in 1usize..5,
        transfers in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..24),
        block_records_max in 1usize..6,
        stranger in any::<[u8; 32]>(),
        flip in any::<prop::sample::Index>(),
    ) {
        let (records, _) = history(outputs, &transfers);
        let limits = LedgerLimits { block_records_max, ..LedgerLimits::default() };
        let mut ledger = LedgerOfRecord::new(limits);
        let blocks = settle(&mut ledger, records.clone());
        let heads: Vec<[u8; 32]> = std::iter::once([0; 32])
            .chain((1..=ledger.height()).map(|h| ledger.header(h).unwrap().hash()))
            .collect();
        let truth = |txid: &Txid, height: u64| ledger.locate(txid).filter(|at| at.height <= height);
        let txids: Vec<Txid> = records.iter().map(Record::txid).chain([Txid(stranger)]).collect();
        for txid in &txids {
            for height in 0..=ledger.height() {
                let proof = dispute(&ledger, &blocks, *txid, height);
                let verdict = proof.check().unwrap();
                prop_assert_eq!(verdict.located, truth(txid, height));
                prop_assert_eq!(verdict.head, heads[height as usize]);
                let bytes = proof.encode();
                let decoded = DisputeProof::decode_exact(&bytes).unwrap();
                prop_assert_eq!(decoded.encode(), bytes.clone());
                let mut tampered = bytes.clone();
                let at = flip.index(tampered.len());
                tampered[at] ^= 0x01;
                if let Ok(forged) = DisputeProof::decode_exact(&tampered) {
                    if let Ok(verdict) = forged.check() {
                        if verdict.head == heads[verdict.height.min(ledger.height()) as usize] {
                            prop_assert_eq!(verdict.located, truth(&forged.txid, verdict.height));
                        }
                    }
                }
            }
        }
    }
}
