//! Feeds arbitrary bytes to the exchange's decoders (`specie_exchange`): a signed transaction, a
//! block, a logged command (the role's `decode_command`) and a ledger snapshot. Nothing may
//! panic; a transaction or a block that decodes must re-encode to exactly the input (one encoding
//! each); a snapshot that restores must hash to its recorded state hash and pass its audit (the
//! restore checks both) and snapshot back to the same bytes.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use specie_exchange::{
    Block, ExchangeConfig, ExchangeRole, Ledger, RoleLimits, SignedTransaction, SIGNED_TRANSACTION_BYTES_MAX,
};
use specie_role::Durable;

const BLOCK_TRANSACTIONS_MAX: usize = 64;

fn config() -> ExchangeConfig {
    let mut config = ExchangeConfig::new([7; 32], 3);
    config.block_transactions_max = BLOCK_TRANSACTIONS_MAX;
    config
}

fn role() -> &'static ExchangeRole {
    static ROLE: OnceLock<ExchangeRole> = OnceLock::new();
    ROLE.get_or_init(|| ExchangeRole::new(Ledger::genesis(config(), vec![]).unwrap(), RoleLimits::default()))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(signed) =
        specie_codec::decode_bounded("transaction", data, SIGNED_TRANSACTION_BYTES_MAX, SignedTransaction::decode_from)
    {
        let mut again = Vec::new();
        signed.encode_to(&mut again);
        assert_eq!(again, data, "a transaction has one encoding");
    }
    let max = Block::encoded_bytes_max(BLOCK_TRANSACTIONS_MAX);
    if let Ok(block) = specie_codec::decode_bounded("block", data, max, |r| Block::decode_from(r, BLOCK_TRANSACTIONS_MAX)) {
        let mut again = Vec::new();
        block.encode_to(&mut again);
        assert_eq!(again, data, "a block has one encoding");
    }
    let _ = role().decode_command(data);
    if let Ok(ledger) = Ledger::restore(config(), data) {
        assert_eq!(ledger.snapshot(), data, "a snapshot has one encoding");
    }
});
