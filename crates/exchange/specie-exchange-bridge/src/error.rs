//! Why a trader's command, a deposit or a withdrawal stopped, with what to do about it. Whatever
//! it stopped at stays recorded in the wallet and is finished by the next command.

use std::path::PathBuf;

use specie_codec::DecodeError;
use specie_exchange_service::client::ExchangeClientError;

use crate::payout::PayoutError;
use specie_transaction::Txid;
use specie_wallet::session::SessionError;
use specie_wallet::{ClientError, FileError, WalletError};

/// What a refused deposit's message says of it.
pub const KEPT_REFUSED: &str =
    "The deposit is kept, marked refused (a wrong node may have said so): every `specie exchange` command \
     asks its core again and hands it in if the core holds it; `specie exchange forget-refused --yes` drops it";

/// What the errors about an unsent or unfinished funding say.
const KEPT_FUNDING: &str = "it is kept: run any `specie exchange` command on this wallet later to finish it";

/// Why a trader's command stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeBridgeError {
    #[error(transparent)]
    Exchange(#[from] ExchangeClientError),
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Wallet(#[from] WalletError),
    #[error(transparent)]
    Core(#[from] ClientError),
    #[error(transparent)]
    Payout(Box<PayoutError>),
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error(
        "{} has no exchange account yet: make a first deposit with `specie exchange deposit --exchange URL …`",
        path.display()
    )]
    NoAccount { path: PathBuf },
    #[error(
        "the exchange at {urls} is not the one {}'s account is on (identity {}, not {})",
        path.display(),
        hex::encode(found),
        hex::encode(expected)
    )]
    OtherExchange {
        urls: String,
        path: PathBuf,
        found: [u8; 32],
        expected: [u8; 32],
    },
    #[error(
        "the exchange at {urls} names bridge key {}, not the {} {}'s account pinned: deposits would be \
         paid to, and payouts checked against, another key; nothing was done",
        hex::encode(found),
        hex::encode(pinned),
        path.display()
    )]
    OtherBridge {
        urls: String,
        path: PathBuf,
        found: [u8; 32],
        pinned: [u8; 32],
    },
    #[error("the exchange at {urls} has every account id tried taken: it answers wrongly")]
    AccountIdsTaken { urls: String },
    #[error("the exchange has no account {id} yet: a first deposit opens it (`specie exchange deposit`)")]
    NotOpened { id: u64 },
    #[error(
        "{} is a {hrp} wallet, not a {asset} one: pass the {asset} wallet with --core-wallet",
        path.display()
    )]
    WrongCurrency { path: PathBuf, hrp: String, asset: String },
    #[error(
        "{} keeps {max} deposits and withdrawals under way, the most it may: finish them first (any `specie exchange` \
         command tries), or drop refused deposits with `specie exchange forget-refused --yes`",
        path.display()
    )]
    NoRoom { path: PathBuf, max: usize },
    #[error(
        "the exchange at {urls} holds account {id} under another key than this wallet's, so it could never credit a \
         deposit to it; nothing was paid (this wallet's exchange account is not the one on the exchange: use the \
         wallet that holds it)"
    )]
    NotCreditable { urls: String, id: u64 },
    #[error("the funding was not sent; {KEPT_FUNDING}")]
    FundingNotSent(#[source] SessionError),
    #[error("the core has not made the funding final yet ({reason}); {KEPT_FUNDING}")]
    FundingNotFinal { reason: String },
    #[error("whether the core received the funding is unknown ({0}); {KEPT_FUNDING}")]
    FundingUnknown(ClientError),
    #[error("the core did not take the funding: {refused}; its coins are released in the core wallet. {KEPT_REFUSED}")]
    FundingRefused { refused: String },
    #[error(
        "the exchange could not credit the deposit ({reason}) and refunded the funding: {back} {asset} spendable \
         again in {}",
        path.display()
    )]
    DepositRefunded {
        reason: String,
        back: u64,
        asset: String,
        path: PathBuf,
    },
    #[error(
        "the exchange answered the deposit of {asset} (funding {txid}) with a refund that is not its refund; the \
         deposit is kept"
    )]
    NotItsRefund {
        asset: String,
        txid: Txid,
        #[source]
        source: Box<PayoutError>,
    },
    #[error(
        "the core has the funding but the exchange did not credit it; it is kept: run any `specie exchange` command \
         on this wallet to hand it in again"
    )]
    NotHandedIn(#[source] ExchangeClientError),
    #[error("the core was not reached; {kept}")]
    CoreNotReached {
        kept: &'static str,
        #[source]
        source: SessionError,
    },
    #[error("the core did not take the exchange's refund; {kept}")]
    RefundNotTaken {
        kept: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("the core has not paid the exchange's refund yet ({reason}); {kept}")]
    RefundNotPaid { reason: String, kept: &'static str },
    #[error(
        "the core has not paid the exchange's refund of an earlier deposit yet ({reason}); it is kept: run this again \
         later"
    )]
    EarlierRefundNotPaid { reason: String },
    #[error("a funding has a marker")]
    NoMarker,
    #[error("the core confirmed an earlier deposit's funding but the exchange does not see it yet: run this again")]
    ConfirmedNotSeen,
    #[error("the core holds an earlier deposit's funding but the exchange does not see it yet: run this again")]
    HeldNotSeen,
    #[error("an earlier deposit is not final on its core yet ({reason}): run this again later")]
    EarlierNotFinal { reason: String },
    #[error("withdrawal of {amount} {asset}: refused by the exchange: {reason}")]
    WithdrawalRefused { amount: u64, asset: String, reason: String },
    #[error("the exchange executed no such withdrawal")]
    NoSuchWithdrawal,
    #[error("the exchange served a payout that does not pay this withdrawal; {kept}")]
    NotThisWithdrawal {
        kept: &'static str,
        #[source]
        source: Box<PayoutError>,
    },
    #[error("the core did not take the payout; {kept}")]
    PayoutNotTaken {
        kept: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("the core has not paid the payout yet ({reason}); {kept}")]
    PayoutNotPaid { reason: String, kept: &'static str },
}

impl From<PayoutError> for ExchangeBridgeError {
    fn from(error: PayoutError) -> ExchangeBridgeError {
        ExchangeBridgeError::Payout(Box::new(error))
    }
}

/// `error` with its causes, each once: `what failed: why: why that`.
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut message = error.to_string();
    let mut cause = error.source();
    while let Some(source) = cause {
        let text = source.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = source.source();
    }
    message
}
