//! Committee epochs: the signed record that hands a committee's seats to the next epoch's keys,
//! and the chain of committees a verifier keeps (docs/byzantine-mode.md, "Committee epochs").
//!
//! A committee has seats 0..n. Epoch e+1 keeps the seats and their number and may give any seat
//! a new key; a seat whose key changes is handed over (its old holder's state goes to the new
//! one), so every promise an honest seat made in epoch e is kept in e+1 and quorum intersection
//! holds by seat across the boundary. The record of e+1 is signed by a quorum of epoch e's
//! seats, so anyone who trusts epoch e can check e+1 with nothing else.

use ed25519_dalek::{Signature, Signer, SigningKey};
use specie_codec::{put_u32, DecodeError, Reader};
use thiserror::Error;

use crate::committee::{AuthorityIndex, Committee, COMMITTEE_BYTES_MAX, COMMITTEE_MEMBERS_MAX};
use crate::{read_version, ENCODING_VERSION, SIGNATURE_BYTES};

/// Signed by the authorities of an epoch to endorse the next one.
const RECORD_DOMAIN: &[u8] = b"specie/fastpay/committee-record/v1";

/// The longest canonical record: version, previous id, the next committee, a signature count
/// and a signature of every seat of the largest committee.
pub const COMMITTEE_RECORD_BYTES_MAX: usize =
    1 + 32 + COMMITTEE_BYTES_MAX + 4 + COMMITTEE_MEMBERS_MAX * (2 + SIGNATURE_BYTES);

/// Most epochs one chain keeps after its first committee: bounds a chain in memory, in a
/// snapshot and in an answer. An epoch a day lasts eleven years.
pub const CHAIN_RECORDS_MAX: usize = 4096;

/// Why a committee record does not follow a committee.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RecordError {
    #[error("the record follows committee {previous_hex}, not this one (epoch {epoch})")]
    OtherPrevious { previous_hex: String, epoch: u64 },
    #[error("the record is for epoch {got}; the next epoch is {expected}")]
    NotNextEpoch { expected: u64, got: u64 },
    #[error("the record has {got} seats; the committee has {expected} (seats are replaced, not added or removed)")]
    SeatCount { expected: usize, got: usize },
    #[error("{signers} distinct signers of the previous epoch, below its quorum of {quorum}")]
    BelowQuorum { signers: usize, quorum: usize },
    #[error("signatures are not sorted by seat, or a seat signs twice")]
    Unsorted,
    #[error("seat {seat} is not in the previous committee")]
    UnknownSeat { seat: AuthorityIndex },
    #[error("seat {seat}'s signature does not verify")]
    BadSignature { seat: AuthorityIndex },
    #[error("the chain holds {CHAIN_RECORDS_MAX} epochs after its first, its limit")]
    ChainFull,
}

/// Epoch e+1's committee, endorsed by a quorum of epoch e's seats.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitteeRecord {
    /// The id of epoch e's committee.
    pub previous_id: [u8; 32],
    pub next: Committee,
    /// Signatures of epoch e's seats over [`CommitteeRecord::signing_bytes`], sorted by seat.
    pub signatures: Vec<(AuthorityIndex, [u8; SIGNATURE_BYTES])>,
}

impl CommitteeRecord {
    /// An unsigned record handing `previous`'s seats to `members` in the next epoch.
    pub fn propose(previous: &Committee, members: Vec<[u8; 32]>) -> Result<CommitteeRecord, crate::CommitteeError> {
        Ok(CommitteeRecord {
            previous_id: previous.id(),
            next: Committee::new(previous.epoch() + 1, members)?,
            signatures: Vec::new(),
        })
    }

    /// What every endorsing seat signs: domain, version, previous id, next committee.
    pub fn signing_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(RECORD_DOMAIN.len() + 1 + 32 + 1 + 8 + 4 + 32 * self.next.size());
        bytes.extend_from_slice(RECORD_DOMAIN);
        bytes.push(ENCODING_VERSION);
        bytes.extend_from_slice(&self.previous_id);
        self.next.encode_to(&mut bytes);
        bytes
    }

    /// Adds seat `seat`'s endorsement (its epoch-e key), keeping the signatures sorted; a seat
    /// that endorsed already is replaced.
    pub fn endorse(&mut self, seat: AuthorityIndex, key: &SigningKey) {
        let signature = key.sign(&self.signing_bytes()).to_bytes();
        self.signatures.retain(|(s, _)| *s != seat);
        let at = self.signatures.partition_point(|(s, _)| *s < seat);
        self.signatures.insert(at, (seat, signature));
    }

    /// Whether this record is the next epoch of `previous`: same seats, epoch + 1, endorsed by
    /// a quorum of `previous`'s seats with valid signatures.
    pub fn check(&self, previous: &Committee) -> Result<(), RecordError> {
        if self.previous_id != previous.id() {
            return Err(RecordError::OtherPrevious {
                previous_hex: hex::encode(self.previous_id),
                epoch: previous.epoch(),
            });
        }
        if self.next.epoch() != previous.epoch().wrapping_add(1) || previous.epoch() == u64::MAX {
            return Err(RecordError::NotNextEpoch {
                expected: previous.epoch().wrapping_add(1),
                got: self.next.epoch(),
            });
        }
        if self.next.size() != previous.size() {
            return Err(RecordError::SeatCount {
                expected: previous.size(),
                got: self.next.size(),
            });
        }
        if self.signatures.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            return Err(RecordError::Unsorted);
        }
        if self.signatures.len() < previous.quorum() {
            return Err(RecordError::BelowQuorum {
                signers: self.signatures.len(),
                quorum: previous.quorum(),
            });
        }
        let message = self.signing_bytes();
        for &(seat, signature) in &self.signatures {
            let key = previous.key(seat).ok_or(RecordError::UnknownSeat { seat })?;
            if key.verify_strict(&message, &Signature::from_bytes(&signature)).is_err() {
                return Err(RecordError::BadSignature { seat });
            }
        }
        Ok(())
    }

    /// The seats whose key this record changes.
    pub fn replaced_seats(&self, previous: &Committee) -> Vec<AuthorityIndex> {
        let seats = previous.members().iter().zip(self.next.members());
        seats
            .enumerate()
            .filter(|(_, (old, new))| old != new)
            .map(|(seat, _)| seat as AuthorityIndex)
            .collect()
    }

    /// Version, previous id, the next committee, `u32` signature count, (seat `u16`,
    /// signature) sorted by seat.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.push(ENCODING_VERSION);
        out.extend_from_slice(&self.previous_id);
        self.next.encode_to(out);
        put_u32(out, self.signatures.len() as u32);
        for (seat, signature) in &self.signatures {
            out.extend_from_slice(&seat.to_le_bytes());
            out.extend_from_slice(signature);
        }
    }

    pub fn decode_from(reader: &mut Reader<'_>) -> Result<CommitteeRecord, DecodeError> {
        read_version(reader, "committee record")?;
        let previous_id = reader.read_array("committee record previous id")?;
        let next = Committee::decode_from(reader)?;
        let count = reader.read_u32_count(
            "committee record signatures",
            COMMITTEE_MEMBERS_MAX as u64,
            2 + SIGNATURE_BYTES,
        )?;
        let mut signatures = Vec::with_capacity(count);
        for _ in 0..count {
            let seat = u16::from_le_bytes(reader.read_array("committee record seat")?);
            signatures.push((seat, reader.read_array("committee record signature")?));
        }
        if signatures.windows(2).any(|pair| pair[0].0 >= pair[1].0) {
            return Err(DecodeError::NonCanonical {
                what: "committee record",
                reason: "signatures are sorted by seat, each seat once",
            });
        }
        Ok(CommitteeRecord {
            previous_id,
            next,
            signatures,
        })
    }

    /// The canonical encoding as hex, for files and command lines.
    pub fn to_hex(&self) -> String {
        let mut bytes = Vec::new();
        self.encode_to(&mut bytes);
        hex::encode(bytes)
    }

    /// Reads [`CommitteeRecord::to_hex`]'s form: hex of exactly one canonical record.
    pub fn from_hex(text: &str) -> Result<CommitteeRecord, DecodeError> {
        let bytes = hex::decode(text.trim()).map_err(|_| DecodeError::Invalid {
            what: "committee record",
            reason: "not hex".into(),
        })?;
        crate::decode_exact(
            "committee record",
            &bytes,
            COMMITTEE_RECORD_BYTES_MAX,
            CommitteeRecord::decode_from,
        )
    }
}

/// A first committee and the checked records of every later epoch: what an authority, a core
/// or a wallet trusts. Certificates name their committee by id; the chain finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommitteeChain {
    first: Committee,
    records: Vec<CommitteeRecord>,
}

impl CommitteeChain {
    pub fn new(first: Committee) -> CommitteeChain {
        CommitteeChain {
            first,
            records: Vec::new(),
        }
    }

    /// The committee of the newest epoch: the one whose votes count for new orders.
    pub fn current(&self) -> &Committee {
        self.records.last().map_or(&self.first, |record| &record.next)
    }

    pub fn first(&self) -> &Committee {
        &self.first
    }

    pub fn records(&self) -> &[CommitteeRecord] {
        &self.records
    }

    /// The committee of every epoch, oldest first.
    pub fn committees(&self) -> impl DoubleEndedIterator<Item = &Committee> {
        std::iter::once(&self.first).chain(self.records.iter().map(|record| &record.next))
    }

    /// The committee of this id, of any epoch of the chain (newest first: the usual case).
    pub fn committee(&self, id: &[u8; 32]) -> Option<&Committee> {
        self.committees().rev().find(|c| c.id() == *id)
    }

    /// Appends `record` if it is the next epoch; `Ok(false)` if the chain holds it already.
    pub fn extend(&mut self, record: CommitteeRecord) -> Result<bool, RecordError> {
        if self.committee(&record.next.id()).is_some() {
            return Ok(false);
        }
        record.check(self.current())?;
        if self.records.len() >= CHAIN_RECORDS_MAX {
            return Err(RecordError::ChainFull);
        }
        self.records.push(record);
        Ok(true)
    }

    /// Takes in records of later epochs, oldest first (what a cluster file or an authority
    /// gives): a record of an epoch the chain has is skipped, each other is appended if it
    /// follows. Returns whether the current epoch moved; at the first that does not follow, its
    /// error, the records before it kept.
    pub fn learn(&mut self, records: impl IntoIterator<Item = CommitteeRecord>) -> Result<bool, RecordError> {
        let before = self.current().epoch();
        for record in records {
            if record.next.epoch() > self.current().epoch() {
                self.extend(record)?;
            }
        }
        Ok(self.current().epoch() > before)
    }

    /// The records after epoch `epoch`, oldest first: what a verifier that knows `epoch` needs.
    pub fn records_after(&self, epoch: u64) -> &[CommitteeRecord] {
        let from = self.records.partition_point(|record| record.next.epoch() <= epoch);
        &self.records[from..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_keys::authority_keys;

    fn committee_of(epoch: u64, keys: &[SigningKey]) -> Committee {
        Committee::new(epoch, keys.iter().map(|k| k.verifying_key().to_bytes()).collect()).unwrap()
    }

    #[test]
    fn a_record_counts_only_with_a_quorum_of_the_previous_epoch_and_the_chain_finds_every_committee() {
        let keys = authority_keys(5);
        let first = committee_of(1, &keys[..4]);
        let mut members = first.members().to_vec();
        members[3] = keys[4].verifying_key().to_bytes();
        let mut record = CommitteeRecord::propose(&first, members).unwrap();
        assert_eq!(record.replaced_seats(&first), vec![3]);
        record.endorse(1, &keys[1]);
        record.endorse(0, &keys[0]);
        assert_eq!(
            record.check(&first),
            Err(RecordError::BelowQuorum { signers: 2, quorum: 3 })
        );
        // The new key of seat 3 cannot endorse its own appointment in the old seat's name.
        let mut forged = record.clone();
        forged.endorse(3, &keys[4]);
        assert_eq!(forged.check(&first), Err(RecordError::BadSignature { seat: 3 }));
        record.endorse(2, &keys[2]);
        assert_eq!(record.check(&first), Ok(()));
        assert_eq!(
            record.signatures.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );

        // Canonical encoding round trip; unsorted signatures are refused by the decoder.
        let decoded = CommitteeRecord::from_hex(&record.to_hex()).unwrap();
        assert_eq!(decoded, record);
        let mut unsorted = record.clone();
        unsorted.signatures.swap(0, 1);
        assert!(CommitteeRecord::from_hex(&unsorted.to_hex()).is_err());

        let mut chain = CommitteeChain::new(first.clone());
        assert_eq!(chain.extend(record.clone()), Ok(true));
        assert_eq!(chain.extend(record.clone()), Ok(false), "idempotent");
        assert_eq!(chain.current().epoch(), 2);
        assert_eq!(chain.committee(&first.id()), Some(&first));
        assert_eq!(chain.records_after(1).len(), 1);
        assert!(chain.records_after(2).is_empty());

        // A record must follow the newest epoch, keep the seat count, and add one to the epoch.
        let stale = CommitteeRecord::propose(&first, first.members().to_vec()).unwrap();
        assert!(matches!(chain.extend(stale), Err(RecordError::OtherPrevious { .. })));
        let mut fewer = CommitteeRecord::propose(chain.current(), first.members()[..3].to_vec()).unwrap();
        for seat in 0..3u16 {
            fewer.endorse(seat, &keys[usize::from(seat)]);
        }
        assert_eq!(
            fewer.check(chain.current()),
            Err(RecordError::SeatCount { expected: 4, got: 3 })
        );
        let mut skipping = CommitteeRecord::propose(chain.current(), first.members().to_vec()).unwrap();
        skipping.next = committee_of(7, &keys[..4]);
        assert_eq!(
            skipping.check(chain.current()),
            Err(RecordError::NotNextEpoch { expected: 3, got: 7 })
        );
    }
}
