//! An offline-cash device (docs/offline-mode.md, "Devices and limits"): the tokens it holds, the
//! one-time keys it derives from its seed and has certified, the payments it offers to receive,
//! and the statements it has signed. No I/O and no clock: its driver (the CLI, the simulator)
//! hands it the time and keeps it on disk.
//!
//! An honest device signs at most one statement on each node of a token's tree: it records what
//! it signed ([`Device::signed`]) before it hands a payment or a deposit out, and never signs a
//! second one there; a deposit that got no answer is sent again byte for byte. So the authority
//! never names it, whatever happens to the copies.
//!
//! Limits, each with a default and a refusal that names it: the holding limit and the per-payment
//! limit (the device's own), the hops a token may have passed offline, and the time since the last
//! sync (checked by the payer and by the payee). A payee checks every token it receives as seed 001
//! §IV-C says, and, beyond the prototype, that the last hop gives it to the key and signs the nonce
//! it offered for this very payment, so a replayed payment is refused.

mod file;
mod hand_over;
mod limits;
mod payments;

pub use file::{DEVICE_FILE_BYTES_MAX, DEVICE_ITEMS_MAX, DEVICE_KEYS_MAX};
pub use hand_over::{HandOverError, HandOverMessage, HandOverSide, HandedOver, PayeeHandOver, PayerHandOver, Step};
pub use limits::{DeviceError, DeviceLimits};
pub use payments::{Deposit, PaymentRequest};

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use sha2::{Digest, Sha256};
use specie_offline::{
    Instruction, Issuance, KeyBinding, KeyCertificate, KeyRing, Link, Move, PublicKey, SigningKey, Token, TokenError,
};

/// A token the device holds: the chain, the index of its key that owns it, its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub token: Token,
    pub key: u64,
    pub value: u64,
}

/// The device.
#[derive(Clone, Debug)]
pub struct Device {
    seed: [u8; 32],
    identity: SigningKey,
    limits: DeviceLimits,
    /// One-time keys derived so far (index → public key), and back.
    keys: BTreeMap<PublicKey, u64>,
    next_key: u64,
    /// Certified keys not yet offered or used, with their certificates.
    unused: VecDeque<(u64, KeyCertificate)>,
    held: Vec<Held>,
    /// Payments this device offered to receive, by nonce: the key offered and the amount.
    offers: BTreeMap<[u8; 16], (u64, KeyCertificate, u64)>,
    /// Every node of a token this device signed a statement on → that statement's link.
    signed: BTreeMap<Link, Link>,
    /// Deposits sent and not yet answered.
    pending: Vec<Deposit>,
    revoked: BTreeSet<[u8; 16]>,
    revocations_seen: u64,
    last_sync_ms: u64,
}

impl Device {
    /// A device whose identity and one-time keys all derive from `seed` (its only secret).
    pub fn new(seed: [u8; 32], limits: DeviceLimits, now_ms: u64) -> Device {
        Device {
            identity: derive_key(b"identity", &seed, 0),
            seed,
            limits,
            keys: BTreeMap::new(),
            next_key: 0,
            unused: VecDeque::new(),
            held: Vec::new(),
            offers: BTreeMap::new(),
            signed: BTreeMap::new(),
            pending: Vec::new(),
            revoked: BTreeSet::new(),
            revocations_seen: 0,
            last_sync_ms: now_ms,
        }
    }

    pub fn identity(&self) -> PublicKey {
        self.identity.verifying_key().to_bytes()
    }

    pub fn limits(&self) -> &DeviceLimits {
        &self.limits
    }

    fn key(&self, index: u64) -> SigningKey {
        one_time_key(&self.seed, index)
    }

    /// The index of this device's one-time key `key`, if it derived it.
    pub fn key_index(&self, key: &PublicKey) -> Option<u64> {
        self.keys.get(key).copied()
    }

    /// `count` fresh one-time keys, bound to the identity, for the authority to certify.
    pub fn bindings(&mut self, count: usize) -> Vec<KeyBinding> {
        (0..count)
            .map(|_| {
                let index = self.next_key;
                self.next_key += 1;
                let public = self.key(index).verifying_key().to_bytes();
                self.keys.insert(public, index);
                KeyBinding::sign(&self.identity, public)
            })
            .collect()
    }

    /// The authority's certificates of keys from [`Device::bindings`]; others are ignored.
    pub fn certified(&mut self, certificates: &[KeyCertificate]) {
        for certificate in certificates {
            if let Some(&index) = self.keys.get(&certificate.key) {
                if !self.unused.iter().any(|(i, _)| *i == index) {
                    self.unused.push_back((index, *certificate));
                }
            }
        }
    }

    /// Certified keys left to receive with.
    pub fn keys_left(&self) -> usize {
        self.unused.len()
    }

    /// Takes `count` certified keys for a funding's tokens (the authority issues to them).
    pub fn funding_owners(&mut self, count: usize) -> Result<Vec<PublicKey>, DeviceError> {
        if self.unused.len() < count {
            return Err(DeviceError::NoKeys {
                needed: count,
                left: self.unused.len(),
            });
        }
        Ok((0..count)
            .map(|_| self.unused.pop_front().expect("checked").1.key)
            .collect())
    }

    /// Takes tokens the authority issued to this device's keys (a funding or a re-issue), checked
    /// against the ring.
    pub fn receive_issued(&mut self, issuances: &[Issuance], ring: &KeyRing) -> Result<u64, DeviceError> {
        let mut received = Vec::with_capacity(issuances.len());
        for (index, issuance) in issuances.iter().enumerate() {
            let token = Token::issued(*issuance);
            let verified = token
                .verify(ring)
                .map_err(|error| DeviceError::BadToken { index, error })?;
            let key = *self
                .keys
                .get(&verified.owner)
                .ok_or(DeviceError::NotForThisPayment { index })?;
            received.push(Held {
                token,
                key,
                value: verified.denomination,
            });
        }
        let value = received.iter().map(|held| held.value).sum();
        self.held.extend(received);
        Ok(value)
    }

    /// Value held.
    pub fn balance(&self) -> u64 {
        self.held.iter().map(|held| held.value).sum()
    }

    pub fn held(&self) -> &[Held] {
        &self.held
    }

    pub fn pending(&self) -> &[Deposit] {
        &self.pending
    }

    /// The node → statement links this device has signed on (what it must never sign twice on).
    pub fn signed(&self) -> &BTreeMap<Link, Link> {
        &self.signed
    }

    pub fn revocations_seen(&self) -> u64 {
        self.revocations_seen
    }

    /// The device synced with the authority at `now_ms`: serials revoked since it last asked.
    pub fn synced(&mut self, revoked: &[[u8; 16]], now_ms: u64) {
        self.revocations_seen += revoked.len() as u64;
        self.revoked.extend(revoked.iter().copied());
        self.last_sync_ms = self.last_sync_ms.max(now_ms);
    }

    /// Forgets the unused one-time keys that may no longer be paid to under `ring` (certified
    /// in a period past its spend window); returns how many. A syncing device calls it before it
    /// certifies more.
    pub fn forget_stale_keys(&mut self, ring: &KeyRing) -> usize {
        let lifecycle = ring.lifecycle();
        let before = self.unused.len();
        self.unused
            .retain(|(_, certificate)| lifecycle.certificate_receivable(certificate.period));
        before - self.unused.len()
    }

    fn check_sync_age(&self, now_ms: u64) -> Result<(), DeviceError> {
        let age_ms = now_ms.saturating_sub(self.last_sync_ms);
        match age_ms > self.limits.sync_age_ms_max {
            true => Err(DeviceError::SyncTooOld {
                age_ms,
                limit_ms: self.limits.sync_age_ms_max,
            }),
            false => Ok(()),
        }
    }

    /// Records that this device signed `child` on node `node`; refuses a second statement there.
    fn sign_once(&mut self, node: Link, child: Link) {
        let earlier = self.signed.insert(node, child);
        assert!(
            earlier.is_none_or(|earlier| earlier == child),
            "an honest device signs one statement per node"
        );
    }

    /// Signs a deposit of every token held, each re-issued to a fresh certified key of this
    /// device's (or defunded to `defund_to` where no key is left, or always if given `always`).
    /// The deposits wait in [`Device::pending`] until the authority answers; send them as they are.
    pub fn deposit_all(&mut self, defund_to: [u8; 32], always_defund: bool) -> Vec<Deposit> {
        let mut deposits = Vec::with_capacity(self.held.len());
        for held in std::mem::take(&mut self.held) {
            let new_key = match always_defund {
                true => None,
                false => self.unused.pop_front(),
            };
            let instruction = match new_key {
                Some((_, certificate)) => Instruction::Reissue {
                    outputs: vec![(held.value, certificate.key)],
                },
                None => Instruction::Defund { address: defund_to },
            };
            let last = *held.token.links().last().expect("an issuance link");
            let nonce: [u8; 16] = Sha256::digest([&last[..], b"deposit"].concat())[..16]
                .try_into()
                .expect("16 bytes");
            let statement = Move::Deposit {
                instruction: instruction.hash(),
                nonce,
            }
            .sign(&held.token, &self.key(held.key));
            let deposit = Deposit {
                token: held.token,
                statement,
                instruction,
                value: held.value,
            };
            self.sign_once(last, deposit.link());
            deposits.push(deposit);
        }
        self.pending.extend(deposits.iter().cloned());
        deposits
    }

    /// The authority answered the deposit of link `link`: its re-issued tokens (if any) are held.
    /// Re-issued tokens must be the ones the deposit's instruction asked for (its keys, its
    /// denominations, in order), else the deposit is kept and nothing is taken: an answer that
    /// does not pay it (another deposit's, a replay, a forgery) never ends it. None ends it
    /// without tokens: the caller's reading of a refusal, or of a defund's payout handed on.
    pub fn deposited(&mut self, link: &Link, reissued: &[Issuance], ring: &KeyRing) -> Result<(), DeviceError> {
        let Some(at) = self.pending.iter().position(|deposit| deposit.link() == *link) else {
            return Ok(());
        };
        check_reissue(&self.pending[at].instruction, reissued, ring)?;
        match self.receive_issued(reissued, ring) {
            // The answer came back after the re-issued tokens' key left the ring (its deposit
            // window closed while the device stayed away): they are worth nothing now.
            Err(DeviceError::BadToken {
                error: TokenError::UnknownIssuingKey,
                ..
            }) => {}
            result => {
                result?;
            }
        }
        self.pending.remove(at);
        Ok(())
    }

    /// What the payout of the pending defund `link` must pay: the token's serial, the defund
    /// address (an x-only key; the payout's output carries its witness program commitment) and
    /// the token's value. `None` if no such defund is pending.
    pub fn owed_payout(&self, link: &Link) -> Option<([u8; 16], [u8; 32], u64)> {
        let deposit = self.pending.iter().find(|deposit| deposit.link() == *link)?;
        match deposit.instruction {
            Instruction::Defund { address } => Some((deposit.token.issuance.serial, address, deposit.value)),
            Instruction::Reissue { .. } => None,
        }
    }

    /// The payout of the pending defund `link` was handed on (presented to the core and its coin
    /// in a wallet, or printed for its payee): the deposit is done. Until then it stays pending
    /// and is sent again, and the authority answers it with the same payout. False if no such
    /// defund was pending.
    pub fn paid_out(&mut self, link: &Link) -> bool {
        let before = self.pending.len();
        self.pending
            .retain(|deposit| deposit.link() != *link || !matches!(deposit.instruction, Instruction::Defund { .. }));
        self.pending.len() != before
    }
}

/// Checks that `reissued`, if any, are the tokens `instruction` asked for: one per output, to its
/// key, of its denomination where the ring still knows the issuing key (a key gone from the ring
/// makes them worthless, which `deposited` handles); a defund asks for none.
fn check_reissue(instruction: &Instruction, reissued: &[Issuance], ring: &KeyRing) -> Result<(), DeviceError> {
    if reissued.is_empty() {
        return Ok(());
    }
    let asked: &[(u64, PublicKey)] = match instruction {
        Instruction::Reissue { outputs } => outputs,
        Instruction::Defund { .. } => &[],
    };
    if reissued.len() != asked.len() {
        return Err(DeviceError::NotTheReissueAsked {
            index: reissued.len().min(asked.len()),
        });
    }
    for (index, (issuance, (value, key))) in reissued.iter().zip(asked).enumerate() {
        let denomination = ring
            .issuing_key(&issuance.issuing_key)
            .map(|(denomination, _)| denomination);
        if issuance.first_owner != *key || denomination.is_some_and(|denomination| denomination != *value) {
            return Err(DeviceError::NotTheReissueAsked { index });
        }
    }
    Ok(())
}

/// One-time key `index` of the device whose seed is `seed`. Only the device itself needs it; a
/// simulation that plays a dishonest device (one that signs twice) derives it here.
pub fn one_time_key(seed: &[u8; 32], index: u64) -> SigningKey {
    derive_key(b"one-time", seed, index)
}

/// A device key: SHA-256 of a domain, the kind, the seed and the index, as an Ed25519 secret.
fn derive_key(kind: &[u8], seed: &[u8; 32], index: u64) -> SigningKey {
    let mut hasher = Sha256::new();
    hasher.update(b"specie/offline/device-key/v1/");
    hasher.update(kind);
    hasher.update(seed);
    hasher.update(index.to_le_bytes());
    SigningKey::from_bytes(&hasher.finalize().into())
}
