//! A process's credentials, as files in the cluster's PKI directory: the CA certificate, its own
//! certificate and key, and a sentinel's attestation key. [`ensure_pki`] makes whatever is
//! missing (what `specie cluster up` runs); the processes only read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use secp256k1::Keypair;
use specie_codec::{Decode, Encode};
use specie_fastpay::{Committee, SigningKey};
use specie_log::secret::SecretFileError;
use specie_transaction::signing::xonly_bytes;
use specie_wire::pki::{CertificateAuthority, PkiError, PROCESS_VALIDITY};
use specie_wire::{TlsCredentials, TlsError, Transport};

use crate::identity::{every_identity, Identity};
use crate::topology::{Topology, TransportMode};

pub const CA_CERT_FILE: &str = "ca.crt";
pub const CA_KEY_FILE: &str = "ca.key";

/// Why a process's credentials could not be read, checked or made.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error(transparent)]
    Secret(#[from] SecretFileError),
    #[error("cannot {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not text")]
    NotText { path: PathBuf },
    #[error("the credentials of {identity} in {dir}: {source}")]
    Tls {
        identity: Identity,
        dir: PathBuf,
        #[source]
        source: TlsError,
    },
    #[error("{cert} names '{named}', but this process is {identity}")]
    WrongIdentity {
        cert: PathBuf,
        named: String,
        identity: Identity,
    },
    #[error("{path} does not hold a 32-byte secret key in hex")]
    BadAttestationKey { path: PathBuf },
    #[error("{path} does not match the attestation_key the cluster file lists for sentinel '{sentinel}'")]
    AttestationKeyMismatch { path: PathBuf, sentinel: String },
    #[error("{path} does not hold a 32-byte secret (key or seed) in hex")]
    BadAuthorityKey { path: PathBuf },
    #[error(
        "{path} is not seat {authority}'s key in the committee's current epoch {epoch} (fastpay_committee.members, \
         or the last of fastpay_committee.records, in the cluster file); if `specie cluster rotate-authority` was \
         interrupted, run it again"
    )]
    AuthorityKeyMismatch { path: PathBuf, authority: u16, epoch: u64 },
    #[error("{path}: its bridge key does not match offline_authority.bridge in the cluster file")]
    OfflineBridgeMismatch { path: PathBuf },
    #[error("{path}: its bridge key does not match exchange.bridge in the cluster file")]
    ExchangeBridgeMismatch { path: PathBuf },
    #[error("{path} does not hold an endorser's key share (hex of docs/endorsement-format.md's encoding): {reason}")]
    BadEndorserKeys { path: PathBuf, reason: String },
    #[error(
        "{path} is endorser {found}'s share of group key {group_key}, but sentinel '{sentinel}' is endorser \
         {expected} of group key {listed} in the cluster file"
    )]
    EndorserKeysMismatch {
        path: PathBuf,
        sentinel: String,
        found: u16,
        expected: u16,
        group_key: String,
        listed: String,
    },
    #[error("the cluster file has no [endorsement] section, or no sentinel named '{sentinel}'")]
    NotAnEndorser { sentinel: String },
    #[error("cannot generate the cluster CA: {0}")]
    GenerateCa(#[source] rcgen::Error),
    #[error("{key} and {cert}: {source}")]
    Ca {
        key: PathBuf,
        cert: PathBuf,
        #[source]
        source: PkiError,
    },
    #[error("{key} exists without {cert}: restore the CA certificate, or remove both to start a new CA")]
    CaKeyWithoutCertificate { key: PathBuf, cert: PathBuf },
    /// The operator brought their own CA (a certificate without its key), so specie cannot
    /// issue what is missing.
    #[error(
        "{} is your own CA (there is no {}), so issue these yourself (docs/operator-guide.md): {}",
        cert.display(),
        key.display(),
        missing.join(", ")
    )]
    OwnCaMissesCertificates {
        cert: PathBuf,
        key: PathBuf,
        /// One `<identity>.crt + .key for <identity>` per process.
        missing: Vec<String>,
    },
    #[error(transparent)]
    Issue(#[from] PkiError),
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> CredentialsError {
    let path = path.to_path_buf();
    move |source| CredentialsError::Io { action, path, source }
}

pub fn cert_path(pki_dir: &Path, identity: &Identity) -> PathBuf {
    pki_dir.join(format!("{}.crt", identity.file_stem()))
}

pub fn key_path(pki_dir: &Path, identity: &Identity) -> PathBuf {
    pki_dir.join(format!("{}.key", identity.file_stem()))
}

/// Where FastPay authority `authority`'s Ed25519 signing key is (every replica of every shard
/// of the authority signs with it).
pub fn authority_key_path(pki_dir: &Path, authority: u16) -> PathBuf {
    pki_dir.join(format!("authority-{authority}.fastpay.key"))
}

/// Authority `authority`'s next key while `specie cluster rotate-authority` runs and its shards
/// are not handed over to it yet.
pub fn authority_next_key_path(pki_dir: &Path, authority: u16) -> PathBuf {
    pki_dir.join(format!("authority-{authority}.fastpay.key.next"))
}

pub fn attestation_key_path(pki_dir: &Path, sentinel: &str) -> PathBuf {
    pki_dir.join(format!("{}.attestation.key", Identity::sentinel(sentinel).file_stem()))
}

/// Where sentinel `sentinel` keeps its share of the endorsement group key: its own data, made
/// by the ceremony it ran with the other sentinels, never by the operator's tools.
pub fn endorser_keys_path(topology: &Topology, sentinel: &str) -> PathBuf {
    topology.data_dir.join(sentinel).join("endorser.key")
}

/// Where the operator asks sentinel `sentinel` to refresh its share at its next start.
pub fn refresh_marker_path(topology: &Topology, sentinel: &str) -> PathBuf {
    topology.data_dir.join(sentinel).join("endorser.refresh")
}

fn read(path: &Path) -> Result<Vec<u8>, CredentialsError> {
    std::fs::read(path).map_err(io_error("read", path))
}

fn read_text(path: &Path) -> Result<String, CredentialsError> {
    String::from_utf8(read(path)?).map_err(|_| CredentialsError::NotText {
        path: path.to_path_buf(),
    })
}

/// How the process `identity` connects to the others: its certificate, checked to name it.
pub fn transport(topology: &Topology, identity: &Identity) -> Result<Transport, CredentialsError> {
    if topology.transport == TransportMode::InsecurePlaintext {
        tracing::warn!("transport = insecure-plaintext: no encryption, no authentication, no authorisation");
        return Ok(Transport::InsecurePlaintext);
    }
    let dir = &topology.pki_dir;
    let credentials = TlsCredentials::from_pem(
        &read(&dir.join(CA_CERT_FILE))?,
        &read(&cert_path(dir, identity))?,
        &read(&key_path(dir, identity))?,
    )
    .map_err(|source| CredentialsError::Tls {
        identity: identity.clone(),
        dir: dir.clone(),
        source,
    })?;
    if credentials.name() != identity.to_string() {
        return Err(CredentialsError::WrongIdentity {
            cert: cert_path(dir, identity),
            named: credentials.name().to_string(),
            identity: identity.clone(),
        });
    }
    Ok(Transport::MutualTls(Arc::new(credentials)))
}

/// Sentinel `name`'s attestation key, checked against the public key the topology lists.
pub fn attestation_key(topology: &Topology, name: &str) -> Result<Keypair, CredentialsError> {
    let path = attestation_key_path(&topology.pki_dir, name);
    let text = read_text(&path)?;
    let Ok(keypair) = Keypair::from_seckey_str_global(text.trim()) else {
        return Err(CredentialsError::BadAttestationKey { path });
    };
    let listed = topology.sentinel_keys().get(name).copied();
    if listed != Some(xonly_bytes(&keypair)) {
        return Err(CredentialsError::AttestationKeyMismatch {
            path,
            sentinel: name.to_string(),
        });
    }
    Ok(keypair)
}

/// Authority `authority`'s signing key, checked against the committee member the topology lists.
pub fn authority_key(topology: &Topology, authority: u16) -> Result<SigningKey, CredentialsError> {
    let path = authority_key_path(&topology.pki_dir, authority);
    let key = SigningKey::from_bytes(&read_seed(&path)?);
    // The seat's key in the committee's current epoch: the first one's members, or the last
    // record's. While a rotation of the seat has not handed its shards over (its next key kept
    // beside this one), the epoch before's: they must run to be handed over.
    let chain = (topology.fastpay_committee.as_ref()).and_then(|committee| committee.chain().ok());
    let committees: Vec<&Committee> = chain.iter().flat_map(|chain| chain.committees().rev()).collect();
    let rotating = authority_next_key_path(&topology.pki_dir, authority).exists();
    let holds = |committee: &&Committee| {
        committee.members().get(usize::from(authority)) == Some(&key.verifying_key().to_bytes())
    };
    if committees.iter().take(if rotating { 2 } else { 1 }).any(holds) {
        return Ok(key);
    }
    let epoch = committees.first().map_or(0, |committee| committee.epoch());
    Err(CredentialsError::AuthorityKeyMismatch { path, authority, epoch })
}

/// A new signing key for FastPay authority `authority`, its secret written to the PKI
/// directory; returns the Ed25519 public key in hex, for `fastpay_committee.members`.
pub fn create_authority_key(pki_dir: &Path, authority: u16) -> Result<String, CredentialsError> {
    create_private_dir(pki_dir)?;
    let key = SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    write_secret(&authority_key_path(pki_dir, authority), &hex::encode(key.to_bytes()))?;
    Ok(hex::encode(key.verifying_key().to_bytes()))
}

/// The offline authority's secret seed (every replica derives the same keys from it).
pub fn offline_seed_path(pki_dir: &Path) -> PathBuf {
    pki_dir.join("offline-authority.seed")
}

/// The offline authority operator's bearer token (registering identities, rotating and revoking
/// keys over the authority's HTTP API).
pub fn offline_operator_token_path(pki_dir: &Path) -> PathBuf {
    pki_dir.join("offline-operator.token")
}

/// A new offline authority: its secret seed and operator token written to the PKI directory;
/// returns its bridge key (hex), for `offline_authority.bridge`.
pub fn create_offline_authority(pki_dir: &Path) -> Result<String, CredentialsError> {
    create_private_dir(pki_dir)?;
    let seed = rand::random::<[u8; 32]>();
    write_secret(&offline_seed_path(pki_dir), &hex::encode(seed))?;
    write_secret(
        &offline_operator_token_path(pki_dir),
        &hex::encode(rand::random::<[u8; 32]>()),
    )?;
    let keys = specie_offline_service::keys_from_seed(&seed);
    Ok(hex::encode(keys.bridge.verifying_key().to_bytes()))
}

/// The offline authority's keys and operator token, the keys checked against the bridge key
/// the topology lists.
pub fn offline_authority(
    topology: &Topology,
) -> Result<(specie_offline_authority::AuthorityKeys, String), CredentialsError> {
    let path = offline_seed_path(&topology.pki_dir);
    let seed = read_seed(&path)?;
    let keys = specie_offline_service::keys_from_seed(&seed);
    let listed = topology.offline_authority.as_ref().and_then(|o| o.bridge_key());
    if listed != Some(keys.bridge.verifying_key().to_bytes()) {
        return Err(CredentialsError::OfflineBridgeMismatch { path });
    }
    let token = read_text(&offline_operator_token_path(&topology.pki_dir))?;
    Ok((keys, token.trim().to_string()))
}

/// The exchange's secret seed (every replica derives the same identity and bridge key from it).
pub fn exchange_seed_path(pki_dir: &Path) -> PathBuf {
    pki_dir.join("exchange.seed")
}

/// A new exchange: its secret seed written to the PKI directory; returns its bridge key (hex),
/// for `exchange.bridge`.
pub fn create_exchange(pki_dir: &Path) -> Result<String, CredentialsError> {
    create_private_dir(pki_dir)?;
    let seed = rand::random::<[u8; 32]>();
    write_secret(&exchange_seed_path(pki_dir), &hex::encode(seed))?;
    let (_, bridge) = specie_exchange_service::keys_from_seed(&seed);
    Ok(hex::encode(bridge.verifying_key().to_bytes()))
}

/// The exchange's identity and bridge key, the key checked against the bridge key the topology
/// lists.
pub fn exchange_keys(topology: &Topology) -> Result<([u8; 32], SigningKey), CredentialsError> {
    let path = exchange_seed_path(&topology.pki_dir);
    let seed = read_seed(&path)?;
    let (id, bridge) = specie_exchange_service::keys_from_seed(&seed);
    let listed = topology.exchange.as_ref().and_then(|e| e.bridge_key());
    if listed != Some(bridge.verifying_key().to_bytes()) {
        return Err(CredentialsError::ExchangeBridgeMismatch { path });
    }
    Ok((id, bridge))
}

/// A 32-byte secret seed, hex in a file.
fn read_seed(path: &Path) -> Result<[u8; 32], CredentialsError> {
    hex::decode(read_text(path)?.trim())
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .ok_or_else(|| CredentialsError::BadAuthorityKey {
            path: path.to_path_buf(),
        })
}

/// Writes `text` to a new file readable only by its owner, and syncs it
/// ([`specie_log::secret::write_new`]).
pub fn write_secret(path: &Path, text: &str) -> Result<(), CredentialsError> {
    Ok(specie_log::secret::write_new(path, text.as_bytes())?)
}

pub(crate) fn write_public(path: &Path, text: &str) -> Result<(), CredentialsError> {
    std::fs::write(path, text).map_err(io_error("write", path))
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), CredentialsError> {
    std::fs::create_dir_all(dir).map_err(io_error("create", dir))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io_error("make private", dir))?;
    Ok(())
}

/// A new attestation key for sentinel `name`, its secret written to the PKI directory; returns the
/// x-only public key in hex, for the cluster file.
pub fn create_attestation_key(pki_dir: &Path, name: &str) -> Result<String, CredentialsError> {
    create_private_dir(pki_dir)?;
    let keypair = Keypair::new_global(&mut rand::thread_rng());
    write_secret(
        &attestation_key_path(pki_dir, name),
        &hex::encode(keypair.secret_bytes()),
    )?;
    Ok(hex::encode(xonly_bytes(&keypair)))
}

/// Sentinel `name`'s share of the endorsement group key, if its ceremony made one; checked
/// against the cluster file: the share of endorser `index + 1` (the sentinel's place in the
/// list), of a group of the listed threshold and size, and of the listed group key once there is
/// one.
pub fn endorser_keys(
    topology: &Topology,
    name: &str,
) -> Result<Option<specie_endorsement::EndorserKeys>, CredentialsError> {
    let not_an_endorser = || CredentialsError::NotAnEndorser {
        sentinel: name.to_string(),
    };
    let config = topology.endorsement.as_ref().ok_or_else(not_an_endorser)?;
    let index = topology
        .sentinels
        .iter()
        .position(|s| s.name == name)
        .ok_or_else(not_an_endorser)?;
    let path = endorser_keys_path(topology, name);
    if !path.exists() {
        return Ok(None);
    }
    let text = read_text(&path)?;
    let bad = |reason: String| CredentialsError::BadEndorserKeys {
        path: path.clone(),
        reason,
    };
    let bytes = hex::decode(text.trim()).map_err(|error| bad(error.to_string()))?;
    let keys = specie_endorsement::EndorserKeys::decode_exact(&bytes).map_err(|error| bad(error.to_string()))?;
    let expected = u16::try_from(index + 1).unwrap_or(u16::MAX);
    let found_key = hex::encode(keys.group_key().0);
    let listed = config.group_key.as_ref().map(|key| key.to_ascii_lowercase());
    let threshold = config.threshold(topology.sentinels.len());
    let signers = keys.public.min_signers().as_ref().copied();
    let group_size = keys.public.verifying_shares().len();
    let same_group = threshold.is_some_and(|t| Some(t.k) == signers && usize::from(t.n) == group_size);
    if keys.id.0 != expected || listed.as_ref().is_some_and(|key| *key != found_key) || !same_group {
        return Err(CredentialsError::EndorserKeysMismatch {
            path,
            sentinel: name.to_string(),
            found: keys.id.0,
            expected,
            group_key: found_key,
            listed: listed.unwrap_or_else(|| "(none yet)".into()),
        });
    }
    Ok(Some(keys))
}

/// Keeps sentinel `name`'s share (mode 0600, written whole and synced before it is renamed
/// into place, so a crash leaves the old share or the new one). Replaces a share only when
/// `refreshed` (a refresh's new share of the same key).
pub fn save_endorser_keys(
    topology: &Topology,
    name: &str,
    keys: &specie_endorsement::EndorserKeys,
    refreshed: bool,
) -> Result<(), CredentialsError> {
    let path = endorser_keys_path(topology, name);
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    match specie_log::secret::write_atomically(&path, hex::encode(keys.encode()).as_bytes(), refreshed) {
        Err(SecretFileError::Exists { path }) => Err(CredentialsError::Io {
            action: "keep (a share is there already)",
            path,
            source: std::io::Error::from(std::io::ErrorKind::AlreadyExists),
        }),
        written => Ok(written?),
    }
}

/// Makes every credential the topology needs that does not exist yet: the CA (unless the
/// operator brought one: `ca.crt` without `ca.key`), and a certificate and key per process.
/// Returns the files it created. Never replaces an existing certificate-and-key pair.
pub fn ensure_pki(topology: &Topology) -> Result<Vec<PathBuf>, CredentialsError> {
    let dir = &topology.pki_dir;
    create_private_dir(dir)?;
    let (ca_cert, ca_key) = (dir.join(CA_CERT_FILE), dir.join(CA_KEY_FILE));
    let mut created = vec![];
    let missing: Vec<Identity> = every_identity(topology)
        .into_iter()
        .filter(|identity| !cert_path(dir, identity).exists() || !key_path(dir, identity).exists())
        .collect();
    if missing.is_empty() && ca_cert.exists() {
        return Ok(created);
    }
    let ca = match (ca_cert.exists(), ca_key.exists()) {
        (false, false) => {
            let ca = CertificateAuthority::generate().map_err(CredentialsError::GenerateCa)?;
            write_secret(&ca_key, &ca.key_pem())?;
            write_public(&ca_cert, &ca.cert_pem())?;
            created.extend([ca_key.clone(), ca_cert.clone()]);
            ca
        }
        (true, true) => CertificateAuthority::from_key_and_cert_pem(&read_text(&ca_key)?, &read_text(&ca_cert)?)
            .map_err(|source| CredentialsError::Ca {
                key: ca_key.clone(),
                cert: ca_cert.clone(),
                source,
            })?,
        (false, true) => {
            return Err(CredentialsError::CaKeyWithoutCertificate {
                key: ca_key,
                cert: ca_cert,
            })
        }
        (true, false) => {
            return Err(CredentialsError::OwnCaMissesCertificates {
                cert: ca_cert,
                key: ca_key,
                missing: missing
                    .iter()
                    .map(|identity| format!("{} + .key for {identity}", cert_path(dir, identity).display()))
                    .collect(),
            })
        }
    };
    for identity in missing {
        let name = identity.to_string();
        let issued = ca.issue(&name, PROCESS_VALIDITY)?;
        let (cert, key) = (cert_path(dir, &identity), key_path(dir, &identity));
        // A lone key or certificate left from an interrupted run is replaced as a pair.
        let _ = std::fs::remove_file(&key);
        write_secret(&key, &issued.key_pem)?;
        let _ = std::fs::remove_file(&cert);
        write_public(&cert, &issued.cert_pem)?;
        created.extend([key, cert]);
    }
    Ok(created)
}
