//! The offline authority as a real process (`specie offline authority`), over HTTP on 127.0.0.1:
//! devices enrolled and funded through the operator's token (and refused without it), 120 tokens
//! paid offline and deposited by four clients at once, the process killed with SIGKILL in the
//! middle, restarted on the same data directory; then every deposit sent again. Every deposit that
//! was answered before the kill is answered the same way after it, every token is paid exactly
//! once, a double spend is still refused and its evidence convicts the spender.

use crate::cluster_harness;

use cluster_harness::offline_devices::{core_wallet, device, enrolled_devices, minted_wallet};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use specie_offline::{Instruction, KeyCertificate, KeyRing, Token};
use specie_offline_device::{one_time_key, Deposit, Device, DeviceLimits};

/// Starts the authority on a free port; returns it and its base URL.
fn start(data_dir: &Path) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_specie"))
        .args(["offline", "authority", "--data-dir"])
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0", "--allow-operator-funding"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the specie binary runs");
    let stderr = child.stderr.take().expect("piped");
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("the authority says where it listens").unwrap();
        if let Some(rest) = line.split("API on ").nth(1) {
            break rest.split(',').next().unwrap().to_string();
        }
    };
    // Keep draining its stderr so that it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

fn post(url: &str, path: &str, body: Value, token: Option<&str>) -> (u16, Value) {
    let mut request = ureq::post(&format!("{url}{path}"));
    if let Some(token) = token {
        request = request.set("authorization", &format!("Bearer {token}"));
    }
    answer(request.send_json(body))
}

fn get(url: &str, path: &str) -> (u16, Value) {
    answer(ureq::get(&format!("{url}{path}")).call())
}

fn answer(result: Result<ureq::Response, ureq::Error>) -> (u16, Value) {
    match result {
        Ok(response) => (response.status(), response.into_json().unwrap()),
        Err(ureq::Error::Status(status, response)) => (status, response.into_json().unwrap()),
        Err(error) => (0, json!({"transport": error.to_string()})),
    }
}

fn issuances(value: &Value) -> Vec<Token> {
    value["issuances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|hex| {
            let bytes = hex::decode(hex.as_str().unwrap()).unwrap();
            let issuance = specie_offline::Issuance::decode_from(&mut specie_codec_reader(&bytes)).unwrap();
            Token::issued(issuance)
        })
        .collect()
}

fn specie_codec_reader(bytes: &[u8]) -> specie_codec::Reader<'_> {
    specie_codec::Reader::new(bytes)
}

fn hex_of(encode: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut bytes = Vec::new();
    encode(&mut bytes);
    hex::encode(bytes)
}

fn deposit_body(deposit: &Deposit) -> Value {
    json!({
        "token": hex_of(|out| deposit.token.encode_to(out)),
        "statement": hex_of(|out| deposit.statement.encode_to(out)),
        "instruction": hex_of(|out| deposit.instruction.encode_to(out)),
    })
}

/// Registers a device with `keys` certified keys.
fn enrol(url: &str, token: &str, device: &mut Device, keys: usize) {
    let (status, _) = post(
        url,
        "/v1/offline/register",
        json!({"identity": hex::encode(device.identity())}),
        Some(token),
    );
    assert_eq!(status, 200);
    for chunk in device.bindings(keys).chunks(200) {
        let bindings: Vec<String> = chunk.iter().map(|b| hex_of(|out| b.encode_to(out))).collect();
        let (status, body) = post(url, "/v1/offline/certify", json!({"bindings": bindings}), None);
        assert_eq!(status, 200, "{body}");
        let certificates: Vec<KeyCertificate> = body["certificates"]
            .as_array()
            .unwrap()
            .iter()
            .map(|hex| {
                KeyCertificate::decode_from(&mut specie_codec_reader(&hex::decode(hex.as_str().unwrap()).unwrap()))
                    .unwrap()
            })
            .collect();
        device.certified(&certificates);
    }
}

#[test]
fn a_killed_authority_loses_no_answered_deposit_and_still_names_the_double_spender() {
    let dir = tempfile::tempdir().unwrap();
    let (mut authority, url) = start(dir.path());
    let token = std::fs::read_to_string(dir.path().join("operator.token")).unwrap();
    let (_, keys) = get(&url, "/v1/offline/keys");
    let ring_bytes = hex::decode(keys["ring"].as_str().unwrap()).unwrap();
    let ring = KeyRing::decode_from(&mut specie_codec_reader(&ring_bytes)).unwrap();

    let roomy = DeviceLimits {
        holding_max: u64::MAX / 4,
        payment_max: u64::MAX / 4,
        ..DeviceLimits::default()
    };
    let (mut alice, mut bob, mut carol) = (
        Device::new([1; 32], roomy, 0),
        Device::new([2; 32], roomy, 0),
        Device::new([3; 32], roomy, 0),
    );
    // Registering or funding without the operator's token is refused.
    let (status, body) = post(
        &url,
        "/v1/offline/register",
        json!({"identity": hex::encode(alice.identity())}),
        None,
    );
    assert_eq!(status, 401, "{body}");
    let (status, _) = post(
        &url,
        "/v1/offline/register",
        json!({"identity": hex::encode(alice.identity())}),
        Some("00"),
    );
    assert_eq!(status, 401);
    enrol(&url, &token, &mut alice, 130);
    enrol(&url, &token, &mut bob, 260);
    enrol(&url, &token, &mut carol, 4);

    // 120 tokens of 50,000 for Alice (a funding splits into the largest denominations).
    let owners: Vec<String> = alice.funding_owners(120).unwrap().iter().map(hex::encode).collect();
    let funding = json!({"id": hex::encode([7u8; 32]), "amount": 6_000_000u64, "owners": owners});
    let (status, _) = post(&url, "/v1/offline/fund", funding.clone(), None);
    assert_eq!(status, 401, "funding needs the operator");
    let (status, funded) = post(&url, "/v1/offline/fund", funding, Some(&token));
    assert_eq!(status, 200, "{funded}");
    let tokens = issuances(&funded);
    assert_eq!(tokens.len(), 120);
    alice
        .receive_issued(&tokens.iter().map(|t| t.issuance).collect::<Vec<_>>(), &ring)
        .unwrap();

    // Alice keeps the first token as she held it (and its key) to spend it again later: a cheat.
    let first = alice.held()[0].clone();
    for n in 0..120u64 {
        let nonce = n.to_le_bytes().repeat(2).try_into().unwrap();
        let request = bob.request(50_000, nonce, 0).unwrap();
        let paid = alice.pay(&request, &ring, 0).unwrap();
        bob.receive(&nonce, &paid, &ring, 0).unwrap();
    }
    let deposits = bob.deposit_all([2; 32], false);
    assert_eq!(deposits.len(), 120);

    // Four clients deposit at once, and keep sending (repeats too) until the authority is gone:
    // it is killed under load, once 40 deposits are answered.
    let answered: Arc<Mutex<Vec<(usize, Value)>>> = Arc::new(Mutex::new(Vec::new()));
    let next = Arc::new(Mutex::new(0usize));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (answered, next, deposits, url) = (answered.clone(), next.clone(), deposits.clone(), url.clone());
            std::thread::spawn(move || loop {
                let i = {
                    let mut next = next.lock().unwrap();
                    *next += 1;
                    (*next - 1) % deposits.len()
                };
                match post(&url, "/v1/offline/deposit", deposit_body(&deposits[i]), None) {
                    (200, body) => answered.lock().unwrap().push((i, body)),
                    (0, _) => return, // the authority is gone
                    (status, body) => panic!("deposit {i}: {status} {body}"),
                }
            })
        })
        .collect();
    let distinct = |answered: &[(usize, Value)]| {
        let mut indices: Vec<usize> = answered.iter().map(|(i, _)| *i).collect();
        indices.sort_unstable();
        indices.dedup();
        indices.len()
    };
    while distinct(&answered.lock().unwrap()) < 40 {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    authority.kill().unwrap(); // SIGKILL
    authority.wait().unwrap();
    for client in clients {
        client.join().unwrap();
    }
    let before = answered.lock().unwrap().clone();
    assert!(distinct(&before) >= 40);
    for (i, first) in &before {
        let mut again = before.iter().filter(|(j, _)| j == i);
        assert!(
            again.all(|(_, body)| body == first),
            "deposit {i} answered alike every time"
        );
    }

    let (mut authority, url) = start(dir.path());
    for (i, deposit) in deposits.iter().enumerate() {
        let (status, body) = post(&url, "/v1/offline/deposit", deposit_body(deposit), None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["outcome"], "reissued", "deposit {i}: {body}");
        if let Some((_, first_answer)) = before.iter().find(|(j, _)| *j == i) {
            assert_eq!(&body, first_answer, "deposit {i} answered as before the kill");
        }
    }

    // Alice's second spend of her first token, to Carol, deposited: refused, Alice named.
    let nonce = [9; 16];
    let request = carol.request(50_000, nonce, 0).unwrap();
    let copy = first
        .token
        .transfer(&one_time_key(&[1; 32], first.key), request.certificate, nonce)
        .unwrap();
    carol.receive(&nonce, &[copy], &ring, 0).unwrap();
    let carols = carol.deposit_all([3; 32], true);
    let (status, body) = post(&url, "/v1/offline/deposit", deposit_body(&carols[0]), None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["outcome"], "double_spent");
    assert_eq!(body["debtor"], hex::encode(alice.identity()));

    let (_, books) = get(&url, "/v1/offline/books");
    assert_eq!(books["funded"], "6000000");
    assert_eq!(books["outstanding"], "6000000", "every token paid once, re-issued");
    assert_eq!(books["debts"][0]["identity"], hex::encode(alice.identity()));
    let (_, evidence) = get(&url, &format!("/v1/offline/evidence/{}", hex::encode(alice.identity())));
    let bundle_bytes = hex::decode(evidence["bundle"].as_str().unwrap()).unwrap();
    let bundle = specie_offline::EvidenceBundle::decode_from(&mut specie_codec_reader(&bundle_bytes)).unwrap();
    assert_eq!(bundle.double_spends[0].check(&ring).unwrap().identity, alice.identity());
    let (_, revoked) = get(&url, "/v1/offline/revocations?from=0");
    assert_eq!(revoked["serials"][0], hex::encode(first.token.issuance.serial));

    // Hostile input: not hex, too long, not a token.
    let (status, _) = post(
        &url,
        "/v1/offline/deposit",
        json!({"token": "zz", "statement": "", "instruction": ""}),
        None,
    );
    assert_eq!(status, 400);
    let long = "00".repeat(10_000);
    let (status, _) = post(
        &url,
        "/v1/offline/deposit",
        json!({"token": long, "statement": "", "instruction": ""}),
        None,
    );
    assert_eq!(status, 400);
    let (status, body) = post(
        &url,
        "/v1/offline/deposit",
        json!({"token": "01", "statement": "", "instruction": hex_of(|o| Instruction::Defund { address: [0; 32] }.encode_to(o))}),
        None,
    );
    assert_eq!(status, 400, "{body}");
    authority.kill().unwrap();
    authority.wait().unwrap();
}

fn specie(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_specie"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the specie binary runs")
}

/// Two device wallets, enrolled and funded by the operator, pay each other offline with request
/// and payment strings; a replayed payment, a payment over a limit and a bad string or file are
/// refused with a message that says why; deposits come back re-issued.
#[test]
fn device_wallets_pay_offline_and_refuse_replays_limits_and_bad_files_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let (mut authority, url) = start(&dir.path().join("authority"));
    let token_file = dir.path().join("authority/operator.token");
    let token_file = token_file.to_str().unwrap();
    let (alice, bob) = (dir.path().join("alice.device"), dir.path().join("bob.device"));
    device(&alice, &url, &["create"]).unwrap();
    device(&bob, &url, &["create", "--holding-max", "1000"]).unwrap();
    let refused = device(&alice, &url, &["create"]).unwrap_err();
    assert!(refused.contains("exists"), "{refused}");
    for file in [&alice, &bob] {
        device(file, &url, &["enrol", "--operator-token-file", token_file]).unwrap();
    }
    let refused = device(&alice, &url, &["fund", "--operator-token-file", "/dev/null", "700"]).unwrap_err();
    assert!(refused.contains("operator"), "{refused}");
    device(&alice, &url, &["fund", "--operator-token-file", token_file, "700"]).unwrap();

    let request = device(&bob, &url, &["request", "200"]).unwrap();
    let payment = device(&alice, &url, &["pay", &request]).unwrap();
    assert_eq!(
        device(&bob, &url, &["receive", &payment]).unwrap(),
        "received 200; balance 200"
    );
    assert!(device(&alice, &url, &["balance"]).unwrap().starts_with("balance 500;"));

    // The same payment again, for a fresh request of Bob's: a replay.
    let _ = device(&bob, &url, &["request", "200"]).unwrap();
    let refused = device(&bob, &url, &["receive", &payment]).unwrap_err();
    assert!(refused.contains("no payment request with this nonce"), "{refused}");
    // Limits: Bob may hold 1,000; Alice may pay 500 at once.
    let refused = device(&bob, &url, &["request", "900"]).unwrap_err();
    assert!(refused.contains("over the holding limit of 1000"), "{refused}");
    let big = device(&alice, &url, &["request", "600"]).unwrap();
    let refused = device(&alice, &url, &["pay", &big]).unwrap_err();
    assert!(refused.contains("per-payment limit of 500"), "{refused}");

    // Bad strings and a damaged file: a clear error, never a crash.
    let refused = device(&bob, &url, &["receive", "specie-offline-pay1:zz"]).unwrap_err();
    assert!(refused.contains("not hex"), "{refused}");
    let refused = device(&bob, &url, &["receive", "hello"]).unwrap_err();
    assert!(
        refused.contains("does not start with specie-offline-pay1:"),
        "{refused}"
    );
    let truncated = &payment[..payment.len() - 10];
    let refused = device(&bob, &url, &["receive", truncated]).unwrap_err();
    assert!(refused.contains("payment"), "{refused}");
    let damaged = dir.path().join("damaged.device");
    std::fs::write(&damaged, b"\x01not a device").unwrap();
    let refused = device(&damaged, &url, &["balance"]).unwrap_err();
    assert!(refused.contains("not a device file"), "{refused}");

    let deposited = device(&bob, &url, &["deposit"]).unwrap();
    assert!(deposited.starts_with("deposited: 200 paid, 0 refused"), "{deposited}");
    assert!(device(&bob, &url, &["balance"])
        .unwrap()
        .starts_with("balance 200; 1 tokens"));
    let synced = device(&bob, &url, &["sync"]).unwrap();
    assert!(synced.starts_with("synced: 0 revocations, period 1"), "{synced}");

    // The operator rotates to the next period; a wrong token changes nothing.
    let rotate = |token: &str| specie(&["offline", "rotate", "--authority", &url, "--operator-token-file", token]);
    let refused = rotate("/dev/null");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("operator"));
    let rotated = rotate(token_file);
    assert!(rotated.status.success(), "{}", String::from_utf8_lossy(&rotated.stderr));
    assert!(String::from_utf8_lossy(&rotated.stdout).contains("period 2"));
    let synced = device(&bob, &url, &["sync"]).unwrap();
    assert!(synced.starts_with("synced: 0 revocations, period 2"), "{synced}");
    // Bob's tokens (period 1) still pay: within their spend window.
    let request = device(&alice, &url, &["request", "200"]).unwrap();
    let payment = device(&bob, &url, &["pay", &request]).unwrap();
    assert_eq!(
        device(&alice, &url, &["receive", &payment]).unwrap(),
        "received 200; balance 700"
    );

    // A defund whose answer never came back (the device stopped after saving it): `sync` sends
    // it again and keeps it pending with its payout, never dropping it on the answer; `deposit
    // --defund-to` with its key prints the payout and only then ends it.
    let mut held = specie_offline_device::Device::decode(&std::fs::read(&alice).unwrap()).unwrap();
    let waiting = held.deposit_all([0x11; 32], true).len();
    std::fs::write(&alice, held.encode()).unwrap();
    let synced = device(&alice, &url, &["sync"]).unwrap();
    assert!(
        synced.contains(&format!("{waiting} deposits are paid out to the core and wait")),
        "{synced}"
    );
    let balance = device(&alice, &url, &["balance"]).unwrap();
    assert!(balance.ends_with(&format!("{waiting} deposits waiting")), "{balance}");
    let deposited = device(&alice, &url, &["deposit", "--defund-to", &"11".repeat(32)]).unwrap();
    assert_eq!(
        deposited.matches("payout for the core: ").count(),
        waiting,
        "{deposited}"
    );
    let balance = device(&alice, &url, &["balance"]).unwrap();
    assert!(balance.ends_with(" 0 deposits waiting"), "{balance}");
    authority.kill().unwrap();
    authority.wait().unwrap();
}

/// Starts `specie node` banking for the offline authority `bridge` with `issuer`; its child and URL.
fn start_node(data_dir: &Path, issuer: &str, bridge: &str) -> (Child, String) {
    let data_dir = data_dir.to_str().unwrap();
    cluster_harness::start_serving(&[
        "node",
        "--listen",
        "127.0.0.1:0",
        "--issuer",
        issuer,
        "--offline-authority",
        bridge,
        "--data-dir",
        data_dir,
    ])
}

/// The whole bridge with real processes: a core wallet funds a device through the online core
/// (the authority checks the core itself), the device pays another offline, the payee deposits
/// back to its own core wallet, and the coins are spendable there; a funding the core never
/// confirmed is refused, and so is one handed in for other owners than it commits to.
#[test]
fn a_core_wallet_funds_a_device_and_a_deposit_comes_back_to_a_core_wallet() {
    let dir = tempfile::tempdir().unwrap();
    let authority_dir = dir.path().join("authority");
    let bridge = specie(&[
        "offline",
        "authority",
        "--data-dir",
        authority_dir.to_str().unwrap(),
        "--show-bridge-key",
    ]);
    let bridge = String::from_utf8(bridge.stdout).unwrap().trim().to_string();
    assert_eq!(bridge.len(), 64, "{bridge}");
    let issuer_wallet = dir.path().join("issuer.json");
    let created = core_wallet(&issuer_wallet, &["create", "--issuer"]);
    let issuer = created
        .lines()
        .find_map(|line| line.strip_prefix("issuer public key: "))
        .unwrap()
        .to_string();
    let (mut node, node_url) = start_node(&dir.path().join("core"), &issuer, &bridge);
    let mut authority = Command::new(env!("CARGO_BIN_EXE_specie"))
        .args([
            "offline",
            "authority",
            "--listen",
            "127.0.0.1:0",
            "--core",
            &node_url,
            "--data-dir",
        ])
        .arg(&authority_dir)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(authority.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("the authority starts").unwrap();
        if let Some(rest) = line.split("API on ").nth(1) {
            break rest.split(',').next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let token_file = authority_dir.join("operator.token");
    let token_file = token_file.to_str().unwrap();

    // Alice's core wallet gets 1,000 minted; her device and Bob's are enrolled.
    let alice_wallet = dir.path().join("alice.json");
    minted_wallet(&issuer_wallet, &alice_wallet, &node_url, "1000");
    let (alice, bob) = enrolled_devices(dir.path(), &url, token_file);
    // Funding on the operator's word is off without --allow-operator-funding.
    let refused = device(&alice, &url, &["fund", "--operator-token-file", token_file, "100"]).unwrap_err();
    assert!(refused.contains("operator's word is off"), "{refused}");

    let alice_wallet_arg = alice_wallet.to_str().unwrap();
    let funded = device(&alice, &url, &["fund-from-core", "--wallet", alice_wallet_arg, "700"]).unwrap();
    assert!(funded.starts_with("funded 700 from the core"), "{funded}");
    assert!(
        core_wallet(&alice_wallet, &["balance"]).contains("spendable:   300"),
        "the change stays in the wallet"
    );
    assert!(
        !dir.path().join("alice.device.funding").exists(),
        "nothing left to hand in"
    );

    let request = device(&bob, &url, &["request", "500"]).unwrap();
    let payment = device(&alice, &url, &["pay", &request]).unwrap();
    device(&bob, &url, &["receive", &payment]).unwrap();

    // Bob deposits back to a core wallet of his: the payout confirmed, the coins spendable.
    let bob_wallet = dir.path().join("bob.json");
    core_wallet(&bob_wallet, &["create", "--node", &node_url]);
    let deposited = device(&bob, &url, &["deposit", "--wallet", bob_wallet.to_str().unwrap()]).unwrap();
    assert!(
        deposited.starts_with("deposited: 500 paid (500 back to the core, 500 now spendable"),
        "{deposited}"
    );
    assert!(core_wallet(&bob_wallet, &["balance"]).contains("spendable:   500"));
    let audit = specie(&["offline", "audit", "--authority", &url, "--json"]);
    assert!(audit.status.success(), "{}", String::from_utf8_lossy(&audit.stderr));
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(audit["ok"], true, "{audit}");
    let books = &audit["books"];
    assert_eq!(
        (&books["funded"], &books["defunded"], &books["outstanding"]),
        (&json!("700"), &json!("500"), &json!("200")),
        "{audit}"
    );

    // One file for everything: Bob keeps a device in his core wallet, funds it from the
    // wallet's coins and deposits back to them.
    let in_wallet = |args: &[&str]| {
        let mut all = vec!["--node", node_url.as_str(), "offline", "--authority", url.as_str()];
        all.extend_from_slice(args);
        core_wallet(&bob_wallet, &all)
    };
    in_wallet(&["create"]);
    in_wallet(&["enrol", "--operator-token-file", token_file]);
    let funded = in_wallet(&["fund-from-core", "200"]);
    assert!(funded.contains("funded 200 from the core"), "{funded}");
    assert!(core_wallet(&bob_wallet, &["balance"]).contains("spendable:   300"));
    assert!(in_wallet(&["balance"]).starts_with("balance 200;"));
    let back = in_wallet(&["deposit", "--to-core"]);
    assert!(
        back.contains("200 paid (200 back to the core, 200 now spendable"),
        "{back}"
    );
    assert!(core_wallet(&bob_wallet, &["balance"]).contains("spendable:   500"));
    assert!(in_wallet(&["balance"]).starts_with("balance 0;"));

    // A funding the core never confirmed is refused; so is one naming other owners.
    let unconfirmed = {
        let mut wallet = specie_wallet::WalletFile::load(&alice_wallet).unwrap();
        let owners = [[9u8; 32]];
        let tx = wallet
            .build_bridge_funding(
                <[u8; 32]>::try_from(hex::decode(&bridge).unwrap()).unwrap(),
                specie_offline::funding_owners_digest(&owners),
                100,
                &mut rand::thread_rng(),
            )
            .unwrap();
        hex::encode(specie_codec::Encode::encode(&tx))
    };
    let body = serde_json::json!({"transaction": unconfirmed, "owners": [hex::encode([9u8; 32])]});
    let (status, answer) = post(&url, "/v1/offline/fund-from-core", body, None);
    assert_eq!(status, 409, "{answer}");
    let body = serde_json::json!({"transaction": unconfirmed, "owners": [hex::encode([8u8; 32])]});
    let (status, answer) = post(&url, "/v1/offline/fund-from-core", body, None);
    assert_eq!(status, 422, "{answer}");
    assert!(answer.to_string().contains("owners"), "{answer}");
    refund_of_a_funding_to_uncertified_keys(&url, &node_url, &unconfirmed);

    for child in [&mut authority, &mut node] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

/// Confirmed by the core, a funding of 100 to a key the authority never certified could never
/// be issued: the authority refunds it (once) to the owner of its first input, the core pays the
/// refund once, and the books count it in and out.
fn refund_of_a_funding_to_uncertified_keys(url: &str, node_url: &str, funding_hex: &str) {
    use specie_transaction::SpecieTransaction;
    let decode = |text: &str| <SpecieTransaction as specie_codec::Decode>::decode_exact(&hex::decode(text).unwrap());
    let funding = decode(funding_hex).unwrap();
    cluster_harness::confirm_in_core(node_url, std::slice::from_ref(&funding));
    let body = serde_json::json!({"transaction": funding_hex, "owners": [hex::encode([9u8; 32])]});
    let (status, answer) = post(url, "/v1/offline/fund-from-core", body.clone(), None);
    assert_eq!(status, 200, "{answer}");
    let refunded = &answer["refunded"];
    assert_eq!(
        refunded["reason"], "owner 0 is not a key this authority certified",
        "{answer}"
    );
    let payout = decode(refunded["payout"].as_str().unwrap()).unwrap();
    let SpecieTransaction::BridgeFunding(paid) = &funding else {
        panic!("a funding");
    };
    assert_eq!(
        payout.outputs()[0],
        specie_transaction::Output {
            witness_program_commitment: paid.inputs[0].data.witness_program_commitment,
            value: 100,
        }
    );
    let (_, again) = post(url, "/v1/offline/fund-from-core", body, None);
    assert_eq!(
        again["refunded"]["payout"], refunded["payout"],
        "refunded once: {again}"
    );
    cluster_harness::confirm_in_core(node_url, std::slice::from_ref(&payout));
    let twice = cluster_harness::post_transactions(node_url, &[payout]);
    assert_ne!(twice, vec!["confirmed".to_string()], "the core pays a refund once");
    let audit = specie(&["offline", "audit", "--authority", url, "--json"]);
    let audit: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(audit["ok"], true, "{audit}");
    let books = &audit["books"];
    assert_eq!(
        (&books["funded"], &books["defunded"], &books["outstanding"]),
        (&json!("1000"), &json!("800"), &json!("200")),
        "{audit}"
    );
}

/// Two device processes pay each other directly over 127.0.0.1: the payer, holding a single 10,
/// pays 3 by paying 10 and getting 7 back in the same hand-over; a request above what the payer
/// agreed to is refused on both sides and moves nothing.
#[test]
fn two_device_processes_hand_over_cash_over_a_local_link_with_change() {
    let dir = tempfile::tempdir().unwrap();
    let (mut authority, url) = start(&dir.path().join("authority"));
    let token_file = dir.path().join("authority/operator.token");
    let token_file = token_file.to_str().unwrap();
    let (alice, bob) = (dir.path().join("alice.device"), dir.path().join("bob.device"));
    for (file, amount) in [(&alice, "10"), (&bob, "7")] {
        device(file, &url, &["create"]).unwrap();
        device(file, &url, &["enrol", "--operator-token-file", token_file]).unwrap();
        device(file, &url, &["fund", "--operator-token-file", token_file, amount]).unwrap();
    }
    let hand_over = |amount: &str, max: &str| {
        let mut payee = Command::new(env!("CARGO_BIN_EXE_specie"))
            .args(["offline", "device", "--device", bob.to_str().unwrap(), "receive-direct"])
            .args(["--listen", "127.0.0.1:0", "--timeout-s", "20", amount])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(payee.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        let address = first.strip_prefix("listening on ").unwrap().to_string();
        let paid = device(&alice, &url, &["pay-direct", "--to", &address, "--max", max]);
        let status = payee.wait().unwrap();
        let mut stderr = String::new();
        std::io::Read::read_to_string(payee.stderr.as_mut().unwrap(), &mut stderr).unwrap();
        assert!(!stderr.contains("panicked"), "{stderr}");
        let received = match status.success() {
            true => Ok(lines.map(Result::unwrap).collect::<Vec<_>>().join("\n")),
            false => Err(stderr),
        };
        (received, paid)
    };
    let (received, paid) = hand_over("3", "3");
    assert_eq!(paid.unwrap(), "paid 3 (got 7 change in the same exchange); balance 7");
    assert_eq!(
        received.unwrap(),
        "received 3 (gave 7 change in the same exchange); balance 10"
    );

    let (received, paid) = hand_over("5", "4");
    assert!(paid.unwrap_err().contains("asked to pay 5, more than the 4 allowed"));
    assert!(received.unwrap_err().contains("the other device refused"));
    assert!(device(&alice, &url, &["balance"]).unwrap().starts_with("balance 7;"));
    assert!(device(&bob, &url, &["balance"]).unwrap().starts_with("balance 10;"));
    authority.kill().unwrap();
    authority.wait().unwrap();
}

/// One process per data directory: a second authority on the same directory (another port) is
/// refused at once, naming the first, which still answers; a busy port fails before a new data
/// directory is made.
#[test]
fn a_second_authority_on_one_data_directory_is_refused_and_the_first_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("authority");
    let (mut first, url) = start(&data);
    let limit = std::time::Duration::from_secs(30);
    let (status, stderr) = cluster_harness::run_to_exit(
        &[
            "offline",
            "authority",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data.to_str().unwrap(),
        ],
        limit,
    );
    assert!(!status.success(), "{stderr}");
    let holder = format!("{} is in use by process {} (", data.display(), first.id());
    assert!(stderr.contains(&holder), "{stderr}");
    assert!(stderr.contains("stop that process first"), "{stderr}");
    assert_eq!(get(&url, "/v1/offline/keys").0, 200);

    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let fresh = dir.path().join("fresh");
    let (status, stderr) = cluster_harness::run_to_exit(
        &[
            "offline",
            "authority",
            "--listen",
            &busy.local_addr().unwrap().to_string(),
            "--data-dir",
            fresh.to_str().unwrap(),
        ],
        limit,
    );
    assert!(!status.success() && stderr.contains("cannot listen on"), "{stderr}");
    assert!(!fresh.exists(), "a busy port left {} behind", fresh.display());
    first.kill().unwrap();
    first.wait().unwrap();
}
