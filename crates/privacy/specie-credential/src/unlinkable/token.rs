//! Tokens (the paper's `τ = Commit(eid, v, r, t)`) and their certification by the certifiers.
//!
//! A token in the ledger is `cm = t·g + eid·h_1 + v·h_2 + r·h_3` with, beside it, one commitment per
//! message on the token's own base `h = H(cm)`: `c_j = o_j·g + m_j·h`. The certifiers blind-sign
//! the `c_j` (Coconut, eprint 2022/011 §7): each returns `(h, x_i·h + Σ y_ij·c_j)`; the owner, who
//! knows the `o_j`, unblinds each share, checks it under that certifier's key, and interpolates
//! `threshold` of them into a Pointcheval–Sanders signature on `(eid, v, r)` under the group key.
//! Because `h` is hashed from `cm`, which binds the messages, one base never carries two message
//! vectors, so no two certificates combine into a third.

use ark_ec::{CurveGroup, VariableBaseMSM};
use ark_ff::{Field, UniformRand};
use ark_serialize::CanonicalDeserialize;
use coconut_crypto::setup::keygen::common::Threshold;
use coconut_crypto::setup::keygen::shamir_ss::deal;
use coconut_crypto::setup::{PublicKey, SecretKey};
use coconut_crypto::{AggregatedSignature, BlindSignature, CommitmentOrMessage, MessageCommitment, Signature};
use rand_core::{CryptoRng, RngCore};

use crate::authority::{EnrolmentId, Identity};
use crate::group::{Pairing, Scalar, G1};
use crate::unlinkable::error::CertifyError;
use crate::unlinkable::group::{token_base, unlinkable_generators, TOKEN_MESSAGES};
use crate::unlinkable::CERTIFIERS_MAX;

/// A token as the ledger holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub(crate) commitment: G1,
    pub(crate) messages: [G1; TOKEN_MESSAGES],
}

/// What the token's owner keeps to certify and spend it: the messages and every blinding.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenOpening {
    pub(crate) owner: EnrolmentId,
    pub(crate) value: u64,
    pub(crate) serial_seed: Scalar,
    pub(crate) blinding: Scalar,
    pub(crate) message_blindings: [Scalar; TOKEN_MESSAGES],
}

impl std::fmt::Debug for TokenOpening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenOpening")
            .field("owner", &self.owner)
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}

/// A token's serial number `sn = G_sn / (sk + r)` (Dodis–Yampolskiy's PRF keyed with the owner's
/// credential secret, at the token's seed): revealed when the token is spent, and a UHS id in its
/// own domain, so a second spend is a double spend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SerialNumber(pub(crate) [u8; crate::group::G1_BYTES], pub(crate) G1);

impl PartialOrd for SerialNumber {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for SerialNumber {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.cmp(&other.0)
    }
}

impl SerialNumber {
    pub(crate) fn from_point(point: G1) -> SerialNumber {
        let mut bytes = [0u8; crate::group::G1_BYTES];
        bytes.copy_from_slice(&crate::group::compressed(&point));
        SerialNumber(bytes, point)
    }

    /// The compressed point, the bytes the shards key it by.
    pub fn to_bytes(&self) -> [u8; crate::group::G1_BYTES] {
        self.0
    }
}

impl TokenOpening {
    /// A fresh token of `value` for `owner` (made by the payer, or the issuer).
    pub fn random(owner: EnrolmentId, value: u64, rng: &mut (impl RngCore + CryptoRng)) -> TokenOpening {
        TokenOpening {
            owner,
            value,
            serial_seed: Scalar::rand(rng),
            blinding: Scalar::rand(rng),
            message_blindings: [Scalar::rand(rng), Scalar::rand(rng), Scalar::rand(rng)],
        }
    }

    pub fn owner(&self) -> EnrolmentId {
        self.owner
    }

    pub fn value(&self) -> u64 {
        self.value
    }

    pub(crate) fn messages(&self) -> [Scalar; TOKEN_MESSAGES] {
        [self.owner.scalar(), Scalar::from(self.value), self.serial_seed]
    }

    /// The token these openings commit to.
    pub fn token(&self) -> Token {
        let params = &unlinkable_generators().token;
        let messages = self.messages();
        let bases = [params.g, params.h[0], params.h[1], params.h[2]];
        let scalars = [self.blinding, messages[0], messages[1], messages[2]];
        let commitment = <Pairing as ark_ec::pairing::Pairing>::G1::msm_unchecked(&bases, &scalars).into_affine();
        let base = token_base(&commitment);
        let per_message =
            |j: usize| *MessageCommitment::<Pairing>::new(&params.g, &self.message_blindings[j], &base, &messages[j]);
        Token {
            commitment,
            messages: [per_message(0), per_message(1), per_message(2)],
        }
    }

    /// This token's serial number for the owner `identity`; `None` if the identity is not the
    /// owner, or in the negligible case `sk + r = 0`.
    pub fn serial_number(&self, identity: &Identity) -> Option<SerialNumber> {
        if identity.enrolment_id() != self.owner {
            return None;
        }
        let key = (identity.secret.0 + self.serial_seed).inverse()?;
        Some(SerialNumber::from_point(
            (unlinkable_generators().serial * key).into_affine(),
        ))
    }

    /// Unblinds the certifiers' shares, keeps those that verify under their certifier's key, and
    /// combines the first `threshold` of them into the token's certificate.
    pub fn certificate(
        &self,
        group: &CertifierGroup,
        shares: &[CertificateShare],
    ) -> Result<Certificate, CertifyError> {
        let params = &unlinkable_generators().token;
        let token = self.token();
        let base = token_base(&token.commitment);
        let messages = self.messages();
        let mut good: Vec<(u16, Signature<Pairing>)> = Vec::with_capacity(group.threshold as usize);
        let mut sorted: Vec<&CertificateShare> = shares.iter().collect();
        sorted.sort_by_key(|share| share.certifier);
        sorted.dedup_by_key(|share| share.certifier);
        for share in sorted {
            let Some(key) = group.member(share.certifier) else {
                continue;
            };
            let Ok(signature) = share
                .signature
                .clone()
                .unblind(self.message_blindings.iter().enumerate(), key, &base)
            else {
                continue;
            };
            if signature.verify(&messages, key, params).is_ok() {
                good.push((share.certifier, signature));
            }
            if good.len() == group.threshold as usize {
                break;
            }
        }
        if good.len() < group.threshold as usize {
            return Err(CertifyError::TooFewShares {
                valid: good.len(),
                threshold: group.threshold,
            });
        }
        let aggregated = AggregatedSignature::new(good.iter().map(|(id, sig)| (*id, sig)), &base)
            .map_err(|e| CertifyError::Library(format!("{e:?}")))?;
        let certificate = Certificate((*aggregated).clone());
        certificate.check(self, group)?;
        Ok(certificate)
    }
}

/// The certifiers' group: `threshold` of `members` certify a token. Its key is the Coconut
/// verification key all spends are checked under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertifierGroup {
    pub(crate) threshold: u16,
    pub(crate) key: PublicKey<Pairing>,
    pub(crate) members: Vec<PublicKey<Pairing>>,
}

impl CertifierGroup {
    pub fn threshold(&self) -> u16 {
        self.threshold
    }

    pub fn members(&self) -> usize {
        self.members.len()
    }

    /// The key of certifier `index` (1-based, as in the shares).
    pub(crate) fn member(&self, index: u16) -> Option<&PublicKey<Pairing>> {
        self.members.get(usize::from(index).checked_sub(1)?)
    }
}

/// One certifier's share of the group's signing key.
#[derive(Clone, PartialEq, Eq)]
pub struct CertifierSecret {
    pub(crate) index: u16,
    pub(crate) key: SecretKey<Scalar>,
}

impl std::fmt::Debug for CertifierSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CertifierSecret({}, ..)", self.index)
    }
}

/// Deals a `threshold`-of-`members` certifier group with Shamir shares of one Coconut key (a
/// trusted dealer, as at an endorsement group's founding; the dealer forgets the key afterwards).
pub fn deal_certifiers(
    threshold: u16,
    members: u16,
    rng: &mut (impl RngCore + CryptoRng),
) -> Result<(CertifierGroup, Vec<CertifierSecret>), CertifyError> {
    if threshold == 0 || threshold > members || usize::from(members) > CERTIFIERS_MAX {
        return Err(CertifyError::BadThreshold { threshold, members });
    }
    let params = &unlinkable_generators().token;
    let (group_key, shares) = if members == 1 {
        // Shamir sharing needs two members; a group of one holds the key itself.
        let key = SecretKey::rand(rng, TOKEN_MESSAGES as u32);
        (key.clone(), vec![key])
    } else {
        let shape = Threshold::new(threshold, members).ok_or(CertifyError::BadThreshold { threshold, members })?;
        deal(rng, TOKEN_MESSAGES as u32, shape).map_err(|e| CertifyError::Library(format!("{e:?}")))?
    };
    let group = CertifierGroup {
        threshold,
        key: PublicKey::new(&group_key, params),
        members: shares.iter().map(|share| PublicKey::new(share, params)).collect(),
    };
    let secrets = shares
        .into_iter()
        .zip(1u16..)
        .map(|(key, index)| CertifierSecret { index, key })
        .collect();
    Ok((group, secrets))
}

/// One certifier's blind signature on a token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateShare {
    pub(crate) certifier: u16,
    pub(crate) signature: BlindSignature<Pairing>,
}

/// The certifiers' signature on a token's messages, which its owner proves knowledge of to spend it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Certificate(pub(crate) Signature<Pairing>);

impl Certificate {
    /// Checks the certificate against the token's messages under the group key.
    pub fn check(&self, opening: &TokenOpening, group: &CertifierGroup) -> Result<(), CertifyError> {
        self.0
            .verify(&opening.messages(), &group.key, &unlinkable_generators().token)
            .map_err(|_| CertifyError::InvalidCertificate)
    }
}

impl CertificateShare {
    /// The certifier (1-based) that made it.
    pub fn certifier(&self) -> u16 {
        self.certifier
    }
}

impl CertifierSecret {
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Whether this is the secret of certifier `index` of `group` (its public key is the
    /// group's member key at that index).
    pub fn belongs_to(&self, group: &CertifierGroup) -> bool {
        let public = PublicKey::new(&self.key, &unlinkable_generators().token);
        group.member(self.index) == Some(&public)
    }

    /// Blind-signs a token. The caller (the certification service) answers only for tokens that
    /// exist in the ledger (Figure 5, steps 5–6): this signs whatever it is given.
    pub fn certify(&self, token: &Token) -> CertificateShare {
        let base = token_base(&token.commitment);
        let commitments = token
            .messages
            .map(|c| CommitmentOrMessage::BlindedMessage(message_commitment(&c)));
        let signature =
            BlindSignature::new(commitments, &self.key, &base).expect("three commitments for a three-message key");
        CertificateShare {
            certifier: self.index,
            signature,
        }
    }
}

/// The library's wrapper around a commitment point (it has no constructor from a point; its
/// encoding is the point's).
fn message_commitment(point: &G1) -> MessageCommitment<Pairing> {
    MessageCommitment::deserialize_compressed_unchecked(&crate::group::compressed(point)[..])
        .expect("a point's encoding is a commitment's")
}
