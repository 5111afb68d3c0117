//! Offline cash's workload: a device as the demo and the simulator's offline world drive it,
//! the real `specie-offline-device` state machine plus, for a cheater, the copies it keeps of
//! what it paid, spent or deposited again with keys derived outside the device (an honest device
//! never signs twice on one node; a cheater's does).

use specie_offline::{Instruction, Issuance, KeyRing, Link, Move, SigningKey, Token};
use specie_offline_authority::Funding;
use specie_offline_device::{one_time_key, Deposit, Device, DeviceError, DeviceLimits, PaymentRequest};

/// A token a cheater paid away and kept: as it held it, its key index and its value.
#[derive(Clone, Debug)]
struct Copy {
    token: Token,
    key: u64,
    value: u64,
}

pub struct OfflineActor {
    pub device: Device,
    pub cheater: bool,
    /// Where a cheater's copies are defunded to (an x-only key).
    defund_to: [u8; 32],
    seed: [u8; 32],
    copies: Vec<Copy>,
    /// A cheater's deposits of its copies, signed outside the device, until answered.
    copy_deposits: Vec<Deposit>,
    fundings: u32,
}

impl OfflineActor {
    /// Device `index` of the run `run_seed`, under `limits`; a cheater's copies are defunded to
    /// `defund_to`.
    pub fn new(run_seed: u64, index: usize, cheater: bool, limits: DeviceLimits, defund_to: [u8; 32]) -> OfflineActor {
        let mut seed = [0; 32];
        seed[..8].copy_from_slice(&run_seed.to_le_bytes());
        seed[8..16].copy_from_slice(&(index as u64).to_le_bytes());
        OfflineActor {
            device: Device::new(seed, limits, 0),
            cheater,
            defund_to,
            seed,
            copies: Vec::new(),
            copy_deposits: Vec::new(),
            fundings: 0,
        }
    }

    /// A funding of `count` certified keys of this device under an id of its own (a world with
    /// no core to fund from).
    pub fn funding(&mut self, amount: u64, count: usize) -> Result<Funding, DeviceError> {
        let owners = self.device.funding_owners(count)?;
        let mut id = [0; 32];
        id[..16].copy_from_slice(&self.seed[..16]);
        id[16..20].copy_from_slice(&self.fundings.to_le_bytes());
        self.fundings += 1;
        Ok(Funding { id, amount, owners })
    }

    /// The value of a token this device could pay (within the hop limit), picked by `pick`.
    pub fn payable_value(&self, pick: usize) -> Option<u64> {
        let hops_max = self.device.limits().hops_max;
        let payable: Vec<u64> = self
            .device
            .held()
            .iter()
            .filter(|held| held.token.hops.len() < hops_max)
            .map(|held| held.value)
            .collect();
        (!payable.is_empty()).then(|| payable[pick % payable.len()])
    }

    /// The value of a kept copy, picked by `pick`.
    pub fn copy_value(&self, pick: usize) -> Option<u64> {
        let hops_max = self.device.limits().hops_max;
        let spendable: Vec<&Copy> = self.copies.iter().filter(|c| c.token.hops.len() < hops_max).collect();
        (!spendable.is_empty()).then(|| spendable[pick % spendable.len()].value)
    }

    /// A cheater keeps what it just paid: each token as it held it, with its key and value.
    pub fn keep_copies(&mut self, paid: &[Token], ring: &KeyRing) {
        for token in paid {
            let mut held = token.clone();
            held.hops.pop();
            let key = self.device.key_index(held.owner()).expect("the device's own key");
            let value = ring
                .issuing_key(&held.issuance.issuing_key)
                .map_or(0, |(value, _)| value);
            self.copies.push(Copy {
                token: held,
                key,
                value,
            });
        }
    }

    /// A cheater spends a kept copy of the requested value again: a second statement on a node
    /// it signed on already (and, if it `keeps_it`, keeps the copy for a third).
    pub fn pay_copy(&mut self, request: &PaymentRequest, keeps_it: bool) -> Option<Token> {
        let hops_max = self.device.limits().hops_max;
        let at = self
            .copies
            .iter()
            .position(|c| c.value == request.amount && c.token.hops.len() < hops_max)?;
        let copy = match keeps_it {
            true => self.copies[at].clone(),
            false => self.copies.remove(at),
        };
        let key = one_time_key(&self.seed, copy.key);
        Some(
            copy.token
                .transfer(&key, request.certificate, request.nonce)
                .expect("the copy's owner key"),
        )
    }

    /// A cheater deposits its remaining copies (defunded to its core address).
    pub fn deposit_copies(&mut self) {
        for copy in std::mem::take(&mut self.copies) {
            let key: SigningKey = one_time_key(&self.seed, copy.key);
            let instruction = Instruction::Defund {
                address: self.defund_to,
            };
            let statement = Move::Deposit {
                instruction: instruction.hash(),
                nonce: [0xc0; 16],
            }
            .sign(&copy.token, &key);
            self.copy_deposits.push(Deposit {
                token: copy.token,
                statement,
                instruction,
                value: copy.value,
            });
        }
    }

    /// Every deposit sent and not answered: the device's and the cheater's copies'.
    pub fn pending(&self) -> Vec<Deposit> {
        let mut pending = self.device.pending().to_vec();
        pending.extend(self.copy_deposits.iter().cloned());
        pending
    }

    /// The deposit of `link` was answered: re-issued tokens (if any) go to the device.
    pub fn answered(&mut self, link: &Link, reissued: &[Issuance], ring: &KeyRing) -> Result<(), DeviceError> {
        self.copy_deposits.retain(|deposit| deposit.link() != *link);
        self.device.deposited(link, reissued, ring)
    }

    pub fn copies_left(&self) -> usize {
        self.copies.len() + self.copy_deposits.len()
    }
}

/// The choices one offline payment makes (a seeded run draws them): which token value to pay
/// (`pick`), whether a cheating payer spends a kept copy instead, whether it keeps that copy for
/// yet another spend (`keeps_it`) or keeps a copy of what it pays now (`keep_copy`), and the
/// payee's nonce.
#[derive(Clone, Copy, Debug)]
pub struct PaymentChoice {
    pub pick: usize,
    pub spend_copy: bool,
    pub keeps_it: bool,
    pub keep_copy: bool,
    pub nonce: [u8; 16],
}

/// How an offline payment between two actors ended.
#[derive(Debug)]
pub enum PaymentEnd {
    /// The payee checked and holds `tokens`; the payer kept `copies_kept` copies of them.
    Paid { tokens: Vec<Token>, copies_kept: usize },
    /// The payer has nothing it may pay (`hop_limit`: it holds tokens, all at the hop limit).
    NothingPayable { hop_limit: bool },
    /// The payee has no certified key left to receive with (until it syncs).
    PayeeHasNoKeys,
    /// The payer's tokens cannot make the amount, or are revoked: nothing was signed.
    NotMade,
    /// The payee refused a token it must not take offline: one found double spent, or of an
    /// expired or revoked key (the request is withdrawn).
    RevokedRefused,
}

/// One payment from `payer` to `payee`, offline: the payee asks for an amount the payer can
/// make (a fresh certified key, the choice's nonce), the payer pays it (a cheater spending a
/// copy if so chosen), the payee's device checks it. An error is a payment an honest payee
/// should have taken and refused.
pub fn pay(
    actors: &mut [OfflineActor],
    payer: usize,
    payee: usize,
    choice: PaymentChoice,
    ring: &KeyRing,
    now_ms: u64,
) -> Result<PaymentEnd, DeviceError> {
    let spend_copy = choice.spend_copy && actors[payer].cheater;
    let amount = match spend_copy {
        true => actors[payer].copy_value(choice.pick),
        false => actors[payer].payable_value(choice.pick),
    };
    let Some(amount) = amount else {
        let holds = !actors[payer].device.held().is_empty();
        return Ok(PaymentEnd::NothingPayable {
            hop_limit: holds && !spend_copy,
        });
    };
    let request = match actors[payee].device.request(amount, choice.nonce, now_ms) {
        Ok(request) => request,
        Err(DeviceError::NoKeys { .. }) => return Ok(PaymentEnd::PayeeHasNoKeys),
        Err(error) => return Err(error),
    };
    let paid = match spend_copy {
        true => actors[payer]
            .pay_copy(&request, choice.keeps_it)
            .map(|token| vec![token]),
        false => actors[payer].device.pay(&request, ring, now_ms).ok(),
    };
    let Some(paid) = paid else {
        actors[payee].device.cancel_request(&choice.nonce);
        return Ok(PaymentEnd::NotMade);
    };
    let keep_copy = !spend_copy && actors[payer].cheater && choice.keep_copy;
    if keep_copy {
        actors[payer].keep_copies(&paid, ring);
    }
    match actors[payee].device.receive(&choice.nonce, &paid, ring, now_ms) {
        Ok(_) => Ok(PaymentEnd::Paid {
            copies_kept: if keep_copy { paid.len() } else { 0 },
            tokens: paid,
        }),
        Err(
            DeviceError::Revoked { .. }
            | DeviceError::KeyRevoked { .. }
            | DeviceError::Expired { .. }
            | DeviceError::Worthless { .. },
        ) => {
            actors[payee].device.cancel_request(&choice.nonce);
            Ok(PaymentEnd::RevokedRefused)
        }
        // A cheater's copy (signed outside the device, so unchecked) of a token whose key has
        // left the ring, or to a payee key gone stale: refused like any stale token.
        Err(DeviceError::BadToken { .. } | DeviceError::StaleKey { .. }) if spend_copy => {
            actors[payee].device.cancel_request(&choice.nonce);
            Ok(PaymentEnd::RevokedRefused)
        }
        Err(error) => Err(error),
    }
}
