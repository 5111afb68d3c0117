//! The exchange as a real process (`specie exchange serve`) beside two real cores (`specie
//! node`, usd and eur, each with its own issuer, banking for the exchange's bridge key), over HTTP
//! on 127.0.0.1: traders deposit through the cores (the exchange checks each core itself), trade
//! under load while the exchange is killed with SIGKILL and restarted on the same data directory
//! (nothing answered is lost: every transaction answered as included is reflected), the state
//! hash after a quiet kill and restart is identical, and a withdrawal's payout is paid by the
//! core once. A funding the exchange can never credit (its account is another key's) is
//! refunded to its payer, whose core pays the refund once; a transaction sent twice in one
//! request and in two requests at once is executed once and every request learns its block.

use crate::cluster_harness;

use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_harness::exchange_traders::{
    assert_included_kept, deposit_all, fund_exchange, get, issuer_hex, post, run_load, summary, trader_key,
    withdraw_once,
};
use cluster_harness::{confirm_in_core, post_transactions, start_serving, BIN};
use serde_json::{json, Value};
use specie_codec::Encode;
use specie_exchange::{deposit_commitment, Operation, Transaction};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, BridgeFunding, MintTransaction, NonceMode, Output, SpecieTransaction,
};

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

/// A funding of 300 usd to the exchange committing to account 1 with trader 2's key (account 1
/// is trader 1's), paid by a core key of its own: confirmed, then handed in, it is refunded to
/// that key, and the core pays the refund once.
fn refund_of_an_uncreditable_funding(url: &str, core_url: &str, bridge: &[u8; 32]) {
    let payer = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[77; 32]).unwrap();
    let address = witness_program_commitment(&xonly_bytes(&payer));
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [78; 32],
        vec![Output {
            witness_program_commitment: address,
            value: 300,
        }],
        &cluster_harness::exchange_traders::issuer("usd"),
        NonceMode::Deterministic,
    ));
    confirm_in_core(core_url, std::slice::from_ref(&mint));
    let key = trader_key(2).verifying_key().to_bytes();
    let funding = BridgeFunding::new_signed(
        *bridge,
        deposit_commitment(1, &key),
        300,
        vec![mint.created_outputs()[0].to_input()],
        vec![],
        &[payer],
        NonceMode::Deterministic,
    )
    .unwrap();
    let funding = SpecieTransaction::BridgeFunding(funding);
    confirm_in_core(core_url, std::slice::from_ref(&funding));
    let body =
        json!({"asset": "usd", "transaction": hex::encode(funding.encode()), "account": 1, "key": hex::encode(key)});
    let answer = post(&format!("{url}/v1/exchange/deposits"), body.clone()).expect("answered");
    assert_eq!(answer["credited"], false, "{answer}");
    let refunded = &answer["refunded"];
    assert_eq!(refunded["reason"], "the account exists with another key", "{answer}");
    assert_eq!(
        (refunded["amount"].as_u64(), refunded["address"].as_str()),
        (Some(300), Some(&*hex::encode(address)))
    );
    let again = post(&format!("{url}/v1/exchange/deposits"), body).expect("answered again");
    assert_eq!(
        again["refunded"]["payout"], refunded["payout"],
        "refunded once: {again}"
    );
    let payout = <SpecieTransaction as specie_codec::Decode>::decode_exact(
        &hex::decode(refunded["payout"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    assert_eq!(
        payout.outputs()[0].witness_program_commitment,
        address,
        "paid to the payer"
    );
    confirm_in_core(core_url, std::slice::from_ref(&payout));
    assert_ne!(
        post_transactions(core_url, &[payout]),
        vec!["confirmed".to_string()],
        "paid once"
    );
}

/// Trader 1's payment sent twice in one request, and in two requests at once: one block holds
/// it once, and every copy in every request is answered as included at that block's height.
fn sent_twice_is_executed_once(url: &str, id: &[u8; 32]) {
    let sequence = get(&format!("{url}/v1/exchange/accounts/1"))["last_sequence"]
        .as_u64()
        .unwrap()
        + 1;
    let payment = Transaction {
        account: 1,
        sequence,
        operation: Operation::Payment {
            to: 2,
            asset: 0,
            amount: 11,
        },
    }
    .sign(id, &trader_key(1));
    let mut bytes = Vec::new();
    payment.encode_to(&mut bytes);
    let body = json!({"transactions": [hex::encode(&bytes), hex::encode(&bytes)]});
    let requests: Vec<_> = (0..2)
        .map(|_| {
            let (url, body) = (url.to_string(), body.clone());
            std::thread::spawn(move || post(&format!("{url}/v1/exchange/transactions"), body).expect("answered"))
        })
        .collect();
    let fates: Vec<Value> = requests
        .into_iter()
        .flat_map(|request| request.join().unwrap()["fates"].as_array().unwrap().clone())
        .collect();
    let heights: Vec<Option<u64>> = fates.iter().map(|fate| fate["included"].as_u64()).collect();
    assert!(heights.iter().all(|h| h.is_some() && *h == heights[0]), "{fates:?}");
    let block = get(&format!("{url}/v1/exchange/blocks/last"));
    assert_eq!(
        (block["height"].as_u64(), block["transactions"].as_u64()),
        (heights[0], Some(1)),
        "one block holds it once"
    );
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
    let wrong = json!({"asset": "usd", "transaction": hex::encode(SpecieTransaction::BridgeFunding(usd_fundings[0].clone()).encode()), "account": 2, "key": hex::encode(trader_key(2).verifying_key().to_bytes())});
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
    // The restarted exchange's metrics: the blocks it cleared under load, their clearing
    // timed, and the value they traded per asset.
    let metrics = ureq::get(&format!("{url}/metrics"))
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    let sum = |family: &str| -> f64 {
        (metrics.lines())
            .filter(|line| line.starts_with(family))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(sum("specie_exchange_block_size_count") > 0.0, "{metrics}");
    assert!(
        sum("specie_exchange_clearing_duration_seconds_count") > 0.0,
        "{metrics}"
    );
    assert!(sum("specie_exchange_traded_value_total{asset=") > 0.0, "{metrics}");

    // A quiet kill -9 and restart: the identical state hash.
    let before = summary(&url);
    kill(&mut exchange);
    let (restarted, url) = start_exchange(exchange_dir, &cores);
    exchange = restarted;
    assert_eq!(summary(&url), before, "the state hash after recovery");

    // A withdrawal: its payout is paid by the usd core once.
    withdraw_once(&url, &id, &usd_url);
    refund_of_an_uncreditable_funding(&url, &usd_url, &bridge);
    sent_twice_is_executed_once(&url, &id);
    for child in [&mut exchange, &mut usd, &mut eur] {
        kill(child);
    }
}
