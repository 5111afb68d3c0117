//! A device's canonical encoding: what its file holds. Versioned, every count bounded before it
//! is allocated, every value re-checked on the way in (the one-time keys are derived again from
//! the seed, not read), and only one encoding per device, so a file that does not re-encode to its
//! own bytes is refused.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use specie_codec::{put_u64, DecodeError, Reader};
use specie_offline::{Instruction, KeyCertificate, SignedMove, Token, CERTIFIED_KEY_BYTES};

use crate::{derive_key, Deposit, Device, DeviceLimits, Held};

/// The first byte of a device file.
const DEVICE_FILE_VERSION: u8 = 1;
/// Most one-time keys a device derives, tokens it holds, offers it keeps open, nodes it remembers
/// signing on, deposits it waits on and revoked serials it keeps: the decoder's bounds.
pub const DEVICE_KEYS_MAX: u64 = 1 << 16;
pub const DEVICE_ITEMS_MAX: u64 = 1 << 16;
/// The largest device file the decoder reads.
pub const DEVICE_FILE_BYTES_MAX: usize = 64 << 20;

impl Device {
    /// Version, seed, limits, keys derived, then the counted lists: unused certified keys, held
    /// tokens, open offers, signed nodes, pending deposits, revoked serials; revocations seen and
    /// the last sync.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![DEVICE_FILE_VERSION];
        out.extend_from_slice(&self.seed);
        for limit in [
            self.limits.holding_max,
            self.limits.payment_max,
            self.limits.hops_max as u64,
            self.limits.sync_age_ms_max,
        ] {
            put_u64(&mut out, limit);
        }
        put_u64(&mut out, self.next_key);
        put_u64(&mut out, self.unused.len() as u64);
        for (key, certificate) in &self.unused {
            put_u64(&mut out, *key);
            certificate.encode_to(&mut out);
        }
        put_u64(&mut out, self.held.len() as u64);
        for held in &self.held {
            put_u64(&mut out, held.key);
            put_u64(&mut out, held.value);
            held.token.encode_to(&mut out);
        }
        put_u64(&mut out, self.offers.len() as u64);
        for (nonce, (key, certificate, amount)) in &self.offers {
            out.extend_from_slice(nonce);
            put_u64(&mut out, *key);
            certificate.encode_to(&mut out);
            put_u64(&mut out, *amount);
        }
        put_u64(&mut out, self.signed.len() as u64);
        for (node, child) in &self.signed {
            out.extend_from_slice(node);
            out.extend_from_slice(child);
        }
        put_u64(&mut out, self.pending.len() as u64);
        for deposit in &self.pending {
            put_u64(&mut out, deposit.value);
            deposit.token.encode_to(&mut out);
            deposit.statement.encode_to(&mut out);
            deposit.instruction.encode_to(&mut out);
        }
        put_u64(&mut out, self.revoked.len() as u64);
        for serial in &self.revoked {
            out.extend_from_slice(serial);
        }
        put_u64(&mut out, self.revocations_seen);
        put_u64(&mut out, self.last_sync_ms);
        out
    }

    /// A device from its file's bytes.
    pub fn decode(bytes: &[u8]) -> Result<Device, DecodeError> {
        let device = specie_codec::decode_bounded("device file", bytes, DEVICE_FILE_BYTES_MAX, decode_device)?;
        if device.encode() != bytes {
            return Err(DecodeError::NonCanonical {
                what: "device file",
                reason: "re-encoding gives other bytes (an order or a duplicate)",
            });
        }
        Ok(device)
    }
}

fn decode_device(reader: &mut Reader<'_>) -> Result<Device, DecodeError> {
    reader.read_version("device file", DEVICE_FILE_VERSION)?;
    let seed: [u8; 32] = reader.read_array("seed")?;
    let limits = DeviceLimits {
        holding_max: reader.read_u64("holding limit")?,
        payment_max: reader.read_u64("payment limit")?,
        hops_max: usize::try_from(reader.read_u64("hop limit")?).map_err(|_| DecodeError::Invalid {
            what: "hop limit",
            reason: "larger than this machine's usize".into(),
        })?,
        sync_age_ms_max: reader.read_u64("sync age limit")?,
    };
    let mut device = Device::new(seed, limits, 0);
    let next_key = reader.read_u64("keys derived")?;
    if next_key > DEVICE_KEYS_MAX {
        return Err(DecodeError::CountTooLarge {
            what: "keys derived",
            count: next_key,
            max: DEVICE_KEYS_MAX,
        });
    }
    device.derive_keys(next_key);
    let count = reader.read_count("unused keys", DEVICE_ITEMS_MAX, 8 + CERTIFIED_KEY_BYTES)?;
    device.unused = (0..count)
        .map(|_| Ok((reader.read_u64("key index")?, KeyCertificate::decode_from(reader)?)))
        .collect::<Result<VecDeque<_>, DecodeError>>()?;
    let count = reader.read_count("held tokens", DEVICE_ITEMS_MAX, 16 + 146)?;
    device.held = (0..count)
        .map(|_| {
            Ok(Held {
                key: reader.read_u64("key index")?,
                value: reader.read_u64("value")?,
                token: Token::decode_from(reader)?,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let count = reader.read_count("open offers", DEVICE_ITEMS_MAX, 16 + 8 + CERTIFIED_KEY_BYTES + 8)?;
    device.offers = (0..count)
        .map(|_| {
            let nonce = reader.read_array("offer nonce")?;
            let key = reader.read_u64("key index")?;
            let certificate = KeyCertificate::decode_from(reader)?;
            Ok((nonce, (key, certificate, reader.read_u64("amount")?)))
        })
        .collect::<Result<BTreeMap<_, _>, DecodeError>>()?;
    let count = reader.read_count("signed nodes", DEVICE_ITEMS_MAX * 16, 64)?;
    device.signed = (0..count)
        .map(|_| Ok((reader.read_array("node")?, reader.read_array("statement")?)))
        .collect::<Result<BTreeMap<_, _>, DecodeError>>()?;
    let count = reader.read_count("pending deposits", DEVICE_ITEMS_MAX, 8 + 146)?;
    device.pending = (0..count)
        .map(|_| {
            let value = reader.read_u64("value")?;
            Ok(Deposit {
                token: Token::decode_from(reader)?,
                statement: SignedMove::decode_from(reader)?,
                instruction: Instruction::decode_from(reader)?,
                value,
            })
        })
        .collect::<Result<_, DecodeError>>()?;
    let count = reader.read_count("revoked serials", DEVICE_ITEMS_MAX * 16, 16)?;
    device.revoked = (0..count)
        .map(|_| reader.read_array("serial"))
        .collect::<Result<BTreeSet<_>, DecodeError>>()?;
    device.revocations_seen = reader.read_u64("revocations seen")?;
    device.last_sync_ms = reader.read_u64("last sync")?;
    let derived = |key: u64| key < device.next_key;
    let keys_known = device
        .unused
        .iter()
        .all(|(key, c)| derived(*key) && device.public(*key) == c.key)
        && device.held.iter().all(|held| derived(held.key))
        && device
            .offers
            .values()
            .all(|(key, c, _)| derived(*key) && device.public(*key) == c.key);
    if !keys_known {
        return Err(DecodeError::Invalid {
            what: "device file",
            reason: "a key index the seed does not give".into(),
        });
    }
    Ok(device)
}

impl Device {
    fn public(&self, index: u64) -> specie_offline::PublicKey {
        derive_key(b"one-time", &self.seed, index).verifying_key().to_bytes()
    }

    /// Derives one-time keys up to `count` again (a file keeps only how many there are).
    fn derive_keys(&mut self, count: u64) {
        for index in self.next_key..count {
            let public = self.public(index);
            self.keys.insert(public, index);
        }
        self.next_key = self.next_key.max(count);
    }
}
