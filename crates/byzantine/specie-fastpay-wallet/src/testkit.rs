//! Test helpers: seeded RNGs and funded wallets (as `specie_wallet`'s own tests make them).

use rand::rngs::StdRng;
use rand::SeedableRng;
use specie_transaction::{Output, Txid};
use specie_wallet::{PaidOutput, PaymentString, Wallet};

pub fn rng(seed: u64) -> StdRng {
    // Every test that reads a wallet's fundings decodes FastPay's kinds.
    crate::install();
    StdRng::seed_from_u64(seed)
}

/// A wallet whose first address holds spendable coins of `values` (as if received and
/// confirmed from some earlier transaction).
pub fn funded_wallet(values: &[u64], rng: &mut StdRng) -> Wallet {
    let mut wallet = Wallet::new("usd", false, rng).unwrap();
    if values.is_empty() {
        return wallet;
    }
    let commitment = wallet.latest_address().unwrap().witness_program_commitment();
    let mut txid = [0u8; 32];
    rand::RngCore::fill_bytes(rng, &mut txid);
    let payment = PaymentString::new(
        Txid(txid),
        values
            .iter()
            .enumerate()
            .map(|(index, &value)| PaidOutput {
                index: index as u64,
                output: Output {
                    witness_program_commitment: commitment,
                    value,
                },
            })
            .collect(),
    );
    wallet.import_payment(&payment, &payment.uhs_ids()).unwrap();
    wallet
}
