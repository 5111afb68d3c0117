use std::sync::{Arc, Mutex};

use axum::http::{Method, Uri};
use axum::response::IntoResponse;
use specie_service::server::serve_on_loopback;
use specie_service::{ApiError, HttpLimits};

use specie_wallet::exchange::{ExchangeAccount, ExchangeWithdrawal};

use super::*;

const EXCHANGE: [u8; 32] = [0xe1; 32];
const BRIDGE: [u8; 32] = [0xb1; 32];

type Seen = Arc<Mutex<Vec<String>>>;

/// An exchange that answers its summary (`GET /v1/exchange`: identity [`EXCHANGE`], bridge key
/// [`BRIDGE`], one asset `usd`) and refuses every other call (400), keeping each request line:
/// enough to see which step a command takes, without a process. It serves while the returned
/// runtime lives.
fn exchange() -> (String, Seen, tokio::runtime::Runtime) {
    let seen = Seen::default();
    let kept = Arc::clone(&seen);
    let router = axum::Router::new().fallback(move |method: Method, uri: Uri| {
        let line = format!("{method} {uri}");
        kept.lock().unwrap().push(line.clone());
        async move {
            match line.as_str() {
                "GET /v1/exchange" => axum::Json(serde_json::json!({
                    "exchange": hex::encode(EXCHANGE),
                    "bridge": hex::encode(BRIDGE),
                    "assets": ["usd"],
                    "height": 0,
                    "state_hash": hex::encode([0u8; 32]),
                }))
                .into_response(),
                _ => ApiError::bad_request("refused by the test").into_response(),
            }
        }
    });
    let (runtime, address) = serve_on_loopback(router, HttpLimits::default()).unwrap();
    (format!("http://{address}"), seen, runtime)
}

fn account(urls: &str) -> ExchangeAccount {
    ExchangeAccount {
        exchange: EXCHANGE,
        bridge: Some(BRIDGE),
        urls: urls.to_string(),
        account: 42,
        secret_key: [7; 32],
        next_sequence: 5,
        deposits: Vec::new(),
        withdrawals: Vec::new(),
    }
}

/// A `usd` wallet at `dir/wallet.json`, with `account` if given.
fn wallet(dir: &Path, account: Option<ExchangeAccount>) -> PathBuf {
    let path = dir.join("wallet.json");
    let mut wallet = Wallet::new("usd", false, &mut rand::thread_rng()).unwrap();
    if let Some(account) = account {
        wallet.set_exchange(account);
    }
    WalletFile::save(&path, &wallet).unwrap();
    path
}

fn told() -> (Seen, impl Fn(Notice) + 'static) {
    let notices = Seen::default();
    let kept = Arc::clone(&notices);
    (notices, move |notice: Notice| {
        kept.lock().unwrap().push(notice.to_string())
    })
}

#[test]
fn refusals_name_their_assets() {
    let assets = ["usd".to_string(), "eur".to_string()];
    assert_eq!(
        name_assets(
            &assets,
            "the account's payments and offers take more of asset 1 than it has"
        ),
        "the account's payments and offers take more of eur than it has"
    );
    assert_eq!(name_assets(&assets, "no such payee"), "no such payee");
}

/// A restarted command resumes from the recorded step: a withdrawal an earlier command signed
/// and recorded is looked up on the exchange (by its sequence number) before anything else, and
/// stays recorded while the exchange does not answer.
#[test]
fn a_recorded_withdrawal_is_resumed_first_and_kept_until_finished() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen, _server) = exchange();
    let mut recorded = account(&url);
    recorded.withdrawals.push(ExchangeWithdrawal {
        asset: "usd".into(),
        sequence: 4,
        amount: 30,
        transaction: vec![1, 2, 3],
        core_wallet: dir.path().join("wallet.json").display().to_string(),
    });
    let path = wallet(dir.path(), Some(recorded));
    let (notices, notify) = told();
    let trader = Trader::open(&path, None, false, notify).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        ["GET /v1/exchange", "GET /v1/exchange/withdrawals/42/4"]
    );
    let notices = notices.lock().unwrap();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].starts_with("warning: what an earlier command left under way is not finished: the exchange at"),
        "{notices:?}"
    );
    assert_eq!(trader.account().withdrawals.len(), 1, "kept for the next command");
    drop(trader);
    let reloaded = WalletFile::load(&path).unwrap();
    assert_eq!(reloaded.exchange().unwrap().withdrawals[0].sequence, 4);
}

/// A wallet whose account is on another exchange, or pinned another bridge key, is refused
/// before anything is done; a file from before the key was pinned is pinned now.
#[test]
fn an_exchange_other_than_the_wallets_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen, _server) = exchange();
    let mut elsewhere = account(&url);
    elsewhere.exchange = [0xee; 32];
    let path = wallet(dir.path(), Some(elsewhere));
    let before = std::fs::read(&path).unwrap();
    let error = Trader::open(&path, None, false, |_| {}).err().unwrap();
    assert!(matches!(error, ExchangeBridgeError::OtherExchange { .. }), "{error}");
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing saved");
    assert_eq!(*seen.lock().unwrap(), ["GET /v1/exchange"]);

    let info = specie_exchange_service::client::ExchangeInfo {
        exchange: EXCHANGE,
        bridge: BRIDGE,
        assets: vec!["usd".into()],
        height: 0,
        state_hash: [0; 32],
    };
    let mut pinned = account("http://old");
    pinned.bridge = Some([0xbb; 32]);
    let error = trader::check_exchange(&mut pinned, &info, url.clone(), &path).unwrap_err();
    assert!(error.to_string().contains("nothing was done"), "{error}");
    assert_eq!(pinned.urls, "http://old");
    let mut older = account("http://old");
    older.bridge = None;
    trader::check_exchange(&mut older, &info, url.clone(), &path).unwrap();
    assert_eq!((older.bridge, older.urls.as_str()), (Some(BRIDGE), url.as_str()));
}

/// Without an account, only a first deposit (`open_account`) opens one; without an exchange
/// named, no exchange is even asked.
#[test]
fn a_wallet_without_an_account_is_refused_unless_a_deposit_opens_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = wallet(dir.path(), None);
    let error = Trader::open(&path, None, true, |_| {}).err().unwrap();
    assert!(matches!(error, ExchangeBridgeError::NoAccount { .. }), "{error}");
    let (url, seen, _server) = exchange();
    let error = Trader::open(&path, Some(&url), false, |_| {}).err().unwrap();
    assert!(matches!(error, ExchangeBridgeError::NoAccount { .. }), "{error}");
    assert_eq!(*seen.lock().unwrap(), ["GET /v1/exchange"]);
    assert_eq!(forget_refused(&path, |_| {}).unwrap(), 0);
}
