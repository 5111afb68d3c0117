//! The ledger of record against a simple model: transactions confirmed in a random dependency
//! graph, offered in any order, come out in blocks that replay from genesis to exactly the
//! model's unspent set; every transaction has a block, a position and a proof; a block that was
//! tampered with, reordered against its dependencies, or repeated is refused and changes nothing.

use std::collections::{BTreeSet, HashSet};

use proptest::prelude::*;
use specie_archiver::{
    committed, created_ids, Archiver, ArchiverConfig, ArchiverInput, ArchiverReply, ArchiverReport, Block, BlockError,
    DisputeProof, LedgerLimits, LedgerOfRecord, LedgerRead, LedgerReply, Offered, Record, Verdicts, RECORDS_DOMAIN,
};
use specie_codec::{Decode, Encode};
use specie_role::{Durable, Role, Round};
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
                // Never a commitment `output` makes ([owner; 32]), so never the original again.
                twin.outputs[0].witness_program_commitment = [0xEE; 32];
                twin.outputs[0].witness_program_commitment[0] = 0x11;
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

/// The archiver role on a host that makes every command durable at once: each command goes
/// through its encoding and back before it is applied, and the invariants are checked after.
struct ArchiverHost {
    role: Archiver,
    now_ms: u64,
    next_ticket: u64,
    replies: Vec<(u64, ArchiverReply)>,
    reports: Vec<ArchiverReport>,
}

impl ArchiverHost {
    fn new(config: ArchiverConfig) -> ArchiverHost {
        let mut role = Archiver::new(config);
        role.lead(0);
        ArchiverHost {
            role,
            now_ms: 0,
            next_ticket: 0,
            replies: vec![],
            reports: vec![],
        }
    }

    /// Hands the role one input built around a fresh ticket; returns the ticket's reply.
    fn ask(&mut self, input: impl FnOnce(u64) -> ArchiverInput) -> ArchiverReply {
        self.next_ticket += 1;
        let ticket = self.next_ticket;
        self.role.handle(self.now_ms, input(ticket));
        self.pump();
        let at = self.replies.iter().position(|(t, _)| *t == ticket).expect("answered");
        self.replies.remove(at).1
    }

    fn pump(&mut self) {
        loop {
            let round = Round::take(&mut self.role);
            self.replies.extend(round.replies);
            self.reports.extend(round.reports);
            if round.proposals.is_empty() {
                break;
            }
            for command in round.proposals {
                let bytes = Archiver::encode_command(&command);
                let decoded = self.role.decode_command(&bytes).unwrap();
                assert_eq!(decoded, command);
                self.role.apply(self.now_ms, &decoded);
                self.role.check_invariants().unwrap();
            }
        }
    }

    fn advance(&mut self, ms: u64) {
        self.now_ms += ms;
        if self.role.poll_timeout().is_some_and(|at| at <= self.now_ms) {
            self.role.handle_timeout(self.now_ms);
            self.pump();
        }
    }

    /// What the leader's driver does: the stale records, the model UHS's answer, settled.
    fn reconcile(&mut self, uhs: &HashSet<UhsId>) {
        let ArchiverReply::Stale(stale) = self.ask(|ticket| ArchiverInput::Stale { ticket }) else {
            panic!("stale records asked")
        };
        let asked: Vec<Txid> = stale.iter().map(|(txid, _)| *txid).collect();
        let present: Vec<UhsId> = stale
            .iter()
            .flat_map(|(_, ids)| ids.clone())
            .filter(|id| uhs.contains(id))
            .collect();
        let reply = self.ask(|ticket| ArchiverInput::Evidence { ticket, asked, present });
        assert!(matches!(reply, ArchiverReply::Decided));
    }
}

fn read(host: &mut ArchiverHost, read: LedgerRead) -> LedgerReply {
    let reply = host.ask(|ticket| ArchiverInput::Read { ticket, read });
    let ArchiverReply::Read(reply) = reply else {
        panic!("a read is answered")
    };
    // Through the wire's encoding and back.
    let bytes = reply.encode();
    let decoded = LedgerReply::decode_exact_with(&bytes, &Default::default()).unwrap();
    assert_eq!(decoded.encode(), bytes);
    decoded
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Sentinels write a history ahead in batches: the shards committed a prefix of it and refused
    /// a twin of some committed transfers; some outcomes reach the archiver, the others are lost
    /// with their sentinel, some of those that arrive are lies (a compromised sentinel), and a
    /// new leader takes over. The UHS decides every record, and the ledger replays to exactly
    /// the UHS of the prefix, on this replica and on one restored from its snapshot.
    #[test]
    fn the_archiver_ledgers_exactly_what_the_core_committed(
        outputs in 1usize..5,
        transfers in prop::collection::vec((any::<usize>(), any::<usize>(), any::<u8>()), 0..30),
        committed_count in any::<prop::sample::Index>(),
        reported in prop::collection::vec(any::<bool>(), 64),
        lies in prop::collection::vec(any::<bool>(), 64),
        batch in 1usize..6,
        block_records_max in 1usize..6,
    ) {
        let (records, _) = history(outputs, &transfers);
        let committed_count = committed_count.index(records.len() + 1);
        let prefix = &records[..committed_count];
        let created: BTreeSet<UhsId> = prefix.iter().flat_map(|r| r.created().to_vec()).collect();
        let spent: BTreeSet<UhsId> = prefix.iter().flat_map(|r| r.spent().to_vec()).collect();
        let model: BTreeSet<UhsId> = created.difference(&spent).copied().collect();
        let mut written: Vec<(Record, bool)> = records
            .iter()
            .enumerate()
            .map(|(index, record)| (record.clone(), index < committed_count))
            .collect();
        for (n, record) in prefix.iter().enumerate().filter(|(n, _)| n % 3 == 1) {
            if let SpecieTransaction::Transfer(transfer) = record.transaction() {
                let mut twin = transfer.clone();
                twin.outputs[0].value = 1_000 + n as u64;
                let twin = SpecieTransaction::Transfer(twin);
                written.push((Record::new(twin.clone(), &twin.compact()).unwrap(), false));
            }
        }
        let config = ArchiverConfig {
            ledger: LedgerLimits { block_records_max, ..LedgerLimits::default() },
            ..ArchiverConfig::default()
        };
        let mut host = ArchiverHost::new(config);
        for chunk in written.chunks(batch) {
            let records = chunk.iter().map(|(record, _)| record.clone()).collect();
            let reply = host.ask(|ticket| ArchiverInput::WriteAhead { ticket, records });
            prop_assert!(matches!(reply, ArchiverReply::Written));
            let outcomes: Vec<(Txid, bool)> = chunk
                .iter()
                .enumerate()
                .filter(|(i, _)| reported[(written.len() + i) % reported.len()])
                .map(|(i, (record, committed))| (record.txid(), *committed != lies[(written.len() + i) % lies.len()]))
                .collect();
            let reply = host.ask(|ticket| ArchiverInput::Outcomes { ticket, outcomes });
            prop_assert!(matches!(reply, ArchiverReply::Decided));
            host.advance(50);
        }
        // A new leader: it decides nothing from the UHS before it has known a record long enough.
        host.role.follow();
        host.role.lead(host.now_ms);
        let uhs: HashSet<UhsId> = model.iter().copied().collect();
        host.reconcile(&uhs);
        let undecided_before = host.role.undecided();
        host.advance(config.decide_after_ms);
        host.reconcile(&uhs);
        host.advance(config.seal_interval_ms);
        prop_assert!(undecided_before == 0 || !host.reports.is_empty());
        prop_assert_eq!(host.role.undecided(), 0);
        prop_assert_eq!(host.role.ledger().waiting(), 0);
        prop_assert_eq!(host.role.ledger().uhs_digest(), digest_of(&model));
        for (record, committed) in &written {
            let LedgerReply::Transaction(entry) = read(&mut host, LedgerRead::Transaction(record.txid())) else {
                panic!("a transaction read is answered with an entry")
            };
            prop_assert_eq!(entry.as_ref().is_some_and(|e| e.verifies() && &e.record == record), *committed);
            let LedgerReply::Dispute(Some(proof)) = read(&mut host, LedgerRead::Dispute(record.txid(), None)) else {
                panic!("a dispute at the head is answered")
            };
            prop_assert_eq!(proof.check().unwrap().located.is_some(), *committed);
        }
        // A replica restored from the snapshot holds the same ledger.
        let snapshot = host.role.snapshot();
        let mut restored = Archiver::new(config);
        restored.restore(&snapshot).unwrap();
        prop_assert_eq!(restored.head(), host.role.head());
        prop_assert_eq!(restored.snapshot(), snapshot);
        let LedgerReply::Head(head) = read(&mut host, LedgerRead::Head) else { panic!("a head") };
        prop_assert_eq!(&head, &host.role.head());
        if head.height > 0 {
            let LedgerReply::Block(Some(block)) = read(&mut host, LedgerRead::Block(head.height)) else { panic!("the head block") };
            prop_assert_eq!(Some(block.header), head.head);
        }
        prop_assert!(matches!(read(&mut host, LedgerRead::Block(head.height + 1)), LedgerReply::Block(None)));
    }
}

#[test]
fn the_archiver_waits_for_an_undecided_spender_and_refuses_beyond_its_bounds() {
    let (records, _) = history(1, &[(0, 1, 9), (0, 1, 8)]);
    let [mint, first, second] = [records[0].clone(), records[1].clone(), records[2].clone()];
    let config = ArchiverConfig {
        undecided_max: 3,
        decide_after_ms: 1_000,
        ..ArchiverConfig::default()
    };
    let mut host = ArchiverHost::new(config);
    let write = |host: &mut ArchiverHost, records: Vec<Record>| {
        host.ask(|ticket| ArchiverInput::WriteAhead { ticket, records })
    };
    assert!(matches!(
        write(&mut host, vec![mint.clone(), first.clone()]),
        ArchiverReply::Written
    ));
    // Beyond undecided_max: refused, nothing written.
    assert!(matches!(
        write(&mut host, vec![second.clone(), second.clone()]),
        ArchiverReply::Busy
    ));
    assert_eq!(host.role.undecided(), 2);
    host.advance(1_000);
    assert!(matches!(write(&mut host, vec![second.clone()]), ArchiverReply::Written));
    // The mint and the first transfer are stale; the second transfer (which spends the first's
    // output) is not. The UHS holds none of their outputs, but the second may still commit: the
    // first transfer is left for its outcome, and so is the mint, whose output the first spends.
    let stale = match host.ask(|ticket| ArchiverInput::Stale { ticket }) {
        ArchiverReply::Stale(stale) => stale,
        other => panic!("{other:?}"),
    };
    let asked: Vec<Txid> = stale.iter().map(|(txid, _)| *txid).collect();
    assert_eq!(asked.len(), 2);
    host.ask(|ticket| ArchiverInput::Evidence {
        ticket,
        asked,
        present: vec![],
    });
    assert_eq!(
        host.role.undecided(),
        3,
        "the first transfer and the mint wait for the spender"
    );
    // The spender's outcome arrives: committed. Its output is in the UHS now, so the walk back
    // along its spends finds the first transfer and the mint committed.
    let outcomes = vec![(second.txid(), true)];
    host.ask(|ticket| ArchiverInput::Outcomes { ticket, outcomes });
    host.advance(1_000);
    host.reconcile(&second.created().iter().copied().collect());
    host.advance(config.seal_interval_ms);
    assert_eq!(host.role.undecided(), 0);
    assert_eq!(host.role.ledger().waiting(), 0);
    // The spender's verdict was on a reported record; the other two on records nobody reported.
    assert_eq!(
        host.role.verdicts(),
        Verdicts {
            reported: 1,
            unreported: 2
        }
    );
    for record in [&mint, &first, &second] {
        assert!(host.role.ledger().locate(&record.txid()).is_some());
    }
    // A follower answers nothing that changes state; what a leader had in flight is dropped.
    host.role.follow();
    let records = vec![mint.clone()];
    assert!(matches!(write(&mut host, records), ArchiverReply::Dropped));
    host.role.handle(
        0,
        ArchiverInput::WriteAhead {
            ticket: 99,
            records: vec![],
        },
    );
    // Garbage is refused by the command decoder, never applied.
    for bad in [
        &[][..],
        &[0][..],
        &[9][..],
        &[4, 0][..],
        &[2, 1, 0, 0, 0, 0, 0, 0, 0][..],
    ] {
        assert!(host.role.decode_command(bad).is_err(), "{bad:?}");
    }
    assert!(host.role.restore(&[2]).is_err());
    // A snapshot must be canonical: undecided records strictly ascending, waiting ones each new.
    // A refused one changes nothing.
    let before = host.role.snapshot();
    let snapshot = |waiting: &[&Record], undecided: &[(&Record, u32)]| {
        let mut bytes = vec![1];
        bytes.extend_from_slice(&0u64.to_le_bytes());
        bytes.extend_from_slice(&(waiting.len() as u64).to_le_bytes());
        waiting.iter().for_each(|r| r.encode_to(&mut bytes));
        bytes.extend_from_slice(&(undecided.len() as u64).to_le_bytes());
        for (record, copies) in undecided {
            record.encode_to(&mut bytes);
            bytes.extend_from_slice(&copies.to_le_bytes());
        }
        bytes
    };
    let refused = [
        snapshot(&[], &[(&mint, 1), (&mint, 1)]),
        snapshot(&[], &[(&mint, 0)]),
        snapshot(&[&mint, &mint], &[]),
    ];
    for bytes in refused {
        assert!(host.role.restore(&bytes).is_err());
        assert_eq!(host.role.snapshot(), before);
    }
    let mut fresh = Archiver::new(config);
    fresh.restore(&snapshot(&[&mint], &[(&first, 2)])).unwrap();
    assert_eq!((fresh.ledger().waiting(), fresh.undecided()), (1, 1));
}

/// An ordering group asks before it orders: a transaction is admitted only while its record is
/// written ahead and undecided, and only in the compact form written (another compact form under
/// the same txid, one never written, or one already decided is not).
#[test]
fn only_an_undecided_record_of_the_same_compact_form_is_written_ahead() {
    let (records, _) = history(2, &[(0, 1, 9)]);
    let [mint, transfer] = [records[0].clone(), records[1].clone()];
    let mut host = ArchiverHost::new(ArchiverConfig::default());
    let ask = |host: &mut ArchiverHost, asked: Vec<(Txid, [u8; 32])>| host.role.written_ahead(&asked);
    let digest = |record: &Record| record.compact().attestation_message();
    let mut forged = transfer.compact().clone();
    forged.created.push(UhsId([0xee; 32]));
    let questions = || {
        vec![
            (mint.txid(), digest(&mint)),
            (transfer.txid(), digest(&transfer)),
            (transfer.txid(), forged.attestation_message()),
        ]
    };
    assert_eq!(ask(&mut host, questions()), [false, false, false]);
    host.ask(|ticket| ArchiverInput::WriteAhead {
        ticket,
        records: vec![mint.clone(), transfer.clone()],
    });
    assert_eq!(ask(&mut host, questions()), [true, true, false]);
    // The mint is decided committed: no longer undecided, so never admitted again.
    let outcomes = vec![(mint.txid(), true)];
    host.ask(|ticket| ArchiverInput::Outcomes { ticket, outcomes });
    host.reconcile(&mint.created().iter().copied().collect());
    assert_eq!(ask(&mut host, questions()), [false, true, false]);
    // A follower answers from the replicated state too, and a replica restored from a snapshot.
    let mut restored = Archiver::new(ArchiverConfig::default());
    restored.restore(&host.role.snapshot()).unwrap();
    assert_eq!(restored.written_ahead(&questions()), [false, true, false]);
    host.role.follow();
    assert_eq!(ask(&mut host, questions()), [false, true, false]);
}
