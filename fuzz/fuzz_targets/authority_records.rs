//! Feeds arbitrary bytes to what an authority shard reads back from its own disk: a log record
//! (`Command::decode`) and a snapshot (`Durable::restore`). A shard's disk is its own, but a torn
//! or corrupted file must end in a typed error, never a panic or an unbounded allocation.
//!
//! Whatever decodes as a command must re-encode to the input. A snapshot that restores is
//! checked with `check_invariants` (which may refuse it) and must snapshot back to the input.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_authority::{AuthorityConfig, AuthorityShard, Command};
use specie_fastpay::{deterministic_key, Committee};
use specie_role::Durable;

fn shard() -> AuthorityShard {
    let keys: Vec<_> = (0..4).map(|i| deterministic_key("authority", i)).collect();
    let committee = Committee::new(1, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).expect("committee");
    let config = AuthorityConfig {
        committee,
        authority: 0,
        shard: 0,
        shards: 2,
        credit_retransmit_ms: 100,
        channel_credits_max: 100,
    };
    AuthorityShard::new(config, keys[0].clone())
}

fuzz_target!(|bytes: &[u8]| {
    if let Ok(command) = Command::decode(bytes) {
        assert_eq!(command.encode(), bytes, "one encoding per command");
    }
    let mut role = shard();
    if role.restore(bytes).is_ok() {
        let _ = role.check_invariants();
        assert_eq!(role.snapshot(), bytes, "one encoding per snapshot");
    }
});
