//! Offline cash from the command line, for the tests that run it as real processes: device
//! wallets, core wallets minted to, devices enrolled.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::BIN;

/// `specie ARGS`: its stdout, or its stderr as the error; a panic fails the test either way.
pub fn run(args: &[&str]) -> Result<String, String> {
    let output = Command::new(BIN)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("the specie binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    match output.status.success() {
        true => Ok(String::from_utf8_lossy(&output.stdout).into_owned()),
        false => Err(stderr),
    }
}

/// `specie wallet --wallet PATH ARGS`, which must succeed: its output.
pub fn core_wallet(path: &Path, args: &[&str]) -> String {
    let mut all = vec!["wallet", "--wallet", path.to_str().unwrap()];
    all.extend_from_slice(args);
    run(&all).unwrap_or_else(|error| panic!("specie wallet {args:?}: {error}"))
}

/// A new address of the wallet at `path` (the last line `specie wallet address` prints).
pub fn wallet_address(path: &Path) -> String {
    let printed = core_wallet(path, &["address"]);
    printed.trim().lines().last().expect("an address").trim().to_string()
}

/// The number after `label` in `specie wallet balance` (e.g. `spendable:`).
pub fn wallet_balance(path: &Path, label: &str) -> u64 {
    let text = core_wallet(path, &["balance"]);
    text.lines()
        .find_map(|line| line.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{label}' in {text}"))
}

/// The last line of `text` that starts with `prefix` (a payment string, a key line).
pub fn line_starting(text: &str, prefix: &str) -> String {
    let found = text.lines().map(str::trim).rfind(|l| l.starts_with(prefix));
    found.unwrap_or_else(|| panic!("no {prefix}… in {text}")).to_string()
}

/// `specie offline device --device FILE --authority URLS ARGS`: its stdout (trimmed), or its
/// stderr as the error.
pub fn device(file: &Path, urls: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec![
        "offline",
        "device",
        "--device",
        file.to_str().unwrap(),
        "--authority",
        urls,
    ];
    all.extend_from_slice(args);
    run(&all).map(|out| out.trim().to_string())
}

/// A new core wallet at `path` on `node`, minted `amount` by the issuer's wallet and imported.
pub fn minted_wallet(issuer_wallet: &Path, path: &Path, node: &str, amount: &str) {
    core_wallet(path, &["create", "--node", node]);
    let address = core_wallet(path, &["address"])
        .trim()
        .lines()
        .last()
        .unwrap()
        .trim()
        .to_string();
    let minted = core_wallet(issuer_wallet, &["--node", node, "mint", amount, "--to", &address]);
    let payment = minted
        .lines()
        .map(str::trim)
        .find(|line| line.starts_with("specie-pay1"))
        .unwrap()
        .to_string();
    core_wallet(path, &["import", &payment]);
}

/// Alice's and Bob's devices in `dir`, created and enrolled with the operator's token.
pub fn enrolled_devices(dir: &Path, urls: &str, token_file: &str) -> (PathBuf, PathBuf) {
    let (alice, bob) = (dir.join("alice.device"), dir.join("bob.device"));
    for file in [&alice, &bob] {
        device(file, urls, &["create"]).unwrap();
        device(file, urls, &["enrol", "--operator-token-file", token_file]).unwrap();
    }
    (alice, bob)
}
