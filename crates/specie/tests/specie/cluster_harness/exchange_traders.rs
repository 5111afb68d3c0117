//! Traders of the exchange over its HTTP API: cores minting and funding the exchange for each
//! trader, deposits, a load of crossing offers and payments that follows the group's leader, and
//! withdrawals paid by a core.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ed25519_dalek::SigningKey;
use serde_json::{json, Value};
use specie_codec::Encode;
use specie_exchange::{deposit_commitment, LimitPrice, Operation, SignedTransaction, Transaction};
use specie_transaction::signing::xonly_bytes;
use specie_transaction::{
    witness_program_commitment, BridgeFunding, MintTransaction, NonceMode, Output, SpecieTransaction,
};

use super::{confirm_in_core, post_transactions};

pub const TRADERS: u64 = 4;

pub fn get(url: &str) -> Value {
    ureq::get(url).call().expect("GET").into_json().expect("JSON")
}

pub fn post(url: &str, body: Value) -> Result<Value, (u16, Value)> {
    match ureq::post(url).timeout(Duration::from_secs(30)).send_json(body) {
        Ok(response) => Ok(response.into_json().expect("JSON")),
        Err(ureq::Error::Status(status, response)) => Err((status, response.into_json().unwrap_or_default())),
        Err(error) => Err((0, json!({"error": error.to_string()}))),
    }
}

pub fn trader_key(n: u64) -> SigningKey {
    SigningKey::from_bytes(&[n as u8 + 40; 32])
}

/// The issuer key of the currency `hrp` (x-only hex is what a core is told to trust).
pub fn issuer(hrp: &str) -> secp256k1::Keypair {
    secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[hrp.as_bytes()[0]; 32]).unwrap()
}

pub fn issuer_hex(hrp: &str) -> String {
    hex::encode(xonly_bytes(&issuer(hrp)))
}

/// In the core at `url`, `hrp`'s issuer mints 1,000,000 to a core key for each trader, which
/// funds the exchange with it (confirmed): the fundings, in account order from 1.
pub fn fund_exchange(url: &str, hrp: &str, bridge: &[u8; 32]) -> Vec<BridgeFunding> {
    let owner = secp256k1::Keypair::from_seckey_slice(secp256k1::SECP256K1, &[hrp.as_bytes()[1]; 32]).unwrap();
    let outputs: Vec<Output> = (0..TRADERS)
        .map(|_| Output {
            witness_program_commitment: witness_program_commitment(&xonly_bytes(&owner)),
            value: 1_000_000,
        })
        .collect();
    let mint = SpecieTransaction::Mint(MintTransaction::new_signed(
        [hrp.as_bytes()[2]; 32],
        outputs,
        &issuer(hrp),
        NonceMode::Deterministic,
    ));
    confirm_in_core(url, std::slice::from_ref(&mint));
    let fundings: Vec<BridgeFunding> = mint
        .created_outputs()
        .iter()
        .zip(1..)
        .map(|(output, account)| {
            let key = trader_key(account).verifying_key().to_bytes();
            BridgeFunding::new_signed(
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
    let txs: Vec<SpecieTransaction> = fundings.iter().cloned().map(SpecieTransaction::BridgeFunding).collect();
    confirm_in_core(url, &txs);
    fundings
}

/// Deposits each trader's funding of `asset` at the exchange `url`: credited once (a second
/// time is refused).
pub fn deposit_all(url: &str, asset: &str, fundings: &[BridgeFunding]) {
    for (funding, account) in fundings.iter().zip(1..) {
        let transaction = hex::encode(SpecieTransaction::BridgeFunding(funding.clone()).encode());
        let key = hex::encode(trader_key(account).verifying_key().to_bytes());
        let body = json!({"asset": asset, "transaction": transaction, "account": account, "key": key});
        let credited = post(&format!("{url}/v1/exchange/deposits"), body.clone());
        assert_eq!(credited.expect("credited")["credited"], true);
        let (status, again) = post(&format!("{url}/v1/exchange/deposits"), body).unwrap_err();
        assert_eq!(status, 422, "{again}");
    }
}

fn hex_of(signed: &SignedTransaction) -> String {
    let mut bytes = Vec::new();
    signed.encode_to(&mut bytes);
    hex::encode(bytes)
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
            hex_of(&signed)
        })
        .collect()
}

/// Sends rounds until `stop`, each until it is answered; `urls` are the exchange's APIs (they may
/// change while it runs, and be down): a follower's `not_leader` answer names the one to ask next,
/// else the next URL is tried. Returns, per account, the highest sequence answered as included.
pub fn run_load(urls: Arc<Mutex<Vec<String>>>, id: [u8; 32], stop: Arc<AtomicBool>) -> BTreeMap<u64, u64> {
    let mut sequences: BTreeMap<u64, u64> = (1..=TRADERS).map(|a| (a, 1)).collect();
    let mut included = BTreeMap::new();
    let (mut n, mut at) = (0, 0);
    let mut leader: Option<String> = None;
    while !stop.load(Ordering::Relaxed) {
        let batch = round(&id, &sequences, n);
        let url = leader.clone().unwrap_or_else(|| {
            let urls = urls.lock().unwrap();
            urls[at % urls.len()].clone()
        });
        match post(
            &format!("{url}/v1/exchange/transactions"),
            json!({ "transactions": batch }),
        ) {
            Ok(answer) => {
                for (account, fate) in (1..=TRADERS).zip(answer["fates"].as_array().expect("fates")) {
                    if fate.get("included").is_some() {
                        included.insert(account, sequences[&account]);
                    }
                }
                sequences.values_mut().for_each(|s| *s += 1);
                n += 1;
            }
            Err((_, refusal)) => {
                leader = refusal["error"]["leader_http"]
                    .as_str()
                    .map(|http| format!("http://{http}"));
                if leader.is_none() {
                    at += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
    included
}

/// Every transaction answered as included is reflected in its account at `url`.
pub fn assert_included_kept(url: &str, included: &BTreeMap<u64, u64>) {
    assert_eq!(included.len() as u64, TRADERS, "every trader had transactions included");
    for (account, sequence) in included {
        let state = get(&format!("{url}/v1/exchange/accounts/{account}"));
        assert!(
            state["last_sequence"].as_u64().unwrap() >= *sequence,
            "account {account} lost an answered transaction"
        );
    }
}

/// Account 1 withdraws 100 of asset 0 from the exchange at `url`; its payout is paid by the
/// core at `core_url` once.
pub fn withdraw_once(url: &str, id: &[u8; 32], core_url: &str) {
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
    .sign(id, &trader_key(1));
    let answer = post(
        &format!("{url}/v1/exchange/transactions"),
        json!({"transactions": [hex_of(&withdraw)]}),
    )
    .unwrap();
    assert!(answer["fates"][0].get("included").is_some(), "{answer}");
    let payout = get(&format!("{url}/v1/exchange/withdrawals/1/{sequence}"));
    let payout_tx = <SpecieTransaction as specie_codec::Decode>::decode_exact(
        &hex::decode(payout["payout"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    confirm_in_core(core_url, std::slice::from_ref(&payout_tx));
    let again = post_transactions(core_url, &[payout_tx]);
    assert_ne!(again, vec!["confirmed".to_string()], "a payout is paid once");
}

/// The exchange's identity, height and state hash at `url`.
pub fn summary(url: &str) -> ([u8; 32], u64, String) {
    let info = get(&format!("{url}/v1/exchange"));
    let id = hex::decode(info["exchange"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    (
        id,
        info["height"].as_u64().unwrap(),
        info["state_hash"].as_str().unwrap().to_string(),
    )
}

/// The exchange's height at `url`, if it answers (a replica just elected may not yet).
pub fn height(url: &str) -> Option<u64> {
    let info: Value = ureq::get(&format!("{url}/v1/exchange")).call().ok()?.into_json().ok()?;
    info["height"].as_u64()
}
