//! The one binary encoding of everything this crate writes to disk or hands to a transport: log
//! entries, votes, snapshot metadata and the Raft RPCs. All integers are little-endian; variable
//! parts carry a `u32` length or count. Decoding only slices what it was given: every length and
//! count is checked against the bytes actually left before anything is allocated, so a hostile or
//! corrupt input costs at most its own size.

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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {what}: {reason}")]
pub struct DecodeError {
    pub what: &'static str,
    pub reason: String,
}

fn malformed(what: &'static str, reason: impl Into<String>) -> DecodeError {
    DecodeError {
        what,
        reason: reason.into(),
    }
}

pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        Reader { bytes, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.bytes.len() < n {
            return Err(malformed(
                self.what,
                format!("needs {n} more bytes, {} left", self.bytes.len()),
            ));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(malformed(self.what, format!("bool byte {other}"))),
        }
    }

    /// A count of items that each take at least `item_bytes_min` bytes: refused if the input
    /// cannot possibly hold that many, so no count read from the input sizes an allocation alone.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, DecodeError> {
        let count = self.u32()? as usize;
        if count.saturating_mul(item_bytes_min.max(1)) > self.bytes.len() {
            return Err(malformed(
                self.what,
                format!("count {count} exceeds the {} bytes left", self.bytes.len()),
            ));
        }
        Ok(count)
    }

    pub(crate) fn byte_string(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.byte_string()?;
        String::from_utf8(bytes.to_vec()).map_err(|_| malformed(self.what, "string is not UTF-8"))
    }

    pub(crate) fn finish(self) -> Result<(), DecodeError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(malformed(self.what, format!("{} trailing bytes", self.bytes.len())))
        }
    }

    pub(crate) fn log_id(&mut self) -> Result<LogId<NodeId>, DecodeError> {
        let term = self.u64()?;
        let node_id = self.u64()?;
        let index = self.u64()?;
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
        let term = self.u64()?;
        let node_id = self.u64()?;
        let committed = self.bool()?;
        Ok(if committed {
            Vote::new_committed(term, node_id)
        } else {
            Vote::new(term, node_id)
        })
    }

    fn membership(&mut self) -> Result<Membership<NodeId, EmptyNode>, DecodeError> {
        let config_count = self.count(4)?;
        // Zero voter sets is the empty membership a state machine reports before any applies.
        if config_count > MEMBERSHIP_CONFIGS_MAX {
            return Err(malformed(self.what, format!("{config_count} voter sets")));
        }
        let mut configs = Vec::with_capacity(config_count);
        for _ in 0..config_count {
            let voters = self.count(8)?;
            let mut set = BTreeSet::new();
            for _ in 0..voters {
                set.insert(self.u64()?);
            }
            configs.push(set);
        }
        let node_count = self.count(8)?;
        let mut nodes = BTreeMap::new();
        for _ in 0..node_count {
            nodes.insert(self.u64()?, EmptyNode {});
        }
        // `Membership::new` would quietly fill in a voter missing from the node list; the encoder
        // always lists every voter, so a missing one means the bytes are not ours.
        if configs.iter().flatten().any(|voter| !nodes.contains_key(voter)) {
            return Err(malformed(self.what, "a voter is missing from the node list"));
        }
        Ok(Membership::new(configs, nodes))
    }

    pub(crate) fn stored_membership(&mut self) -> Result<StoredMembership<NodeId, EmptyNode>, DecodeError> {
        let log_id = self.option_log_id()?;
        let membership = self.membership()?;
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
            2 => EntryPayload::Membership(self.membership()?),
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

pub(crate) fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

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
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                entries.push(r.entry()?);
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
            let data = r.byte_string()?.to_vec();
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

    #[test]
    fn requests_round_trip_and_truncations_fail_cleanly() {
        let requests = [
            RaftRequest::AppendEntries(AppendEntriesRequest {
                vote: Vote::new_committed(3, 1),
                prev_log_id: Some(LogId::new(CommittedLeaderId::new(2, 1), 9)),
                entries: entries(),
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
        ];
        for request in &requests {
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

    #[test]
    fn huge_counts_are_refused_without_allocating() {
        let mut bytes = vec![REQUEST_APPEND_ENTRIES];
        put_vote(&mut bytes, &Vote::new(1, 1));
        put_option_log_id(&mut bytes, &None);
        put_option_log_id(&mut bytes, &None);
        put_u32(&mut bytes, u32::MAX);
        let err = decode_request(&bytes).err().expect("refused");
        assert!(err.reason.contains("count"), "{err}");
    }

    #[test]
    fn responses_round_trip() {
        let cases = [
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
        ];
        for (kind, response) in cases {
            let bytes = encode_response(&response);
            let decoded = decode_response(kind, &bytes).expect("decodes");
            assert_eq!(encode_response(&decoded), bytes);
        }
    }
}
