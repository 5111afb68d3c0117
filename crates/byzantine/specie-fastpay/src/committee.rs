//! The committee: the authorities whose signatures count, and the quorum arithmetic.

use ed25519_dalek::VerifyingKey;
use sha2::{Digest, Sha256};
use specie_codec::{put_u32, put_u64, DecodeError, Reader};
use thiserror::Error;

use crate::{ENCODING_VERSION, PUBLIC_KEY_BYTES};

/// An authority's position in its committee (the order of [`Committee::members`]).
pub type AuthorityIndex = u16;

/// Most authorities one committee may have: bounds every certificate and decoder.
pub const COMMITTEE_MEMBERS_MAX: usize = 256;
/// The longest canonical encoding of a committee: version, epoch, member count, the keys.
pub const COMMITTEE_BYTES_MAX: usize = 1 + 8 + 4 + PUBLIC_KEY_BYTES * COMMITTEE_MEMBERS_MAX;

/// Hashed before a committee's encoding to form its id, so the id can never collide with
/// another kind of signed or hashed FastPay value.
const COMMITTEE_DOMAIN: &[u8] = b"specie/fastpay/committee/v1";

/// Why a list of authority keys is not a committee.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum CommitteeError {
    #[error("a committee needs at least one authority")]
    Empty,
    #[error("{members} authorities, more than the limit of {COMMITTEE_MEMBERS_MAX}")]
    TooMany { members: usize },
    #[error("authority {index}: not a valid Ed25519 public key")]
    BadKey { index: usize },
    #[error("authority {index}: a weak (small-order) Ed25519 key, refused")]
    WeakKey { index: usize },
    #[error("authorities {first} and {second} have the same key")]
    Duplicate { first: usize, second: usize },
}

/// A fixed set of 3f+1 authorities (any size works; the quorum adapts). Its id, a hash of the
/// epoch and every key in order, is inside every vote statement, so a vote or certificate of one
/// committee never counts for another.
#[derive(Clone, Debug)]
pub struct Committee {
    epoch: u64,
    members: Vec<[u8; PUBLIC_KEY_BYTES]>,
    keys: Vec<VerifyingKey>,
    id: [u8; 32],
}

impl PartialEq for Committee {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}
impl Eq for Committee {}

impl Committee {
    /// Checks every key (valid point, not weak, no duplicate) once, so verification later
    /// never re-parses a committee key.
    pub fn new(epoch: u64, members: Vec<[u8; PUBLIC_KEY_BYTES]>) -> Result<Committee, CommitteeError> {
        if members.is_empty() {
            return Err(CommitteeError::Empty);
        }
        if members.len() > COMMITTEE_MEMBERS_MAX {
            return Err(CommitteeError::TooMany { members: members.len() });
        }
        let mut keys = Vec::with_capacity(members.len());
        for (index, bytes) in members.iter().enumerate() {
            if let Some(first) = members[..index].iter().position(|other| other == bytes) {
                return Err(CommitteeError::Duplicate { first, second: index });
            }
            let key = VerifyingKey::from_bytes(bytes).map_err(|_| CommitteeError::BadKey { index })?;
            if key.is_weak() {
                return Err(CommitteeError::WeakKey { index });
            }
            keys.push(key);
        }
        let mut hasher = Sha256::new();
        hasher.update(COMMITTEE_DOMAIN);
        let mut encoded = Vec::new();
        encode_members(epoch, &members, &mut encoded);
        hasher.update(&encoded);
        Ok(Committee {
            epoch,
            members,
            keys,
            id: hasher.finalize().into(),
        })
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The hash that binds votes to this committee.
    pub fn id(&self) -> [u8; 32] {
        self.id
    }

    pub fn members(&self) -> &[[u8; PUBLIC_KEY_BYTES]] {
        &self.members
    }

    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// f: the most Byzantine authorities the committee tolerates, ⌊(n−1)/3⌋.
    pub fn fault_tolerance(&self) -> usize {
        (self.size() - 1) / 3
    }

    /// The smallest number of distinct signers two of which always share an honest authority:
    /// ⌈(n+f+1)/2⌉, which is 2f+1 when n = 3f+1.
    pub fn quorum(&self) -> usize {
        (self.size() + self.fault_tolerance() + 2) / 2
    }

    pub fn key(&self, index: AuthorityIndex) -> Option<&VerifyingKey> {
        self.keys.get(usize::from(index))
    }

    /// The index of the authority with this public key.
    pub fn index_of(&self, key: &[u8; PUBLIC_KEY_BYTES]) -> Option<AuthorityIndex> {
        self.members
            .iter()
            .position(|member| member == key)
            .map(|index| index as AuthorityIndex)
    }

    /// The canonical encoding: version, epoch, `u32` member count, the keys in order.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        encode_members(self.epoch, &self.members, out);
    }

    /// The canonical encoding as hex: how a committee is written where people copy it (a
    /// node's `--fastpay-committee`, `node.toml`, a standalone committee's API).
    pub fn to_hex(&self) -> String {
        let mut bytes = vec![];
        self.encode_to(&mut bytes);
        hex::encode(bytes)
    }

    /// Reads [`Committee::to_hex`]'s form: hex of exactly one canonical committee.
    pub fn from_hex(text: &str) -> Result<Committee, DecodeError> {
        let bytes = hex::decode(text).map_err(|_| DecodeError::Invalid {
            what: "committee",
            reason: "not hex".into(),
        })?;
        crate::decode_exact("committee", &bytes, COMMITTEE_BYTES_MAX, Committee::decode_from)
    }

    /// Reads a committee and checks it as [`Committee::new`] does.
    pub fn decode_from(reader: &mut Reader<'_>) -> Result<Committee, DecodeError> {
        crate::read_version(reader, "committee")?;
        let epoch = reader.read_u64("committee epoch")?;
        let count = reader.read_u32_count("committee members", COMMITTEE_MEMBERS_MAX as u64, PUBLIC_KEY_BYTES)?;
        let mut members = Vec::with_capacity(count);
        for _ in 0..count {
            members.push(reader.read_array::<PUBLIC_KEY_BYTES>("committee member key")?);
        }
        Committee::new(epoch, members).map_err(|error| DecodeError::Invalid {
            what: "committee",
            reason: error.to_string(),
        })
    }
}

fn encode_members(epoch: u64, members: &[[u8; PUBLIC_KEY_BYTES]], out: &mut Vec<u8>) {
    out.push(ENCODING_VERSION);
    put_u64(out, epoch);
    put_u32(out, members.len() as u32);
    for member in members {
        out.extend_from_slice(member);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_keys::authority_keys;

    #[test]
    fn quorum_is_two_f_plus_one_for_three_f_plus_one_and_always_intersects_in_an_honest_member() {
        for n in 1..=40usize {
            let keys = authority_keys(n);
            let committee = Committee::new(0, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap();
            let (f, q) = (committee.fault_tolerance(), committee.quorum());
            // Two quorums overlap in 2q − n members, more than the f that may be Byzantine.
            assert!(2 * q - n > f, "n={n}: two quorums share an honest member");
            assert!(q <= n - f, "n={n}: a quorum forms with f authorities down");
            if n % 3 == 1 {
                assert_eq!(q, 2 * f + 1);
            }
        }
    }

    #[test]
    fn duplicate_weak_and_invalid_keys_are_refused_and_the_encoding_round_trips() {
        let keys: Vec<_> = authority_keys(4).iter().map(|k| k.verifying_key().to_bytes()).collect();
        let duplicated = vec![keys[0], keys[1], keys[0]];
        assert_eq!(
            Committee::new(0, duplicated),
            Err(CommitteeError::Duplicate { first: 0, second: 2 })
        );
        // The identity point is a valid encoding but of small order.
        let mut identity = [0u8; 32];
        identity[0] = 1;
        assert_eq!(
            Committee::new(0, vec![keys[0], identity]),
            Err(CommitteeError::WeakKey { index: 1 })
        );
        assert_eq!(Committee::new(0, vec![]), Err(CommitteeError::Empty));

        let committee = Committee::new(7, keys.clone()).unwrap();
        let mut bytes = Vec::new();
        committee.encode_to(&mut bytes);
        let mut reader = Reader::new(&bytes);
        let decoded = Committee::decode_from(&mut reader).unwrap();
        reader.finish().unwrap();
        assert_eq!(decoded, committee);
        assert_ne!(
            Committee::new(8, keys).unwrap().id(),
            committee.id(),
            "the epoch is in the id"
        );
    }
}
