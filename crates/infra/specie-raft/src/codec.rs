//! The one binary encoding of everything this crate writes to disk or hands to a transport: log
//! entries, votes, snapshot metadata and the Raft RPCs. All integers are little-endian; variable
//! parts carry a `u32` length or count. Decoding only slices what it was given: every length and
//! count is checked against its limit and against the bytes actually left before anything is
//! allocated, so a hostile or corrupt input costs at most a small multiple of its own size.
//!
//! Requests come from peers, so decoding also refuses what would make openraft panic or overflow
//! further on: terms and log indexes beyond [`TERM_MAX`] / [`LOG_INDEX_MAX`] (openraft adds 1 to
//! them), append-entries whose entries do not follow `prev_log_id` one index at a time in
//! non-decreasing leader order, memberships with an empty voter set (or none, in a log entry),
//! and snapshot chunks whose end overflows.

use std::collections::{BTreeMap, BTreeSet};

use openraft::error::{InstallSnapshotError, SnapshotMismatch};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{
    CommittedLeaderId, EmptyNode, Entry, EntryPayload, LogId, Membership, SnapshotMeta, SnapshotSegmentId,
    StoredMembership, Vote,
};

use crate::types::{Batch, NodeId, TypeConfig};

/// Most voter sets in one membership: two while a joint configuration is in force.
const MEMBERSHIP_CONFIGS_MAX: usize = 2;
/// Most voters in one set, and most nodes in one membership: far above any replica group.
const MEMBERSHIP_NODES_MAX: usize = 1024;
/// Largest term accepted: no group gets near it, and openraft computes `term + 1` when it stands
/// for election, which must not overflow.
pub(crate) const TERM_MAX: u64 = u64::MAX >> 1;
/// Largest log index accepted, for the same reason (`index + 1` is the next index everywhere).
pub(crate) const LOG_INDEX_MAX: u64 = u64::MAX >> 1;

pub use specie_codec::DecodeError;

fn malformed(what: &'static str, reason: impl Into<String>) -> DecodeError {
    DecodeError::Invalid {
        what,
        reason: reason.into(),
    }
}

/// The workspace's bounded reader ([`specie_codec::Reader`]), naming what it reads in every
/// error, with the Raft types on top.
pub(crate) struct Reader<'a> {
    bytes: specie_codec::Reader<'a>,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader {
            bytes: specie_codec::Reader::new(bytes),
            what,
        }
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        self.bytes.read_u8(self.what)
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        self.bytes.read_u32(self.what)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        self.bytes.read_u64(self.what)
    }

    fn term(&mut self) -> Result<u64, DecodeError> {
        let term = self.u64()?;
        if term > TERM_MAX {
            return Err(malformed(self.what, format!("term {term} over {TERM_MAX}")));
        }
        Ok(term)
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        self.bytes.read_bool(self.what)
    }

    /// A count of items that each take at least `item_bytes_min` bytes: refused if the input
    /// cannot possibly hold that many, so no count read from the input sizes an allocation alone.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        self.bytes
            .read_u32_count(self.what, u64::from(u32::MAX), item_bytes_min.max(1))
    }

    pub(crate) fn byte_string(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.bytes.read_u32_count(self.what, u64::from(u32::MAX), 1)?;
        self.bytes.read_bytes(self.what, len)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.byte_string()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed(self.what, "string is not UTF-8"))
    }

    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        self.bytes.finish()
    }

    pub(crate) fn log_id(&mut self) -> Result<LogId<NodeId>, DecodeError> {
        let term = self.term()?;
        let node_id = self.u64()?;
        let index = self.u64()?;
        if index > LOG_INDEX_MAX {
            return Err(malformed(self.what, format!("log index {index} over {LOG_INDEX_MAX}")));
        }
        Ok(LogId::new(CommittedLeaderId::new(term, node_id), index))
    }

    pub(crate) fn option_log_id(&mut self) -> Result<Option<LogId<NodeId>>, DecodeError> {
        if self.bool()? {
            Ok(Some(self.log_id()?))
        } else {
            Ok(None)
        }
    }

    pub(crate) fn vote(&mut self) -> Result<Vote<NodeId>, DecodeError> {
        let term = self.term()?;
        let node_id = self.u64()?;
        let committed = self.bool()?;
        Ok(if committed {
            Vote::new_committed(term, node_id)
        } else {
            Vote::new(term, node_id)
        })
    }

    /// Node ids in strictly ascending order (as the encoder writes a set), at most
    /// [`MEMBERSHIP_NODES_MAX`] of them.
    fn node_ids(&mut self) -> Result<BTreeSet<NodeId>, DecodeError> {
        let count = self.count(8)?;
        if count > MEMBERSHIP_NODES_MAX {
            return Err(malformed(self.what, format!("{count} node ids")));
        }
        let mut ids = BTreeSet::new();
        for _ in 0..count {
            let id = self.u64()?;
            if ids.last().is_some_and(|&last| last >= id) {
                return Err(malformed(self.what, "node ids not strictly ascending"));
            }
            ids.insert(id);
        }
        Ok(ids)
    }

    /// `in_entry`: a membership in a log entry needs at least one voter set; zero voter sets is
    /// only the empty membership a state machine reports before any applies (snapshot metadata).
    fn membership(&mut self, in_entry: bool) -> Result<Membership<NodeId, EmptyNode>, DecodeError> {
        let config_count = self.count(4)?;
        if config_count > MEMBERSHIP_CONFIGS_MAX || (in_entry && config_count == 0) {
            return Err(malformed(self.what, format!("{config_count} voter sets")));
        }
        let mut configs = Vec::with_capacity(config_count);
        for _ in 0..config_count {
            let set = self.node_ids()?;
            // openraft never commits an empty voter set; a quorum of nobody is meaningless.
            if set.is_empty() {
                return Err(malformed(self.what, "an empty voter set"));
            }
            configs.push(set);
        }
        let nodes: BTreeMap<NodeId, EmptyNode> = self.node_ids()?.into_iter().map(|id| (id, EmptyNode {})).collect();
        // `Membership::new` would quietly fill in a voter missing from the node list; the encoder
        // always lists every voter, so a missing one means the bytes are not ours.
        if configs.iter().flatten().any(|voter| !nodes.contains_key(voter)) {
            return Err(malformed(self.what, "a voter is missing from the node list"));
        }
        Ok(Membership::new(configs, nodes))
    }

    pub(crate) fn stored_membership(&mut self) -> Result<StoredMembership<NodeId, EmptyNode>, DecodeError> {
        let log_id = self.option_log_id()?;
        let membership = self.membership(false)?;
        Ok(StoredMembership::new(log_id, membership))
    }

    pub(crate) fn entry(&mut self) -> Result<Entry<TypeConfig>, DecodeError> {
        let log_id = self.log_id()?;
        let payload = match self.u8()? {
            0 => EntryPayload::Blank,
            1 => {
                let count = self.count(4)?;
                let mut commands = Vec::with_capacity(count);
                for _ in 0..count {
                    commands.push(self.byte_string()?.to_vec());
                }
                EntryPayload::Normal(Batch(commands))
            }
            2 => EntryPayload::Membership(self.membership(true)?),
            other => return Err(malformed(self.what, format!("entry payload kind {other}"))),
        };
        Ok(Entry { log_id, payload })
    }

    pub(crate) fn snapshot_meta(&mut self) -> Result<SnapshotMeta<NodeId, EmptyNode>, DecodeError> {
        let last_log_id = self.option_log_id()?;
        let last_membership = self.stored_membership()?;
        let snapshot_id = self.string()?;
        Ok(SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id,
        })
    }
}

pub(crate) fn put_u8(out: &mut Vec<u8>, value: u8) {
    out.push(value);
}

pub(crate) use specie_codec::{put_u32, put_u64};

/// Lengths and counts are `u32` on the wire; callers bound their inputs far below that
/// (`ReplicaConfig` limits), so overflowing it is a broken invariant, not bad input.
fn put_len(out: &mut Vec<u8>, len: usize) {
    put_u32(
        out,
        u32::try_from(len).expect("length fits in u32: inputs are bounded by the config"),
    );
}

pub(crate) fn put_byte_string(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

pub(crate) fn put_log_id(out: &mut Vec<u8>, log_id: &LogId<NodeId>) {
    put_u64(out, log_id.leader_id.term);
    put_u64(out, log_id.leader_id.node_id);
    put_u64(out, log_id.index);
}

pub(crate) fn put_option_log_id(out: &mut Vec<u8>, log_id: &Option<LogId<NodeId>>) {
    match log_id {
        None => put_u8(out, 0),
        Some(log_id) => {
            put_u8(out, 1);
            put_log_id(out, log_id);
        }
    }
}

pub(crate) fn put_vote(out: &mut Vec<u8>, vote: &Vote<NodeId>) {
    put_u64(out, vote.leader_id.term);
    put_u64(out, vote.leader_id.node_id);
    put_u8(out, u8::from(vote.committed));
}

fn put_membership(out: &mut Vec<u8>, membership: &Membership<NodeId, EmptyNode>) {
    let configs = membership.get_joint_config();
    put_len(out, configs.len());
    for config in configs {
        put_len(out, config.len());
        for voter in config {
            put_u64(out, *voter);
        }
    }
    let nodes: Vec<NodeId> = membership.nodes().map(|(id, _)| *id).collect();
    put_len(out, nodes.len());
    for id in nodes {
        put_u64(out, id);
    }
}

pub(crate) fn put_stored_membership(out: &mut Vec<u8>, membership: &StoredMembership<NodeId, EmptyNode>) {
    put_option_log_id(out, membership.log_id());
    put_membership(out, membership.membership());
}

pub(crate) fn put_entry(out: &mut Vec<u8>, entry: &Entry<TypeConfig>) {
    put_log_id(out, &entry.log_id);
    match &entry.payload {
        EntryPayload::Blank => put_u8(out, 0),
        EntryPayload::Normal(batch) => {
            put_u8(out, 1);
            put_len(out, batch.0.len());
            for command in &batch.0 {
                put_byte_string(out, command);
            }
        }
        EntryPayload::Membership(membership) => {
            put_u8(out, 2);
            put_membership(out, membership);
        }
    }
}

pub(crate) fn put_snapshot_meta(out: &mut Vec<u8>, meta: &SnapshotMeta<NodeId, EmptyNode>) {
    put_option_log_id(out, &meta.last_log_id);
    put_stored_membership(out, &meta.last_membership);
    put_byte_string(out, meta.snapshot_id.as_bytes());
}

// ---- Raft RPCs -------------------------------------------------------------------------------

const REQUEST_APPEND_ENTRIES: u8 = 1;
const REQUEST_VOTE: u8 = 2;
const REQUEST_INSTALL_SNAPSHOT: u8 = 3;

/// One Raft RPC, as sent from a leader or candidate to a peer.
pub(crate) enum RaftRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<NodeId>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
}

pub(crate) fn encode_request(request: &RaftRequest) -> Vec<u8> {
    let mut out = Vec::new();
    match request {
        RaftRequest::AppendEntries(rpc) => {
            put_u8(&mut out, REQUEST_APPEND_ENTRIES);
            put_vote(&mut out, &rpc.vote);
            put_option_log_id(&mut out, &rpc.prev_log_id);
            put_option_log_id(&mut out, &rpc.leader_commit);
            put_len(&mut out, rpc.entries.len());
            for entry in &rpc.entries {
                put_entry(&mut out, entry);
            }
        }
        RaftRequest::Vote(rpc) => {
            put_u8(&mut out, REQUEST_VOTE);
            put_vote(&mut out, &rpc.vote);
            put_option_log_id(&mut out, &rpc.last_log_id);
        }
        RaftRequest::InstallSnapshot(rpc) => {
            put_u8(&mut out, REQUEST_INSTALL_SNAPSHOT);
            put_vote(&mut out, &rpc.vote);
            put_snapshot_meta(&mut out, &rpc.meta);
            put_u64(&mut out, rpc.offset);
            put_byte_string(&mut out, &rpc.data);
            put_u8(&mut out, u8::from(rpc.done));
        }
    }
    out
}

pub(crate) fn decode_request(bytes: &[u8]) -> Result<RaftRequest, DecodeError> {
    let mut r = Reader::new(bytes, "raft request");
    let request = match r.u8()? {
        REQUEST_APPEND_ENTRIES => {
            let vote = r.vote()?;
            let prev_log_id = r.option_log_id()?;
            let leader_commit = r.option_log_id()?;
            // An entry is at least a log id and a payload kind.
            let count = r.count(25)?;
            let mut entries: Vec<Entry<TypeConfig>> = Vec::with_capacity(count);
            let mut previous = prev_log_id;
            for _ in 0..count {
                let entry = r.entry()?;
                check_follows(previous.as_ref(), &entry.log_id, &vote)?;
                previous = Some(entry.log_id);
                entries.push(entry);
            }
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote,
                prev_log_id,
                entries,
                leader_commit,
            })
        }
        REQUEST_VOTE => {
            let vote = r.vote()?;
            let last_log_id = r.option_log_id()?;
            RaftRequest::Vote(VoteRequest { vote, last_log_id })
        }
        REQUEST_INSTALL_SNAPSHOT => {
            let vote = r.vote()?;
            let meta = r.snapshot_meta()?;
            let offset = r.u64()?;
            let data = r.byte_string()?;
            if u64::try_from(data.len())
                .ok()
                .and_then(|len| offset.checked_add(len))
                .is_none()
            {
                return Err(malformed("raft request", "snapshot chunk ends beyond u64::MAX"));
            }
            let data = data.to_vec();
            let done = r.bool()?;
            RaftRequest::InstallSnapshot(InstallSnapshotRequest {
                vote,
                meta,
                offset,
                data,
                done,
            })
        }
        other => return Err(malformed("raft request", format!("request kind {other}"))),
    };
    r.finish()?;
    Ok(request)
}

/// An append-entries entry must come right after the one before it (or `prev_log_id`): the next
/// index, a leader no older, and no newer than the leader sending it. openraft assumes all three.
fn check_follows(
    previous: Option<&LogId<NodeId>>,
    log_id: &LogId<NodeId>,
    vote: &Vote<NodeId>,
) -> Result<(), DecodeError> {
    let next_index = previous.map_or(Some(0), |previous| previous.index.checked_add(1));
    if next_index != Some(log_id.index) {
        return Err(malformed(
            "raft request",
            format!("entry {} does not follow {previous:?}", log_id.index),
        ));
    }
    if previous.is_some_and(|previous| previous.leader_id > log_id.leader_id) {
        return Err(malformed(
            "raft request",
            format!("entry {} goes back to an older leader", log_id.index),
        ));
    }
    if log_id.leader_id.term > vote.leader_id.term {
        return Err(malformed(
            "raft request",
            format!("entry {} is from a term after the sender's", log_id.index),
        ));
    }
    Ok(())
}

const RESPONSE_OK: u8 = 0;
const RESPONSE_REMOTE_STOPPED: u8 = 1;
const RESPONSE_SNAPSHOT_MISMATCH: u8 = 2;
const RESPONSE_MALFORMED_REQUEST: u8 = 3;

/// A peer's answer to one [`RaftRequest`].
#[derive(Debug)]
pub(crate) enum RaftResponse {
    AppendEntries(AppendEntriesResponse<NodeId>),
    Vote(VoteResponse<NodeId>),
    InstallSnapshot(InstallSnapshotResponse<NodeId>),
    /// The peer's Raft has stopped (shut down or failed): as good as unreachable.
    RemoteStopped,
    /// The peer lost track of the snapshot stream; the sender restarts it from offset 0.
    SnapshotMismatch(SnapshotMismatch),
    /// The peer could not decode the request: a bug or version skew, never retried blindly.
    MalformedRequest(String),
}

pub(crate) fn encode_response(response: &RaftResponse) -> Vec<u8> {
    let mut out = Vec::new();
    match response {
        RaftResponse::AppendEntries(resp) => {
            put_u8(&mut out, RESPONSE_OK);
            match resp {
                AppendEntriesResponse::Success => put_u8(&mut out, 0),
                AppendEntriesResponse::PartialSuccess(matching) => {
                    put_u8(&mut out, 1);
                    put_option_log_id(&mut out, matching);
                }
                AppendEntriesResponse::Conflict => put_u8(&mut out, 2),
                AppendEntriesResponse::HigherVote(vote) => {
                    put_u8(&mut out, 3);
                    put_vote(&mut out, vote);
                }
            }
        }
        RaftResponse::Vote(resp) => {
            put_u8(&mut out, RESPONSE_OK);
            put_vote(&mut out, &resp.vote);
            put_u8(&mut out, u8::from(resp.vote_granted));
            put_option_log_id(&mut out, &resp.last_log_id);
        }
        RaftResponse::InstallSnapshot(resp) => {
            put_u8(&mut out, RESPONSE_OK);
            put_vote(&mut out, &resp.vote);
        }
        RaftResponse::RemoteStopped => put_u8(&mut out, RESPONSE_REMOTE_STOPPED),
        RaftResponse::SnapshotMismatch(mismatch) => {
            put_u8(&mut out, RESPONSE_SNAPSHOT_MISMATCH);
            for segment in [&mismatch.expect, &mismatch.got] {
                put_byte_string(&mut out, segment.id.as_bytes());
                put_u64(&mut out, segment.offset);
            }
        }
        RaftResponse::MalformedRequest(reason) => {
            put_u8(&mut out, RESPONSE_MALFORMED_REQUEST);
            put_byte_string(&mut out, reason.as_bytes());
        }
    }
    out
}

/// The response kinds a request can get back, so the bytes are read as the right type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestKind {
    AppendEntries,
    Vote,
    InstallSnapshot,
}

pub(crate) fn decode_response(kind: RequestKind, bytes: &[u8]) -> Result<RaftResponse, DecodeError> {
    let mut r = Reader::new(bytes, "raft response");
    let response = match r.u8()? {
        RESPONSE_OK => match kind {
            RequestKind::AppendEntries => RaftResponse::AppendEntries(match r.u8()? {
                0 => AppendEntriesResponse::Success,
                1 => AppendEntriesResponse::PartialSuccess(r.option_log_id()?),
                2 => AppendEntriesResponse::Conflict,
                3 => AppendEntriesResponse::HigherVote(r.vote()?),
                other => return Err(malformed("raft response", format!("append-entries outcome {other}"))),
            }),
            RequestKind::Vote => RaftResponse::Vote(VoteResponse {
                vote: r.vote()?,
                vote_granted: r.bool()?,
                last_log_id: r.option_log_id()?,
            }),
            RequestKind::InstallSnapshot => RaftResponse::InstallSnapshot(InstallSnapshotResponse { vote: r.vote()? }),
        },
        RESPONSE_REMOTE_STOPPED => RaftResponse::RemoteStopped,
        RESPONSE_SNAPSHOT_MISMATCH => {
            let mut segment = || -> Result<SnapshotSegmentId, DecodeError> {
                let id = r.string()?;
                let offset = r.u64()?;
                Ok(SnapshotSegmentId { id, offset })
            };
            let expect = segment()?;
            let got = segment()?;
            RaftResponse::SnapshotMismatch(SnapshotMismatch { expect, got })
        }
        RESPONSE_MALFORMED_REQUEST => RaftResponse::MalformedRequest(r.string()?),
        other => return Err(malformed("raft response", format!("response kind {other}"))),
    };
    r.finish()?;
    Ok(response)
}

/// Maps the errors a local `Raft` returns for an install-snapshot request onto the response.
pub(crate) fn install_snapshot_error_response(error: InstallSnapshotError) -> RaftResponse {
    match error {
        InstallSnapshotError::SnapshotMismatch(mismatch) => RaftResponse::SnapshotMismatch(mismatch),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn membership(voters: &[u64]) -> Membership<NodeId, EmptyNode> {
        Membership::new(vec![voters.iter().copied().collect()], ())
    }

    fn entries() -> Vec<Entry<TypeConfig>> {
        let id = |term, node, index| LogId::new(CommittedLeaderId::new(term, node), index);
        vec![
            Entry {
                log_id: id(0, 0, 0),
                payload: EntryPayload::Membership(membership(&[1, 2, 3])),
            },
            Entry {
                log_id: id(1, 2, 1),
                payload: EntryPayload::Blank,
            },
            Entry {
                log_id: id(1, 2, 2),
                payload: EntryPayload::Normal(Batch(vec![b"a".to_vec(), Vec::new(), vec![7; 300]])),
            },
            Entry {
                log_id: id(2, 3, 3),
                payload: EntryPayload::Membership(Membership::new(
                    vec![[1, 2, 3].into(), [2, 3, 4].into()],
                    BTreeSet::from([1, 2, 3, 4, 5]),
                )),
            },
        ]
    }

    #[test]
    fn entries_round_trip() {
        for entry in entries() {
            let mut bytes = Vec::new();
            put_entry(&mut bytes, &entry);
            let mut r = Reader::new(&bytes, "entry");
            let decoded = r.entry().expect("decodes");
            r.finish().expect("no trailing bytes");
            assert_eq!(decoded, entry);
        }
    }

    fn requests() -> Vec<RaftRequest> {
        vec![
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: None,
                entries: entries(),
                leader_commit: Some(LogId::new(CommittedLeaderId::new(1, 2), 2)),
            }),
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
                entries: vec![Entry {
                    log_id: LogId::new(CommittedLeaderId::new(3, 1), 10),
                    payload: EntryPayload::Normal(Batch(vec![b"x".to_vec()])),
                }],
                leader_commit: None,
            }),
            RaftRequest::Vote(VoteRequest {
                vote: Vote::new(4, 2),
                last_log_id: None,
            }),
            RaftRequest::InstallSnapshot(InstallSnapshotRequest {
                vote: Vote::new_committed(3, 1),
                meta: SnapshotMeta {
                    last_log_id: Some(LogId::new(CommittedLeaderId::new(3, 1), 40)),
                    last_membership: StoredMembership::new(None, membership(&[1, 2])),
                    snapshot_id: "3-1-40".into(),
                },
                offset: 17,
                data: vec![1, 2, 3],
                done: true,
            }),
            RaftRequest::InstallSnapshot(InstallSnapshotRequest {
                vote: Vote::new(0, 0),
                meta: SnapshotMeta::default(),
                offset: 0,
                data: vec![],
                done: false,
            }),
        ]
    }

    #[test]
    fn requests_round_trip_and_truncations_fail_cleanly() {
        for request in &requests() {
            let bytes = encode_request(request);
            let decoded = decode_request(&bytes).expect("decodes");
            assert_eq!(
                encode_request(&decoded),
                bytes,
                "canonical: re-encoding gives the same bytes"
            );
            for cut in 0..bytes.len() {
                assert!(decode_request(&bytes[..cut]).is_err(), "prefix of {cut} bytes refused");
            }
        }
    }

    fn append(prev_log_id: Option<LogId<NodeId>>, ids: &[(u64, u64, u64)]) -> Vec<u8> {
        let entries = ids
            .iter()
            .map(|&(term, node, index)| Entry {
                log_id: LogId::new(CommittedLeaderId::new(term, node), index),
                payload: EntryPayload::Blank,
            })
            .collect();
        encode_request(&RaftRequest::AppendEntries(AppendEntriesRequest {
            vote: Vote::new_committed(5, 1),
            prev_log_id,
            entries,
            leader_commit: None,
        }))
    }

    fn refused(bytes: &[u8], why: &str) {
        let err = decode_request(bytes).err().unwrap_or_else(|| panic!("accepted: {why}"));
        assert!(err.to_string().contains("raft request"), "{why}: {err}");
    }

    #[test]
    fn append_entries_that_do_not_follow_on_are_refused() {
        let prev = |term, node, index| Some(LogId::new(CommittedLeaderId::new(term, node), index));
        assert!(decode_request(&append(None, &[(1, 1, 0), (1, 1, 1), (2, 1, 2)])).is_ok());
        assert!(decode_request(&append(prev(1, 1, 7), &[(1, 1, 8), (5, 1, 9)])).is_ok());
        refused(&append(None, &[(1, 1, 1)]), "first entry after no prev_log_id is not 0");
        refused(
            &append(prev(1, 1, 7), &[(1, 1, 7)]),
            "first entry repeats prev_log_id's index",
        );
        refused(&append(prev(1, 1, 7), &[(1, 1, 9)]), "a gap after prev_log_id");
        refused(&append(None, &[(1, 1, 0), (1, 1, 2)]), "a gap between entries");
        refused(&append(None, &[(1, 1, 0), (1, 1, 0)]), "an index repeated");
        refused(
            &append(None, &[(2, 1, 0), (1, 1, 1)]),
            "an older term after a newer one",
        );
        refused(
            &append(None, &[(2, 2, 0), (2, 1, 1)]),
            "an older leader of the same term",
        );
        refused(&append(prev(3, 1, 7), &[(2, 1, 8)]), "an entry older than prev_log_id");
        refused(
            &append(None, &[(6, 1, 0)]),
            "an entry from a term after the sender's vote",
        );
        let last = LOG_INDEX_MAX;
        refused(
            &append(prev(1, 1, last), &[(1, 1, last + 1)]),
            "an index beyond the limit",
        );
        refused(&append(prev(1, 1, last + 1), &[]), "prev_log_id beyond the limit");
    }

    #[test]
    fn terms_and_indexes_openraft_would_overflow_on_are_refused() {
        let vote = |term| {
            encode_request(&RaftRequest::Vote(VoteRequest {
                vote: Vote::new(term, 1),
                last_log_id: None,
            }))
        };
        assert!(decode_request(&vote(TERM_MAX)).is_ok());
        refused(&vote(TERM_MAX + 1), "term beyond the limit");
        refused(&vote(u64::MAX), "term u64::MAX");
        let last_log = |index| {
            encode_request(&RaftRequest::Vote(VoteRequest {
                vote: Vote::new(1, 1),
                last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
            }))
        };
        assert!(decode_request(&last_log(LOG_INDEX_MAX)).is_ok());
        refused(&last_log(u64::MAX), "last log index u64::MAX");
        let higher = encode_response(&RaftResponse::AppendEntries(AppendEntriesResponse::HigherVote(
            Vote::new(u64::MAX, 1),
        )));
        assert!(decode_response(RequestKind::AppendEntries, &higher).is_err());
    }

    #[test]
    fn memberships_openraft_cannot_use_are_refused() {
        let with_membership = |membership: Membership<NodeId, EmptyNode>| {
            encode_request(&RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(1, 1),
                prev_log_id: None,
                entries: vec![Entry {
                    log_id: LogId::new(CommittedLeaderId::new(1, 1), 0),
                    payload: EntryPayload::Membership(membership),
                }],
                leader_commit: None,
            }))
        };
        assert!(decode_request(&with_membership(membership(&[1, 2, 3]))).is_ok());
        refused(
            &with_membership(Membership::default()),
            "a membership entry with no voter set",
        );
        refused(
            &with_membership(Membership::new(vec![BTreeSet::new()], ())),
            "an empty voter set",
        );
        refused(
            &with_membership(Membership::new(vec![[1].into(), BTreeSet::new()], ())),
            "an empty voter set in a joint configuration",
        );
        let many: Vec<u64> = (0..=MEMBERSHIP_NODES_MAX as u64).collect();
        refused(&with_membership(membership(&many)), "more voters than the limit");
        // Voter ids repeated or out of order: patch the first voter of a valid encoding (the
        // voter sets come before the node list).
        for (patch, why) in [(0xbbbb_u64, "a voter id repeated"), (0xcccc, "voter ids out of order")] {
            let mut bytes = with_membership(membership(&[0xaaaa, 0xbbbb]));
            let first_voter = bytes.windows(8).position(|w| w == 0xaaaa_u64.to_le_bytes()).unwrap();
            bytes[first_voter..first_voter + 8].copy_from_slice(&patch.to_le_bytes());
            refused(&bytes, why);
        }
        // The empty membership is what snapshot metadata carries before anything applied.
        let snapshot = encode_request(&RaftRequest::InstallSnapshot(InstallSnapshotRequest {
            vote: Vote::new_committed(1, 1),
            meta: SnapshotMeta::default(),
            offset: 0,
            data: vec![],
            done: true,
        }));
        assert!(decode_request(&snapshot).is_ok());
    }

    #[test]
    fn snapshot_chunks_ending_beyond_u64_max_are_refused() {
        let chunk = |offset, data: Vec<u8>| {
            encode_request(&RaftRequest::InstallSnapshot(InstallSnapshotRequest {
                vote: Vote::new_committed(1, 1),
                meta: SnapshotMeta::default(),
                offset,
                data,
                done: false,
            }))
        };
        assert!(decode_request(&chunk(u64::MAX, vec![])).is_ok());
        assert!(decode_request(&chunk(u64::MAX - 2, vec![1, 2])).is_ok());
        refused(&chunk(u64::MAX - 2, vec![1, 2, 3]), "a chunk ending beyond u64::MAX");
    }

    /// Arbitrary bytes, and valid encodings with bytes overwritten, cut or extended, given to
    /// every decoder a peer's bytes reach: errors, never a panic; and whatever decodes is
    /// canonical. A seeded generator (no proptest here), so a failure replays.
    #[test]
    fn arbitrary_and_mutated_bytes_never_panic() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};

        let mut rng = StdRng::seed_from_u64(0x5eed);
        let mut valid: Vec<Vec<u8>> = requests().iter().map(encode_request).collect();
        valid.extend(responses().iter().map(|(_, response)| encode_response(response)));
        for entry in entries() {
            let mut bytes = Vec::new();
            put_entry(&mut bytes, &entry);
            valid.push(bytes);
        }
        let kinds = [
            RequestKind::AppendEntries,
            RequestKind::Vote,
            RequestKind::InstallSnapshot,
        ];
        for round in 0..20_000 {
            let mut bytes = if round % 4 == 0 {
                let len = rng.gen_range(0..120);
                (0..len).map(|_| rng.gen::<u8>()).collect()
            } else {
                valid[rng.gen_range(0..valid.len())].clone()
            };
            if !bytes.is_empty() {
                for _ in 0..rng.gen_range(1..4) {
                    let at = rng.gen_range(0..bytes.len());
                    // Small values and 0xff most often: they make counts, kinds and flags plausible.
                    bytes[at] = match rng.gen_range(0..3) {
                        0 => rng.gen_range(0..4),
                        1 => 0xff,
                        _ => rng.gen(),
                    };
                }
            }
            match rng.gen_range(0..4) {
                0 => bytes.truncate(rng.gen_range(0..=bytes.len())),
                1 => bytes.push(rng.gen()),
                _ => {}
            }
            if let Ok(request) = decode_request(&bytes) {
                assert_eq!(encode_request(&request), bytes, "canonical request");
            }
            for kind in kinds {
                if let Ok(response) = decode_response(kind, &bytes) {
                    assert_eq!(encode_response(&response), bytes, "canonical response");
                }
            }
            let mut r = Reader::new(&bytes, "entry");
            let _ = r.entry();
            let mut r = Reader::new(&bytes, "snapshot metadata");
            let _ = r.snapshot_meta();
            let mut r = Reader::new(&bytes, "vote");
            let _ = r.vote();
        }
    }

    #[test]
    fn huge_counts_are_refused_without_allocating() {
        let mut bytes = vec![REQUEST_APPEND_ENTRIES];
        put_vote(&mut bytes, &Vote::new(1, 1));
        put_option_log_id(&mut bytes, &None);
        put_option_log_id(&mut bytes, &None);
        put_u32(&mut bytes, u32::MAX);
        let err = decode_request(&bytes).err().expect("refused");
        assert!(matches!(err, DecodeError::CountExceedsInput { .. }), "{err}");
    }

    fn responses() -> Vec<(RequestKind, RaftResponse)> {
        vec![
            (
                RequestKind::AppendEntries,
                RaftResponse::AppendEntries(AppendEntriesResponse::Success),
            ),
            (
                RequestKind::AppendEntries,
                RaftResponse::AppendEntries(AppendEntriesResponse::PartialSuccess(Some(LogId::new(
                    CommittedLeaderId::new(1, 1),
                    5,
                )))),
            ),
            (
                RequestKind::AppendEntries,
                RaftResponse::AppendEntries(AppendEntriesResponse::Conflict),
            ),
            (
                RequestKind::AppendEntries,
                RaftResponse::AppendEntries(AppendEntriesResponse::HigherVote(Vote::new(9, 3))),
            ),
            (
                RequestKind::Vote,
                RaftResponse::Vote(VoteResponse {
                    vote: Vote::new(2, 2),
                    vote_granted: true,
                    last_log_id: None,
                }),
            ),
            (
                RequestKind::InstallSnapshot,
                RaftResponse::InstallSnapshot(InstallSnapshotResponse {
                    vote: Vote::new_committed(2, 2),
                }),
            ),
            (RequestKind::Vote, RaftResponse::RemoteStopped),
            (
                RequestKind::InstallSnapshot,
                RaftResponse::SnapshotMismatch(SnapshotMismatch {
                    expect: SnapshotSegmentId {
                        id: "a".into(),
                        offset: 0,
                    },
                    got: SnapshotSegmentId {
                        id: "a".into(),
                        offset: 10,
                    },
                }),
            ),
            (RequestKind::Vote, RaftResponse::MalformedRequest("bad".into())),
        ]
    }

    #[test]
    fn responses_round_trip() {
        for (kind, response) in responses() {
            let bytes = encode_response(&response);
            let decoded = decode_response(kind, &bytes).expect("decodes");
            assert_eq!(encode_response(&decoded), bytes);
        }
    }
}
