//! Feeds arbitrary bytes to the ledger of record's decoders (`specie_archiver`, `specie_merkle`):
//! a record, a block header, a block, an inclusion proof, a dispute proof, a ledger read and a
//! ledger reply (what tag 16 of the wire protocol carries), a command of the archiver group's Raft
//! log and an archiver snapshot. Nothing may panic; whatever decodes (a snapshot aside) must
//! re-encode to exactly the input (one encoding each); a decoded proof must verify, or be refused,
//! without panicking; a decoded block must replay on an empty ledger or be refused; a snapshot is
//! restored or refused, and a restored one snapshots again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_archiver::{
    Archiver, ArchiverConfig, Block, BlockHeader, BlockLimits, DisputeLimits, DisputeProof, LedgerLimits,
    LedgerOfRecord, LedgerRead, LedgerReply, LedgerReplyLimits, Record, RecordLimits, RECORDS_DOMAIN,
};
use specie_codec::{Decode, Encode};
use specie_merkle::InclusionProof;
use specie_role::Durable;

fuzz_target!(|data: &[u8]| {
    // Every kind a deployment installs, as the binary does.
    specie_fastpay_primary::install();
    specie_private_transactions::install();
    if let Ok(record) = Record::decode_exact_with(data, &RecordLimits::default()) {
        assert_eq!(record.encode(), data, "a record has one encoding");
    }
    if let Ok(header) = BlockHeader::decode_exact_with(data, &()) {
        assert_eq!(header.encode(), data, "a header has one encoding");
    }
    let limits = BlockLimits {
        records_max: 64,
        ..BlockLimits::default()
    };
    if let Ok(block) = Block::decode_exact_with(data, &limits) {
        assert_eq!(block.encode(), data, "a block has one encoding");
        let mut ledger = LedgerOfRecord::new(LedgerLimits::default());
        let before = ledger.uhs_digest();
        if ledger.apply(&block).is_err() {
            assert_eq!(ledger.uhs_digest(), before, "a refused block changes nothing");
            assert_eq!(ledger.height(), 0);
        }
    }
    if let Ok(proof) = InclusionProof::decode_exact_with(data, &()) {
        assert_eq!(proof.encode(), data, "a proof has one encoding");
        let _ = proof.verify(RECORDS_DOMAIN, &[1; 32], &[2; 32]);
    }
    let dispute_limits = DisputeLimits {
        headers_max: 64,
        ..DisputeLimits::default()
    };
    if let Ok(dispute) = DisputeProof::decode_exact_with(data, &dispute_limits) {
        assert_eq!(dispute.encode(), data, "a dispute proof has one encoding");
        let _ = dispute.check();
    }
    if let Ok(read) = LedgerRead::decode_exact(data) {
        assert_eq!(read.encode(), data, "a ledger read has one encoding");
    }
    if let Ok(reply) = LedgerReply::decode_exact_with(data, &LedgerReplyLimits::default()) {
        assert_eq!(reply.encode(), data, "a ledger reply has one encoding");
        match &reply {
            LedgerReply::Transaction(Some(entry)) => {
                let _ = entry.verifies();
            }
            LedgerReply::Dispute(Some(dispute)) => {
                let _ = dispute.check();
            }
            _ => {}
        }
    }
    let mut archiver = Archiver::new(ArchiverConfig::default());
    if let Ok(command) = archiver.decode_command(data) {
        assert_eq!(
            Archiver::encode_command(&command),
            data,
            "an archiver command has one encoding"
        );
    }
    if archiver.restore(data).is_ok() {
        let _ = archiver.snapshot();
    }
});
