//! What must hold of the log store's state between operations, as one checker: after every
//! append, truncate and purge the store runs the cheap levels and panics on a violation (a bug
//! here would otherwise surface later as a log that recovery refuses, or as lost entries); on
//! open it runs every level.
//!
//! Positive space: entries are consecutive from just after the purge point, terms never go back
//! along the entries,
//! each entry sits in the segment its index falls in, frame after frame; segments ascend; the
//! active (last) segment ends where the newest entry ends (or is empty and named for the next
//! index); the commit point is within the log. Negative space: no segment without entries but a
//! single empty or purged-only one, no bytes without a segment.

use std::sync::Arc;

use super::{Index, Location, Segment};

/// How much to check; each level includes the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Depth {
    /// O(1): the ends of the log, the purge point, the active segment and the commit point.
    Ends,
    /// O(segments): the segment list.
    Segments,
    /// O(entries): every entry against the one before it and against its segment.
    Entries,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvariantViolation {
    #[error("entries {first}..={last} are {count} entries, not one per index")]
    EntryCountMismatch { first: u64, last: u64, count: usize },

    #[error("entry {index} follows entry {previous}")]
    EntriesNotConsecutive { previous: u64, index: u64 },

    #[error("entry {index} has term {term}, after an entry of term {term_before}")]
    TermRegressed { index: u64, term: u64, term_before: u64 },

    #[error("first entry {first} does not follow the purge point {purged}")]
    FirstNotAfterPurged { first: u64, purged: u64 },

    #[error("entry {index} is held in segment {segment_first}, not where its index falls")]
    EntryInWrongSegment { index: u64, segment_first: u64 },

    #[error("entry {index} sits at byte offset {offset} of its segment, expected {expected}")]
    EntryOffsetUnexpected { index: u64, offset: u64, expected: u64 },

    #[error("the newest entry {index} ends at byte {end}, but the active segment has {active_bytes} bytes")]
    ActiveEndMismatch { index: u64, end: u64, active_bytes: u64 },

    #[error("the active segment is empty but named {first_index}, while the log continues at {next_index}")]
    EmptyActiveMisnamed { first_index: u64, next_index: u64 },

    #[error("segment {next} follows segment {previous}")]
    SegmentsUnordered { previous: u64, next: u64 },

    #[error("{segments} segment files but no entries")]
    SegmentsWithoutEntries { segments: usize },

    #[error("{active_bytes} bytes written to an active segment that does not exist")]
    BytesWithoutSegment { active_bytes: u64 },

    #[error("committed index {committed} is past the last log index {last:?}")]
    CommittedPastLast { committed: u64, last: Option<u64> },
}

/// Checks the store's state down to `depth`. `committed_next` is the committed index + 1, 0 for
/// none (the store's metrics handle).
pub(super) fn check(
    index: &Index,
    segments: &[Arc<Segment>],
    active_bytes: u64,
    committed_next: u64,
    depth: Depth,
) -> Result<(), InvariantViolation> {
    check_commit_point(index, committed_next)?;
    check_ends(index, segments, active_bytes)?;
    if depth >= Depth::Segments {
        check_segments(segments)?;
    }
    if depth >= Depth::Entries {
        check_entries(index, segments)?;
    }
    Ok(())
}

fn check_commit_point(index: &Index, committed_next: u64) -> Result<(), InvariantViolation> {
    let Some(committed) = committed_next.checked_sub(1) else {
        return Ok(());
    };
    let last = index.last_log_id().map(|log_id| log_id.index);
    // Raft never truncates a committed entry, nor commits one it does not hold.
    if last.is_none_or(|last| committed > last) {
        return Err(InvariantViolation::CommittedPastLast { committed, last });
    }
    Ok(())
}

fn wrong_segment(location: &Location) -> InvariantViolation {
    InvariantViolation::EntryInWrongSegment {
        index: location.log_id.index,
        segment_first: location.segment.first_index,
    }
}

fn check_ends(index: &Index, segments: &[Arc<Segment>], active_bytes: u64) -> Result<(), InvariantViolation> {
    let Some(active) = segments.last() else {
        if active_bytes != 0 {
            return Err(InvariantViolation::BytesWithoutSegment { active_bytes });
        }
        return match index.entries.front() {
            Some(first) => Err(wrong_segment(first)),
            None => Ok(()),
        };
    };
    if active_bytes == 0 {
        if let Some(next_index) = index.next_index().filter(|&next| next != active.first_index) {
            return Err(InvariantViolation::EmptyActiveMisnamed {
                first_index: active.first_index,
                next_index,
            });
        }
    }
    let (Some(first), Some(last)) = (index.entries.front(), index.entries.back()) else {
        // Truncating everything keeps the segment it cut; purging everything deletes them all.
        if segments.len() > 1 {
            return Err(InvariantViolation::SegmentsWithoutEntries {
                segments: segments.len(),
            });
        }
        return Ok(());
    };
    let (first_index, last_index) = (first.log_id.index, last.log_id.index);
    if last_index.checked_sub(first_index) != Some(index.entries.len() as u64 - 1) {
        return Err(InvariantViolation::EntryCountMismatch {
            first: first_index,
            last: last_index,
            count: index.entries.len(),
        });
    }
    if last.log_id.leader_id.term < first.log_id.leader_id.term {
        return Err(InvariantViolation::TermRegressed {
            index: last_index,
            term: last.log_id.leader_id.term,
            term_before: first.log_id.leader_id.term,
        });
    }
    // Only indexes: openraft may purge through a log id of a later term than the entries after
    // it (when the state machine is ahead of a conflicting log, see its storage suite).
    if let Some(purged) = index
        .purged
        .filter(|purged| purged.index.checked_add(1) != Some(first_index))
    {
        return Err(InvariantViolation::FirstNotAfterPurged {
            first: first_index,
            purged: purged.index,
        });
    }
    if !Arc::ptr_eq(&first.segment, &segments[0]) || first.segment.first_index > first_index {
        return Err(wrong_segment(first));
    }
    if Arc::ptr_eq(&last.segment, active) {
        if last.end() != active_bytes {
            return Err(InvariantViolation::ActiveEndMismatch {
                index: last_index,
                end: last.end(),
                active_bytes,
            });
        }
    } else {
        // Only a truncation to the start of the active segment leaves it behind the newest
        // entry, and then empty (checked above: it is named for the next index).
        let before_active = segments.len().checked_sub(2).map(|position| &segments[position]);
        if active_bytes != 0 || before_active.is_none_or(|segment| !Arc::ptr_eq(&last.segment, segment)) {
            return Err(wrong_segment(last));
        }
    }
    Ok(())
}

fn check_segments(segments: &[Arc<Segment>]) -> Result<(), InvariantViolation> {
    match segments
        .windows(2)
        .find(|pair| pair[0].first_index >= pair[1].first_index)
    {
        Some(pair) => Err(InvariantViolation::SegmentsUnordered {
            previous: pair[0].first_index,
            next: pair[1].first_index,
        }),
        None => Ok(()),
    }
}

/// Walks the entries and the segments together: each entry directly follows the one before it,
/// in the same segment right after its frame, or at the start of the next segment, which is
/// named for it.
fn check_entries(index: &Index, segments: &[Arc<Segment>]) -> Result<(), InvariantViolation> {
    let mut entries = index.entries.iter();
    let Some(mut previous) = entries.next() else {
        return Ok(());
    };
    let starts_segment = previous.segment.first_index == previous.log_id.index;
    if starts_segment != (previous.offset == 0) {
        return Err(wrong_segment(previous));
    }
    let mut segment_position = 0;
    for location in entries {
        let index = location.log_id.index;
        if previous.log_id.index.checked_add(1) != Some(index) {
            return Err(InvariantViolation::EntriesNotConsecutive {
                previous: previous.log_id.index,
                index,
            });
        }
        if location.log_id.leader_id.term < previous.log_id.leader_id.term {
            return Err(InvariantViolation::TermRegressed {
                index,
                term: location.log_id.leader_id.term,
                term_before: previous.log_id.leader_id.term,
            });
        }
        let expected = if Arc::ptr_eq(&location.segment, &previous.segment) {
            previous.end()
        } else {
            segment_position += 1;
            let next_segment = segments.get(segment_position);
            if next_segment.is_none_or(|segment| !Arc::ptr_eq(segment, &location.segment))
                || location.segment.first_index != index
            {
                return Err(wrong_segment(location));
            }
            0
        };
        if location.offset != expected {
            return Err(InvariantViolation::EntryOffsetUnexpected {
                index,
                offset: location.offset,
                expected,
            });
        }
        previous = location;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::fs::OpenOptions;
    use std::path::Path;

    use openraft::storage::RaftLogStorage;
    use openraft::CommittedLeaderId;

    use super::super::tests::{append, entry, open};
    use super::super::LogStore;
    use super::*;
    use crate::types::LogId;

    /// A copy of the store's state, to break in one place at a time.
    #[derive(Clone)]
    struct State {
        index: Index,
        segments: Vec<Arc<Segment>>,
        active_bytes: u64,
        committed_next: u64,
    }

    impl State {
        fn of(store: &LogStore) -> State {
            State {
                index: store.index.read().clone(),
                segments: store.segments.clone(),
                active_bytes: store.active_bytes,
                committed_next: 0,
            }
        }

        fn check(&self, depth: Depth) -> Result<(), InvariantViolation> {
            check(
                &self.index,
                &self.segments,
                self.active_bytes,
                self.committed_next,
                depth,
            )
        }
    }

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    /// Entries 5..40 (after a purge through 4) in single-entry batches, over several segments.
    async fn state(dir: &Path) -> State {
        let (mut store, _) = open(dir);
        for index in 0..40 {
            append(&mut store, vec![entry(1, index)]).await;
        }
        store.purge(log_id(1, 4)).await.unwrap();
        let state = State::of(&store);
        assert!(state.segments.len() >= 4, "small segments roll");
        assert_eq!(state.check(Depth::Entries), Ok(()));
        state
    }

    #[tokio::test]
    async fn states_the_store_reaches_pass() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = open(dir.path());
        assert_eq!(State::of(&store).check(Depth::Entries), Ok(()));
        for index in 0..30 {
            append(&mut store, vec![entry(1, index)]).await;
            assert_eq!(State::of(&store).check(Depth::Entries), Ok(()));
        }
        // Truncating to the first entry of a segment leaves it empty behind the newest entry.
        let cut = State::of(&store).segments.last().unwrap().first_index;
        store.truncate(log_id(1, cut)).await.unwrap();
        assert_eq!(State::of(&store).active_bytes, 0);
        assert_eq!(State::of(&store).check(Depth::Entries), Ok(()));
        append(&mut store, vec![entry(2, cut)]).await;
        store.purge(log_id(1, 12)).await.unwrap();
        let mut state = State::of(&store);
        state.committed_next = cut + 1;
        assert_eq!(state.check(Depth::Entries), Ok(()));
        store.purge(log_id(2, cut)).await.unwrap();
        assert_eq!(State::of(&store).check(Depth::Entries), Ok(()));
    }

    #[tokio::test]
    async fn a_missing_entry_is_detected_in_constant_time() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.index.entries.remove(10);
        assert!(matches!(
            state.check(Depth::Ends),
            Err(InvariantViolation::EntryCountMismatch { count: 34, .. })
        ));
    }

    #[tokio::test]
    async fn entries_out_of_order_are_detected_by_the_full_check() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.index.entries.swap(10, 11);
        // The ends still look right; only walking the entries shows it.
        assert_eq!(state.check(Depth::Segments), Ok(()));
        assert_eq!(
            state.check(Depth::Entries),
            Err(InvariantViolation::EntriesNotConsecutive {
                previous: 14,
                index: 16
            })
        );
    }

    #[tokio::test]
    async fn a_term_going_back_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.index.entries[0].log_id = log_id(2, 5);
        assert!(matches!(
            state.check(Depth::Ends),
            Err(InvariantViolation::TermRegressed { index: 39, .. })
        ));
        let dir = tempfile::tempdir().unwrap();
        let mut state = self::state(dir.path()).await;
        state.index.entries[20].log_id = log_id(2, 25);
        assert_eq!(state.check(Depth::Segments), Ok(()));
        assert!(matches!(
            state.check(Depth::Entries),
            Err(InvariantViolation::TermRegressed { index: 26, .. })
        ));
    }

    #[tokio::test]
    async fn a_purge_point_not_just_before_the_first_entry_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.index.purged = Some(log_id(1, 2));
        assert_eq!(
            state.check(Depth::Ends),
            Err(InvariantViolation::FirstNotAfterPurged { first: 5, purged: 2 })
        );
        // Nor past the entries the log holds.
        state.index.purged = Some(log_id(1, 5));
        assert_eq!(
            state.check(Depth::Ends),
            Err(InvariantViolation::FirstNotAfterPurged { first: 5, purged: 5 })
        );
    }

    #[tokio::test]
    async fn segments_out_of_order_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.segments.swap(1, 2);
        assert_eq!(state.check(Depth::Ends), Ok(()), "O(1) checks look at the ends only");
        assert!(matches!(
            state.check(Depth::Segments),
            Err(InvariantViolation::SegmentsUnordered { .. })
        ));
    }

    #[tokio::test]
    async fn an_entry_in_the_wrong_segment_or_place_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path()).await;

        let mut moved = state.clone();
        moved.segments.remove(0);
        assert!(matches!(
            moved.check(Depth::Ends),
            Err(InvariantViolation::EntryInWrongSegment { index: 5, .. })
        ));

        let mut shifted = state.clone();
        shifted.index.entries[15].offset += 1;
        assert!(matches!(
            shifted.check(Depth::Entries),
            Err(InvariantViolation::EntryOffsetUnexpected { .. })
        ));

        let mut misplaced = state.clone();
        let segment = misplaced.segments[2].clone();
        let position = misplaced
            .index
            .entries
            .iter()
            .position(|l| Arc::ptr_eq(&l.segment, &misplaced.segments[1]))
            .unwrap();
        misplaced.index.entries[position].segment = segment;
        assert!(matches!(
            misplaced.check(Depth::Entries),
            Err(InvariantViolation::EntryInWrongSegment { .. })
        ));
    }

    #[tokio::test]
    async fn the_active_segment_must_end_where_the_log_does() {
        let dir = tempfile::tempdir().unwrap();
        let state = state(dir.path()).await;

        let mut longer = state.clone();
        longer.active_bytes += 1;
        assert!(matches!(
            longer.check(Depth::Ends),
            Err(InvariantViolation::ActiveEndMismatch { index: 39, .. })
        ));

        let mut gone = state.clone();
        gone.segments.clear();
        assert!(matches!(
            gone.check(Depth::Ends),
            Err(InvariantViolation::BytesWithoutSegment { .. })
        ));

        // An empty active segment named for anything but the next index.
        let mut empty = state.clone();
        let active = empty.segments.last().unwrap();
        let position = empty.index.position(active.first_index).unwrap();
        empty.index.entries.truncate(position);
        empty.active_bytes = 0;
        assert_eq!(empty.check(Depth::Entries), Ok(()));
        let misnamed = Segment {
            first_index: active.first_index + 1,
            path: active.path.clone(),
            file: OpenOptions::new().read(true).open(&active.path).unwrap(),
        };
        *empty.segments.last_mut().unwrap() = Arc::new(misnamed);
        assert!(matches!(
            empty.check(Depth::Ends),
            Err(InvariantViolation::EmptyActiveMisnamed { .. })
        ));

        // Segments left over with no entries at all.
        let mut bare = state.clone();
        bare.index.entries.clear();
        bare.index.purged = None;
        assert!(matches!(
            bare.check(Depth::Ends),
            Err(InvariantViolation::SegmentsWithoutEntries { .. })
        ));
    }

    #[tokio::test]
    async fn a_commit_point_past_the_log_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = state(dir.path()).await;
        state.committed_next = 40;
        assert_eq!(state.check(Depth::Ends), Ok(()));
        state.committed_next = 41;
        assert_eq!(
            state.check(Depth::Ends),
            Err(InvariantViolation::CommittedPastLast {
                committed: 40,
                last: Some(39)
            })
        );
    }
}
