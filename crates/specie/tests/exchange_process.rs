//! The exchange as a real process (`specie exchange serve`) beside two real cores (`specie
//! node`, usd and eur, each with its own issuer, banking for the exchange's bridge key), over HTTP
//! on 127.0.0.1: traders deposit through the cores (the exchange checks each core itself), trade
//! under load while the exchange is killed with SIGKILL and restarted on the same data directory
//! (nothing answered is lost: every transaction answered as included is reflected), the state
//! hash after a quiet kill and restart is identical, and a withdrawal's payout is paid by the
//! core once.

mod cluster_harness;

use std::collections::BTreeMap;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cluster_harness::{confirm_in_core, start_serving, BIN};
use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use specie_codec::Encode;
use specie_exchange::{deposit_commitment, LimitPrice, Operation, Transaction};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, MintTransaction, NonceMode, OfflineFunding, Output, SpecieTransaction,
};

const TRADERS: u64 = 4;

fn get(url: &str) -> Value {
    ureq::get(url).call().expect("GET").into_json().expect("JSON")
}

fn post(url: &str, body: Value) -> Result<Value, (u16, Value)> {
    match ureq::post(url).timeout(Duration::from_secs(30)).send_json(body) {
        Ok(response) => Ok(response.into_json().expect("JSON")),
        Err(ureq::Error::Status(status, response)) => Err((status, response.into_json().unwrap_or_default())),
        Err(error) => Err((0, json!({"error": error.to_string()}))),
    }
}

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

fn trader_key(n: u64) -> SigningKey {
    SigningKey::from_bytes(&[n as u8 + 40; 32])
}

/// A core for one currency, its issuer minting 1,000,000 to a core key, then a funding of the
/// exchange for each trader (confirmed); returns the node and the fundings.
fn core_with_fundings(dir: &std::path::Path, hrp: &str, bridge: &[u8; 32]) -> (Child, String, Vec<OfflineFunding>) {
    let issuer = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[hrp.as_bytes()[0]; 32]).unwrap();
    let owner = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[hrp.as_bytes()[1]; 32]).unwrap();
    let (node, url) = start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--hrp",
        hrp,
        "--issuer",
        &hex::encode(xonly_bytes(&issuer)),
        "--exchange",
        &hex::encode(bridge),
        "--data-dir",
        dir.to_str().unwrap(),
    ]);
    let outputs: Vec<Output> = (0..TRADERS)
        .map(|_| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&owner)),
            value: 1_000_000,
        })
        .collect();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [1; 32],
        outputs,
        &issuer,
        NonceMode::Deterministic,
    ));
    confirm_in_core(&url, std::slice::from_ref(&mint));
    let fundings: Vec<OfflineFunding> = mint
        .created_outputs()
        .iter()
        .zip(1..)
        .map(|(output, account)| {
            let key = trader_key(account).verifying_key().to_bytes();
            OfflineFunding::new_signed(
                *bridge,
                deposit_commitment(account, &key),
                1_000_000,
                vec![output.to_input()],
                vec![],
                &[owner],
                NonceMode::Deterministic,
            )
            .unwrap()
        })
        .collect();
    let txs: Vec<SpecieTransaction> = fundings
        .iter()
        .cloned()
        .map(SpecieTransaction::OfflineFunding)
        .collect();
    confirm_in_core(&url, &txs);
    (node, url, fundings)
}

/// One round of load: every trader makes an offer (both directions, crossing) or a payment.
fn round(id: &[u8; 32], sequences: &BTreeMap<u64, u64>, round: u64) -> Vec<String> {
    (1..=TRADERS)
        .map(|account| {
            let operation = match (round + account) % 3 {
                0 => Operation::Payment {
                    to: account % TRADERS + 1,
                    asset: 0,
                    amount: 7,
                },
                1 => Operation::SellOffer {
                    sell: 0,
                    buy: 1,
                    amount: 500,
                    limit: LimitPrice(1 << 31),
                },
                _ => Operation::SellOffer {
                    sell: 1,
                    buy: 0,
                    amount: 500,
                    limit: LimitPrice(1 << 31),
                },
            };
            let signed = Transaction {
                account,
                sequence: sequences[&account],
                operation,
            }
            .sign(id, &trader_key(account));
            let mut bytes = Vec::new();
            signed.encode_to(&mut bytes);
            hex::encode(bytes)
        })
        .collect()
}

/// Sends rounds until `stop`, each until it is answered (the exchange may be down); returns,
/// per account, the highest sequence answered as included.
fn run_load(url: Arc<Mutex<String>>, id: [u8; 32], stop: Arc<AtomicBool>) -> BTreeMap<u64, u64> {
    let mut sequences: BTreeMap<u64, u64> = (1..=TRADERS).map(|a| (a, 1)).collect();
    let mut included = BTreeMap::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let batch = round(&id, &sequences, n);
        let endpoint = format!("{}/v1/exchange/transactions", url.lock().unwrap());
        match post(&endpoint, json!({ "transactions": batch })) {
            Ok(answer) => {
                for (account, fate) in (1..=TRADERS).zip(answer["fates"].as_array().expect("fates")) {
                    if fate.get("included").is_some() {
                        included.insert(account, sequences[&account]);
                    }
                }
                sequences.values_mut().for_each(|s| *s += 1);
                n += 1;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    included
}

fn kill(child: &mut Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn summary(url: &str) -> (u64, String) {
    let info = get(&format!("{url}/v1/exchange"));
    (
        info["height"].as_u64().unwrap(),
        info["state_hash"].as_str().unwrap().to_string(),
    )
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
    let (mut usd, usd_url, usd_fundings) = core_with_fundings(&dir.path().join("usd"), "usd", &bridge);
    let (mut eur, eur_url, eur_fundings) = core_with_fundings(&dir.path().join("eur"), "eur", &bridge);
    let cores = [usd_url.clone(), eur_url];
    let (mut exchange, url) = start_exchange(exchange_dir, &cores);
    let id: [u8; 32] = hex::decode(get(&format!("{url}/v1/exchange"))["exchange"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();

    // Deposits: each credited once, after the exchange finds the funding in its core.
    for (asset, fundings) in [("usd", &usd_fundings), ("eur", &eur_fundings)] {
        for (funding, account) in fundings.iter().zip(1..) {
            let transaction = hex::encode(SpecieTransaction::OfflineFunding(funding.clone()).encode());
            let key = hex::encode(trader_key(account).verifying_key().to_bytes());
            let body = json!({"asset": asset, "transaction": transaction, "account": account, "key": key});
            assert_eq!(
                post(&format!("{url}/v1/exchange/deposits"), body.clone()).unwrap()["credited"],
                true
            );
            let (status, again) = post(&format!("{url}/v1/exchange/deposits"), body).unwrap_err();
            assert_eq!(status, 422, "{again}");
        }
    }
    let wrong = json!({"asset": "usd", "transaction": hex::encode(SpecieTransaction::OfflineFunding(usd_fundings[0].clone()).encode()), "account": 2, "key": hex::encode(trader_key(2).verifying_key().to_bytes())});
    let (status, refused) = post(&format!("{url}/v1/exchange/deposits"), wrong).unwrap_err();
    assert!(
        status == 422 && refused.to_string().contains("another account"),
        "{refused}"
    );

    // Load, and kill -9 in the middle of it.
    let shared = Arc::new(Mutex::new(url));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (shared, stop) = (shared.clone(), stop.clone());
        std::thread::spawn(move || run_load(shared, id, stop))
    };
    std::thread::sleep(Duration::from_millis(1_500));
    kill(&mut exchange);
    let (restarted, url) = start_exchange(exchange_dir, &cores);
    exchange = restarted;
    *shared.lock().unwrap() = url.clone();
    std::thread::sleep(Duration::from_millis(1_500));
    stop.store(true, Ordering::Relaxed);
    let included = load.join().unwrap();
    assert_eq!(included.len() as u64, TRADERS, "every trader had transactions included");
    for (account, sequence) in &included {
        let state = get(&format!("{url}/v1/exchange/accounts/{account}"));
        assert!(
            state["last_sequence"].as_u64().unwrap() >= *sequence,
            "account {account} lost an answered transaction"
        );
    }
    let traded = get(&format!("{url}/v1/exchange/blocks/last"));
    assert!(traded["height"].as_u64().unwrap() > 0, "{traded}");

    // A quiet kill -9 and restart: the identical state hash.
    let before = summary(&url);
    kill(&mut exchange);
    let (restarted, url) = start_exchange(exchange_dir, &cores);
    exchange = restarted;
    assert_eq!(summary(&url), before, "the state hash after recovery");

    // A withdrawal: its payout is paid by the usd core once.
    let state = get(&format!("{url}/v1/exchange/accounts/1"));
    let sequence = state["last_sequence"].as_u64().unwrap() + 1;
    let withdraw = Transaction {
        account: 1,
        sequence,
        operation: Operation::Withdraw {
            asset: 0,
            amount: 100,
            address: [5; 32],
        },
    }
    .sign(&id, &trader_key(1));
    let mut bytes = Vec::new();
    withdraw.encode_to(&mut bytes);
    let answer = post(
        &format!("{url}/v1/exchange/transactions"),
        json!({"transactions": [hex::encode(bytes)]}),
    )
    .unwrap();
    assert!(answer["fates"][0].get("included").is_some(), "{answer}");
    let payout = get(&format!("{url}/v1/exchange/withdrawals/1/{sequence}"));
    let payout_tx = <SpecieTransaction as specie_codec::Decode>::decode_exact(
        &hex::decode(payout["payout"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    confirm_in_core(&usd_url, std::slice::from_ref(&payout_tx));
    let again = cluster_harness::post_transactions(&usd_url, &[payout_tx]);
    assert_ne!(again, vec!["confirmed".to_string()], "a payout is paid once");
    for child in [&mut exchange, &mut usd, &mut eur] {
        kill(child);
    }
}
