//! `specie offline device …`: a device wallet in a file, paying other devices with no network
//! and going online to the offline authority to enrol, be funded, deposit and sync.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_offline::Denominations;
use specie_offline_bridge::device::{
    parse_payment, parse_request, payment_string, request_string, AuthorityClient, DeviceFile, DeviceStore,
};
use specie_offline_bridge::hand_over;
use specie_offline_device::DeviceLimits;

#[derive(Args)]
pub struct DeviceArgs {
    /// The device file (created by `create`; locked while a command runs).
    #[arg(long)]
    device: PathBuf,
    #[command(flatten)]
    online: Online,
    #[command(subcommand)]
    command: DeviceCommand,
}

/// Where the authority is, and which one the device trusts.
#[derive(Args, Debug, Clone)]
pub struct Online {
    /// The offline authority's API, for the commands that go online: one URL, or a cluster
    /// group's replicas comma-separated (calls follow its leader).
    #[arg(long, default_value = "http://127.0.0.1:8490")]
    authority: String,
    /// The authority's bridge key (hex), got from its operator out of band: the device then takes
    /// key rings signed by it only. Without it, the first ring the device keeps (on enrolment)
    /// decides which authority it trusts from then on.
    #[arg(long, value_name = "HEX", value_parser = parse_authority_key)]
    authority_key: Option<specie_offline::PublicKey>,
}

fn parse_authority_key(text: &str) -> Result<specie_offline::PublicKey, String> {
    let bytes = hex::decode(text.trim()).map_err(|error| format!("not hex: {error}"))?;
    let key = <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| format!("{} bytes, a key has 32", bytes.len()))?;
    specie_offline::check_public_key(&key).map_err(|error| error.to_string())?;
    Ok(key)
}

impl Online {
    /// A client of the authority that takes key rings only from the one `file` trusts.
    pub fn client(&self, file: &DeviceFile, operator_token: Option<String>) -> anyhow::Result<AuthorityClient> {
        Ok(file.authority_client(&self.authority, operator_token, self.authority_key)?)
    }
}

/// `specie wallet offline …`: the same commands, on the device kept in the wallet file.
#[derive(Args, Debug)]
pub struct WalletDeviceArgs {
    #[command(flatten)]
    online: Online,
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
    /// pay more and take the change back in the same hand-over.
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

fn operator(online: &Online, file: &DeviceFile, token_file: &Path) -> anyhow::Result<AuthorityClient> {
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("cannot read the operator token {}", token_file.display()))?;
    online.client(file, Some(token.trim().to_string()))
}

pub fn run(args: DeviceArgs) -> anyhow::Result<ExitCode> {
    run_on(&DeviceStore::File(args.device), &args.online, args.command)
}

/// `specie wallet --wallet W offline …`.
pub fn run_in_wallet(wallet: &Path, args: WalletDeviceArgs) -> anyhow::Result<ExitCode> {
    run_on(&DeviceStore::Wallet(wallet.to_path_buf()), &args.online, args.command)
}

/// The core wallet a bridge command uses: the one given, or the one the device is kept in.
fn core_wallet(given: Option<PathBuf>, file: &DeviceFile, what: &str) -> anyhow::Result<PathBuf> {
    given
        .or_else(|| file.wallet().map(Path::to_path_buf))
        .with_context(|| format!("{what}: name the core wallet with --wallet"))
}

fn run_on(store: &DeviceStore, online: &Online, command: DeviceCommand) -> anyhow::Result<ExitCode> {
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
        return create(store, limits);
    }
    let mut file = DeviceFile::open(store)?;
    let device = &mut file.device;
    match command {
        DeviceCommand::Create { .. } => unreachable!("handled above"),
        DeviceCommand::Enrol {
            operator_token_file,
            keys,
        } => enrol(&mut file, online, &operator_token_file, keys)?,
        DeviceCommand::Fund {
            operator_token_file,
            amount,
        } => {
            let client = operator(online, &file, &operator_token_file)?;
            let device = &mut file.device;
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
            let ring = file.ring()?;
            let tokens = file.device.pay(&request, &ring, now_ms())?;
            // Saved before the payment leaves: the device never signs these tokens again.
            file.save()?;
            println!("{}", payment_string(&request.nonce, &tokens));
        }
        DeviceCommand::Receive { payment } => {
            let (nonce, tokens) = parse_payment(&payment)?;
            let ring = file.ring()?;
            let received = file.device.receive(&nonce, &tokens, &ring, now_ms())?;
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
            let client = online.client(&file, None)?;
            crate::offline_bridge_cmd::fund_from_core(&mut file, &client, &wallet, node.as_deref(), amount)?
        }
        DeviceCommand::Deposit {
            defund_to,
            wallet,
            to_core,
            node,
        } if wallet.is_some() || to_core => {
            debug_assert!(defund_to.is_none());
            let wallet = core_wallet(wallet, &file, "deposit --to-core")?;
            let client = online.client(&file, None)?;
            crate::offline_bridge_cmd::deposit_to_wallet(&mut file, &client, &wallet, node.as_deref())?
        }
        DeviceCommand::Deposit { defund_to, .. } => {
            let client = online.client(&file, None)?;
            deposit(&mut file, &client, defund_to.as_deref())?
        }
        DeviceCommand::Sync { keys_min } => {
            let client = online.client(&file, None)?;
            sync(&mut file, &client, keys_min)?
        }
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

fn create(store: &DeviceStore, limits: DeviceLimits) -> anyhow::Result<ExitCode> {
    let file = DeviceFile::create(store, limits, now_ms())?;
    println!("identity {}", hex::encode(file.device.identity()));
    Ok(ExitCode::SUCCESS)
}

/// Registers the device and certifies its first keys; keeps the authority's signed ring, whose
/// signer the device trusts from then on.
fn enrol(file: &mut DeviceFile, online: &Online, token_file: &Path, keys: usize) -> anyhow::Result<()> {
    let client = operator(online, file, token_file)?;
    let ring = client.signed_ring()?;
    file.keep_ring(&ring)?;
    client.enrol(&mut file.device, keys)?;
    file.device.synced(&[], now_ms());
    file.save()?;
    println!(
        "enrolled, {} keys certified; trusting authority key {}",
        file.device.keys_left(),
        hex::encode(ring.authority)
    );
    Ok(())
}

/// The payee's side of a direct hand-over: listens, asks for `amount`, takes the payment.
fn receive_direct(
    file: &mut DeviceFile,
    listen: std::net::SocketAddr,
    timeout_s: u64,
    amount: u64,
) -> anyhow::Result<()> {
    let ring = file.ring()?;
    let listener = std::net::TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
    println!("listening on {}", listener.local_addr()?);
    use std::io::Write;
    std::io::stdout().flush()?;
    let timeout = std::time::Duration::from_secs(timeout_s.max(1));
    let done = hand_over::receive_direct(file, &listener, amount, &ring, timeout, now_ms())?;
    println!(
        "received {}{}; balance {}",
        done.received - done.paid,
        change_note("gave", done.paid),
        file.device.balance()
    );
    Ok(())
}

/// The payer's side of a direct hand-over: pays what the device at `to` asks, up to `max`.
fn pay_direct(file: &mut DeviceFile, to: std::net::SocketAddr, max: u64, timeout_s: u64) -> anyhow::Result<()> {
    let ring = file.ring()?;
    let timeout = std::time::Duration::from_secs(timeout_s.max(1));
    let done = hand_over::pay_direct(file, to, max, &ring, timeout, now_ms())?;
    println!(
        "paid {}{}; balance {}",
        done.paid - done.received,
        change_note("got", done.received),
        file.device.balance()
    );
    Ok(())
}

/// Deposits every token held (re-issued, or defunded to `defund_to`), saved before it is sent.
/// Payouts are printed for whoever holds the key they pay; each deposit ends once its payout is
/// printed (those of another key, from an earlier `deposit --wallet`, stay pending for it).
fn deposit(file: &mut DeviceFile, client: &AuthorityClient, defund_to: Option<&str>) -> anyhow::Result<()> {
    let address = match defund_to {
        Some(text) => hex::decode(text)
            .ok()
            .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
            .context("--defund-to is not a 32-byte key in hex")?,
        None => {
            // Re-issued to fresh keys: a token with no key left would be defunded to nobody.
            let (tokens, keys) = (file.device.held().len(), file.device.keys_left());
            anyhow::ensure!(
                tokens <= keys,
                "{tokens} tokens to re-issue and {keys} certified keys left: run `sync --keys-min {tokens}` first, \
                 or deposit to the core (--wallet, --to-core, --defund-to)"
            );
            [0; 32]
        }
    };
    file.device.deposit_all(address, defund_to.is_some());
    file.save()?;
    let deposited = client.deposit_pending(&mut file.device)?;
    file.save()?;
    println!(
        "deposited: {} paid, {} refused (spent twice by an earlier owner); balance {}",
        deposited.paid,
        deposited.refused,
        file.device.balance()
    );
    let mut kept = 0;
    for paid in &deposited.payouts {
        let owed = file.device.owed_payout(&paid.link);
        if defund_to.is_none() || owed.is_some_and(|(_, to, _)| to != address) {
            kept += 1;
            continue;
        }
        let tx = specie_transaction::SpecieTransaction::BridgePayout(paid.payout.clone());
        println!(
            "payout for the core: {}",
            hex::encode(specie_codec::Encode::encode(&tx))
        );
        file.device.paid_out(&paid.link);
    }
    file.save()?;
    if kept > 0 {
        eprintln!("{kept} payouts of earlier deposits to another key wait: `deposit` with that key (--wallet, --to-core or --defund-to) hands them on");
    }
    Ok(())
}

/// Revocations, keys, and the deposits still unanswered (those paid out to the core stay
/// pending until `deposit` hands their payouts on).
fn sync(file: &mut DeviceFile, client: &AuthorityClient, keys_min: usize) -> anyhow::Result<()> {
    let revoked = client.sync(&mut file.device, now_ms())?;
    // The ring now (this period's keys, what expired, what was revoked), from the trusted signer.
    let signed = client.signed_ring()?;
    file.keep_ring(&signed)?;
    let ring = signed.ring;
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
    if !deposited.payouts.is_empty() {
        println!(
            "{} deposits are paid out to the core and wait to be handed on: run `deposit` again with their key \
             (--wallet, --to-core or --defund-to)",
            deposited.payouts.len()
        );
    }
    Ok(())
}
