//! A payment between two devices, with no network: the payee asks (an amount, a fresh certified
//! key, a fresh nonce), the payer signs tokens over to that key at that nonce, the payee checks
//! them. And a deposit, as the device sends it to the authority.

use sha2::{Digest, Sha256};
use specie_offline::{Instruction, KeyCertificate, KeyRing, KeyStatus, Link, SignedMove, Token};

use crate::{Device, DeviceError, Held};

/// What a payee shows the payer: the amount, the key to pay to (with its certificate) and the
/// nonce the payer's statements must sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PaymentRequest {
    pub amount: u64,
    pub certificate: KeyCertificate,
    pub nonce: [u8; 16],
}

/// A deposit as the device sends it (and sends again, byte for byte, until it is answered).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deposit {
    pub token: Token,
    pub statement: SignedMove,
    pub instruction: Instruction,
    pub value: u64,
}

impl Deposit {
    /// The deposit statement's link: the node it makes in the token's tree.
    pub fn link(&self) -> Link {
        let last = *self.token.links().last().expect("an issuance link");
        let index = (self.token.hops.len() + 1) as u8;
        Sha256::digest(self.statement.statement.signing_bytes(&last, index)).into()
    }
}

impl Device {
    /// Asks to be paid `amount`: a fresh certified key and `nonce` (the caller's fresh randomness),
    /// kept open until the payment arrives.
    pub fn request(&mut self, amount: u64, nonce: [u8; 16], now_ms: u64) -> Result<PaymentRequest, DeviceError> {
        self.check_sync_age(now_ms)?;
        let total = self.balance().saturating_add(amount);
        if total > self.limits.holding_max {
            return Err(DeviceError::HoldingLimit {
                amount,
                total,
                limit: self.limits.holding_max,
            });
        }
        let (key, certificate) = self
            .unused
            .pop_front()
            .ok_or(DeviceError::NoKeys { needed: 1, left: 0 })?;
        self.offers.insert(nonce, (key, certificate, amount));
        Ok(PaymentRequest {
            amount,
            certificate,
            nonce,
        })
    }

    /// Withdraws an open request that no payment answered: its key was never paid to, so it is
    /// kept for another one.
    pub fn cancel_request(&mut self, nonce: &[u8; 16]) {
        if let Some((key, certificate, _)) = self.offers.remove(nonce) {
            self.unused.push_front((key, certificate));
        }
    }

    /// Pays `request` with held tokens that make exactly its amount, each signed over to the
    /// requested key at the requested nonce. What this device signed is recorded before the
    /// tokens are returned, and they are no longer held.
    pub fn pay(&mut self, request: &PaymentRequest, ring: &KeyRing, now_ms: u64) -> Result<Vec<Token>, DeviceError> {
        self.check_sync_age(now_ms)?;
        self.check_request(request, ring)?;
        let payable = self.payable_indices(ring);
        let spendable: u64 = payable.iter().map(|&i| self.held[i].value).sum();
        if request.amount > spendable {
            return Err(DeviceError::NotEnough {
                amount: request.amount,
                spendable,
                blocked: self.balance() - spendable,
            });
        }
        let values: Vec<u64> = payable.iter().map(|&i| self.held[i].value).collect();
        let chosen =
            exact_subset(&values, request.amount).ok_or(DeviceError::NoExactChange { amount: request.amount })?;
        let mut indices: Vec<usize> = chosen.into_iter().map(|c| payable[c]).collect();
        indices.sort_unstable_by(|a, b| b.cmp(a));
        let mut paid = Vec::with_capacity(indices.len());
        for index in indices {
            let held = self.held.remove(index);
            let token = held
                .token
                .transfer(&self.key(held.key), request.certificate, request.nonce)
                .expect("the device owns what it holds, within HOPS_MAX");
            let links = token.links();
            self.sign_once(links[links.len() - 2], links[links.len() - 1]);
            paid.push(token);
        }
        paid.reverse();
        Ok(paid)
    }

    /// Whether `request` is one this device may pay, its tokens aside: never sign tokens over to
    /// a key the payee could not be paid to, one the ring does not vouch for or certified too long
    /// ago (the payee would refuse, and the tokens would be lost to both), and not over the
    /// per-payment limit. A payee asked for change checks this before it takes the larger payment.
    pub fn check_request(&self, request: &PaymentRequest, ring: &KeyRing) -> Result<(), DeviceError> {
        request.certificate.check(ring).map_err(DeviceError::BadRequest)?;
        if !ring.lifecycle().certificate_receivable(request.certificate.period) {
            return Err(DeviceError::StaleKey {
                period: request.certificate.period,
            });
        }
        if request.amount > self.limits.payment_max {
            return Err(DeviceError::PaymentLimit {
                amount: request.amount,
                limit: self.limits.payment_max,
            });
        }
        Ok(())
    }

    /// The held tokens this device may pay now: within the hop limit, not revoked, and of a key
    /// still in its spend window and not revoked (as `ring`, the last one fetched, says).
    fn payable_indices(&self, ring: &KeyRing) -> Vec<usize> {
        (0..self.held.len())
            .filter(|&i| {
                let held = &self.held[i];
                let status = ring.key_status(&held.token.issuance.issuing_key);
                held.token.hops.len() < self.limits.hops_max
                    && !self.revoked.contains(&held.token.issuance.serial)
                    && status == Some(KeyStatus::Spendable)
            })
            .collect()
    }

    /// The smallest amount of at least `amount`, within the per-payment limit, that this device
    /// can pay exactly: what a payer without exact change offers, taking the difference back as
    /// change from the payee in the same hand-over. `None` if there is none.
    pub fn smallest_payable_from(&self, amount: u64, ring: &KeyRing) -> Option<u64> {
        let values: Vec<u64> = self.payable_indices(ring).iter().map(|&i| self.held[i].value).collect();
        let bound = values.iter().sum::<u64>().min(self.limits.payment_max);
        if amount > bound {
            return None;
        }
        let reachable = reachable_sums(&values, bound);
        (amount..=bound).find(|&a| reachable[a as usize])
    }

    /// Whether this device can pay exactly `amount` now (a payee asked for change checks this
    /// before it takes the larger payment).
    pub fn can_pay_exactly(&self, amount: u64, ring: &KeyRing) -> bool {
        amount <= self.limits.payment_max && self.smallest_payable_from(amount, ring) == Some(amount)
    }

    /// Checks a payment against the open request of `nonce` (seed 001, §IV-C, and the nonce of
    /// §IV-G): every token verifies, its last hop gives it to the key offered at this nonce, it
    /// is within the hop limit and not revoked, and together they are worth the amount asked.
    /// Then the tokens are held and the request is closed. Returns the value received.
    pub fn receive(
        &mut self,
        nonce: &[u8; 16],
        tokens: &[Token],
        ring: &KeyRing,
        now_ms: u64,
    ) -> Result<u64, DeviceError> {
        self.check_sync_age(now_ms)?;
        let &(key, certificate, asked) = self.offers.get(nonce).ok_or(DeviceError::UnknownRequest)?;
        if !ring.lifecycle().certificate_receivable(certificate.period) {
            return Err(DeviceError::StaleKey {
                period: certificate.period,
            });
        }
        let mut received = Vec::with_capacity(tokens.len());
        for (index, token) in tokens.iter().enumerate() {
            let verified = token
                .verify(ring)
                .map_err(|error| DeviceError::BadToken { index, error })?;
            let last = token.hops.last().ok_or(DeviceError::NotForThisPayment { index })?;
            if verified.owner != certificate.key || last.nonce != *nonce {
                return Err(DeviceError::NotForThisPayment { index });
            }
            if token.hops.len() > self.limits.hops_max {
                return Err(DeviceError::TooManyHops {
                    index,
                    hops: token.hops.len(),
                    limit: self.limits.hops_max,
                });
            }
            if self.revoked.contains(&token.issuance.serial) {
                return Err(DeviceError::Revoked { index });
            }
            match ring.key_status(&token.issuance.issuing_key) {
                Some(KeyStatus::Spendable) => {}
                Some(KeyStatus::Revoked) => return Err(DeviceError::KeyRevoked { index }),
                Some(KeyStatus::SpendExpired { spendable_through }) => {
                    return Err(DeviceError::Expired {
                        index,
                        spendable_through,
                    })
                }
                Some(KeyStatus::Expired { depositable_through }) => {
                    return Err(DeviceError::Worthless {
                        index,
                        depositable_through,
                    })
                }
                None => unreachable!("a token that verifies is of a key in the ring"),
            }
            if received.iter().any(|held: &Held| held.token == *token) {
                return Err(DeviceError::NotForThisPayment { index });
            }
            received.push(Held {
                token: token.clone(),
                key,
                value: verified.denomination,
            });
        }
        let paid: u64 = received.iter().map(|held| held.value).sum();
        if paid != asked {
            return Err(DeviceError::WrongAmount { paid, asked });
        }
        self.offers.remove(nonce);
        self.held.extend(received);
        Ok(paid)
    }
}

/// Indices into `values` of a subset adding up to exactly `amount`, with as few tokens as
/// possible; none if no subset does.
/// Which sums up to `bound` some subset of `values` makes (`bound` is at most the per-payment
/// limit, so the table is bounded by configuration, never by a peer).
fn reachable_sums(values: &[u64], bound: u64) -> Vec<bool> {
    let bound = usize::try_from(bound).expect("a payment limit that fits in memory");
    let mut reachable = vec![false; bound + 1];
    reachable[0] = true;
    for &value in values {
        let Ok(value) = usize::try_from(value) else {
            continue;
        };
        for a in (value..=bound).rev() {
            reachable[a] |= reachable[a - value];
        }
    }
    reachable
}

fn exact_subset(values: &[u64], amount: u64) -> Option<Vec<usize>> {
    let amount = usize::try_from(amount).ok()?;
    // fewest[a] after token i: the fewest of tokens 0..=i that make a; took[i][a]: token i used.
    let mut fewest = vec![usize::MAX; amount + 1];
    fewest[0] = 0;
    let mut took = vec![vec![false; amount + 1]; values.len()];
    for (i, &value) in values.iter().enumerate() {
        let Ok(value) = usize::try_from(value) else {
            continue;
        };
        for a in (value..=amount).rev() {
            let with = fewest[a - value].saturating_add(1);
            if fewest[a - value] != usize::MAX && with < fewest[a] {
                fewest[a] = with;
                took[i][a] = true;
            }
        }
    }
    if fewest[amount] == usize::MAX {
        return None;
    }
    let mut chosen = Vec::new();
    let mut left = amount;
    for i in (0..values.len()).rev() {
        if left > 0 && took[i][left] {
            chosen.push(i);
            left -= values[i] as usize;
        }
    }
    (left == 0).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use super::{exact_subset, reachable_sums};
    use proptest::prelude::*;

    #[test]
    fn exact_change_is_found_where_greedy_would_miss_it() {
        let values = [5, 2, 2, 2];
        let mut chosen = exact_subset(&values, 6).unwrap();
        chosen.sort();
        assert_eq!(chosen, vec![1, 2, 3], "2 + 2 + 2, not 5 and a missing 1");
        assert_eq!(exact_subset(&values, 8), None);
        assert_eq!(exact_subset(&values, 0), Some(vec![]));
    }

    proptest! {
        #[test]
        fn a_subset_found_adds_up_and_none_means_none_exists(
            values in prop::collection::vec(prop::sample::select(vec![1u64, 2, 5, 10, 20, 50]), 0..10),
            amount in 0u64..120,
        ) {
            match exact_subset(&values, amount) {
                Some(chosen) => {
                    let mut unique = chosen.clone();
                    unique.sort();
                    unique.dedup();
                    prop_assert_eq!(unique.len(), chosen.len());
                    prop_assert_eq!(chosen.iter().map(|&i| values[i]).sum::<u64>(), amount);
                }
                None => {
                    // Every subset, by brute force.
                    let exists = (0u32..1 << values.len()).any(|mask| {
                        (0..values.len()).filter(|i| mask >> i & 1 == 1).map(|i| values[i]).sum::<u64>() == amount
                    });
                    prop_assert!(!exists);
                }
            }
        }

        #[test]
        fn the_reachable_sums_are_exactly_the_amounts_a_subset_makes(
            values in prop::collection::vec(prop::sample::select(vec![1u64, 2, 5, 10, 20, 50]), 0..10),
            bound in 0u64..120,
        ) {
            let reachable = reachable_sums(&values, bound);
            prop_assert_eq!(reachable.len() as u64, bound + 1);
            for amount in 0..=bound {
                prop_assert_eq!(reachable[amount as usize], exact_subset(&values, amount).is_some());
            }
        }
    }
}
