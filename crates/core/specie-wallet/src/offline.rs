//! Coins moved to a bridge (offline cash, the exchange): a bridge funding (docs/transaction-format.md
//! §5.7) built from this wallet's coins, for the device keys that will hold the tokens (or an
//! exchange deposit's commitment). The device side
//! (keys, tokens) lives in the device file; this wallet only pays for it.

use rand::{CryptoRng, RngCore};
use specie_transaction::{BridgeFunding, NonceMode, SpecieTransaction};

use crate::error::WalletError;
use crate::wallet::{PendingKind, Wallet};

impl Wallet {
    /// Builds and signs a funding of `amount` from this wallet's coins to the bridge (e.g. the
    /// offline authority) whose bridge key is `authority`, for the device keys whose digest is `owners_digest`;
    /// recorded as a pending core transaction (so `sync` resolves it after a crash).
    pub fn build_bridge_funding(
        &mut self,
        authority: [u8; 32],
        owners_digest: [u8; 32],
        amount: u64,
        rng: &mut (impl RngCore + CryptoRng),
    ) -> Result<SpecieTransaction, WalletError> {
        self.build_spend(
            amount,
            PendingKind::BridgeFunding { amount },
            rng,
            |inputs, change, owners| {
                BridgeFunding::new_signed(
                    authority,
                    owners_digest,
                    amount,
                    inputs,
                    change,
                    owners,
                    NonceMode::Randomized,
                )
                .map(SpecieTransaction::BridgeFunding)
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use crate::testkit::{funded_wallet, rng};
    use specie_transaction::SpecieTransaction;

    #[test]
    fn a_bridge_funding_spends_coins_keeps_the_change_and_waits_as_pending() {
        let mut rng = rng(7);
        let mut wallet = funded_wallet(&[300, 500], &mut rng);
        let before = wallet.balance();
        let tx = wallet.build_bridge_funding([5; 32], [6; 32], 650, &mut rng).unwrap();
        let SpecieTransaction::BridgeFunding(funding) = &tx else {
            panic!("a bridge funding")
        };
        assert_eq!(
            (funding.authority, funding.owners_digest, funding.amount),
            ([5; 32], [6; 32], 650)
        );
        let spent: u64 = funding.inputs.iter().map(|input| input.data.value).sum();
        let change: u64 = funding.outputs.iter().map(|output| output.value).sum();
        assert_eq!(spent, change + 650, "the change comes back");
        assert_eq!(wallet.pending().count(), 1);
        assert!(wallet.balance().spendable < before.spendable);
        assert!(
            wallet.build_bridge_funding([5; 32], [6; 32], 10_000, &mut rng).is_err(),
            "more than it has"
        );
    }
}
