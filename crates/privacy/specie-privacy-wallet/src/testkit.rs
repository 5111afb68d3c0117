//! Test helpers: the core wallet's (`specie_wallet::testkit`), with the privacy part installed
//! and the confidential kind accepted: by the sentinel's rules with no auditors and no RA (as a
//! node started so judges it), and by an independent reading of its witnesses and proofs.

use std::sync::Arc;

use rand::rngs::StdRng;
use specie_private_transactions::{ConfidentialTransaction, PrivacyRules};
use specie_transaction::{CapabilityTransaction, SpecieTransaction};
use specie_wallet::testkit::CapabilityCheck;

pub use specie_wallet::testkit::funded_wallet;

/// A seeded rng; every test starts with one, so this is also where the privacy part and the
/// private kinds are installed, as the binary installs them, for wallet files that hold them.
pub fn rng(seed: u64) -> StdRng {
    crate::install();
    specie_wallet::testkit::rng(seed)
}

/// A confidential transaction's witnesses are one per input, and its proofs verify; no other
/// capability kind is accepted (the anonymous one needs a registration authority).
fn confidential_holds(tx: &dyn CapabilityTransaction) -> Result<(), String> {
    let Some(confidential) = tx.downcast_ref::<ConfidentialTransaction>() else {
        return Err("the memory ledger trusts no capability's kinds but confidential ones".into());
    };
    if confidential.witnesses.len() != confidential.input_owners().len() {
        return Err("missing_witness".into());
    }
    confidential
        .proof
        .verify(&confidential.context())
        .map_err(|error| format!("proof: {error}"))
}

fn confidential() -> CapabilityCheck {
    CapabilityCheck {
        rules: Arc::new(PrivacyRules::default()),
        independent: confidential_holds,
    }
}

/// `specie_wallet::testkit::check_valid`, accepting confidential transactions.
pub fn check_valid(tx: &SpecieTransaction, issuers: &[[u8; 32]]) -> Result<(), String> {
    specie_wallet::testkit::check_valid_with(tx, issuers, Some(&confidential()))
}

/// An in-memory ledger (`specie_wallet::testkit::MemoryLedger`) that accepts confidential
/// transactions.
pub fn memory_ledger(issuers: Vec<[u8; 32]>) -> specie_wallet::testkit::MemoryLedger {
    specie_wallet::testkit::MemoryLedger::with_capability(issuers, confidential())
}
