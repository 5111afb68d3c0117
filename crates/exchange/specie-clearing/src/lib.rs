//! The interface of SPEEDEX batch clearing, as the ledger uses it. The solver (Tâtonnement and
//! the linear program) replaces this placeholder, which clears nothing: every block it proposes
//! trades nothing, which `check` accepts.

/// Most assets one exchange clears.
pub const ASSETS_MAX: usize = 64;

/// A limit price: the least units of the bought asset accepted per unit sold, Q32.32 fixed point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LimitPrice(pub u64);

/// An asset's valuation in one block (nonzero). Selling A for B trades at p_A / p_B units of B
/// per unit of A.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Valuation(pub u64);

/// The offers selling `sell` for `buy`, aggregated by distinct limit price, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairSupply {
    pub sell: u16,
    pub buy: u16,
    pub levels: Vec<(LimitPrice, u64)>,
}

/// ε = 2^-fee_bits, μ = 2^-smoothing_bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClearingParams {
    pub fee_bits: u8,
    pub smoothing_bits: u8,
    pub rounds_max: u32,
    pub time_budget_ms: u64,
}

impl Default for ClearingParams {
    fn default() -> Self {
        ClearingParams {
            fee_bits: 15,
            smoothing_bits: 10,
            rounds_max: 5_000,
            time_budget_ms: 40,
        }
    }
}

/// `amount` of `sell` sold for `buy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairTrade {
    pub sell: u16,
    pub buy: u16,
    pub amount: u64,
}

/// One block's clearing: a valuation per asset and the trades, sorted by (sell, buy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clearing {
    pub prices: Vec<Valuation>,
    pub trades: Vec<PairTrade>,
}

/// Why a proposed clearing is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClearingViolation {
    #[error("{prices} prices for {assets} assets")]
    PriceCount { prices: usize, assets: usize },
    #[error("a zero price")]
    ZeroPrice,
    #[error("a trade the placeholder clearing cannot check")]
    Unchecked,
}

/// The proposer's clearing: every asset valued 2^32, nothing traded.
pub fn compute(assets: usize, _supply: &[PairSupply], _params: &ClearingParams) -> Clearing {
    Clearing {
        prices: vec![Valuation(1 << 32); assets],
        trades: Vec::new(),
    }
}

/// A replica's check of a proposed clearing.
pub fn check(
    assets: usize,
    _supply: &[PairSupply],
    _params: &ClearingParams,
    clearing: &Clearing,
) -> Result<(), ClearingViolation> {
    if clearing.prices.len() != assets {
        return Err(ClearingViolation::PriceCount {
            prices: clearing.prices.len(),
            assets,
        });
    }
    if clearing.prices.iter().any(|p| p.0 == 0) {
        return Err(ClearingViolation::ZeroPrice);
    }
    if !clearing.trades.is_empty() {
        return Err(ClearingViolation::Unchecked);
    }
    Ok(())
}
