//! A device of the offline world: its identity, its one-time keys (certified in batches), the
//! tokens it holds, the payments it offers to receive and the deposits it has sent. An honest
//! device passes each token on once; a cheater may keep a copy of what it pays.

use std::collections::{HashMap, HashSet, VecDeque};

use sha2::{Digest, Sha256};
use specie_offline::{
    deterministic_key, Instruction, Issuance, KeyBinding, KeyCertificate, KeyRing, Link, Move, PublicKey, SignedMove,
    SigningKey, Token, TokenError,
};
use specie_offline_authority::{DepositOutcome, Funding, Input};

/// A token a device holds, the key of its that owns it, and its value.
#[derive(Clone, Debug)]
pub(super) struct Held {
    pub token: Token,
    key: usize,
    pub value: u64,
}

/// A payee's offer for one payment: a fresh certified key and a fresh nonce.
pub(super) struct Offer {
    key: usize,
    certificate: KeyCertificate,
    nonce: [u8; 16],
}

/// A payment made: to whom, and the token as the payee got it.
#[derive(Clone, Debug)]
pub(super) struct Payment {
    pub payee: usize,
    pub token: Token,
}

/// A deposit sent and not yet answered: resent byte for byte until it is.
#[derive(Clone, Debug)]
pub(super) struct PendingDeposit {
    pub token: Token,
    statement: SignedMove,
    instruction: Instruction,
    new_key: Option<usize>,
    value: u64,
}

impl PendingDeposit {
    /// The deposit statement's link: the node it makes in the token's tree.
    pub fn link(&self) -> Link {
        let last = *self.token.links().last().expect("an issuance link");
        let index = (self.token.hops.len() + 1) as u8;
        Sha256::digest(self.statement.statement.signing_bytes(&last, index)).into()
    }

    pub fn input(&self) -> impl FnOnce(u64) -> Input {
        let (token, statement, instruction) = (Box::new(self.token.clone()), self.statement, self.instruction.clone());
        move |ticket| Input::Deposit {
            ticket,
            token,
            statement,
            instruction,
        }
    }
}

/// Why a payee refuses a payment.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    #[error("the chain does not verify: {0}")]
    BadChain(TokenError),
    /// Not to the key and nonce this payee offered for this payment: a replay.
    #[error("not to the key and nonce offered for this payment")]
    NotForThisPayment,
    #[error("the token is revoked")]
    Revoked,
    #[error("too many hops")]
    TooManyHops,
}

pub(super) struct Device {
    pub cheater: bool,
    index: usize,
    seed: u64,
    identity: SigningKey,
    keys: Vec<SigningKey>,
    key_index: HashMap<PublicKey, usize>,
    certificates: HashMap<usize, KeyCertificate>,
    unused: VecDeque<usize>,
    offers: HashMap<[u8; 16], usize>,
    holding: Vec<Held>,
    pending: Vec<PendingDeposit>,
    revoked: HashSet<[u8; 16]>,
    revocations_seen: u64,
    fundings: u32,
}

impl Device {
    pub fn new(seed: u64, index: usize, cheater: bool) -> Device {
        Device {
            cheater,
            index,
            seed,
            identity: deterministic_key(&format!("sim-offline/{seed}/identity"), index as u64),
            keys: Vec::new(),
            key_index: HashMap::new(),
            certificates: HashMap::new(),
            unused: VecDeque::new(),
            offers: HashMap::new(),
            holding: Vec::new(),
            pending: Vec::new(),
            revoked: HashSet::new(),
            revocations_seen: 0,
            fundings: 0,
        }
    }

    pub fn identity(&self) -> PublicKey {
        self.identity.verifying_key().to_bytes()
    }

    fn public(&self, key: usize) -> PublicKey {
        self.keys[key].verifying_key().to_bytes()
    }

    /// `count` fresh one-time keys, bound to this device's identity, for certification.
    pub fn bindings(&mut self, count: usize) -> Vec<KeyBinding> {
        (0..count)
            .map(|_| {
                let n = self.keys.len() as u64;
                let label = format!("sim-offline/{}/one-time/{}", self.seed, self.index);
                let key = deterministic_key(&label, n);
                let public = key.verifying_key().to_bytes();
                self.key_index.insert(public, self.keys.len());
                self.keys.push(key);
                KeyBinding::sign(&self.identity, public)
            })
            .collect()
    }

    pub fn certified(&mut self, certificates: Vec<KeyCertificate>) {
        for certificate in certificates {
            let key = self.key_index[&certificate.key];
            self.certificates.insert(key, certificate);
            self.unused.push_back(key);
        }
    }

    pub fn keys_left(&self) -> usize {
        self.unused.len()
    }

    /// A funding from the core to `count` fresh keys of this device.
    pub fn funding(&mut self, amount: u64, count: usize) -> Funding {
        assert!(self.unused.len() >= count, "enough certified keys for a funding");
        let owners = (0..count)
            .map(|_| {
                let key = self.unused.pop_front().expect("checked");
                self.public(key)
            })
            .collect();
        let mut id = [0; 32];
        id[..8].copy_from_slice(&self.seed.to_le_bytes());
        id[8..16].copy_from_slice(&(self.index as u64).to_le_bytes());
        id[16..20].copy_from_slice(&self.fundings.to_le_bytes());
        self.fundings += 1;
        Funding { id, amount, owners }
    }

    pub fn receive_issued(&mut self, issuance: Issuance, value: u64) {
        let key = self.key_index[&issuance.first_owner];
        self.holding.push(Held {
            token: Token::issued(issuance),
            key,
            value,
        });
    }

    /// Offers a fresh certified key and `nonce` for a payment; none if no key is left.
    pub fn offer(&mut self, nonce: [u8; 16]) -> Option<Offer> {
        let key = self.unused.pop_front()?;
        self.offers.insert(nonce, key);
        Some(Offer {
            key,
            certificate: self.certificates[&key],
            nonce,
        })
    }

    /// Takes back an offer no payment used: its key was never signed to, so it stays fresh.
    pub fn withdraw_offer(&mut self, offer: &Offer) {
        if self.offers.remove(&offer.nonce).is_some() {
            self.unused.push_front(offer.key);
        }
    }

    /// Which held token to pay: one that may still travel (fewer hops than the limit).
    pub fn choose(&self, pick: usize, hops_max: usize) -> Option<usize> {
        let payable: Vec<usize> = (0..self.holding.len())
            .filter(|&i| self.holding[i].token.hops.len() < hops_max)
            .collect();
        (!payable.is_empty()).then(|| payable[pick % payable.len()])
    }

    pub fn held(&self, index: usize) -> &Held {
        &self.holding[index]
    }

    pub fn holding(&self) -> &[Held] {
        &self.holding
    }

    /// What a payee checks before the payer signs: the token is not revoked.
    pub fn precheck(&self, token: &Token) -> Result<(), Refused> {
        match self.revoked.contains(&token.issuance.serial) {
            true => Err(Refused::Revoked),
            false => Ok(()),
        }
    }

    /// Pays held token `index` to the offer; a cheater that keeps a copy still holds it.
    pub fn pay(&mut self, index: usize, offer: &Offer, keep_copy: bool) -> Payment {
        let held = match keep_copy {
            true => self.holding[index].clone(),
            false => self.holding.remove(index),
        };
        let token = held
            .token
            .transfer(&self.keys[held.key], offer.certificate, offer.nonce)
            .expect("the device owns what it holds");
        Payment {
            payee: usize::MAX,
            token,
        }
    }

    /// The payee's checks (seed 001, §IV-C, and the nonce of §IV-G): the chain verifies, the
    /// last hop gives the token to the key this payee offered, at the nonce it offered for this
    /// payment, within the hop limit, and the token is not revoked. Returns the token's value.
    pub fn receive(&mut self, ring: &KeyRing, offer: &Offer, token: &Token, hops_max: usize) -> Result<u64, Refused> {
        let verified = token.verify(ring).map_err(Refused::BadChain)?;
        let last = token.hops.last().ok_or(Refused::NotForThisPayment)?;
        if last.nonce != offer.nonce || verified.owner != self.public(offer.key) {
            return Err(Refused::NotForThisPayment);
        }
        if token.hops.len() > hops_max {
            return Err(Refused::TooManyHops);
        }
        self.precheck(token)?;
        if self.offers.remove(&offer.nonce).is_none() {
            return Err(Refused::NotForThisPayment);
        }
        self.holding.push(Held {
            token: token.clone(),
            key: offer.key,
            value: verified.denomination,
        });
        Ok(verified.denomination)
    }

    /// Signs a deposit of every token held: re-issued to a fresh key of its own, or, where
    /// `defunds` says so (or no key is left), defunded to the device's core address.
    pub fn prepare_deposits(&mut self, defunds: &[bool]) {
        for (held, defund) in std::mem::take(&mut self.holding).into_iter().zip(defunds) {
            let new_key = match defund {
                true => None,
                false => self.unused.pop_front(),
            };
            let instruction = match new_key {
                Some(key) => Instruction::Reissue {
                    outputs: vec![(held.value, self.public(key))],
                },
                None => Instruction::Defund {
                    address: [self.index as u8; 32],
                },
            };
            let last = *held.token.links().last().expect("an issuance link");
            let nonce: [u8; 16] = last[..16].try_into().expect("16 of 32 bytes");
            let statement = Move::Deposit {
                instruction: instruction.hash(),
                nonce,
            }
            .sign(&held.token, &self.keys[held.key]);
            self.pending.push(PendingDeposit {
                token: held.token,
                statement,
                instruction,
                new_key,
                value: held.value,
            });
        }
    }

    pub fn pending(&self) -> &[PendingDeposit] {
        &self.pending
    }

    /// The authority answered the deposit of link `link`.
    pub fn answered(&mut self, link: &Link, outcome: &DepositOutcome) {
        let Some(at) = self.pending.iter().position(|p| p.link() == *link) else {
            return;
        };
        let deposit = self.pending.remove(at);
        if let (DepositOutcome::Reissued { issuances }, Some(key)) = (outcome, deposit.new_key) {
            for issuance in issuances {
                self.holding.push(Held {
                    token: Token::issued(*issuance),
                    key,
                    value: deposit.value,
                });
            }
        }
    }

    pub fn revocations_seen(&self) -> u64 {
        self.revocations_seen
    }

    pub fn revoked(&mut self, serials: Vec<[u8; 16]>) {
        self.revocations_seen += serials.len() as u64;
        self.revoked.extend(serials);
    }

    pub fn value_held(&self) -> u64 {
        self.holding.iter().map(|held| held.value).sum()
    }
}
