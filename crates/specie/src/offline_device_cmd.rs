//! `specie offline device …`: a device wallet in a file, paying other devices with no network
//! and going online to the offline authority to enrol, be funded, deposit and sync.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_offline::{Denominations, KeyRing};
use specie_offline_device::DeviceLimits;
use specie_offline_service::device::{
    parse_payment, parse_request, payment_string, request_string, AuthorityClient, DeviceFile, DeviceStore,
};
use specie_offline_service::exchange;

#[derive(Args)]
pub struct DeviceArgs {
    /// The device file (created by `create`; locked while a command runs).
    #[arg(long)]
    device: PathBuf,
    /// The offline authority's API (for the commands that go online).
    #[arg(long, default_value = "http://127.0.0.1:8490")]
    authority: String,
    #[command(subcommand)]
    command: DeviceCommand,
}

/// `specie wallet offline …`: the same commands, on the device kept in the wallet file.
#[derive(Args, Debug)]
pub struct WalletDeviceArgs {
    /// The offline authority's API (for the commands that go online).
    #[arg(long, default_value = "http://127.0.0.1:8490")]
    authority: String,
    #[command(subcommand)]
    command: DeviceCommand,
}

#[derive(Subcommand, Debug)]
enum DeviceCommand {
    /// Create a device with a fresh secret seed and its limits.
    Create {
        /// Most value the device may hold, in minor units.
        #[arg(long, default_value_t = DeviceLimits::default().holding_max)]
        holding_max: u64,
        /// Most value one payment may move.
        #[arg(long, default_value_t = DeviceLimits::default().payment_max)]
        payment_max: u64,
        /// Most hands a token may have passed before the device refuses it.
        #[arg(long, default_value_t = DeviceLimits::default().hops_max)]
        hops_max: usize,
        /// Hours after the last sync during which the device pays and receives.
        #[arg(long, default_value_t = 168)]
        sync_age_hours: u64,
    },
    /// (Operator) register the device's identity at the authority and certify its first keys;
    /// saves the authority's key ring beside the file, to check payments offline.
    Enrol {
        /// The operator's bearer token (DATA_DIR/operator.token of the authority).
        #[arg(long)]
        operator_token_file: PathBuf,
        #[arg(long, default_value_t = 32)]
        keys: usize,
    },
    /// Move AMOUNT from a core wallet into this device: an offline funding the core confirms,
    /// then tokens issued by the authority (which checks the core itself) to this device's keys.
    /// If the authority could not be reached after the core confirmed, run it again: the
    /// confirmed funding is kept beside the device file (DEVICE.funding) and handed in first.
    FundFromCore {
        /// The core wallet that pays (locked while this runs) [default, for a device kept in a
        /// wallet: that wallet].
        #[arg(long)]
        wallet: Option<PathBuf>,
        /// The core node's API [default: the one the wallet remembers].
        #[arg(long)]
        node: Option<String>,
        amount: u64,
    },
    /// (Operator, trial without a core) fund the device with AMOUNT on the operator's word.
    Fund {
        #[arg(long)]
        operator_token_file: PathBuf,
        amount: u64,
    },
    /// Ask to be paid AMOUNT: prints a payment request string for the payer (offline).
    Request { amount: u64 },
    /// Pay a payment request string: prints the payment string for the payee (offline).
    Pay { request: String },
    /// Check and take a payment string for one of this device's open requests (offline).
    Receive { payment: String },
    /// Be paid AMOUNT by another device directly: listen on --listen for one payer (a local
    /// link), ask, check, and give change if the payer has no exact change and asks for it.
    /// Prints `listening on ADDRESS` first.
    ReceiveDirect {
        #[arg(long, default_value = "127.0.0.1:8495")]
        listen: std::net::SocketAddr,
        /// How long to wait for each message of the other device, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout_s: u64,
        amount: u64,
    },
    /// Pay the device listening at --to what it asks, if at most --max; without exact change,
    /// pay more and take the change back in the same exchange.
    PayDirect {
        #[arg(long)]
        to: std::net::SocketAddr,
        /// The most this payment may take (what you agreed to pay).
        #[arg(long)]
        max: u64,
        #[arg(long, default_value_t = 60)]
        timeout_s: u64,
    },
    /// Deposit every token held: re-issued to this device's fresh keys, or paid out to the
    /// online core: to a new address of the core wallet --wallet (the payouts submitted to the
    /// node and the wallet credited), or to --defund-to (hex of a 32-byte x-only key; the payouts
    /// are printed for whoever holds that key to submit).
    Deposit {
        #[arg(long, conflicts_with_all = ["wallet", "to_core"])]
        defund_to: Option<String>,
        #[arg(long)]
        wallet: Option<PathBuf>,
        /// Back to the core, to the wallet the device is kept in.
        #[arg(long, conflicts_with = "wallet")]
        to_core: bool,
        /// The core node's API [default: the one the wallet remembers].
        #[arg(long, requires = "wallet")]
        node: Option<String>,
    },
    /// Go online: resend unanswered deposits, fetch revocations, certify keys if fewer than --keys-min are left.
    Sync {
        #[arg(long, default_value_t = 8)]
        keys_min: usize,
    },
    /// Value held, keys left, deposits waiting.
    Balance,
}

fn change_note(verb: &str, change: u64) -> String {
    match change {
        0 => String::new(),
        change => format!(" ({verb} {change} change in the same exchange)"),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn ring_path(device: &Path) -> PathBuf {
    let mut name = device.as_os_str().to_owned();
    name.push(".ring");
    PathBuf::from(name)
}

/// Keeps the authority's key ring beside the device file, to check payments offline.
fn write_ring(device: &Path, ring: &KeyRing) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    ring.encode_to(&mut bytes);
    Ok(specie_wallet::write_file_atomically(
        &ring_path(device),
        hex::encode(bytes).as_bytes(),
        true,
    )?)
}

fn read_ring(device: &Path) -> anyhow::Result<KeyRing> {
    let path = ring_path(device);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {} (enrol the device first)", path.display()))?;
    let bytes = hex::decode(text.trim()).with_context(|| format!("{} is not hex", path.display()))?;
    specie_codec::decode_bounded(
        "key ring",
        &bytes,
        specie_offline::KEY_RING_BYTES_MAX,
        KeyRing::decode_from,
    )
    .with_context(|| format!("{} is not a key ring", path.display()))
}

fn operator(client_url: &str, token_file: &Path) -> anyhow::Result<AuthorityClient> {
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("cannot read the operator token {}", token_file.display()))?;
    Ok(AuthorityClient::new(client_url, Some(token.trim().to_string())))
}

pub fn run(args: DeviceArgs) -> anyhow::Result<ExitCode> {
    run_on(&DeviceStore::File(args.device), &args.authority, args.command)
}

/// `specie wallet --wallet W offline …`.
pub fn run_in_wallet(wallet: &Path, args: WalletDeviceArgs) -> anyhow::Result<ExitCode> {
    run_on(
        &DeviceStore::Wallet(wallet.to_path_buf()),
        &args.authority,
        args.command,
    )
}

/// The core wallet a bridge command uses: the one given, or the one the device is kept in.
fn core_wallet(given: Option<PathBuf>, file: &DeviceFile, what: &str) -> anyhow::Result<PathBuf> {
    given
        .or_else(|| file.wallet().map(Path::to_path_buf))
        .with_context(|| format!("{what}: name the core wallet with --wallet"))
}

fn run_on(store: &DeviceStore, authority: &str, command: DeviceCommand) -> anyhow::Result<ExitCode> {
    let path = store.path();
    if let DeviceCommand::Create {
        holding_max,
        payment_max,
        hops_max,
        sync_age_hours,
    } = command
    {
        let limits = DeviceLimits {
            holding_max,
            payment_max,
            hops_max,
            sync_age_ms_max: sync_age_hours.saturating_mul(3_600_000),
        };
        let file = DeviceFile::create(store, limits, now_ms())?;
        println!("identity {}", hex::encode(file.device.identity()));
        return Ok(ExitCode::SUCCESS);
    }
    let mut file = DeviceFile::open(store)?;
    let device = &mut file.device;
    match command {
        DeviceCommand::Create { .. } => unreachable!("handled above"),
        DeviceCommand::Enrol {
            operator_token_file,
            keys,
        } => {
            let client = operator(authority, &operator_token_file)?;
            write_ring(path, &client.ring()?)?;
            client.enrol(device, keys)?;
            device.synced(&[], now_ms());
            file.save()?;
            println!("enrolled, {} keys certified", file.device.keys_left());
        }
        DeviceCommand::Fund {
            operator_token_file,
            amount,
        } => {
            let client = operator(authority, &operator_token_file)?;
            let split = Denominations::default().split(amount).len();
            let funded = client.fund(device, amount, split)?;
            file.save()?;
            println!("funded {funded}; balance {}", file.device.balance());
        }
        DeviceCommand::Request { amount } => {
            let mut nonce = [0u8; 16];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut nonce);
            let request = device.request(amount, nonce, now_ms())?;
            file.save()?;
            println!("{}", request_string(&request));
        }
        DeviceCommand::Pay { request } => {
            let request = parse_request(&request)?;
            let tokens = device.pay(&request, &read_ring(path)?, now_ms())?;
            // Saved before the payment leaves: the device never signs these tokens again.
            file.save()?;
            println!("{}", payment_string(&request.nonce, &tokens));
        }
        DeviceCommand::Receive { payment } => {
            let (nonce, tokens) = parse_payment(&payment)?;
            let received = device.receive(&nonce, &tokens, &read_ring(path)?, now_ms())?;
            file.save()?;
            println!("received {received}; balance {}", file.device.balance());
        }
        DeviceCommand::ReceiveDirect {
            listen,
            timeout_s,
            amount,
        } => receive_direct(&mut file, listen, timeout_s, amount)?,
        DeviceCommand::PayDirect { to, max, timeout_s } => pay_direct(&mut file, to, max, timeout_s)?,
        DeviceCommand::FundFromCore { wallet, node, amount } => {
            let wallet = core_wallet(wallet, &file, "fund-from-core")?;
            crate::offline_bridge_cmd::fund_from_core(&mut file, authority, &wallet, node.as_deref(), amount)?
        }
        DeviceCommand::Deposit {
            defund_to,
            wallet,
            to_core,
            node,
        } if wallet.is_some() || to_core => {
            debug_assert!(defund_to.is_none());
            let wallet = core_wallet(wallet, &file, "deposit --to-core")?;
            crate::offline_bridge_cmd::deposit_to_wallet(&mut file, authority, &wallet, node.as_deref())?
        }
        DeviceCommand::Deposit { defund_to, .. } => deposit(&mut file, authority, defund_to.as_deref())?,
        DeviceCommand::Sync { keys_min } => sync(&mut file, authority, keys_min)?,
        DeviceCommand::Balance => {
            println!(
                "balance {}; {} tokens; {} keys left; {} deposits waiting",
                device.balance(),
                device.held().len(),
                device.keys_left(),
                device.pending().len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The payee's side of a direct exchange: listens, asks for `amount`, takes the payment.
fn receive_direct(
    file: &mut DeviceFile,
    listen: std::net::SocketAddr,
    timeout_s: u64,
    amount: u64,
) -> anyhow::Result<()> {
    let ring = read_ring(file.path())?;
    let listener = std::net::TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    println!("listening on {}", listener.local_addr()?);
    use std::io::Write;
    std::io::stdout().flush()?;
    let timeout = std::time::Duration::from_secs(timeout_s.max(1));
    let done = exchange::receive_direct(file, &listener, amount, &ring, timeout, now_ms())?;
    println!(
        "received {}{}; balance {}",
        done.received - done.paid,
        change_note("gave", done.paid),
        file.device.balance()
    );
    Ok(())
}

/// The payer's side of a direct exchange: pays what the device at `to` asks, up to `max`.
fn pay_direct(file: &mut DeviceFile, to: std::net::SocketAddr, max: u64, timeout_s: u64) -> anyhow::Result<()> {
    let ring = read_ring(file.path())?;
    let timeout = std::time::Duration::from_secs(timeout_s.max(1));
    let done = exchange::pay_direct(file, to, max, &ring, timeout, now_ms())?;
    println!(
        "paid {}{}; balance {}",
        done.paid - done.received,
        change_note("got", done.received),
        file.device.balance()
    );
    Ok(())
}

/// Deposits every token held (re-issued, or defunded to `defund_to`), saved before it is sent.
fn deposit(file: &mut DeviceFile, authority: &str, defund_to: Option<&str>) -> anyhow::Result<()> {
    let address = match defund_to {
        Some(text) => hex::decode(text)
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .context("--defund-to is not a 32-byte key in hex")?,
        None => [0; 32],
    };
    file.device.deposit_all(address, defund_to.is_some());
    file.save()?;
    let deposited = AuthorityClient::new(authority, None).deposit_pending(&mut file.device)?;
    file.save()?;
    println!(
        "deposited: {} paid, {} refused (spent twice by an earlier owner); balance {}",
        deposited.paid,
        deposited.refused,
        file.device.balance()
    );
    for payout in &deposited.payouts {
        let tx = specie_transaction::SpecieTransaction::OfflinePayout(payout.clone());
        println!(
            "payout for the core: {}",
            hex::encode(specie_codec::Encode::encode(&tx))
        );
    }
    Ok(())
}

/// Revocations, keys, and the deposits still unanswered.
fn sync(file: &mut DeviceFile, authority: &str, keys_min: usize) -> anyhow::Result<()> {
    let client = AuthorityClient::new(authority, None);
    let revoked = client.sync(&mut file.device, now_ms())?;
    // The ring now: this period's keys, what expired, what was revoked.
    let ring = client.ring()?;
    write_ring(file.path(), &ring)?;
    let forgotten = file.device.forget_stale_keys(&ring);
    if forgotten > 0 {
        eprintln!("{forgotten} one-time keys certified too long ago were dropped");
    }
    if file.device.keys_left() < keys_min {
        client.certify(&mut file.device, keys_min.max(32))?;
    }
    file.save()?;
    let deposited = client.deposit_pending(&mut file.device)?;
    file.save()?;
    println!(
        "synced: {revoked} revocations, period {}, {} keys, deposits answered {} paid / {} refused",
        ring.lifecycle().current_period,
        file.device.keys_left(),
        deposited.paid,
        deposited.refused
    );
    Ok(())
}
