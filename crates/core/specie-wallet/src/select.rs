//! Coin selection: which of the wallet's coins pay a given amount.
//!
//! Goal, in order: the fewest inputs (each input is 80 bytes plus a 97-byte witness and one
//! signature check at the sentinel, and each is one more UHS id the shards must lock), then the
//! least change (an exact match creates no change output at all).
//!
//! Taking coins largest-first gives the fewest inputs that can reach the amount: no k coins sum
//! to more than the k largest. Within that count we then lower the overshoot by swapping the
//! last (smallest) pick for the smallest remaining coin that still reaches the amount.

use thiserror::Error;

/// The chosen coins, as indices into the candidate list, and their total value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    pub chosen: Vec<usize>,
    pub total: u64,
}

impl Selection {
    /// What is left over after paying `amount` (the change output's value; 0 = exact).
    pub fn change(&self, amount: u64) -> u64 {
        self.total - amount
    }
}

/// Why no selection exists. The wallet turns these into sentences with the currency unit.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SelectionError {
    #[error("the candidate coins hold {available} in total but {needed} is needed")]
    Insufficient { available: u128, needed: u64 },
    #[error("paying {needed} needs {inputs_needed} coins but a transaction may spend at most {inputs_max}")]
    TooManyInputs {
        needed: u64,
        inputs_needed: usize,
        inputs_max: usize,
    },
    #[error("the coins needed to pay {needed} add up to more than the largest value a transaction can carry")]
    ValueOverflow { needed: u64 },
}

/// Picks coins from `values` (one value per candidate coin) that sum to at least `amount`,
/// using at most `inputs_max` of them. `amount` must be at least 1.
pub fn select_coins(values: &[u64], amount: u64, inputs_max: usize) -> Result<Selection, SelectionError> {
    debug_assert!(amount >= 1, "callers refuse zero amounts before selecting");
    // One coin that matches exactly: one input, no change. Best possible.
    if let Some(index) = values.iter().position(|&value| value == amount) {
        return Ok(Selection {
            chosen: vec![index],
            total: amount,
        });
    }
    // One coin that covers the amount: the smallest such keeps big coins for big payments.
    let single = values
        .iter()
        .enumerate()
        .filter(|(_, &value)| value > amount)
        .min_by_key(|(_, &value)| value);
    if let Some((index, &value)) = single {
        return Ok(Selection {
            chosen: vec![index],
            total: value,
        });
    }
    // Several coins: largest first until the amount is reached. Ties broken by index so the
    // result does not depend on the sort's stability.
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[b].cmp(&values[a]).then(a.cmp(&b)));
    let mut sum: u128 = 0;
    let mut count = None;
    for (position, &index) in order.iter().enumerate() {
        sum += u128::from(values[index]);
        if sum >= u128::from(amount) {
            count = Some(position + 1);
            break;
        }
    }
    let Some(count) = count else {
        return Err(SelectionError::Insufficient {
            available: sum,
            needed: amount,
        });
    };
    if count > inputs_max {
        return Err(SelectionError::TooManyInputs {
            needed: amount,
            inputs_needed: count,
            inputs_max,
        });
    }
    // Keep the first count-1 picks; for the last slot take the smallest coin not yet picked
    // that still reaches the amount (the largest-first pick always qualifies, so one exists).
    let kept = &order[..count - 1];
    let kept_sum: u128 = kept.iter().map(|&index| u128::from(values[index])).sum();
    let missing = u128::from(amount) - kept_sum;
    let last = order[count - 1..]
        .iter()
        .copied()
        .filter(|&index| u128::from(values[index]) >= missing)
        .min_by_key(|&index| (values[index], index))
        .unwrap_or(order[count - 1]);
    let mut chosen = kept.to_vec();
    chosen.push(last);
    let total = kept_sum + u128::from(values[last]);
    // Coins of one wallet can exceed u64 in sum only if the inputs of this payment do; a
    // transaction whose inputs overflow is invalid (`value_overflow`), so refuse it here.
    let total = u64::try_from(total).map_err(|_| SelectionError::ValueOverflow { needed: amount })?;
    Ok(Selection { chosen, total })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chosen_values(values: &[u64], selection: &Selection) -> Vec<u64> {
        let mut picked: Vec<u64> = selection.chosen.iter().map(|&i| values[i]).collect();
        picked.sort_unstable();
        picked
    }

    #[test]
    fn exact_single_coin_wins() {
        let values = [500, 120, 70, 30];
        let selection = select_coins(&values, 120, 10).unwrap();
        assert_eq!(selection.chosen, vec![1]);
        assert_eq!(selection.change(120), 0);
    }

    #[test]
    fn smallest_covering_coin_gives_change() {
        let values = [500, 200, 70, 30];
        let selection = select_coins(&values, 150, 10).unwrap();
        assert_eq!(selection.chosen, vec![1]);
        assert_eq!(selection.change(150), 50);
    }

    #[test]
    fn several_coins_with_least_overshoot_for_fewest_inputs() {
        // Two coins are needed; largest-first would take 100 + 90 = 190, but 100 + 50 = 150
        // reaches 140 with the same count and less change.
        let values = [100, 90, 50, 20];
        let selection = select_coins(&values, 140, 10).unwrap();
        assert_eq!(chosen_values(&values, &selection), vec![50, 100]);
        assert_eq!(selection.change(140), 10);
    }

    #[test]
    fn insufficient_reports_the_total() {
        let values = [50, 40, 30];
        assert_eq!(
            select_coins(&values, 150, 10),
            Err(SelectionError::Insufficient {
                available: 120,
                needed: 150
            })
        );
        assert_eq!(
            select_coins(&[], 1, 10),
            Err(SelectionError::Insufficient {
                available: 0,
                needed: 1
            })
        );
    }

    #[test]
    fn many_small_coins() {
        let values = vec![1u64; 1000];
        let selection = select_coins(&values, 600, 1024).unwrap();
        assert_eq!(selection.chosen.len(), 600);
        assert_eq!(selection.total, 600);
        assert_eq!(
            select_coins(&values, 600, 100),
            Err(SelectionError::TooManyInputs {
                needed: 600,
                inputs_needed: 600,
                inputs_max: 100
            })
        );
    }

    #[test]
    fn inputs_summing_past_u64_are_refused() {
        let values = [u64::MAX - 1, u64::MAX - 1];
        assert!(matches!(
            select_coins(&values, u64::MAX, 10),
            Err(SelectionError::ValueOverflow { needed: u64::MAX })
        ));
    }

    proptest! {
        #[test]
        fn selection_covers_and_uses_fewest_inputs(
            values in proptest::collection::vec(1u64..1_000, 0..40),
            amount in 1u64..5_000,
        ) {
            let total: u64 = values.iter().sum();
            match select_coins(&values, amount, 1024) {
                Ok(selection) => {
                    let mut seen = selection.chosen.clone();
                    seen.sort_unstable();
                    seen.dedup();
                    prop_assert_eq!(seen.len(), selection.chosen.len(), "a coin was picked twice");
                    let sum: u64 = selection.chosen.iter().map(|&i| values[i]).sum();
                    prop_assert_eq!(sum, selection.total);
                    prop_assert!(sum >= amount);
                    // No fewer coins could reach the amount: the k-1 largest fall short.
                    let mut sorted = values.clone();
                    sorted.sort_unstable_by(|a, b| b.cmp(a));
                    let fewer: u64 = sorted.iter().take(selection.chosen.len() - 1).sum();
                    prop_assert!(fewer < amount);
                }
                Err(SelectionError::Insufficient { available, needed }) => {
                    prop_assert_eq!(available, u128::from(total));
                    prop_assert!(total < needed);
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
    }
}
