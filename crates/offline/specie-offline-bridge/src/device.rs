//! A device wallet on disk, and its calls to the authority: what `specie offline device …` does.
//! The file is locked for a command's whole load–change–save (the core wallet's lock) and written
//! atomically; anything the device signs is saved before it leaves the process (a payment string
//! is printed, a deposit is sent), so a crash can only make it send the same bytes again.
//!
//! Nothing held ends on an answer that does not pay it. Key rings are taken only signed by the
//! authority the device trusts; a deposit ends only on an answer that says how it was paid or why
//! it was refused (anything else keeps it, to be sent again); re-issued tokens must be the ones
//! asked for; a defund's payout must be the trusted bridge key's, for the token's serial, address
//! and value, and the deposit stays pending until the caller has handed that payout on
//! (`Device::paid_out`): the authority answers a deposit sent again with the same payout.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use specie_codec::{Decode, DecodeError, Reader};
use specie_offline::{
    Denominations, Issuance, KeyCertificate, KeyError, KeyRing, Link, PublicKey, SignedKeyRing, Token,
    CERTIFIED_KEY_BYTES, ISSUANCE_BYTES, SIGNED_KEY_RING_BYTES_MAX, TOKEN_BYTES_MAX,
};
use specie_offline_authority::{refund_serial, TOKENS_PER_FUNDING_MAX};
use specie_offline_device::{Deposit, Device, DeviceError, DeviceLimits, PaymentRequest};
use specie_offline_service::http_api::{
    BooksBody, CertifiedBody, CertifyRequest, DepositBody, DepositRequest, FundFromCoreRequest, FundRequest,
    FundedBody, KeysBody, OutcomeBody, RegisterRequest, RegisteredBody, RevocationsBody, RevokeKeyRequest, BOOKS_PATH,
    CERTIFY_PATH, DEPOSIT_PATH, FUND_FROM_CORE_PATH, FUND_PATH, KEYS_PATH, REGISTER_PATH, REVOCATIONS_PATH,
    REVOKE_KEY_PATH, ROTATE_PATH,
};
use specie_service::client::{Body, CallError, LeaderSearch, Replicas};
use specie_service::NoMore;
use specie_transaction::{witness_program_commitment, BridgePayout, SpecieTransaction};
use specie_wallet::{write_file_atomically, FileError, WalletFile, WalletLock};

/// What a payment request string starts with.
pub const REQUEST_PREFIX: &str = "specie-offline-request1:";
/// What a payment string starts with.
pub const PAYMENT_PREFIX: &str = "specie-offline-pay1:";
/// Most tokens one payment string carries.
pub const TOKENS_PER_PAYMENT_MAX: usize = 64;
/// How long a command waits for another one on the same device file.
const LOCK_WAIT_MS: u64 = 10_000;

/// Why a device command failed.
#[derive(Debug, thiserror::Error)]
pub enum DeviceCommandError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(
        "{path}: not a device file ({source}); nothing was changed. If it was cut short or edited, restore it from \
         your backup: the device's tokens are only in it"
    )]
    NotADevice { path: PathBuf, source: DecodeError },
    #[error("{path}: cannot read it: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{what}: {reason}")]
    BadString { what: &'static str, reason: String },
    #[error(transparent)]
    Refused(#[from] DeviceError),
    #[error("the authority at {url}: {reason}")]
    Authority { url: String, reason: String },
    #[error("{path}: {reason}")]
    Ring { path: PathBuf, reason: String },
    #[error("the authority's payout {what} does not pay what is owed: {reason}; the deposit or funding is kept")]
    NotOwed { what: &'static str, reason: String },
    #[error(
        "the authority's answer to the funding is not its tokens: {0}; the funding is kept, to be handed in again"
    )]
    NotTheFundingsTokens(String),
}

/// What the authority made of a core funding handed in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoreFunded {
    /// Tokens of this value issued to the device.
    Funded(u64),
    /// Never issuable (`reason`): refunded by `payout`, which the core pays once to the owner of
    /// the funding's first input.
    Refunded {
        reason: String,
        payout: Box<SpecieTransaction>,
    },
}

/// Where a device is kept: a file of its own, or inside a core wallet file (one file for the
/// owner's coins, accounts and device).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceStore {
    File(PathBuf),
    Wallet(PathBuf),
}

impl DeviceStore {
    /// The file that holds the device, whichever kind.
    pub fn path(&self) -> &Path {
        match self {
            DeviceStore::File(path) | DeviceStore::Wallet(path) => path,
        }
    }
}

/// A device, its file locked while this value lives.
pub struct DeviceFile {
    store: DeviceStore,
    _lock: WalletLock,
    pub device: Device,
}

impl DeviceFile {
    /// The file that holds the device (its own, or the wallet it is kept in).
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// The wallet file the device is kept in, if it is kept in one.
    pub fn wallet(&self) -> Option<&Path> {
        match &self.store {
            DeviceStore::Wallet(path) => Some(path),
            DeviceStore::File(_) => None,
        }
    }

    fn lock(store: &DeviceStore) -> Result<WalletLock, DeviceCommandError> {
        let path = store.path();
        Ok(WalletLock::acquire(path, LOCK_WAIT_MS, || {
            eprintln!("waiting for another command on {}", path.display());
        })?)
    }

    /// Creates a device with a fresh secret seed (refuses to replace one).
    pub fn create(store: &DeviceStore, limits: DeviceLimits, now_ms: u64) -> Result<DeviceFile, DeviceCommandError> {
        let lock = Self::lock(store)?;
        let mut seed = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut seed);
        let device = Device::new(seed, limits, now_ms);
        match store {
            DeviceStore::File(path) => write_file_atomically(path, &device.encode(), false)?,
            DeviceStore::Wallet(path) => {
                let mut wallet = WalletFile::load(path)?;
                if wallet.offline_device().is_some() {
                    return Err(DeviceCommandError::BadString {
                        what: "wallet",
                        reason: format!("{} keeps a device already", path.display()),
                    });
                }
                wallet.set_offline_device(device.encode());
                WalletFile::save(path, &wallet)?;
            }
        }
        Ok(DeviceFile {
            store: store.clone(),
            _lock: lock,
            device,
        })
    }

    /// Opens and locks the device kept in `store`.
    pub fn open(store: &DeviceStore) -> Result<DeviceFile, DeviceCommandError> {
        let lock = Self::lock(store)?;
        let path = store.path();
        let bytes = match store {
            DeviceStore::File(path) => std::fs::read(path).map_err(|source| DeviceCommandError::Read {
                path: path.to_owned(),
                source,
            })?,
            DeviceStore::Wallet(path) => WalletFile::load(path)?
                .offline_device()
                .ok_or_else(|| DeviceCommandError::BadString {
                    what: "wallet",
                    reason: format!(
                        "{} keeps no offline device: create one with `specie wallet offline create`",
                        path.display()
                    ),
                })?
                .to_vec(),
        };
        let device = Device::decode(&bytes).map_err(|source| DeviceCommandError::NotADevice {
            path: path.to_owned(),
            source,
        })?;
        Ok(DeviceFile {
            store: store.clone(),
            _lock: lock,
            device,
        })
    }

    /// Writes the device back, atomically. In a wallet, the wallet is read again first, so what
    /// this command changed in it meanwhile (coins of a funding) is kept.
    pub fn save(&self) -> Result<(), DeviceCommandError> {
        match &self.store {
            DeviceStore::File(path) => Ok(write_file_atomically(path, &self.device.encode(), true)?),
            DeviceStore::Wallet(path) => {
                let mut wallet = WalletFile::load(path)?;
                wallet.set_offline_device(self.device.encode());
                Ok(WalletFile::save(path, &wallet)?)
            }
        }
    }
}

impl DeviceFile {
    /// Beside the device: the authority's signed key ring, what payments are checked against
    /// offline and whose signer the device trusts from then on.
    fn ring_path(&self) -> PathBuf {
        let mut name = self.path().as_os_str().to_owned();
        name.push(".ring");
        PathBuf::from(name)
    }

    /// The signed key ring kept beside the device (its signature checked again), if any.
    pub fn kept_ring(&self) -> Result<Option<SignedKeyRing>, DeviceCommandError> {
        let path = self.ring_path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(DeviceCommandError::Read { path, source }),
        };
        let bad = |reason: String| DeviceCommandError::Ring {
            path: path.clone(),
            reason,
        };
        let bytes = hex::decode(text.trim()).map_err(|e| bad(format!("not hex: {e}")))?;
        let ring = specie_codec::decode_bounded(
            "signed key ring",
            &bytes,
            SIGNED_KEY_RING_BYTES_MAX,
            SignedKeyRing::decode_from,
        )
        .map_err(|e| bad(e.to_string()))?;
        ring.check(None).map_err(|e| bad(e.to_string()))?;
        Ok(Some(ring))
    }

    /// The kept ring's key ring, for the commands that check payments offline.
    pub fn ring(&self) -> Result<KeyRing, DeviceCommandError> {
        self.kept_ring()?
            .map(|signed| signed.ring)
            .ok_or_else(|| DeviceCommandError::Ring {
                path: self.ring_path(),
                reason: "no key ring yet: enrol the device first".into(),
            })
    }

    /// Keeps `ring` beside the device (the client that fetched it checked its signer).
    pub fn keep_ring(&self, ring: &SignedKeyRing) -> Result<(), DeviceCommandError> {
        let mut bytes = Vec::new();
        ring.encode_to(&mut bytes);
        Ok(write_file_atomically(
            &self.ring_path(),
            hex::encode(bytes).as_bytes(),
            true,
        )?)
    }

    /// A client of the authority at `url` that takes key rings signed only by the authority this
    /// device trusts: the signer of the ring it keeps, or before it keeps one `authority_key`
    /// (given out of band), or else whoever answers first (trust on first use).
    pub fn authority_client(
        &self,
        url: &str,
        operator_token: Option<String>,
        authority_key: Option<PublicKey>,
    ) -> Result<AuthorityClient, DeviceCommandError> {
        let kept = self.kept_ring()?.map(|ring| ring.authority);
        if let (Some(kept), Some(given)) = (kept, authority_key) {
            if kept != given {
                return Err(DeviceCommandError::Ring {
                    path: self.ring_path(),
                    reason: format!(
                        "the device trusts authority key {}, not the {} given",
                        hex::encode(kept),
                        hex::encode(given)
                    ),
                });
            }
        }
        let mut client = AuthorityClient::new(url, operator_token);
        client.trusted = kept.or(authority_key);
        Ok(client)
    }
}

/// A payment request as a string: amount, the payee's key certificate, the nonce.
pub fn request_string(request: &PaymentRequest) -> String {
    let mut bytes = request.amount.to_le_bytes().to_vec();
    request.certificate.encode_to(&mut bytes);
    bytes.extend_from_slice(&request.nonce);
    format!("{REQUEST_PREFIX}{}", hex::encode(bytes))
}

pub fn parse_request(text: &str) -> Result<PaymentRequest, DeviceCommandError> {
    let bytes = prefixed_hex("payment request", text, REQUEST_PREFIX, 8 + CERTIFIED_KEY_BYTES + 16)?;
    decoded("payment request", &bytes, 8 + CERTIFIED_KEY_BYTES + 16, |reader| {
        Ok(PaymentRequest {
            amount: reader.read_u64("amount")?,
            certificate: KeyCertificate::decode_from(reader)?,
            nonce: reader.read_array("nonce")?,
        })
    })
}

/// A payment as a string: the request's nonce, then the tokens.
pub fn payment_string(nonce: &[u8; 16], tokens: &[Token]) -> String {
    let mut bytes = nonce.to_vec();
    bytes.push(tokens.len() as u8);
    for token in tokens {
        token.encode_to(&mut bytes);
    }
    format!("{PAYMENT_PREFIX}{}", hex::encode(bytes))
}

pub fn parse_payment(text: &str) -> Result<([u8; 16], Vec<Token>), DeviceCommandError> {
    let bytes_max = 16 + 1 + TOKENS_PER_PAYMENT_MAX * TOKEN_BYTES_MAX;
    let bytes = prefixed_hex("payment", text, PAYMENT_PREFIX, bytes_max)?;
    decoded("payment", &bytes, bytes_max, |reader| {
        let nonce = reader.read_array("nonce")?;
        let count = reader.read_u8_count("token count", TOKENS_PER_PAYMENT_MAX as u64, 146)?;
        let tokens = (0..count)
            .map(|_| Token::decode_from(reader))
            .collect::<Result<_, _>>()?;
        Ok((nonce, tokens))
    })
}

fn prefixed_hex(what: &'static str, text: &str, prefix: &str, bytes_max: usize) -> Result<Vec<u8>, DeviceCommandError> {
    let bad = |reason: String| DeviceCommandError::BadString { what, reason };
    let body = text
        .trim()
        .strip_prefix(prefix)
        .ok_or_else(|| bad(format!("does not start with {prefix}")))?;
    if body.len() > 2 * bytes_max {
        return Err(bad(format!("longer than {bytes_max} bytes")));
    }
    hex::decode(body).map_err(|error| bad(format!("not hex: {error}")))
}

fn decoded<T>(
    what: &'static str,
    bytes: &[u8],
    bytes_max: usize,
    decode: impl FnOnce(&mut Reader<'_>) -> Result<T, DecodeError>,
) -> Result<T, DeviceCommandError> {
    specie_codec::decode_bounded(what, bytes, bytes_max, decode).map_err(|error| DeviceCommandError::BadString {
        what,
        reason: error.to_string(),
    })
}

/// The amount of the offline funding `transaction` (hex), if it is one.
fn funding_amount(transaction: &str) -> Option<u64> {
    let bytes = hex::decode(transaction).ok()?;
    match SpecieTransaction::decode_exact(&bytes).ok()? {
        SpecieTransaction::BridgeFunding(funding) => Some(funding.amount),
        _ => None,
    }
}

/// Checks that `issuances` are the tokens of a funding of `amount` for `owners` (hex): one to
/// each owner, in order, worth `amount` together under `ring`. Anything else (an earlier
/// funding's tokens to older keys of the device, some of them only) does not end the funding.
fn check_issued(
    issuances: &[Issuance],
    owners: &[String],
    amount: Option<u64>,
    ring: &KeyRing,
) -> Result<(), DeviceCommandError> {
    let given: Vec<String> = issuances
        .iter()
        .map(|issuance| hex::encode(issuance.first_owner))
        .collect();
    if given != owners {
        return Err(DeviceCommandError::NotTheFundingsTokens(format!(
            "the authority issued {} tokens, not one to each of the funding's {} keys",
            issuances.len(),
            owners.len()
        )));
    }
    let value = issuances.iter().try_fold(0u64, |sum, issuance| {
        let (denomination, _) = ring.issuing_key(&issuance.issuing_key)?;
        sum.checked_add(denomination)
    });
    match (value, amount) {
        (Some(value), Some(amount)) if value == amount => Ok(()),
        (value, amount) => Err(DeviceCommandError::NotTheFundingsTokens(format!(
            "the tokens are worth {value:?}, not the funding's {amount:?}"
        ))),
    }
}

/// What a round of deposits came to.
#[derive(Debug, Default)]
pub struct Deposited {
    pub paid: u64,
    pub refused: u64,
    /// Signed payouts for the online core (deposits defunded to a core address), each checked
    /// against its deposit. Their deposits stay pending until the caller hands each payout on
    /// and calls `Device::paid_out`.
    pub payouts: Vec<PaidOut>,
}

/// A defunded deposit's payout, and the deposit's link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PaidOut {
    pub link: Link,
    pub payout: BridgePayout,
}

/// Checks that `payout` pays what `owed` says a defund is owed (the token's serial, the defund
/// address's witness program commitment, the token's value), made by the bridge key `bridge`
/// with a valid signature.
pub fn check_deposit_payout(
    payout: &BridgePayout,
    bridge: &PublicKey,
    owed: ([u8; 16], [u8; 32], u64),
) -> Result<(), DeviceCommandError> {
    let (serial, address, value) = owed;
    check_payout(
        "of a deposit",
        payout,
        bridge,
        serial,
        witness_program_commitment(&address),
        value,
    )
}

/// Checks that `payout` is the refund of the core funding `funding` (hex of its encoding, as
/// kept beside the device): the funding's bridge key's, validly signed, for the refund serial of
/// its marker, paying its amount to its first input's owner.
pub fn check_refund_payout(payout: &SpecieTransaction, funding: &str) -> Result<(), DeviceCommandError> {
    let not_owed = |reason: &str| DeviceCommandError::NotOwed {
        what: "refunding the funding",
        reason: reason.to_string(),
    };
    let SpecieTransaction::BridgePayout(payout) = payout else {
        return Err(not_owed("not an offline payout"));
    };
    let funding = hex::decode(funding)
        .ok()
        .and_then(|bytes| SpecieTransaction::decode_exact(&bytes).ok());
    let Some(SpecieTransaction::BridgeFunding(funding)) = funding else {
        return Err(not_owed("the kept funding is not an offline funding"));
    };
    let Some(first) = funding.inputs.first() else {
        return Err(not_owed("the funding has no input to refund"));
    };
    let serial = refund_serial(&funding.marker().0);
    let address = first.data.witness_program_commitment;
    check_payout(
        "refunding the funding",
        payout,
        &funding.authority,
        serial,
        address,
        funding.amount,
    )
}

fn check_payout(
    what: &'static str,
    payout: &BridgePayout,
    bridge: &PublicKey,
    serial: [u8; 16],
    address: [u8; 32],
    amount: u64,
) -> Result<(), DeviceCommandError> {
    let not_owed = |reason: String| DeviceCommandError::NotOwed { what, reason };
    if payout.authority != *bridge {
        return Err(not_owed(format!(
            "made by {}, not the authority's bridge key {}",
            hex::encode(payout.authority),
            hex::encode(bridge)
        )));
    }
    if !payout.signature_valid() {
        return Err(not_owed("its signature does not verify".into()));
    }
    if (payout.serial, payout.address(), payout.amount()) != (serial, address, amount) {
        return Err(not_owed(format!(
            "it pays {} to {} for serial {}, not {amount} to {} for serial {}",
            payout.amount(),
            hex::encode(payout.address()),
            hex::encode(payout.serial),
            hex::encode(address),
            hex::encode(serial)
        )));
    }
    Ok(())
}

/// The offline authority's API, as a device and the operator call it. The authority may be one
/// process or a cluster's Raft group: `url` may list the group's replicas, comma-separated; a
/// replica that does not lead sends the call to the leader, and a replica that does not answer
/// is passed over for the next ([`Replicas`]).
pub struct AuthorityClient {
    replicas: Replicas,
    /// The only authority key whose signed key ring the client takes (none: any that verifies).
    trusted: Option<PublicKey>,
}

impl AuthorityClient {
    pub fn new(url: &str, operator_token: Option<String>) -> AuthorityClient {
        AuthorityClient {
            replicas: Replicas::new(url, LeaderSearch::patient()).with_bearer(operator_token),
            trusted: None,
        }
    }

    fn failed(&self, reason: impl Into<String>) -> DeviceCommandError {
        DeviceCommandError::Authority {
            url: self.replicas.urls(),
            reason: reason.into(),
        }
    }

    /// One call, leader search included: every call is safe to send again (the authority answers
    /// a deposit or a funding sent again as it did the first time).
    fn call<T: DeserializeOwned>(&self, method: &str, path: &str, body: Body<'_>) -> Result<T, DeviceCommandError> {
        self.replicas
            .call_json(method, path, body)
            .map_err(|error: CallError| self.failed(error.to_string()))
    }

    fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, DeviceCommandError> {
        self.call("GET", path, Body::Empty)
    }

    fn post<T: DeserializeOwned>(&self, path: &str, request: &impl Serialize) -> Result<T, DeviceCommandError> {
        let answer = self.post_bytes(path, request)?;
        serde_json::from_slice(&answer).map_err(|error| self.failed(format!("not JSON of the expected shape: {error}")))
    }

    /// The answer to a POST of `request`, as bytes, for a caller that reads it its own way.
    fn post_bytes(&self, path: &str, request: &impl Serialize) -> Result<Vec<u8>, DeviceCommandError> {
        let request = serde_json::to_value(request).expect("a request body serializes");
        self.replicas
            .call::<NoMore>("POST", path, Body::Json(&request))
            .map_err(|error| self.failed(error.to_string()))
    }

    /// The authority's key ring, signed by the authority the client trusts.
    pub fn signed_ring(&self) -> Result<SignedKeyRing, DeviceCommandError> {
        let body: KeysBody = self.get(KEYS_PATH)?;
        let bytes = hex::decode(&body.signed_ring).map_err(|e| self.failed(e.to_string()))?;
        let ring = specie_codec::decode_bounded(
            "signed key ring",
            &bytes,
            SIGNED_KEY_RING_BYTES_MAX,
            SignedKeyRing::decode_from,
        )
        .map_err(|e| self.failed(e.to_string()))?;
        ring.check(self.trusted.as_ref()).map_err(|error| match error {
            KeyError::OtherAuthority { expected, found } => self.failed(format!(
                "{error}: signed by {}, the device trusts {}",
                hex::encode(found),
                hex::encode(expected)
            )),
            other => self.failed(other.to_string()),
        })?;
        Ok(ring)
    }

    pub fn ring(&self) -> Result<KeyRing, DeviceCommandError> {
        Ok(self.signed_ring()?.ring)
    }

    /// Registers the device's identity (operator) and certifies `keys` fresh one-time keys.
    pub fn enrol(&self, device: &mut Device, keys: usize) -> Result<(), DeviceCommandError> {
        let identity = hex::encode(device.identity());
        let _: RegisteredBody = self.post(REGISTER_PATH, &RegisterRequest { identity })?;
        self.certify(device, keys)
    }

    /// Certifies `keys` fresh one-time keys of the device.
    pub fn certify(&self, device: &mut Device, keys: usize) -> Result<(), DeviceCommandError> {
        let bindings = device
            .bindings(keys)
            .iter()
            .map(|binding| {
                let mut bytes = Vec::new();
                binding.encode_to(&mut bytes);
                hex::encode(bytes)
            })
            .collect();
        let body: CertifiedBody = self.post(CERTIFY_PATH, &CertifyRequest { bindings })?;
        let certificates = body
            .certificates
            .iter()
            .map(|hex_text| {
                let bytes = hex::decode(hex_text).map_err(|e| self.failed(e.to_string()))?;
                specie_codec::decode_bounded("certificate", &bytes, CERTIFIED_KEY_BYTES, KeyCertificate::decode_from)
                    .map_err(|e| self.failed(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        device.certified(&certificates);
        Ok(())
    }

    /// The bridge key the online core banks for (what an offline funding names): the key the
    /// authority's key ring is signed by.
    pub fn bridge(&self) -> Result<PublicKey, DeviceCommandError> {
        Ok(self.signed_ring()?.authority)
    }

    /// How many tokens the authority issues for a funding of `amount` (its split into the
    /// current period's denominations, as the ring announces them): refused, before anything is
    /// paid, if that is more than one funding may issue ([`TOKENS_PER_FUNDING_MAX`]), since the
    /// authority could never issue such a funding.
    pub fn funding_split(&self, amount: u64) -> Result<usize, DeviceCommandError> {
        let ring = self.ring()?;
        let period = ring.lifecycle().current_period;
        let mut values: Vec<u64> = ring
            .issuing_keys()
            .filter(|key| ring.key_period(key) == Some(period))
            .filter_map(|key| ring.issuing_key(key).map(|(denomination, _)| denomination))
            .collect();
        values.sort_unstable();
        values.dedup();
        let denominations = Denominations::new(values)
            .map_err(|error| self.failed(format!("its key ring's denominations: {error}")))?;
        let tokens = denominations.split(amount).len();
        if tokens > TOKENS_PER_FUNDING_MAX {
            let largest = denominations.values().last().copied().unwrap_or(1);
            return Err(self.failed(format!(
                "the offline authority issues at most {TOKENS_PER_FUNDING_MAX} tokens per funding and {amount} \
                 makes {tokens} of its denominations: fund at most {} at a time (nothing was paid)",
                largest.saturating_mul(TOKENS_PER_FUNDING_MAX as u64)
            )));
        }
        Ok(tokens)
    }

    /// Hands in an offline funding the core confirmed (`transaction`, hex) for `owners`; the
    /// authority checks the core and issues the tokens, which the device checks and holds. A
    /// funding whose owners could never be issued tokens is refunded instead: the payout for the
    /// core that pays it back to its first input's owner.
    pub fn fund_from_core(
        &self,
        device: &mut Device,
        transaction: &str,
        owners: &[PublicKey],
    ) -> Result<CoreFunded, DeviceCommandError> {
        let owners: Vec<String> = owners.iter().map(hex::encode).collect();
        let request = FundFromCoreRequest {
            transaction: transaction.to_string(),
            owners: owners.clone(),
        };
        let answer: FundedBody = self.post(FUND_FROM_CORE_PATH, &request)?;
        if let Some(refunded) = answer.refunded {
            let reason = refunded.reason;
            let payout = hex::decode(&refunded.payout)
                .ok()
                .and_then(|bytes| SpecieTransaction::decode_exact(&bytes).ok())
                .filter(|payout| matches!(payout, SpecieTransaction::BridgePayout(_)))
                .ok_or_else(|| self.failed("a refund without a payout"))?;
            return Ok(CoreFunded::Refunded {
                reason,
                payout: Box::new(payout),
            });
        }
        let issuances = self.issuances(&answer.issuances.unwrap_or_default())?;
        let ring = self.ring()?;
        check_issued(&issuances, &owners, funding_amount(transaction), &ring)?;
        Ok(CoreFunded::Funded(device.receive_issued(&issuances, &ring)?))
    }

    /// Funds the device with `amount` on the operator's word (an authority started with
    /// `--allow-operator-funding`, a trial without a core); the tokens are checked and held.
    pub fn fund(&self, device: &mut Device, amount: u64, split: usize) -> Result<u64, DeviceCommandError> {
        let owners = device.funding_owners(split)?.iter().map(hex::encode).collect();
        let mut id = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut id);
        let request = FundRequest {
            id: hex::encode(id),
            amount,
            owners,
        };
        let answer: FundedBody = self.post(FUND_PATH, &request)?;
        let issuances = self.issuances(&answer.issuances.unwrap_or_default())?;
        Ok(device.receive_issued(&issuances, &self.ring()?)?)
    }

    fn issuances(&self, texts: &[String]) -> Result<Vec<Issuance>, DeviceCommandError> {
        texts
            .iter()
            .map(|hex_text| {
                let bytes = hex::decode(hex_text).map_err(|e| self.failed(e.to_string()))?;
                specie_codec::decode_bounded("issuance", &bytes, ISSUANCE_BYTES, Issuance::decode_from)
                    .map_err(|e| self.failed(e.to_string()))
            })
            .collect()
    }

    /// Sends every pending deposit of the device (the file saved first by the caller) and takes
    /// the answers: the values paid and refused, and the payouts for the core of those paid out
    /// (whose deposits stay pending until the caller hands them on: module docs).
    pub fn deposit_pending(&self, device: &mut Device) -> Result<Deposited, DeviceCommandError> {
        let signed = self.signed_ring()?;
        let mut deposited = Deposited::default();
        for deposit in device.pending().to_vec() {
            let hex_of = |encode: &dyn Fn(&mut Vec<u8>)| {
                let mut bytes = Vec::new();
                encode(&mut bytes);
                hex::encode(bytes)
            };
            let request = DepositRequest {
                token: hex_of(&|out| deposit.token.encode_to(out)),
                statement: hex_of(&|out| deposit.statement.encode_to(out)),
                instruction: hex_of(&|out| deposit.instruction.encode_to(out)),
            };
            let answer = self.post_bytes(DEPOSIT_PATH, &request)?;
            let answer: DepositBody = serde_json::from_slice(&answer).map_err(|error| {
                self.failed(format!(
                    "an answer to a deposit that says neither how it was paid nor why it was refused ({error}); \
                     the deposit is kept, to be sent again"
                ))
            })?;
            self.take_answer(device, &deposit, &answer, &signed, &mut deposited)?;
        }
        Ok(deposited)
    }

    /// Takes the authority's `answer` to `deposit` (module docs): re-issued tokens checked and
    /// held, a refusal ends it, a defund's payout checked and returned, anything else kept.
    fn take_answer(
        &self,
        device: &mut Device,
        deposit: &Deposit,
        answer: &DepositBody,
        signed: &SignedKeyRing,
        deposited: &mut Deposited,
    ) -> Result<(), DeviceCommandError> {
        let link = deposit.link();
        match &answer.outcome {
            OutcomeBody::Reissued { issuances } => {
                let issuances = self.issuances(issuances)?;
                if issuances.is_empty() {
                    return Err(self.failed("a deposit answered as re-issued with no tokens; it is kept"));
                }
                device.deposited(&link, &issuances, &signed.ring)?;
                deposited.paid += deposit.value;
            }
            OutcomeBody::Defunded { .. } => {
                let payout = self.payout(answer.payout.as_deref().unwrap_or_default())?;
                let owed = device
                    .owed_payout(&link)
                    .ok_or_else(|| self.failed("a deposit that is not a defund answered with a payout; it is kept"))?;
                check_deposit_payout(&payout, &signed.authority, owed)?;
                deposited.paid += deposit.value;
                deposited.payouts.push(PaidOut { link, payout });
            }
            // Refused for good (another branch of the token was paid first, or its owner
            // deposited it before with another instruction): the authority's evidence names who
            // owes it.
            OutcomeBody::DoubleSpent { .. } | OutcomeBody::AlreadyDeposited => {
                device.deposited(&link, &[], &signed.ring)?;
                deposited.refused += deposit.value;
            }
        }
        Ok(())
    }

    fn payout(&self, hex_text: &str) -> Result<BridgePayout, DeviceCommandError> {
        let bytes = hex::decode(hex_text).map_err(|e| self.failed(e.to_string()))?;
        match SpecieTransaction::decode_exact(&bytes) {
            Ok(SpecieTransaction::BridgePayout(payout)) => Ok(payout),
            _ => Err(self.failed("a payout that is not an offline payout")),
        }
    }

    /// (Operator) begins the next period; the new key ring.
    pub fn rotate(&self) -> Result<KeysBody, DeviceCommandError> {
        self.call("POST", ROTATE_PATH, Body::Empty)
    }

    /// (Operator) revokes the issuing key `key` (hex); the new key ring.
    pub fn revoke_key(&self, key: &str) -> Result<KeysBody, DeviceCommandError> {
        self.post(REVOKE_KEY_PATH, &RevokeKeyRequest { key: key.to_string() })
    }

    /// The authority's books.
    pub fn books(&self) -> Result<BooksBody, DeviceCommandError> {
        self.get(BOOKS_PATH)
    }

    /// The authority's books as the supply report reads them, under the bridge key the core
    /// knows it by.
    pub fn mode_books(&self) -> Result<specie_api::supply::ModeBooks, DeviceCommandError> {
        let keys: KeysBody = self.get(KEYS_PATH)?;
        let name = format!("the offline authority at {}", self.replicas.urls());
        Ok(crate::supply::mode_books(&self.books()?, name, &keys.bridge))
    }

    /// Fetches the revocations the device has not seen.
    pub fn sync(&self, device: &mut Device, now_ms: u64) -> Result<usize, DeviceCommandError> {
        let from = device.revocations_seen();
        let body: RevocationsBody = self.get(&format!("{REVOCATIONS_PATH}?from={from}"))?;
        let serials = body
            .serials
            .iter()
            .map(|text| {
                let bytes = hex::decode(text).map_err(|e| self.failed(e.to_string()))?;
                bytes.try_into().map_err(|_| self.failed("a serial is not 16 bytes"))
            })
            .collect::<Result<Vec<[u8; 16]>, _>>()?;
        device.synced(&serials, now_ms);
        Ok(serials.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use specie_offline::SigningKey;
    use specie_offline_authority::{AuthorityKeys, Funding, Input, OfflineAuthority, Reply};
    use specie_transaction::{Output, Txid};
    use specie_wallet::{PaidOutput, PaymentString, Wallet};

    fn bridge() -> SigningKey {
        SigningKey::from_bytes(&[5; 32])
    }

    /// A defund's payout is taken only if it pays the token's value to the defund address, for
    /// the token's serial, signed by the trusted bridge key.
    #[test]
    fn a_deposits_payout_must_pay_what_the_deposit_is_owed() {
        let key = bridge();
        let trusted = key.verifying_key().to_bytes();
        let owed = ([1; 16], [2; 32], 20);
        let paying = |by: &SigningKey, serial, address: [u8; 32], amount| {
            BridgePayout::new_signed(by, serial, witness_program_commitment(&address), amount)
        };
        check_deposit_payout(&paying(&key, [1; 16], [2; 32], 20), &trusted, owed).unwrap();
        for wrong in [
            paying(&SigningKey::from_bytes(&[6; 32]), [1; 16], [2; 32], 20),
            paying(&key, [9; 16], [2; 32], 20),
            paying(&key, [1; 16], [3; 32], 20),
            paying(&key, [1; 16], [2; 32], 19),
            BridgePayout::new_signed(&key, [1; 16], [2; 32], 20), // the key, not its commitment
        ] {
            let error = check_deposit_payout(&wrong, &trusted, owed).unwrap_err();
            assert!(matches!(error, DeviceCommandError::NotOwed { .. }), "{error}");
        }
        let mut forged = paying(&key, [1; 16], [2; 32], 20);
        forged.signature[3] ^= 1;
        assert!(check_deposit_payout(&forged, &trusted, owed)
            .unwrap_err()
            .to_string()
            .contains("signature"));
    }

    /// A refund is taken back only if it is the funding's refund: its amount, to its first
    /// input's owner, for the refund serial of its marker, by the bridge key it paid.
    #[test]
    fn a_refund_must_be_the_fundings_refund() {
        let mut rng = rand::thread_rng();
        let mut wallet = Wallet::new("usd", false, &mut rng).unwrap();
        let address = wallet.latest_address().unwrap();
        let output = Output {
            witness_program_commitment: address.witness_program_commitment(),
            value: 100,
        };
        let payment = PaymentString::new(Txid([3; 32]), vec![PaidOutput { index: 0, output }]);
        let id = payment.created_outputs()[0].uhs_id;
        wallet.import_payment(&payment, &[id]).unwrap();
        let key = bridge();
        let funding = wallet
            .build_bridge_funding(key.verifying_key().to_bytes(), [7; 32], 60, &mut rng)
            .unwrap();
        let kept = hex::encode(specie_codec::Encode::encode(&funding));
        let serial = refund_serial(&funding.marker().unwrap().0);
        let commitment = address.witness_program_commitment();
        let refund = |by: &SigningKey, serial, amount| {
            SpecieTransaction::BridgePayout(BridgePayout::new_signed(by, serial, commitment, amount))
        };
        check_refund_payout(&refund(&key, serial, 60), &kept).unwrap();
        for wrong in [
            refund(&SigningKey::from_bytes(&[6; 32]), serial, 60),
            refund(&key, [0; 16], 60),
            refund(&key, serial, 59),
        ] {
            assert!(check_refund_payout(&wrong, &kept).is_err());
        }
        assert!(check_refund_payout(&funding, &kept).is_err(), "not a payout");
        assert!(check_refund_payout(&refund(&key, serial, 60), "00").is_err());
    }

    /// The keys of the authority the device's tests run.
    fn keys() -> AuthorityKeys {
        AuthorityKeys::deterministic("device-answers", Denominations::default(), 1)
    }

    /// An authority on the simulator's host, and a device of it holding `amount`.
    fn world(amount: u64) -> (specie_host::SimHost<OfflineAuthority>, AuthorityKeys, Device) {
        let mut host = specie_host::SimHost::start("offline-authority", move || OfflineAuthority::new(keys()));
        let mut device = Device::new([1; 32], DeviceLimits::default(), 0);
        let identity = device.identity();
        call(&mut host, |ticket| Input::Register { ticket, identity });
        let bindings = device.bindings(8);
        let Reply::Certified { certificates } = call(&mut host, |ticket| Input::Certify { ticket, bindings }) else {
            panic!("certification refused");
        };
        device.certified(&certificates);
        let owners = device
            .funding_owners(Denominations::default().split(amount).len())
            .unwrap();
        let funding = Funding {
            id: [1; 32],
            amount,
            owners,
        };
        let Reply::Funded { issuances } = call(&mut host, |ticket| Input::Fund { ticket, funding }) else {
            panic!("funding refused");
        };
        device.receive_issued(&issuances, &keys().ring()).unwrap();
        (host, keys(), device)
    }

    fn call(host: &mut specie_host::SimHost<OfflineAuthority>, input: impl FnOnce(u64) -> Input) -> Reply {
        host.handle(0, input(1))
            .into_iter()
            .find_map(|event| match event {
                specie_host::SimEvent::Reply { reply, .. } => Some(reply),
                _ => None,
            })
            .expect("an answer")
    }

    /// The authority's answer to `deposit`, as its API writes it (a defund's payout signed by its
    /// bridge key through the core's format).
    fn answer(host: &mut specie_host::SimHost<OfflineAuthority>, deposit: &Deposit) -> DepositBody {
        let input = |ticket| Input::Deposit {
            ticket,
            token: Box::new(deposit.token.clone()),
            statement: deposit.statement,
            instruction: deposit.instruction.clone(),
        };
        match call(host, input) {
            Reply::Deposited(outcome) => {
                specie_offline_service::deposit_body(&outcome, &specie_wallet::CORE_FORMAT, &keys().bridge)
            }
            other => panic!("deposit: {other:?}"),
        }
    }

    /// A funding ends only on its own tokens: one to each of its keys, worth its amount.
    #[test]
    fn a_funding_ends_only_on_its_own_tokens() {
        let (mut host, keys, mut device) = world(25);
        let ring = keys.ring();
        let owners = device.funding_owners(2).unwrap();
        let hex_owners: Vec<String> = owners.iter().map(hex::encode).collect();
        let funding = Funding {
            id: [2; 32],
            amount: 25,
            owners,
        };
        let Reply::Funded { issuances } = call(&mut host, |ticket| Input::Fund { ticket, funding }) else {
            panic!("funding refused");
        };
        check_issued(&issuances, &hex_owners, Some(25), &ring).unwrap();
        let earlier: Vec<Issuance> = device.held().iter().map(|held| held.token.issuance).collect();
        for (given, amount) in [
            (&earlier, Some(25)),
            (&issuances[..1].to_vec(), Some(25)),
            (&issuances, Some(30)),
        ] {
            let error = check_issued(given, &hex_owners, amount, &ring).unwrap_err();
            assert!(matches!(error, DeviceCommandError::NotTheFundingsTokens(_)), "{error}");
        }
    }

    /// A deposit ends only on an answer that pays it or refuses it; a defund's checked payout
    /// leaves it pending until it is handed on.
    #[test]
    fn a_deposit_ends_only_on_an_answer_that_pays_or_refuses_it() {
        let (mut host, keys, mut device) = world(25); // 20 + 5
        let signed = SignedKeyRing::sign(keys.ring(), &keys.bridge);
        let client = AuthorityClient::new("http://127.0.0.1:9", None); // never called here
        let deposits = device.deposit_all([0; 32], false);
        let mut deposited = Deposited::default();
        // (Answers that are no deposit body at all are refused as they are read: `http_api`.)
        let defunded = OutcomeBody::Defunded {
            serial: "00".into(),
            address: "00".into(),
            amount: 20,
        };
        for junk in [
            DepositBody {
                outcome: OutcomeBody::Reissued { issuances: vec![] },
                payout: None,
            },
            DepositBody {
                outcome: defunded,
                payout: None,
            },
        ] {
            assert!(client
                .take_answer(&mut device, &deposits[0], &junk, &signed, &mut deposited)
                .is_err());
        }
        // The other deposit's answer is not this one's.
        let other = answer(&mut host, &deposits[1]);
        assert!(client
            .take_answer(&mut device, &deposits[0], &other, &signed, &mut deposited)
            .is_err());
        assert_eq!((device.pending().len(), device.balance(), deposited.paid), (2, 0, 0));
        for deposit in &deposits {
            let real = answer(&mut host, deposit);
            client
                .take_answer(&mut device, deposit, &real, &signed, &mut deposited)
                .unwrap();
        }
        assert_eq!((device.pending().len(), device.balance(), deposited.paid), (0, 25, 25));

        // A defund: its payout checked and returned, the deposit pending until handed on.
        let deposits = device.deposit_all([3; 32], true);
        let mut deposited = Deposited::default();
        for deposit in &deposits {
            let real = answer(&mut host, deposit);
            client
                .take_answer(&mut device, deposit, &real, &signed, &mut deposited)
                .unwrap();
        }
        assert_eq!((deposited.paid, deposited.payouts.len()), (25, 2));
        assert_eq!(device.pending().len(), 2, "pending until handed on");
        let other_bridge = SignedKeyRing::sign(keys.ring(), &SigningKey::from_bytes(&[6; 32]));
        let again = answer(&mut host, &deposits[0]);
        assert!(client
            .take_answer(
                &mut device,
                &deposits[0],
                &again,
                &other_bridge,
                &mut Deposited::default()
            )
            .is_err());
        for paid in &deposited.payouts {
            assert!(device.paid_out(&paid.link));
        }
        assert!(device.pending().is_empty());
    }
}
