//! Certificates for mutual TLS: a cluster CA and one certificate per process, made with rcgen
//! (ECDSA P-256). `specie cluster up` uses this; an operator who brings their own CA issues the
//! same shape of certificate with their own tools (docs/operator-guide.md).

use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::CertificateDer;
use thiserror::Error;

/// The CA's distinguished name. Fixed, so that the CA can be rebuilt from its key alone to issue
/// certificates for members added later: a certificate's issuer is matched by name and key.
const CA_COMMON_NAME: &str = "specie cluster CA";
const DAY: Duration = Duration::from_secs(24 * 60 * 60);
/// How long certificates made by `specie cluster up` are valid.
pub const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 60 * 60);
pub const PROCESS_VALIDITY: Duration = Duration::from_secs(2 * 365 * 24 * 60 * 60);

/// Why a CA could not be rebuilt or a certificate could not be issued.
#[derive(Debug, Error)]
pub enum PkiError {
    #[error("the CA key cannot be read: {0}")]
    UnreadableCaKey(#[source] rcgen::Error),
    #[error("the CA certificate cannot be read: {0}")]
    UnreadableCaCertificate(#[source] pem::Error),
    #[error("the CA key does not belong to the CA certificate")]
    CaKeyMismatch,
    /// Issuing under a CA certificate that specie did not make would produce certificates that
    /// do not chain to what peers trust.
    #[error(
        "the CA certificate is not named '{}': it is not one specie made, so issue certificates with the \
         tools that made it",
        CA_COMMON_NAME
    )]
    ForeignCaCertificate,
    #[error("'{name}' is not a valid DNS name")]
    NotADnsName { name: String },
    #[error("cannot issue a certificate for '{name}': {source}")]
    Issue {
        name: String,
        #[source]
        source: rcgen::Error,
    },
}

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// A certificate authority that can issue process certificates.
pub struct CertificateAuthority {
    cert: rcgen::Certificate,
    key: KeyPair,
}

fn validity(params: &mut CertificateParams, not_before: SystemTime, not_after: SystemTime) {
    params.not_before = not_before.into();
    params.not_after = not_after.into();
}

impl CertificateAuthority {
    /// A new CA with a fresh key, valid from a day ago (clock skew) for [`CA_VALIDITY`].
    pub fn generate() -> Result<CertificateAuthority, rcgen::Error> {
        Self::from_key(KeyPair::generate()?)
    }

    /// The CA that `key_pem` (from [`CertificateAuthority::key_pem`]) belongs to, able to issue
    /// certificates that chain to the CA certificate made with that key.
    pub fn from_key_pem(key_pem: &str) -> Result<CertificateAuthority, rcgen::Error> {
        Self::from_key(KeyPair::from_pem(key_pem)?)
    }

    /// The CA of `cert_pem` (made by [`CertificateAuthority::generate`]) rebuilt from its key,
    /// refused unless the key is the certificate's and the certificate is one this module made:
    /// issuing under a CA certificate that peers do not trust would only make certificates they
    /// refuse.
    pub fn from_key_and_cert_pem(key_pem: &str, cert_pem: &str) -> Result<CertificateAuthority, PkiError> {
        let ca = Self::from_key_pem(key_pem).map_err(PkiError::UnreadableCaKey)?;
        let cert = CertificateDer::from_pem_slice(cert_pem.as_bytes()).map_err(PkiError::UnreadableCaCertificate)?;
        let contains = |needle: &[u8]| cert.windows(needle.len()).any(|window| window == needle);
        // A certificate embeds its subject's public key info and name verbatim.
        if !contains(&ca.key.public_key_der()) {
            return Err(PkiError::CaKeyMismatch);
        }
        if !contains(CA_COMMON_NAME.as_bytes()) {
            return Err(PkiError::ForeignCaCertificate);
        }
        Ok(ca)
    }

    fn from_key(key: KeyPair) -> Result<CertificateAuthority, rcgen::Error> {
        let mut params = CertificateParams::default();
        let mut name = DistinguishedName::new();
        name.push(DnType::CommonName, CA_COMMON_NAME);
        params.distinguished_name = name;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let now = SystemTime::now();
        validity(&mut params, now - DAY, now + CA_VALIDITY);
        let cert = params.self_signed(&key)?;
        Ok(CertificateAuthority { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// The CA's private key: whoever holds it can mint any identity in the cluster.
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A certificate for the process called `name` (a DNS name, e.g. `1.shard-0.shard.specie`),
    /// usable as both TLS server and client, valid from a day ago for `valid_for`.
    pub fn issue(&self, name: &str, valid_for: Duration) -> Result<Issued, PkiError> {
        let now = SystemTime::now();
        self.issue_between(name, now - DAY, now + valid_for)
    }

    /// Like [`CertificateAuthority::issue`] with an explicit validity period (tests issue
    /// expired certificates with it).
    pub fn issue_between(&self, name: &str, not_before: SystemTime, not_after: SystemTime) -> Result<Issued, PkiError> {
        // A peer checks the name as a DNS name; refuse what could never match.
        rustls::pki_types::DnsName::try_from(name).map_err(|_| PkiError::NotADnsName { name: name.to_string() })?;
        self.issue_checked(name, not_before, not_after)
            .map_err(|source| PkiError::Issue {
                name: name.to_string(),
                source,
            })
    }

    fn issue_checked(&self, name: &str, not_before: SystemTime, not_after: SystemTime) -> Result<Issued, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        let mut distinguished = DistinguishedName::new();
        distinguished.push(DnType::CommonName, name);
        params.distinguished_name = distinguished;
        params.subject_alt_names = vec![SanType::DnsName(name.try_into()?)];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        validity(&mut params, not_before, not_after);
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TlsCredentials;

    #[test]
    fn issued_certificates_carry_their_name() {
        let ca = CertificateAuthority::generate().unwrap();
        let issued = ca.issue("1.shard-0.shard.specie", PROCESS_VALIDITY).unwrap();
        let credentials = TlsCredentials::from_pem(
            ca.cert_pem().as_bytes(),
            issued.cert_pem.as_bytes(),
            issued.key_pem.as_bytes(),
        )
        .unwrap();
        assert_eq!(credentials.name(), "1.shard-0.shard.specie");
    }

    #[test]
    fn a_ca_is_rebuilt_only_from_its_own_key_and_certificate() {
        let ca = CertificateAuthority::generate().unwrap();
        let other = CertificateAuthority::generate().unwrap();
        assert!(CertificateAuthority::from_key_and_cert_pem(&ca.key_pem(), &ca.cert_pem()).is_ok());
        let mismatch = CertificateAuthority::from_key_and_cert_pem(&other.key_pem(), &ca.cert_pem());
        let mismatch = mismatch.err().unwrap();
        assert!(matches!(mismatch, PkiError::CaKeyMismatch), "{mismatch:?}");
        assert_eq!(mismatch.to_string(), "the CA key does not belong to the CA certificate");
    }

    #[test]
    fn names_that_are_not_dns_names_are_refused() {
        let ca = CertificateAuthority::generate().unwrap();
        let refused = ca.issue("not a name", PROCESS_VALIDITY).err().unwrap();
        assert!(
            matches!(&refused, PkiError::NotADnsName { name } if name == "not a name"),
            "{refused:?}"
        );
        assert_eq!(refused.to_string(), "'not a name' is not a valid DNS name");
    }
}
