//! What `specie wallet` does around a wallet file, beyond building transactions: the order of
//! saving and talking to the node that keeps coins safe across crashes and lost connections.
//!
//! A transaction is saved as pending *before* it is sent, so that a crash or a lost connection
//! after sending leaves something [`crate::sync`] can resolve, never coins that the wallet has
//! forgotten it spent; whatever the node's answer changed is saved before it is reported. The
//! caller holds the wallet's [`crate::WalletLock`] throughout.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, OnceLock, PoisonError};

use specie_transaction::{SpecieTransaction, Txid, UhsId};

use crate::{
    settle, ClientError, FileError, Imported, NodeAccess, NodeClient, Outcome, PaymentString, PaymentStringError,
    SubmitStatus, SyncError, Wallet, WalletError, WalletFile,
};

/// Why a wallet command could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Wallet(#[from] WalletError),
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Sync(#[from] SyncError),
    #[error(transparent)]
    PaymentString(#[from] PaymentStringError),
    /// Saving the pending transaction failed, so it was not sent.
    #[error("the transaction was not sent: {0}")]
    NotSent(#[source] FileError),
    #[error("the node answered with no result for transaction {txid}; run `specie wallet sync`")]
    NoResult { txid: Txid },
    /// The node was too busy to take the transaction; it was rolled back, nothing was spent.
    #[error("the node did not accept transaction {txid} ({message}); nothing was spent; try again in a moment")]
    Busy { txid: Txid, message: String },
    #[error(
        "the node at {url} does not accept this wallet's issuer key; restart it with `specie node --issuer {key}`"
    )]
    IssuerNotAccepted { url: String, key: String },
}

/// How a submission ended.
#[derive(Debug)]
pub enum Submitted {
    /// The node answered, and the answer is applied and saved.
    Settled(Outcome),
    /// Whether the node received it is unknown (the request failed); it is saved as pending.
    Unknown(ClientError),
}

/// What importing a payment string did.
#[derive(Debug)]
pub struct ImportReport {
    pub imported: Imported,
    /// The node could not be asked which outputs exist; they were kept as pending anyway.
    pub node_error: Option<ClientError>,
}

/// The node settings the command line gave (`--ca-cert`, `--node-auth-file`), for every node
/// [`client_for`] reaches in this process.
static NODE_ACCESS: OnceLock<NodeAccess> = OnceLock::new();
/// The URLs already warned about, so that a command warns once per node.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Makes `access` override, setting by setting, what wallet files keep for their node, for every
/// client [`client_for`] makes in this process (the command line does this once, from its
/// flags). False if it was set already.
pub fn set_node_access(access: NodeAccess) -> bool {
    NODE_ACCESS.set(access).is_ok()
}

/// How `wallet` reaches the node at `url`: what its file keeps if that is its own node (never for
/// another: the credentials are for its node), overridden by [`set_node_access`].
pub fn node_access_for(wallet: &Wallet, url: &str) -> NodeAccess {
    let own = crate::client::normalize_url(url) == crate::client::normalize_url(wallet.node_url());
    let saved = if own {
        wallet.node_access().clone()
    } else {
        NodeAccess::default()
    };
    match NODE_ACCESS.get() {
        Some(over) => saved.overridden_by(over),
        None => saved,
    }
}

/// Says on stderr, once per node and process, that requests to `client`'s node travel
/// unencrypted, if they do and it is another machine.
pub fn warn_if_unencrypted(client: &NodeClient) {
    if !client.is_unencrypted_remote() {
        return;
    }
    let mut warned = WARNED.lock().unwrap_or_else(PoisonError::into_inner);
    if warned.insert(client.url().to_owned()) {
        eprintln!(
            "warning: {} is plain http:// to another machine: requests and answers travel unencrypted \
             (use an https:// URL to a TLS proxy in front of the node)",
            client.url()
        );
    }
}

/// The node to talk to: `node` if given, else the one the wallet remembers, reached as
/// [`node_access_for`] says; refused unless it serves this wallet's currency and network
/// (`Wallet::check_network`), so that nothing is sent to, or concluded from, another network's
/// node. The one place a wallet command makes its node's client.
pub fn client_for(wallet: &mut Wallet, node: Option<&str>) -> Result<NodeClient, SessionError> {
    let url = node.unwrap_or(wallet.node_url());
    let client = NodeClient::with_access(url, &node_access_for(wallet, url))?;
    warn_if_unencrypted(&client);
    let info = client.info()?;
    wallet.check_network(client.url(), &info.hrp, info.network_id.as_deref())?;
    Ok(client)
}

/// Checks that the node will accept this wallet's issuer signatures, before building anything.
pub fn check_issuer_accepted(wallet: &Wallet, client: &NodeClient) -> Result<(), SessionError> {
    let key = wallet.issuer_pubkey_hex().ok_or(WalletError::NotIssuer)?;
    let info = client.info()?;
    if !info.issuers.iter().any(|issuer| issuer.eq_ignore_ascii_case(&key)) {
        return Err(SessionError::IssuerNotAccepted {
            url: client.url().to_string(),
            key,
        });
    }
    Ok(())
}

/// Saves `wallet` (holding `tx` as pending) to `path`, submits `tx`, applies the answer and saves
/// again.
pub fn submit(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    tx: &SpecieTransaction,
    timeout_ms: u64,
) -> Result<Submitted, SessionError> {
    let txid = tx.txid();
    // Durable before the node can act on it (module docs).
    WalletFile::save(path, wallet).map_err(SessionError::NotSent)?;
    let status = match client.submit(std::slice::from_ref(tx), timeout_ms) {
        Ok(mut results) if !results.is_empty() => results.swap_remove(0).status,
        Ok(_) => return Err(SessionError::NoResult { txid }),
        Err(error) => return Ok(Submitted::Unknown(error)),
    };
    if let SubmitStatus::Busy { message } = &status {
        // This was the first submission, so nothing else can be in flight: rolling back is
        // safe and leaves the coins usable at once.
        wallet.on_rejected(&txid)?;
        WalletFile::save(path, wallet)?;
        return Err(SessionError::Busy {
            txid,
            message: message.clone(),
        });
    }
    let outcome = settle(wallet, client, &txid, &status);
    // Save whatever was applied, even if settling failed half-way.
    WalletFile::save(path, wallet)?;
    Ok(Submitted::Settled(outcome?))
}

/// Imports the payment string `text` into `wallet`: its outputs the node holds become spendable,
/// the others pending (kept even if the node cannot be asked: a lost payment string is money
/// lost). Saves the wallet.
pub fn import(path: &Path, wallet: &mut Wallet, client: &NodeClient, text: &str) -> Result<ImportReport, SessionError> {
    let payment = PaymentString::parse(text)?;
    let ours = wallet.receivable_outputs(&payment)?;
    let ids: Vec<UhsId> = ours.iter().map(|created| created.uhs_id).collect();
    let (confirmed, node_error) = match client.query_uhs(&ids) {
        Ok(present) => (
            ids.iter()
                .zip(present)
                .filter(|(_, present)| *present)
                .map(|(id, _)| *id)
                .collect::<Vec<_>>(),
            None,
        ),
        Err(error) => (Vec::new(), Some(error)),
    };
    let imported = wallet.import_payment(&payment, &confirmed)?;
    WalletFile::save(path, wallet)?;
    Ok(ImportReport { imported, node_error })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::tests::tls_server;

    /// A wallet file keeps how to reach its node; `client_for` reaches that node so, and gives
    /// nothing of it to another URL (the credentials are for the wallet's own node).
    #[test]
    fn client_for_reaches_the_node_behind_a_tls_proxy_as_the_wallet_file_says() {
        let dir = tempfile::tempdir().unwrap();
        let (url, ca_pem, server) = tls_server(&["127.0.0.1"], 2);
        let ca = dir.path().join("ca.pem");
        std::fs::write(&ca, ca_pem).unwrap();
        let token = dir.path().join("token");
        std::fs::write(&token, "Bearer from-the-wallet-file\n").unwrap();
        let access = NodeAccess {
            ca_cert: Some(ca),
            auth_file: Some(token),
        };
        let mut wallet = Wallet::new("usd", false, &mut crate::testkit::rng(30)).unwrap();
        wallet.set_node_url(&url);
        wallet.set_node_access(access.clone());
        let path = dir.path().join("w.json");
        WalletFile::create_with(&path, &wallet, None).unwrap();

        let mut loaded = WalletFile::load(&path).unwrap();
        let client = client_for(&mut loaded, None).unwrap();
        assert_eq!(client.access(), &access);
        let again = client_for(&mut loaded, Some(&format!("{url}/"))).unwrap();
        assert_eq!(again.access(), &access, "the same node, however its URL is spelt");
        assert_eq!(node_access_for(&loaded, "https://127.0.0.1:1"), NodeAccess::default());
        for head in server.join().unwrap() {
            assert!(
                head.contains("\r\nAuthorization: Bearer from-the-wallet-file\r\n"),
                "{head}"
            );
        }
    }
}
