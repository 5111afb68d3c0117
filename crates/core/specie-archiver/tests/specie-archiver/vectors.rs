//! The vectors of `docs/ledger-of-record.md` (`docs/ledger-vectors.json`): a two-block ledger made
//! from fixed keys with deterministic BIP-340 signatures: block 1 a mint with one endorsement,
//! block 2 a transfer of one of its outputs and a redeem of the other. Any change to a domain, an
//! encoding or the tree fails this test; the stored bytes are also decoded, re-encoded, replayed
//! as a ledger and their proof checked.
//!
//! Regenerate after a deliberate format change (which also needs a new version byte):
//! `SPECIE_WRITE_VECTORS=1 cargo test -p specie-archiver --test specie-archiver vectors::`.

use std::path::PathBuf;
use std::sync::OnceLock;

use specie_archiver::{Block, BlockHeader, DisputeProof, LedgerLimits, LedgerOfRecord, Record, RECORDS_DOMAIN};
use specie_codec::{Decode, Encode};
use specie_merkle::InclusionProof;
use specie_transaction::signing::{keypair_from_secret, xonly_bytes};
use specie_transaction::{
    witness_program_commitment, MintTransaction, NonceMode, Output, RedeemTransaction, SpecieTransaction, Transaction,
    Txid,
};
use specie_vectors::{assert_file_matches, read_or_write, stored_bytes, Vector};

const FILE: &str = "docs/ledger-vectors.json";
const DESCRIPTION: &str =
    "Test vectors of docs/ledger-of-record.md, generated and checked by crates/core/specie-archiver/tests/specie-archiver/vectors.rs";

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..").join(FILE)
}

fn vector(name: &str, description: &str, bytes: Vec<u8>) -> Vector {
    Vector {
        name: name.into(),
        description: description.into(),
        bytes,
    }
}

/// The two blocks, from genesis.
fn blocks() -> [Block; 2] {
    let (alice, bob, issuer, sentinel) = (
        keypair_from_secret(&[0x01; 32]).unwrap(),
        keypair_from_secret(&[0x02; 32]).unwrap(),
        keypair_from_secret(&[0x03; 32]).unwrap(),
        keypair_from_secret(&[0x04; 32]).unwrap(),
    );
    let pays = |owner, value| Output {
        witness_program_commitment: witness_program_commitment(&xonly_bytes(owner)),
        value,
    };
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [0x4d; 32],
        vec![pays(&alice, 100), pays(&alice, 50)],
        &issuer,
        NonceMode::Deterministic,
    ));
    let coins = mint.created_outputs();
    let mut endorsed = mint.compact();
    endorsed.attest(&sentinel, NonceMode::Deterministic);
    let mint_record = Record::new(mint, &endorsed).unwrap();
    let mut transfer = Transaction {
        inputs: vec![coins[0].to_input()],
        outputs: vec![pays(&bob, 60), pays(&alice, 40)],
        witnesses: vec![],
    };
    transfer.sign(&[alice], NonceMode::Deterministic).unwrap();
    let transfer = SpecieTransaction::Transfer(transfer);
    let redeem = SpecieTransaction::Redeem(
        RedeemTransaction::new_signed(
            50,
            vec![coins[1].to_input()],
            vec![],
            &[alice],
            &issuer,
            NonceMode::Deterministic,
        )
        .unwrap(),
    );
    let first = Block::seal(None, vec![mint_record]);
    let second = Block::seal(
        Some(&first.header),
        [transfer, redeem]
            .into_iter()
            .map(|tx| Record::new(tx.clone(), &tx.compact()).unwrap())
            .collect(),
    );
    [first, second]
}

fn vectors() -> Vec<Vector> {
    let [first, second] = blocks();
    vec![
        vector(
            "header_1",
            "block 1's header: version 2, height 1, previous zero, one record, records root, txids root",
            first.header.encode(),
        ),
        vector(
            "header_1_hash",
            "SHA-256(\"specie/ledger-of-record/block/v1\" ‖ header_1)",
            first.header.hash().to_vec(),
        ),
        vector(
            "record_mint",
            "block 1's record: the mint as the issuer signed it, with one sentinel endorsement",
            first.records[0].encode(),
        ),
        vector(
            "record_mint_leaf",
            "the record's leaf: SHA-256(0x00 ‖ \"specie/ledger-of-record/records/v1\" ‖ record_mint)",
            first.records[0].leaf().to_vec(),
        ),
        vector("block_1", "block 1: header ‖ count ‖ records", first.encode()),
        vector(
            "header_2",
            "block 2's header, naming header_1_hash",
            second.header.encode(),
        ),
        vector(
            "block_2",
            "block 2: a transfer of the mint's first output, then a redeem (with its marker) of the second",
            second.encode(),
        ),
        vector(
            "record_endorsed",
            "block 2's transfer record carrying a threshold endorsement (flag 0x01 then the endorsement of docs/endorsement-format.md; its signature bytes are 0x5e x 64, for the layout only)",
            second.records[0]
                .clone()
                .with_endorsement(specie_endorsement::Endorsement {
                    signature: [0x5e; 64],
                    leaf_count: 3,
                    index: 2,
                    siblings: vec![[0xab; 32]],
                })
                .encode(),
        ),
        vector(
            "proof_2_1",
            "the inclusion proof of block 2's record 1 (the redeem): index ‖ leaves ‖ count ‖ siblings",
            second.prove(1).unwrap().encode(),
        ),
        vector(
            "dispute_redeem_at_2",
            "the dispute proof that the redeem is in the ledger at height 2: version ‖ txid ‖ headers 1-2 ‖ 0x00 ‖ height ‖ position ‖ record ‖ inclusion proof",
            dispute(&[first.clone(), second.clone()], second.records[1].txid()).encode(),
        ),
        vector(
            "dispute_absent_at_2",
            "the dispute proof that txid 0x80…80 is in no block up to height 2: version ‖ txid ‖ headers 1-2 ‖ 0x01 ‖ count ‖ per block its neighbours in the ascending txids tree",
            dispute(&[first, second], Txid([0x80; 32])).encode(),
        ),
    ]
}

/// The dispute proof of `txid` at the last of `blocks`.
fn dispute(blocks: &[Block], txid: Txid) -> DisputeProof {
    let ledger = LedgerOfRecord::replay(LedgerLimits::default(), blocks).unwrap();
    let block = |h: u64| Ok::<_, ()>(blocks[h as usize - 1].clone());
    ledger.dispute(txid, None, block).unwrap().expect("the head")
}

fn stored() -> &'static str {
    static STORED: OnceLock<String> = OnceLock::new();
    STORED.get_or_init(|| read_or_write(&path(), || specie_vectors::vectors_text(DESCRIPTION, &vectors())))
}

#[test]
fn the_code_makes_exactly_the_stored_vectors() {
    assert_file_matches(stored(), FILE, DESCRIPTION, &vectors());
}

#[test]
fn the_stored_ledger_decodes_replays_and_proves() {
    let stored: serde_json::Value = serde_json::from_str(stored()).unwrap();
    let blocks: Vec<Block> = ["block_1", "block_2"]
        .iter()
        .map(|name| {
            let bytes = stored_bytes(&stored, name);
            let block = Block::decode_exact(&bytes).unwrap();
            assert_eq!(block.encode(), bytes, "{name} re-encodes to itself");
            block
        })
        .collect();
    let ledger = LedgerOfRecord::replay(LedgerLimits::default(), &blocks).unwrap();
    assert_eq!(ledger.height(), 2);
    // The mint's second output and the transfer's two outputs, the mint's and the redeem's markers.
    assert_eq!(ledger.uhs_digest().0, 4);
    let header = BlockHeader::decode_exact(&stored_bytes(&stored, "header_2")).unwrap();
    assert_eq!(header.previous.to_vec(), stored_bytes(&stored, "header_1_hash"));
    let proof = InclusionProof::decode_exact(&stored_bytes(&stored, "proof_2_1")).unwrap();
    let redeem = &blocks[1].records[1];
    assert_eq!(
        proof.verify(RECORDS_DOMAIN, &redeem.leaf(), &header.records_root),
        Ok(())
    );
    assert!(proof
        .verify(RECORDS_DOMAIN, &blocks[1].records[0].leaf(), &header.records_root)
        .is_err());
    let endorsed = Record::decode_exact(&stored_bytes(&stored, "record_endorsed")).unwrap();
    assert_eq!(endorsed.endorsement().map(|e| e.index), Some(2));
    assert_eq!(endorsed.transaction(), blocks[1].records[0].transaction());
    assert_ne!(
        endorsed.leaf(),
        blocks[1].records[0].leaf(),
        "the leaf covers the endorsement"
    );
    // The dispute proofs check, and say what the ledger holds.
    let head = header.hash();
    let included = DisputeProof::decode_exact(&stored_bytes(&stored, "dispute_redeem_at_2")).unwrap();
    let verdict = included.check().unwrap();
    assert_eq!(
        (verdict.head, verdict.located.map(|l| (l.height, l.position))),
        (head, Some((2, 1)))
    );
    let absent = DisputeProof::decode_exact(&stored_bytes(&stored, "dispute_absent_at_2")).unwrap();
    assert_eq!(absent.check().unwrap().located, None);
    assert_eq!(absent.check().unwrap().head, head);
    // A flag other than 0 or 1 is not a record.
    let mut bytes = blocks[1].records[0].encode();
    *bytes.last_mut().unwrap() = 2;
    assert!(Record::decode_exact(&bytes).is_err());
}
