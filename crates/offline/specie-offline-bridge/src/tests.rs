use std::sync::{Arc, Mutex};

use axum::http::{Method, Uri};

use crate::device::{AuthorityClient, DeviceStore};
use specie_offline_device::DeviceLimits;
use specie_service::server::serve_on_loopback;
use specie_service::{ApiError, HttpLimits};
use specie_wallet::session::Submitted;
use specie_wallet::{Outcome, Settled};

use super::*;
use crate::fund::settled;

/// The requests a fake authority saw: each one's line and body.
type Seen = Arc<Mutex<Vec<(String, String)>>>;

/// An offline authority that refuses every call (400), keeping each request's line and body:
/// enough to see which step a run takes first, without a process. It serves while the returned
/// runtime lives.
fn refusing_authority() -> (AuthorityClient, Seen, tokio::runtime::Runtime) {
    let seen = Seen::default();
    let kept = Arc::clone(&seen);
    let router = axum::Router::new().fallback(move |method: Method, uri: Uri, body: String| {
        kept.lock().unwrap().push((format!("{method} {uri} HTTP/1.1"), body));
        async { ApiError::bad_request("refused by the test") }
    });
    let (runtime, address) = serve_on_loopback(router, HttpLimits::default()).unwrap();
    (AuthorityClient::new(&format!("http://{address}"), None), seen, runtime)
}

/// A device in a file of its own in `dir`.
fn device(dir: &Path) -> DeviceFile {
    DeviceFile::create(&DeviceStore::File(dir.join("device")), DeviceLimits::default(), 0).unwrap()
}

const KEPT: &str =
    r#"{"transaction": "abcd", "owners": ["0101010101010101010101010101010101010101010101010101010101010101"]}"#;

#[test]
fn the_kept_funding_sits_beside_the_device_and_a_damaged_one_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = funding_path(&dir.path().join("device"));
    assert_eq!(path, dir.path().join("device.funding"));
    assert!(read_kept_funding(&path).unwrap().is_none(), "none kept: fund anew");
    std::fs::write(&path, KEPT).unwrap();
    let (transaction, owners) = read_kept_funding(&path).unwrap().unwrap();
    assert_eq!((transaction.as_str(), owners), ("abcd", vec![[1u8; 32]]));
    for (damaged, why) in [
        ("{\"transaction\": \"ab\"", "EOF"),
        (r#"{"owners": []}"#, "no transaction"),
        (r#"{"transaction": "ab"}"#, "no owners"),
        (
            r#"{"transaction": "ab", "owners": ["0101"]}"#,
            "an owner is not 32 bytes",
        ),
        (r#"{"transaction": "ab", "owners": ["zz"]}"#, "Invalid character"),
    ] {
        std::fs::write(&path, damaged).unwrap();
        let error = read_kept_funding(&path).unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, OfflineBridgeError::KeptDamaged { .. }), "{message}");
        assert!(
            message.starts_with(&format!("{} is damaged: ", path.display())),
            "{message}"
        );
        assert!(message.contains(why), "{message}");
    }
}

/// A restarted run resumes from the recorded step: the kept funding is handed in to the
/// authority before anything else, and no new funding is built, paid or recorded.
#[test]
fn a_kept_funding_is_handed_in_first_and_nothing_new_is_paid() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = device(dir.path());
    let kept = funding_path(file.path());
    std::fs::write(&kept, KEPT).unwrap();
    let (authority, seen, _server) = refusing_authority();
    let wallet = dir.path().join("wallet.json");
    let mut notices = Vec::new();
    let error = fund_from_core(&mut file, &authority, &wallet, None, 500, &mut |n| notices.push(n)).unwrap_err();
    assert!(
        error.to_string().starts_with("the authority at http://127.0.0.1:"),
        "{error}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].0, "POST /v1/offline/fund-from-core HTTP/1.1");
    let body: serde_json::Value = serde_json::from_str(&seen[0].1).unwrap();
    assert_eq!(body["transaction"], "abcd");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        KEPT,
        "kept until the authority answers"
    );
    assert!(!wallet.exists(), "the wallet is not even read");
    assert!(notices.is_empty(), "{notices:?}");
}

/// Without a kept funding the authority is asked whether it could issue the amount before
/// anything is paid: refused there, nothing is recorded and the wallet is not read.
#[test]
fn nothing_is_paid_before_the_authority_could_issue_the_funding() {
    let dir = tempfile::tempdir().unwrap();
    let mut file = device(dir.path());
    let (authority, seen, _server) = refusing_authority();
    let wallet = dir.path().join("wallet.json");
    assert!(fund_from_core(&mut file, &authority, &wallet, None, 500, &mut |_| {}).is_err());
    assert_eq!(seen.lock().unwrap()[0].0, "GET /v1/offline/keys HTTP/1.1");
    assert!(!funding_path(file.path()).exists());
    assert!(!wallet.exists());
}

#[test]
fn a_funding_the_core_refused_is_kept_under_its_txid_and_an_unfinished_one_stays() {
    let dir = tempfile::tempdir().unwrap();
    let kept = funding_path(&dir.path().join("device"));
    std::fs::write(&kept, KEPT).unwrap();
    let txid = Txid::default();

    let pending = Submitted::Settled(Outcome::StillPending { reason: "busy".into() });
    let error = settled(pending, &kept, txid).unwrap_err();
    assert!(matches!(error, OfflineBridgeError::NotFinal { .. }), "{error}");
    assert_eq!(
        std::fs::read_to_string(&kept).unwrap(),
        KEPT,
        "the next run hands it in"
    );
    settled(Submitted::Settled(Outcome::Confirmed(Settled::default())), &kept, txid).unwrap();
    assert!(kept.exists());

    let rejected = Outcome::Rejected {
        reason: "double spend".into(),
        settled: Settled::default(),
    };
    let error = settled(Submitted::Settled(rejected), &kept, txid).unwrap_err();
    let archived = refused_path(&kept, &txid);
    let OfflineBridgeError::FundingRefused { archived: named, .. } = &error else {
        panic!("{error}");
    };
    assert_eq!(named, &archived);
    assert_eq!(
        archived.file_name().unwrap().to_str().unwrap(),
        format!("device.funding.refused-{txid}")
    );
    assert_eq!(
        std::fs::read_to_string(&archived).unwrap(),
        KEPT,
        "kept, should the node be wrong"
    );
    assert!(read_kept_funding(&kept).unwrap().is_none(), "the next run funds anew");
    assert!(error.to_string().contains("rename it back to"), "{error}");
}

/// The core wallet is locked for the move unless the device is kept in it (then this command
/// holds its lock already, and waiting for it would wait for ever).
#[test]
fn the_wallet_is_locked_unless_the_device_is_kept_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = device(dir.path());
    let wallet = dir.path().join("wallet.json");
    let mut notices = Vec::new();
    let lock = lock_wallet(&file, &wallet, &mut |n| notices.push(n)).unwrap();
    assert!(lock.is_some());
    assert!(WalletLock::acquire(&wallet, 0, || {}).is_err(), "held for the move");
    drop(lock);
    assert!(notices.is_empty());
}
