//! The values tokens come in, like banknotes and coins: one issuing key per denomination (and
//! key period), so a token's value is its issuing key's.

use thiserror::Error;

/// Most denominations a series may have.
pub const DENOMINATIONS_MAX: usize = 64;

/// A series of denominations in minor units, strictly increasing from 1, so every amount can be
/// made of tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denominations(Vec<u64>);

/// Why a series is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DenominationsError {
    #[error("a series needs between 1 and {DENOMINATIONS_MAX} denominations, not {count}")]
    Count { count: usize },
    #[error("the smallest denomination must be 1, so that every amount can be paid; it is {smallest}")]
    NoUnit { smallest: u64 },
    #[error("denominations must be strictly increasing: {value} follows {previous}")]
    NotIncreasing { previous: u64, value: u64 },
}

impl Default for Denominations {
    /// The cash-like 1-2-5 series from 1 to 50,000 minor units (a cent to 500).
    fn default() -> Self {
        let series = (0..5)
            .flat_map(|power| [1, 2, 5].map(|digit| digit * 10u64.pow(power)))
            .collect();
        Denominations(series)
    }
}

impl Denominations {
    pub fn new(values: Vec<u64>) -> Result<Denominations, DenominationsError> {
        if values.is_empty() || values.len() > DENOMINATIONS_MAX {
            return Err(DenominationsError::Count { count: values.len() });
        }
        if values[0] != 1 {
            return Err(DenominationsError::NoUnit { smallest: values[0] });
        }
        if let Some(pair) = values.windows(2).find(|pair| pair[0] >= pair[1]) {
            return Err(DenominationsError::NotIncreasing {
                previous: pair[0],
                value: pair[1],
            });
        }
        Ok(Denominations(values))
    }

    pub fn values(&self) -> &[u64] {
        &self.0
    }

    pub fn contains(&self, value: u64) -> bool {
        self.0.binary_search(&value).is_ok()
    }

    /// Tokens that make `amount`, largest first: the greedy choice, which uses the fewest tokens
    /// for 1-2-5 and power-of-two series.
    pub fn split(&self, mut amount: u64) -> Vec<u64> {
        let mut tokens = Vec::new();
        for &value in self.0.iter().rev() {
            let count = amount / value;
            tokens.extend(std::iter::repeat_n(value, count as usize));
            amount -= count * value;
        }
        debug_assert_eq!(amount, 0, "the unit denomination makes any remainder");
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_default_series_is_cash_like_and_a_bad_series_is_refused_with_its_reason() {
        let series = Denominations::default();
        assert_eq!(
            series.values(),
            [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000]
        );
        assert_eq!(series.split(1_788), vec![1_000, 500, 200, 50, 20, 10, 5, 2, 1]);
        assert_eq!(Denominations::new(vec![]), Err(DenominationsError::Count { count: 0 }));
        assert_eq!(
            Denominations::new(vec![2, 5]),
            Err(DenominationsError::NoUnit { smallest: 2 })
        );
        assert_eq!(
            Denominations::new(vec![1, 5, 5]),
            Err(DenominationsError::NotIncreasing { previous: 5, value: 5 })
        );
    }

    proptest! {
        #[test]
        fn a_split_adds_up_and_uses_only_denominations(amount in 0u64..10_000_000) {
            let series = Denominations::default();
            let tokens = series.split(amount);
            prop_assert_eq!(tokens.iter().sum::<u64>(), amount);
            prop_assert!(tokens.iter().all(|value| series.contains(*value)));
            prop_assert!(tokens.windows(2).all(|pair| pair[0] >= pair[1]));
        }
    }
}
