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

use specie_confidential::AuditorKey;

use crate::{
    parse_auditors, settle, ClientError, ConfidentialPaymentString, ConfidentialPaymentStringError, FileError,
    Imported, NodeAccess, NodeClient, Outcome, PaymentString, PaymentStringError, ReceivedNote, SubmitStatus,
    SyncError, Wallet, WalletError, WalletFile,
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
    #[error(transparent)]
    ConfidentialPaymentString(#[from] ConfidentialPaymentStringError),
    #[error(transparent)]
    AnonymousPaymentString(#[from] crate::AnonymousPaymentStringError),
    #[error("the enrolment text is not usable: {0}")]
    EnrolmentText(#[from] specie_credential::TextError),
    #[error("the node at {url} takes no anonymous transactions (it names no registration authority in /v1/info)")]
    NoRegistrationAuthority { url: String },
    #[error(
        "the node at {url} requires the co-signature of active auditor {auditor}, and no --cosigner gave it; \
         pass the URL of that auditor's `specie audit serve`"
    )]
    CosignerMissing { url: String, auditor: String },
    #[error("the co-signer at {url} answered for auditor {auditor}, whom the node does not require")]
    CosignerNotRequired { url: String, auditor: String },
    #[error("the node at {url} lists a key that does not decode as {what}: {text}")]
    BadNodeKey {
        url: String,
        what: &'static str,
        text: String,
    },
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

/// The auditors a confidential transaction must be readable by: `overrides` if any were given
/// (`--auditor`), else those the node lists in `GET /v1/info` (a node refuses a confidential
/// transaction that leaves one of its auditors out).
pub fn auditors_for(client: &NodeClient, overrides: &[String]) -> Result<Vec<AuditorKey>, SessionError> {
    if !overrides.is_empty() {
        return Ok(parse_auditors(overrides)?);
    }
    Ok(parse_auditors(&client.info()?.auditors)?)
}

/// Receives the confidential payment string `text` (see [`crate::receive_confidential`]) and
/// saves the wallet if it gained a note.
pub fn receive_confidential(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
) -> Result<ReceivedNote, SessionError> {
    let payment = ConfidentialPaymentString::parse(text)?;
    let received = crate::receive_confidential(wallet, client, &payment)?;
    if !received.already_known {
        WalletFile::save(path, wallet)?;
    }
    Ok(received)
}

/// The registration authority the node at `client` trusts: what a wallet enrols with.
pub fn registration_authority(client: &NodeClient) -> Result<specie_credential::RaPublicKey, SessionError> {
    let url = client.url().to_string();
    let text = client
        .info()?
        .registration_authority
        .ok_or(SessionError::NoRegistrationAuthority { url: url.clone() })?;
    decode_node_key(&url, "a registration authority key", &text)
}

fn decode_node_key<T: specie_codec::Decode<Limits = ()>>(
    url: &str,
    what: &'static str,
    text: &str,
) -> Result<T, SessionError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| T::decode_exact(&bytes).ok())
        .ok_or_else(|| SessionError::BadNodeKey {
            url: url.to_owned(),
            what,
            text: text.chars().take(24).collect(),
        })
}

/// The node's policy for anonymous transactions: its value and owner auditors (`GET /v1/info`).
pub fn anonymous_policy(client: &NodeClient, hide_values: bool) -> Result<crate::AnonymousPolicy, SessionError> {
    let info = client.info()?;
    let url = client.url().to_string();
    let owner_auditors = info
        .owner_auditors
        .iter()
        .map(|text| decode_node_key(&url, "an owner auditor key", text))
        .collect::<Result<Vec<specie_credential::AuditorKey>, _>>()?;
    Ok(crate::AnonymousPolicy {
        value_auditors: parse_auditors(&info.auditors)?,
        owner_auditors,
        hide_values,
    })
}

/// Answers the RA's challenge `text` for the RA the node trusts, saves the wallet (so the secret
/// is durable before the request leaves), and returns the request text for the RA.
pub fn begin_enrolment(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
    rng: &mut (impl rand::RngCore + rand::CryptoRng),
) -> Result<String, SessionError> {
    use specie_credential::Textual;
    let challenge = specie_credential::EnrolmentChallenge::from_text(text)?;
    let authority = registration_authority(client)?;
    let request = wallet.begin_enrolment(authority, challenge, rng)?;
    WalletFile::save(path, wallet)?;
    Ok(request.to_text())
}

/// Keeps the RA's credential `text` as this wallet's identity, and saves the wallet.
pub fn finish_enrolment(
    path: &Path,
    wallet: &mut Wallet,
    text: &str,
) -> Result<specie_credential::EnrolmentId, SessionError> {
    use specie_credential::Textual;
    let credential = specie_credential::Credential::from_text(text)?;
    let id = wallet.finish_enrolment(credential)?;
    WalletFile::save(path, wallet)?;
    Ok(id)
}

/// Receives the anonymous payment string `text` (see [`crate::receive_anonymous`]) and saves the
/// wallet if it gained a note.
pub fn receive_anonymous(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
) -> Result<ReceivedNote, SessionError> {
    let payment = crate::AnonymousPaymentString::parse(text)?;
    let received = crate::receive_anonymous(wallet, client, &payment)?;
    if !received.already_known {
        WalletFile::save(path, wallet)?;
    }
    Ok(received)
}

/// Has every active auditor the node requires co-sign `tx` through `cosigners` (their services'
/// URLs, any order), appends the co-signatures in the node's order after the transaction's own
/// witnesses, and records the co-signed transaction as the pending one. The node checks them.
pub fn cosign(
    wallet: &mut Wallet,
    client: &NodeClient,
    mut tx: SpecieTransaction,
    cosigners: &[String],
) -> Result<SpecieTransaction, SessionError> {
    let required = client.info()?.active_auditors;
    if required.is_empty() && cosigners.is_empty() {
        return Ok(tx);
    }
    let mut given = Vec::with_capacity(cosigners.len());
    for url in cosigners {
        let (auditor, witness) = NodeClient::new(url)?.cosign(&tx)?;
        let auditor = hex::encode(auditor);
        if !required.iter().any(|key| key.eq_ignore_ascii_case(&auditor)) {
            return Err(SessionError::CosignerNotRequired {
                url: url.clone(),
                auditor,
            });
        }
        given.push((auditor, witness));
    }
    let mut cosignatures = Vec::with_capacity(required.len());
    for key in &required {
        let found = given.iter().find(|(auditor, _)| auditor.eq_ignore_ascii_case(key));
        let (_, witness) = found.ok_or_else(|| SessionError::CosignerMissing {
            url: client.url().to_string(),
            auditor: key.clone(),
        })?;
        cosignatures.push(witness.clone());
    }
    match &mut tx {
        SpecieTransaction::Confidential(private) => private.witnesses.extend(cosignatures),
        SpecieTransaction::Anonymous(private) => private.witnesses.extend(cosignatures),
        // Only private transactions are co-signed; the node checks nothing else.
        _ => return Ok(tx),
    }
    wallet.replace_pending_transaction(tx.clone())?;
    Ok(tx)
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
