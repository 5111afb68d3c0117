use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use specie_transaction::UhsId;

use crate::wire::{Refusal, ShardRequest, ShardResponse, ShardTx, Vote};
use crate::{CoordinatorIndex, DtxnId, ShardRange};

/// What a shard remembers about one dtxn between prepare and discard (Hamilton §4.2: the
/// responses are kept so a new coordinator leader that re-sends a phase gets the same answer).
#[derive(Clone, PartialEq, Eq, Debug)]
struct DtxnRecord {
    txs: Vec<ShardTx>,
    votes: Vec<Vote>,
    committed: bool,
}

/// One coordinator's dtxns as this shard knows them. Each coordinator numbers its own dtxns
/// (Hamilton §4.1: any coordinator may run any dtxn), so dtxn ids and the watermark mean
/// something only beside the coordinator that sent them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct CoordinatorDtxns {
    dtxns: BTreeMap<DtxnId, DtxnRecord>,
    /// Discarded dtxns at or above `finished_below`, so late duplicates are recognised.
    discarded: BTreeSet<DtxnId>,
    finished_below: DtxnId,
}

impl CoordinatorDtxns {
    fn is_finished(&self, dtxn: DtxnId) -> bool {
        dtxn < self.finished_below || self.discarded.contains(&dtxn)
    }

    /// Nothing to remember: the state of a coordinator never heard from.
    fn is_empty(&self) -> bool {
        *self == CoordinatorDtxns::default()
    }
}

/// Which dtxn holds a lock: the coordinator that runs it, and its number there.
type DtxnKey = (CoordinatorIndex, DtxnId);

/// One shard's replicated state: its part of the UHS, the locks held by dtxns in flight, and
/// the dtxns each coordinator has not yet told it to forget.
#[derive(Clone, Debug)]
pub struct ShardState {
    range: ShardRange,
    uhs: HashSet<UhsId>,
    /// Ids held by an in-flight dtxn of any coordinator: inputs (present in `uhs`) locked for
    /// spending, and outputs (absent from `uhs`) reserved for creation. An id is never both, and
    /// never held by two dtxns, whichever coordinators run them.
    locks: HashMap<UhsId, DtxnKey>,
    /// Only coordinators with something to remember are here (see [`CoordinatorDtxns::is_empty`]),
    /// so equal states have equal maps.
    coordinators: BTreeMap<CoordinatorIndex, CoordinatorDtxns>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct ShardStats {
    pub uhs_ids: u64,
    pub locked_ids: u64,
    pub dtxns_active: u64,
}

/// A shard state that breaks one of its invariants: a bug, or a forged snapshot.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardInvariantViolation {
    #[error("empty range {range:?}")]
    EmptyRange { range: ShardRange },
    #[error("dtxn {dtxn} is live below the watermark {finished_below}")]
    LiveBelowWatermark { dtxn: DtxnId, finished_below: DtxnId },
    #[error("dtxn {dtxn} is kept as discarded below the watermark {finished_below}")]
    DiscardedBelowWatermark { dtxn: DtxnId, finished_below: DtxnId },
    #[error("dtxn {dtxn} is both live and discarded")]
    LiveAndDiscarded { dtxn: DtxnId },
    #[error("dtxn {dtxn} has {votes} votes for {txs} transactions")]
    VoteCount { dtxn: DtxnId, votes: usize, txs: usize },
    #[error("dtxn {dtxn} lists transaction indexes out of order")]
    IndexesOutOfOrder { dtxn: DtxnId },
    #[error("dtxn {dtxn} holds {id:?} outside this shard's range")]
    DtxnIdOutOfRange { dtxn: DtxnId, id: UhsId },
    #[error("locked input {id:?} of dtxn {dtxn} is not in the UHS")]
    LockedInputMissing { dtxn: DtxnId, id: UhsId },
    #[error("reserved output {id:?} of dtxn {dtxn} already exists")]
    ReservedOutputExists { dtxn: DtxnId, id: UhsId },
    #[error("{id:?} is locked twice")]
    LockedTwice { id: UhsId },
    #[error("locks ({locks}) differ from prepared dtxns ({expected})")]
    LocksDiffer { locks: usize, expected: usize },
    #[error("UHS holds {id:?} outside this shard's range")]
    UhsIdOutOfRange { id: UhsId },
    #[error("coordinator {coordinator} is kept with nothing to remember")]
    EmptyCoordinator { coordinator: CoordinatorIndex },
}

impl ShardState {
    pub fn new(range: ShardRange) -> Self {
        ShardState {
            range,
            uhs: HashSet::new(),
            locks: HashMap::new(),
            coordinators: BTreeMap::new(),
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
            dtxns_active: self.coordinators.values().map(|c| c.dtxns.len() as u64).sum(),
        }
    }

    /// Applies one durable request of coordinator `coordinator`. Deterministic: the same
    /// requests in the same order give the same state and the same responses on every replica.
    pub fn apply(&mut self, coordinator: CoordinatorIndex, request: &ShardRequest) -> ShardResponse {
        let mut dtxns = self.coordinators.remove(&coordinator).unwrap_or_default();
        let response = match request {
            ShardRequest::Prepare { dtxn, txs } => self.prepare(coordinator, &mut dtxns, *dtxn, txs),
            ShardRequest::Commit { dtxn, complete } => self.commit(coordinator, &mut dtxns, *dtxn, complete),
            ShardRequest::Discard { dtxn, finished_below } => Self::discard(&mut dtxns, *dtxn, *finished_below),
        };
        debug_assert!(dtxns.discarded.first().is_none_or(|d| *d >= dtxns.finished_below));
        debug_assert!(dtxns
            .dtxns
            .first_key_value()
            .is_none_or(|(d, _)| *d >= dtxns.finished_below));
        if !dtxns.is_empty() {
            self.coordinators.insert(coordinator, dtxns);
        }
        response
    }

    fn prepare(
        &mut self,
        coordinator: CoordinatorIndex,
        dtxns: &mut CoordinatorDtxns,
        dtxn: DtxnId,
        txs: &[ShardTx],
    ) -> ShardResponse {
        if dtxns.is_finished(dtxn) {
            return ShardResponse::Stale { dtxn };
        }
        if let Some(record) = dtxns.dtxns.get(&dtxn) {
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
        let votes: Vec<Vote> = txs
            .iter()
            .map(|tx| self.lock_all_or_nothing((coordinator, dtxn), tx))
            .collect();
        dtxns.dtxns.insert(
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
    /// Taking them one by one also catches an id listed twice in one transaction. A lock held by
    /// another coordinator's dtxn refuses as surely as one of the same coordinator's.
    fn lock_all_or_nothing(&mut self, key: DtxnKey, tx: &ShardTx) -> Vote {
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
            self.locks.insert(*id, key);
            taken.push(*id);
        }
        if vote != Vote::Yes {
            for id in &taken {
                let holder = self.locks.remove(id);
                assert_eq!(holder, Some(key));
            }
        }
        vote
    }

    fn commit(
        &mut self,
        coordinator: CoordinatorIndex,
        dtxns: &mut CoordinatorDtxns,
        dtxn: DtxnId,
        complete: &[bool],
    ) -> ShardResponse {
        if dtxns.is_finished(dtxn) {
            return ShardResponse::Stale { dtxn };
        }
        let Some(record) = dtxns.dtxns.get_mut(&dtxn) else {
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
        record.committed = true;
        for ((tx, vote), &done) in record.txs.iter().zip(&record.votes).zip(complete) {
            if *vote != Vote::Yes {
                continue; // It never took a lock.
            }
            for id in tx.spent.iter().chain(&tx.created) {
                let holder = self.locks.remove(id);
                assert_eq!(
                    holder,
                    Some((coordinator, dtxn)),
                    "commit releases only locks its own prepare took"
                );
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

    fn discard(dtxns: &mut CoordinatorDtxns, dtxn: DtxnId, finished_below: DtxnId) -> ShardResponse {
        // Both halves of the request come from a peer: check all of it before changing anything,
        // so a refused discard leaves the state exactly as it was.
        if dtxns.dtxns.get(&dtxn).is_some_and(|record| !record.committed) {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::DiscardBeforeCommit,
            };
        }
        // Forgetting an uncommitted dtxn would leak its locks forever; an honest coordinator never
        // sends such a watermark (it lies below every dtxn it has not finished everywhere).
        if dtxns.dtxns.range(..finished_below).any(|(_, record)| !record.committed) {
            return ShardResponse::Refused {
                dtxn,
                reason: Refusal::WatermarkPassesUncommitted,
            };
        }
        dtxns.dtxns.remove(&dtxn);
        if dtxn >= dtxns.finished_below {
            dtxns.discarded.insert(dtxn);
        }
        if finished_below > dtxns.finished_below {
            // Discards may arrive out of order, so committed dtxns below the watermark can still
            // be here: the coordinator has finished them, so forget them now.
            let above = dtxns.dtxns.split_off(&finished_below);
            let below = std::mem::replace(&mut dtxns.dtxns, above);
            debug_assert!(
                below.values().all(|record| record.committed),
                "checked above: the watermark passes only committed dtxns"
            );
            dtxns.finished_below = finished_below;
            dtxns.discarded = dtxns.discarded.split_off(&finished_below);
        }
        ShardResponse::Discarded { dtxn }
    }

    /// Full consistency check (tests and recovery): every lock belongs to a live prepared dtxn
    /// that voted yes, no id is locked twice (whichever coordinators hold it), locked inputs are
    /// present, reserved outputs absent, all ids owned, and each coordinator's dtxn bookkeeping
    /// is in the shape `apply` keeps it in (live and discarded dtxns at or above the watermark
    /// and disjoint, one vote per transaction, transaction indexes ascending, nothing kept for a
    /// coordinator with nothing to remember). A state that passes cannot make `apply` panic.
    pub fn check_invariants(&self) -> Result<(), ShardInvariantViolation> {
        if self.range.first > self.range.last {
            return Err(ShardInvariantViolation::EmptyRange { range: self.range });
        }
        let mut expected: HashMap<UhsId, DtxnKey> = HashMap::new();
        for (&coordinator, dtxns) in &self.coordinators {
            if dtxns.is_empty() {
                return Err(ShardInvariantViolation::EmptyCoordinator { coordinator });
            }
            Self::check_bookkeeping(dtxns)?;
            for (&dtxn, record) in &dtxns.dtxns {
                self.check_record(dtxn, record)?;
                if record.committed {
                    continue;
                }
                let held = record
                    .txs
                    .iter()
                    .zip(&record.votes)
                    .filter(|(_, vote)| **vote == Vote::Yes);
                for (tx, _) in held {
                    for id in &tx.spent {
                        if !self.uhs.contains(id) {
                            return Err(ShardInvariantViolation::LockedInputMissing { dtxn, id: *id });
                        }
                    }
                    for id in &tx.created {
                        if self.uhs.contains(id) {
                            return Err(ShardInvariantViolation::ReservedOutputExists { dtxn, id: *id });
                        }
                    }
                    for id in tx.spent.iter().chain(&tx.created) {
                        if expected.insert(*id, (coordinator, dtxn)).is_some() {
                            return Err(ShardInvariantViolation::LockedTwice { id: *id });
                        }
                    }
                }
            }
        }
        if expected != self.locks {
            return Err(ShardInvariantViolation::LocksDiffer {
                locks: self.locks.len(),
                expected: expected.len(),
            });
        }
        if let Some(&id) = self.uhs.iter().find(|id| !self.range.contains(id)) {
            return Err(ShardInvariantViolation::UhsIdOutOfRange { id });
        }
        Ok(())
    }

    /// One coordinator's watermark, live and discarded dtxns are consistent.
    fn check_bookkeeping(dtxns: &CoordinatorDtxns) -> Result<(), ShardInvariantViolation> {
        let finished_below = dtxns.finished_below;
        if let Some((&dtxn, _)) = dtxns.dtxns.first_key_value() {
            if dtxn < finished_below {
                return Err(ShardInvariantViolation::LiveBelowWatermark { dtxn, finished_below });
            }
        }
        if let Some(&dtxn) = dtxns.discarded.first() {
            if dtxn < finished_below {
                return Err(ShardInvariantViolation::DiscardedBelowWatermark { dtxn, finished_below });
            }
        }
        if let Some(&dtxn) = dtxns.discarded.iter().find(|d| dtxns.dtxns.contains_key(d)) {
            return Err(ShardInvariantViolation::LiveAndDiscarded { dtxn });
        }
        Ok(())
    }

    /// One dtxn's record is in the shape `prepare` makes.
    fn check_record(&self, dtxn: DtxnId, record: &DtxnRecord) -> Result<(), ShardInvariantViolation> {
        if record.votes.len() != record.txs.len() {
            return Err(ShardInvariantViolation::VoteCount {
                dtxn,
                votes: record.votes.len(),
                txs: record.txs.len(),
            });
        }
        if !record.txs.windows(2).all(|pair| pair[0].index < pair[1].index) {
            return Err(ShardInvariantViolation::IndexesOutOfOrder { dtxn });
        }
        let ids = record.txs.iter().flat_map(|tx| tx.spent.iter().chain(&tx.created));
        if let Some(&id) = ids.clone().find(|id| !self.range.contains(id)) {
            return Err(ShardInvariantViolation::DtxnIdOutOfRange { dtxn, id });
        }
        Ok(())
    }

    /// The UHS ids in ascending order: for digests and audits, O(n log n).
    pub fn sorted_ids(&self) -> Vec<UhsId> {
        let mut ids: Vec<UhsId> = self.uhs.iter().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// A shard whose UHS holds exactly `ids`, with nothing in flight: a genesis state, as a
    /// snapshot would restore it (test fixtures and genesis files). It never changes a live
    /// shard: after creation, only requests do.
    ///
    /// # Panics
    /// If an id lies outside `range`.
    pub fn with_unspent(range: ShardRange, ids: impl IntoIterator<Item = UhsId>) -> ShardState {
        let mut state = ShardState::new(range);
        for id in ids {
            assert!(range.contains(&id), "{id:?} lies outside {range:?}");
            state.uhs.insert(id);
        }
        state
    }
}

/// Version 1 held one coordinator's dtxns (every dtxn was coordinator 0's); version 2 holds each
/// coordinator's. Version 1 snapshots still load.
const SNAPSHOT_VERSION: u8 = 2;
const SNAPSHOT_VERSION_ONE_COORDINATOR: u8 = 1;

impl ShardState {
    /// The state as bytes, canonical (sorted) so equal states give equal snapshots. Locks are
    /// not stored: they are derived from the prepared dtxns on load.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        use specie_codec::{put_count, put_u64, Encode};
        let mut out = Vec::with_capacity(64 + self.uhs.len() * 32);
        out.push(SNAPSHOT_VERSION);
        put_u64(&mut out, u64::from(self.range.first));
        put_u64(&mut out, u64::from(self.range.last));
        let mut ids: Vec<&UhsId> = self.uhs.iter().collect();
        ids.sort_unstable();
        put_count(&mut out, ids.len());
        for id in ids {
            id.encode_to(&mut out);
        }
        put_count(&mut out, self.coordinators.len());
        for (coordinator, dtxns) in &self.coordinators {
            out.extend_from_slice(&coordinator.to_le_bytes());
            encode_coordinator(&mut out, dtxns);
        }
        out
    }

    pub fn decode_snapshot(bytes: &[u8]) -> Result<ShardState, specie_codec::DecodeError> {
        use specie_codec::{DecodeError, Reader};

        use crate::wire::read_ids;
        let mut reader = Reader::new(bytes);
        let version = reader.read_u8("shard snapshot version")?;
        if version != SNAPSHOT_VERSION && version != SNAPSHOT_VERSION_ONE_COORDINATOR {
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
        if range.first > range.last {
            return Err(DecodeError::NonCanonical {
                what: "shard snapshot",
                reason: "empty range",
            });
        }
        let mut state = ShardState::new(range);
        let one_coordinator = if version == SNAPSHOT_VERSION_ONE_COORDINATOR {
            Some(reader.read_u64("finished_below")?)
        } else {
            None
        };
        for id in read_ids(&mut reader, "snapshot UHS ids", u64::MAX)? {
            if !range.contains(&id) || !state.uhs.insert(id) {
                return Err(DecodeError::NonCanonical {
                    what: "snapshot UHS",
                    reason: "id outside the range or repeated",
                });
            }
        }
        if let Some(finished_below) = one_coordinator {
            let dtxns = decode_coordinator(&mut reader, finished_below)?;
            if !dtxns.is_empty() {
                state.coordinators.insert(0, dtxns);
            }
        } else {
            let count = reader.read_count("snapshot coordinators", CoordinatorIndex::MAX.into(), 2 + 8 + 8 + 8)?;
            for _ in 0..count {
                let coordinator = CoordinatorIndex::from_le_bytes(reader.read_array("coordinator index")?);
                if state
                    .coordinators
                    .last_key_value()
                    .is_some_and(|(&last, _)| last >= coordinator)
                {
                    return Err(DecodeError::NonCanonical {
                        what: "snapshot coordinators",
                        reason: "coordinator indexes must be strictly ascending",
                    });
                }
                let finished_below = reader.read_u64("finished_below")?;
                state
                    .coordinators
                    .insert(coordinator, decode_coordinator(&mut reader, finished_below)?);
            }
        }
        reader.finish()?;
        state.derive_locks();
        state.check_invariants().map_err(|_| DecodeError::NonCanonical {
            what: "shard snapshot",
            reason: "locks, dtxns, watermarks and UHS are inconsistent",
        })?;
        Ok(state)
    }

    /// Locks from the prepared, uncommitted dtxns' yes votes (a loaded snapshot). An id two
    /// dtxns would hold is left to [`Self::check_invariants`] to refuse.
    fn derive_locks(&mut self) {
        for (&coordinator, dtxns) in &self.coordinators {
            for (&dtxn, record) in dtxns.dtxns.iter().filter(|(_, record)| !record.committed) {
                for (tx, _) in record
                    .txs
                    .iter()
                    .zip(&record.votes)
                    .filter(|(_, vote)| **vote == Vote::Yes)
                {
                    for id in tx.spent.iter().chain(&tx.created) {
                        self.locks.insert(*id, (coordinator, dtxn));
                    }
                }
            }
        }
    }
}

/// One coordinator's dtxns after its index: watermark, live dtxns, discarded dtxns.
fn encode_coordinator(out: &mut Vec<u8>, dtxns: &CoordinatorDtxns) {
    use specie_codec::{put_count, put_u64, put_vec};
    put_u64(out, dtxns.finished_below);
    put_count(out, dtxns.dtxns.len());
    for (dtxn, record) in &dtxns.dtxns {
        put_u64(out, *dtxn);
        put_vec(out, &record.txs);
        crate::wire::put_votes(out, &record.votes);
        out.push(u8::from(record.committed));
    }
    put_count(out, dtxns.discarded.len());
    for dtxn in &dtxns.discarded {
        put_u64(out, *dtxn);
    }
}

/// Reads what [`encode_coordinator`] wrote after the watermark (version 1 kept its one
/// watermark before the UHS).
fn decode_coordinator(
    reader: &mut specie_codec::Reader<'_>,
    finished_below: DtxnId,
) -> Result<CoordinatorDtxns, specie_codec::DecodeError> {
    use specie_codec::{Decode, DecodeError};

    use crate::wire::{read_votes, ShardWireLimits};
    let mut dtxns = CoordinatorDtxns {
        finished_below,
        ..CoordinatorDtxns::default()
    };
    let limits = ShardWireLimits::default();
    let dtxn_count = reader.read_count("snapshot dtxns", u64::MAX, 8 + 8 + 8 + 1)?;
    for _ in 0..dtxn_count {
        let dtxn = reader.read_u64("dtxn id")?;
        if dtxns
            .dtxns
            .last_key_value()
            .is_some_and(|(&previous, _)| previous >= dtxn)
        {
            return Err(DecodeError::NonCanonical {
                what: "snapshot dtxns",
                reason: "dtxn ids must be strictly ascending",
            });
        }
        let txs = reader.read_vec("dtxn transactions", limits.dtxn_transactions_max, 24, |r| {
            ShardTx::decode_from(r, &limits)
        })?;
        let votes = read_votes(reader, limits.dtxn_transactions_max)?;
        let committed = reader.read_bool("committed flag")?;
        if votes.len() != txs.len() {
            return Err(DecodeError::NonCanonical {
                what: "snapshot dtxn",
                reason: "vote count differs from transactions",
            });
        }
        dtxns.dtxns.insert(dtxn, DtxnRecord { txs, votes, committed });
    }
    let discarded = reader.read_count("snapshot discarded dtxns", u64::MAX, 8)?;
    for _ in 0..discarded {
        let dtxn = reader.read_u64("discarded dtxn")?;
        if dtxns.discarded.last().is_some_and(|&last| last >= dtxn) {
            return Err(DecodeError::NonCanonical {
                what: "snapshot discarded dtxns",
                reason: "dtxn ids must be strictly ascending",
            });
        }
        dtxns.discarded.insert(dtxn);
    }
    Ok(dtxns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> UhsId {
        UhsId([n; 32])
    }

    /// Coordinator 0's dtxns, made if missing (tests that build states by hand).
    fn of0(state: &mut ShardState) -> &mut CoordinatorDtxns {
        state.coordinators.entry(0).or_default()
    }

    fn full_shard() -> ShardState {
        ShardState::with_unspent(
            ShardRange {
                first: 0,
                last: u16::MAX,
            },
            [id(1), id(2), id(3)],
        )
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
            shard.apply(0, &prepare),
            ShardResponse::Prepared {
                dtxn: 0,
                votes: votes.clone()
            }
        );
        assert_eq!(
            shard.apply(0, &prepare),
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
            shard.apply(0, &bad),
            ShardResponse::Refused {
                dtxn: 0,
                reason: Refusal::CompletesRejected
            }
        );
        let commit = ShardRequest::Commit {
            dtxn: 0,
            complete: vec![true, false, false],
        };
        assert_eq!(shard.apply(0, &commit), ShardResponse::Committed { dtxn: 0 });
        assert_eq!(shard.apply(0, &commit), ShardResponse::Committed { dtxn: 0 });
        assert!(!shard.contains(&id(1)) && shard.contains(&id(10)) && !shard.contains(&id(11)));
        assert_eq!(shard.stats().locked_ids, 0);
        assert_eq!(
            shard.apply(
                0,
                &ShardRequest::Discard {
                    dtxn: 0,
                    finished_below: 1
                }
            ),
            ShardResponse::Discarded { dtxn: 0 }
        );
        assert_eq!(
            shard.apply(0, &prepare),
            ShardResponse::Stale { dtxn: 0 },
            "late duplicate after discard"
        );
        assert_eq!(shard.apply(0, &commit), ShardResponse::Stale { dtxn: 0 });
        shard.check_invariants().unwrap();
    }

    #[test]
    fn spent_id_is_never_spent_again_and_outputs_are_never_recreated() {
        let mut shard = full_shard();
        shard.apply(
            0,
            &ShardRequest::Prepare {
                dtxn: 0,
                txs: vec![tx(0, &[1], &[20])],
            },
        );
        shard.apply(
            0,
            &ShardRequest::Commit {
                dtxn: 0,
                complete: vec![true],
            },
        );
        let again = ShardRequest::Prepare {
            dtxn: 1,
            txs: vec![tx(0, &[1], &[21]), tx(1, &[], &[20]), tx(2, &[2, 2], &[22])],
        };
        let ShardResponse::Prepared { votes, .. } = shard.apply(0, &again) else {
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
            shard.apply(0, &foreign),
            ShardResponse::Refused {
                dtxn: 0,
                reason: Refusal::NotOwned
            }
        );
        assert_eq!(
            shard.apply(
                0,
                &ShardRequest::Commit {
                    dtxn: 3,
                    complete: vec![]
                }
            ),
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
            shard.apply(0, &unordered),
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
        shard.apply(
            0,
            &ShardRequest::Prepare {
                dtxn: 4,
                txs: vec![tx(0, &[1], &[30]), tx(1, &[7], &[31])],
            },
        );
        shard.apply(
            0,
            &ShardRequest::Prepare {
                dtxn: 5,
                txs: vec![tx(0, &[2], &[32])],
            },
        );
        shard.apply(
            0,
            &ShardRequest::Commit {
                dtxn: 5,
                complete: vec![true],
            },
        );
        shard.apply(
            0,
            &ShardRequest::Discard {
                dtxn: 5,
                finished_below: 4,
            },
        );
        let bytes = shard.encode_snapshot();
        let restored = ShardState::decode_snapshot(&bytes).unwrap();
        assert_eq!(restored.encode_snapshot(), bytes);
        assert_eq!(restored.locks, shard.locks);
        assert_eq!(restored.stats(), shard.stats());
        for cut in 0..bytes.len() {
            assert!(ShardState::decode_snapshot(&bytes[..cut]).is_err());
        }
    }

    // ---- Requests no honest coordinator sends: each gets a typed answer, never a panic. ----

    /// Applies `request`, expects the refusal `reason`, and checks that nothing changed.
    fn refused_unchanged(shard: &mut ShardState, request: ShardRequest, reason: Refusal) {
        let before = shard.encode_snapshot();
        let locks = shard.locks.clone();
        assert_eq!(
            shard.apply(0, &request),
            ShardResponse::Refused {
                dtxn: request.dtxn(),
                reason
            },
            "{request:?}"
        );
        assert_eq!(
            shard.encode_snapshot(),
            before,
            "a refused {request:?} changed the state"
        );
        assert_eq!(shard.locks, locks);
        shard.check_invariants().unwrap();
    }

    fn prepare(dtxn: DtxnId, txs: Vec<ShardTx>) -> ShardRequest {
        ShardRequest::Prepare { dtxn, txs }
    }

    fn commit(dtxn: DtxnId, complete: &[bool]) -> ShardRequest {
        ShardRequest::Commit {
            dtxn,
            complete: complete.to_vec(),
        }
    }

    fn discard(dtxn: DtxnId, finished_below: DtxnId) -> ShardRequest {
        ShardRequest::Discard { dtxn, finished_below }
    }

    #[test]
    fn forged_watermark_passing_an_uncommitted_dtxn_is_refused_without_change() {
        let mut shard = full_shard();
        assert!(matches!(
            shard.apply(0, &prepare(5, vec![tx(0, &[1], &[40])])),
            ShardResponse::Prepared { .. }
        ));
        let before = shard.encode_snapshot();
        assert_eq!(
            shard.apply(0, &discard(9, 10)),
            ShardResponse::Refused {
                dtxn: 9,
                reason: Refusal::WatermarkPassesUncommitted
            }
        );
        assert_eq!(shard.encode_snapshot(), before, "state unchanged");
        shard.check_invariants().unwrap();
        assert_eq!(
            shard.apply(0, &commit(5, &[true])),
            ShardResponse::Committed { dtxn: 5 }
        );
        assert!(!shard.contains(&id(1)) && shard.contains(&id(40)));
        shard.check_invariants().unwrap();
        // Once dtxn 5 is committed, the same watermark is fine.
        assert_eq!(shard.apply(0, &discard(9, 10)), ShardResponse::Discarded { dtxn: 9 });
        assert_eq!(shard.apply(0, &prepare(5, vec![])), ShardResponse::Stale { dtxn: 5 });
        shard.check_invariants().unwrap();
    }

    #[test]
    fn a_refused_watermark_does_not_half_apply_the_explicit_dtxn() {
        let mut shard = full_shard();
        shard.apply(0, &prepare(5, vec![tx(0, &[1], &[40])]));
        shard.apply(0, &prepare(9, vec![tx(0, &[2], &[41])]));
        assert_eq!(
            shard.apply(0, &commit(9, &[true])),
            ShardResponse::Committed { dtxn: 9 }
        );
        // Dtxn 9 is committed and could be forgotten, but the watermark passes uncommitted 5.
        refused_unchanged(&mut shard, discard(9, 10), Refusal::WatermarkPassesUncommitted);
        assert_eq!(shard.stats().dtxns_active, 2, "dtxn 9 is still remembered");
        assert_eq!(
            shard.apply(0, &commit(9, &[true])),
            ShardResponse::Committed { dtxn: 9 },
            "and still answered from memory, not as stale"
        );
        refused_unchanged(&mut shard, discard(9, u64::MAX), Refusal::WatermarkPassesUncommitted);
        // A watermark that stops at the uncommitted dtxn is accepted.
        assert_eq!(shard.apply(0, &discard(9, 5)), ShardResponse::Discarded { dtxn: 9 });
        shard.check_invariants().unwrap();
    }

    #[test]
    fn commit_of_an_unprepared_dtxn_is_refused() {
        let mut shard = full_shard();
        refused_unchanged(&mut shard, commit(3, &[true]), Refusal::NotPrepared);
        refused_unchanged(&mut shard, commit(u64::MAX, &[]), Refusal::NotPrepared);
    }

    #[test]
    fn commit_with_the_wrong_number_of_flags_is_refused() {
        let mut shard = full_shard();
        shard.apply(0, &prepare(0, vec![tx(0, &[1], &[10]), tx(1, &[2], &[11])]));
        refused_unchanged(&mut shard, commit(0, &[]), Refusal::CommitLengthMismatch);
        refused_unchanged(&mut shard, commit(0, &[true]), Refusal::CommitLengthMismatch);
        refused_unchanged(&mut shard, commit(0, &[true; 3]), Refusal::CommitLengthMismatch);
        assert_eq!(
            shard.apply(0, &commit(0, &[true, false])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert!(!shard.contains(&id(1)) && shard.contains(&id(2)) && shard.contains(&id(10)));
        shard.check_invariants().unwrap();
    }

    #[test]
    fn commit_completing_a_rejected_transaction_is_refused() {
        let mut shard = full_shard();
        let ShardResponse::Prepared { votes, .. } = shard.apply(0, &prepare(0, vec![tx(0, &[9], &[10])])) else {
            panic!()
        };
        assert_eq!(votes, vec![Vote::InputMissing]);
        refused_unchanged(&mut shard, commit(0, &[true]), Refusal::CompletesRejected);
        assert_eq!(
            shard.apply(0, &commit(0, &[false])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert!(!shard.contains(&id(10)));
        shard.check_invariants().unwrap();
    }

    #[test]
    fn discard_before_commit_is_refused() {
        let mut shard = full_shard();
        shard.apply(0, &prepare(4, vec![tx(0, &[1], &[10])]));
        refused_unchanged(&mut shard, discard(4, 0), Refusal::DiscardBeforeCommit);
        refused_unchanged(&mut shard, discard(4, 5), Refusal::DiscardBeforeCommit);
        assert_eq!(
            shard.apply(0, &commit(4, &[true])),
            ShardResponse::Committed { dtxn: 4 }
        );
    }

    #[test]
    fn prepare_with_ids_outside_the_range_is_refused() {
        let mut shard = ShardState::new(ShardRange { first: 0, last: 0x00ff });
        refused_unchanged(&mut shard, prepare(0, vec![tx(0, &[], &[0xee])]), Refusal::NotOwned);
        refused_unchanged(
            &mut shard,
            prepare(0, vec![tx(0, &[0], &[]), tx(1, &[0xff], &[])]),
            Refusal::NotOwned,
        );
        // Refusal is not a verdict on the dtxn: a corrected prepare is still accepted.
        assert!(matches!(
            shard.apply(0, &prepare(0, vec![tx(0, &[], &[0])])),
            ShardResponse::Prepared { .. }
        ));
    }

    #[test]
    fn prepare_with_unsorted_or_repeated_indexes_is_refused() {
        let mut shard = full_shard();
        refused_unchanged(
            &mut shard,
            prepare(0, vec![tx(2, &[1], &[10]), tx(1, &[2], &[11])]),
            Refusal::BadTxIndexes,
        );
        refused_unchanged(
            &mut shard,
            prepare(0, vec![tx(0, &[1], &[10]), tx(0, &[2], &[11])]),
            Refusal::BadTxIndexes,
        );
        refused_unchanged(
            &mut shard,
            prepare(0, vec![tx(u32::MAX, &[1], &[]), tx(0, &[2], &[])]),
            Refusal::BadTxIndexes,
        );
    }

    #[test]
    fn an_id_both_spent_and_created_in_one_transaction_is_voted_down() {
        let mut shard = full_shard();
        let response = shard.apply(0, &prepare(0, vec![tx(0, &[1], &[1]), tx(1, &[], &[7, 7])]));
        assert_eq!(
            response,
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::OutputLocked, Vote::OutputLocked]
            }
        );
        assert_eq!(shard.stats().locked_ids, 0, "nothing stays locked");
        shard.check_invariants().unwrap();
        refused_unchanged(&mut shard, commit(0, &[true, false]), Refusal::CompletesRejected);
        assert_eq!(
            shard.apply(0, &commit(0, &[false, false])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert!(shard.contains(&id(1)) && !shard.contains(&id(7)));
    }

    #[test]
    fn the_same_id_spent_by_two_transactions_of_one_dtxn_is_spent_once() {
        let mut shard = full_shard();
        let response = shard.apply(0, &prepare(0, vec![tx(0, &[1], &[10]), tx(1, &[1], &[11])]));
        assert_eq!(
            response,
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::Yes, Vote::InputLocked]
            }
        );
        refused_unchanged(&mut shard, commit(0, &[true, true]), Refusal::CompletesRejected);
        assert_eq!(
            shard.apply(0, &commit(0, &[true, false])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert!(!shard.contains(&id(1)) && shard.contains(&id(10)) && !shard.contains(&id(11)));
        shard.check_invariants().unwrap();
    }

    #[test]
    fn huge_dtxn_ids_and_watermarks_are_plain_numbers() {
        let mut shard = full_shard();
        let max = u64::MAX;
        assert!(matches!(
            shard.apply(0, &prepare(max, vec![tx(0, &[1], &[10])])),
            ShardResponse::Prepared { .. }
        ));
        refused_unchanged(&mut shard, discard(max, max), Refusal::DiscardBeforeCommit);
        assert_eq!(
            shard.apply(0, &commit(max, &[true])),
            ShardResponse::Committed { dtxn: max }
        );
        assert_eq!(
            shard.apply(0, &discard(max, max)),
            ShardResponse::Discarded { dtxn: max }
        );
        shard.check_invariants().unwrap();
        assert_eq!(
            shard.apply(0, &prepare(max, vec![])),
            ShardResponse::Stale { dtxn: max }
        );
        assert_eq!(
            shard.apply(0, &commit(max - 1, &[])),
            ShardResponse::Stale { dtxn: max - 1 }
        );
        assert_eq!(
            shard.apply(0, &discard(0, 0)),
            ShardResponse::Discarded { dtxn: 0 },
            "watermark never goes back"
        );
        assert_eq!(shard.apply(0, &prepare(0, vec![])), ShardResponse::Stale { dtxn: 0 });
        shard.check_invariants().unwrap();
        let restored = ShardState::decode_snapshot(&shard.encode_snapshot()).unwrap();
        assert_eq!(restored.encode_snapshot(), shard.encode_snapshot());
    }

    #[test]
    fn a_max_watermark_with_nothing_in_flight_ends_everything_below_it() {
        let mut shard = full_shard();
        assert_eq!(
            shard.apply(0, &discard(3, u64::MAX)),
            ShardResponse::Discarded { dtxn: 3 }
        );
        assert_eq!(
            shard.apply(0, &prepare(7, vec![tx(0, &[1], &[])])),
            ShardResponse::Stale { dtxn: 7 }
        );
        assert!(matches!(
            shard.apply(0, &prepare(u64::MAX, vec![tx(0, &[1], &[])])),
            ShardResponse::Prepared { .. }
        ));
        shard.check_invariants().unwrap();
    }

    #[test]
    fn re_sent_phases_with_different_contents_get_the_first_answer() {
        let mut shard = full_shard();
        let first = shard.apply(0, &prepare(0, vec![tx(0, &[1], &[10])]));
        let locks = shard.locks.clone();
        assert_eq!(
            shard.apply(0, &prepare(0, vec![tx(0, &[2], &[11]), tx(1, &[3], &[])])),
            first
        );
        assert_eq!(shard.locks, locks, "a re-sent prepare takes no new lock");
        assert_eq!(
            shard.apply(0, &commit(0, &[false])),
            ShardResponse::Committed { dtxn: 0 }
        );
        let before = shard.encode_snapshot();
        assert_eq!(
            shard.apply(0, &commit(0, &[true])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert_eq!(shard.encode_snapshot(), before, "a re-sent commit changes nothing");
        shard.check_invariants().unwrap();
    }

    #[test]
    fn empty_prepares_and_discards_of_unknown_dtxns_are_harmless() {
        let mut shard = full_shard();
        assert_eq!(
            shard.apply(0, &prepare(2, vec![])),
            ShardResponse::Prepared { dtxn: 2, votes: vec![] }
        );
        assert_eq!(shard.apply(0, &commit(2, &[])), ShardResponse::Committed { dtxn: 2 });
        assert_eq!(shard.apply(0, &discard(6, 0)), ShardResponse::Discarded { dtxn: 6 });
        assert_eq!(shard.apply(0, &prepare(6, vec![])), ShardResponse::Stale { dtxn: 6 });
        shard.check_invariants().unwrap();
    }

    #[test]
    fn invariant_violations_name_what_is_wrong() {
        let record = |txs: Vec<ShardTx>| DtxnRecord {
            votes: vec![Vote::Yes; txs.len()],
            txs,
            committed: false,
        };
        let mut twice = full_shard();
        of0(&mut twice).dtxns.insert(0, record(vec![tx(0, &[1], &[])]));
        of0(&mut twice).dtxns.insert(1, record(vec![tx(0, &[1], &[])]));
        assert_eq!(
            twice.check_invariants(),
            Err(ShardInvariantViolation::LockedTwice { id: id(1) })
        );
        let mut below = full_shard();
        of0(&mut below).finished_below = 5;
        of0(&mut below).dtxns.insert(1, record(vec![]));
        let violation = below.check_invariants().unwrap_err();
        assert_eq!(
            violation,
            ShardInvariantViolation::LiveBelowWatermark {
                dtxn: 1,
                finished_below: 5
            }
        );
        assert_eq!(violation.to_string(), "dtxn 1 is live below the watermark 5");
    }

    #[test]
    fn forged_snapshots_that_would_make_apply_panic_are_refused() {
        let record = |txs: Vec<ShardTx>, committed: bool| DtxnRecord {
            votes: vec![Vote::Yes; txs.len()],
            txs,
            committed,
        };
        let encode_with = |edit: &dyn Fn(&mut ShardState)| {
            let mut state = full_shard();
            edit(&mut state);
            state.encode_snapshot()
        };
        let forged: Vec<(&str, Vec<u8>)> = vec![
            (
                "one input locked by two dtxns",
                encode_with(&|s| {
                    of0(s).dtxns.insert(0, record(vec![tx(0, &[1], &[])], false));
                    of0(s).dtxns.insert(1, record(vec![tx(0, &[1], &[])], false));
                }),
            ),
            (
                "one input spent twice by one transaction",
                encode_with(&|s| {
                    of0(s).dtxns.insert(0, record(vec![tx(0, &[1, 1], &[])], false));
                }),
            ),
            (
                "one input locked by two transactions of a dtxn",
                encode_with(&|s| {
                    of0(s)
                        .dtxns
                        .insert(0, record(vec![tx(0, &[1], &[]), tx(1, &[1], &[])], false));
                }),
            ),
            (
                "a live dtxn below the watermark",
                encode_with(&|s| {
                    of0(s).finished_below = 5;
                    of0(s).dtxns.insert(1, record(vec![], true));
                }),
            ),
            (
                "a discarded dtxn below the watermark",
                encode_with(&|s| {
                    of0(s).finished_below = 5;
                    of0(s).discarded.insert(1);
                }),
            ),
            (
                "a dtxn both live and discarded",
                encode_with(&|s| {
                    of0(s).dtxns.insert(7, record(vec![], true));
                    of0(s).discarded.insert(7);
                }),
            ),
            (
                "transaction indexes out of order",
                encode_with(&|s| {
                    of0(s)
                        .dtxns
                        .insert(0, record(vec![tx(1, &[], &[]), tx(0, &[], &[])], true));
                }),
            ),
            (
                "an empty range",
                encode_with(&|s| {
                    s.range = ShardRange { first: 9, last: 3 };
                    s.uhs.clear();
                }),
            ),
        ];
        for (what, bytes) in forged {
            assert!(ShardState::decode_snapshot(&bytes).is_err(), "accepted: {what}");
        }
        // Repeated dtxn ids in the encoding (not expressible through the map above).
        let mut state = full_shard();
        of0(&mut state).dtxns.insert(0, record(vec![], true));
        of0(&mut state).dtxns.insert(1, record(vec![], true));
        let mut bytes = state.encode_snapshot();
        assert!(ShardState::decode_snapshot(&bytes).is_ok());
        // The snapshot ends with two 25-byte dtxn records (id, two empty counts, committed flag)
        // and an empty discarded list; give the second record the first one's id.
        let second_id_at = bytes.len() - 8 - 25;
        bytes[second_id_at..second_id_at + 8].copy_from_slice(&0u64.to_le_bytes());
        assert!(
            ShardState::decode_snapshot(&bytes).is_err(),
            "repeated dtxn id accepted"
        );
    }

    #[test]
    fn each_coordinator_has_its_own_dtxns_and_watermark_but_locks_are_shared() {
        let mut shard = full_shard();
        // Both coordinators start at dtxn 0.
        assert_eq!(
            shard.apply(0, &prepare(0, vec![tx(0, &[1], &[10])])),
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::Yes]
            }
        );
        assert_eq!(
            shard.apply(1, &prepare(0, vec![tx(0, &[1], &[11]), tx(1, &[2], &[12])])),
            ShardResponse::Prepared {
                dtxn: 0,
                votes: vec![Vote::InputLocked, Vote::Yes]
            },
            "coordinator 1 cannot take what coordinator 0's dtxn holds"
        );
        // Coordinator 1 finishes everything below a high watermark: coordinator 0's dtxn 0 is
        // not its to forget, and its commit still applies.
        assert_eq!(
            shard.apply(1, &commit(0, &[false, true])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert_eq!(shard.apply(1, &discard(0, 100)), ShardResponse::Discarded { dtxn: 0 });
        assert_eq!(shard.apply(1, &prepare(5, vec![])), ShardResponse::Stale { dtxn: 5 });
        assert_eq!(
            shard.apply(0, &commit(0, &[true])),
            ShardResponse::Committed { dtxn: 0 }
        );
        assert!(!shard.contains(&id(1)) && !shard.contains(&id(2)));
        assert!(shard.contains(&id(10)) && shard.contains(&id(12)) && !shard.contains(&id(11)));
        shard.check_invariants().unwrap();
        let restored = ShardState::decode_snapshot(&shard.encode_snapshot()).unwrap();
        assert_eq!(restored.encode_snapshot(), shard.encode_snapshot());
        // A coordinator never heard from leaves no trace, even after a refused request.
        let before = shard.encode_snapshot();
        assert_eq!(
            shard.apply(7, &commit(3, &[])),
            ShardResponse::Refused {
                dtxn: 3,
                reason: Refusal::NotPrepared
            }
        );
        assert_eq!(shard.encode_snapshot(), before);
    }

    #[test]
    fn a_snapshot_from_before_several_coordinators_loads_as_coordinator_0s() {
        let mut shard = full_shard();
        shard.apply(0, &prepare(4, vec![tx(0, &[1], &[30])]));
        shard.apply(0, &prepare(5, vec![]));
        shard.apply(0, &commit(5, &[]));
        shard.apply(0, &discard(5, 4));
        let current = shard.encode_snapshot();
        // Version 1: version, range, watermark, UHS, dtxns, discarded. Version 2 moved the
        // watermark after the UHS, behind a count of coordinators (1) and the index (0).
        let uhs_end = 1 + 16 + 8 + 32 * shard.uhs.len();
        let tail = &current[uhs_end + 8 + 2..];
        let mut old = vec![1];
        old.extend_from_slice(&current[1..17]);
        old.extend_from_slice(&tail[..8]);
        old.extend_from_slice(&current[17..uhs_end]);
        old.extend_from_slice(&tail[8..]);
        let loaded = ShardState::decode_snapshot(&old).unwrap();
        assert_eq!(loaded.encode_snapshot(), current);
        assert_eq!(loaded.locks, shard.locks);
    }
}
