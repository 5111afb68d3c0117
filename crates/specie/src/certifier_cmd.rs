//! `specie certifier …`: the unlinkable level's certifiers (docs/unlinkable-format.md,
//! "Certification"): deal a group, and serve one member's certification API, which answers
//! only for tokens the node's ledger holds (Figure 5, steps 5–6).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use specie_api::certify_api::CertifyRefused;
use specie_api::http_api::{CertifierInfoBody, CertifyBody};
use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::{deal_certifiers, CertifierGroup, CertifierSecret, Token};
use specie_private_transactions::{certify_if_in_ledger, CertificationRefused};
use specie_transaction::{OutPoint, Txid};
use specie_wallet::NodeClient;

/// The unlinkable level's certifiers: `deal` a k-of-n group (once, at its founding), then each
/// member runs `serve` beside its own copy of a node, and `specie node --certifiers` takes the
/// group. Wallets ask k of them to certify each token they receive (`--certifier URL`).
#[derive(Args, Debug)]
pub struct CertifierArgs {
    #[command(subcommand)]
    command: CertifierCommand,
}

#[derive(Subcommand, Debug)]
enum CertifierCommand {
    /// Deal a new certifier group: writes DIR/group.hex (public: for `specie node --certifiers`)
    /// and one secret file per member, DIR/certifier-<i>.secret (readable only by you: give
    /// each to its member's operator, and keep no copy). The dealer sees every share once, as
    /// at an endorsement group's founding.
    Deal {
        /// Certificates need K of the N members, e.g. 2-of-3.
        #[arg(long, value_name = "K-of-N", value_parser = crate::node_cmd::parse_threshold)]
        group: (u16, u16),
        /// A directory to create (it must not exist yet).
        #[arg(long)]
        out: PathBuf,
    },
    /// Serve one member's certification API: certify a token only if the node at --node holds
    /// it (its UHS id). Serves until Ctrl-C. Anyone who can reach it can ask; it learns which
    /// token is asked about, never its owner, value or serial number.
    Serve {
        /// This member's secret file (from `specie certifier deal`).
        #[arg(long)]
        secret: PathBuf,
        /// The node (or sentinel) whose ledger decides what exists; it must trust this group
        /// (`specie node --certifiers`).
        #[arg(long)]
        node: String,
        /// Where to serve the certification API.
        #[arg(long, default_value = "127.0.0.1:8490")]
        listen: SocketAddr,
    },
}

impl CertifierArgs {
    /// Whether the command runs a server (then SIGPIPE must not kill it).
    pub fn serves(&self) -> bool {
        matches!(self.command, CertifierCommand::Serve { .. })
    }
}

pub fn run(args: CertifierArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CertifierCommand::Deal { group: (k, n), out } => deal(k, n, &out),
        CertifierCommand::Serve { secret, node, listen } => serve(&secret, &node, listen),
    }
}

fn deal(k: u16, n: u16, out: &Path) -> anyhow::Result<ExitCode> {
    std::fs::create_dir(out).with_context(|| {
        format!(
            "cannot create {} (give a directory that does not exist yet, so no group is overwritten)",
            out.display()
        )
    })?;
    let (group, secrets) = deal_certifiers(k, n, &mut rand::rngs::OsRng)?;
    let group_hex = hex::encode(group.encode());
    std::fs::write(out.join("group.hex"), format!("{group_hex}\n"))?;
    for secret in &secrets {
        let path = out.join(format!("certifier-{}.secret", secret.index()));
        let text = format!("{}\n{group_hex}\n", hex::encode(secret.encode()));
        specie_log::secret::write_new(&path, text.as_bytes())?;
    }
    println!("{group_hex}");
    eprintln!(
        "a {k}-of-{n} certifier group: its key (above) is in {dir}/group.hex, for `specie node --certifiers`; \
         member i runs `specie certifier serve --secret {dir}/certifier-<i>.secret --node <URL>`",
        dir = out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// A member's secret file: its secret's hex, then its group's.
fn read_secret(path: &Path) -> anyhow::Result<(CertifierSecret, CertifierGroup)> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let not_ours = || {
        format!(
            "{} is not a certifier's secret file from `specie certifier deal`",
            path.display()
        )
    };
    let mut lines = text.lines().map(str::trim).filter(|line| !line.is_empty());
    let mut next = || hex::decode(lines.next().unwrap_or_default()).ok();
    let secret = next()
        .and_then(|bytes| CertifierSecret::decode_exact(&bytes).ok())
        .with_context(not_ours)?;
    let group = next()
        .and_then(|bytes| CertifierGroup::decode_exact(&bytes).ok())
        .with_context(not_ours)?;
    anyhow::ensure!(
        secret.belongs_to(&group),
        "{}: its secret is not member {} of the group beside it (a damaged or edited file)",
        path.display(),
        secret.index()
    );
    Ok((secret, group))
}

fn serve(secret: &Path, node: &str, listen: SocketAddr) -> anyhow::Result<ExitCode> {
    let (secret, group) = read_secret(secret)?;
    let group_hex = hex::encode(group.encode());
    let client = NodeClient::new(node)?;
    let trusted = client
        .info()
        .with_context(|| format!("cannot ask the node at {node} what it holds; start it first"))?
        .certifiers;
    match trusted {
        Some(text) if text.eq_ignore_ascii_case(&group_hex) => {}
        Some(_) => anyhow::bail!(
            "the node at {node} trusts another certifier group than this member's: certificates from this one \
             would not verify there. Point --node at the node of this group's network"
        ),
        None => anyhow::bail!(
            "the node at {node} takes no unlinkable transactions: start it with --certifiers {}…",
            &group_hex[..24]
        ),
    }
    let index = secret.index();
    let certifier = Certifier {
        secret,
        group_hex,
        node: client,
    };
    let router = specie_api::certify_api::router(std::sync::Arc::new(certifier));
    specie_service::server::serve_until_ctrl_c(listen, router, specie_service::HttpLimits::default(), |address| {
        specie_service::announce::announce(format_args!(
            "certifier {index}: serving the certification API on http://{address} for the ledger of {node}"
        ));
    })?;
    Ok(ExitCode::SUCCESS)
}

/// One member of the group, asking its node's UHS before it certifies.
struct Certifier {
    secret: CertifierSecret,
    group_hex: String,
    node: NodeClient,
}

impl specie_api::certify_api::TokenCertifier for Certifier {
    fn info(&self) -> CertifierInfoBody {
        CertifierInfoBody {
            certifier: self.secret.index(),
            group: self.group_hex.clone(),
        }
    }

    fn certify(&self, txid: [u8; 32], index: u64, token: &[u8]) -> Result<CertifyBody, CertifyRefused> {
        let token = Token::decode_exact(token).map_err(|error| CertifyRefused::BadToken(error.to_string()))?;
        let outpoint = OutPoint {
            txid: Txid(txid),
            index,
        };
        let mut unavailable = None;
        let in_ledger = |id: &_| match self.node.query_uhs(std::slice::from_ref(id)) {
            Ok(present) => present == [true],
            Err(error) => {
                unavailable = Some(error);
                false
            }
        };
        let answer = certify_if_in_ledger(&self.secret, &outpoint, &token, in_ledger);
        if let Some(error) = unavailable {
            return Err(CertifyRefused::NodeUnavailable(format!(
                "cannot ask the ledger whether it holds the token: {error}"
            )));
        }
        match answer {
            Ok(share) => Ok(CertifyBody {
                certifier: share.certifier(),
                share: hex::encode(share.encode()),
            }),
            Err(refused @ CertificationRefused::NotInLedger { .. }) => Err(CertifyRefused::NotInLedger(format!(
                "{refused}: only a confirmed token is certified; ask again once its transaction is confirmed"
            ))),
        }
    }
}
