//! Feeds arbitrary bytes to the ledger of record's decoders (`specie_archiver`, `specie_merkle`):
//! a record, a block header, a block, an inclusion proof and a dispute proof. Nothing may panic;
//! whatever decodes must re-encode to exactly the input (one encoding each); a decoded proof must
//! verify, or be refused, without panicking; a decoded block must replay on an empty ledger or be
//! refused.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_archiver::{
    Block, BlockHeader, BlockLimits, DisputeLimits, DisputeProof, LedgerLimits, LedgerOfRecord, Record, RecordLimits,
    RECORDS_DOMAIN,
};
use specie_codec::{Decode, Encode};
use specie_merkle::InclusionProof;

fuzz_target!(|data: &[u8]| {
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
});
