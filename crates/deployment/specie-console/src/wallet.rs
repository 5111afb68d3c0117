//! The browser's wallet: each action is one run of the `specie` program's own command on a wallet
//! file of this host (`specie wallet …`, `specie exchange …`), so the browser does exactly what
//! the command line does: the same checks, the wallet file's lock, the same crash safety, the
//! same sentences when something is wrong. Keys stay in the file, on this machine.
//!
//! Every value from a form is checked against a narrow pattern before it becomes an argument,
//! options are passed as `--name=value` and positionals after `--`, so no value can be taken for
//! an option; the process gets no shell.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The longest wallet name.
const NAME_CHARS_MAX: usize = 32;
/// The longest payment string the wallet takes from a form: an offline payment of the most
/// tokens, each with the most hops, in hex after its prefix (the longest of any mode's).
pub const PAYMENT_CHARS_MAX: usize = specie_offline_bridge::device::PAYMENT_PREFIX.len()
    + 2 * (16 + 1 + specie_offline_bridge::device::TOKENS_PER_PAYMENT_MAX * specie_offline::TOKEN_BYTES_MAX);

/// Where the wallet's commands reach the platform.
pub struct Endpoints {
    /// The core's API (a sentinel's, or the node's).
    pub node: String,
    /// The exchange's replicas, comma-separated, if the platform has one.
    pub exchange: Option<String>,
    /// The cluster file, which names the FastPay committee (for a cluster).
    pub cluster_file: Option<PathBuf>,
    /// The offline authority, if the platform has one.
    pub offline: Option<OfflineAuthority>,
}

/// What a device needs of the offline authority.
pub struct OfflineAuthority {
    /// Its replicas' APIs, comma-separated.
    pub urls: String,
    /// Its bridge key (hex): the device takes key rings signed by it only.
    pub key: String,
    /// The operator's token file (enrolling a device is the operator's).
    pub operator_token: PathBuf,
}

impl Endpoints {
    /// `specie wallet --wallet=PATH --node=URL MODE-OPTIONS… COMMAND…`.
    fn wallet(&self, path: &Path, command: &[&str]) -> Vec<String> {
        let mut args = vec![
            "wallet".to_string(),
            format!("--wallet={}", path.display()),
            format!("--node={}", self.node),
        ];
        match command.first() {
            Some(&"fastpay") => {
                args.push("fastpay".into());
                args.extend(
                    self.cluster_file
                        .iter()
                        .map(|f| format!("--cluster-file={}", f.display())),
                );
                args.extend(command[1..].iter().map(|s| s.to_string()));
            }
            Some(&"offline") => {
                args.push("offline".into());
                if let Some(offline) = &self.offline {
                    args.push(format!("--authority={}", offline.urls));
                    args.push(format!("--authority-key={}", offline.key));
                }
                args.extend(command[1..].iter().map(|s| s.to_string()));
            }
            _ => args.extend(command.iter().map(|s| s.to_string())),
        }
        args
    }

    /// `specie exchange COMMAND --wallet=PATH --exchange=URLS OPTIONS…`.
    fn exchange(&self, path: &Path, command: &[&str]) -> Result<Vec<String>, BadField> {
        let urls = self.exchange.as_ref().ok_or(BadField {
            field: "exchange",
            why: "this platform has no exchange (start the cluster with --exchange)",
        })?;
        let (name, options) = command.split_first().ok_or(BadField {
            field: "action",
            why: "not an action of this console's wallet: reload the page",
        })?;
        let mut args = vec![
            "exchange".to_string(),
            name.to_string(),
            format!("--wallet={}", path.display()),
            format!("--exchange={urls}"),
        ];
        args.extend(options.iter().map(|s| s.to_string()));
        Ok(args)
    }
}

/// A value a form gave that the wallet does not take, with what to type instead.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {why}")]
pub struct BadField {
    pub field: &'static str,
    pub why: &'static str,
}

/// The wallets the console keeps, as `DIR/NAME.json`.
pub fn names(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return vec![];
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter_map(|file| file.strip_suffix(".json").map(str::to_string))
        .filter(|name| check_name(name).is_ok())
        .collect();
    names.sort();
    names
}

/// A wallet's name: 1 to 32 lowercase letters, digits, `-` or `_`.
pub fn check_name(name: &str) -> Result<(), BadField> {
    let fine = !name.is_empty()
        && name.len() <= NAME_CHARS_MAX
        && (name.bytes()).all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
    fine.then_some(()).ok_or(BadField {
        field: "wallet name",
        why: "use 1 to 32 lowercase letters, digits, - or _ (e.g. alice)",
    })
}

fn field<'a>(form: &'a HashMap<String, String>, name: &'static str) -> Result<&'a str, BadField> {
    form.get(name)
        .map(|v| v.trim())
        .filter(|v| !v.is_empty())
        .ok_or(BadField {
            field: name,
            why: "this field is empty: fill it in",
        })
}

fn amount_value(form: &HashMap<String, String>, name: &'static str) -> Result<u64, BadField> {
    let text = field(form, name)?;
    match text.parse::<u64>() {
        Ok(value) if value >= 1 => Ok(value),
        _ => Err(BadField {
            field: name,
            why: "a whole number of the currency's smallest unit, at least 1 (e.g. 250)",
        }),
    }
}

fn amount(form: &HashMap<String, String>, name: &'static str) -> Result<String, BadField> {
    amount_value(form, name).map(|value| value.to_string())
}

fn matching(
    form: &HashMap<String, String>,
    name: &'static str,
    chars_max: usize,
    allowed: fn(u8) -> bool,
    why: &'static str,
) -> Result<String, BadField> {
    let text = field(form, name)?;
    let fine = text.len() <= chars_max && text.bytes().all(allowed) && !text.starts_with('-');
    fine.then(|| text.to_string()).ok_or(BadField { field: name, why })
}

fn address(form: &HashMap<String, String>) -> Result<String, BadField> {
    matching(
        form,
        "to",
        200,
        |b| b.is_ascii_lowercase() || b.is_ascii_digit(),
        "an address, like usd1q… (copy it from the payee's wallet)",
    )
}

/// A payment string or an offline payment request: `specie-…1` then letters, digits (an
/// offline one's `:` and hex).
fn payment(form: &HashMap<String, String>, name: &'static str) -> Result<String, BadField> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b':';
    let why = "a payment string, like specie-pay1… (paste it whole, nothing around it)";
    let text = matching(form, name, PAYMENT_CHARS_MAX, allowed, why)?;
    text.starts_with("specie-")
        .then_some(text)
        .ok_or(BadField { field: name, why })
}

fn account(form: &HashMap<String, String>) -> Result<String, BadField> {
    let text = matching(
        form,
        "to",
        64,
        |b| b.is_ascii_hexdigit(),
        "the payee's FastPay account: 64 hex digits",
    )?;
    (text.len() == 64).then_some(text).ok_or(BadField {
        field: "to",
        why: "the payee's FastPay account: 64 hex digits",
    })
}

fn asset(form: &HashMap<String, String>, name: &'static str) -> Result<String, BadField> {
    matching(
        form,
        name,
        16,
        |b| b.is_ascii_lowercase(),
        "an asset's name, in lowercase letters (e.g. usd)",
    )
}

/// The amount a payee asks for with a new receiving address, if the form gives one.
pub fn requested_amount(form: &HashMap<String, String>) -> Result<Option<u64>, BadField> {
    match form.get("amount").map(|a| a.trim()).filter(|a| !a.is_empty()) {
        None => Ok(None),
        Some(_) => amount_value(form, "amount").map(Some),
    }
}

/// The arguments of the command `action` names, after `specie`, for the wallet at `path`.
pub fn arguments(
    action: &str,
    form: &HashMap<String, String>,
    path: &Path,
    endpoints: &Endpoints,
) -> Result<Vec<String>, BadField> {
    let wallet = |command: &[&str]| endpoints.wallet(path, command);
    let exchange = |command: &[&str]| endpoints.exchange(path, command);
    Ok(match action {
        "create" => wallet(&["create"]),
        "sync" => wallet(&["sync"]),
        "address" => wallet(&["address"]),
        "send" => wallet(&[
            "send",
            &format!("--to={}", address(form)?),
            &format!("--amount={}", amount(form, "amount")?),
        ]),
        "send-confidential" => wallet(&[
            "send",
            "--confidential",
            &format!("--to={}", address(form)?),
            &format!("--amount={}", amount(form, "amount")?),
        ]),
        "import" => wallet(&["import", "--", &payment(form, "payment")?]),
        "receive" => wallet(&["receive", "--", &payment(form, "payment")?]),
        "shield" => wallet(&["shield", &format!("--amount={}", amount(form, "amount")?)]),
        "enrol" => wallet(&["enrol", "--", &payment(form, "challenge")?]),
        "enrol-credential" => wallet(&["enrol", &format!("--credential={}", payment(form, "credential")?)]),
        "anonymise" => wallet(&[
            "anonymise",
            "--hide-values",
            &format!("--amount={}", amount(form, "amount")?),
        ]),
        "send-anonymous" => {
            let id = matching(
                form,
                "to_id",
                20,
                |b| b.is_ascii_digit(),
                "the payee's enrolment id, a whole number (e.g. 8)",
            )?;
            let to_id = format!("--to-id={id}");
            wallet(&[
                "send-anonymous",
                "--hide-values",
                &to_id,
                &format!("--amount={}", amount(form, "amount")?),
            ])
        }
        "fastpay-account" => wallet(&["fastpay", "accounts", "--new"]),
        "fastpay-fund" => wallet(&["fastpay", "fund", "--", &amount(form, "amount")?]),
        "fastpay-pay" => wallet(&["fastpay", "pay", "--", &account(form)?, &amount(form, "amount")?]),
        "fastpay-sync" => wallet(&["fastpay", "sync"]),
        "offline-create" => wallet(&["offline", "create"]),
        "offline-enrol" => {
            let offline = endpoints.offline.as_ref().ok_or(BadField {
                field: "offline",
                why: "this platform has no offline authority (start the cluster with --offline)",
            })?;
            let token = format!("--operator-token-file={}", offline.operator_token.display());
            wallet(&["offline", "enrol", &token])
        }
        "offline-fund" => wallet(&["offline", "fund-from-core", "--", &amount(form, "amount")?]),
        "offline-request" => wallet(&["offline", "request", "--", &amount(form, "amount")?]),
        "offline-pay" => wallet(&["offline", "pay", "--", &payment(form, "request")?]),
        "offline-receive" => wallet(&["offline", "receive", "--", &payment(form, "payment")?]),
        "exchange-deposit" => exchange(&[
            "deposit",
            &format!("--asset={}", asset(form, "asset")?),
            &format!("--amount={}", amount(form, "amount")?),
        ])?,
        "exchange-offer" => {
            let price = matching(
                form,
                "min_price",
                32,
                |b| b.is_ascii_digit() || b == b'.',
                "a decimal number, like 0.95",
            )?;
            exchange(&[
                "offer",
                &format!("--sell={}", asset(form, "sell")?),
                &format!("--buy={}", asset(form, "buy")?),
                &format!("--amount={}", amount(form, "amount")?),
                &format!("--min-price={price}"),
            ])?
        }
        "exchange-cancel" => exchange(&["cancel", &format!("--offer={}", amount(form, "offer")?)])?,
        _ => {
            return Err(BadField {
                field: "action",
                why: "not an action of this console's wallet: reload the page",
            })
        }
    })
}

/// What the wallet page shows of each mode, read-only commands run side by side.
pub fn balance_commands(path: &Path, endpoints: &Endpoints) -> Vec<(&'static str, Vec<String>)> {
    let mut commands = vec![
        ("Core and private levels", endpoints.wallet(path, &["balance"])),
        (
            "Byzantine mode (FastPay)",
            endpoints.wallet(path, &["fastpay", "balance"]),
        ),
        ("Offline device", endpoints.wallet(path, &["offline", "balance"])),
    ];
    if let Ok(account) = endpoints.exchange(path, &["account"]) {
        commands.push(("Exchange", account));
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn endpoints() -> Endpoints {
        Endpoints {
            node: "http://127.0.0.1:8470".into(),
            exchange: None,
            cluster_file: None,
            offline: None,
        }
    }

    #[test]
    fn values_become_arguments_only_in_their_narrow_shapes() {
        let path = Path::new("/w/alice.json");
        let args = arguments(
            "send",
            &form(&[("to", "usd1qxyz"), ("amount", "250")]),
            path,
            &endpoints(),
        )
        .unwrap();
        assert_eq!(
            args,
            [
                "wallet",
                "--wallet=/w/alice.json",
                "--node=http://127.0.0.1:8470",
                "send",
                "--to=usd1qxyz",
                "--amount=250"
            ]
        );
        for (action, pairs) in [
            ("send", vec![("to", "--node=http://evil"), ("amount", "1")]),
            ("send", vec![("to", "usd1q"), ("amount", "-5")]),
            ("send", vec![("to", "usd1q"), ("amount", "0")]),
            ("send", vec![("to", "usd1q x"), ("amount", "1")]),
            ("import", vec![("payment", "-h")]),
            ("import", vec![("payment", "specie-pay1 ; rm")]),
            ("fastpay-pay", vec![("to", "ab"), ("amount", "1")]),
            ("exchange-offer", vec![("sell", "usd")]),
            ("rm", vec![]),
        ] {
            assert!(
                arguments(action, &form(&pairs), path, &endpoints()).is_err(),
                "{action} {pairs:?}"
            );
        }
        let positional = arguments("import", &form(&[("payment", "specie-pay1abc")]), path, &endpoints()).unwrap();
        assert_eq!(positional[positional.len() - 2..], ["--", "specie-pay1abc"]);
    }

    /// The options the console itself writes; a form's values only ever follow their `=`.
    const OURS: [&str; 19] = [
        "--credential",
        "--hide-values",
        "--to-id",
        "--wallet",
        "--node",
        "--to",
        "--amount",
        "--confidential",
        "--new",
        "--cluster-file",
        "--authority",
        "--authority-key",
        "--operator-token-file",
        "--exchange",
        "--asset",
        "--sell",
        "--buy",
        "--min-price",
        "--offer",
    ];
    const ACTIONS: [&str; 27] = [
        "enrol",
        "enrol-credential",
        "anonymise",
        "send-anonymous",
        "offline-request",
        "offline-pay",
        "offline-receive",
        "create",
        "sync",
        "address",
        "send",
        "send-confidential",
        "import",
        "receive",
        "shield",
        "fastpay-account",
        "fastpay-fund",
        "fastpay-pay",
        "fastpay-sync",
        "offline-create",
        "offline-enrol",
        "offline-fund",
        "exchange-deposit",
        "exchange-offer",
        "exchange-cancel",
        "rm",
        "--help",
    ];

    /// What a hostile form might hold: options, option-like words, shell, numbers, keys.
    fn hostile_value() -> impl proptest::strategy::Strategy<Value = String> {
        proptest::prop_oneof![
            "-{1,2}[a-z0-9-]{0,10}",
            "--[a-z-]{1,12}=[a-z0-9:/.]{0,16}",
            "[ -~]{0,16}",
            "[0-9]{1,4}",
            "[0-9a-f]{64}",
            "specie-[a-z]{0,5}1[0-9a-z]{0,20}",
        ]
    }

    proptest::proptest! {
        #[test]
        fn no_form_value_becomes_an_option_or_a_command(
            action in proptest::sample::select(&ACTIONS[..]),
            values in proptest::collection::vec(hostile_value(), 12),
        ) {
            let names = [
                "to", "amount", "payment", "asset", "sell", "buy", "min_price", "offer", "request", "challenge", "credential",
                "to_id",
            ];
            let form: HashMap<String, String> = names.iter().map(|n| n.to_string()).zip(values).collect();
            let endpoints = Endpoints {
                exchange: Some("http://127.0.0.1:8480".into()),
                cluster_file: Some("/c/cluster.toml".into()),
                offline: Some(OfflineAuthority {
                    urls: "http://127.0.0.1:8490".into(),
                    key: "ab".repeat(32),
                    operator_token: "/c/t".into(),
                }),
                ..endpoints()
            };
            let Ok(args) = arguments(action, &form, Path::new("/w/a.json"), &endpoints) else { return Ok(()) };
            let positional = args.iter().position(|a| a == "--").unwrap_or(args.len());
            for arg in &args[..positional] {
                if arg.starts_with('-') {
                    let name = arg.split_once('=').map_or(arg.as_str(), |(name, _)| name);
                    proptest::prop_assert!(OURS.contains(&name), "{arg} in {args:?}");
                } else {
                    proptest::prop_assert!(arg.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "a command word {arg}");
                }
            }
            for arg in args.get(positional + 1..).unwrap_or_default() {
                proptest::prop_assert!(!arg.starts_with('-') && !arg.contains(char::is_whitespace), "{arg}");
            }
        }
    }

    #[test]
    fn wallet_names_are_narrow() {
        assert!(check_name("alice-2").is_ok());
        for bad in ["", "../x", "Alice", "a/b", &"a".repeat(33)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }
}
