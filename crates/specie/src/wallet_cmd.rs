//! `specie wallet`: the command-line face of `specie-wallet`: arguments, and what each command
//! prints.
//!
//! Every command holds the wallet's lock (`<wallet>.lock`; a second command on the same wallet
//! waits for the first), loads the wallet file, does its work, and saves the file atomically
//! before printing; `specie_wallet::session` keeps the order of saving and sending.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use specie_privacy_wallet::session as privacy_session;
use specie_privacy_wallet::{
    AnonymousPaymentString, AnonymousWallet, ConfidentialPaymentString, ConfidentialWallet, UnlinkableWallet,
    ANONYMOUS_PAYMENT_PREFIX, CONFIDENTIAL_PAYMENT_PREFIX,
};
use specie_transaction::{Address, SpecieTransaction, Txid};
use specie_wallet::session::{self, ImportReport, Submitted};
use specie_wallet::{
    sync, Balance, CoinState, ExternalSigner, NodeAccess, NodeClient, Outcome, Passphrase, PaymentString, PendingKind,
    Wallet, WalletError, WalletFile, WalletLock, PASSPHRASE_ENV, WALLET_LOCK_WAIT_MS,
};

/// How long `send`, `mint` and `redeem` wait for the node by default, in milliseconds.
pub(crate) const SUBMIT_TIMEOUT_MS_DEFAULT: u64 = 30_000;
/// Exit status when a transaction was accepted but is not final yet (0 = done, 1 = failed).
pub(crate) const EXIT_NOT_FINAL: u8 = 2;

/// Hold and move money: keys, addresses, balance, payments, and (issuer) mint and redeem.
///
/// Amounts are whole numbers of the currency's smallest unit (for `usd`, cents: 150 means
/// $1.50). The wallet file holds your secret keys and the only copy of your coins' data (the
/// node stores only hashes): keep it safe and back it up.
#[derive(Args, Debug)]
pub struct WalletArgs {
    /// The wallet file.
    #[arg(long, global = true, value_name = "PATH", default_value = "wallet.json")]
    pub wallet: PathBuf,

    /// The node's HTTP address, for this command only (`create` saves it in the wallet):
    /// http://, or https:// for a node behind a TLS proxy.
    /// [default: the wallet's saved address, normally http://127.0.0.1:8470]
    #[arg(long, global = true, value_name = "URL")]
    pub node: Option<String>,

    /// For an https:// node: trust the CA certificates in this PEM file (the TLS proxy's private
    /// CA) instead of the public roots. For this command only; `create` saves it in the wallet.
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,

    /// Send this file's contents (trimmed, one line, e.g. `Bearer …`) as the Authorization header
    /// of every request to the node. For this command only; `create` saves the path (never the
    /// contents) in the wallet, and later commands read the file each time.
    #[arg(long, global = true, value_name = "FILE")]
    pub node_auth_file: Option<PathBuf>,

    /// A file holding the passphrase of an encrypted wallet (its one line; `create --encrypt`,
    /// `encrypt`, and every command on an encrypted wallet).
    /// [default: the environment variable SPECIE_WALLET_PASSPHRASE]
    #[arg(long, global = true, value_name = "FILE")]
    pub passphrase_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: WalletCommand,
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// Make an issuer wallet (holds the key that may mint and redeem).
    #[arg(long)]
    issuer: bool,
    /// Make an issuer wallet whose issuer key is not in the file: this command (a program and
    /// its arguments, split on spaces, no shell) signs each mint and redeem. It is given the
    /// transaction id (64 hex digits and a newline) on standard input and answers the BIP-340
    /// signature (128 hex digits); a signature that does not verify under --issuer-key is
    /// refused. Example: --issuer-signer "ssh vault specie issuer sign --key-file /keys/issuer.key"
    #[arg(long, value_name = "COMMAND", requires = "issuer_key", conflicts_with = "issuer")]
    issuer_signer: Option<String>,
    /// (--issuer-signer) The issuer's public key (hex, x-only), as `specie issuer key` prints it.
    #[arg(long, value_name = "HEX", requires = "issuer_signer")]
    issuer_key: Option<String>,
    /// The currency's address prefix (bech32 human-readable part); the node's must match.
    /// [default: the currency of the node at --node, if it answers; else usd]
    #[arg(long)]
    hrp: Option<String>,
    /// Encrypt the wallet file under the passphrase (--passphrase-file or
    /// SPECIE_WALLET_PASSPHRASE); every command on it then needs the passphrase.
    #[arg(long)]
    encrypt: bool,
}

#[derive(Subcommand, Debug)]
pub enum WalletCommand {
    /// Create a new wallet file and print its first receiving address.
    ///
    /// Refuses to overwrite an existing file. With --issuer the wallet also holds the central
    /// bank's issuer key, which signs mints and redeems; start the node with that key
    /// (`specie node --issuer <KEY>`, printed here) so that it accepts them. With
    /// --issuer-signer the issuer key stays outside the wallet: an external command signs each
    /// mint and redeem (e.g. `specie issuer sign --key-file FILE`, over ssh on another machine).
    Create(CreateArgs),

    /// Encrypt this wallet file (in clear now) under the passphrase (--passphrase-file or
    /// SPECIE_WALLET_PASSPHRASE), in place and atomically. Offline.
    ///
    /// Argon2id stretches the passphrase; XChaCha20-Poly1305 seals the file. Every later command
    /// on the wallet needs the passphrase, and keeps the file encrypted. Copies of the file in
    /// clear (backups) are not touched: replace them too.
    Encrypt,

    /// Make a new receiving address (one per payment keeps payments unlinkable).
    Address {
        /// List every address of this wallet instead of making a new one.
        #[arg(long)]
        list: bool,
    },

    /// Show spendable money and money waiting for the node, in the smallest unit. Offline:
    /// run `sync` first to bring it up to date.
    Balance,

    /// Pay AMOUNT to ADDRESS, wait for the node's answer, and print the payment string the
    /// recipient needs.
    ///
    /// The recipient cannot see the payment on the ledger (it stores only hashes): give them
    /// the printed `specie-pay1…` string; they run `specie wallet import <STRING>`. If the node
    /// refuses the payment, it is rolled back and your coins are spendable again.
    ///
    /// With --confidential the payment is made from this wallet's confidential notes (see
    /// `shield`): its value is hidden from everyone but the payee and the auditors, and the
    /// payee needs the printed `specie-cpay1…` string (`specie wallet receive <STRING>`).
    /// Exit status: 0 confirmed, 1 refused or failed, 2 not final yet (run `sync` later).
    Send {
        /// The recipient's address (e.g. usd1q…), or --to.
        #[arg(required_unless_present = "to", conflicts_with = "to")]
        address: Option<String>,
        /// Amount in the currency's smallest unit (a whole number, at least 1), or --amount.
        #[arg(value_parser = clap::value_parser!(u64).range(1..), required_unless_present = "amount_option", conflicts_with = "amount_option")]
        amount: Option<u64>,
        /// The recipient's address.
        #[arg(long = "to", value_name = "ADDRESS")]
        to: Option<String>,
        /// Amount in the currency's smallest unit.
        #[arg(long = "amount", value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        amount_option: Option<u64>,
        /// Pay from confidential notes, hiding the value.
        #[arg(long)]
        confidential: bool,
        #[command(flatten)]
        auditors: AuditorArgs,
        /// How long to wait for the node to make the payment final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Turn AMOUNT of this wallet's coins into a confidential note of its own (any excess comes
    /// back as a coin). Its value is then hidden in a commitment, readable by the auditors.
    Shield {
        /// Amount in the currency's smallest unit (a whole number, at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        #[command(flatten)]
        auditors: AuditorArgs,
        /// How long to wait for the node to make it final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Turn AMOUNT of this wallet's confidential notes back into a coin (the rest stays a note).
    Unshield {
        /// Amount in the currency's smallest unit (a whole number, at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        #[command(flatten)]
        auditors: AuditorArgs,
        /// How long to wait for the node to make it final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Receive a confidential, anonymous or unlinkable payment: check the payer's
    /// `specie-cpay1…`, `specie-apay1…` or `specie-upay1…` string with the node and keep its note
    /// (or token).
    ///
    /// The note is kept only if it pays this wallet and the node holds it with exactly the
    /// value and blinding the string states; anything else is refused and nothing is added.
    /// Receiving the same string twice adds it once. An unlinkable token can pay once the
    /// certifiers (--certifier) certified it. A `specie-pay1…` string is imported as `import`
    /// does.
    Receive {
        /// The `specie-cpay1…`, `specie-apay1…` or `specie-upay1…` string the payer gave you.
        payment: String,
        #[command(flatten)]
        certifiers: crate::wallet_unlinkable_cmd::CertifierArgs,
    },

    /// Enrol for anonymous payments: answer the registration authority's challenge, then keep
    /// the credential it signs.
    ///
    /// After KYC the registration authority gives you a `specie-enrol-challenge1…` text (from
    /// `specie ra challenge`). `specie wallet enrol <CHALLENGE>` prints a `specie-enrol-request1…`
    /// text for the RA (it proves this wallet holds the secret; the secret stays here); the RA
    /// answers with a `specie-credential1…` text: `specie wallet enrol --credential <CREDENTIAL>`
    /// keeps it. The RA must be the one the node trusts (`/v1/info`).
    Enrol {
        /// The RA's `specie-enrol-challenge1…` text.
        #[arg(required_unless_present = "credential", conflicts_with = "credential")]
        challenge: Option<String>,
        /// The RA's `specie-credential1…` text, to finish the enrolment.
        #[arg(long, value_name = "TEXT")]
        credential: Option<String>,
    },

    /// Turn AMOUNT of this wallet's coins into an anonymous note of its own (enrolled wallets):
    /// its owner is then hidden behind a commitment to your enrolment id, readable by the
    /// owner auditors; with --hide-values its value is hidden too.
    Anonymise(LevelMove),

    /// Turn AMOUNT of this wallet's anonymous notes back into a transparent coin, of its own or,
    /// with --to, of another wallet's address (the rest stays a note): the coin's value and
    /// owner are public from then on, and the owner auditors can tell the notes were yours.
    /// Without --hide-values only notes whose values are in clear are spent; with it, any note
    /// (and the change is hidden). Paying another address prints the `specie-pay1…` string its
    /// owner needs (`specie wallet import <STRING>`), as `send` does.
    LeaveAnonymous {
        #[command(flatten)]
        moved: LevelMove,
        /// Pay the coin to this address (`specie wallet address` of the payee) instead of to a
        /// fresh address of this wallet.
        #[arg(long, value_name = "ADDRESS")]
        to: Option<String>,
    },

    /// Pay AMOUNT anonymously to the enrolled user ID from this wallet's anonymous notes: no
    /// one but the payee and the auditors learns who paid whom. The spend is authorised by a
    /// proof of your credential, not by a key anyone can link. With --hide-values the values
    /// are hidden too (and notes with hidden values can pay). Prints the `specie-apay1…` string
    /// the payee needs (`specie wallet receive <STRING>`).
    SendAnonymous {
        /// The payee's enrolment id.
        #[arg(long = "to-id", value_name = "ID")]
        to_id: u64,
        /// Amount in the currency's smallest unit (a whole number, at least 1).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        /// Hide the values in commitments (anonymous and confidential).
        #[arg(long)]
        hide_values: bool,
        #[command(flatten)]
        cosigners: CosignerArgs,
        /// How long to wait for the node to make the payment final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Move AMOUNT of this wallet's coins into an unlinkable token of its own (enrolled
    /// wallets; the value entering is public). Once certified (--certifier), the token pays
    /// unlinkably: a spend reveals a serial number, never the token, so no one but the owner
    /// auditors can link a payment to the one that created its money.
    EnterUnlinkable(crate::wallet_unlinkable_cmd::UnlinkableMove),

    /// Pay AMOUNT unlinkably to the enrolled user ID from this wallet's certified tokens; the
    /// change comes back as a token (certified through --certifier). Prints the `specie-upay1…`
    /// string the payee needs (`specie wallet receive <STRING> --certifier URL …`).
    SendUnlinkable {
        /// The payee's enrolment id.
        #[arg(long = "to-id", value_name = "ID")]
        to_id: u64,
        #[command(flatten)]
        moved: crate::wallet_unlinkable_cmd::UnlinkableMove,
    },

    /// Turn AMOUNT of this wallet's certified tokens back into a transparent coin, of its own or,
    /// with --to, of another wallet's address (the rest stays a token): the coin's value and
    /// owner are public from then on.
    LeaveUnlinkable {
        #[command(flatten)]
        moved: crate::wallet_unlinkable_cmd::UnlinkableMove,
        /// Pay the coin to this address instead of to a fresh address of this wallet.
        #[arg(long, value_name = "ADDRESS")]
        to: Option<String>,
    },

    /// Ask the certifiers (at least k of the node's k-of-n group) to certify every confirmed
    /// unlinkable token of this wallet that has no certificate yet. Each certifier answers only
    /// for a token the ledger holds. Exit status 2: some token still waits.
    Certify {
        #[command(flatten)]
        certifiers: crate::wallet_unlinkable_cmd::CertifierArgs,
    },

    /// Receive a payment: check a sender's payment string with the node and add its money.
    ///
    /// Outputs the node already holds become spendable at once; others are kept as pending
    /// and become spendable when `sync` sees them. A string for someone else's wallet is
    /// refused. Exit status 2 means the money is not confirmed yet.
    Import {
        /// The `specie-pay1…` string the sender gave you.
        payment: String,
    },

    /// Ask the node about every pending transaction and coin, and resolve what it can.
    ///
    /// Confirms transactions whose outputs exist, rolls back refused ones (resubmitting a
    /// transaction whose fate is unknown is safe: the node never applies one twice), makes
    /// confirmed imports spendable, and marks missing the coins and notes the node no longer
    /// holds (spent from another copy of this wallet?): they stay in the file, not spendable,
    /// until a `sync` finds them at the node again or you run `forget-missing`. The wallet
    /// talks only to nodes of its own currency and network, so a mistyped --node changes nothing.
    Sync {
        /// For a wallet file from before network ids: this node is the wallet's own, even though
        /// it holds none of the wallet's coins (all spent from another copy). Remembers its network.
        #[arg(long)]
        accept_node: bool,
    },

    /// Issuer only: create AMOUNT of new money, to this wallet or to --to ADDRESS.
    ///
    /// Prints a payment string when minting to someone else; they import it.
    Mint {
        /// Amount in the currency's smallest unit (a whole number, at least 1).
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        /// Who receives it [default: a new address of this wallet].
        #[arg(long, value_name = "ADDRESS")]
        to: Option<String>,
        /// How long to wait for the node to make the mint final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Issuer only: take AMOUNT of this wallet's money out of circulation.
    Redeem {
        /// Amount in the currency's smallest unit (a whole number, at least 1).
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        amount: u64,
        /// How long to wait for the node to make the redeem final, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// List every coin (state, value, outpoint) and every pending transaction. Offline.
    ListCoins,

    /// Abandon a payment whose fate is unknown (its answer was lost, the node was unreachable):
    /// its coins are paid back to this wallet instead, so that once the node applies that, the
    /// payment can never be applied. If the node applied the payment already, nothing is sent
    /// and the payment is reported as it is. Only payments. Exit status: 0 abandoned (or
    /// decided already), 1 failed, 2 not final yet (run `sync` later).
    Abandon {
        /// The payment's transaction id (`list-coins` shows pending ones).
        txid: String,
        /// How long to wait for the node, in milliseconds (max 120000).
        #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
        timeout_ms: u64,
    },

    /// Show again the payment strings of confirmed payments, newest last (the last 10 000 are
    /// kept), for a payee who never got theirs: a payee cannot receive without it. Offline.
    Sent {
        /// Only this payment's.
        #[arg(long, value_name = "TXID")]
        txid: Option<String>,
    },

    /// Drop for good the coins and notes marked missing (`list-coins` shows them): do this only
    /// once you know they were spent, for instance from another copy of this wallet. Offline;
    /// without --yes it only says what it would drop.
    ForgetMissing {
        /// Really drop them.
        #[arg(long)]
        yes: bool,
    },

    /// Byzantine-mode accounts (FastPay): money held at a committee of 3f+1 authorities, of which up
    /// to f may lie, paid between accounts without the online core.
    ///
    /// The committee and its authorities' addresses come from the cluster file (`[fastpay_committee]`,
    /// written by `specie cluster up --authorities`): give it once with --cluster-file, the wallet
    /// remembers it. Typical use:
    ///
    ///   specie wallet fastpay --cluster-file DIR/cluster.toml fund 500    # core coins → a new account
    ///   specie wallet fastpay pay <payee account hex> 120                # prints the certificate
    ///   specie wallet fastpay verify <certificate hex or file>           # the payee, offline
    ///   specie wallet fastpay redeem 100                                 # back to a core address
    ///   specie wallet fastpay balance ; specie wallet fastpay history
    ///
    /// An order is saved in the wallet before it is sent and, until it is certified, only that same
    /// order is ever sent again (`sync`): a second order for the same sequence number would make the
    /// account equivocate. A wallet restored from a backup asks the authorities for the orders and
    /// certificates it missed before it signs anything.
    #[command(verbatim_doc_comment)]
    Fastpay(crate::wallet_fastpay_cmd::FastpayArgs),
    /// Offline cash: a device kept in this wallet file, with the commands of `specie offline
    /// device` (create, enrol, fund-from-core, request, pay, receive, receive-direct, pay-direct,
    /// deposit --to-core, sync, balance). Funding and deposits back to the core use this
    /// wallet's coins, so one file holds the owner's money in every mode.
    ///
    ///   specie wallet --wallet me.json offline create
    ///   specie wallet --wallet me.json offline enrol --operator-token-file ./offline/operator.token
    ///   specie wallet --wallet me.json offline fund-from-core 500
    ///   specie wallet --wallet me.json offline deposit --to-core
    Offline(crate::offline_device_cmd::WalletDeviceArgs),
}

/// Who can read a confidential transaction's values, and who co-signs it.
#[derive(Args, Debug)]
pub struct AuditorArgs {
    /// An auditor's key (hex), repeatable [default: the auditors the node lists in /v1/info].
    /// The node refuses a confidential transaction that leaves one of its auditors out.
    #[arg(long = "auditor", value_name = "HEX")]
    pub auditors: Vec<String>,
    #[command(flatten)]
    pub cosigners: CosignerArgs,
}

/// Value moved into or out of the anonymous level, within one wallet.
#[derive(Args, Debug)]
pub struct LevelMove {
    /// Amount in the currency's smallest unit (a whole number, at least 1).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub amount: u64,
    /// Hide the values in commitments (anonymous and confidential).
    #[arg(long)]
    pub hide_values: bool,
    #[command(flatten)]
    pub cosigners: CosignerArgs,
    /// How long to wait for the node to make it final, in milliseconds (max 120000).
    #[arg(long, default_value_t = SUBMIT_TIMEOUT_MS_DEFAULT)]
    pub timeout_ms: u64,
}

/// The active auditors a private transaction is sent to for co-signing before submission.
#[derive(Args, Debug, Clone)]
pub struct CosignerArgs {
    /// The URL of an active auditor's co-signing service (`specie audit serve`), repeatable:
    /// one for each active auditor the node requires (`/v1/info`, `active_auditors`).
    #[arg(long = "cosigner", value_name = "URL")]
    pub cosigners: Vec<String>,
}

/// Runs one `specie wallet` command.
pub fn run(args: WalletArgs) -> Result<ExitCode> {
    let path = args.wallet.as_path();
    let node = args.node.as_deref();
    let access = install_secrets(&args)?;
    let _lock = WalletLock::acquire(path, WALLET_LOCK_WAIT_MS, || {
        eprintln!("waiting for another command using {} to finish…", path.display())
    })?;
    match args.command {
        WalletCommand::Create(args) => create(path, node, &access, &args),
        WalletCommand::Encrypt => encrypt(path),
        WalletCommand::Address { list } => address(path, list),
        WalletCommand::Balance => balance(path),
        WalletCommand::Send {
            address,
            amount,
            to,
            amount_option,
            confidential,
            auditors,
            timeout_ms,
        } => {
            // Clap requires one of each pair.
            let address = address.or(to).unwrap_or_default();
            let amount = amount.or(amount_option).unwrap_or_default();
            if confidential {
                send_confidential(path, node, &address, amount, &auditors, timeout_ms)
            } else {
                send(path, node, &address, amount, timeout_ms)
            }
        }
        WalletCommand::Shield {
            amount,
            auditors,
            timeout_ms,
        } => shield(path, node, amount, &auditors, timeout_ms),
        WalletCommand::Unshield {
            amount,
            auditors,
            timeout_ms,
        } => unshield(path, node, amount, &auditors, timeout_ms),
        WalletCommand::Receive { payment, certifiers } => receive(path, node, &payment, &certifiers.certifiers),
        WalletCommand::EnterUnlinkable(moved) => crate::wallet_unlinkable_cmd::enter(path, node, &moved),
        WalletCommand::SendUnlinkable { to_id, moved } => crate::wallet_unlinkable_cmd::send(path, node, to_id, &moved),
        WalletCommand::LeaveUnlinkable { moved, to } => {
            crate::wallet_unlinkable_cmd::leave(path, node, &moved, to.as_deref())
        }
        WalletCommand::Certify { certifiers } => crate::wallet_unlinkable_cmd::certify(path, node, &certifiers),
        WalletCommand::Enrol { challenge, credential } => {
            crate::wallet_anonymous_cmd::enrol(path, node, challenge.as_deref(), credential.as_deref())
        }
        WalletCommand::Anonymise(moved) => crate::wallet_anonymous_cmd::anonymise(path, node, &moved),
        WalletCommand::LeaveAnonymous { moved, to } => {
            crate::wallet_anonymous_cmd::leave_anonymous(path, node, &moved, to.as_deref())
        }
        WalletCommand::SendAnonymous {
            to_id,
            amount,
            hide_values,
            cosigners,
            timeout_ms,
        } => {
            let payment = crate::wallet_anonymous_cmd::Payment {
                to_id,
                amount,
                hide_values,
            };
            crate::wallet_anonymous_cmd::send(path, node, &payment, &cosigners.cosigners, timeout_ms)
        }
        WalletCommand::Import { payment } => import(path, node, &payment),
        WalletCommand::Sync { accept_node } => sync_command(path, node, accept_node),
        WalletCommand::Mint { amount, to, timeout_ms } => mint(path, node, amount, to.as_deref(), timeout_ms),
        WalletCommand::Redeem { amount, timeout_ms } => redeem(path, node, amount, timeout_ms),
        WalletCommand::ListCoins => list_coins(path),
        WalletCommand::ForgetMissing { yes } => forget_missing(path, yes),
        WalletCommand::Sent { txid } => sent(path, txid.as_deref()),
        WalletCommand::Abandon { txid, timeout_ms } => abandon(path, node, &txid, timeout_ms),
        WalletCommand::Fastpay(fastpay) => crate::wallet_fastpay_cmd::run(path, node, fastpay),
        WalletCommand::Offline(offline) => {
            // The device's commands take the wallet's lock themselves.
            drop(_lock);
            crate::offline_device_cmd::run_in_wallet(path, offline)
        }
    }
}

pub(crate) fn load(path: &Path) -> Result<Wallet> {
    Ok(WalletFile::load(path)?)
}

fn save(path: &Path, wallet: &Wallet) -> Result<()> {
    Ok(WalletFile::save(path, wallet)?)
}

pub(crate) fn client_for(wallet: &mut Wallet, node: Option<&str>) -> Result<NodeClient> {
    Ok(session::client_for(wallet, node)?)
}

pub(crate) fn print_balance(wallet: &Wallet) {
    let unit = wallet.hrp();
    let Balance {
        spendable,
        pending_in,
        pending_out,
        missing,
    } = wallet.balance();
    println!("spendable:   {spendable} {unit}");
    if missing > 0 {
        println!(
            "missing:     {missing} {unit} (not at the node at the last sync; `specie wallet sync` with the \
             right node restores it, `specie wallet forget-missing` drops it)"
        );
    }
    if pending_in > 0 {
        println!("pending in:  {pending_in} {unit} (waiting for the node to confirm; run `specie wallet sync`)");
    }
    if pending_out > 0 {
        println!("pending out: {pending_out} {unit} (locked in transactions waiting for the node)");
    }
    let confidential = wallet.confidential_balance();
    println!("confidential spendable:   {} {unit} (in notes)", confidential.spendable);
    if confidential.pending_in > 0 {
        println!("confidential pending in:  {} {unit}", confidential.pending_in);
    }
    if confidential.pending_out > 0 {
        println!("confidential pending out: {} {unit}", confidential.pending_out);
    }
    if let Some(id) = wallet.enrolment_id() {
        let anonymous = wallet.anonymous_balance();
        println!(
            "anonymous spendable:      {} {unit} (enrolled as id {})",
            anonymous.spendable, id.0
        );
        if anonymous.pending_in > 0 {
            println!("anonymous pending in:     {} {unit}", anonymous.pending_in);
        }
        if anonymous.pending_out > 0 {
            println!("anonymous pending out:    {} {unit}", anonymous.pending_out);
        }
        print_unlinkable_balance(wallet, unit);
    }
}

fn print_unlinkable_balance(wallet: &Wallet, unit: &str) {
    let unlinkable = wallet.unlinkable_balance();
    if unlinkable == Balance::default() {
        return;
    }
    let uncertified: u64 = (wallet.uncertified_tokens().iter()).fold(0, |sum, t| sum.saturating_add(t.value()));
    println!(
        "unlinkable spendable:     {} {unit} (in tokens)",
        unlinkable.spendable - uncertified
    );
    if uncertified > 0 {
        println!("unlinkable uncertified:   {uncertified} {unit} (`specie wallet certify` makes it spendable)");
    }
    if unlinkable.pending_in > 0 {
        println!("unlinkable pending in:    {} {unit}", unlinkable.pending_in);
    }
    if unlinkable.pending_out > 0 {
        println!("unlinkable pending out:   {} {unit}", unlinkable.pending_out);
    }
    if unlinkable.missing > 0 {
        println!(
            "unlinkable missing:       {} {unit} (spent from another copy of this wallet; `specie wallet \
             forget-missing` drops it)",
            unlinkable.missing
        );
    }
}

/// Tells the payer how to hand over a confidential payment. The string reveals the value to
/// whoever reads it, so it is printed for the payer to pass on, and nowhere else.
fn print_confidential_payment_string(payment: &ConfidentialPaymentString) {
    let text = payment.encode();
    println!("The payee needs this confidential payment string to receive the money; send it to them privately:");
    println!("  {text}");
    println!("They run:");
    println!("  specie wallet --wallet theirs.json receive {text}");
    println!("(`specie wallet sent` shows it again once the payment is confirmed)");
}

/// Tells the sender how to hand over a payment, with the exact command the recipient runs.
pub(crate) fn print_payment_string(payment: &PaymentString) {
    let text = payment.encode();
    println!("The recipient needs this payment string to receive the money; send it to them:");
    println!("  {text}");
    println!("They run:");
    println!("  specie wallet --wallet theirs.json import {text}");
    println!("(`specie wallet sent` shows it again once the payment is confirmed)");
}

/// Installs the passphrase (`--passphrase-file`) for every wallet file this command opens, and
/// the node settings (`--ca-cert`, `--node-auth-file`) for every node it reaches; returns the
/// latter, with absolute paths (what `create` saves).
fn install_secrets(args: &WalletArgs) -> Result<NodeAccess> {
    if let Some(file) = &args.passphrase_file {
        anyhow::ensure!(Passphrase::from_file(file)?.install(), "a passphrase was given twice");
    }
    let absolute = |path: &Option<PathBuf>| path.as_deref().map(std::path::absolute).transpose();
    let access = NodeAccess {
        ca_cert: absolute(&args.ca_cert)?,
        auth_file: absolute(&args.node_auth_file)?,
    };
    if !access.is_empty() {
        session::set_node_access(access.clone());
    }
    Ok(access)
}

/// Why a command that encrypts cannot: it was given no passphrase.
fn no_passphrase(command: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "`{command}` needs the passphrase to encrypt with: pass --passphrase-file FILE (a file holding it) \
         or set the environment variable {PASSPHRASE_ENV}"
    )
}

/// The external issuer signer `--issuer-signer` and `--issuer-key` name, checked by signing a
/// random message with it now rather than at the first mint.
fn issuer_signer(command: &str, key: Option<&str>) -> Result<ExternalSigner> {
    let key = key.unwrap_or_default();
    let bytes = hex::decode(key.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
    let pubkey = bytes
        .as_ref()
        .and_then(specie_transaction::signing::parse_xonly)
        .ok_or_else(|| anyhow::anyhow!("--issuer-key {key}: not an x-only public key (64 hex digits)"))?;
    let signer = ExternalSigner::new(pubkey, command.split_whitespace().map(str::to_owned).collect())?;
    signer.sign(&rand::random())?;
    Ok(signer)
}

fn create(path: &Path, node: Option<&str>, access: &NodeAccess, args: &CreateArgs) -> Result<ExitCode> {
    let CreateArgs {
        issuer, hrp, encrypt, ..
    } = args;
    let (issuer, encrypt) = (*issuer || args.issuer_signer.is_some(), *encrypt);
    let passphrase = if encrypt {
        Some(Passphrase::process().ok_or_else(|| no_passphrase("wallet create --encrypt"))?)
    } else {
        None
    };
    let hrp = &currency(hrp.as_deref(), node, access);
    let mut wallet = match &args.issuer_signer {
        Some(command) => {
            let signer = issuer_signer(command, args.issuer_key.as_deref())?;
            Wallet::with_issuer_signer(hrp, signer, &mut rand::thread_rng())?
        }
        None => Wallet::new(hrp, issuer, &mut rand::thread_rng())?,
    };
    if let Some(url) = node {
        wallet.set_node_url(url);
    }
    if node.is_some() || !access.is_empty() {
        // Check the URL and the files now rather than on the first payment.
        session::warn_if_unencrypted(&NodeClient::with_access(wallet.node_url(), access)?);
    }
    wallet.set_node_access(access.clone());
    WalletFile::create_with(path, &wallet, passphrase)?;
    if encrypt {
        println!("encrypted under the passphrase: every command on this wallet needs it");
    }
    let kind = if issuer { "issuer wallet" } else { "wallet" };
    println!("created {kind} {} for currency {:?}", path.display(), wallet.hrp());
    if let Some(address) = wallet.latest_address() {
        println!("address: {}", wallet.format_address(&address));
    }
    if let Some(key) = wallet.issuer_pubkey_hex() {
        println!("issuer public key: {key}");
        println!("start the node with this issuer so that it accepts your mints and redeems:");
        println!("  specie node --issuer {key}");
    }
    println!(
        "keep {} safe and backed up: it holds your secret keys and the only copy of your coins' data",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The currency a new wallet is for: `--hrp`, else the node's (a wallet of another currency than
/// its node's could pay nothing), else `usd` when no node answers (an issuer's wallet is made
/// before its node), said on stderr.
fn currency(given: Option<&str>, node: Option<&str>, access: &NodeAccess) -> String {
    if let Some(hrp) = given {
        return hrp.to_string();
    }
    const DEFAULT: &str = "usd";
    let Some(url) = node else {
        return DEFAULT.to_string();
    };
    match NodeClient::with_access(url, access).and_then(|client| client.info()) {
        Ok(info) => info.hrp,
        Err(_) => {
            eprintln!(
                "the node at {url} did not answer: the wallet is for {DEFAULT} (give --hrp for another currency)"
            );
            DEFAULT.to_string()
        }
    }
}

fn encrypt(path: &Path) -> Result<ExitCode> {
    let passphrase = Passphrase::process().ok_or_else(|| no_passphrase("wallet encrypt"))?;
    WalletFile::encrypt(path, passphrase)?;
    println!(
        "encrypted {}: every command on it now needs the passphrase (--passphrase-file FILE or {PASSPHRASE_ENV})",
        path.display()
    );
    println!("copies of the file in clear (backups) still hold its keys: replace them with this one");
    Ok(ExitCode::SUCCESS)
}

fn address(path: &Path, list: bool) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    if list {
        for address in wallet.addresses() {
            println!("{}", wallet.format_address(&address));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let address = wallet.new_address(&mut rand::thread_rng())?;
    save(path, &wallet)?;
    println!("{}", wallet.format_address(&address));
    Ok(ExitCode::SUCCESS)
}

fn balance(path: &Path) -> Result<ExitCode> {
    let wallet = load(path)?;
    print_balance(&wallet);
    Ok(ExitCode::SUCCESS)
}

/// What a built transaction was, for the messages after submission.
pub(crate) enum Built {
    Payment {
        to: Address,
        amount: u64,
        change: u64,
        payment_string: PaymentString,
    },
    Mint {
        to: Address,
        amount: u64,
        payment_string: Option<PaymentString>,
    },
    Redeem {
        amount: u64,
        change: u64,
    },
    Shield {
        amount: u64,
        change: u64,
    },
    ConfidentialPayment {
        to: Address,
        amount: u64,
        change: u64,
        payment_string: ConfidentialPaymentString,
    },
    Unshield {
        amount: u64,
        change: u64,
    },
    Anonymise {
        amount: u64,
    },
    LeaveAnonymous {
        amount: u64,
        change: u64,
        /// Another wallet's address and the string its owner needs; `None`: this wallet's coin.
        paid: Option<(Address, PaymentString)>,
    },
    AnonymousPayment {
        to: u64,
        amount: u64,
        change: u64,
        payment_string: AnonymousPaymentString,
    },
    Unlinkable(crate::wallet_unlinkable_cmd::Moved),
}

fn send(path: &Path, node: Option<&str>, address: &str, amount: u64, timeout_ms: u64) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let to = wallet.parse_address(address)?;
    let (tx, payment) = wallet.build_payment(&to, amount, &mut rand::thread_rng())?;
    let built = Built::Payment {
        to,
        amount,
        change: payment.change,
        payment_string: payment.payment_string,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn mint(path: &Path, node: Option<&str>, amount: u64, to: Option<&str>, timeout_ms: u64) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    if !wallet.is_issuer() {
        return Err(WalletError::NotIssuer.into());
    }
    let client = client_for(&mut wallet, node)?;
    session::check_issuer_accepted(&wallet, &client)?;
    let mut rng = rand::thread_rng();
    let to = match to {
        Some(text) => wallet.parse_address(text)?,
        None => wallet.new_address(&mut rng)?,
    };
    let (tx, minted) = wallet.build_mint(&[(to, amount)], &mut rng)?;
    let built = Built::Mint {
        to,
        amount,
        payment_string: minted.payment_string,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn redeem(path: &Path, node: Option<&str>, amount: u64, timeout_ms: u64) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    if !wallet.is_issuer() {
        return Err(WalletError::NotIssuer.into());
    }
    let client = client_for(&mut wallet, node)?;
    session::check_issuer_accepted(&wallet, &client)?;
    let (tx, redeemed) = wallet.build_redeem(amount, &mut rand::thread_rng())?;
    let built = Built::Redeem {
        amount,
        change: redeemed.change,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn send_confidential(
    path: &Path,
    node: Option<&str>,
    address: &str,
    amount: u64,
    args: &AuditorArgs,
    timeout_ms: u64,
) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let to = wallet.parse_address(address)?;
    let auditors = privacy_session::auditors_for(&client, &args.auditors)?;
    let (tx, payment) = wallet.build_confidential_payment(&to, amount, &auditors, &mut rand::thread_rng())?;
    let tx = privacy_session::cosign(&mut wallet, &client, tx, &args.cosigners.cosigners)?;
    let built = Built::ConfidentialPayment {
        to,
        amount,
        change: payment.change,
        payment_string: payment.payment_string,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn shield(path: &Path, node: Option<&str>, amount: u64, args: &AuditorArgs, timeout_ms: u64) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let auditors = privacy_session::auditors_for(&client, &args.auditors)?;
    let (tx, shielded) = wallet.build_shield(amount, &auditors, &mut rand::thread_rng())?;
    let tx = privacy_session::cosign(&mut wallet, &client, tx, &args.cosigners.cosigners)?;
    let built = Built::Shield {
        amount,
        change: shielded.change,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn unshield(path: &Path, node: Option<&str>, amount: u64, args: &AuditorArgs, timeout_ms: u64) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let auditors = privacy_session::auditors_for(&client, &args.auditors)?;
    let (tx, unshielded) = wallet.build_unshield(amount, &auditors, &mut rand::thread_rng())?;
    let tx = privacy_session::cosign(&mut wallet, &client, tx, &args.cosigners.cosigners)?;
    let built = Built::Unshield {
        amount,
        change: unshielded.change,
    };
    submit_and_report(path, &mut wallet, &client, tx, built, timeout_ms)
}

fn receive(path: &Path, node: Option<&str>, text: &str, certifiers: &[String]) -> Result<ExitCode> {
    let lowercase = text.trim().to_ascii_lowercase();
    let anonymous = lowercase.starts_with(ANONYMOUS_PAYMENT_PREFIX);
    let unlinkable = lowercase.starts_with(specie_privacy_wallet::UNLINKABLE_PAYMENT_PREFIX);
    if !anonymous && !unlinkable && !lowercase.starts_with(CONFIDENTIAL_PAYMENT_PREFIX) {
        return import(path, node, text);
    }
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    if unlinkable {
        return crate::wallet_unlinkable_cmd::receive(path, &mut wallet, &client, text, certifiers);
    }
    let unit = wallet.hrp().to_owned();
    let received = if anonymous {
        privacy_session::receive_anonymous(path, &mut wallet, &client, text)?
    } else {
        privacy_session::receive_confidential(path, &mut wallet, &client, text)?
    };
    if received.already_known {
        println!("this note is already in this wallet: nothing added");
    } else {
        let how = if anonymous { "anonymously" } else { "confidentially" };
        println!(
            "received {} {unit} {how}: the node holds the note, spendable now",
            received.value
        );
    }
    print_balance(&wallet);
    Ok(ExitCode::SUCCESS)
}

/// Submits through [`session::submit`] (saved as pending first), then reports.
pub(crate) fn submit_and_report(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    tx: SpecieTransaction,
    built: Built,
    timeout_ms: u64,
) -> Result<ExitCode> {
    let txid = tx.txid();
    let outcome = match session::submit(path, wallet, client, &tx, timeout_ms)? {
        Submitted::Settled(outcome) => outcome,
        Submitted::Unknown(error) => {
            eprintln!("error: {error}");
            eprintln!(
                "transaction {txid} is saved as pending, but whether the node received it is unknown; \
                 run `specie wallet sync` once the node is reachable: it resubmits or resolves it"
            );
            return Ok(ExitCode::from(EXIT_NOT_FINAL));
        }
    };
    let unit = wallet.hrp().to_owned();
    match outcome {
        Outcome::Confirmed(_) => {
            println!("confirmed: txid {txid}");
            report_built(wallet, &built, &unit);
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Rejected { reason, .. } => {
            eprintln!("refused: txid {txid}: {reason}");
            eprintln!("rolled back: the coins it would have spent are spendable again");
            Ok(ExitCode::FAILURE)
        }
        Outcome::Conflicted { settled } => {
            eprintln!(
                "refused: txid {txid}: {} {unit} of its coins were already spent by another transaction \
                 (from another copy of this wallet?); they are marked missing (`sync` restores them if the node \
                 holds them), the rest are spendable again",
                settled.spent
            );
            Ok(ExitCode::FAILURE)
        }
        Outcome::StillPending { reason } => {
            println!("not final yet: txid {txid} ({reason})");
            println!("run `specie wallet sync` later; it reports the outcome and prints any payment string then");
            Ok(ExitCode::from(EXIT_NOT_FINAL))
        }
    }
}

fn report_built(wallet: &Wallet, built: &Built, unit: &str) {
    match built {
        Built::Payment {
            to,
            amount,
            change,
            payment_string,
        } => {
            print!("sent {amount} {unit} to {}", wallet.format_address(to));
            if *change > 0 {
                print!("; {change} {unit} change came back to this wallet");
            }
            println!();
            if wallet.owns(&to.witness_program_commitment()) {
                println!("(that address is this wallet's own: the money is already here)");
            } else {
                print_payment_string(payment_string);
            }
        }
        Built::Mint {
            to,
            amount,
            payment_string,
        } => {
            println!("minted {amount} {unit} to {}", wallet.format_address(to));
            if let Some(payment_string) = payment_string {
                print_payment_string(payment_string);
            }
        }
        Built::Redeem { amount, change } => {
            print!("redeemed {amount} {unit}: it has left circulation");
            if *change > 0 {
                print!("; {change} {unit} change came back to this wallet");
            }
            println!();
        }
        Built::Shield { amount, change } => {
            print!("shielded {amount} {unit} into a confidential note of this wallet");
            if *change > 0 {
                print!("; {change} {unit} change came back as a coin");
            }
            println!();
        }
        Built::ConfidentialPayment {
            to,
            amount,
            change,
            payment_string,
        } => {
            println!(
                "sent {amount} {unit} confidentially to {}; {change} {unit} came back as a note",
                wallet.format_address(to)
            );
            if wallet.owns(&to.witness_program_commitment()) {
                println!("(that address is this wallet's own: the note is already here)");
            } else {
                print_confidential_payment_string(payment_string);
            }
        }
        Built::Unshield { amount, change } => {
            println!("unshielded {amount} {unit} into a coin; {change} {unit} stays in notes");
        }
        Built::Anonymise { amount } => {
            println!("{amount} {unit} entered the anonymous level as a note of this wallet");
        }
        Built::LeaveAnonymous { amount, change, paid } => match paid {
            None => println!(
                "{amount} {unit} left the anonymous level as a coin of this wallet; {change} {unit} stays in notes"
            ),
            Some((to, payment_string)) => {
                println!(
                    "paid {amount} {unit} from the anonymous level to {}; {change} {unit} stays in notes",
                    wallet.format_address(to)
                );
                print_payment_string(payment_string);
            }
        },
        Built::AnonymousPayment {
            to,
            amount,
            change,
            payment_string,
        } => {
            println!("sent {amount} {unit} anonymously to enrolment id {to}; {change} {unit} came back as a note");
            if wallet.enrolment_id().map(|id| id.0) == Some(*to) {
                println!("(that id is this wallet's own: the note is already here)");
            } else {
                crate::wallet_anonymous_cmd::print_payment_string(payment_string);
            }
        }
        Built::Unlinkable(moved) => crate::wallet_unlinkable_cmd::report(wallet, moved, unit),
    }
    print_balance(wallet);
}

fn import(path: &Path, node: Option<&str>, text: &str) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    let unit = wallet.hrp().to_owned();
    let ImportReport { imported, node_error } = session::import(path, &mut wallet, &client, text)?;
    if imported.already_known > 0 {
        println!("{} of its outputs were already in this wallet", imported.already_known);
    }
    if imported.spendable > 0 {
        println!("received {} {unit}: spendable now", imported.spendable);
    }
    if let Some(error) = &node_error {
        eprintln!("error: {error}");
    }
    let mut code = ExitCode::SUCCESS;
    if imported.pending > 0 {
        let why = if node_error.is_some() {
            "could not be checked with the node"
        } else {
            "is not at the node (yet): the sender's transaction is not confirmed, or was refused"
        };
        println!(
            "{} {unit} {why}; it is saved as pending, and `specie wallet sync` makes it spendable once the node has it",
            imported.pending
        );
        code = ExitCode::from(EXIT_NOT_FINAL);
    }
    print_balance(&wallet);
    Ok(code)
}

fn describe(wallet: &Wallet, kind: &PendingKind, unit: &str) -> String {
    match kind {
        PendingKind::Payment { to, amount } => format!("payment of {amount} {unit} to {}", wallet.format_address(to)),
        PendingKind::Mint { total } => format!("mint of {total} {unit}"),
        PendingKind::Redeem { amount } => format!("redeem of {amount} {unit}"),
        PendingKind::FastpayFunding { amount } => format!("funding of {amount} {unit} into a Byzantine-mode account"),
        PendingKind::FastpayRedeem { amount } => format!("{amount} {unit} back from a Byzantine-mode account"),
        PendingKind::BridgeFunding { amount } => format!("funding of {amount} {unit} into offline cash"),
        PendingKind::Shield { amount } => format!("shielding of {amount} {unit}"),
        PendingKind::ConfidentialPayment { to, amount } => format!(
            "confidential payment of {amount} {unit} to {}",
            wallet.format_address(to)
        ),
        PendingKind::Unshield { amount } => format!("unshielding of {amount} {unit}"),
        PendingKind::Anonymise { amount } => format!("entry of {amount} {unit} into the anonymous level"),
        PendingKind::LeaveAnonymous { amount } => format!("exit of {amount} {unit} from the anonymous level"),
        PendingKind::AnonymousPayment { to, amount } => {
            format!("anonymous payment of {amount} {unit} to enrolment id {to}")
        }
        PendingKind::EnterUnlinkable { amount } => format!("entry of {amount} {unit} into the unlinkable level"),
        PendingKind::LeaveUnlinkable { amount } => format!("exit of {amount} {unit} from the unlinkable level"),
        PendingKind::UnlinkablePayment { to, amount } => {
            format!("unlinkable payment of {amount} {unit} to enrolment id {to}")
        }
    }
}

fn sync_command(path: &Path, node: Option<&str>, accept_node: bool) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    if accept_node {
        wallet.accept_node();
    }
    let unit = wallet.hrp().to_owned();
    // Descriptions and payment strings must be taken before sync resolves (and forgets) them.
    let before: Vec<(Txid, String, Option<PaymentString>)> = wallet
        .pending()
        .map(|pending| {
            (
                pending.txid,
                describe(&wallet, &pending.kind, &unit),
                wallet.payment_string_for(&pending.txid),
            )
        })
        .collect();
    let confidential_strings: Vec<(Txid, ConfidentialPaymentString)> = wallet
        .pending()
        .filter_map(|pending| Some((pending.txid, wallet.confidential_payment_string_for(&pending.txid)?)))
        .collect();
    let anonymous_strings: Vec<(Txid, AnonymousPaymentString)> = wallet
        .pending()
        .filter_map(|pending| Some((pending.txid, wallet.anonymous_payment_string_for(&pending.txid)?)))
        .collect();
    let unlinkable_strings: Vec<(Txid, specie_privacy_wallet::UnlinkablePaymentString)> = wallet
        .pending()
        .filter_map(|pending| Some((pending.txid, wallet.unlinkable_payment_string_for(&pending.txid)?)))
        .collect();
    let abandoned: Vec<Txid> = (wallet.pending())
        .filter(|pending| pending.abandoned)
        .map(|pending| pending.txid)
        .collect();
    let result = sync(&mut wallet, &client);
    save(path, &wallet)?;
    let report = result?;
    if report.is_empty() {
        println!("nothing changed: no pending transactions, and the node holds every coin");
    }
    let mut code = ExitCode::SUCCESS;
    for (txid, outcome) in &report.outcomes {
        let (description, payment_string) = before
            .iter()
            .find(|(pending, _, _)| pending == txid)
            .map(|(_, description, payment_string)| (description.as_str(), payment_string.as_ref()))
            .unwrap_or(("transaction", None));
        match outcome {
            Outcome::Confirmed(_) => {
                println!("confirmed: txid {txid} ({description})");
                if let Some(payment_string) = payment_string {
                    print_payment_string(payment_string);
                }
                if let Some((_, payment)) = confidential_strings.iter().find(|(pending, _)| pending == txid) {
                    print_confidential_payment_string(payment);
                }
                if let Some((_, payment)) = anonymous_strings.iter().find(|(pending, _)| pending == txid) {
                    crate::wallet_anonymous_cmd::print_payment_string(payment);
                }
                if let Some((_, payment)) = unlinkable_strings.iter().find(|(pending, _)| pending == txid) {
                    crate::wallet_unlinkable_cmd::print_payment_string(payment);
                }
            }
            Outcome::Rejected { reason, .. } => {
                println!("refused: txid {txid} ({description}): {reason}; its coins are spendable again");
            }
            Outcome::Conflicted { .. } if abandoned.contains(txid) => println!(
                "abandoned: txid {txid} ({description}) can never be applied: the payment of its coins back to this \
                 wallet took them"
            ),
            Outcome::Conflicted { settled } => println!(
                "cannot happen: txid {txid} ({description}): its coins were spent elsewhere, or it was \
                 confirmed and the recipient has already spent every output; {} {unit} of coins are gone",
                settled.spent
            ),
            Outcome::StillPending { reason } => {
                println!("still pending: txid {txid} ({description}): {reason}");
                code = ExitCode::from(EXIT_NOT_FINAL);
            }
        }
    }
    if report.imports_confirmed > 0 {
        println!(
            "received: {} {unit} from imported payments is now spendable",
            report.imports_confirmed
        );
    }
    print_missing_and_restored(&report, &unit, client.url());
    print_balance(&wallet);
    Ok(code)
}

/// What `sync` marked missing and restored, with what the user can do about it.
fn print_missing_and_restored(report: &specie_wallet::SyncReport, unit: &str, url: &str) {
    let missing = (report.notes_missing.iter().map(|found| ("note", found)))
        .chain(report.coins_missing.iter().map(|found| ("coin", found)));
    for (what, (outpoint, value)) in missing {
        println!(
            "missing: {what} {}:{} ({value} {unit}) is not at the node {}: kept in the wallet but not \
             spendable (spent from another copy of this wallet?). A later `sync` with a node that holds it \
             makes it spendable again; `specie wallet forget-missing` drops it",
            outpoint.txid, outpoint.index, url
        );
    }
    for (outpoint, value) in &report.restored {
        println!(
            "restored: {}:{} ({value} {unit}) is at the node after all: spendable again",
            outpoint.txid, outpoint.index
        );
    }
}

fn sent(path: &Path, txid: Option<&str>) -> Result<ExitCode> {
    let wallet = load(path)?;
    let wanted = txid.map(|text| parse_txid("--txid", text)).transpose()?;
    let mut any = false;
    for sent in wallet.sent().filter(|sent| wanted.is_none_or(|txid| sent.txid == txid)) {
        any = true;
        println!(
            "txid {} (confirmed at unix time {}):",
            sent.txid, sent.confirmed_at_unix_s
        );
        println!("  {}", sent.payment_string);
    }
    if !any {
        println!(
            "no payment string kept{}",
            if wanted.is_some() { " for that txid" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn parse_txid(what: &str, text: &str) -> Result<Txid> {
    let bytes = hex::decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
    bytes
        .map(Txid)
        .ok_or_else(|| anyhow::anyhow!("{what} {text}: not a transaction id (64 hex digits)"))
}

fn abandon(path: &Path, node: Option<&str>, text: &str, timeout_ms: u64) -> Result<ExitCode> {
    let txid = parse_txid("TXID", text)?;
    let mut wallet = load(path)?;
    let client = client_for(&mut wallet, node)?;
    // Sends nothing: the node may have decided it already.
    if let Some(outcome) = specie_wallet::resolve_by_presence(&mut wallet, &client, &txid)? {
        save(path, &wallet)?;
        println!("nothing to abandon: the node has decided txid {txid}: {outcome}");
        print_balance(&wallet);
        return Ok(ExitCode::SUCCESS);
    }
    let (tx, back) = wallet.build_abandon(&txid, &mut rand::thread_rng())?;
    let code = match session::submit(path, &mut wallet, &client, &tx, timeout_ms)? {
        Submitted::Settled(Outcome::Confirmed(_)) => {
            // Its coins are spent by the replacement now, so the payment is decided.
            specie_wallet::resolve_by_presence(&mut wallet, &client, &txid)?;
            save(path, &wallet)?;
            println!("abandoned: txid {txid} can never be applied; its coins came back to this wallet in txid {back}");
            ExitCode::SUCCESS
        }
        Submitted::Settled(other) => {
            println!(
                "txid {back} (the payment's coins back to this wallet): {other}; `specie wallet sync` tells which of \
                 the two the node applies"
            );
            ExitCode::from(EXIT_NOT_FINAL)
        }
        Submitted::Unknown(error) => {
            eprintln!("error: {error}");
            println!(
                "txid {back} (the payment's coins back to this wallet) is saved as pending; run `specie wallet sync` \
                 once the node is reachable"
            );
            ExitCode::from(EXIT_NOT_FINAL)
        }
    };
    print_balance(&wallet);
    Ok(code)
}

fn forget_missing(path: &Path, yes: bool) -> Result<ExitCode> {
    let mut wallet = load(path)?;
    let unit = wallet.hrp().to_owned();
    let missing = wallet.missing();
    let value: u64 = missing.iter().map(|(_, _, value)| value).sum();
    if missing.is_empty() {
        println!("nothing to forget: no coin or note is marked missing");
    } else if !yes {
        println!(
            "{} coins and notes worth {value} {unit} are marked missing; run again with --yes to drop them for good \
             (a `sync` with a node that holds them would make them spendable again)",
            missing.len()
        );
    } else {
        let (count, value) = wallet.forget_missing();
        save(path, &wallet)?;
        println!("forgot {count} missing coins and notes worth {value} {unit}");
    }
    Ok(ExitCode::SUCCESS)
}

/// A coin's or note's state, as `list-coins` shows it.
fn state_text(state: CoinState) -> String {
    match state {
        CoinState::Spendable => "spendable".to_owned(),
        CoinState::PendingSpend { txid } => format!("spending in {txid}"),
        CoinState::PendingReceive { txid } => format!("arriving from {txid}"),
        CoinState::Missing => "missing (not at the node at the last sync; not spendable)".to_owned(),
    }
}

fn list_coins(path: &Path) -> Result<ExitCode> {
    let wallet = load(path)?;
    let unit = wallet.hrp();
    let mut any = false;
    for coin in wallet.coins() {
        any = true;
        let state = state_text(coin.state);
        println!(
            "{:>12} {unit}  {}:{}  {state}",
            coin.value(),
            coin.outpoint.txid,
            coin.outpoint.index
        );
    }
    if !any {
        println!("no coins");
    }
    for note in wallet.notes() {
        let state = state_text(note.state);
        let outpoint = note.outpoint();
        println!(
            "{:>12} {unit}  {}:{}  confidential note, {state}",
            note.value(),
            outpoint.txid,
            outpoint.index
        );
    }
    for note in wallet.anonymous_notes() {
        let state = state_text(note.state);
        let (outpoint, values) = (note.outpoint(), if note.hidden() { "hidden" } else { "in clear" });
        println!(
            "{:>12} {unit}  {}:{}  anonymous note (value {values}), {state}",
            note.value(),
            outpoint.txid,
            outpoint.index
        );
    }
    for pending in wallet.pending() {
        println!(
            "pending: txid {} ({}), built at unix time {}{}",
            pending.txid,
            describe(&wallet, &pending.kind, unit),
            pending.created_at_unix_s,
            if pending.abandoned {
                ", abandoned (never sent again)"
            } else {
                ""
            }
        );
    }
    print_balance(&wallet);
    Ok(ExitCode::SUCCESS)
}
