//! Signed payments between wallets with real keys, honest and hostile, and the book-keeping that
//! follows each outcome so that the audit can prove no money was created or destroyed.
//!
//! A run: [`PaymentWorkload::new`] makes the wallets; [`PaymentWorkload::plan_mints`] funds
//! them; then, as often as the caller likes, [`PaymentWorkload::plan_payments`] plans a batch,
//! [`PaymentWorkload::sign`] turns each plan into a transaction (from `&self`, so a batch may be
//! signed on many threads), and [`PaymentWorkload::settle`] takes each outcome back. Coins a
//! planned transaction spends leave their wallet until it settles.

use std::collections::HashMap;

use rand::rngs::StdRng;
use rand::Rng;
use secp256k1::Keypair;
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, CreatedOutput, Hash32, MintTransaction, NonceMode, Output, RedeemTransaction,
    SpecieTransaction, Transaction, UhsId,
};

use crate::audit::{Checks, SupplyAudit};

/// How much of the payment stream is hostile or large.
#[derive(Clone, Copy, Debug)]
pub struct PaymentMix {
    /// Share of payments that are double spends: a replay of a spent output, or (as often) a
    /// pair of conflicting spends of one output planned together.
    pub double_spend_fraction: f64,
    /// Share of payments sent with a forged (corrupted) signature.
    pub bad_signature_fraction: f64,
    /// Share of honest payments that are 4-in/4-out instead of 2-in/2-out.
    pub large_fraction: f64,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Mint,
    Payment,
    /// Re-spends an output that a confirmed transaction already spent.
    Replay,
    /// One of two spends of the same output planned together.
    Conflict {
        pair: u64,
    },
    ForgedSignature,
    Redeem {
        amount: u64,
    },
}

/// How the system answered a transaction, as far as the workload's book-keeping cares.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Outcome {
    Confirmed,
    /// Not applied, and safe to retry: the system was too busy.
    Busy,
    /// Not applied (a coordinator dropped it, or the outcome turned out not applied).
    Dropped,
    /// Refused by the shards: an input is not in the UHS.
    InputMissing,
    /// Refused by the sentinel: malformed or badly signed.
    Invalid,
    /// Refused for any other reason.
    Refused,
}

struct Wallet {
    keypair: Keypair,
    commitment: Hash32,
    coins: Vec<CreatedOutput>,
}

/// A transaction to sign: what kind, whose coins it spends, and who gets what.
#[derive(Clone, Debug)]
pub struct Planned {
    pub kind: Kind,
    pub sender: usize,
    pub inputs: Vec<CreatedOutput>,
    /// (owner, value) of each output, in order.
    pub outputs: Vec<(usize, u64)>,
}

/// A signed transaction as the book-keeping needs it back with its outcome.
#[derive(Clone, Debug)]
pub struct Sent {
    pub kind: Kind,
    pub sender: usize,
    pub inputs: Vec<CreatedOutput>,
    /// The owner of each created output.
    pub outputs: Vec<(usize, CreatedOutput)>,
}

/// The wallets, the coins each holds, and what has been minted, redeemed and refused.
pub struct PaymentWorkload {
    rng: StdRng,
    wallets: Vec<Wallet>,
    spent: Vec<CreatedOutput>,
    /// The settled sides of conflicting pairs whose other side is still open: (won, inputs, sender).
    pairs: HashMap<u64, Vec<(bool, Vec<CreatedOutput>, usize)>>,
    next_pair: u64,
    minted: u64,
    /// Mints not applied and safe to send again (busy, dropped), as plans.
    unminted: Vec<Planned>,
    redeemed: u64,
    confirmed: u64,
    confirmed_payments: u64,
    checks: Checks,
}

impl PaymentWorkload {
    /// `wallets` wallets, each with a fresh key from `rng`, which then drives every choice.
    pub fn new(wallets: usize, mut rng: StdRng) -> PaymentWorkload {
        let wallets = (0..wallets)
            .map(|_| {
                let keypair = Keypair::new_global(&mut rng);
                Wallet {
                    commitment: witness_program_commitment(&xonly_bytes(&keypair)),
                    keypair,
                    coins: vec![],
                }
            })
            .collect();
        PaymentWorkload {
            rng,
            wallets,
            spent: vec![],
            pairs: HashMap::new(),
            next_pair: 0,
            minted: 0,
            unminted: vec![],
            redeemed: 0,
            confirmed: 0,
            confirmed_payments: 0,
            checks: Checks::default(),
        }
    }

    /// Every wallet gets `coins_per_wallet` coins of `coin_value`, at most `outputs_max` outputs
    /// per mint.
    pub fn plan_mints(&self, coins_per_wallet: usize, coin_value: u64, outputs_max: usize) -> Vec<Planned> {
        let all: Vec<usize> = (0..self.wallets.len())
            .flat_map(|w| std::iter::repeat_n(w, coins_per_wallet))
            .collect();
        all.chunks(outputs_max)
            .map(|owners| Planned {
                kind: Kind::Mint,
                sender: 0,
                inputs: vec![],
                outputs: owners.iter().map(|&o| (o, coin_value)).collect(),
            })
            .collect()
    }

    fn take_coins(&mut self, wallet: usize, count: usize) -> Option<Vec<CreatedOutput>> {
        let coins = &mut self.wallets[wallet].coins;
        if coins.len() < count {
            return None;
        }
        let start = coins.len() - count;
        Some(coins.drain(start..).collect())
    }

    /// Picks a sender that holds at least `count` coins, trying random wallets first.
    fn pick_sender(&mut self, count: usize) -> Option<usize> {
        for _ in 0..16 {
            let wallet = self.rng.gen_range(0..self.wallets.len());
            if self.wallets[wallet].coins.len() >= count {
                return Some(wallet);
            }
        }
        (0..self.wallets.len()).find(|w| self.wallets[*w].coins.len() >= count)
    }

    fn split(&mut self, total: u64, parts: usize) -> Vec<u64> {
        assert!(total >= parts as u64);
        let mut cuts: Vec<u64> = (0..parts - 1).map(|_| self.rng.gen_range(1..total)).collect();
        cuts.sort_unstable();
        cuts.dedup();
        while cuts.len() < parts - 1 {
            // Rare collision: fall back to even cuts, each part at least 1.
            cuts = (1..parts as u64).map(|i| i * total / parts as u64).collect();
        }
        let mut values = vec![];
        let mut last = 0;
        for cut in cuts.into_iter().chain([total]) {
            values.push(cut - last);
            last = cut;
        }
        debug_assert_eq!(values.iter().sum::<u64>(), total);
        values
    }

    /// Plans about `count` payments (a conflicting pair counts as two, so one more is possible),
    /// fewer if the wallets run out of coins.
    pub fn plan_payments(&mut self, count: usize, mix: &PaymentMix) -> Vec<Planned> {
        let mut batch = vec![];
        while batch.len() < count {
            let roll: f64 = self.rng.gen();
            if roll < mix.double_spend_fraction {
                if !self.plan_double_spend(&mut batch) {
                    break;
                }
                continue;
            }
            let large = self.rng.gen_bool(mix.large_fraction);
            let arity = if large { 4 } else { 2 };
            let Some(sender) = self.pick_sender(arity) else { break };
            let inputs = self.take_coins(sender, arity).expect("picked");
            let total: u64 = inputs.iter().map(|c| c.output.value).sum();
            let values = self.split(total, arity);
            let outputs = values
                .into_iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        if i == 0 {
                            sender
                        } else {
                            self.rng.gen_range(0..self.wallets.len())
                        },
                        v,
                    )
                })
                .collect();
            let kind = if roll < mix.double_spend_fraction + mix.bad_signature_fraction {
                Kind::ForgedSignature
            } else {
                Kind::Payment
            };
            batch.push(Planned {
                kind,
                sender,
                inputs,
                outputs,
            });
        }
        batch
    }

    /// A replay of a spent output (half the time, once any is spent), else a conflicting pair.
    /// False if no wallet has a coin left.
    fn plan_double_spend(&mut self, batch: &mut Vec<Planned>) -> bool {
        if self.rng.gen_bool(0.5) && !self.spent.is_empty() {
            let coin = self.spent[self.rng.gen_range(0..self.spent.len())];
            let owner = self.owner_of(&coin);
            batch.push(Planned {
                kind: Kind::Replay,
                sender: owner,
                inputs: vec![coin],
                outputs: vec![(owner, coin.output.value)],
            });
            return true;
        }
        let Some(sender) = self.pick_sender(1) else {
            return false;
        };
        let coin = self.take_coins(sender, 1).expect("picked");
        let pair = self.next_pair;
        self.next_pair += 1;
        // Two different recipients, so the two spends are different transactions.
        let first = self.rng.gen_range(0..self.wallets.len());
        for to in [first, (first + 1) % self.wallets.len()] {
            batch.push(Planned {
                kind: Kind::Conflict { pair },
                sender,
                inputs: coin.clone(),
                outputs: vec![(to, coin[0].output.value)],
            });
        }
        true
    }

    /// Redeems about half of `wallet`'s first `coins` coins through the issuer, the rest back to
    /// it as change; `None` if it holds none.
    pub fn plan_redeem(&mut self, wallet: usize, coins: usize) -> Option<Planned> {
        let count = self.wallets[wallet].coins.len().min(coins);
        let inputs: Vec<CreatedOutput> = self.wallets[wallet].coins.drain(..count).collect();
        if inputs.is_empty() {
            return None;
        }
        let total: u64 = inputs.iter().map(|c| c.output.value).sum();
        let amount = total.div_ceil(2);
        let change: Vec<(usize, u64)> = if total > amount {
            vec![(wallet, total - amount)]
        } else {
            vec![]
        };
        Some(Planned {
            kind: Kind::Redeem { amount },
            sender: wallet,
            inputs,
            outputs: change,
        })
    }

    fn owner_of(&self, coin: &CreatedOutput) -> usize {
        self.wallets
            .iter()
            .position(|w| w.commitment == coin.output.witness_program_commitment)
            .expect("every coin has an owner")
    }

    /// One signing nonce per planned transaction (drawn here, so signing needs no RNG).
    pub fn nonces(&mut self, count: usize) -> Vec<[u8; 32]> {
        (0..count).map(|_| self.rng.gen()).collect()
    }

    /// Signs `plan` with its sender's key (mints and redemptions also with `issuer`), corrupting
    /// the signature of a [`Kind::ForgedSignature`].
    pub fn sign(&self, plan: Planned, issuer: &Keypair, nonce: [u8; 32]) -> (Sent, SpecieTransaction) {
        let wallets = &self.wallets;
        let outputs: Vec<Output> = plan
            .outputs
            .iter()
            .map(|(owner, value)| Output {
                witness_program_commitment: wallets[*owner].commitment,
                value: *value,
            })
            .collect();
        let inputs: Vec<_> = plan.inputs.iter().map(CreatedOutput::to_input).collect();
        let owners: Vec<Keypair> = plan.inputs.iter().map(|_| wallets[plan.sender].keypair).collect();
        let tx = match plan.kind {
            Kind::Mint => SpecieTransaction::Mint(MintTransaction::new_signed(
                nonce,
                outputs,
                issuer,
                NonceMode::Randomized,
            )),
            Kind::Redeem { amount } => SpecieTransaction::Redeem(
                RedeemTransaction::new_signed(amount, inputs, outputs, &owners, issuer, NonceMode::Randomized)
                    .expect("own coins"),
            ),
            _ => {
                let mut tx = Transaction {
                    inputs,
                    outputs,
                    witnesses: vec![],
                };
                tx.sign(&owners, NonceMode::Randomized).expect("own coins");
                if plan.kind == Kind::ForgedSignature {
                    let last = tx.witnesses[0].0.len() - 1;
                    tx.witnesses[0].0[last] ^= 0x01;
                }
                SpecieTransaction::Transfer(tx)
            }
        };
        let created = tx.created_outputs();
        let outputs = plan
            .outputs
            .iter()
            .zip(created)
            .map(|((owner, _), created)| (*owner, created))
            .collect();
        let sent = Sent {
            kind: plan.kind,
            sender: plan.sender,
            inputs: plan.inputs,
            outputs,
        };
        (sent, tx)
    }

    /// Takes the outcome of a sent transaction: moves coins, counts mints, redemptions and
    /// hostile transactions refused.
    pub fn settle(&mut self, sent: Sent, outcome: Outcome) {
        let confirmed = outcome == Outcome::Confirmed;
        if confirmed {
            self.confirmed += 1;
        }
        match sent.kind {
            Kind::Mint => {
                if confirmed {
                    self.minted += sent.outputs.iter().map(|(_, c)| c.output.value).sum::<u64>();
                    self.credit(&sent.outputs);
                } else if matches!(outcome, Outcome::Busy | Outcome::Dropped) {
                    self.unminted.push(Planned {
                        kind: Kind::Mint,
                        sender: 0,
                        inputs: vec![],
                        outputs: sent.outputs.iter().map(|(owner, c)| (*owner, c.output.value)).collect(),
                    });
                }
            }
            Kind::Redeem { amount } => {
                if confirmed {
                    self.redeemed += amount;
                    self.spent.extend(&sent.inputs);
                    self.credit(&sent.outputs);
                } else {
                    self.wallets[sent.sender].coins.extend(&sent.inputs);
                }
            }
            Kind::Payment => self.finish_payment(&sent, outcome),
            Kind::Replay => {
                self.checks.replays += 1;
                // Refused by the shards (spent input), or never applied (dropped, or not taken
                // while a group failed over): either way not confirmed. Whether it applied all
                // the same, the UHS check of the audit tells.
                if matches!(outcome, Outcome::InputMissing | Outcome::Dropped | Outcome::Busy) {
                    self.checks.replays_rejected += 1;
                }
            }
            Kind::ForgedSignature => {
                self.checks.forged += 1;
                if outcome == Outcome::Invalid {
                    self.checks.forged_rejected += 1;
                }
                self.wallets[sent.sender].coins.extend(&sent.inputs);
            }
            Kind::Conflict { pair } => self.finish_conflict(pair, &sent, confirmed),
        }
    }

    fn finish_payment(&mut self, sent: &Sent, outcome: Outcome) {
        match outcome {
            Outcome::Confirmed => {
                self.confirmed_payments += 1;
                self.spent.extend(&sent.inputs);
                self.credit(&sent.outputs);
            }
            Outcome::Busy | Outcome::Dropped => self.wallets[sent.sender].coins.extend(&sent.inputs),
            _ => {
                // An honest payment spends coins only its sender holds: a refusal is a bug.
                self.checks.honest_refused += 1;
                self.wallets[sent.sender].coins.extend(&sent.inputs);
            }
        }
    }

    fn finish_conflict(&mut self, pair: u64, sent: &Sent, confirmed: bool) {
        let sides = self.pairs.entry(pair).or_default();
        sides.push((confirmed, sent.inputs.clone(), sent.sender));
        let both_done = sides.len() == 2;
        if confirmed {
            self.confirmed_payments += 1;
            self.spent.extend(&sent.inputs);
            self.credit(&sent.outputs);
        }
        if both_done {
            let sides = self.pairs.remove(&pair).expect("present");
            self.checks.conflict_pairs += 1;
            match sides.iter().filter(|(won, _, _)| *won).count() {
                0 => self.wallets[sides[0].2].coins.extend(&sides[0].1), // neither won: the coin is still unspent
                1 => {}
                _ => self.checks.conflict_pairs_with_two_winners += 1,
            }
        }
    }

    fn credit(&mut self, outputs: &[(usize, CreatedOutput)]) {
        for (owner, coin) in outputs {
            self.wallets[*owner].coins.push(*coin);
        }
    }

    /// The mints settled as not applied and safe to send again (busy or dropped: a group
    /// failing over), to plan again; taken once.
    pub fn take_unminted(&mut self) -> Vec<Planned> {
        std::mem::take(&mut self.unminted)
    }

    pub fn minted(&self) -> u64 {
        self.minted
    }

    /// Transactions confirmed, of any kind.
    pub fn confirmed(&self) -> u64 {
        self.confirmed
    }

    /// Payments confirmed (honest ones, and winning sides of conflicting pairs).
    pub fn confirmed_payments(&self) -> u64 {
        self.confirmed_payments
    }

    /// The UHS ids of every coin a wallet holds: each must be in the UHS.
    pub fn held_ids(&self) -> Vec<UhsId> {
        self.wallets.iter().flat_map(|w| &w.coins).map(|c| c.uhs_id).collect()
    }

    /// The UHS ids of every output a confirmed transaction spent: none may be in the UHS.
    pub fn spent_ids(&self) -> Vec<UhsId> {
        self.spent.iter().map(|c| c.uhs_id).collect()
    }

    /// The audit, given how many of [`Self::held_ids`] and of [`Self::spent_ids`] the UHS holds.
    pub fn audit(&self, held_in_uhs: usize, spent_in_uhs: usize) -> SupplyAudit {
        SupplyAudit {
            minted: self.minted,
            redeemed: self.redeemed,
            wallet_balances: self.wallets.iter().flat_map(|w| &w.coins).map(|c| c.output.value).sum(),
            wallet_outputs: self.wallets.iter().map(|w| w.coins.len()).sum(),
            wallet_outputs_in_uhs: held_in_uhs,
            spent_outputs: self.spent.len(),
            spent_outputs_in_uhs: spent_in_uhs,
            checks: self.checks.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    const MIX: PaymentMix = PaymentMix {
        double_spend_fraction: 0.2,
        bad_signature_fraction: 0.1,
        large_fraction: 0.1,
    };

    /// Settles `sent` as a correct system would: a transaction applies if its inputs are all
    /// unspent in `uhs` (and, for a transfer, validly signed).
    fn apply(uhs: &mut std::collections::HashSet<UhsId>, sent: Sent, forged: bool) -> (Sent, Outcome) {
        if forged {
            return (sent, Outcome::Invalid);
        }
        if !sent.inputs.iter().all(|c| uhs.contains(&c.uhs_id)) {
            return (sent, Outcome::InputMissing);
        }
        for c in &sent.inputs {
            uhs.remove(&c.uhs_id);
        }
        for (_, c) in &sent.outputs {
            uhs.insert(c.uhs_id);
        }
        (sent, Outcome::Confirmed)
    }

    #[test]
    fn a_correct_system_passes_the_audit_and_money_is_conserved() {
        let mut rng = StdRng::seed_from_u64(5);
        let issuer = Keypair::new_global(&mut rng);
        let mut workload = PaymentWorkload::new(6, rng);
        let mut uhs = std::collections::HashSet::new();
        let mut run = |workload: &mut PaymentWorkload, plans: Vec<Planned>| {
            let nonces = workload.nonces(plans.len());
            let signed: Vec<(Sent, SpecieTransaction)> = plans
                .into_iter()
                .zip(nonces)
                .map(|(plan, nonce)| workload.sign(plan, &issuer, nonce))
                .collect();
            for (sent, _) in signed {
                let forged = sent.kind == Kind::ForgedSignature;
                let (sent, outcome) = apply(&mut uhs, sent, forged);
                workload.settle(sent, outcome);
            }
        };
        let mints = workload.plan_mints(8, 1_000, 5);
        run(&mut workload, mints);
        assert_eq!(workload.minted(), 6 * 8 * 1_000);
        for _ in 0..20 {
            let batch = workload.plan_payments(4, &MIX);
            run(&mut workload, batch);
        }
        let redeem = workload.plan_redeem(0, 2).expect("wallet 0 has coins");
        run(&mut workload, vec![redeem]);
        let held_in_uhs = workload.held_ids().iter().filter(|id| uhs.contains(id)).count();
        let spent_in_uhs = workload.spent_ids().iter().filter(|id| uhs.contains(id)).count();
        let audit = workload.audit(held_in_uhs, spent_in_uhs);
        assert!(audit.ok(), "{audit:?}");
        assert!(
            audit.redeemed > 0 && audit.checks.forged > 0 && audit.checks.replays + audit.checks.conflict_pairs > 0
        );
        assert!(workload.confirmed_payments() > 0);
    }

    #[test]
    fn a_mint_not_applied_is_planned_again_and_one_refused_is_not() {
        let mut rng = StdRng::seed_from_u64(7);
        let issuer = Keypair::new_global(&mut rng);
        let mut workload = PaymentWorkload::new(3, rng);
        let plans = workload.plan_mints(2, 10, 2);
        let planned: Vec<Vec<(usize, u64)>> = plans.iter().map(|plan| plan.outputs.clone()).collect();
        let outcomes = [Outcome::Dropped, Outcome::Confirmed, Outcome::Invalid];
        for (plan, outcome) in plans.into_iter().zip(outcomes) {
            let (sent, _) = workload.sign(plan, &issuer, [1; 32]);
            workload.settle(sent, outcome);
        }
        let again = workload.take_unminted();
        assert_eq!(
            again.iter().map(|plan| plan.outputs.clone()).collect::<Vec<_>>(),
            vec![planned[0].clone()]
        );
        assert!(again
            .iter()
            .all(|plan| plan.kind == Kind::Mint && plan.inputs.is_empty()));
        assert!(workload.take_unminted().is_empty(), "taken once");
        assert_eq!(workload.minted(), 20);
    }

    #[test]
    fn a_confirmed_replay_fails_the_audit() {
        let mut rng = StdRng::seed_from_u64(6);
        let issuer = Keypair::new_global(&mut rng);
        let mut workload = PaymentWorkload::new(3, rng);
        for plan in workload.plan_mints(4, 10, 100) {
            let (sent, _) = workload.sign(plan, &issuer, [0; 32]);
            workload.settle(sent, Outcome::Confirmed);
        }
        let payment = workload.plan_payments(
            1,
            &PaymentMix {
                double_spend_fraction: 0.0,
                bad_signature_fraction: 0.0,
                large_fraction: 0.0,
            },
        );
        let (sent, _) = workload.sign(payment[0].clone(), &issuer, [1; 32]);
        let replay = Sent {
            kind: Kind::Replay,
            ..sent.clone()
        };
        workload.settle(sent, Outcome::Confirmed);
        workload.settle(replay, Outcome::Confirmed);
        let audit = workload.audit(workload.held_ids().len(), 0);
        assert!(!audit.rejections_ok() && !audit.ok(), "{audit:?}");
    }
}
