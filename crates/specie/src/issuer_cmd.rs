//! `specie issuer`: the reference external signer for the issuer key (`specie wallet create
//! --issuer-signer`), so that the key can live apart from the wallet that builds mints: on
//! another machine (`ssh signer specie issuer sign --key-file …`) or in a file only the signer
//! can read. The protocol is `specie_wallet::ExternalSigner`'s.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use specie_transaction::signing::{keypair_from_secret, schnorr_sign, xonly_bytes};
use specie_transaction::NonceMode;

#[derive(Args, Debug)]
pub struct IssuerArgs {
    #[command(subcommand)]
    pub command: IssuerCommand,
}

#[derive(Subcommand, Debug)]
pub enum IssuerCommand {
    /// Make a new issuer key in FILE (hex of the secret, mode 0600; refuses to overwrite) and
    /// print its public key, for `specie node --issuer` and `specie wallet create --issuer-key`.
    Keygen {
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Print the public key of the issuer key in FILE.
    Key {
        #[arg(long)]
        key_file: PathBuf,
    },
    /// Sign as the issuer: read one message (64 hex digits, the transaction id) from standard
    /// input, print its BIP-340 signature (128 hex digits). What `specie wallet create
    /// --issuer-signer "specie issuer sign --key-file FILE"` runs for each mint and redeem; a
    /// cluster's `DIR/issuer.key` is such a file.
    Sign {
        #[arg(long)]
        key_file: PathBuf,
    },
}

pub fn run(args: IssuerArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        IssuerCommand::Keygen { key_file } => {
            let keypair = secp256k1::Keypair::new_global(&mut rand::thread_rng());
            specie_log::secret::write_new(&key_file, hex::encode(keypair.secret_bytes()).as_bytes())?;
            println!("{}", hex::encode(xonly_bytes(&keypair)));
        }
        IssuerCommand::Key { key_file } => println!("{}", hex::encode(xonly_bytes(&read_key(&key_file)?))),
        IssuerCommand::Sign { key_file } => {
            let keypair = read_key(&key_file)?;
            let mut line = String::new();
            std::io::stdin().lock().take_line(&mut line)?;
            let message = hex::decode(line.trim())
                .ok()
                .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
                .context("standard input is not one message of 64 hex digits")?;
            println!(
                "{}",
                hex::encode(schnorr_sign(&keypair, &message, NonceMode::Randomized))
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The issuer key in `path`: the secret as 64 hex digits (what `keygen` and `cluster up` write).
fn read_key(path: &Path) -> anyhow::Result<secp256k1::Keypair> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the issuer key {}", path.display()))?;
    let secret = hex::decode(text.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok());
    match secret.as_ref().and_then(keypair_from_secret) {
        Some(keypair) => Ok(keypair),
        None => bail!(
            "{} does not hold an issuer key (64 hex digits of a secret key)",
            path.display()
        ),
    }
}

/// One line of at most a few hundred bytes: a signer never reads more than it needs.
trait TakeLine {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<usize>;
}

impl<R: BufRead> TakeLine for R {
    fn take_line(&mut self, line: &mut String) -> std::io::Result<usize> {
        std::io::Read::take(self, 256).read_line(line)
    }
}
