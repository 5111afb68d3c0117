//! What can go wrong inside the wallet's bookkeeping, said so that the person at the terminal
//! knows what happened and what to do next.

use specie_transaction::{AddressError, SignError, Txid};
use thiserror::Error;

/// Errors of [`crate::Wallet`] operations. None of them changes the wallet: an operation that
/// fails leaves every coin and pending transaction as it was.
#[derive(Debug, Error)]
pub enum WalletError {
    #[error("{hrp:?} cannot name a currency: {source}")]
    InvalidHrp { hrp: String, source: AddressError },

    #[error("{0:?} is not an address of this wallet's currency: {1}")]
    BadAddress(String, AddressError),

    #[error("the amount must be at least 1 (amounts are whole numbers of the currency's smallest unit)")]
    ZeroAmount,

    #[error(
        "the node at {url} serves currency {node_hrp:?}, but this wallet holds {wallet_hrp:?}: nothing was \
         sent and nothing changed. Use a {wallet_hrp} node (--node URL), or another wallet for {node_hrp}"
    )]
    WrongCurrency {
        url: String,
        node_hrp: String,
        wallet_hrp: String,
    },

    #[error(
        "the node at {url} belongs to network {node_network}, but this wallet's money is on network \
         {wallet_network} (another node or cluster of the same currency): nothing was sent and nothing \
         changed. Use a node of network {wallet_network} (--node URL; `GET /v1/info` shows a node's \
         network_id)"
    )]
    WrongNetwork {
        url: String,
        node_network: String,
        wallet_network: String,
    },

    #[error("{}", insufficient_message(*spendable, *pending_in, *needed, unit))]
    InsufficientFunds {
        spendable: u64,
        pending_in: u64,
        needed: u64,
        unit: String,
    },

    #[error(
        "paying {needed} {unit} needs {inputs_needed} coins but one transaction may spend at most \
         {inputs_max}; pay a smaller amount to one of your own addresses first to merge coins"
    )]
    TooManyInputs {
        needed: u64,
        inputs_needed: usize,
        inputs_max: usize,
        unit: String,
    },

    #[error("the coins that would pay {needed} {unit} add up to more than 18446744073709551615, the most a transaction can carry")]
    ValueOverflow { needed: u64, unit: String },

    #[error("the amounts add up to more than 18446744073709551615, the most a transaction can carry")]
    AmountsOverflow,

    #[error("a mint needs at least one output")]
    NoOutputs,

    #[error("a mint may create at most {outputs_max} outputs, not {outputs}")]
    TooManyOutputs { outputs: usize, outputs_max: usize },

    #[error("transaction {txid} cannot be abandoned: {reason}")]
    CannotAbandon { txid: Txid, reason: String },

    #[error("the issuer signer `{command}` did not sign: {reason}; nothing was built or sent")]
    Signer { command: String, reason: String },

    #[error(
        "this wallet has no issuer key, so it cannot mint or redeem; an issuer wallet is made with \
         `specie wallet create --issuer`"
    )]
    NotIssuer,

    #[error(
        "this wallet already has {pending} transactions waiting for an answer from the node; run \
         `specie wallet sync` to resolve them before starting more"
    )]
    TooManyPending { pending: usize },

    #[error(
        "this payment is not addressed to this wallet: none of its {outputs} outputs pays one of this \
         wallet's {addresses} addresses"
    )]
    NotAddressedToThisWallet { outputs: usize, addresses: usize },

    #[error("transaction {0} is not pending in this wallet")]
    UnknownTransaction(Txid),

    #[error("the random number generator produced {attempts} invalid secret keys in a row; it is broken")]
    BrokenRng { attempts: usize },

    /// A key that the wallet itself chose does not match the coin it owns: the wallet's data is
    /// inconsistent, which only a bug or a hand-edited file can cause.
    #[error("could not sign: {0}; the wallet file may have been edited by hand")]
    Sign(#[from] SignError),
}

fn insufficient_message(spendable: u64, pending_in: u64, needed: u64, unit: &str) -> String {
    let mut message = format!("this wallet holds {spendable} {unit} spendable but the payment needs {needed} {unit}");
    if pending_in > 0 {
        message.push_str(&format!(
            "; {pending_in} {unit} more is waiting for confirmation (run `specie wallet sync` to see whether it arrived)"
        ));
    }
    message
}

impl WalletError {
    /// Why coins (or a capability's notes) could not be chosen ([`crate::select_coins`]);
    /// `insufficient` says it for the kind chosen from.
    pub fn from_selection(
        error: crate::select::SelectionError,
        unit: String,
        insufficient: impl FnOnce() -> WalletError,
    ) -> WalletError {
        use crate::select::SelectionError;
        match error {
            SelectionError::Insufficient { .. } => insufficient(),
            SelectionError::TooManyInputs {
                needed,
                inputs_needed,
                inputs_max,
            } => WalletError::TooManyInputs {
                needed,
                inputs_needed,
                inputs_max,
                unit,
            },
            SelectionError::ValueOverflow { needed } => WalletError::ValueOverflow { needed, unit },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insufficient_funds_reads_as_a_sentence() {
        let error = WalletError::InsufficientFunds {
            spendable: 120,
            pending_in: 0,
            needed: 150,
            unit: "usd".into(),
        };
        assert_eq!(
            error.to_string(),
            "this wallet holds 120 usd spendable but the payment needs 150 usd"
        );
        let error = WalletError::InsufficientFunds {
            spendable: 120,
            pending_in: 30,
            needed: 150,
            unit: "usd".into(),
        };
        assert!(error.to_string().contains("30 usd more is waiting for confirmation"));
    }
}
