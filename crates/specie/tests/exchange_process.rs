//! The exchange as a real process (`specie exchange serve`) beside two real cores (`specie
//! node`, usd and eur, each with its own issuer, banking for the exchange's bridge key), over HTTP
//! on 127.0.0.1: traders deposit through the cores (the exchange checks each core itself), trade
//! under load while the exchange is killed with SIGKILL and restarted on the same data directory
//! (nothing answered is lost: every transaction answered as included is reflected), the state
//! hash after a quiet kill and restart is identical, and a withdrawal's payout is paid by the
//! core once.

mod cluster_harness;

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_harness::exchange_traders::{
    assert_included_kept, deposit_all, fund_exchange, get, issuer_hex, post, run_load, summary, trader_key,
    withdraw_once,
};
use cluster_harness::{start_serving, BIN};
use serde_json::json;
use specie_codec::Encode;
use specie_transaction::SpecieTransaction;

fn start_exchange(data_dir: &str, cores: &[String; 2]) -> (Child, String) {
    let usd = format!("usd={}", cores[0]);
    let eur = format!("eur={}", cores[1]);
    start_serving(&[
        "exchange",
        "serve",
        "--data-dir",
        data_dir,
        "--listen",
        "127.0.0.1:0",
        "--asset",
        &usd,
        "--asset",
        &eur,
        "--block-interval-ms",
        "20",
    ])
}

/// A core for the currency `hrp` (its own issuer), banking for the exchange's bridge key.
fn start_core(dir: &std::path::Path, hrp: &str, bridge: &[u8; 32]) -> (Child, String) {
    start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--hrp",
        hrp,
        "--issuer",
        &issuer_hex(hrp),
        "--exchange",
        &hex::encode(bridge),
        "--data-dir",
        dir.to_str().unwrap(),
    ])
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn the_exchange_process_loses_nothing_answered_to_kill_9_and_recovers_its_state_hash() {
    let dir = tempfile::tempdir().unwrap();
    let exchange_dir = dir.path().join("exchange");
    let exchange_dir = exchange_dir.to_str().unwrap();
    let output = std::process::Command::new(BIN)
        .args(["exchange", "bridge-key", "--data-dir", exchange_dir])
        .output()
        .unwrap();
    let bridge: [u8; 32] = hex::decode(String::from_utf8(output.stdout).unwrap().trim())
        .unwrap()
        .try_into()
        .unwrap();
    let (mut usd, usd_url) = start_core(&dir.path().join("usd"), "usd", &bridge);
    let (mut eur, eur_url) = start_core(&dir.path().join("eur"), "eur", &bridge);
    let usd_fundings = fund_exchange(&usd_url, "usd", &bridge);
    let eur_fundings = fund_exchange(&eur_url, "eur", &bridge);
    let cores = [usd_url.clone(), eur_url];
    let (mut exchange, url) = start_exchange(exchange_dir, &cores);
    let (id, _, _) = summary(&url);

    // Deposits: each credited once, after the exchange finds the funding in its core.
    deposit_all(&url, "usd", &usd_fundings);
    deposit_all(&url, "eur", &eur_fundings);
    let wrong = json!({"asset": "usd", "transaction": hex::encode(SpecieTransaction::OfflineFunding(usd_fundings[0].clone()).encode()), "account": 2, "key": hex::encode(trader_key(2).verifying_key().to_bytes())});
    let (status, refused) = post(&format!("{url}/v1/exchange/deposits"), wrong).unwrap_err();
    assert!(
        status == 422 && refused.to_string().contains("another account"),
        "{refused}"
    );

    // Load, and kill -9 in the middle of it.
    let shared = Arc::new(Mutex::new(vec![url]));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || run_load(shared, id, stop))
    };
    std::thread::sleep(Duration::from_millis(1_500));
    kill(&mut exchange);
    let (restarted, url) = start_exchange(exchange_dir, &cores);
    exchange = restarted;
    *shared.lock().unwrap() = vec![url.clone()];
    std::thread::sleep(Duration::from_millis(1_500));
    stop.store(true, Ordering::Relaxed);
    assert_included_kept(&url, &load.join().unwrap());
    let traded = get(&format!("{url}/v1/exchange/blocks/last"));
    assert!(traded["height"].as_u64().unwrap() > 0, "{traded}");

    // A quiet kill -9 and restart: the identical state hash.
    let before = summary(&url);
    kill(&mut exchange);
    let (restarted, url) = start_exchange(exchange_dir, &cores);
    exchange = restarted;
    assert_eq!(summary(&url), before, "the state hash after recovery");

    // A withdrawal: its payout is paid by the usd core once.
    withdraw_once(&url, &id, &usd_url);
    for child in [&mut exchange, &mut usd, &mut eur] {
        kill(child);
    }
}
