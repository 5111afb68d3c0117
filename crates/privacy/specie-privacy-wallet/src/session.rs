//! What `specie wallet` does for the privacy levels around a wallet file, beyond building
//! transactions: the node's auditors and registration authority, receiving a private payment
//! (saved once the node shows it), enrolment (the secret saved before the request leaves), and
//! the active auditors' co-signatures. The order of saving and sending is the core's
//! (`specie_wallet::session`); the caller holds the wallet's lock throughout.

use std::path::Path;

use specie_confidential::AuditorKey;
use specie_credential::{Credential, EnrolmentChallenge, EnrolmentId, RaPublicKey, Textual};
use specie_private_transactions::{AnonymousTransaction, ConfidentialTransaction, UnlinkableTransaction};
use specie_transaction::SpecieTransaction;
use specie_wallet::session::SessionError;
use specie_wallet::{ClientError, FileError, NodeClient, Wallet, WalletError, WalletFile};

use specie_codec::{Decode, Encode};
use specie_credential::unlinkable::CertificateShare;
use specie_transaction::OutPoint;

use crate::{
    parse_auditors, AnonymousPaymentString, AnonymousPaymentStringError, AnonymousPolicy, AnonymousWallet,
    ConfidentialPaymentString, ConfidentialPaymentStringError, PrivacyError, ReceivedNote, UnlinkablePaymentString,
    UnlinkablePolicy, UnlinkableWallet,
};

/// Why a private wallet command could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum PrivacySessionError {
    /// What the core's commands refuse (the file, the node, the wallet).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// What the privacy levels' bookkeeping refuses.
    #[error(transparent)]
    Privacy(#[from] PrivacyError),
    #[error(transparent)]
    ConfidentialPaymentString(#[from] ConfidentialPaymentStringError),
    #[error(transparent)]
    AnonymousPaymentString(#[from] AnonymousPaymentStringError),
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
    #[error(transparent)]
    UnlinkablePaymentString(#[from] crate::UnlinkablePaymentStringError),
    #[error(
        "the node at {url} takes no unlinkable transactions (it names no certifier group in /v1/info; its operator \
         starts it with --certifiers)"
    )]
    NoCertifiers { url: String },
    #[error("the node at {url} lists a key that does not decode as {what}: {text}")]
    BadNodeKey {
        url: String,
        what: &'static str,
        text: String,
    },
}

impl From<WalletError> for PrivacySessionError {
    fn from(error: WalletError) -> Self {
        PrivacySessionError::Privacy(error.into())
    }
}

impl From<ClientError> for PrivacySessionError {
    fn from(error: ClientError) -> Self {
        PrivacySessionError::Session(error.into())
    }
}

impl From<FileError> for PrivacySessionError {
    fn from(error: FileError) -> Self {
        PrivacySessionError::Session(error.into())
    }
}

/// The auditors a confidential transaction must be readable by: `overrides` if any were given
/// (`--auditor`), else those the node lists in `GET /v1/info` (a node refuses a confidential
/// transaction that leaves one of its auditors out).
pub fn auditors_for(client: &NodeClient, overrides: &[String]) -> Result<Vec<AuditorKey>, PrivacySessionError> {
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
) -> Result<ReceivedNote, PrivacySessionError> {
    let payment = ConfidentialPaymentString::parse(text)?;
    let received = crate::receive_confidential(wallet, client, &payment)?;
    if !received.already_known {
        WalletFile::save(path, wallet)?;
    }
    Ok(received)
}

/// The registration authority the node at `client` trusts: what a wallet enrols with.
pub fn registration_authority(client: &NodeClient) -> Result<RaPublicKey, PrivacySessionError> {
    let url = client.url().to_string();
    let text = client
        .info()?
        .registration_authority
        .ok_or(PrivacySessionError::NoRegistrationAuthority { url: url.clone() })?;
    decode_node_key(&url, "a registration authority key", &text)
}

fn decode_node_key<T: specie_codec::Decode<Limits = ()>>(
    url: &str,
    what: &'static str,
    text: &str,
) -> Result<T, PrivacySessionError> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| T::decode_exact(&bytes).ok())
        .ok_or_else(|| PrivacySessionError::BadNodeKey {
            url: url.to_owned(),
            what,
            text: text.chars().take(24).collect(),
        })
}

/// The node's policy for anonymous transactions: its value and owner auditors (`GET /v1/info`).
pub fn anonymous_policy(client: &NodeClient, hide_values: bool) -> Result<AnonymousPolicy, PrivacySessionError> {
    let info = client.info()?;
    let url = client.url().to_string();
    let owner_auditors = info
        .owner_auditors
        .iter()
        .map(|text| decode_node_key(&url, "an owner auditor key", text))
        .collect::<Result<Vec<specie_credential::AuditorKey>, _>>()?;
    Ok(AnonymousPolicy {
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
) -> Result<String, PrivacySessionError> {
    let challenge = EnrolmentChallenge::from_text(text)?;
    let authority = registration_authority(client)?;
    let request = wallet.begin_enrolment(authority, challenge, rng)?;
    WalletFile::save(path, wallet)?;
    Ok(request.to_text())
}

/// Keeps the RA's credential `text` as this wallet's identity, and saves the wallet.
pub fn finish_enrolment(path: &Path, wallet: &mut Wallet, text: &str) -> Result<EnrolmentId, PrivacySessionError> {
    let credential = Credential::from_text(text)?;
    let id = wallet.finish_enrolment(credential)?;
    WalletFile::save(path, wallet)?;
    Ok(id)
}

/// Replaces this enrolled wallet's credential with `text`, which the RA re-issued after moving to
/// a new key; the key is the one the node at `client` trusts now. Saves the wallet.
pub fn renew_credential(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
) -> Result<EnrolmentId, PrivacySessionError> {
    let credential = Credential::from_text(text)?;
    let authority = registration_authority(client)?;
    let id = wallet.renew_credential(credential, authority)?;
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
) -> Result<ReceivedNote, PrivacySessionError> {
    let payment = AnonymousPaymentString::parse(text)?;
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
    tx: SpecieTransaction,
    cosigners: &[String],
) -> Result<SpecieTransaction, PrivacySessionError> {
    let required = client.info()?.active_auditors;
    if required.is_empty() && cosigners.is_empty() {
        return Ok(tx);
    }
    let mut given = Vec::with_capacity(cosigners.len());
    for url in cosigners {
        let (auditor, witness) = NodeClient::new(url)?.cosign(&tx)?;
        let auditor = hex::encode(auditor);
        if !required.iter().any(|key| key.eq_ignore_ascii_case(&auditor)) {
            return Err(PrivacySessionError::CosignerNotRequired {
                url: url.clone(),
                auditor,
            });
        }
        given.push((auditor, witness));
    }
    let mut cosignatures = Vec::with_capacity(required.len());
    for key in &required {
        let found = given.iter().find(|(auditor, _)| auditor.eq_ignore_ascii_case(key));
        let (_, witness) = found.ok_or_else(|| PrivacySessionError::CosignerMissing {
            url: client.url().to_string(),
            auditor: key.clone(),
        })?;
        cosignatures.push(witness.clone());
    }
    let tx: SpecieTransaction = if let Some(private) = tx.capability::<ConfidentialTransaction>() {
        let mut private = private.clone();
        private.witnesses.extend(cosignatures);
        private.into()
    } else if let Some(private) = tx.capability::<AnonymousTransaction>() {
        let mut private = private.clone();
        private.witnesses.extend(cosignatures);
        private.into()
    } else if let Some(private) = tx.capability::<UnlinkableTransaction>() {
        let mut private = private.clone();
        private.witnesses.extend(cosignatures);
        private.into()
    } else {
        // Only private transactions are co-signed; the node checks nothing else.
        return Ok(tx);
    };
    wallet.replace_pending_transaction(tx.clone())?;
    Ok(tx)
}

/// The node's policy for unlinkable transactions: its certifier group and owner auditors
/// (`GET /v1/info`).
pub fn unlinkable_policy(client: &NodeClient) -> Result<UnlinkablePolicy, PrivacySessionError> {
    let url = client.url().to_string();
    let certifiers = (client.info()?.certifiers).ok_or(PrivacySessionError::NoCertifiers { url: url.clone() })?;
    let certifiers = decode_node_key(&url, "a certifier group", &certifiers)?;
    let owner_auditors = anonymous_policy(client, true)?.owner_auditors;
    Ok(UnlinkablePolicy {
        certifiers,
        owner_auditors,
    })
}

/// Receives the unlinkable payment string `text` (see [`crate::receive_unlinkable`]) and saves
/// the wallet if it gained a token.
pub fn receive_unlinkable(
    path: &Path,
    wallet: &mut Wallet,
    client: &NodeClient,
    text: &str,
) -> Result<ReceivedNote, PrivacySessionError> {
    let payment = UnlinkablePaymentString::parse(text)?;
    let received = crate::receive_unlinkable(wallet, client, &payment)?;
    if !received.already_known {
        WalletFile::save(path, wallet)?;
    }
    Ok(received)
}

/// What asking the certifiers did.
#[derive(Debug, Default)]
pub struct Certified {
    /// Value of the tokens certified now.
    pub certified: Vec<u64>,
    /// The tokens still uncertified, each with what the certifiers answered.
    pub waiting: Vec<(OutPoint, Vec<String>)>,
}

/// Asks the certifiers at `urls` (their `specie certifier serve`) to certify every confirmed
/// token of this wallet that has no certificate yet; keeps each certificate once `k` of them
/// gave valid shares, and saves the wallet if any was kept. A certifier that refuses or cannot
/// be reached only costs its share.
pub fn certify_tokens(
    path: &Path,
    wallet: &mut Wallet,
    policy: &UnlinkablePolicy,
    urls: &[String],
) -> Result<Certified, PrivacySessionError> {
    let certifiers = urls
        .iter()
        .map(|url| NodeClient::new(url))
        .collect::<Result<Vec<_>, _>>()?;
    let mut report = Certified::default();
    for payment in wallet.uncertified_tokens() {
        let (outpoint, token) = (payment.outpoint(), payment.token().encode());
        let mut shares = Vec::with_capacity(certifiers.len());
        let mut answers = vec![];
        for (url, certifier) in urls.iter().zip(&certifiers) {
            match certifier.certify(&outpoint, &token) {
                Ok((_, bytes)) => match CertificateShare::decode_exact(&bytes) {
                    Ok(share) => shares.push(share),
                    Err(error) => answers.push(format!("{url}: its share does not decode ({error})")),
                },
                Err(error) => answers.push(format!("{url}: {error}")),
            }
        }
        match payment.opening.certificate(&policy.certifiers, &shares) {
            Ok(certificate) => {
                wallet.keep_certificate(&outpoint, certificate, &policy.certifiers)?;
                report.certified.push(payment.value());
            }
            Err(error) => {
                answers.push(error.to_string());
                report.waiting.push((outpoint, answers));
            }
        }
    }
    if !report.certified.is_empty() {
        WalletFile::save(path, wallet)?;
    }
    Ok(report)
}
