//! `specie console` in a real browser: Debian's chromium driven by the npm package
//! `playwright-core` (crates/specie/tests/browser: its lock file pins it; `npm ci` installs it
//! there) against a real cluster with every mode (`cluster up --authorities --offline --exchange
//! --ledger-of-record`, the exchange's second currency on a node of its own). The script
//! (`console.mjs`) checks every operator view with live data, the keyboard's way in, the
//! operator's login, forged, tampered and cross-site posts refused, and the browser's wallet
//! paying in every mode, each payment seen by the payee (and the core payment in the ledger
//! view), an exchange offer trading and another cancelled, the auditor's flags, and a leader
//! change after a kill. With `SPECIE_CONSOLE_SCREENSHOTS=DIR` (relative to the workspace) it
//! saves each view there: `SPECIE_CONSOLE_SCREENSHOTS=docs/console cargo test -p specie --test
//! specie console::` makes docs/console/*.png.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::cluster_harness::{debian_program, free_ports, specie, start_serving, Down, BIN};

/// The browser tests' directory, with `node_modules` installed from its lock file.
fn playwright_installed() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    if !dir.join("node_modules/playwright-core").is_dir() {
        eprintln!("installing playwright-core from tests/browser/package-lock.json (npm ci)…");
        let installed = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .stdout(Stdio::null())
            .status();
        assert!(
            installed.is_ok_and(|s| s.success()),
            "this test needs Node.js and npm: `npm ci` in {} failed",
            dir.display()
        );
    }
    dir
}

/// Kills the processes a test started when it ends.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `specie wallet --wallet PATH --node URL create --issuer --hrp HRP`: the issuer's public key.
fn issuer_wallet(path: &Path, node: &str, hrp: &str) -> String {
    let wallet = format!("--wallet={}", path.display());
    let out = specie(&[
        "wallet",
        &wallet,
        &format!("--node={node}"),
        "create",
        "--issuer",
        &format!("--hrp={hrp}"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let key = text.lines().find_map(|l| l.strip_prefix("issuer public key: "));
    key.expect("create --issuer prints the key").trim().to_string()
}

#[test]
fn the_console_shows_every_view_and_its_wallet_pays_in_every_mode_in_a_real_browser() {
    let chromium = debian_program("chromium", "chromium");
    let browser = playwright_installed();
    let temp = tempfile::tempdir().unwrap();
    let dir = temp.path().join("cluster");
    let dir_text = dir.to_str().unwrap().to_string();
    let _down = Down(dir_text.clone());
    let base = free_ports(64);
    let (eur_listen, console_listen) = (format!("127.0.0.1:{}", base + 62), format!("127.0.0.1:{}", base + 63));
    let eur_url = format!("http://{eur_listen}");

    let usd_issuer = temp.path().join("usd-issuer.json");
    let usd_key = issuer_wallet(&usd_issuer, "http://127.0.0.1:9", "usd");
    #[rustfmt::skip]
    specie(&[
        "cluster", "up", "--dir", &dir_text, "--base-port", &base.to_string(), "--shard-groups", "1",
        "--replicas", "3", "--sentinels", "1", "--authorities", "4", "--authority-replicas", "1",
        "--offline", "1", "--exchange", "1", "--exchange-asset", &format!("eur={eur_url}"),
        "--ledger-of-record", "1", "--issuer", &usd_key,
    ]);
    // The privacy levels: an auditor (the console's) and a registration authority, in the
    // cluster file's [privacy] section, which the sentinel takes when it restarts. Only the
    // sentinel restarts (its port free for a moment): a whole cluster stopped and started again
    // would leave its ports free long enough for another test's cluster to take them.
    let auditor_key = temp.path().join("auditor.key");
    specie(&["audit", "keygen", "--out", auditor_key.to_str().unwrap()]);
    let keys = String::from_utf8(specie(&["audit", "key", "--key", auditor_key.to_str().unwrap()]).stdout).unwrap();
    let auditor = keys.lines().next().unwrap().trim();
    let owner_auditor = keys
        .lines()
        .find_map(|l| l.strip_prefix("owner auditor key: "))
        .unwrap()
        .trim();
    let ra_dir = temp.path().join("ra");
    let ra = String::from_utf8(specie(&["ra", "init", "--dir", ra_dir.to_str().unwrap()]).stdout).unwrap();
    let privacy = format!(
        "\n[privacy]\nauditors = [\"{auditor}\"]\nregistration_authority = \"{}\"\nowner_auditors = [\"{owner_auditor}\"]\n",
        ra.trim()
    );
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("cluster.toml"))
        .unwrap();
    std::io::Write::write_all(&mut file, privacy.as_bytes()).unwrap();
    specie(&["cluster", "restart", "--dir", &dir_text, "--name", "sentinel-0"]);
    let topology = specie_cluster::Topology::load(&dir.join("cluster.toml")).unwrap();
    let exchange = topology.exchange.as_ref().unwrap();
    let eur_issuer = temp.path().join("eur-issuer.json");
    let eur_key = issuer_wallet(&eur_issuer, &eur_url, "eur");
    let eur_data = temp.path().join("eur");
    #[rustfmt::skip]
    let (eur, _) = start_serving(&[
        "node", "--listen", &eur_listen, "--hrp", "eur", "--issuer", &eur_key,
        "--exchange", &exchange.bridge, "--data-dir", eur_data.to_str().unwrap(),
    ]);
    #[rustfmt::skip]
    let (console, url) = start_serving(&[
        "console", "--dir", &dir_text, "--listen", &console_listen, "--auditor-key",
        auditor_key.to_str().unwrap(), "--flag-over", "1000", "--sample-interval-ms", "500",
    ]);
    let _killed = Killed(vec![eur, console]);

    let work = temp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let mut script = Command::new("node");
    script
        .arg("console.mjs")
        .current_dir(&browser)
        .env("CONSOLE_URL", &url)
        .env("SPECIE", BIN)
        .env("CLUSTER_DIR", &dir)
        .env("CHROMIUM", &chromium)
        .env("WORK", &work)
        .env("SENTINEL", format!("http://{}", topology.sentinels[0].http))
        .env("EXCHANGE", exchange.http_urls())
        .env("USD_ISSUER", &usd_issuer)
        .env("EUR_NODE", &eur_url)
        .env("EUR_ISSUER", &eur_issuer)
        .env("RA_DIR", &ra_dir);
    if let Some(screenshots) = std::env::var_os("SPECIE_CONSOLE_SCREENSHOTS") {
        // A relative path is the workspace's (tests run in crates/specie).
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let screenshots = std::fs::canonicalize(root.join(screenshots));
        script.env(
            "SCREENSHOTS",
            screenshots.expect("SPECIE_CONSOLE_SCREENSHOTS names a directory that exists"),
        );
    }
    let out = script.output().expect("node runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the browser test failed:\n{printed}");
    assert!(printed.contains("every check passed"), "{printed}");
}
