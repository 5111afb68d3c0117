//! The supply audit: no money was created or destroyed, every coin a wallet holds is in the UHS
//! and no spent one is, and every hostile transaction was refused.

/// Counts of the hostile transactions and how the system answered them.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Checks {
    /// Re-spends of an output a confirmed transaction already spent, and how many were refused.
    pub replays: u64,
    pub replays_rejected: u64,
    /// Pairs of conflicting spends of one output, and pairs of which both were confirmed.
    pub conflict_pairs: u64,
    pub conflict_pairs_with_two_winners: u64,
    /// Transactions with a forged signature, and how many were refused as invalid.
    pub forged: u64,
    pub forged_rejected: u64,
    /// Honest payments the system refused (each one a bug).
    pub honest_refused: u64,
}

/// The figures of one audit and what they prove.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct SupplyAudit {
    pub minted: u64,
    pub redeemed: u64,
    /// The sum of every wallet's coins.
    pub wallet_balances: u64,
    /// Coins the wallets hold, and how many of them the UHS holds.
    pub wallet_outputs: usize,
    pub wallet_outputs_in_uhs: usize,
    /// Outputs confirmed transactions spent, and how many of them the UHS still holds.
    pub spent_outputs: usize,
    pub spent_outputs_in_uhs: usize,
    pub checks: Checks,
}

impl SupplyAudit {
    /// Minted minus redeemed equals what the wallets hold.
    pub fn supply_ok(&self) -> bool {
        self.minted - self.redeemed == self.wallet_balances
    }

    /// Every held coin is in the UHS and no spent one is. (The UHS also holds one replay marker
    /// per mint, which no wallet owns, so its size is not compared.)
    pub fn uhs_ok(&self) -> bool {
        self.wallet_outputs_in_uhs == self.wallet_outputs && self.spent_outputs_in_uhs == 0
    }

    /// Every replay and forgery was refused and no conflicting pair had two winners.
    pub fn rejections_ok(&self) -> bool {
        let c = &self.checks;
        c.replays == c.replays_rejected && c.forged == c.forged_rejected && c.conflict_pairs_with_two_winners == 0
    }

    /// All of the above, and no honest payment refused.
    pub fn ok(&self) -> bool {
        self.supply_ok() && self.uhs_ok() && self.rejections_ok() && self.checks.honest_refused == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean() -> SupplyAudit {
        SupplyAudit {
            minted: 1000,
            redeemed: 100,
            wallet_balances: 900,
            wallet_outputs: 3,
            wallet_outputs_in_uhs: 3,
            spent_outputs: 2,
            spent_outputs_in_uhs: 0,
            checks: Checks {
                replays: 2,
                replays_rejected: 2,
                forged: 1,
                forged_rejected: 1,
                ..Checks::default()
            },
        }
    }

    #[test]
    fn each_failure_fails_the_audit() {
        assert!(clean().ok());
        let mut created_money = clean();
        created_money.wallet_balances += 1;
        assert!(!created_money.supply_ok() && !created_money.ok());
        let mut spent_present = clean();
        spent_present.spent_outputs_in_uhs = 1;
        assert!(!spent_present.uhs_ok() && !spent_present.ok());
        let mut lost_coin = clean();
        lost_coin.wallet_outputs_in_uhs = 2;
        assert!(!lost_coin.ok());
        let mut replay_accepted = clean();
        replay_accepted.checks.replays_rejected = 1;
        assert!(!replay_accepted.rejections_ok() && !replay_accepted.ok());
        let mut double_winner = clean();
        double_winner.checks.conflict_pairs_with_two_winners = 1;
        assert!(!double_winner.ok());
        let mut honest_refused = clean();
        honest_refused.checks.honest_refused = 1;
        assert!(!honest_refused.ok());
    }
}
