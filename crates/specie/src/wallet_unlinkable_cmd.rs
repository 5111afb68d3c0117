//! `specie wallet enter-unlinkable | send-unlinkable | leave-unlinkable | certify`: the
//! unlinkable level from the command line (docs/unlinkable-format.md, "The wallet"). Receiving is
//! `specie wallet receive`, which takes `specie-upay1…` strings too.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use specie_credential::EnrolmentId;
use specie_privacy_wallet::session::{self, Certified};
use specie_privacy_wallet::{AnonymousWallet, UnlinkablePaymentString, UnlinkablePolicy, UnlinkableWallet};
use specie_transaction::Address;
use specie_transaction::SpecieTransaction;
use specie_wallet::{NodeClient, PaymentString, Wallet};

use crate::wallet_cmd::{
    client_for, load, print_balance, submit_and_report, Built, CosignerArgs, SUBMIT_TIMEOUT_MS_DEFAULT,
};

/// The certifiers a wallet asks for its tokens' certificates.
#[derive(Args, Debug, Clone)]
pub struct CertifierArgs {
    /// The URL of a certifier's service (`specie certifier serve`), repeatable: at least k of
    /// the node's k-of-n group. New tokens (yours and your change) are spendable only once
    /// certified; without it they wait for `specie wallet certify`.
    #[arg(long = "certifier", value_name = "URL")]
    pub certifiers: Vec<String>,
}

/// What every unlinkable command takes besides its amount.
#[derive(Args, Debug)]
pub struct UnlinkableMove {
    /// Amount in the currency's smallest unit (a whole number, at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub amount: u64,
    #[command(flatten)]
    pub certifiers: CertifierArgs,
    #[command(flatten)]
    pub cosigners: CosignerArgs,
    /// How long to wait for the node to make it final, in milliseconds (max 120000).
    #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
}

impl UnlinkableMove {
    /// Builds with the node's policy, has it co-signed, submits it and, once confirmed, has the
    /// new tokens of this wallet certified.
    fn run(
        &self,
        path: &Path,
        node: Option<&str>,
        build: impl FnOnce(&mut Wallet, &UnlinkablePolicy) -> Result<(SpecieTransaction, Built)>,
    ) -> Result<ExitCode> {
        // A mistyped certifier URL is refused before anything is sent.
        for url in &self.certifiers.certifiers {
            NodeClient::new(url)?;
        }
        let mut wallet = load(path)?;
        let client = client_for(&mut wallet, node)?;
        let policy = session::unlinkable_policy(&client)?;
        let (tx, built) = build(&mut wallet, &policy)?;
        let tx = session::cosign(&mut wallet, &client, tx, &self.cosigners.cosigners)?;
        let code = submit_and_report(path, &mut wallet, &client, tx, built, self.timeout_ms)?;
        if code == ExitCode::SUCCESS {
            // The transaction is confirmed whatever the certifiers answer: say so, not fail.
            if let Err(error) = certify_and_report(path, &mut wallet, &policy, &self.certifiers.certifiers) {
                eprintln!(
                    "error: the transaction is confirmed, but its new tokens were not certified: {error}; run \
                     `specie wallet certify --certifier URL …`"
                );
            }
        }
        Ok(code)
    }
}

pub fn enter(path: &Path, node: Option<&str>, moved: &UnlinkableMove) -> Result<ExitCode> {
    let amount = moved.amount;
    moved.run(path, node, |wallet, policy| {
        let (tx, _) = wallet.build_enter_unlinkable(amount, policy, &mut rand::thread_rng())?;
        Ok((tx, Built::Unlinkable(Moved::EnterUnlinkable { amount })))
    })
}

pub fn send(path: &Path, node: Option<&str>, to_id: u64, moved: &UnlinkableMove) -> Result<ExitCode> {
    let amount = moved.amount;
    moved.run(path, node, |wallet, policy| {
        let (tx, payment) =
            wallet.build_unlinkable_payment(EnrolmentId(to_id), amount, policy, &mut rand::thread_rng())?;
        let built = Moved::UnlinkablePayment {
            to: to_id,
            amount,
            change: payment.change,
            payment_string: payment.payment_string,
        };
        Ok((tx, Built::Unlinkable(built)))
    })
}

/// Out of the unlinkable level into a coin: this wallet's, or `to`'s (an address).
pub fn leave(path: &Path, node: Option<&str>, moved: &UnlinkableMove, to: Option<&str>) -> Result<ExitCode> {
    let amount = moved.amount;
    moved.run(path, node, |wallet, policy| {
        let to = to.map(|text| wallet.parse_address(text)).transpose()?;
        let (tx, txid, change) = wallet.build_leave_unlinkable(amount, to.as_ref(), policy, &mut rand::thread_rng())?;
        let paid = to.zip(wallet.payment_string_for(&txid));
        Ok((tx, Built::Unlinkable(Moved::LeaveUnlinkable { amount, change, paid })))
    })
}

/// `specie wallet certify`: asks the certifiers for every confirmed token still uncertified.
pub fn certify(path: &Path, node: Option<&str>, certifiers: &CertifierArgs) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let policy = session::unlinkable_policy(&client)?;
    if wallet.uncertified_tokens().is_empty() {
        println!("every confirmed unlinkable token of this wallet is certified: nothing to ask");
        print_balance(&wallet);
        return Ok(ExitCode::SUCCESS);
    }
    let waiting = certify_and_report(path, &mut wallet, &policy, &certifiers.certifiers)?;
    Ok(if waiting {
        ExitCode::from(crate::wallet_cmd::EXIT_NOT_FINAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// Receives a `specie-upay1…` string and asks `certifiers` for its certificate.
pub fn receive(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
    certifiers: &[String],
) -> Result<ExitCode> {
    let unit = wallet.hrp().to_owned();
    let received = session::receive_unlinkable(path, wallet, client, text)?;
    if received.already_known {
        println!("this token is already in this wallet: nothing added");
    } else {
        println!(
            "received {} {unit} unlinkably: the node holds the token",
            received.value
        );
    }
    let policy = session::unlinkable_policy(client)?;
    let waiting = certify_and_report(path, wallet, &policy, certifiers)?;
    Ok(if waiting {
        ExitCode::from(crate::wallet_cmd::EXIT_NOT_FINAL)
    } else {
        ExitCode::SUCCESS
    })
}

/// Has the wallet's uncertified tokens certified through `certifiers`, says what happened and
/// prints the balance. Returns whether some token still waits.
fn certify_and_report(
    path: &Path,
    wallet: &mut Wallet,
    policy: &UnlinkablePolicy,
    certifiers: &[String],
) -> Result<bool> {
    let unit = wallet.hrp().to_owned();
    let waiting = if certifiers.is_empty() {
        let count = wallet.uncertified_tokens().len();
        if count > 0 {
            println!(
                "{count} unlinkable token(s) wait for their certificate before they can pay: run `specie wallet certify \
                 --certifier URL …` with at least {} of the node's certifiers",
                policy.certifiers.threshold()
            );
        }
        count > 0
    } else {
        let Certified { certified, waiting } = session::certify_tokens(path, wallet, policy, certifiers)?;
        for value in certified {
            println!("certified a token of {value} {unit}: spendable now");
        }
        for (outpoint, answers) in &waiting {
            println!("token {}:{} is not certified yet:", outpoint.txid, outpoint.index);
            for answer in answers {
                println!("  {answer}");
            }
        }
        !waiting.is_empty()
    };
    print_balance(wallet);
    Ok(waiting)
}

/// What an unlinkable command built, for its report once confirmed.
#[derive(Debug)]
pub enum Moved {
    EnterUnlinkable {
        amount: u64,
    },
    LeaveUnlinkable {
        amount: u64,
        change: u64,
        /// Another wallet's address and the string its owner needs; `None`: this wallet's coin.
        paid: Option<(Address, PaymentString)>,
    },
    UnlinkablePayment {
        to: u64,
        amount: u64,
        change: u64,
        payment_string: UnlinkablePaymentString,
    },
}

/// Says what a confirmed unlinkable transaction did.
pub fn report(wallet: &Wallet, moved: &Moved, unit: &str) {
    match moved {
        Moved::EnterUnlinkable { amount } => {
            println!("{amount} {unit} entered the unlinkable level as a token of this wallet");
        }
        Moved::LeaveUnlinkable { amount, change, paid } => match paid {
            None => println!(
                "{amount} {unit} left the unlinkable level as a coin of this wallet; {change} {unit} stays in tokens"
            ),
            Some((to, payment_string)) => {
                println!(
                    "paid {amount} {unit} from the unlinkable level to {}; {change} {unit} stays in tokens",
                    wallet.format_address(to)
                );
                crate::wallet_cmd::print_payment_string(payment_string);
            }
        },
        Moved::UnlinkablePayment {
            to,
            amount,
            change,
            payment_string,
        } => {
            println!("sent {amount} {unit} unlinkably to enrolment id {to}; {change} {unit} came back as a token");
            if wallet.enrolment_id().map(|id| id.0) == Some(*to) {
                println!("(that id is this wallet's own: the token is already here)");
            } else {
                print_payment_string(payment_string);
            }
        }
    }
}

/// Tells the payer how to hand over an unlinkable payment: the string reveals the value and lets
/// its reader recognise the payee's token, so it is printed for the payer to pass on privately.
pub fn print_payment_string(payment: &UnlinkablePaymentString) {
    let text = payment.encode();
    println!("The payee needs this unlinkable payment string to receive the money; send it to them privately:");
    println!("  {text}");
    println!("They run:");
    println!("  specie wallet --wallet theirs.json receive {text} --certifier URL …");
}
