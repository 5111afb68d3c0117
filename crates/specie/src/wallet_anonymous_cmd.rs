//! `specie wallet enrol | anonymise | send-anonymous | leave-anonymous`: the anonymous level from the command
//! line (docs/privacy.md, "Anonymous payments"). Receiving is `specie wallet receive`, which
//! takes `specie-apay1…` strings too.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use specie_credential::EnrolmentId;
use specie_privacy_wallet::session;
use specie_privacy_wallet::{AnonymousPaymentString, AnonymousPolicy, AnonymousWallet};
use specie_transaction::SpecieTransaction;
use specie_wallet::Wallet;

use crate::wallet_cmd::{client_for, load, print_balance, submit_and_report, Built, LevelMove};

/// Answers the RA's challenge (printing the request for the RA), or keeps its credential.
pub fn enrol(path: &Path, node: Option<&str>, challenge: Option<&str>, credential: Option<&str>) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    if let Some(text) = credential.filter(|_| wallet.enrolment_id().is_some()) {
        let client = client_for(&mut wallet, node)?;
        let id = session::renew_credential(path, &mut wallet, &client, text)?;
        println!(
            "credential of id {} renewed under the registration authority the node trusts now",
            id.0
        );
        print_balance(&wallet);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(text) = credential {
        let id = session::finish_enrolment(path, &mut wallet, text)?;
        println!(
            "enrolled as id {}: this wallet can now hold and pay anonymous notes",
            id.0
        );
        print_balance(&wallet);
        return Ok(ExitCode::SUCCESS);
    }
    let client = client_for(&mut wallet, node)?;
    let challenge = challenge.unwrap_or_default();
    let request = session::begin_enrolment(path, &mut wallet, &client, challenge, &mut rand::thread_rng())?;
    println!("Give this enrolment request to the registration authority (it holds no secret):");
    println!("  {request}");
    println!("It runs `specie ra enrol <REQUEST>` and gives you a credential; then run:");
    println!(
        "  specie wallet --wallet {} enrol --credential <CREDENTIAL>",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What every anonymous-level command does around building its transaction: the node's policy
/// (its auditors), the active auditors' co-signatures, submission and the report.
struct Submit<'a> {
    path: &'a Path,
    node: Option<&'a str>,
    hide_values: bool,
    cosigners: &'a [String],
    timeout_ms: u64,
}

impl Submit<'_> {
    fn level_move<'a>(path: &'a Path, node: Option<&'a str>, moved: &'a LevelMove) -> Submit<'a> {
        Submit {
            path,
            node,
            hide_values: moved.hide_values,
            cosigners: &moved.cosigners.cosigners,
            timeout_ms: moved.timeout_ms,
        }
    }

    fn run(
        &self,
        mut wallet: Wallet,
        build: impl FnOnce(&mut Wallet, &AnonymousPolicy) -> Result<(SpecieTransaction, Built)>,
    ) -> Result<ExitCode> {
        let client = client_for(&mut wallet, self.node)?;
        let policy = session::anonymous_policy(&client, self.hide_values)?;
        let (tx, built) = build(&mut wallet, &policy)?;
        let tx = session::cosign(&mut wallet, &client, tx, self.cosigners)?;
        submit_and_report(self.path, &mut wallet, &client, tx, built, self.timeout_ms)
    }
}

pub fn anonymise(path: &Path, node: Option<&str>, moved: &LevelMove) -> Result<ExitCode> {
    let amount = moved.amount;
    Submit::level_move(path, node, moved).run(load(path)?, |wallet, policy| {
        let (tx, _) = wallet.build_anonymise(amount, policy, &mut rand::thread_rng())?;
        Ok((tx, Built::Anonymise { amount }))
    })
}

/// Out of the anonymous level into a coin: this wallet's, or `to`'s (an address).
pub fn leave_anonymous(path: &Path, node: Option<&str>, moved: &LevelMove, to: Option<&str>) -> Result<ExitCode> {
    let (wallet, amount) = (load(path)?, moved.amount);
    let to = to.map(|text| wallet.parse_address(text)).transpose()?;
    Submit::level_move(path, node, moved).run(wallet, |wallet, policy| {
        let (tx, txid, change) = wallet.build_leave_anonymous(amount, to.as_ref(), policy, &mut rand::thread_rng())?;
        // None when `to` is this wallet's own address: the coin is already here.
        let paid = to.zip(wallet.payment_string_for(&txid));
        Ok((tx, Built::LeaveAnonymous { amount, change, paid }))
    })
}

/// What `send-anonymous` pays.
pub struct Payment {
    pub to_id: u64,
    pub amount: u64,
    pub hide_values: bool,
}

pub fn send(
    path: &Path,
    node: Option<&str>,
    payment: &Payment,
    cosigners: &[String],
    timeout_ms: u64,
) -> Result<ExitCode> {
    let submit = Submit {
        path,
        node,
        hide_values: payment.hide_values,
        cosigners,
        timeout_ms,
    };
    let (to, amount) = (payment.to_id, payment.amount);
    submit.run(load(path)?, |wallet, policy| {
        let (tx, payment) = wallet.build_anonymous_payment(EnrolmentId(to), amount, policy, &mut rand::thread_rng())?;
        let built = Built::AnonymousPayment {
            to,
            amount,
            change: payment.change,
            payment_string: payment.payment_string,
        };
        Ok((tx, built))
    })
}

/// Tells the payer how to hand over an anonymous payment: the string reveals the value and lets
/// its reader recognise the payee's output, so it is printed for the payer to pass on privately.
pub fn print_payment_string(payment: &AnonymousPaymentString) {
    let text = payment.encode();
    println!("The payee needs this anonymous payment string to receive the money; send it to them privately:");
    println!("  {text}");
    println!("They run:");
    println!("  specie wallet --wallet theirs.json receive {text}");
}
