//! Endorsers' identities and key material: FROST shares under one BIP340 group key.

use std::collections::BTreeMap;

use frost::keys::{KeyPackage, PublicKeyPackage};
use frost::Identifier;
use frost_secp256k1_tr as frost;
use rand::rngs::StdRng;
use rand::SeedableRng;
use thiserror::Error;

use crate::format::GroupKey;

/// The most endorsers one group has. FROST's cost per signer grows with the signers (each share
/// evaluates k Lagrange coefficients), and a group of this size already tolerates dozens of
/// compromised sentinels.
pub const ENDORSERS_MAX: u16 = 64;

/// An endorser's number in its group, 1 to `n`: FROST's participant identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndorserId(pub u16);

impl EndorserId {
    /// The FROST identifier of this endorser. Requires a non-zero id (FROST evaluates the
    /// sharing polynomial at the identifier, and at zero it would reveal the group secret).
    pub fn identifier(self) -> Identifier {
        Identifier::try_from(self.0).expect("endorser ids start at 1")
    }

    /// The endorser whose FROST identifier is `identifier`, if it is one of 1 to
    /// [`ENDORSERS_MAX`].
    pub fn from_identifier(identifier: &Identifier) -> Option<EndorserId> {
        (1..=ENDORSERS_MAX)
            .map(EndorserId)
            .find(|id| id.identifier() == *identifier)
    }
}

/// A group's size and threshold: `k` of `n` endorsers sign.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Threshold {
    pub k: u16,
    pub n: u16,
}

/// Why a group's parameters or keys are refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum KeyError {
    #[error("a group needs 2 <= k <= n <= {ENDORSERS_MAX}, not k = {k}, n = {n}")]
    BadThreshold { k: u16, n: u16 },
    #[error("FROST refused the key material: {0}")]
    Frost(#[from] frost::Error),
    #[error("the group key is not a valid BIP340 key")]
    BadGroupKey,
}

impl Threshold {
    /// Checks `2 <= k <= n <= ENDORSERS_MAX`. A threshold of 1 would be today's single attester.
    pub fn new(k: u16, n: u16) -> Result<Threshold, KeyError> {
        if k < 2 || k > n || n > ENDORSERS_MAX {
            return Err(KeyError::BadThreshold { k, n });
        }
        Ok(Threshold { k, n })
    }

    pub fn endorsers(self) -> impl Iterator<Item = EndorserId> {
        (1..=self.n).map(EndorserId)
    }
}

/// The x-only group key of a FROST public key package: the key BIP340 verifiers check against.
pub fn group_key(public: &PublicKeyPackage) -> Result<GroupKey, KeyError> {
    let compressed = public.verifying_key().serialize()?;
    // SEC1 compressed: parity byte, then x. BIP340 keys are the x coordinate alone (FROST's
    // taproot ciphersuite negates the shares when y is odd, so signatures verify under it).
    let x: [u8; 32] = compressed
        .get(1..33)
        .and_then(|x| x.try_into().ok())
        .ok_or(KeyError::BadGroupKey)?;
    let key = GroupKey(x);
    key.xonly().ok_or(KeyError::BadGroupKey)?;
    Ok(key)
}

/// An endorser's key material: its secret share and the group's public shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndorserKeys {
    pub id: EndorserId,
    pub share: KeyPackage,
    pub public: PublicKeyPackage,
}

impl EndorserKeys {
    pub fn group_key(&self) -> GroupKey {
        group_key(&self.public).expect("key material checked when it was made")
    }
}

/// Shares from a trusted dealer, drawn from `seed`: for tests, simulations and benchmarks only.
/// A real group runs the distributed key generation (`crate::ceremony`), so no one ever holds
/// the group secret.
pub fn deal(
    threshold: Threshold,
    seed: u64,
) -> Result<(BTreeMap<EndorserId, EndorserKeys>, PublicKeyPackage), KeyError> {
    let rng = StdRng::seed_from_u64(seed);
    let identifiers: Vec<Identifier> = threshold.endorsers().map(EndorserId::identifier).collect();
    let (shares, public) = frost::keys::generate_with_dealer(
        threshold.n,
        threshold.k,
        frost::keys::IdentifierList::Custom(&identifiers),
        rng,
    )?;
    group_key(&public)?;
    let mut keys = BTreeMap::new();
    for (identifier, share) in shares {
        let id = EndorserId::from_identifier(&identifier).expect("dealt to the ids asked for");
        let share = KeyPackage::try_from(share)?;
        keys.insert(
            id,
            EndorserKeys {
                id,
                share,
                public: public.clone(),
            },
        );
    }
    Ok((keys, public))
}

/// Signs `message` with the shares of `signers`, all held here (FROST's two rounds, then the
/// aggregate): for tests and simulations that check what a group's shares can sign, as
/// [`deal`] is. The roles never do this: each endorser signs with its own share.
pub fn sign_together(
    keys: &BTreeMap<EndorserId, EndorserKeys>,
    public: &PublicKeyPackage,
    signers: &[EndorserId],
    message: &[u8],
    seed: u64,
) -> Result<frost::Signature, frost::Error> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut nonces = BTreeMap::new();
    let mut commitments = BTreeMap::new();
    for id in signers {
        let share = &keys.get(id).ok_or(frost::Error::UnknownIdentifier)?.share;
        let (nonce, commitment) = frost::round1::commit(share.signing_share(), &mut rng);
        nonces.insert(id.identifier(), nonce);
        commitments.insert(id.identifier(), commitment);
    }
    let package = frost::SigningPackage::new(commitments, message);
    let mut shares = BTreeMap::new();
    for id in signers {
        let share = &keys.get(id).ok_or(frost::Error::UnknownIdentifier)?.share;
        shares.insert(
            id.identifier(),
            frost::round2::sign(&package, &nonces[&id.identifier()], share)?,
        );
    }
    frost::aggregate(&package, &shares, public)
}
