use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use specie_transaction::UhsId;

use crate::wire::{Refusal, ShardRequest, ShardResponse, ShardTx, Vote};
use crate::{DtxnId, ShardRange};

/// What a shard remembers about one dtxn between prepare and discard (Hamilton §4.2: the
/// responses are kept so a new coordinator leader that re-sends a phase gets the same answer).
#[derive(Clone, PartialEq, Eq, Debug)]
struct DtxnRecord {
    txs: Vec<ShardTx>,
    votes: Vec<Vote>,
    committed: bool,
}

/// One shard's replicated state: its part of the UHS, the locks held by dtxns in flight, and
/// the dtxns it has not yet been told to forget.
#[derive(Clone, Debug)]
pub struct ShardState {
    range: ShardRange,
    uhs: HashSet<UhsId>,
    /// Ids held by an in-flight dtxn: inputs (present in `uhs`) locked for spending, and outputs
    /// (absent from `uhs`) reserved for creation. An id is never both.
    locks: HashMap<UhsId, DtxnId>,
    dtxns: BTreeMap<DtxnId, DtxnRecord>,
    /// Discarded dtxns at or above `finished_below`, so late duplicates are recognised.
    discarded: BTreeSet<DtxnId>,
    finished_below: DtxnId,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ShardStats {
    pub uhs_ids: u64,
    pub locked_ids: u64,
    pub dtxns_active: u64,
}

impl ShardState {
    pub fn new(range: ShardRange) -> Self {
        ShardState {
            range,
            uhs: HashSet::new(),
            locks: HashMap::new(),
            dtxns: BTreeMap::new(),
            discarded: BTreeSet::new(),
            finished_below: 0,
        }
    }

    pub fn range(&self) -> ShardRange {
        self.range
    }

    pub fn contains(&self, id: &UhsId) -> bool {
        self.uhs.contains(id)
    }

    pub fn stats(&self) -> ShardStats {
        ShardStats {
            uhs_ids: self.uhs.len() as u64,
            locked_ids: self.locks.len() as u64,
            dtxns_active: self.dtxns.len() as u64,
        }
    }

    /// Applies one durable request. Deterministic: the same requests in the same order give the
    /// same state and the same responses on every replica.
    pub fn apply(&mut self, request: &ShardRequest) -> ShardResponse {
        let response = match request {
            ShardRequest::Prepare { dtxn, txs } => self.prepare(*dtxn, txs),
            ShardRequest::Commit { dtxn, complete } => self.commit(*dtxn, complete),
            ShardRequest::Discard { dtxn, finished_below } => self.discard(*dtxn, *finished_below),
        };
        self.assert_invariants_cheap();
        response
    }

    fn is_finished(&self, dtxn: DtxnId) -> bool {
        dtxn < self.finished_below || self.discarded.contains(&dtxn)
    }

    fn prepare(&mut self, dtxn: DtxnId, txs: &[ShardTx]) -> ShardResponse {
        if self.is_finished(dtxn) {
            return ShardResponse::Stale { dtxn };
        }
        if let Some(record) = self.dtxns.get(&dtxn) {
            // A re-sent prepare (coordinator failover or retry): answer exactly as the first time.
            return ShardResponse::Prepared {
                dtxn,
                votes: record.votes.clone(),
            };
        }
        let indexes_ascending = txs.windows(2).all(|pair| pair[0].index < pair[1].index);
        if !indexes_ascending {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::BadTxIndexes,
            };
        }
        let owned = txs
            .iter()
            .all(|tx| tx.spent.iter().chain(&tx.created).all(|id| self.range.contains(id)));
        if !owned {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::NotOwned,
            };
        }
        let votes: Vec<Vote> = txs.iter().map(|tx| self.lock_all_or_nothing(dtxn, tx)).collect();
        self.dtxns.insert(
            dtxn,
            DtxnRecord {
                txs: txs.to_vec(),
                votes: votes.clone(),
                committed: false,
            },
        );
        ShardResponse::Prepared { dtxn, votes }
    }

    /// Conservative two-phase locking: take every lock the transaction needs or none of them.
    /// Taking them one by one also catches an id listed twice in one transaction.
    fn lock_all_or_nothing(&mut self, dtxn: DtxnId, tx: &ShardTx) -> Vote {
        let mut taken: Vec<UhsId> = Vec::with_capacity(tx.spent.len() + tx.created.len());
        let mut vote = Vote::Yes;
        // Inputs must be present, outputs absent; either way, free of other dtxns' locks.
        let wanted = tx
            .spent
            .iter()
            .map(|id| (id, true))
            .chain(tx.created.iter().map(|id| (id, false)));
        for (id, is_input) in wanted {
            vote = match (self.locks.contains_key(id), self.uhs.contains(id), is_input) {
                (true, _, true) => Vote::InputLocked,
                (true, _, false) => Vote::OutputLocked,
                (false, false, true) => Vote::InputMissing,
                (false, true, false) => Vote::OutputExists,
                (false, true, true) | (false, false, false) => Vote::Yes,
            };
            if vote != Vote::Yes {
                break;
            }
            self.locks.insert(*id, dtxn);
            taken.push(*id);
        }
        if vote != Vote::Yes {
            for id in &taken {
                let holder = self.locks.remove(id);
                assert_eq!(holder, Some(dtxn));
            }
        }
        vote
    }

    fn commit(&mut self, dtxn: DtxnId, complete: &[bool]) -> ShardResponse {
        if self.is_finished(dtxn) {
            return ShardResponse::Stale { dtxn };
        }
        let Some(record) = self.dtxns.get(&dtxn) else {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::NotPrepared,
            };
        };
        if record.committed {
            return ShardResponse::Committed { dtxn };
        }
        if complete.len() != record.txs.len() {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::CommitLengthMismatch,
            };
        }
        if record
            .votes
            .iter()
            .zip(complete)
            .any(|(vote, &done)| done && *vote != Vote::Yes)
        {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::CompletesRejected,
            };
        }
        let record = self.dtxns.get_mut(&dtxn).expect("checked above");
        record.committed = true;
        for ((tx, vote), &done) in record.txs.iter().zip(&record.votes).zip(complete) {
            if *vote != Vote::Yes {
                continue; // It never took a lock.
            }
            for id in tx.spent.iter().chain(&tx.created) {
                let holder = self.locks.remove(id);
                assert_eq!(holder, Some(dtxn), "commit releases only locks its own prepare took");
            }
            if done {
                for id in &tx.spent {
                    // The negative space of "spent at most once": an id can only leave once.
                    assert!(self.uhs.remove(id), "a locked input vanished before its commit");
                }
                for id in &tx.created {
                    assert!(self.uhs.insert(*id), "a reserved output appeared before its commit");
                }
            }
        }
        ShardResponse::Committed { dtxn }
    }

    fn discard(&mut self, dtxn: DtxnId, finished_below: DtxnId) -> ShardResponse {
        if let Some(record) = self.dtxns.get(&dtxn) {
            if !record.committed {
                return ShardResponse::Refused {
                    dtxn,
                    reason: Refusal::DiscardBeforeCommit,
                };
            }
            self.dtxns.remove(&dtxn);
        }
        if dtxn >= self.finished_below {
            self.discarded.insert(dtxn);
        }
        if finished_below > self.finished_below {
            // Discards may arrive out of order, so committed dtxns below the watermark can still
            // be here: the coordinator has finished them, so forget them now. An uncommitted one
            // would be a coordinator bug, and forgetting it would leak its locks forever.
            let above = self.dtxns.split_off(&finished_below);
            let below = std::mem::replace(&mut self.dtxns, above);
            assert!(
                below.values().all(|record| record.committed),
                "coordinator watermark passed an uncommitted dtxn"
            );
            self.finished_below = finished_below;
            self.discarded = self.discarded.split_off(&finished_below);
        }
        ShardResponse::Discarded { dtxn }
    }

    /// O(1) checks after every request; the full cross-check lives in [`Self::check_invariants`].
    fn assert_invariants_cheap(&self) {
        debug_assert!(self.discarded.first().is_none_or(|d| *d >= self.finished_below));
        debug_assert!(self
            .dtxns
            .first_key_value()
            .is_none_or(|(d, _)| *d >= self.finished_below));
    }

    /// Full consistency check (tests and recovery): every lock belongs to a live prepared dtxn
    /// that voted yes, locked inputs are present, reserved outputs absent, all ids owned.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut expected: HashMap<UhsId, DtxnId> = HashMap::new();
        for (&dtxn, record) in &self.dtxns {
            if record.committed {
                continue;
            }
            for (tx, vote) in record.txs.iter().zip(&record.votes) {
                if *vote != Vote::Yes {
                    continue;
                }
                for id in &tx.spent {
                    if !self.uhs.contains(id) {
                        return Err(format!("locked input {id:?} of dtxn {dtxn} is not in the UHS"));
                    }
                    expected.insert(*id, dtxn);
                }
                for id in &tx.created {
                    if self.uhs.contains(id) {
                        return Err(format!("reserved output {id:?} of dtxn {dtxn} already exists"));
                    }
                    expected.insert(*id, dtxn);
                }
            }
        }
        if expected != self.locks {
            return Err(format!(
                "locks ({}) differ from prepared dtxns ({})",
                self.locks.len(),
                expected.len()
            ));
        }
        if let Some(id) = self.uhs.iter().find(|id| !self.range.contains(id)) {
            return Err(format!("UHS holds {id:?} outside this shard's range"));
        }
        Ok(())
    }

    /// The UHS ids in ascending order: for digests and audits, O(n log n).
    pub fn sorted_ids(&self) -> Vec<UhsId> {
        let mut ids: Vec<UhsId> = self.uhs.iter().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Adds ids straight to the UHS, bypassing 2PC: only for building a benchmark's initial set.
    pub fn seed_for_benchmark(&mut self, ids: impl IntoIterator<Item = UhsId>) {
        assert!(
            self.dtxns.is_empty() && self.locks.is_empty(),
            "seed only an idle shard"
        );
        for id in ids {
            assert!(self.range.contains(&id));
            self.uhs.insert(id);
        }
    }
}

const SNAPSHOT_VERSION: u8 = 1;

impl ShardState {
    /// The state as bytes, canonical (sorted) so equal states give equal snapshots. Locks are
    /// not stored: they are derived from the prepared dtxns on load.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        use specie_transaction::codec::{put_count, put_u64, put_vec, Encode};
        let mut out = Vec::with_capacity(64 + self.uhs.len() * 32);
        out.push(SNAPSHOT_VERSION);
        put_u64(&mut out, u64::from(self.range.first));
        put_u64(&mut out, u64::from(self.range.last));
        put_u64(&mut out, self.finished_below);
        let mut ids: Vec<&UhsId> = self.uhs.iter().collect();
        ids.sort_unstable();
        put_count(&mut out, ids.len());
        for id in ids {
            id.encode_to(&mut out);
        }
        put_count(&mut out, self.dtxns.len());
        for (dtxn, record) in &self.dtxns {
            put_u64(&mut out, *dtxn);
            put_vec(&mut out, &record.txs);
            crate::wire::put_votes(&mut out, &record.votes);
            out.push(u8::from(record.committed));
        }
        put_count(&mut out, self.discarded.len());
        for dtxn in &self.discarded {
            put_u64(&mut out, *dtxn);
        }
        out
    }

    pub fn decode_snapshot(bytes: &[u8]) -> Result<ShardState, specie_transaction::DecodeError> {
        use specie_transaction::codec::{Decode, DecodeError, Reader};

        use crate::wire::{read_ids, read_votes, ShardWireLimits};
        let mut reader = Reader::new(bytes);
        let version = reader.read_u8("shard snapshot version")?;
        if version != SNAPSHOT_VERSION {
            return Err(DecodeError::UnsupportedVersion {
                what: "shard snapshot",
                version,
                supported: SNAPSHOT_VERSION,
            });
        }
        let bound = |value: u64, what: &'static str| {
            u16::try_from(value).map_err(|_| DecodeError::CountTooLarge {
                what,
                count: value,
                max: u16::MAX.into(),
            })
        };
        let range = ShardRange {
            first: bound(reader.read_u64("range first")?, "range first")?,
            last: bound(reader.read_u64("range last")?, "range last")?,
        };
        let mut state = ShardState::new(range);
        state.finished_below = reader.read_u64("finished_below")?;
        for id in read_ids(&mut reader, "snapshot UHS ids", u64::MAX)? {
            if !range.contains(&id) || !state.uhs.insert(id) {
                return Err(DecodeError::NonCanonical {
                    what: "snapshot UHS",
                    reason: "id outside the range or repeated",
                });
            }
        }
        let limits = ShardWireLimits::default();
        let dtxn_count = reader.read_count("snapshot dtxns", u64::MAX, 8 + 8 + 8 + 1)?;
        for _ in 0..dtxn_count {
            let dtxn = reader.read_u64("dtxn id")?;
            let txs = reader.read_vec("dtxn transactions", limits.dtxn_transactions_max, 24, |r| {
                ShardTx::decode_from(r, &limits)
            })?;
            let votes = read_votes(&mut reader, limits.dtxn_transactions_max)?;
            let committed = reader.read_bool("committed flag")?;
            if votes.len() != txs.len() {
                return Err(DecodeError::NonCanonical {
                    what: "snapshot dtxn",
                    reason: "vote count differs from transactions",
                });
            }
            if !committed {
                for (tx, vote) in txs.iter().zip(&votes) {
                    if *vote == Vote::Yes {
                        for id in tx.spent.iter().chain(&tx.created) {
                            state.locks.insert(*id, dtxn);
                        }
                    }
                }
            }
            state.dtxns.insert(dtxn, DtxnRecord { txs, votes, committed });
        }
        let discarded = reader.read_count("snapshot discarded dtxns", u64::MAX, 8)?;
        for _ in 0..discarded {
            state.discarded.insert(reader.read_u64("discarded dtxn")?);
        }
        reader.finish()?;
        state.check_invariants().map_err(|_| DecodeError::NonCanonical {
            what: "shard snapshot",
            reason: "locks, prepared dtxns and UHS are inconsistent",
        })?;
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> UhsId {
        UhsId([n; 32])
    }

    fn full_shard() -> ShardState {
        let mut shard = ShardState::new(ShardRange {
            first: 0,
            last: u16::MAX,
        });
        shard.seed_for_benchmark([id(1), id(2), id(3)]);
        shard
    }

    fn tx(index: u32, spent: &[u8], created: &[u8]) -> ShardTx {
        ShardTx {
            index,
            spent: spent.iter().map(|&n| id(n)).collect(),
            created: created.iter().map(|&n| id(n)).collect(),
        }
    }

    #[test]
    fn prepare_locks_and_commit_swaps() {
        let mut shard = full_shard();
        let prepare = ShardRequest::Prepare {
            dtxn: 0,
            txs: vec![tx(0, &[1], &[10]), tx(1, &[1], &[11]), tx(2, &[9], &[12])],
        };
        let votes = vec![Vote::Yes, Vote::InputLocked, Vote::InputMissing];
        assert_eq!(
            shard.apply(&prepare),
            ShardResponse::Prepared {
                dtxn: 0,
                votes: votes.clone()
            }
        );
        assert_eq!(
            shard.apply(&prepare),
            ShardResponse::Prepared { dtxn: 0, votes },
            "re-sent prepare, same answer"
        );
        assert_eq!(shard.stats().locked_ids, 2);
        shard.check_invariants().unwrap();
        let bad = ShardRequest::Commit {
            dtxn: 0,
            complete: vec![true, true, false],
        };
        assert_eq!(
            shard.apply(&bad),
            ShardResponse::Refused {
                dtxn: 0,
                reason: Refusal::CompletesRejected
            }
        );
        let commit = ShardRequest::Commit {
            dtxn: 0,
            complete: vec![true, false, false],
        };
        assert_eq!(shard.apply(&commit), ShardResponse::Committed { dtxn: 0 });
        assert_eq!(shard.apply(&commit), ShardResponse::Committed { dtxn: 0 });
        assert!(!shard.contains(&id(1)) && shard.contains(&id(10)) && !shard.contains(&id(11)));
        assert_eq!(shard.stats().locked_ids, 0);
        assert_eq!(
            shard.apply(&ShardRequest::Discard {
                dtxn: 0,
                finished_below: 1
            }),
            ShardResponse::Discarded { dtxn: 0 }
        );
        assert_eq!(
            shard.apply(&prepare),
            ShardResponse::Stale { dtxn: 0 },
            "late duplicate after discard"
        );
        assert_eq!(shard.apply(&commit), ShardResponse::Stale { dtxn: 0 });
        shard.check_invariants().unwrap();
    }

    #[test]
    fn spent_id_is_never_spent_again_and_outputs_are_never_recreated() {
        let mut shard = full_shard();
        shard.apply(&ShardRequest::Prepare {
            dtxn: 0,
            txs: vec![tx(0, &[1], &[20])],
        });
        shard.apply(&ShardRequest::Commit {
            dtxn: 0,
            complete: vec![true],
        });
        let again = ShardRequest::Prepare {
            dtxn: 1,
            txs: vec![tx(0, &[1], &[21]), tx(1, &[], &[20]), tx(2, &[2, 2], &[22])],
        };
        let ShardResponse::Prepared { votes, .. } = shard.apply(&again) else {
            panic!()
        };
        assert_eq!(votes, vec![Vote::InputMissing, Vote::OutputExists, Vote::InputLocked]);
        assert_eq!(shard.stats().locked_ids, 0, "a refused transaction holds no lock");
    }

    #[test]
    fn protocol_violations_are_refused_without_change() {
        let mut shard = ShardState::new(ShardRange { first: 0, last: 0x00ff });
        let before = shard.encode_snapshot();
        let foreign = ShardRequest::Prepare {
            dtxn: 0,
            txs: vec![tx(0, &[0xee], &[])],
        };
        assert_eq!(
            shard.apply(&foreign),
            ShardResponse::Refused {
                dtxn: 0,
                reason: Refusal::NotOwned
            }
        );
        assert_eq!(
            shard.apply(&ShardRequest::Commit {
                dtxn: 3,
                complete: vec![]
            }),
            ShardResponse::Refused {
                dtxn: 3,
                reason: Refusal::NotPrepared
            }
        );
        let unordered = ShardRequest::Prepare {
            dtxn: 0,
            txs: vec![tx(1, &[], &[0]), tx(1, &[], &[0])],
        };
        assert_eq!(
            shard.apply(&unordered),
            ShardResponse::Refused {
                dtxn: 0,
                reason: Refusal::BadTxIndexes
            }
        );
        assert_eq!(shard.encode_snapshot(), before);
    }

    #[test]
    fn snapshot_round_trips_mid_dtxn() {
        let mut shard = full_shard();
        shard.apply(&ShardRequest::Prepare {
            dtxn: 4,
            txs: vec![tx(0, &[1], &[30]), tx(1, &[7], &[31])],
        });
        shard.apply(&ShardRequest::Prepare {
            dtxn: 5,
            txs: vec![tx(0, &[2], &[32])],
        });
        shard.apply(&ShardRequest::Commit {
            dtxn: 5,
            complete: vec![true],
        });
        shard.apply(&ShardRequest::Discard {
            dtxn: 5,
            finished_below: 4,
        });
        let bytes = shard.encode_snapshot();
        let restored = ShardState::decode_snapshot(&bytes).unwrap();
        assert_eq!(restored.encode_snapshot(), bytes);
        assert_eq!(restored.locks, shard.locks);
        assert_eq!(restored.stats(), shard.stats());
        for cut in 0..bytes.len() {
            assert!(ShardState::decode_snapshot(&bytes[..cut]).is_err());
        }
    }
}
