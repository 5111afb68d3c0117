//! Test helpers: the core wallet's (`specie_wallet::testkit`), with FastPay's part installed.

use rand::rngs::StdRng;

pub use specie_wallet::testkit::funded_wallet;

/// A seeded rng; every test starts with one, so this is also where FastPay's part and kinds are
/// installed, as the binary installs them, for wallet files that hold them.
pub fn rng(seed: u64) -> StdRng {
    crate::install();
    specie_wallet::testkit::rng(seed)
}
