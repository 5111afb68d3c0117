//! `specie wallet fastpay`: Byzantine-mode (FastPay) accounts in the wallet file, driven by
//! `specie-fastpay-wallet` against the core and the committee's authorities.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use specie_committee::{AuthorityAddresses, HttpCommittee, HttpCommitteeOptions};
use specie_fastpay::{decode_exact, AccountKey, Certificate, CommitteeChain, Recipient, CERTIFICATE_BYTES_MAX};
use specie_fastpay_wallet::{
    self as driver, verify_certificate, Announced, CommitteeSource, FastpayWallet, PayOutcome,
};
use specie_wallet::session::{self, Submitted};
use specie_wallet::{Outcome, Wallet, WalletFile};

/// Exit status when something was accepted but is not final yet.
const EXIT_NOT_FINAL: u8 = 2;
const SUBMIT_TIMEOUT_MS: u64 = 30_000;

/// The arguments of `specie wallet fastpay` (its help text is on `WalletCommand::Fastpay`).
#[derive(Args, Debug)]
pub struct FastpayArgs {
    /// The cluster file naming the committee and its authorities (saved in the wallet).
    #[arg(long, value_name = "PATH")]
    pub cluster_file: Option<PathBuf>,
    /// Or the API of a committee run beside a node (`specie byzantine committee`), which names
    /// the committee and its authorities (saved in the wallet).
    #[arg(long, value_name = "URL", conflicts_with = "cluster_file")]
    pub committee_url: Option<String>,

    #[command(subcommand)]
    pub command: FastpayCommand,
}

#[derive(Subcommand, Debug)]
pub enum FastpayCommand {
    /// List this wallet's accounts (offline), or make a new one with --new.
    Accounts {
        #[arg(long)]
        new: bool,
    },
    /// Move AMOUNT of this wallet's core coins into an account: a funding the core confirms,
    /// then sent to every authority (each checks the core itself before crediting it).
    Fund {
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        /// The account [default: the first; one is made if the wallet has none].
        #[arg(long, value_name = "HEX")]
        account: Option<String>,
    },
    /// Pay AMOUNT to another account and print the certificate: give it to the payee, who checks
    /// it offline with `verify`. Exit 2: not final yet (the order is saved; run `sync`).
    Pay {
        /// The payee's account (its owner's Ed25519 public key, hex).
        to: String,
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        #[arg(long, value_name = "HEX")]
        from: Option<String>,
        /// Up to 64 bytes of text carried in the order.
        #[arg(long, default_value = "")]
        memo: String,
    },
    /// Move AMOUNT from an account back to a new core address of this wallet: a transfer to
    /// the core, then its certificate presented to the core as a FastPay redeem.
    Redeem {
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        #[arg(long, value_name = "HEX")]
        account: Option<String>,
    },
    /// Ask every authority for each account's balance (a balance may lag while credits travel).
    Balance,
    /// Fundings, certified transfers and redeems of each account, and any order pending (offline).
    History,
    /// Finish what is unfinished: learn missed orders and certificates from the authorities,
    /// send pending orders again (as they are), tell the authorities of fundings the core
    /// confirmed, present certified transfers back to the core.
    Sync,
    /// Drop the fundings marked refused (the core refused them, or did not hold them when
    /// `sync` asked): kept until now in case the node was wrong, since a funding's bytes are
    /// what the authorities credit. Offline; needs --yes.
    ForgetRefused {
        /// Confirms that the core never took these fundings.
        #[arg(long)]
        yes: bool,
    },
    /// Check a certificate offline against the committee: exit 0 valid, 1 invalid.
    Verify {
        /// The certificate: hex, or a file holding hex or its raw bytes.
        certificate: String,
    },
}

fn account_hex(key: &AccountKey) -> String {
    hex::encode(key.0)
}

fn parse_account(text: &str) -> Result<AccountKey> {
    let bytes = hex::decode(text.trim()).with_context(|| format!("{text:?} is not an account (64 hex digits)"))?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| anyhow!("{text:?} is not an account: an account is 32 bytes (64 hex digits)"))?;
    Ok(AccountKey(bytes))
}

/// Where the committee and its authorities' addresses are described.
#[derive(Clone, Debug)]
enum Source {
    ClusterFile(PathBuf),
    Url(String),
}

impl Source {
    /// What `--cluster-file` or `--committee-url` gives, if either.
    fn given(args: &FastpayArgs) -> Result<Option<Source>> {
        if let Some(path) = &args.cluster_file {
            let path = std::fs::canonicalize(path).with_context(|| format!("no cluster file at {}", path.display()))?;
            return Ok(Some(Source::ClusterFile(path)));
        }
        Ok(args
            .committee_url
            .as_ref()
            .map(|url| Source::Url(url.trim_end_matches('/').to_string())))
    }

    /// The source given now, else the one the wallet saved.
    fn of(wallet: &Wallet, given: Option<&Source>) -> Result<Source> {
        if let Some(source) = given {
            return Ok(source.clone());
        }
        let book = wallet.fastpay();
        match book.as_ref().and_then(|book| book.source()) {
            Some(CommitteeSource::ClusterFile(path)) => Ok(Source::ClusterFile(PathBuf::from(path))),
            Some(CommitteeSource::Url(url)) => Ok(Source::Url(url.to_string())),
            None => bail!(
                "which committee? give it once with `specie wallet fastpay --cluster-file DIR/cluster.toml …` (a \
                 cluster) or `--committee-url URL` (a committee beside a node)"
            ),
        }
    }

    fn remembered(&self) -> Option<CommitteeSource<'_>> {
        match self {
            Source::ClusterFile(path) => path.to_str().map(CommitteeSource::ClusterFile),
            Source::Url(url) => Some(CommitteeSource::Url(url)),
        }
    }

    /// The committee's epochs and the authorities' addresses.
    fn read(&self) -> Result<(CommitteeChain, Vec<AuthorityAddresses>)> {
        match self {
            Source::ClusterFile(path) => read_cluster(path),
            Source::Url(url) => {
                let (committee, addresses) = specie_committee::standalone::read_committee(url)?;
                Ok((CommitteeChain::new(committee), addresses))
            }
        }
    }
}

/// The committee's epochs (its first, and the records of later ones) and the authorities'
/// addresses from a cluster file.
fn read_cluster(path: &Path) -> Result<(CommitteeChain, Vec<AuthorityAddresses>)> {
    let topology = specie_cluster::Topology::load(path).with_context(|| format!("reading {}", path.display()))?;
    let config = topology.fastpay_committee.ok_or_else(|| {
        anyhow!(
            "{} has no [fastpay_committee]; start the cluster with `specie cluster up --authorities`",
            path.display()
        )
    })?;
    let chain = config.chain()?;
    let addresses = config.http_addresses();
    Ok((chain, addresses))
}

/// A client of the wallet's committee (checked to be the source's), saving the source.
fn connect(path: &Path, wallet: &mut Wallet, given: Option<&Source>) -> Result<HttpCommittee> {
    let source = Source::of(wallet, given)?;
    let (chain, addresses) = source.read()?;
    if addresses.is_empty() {
        bail!(
            "the committee's source lists no authority processes ([[fastpay_committee.authorities]] of a cluster file)"
        );
    }
    use_committee(wallet, &chain, &source)?;
    WalletFile::save(path, wallet)?;
    let options = HttpCommitteeOptions {
        request_timeout: Duration::from_secs(5),
        payment_timeout: Duration::from_secs(30),
        ..HttpCommitteeOptions::default()
    };
    let client = HttpCommittee::new(Arc::new(chain.first().clone()), addresses, options)?;
    client.learn(chain.records().to_vec())?;
    Ok(client)
}

/// Makes the source's committee the wallet's (first use), or checks that it is already, and
/// takes in the later epochs the source knows.
fn use_committee(wallet: &mut Wallet, chain: &CommitteeChain, source: &Source) -> Result<()> {
    wallet.fastpay_use_committee(chain.first(), source.remembered())?;
    wallet.fastpay_learn_epochs(chain)?;
    Ok(())
}

/// The account named, else the first (made now if `make` and there is none).
fn choose_account(path: &Path, wallet: &mut Wallet, named: Option<&str>, make: bool) -> Result<AccountKey> {
    if let Some(text) = named {
        return parse_account(text);
    }
    if let Some(first) = wallet
        .fastpay()
        .and_then(|book| book.accounts().first().map(|a| a.key()))
    {
        return Ok(first);
    }
    if !make {
        bail!("this wallet has no Byzantine-mode account yet; fund one with `specie wallet fastpay fund AMOUNT`");
    }
    let key = wallet.fastpay_new_account(&mut rand::thread_rng())?;
    WalletFile::save(path, wallet)?;
    println!("new account: {}", account_hex(&key));
    Ok(key)
}

/// Runs one `specie wallet fastpay` command (the caller holds the wallet's lock).
pub fn run(path: &Path, node: Option<&str>, args: FastpayArgs) -> Result<ExitCode> {
    let given = Source::given(&args)?;
    let given = given.as_ref();
    if let FastpayCommand::Verify { certificate } = &args.command {
        return verify(path, given, certificate);
    }
    let mut wallet = WalletFile::load(path)?;
    if let FastpayCommand::Fund { amount, .. } = args.command {
        // Over what the wallet holds: refused before anything is saved (an account, the committee).
        wallet.ensure_spendable(amount)?;
    }
    match args.command {
        FastpayCommand::Accounts { new } => accounts(path, &mut wallet, given, new),
        FastpayCommand::History => history(&wallet),
        FastpayCommand::ForgetRefused { yes } => forget_refused(path, &mut wallet, yes),
        command => {
            let authorities = connect(path, &mut wallet, given)?;
            match command {
                FastpayCommand::Fund { amount, account } => {
                    let client = session::client_for(&mut wallet, node)?;
                    let account = choose_account(path, &mut wallet, account.as_deref(), true)?;
                    let funded = driver::fund(
                        path,
                        &mut wallet,
                        &client,
                        &authorities,
                        &account,
                        amount,
                        SUBMIT_TIMEOUT_MS,
                    )?;
                    println!(
                        "funded: core txid {} confirmed; {} of {} authorities credited {amount} {} to {}",
                        funded.txid,
                        funded.credited_by,
                        authorities.committee().size(),
                        wallet.hrp(),
                        account_hex(&account)
                    );
                    if funded.credited_by < authorities.committee().quorum() {
                        println!("fewer than a quorum credited it yet; run `specie wallet fastpay sync` later");
                        return Ok(ExitCode::from(EXIT_NOT_FINAL));
                    }
                    Ok(ExitCode::SUCCESS)
                }
                FastpayCommand::Pay { to, amount, from, memo } => {
                    let to = parse_account(&to)?;
                    let from = choose_account(path, &mut wallet, from.as_deref(), false)?;
                    let outcome = driver::pay(
                        path,
                        &mut wallet,
                        &authorities,
                        &from,
                        Recipient::Account(to),
                        amount,
                        memo.into_bytes(),
                    )?;
                    report_payment(&outcome, amount, wallet.hrp())
                }
                FastpayCommand::Redeem { amount, account } => {
                    let client = session::client_for(&mut wallet, node)?;
                    let account = choose_account(path, &mut wallet, account.as_deref(), false)?;
                    let (outcome, presented) = driver::redeem(
                        path,
                        &mut wallet,
                        &client,
                        &authorities,
                        &account,
                        amount,
                        SUBMIT_TIMEOUT_MS,
                    )?;
                    let code = report_payment(&outcome, amount, wallet.hrp())?;
                    Ok(report_presented(&presented, wallet.hrp()).unwrap_or(code))
                }
                FastpayCommand::Balance => balance(&wallet, &authorities),
                FastpayCommand::Sync => {
                    let client = session::client_for(&mut wallet, node)?;
                    sync(path, &mut wallet, &client, &authorities)
                }
                FastpayCommand::Accounts { .. }
                | FastpayCommand::History
                | FastpayCommand::ForgetRefused { .. }
                | FastpayCommand::Verify { .. } => {
                    unreachable!()
                }
            }
        }
    }
}

fn report_payment(outcome: &PayOutcome, amount: u64, unit: &str) -> Result<ExitCode> {
    let certificate = match outcome {
        PayOutcome::Settled(certificate) => certificate,
        PayOutcome::Certified { certificate, why } => {
            println!("final, not yet settled at a quorum ({why}); `specie wallet fastpay sync` or the next payment settles it");
            certificate
        }
        PayOutcome::NotFinal(why) => {
            println!("not final yet: {why}");
            println!("the order is saved; `specie wallet fastpay sync` sends it again (the same order, never another)");
            return Ok(ExitCode::from(EXIT_NOT_FINAL));
        }
    };
    let order = &certificate.order.order;
    println!(
        "paid {amount} {unit}: transfer {} of account {}",
        order.sequence,
        account_hex(&order.sender)
    );
    println!("certificate (the payee checks it offline with `specie wallet fastpay verify`):");
    println!("{}", hex::encode(certificate_bytes(certificate)));
    Ok(ExitCode::SUCCESS)
}

fn certificate_bytes(certificate: &Certificate) -> Vec<u8> {
    let mut bytes = vec![];
    certificate.encode_to(&mut bytes);
    bytes
}

/// Prints what the core said about each redeem; `Some(code)` unless every one was confirmed.
fn report_presented(presented: &[driver::Presented], unit: &str) -> Option<ExitCode> {
    let mut code = None;
    for (txid, amount, submitted) in presented {
        match submitted {
            Submitted::Settled(Outcome::Confirmed(_)) => {
                println!("redeemed: {amount} {unit} back in the core (txid {txid})")
            }
            Submitted::Settled(other) => {
                println!("redeem {txid} of {amount} {unit}: {other}; `specie wallet sync` resolves it");
                code = Some(ExitCode::from(EXIT_NOT_FINAL));
            }
            Submitted::Unknown(error) => {
                println!(
                    "redeem {txid} of {amount} {unit}: outcome unknown ({error}); `specie wallet sync` resolves it"
                );
                code = Some(ExitCode::from(EXIT_NOT_FINAL));
            }
        }
    }
    code
}

fn accounts(path: &Path, wallet: &mut Wallet, given: Option<&Source>, new: bool) -> Result<ExitCode> {
    if new {
        if wallet.fastpay().is_none() {
            let source = Source::of(wallet, given)?;
            let (chain, _) = source.read()?;
            use_committee(wallet, &chain, &source)?;
        }
        let key = wallet.fastpay_new_account(&mut rand::thread_rng())?;
        WalletFile::save(path, wallet)?;
        println!("{}", account_hex(&key));
        return Ok(ExitCode::SUCCESS);
    }
    let accounts = wallet
        .fastpay()
        .map(|book| book.accounts().to_vec())
        .unwrap_or_default();
    for account in accounts {
        println!("{}", account_hex(&account.key()));
    }
    Ok(ExitCode::SUCCESS)
}

fn history(wallet: &Wallet) -> Result<ExitCode> {
    let unit = wallet.hrp();
    let Some(book) = wallet.fastpay() else {
        println!("no Byzantine-mode accounts");
        return Ok(ExitCode::SUCCESS);
    };
    println!(
        "committee: epoch {}, id {}",
        book.committee().epoch(),
        hex::encode(book.committee().id())
    );
    for account in book.accounts() {
        println!(
            "account {} (next sequence number {})",
            account_hex(&account.key()),
            account.next_sequence()
        );
        for record in account.fundings() {
            let state = if record.credited {
                "credited"
            } else if record.refused {
                "refused by the core (kept: `sync` asks again; `forget-refused` drops it)"
            } else {
                "not credited by a quorum yet"
            };
            println!(
                "  funded   {:>12} {unit}  core txid {}  {state}",
                record.funding.amount,
                record.funding.txid()
            );
        }
        for sent in account.sent() {
            let order = &sent.certificate.order.order;
            let to = match order.recipient {
                Recipient::Account(key) => format!("to account {}", account_hex(&key)),
                Recipient::Core(address) => match sent.redeem_txid {
                    Some(txid) if sent.redeemed => {
                        format!("to the core ({}), redeemed (txid {txid})", hex::encode(address.0))
                    }
                    Some(txid) => format!("to the core ({}), redeem txid {txid}", hex::encode(address.0)),
                    None => format!("to the core ({}), redeem not presented yet", hex::encode(address.0)),
                },
            };
            println!("  sent #{:<4}{:>12} {unit}  {to}", order.sequence, order.amount);
        }
        for order in account.pending() {
            println!(
                "  pending #{} {} {unit}: signed, not certified yet (`specie wallet fastpay sync`)",
                order.order.sequence, order.order.amount
            );
        }
        println!(
            "  this wallet's own count: {} {unit} (payments received are known to the authorities only)",
            account.local_balance()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn balance(wallet: &Wallet, authorities: &HttpCommittee) -> Result<ExitCode> {
    let unit = wallet.hrp();
    let accounts = wallet
        .fastpay()
        .map(|book| book.accounts().to_vec())
        .unwrap_or_default();
    for account in &accounts {
        let balances = driver::balances(authorities, &account.key());
        let agreed = driver::agreed_balance(authorities.committee(), &balances);
        match agreed {
            Some(balance) => println!("{}  {balance} {unit}", account_hex(&account.key())),
            None => println!("{}  unknown: too few authorities answered", account_hex(&account.key())),
        }
        for (authority, balance, next) in balances {
            println!("    authority {authority}: {balance} {unit}, next sequence number {next}");
        }
    }
    if accounts.is_empty() {
        println!("no Byzantine-mode accounts");
    }
    Ok(ExitCode::SUCCESS)
}

fn sync(
    path: &Path,
    wallet: &mut Wallet,
    client: &specie_wallet::NodeClient,
    authorities: &HttpCommittee,
) -> Result<ExitCode> {
    let unit = wallet.hrp().to_owned();
    let mut code = ExitCode::SUCCESS;
    let keys: Vec<AccountKey> = wallet
        .fastpay()
        .map(|book| book.accounts().iter().map(|a| a.key()).collect())
        .unwrap_or_default();
    for key in keys {
        let recovered = driver::recover(path, wallet, authorities, &key)?;
        if recovered != driver::Recovered::default() {
            println!(
                "{}: learned {} certificates and {} pending orders from the authorities",
                account_hex(&key),
                recovered.certificates,
                recovered.orders
            );
        }
        match driver::finish_pending(path, wallet, authorities, &key)? {
            Some(PayOutcome::NotFinal(why)) => {
                println!("{}: pending order still not final: {why}", account_hex(&key));
                code = ExitCode::from(EXIT_NOT_FINAL);
            }
            Some(_) => println!("{}: pending order certified", account_hex(&key)),
            None => {}
        }
    }
    for (account, txid, announced) in driver::announce_fundings(path, wallet, client, authorities)? {
        match announced {
            Announced::Sent { credited_by } => println!(
                "{}: funding {txid} credited by {credited_by} authorities",
                account_hex(&account)
            ),
            Announced::CoreUndecided => {
                println!(
                    "{}: funding {txid} waits for the core; run `specie wallet sync`",
                    account_hex(&account)
                );
                code = ExitCode::from(EXIT_NOT_FINAL);
            }
            Announced::Refused => println!(
                "{}: funding {txid}: the core does not hold it (refused); kept, asked again at the next sync \
                 (`specie wallet fastpay forget-refused --yes` drops it)",
                account_hex(&account)
            ),
        }
    }
    let checked = driver::check_redeems(path, wallet, client)?;
    if checked.restored > 0 {
        println!(
            "redeems the core holds: {} {unit} restored to this wallet",
            checked.restored
        );
    }
    for (account, sequence) in &checked.again {
        println!(
            "{}: the core does not hold the redeem of transfer {sequence}; presenting it again",
            account_hex(account)
        );
    }
    let presented = driver::present_redeems(path, wallet, client, SUBMIT_TIMEOUT_MS)?;
    if let Some(other) = report_presented(&presented, &unit) {
        code = other;
    }
    Ok(code)
}

fn forget_refused(path: &Path, wallet: &mut Wallet, yes: bool) -> Result<ExitCode> {
    if !yes {
        bail!(
            "this drops every funding marked refused for good; if the core took one after all, its value is \
             lost: run `specie wallet fastpay sync` first (it asks the core again), then add --yes"
        );
    }
    let (count, value) = wallet.fastpay_forget_refused()?;
    WalletFile::save(path, wallet)?;
    println!("forgot {count} refused fundings ({value} {})", wallet.hrp());
    Ok(ExitCode::SUCCESS)
}

/// Reads a certificate: hex text, or a file of hex or raw bytes.
fn read_certificate(text: &str) -> Result<Certificate> {
    let bytes = match hex::decode(text.trim()) {
        Ok(bytes) => bytes,
        Err(_) => {
            let raw = std::fs::read(text).with_context(|| format!("{text:?} is neither hex nor a readable file"))?;
            match std::str::from_utf8(&raw).ok().and_then(|t| hex::decode(t.trim()).ok()) {
                Some(bytes) => bytes,
                None => raw,
            }
        }
    };
    Ok(decode_exact(
        "certificate",
        &bytes,
        CERTIFICATE_BYTES_MAX,
        Certificate::decode_from,
    )?)
}

fn verify(path: &Path, given: Option<&Source>, text: &str) -> Result<ExitCode> {
    // The wallet's committee, with the later epochs its source (given now, or remembered) knows.
    let chain = match given {
        Some(source) => source.read()?.0,
        None => {
            let mut wallet = WalletFile::load(path)?;
            if wallet.fastpay().is_none() {
                bail!("no committee to check against: give --cluster-file DIR/cluster.toml or --committee-url URL");
            }
            if let Ok((chain, _)) = Source::of(&wallet, None).and_then(|source| source.read()) {
                wallet.fastpay_learn_epochs(&chain)?;
            }
            wallet.fastpay().expect("checked").chain().clone()
        }
    };
    let certificate = match read_certificate(text) {
        Ok(certificate) => certificate,
        Err(error) => {
            println!("invalid: {error:#}");
            return Ok(ExitCode::FAILURE);
        }
    };
    match verify_certificate(&chain, &certificate) {
        Ok(transfer) => {
            let recipient = match transfer.recipient {
                Recipient::Account(key) => format!("account {}", account_hex(&key)),
                Recipient::Core(address) => format!("the core, address commitment {}", hex::encode(address.0)),
            };
            println!(
                "valid: final for committee epoch {} ({})",
                transfer.epoch,
                hex::encode(certificate.committee_id)
            );
            println!("amount:    {}", transfer.amount);
            println!("sender:    {}", account_hex(&transfer.sender));
            println!("recipient: {recipient}");
            println!("sequence:  {}", transfer.sequence);
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            println!("invalid: {error}");
            Ok(ExitCode::FAILURE)
        }
    }
}
