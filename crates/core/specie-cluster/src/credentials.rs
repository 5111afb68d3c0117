//! A process's credentials, as files in the cluster's PKI directory: the CA certificate, its own
//! certificate and key, and a sentinel's attestation key. [`ensure_pki`] makes whatever is
//! missing (what `specie cluster up` runs); the processes only read.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, Context};
use secp256k1::Keypair;
use specie_transaction::signing::xonly_bytes;
use specie_wire::pki::{CertificateAuthority, PROCESS_VALIDITY};
use specie_wire::{TlsCredentials, Transport};

use crate::identity::{every_identity, Identity};
use crate::topology::{Topology, TransportMode};

pub const CA_CERT_FILE: &str = "ca.crt";
pub const CA_KEY_FILE: &str = "ca.key";

pub fn cert_path(pki_dir: &Path, identity: &Identity) -> PathBuf {
    pki_dir.join(format!("{}.crt", identity.file_stem()))
}

pub fn key_path(pki_dir: &Path, identity: &Identity) -> PathBuf {
    pki_dir.join(format!("{}.key", identity.file_stem()))
}

pub fn attestation_key_path(pki_dir: &Path, sentinel: &str) -> PathBuf {
    pki_dir.join(format!("{}.attestation.key", Identity::sentinel(sentinel).file_stem()))
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// How the process `identity` connects to the others: its certificate, checked to name it.
pub fn transport(topology: &Topology, identity: &Identity) -> anyhow::Result<Transport> {
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
    .with_context(|| format!("the credentials of {identity} in {}", dir.display()))?;
    if credentials.name() != identity.to_string() {
        bail!(
            "{} names '{}', but this process is {identity}",
            cert_path(dir, identity).display(),
            credentials.name()
        );
    }
    Ok(Transport::MutualTls(Arc::new(credentials)))
}

/// Sentinel `name`'s attestation key, checked against the public key the topology lists.
pub fn attestation_key(topology: &Topology, name: &str) -> anyhow::Result<Keypair> {
    let path = attestation_key_path(&topology.pki_dir, name);
    let text = String::from_utf8(read(&path)?).with_context(|| format!("{} is not text", path.display()))?;
    let keypair = Keypair::from_seckey_str_global(text.trim())
        .with_context(|| format!("{} does not hold a 32-byte secret key in hex", path.display()))?;
    let listed = topology.sentinel_keys().get(name).copied();
    if listed != Some(xonly_bytes(&keypair)) {
        bail!(
            "{} does not match the attestation_key the cluster file lists for sentinel '{name}'",
            path.display()
        );
    }
    Ok(keypair)
}

/// Writes `text` to a new file readable only by its owner, and syncs it.
pub fn write_secret(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .create_new(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    Ok(())
}

fn write_public(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// A new attestation key for sentinel `name`, its secret written to the PKI directory; returns the
/// x-only public key in hex, for the cluster file.
pub fn create_attestation_key(pki_dir: &Path, name: &str) -> anyhow::Result<String> {
    create_private_dir(pki_dir)?;
    let keypair = Keypair::new_global(&mut rand::thread_rng());
    write_secret(
        &attestation_key_path(pki_dir, name),
        &hex::encode(keypair.secret_bytes()),
    )?;
    Ok(hex::encode(xonly_bytes(&keypair)))
}

/// Makes every credential the topology needs that does not exist yet: the CA (unless the
/// operator brought one: `ca.crt` without `ca.key`), and a certificate and key per process.
/// Returns the files it created. Never replaces an existing certificate-and-key pair.
pub fn ensure_pki(topology: &Topology) -> anyhow::Result<Vec<PathBuf>> {
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
            let ca = CertificateAuthority::generate().context("cannot generate the cluster CA")?;
            write_secret(&ca_key, &ca.key_pem())?;
            write_public(&ca_cert, &ca.cert_pem())?;
            created.extend([ca_key.clone(), ca_cert.clone()]);
            ca
        }
        (true, true) => CertificateAuthority::from_key_and_cert_pem(
            &String::from_utf8(read(&ca_key)?)?,
            &String::from_utf8(read(&ca_cert)?)?,
        )
        .map_err(|e| anyhow::anyhow!("{} and {}: {e}", ca_key.display(), ca_cert.display()))?,
        (false, true) => bail!(
            "{} exists without {}: restore the CA certificate, or remove both to start a new CA",
            ca_key.display(),
            ca_cert.display()
        ),
        (true, false) => bail!(
            "{} is your own CA (there is no {}), so issue these yourself (docs/operator-guide.md): {}",
            ca_cert.display(),
            ca_key.display(),
            missing
                .iter()
                .map(|identity| format!("{} + .key for {identity}", cert_path(dir, identity).display()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    for identity in missing {
        let name = identity.to_string();
        let issued = ca.issue(&name, PROCESS_VALIDITY).map_err(anyhow::Error::msg)?;
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
